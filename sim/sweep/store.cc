#include "sim/sweep/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "configs/files.h"
#include "configs/load.h"

namespace tpsim::sweep {

std::string StoreFileProblem(const std::string& path) {
  std::error_code ec;
  const auto kind = std::filesystem::status(path, ec).type();
  if (kind == std::filesystem::file_type::regular) return "";
  if (ec || kind == std::filesystem::file_type::not_found) return "file not found";
  if (kind == std::filesystem::file_type::directory) return "is a directory: a store is a SQLite file";
  return "is not a regular file (a FIFO, device or socket): a store is a SQLite file";
}

std::string StoreWriterProblem(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";  // StoreFileProblem says why it cannot be read
  const bool busy = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return busy ? "another tpsim sweep or search is writing this store: merge it when that has ended (its "
                "rows so far would be merged, the rest missed)"
              : "";
}

namespace {

// SQLite opens what it is given: a FIFO blocks, a device is read as a database.
void RequireRegularFile(const std::string& path) {
  if (const std::string problem = StoreFileProblem(path); !problem.empty())
    throw StoreError(path + ": " + problem);
}

const char* kCore[] = {"config_hash", "point_index", "status", "engine"};
const char* kTail[] = {"wall_ms", "error", "config"};

void Check(sqlite3* db, int rc, const std::string& what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    throw StoreError(what + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
  }
}

void Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw StoreError("sqlite: " + msg + " (in: " + sql.substr(0, 120) + ")");
  }
}

// A tpsim store holds table `points` with the identity columns, and optionally table
// `sweeps` (the identities of the sweeps that wrote it), and nothing else;
// an empty database is a new store. Anything else (another application's SQLite
// file, a file that is no database) is refused before a byte of it is changed.
void CheckIsStore(sqlite3* db, const std::string& path) {
  std::vector<std::string> tables;
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')", -1, &st,
                              nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = sqlite3_errmsg(db);
    sqlite3_finalize(st);
    throw StoreError(path + " is not a tpsim sweep store (" + msg + ")");
  }
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    std::string name = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    if (!name.starts_with("sqlite_")) tables.push_back(name);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) throw StoreError(path + " is not a tpsim sweep store (" + sqlite3_errmsg(db) + ")");
  if (tables.empty()) return;
  std::vector<std::string> cols;
  std::vector<std::string> known = tables;
  std::erase(known, std::string("sweeps"));
  if (known.size() == 1 && known[0] == "points") cols = Columns(db);
  std::vector<std::string> need(std::begin(kCore), std::end(kCore));
  need.push_back("config");
  bool ok = !cols.empty();
  for (const auto& c : need) ok = ok && std::find(cols.begin(), cols.end(), c) != cols.end();
  if (!ok) {
    throw StoreError(
        path + " is not a tpsim sweep store (it has table" + (tables.size() > 1 ? "s " : " ") +
        config::JoinNames(tables) +
        "; a store has `points` with config_hash, point_index, status, engine and config, and may have "
        "`sweeps`); "
        "choose another --db");
  }
}

sqlite3* OpenDb(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    throw StoreError("cannot open " + path + ": " + msg);
  }
  sqlite3_busy_timeout(db, 10000);
  try {
    CheckIsStore(db, path);
    Exec(db, "PRAGMA journal_mode=WAL");
    Exec(db, "PRAGMA synchronous=NORMAL");
  } catch (...) {
    sqlite3_close(db);
    throw;
  }
  return db;
}

// Metric columns stored as REAL; the others are integers (picoseconds, bytes, counts).
bool RealColumn(const std::string& m) {
  return m == "core_utilization" || m == "contention" || m.ends_with("_ms") || m.ends_with("_per_s") ||
         m.ends_with("_j") || m.ends_with("_w");
}

std::string CreateSql() {
  std::string sql =
      "CREATE TABLE IF NOT EXISTS points (config_hash TEXT PRIMARY KEY, point_index INTEGER, status TEXT, "
      "engine TEXT";
  for (const auto& m : MetricColumns()) sql += ", " + m + (RealColumn(m) ? " REAL" : " INTEGER");
  sql += ", wall_ms REAL, error TEXT, config TEXT)";
  return sql;
}

