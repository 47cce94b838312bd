#include "configs/load.h"

#include "configs/files.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

namespace tpsim::config {

namespace pb = google::protobuf;

std::string Diag::str() const {
  // One line whatever the input: every part clipped and its control bytes escaped.
  std::ostringstream os;
  os << Clip(where.file, 240) << ':' << where.line << ':' << where.col << ": " << Clip(field) << ": "
     << Clip(value) << ": " << Clip(rule, 1000);
  return os.str();
}

namespace {
std::string JoinDiags(const std::vector<Diag>& diags) {
  std::string s;
  for (const auto& d : diags) {
    if (!s.empty()) s += '\n';
    s += d.str();
  }
  return s;
}
}  // namespace

ConfigError::ConfigError(std::vector<Diag> diags)
    : std::runtime_error(JoinDiags(diags)), diags_(std::move(diags)) {}

void SourceMap::Merge(const std::string& prefix, const SourceMap& other, const Location& anchor) {
  if (prefix.empty()) {
    for (const auto& [path, loc] : other.locs_) locs_[path] = loc;
    return;
  }
  locs_[prefix] = anchor;
  for (const auto& [path, loc] : other.locs_) locs_[prefix + "." + path] = loc;
}

void SourceMap::SetAppending(const std::string& path, const Location& loc) {
  for (size_t end = path.find(']'); end != std::string::npos; end = path.find(']', end + 1)) {
    // The element, and the repeated field itself when the file has none of it.
    const std::string element = path.substr(0, end + 1), field = element.substr(0, element.rfind('['));
    if (!locs_.count(field)) locs_[field] = loc;
    if (!locs_.count(element)) locs_[element] = loc;
  }
  locs_[path] = loc;
}

Location SourceMap::Find(const std::string& path) const {
  std::string p = path;
  while (true) {
    auto it = locs_.find(p);
    if (it != locs_.end()) return it->second;
    size_t cut = p.find_last_of(".[");
    if (cut == std::string::npos) break;
    p.resize(cut);
  }
  return Location{file_, 1, 1};
}

Location SourceMap::FindInSetBlock(const std::string& path) const {
  for (std::string p = path; !locs_.count(p);) {
    const std::string child = p + ".";
    if (auto c = locs_.lower_bound(child);
        c != locs_.end() && c->first.starts_with(child) && c->second.file.starts_with("<command line"))
      return c->second;
    const size_t cut = p.find_last_of(".[");
    if (cut == std::string::npos) break;
    p.resize(cut);
  }
  return Find(path);
}

bool SourceMap::Knows(const std::string& path) const {
  std::string p = path;
  while (true) {
    if (locs_.count(p)) return true;
    size_t cut = p.find_last_of(".[");
    if (cut == std::string::npos) return false;
    p.resize(cut);
  }
}

std::string ReadFileOrThrow(const std::string& path, const Location& referrer, const std::string& field) {
  return ReadInputFile(path, referrer, field, kMaxConfigBytes);
}

namespace {

// Collects text-format parse errors with their (0-based) positions.
class Collector : public pb::io::ErrorCollector {
 public:
  struct Item {
    int line, col;
    std::string message;
  };
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (items.size() < 20) items.push_back({line, column, message});
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}
  std::vector<Item> items;
};

// The text between the first `open` after `from` and the next `close`, if any.
bool Between(const std::string& s, size_t from, const std::string& open, char close, std::string* out,
             size_t* end = nullptr) {
  size_t a = s.find(open, from);
  if (a == std::string::npos) return false;
  a += open.size();
  size_t b = s.find(close, a);
  if (b == std::string::npos) return false;
  *out = s.substr(a, b - a);
  if (end) *end = b;
  return true;
}

// "unknown field of Noc, did you mean rows?" for `name` in message type `type`.
std::string UnknownFieldRule(const pb::Descriptor* d, const std::string& name) {
  if (!d) return "unknown field";
  return "unknown field of " + d->name() + DidYouMean(name, FieldNameList(d));
}

// Turns protobuf's text-format parser message into "field: value: rule" (plain
// string searches: the message quotes user input of any length).
Diag ParseErrorDiag(const std::string& file, int line, int col, const std::string& message) {
  Diag d{Location{file, line, col}, "<parse>", "", message};
  std::string a, b;
  size_t end = 0;
  if (message.find("has no field named") != std::string::npos &&
      Between(message, message.find("has no field named"), "\"", '"', &a)) {
    std::string type;
    const pb::Descriptor* desc = nullptr;
    if (Between(message, 0, "Message type \"", '"', &type))
      desc = pb::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
    d.field = a;
    d.rule = UnknownFieldRule(desc, a);
  } else if (message.starts_with("Expected ") && message.find(", got: ") != std::string::npos) {
    size_t got = message.find(", got: ");
    d.value = message.substr(got + 7);
    d.rule = "expected " + message.substr(9, got - 9);
  } else if (message.find("is specified multiple times") != std::string::npos &&
             Between(message, 0, "\"", '"', &a)) {
    d.field = a;
    d.rule = "specified more than once";
  } else if (message.find("is specified along with field") != std::string::npos &&
             Between(message, 0, "\"", '"', &a, &end) && Between(message, end + 1, "\"", '"', &b)) {
    d.field = a;
    d.value = b;
    d.rule = "only one of them may be given";
  } else if (message.starts_with("Integer out of range (") && message.ends_with(")")) {
    d.value = message.substr(22, message.size() - 23);
    d.rule = "integer out of range";
  } else if (message.find("Message is too deep") != std::string::npos) {
    d.rule = "nested too deeply";
  } else if (message.starts_with("Invalid value for boolean field \"") &&
             Between(message, 0, "\"", '"', &a, &end) && Between(message, end + 1, "Value: \"", '"', &b)) {
    // Said past the next token (the next field's line): ParseMessage takes it back to its field.
    d.field = a;
    d.value = b;
    d.rule = "must be true or false";
  }
  return d;
}

void RecordTextLocations(const pb::Message& msg, const pb::TextFormat::ParseInfoTree* tree,
                         const std::string& prefix, const std::string& file, SourceMap* locs) {
  const pb::Descriptor* desc = msg.GetDescriptor();
  const pb::Reflection* refl = msg.GetReflection();
  for (int i = 0; i < desc->field_count(); ++i) {
    const pb::FieldDescriptor* f = desc->field(i);
    std::string base = prefix.empty() ? f->name() : prefix + "." + f->name();
    if (f->is_repeated()) {
      int n = refl->FieldSize(msg, f);
      for (int j = 0; j < n; ++j) {
        std::string path = base + "[" + std::to_string(j) + "]";
        auto loc = tree->GetLocation(f, j);
        if (loc.line >= 0) locs->Set(path, Location{file, loc.line + 1, loc.column + 1});
        if (j == 0 && loc.line >= 0) locs->Set(base, Location{file, loc.line + 1, loc.column + 1});
        if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
          if (const auto* sub = tree->GetTreeForNested(f, j)) {
            RecordTextLocations(refl->GetRepeatedMessage(msg, f, j), sub, path, file, locs);
          }
        }
      }
    } else {
      auto loc = tree->GetLocation(f, -1);
      if (loc.line >= 0) locs->Set(base, Location{file, loc.line + 1, loc.column + 1});
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        if (const auto* sub = tree->GetTreeForNested(f, -1)) {
          RecordTextLocations(refl->GetMessage(msg, f), sub, base, file, locs);
        }
      }
    }
  }
}

