#pragma once
// Running a sweep: plan the points of a shard (filter, skip hashes already in the
// store), run them on N workers, commit each finished point at once, show
// progress, stop cleanly on SIGINT/SIGTERM.

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

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

// In this process, through sim::RunExperiment with `engine`.
PointRunner InProcessRunner(const std::string& engine);

// In a child process per point: `exe run POINT.textproto --engine ENGINE --out
// POINT.json --quiet` with the resolved point written to `tmp_dir`, killed after
// `time_limit_s` (status timeout). Exit 2 is invalid, 1 error, a signal crashed.
PointRunner ChildProcessRunner(const std::string& exe, const std::string& engine, double time_limit_s,
                               const std::string& tmp_dir);

// True when points of `engine` run in child processes (engines that elaborate a
// simulation kernel once per process).
bool RunsInChildProcess(const std::string& engine);

struct SweepOptions {
  std::string db;      // the SQLite store
  int jobs = 0;        // workers; 0 = all cores
  uint32_t shard = 0;  // run points with index % shards == shard
  uint32_t shards = 1;
  bool retry_failed = false;    // also rerun invalid and error rows
  bool tty = false;             // progress bar (else a plain line every few seconds)
  std::ostream* log = nullptr;  // progress and summary; null = std::cerr
  bool handle_signals = true;   // SIGINT/SIGTERM stop the sweep after in-flight points
};

struct SweepStats {
  uint64_t points = 0;      // in the shard, before the filter
  uint64_t filtered = 0;    // failed a `require`
  uint64_t duplicates = 0;  // same resolved config as an earlier point
  uint64_t skipped = 0;     // already in the store
  uint64_t ran = 0;         // stored in this run
  uint64_t ok = 0;
  uint64_t failed = 0;  // stored with a status other than ok
  bool interrupted = false;
};

// The most points one run (one shard) plans: a sweep beyond it is refused with its
// point count (ConfigError, exit 2) before anything runs.
inline constexpr uint64_t kMaxSweepPoints = 1000000;

// Throws StoreError when the store cannot be opened or written, config::ConfigError
// when the shard has more than kMaxSweepPoints points.
SweepStats RunSweep(const SweepSpec& spec, const SweepOptions& opts, const PointRunner& runner);

// Requests a stop as SIGINT does (for tests and embedders).
void RequestStop();

}  // namespace tpsim::sweep