const char* kSweepsSql = "CREATE TABLE IF NOT EXISTS sweeps (identity TEXT PRIMARY KEY, name TEXT)";

bool HasTable(sqlite3* db, const std::string& schema, const std::string& table) {
  sqlite3_stmt* st = nullptr;
  std::string sql = "SELECT 1 FROM " + schema + ".sqlite_master WHERE type = 'table' AND name = ?";
  Check(db, sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), "prepare");
  sqlite3_bind_text(st, 1, table.c_str(), -1, SQLITE_TRANSIENT);
  bool found = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return found;
}

std::vector<std::pair<std::string, std::string>> ReadSweeps(sqlite3* db, const std::string& schema) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!HasTable(db, schema, "sweeps")) return out;
  sqlite3_stmt* st = nullptr;
  std::string sql = "SELECT identity, COALESCE(name, '') FROM " + schema + ".sweeps ORDER BY identity";
  Check(db, sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), "prepare");
  while (sqlite3_step(st) == SQLITE_ROW) {
    out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                     reinterpret_cast<const char*>(sqlite3_column_text(st, 1)));
  }
  sqlite3_finalize(st);
  return out;
}

void AddMissingColumns(sqlite3* db, const std::string& schema, const std::vector<std::string>& want) {
  std::vector<std::string> have = Columns(db, schema);
  for (const auto& c : want) {
    bool found = false;
    for (const auto& h : have) found = found || h == c;
    if (!found) {
      Exec(db, "ALTER TABLE " + schema + ".points ADD COLUMN " + QuoteIdent(c));
      have.push_back(c);
    }
  }
}

// Binds a swept value as an integer or a number when it is one, else as text,
// so that plots and ORDER BY treat numbers as numbers.
void BindValue(sqlite3_stmt* st, int i, const std::string& v) {
  int64_t iv = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), iv);
  if (!v.empty() && ec == std::errc() && p == v.data() + v.size()) {
    sqlite3_bind_int64(st, i, iv);
    return;
  }
  char* end = nullptr;
  double dv = v.empty() ? 0 : std::strtod(v.c_str(), &end);
  if (!v.empty() && *end == '\0' && std::isfinite(dv) && !std::isspace(static_cast<unsigned char>(v[0]))) {
    sqlite3_bind_double(st, i, dv);
    return;
  }
  sqlite3_bind_text(st, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

const std::vector<std::string>& RunMetricColumns() {
  static const std::vector<std::string> k = {
      "total_ps",         "prefill_ps",     "decode_step_ps_mean", "compute_ps",
      "communication_ps", "memory_ps",      "core_utilization",    "spilled_bytes",
      "contention",       "energy_j",       "energy_per_token_j",  "decode_energy_per_token_j",
      "average_power_w",  "static_energy_j"};
  return k;
}

const std::vector<std::string>& ServingMetricColumns() {
  static const std::vector<std::string> k = {
      "ttft_p50_ms",    "ttft_p99_ms",  "tpot_p50_ms",   "tpot_p99_ms", "latency_p99_ms",
      "requests_per_s", "tokens_per_s", "goodput_per_s", "completed",   "rejected"};
  return k;
}

const std::vector<std::string>& MetricColumns() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> all = RunMetricColumns();
    all.insert(all.end(), ServingMetricColumns().begin(), ServingMetricColumns().end());
    return all;
  }();
  return k;
}

bool Retryable(const std::string& status) { return status == "timeout" || status == "crashed"; }

std::string QuoteIdent(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::vector<std::string> Columns(sqlite3* db, const std::string& schema) {
  std::vector<std::string> cols;
  sqlite3_stmt* st = nullptr;
  std::string sql = "PRAGMA " + schema + ".table_info(points)";
  Check(db, sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), "table_info");
  while (sqlite3_step(st) == SQLITE_ROW) {
    cols.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 1)));
  }
  sqlite3_finalize(st);
  return cols;
}

