#pragma once
// Running a sweep: take the points of a shard in index order, lazily (decode each
// from its index, filter, skip hashes already in the store), run them on N workers,
// commit each finished point at once, show progress, stop cleanly on SIGINT/SIGTERM.

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "sim/run.h"
#include "sim/sweep/spec.h"
#include "sim/sweep/store.h"

namespace tpsim::sweep {

// What running one point gave. `status` is ok, invalid, error, timeout or
// crashed (see store.h), or "interrupted" (not stored: the sweep is stopping).
struct PointOutcome {
  std::string status;
  std::vector<double> metrics;  // aligned with MetricColumns() when ok
  std::string error;
};

// Runs one point; called concurrently from worker threads. Must not throw (an
// exception is recorded as status "error").
using PointRunner = std::function<PointOutcome(const sim::Experiment& e, const Point& p)>;

// In this process, through sim::RunExperiment with `engine`; a point whose Program is
// estimated above `max_memory_bytes` (0: no limit) is stored as invalid, not run.
// `cache_programs`: keep the last few lowered Programs for points that lower the same one
// (sim::ProgramCache); off where no two points do (tpsim search runs one candidate per
// Program), so that finished Programs are freed at once. A serving point (IsServingPoint)
// runs serving::Serve here after `tpsim serve`'s --max-memory check
// (serving::CheckRequestMemory) but without a stop check: Serve takes no stop flag. `tpsim
// sweep` runs serving points in a child process instead (SweepRunner); `tpsim search` here.
PointRunner InProcessRunner(const std::string& engine, uint64_t max_memory_bytes = sim::DefaultMaxMemory(),
                            bool cache_programs = true);

// In a child process per point: `exe run POINT.textproto --engine ENGINE --out
// POINT.json --quiet` (a serving point: `exe serve POINT.textproto --engine ENGINE
// --metrics-json POINT.json`) with the resolved point written to `tmp_dir`, killed after
// `time_limit_s` (status timeout; 0 = 600, infinity: never) or at once when the sweep is
// stopped (status interrupted, not stored). Exit 2 is invalid, 1 error, a signal crashed.
// Both get `--max-memory max_memory_bytes`.
PointRunner ChildProcessRunner(const std::string& exe, const std::string& engine, double time_limit_s,
                               const std::string& tmp_dir,
                               uint64_t max_memory_bytes = sim::DefaultMaxMemory());

// A child's config errors (`text`, one per line) located in `written`, the copy of the point
// it read, moved to where `locs` (the point's experiment) has each error's field: the sweep
// point's `<sweep point N: FIELD=VALUE>` for a swept field, else the base experiment's line.
// They named the copy, deleted once the point ends. Other lines are kept as they are.
std::string RelocateChildDiags(const std::string& text, const std::string& written,
                               const config::SourceMap& locs);

// True when points of `engine` run in child processes (engines that elaborate a
// simulation kernel once per process).
bool RunsInChildProcess(const std::string& engine);

// True for a point that runs as `tpsim serve` (its workload has a request stream).
bool IsServingPoint(const sim::Experiment& e);

// The runner of `tpsim sweep`: in a child process of `exe` (ChildProcessRunner, files in
// `tmp_dir`) every point of an engine that RunsInChildProcess, with `time_limit_s`, and
// every serving point of another engine, without a time limit: `tpsim serve` applies its
// --max-memory check to it and a stop kills it at once. The other points run in this
// process (InProcessRunner).
PointRunner SweepRunner(const std::string& exe, const std::string& engine, double time_limit_s,
                        const std::string& tmp_dir, uint64_t max_memory_bytes = sim::DefaultMaxMemory());

struct SweepOptions {
  std::string db;      // the SQLite store
  int jobs = 0;        // workers; 0 = all cores
  uint32_t shard = 0;  // run points with index % shards == shard
  uint32_t shards = 1;
  bool retry_failed = false;    // also rerun invalid and error rows
  bool tty = false;             // progress bar (else a plain line every few seconds)
  std::ostream* log = nullptr;  // progress and summary; null = std::cerr
  bool handle_signals = true;   // SIGINT/SIGTERM stop the sweep after in-flight points
  // > 0: run (or store as unresolvable) at most this many points, the first ones of the
  // shard that still need running, then stop; running again continues after them.
  uint64_t limit = 0;
};

struct SweepStats {
  uint64_t points = 0;      // of the shard visited (all of them unless stopped), before the filter
  uint64_t filtered = 0;    // failed a `require`
  uint64_t duplicates = 0;  // same resolved config as an earlier point
  uint64_t skipped = 0;     // already in the store
  uint64_t ran = 0;         // stored in this run
  uint64_t ok = 0;
  uint64_t failed = 0;  // stored with a status other than ok
  bool interrupted = false;
  bool limited = false;  // stopped at SweepOptions::limit with points left
  // Per message of sim::IgnoredFields (a field the point's command does not read), the points
  // handed to a worker that it names: an axis that changes nothing ran its whole sweep silently.
  std::map<std::string, uint64_t> ignored;
  // Per require that was not a number (PassesFilter's warning), the points it filtered.
  std::map<std::string, uint64_t> undefined;
};

// Points are planned as the workers take them, so a sweep of any size (2^64 - 1 points at
// most) starts at once; memory grows with the points visited. Throws StoreError when the
// store cannot be opened or written.
SweepStats RunSweep(const SweepSpec& spec, const SweepOptions& opts, const PointRunner& runner);

// Requests a stop as SIGINT does (for tests and embedders).
void RequestStop();

}  // namespace tpsim::sweep
