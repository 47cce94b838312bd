// Config fields by path: `--set` (SetScalarField), integer ranges, a field's value as text,
// and the path helpers configs resolve relative files with. Split from load.cc (parsing).
#include "configs/files.h"
#include "configs/load.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace tpsim::config {

namespace pb = google::protobuf;

std::vector<std::string> FieldNameList(const pb::Descriptor* d) {
  std::vector<std::string> names;
  for (int i = 0; i < d->field_count(); ++i) names.push_back(d->field(i)->name());
  return names;
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
      // One spelling per element ([0], not [00] or [+0]): a sweep tells its axes apart by path.
      if (ec != std::errc() || ptr != idx.data() + idx.size() || v < 0 || (idx.size() > 1 && idx[0] == '0'))
        return false;
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
                             "unknown field of " + desc->name() + DidYouMean(part.name, FieldNameList(desc)) +
                                 " (fields: " + FieldNames(desc) + ")"});
    }
    if (f->is_repeated() && part.index < 0) {
      throw ConfigError(
          Diag{where, walked, value, "repeated field needs an index, e.g. " + part.name + "[0]"});
    }
    if (!f->is_repeated() && part.index >= 0) {
      throw ConfigError(Diag{where, walked, value, "field is not repeated; remove the [index]"});
    }
    // Later errors name the element (chip.memory[0].efficiency), as file errors do.
    const std::string bare = walked;
    if (f->is_repeated()) walked += "[" + std::to_string(part.index) + "]";
    int size = f->is_repeated() ? refl->FieldSize(*cur, f) : 0;
    if (f->is_repeated() && part.index > size) {
      throw ConfigError(Diag{where, bare, value,
                             "index [" + std::to_string(part.index) + "] out of range (" +
                                 std::to_string(size) + " elements; use [" + std::to_string(size) +
                                 "] to append)"});
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
        errno = 0;
        // Decimal digits only, as an integer field reads them: strtod took " 64" (a leading blank)
        // and 0x40 (hexadecimal) as 64.
        const bool decimal =
            !value.empty() && value.find_first_not_of("0123456789+-.eE") == std::string::npos;
        double v = decimal ? std::strtod(value.c_str(), &end) : NAN;
        if (!decimal || *end != '\0' || !std::isfinite(v)) throw bad("expected a finite decimal number");
        // 1e-400 reads as 0: a later rule then quoted "0" for what was typed.
        if (errno == ERANGE && v == 0) throw bad("too small for a double: it reads as 0");
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
        if (!IsUtf8(value)) throw bad("is not UTF-8 text");
        append ? refl->AddString(cur, f, value)
        : rep  ? refl->SetRepeatedString(cur, f, idx, value)
               : refl->SetString(cur, f, value);
        break;
      case pb::FieldDescriptor::CPPTYPE_ENUM: {
        const auto* ev = f->enum_type()->FindValueByName(value);
        if (!ev) {
          std::vector<std::string> names;
          for (int k = 0; k < f->enum_type()->value_count(); ++k)
            names.push_back(f->enum_type()->value(k)->name());
          throw bad("not a value of " + f->enum_type()->name() + DidYouMean(value, names));
        }
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

void CheckIntegerRanges(const pb::Message& msg, const SourceMap& locs, const std::string& prefix,
                        std::vector<Diag>* diags) {
  const pb::Descriptor* desc = msg.GetDescriptor();
  const pb::Reflection* refl = msg.GetReflection();
  for (int i = 0; i < desc->field_count(); ++i) {
    const pb::FieldDescriptor* f = desc->field(i);
    const std::string base = prefix.empty() ? f->name() : prefix + "." + f->name();
    const int n = f->is_repeated() ? refl->FieldSize(msg, f) : 1;
    for (int j = 0; j < n; ++j) {
      const std::string path = f->is_repeated() ? base + "[" + std::to_string(j) + "]" : base;
      const bool rep = f->is_repeated();
      switch (f->cpp_type()) {
        case pb::FieldDescriptor::CPPTYPE_UINT32: {
          uint32_t v = rep ? refl->GetRepeatedUInt32(msg, f, j) : refl->GetUInt32(msg, f);
          if (v > uint32_t{INT32_MAX})
            diags->push_back(
                Diag{locs.Find(path), path, std::to_string(v), "must be at most 2147483647 (2^31-1)"});
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_UINT64: {
          uint64_t v = rep ? refl->GetRepeatedUInt64(msg, f, j) : refl->GetUInt64(msg, f);
          if (v > uint64_t{INT64_MAX} && f->name() != "seed")
            diags->push_back(Diag{locs.Find(path), path, std::to_string(v),
                                  "must be at most 9223372036854775807 (2^63-1)"});
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_MESSAGE:
          if (!rep && !refl->HasField(msg, f)) break;
          CheckIntegerRanges(rep ? refl->GetRepeatedMessage(msg, f, j) : refl->GetMessage(msg, f), locs, path,
                             diags);
          break;
        default:
          break;
      }
    }
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

std::vector<std::string> ShippedNames(const std::string& dir, const std::string& ext) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(ConfigDir()) / dir, ec))
    if (e.path().extension() == ext && e.is_regular_file(ec)) names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string ShippedList(const std::string& dir, const std::string& ext) {
  const std::vector<std::string> names = ShippedNames(dir, ext);
  if (!names.empty()) return JoinNames(names);
  const char* env = std::getenv("TPSIM_CONFIG_DIR");
  if (!env || !*env) return "none";
  return "none in TPSIM_CONFIG_DIR=" + Clip(env) + ": no " + dir + "/ folder of " + ext + " files";
}

}  // namespace tpsim::config
