#include "sim/sweep/sweep.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <charconv>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>

#include "configs/files.h"
#include "sim/run.h"
#include "sim/sweep/runner.h"
#include "sim/sweep/slurm.h"
#include "sim/sweep/spec.h"
#include "sim/sweep/store.h"

namespace tpsim::sweep {

const char* const kSweepUsage = R"(usage: tpsim sweep SWEEP [options]
       tpsim sweep merge [--force] OUT.sqlite IN.sqlite...

Runs every point of a sweep (configs/schema/sweep.proto: a base experiment and
axes over any field, cartesian and zipped, with optional `require` filters) and
stores one row per point in SQLite. Each finished point is committed at once:
Ctrl-C lets the analytical points in flight finish and kills those running in
child processes (tlm and serving points: not stored, run again on resume), a
killed sweep loses no finished point, and running the same command again skips
the points already stored (by the hash of their resolved config and of the
files it reads: placement file, routing trace, request trace) and does the rest.

  SWEEP                sweep file (.textproto or .json)
  --jobs N             workers, 1 .. 256 (default: all cores); analytical points run on
                       threads, tlm points in child processes with the sweep's
                       time_limit_s each, serving points (workload.requests) in
                       child `tpsim serve` processes (tlm: with time_limit_s)
  --db FILE            SQLite store (default: SWEEP's file name with .sqlite,
                       in the current directory); table `points`
  --csv FILE           also export the store as CSV when done (no config column)
  --shard I/N          run only the points whose index % N == I (0 <= I < N)
  --limit N            run at most N points (the first of the shard not yet
                       stored), then stop; the same command continues after them.
                       Points are planned as they run, so a sweep of any size
                       starts at once
  --max-memory SIZE    store as invalid, without running it, a point whose Program
                       is estimated to need more than SIZE (8G, 512M; 0: no limit);
                       default: 80% of this machine's memory
  --retry-failed       also rerun points stored as invalid or error
                       (timeout and crashed points are always retried)
  --slurm              do not run: write DB-without-.sqlite.slurm/sweep.sbatch,
                       a job array of --array-size tasks (default 4), each
                       running one shard into DIR/shard-I.sqlite, submit it
                       with sbatch, and print the job id and the command that
                       merges the shards into --db
    --array-size N     number of array tasks (= shards), 1 .. 100000
    --partition P      Slurm partition(s), e.g. debug or a,b
    --account A        Slurm account to charge
    --time T           time limit per task (Slurm format: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S)
    --mem M            memory per task (e.g. 8G; K, M, G, T suffixes)
    --dry-run          write the script and print it, do not submit

merge OUT IN...        merge sweep stores into OUT (created when missing); a
                       config hash present in several is kept once. Refuses
                       (exit 1) stores of different sweeps (another base
                       experiment, axes, filters or engine; table `sweeps`)
    --force            merge them anyway

Columns of `points`: config_hash, point_index, status (ok, invalid, error,
timeout, crashed), engine, one column per swept field named by its exact path
(e.g. "chip.noc.link_bandwidth_gbps", quote it in SQL), total_ps, prefill_ps,
decode_step_ps_mean, compute_ps, communication_ps, memory_ps, core_utilization,
spilled_bytes, contention (analytical: the share of the run queues on links added;
above 0.5 check with the TLM engine, see README "TLM vs analytical"), energy_j,
energy_per_token_j, decode_energy_per_token_j, average_power_w, static_energy_j
(NULL when the chip has no energy block; see README "Energy"), the serving columns, wall_ms,
error, config.
Exit status: 0 done (failed points are recorded), 1 store or Slurm failure,
2 bad input, 130 interrupted.
)";

namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename T>
T ParseNumber(const std::string& flag, const std::string& v, T min) {
  T out{};
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || out < min) {
    // The type's top too: a value past it ("--shard 0/4294967296") said ">= 1", which it was.
    throw UsageError(flag + " expects an integer from " + std::to_string(min) + " to " +
                     std::to_string(std::numeric_limits<T>::max()) + ", got '" + v + "'");
  }
  return out;
}