// Every string field of `msg` must hold UTF-8 (text format's "\xff" escapes can
// make bytes that are not); the first that does not is a Diag at its location.
void CheckStrings(const pb::Message& msg, const std::string& prefix, const SourceMap& locs, int depth,
                  std::vector<Diag>* diags) {
  if (depth > 100 || diags->size() >= 10) return;
  const pb::Descriptor* desc = msg.GetDescriptor();
  const pb::Reflection* refl = msg.GetReflection();
  for (int i = 0; i < desc->field_count(); ++i) {
    const pb::FieldDescriptor* f = desc->field(i);
    std::string base = prefix.empty() ? f->name() : prefix + "." + f->name();
    const int n = f->is_repeated() ? refl->FieldSize(msg, f) : 1;
    for (int j = 0; j < n; ++j) {
      std::string path = f->is_repeated() ? base + "[" + std::to_string(j) + "]" : base;
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) {
        std::string scratch;
        const std::string& v = f->is_repeated() ? refl->GetRepeatedStringReference(msg, f, j, &scratch)
                                                : refl->GetStringReference(msg, f, &scratch);
        if (!IsUtf8(v)) diags->push_back(Diag{locs.Find(path), path, v, "is not UTF-8 text"});
      } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        if (!f->is_repeated() && !refl->HasField(msg, f)) continue;
        CheckStrings(f->is_repeated() ? refl->GetRepeatedMessage(msg, f, j) : refl->GetMessage(msg, f), path,
                     locs, depth + 1, diags);
      }
    }
  }
}

