#include "configs/load.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace tpsim::config {

namespace pb = google::protobuf;

std::string Diag::str() const {
  std::ostringstream os;
  os << where.file << ':' << where.line << ':' << where.col << ": " << field << ": " << value << ": " << rule;
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

std::string ReadFileOrThrow(const std::string& path, const Location& referrer, const std::string& field) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError(Diag{referrer, field, path, "is a directory, not a config file"});
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(Diag{referrer, field, path, "file not found or not readable"});
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

namespace {

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Collects text-format parse errors with their (0-based) positions.
class Collector : public pb::io::ErrorCollector {
 public:
  struct Item {
    int line, col;
    std::string message;
  };
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    items.push_back({line, column, message});
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}
  std::vector<Item> items;
};

// Turns protobuf's parser message into "field: value: rule".
Diag ParseErrorDiag(const std::string& file, int line, int col, const std::string& message) {
  Diag d{Location{file, line, col}, "<parse>", "", message};
  std::smatch m;
  static const std::regex kNoField(R"re(has no field named "([^"]+)")re");
  static const std::regex kExpected(R"re(^Expected ([a-z ]+), got: (.*)$)re");
  static const std::regex kRepeatedSpec(R"re(field "([^"]+)" is specified multiple times)re");
  static const std::regex kOneof(R"re(Field "([^"]+)" is specified along with field "([^"]+)")re");
  static const std::regex kOutOfRange(R"re(Integer out of range \((.*)\))re");
  if (std::regex_search(message, m, kNoField)) {
    d.field = m[1];
    d.rule = "unknown field (" + message + ")";
  } else if (std::regex_search(message, m, kExpected)) {
    d.value = m[2];
    d.rule = "expected " + m[1].str();
  } else if (std::regex_search(message, m, kRepeatedSpec)) {
    d.field = m[1];
    d.rule = "specified more than once";
  } else if (std::regex_search(message, m, kOneof)) {
    d.field = m[1];
    d.value = m[2];
    d.rule = "only one of them may be given";
  } else if (std::regex_search(message, m, kOutOfRange)) {
    d.value = m[1];
    d.rule = "integer out of range";
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

// Line and column (1-based) of byte offset `pos` in `text`.
Location LocationOf(const std::string& text, size_t pos, const std::string& file) {
  Location loc{file, 1, 1};
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      loc.col = 1;
    } else {
      ++loc.col;
    }
  }
  return loc;
}

// JSON carries no parse tree with positions; find each key after its parent's
// key instead, which is exact for the configs people write.
void RecordJsonLocations(const pb::Message& msg, const std::string& text, size_t from,
                         const std::string& prefix, const std::string& file, SourceMap* locs) {
  const pb::Descriptor* desc = msg.GetDescriptor();
  const pb::Reflection* refl = msg.GetReflection();
  for (int i = 0; i < desc->field_count(); ++i) {
    const pb::FieldDescriptor* f = desc->field(i);
    size_t pos = text.find("\"" + f->name() + "\"", from);
    if (pos == std::string::npos) pos = text.find("\"" + f->json_name() + "\"", from);
    if (pos == std::string::npos) continue;
    std::string base = prefix.empty() ? f->name() : prefix + "." + f->name();
    locs->Set(base, LocationOf(text, pos, file));
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int j = 0; j < refl->FieldSize(msg, f); ++j) {
        RecordJsonLocations(refl->GetRepeatedMessage(msg, f, j), text, pos,
                            base + "[" + std::to_string(j) + "]", file, locs);
      }
    } else if (refl->HasField(msg, f)) {
      RecordJsonLocations(refl->GetMessage(msg, f), text, pos, base, file, locs);
    }
  }
}

}  // namespace

void ParseMessage(const std::string& text, const std::string& display_name, pb::Message* msg,
                  SourceMap* locs) {
  if (EndsWith(display_name, ".json")) {
    pb::util::JsonParseOptions opts;
    opts.ignore_unknown_fields = false;
    auto status = pb::util::JsonStringToMessage(text, msg, opts);
    if (!status.ok()) {
      std::string m(status.message());
      Location loc{display_name, 1, 1};
      // Point at the unknown key when protobuf names it.
      static const std::regex kField(R"re(Cannot find field[^"]*"?([A-Za-z0-9_]*))re");
      std::smatch sm;
      Diag d{loc, "<parse>", "", "invalid JSON config (" + m + ")"};
      if (std::regex_search(m, sm, kField) && sm[1].length() > 0) {
        d.field = sm[1];
        size_t pos = text.find("\"" + sm[1].str() + "\"");
        if (pos != std::string::npos) d.where = LocationOf(text, pos, display_name);
        d.rule = "unknown field";
      }
      throw ConfigError(d);
    }
    if (locs) RecordJsonLocations(*msg, text, 0, "", display_name, locs);
    return;
  }
  pb::TextFormat::Parser parser;
  Collector errors;
  pb::TextFormat::ParseInfoTree tree;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  parser.AllowUnknownField(false);
  if (!parser.ParseFromString(text, msg) || !errors.items.empty()) {
    std::vector<Diag> diags;
    std::vector<std::string> lines;
    {
      std::istringstream is(text);
      for (std::string l; std::getline(is, l);) lines.push_back(l);
    }
    for (const auto& e : errors.items) {
      Diag d = ParseErrorDiag(display_name, e.line + 1, e.col + 1, e.message);
      // A type error names no field: take it from the "name:" that starts the line.
      if (d.field == "<parse>" && e.line >= 0 && e.line < static_cast<int>(lines.size())) {
        static const std::regex kLineField(R"re(^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:)re");
        std::smatch lm;
        if (std::regex_search(lines[e.line], lm, kLineField)) d.field = lm[1];
      }
      // protobuf points just past an unknown field's name; point at its start.
      int start = e.col - static_cast<int>(d.field.size());
      if (e.line >= 0 && e.line < static_cast<int>(lines.size()) && start >= 0 && !d.field.empty() &&
          lines[e.line].compare(start, d.field.size(), d.field) == 0) {
        d.where.col = start + 1;
      }
      diags.push_back(std::move(d));
    }
    if (diags.empty()) diags.push_back(Diag{{display_name, 1, 1}, "<parse>", "", "not a valid config"});
    throw ConfigError(std::move(diags));
  }
  if (locs) RecordTextLocations(*msg, &tree, "", display_name, locs);
}

void ParseFile(const std::string& path, pb::Message* msg, SourceMap* locs) {
  std::string text = ReadFileOrThrow(path, Location{path, 1, 1}, "<file>");
  ParseMessage(text, path, msg, locs);
}

namespace {

struct PathPart {
  std::string name;
  int index = -1;  // -1: no [i]
};

bool SplitPath(const std::string& path, std::vector<PathPart>* parts) {
  std::stringstream ss(path);
  std::string item;
  while (std::getline(ss, item, '.')) {
    PathPart p;
    size_t br = item.find('[');
    if (br != std::string::npos) {
      if (item.back() != ']') return false;
      std::string idx = item.substr(br + 1, item.size() - br - 2);
      int v = 0;
      auto [ptr, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), v);
      if (ec != std::errc() || ptr != idx.data() + idx.size() || v < 0) return false;
      p.index = v;
      item.resize(br);
    }
    if (item.empty()) return false;
    p.name = item;
    parts->push_back(p);
  }
  return !parts->empty();
}

template <typename T>
bool ParseInt(const std::string& s, T* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
}

std::string FieldNames(const pb::Descriptor* d) {
  std::string s;
  for (int i = 0; i < d->field_count(); ++i) s += (i ? ", " : "") + d->field(i)->name();
  return s;
}

}  // namespace

