#pragma once
// Pieces of the command line that `tpsim` (sim/cli/main.cc), `tpsim collectives` and `tpsim gemm`
// share: the usage error, "--flag VALUE" / "--flag=VALUE", --max-memory's value, and fixed-point
// numbers for tables.

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "configs/load.h"
#include "sim/run.h"

namespace tpsim::cli {

// A malformed command line: the command prints it with its usage and exits 2.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// "--flag VALUE" or "--flag=VALUE" at args[*i]: true with *value set and *i at the last item
// taken (the caller's loop steps past it); false when args[*i] is another flag. Throws
// UsageError when `flag` ends the line without its value or its value is empty.
inline bool FlagAt(const std::vector<std::string>& args, size_t* i, const std::string& flag,
                   std::string* value) {
  const std::string& a = args[*i];
  if (a == flag) {
    if (*i + 1 >= args.size()) throw UsageError(flag + " needs a value");
    if (const std::string rule = config::OptionAsValue(args[*i + 1]); !rule.empty())
      throw UsageError(flag + " " + rule);
    *value = args[++*i];
  } else if (a.size() > flag.size() && a.compare(0, flag.size(), flag) == 0 && a[flag.size()] == '=') {
    *value = a.substr(flag.size() + 1);
  } else {
    return false;
  }
  // An empty value ("--csv ''", a script's unset variable) would read as the flag not given.
  if (value->empty()) throw UsageError(flag + " needs a value, got an empty one");
  return true;
}

using config::GivenTwice;

// FlagAt, with a flag of one value given twice refused (GivenTwice): a command's own parser
// keeps one of these for its loop over the line.
class OnceFlags {
 public:
  bool At(const std::vector<std::string>& args, size_t* i, const std::string& flag, std::string* value) {
    if (!FlagAt(args, i, flag, value)) return false;
    if (const std::string twice = GivenTwice(&given_, flag, *value); !twice.empty())
      throw UsageError(flag + " " + twice);
    return true;
  }

 private:
  std::map<std::string, std::string> given_;
};

// --max-memory's value (sim::ParseByteSize: 8G, 512M, bytes; 0: no limit), or a UsageError.
inline uint64_t MaxMemoryValue(const std::string& v) {
  const std::optional<uint64_t> bytes = sim::ParseByteSize(v);
  if (!bytes) throw UsageError("--max-memory expects a size such as 8G, 512M or 1000000, got '" + v + "'");
  return *bytes;
}

// `v` with `digits` digits after the point ("%.*f").
inline std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace tpsim::cli