// Scalar list elements whose own location a JSON config records (JsonScanner).
constexpr int kMaxElementLocations = 1024;

// A JSON reader that checks a config against its message type and records where
// every key was written, before protobuf parses it: syntax errors, unknown keys
// and values of the wrong type are reported at their own line and column.
// Nesting is bounded (kMaxDepth), so no input can exhaust the stack.
class JsonScanner {
 public:
  static constexpr int kMaxDepth = 64;

  JsonScanner(const std::string& text, const std::string& file, SourceMap* locs)
      : t_(text), file_(file), locs_(locs) {}

  // Throws ConfigError at the first problem.
  void Run(const pb::Descriptor* root) {
    Ws();
    if (p_ >= t_.size()) Fail(p_, "<parse>", "", "empty file: expected a JSON object");
    if (t_[p_] != '{') Fail(p_, "<parse>", Token(), "a config is a JSON object ({ ... })");
    Value(root, nullptr, "", 0);
    Ws();
    if (p_ < t_.size()) Fail(p_, "<parse>", Token(), "unexpected text after the JSON object");
  }

 private:
  [[noreturn]] void Fail(size_t pos, const std::string& field, const std::string& value,
                         const std::string& rule) {
    throw ConfigError(Diag{At(pos), field, value, rule});
  }

  // Location of `pos`, counted on from the last one asked (positions only grow).
  Location At(size_t pos) {
    pos = std::min(pos, t_.size());
    if (pos < at_pos_) at_pos_ = 0, at_ = Location{file_, 1, 1};
    Location l = LocationIn(std::string_view(t_).substr(at_pos_, pos - at_pos_), pos - at_pos_, file_);
    at_.line += l.line - 1;
    at_.col = l.line > 1 ? l.col : at_.col + l.col - 1;
    at_pos_ = pos;
    return at_;
  }

  std::string Token() const { return t_.substr(p_, std::min<size_t>(t_.size() - p_, 40)); }
  // The JSON value at p_ as written: a string with its quotes, else up to the next delimiter
  // (Token() gave the next 40 bytes, the rest of the file's lines with them).
  std::string ValueToken() const {
    size_t end = p_;
    if (end < t_.size() && t_[end] == '"') {
      for (++end; end < t_.size() && t_[end] != '"'; ++end)
        if (t_[end] == '\\') ++end;
      end = std::min(end + 1, t_.size());
    } else {
      while (end < t_.size() && !std::strchr(",]}: \t\r\n", t_[end])) ++end;
    }
    return t_.substr(p_, std::min<size_t>(end - p_, 120));
  }