// Removes the temporary folders (tpsim-sweep-PID) that sweeps killed with -9 left
// behind: those of this user whose process is gone.
void RemoveStaleTempDirs(const std::filesystem::path& tmp_root) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(tmp_root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("tpsim-sweep-")) continue;
    pid_t pid = 0;
    const std::string digits = name.substr(12);
    auto [p, perr] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (digits.empty() || perr != std::errc() || p != digits.data() + digits.size() || pid <= 0) continue;
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // still running (or not ours to ask)
    std::error_code rm;
    std::filesystem::remove_all(entry.path(), rm);
  }
}

// Refuses (UsageError, exit 2) a --csv file that cannot be written, before any point runs: it
// was found only when the sweep had run (exit 1). Probed as ExportCsv writes it
// (config::CheckOutputWritable: a temporary file in its folder, removed again).
void CheckCsvWritable(const std::string& csv) {
  try {
    config::CheckOutputWritable(csv);
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("--csv: ") + e.what());
  }
}

int Merge(const std::vector<std::string>& args) {
  bool force = false;
  std::vector<std::string> paths;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--force") {
      force = true;
    } else if (args[i].starts_with("-")) {
      throw UsageError("unknown merge option " + args[i]);
    } else {
      paths.push_back(args[i]);
    }
  }
  if (paths.size() < 2) throw UsageError("merge needs OUT.sqlite and at least one IN.sqlite");
  std::vector<std::string> in(paths.begin() + 1, paths.end());
  // The stores named, checked at the command line (exit 2): an empty OUT (a script's unset
  // variable) merged into no file and said "added to " (exit 0); a missing IN was exit 1.
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string which = i == 0 ? "OUT" : "IN";
    if (paths[i].empty())
      throw config::ConfigError(config::Diag{config::kCommandLine, which, "''",
                                             "is empty (a script's unset variable?): name a store"});
  }
  for (const std::string& p : in) {
    if (const std::string problem = StoreFileProblem(p); !problem.empty())
      throw config::ConfigError(config::Diag{config::kCommandLine, "IN", config::Clip(p), problem});
    if (const std::string problem = StoreWriterProblem(p); !problem.empty())
      throw config::ConfigError(config::Diag{config::kCommandLine, "IN", config::Clip(p), problem});
  }
  config::CheckStorePath("OUT", paths[0]);
  // OUT among the inputs: SQLite's "database is locked" (exit 1) before.
  config::CheckOutputNotInput("OUT", paths[0], in);
  MergeStats s = sweep::Merge(paths[0], in, force);
  std::cout << "merged " << s.inputs << " stores: " << s.rows_read << " rows read, " << s.rows_added
            << " added to " << paths[0] << "\n";
  return 0;
}