void SetScalarField(pb::Message* msg, const std::string& path, const std::string& value,
                    const Location& where) {
  std::vector<PathPart> parts;
  if (!SplitPath(path, &parts)) {
    throw ConfigError(Diag{where, path, value, "not a field path (expected a.b.c or a.b[0].c)"});
  }
  pb::Message* cur = msg;
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& part = parts[i];
    const pb::Descriptor* desc = cur->GetDescriptor();
    const pb::Reflection* refl = cur->GetReflection();
    const pb::FieldDescriptor* f = desc->FindFieldByName(part.name);
    walked += (walked.empty() ? "" : ".") + part.name;
    if (!f) {
      throw ConfigError(Diag{where, walked, value,
                             "unknown field of " + desc->name() + " (fields: " + FieldNames(desc) + ")"});
    }
    if (f->is_repeated() && part.index < 0) {
      throw ConfigError(
          Diag{where, walked, value, "repeated field needs an index, e.g. " + part.name + "[0]"});
    }
    if (!f->is_repeated() && part.index >= 0) {
      throw ConfigError(Diag{where, walked, value, "field is not repeated; remove the [index]"});
    }
    int size = f->is_repeated() ? refl->FieldSize(*cur, f) : 0;
    if (f->is_repeated() && part.index > size) {
      throw ConfigError(Diag{where, walked, value,
                             "index out of range (" + std::to_string(size) + " elements; use [" +
                                 std::to_string(size) + "] to append)"});
    }
    bool last = i + 1 == parts.size();
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (last) throw ConfigError(Diag{where, walked, value, "is a message, not a scalar field"});
      if (f->is_repeated()) {
        cur =
            part.index == size ? refl->AddMessage(cur, f) : refl->MutableRepeatedMessage(cur, f, part.index);
      } else {
        cur = refl->MutableMessage(cur, f);
      }
      continue;
    }
    if (!last) throw ConfigError(Diag{where, walked, value, "is a scalar; it has no fields"});
    bool rep = f->is_repeated();
    bool append = rep && part.index == size;
    int idx = part.index;
    auto bad = [&](const std::string& rule) { return ConfigError(Diag{where, walked, value, rule}); };
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: {
        int32_t v;
        if (!ParseInt(value, &v)) throw bad("expected a 32-bit integer");
        append ? refl->AddInt32(cur, f, v)
        : rep  ? refl->SetRepeatedInt32(cur, f, idx, v)
               : refl->SetInt32(cur, f, v);
        break;
      }
      case pb::FieldDescriptor::CPPTYPE_INT64: {
        int64_t v;
        if (!ParseInt(value, &v)) throw bad("expected a 64-bit integer");
        append ? refl->AddInt64(cur, f, v)
        : rep  ? refl->SetRepeatedInt64(cur, f, idx, v)
               : refl->SetInt64(cur, f, v);
        break;
      }
      case pb::FieldDescriptor::CPPTYPE_UINT32: {
        uint32_t v;
        if (!ParseInt(value, &v)) throw bad("expected a non-negative 32-bit integer");
        append ? refl->AddUInt32(cur, f, v)
        : rep  ? refl->SetRepeatedUInt32(cur, f, idx, v)
               : refl->SetUInt32(cur, f, v);
        break;
      }
      case pb::FieldDescriptor::CPPTYPE_UINT64: {
        uint64_t v;
        if (!ParseInt(value, &v)) throw bad("expected a non-negative 64-bit integer");
        append ? refl->AddUInt64(cur, f, v)
        : rep  ? refl->SetRepeatedUInt64(cur, f, idx, v)
               : refl->SetUInt64(cur, f, v);
        break;
      }
      case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      case pb::FieldDescriptor::CPPTYPE_FLOAT: {
        char* end = nullptr;
        double v = value.empty() ? NAN : std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || !std::isfinite(v)) throw bad("expected a finite number");
        if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE) {
          append ? refl->AddDouble(cur, f, v)
          : rep  ? refl->SetRepeatedDouble(cur, f, idx, v)
                 : refl->SetDouble(cur, f, v);
        } else {
          float fv = static_cast<float>(v);
          append ? refl->AddFloat(cur, f, fv)
          : rep  ? refl->SetRepeatedFloat(cur, f, idx, fv)
                 : refl->SetFloat(cur, f, fv);
        }
        break;
      }
      case pb::FieldDescriptor::CPPTYPE_BOOL: {
        bool v;
        if (value == "true" || value == "1")
          v = true;
        else if (value == "false" || value == "0")
          v = false;
        else
          throw bad("expected true or false");
        append ? refl->AddBool(cur, f, v)
        : rep  ? refl->SetRepeatedBool(cur, f, idx, v)
               : refl->SetBool(cur, f, v);
        break;
      }
      case pb::FieldDescriptor::CPPTYPE_STRING:
        append ? refl->AddString(cur, f, value)
        : rep  ? refl->SetRepeatedString(cur, f, idx, value)
               : refl->SetString(cur, f, value);
        break;
      case pb::FieldDescriptor::CPPTYPE_ENUM: {
        const auto* ev = f->enum_type()->FindValueByName(value);
        if (!ev) throw bad("not a value of " + f->enum_type()->name());
        append ? refl->AddEnum(cur, f, ev)
        : rep  ? refl->SetRepeatedEnum(cur, f, idx, ev)
               : refl->SetEnum(cur, f, ev);
        break;
      }
      default:
        throw bad("unsupported field type");
    }
    return;
  }
}