  void Ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
  }

  std::string String() {
    const size_t start = p_;
    std::string out;
    ++p_;
    while (p_ < t_.size() && t_[p_] != '"') {
      char c = t_[p_];
      if (static_cast<unsigned char>(c) < 0x20) Fail(p_, "<parse>", "", "control character in a string");
      if (c == '\\') {
        if (++p_ >= t_.size()) break;
        char e = t_[p_];
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k)
            if (p_ + k >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[p_ + k])))
              Fail(p_, "<parse>", "", "bad \\u escape in a string");
          out += '?';
          p_ += 4;
        } else if (std::string_view("\"\\/bfnrt").find(e) != std::string_view::npos) {
          out += e;
        } else {
          Fail(p_ - 1, "<parse>", "", "bad escape in a string");
        }
        ++p_;
        continue;
      }
      out += c;
      ++p_;
    }
    if (p_ >= t_.size()) Fail(start, "<parse>", "", "unterminated string");
    ++p_;
    return out;
  }

  // A JSON number; returns its text.
  std::string Number() {
    const size_t start = p_;
    if (t_[p_] == '-') ++p_;
    auto digits = [&] {
      size_t d = p_;
      while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) ++p_;
      return p_ > d;
    };
    if (!digits()) Fail(start, "<parse>", Token(), "not a JSON value");
    if (p_ < t_.size() && t_[p_] == '.' && (++p_, !digits())) Fail(start, "<parse>", "", "bad number");
    if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      ++p_;
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
      if (!digits()) Fail(start, "<parse>", "", "bad number");
    }
    return t_.substr(start, p_ - start);
  }

  bool Word(std::string_view w) {
    if (t_.compare(p_, w.size(), w) != 0) return false;
    p_ += w.size();
    return true;
  }

  // Checks a scalar `text` of JSON kind `kind` ('s' string, 'n' number, 'b' bool)
  // against field `f`.
  void CheckScalar(const pb::FieldDescriptor* f, char kind, const std::string& text, size_t pos,
                   const std::string& path) {
    using FD = pb::FieldDescriptor;
    auto bad = [&](const std::string& rule) { Fail(pos, path, text, rule); };
    switch (f->cpp_type()) {
      case FD::CPPTYPE_STRING:
        if (kind != 's') bad("expected a string");
        break;
      case FD::CPPTYPE_BOOL:
        if (kind != 'b') bad("expected true or false");
        break;
      case FD::CPPTYPE_ENUM:
        if (kind == 's' && !f->enum_type()->FindValueByName(text))
          bad("not a value of " + f->enum_type()->name());
        if (kind == 'b') bad("expected an enum name");
        break;
      case FD::CPPTYPE_DOUBLE:
      case FD::CPPTYPE_FLOAT:
        if (kind == 'b') bad("expected a number");
        // A quoted value is what protobuf's JSON parser takes for a number: "NaN", "Infinity",
        // "-Infinity", or a whole finite number without spaces around it ("1.5"). Any other
        // string it refused unlocated ("<parse>: invalid value" at 1:1), so it is refused here.
        if (kind == 's' && (text == "NaN" || text == "Infinity" || text == "-Infinity")) break;
        if (kind == 's') {
          char* end = nullptr;
          errno = 0;
          const long double v = std::strtold(text.c_str(), &end);
          if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || *end != '\0' ||
              (!std::isfinite(v) && errno != ERANGE))
            bad("expected a number (a quoted one may be \"NaN\", \"Infinity\" or \"-Infinity\")");
        }
        if (kind == 'n' || kind == 's') {
          const long double v = std::fabs(std::strtold(text.c_str(), nullptr));
          const long double max = f->cpp_type() == FD::CPPTYPE_FLOAT
                                      ? static_cast<long double>(std::numeric_limits<float>::max())
                                      : static_cast<long double>(std::numeric_limits<double>::max());
          if (!(v <= max)) bad("number out of range of " + std::string(f->cpp_type_name()));
        }
        break;
      default: {  // integers: a JSON number or a quoted one, integral and in range
        if (kind == 'b') bad("expected an integer");
        // A quoted integer is digits with an optional sign, as protobuf's JSON parser takes it
        // ("1e3" and " 12" it refused unlocated).
        if (kind == 's') {
          const size_t digits = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
          if (text.size() == digits || text.find_first_not_of("0123456789", digits) != std::string::npos)
            bad("expected an integer");
        }
        char* end = nullptr;
        errno = 0;
        long double v = std::strtold(text.c_str(), &end);
        if (text.empty() || *end != '\0' || v != std::floor(v) || !std::isfinite(static_cast<double>(v)))
          bad("expected an integer");
        long double lo = 0, hi = 0;
        switch (f->cpp_type()) {
          case FD::CPPTYPE_INT32:
            lo = INT32_MIN, hi = INT32_MAX;
            break;
          case FD::CPPTYPE_UINT32:
            lo = 0, hi = UINT32_MAX;
            break;
          case FD::CPPTYPE_INT64:
            lo = static_cast<long double>(INT64_MIN), hi = static_cast<long double>(INT64_MAX);
            break;
          default:
            lo = 0, hi = static_cast<long double>(UINT64_MAX);
            break;
        }
        if (v < lo || v > hi) bad("integer out of range of " + std::string(f->cpp_type_name()));
      }
    }
  }

  // A value for field `f` of a message of type `d` (both null: not checked), or,
  // when `f` is null and `d` is not, a message of type `d`.
  void Value(const pb::Descriptor* d, const pb::FieldDescriptor* f, const std::string& path, int depth) {
    if (depth > kMaxDepth)
      Fail(p_, path, "", "nested more than " + std::to_string(kMaxDepth) + " levels deep");
    Ws();
    if (p_ >= t_.size()) Fail(p_, path, "", "unexpected end of the file");
    const size_t pos = p_;
    const char c = t_[p_];
    using FD = pb::FieldDescriptor;
    if (Word("null")) return;
    if (c == '{') {
      if (f && f->cpp_type() != FD::CPPTYPE_MESSAGE) Fail(pos, path, "{", "expected a scalar, not an object");
      // One object for a list of them was read as a list of one ("axis": {...}), where a scalar
      // for a list of scalars is refused.
      if (f && f->is_repeated() && !f->is_map())
        Fail(pos, path, "{", "repeated field: expected a list [ {...}, ... ], not one object");
      Object(f ? (f->is_map() ? nullptr : f->message_type()) : d, path, depth);
      return;
    }
    if (c == '[') {
      if (f && !f->is_repeated())
        Fail(pos, path, "[", "field is not repeated: expected one value, not a list");
      ++p_;
      Ws();
      int i = 0;
      if (p_ < t_.size() && t_[p_] == ']') {
        ++p_;
        return;
      }
      for (;; ++i) {
        std::string ep = path + "[" + std::to_string(i) + "]";
        Ws();
        // The elements of a list of scalars past the first kMaxElementLocations are found at
        // the list (SourceMap::Find's prefix): an 8 MB model JSON with a 4-million-element
        // mlp_only_layers took 1.27 GB of locations (a 64 MiB file, about 10 GB).
        if (f && (f->cpp_type() == FD::CPPTYPE_MESSAGE || i < kMaxElementLocations)) locs_->Set(ep, At(p_));
        if (f && f->cpp_type() == FD::CPPTYPE_MESSAGE) {
          Ws();
          if (p_ < t_.size() && t_[p_] != '{') {
            // A null element was dropped, silently ("values": [null] then had no value).
            if (Word("null")) Fail(p_ - 4, ep, "null", "a list's element cannot be null");
            Fail(p_, ep, ValueToken(), "expected an object");
          }
          if (p_ < t_.size() && t_[p_] == '{')
            Object(f->is_map() ? nullptr : f->message_type(), ep, depth + 1);
        } else if (f) {
          // An element of a repeated scalar field is checked like a single value.
          if (p_ >= t_.size()) Fail(p_, ep, "", "unexpected end of the file");
          if (t_[p_] == '{') Fail(p_, ep, "{", "expected a scalar, not an object");
          if (t_[p_] == '[') Fail(p_, ep, "[", "expected one value, not a nested list");
          if (Word("null")) Fail(p_ - 4, ep, "null", "a list's element cannot be null");
          Scalar(f, ep);
        } else {
          Value(nullptr, nullptr, ep, depth + 1);
        }
        Ws();
        if (p_ < t_.size() && t_[p_] == ',') {
          ++p_;
          continue;
        }
        if (p_ < t_.size() && t_[p_] == ']') {
          ++p_;
          return;
        }
        Fail(p_, path, Token(), "expected ',' or ']' in a list");
      }
    }
    if (f && f->is_repeated() && !f->is_map())
      Fail(pos, path, ValueToken(), "repeated field: expected a list [ ... ]");
    if (f && f->cpp_type() == FD::CPPTYPE_MESSAGE)
      Fail(pos, path, ValueToken(), "expected an object { ... }");
    Scalar(f, path);
  }

  // A string, number or boolean at p_, checked against field `f` when it is not null.
  void Scalar(const pb::FieldDescriptor* f, const std::string& path) {
    const size_t pos = p_;
    const char c = t_[p_];
    char kind;
    std::string text;
    if (c == '"') {
      kind = 's';
      text = String();
    } else if (Word("true")) {
      kind = 'b', text = "true";
    } else if (Word("false")) {
      kind = 'b', text = "false";
    } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      kind = 'n';
      text = Number();
    } else {
      Fail(pos, path.empty() ? "<parse>" : path, Token(), "not a JSON value");
    }
    if (f) CheckScalar(f, kind, text, pos, path);
  }

  void Object(const pb::Descriptor* d, const std::string& path, int depth) {
    if (depth > kMaxDepth)
      Fail(p_, path, "", "nested more than " + std::to_string(kMaxDepth) + " levels deep");
    ++p_;  // '{'
    Ws();
    if (p_ < t_.size() && t_[p_] == '}') {
      ++p_;
      return;
    }
    std::map<std::string, int> seen;                                          // key (field name) -> its line
    std::map<const pb::OneofDescriptor*, const pb::FieldDescriptor*> oneofs;  // the member given
    for (;;) {
      Ws();
      if (p_ >= t_.size() || t_[p_] != '"')
        Fail(p_, path.empty() ? "<parse>" : path, Token(), "expected a \"key\"");
      const size_t key_pos = p_;
      std::string key = String();
      const pb::FieldDescriptor* f = nullptr;
      std::string fpath;
      if (d) {
        f = d->FindFieldByName(key);
        for (int i = 0; !f && i < d->field_count(); ++i)
          if (d->field(i)->json_name() == key) f = d->field(i);
        if (!f) Fail(key_pos + 1, key, "", UnknownFieldRule(d, key));
        fpath = path.empty() ? f->name() : path + "." + f->name();
      } else {
        fpath = path + "." + key;
      }
      // A key given twice is refused (JSON parsers keep the last one silently), as in textproto.
      const Location key_at = At(key_pos);
      if (auto [it, fresh] = seen.emplace(d ? f->name() : key, key_at.line); !fresh)
        Fail(key_pos + 1, fpath, "",
             "specified more than once (first on line " + std::to_string(it->second) + ")");
      if (d) locs_->Set(fpath, key_at);
      Ws();
      if (p_ >= t_.size() || t_[p_] != ':') Fail(p_, fpath, Token(), "expected ':' after the key");
      ++p_;
      Ws();
      // Two members of one oneof: protobuf would refuse it without a location.
      if (f && f->real_containing_oneof() && t_.compare(p_, 4, "null") != 0) {
        auto [it, fresh] = oneofs.emplace(f->real_containing_oneof(), f);
        if (!fresh) Fail(key_pos + 1, fpath, it->second->name(), "only one of them may be given");
      }
      Value(nullptr, f, fpath, depth + 1);
      Ws();
      if (p_ < t_.size() && t_[p_] == ',') {
        ++p_;
        continue;
      }
      if (p_ < t_.size() && t_[p_] == '}') {
        ++p_;
        return;
      }
      Fail(p_, path.empty() ? "<parse>" : path, Token(), "expected ',' or '}' in an object");
    }
  }

  const std::string& t_;
  const std::string& file_;
  SourceMap* locs_;
  size_t p_ = 0;
  size_t at_pos_ = 0;
  Location at_{file_, 1, 1};
};

