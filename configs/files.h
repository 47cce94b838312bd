#pragma once
// Guarded file input and output, and the text helpers every error message uses.
//
// Inputs: only regular files are read (a FIFO would block, /dev/zero never ends),
// up to a size cap, and must be UTF-8 text. Outputs: written to a temporary file in
// the same folder and renamed over the target, so that a failed or interrupted
// write never leaves a half file; an output that names one of the run's inputs is
// refused before anything runs. Nothing here exits: input problems are
// config::ConfigError (exit 2), write failures std::runtime_error naming the
// file and the reason (exit 1).

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tpsim::config {

struct Location;

// Size caps of input files.
inline constexpr size_t kMaxConfigBytes = size_t{64} << 20;  // configs, models, placements
inline constexpr size_t kMaxTraceBytes = size_t{1} << 30;    // request traces

// `s` made printable on one line: control and non-UTF-8 bytes escaped (\n, \xff),
// and cut after `max` characters with "...(N bytes)" appended.
std::string Clip(std::string_view s, size_t max = 120);

// A count or size given on the command line: decimal digits only (no sign, blank or suffix), at
// most `max`. Throws std::invalid_argument otherwise (std::stoul takes "-1" as 2^64 - 1 and
// "12x" as 12).
uint64_t ParseCount(std::string_view text, uint64_t max);

// A number given on the command line: a finite decimal (an optional sign, digits, a point, an
// exponent), the whole text. Throws std::invalid_argument otherwise (std::stod takes "5abc" as 5
// and gives "nan" and "inf").
double ParseNumber(std::string_view text);

// A flag of one value met a second time: records `flag`'s `value` in `given` and returns the rule
// to refuse it with ("given twice ('a' and 'b'): give it once"), or an empty string the first
// time (`--out a.json --out b.json` wrote b.json only, silently). --set adds up: not recorded.
std::string GivenTwice(std::map<std::string, std::string>* given, const std::string& flag,
                       const std::string& value);

// A flag's value taken from the next word that is an option itself (`--csv --jobs 2` wrote a file
// named --jobs and read 2 as a stray argument): the rule to refuse it with, else "". A word that
// starts with "--" is an option; a file of such a name is given as ./--name or with `--flag=`.
std::string OptionAsValue(std::string_view word);

// Flushes standard output: false where a write to it failed (a command's last step: on a full
// disk `tpsim compare ... > out.txt` lost its whole table and exited 0).
bool FlushStandardOutput();

// True when `s` is valid UTF-8; else `*bad` (may be null) is the offset of the
// first byte that is not.
bool IsUtf8(std::string_view s, size_t* bad = nullptr);

// Line and column (1-based) of byte offset `pos` in `text`.
Location LocationIn(std::string_view text, size_t pos, const std::string& file);

// Reads a whole regular file of at most `max_bytes` that is UTF-8 text. Every
// refusal (missing, a directory, a FIFO or device, too large, unreadable, not
// UTF-8) is a ConfigError naming `field` at `referrer`; a byte that is not UTF-8
// is reported at its own file:line:col.
std::string ReadInputFile(const std::string& path, const Location& referrer, const std::string& field,
                          size_t max_bytes = kMaxConfigBytes);

// The valid name closest to `name` (edit distance at most a third of its length,
// at least 1), else the only valid name that starts with it (3 bytes or more), or "" when
// none is. Names over 64 bytes get no suggestion.
std::string NearestName(std::string_view name, const std::vector<std::string>& valid);

// "a, b, c": `names` joined by `sep` (an error's list of valid names, and the like).
std::string JoinNames(const std::vector<std::string>& names, std::string_view sep = ", ");

// `v` with `decimals` decimals where they show it (0, or from 10^-decimals up to 1e12), else six
// significant digits: a rate of 3.1e-06 printed as 0.000, one of 1e30 as 31 digits of float noise.
std::string DecimalsOrDigits(double v, int decimals);

// ", did you mean X?" for NearestName's answer, else "".
std::string DidYouMean(std::string_view name, const std::vector<std::string>& valid);

// An output file written through a temporary file in the target's folder and
// renamed over it by Commit(); without Commit() (an exception, a failed write) the
// temporary file is removed and the target left as it was. A SIGINT, SIGTERM or SIGHUP
// while it is open removes it too: its path is kept in a process-wide list that a handler of
// those signals unlinks before the signal's default action ends the process (exit status 128 +
// signal). The handler is installed when the signal has its default action only: a command
// with its own (the sweep runner's graceful stop) keeps it, and ends by unwinding. A target that exists
// and is not a regular file (/dev/null, a FIFO) is written in place; one of this process's open
// files (/dev/stdout, /dev/fd/N, /proc/self/fd/N) through a copy of its descriptor; a symbolic
// link is followed, and the file it leads to replaced (the link is kept).
// Every failure throws std::runtime_error("cannot write PATH: reason").
class OutputFile {
 public:
  explicit OutputFile(std::string path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  void Write(std::string_view data);
  void Commit();

 private:
  std::runtime_error Fail(const std::string& why) const;
  std::string path_, tmp_;
  std::string target_;  // where the links from path_ lead (path_ itself when it is no link)
  int fd_ = -1;
  int slot_ = -1;  // of tmp_ in the signal handler's list; -1 when not in it
};

// Whether the file name of `path` ends in `ext` (".json"), in any case: `x.JSON` is a JSON
// trace as `x.json` is (it was written as a binary Perfetto trace).
bool HasExtension(std::string_view path, std::string_view ext);

// Whether `path` can be written as OutputFile writes it, checked before a run's work so that a
// path in a missing folder, a directory or an unwritable folder is found at once rather than
// after it: a temporary file is made in its folder and removed again, the target neither
// created nor truncated. An existing device or FIFO is not opened (opening a FIFO blocks until
// a reader comes). Throws std::runtime_error("cannot write PATH: reason"), as OutputFile does
// (exit 1).
void CheckOutputWritable(const std::string& path);
// CheckOutputWritable for each path of `outputs` (flag, path) not empty.
void CheckOutputsWritable(const std::vector<std::pair<std::string, std::string>>& outputs);
// A SQLite store `path` given at `flag` (search and sweep --db) that cannot be created or opened
// as one: a folder missing or a file, a directory, a FIFO, device or socket. ConfigError at
// <command line> naming the flag and why (exit 2): SQLite said "unable to open database file"
// or "disk I/O error" after the experiment's checks (exit 1). An existing store is left as is.
void CheckStorePath(const std::string& flag, const std::string& path);

// Where RunChildProcess sends a child's stdout or stderr: /dev/null, opened in the child.
inline constexpr int kChildDevNull = -2;

// Runs argv[0] (looked up in PATH) with argv and waits for it; its exit status, or -1 when it
// could not start or died of a signal. `stdout_fd`, `stderr_fd` >= 0: the child's stdout and
// stderr go there; kChildDevNull: to /dev/null; -1: they are this process's. The child is
// killed (SIGTERM) when this process dies before it ends (PR_SET_PDEATHSIG), so that a SIGTERM or
// SIGINT to tpsim leaves no child running on (a plot script that drew its picture after tpsim
// had exited 143).
int RunChildProcess(const std::vector<std::string>& argv, int stdout_fd = -1, int stderr_fd = -1);

// A python3 that imports matplotlib (`tpsim plot`, `tpsim compare --plot`): $TPSIM_PYTHON, then
// python3 on PATH, then /usr/bin/python3; "" when none can. Where TPSIM_PYTHON is set and cannot
// (a missing file, no matplotlib), `warning`, when given, says so and which one runs instead: it
// was passed over silently.
std::string FindMatplotlibPython(std::string* warning = nullptr);

// What an empty mapping.partition, mapping.placement or mapping.collective means: the
// partitioner, placement and collective algorithm that lowering uses then. The run's title,
// `tpsim describe` and the memory estimate (mapping/estimate.cc) say and count these, and
// lowering resolves them here (mapping/gemm_emitter.cc, pipeline.cc, validate_mapping.cc).
inline constexpr std::string_view kDefaultPartition = "megatron";
inline constexpr std::string_view kDefaultPlacement = "linear";
inline constexpr std::string_view kDefaultCollective = "ring";
// `value`, or the default above where it is empty ("auto", a collective chosen per
// collective, is returned as it is).
std::string EffectivePartition(const std::string& value);
std::string EffectivePlacement(const std::string& value);
std::string EffectiveCollective(const std::string& value);

// Writes `data` to `path`: a regular file (or a new one) through a temporary file
// in its folder renamed over it; anything else (/dev/null, /dev/stdout, a FIFO) is
// written in place. Throws std::runtime_error("cannot write PATH: reason").
void WriteOutputFile(const std::string& path, std::string_view data);

// Refuses (ConfigError at "<command line>", naming `flag`) an output path that
// is the same file as one of `inputs` (after resolving links; files that do not
// exist yet are compared by their absolute paths).
void CheckOutputNotInput(const std::string& flag, const std::string& out,
                         const std::vector<std::string>& inputs);
// CheckOutputNotInput for each (flag, path) of `outputs` not empty, and refuses two of them
// naming the same file (one would be lost: written over by the other).
void CheckOutputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                  const std::vector<std::string>& inputs);

}  // namespace tpsim::config
