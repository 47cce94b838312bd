#include "mapping/program_types.h"

#include <array>
#include <utility>

namespace tpsim::mapping {
namespace {

// One name table per enum, in enumerator order.
constexpr std::array<const char*, 4> kPhaseNames = {"prefill", "decode", "mixed", "kv_transfer"};
constexpr std::array<const char*, 6> kCollectiveKindNames = {"all_reduce", "reduce_scatter", "all_gather",
                                                             "all_to_all", "rotate",         "p2p"};
constexpr std::array<const char*, 5> kWeightsNames = {"", "sram", "dram (streamed each use)",
                                                      "hbm (read by each GEMM)",
                                                      "sram (the prefill's layout streamed each use)"};
constexpr std::array<const char*, 4> kKvNames = {"", "sram", "dram", "hbm (read by attention)"};

template <class E, size_t N>
const char* Name(const std::array<const char*, N>& names, E e) {
  const auto i = static_cast<size_t>(e);
  return i < N ? names[i] : "unknown";
}

template <class E, size_t N>
std::optional<E> Parse(const std::array<const char*, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<E>(i);
  return std::nullopt;
}

}  // namespace

const char* ToString(Phase p) { return Name(kPhaseNames, p); }
std::optional<Phase> ParsePhase(std::string_view s) { return Parse<Phase>(kPhaseNames, s); }
const char* ToString(CollectiveKind k) { return Name(kCollectiveKindNames, k); }
std::optional<CollectiveKind> ParseCollectiveKind(std::string_view s) {
  return Parse<CollectiveKind>(kCollectiveKindNames, s);
}
const char* ToString(WeightsLocation w) { return Name(kWeightsNames, w); }
std::optional<WeightsLocation> ParseWeightsLocation(std::string_view s) {
  return Parse<WeightsLocation>(kWeightsNames, s);
}
const char* ToString(KvLocation k) { return Name(kKvNames, k); }
std::optional<KvLocation> ParseKvLocation(std::string_view s) { return Parse<KvLocation>(kKvNames, s); }

}  // namespace tpsim::mapping