Store::Store(const std::string& path, const std::vector<std::string>& fields, const std::string& identity,
             const std::string& name)
    : fields_(fields) {
  db_ = OpenDb(path);
  // One writer at a time: two sweeps (or a sweep and a search) on one store each ran every
  // point. An advisory lock on the file, apart from SQLite's own byte-range locks, released
  // with the process.
  lock_fd_ = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ >= 0 && ::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(lock_fd_);
    sqlite3_close(db_);
    if (err == EWOULDBLOCK)
      throw StoreError(path +
                       ": another tpsim sweep or search is writing this store: wait for it to end, or "
                       "give this one another --db (shards merge with tpsim sweep merge)");
    throw StoreError(path + ": cannot lock the store (" + std::strerror(err) + ")");
  }
  try {
    Exec(db_, CreateSql());
    AddMissingColumns(db_, "main", MetricColumns());  // a store of an older tpsim
    if (!identity.empty()) {
      Exec(db_, kSweepsSql);
      sqlite3_stmt* st = nullptr;
      Check(db_,
            sqlite3_prepare_v2(db_, "INSERT OR IGNORE INTO sweeps (identity, name) VALUES (?, ?)", -1, &st,
                               nullptr),
            "prepare");
      sqlite3_bind_text(st, 1, identity.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 2, name.c_str(), -1, SQLITE_TRANSIENT);
      int rc = sqlite3_step(st);
      sqlite3_finalize(st);
      Check(db_, rc, "record the sweep's identity");
    }
    AddMissingColumns(db_, "main", fields_);
    std::vector<std::string> cols(std::begin(kCore), std::end(kCore));
    cols.insert(cols.end(), fields_.begin(), fields_.end());
    cols.insert(cols.end(), MetricColumns().begin(), MetricColumns().end());
    cols.insert(cols.end(), std::begin(kTail), std::end(kTail));
    std::string sql = "INSERT OR REPLACE INTO points (";
    std::string qs;
    for (size_t i = 0; i < cols.size(); ++i) {
      sql += (i ? ", " : "") + QuoteIdent(cols[i]);
      qs += i ? ", ?" : "?";
    }
    sql += ") VALUES (" + qs + ")";
    Check(db_, sqlite3_prepare_v2(db_, sql.c_str(), -1, &insert_, nullptr), "prepare insert");
  } catch (...) {
    sqlite3_finalize(insert_);
    sqlite3_close(db_);
    if (lock_fd_ >= 0) ::close(lock_fd_);
    throw;
  }
}

Store::~Store() {
  sqlite3_finalize(set_point_);
  sqlite3_finalize(insert_);
  sqlite3_close(db_);
  if (lock_fd_ >= 0) ::close(lock_fd_);  // the lock goes with it
}

std::vector<Store::Stored> Store::Rows() const {
  std::vector<Stored> out;
  std::string missing;
  for (const auto& f : fields_) missing += (missing.empty() ? "" : " OR ") + QuoteIdent(f) + " IS NULL";
  const std::string sql =
      "SELECT config_hash, status, point_index, " + (missing.empty() ? "0" : missing) + " FROM points";
  sqlite3_stmt* st = nullptr;
  Check(db_, sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), "select");
  while (sqlite3_step(st) == SQLITE_ROW) {
    auto text = [&](int i) {
      const unsigned char* t = sqlite3_column_text(st, i);
      return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
    };
    const bool null_index = sqlite3_column_type(st, 2) == SQLITE_NULL;
    out.push_back(Stored{text(0), text(1),
                         null_index ? UINT64_MAX : static_cast<uint64_t>(sqlite3_column_int64(st, 2)),
                         sqlite3_column_int(st, 3) != 0});
  }
  sqlite3_finalize(st);
  return out;
}