// The first 0-based line of `text` that starts with "name:", as the field a
// type error names none for.
std::string LeadingFieldName(const std::string& line) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  size_t start = i;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_')) ++i;
  if (i == start || std::isdigit(static_cast<unsigned char>(line[start]))) return "";
  size_t name_end = i;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  return i < line.size() && line[i] == ':' ? line.substr(start, name_end - start) : "";
}

// The last "name:" on `line` before column `col` (0-based), outside quoted strings, else "": the
// field whose value a type error is about (`axis { field: "mapping.tp" values: 4 }` names values;
// only a "name:" that started the line was found, so this said "<parse>").
std::string FieldNameBefore(std::string_view line, size_t col) {
  std::string last;
  const size_t end = std::min(col, line.size());
  for (size_t i = 0; i < end;) {
    const char c = line[i];
    if (c == '"' || c == '\'') {
      for (++i; i < line.size() && line[i] != c; ++i)
        if (line[i] == '\\') ++i;
      ++i;
      continue;
    }
    if (!(std::isalpha(static_cast<unsigned char>(c)) || c == '_') ||
        (i > 0 && (std::isalnum(static_cast<unsigned char>(line[i - 1])) || line[i - 1] == '.'))) {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_')) ++i;
    size_t j = i;
    while (j < line.size() && (line[j] == ' ' || line[j] == '\t')) ++j;
    if (j < end && line[j] == ':') last = std::string(line.substr(start, i - start));
  }
  return last;
}

}  // namespace