int Run(const std::vector<std::string>& args) {
  std::string path, db, csv;
  SweepOptions opts;
  SlurmJob job;
  bool slurm = false, dry_run = false;
  std::vector<std::string> slurm_only;  // Slurm options given, for the error without --slurm
  std::vector<std::string> forward;     // options each array task runs with (--max-memory, --retry-failed)
  int array_size = 4;
  uint64_t max_memory = sim::DefaultMaxMemory();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag) -> std::optional<std::string> {
      std::optional<std::string> v;
      if (a == flag) {
        if (i + 1 >= args.size()) throw UsageError(flag + " needs a value");
        if (const std::string rule = config::OptionAsValue(args[i + 1]); !rule.empty())
          throw UsageError(flag + " " + rule);
        v = args[++i];
      } else if (a.starts_with(flag + "=")) {
        v = a.substr(flag.size() + 1);
      }
      // An empty value (a script's unset variable) would read as the flag not given.
      if (v && v->empty()) throw UsageError(flag + " needs a value, got an empty one");
      return v;
    };
    if (auto v = value("--jobs")) {
      // As search and agree take it: 2147483647 was accepted, a thread a point up to the sweep's size.
      const std::string range = "--jobs must be 1 .. 256, got '" + *v + "'";
      try {
        opts.jobs = ParseNumber<int>("--jobs", *v, 1);
      } catch (const UsageError&) {
        throw UsageError(range);
      }
      if (opts.jobs > 256) throw UsageError(range);
    } else if (auto v = value("--db")) {
      db = *v;
    } else if (auto v = value("--csv")) {
      csv = *v;
    } else if (auto v = value("--shard")) {
      size_t slash = v->find('/');
      if (slash == std::string::npos) throw UsageError("--shard expects I/N, e.g. 0/4");
      opts.shards = ParseNumber<uint32_t>("--shard N", v->substr(slash + 1), 1);
      opts.shard = ParseNumber<uint32_t>("--shard I", v->substr(0, slash), 0);
      if (opts.shard >= opts.shards) throw UsageError("--shard I/N needs 0 <= I < N, got " + *v);
    } else if (auto v = value("--max-memory")) {
      forward.insert(forward.end(), {"--max-memory", *v});
      const std::optional<uint64_t> bytes = sim::ParseByteSize(*v);
      if (!bytes)
        throw UsageError("--max-memory expects a size such as 8G, 512M or 1000000, got '" + *v + "'");
      max_memory = *bytes;
    } else if (auto v = value("--limit")) {
      opts.limit = ParseNumber<uint64_t>("--limit", *v, 1);
    } else if (auto v = value("--array-size")) {
      array_size = ParseNumber<int>("--array-size", *v, 1);
      // As search takes it (a sweep took any int, search refused past 100000).
      if (array_size > 100000) throw UsageError("--array-size must be 1 .. 100000, got '" + *v + "'");
      slurm_only.push_back("--array-size");
    } else if (auto v = value("--partition")) {
      job.partition = *v;
      slurm_only.push_back("--partition");
    } else if (auto v = value("--account")) {
      job.account = *v;
      slurm_only.push_back("--account");
    } else if (auto v = value("--time")) {
      job.time = *v;
      slurm_only.push_back("--time");
    } else if (auto v = value("--mem")) {
      job.mem = *v;
      slurm_only.push_back("--mem");
    } else if (a == "--dry-run") {
      dry_run = true;
      slurm_only.push_back("--dry-run");
    } else if (a == "--slurm") {
      slurm = true;
    } else if (a == "--retry-failed") {
      opts.retry_failed = true;
      forward.push_back("--retry-failed");
    } else if (a.starts_with("-")) {
      throw UsageError("unknown option " + a);
    } else if (!path.empty()) {
      throw UsageError("more than one sweep file given");
    } else {
      path = a;
    }
  }
  if (path.empty()) throw UsageError("no sweep file given");
  if (!slurm && !slurm_only.empty()) throw UsageError(slurm_only.front() + " needs --slurm");
  if (slurm) {
    if (std::string problem = CheckSlurmJob(job); !problem.empty()) throw UsageError(problem);
    // The array's tasks run shards: these were dropped from their command silently (exit 0).
    if (opts.limit > 0)
      throw UsageError("--limit is not passed to a Slurm array's tasks; give it without --slurm");
    if (!csv.empty())
      throw UsageError(
          "--csv with --slurm: the shards are merged after the job; export then with "
          "`tpsim sweep SWEEP --db DB --csv FILE` (every point stored, nothing runs)");
    if (opts.shards > 1) throw UsageError("--shard with --slurm: the array's tasks are the shards");
  }
  if (db.empty()) db = std::filesystem::path(path).stem().string() + ".sqlite";
  if (slurm)
    if (std::string problem = CheckSlurmStore(db); !problem.empty()) throw UsageError(problem);

  SweepSpec spec = LoadSweep(path);  // also checks the file before submitting
  std::vector<std::string> inputs = sim::InputFiles(spec.base);
  inputs.push_back(path);
  config::CheckOutputs({{"--db", db}, {"--csv", csv}}, inputs);
  config::CheckStorePath("--db", db);
  CheckStoreWriter("--db", db, /*search=*/false);
  if (!csv.empty()) CheckCsvWritable(csv);

  if (slurm) {
    job.exe = SelfExe();
    job.sweep = Absolute(path);
    job.command = {"sweep", job.sweep};
    job.command.insert(job.command.end(), forward.begin(), forward.end());
    job.dir = SlurmDirOf(db);
    job.array_size = array_size;
    FitArraySize(&job, PointCount(spec), "sweep", "point", std::cerr);
    job.jobs = opts.jobs;
    job.db = db;
    if (!spec.cfg.name().empty()) job.job_name = "tpsim-" + spec.cfg.name();
    SubmitOrWrite(job, dry_run, std::cout);
    return 0;
  }

  opts.db = db;
  opts.tty = ::isatty(2) == 1;
  RemoveStaleTempDirs(std::filesystem::temp_directory_path());
  // TLM points and serving points run in child processes (SweepRunner): their files go here.
  const std::string tmp =
      (std::filesystem::temp_directory_path() / ("tpsim-sweep-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(tmp);
  // time_limit_s bounds each TLM point's child process; analytical points run without a limit (in
  // this process, serving points in a child), where it was accepted and ignored, silently.
  if (spec.cfg.time_limit_s() > 0 && !RunsInChildProcess(spec.engine))
    std::cerr << "tpsim: warning: time_limit_s is ignored: engine " << spec.engine
              << " runs its points without a time limit (it bounds engine tlm's points)\n";
  PointRunner runner = SweepRunner(SelfExe(), spec.engine, spec.cfg.time_limit_s(), tmp, max_memory);
  SweepStats s;
  try {
    s = RunSweep(spec, opts, runner);
  } catch (...) {
    if (!tmp.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(tmp, ec);
    }
    throw;
  }
  if (!tmp.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
  }
  // The name as other values are shown: clipped, a newline escaped (a 1,000,000-character name
  // was printed whole, "x\ny" on two lines).
  std::cerr << "sweep " << config::Clip(spec.cfg.name().empty() ? path : spec.cfg.name()) << ": " << s.points
            << " points";
  if (opts.shards > 1) std::cerr << " in shard " << opts.shard << "/" << opts.shards;
  std::cerr << "; ran " << s.ran << " (" << s.ok << " ok, " << s.failed << " failed), " << s.skipped
            << " already stored, " << s.filtered << " filtered";
  if (s.duplicates) std::cerr << ", " << s.duplicates << " duplicates";
  std::cerr << "; results in " << db << "\n";
  for (const auto& [w, n] : s.ignored)
    // Counted as the points are handed out: one that then fails validation is counted too ("points
    // run" said otherwise).
    std::cerr << "tpsim: warning: in " << n << (n == 1 ? " point: " : " points: ") << w << "\n";
  for (const auto& [w, n] : s.undefined)
    std::cerr << "tpsim: warning: " << n << (n == 1 ? " point filtered: " : " points filtered: ") << w
              << "\n";
  if (s.interrupted) {
    std::cerr << "sweep interrupted: every finished point is stored; run the same command again to resume\n";
    return 130;
  }
  if (s.limited) {
    std::cerr << "sweep stopped after --limit " << opts.limit
              << " points; run the same command again to continue\n";
  }
  if (!csv.empty()) {
    ExportCsv(db, csv);
    std::cerr << "wrote " << csv << "\n";
  }
  return 0;
}

}  // namespace

int SweepCommand(const std::vector<std::string>& args) {
  try {
    if (args.empty()) throw UsageError("no sweep file given");
    if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
      std::cout << kSweepUsage;
      return 0;
    }
    for (const auto& a : args) {
      if (a == "--help" || a == "-h") {
        std::cout << kSweepUsage;
        return 0;
      }
    }
    if (args[0] == "merge") return Merge(args);
    return Run(args);
  } catch (const UsageError& u) {
    std::cerr << "tpsim sweep: " << u.what() << "\n\n" << kSweepUsage;
    return 2;
  } catch (const config::ConfigError& e) {
    for (const auto& d : e.diags()) std::cerr << d.str() << "\n";
    return 2;
  } catch (const StoreError& e) {
    std::cerr << "tpsim sweep: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tpsim sweep: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace tpsim::sweep
