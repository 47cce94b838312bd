#include "sim/sweep/expr.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "configs/files.h"

namespace tpsim::sweep {

namespace pb = google::protobuf;

struct Expr::Node {
  enum Kind { kNumber, kString, kField, kUnary, kBinary } kind;
  std::string op;  // operator, string literal or field path
  double number = 0;
  std::shared_ptr<const Node> a, b;
};

namespace {

using NodeP = std::shared_ptr<const Expr::Node>;

[[noreturn]] void Fail(size_t pos, const std::string& what) {
  throw std::invalid_argument("col " + std::to_string(pos + 1) + ": " + what);
}

// Bounds that keep parsing, evaluating and freeing an expression far from the
// end of any thread's stack, whatever the input: parentheses and unary operators
// nest at most kMaxNesting deep, and a tree has at most kMaxNodes nodes (so its
// depth, which evaluation recurses over, is at most that).
constexpr int kMaxNesting = 100;
constexpr size_t kMaxNodes = 1000;
constexpr size_t kMaxLength = size_t{1} << 20;

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  NodeP ParseAll() {
    if (s_.size() > kMaxLength) Fail(kMaxLength, "longer than " + std::to_string(kMaxLength) + " characters");
    NodeP n = Binary(0);
    Skip();
    if (p_ < s_.size()) Fail(p_, "unexpected '" + config::Clip(s_.substr(p_, 1), 1) + "'");
    return n;
  }

 private:
  // Binary operators by precedence level, loosest first.
  static const std::vector<std::vector<std::string>>& Levels() {
    static const std::vector<std::vector<std::string>> k = {
        {"||"}, {"&&"}, {"==", "!="}, {"<=", ">=", "<", ">"}, {"+", "-"}, {"*", "/", "%"}};
    return k;
  }

  void Skip() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }

  bool Eat(const std::string& tok) {
    Skip();
    if (s_.compare(p_, tok.size(), tok) != 0) return false;
    // "<" must not eat the first half of "<=", "!" not of "!=".
    if (tok.size() == 1 && p_ + 1 < s_.size() && s_[p_ + 1] == '=' &&
        std::string("<>!=").find(tok[0]) != std::string::npos) {
      return false;
    }
    p_ += tok.size();
    return true;
  }

  NodeP Binary(size_t level) {
    if (level == Levels().size()) return Unary();
    NodeP lhs = Binary(level + 1);
    for (;;) {
      bool found = false;
      for (const auto& op : Levels()[level]) {
        if (Eat(op)) {
          NodeP rhs = Binary(level + 1);
          lhs = Make(Expr::Node{Expr::Node::kBinary, op, 0, lhs, rhs});
          found = true;
          break;
        }
      }
      if (!found) return lhs;
    }
  }

  // Every node is made here, counted against kMaxNodes.
  NodeP Make(Expr::Node n) {
    if (++nodes_ > kMaxNodes)
      Fail(p_, "more than " + std::to_string(kMaxNodes) +
                   " operands and operators; split it into several requires");
    return std::make_shared<Expr::Node>(std::move(n));
  }

  // Entered once per unary operator and per parenthesis: the parser's recursion.
  struct Nest {
    Parser* p;
    explicit Nest(Parser* parser) : p(parser) {
      if (++p->depth_ > kMaxNesting)
        Fail(p->p_,
             "nested more than " + std::to_string(kMaxNesting) + " levels deep (parentheses, - and !)");
    }
    ~Nest() { --p->depth_; }
  };

  NodeP Unary() {
    Nest nest(this);
    if (Eat("-")) return Make(Expr::Node{Expr::Node::kUnary, "-", 0, Unary(), nullptr});
    if (Eat("!")) return Make(Expr::Node{Expr::Node::kUnary, "!", 0, Unary(), nullptr});
    return Primary();
  }