void Store::SetPoint(const std::string& config_hash, uint64_t point_index,
                     const std::vector<std::string>& field_values) {
  if (!set_point_) {
    std::string sql = "UPDATE points SET point_index = ?";
    for (const auto& f : fields_) sql += ", " + QuoteIdent(f) + " = ?";
    sql += " WHERE config_hash = ?";
    Check(db_, sqlite3_prepare_v2(db_, sql.c_str(), -1, &set_point_, nullptr), "prepare");
  }
  sqlite3_reset(set_point_);
  sqlite3_clear_bindings(set_point_);
  int i = 1;
  sqlite3_bind_int64(set_point_, i++, static_cast<int64_t>(point_index));
  for (size_t f = 0; f < fields_.size(); ++f, ++i) {
    if (f < field_values.size()) BindValue(set_point_, i, field_values[f]);
  }
  sqlite3_bind_text(set_point_, i, config_hash.c_str(), static_cast<int>(config_hash.size()),
                    SQLITE_TRANSIENT);
  const int rc = sqlite3_step(set_point_);
  sqlite3_reset(set_point_);
  Check(db_, rc, "update point " + std::to_string(point_index));
}

int64_t Store::Count() const {
  sqlite3_stmt* st = nullptr;
  Check(db_, sqlite3_prepare_v2(db_, "SELECT COUNT(*) FROM points", -1, &st, nullptr), "count");
  int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  return n;
}

void Store::Insert(const Row& row) {
  sqlite3_stmt* st = insert_;
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  int i = 1;
  auto text = [&](const std::string& s) {
    sqlite3_bind_text(st, i++, s.c_str(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  };
  text(row.config_hash);
  sqlite3_bind_int64(st, i++, static_cast<int64_t>(row.point_index));
  text(row.status);
  text(row.engine);
  for (size_t f = 0; f < fields_.size(); ++f, ++i) {
    if (f < row.field_values.size()) BindValue(st, i, row.field_values[f]);
  }
  const auto& metrics = MetricColumns();
  for (size_t m = 0; m < metrics.size(); ++m, ++i) {
    if (m >= row.metrics.size() || std::isnan(row.metrics[m])) continue;  // NULL
    if (RealColumn(metrics[m])) {
      sqlite3_bind_double(st, i, row.metrics[m]);
    } else {
      sqlite3_bind_int64(st, i, static_cast<int64_t>(std::llround(row.metrics[m])));
    }
  }
  sqlite3_bind_double(st, i++, row.wall_ms);
  if (row.error.empty()) {
    ++i;
  } else {
    text(row.error);
  }
  text(row.config);
  Check(db_, sqlite3_step(st), "insert point " + std::to_string(row.point_index));
  sqlite3_reset(st);
}

void ExportCsv(const std::string& db_path, const std::string& csv_path) {
  sqlite3* db = OpenDb(db_path);
  std::ostringstream out;
  try {
    // Canonical order: identity, swept fields, metrics, wall_ms, error.
    std::vector<std::string> known(std::begin(kCore), std::end(kCore));
    known.insert(known.end(), MetricColumns().begin(), MetricColumns().end());
    known.insert(known.end(), std::begin(kTail), std::end(kTail));
    std::vector<std::string> have = Columns(db), cols;
    auto has = [&](const std::string& c) { return std::find(have.begin(), have.end(), c) != have.end(); };
    for (const char* c : kCore) {
      if (has(c)) cols.push_back(c);
    }
    for (const auto& c : have) {
      if (std::find(known.begin(), known.end(), c) == known.end()) cols.push_back(c);
    }
    for (const auto& c : MetricColumns()) {
      if (has(c)) cols.push_back(c);
    }
    for (const char* c : {"wall_ms", "error"}) {
      if (has(c)) cols.push_back(c);
    }
    if (cols.empty()) throw StoreError(db_path + " has no points table");
    std::string sql = "SELECT ";
    for (size_t i = 0; i < cols.size(); ++i) {
      sql += (i ? ", " : "") + QuoteIdent(cols[i]);
      out << (i ? "," : "") << CsvField(cols[i]);
    }
    out << "\n";
    sql += " FROM points ORDER BY point_index, config_hash";
    sqlite3_stmt* st = nullptr;
    Check(db, sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), "select");
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int i = 0; i < static_cast<int>(cols.size()); ++i) {
        const unsigned char* t = sqlite3_column_text(st, i);
        out << (i ? "," : "") << (t ? CsvField(reinterpret_cast<const char*>(t)) : "");
      }
      out << "\n";
    }
    sqlite3_finalize(st);
    try {
      config::WriteOutputFile(csv_path, out.str());
    } catch (const std::runtime_error& e) {
      throw StoreError(e.what());
    }
  } catch (...) {
    sqlite3_close(db);
    throw;
  }
  sqlite3_close(db);
}

