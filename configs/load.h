#pragma once
// First stage of config loading: parse a protobuf text-format (or JSON) file into
// a message, remembering where every field was written, so that the second stage
// (semantic validation, in each library) can report errors as
//
//   file:line:col: field.path: value: rule
//
// Nothing here exits or asserts on user input: every problem becomes a Diag,
// collected in a ConfigError that the command line prints and turns into exit 2.

#include <google/protobuf/message.h>

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tpsim::config {

// A place in a config source. line and col are 1-based.
struct Location {
  std::string file;
  int line = 1;
  int col = 1;
};
// Where errors in command-line arguments (flags, --set) are reported.
inline const Location kCommandLine{"<command line>", 1, 1};

// One config error, printed as "file:line:col: field: value: rule".
struct Diag {
  Location where;
  std::string field;  // dotted path from the experiment root, e.g. "chip.noc.rows"
  std::string value;  // the offending value as written (may be empty)
  std::string rule;   // what the value violates
  std::string str() const;
};

// Thrown by loaders and validators; carries every error found (at least one).
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<Diag> diags);
  explicit ConfigError(Diag diag) : ConfigError(std::vector<Diag>{std::move(diag)}) {}
  const std::vector<Diag>& diags() const { return diags_; }

 private:
  std::vector<Diag> diags_;
};

// Where each field of a parsed message was written. Paths use field names and
// [i] for repeated elements: "noc.rows", "memory[1].attach[0]".
class SourceMap {
 public:
  SourceMap() = default;
  explicit SourceMap(std::string file) : file_(std::move(file)) {}

  void Set(const std::string& path, Location loc) { locs_[path] = std::move(loc); }
  // Set(path, loc), and `loc` for each repeated element on the way that is not recorded (one a
  // --set appended, e.g. chip.memory[2] of a chip with two), and for its repeated field when the
  // file has none (chip.memory[0].attach[0]): errors about them then point at the --set, not at
  // the first element or the enclosing block in the file.
  void SetAppending(const std::string& path, const Location& loc);
  // Copies every entry of `other` under `prefix` ("chip" + "." + path); the
  // prefix itself maps to `anchor` (where the section was named or inlined).
  // An empty prefix copies the entries as they are.
  void Merge(const std::string& prefix, const SourceMap& other, const Location& anchor);
  // The location of `path`, else of its longest recorded prefix, else file:1:1.
  Location Find(const std::string& path) const;
  // Find, except that a block no file wrote and a --set made (`--set chip.gpu.sms=1` on a chip
  // without a gpu block) is at that --set rather than at an enclosing block or the file's start:
  // for the errors about the block's other fields.
  Location FindInSetBlock(const std::string& path) const;
  // True when `path` or one of its prefixes is recorded (Find does not fall back).
  bool Knows(const std::string& path) const;
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::map<std::string, Location> locs_;
};

// Reads a whole file; a missing or unreadable file is a ConfigError naming
// `field` (the config field that referred to it) and its location.
std::string ReadFileOrThrow(const std::string& path, const Location& referrer, const std::string& field);

// Parses `text` into `msg`: JSON when `display_name` ends in ".json", protobuf
// text format otherwise. Unknown fields and type errors are ConfigErrors with
// line and column. Fills `locs` (may be null) with every field's location.
void ParseMessage(const std::string& text, const std::string& display_name, google::protobuf::Message* msg,
                  SourceMap* locs);

// ParseMessage on the contents of `path`.
void ParseFile(const std::string& path, google::protobuf::Message* msg, SourceMap* locs);

// The names of a message type's fields, in declaration order (for "did you mean").
std::vector<std::string> FieldNameList(const google::protobuf::Descriptor* d);

// Sets the scalar field at dotted `path` (e.g. "mapping.tp", "chip.memory[0].bandwidth_gbps")
// of `msg` from its text `value`. Intermediate messages are created. Errors name
// `where` (the command-line argument) and the rule broken.
void SetScalarField(google::protobuf::Message* msg, const std::string& path, const std::string& value,
                    const Location& where);

// Every integer field of `msg` (recursively; paths under `prefix`) must fit the
// signed type the code computes with: uint32 at most 2^31-1, uint64 at most
// 2^63-1 (fields named "seed" excepted), so that no later conversion wraps.
void CheckIntegerRanges(const google::protobuf::Message& msg, const SourceMap& locs,
                        const std::string& prefix, std::vector<Diag>* diags);

// Renders a scalar field's value for a Diag ("" when unset/not scalar).
std::string FieldValueText(const google::protobuf::Message& msg, const std::string& path);

// Directory part of a path ("." when none), and `rel` resolved against `dir`
// (absolute paths returned unchanged).
std::string DirName(const std::string& path);
std::string JoinPath(const std::string& dir, const std::string& rel);

// The folder of shipped configs: $TPSIM_CONFIG_DIR, else <exe>/../configs or
// <exe>/../share/tpsim/configs when present, else the source tree's configs/.
std::string ConfigDir();

// The names (file stems) of the shipped configs in ConfigDir()/`dir` whose files end in `ext`
// (".textproto", ".json"), sorted; none when the folder is missing.
std::vector<std::string> ShippedNames(const std::string& dir, const std::string& ext);
// ShippedNames joined with ", " for an error's list of valid names; where there are none, "none",
// and where $TPSIM_CONFIG_DIR points to them "none in TPSIM_CONFIG_DIR=X: no DIR/ folder of EXT
// files" (a misset variable read as "(none)" or an empty list).
std::string ShippedList(const std::string& dir, const std::string& ext);

}  // namespace tpsim::config