  NodeP Primary() {
    Skip();
    if (p_ >= s_.size()) Fail(p_, "expected a number, string, field or '('");
    size_t start = p_;
    char c = s_[p_];
    if (c == '(') {
      ++p_;
      NodeP n = Binary(0);
      if (!Eat(")")) Fail(p_, "expected ')'");
      return n;
    }
    if (c == '"') {
      std::string lit;
      ++p_;
      while (p_ < s_.size() && s_[p_] != '"') {
        if (s_[p_] == '\\' && p_ + 1 < s_.size()) ++p_;
        lit += s_[p_++];
      }
      if (p_ >= s_.size()) Fail(start, "unterminated string");
      ++p_;
      return Make(Expr::Node{Expr::Node::kString, lit, 0, nullptr, nullptr});
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      // Decimal only, and within a double: strtod read 0x10 as 16 and 1e999 as inf (whose
      // 1e999 - 1e999 is a NaN that filtered every point without a word).
      const char* b = s_.c_str() + p_;
      double v = 0;
      const auto [end, ec] = std::from_chars(b, s_.c_str() + s_.size(), v, std::chars_format::general);
      if (ec == std::errc::result_out_of_range) {
        size_t e = p_;
        while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '.' ||
                                 ((s_[e] == '-' || s_[e] == '+') && (s_[e - 1] == 'e' || s_[e - 1] == 'E'))))
          ++e;
        Fail(p_, "number " + s_.substr(p_, e - p_) + " is out of the range of a double");
      }
      if (ec != std::errc() || end == b) Fail(p_, "bad number");
      p_ += static_cast<size_t>(end - b);
      return Make(Expr::Node{Expr::Node::kNumber, "", v, nullptr, nullptr});
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) ||
                                std::string("_.[]").find(s_[p_]) != std::string::npos)) {
        ++p_;
      }
      return Make(Expr::Node{Expr::Node::kField, s_.substr(start, p_ - start), 0, nullptr, nullptr});
    }
    Fail(p_, "unexpected '" + config::Clip(std::string(1, c), 1) + "'");
  }

  const std::string& s_;
  size_t p_ = 0;
  int depth_ = 0;
  size_t nodes_ = 0;
};

double Num(const Value& v, const std::string& op) {
  if (const double* d = std::get_if<double>(&v)) return *d;
  throw std::invalid_argument("operator " + op + " needs numbers, got the string \"" +
                              std::get<std::string>(v) + "\"");
}

// `by_zero` is set where a division or remainder by zero is met (its NaN may be compared away).
Value EvalNode(const Expr::Node& n, const pb::Message& msg, bool* by_zero) {
  switch (n.kind) {
    case Expr::Node::kNumber:
      return n.number;
    case Expr::Node::kString:
      return n.op;
    case Expr::Node::kField:
      return ReadField(msg, n.op);
    case Expr::Node::kUnary: {
      double v = Num(EvalNode(*n.a, msg, by_zero), n.op);
      return n.op == "-" ? -v : (v == 0 ? 1.0 : 0.0);
    }
    case Expr::Node::kBinary:
      break;
  }
  const std::string& op = n.op;
  if (op == "&&" || op == "||") {
    double a = Num(EvalNode(*n.a, msg, by_zero), op);
    bool at = a != 0 && !std::isnan(a);
    if (op == "&&" && !at) return 0.0;
    if (op == "||" && at) return 1.0;
    double b = Num(EvalNode(*n.b, msg, by_zero), op);
    return (b != 0 && !std::isnan(b)) ? 1.0 : 0.0;
  }
  Value a = EvalNode(*n.a, msg, by_zero), b = EvalNode(*n.b, msg, by_zero);
  if (op == "==" || op == "!=") {
    if (a.index() != b.index())
      throw std::invalid_argument("operator " + op + " compares a number with a string");
    bool eq = a == b;
    return (op == "==") == eq ? 1.0 : 0.0;
  }
  double x = Num(a, op), y = Num(b, op);
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if ((op == "/" || op == "%") && y == 0) {
    *by_zero = true;
    return NAN;
  }
  if (op == "/") return x / y;
  if (op == "%") return std::fmod(x, y);
  if (op == "<") return x < y ? 1.0 : 0.0;
  if (op == "<=") return x <= y ? 1.0 : 0.0;
  if (op == ">") return x > y ? 1.0 : 0.0;
  return x >= y ? 1.0 : 0.0;  // ">="
}

void CollectFields(const Expr::Node* n, std::vector<std::string>* out) {
  if (!n) return;
  if (n->kind == Expr::Node::kField) out->push_back(n->op);
  CollectFields(n->a.get(), out);
  CollectFields(n->b.get(), out);
}

}  // namespace