std::vector<std::pair<std::string, std::string>> SweepsOf(const std::string& path) {
  RequireRegularFile(path);
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    throw StoreError("cannot open " + path + ": " + msg);
  }
  try {
    auto out = ReadSweeps(db, "main");
    sqlite3_close(db);
    return out;
  } catch (const StoreError& e) {
    sqlite3_close(db);
    throw StoreError(path + ": not a tpsim sweep store (" + e.what() + ")");
  }
}

void CheckStoreWriter(const std::string& flag, const std::string& path, bool search) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return;
  std::vector<std::pair<std::string, std::string>> writers;
  try {
    writers = SweepsOf(path);
  } catch (const StoreError&) {
    return;  // no store: opening it says so
  }
  for (const auto& [identity, name] : writers) {
    if (name.starts_with(kSearchWriterPrefix) == search) continue;
    throw config::ConfigError(
        config::Diag{config::kCommandLine, flag, config::Clip(path),
                     "holds the points of " + std::string(search ? "a sweep (" : "a search (") +
                         (name.empty() ? "unnamed" : name) +
                         "): tpsim search and tpsim sweep each need a store of their own " +
                         "(plots read every row); name another file"});
  }
}

namespace {

// "NAME (identity)" list of a store's sweeps, or why there is none.
std::string DescribeSweeps(const std::vector<std::pair<std::string, std::string>>& sweeps) {
  if (sweeps.empty()) return "no recorded sweep (written by an older tpsim)";
  std::string s;
  for (const auto& [id, name] : sweeps)
    s += (s.empty() ? "" : ", ") + (name.empty() ? "unnamed" : name) + " (" + id + ")";
  return s;
}

// Throws StoreError unless every store holds exactly the one same sweep (an empty `out`
// store takes no part).
void CheckOneSweep(const std::string& out, const std::vector<std::string>& inputs) {
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> stores;
  if (std::ifstream(out).good()) {
    sqlite3* probe = nullptr;
    bool has_rows = false;
    const bool opened = sqlite3_open_v2(out.c_str(), &probe, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK;
    // Another file than a store is named (HasTable said only "prepare: file is not a database").
    try {
      if (opened) CheckIsStore(probe, out);
    } catch (...) {
      sqlite3_close(probe);
      throw;
    }
    if (opened && HasTable(probe, "main", "points")) {
      sqlite3_stmt* st = nullptr;
      if (sqlite3_prepare_v2(probe, "SELECT 1 FROM points LIMIT 1", -1, &st, nullptr) == SQLITE_OK)
        has_rows = sqlite3_step(st) == SQLITE_ROW;
      sqlite3_finalize(st);
    }
    sqlite3_close(probe);
    if (has_rows) stores.emplace_back(out, SweepsOf(out));
  }
  for (const auto& in : inputs) stores.emplace_back(in, SweepsOf(in));
  for (const auto& [path, sweeps] : stores) {
    if (sweeps.size() != 1 && &path == &stores.front().first) {
      throw StoreError("refusing to merge: " + path + " holds " + DescribeSweeps(sweeps) +
                       ", not one sweep (--force merges it anyway)");
    }
    if (sweeps.size() != 1 || sweeps != stores.front().second) {
      throw StoreError("refusing to merge stores of different sweeps: " + stores.front().first + " holds " +
                       DescribeSweeps(stores.front().second) + ", " + path + " holds " +
                       DescribeSweeps(sweeps) + " (--force merges them anyway)");
    }
  }
}

}  // namespace

MergeStats Merge(const std::string& out, const std::vector<std::string>& inputs, bool force) {
  MergeStats stats;
  // SQLite would wait forever on a FIFO: every store must be a regular file (OUT may not exist yet).
  for (const std::string& in : inputs) RequireRegularFile(in);
  if (std::filesystem::exists(out)) RequireRegularFile(out);
  if (!force) CheckOneSweep(out, inputs);
  // A merge that fails leaves no OUT it created (one holding the inputs before the failure, or
  // none, was left); each input is checked whole before anything is written.
  const bool created = !std::filesystem::exists(out);
  sqlite3* db = OpenDb(out);
  try {
    Exec(db, CreateSql());
    Exec(db, kSweepsSql);
    for (const auto& in : inputs) {
      {
        // Open it first so a missing or non-database input is an error, not an empty attach.
        sqlite3* probe = nullptr;
        int rc = sqlite3_open_v2(in.c_str(), &probe, SQLITE_OPEN_READONLY, nullptr);
        bool ok = rc == SQLITE_OK;
        try {
          if (ok) CheckIsStore(probe, in);
          ok = ok && !Columns(probe).empty();
        } catch (const StoreError&) {
          ok = false;
        }
        // A damaged file (truncated, overwritten) failed half-way through the merge as "database disk
        // image is malformed (in: DELETE FROM main.points WH", naming no file.
        std::string health;
        if (ok) {
          sqlite3_stmt* qc = nullptr;
          if (sqlite3_prepare_v2(probe, "PRAGMA quick_check(1)", -1, &qc, nullptr) == SQLITE_OK &&
              sqlite3_step(qc) == SQLITE_ROW && sqlite3_column_text(qc, 0))
            health = reinterpret_cast<const char*>(sqlite3_column_text(qc, 0));
          else
            health = sqlite3_errmsg(probe);
          sqlite3_finalize(qc);
        }
        sqlite3_close(probe);
        if (!ok) throw StoreError(in + ": not a sweep database (no points table)");
        std::replace(health.begin(), health.end(), '\n', ' ');
        if (health != "ok")
          throw StoreError(in + ": the store is damaged (SQLite: " + config::Clip(health, 160) + ")");
      }
      sqlite3_stmt* st = nullptr;
      Check(db, sqlite3_prepare_v2(db, "ATTACH DATABASE ? AS src", -1, &st, nullptr), "attach");
      sqlite3_bind_text(st, 1, in.c_str(), -1, SQLITE_TRANSIENT);
      int rc = sqlite3_step(st);
      sqlite3_finalize(st);
      Check(db, rc, "attach " + in);
      try {
        std::vector<std::string> cols = Columns(db, "src");
        AddMissingColumns(db, "main", cols);
        std::string list;
        for (size_t i = 0; i < cols.size(); ++i) list += (i ? ", " : "") + QuoteIdent(cols[i]);
        Exec(db, "BEGIN IMMEDIATE");
        Exec(db,
             "DELETE FROM main.points WHERE status IN ('timeout', 'crashed') AND config_hash IN "
             "(SELECT config_hash FROM src.points WHERE status NOT IN ('timeout', 'crashed'))");
        Exec(db, "INSERT OR IGNORE INTO main.points (" + list + ") SELECT " + list + " FROM src.points");
        stats.rows_added += sqlite3_changes(db);
        if (HasTable(db, "src", "sweeps"))
          Exec(db, "INSERT OR IGNORE INTO main.sweeps SELECT identity, name FROM src.sweeps");
        Exec(db, "COMMIT");
        sqlite3_stmt* cnt = nullptr;
        Check(db, sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM src.points", -1, &cnt, nullptr), "count");
        if (sqlite3_step(cnt) == SQLITE_ROW) stats.rows_read += sqlite3_column_int64(cnt, 0);
        sqlite3_finalize(cnt);
      } catch (...) {
        sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
        sqlite3_exec(db, "DETACH DATABASE src", nullptr, nullptr, nullptr);
        throw;
      }
      Exec(db, "DETACH DATABASE src");
      ++stats.inputs;
    }
  } catch (...) {
    sqlite3_close(db);
    if (created) {
      std::error_code ec;
      for (const char* tail : {"", "-journal", "-wal", "-shm"}) std::filesystem::remove(out + tail, ec);
    }
    throw;
  }
  sqlite3_close(db);
  return stats;
}

}  // namespace tpsim::sweep
