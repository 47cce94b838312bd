#pragma once
// A JSON value as an error message quotes it (header-only; the includer links nlohmann_json).
//
// nlohmann's dump() recurses once per level of nesting: an HF config.json key or a request
// trace's field holding a value nested 100,000 deep (a 200 KB file) overflowed the stack while
// the error message was built (SIGSEGV). A value nested deeper than kMaxQuotedDepth is named by
// its kind and depth instead, found without recursion; a long text is clipped.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpsim::config {

inline constexpr size_t kMaxQuotedDepth = 64;
inline constexpr size_t kMaxQuotedChars = 200;

inline std::string QuoteJson(const nlohmann::json& v) {
  if (v.is_structured()) {
    std::vector<std::pair<const nlohmann::json*, size_t>> stack{{&v, 1}};
    while (!stack.empty()) {
      const auto [node, depth] = stack.back();
      stack.pop_back();
      if (depth > kMaxQuotedDepth)
        return std::string(v.is_array() ? "an array" : "an object") + " nested more than " +
               std::to_string(kMaxQuotedDepth) + " levels deep";
      for (const auto& child : *node)
        if (child.is_structured()) stack.emplace_back(&child, depth + 1);
    }
  }
  std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxQuotedChars) text = text.substr(0, kMaxQuotedChars) + "...";
  return text;
}

}  // namespace tpsim::config