Value ReadField(const pb::Message& msg, const std::string& path) {
  const pb::Message* cur = &msg;
  size_t pos = 0;
  std::string walked;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string item = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    int index = -1;
    size_t br = item.find('[');
    if (br != std::string::npos) {
      std::string idx = item.substr(br + 1, item.size() - br - 2);
      auto [ptr, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), index);
      if (item.back() != ']' || ec != std::errc() || ptr != idx.data() + idx.size() || index < 0) {
        throw std::invalid_argument(path + ": bad index in '" + item + "'");
      }
      item.resize(br);
    }
    walked += (walked.empty() ? "" : ".") + item;
    const pb::Descriptor* d = cur->GetDescriptor();
    const pb::Reflection* r = cur->GetReflection();
    const pb::FieldDescriptor* f = d->FindFieldByName(item);
    if (!f) throw std::invalid_argument(walked + ": unknown field of " + d->name());
    if (f->is_repeated() != (index >= 0)) {
      throw std::invalid_argument(
          walked + (f->is_repeated() ? ": repeated field needs an index" : ": field is not repeated"));
    }
    if (f->is_repeated() && index >= r->FieldSize(*cur, f)) {
      throw std::invalid_argument(walked + ": index " + std::to_string(index) + " out of range");
    }
    bool last = dot == std::string::npos;
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (last) throw std::invalid_argument(walked + ": is a message, not a scalar field");
      cur = f->is_repeated() ? &r->GetRepeatedMessage(*cur, f, index) : &r->GetMessage(*cur, f);
      pos = dot + 1;
      continue;
    }
    if (!last) throw std::invalid_argument(walked + ": is a scalar; it has no fields");
    bool rep = f->is_repeated();
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32:
        return static_cast<double>(rep ? r->GetRepeatedInt32(*cur, f, index) : r->GetInt32(*cur, f));
      case pb::FieldDescriptor::CPPTYPE_INT64:
        return static_cast<double>(rep ? r->GetRepeatedInt64(*cur, f, index) : r->GetInt64(*cur, f));
      case pb::FieldDescriptor::CPPTYPE_UINT32:
        return static_cast<double>(rep ? r->GetRepeatedUInt32(*cur, f, index) : r->GetUInt32(*cur, f));
      case pb::FieldDescriptor::CPPTYPE_UINT64:
        return static_cast<double>(rep ? r->GetRepeatedUInt64(*cur, f, index) : r->GetUInt64(*cur, f));
      case pb::FieldDescriptor::CPPTYPE_DOUBLE:
        return rep ? r->GetRepeatedDouble(*cur, f, index) : r->GetDouble(*cur, f);
      case pb::FieldDescriptor::CPPTYPE_FLOAT:
        return static_cast<double>(rep ? r->GetRepeatedFloat(*cur, f, index) : r->GetFloat(*cur, f));
      case pb::FieldDescriptor::CPPTYPE_BOOL:
        return (rep ? r->GetRepeatedBool(*cur, f, index) : r->GetBool(*cur, f)) ? 1.0 : 0.0;
      case pb::FieldDescriptor::CPPTYPE_ENUM:
        return (rep ? r->GetRepeatedEnum(*cur, f, index) : r->GetEnum(*cur, f))->name();
      case pb::FieldDescriptor::CPPTYPE_STRING:
        return rep ? r->GetRepeatedString(*cur, f, index) : r->GetString(*cur, f);
      default:
        throw std::invalid_argument(walked + ": unsupported field type");
    }
  }
}

Expr Expr::Parse(const std::string& text) {
  Expr e;
  e.root_ = Parser(text).ParseAll();
  return e;
}

Value Expr::Eval(const pb::Message& msg, bool* by_zero) const {
  bool met = false;
  Value v = EvalNode(*root_, msg, &met);
  if (by_zero) *by_zero = met;
  return v;
}

bool Expr::Holds(const pb::Message& msg, bool* undefined) const {
  bool by_zero = false;
  Value v = Eval(msg, &by_zero);
  if (!std::holds_alternative<double>(v))
    throw std::invalid_argument("a requirement must be true or false, not a string");
  double d = std::get<double>(v);
  if (undefined) *undefined = by_zero || std::isnan(d);
  return d != 0 && !std::isnan(d);
}

std::vector<std::string> Expr::Fields() const {
  std::vector<std::string> out;
  CollectFields(root_.get(), &out);
  return out;
}

}  // namespace tpsim::sweep