void ParseMessage(const std::string& raw, const std::string& display_name, pb::Message* msg,
                  SourceMap* locs) {
  // A UTF-8 byte order mark (as some editors save) is blank, as the trace and placement readers
  // skip it (it was "Interpreting non ascii codepoint 239" or "is not a Chip config"). A carriage
  // return without a line feed (old Mac line ends) ends a line, as \r\n does: protobuf's
  // tokenizer ends a # comment only at \n, so the rest of such a file was one comment, silently.
  // Both keep every byte's offset, so locations are unchanged.
  std::string normalized;
  const bool bom = raw.starts_with("\xEF\xBB\xBF");
  bool bare_cr = false;
  for (size_t i = raw.find('\r'); i != std::string::npos && !bare_cr; i = raw.find('\r', i + 1))
    bare_cr = i + 1 == raw.size() || raw[i + 1] != '\n';
  if (bom || bare_cr) {
    normalized = raw;
    if (bom) normalized.replace(0, 3, "   ");
    for (size_t i = 0; i < normalized.size(); ++i)
      if (normalized[i] == '\r' && (i + 1 == normalized.size() || normalized[i + 1] != '\n'))
        normalized[i] = '\n';
  }
  const std::string& text = bom || bare_cr ? normalized : raw;
  size_t bad = 0;
  if (!IsUtf8(text, &bad)) {
    throw ConfigError(Diag{LocationIn(text, bad, display_name), "<parse>", Clip(text.substr(bad, 4), 4),
                           "is not UTF-8 text (configs are UTF-8)"});
  }
  SourceMap scratch(display_name);
  SourceMap* where = locs ? locs : &scratch;
  if (HasExtension(display_name, ".json")) {  // x.JSON too
    JsonScanner(text, display_name, where).Run(msg->GetDescriptor());
    pb::util::JsonParseOptions opts;
    opts.ignore_unknown_fields = false;
    auto status = pb::util::JsonStringToMessage(text, msg, opts);
    if (!status.ok()) {
      throw ConfigError(Diag{Location{display_name, 1, 1}, "<parse>", "",
                             "invalid JSON config (" + std::string(status.message()) + ")"});
    }
  } else {
    pb::TextFormat::Parser parser;
    Collector errors;
    pb::TextFormat::ParseInfoTree tree;
    parser.RecordErrorsTo(&errors);
    parser.WriteLocationsTo(&tree);
    parser.AllowUnknownField(false);
    if (!parser.ParseFromString(text, msg) || !errors.items.empty()) {
      std::vector<Diag> diags;
      std::vector<std::string_view> lines;
      for (size_t a = 0; a <= text.size();) {
        size_t b = text.find('\n', a);
        if (b == std::string::npos) b = text.size();
        lines.push_back(std::string_view(text).substr(a, b - a));
        a = b + 1;
      }
      for (const auto& e : errors.items) {
        Diag d = ParseErrorDiag(display_name, e.line + 1, e.col + 1, e.message);
        const bool on_line = e.line >= 0 && e.line < static_cast<int>(lines.size());
        // A boolean's error is said past the token after it (at the next field, or at a block's
        // "}"): at the last "name:" of its field up to there.
        if (d.rule == "must be true or false" && on_line) {
          for (int l = e.line; l >= 0; --l) {
            const std::string_view text_line =
                l == e.line ? lines[l].substr(0, std::min<size_t>(std::max(0, e.col), lines[l].size()))
                            : lines[l];
            size_t at = std::string_view::npos;
            for (size_t p = text_line.find(d.field); p != std::string_view::npos;
                 p = text_line.find(d.field, p + 1)) {
              size_t q = p + d.field.size();
              while (q < text_line.size() && (text_line[q] == ' ' || text_line[q] == '\t')) ++q;
              const bool starts = p == 0 || !(std::isalnum(static_cast<unsigned char>(text_line[p - 1])) ||
                                              text_line[p - 1] == '_');
              if (starts && q < text_line.size() && text_line[q] == ':') at = p;
            }
            if (at != std::string_view::npos) {
              d.where.line = l + 1;
              d.where.col = static_cast<int>(at) + 1;
              break;
            }
          }
          diags.push_back(std::move(d));
          continue;
        }
        // A type error names no field: take it from the "name:" before it on its line.
        if (d.field == "<parse>" && on_line) {
          std::string name = FieldNameBefore(lines[e.line], static_cast<size_t>(std::max(0, e.col)));
          if (name.empty()) name = LeadingFieldName(std::string(lines[e.line].substr(0, 200)));
          if (!name.empty()) d.field = name;
        }
        // protobuf points just past an unknown field's name; point at its start. Its column
        // counts a tab as up to 8 columns, so it may lie past the end of the line.
        int start = e.col - static_cast<int>(d.field.size());
        if (on_line && start >= 0 && static_cast<size_t>(start) <= lines[e.line].size() && !d.field.empty() &&
            lines[e.line].substr(static_cast<size_t>(start)).starts_with(d.field)) {
          d.where.col = start + 1;
        }
        diags.push_back(std::move(d));
      }
      if (diags.empty()) diags.push_back(Diag{{display_name, 1, 1}, "<parse>", "", "not a valid config"});
      throw ConfigError(std::move(diags));
    }
    RecordTextLocations(*msg, &tree, "", display_name, where);
  }
  std::vector<Diag> diags;
  CheckStrings(*msg, "", *where, 0, &diags);
  if (!diags.empty()) throw ConfigError(std::move(diags));
}

void ParseFile(const std::string& path, pb::Message* msg, SourceMap* locs) {
  std::string text = ReadFileOrThrow(path, Location{path, 1, 1}, "<file>");
  ParseMessage(text, path, msg, locs);
}

}  // namespace tpsim::config
