#pragma once
// The sweep store: one SQLite database, table `points`, one row per point.
//
// Columns (CSV exports them in this order; in SQL, select them by name):
//   config_hash TEXT PRIMARY KEY   PointHash of the resolved experiment (and of the
//                                  contents of the files it reads, spec.h)
//   point_index INTEGER            index in the sweep's cartesian order (updated when an
//                                  edited sweep finds a stored point at another index)
//   status TEXT                    ok | invalid | error | timeout | crashed
//   engine TEXT
//   "<field path>" ...             one per swept field, named by its exact path
//                                  (e.g. "chip.noc.link_bandwidth_gbps"; quote it
//                                  in SQL); integers and numbers stored as such,
//                                  other values as text
//   total_ps, prefill_ps, decode_step_ps_mean, compute_ps, communication_ps,
//   memory_ps, spilled_bytes INTEGER; core_utilization REAL   (NULL unless an ok run point)
//   ttft_p50_ms, ttft_p99_ms, tpot_p50_ms, tpot_p99_ms, latency_p99_ms,
//   requests_per_s, tokens_per_s, goodput_per_s REAL; completed, rejected INTEGER
//                                  (NULL unless an ok serving point)
//   wall_ms REAL                   time the point took to run
//   error TEXT                     the error for a failed point, else NULL
//   config TEXT                    the resolved experiment (protobuf text)
//
// Status meanings: `invalid` the config failed validation (exit 2 class);
// `error` the simulation failed (stall, I/O); `timeout` a child process ran past
// the time limit; `crashed` a child process died or gave no result. Rerunning a
// sweep skips every hash present except `timeout` and `crashed` rows, which are
// retried (and all failed ones with --retry-failed).
//
// Table `sweeps` (identity TEXT PRIMARY KEY, name TEXT): the SweepIdentity of every
// sweep that wrote into the store (one row, unless a store was reused for an edited
// sweep); `tpsim sweep merge` compares them so that stores of different sweeps are not
// mixed by accident.
//
// Durability: WAL journal, every Insert is its own committed transaction, so a
// SIGKILL at any moment leaves every inserted row intact.

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tpsim::sweep {

class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The metric columns, in column order: those of `tpsim run` points (RunMetricColumns),
// then those of serving points (ServingMetricColumns: a point whose experiment has a
// request stream, workload.requests, runs as `tpsim serve`). A point fills one set;
// the other is NULL.
const std::vector<std::string>& MetricColumns();
const std::vector<std::string>& RunMetricColumns();
const std::vector<std::string>& ServingMetricColumns();

struct Row {
  std::string config_hash;
  uint64_t point_index = 0;
  std::string status;  // ok, invalid, error, timeout, crashed
  std::string engine;
  std::vector<std::string> field_values;  // aligned with the store's swept fields
  std::vector<double> metrics;            // aligned with MetricColumns(); empty unless ok
  double wall_ms = 0;
  std::string error;
  std::string config;
};

// True for statuses that a rerun does again without --retry-failed.
bool Retryable(const std::string& status);

class Store {
 public:
  // Opens or creates `path`; creates the table and adds a column for each of
  // `fields` not yet there. Throws StoreError, also when another Store (in any process)
  // has `path` open: one writer at a time (an advisory flock on the file).
  // `identity` (SweepIdentity) and `name` are recorded in table `sweeps` when not empty.
  Store(const std::string& path, const std::vector<std::string>& fields, const std::string& identity = "",
        const std::string& name = "");
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  struct Stored {
    std::string config_hash, status;
    uint64_t point_index = 0;    // UINT64_MAX when NULL
    bool missing_value = false;  // a column of the swept fields is NULL (written by another sweep)
  };
  // Hash, status and index of every row.
  std::vector<Stored> Rows() const;
  // Inserts or replaces the row with the same hash, committed before returning.
  void Insert(const Row& row);
  // Sets the point_index and the swept fields' values (aligned with the store's swept fields) of
  // the row with hash `config_hash`, committed before returning: a stored point found at another
  // index of an edited sweep, or one stored by a sweep that did not sweep every field of this one.
  void SetPoint(const std::string& config_hash, uint64_t point_index,
                const std::vector<std::string>& field_values);
  int64_t Count() const;

  sqlite3* db() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::vector<std::string> fields_;
  sqlite3_stmt* insert_ = nullptr;
  sqlite3_stmt* set_point_ = nullptr;
  int lock_fd_ = -1;  // holds flock(LOCK_EX) on the file while this writer lives
};

// Quotes an SQL identifier: "a.b" (embedded quotes doubled).
std::string QuoteIdent(const std::string& name);

// Column names of table `points` of `db` (schema `schema`: main or an attached one).
std::vector<std::string> Columns(sqlite3* db, const std::string& schema = "main");

// Writes every row of `db_path` (all columns but `config`), ordered by point_index
// then config_hash, as CSV (RFC 4180 quoting, header row). Throws StoreError.
void ExportCsv(const std::string& db_path, const std::string& csv_path);

struct MergeStats {
  int64_t inputs = 0;
  int64_t rows_read = 0;
  int64_t rows_added = 0;  // new hashes, or a retryable row replaced by a finished one
};

// (identity, name) rows of table `sweeps` of the store at `path`; empty for a store
// written by a tpsim without that table. Throws StoreError.
std::vector<std::pair<std::string, std::string>> SweepsOf(const std::string& path);

// Why `path` cannot be opened as an existing store, "" for a regular file: "file not found", "is a
// directory: a store is a SQLite file", or "is not a regular file (a FIFO, device or socket): a
// store is a SQLite file" (SQLite waits forever on a FIFO and reads a device as a database).
std::string StoreFileProblem(const std::string& path);
// Why a store may not be merged now: "" when no tpsim sweep or search is writing it (Store's
// flock), else the rule (a merge took the rows written so far and exited 0).
std::string StoreWriterProblem(const std::string& path);

// `tpsim search` records its writers in table `sweeps` under names that start with this
// (search::Search: "search " and the experiment's name); a sweep under its sweep's name.
inline constexpr std::string_view kSearchWriterPrefix = "search ";
// A store at `path` (search or sweep `flag`, --db) that the other command wrote: a search's
// candidates and a sweep's points in one store left each other's columns NULL, which `tpsim
// plot` then refused (`swept field mapping.tp has 2 values (4, None)`). ConfigError at the
// command line naming the flag, the store and its writer (exit 2). A store that does not exist
// or records no writer (an older tpsim), or that is no store (its open says so), passes.
void CheckStoreWriter(const std::string& flag, const std::string& path, bool search);

// Merges the `points` tables of `inputs` into `out` (created when missing).
// Rows are keyed by config_hash: a hash already present is kept once, except
// that a retryable row (timeout, crashed) gives way to a finished one. Columns
// missing from `out` are added. Unless `force`, refuses (StoreError, nothing
// written) when the inputs and a non-empty `out` do not all hold points of one
// and the same sweep (table `sweeps`), naming the stores that differ. Throws
// StoreError.
MergeStats Merge(const std::string& out, const std::vector<std::string>& inputs, bool force = false);

}  // namespace tpsim::sweep
