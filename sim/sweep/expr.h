#pragma once
// The filter expressions of a sweep (`require` in configs/schema/sweep.proto):
// C-like arithmetic, comparisons and logic over numbers, "strings" and field
// paths of the resolved experiment. Parsed once, evaluated per point.

#include <google/protobuf/message.h>

#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace tpsim::sweep {

// A value: a number (bools are 1/0) or a string.
using Value = std::variant<double, std::string>;

// Reads the scalar field at `path` ("mapping.tp", "chip.memory[0].latency_ns")
// of `msg`: numbers and bools as double, strings and enums as string (enum
// name). Throws std::invalid_argument naming the problem for an unknown field,
// a missing index or a message-valued path.
Value ReadField(const google::protobuf::Message& msg, const std::string& path);

class Expr {
 public:
  struct Node;
  // Throws std::invalid_argument("col N: ...") on a syntax error.
  static Expr Parse(const std::string& text);
  // Throws std::invalid_argument for an unknown field or a type mismatch
  // (e.g. "a" < 3); division or remainder by zero evaluates to false-y NaN
  // (a point whose filter cannot be computed does not pass), and sets `by_zero` where given.
  Value Eval(const google::protobuf::Message& msg, bool* by_zero = nullptr) const;
  // True when Eval gives a non-zero number (NaN is false; a string is an error). `undefined`,
  // where given, is set when a division or remainder by zero was met (its NaN compares false).
  bool Holds(const google::protobuf::Message& msg, bool* undefined = nullptr) const;
  // Field paths the expression reads, in order of appearance.
  std::vector<std::string> Fields() const;

 private:
  std::shared_ptr<const Node> root_;
};

}  // namespace tpsim::sweep