std::string FieldValueText(const pb::Message& msg, const std::string& path) {
  std::vector<PathPart> parts;
  if (!SplitPath(path, &parts)) return "";
  const pb::Message* cur = &msg;
  for (size_t i = 0; i < parts.size(); ++i) {
    const pb::Reflection* refl = cur->GetReflection();
    const pb::FieldDescriptor* f = cur->GetDescriptor()->FindFieldByName(parts[i].name);
    if (!f || f->is_repeated() != (parts[i].index >= 0)) return "";
    if (f->is_repeated() && parts[i].index >= refl->FieldSize(*cur, f)) return "";
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      cur =
          f->is_repeated() ? &refl->GetRepeatedMessage(*cur, f, parts[i].index) : &refl->GetMessage(*cur, f);
      continue;
    }
    if (i + 1 != parts.size()) return "";
    std::string out;
    if (f->is_repeated()) {
      pb::TextFormat::PrintFieldValueToString(*cur, f, parts[i].index, &out);
    } else {
      pb::TextFormat::PrintFieldValueToString(*cur, f, -1, &out);
    }
    return out;
  }
  return "";
}

std::string DirName(const std::string& path) {
  auto p = std::filesystem::path(path).parent_path();
  return p.empty() ? "." : p.string();
}

std::string JoinPath(const std::string& dir, const std::string& rel) {
  std::filesystem::path r(rel);
  if (r.is_absolute()) return rel;
  return (std::filesystem::path(dir) / r).lexically_normal().string();
}

std::string ConfigDir() {
  if (const char* env = std::getenv("TPSIM_CONFIG_DIR"); env && *env) return env;
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) {
    buf[n] = '\0';
    std::filesystem::path exe_dir = std::filesystem::path(buf).parent_path();
    std::error_code ec;
    for (auto cand : {exe_dir / ".." / "configs", exe_dir / ".." / "share" / "tpsim" / "configs"}) {
      if (std::filesystem::is_directory(cand / "chips", ec)) return cand.lexically_normal().string();
    }
  }
  return TPSIM_SOURCE_CONFIG_DIR;
}

}  // namespace tpsim::config
