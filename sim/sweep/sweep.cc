#include "sim/sweep/sweep.h"

#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <iostream>

#include "sim/sweep/runner.h"
#include "sim/sweep/slurm.h"
#include "sim/sweep/spec.h"
#include "sim/sweep/store.h"

namespace tpsim::sweep {

const char* const kSweepUsage = R"(usage: tpsim sweep SWEEP [options]
       tpsim sweep merge OUT.sqlite IN.sqlite...

Runs every point of a sweep (configs/schema/sweep.proto: a base experiment and
axes over any field, cartesian and zipped, with optional `require` filters) and
stores one row per point in SQLite. Each finished point is committed at once:
Ctrl-C stops after the points in flight, a killed sweep loses no finished
point, and running the same command again skips the points already stored
(by the hash of their resolved config) and does the rest.

  SWEEP                sweep file (.textproto or .json)
  --jobs N             workers (default: all cores); analytical points run on
                       threads, tlm points in child processes with the sweep's
                       time_limit_s each
  --db FILE            SQLite store (default: SWEEP's file name with .sqlite,
                       in the current directory); table `points`
  --csv FILE           also export the store as CSV when done (no config column)
  --shard I/N          run only the points whose index % N == I (0 <= I < N)
  --retry-failed       also rerun points stored as invalid or error
                       (timeout and crashed points are always retried)
  --slurm              do not run: write DB-without-.sqlite.slurm/sweep.sbatch,
                       a job array of --array-size tasks (default 4), each
                       running one shard into DIR/shard-I.sqlite, submit it
                       with sbatch, and print the job id and the merge command
    --array-size N     number of array tasks (= shards)
    --partition P      Slurm partition

merge OUT IN...        merge sweep stores into OUT (created when missing); a
                       config hash present in several is kept once

Columns of `points`: config_hash, point_index, status (ok, invalid, error,
timeout, crashed), engine, one column per swept field named by its exact path
(e.g. "chip.noc.link_bandwidth_gbps", quote it in SQL), total_ps, prefill_ps,
decode_step_ps_mean, compute_ps, communication_ps, memory_ps, core_utilization,
spilled_bytes, contention (analytical: the share of the run sharing added; above
0.15 expect the TLM engine to differ by more than 10%), wall_ms, error, config.
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
    throw UsageError(flag + " expects an integer >= " + std::to_string(min) + ", got '" + v + "'");
  }
  return out;
}

std::string SelfExe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("tpsim") : p.string();
}

std::string Absolute(const std::string& p) {
  std::error_code ec;
  auto a = std::filesystem::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

int Merge(const std::vector<std::string>& args) {
  if (args.size() < 3) throw UsageError("merge needs OUT.sqlite and at least one IN.sqlite");
  std::vector<std::string> in(args.begin() + 2, args.end());
  MergeStats s = sweep::Merge(args[1], in);
  std::cout << "merged " << s.inputs << " stores: " << s.rows_read << " rows read, " << s.rows_added
            << " added to " << args[1] << "\n";
  return 0;
}

int Run(const std::vector<std::string>& args) {
  std::string path, db, csv, partition;
  SweepOptions opts;
  bool slurm = false, array_given = false, partition_given = false;
  int array_size = 4;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag) -> std::optional<std::string> {
      if (a == flag) {
        if (i + 1 >= args.size()) throw UsageError(flag + " needs a value");
        return args[++i];
      }
      if (a.starts_with(flag + "=")) return a.substr(flag.size() + 1);
      return std::nullopt;
    };
    if (auto v = value("--jobs")) {
      opts.jobs = ParseNumber<int>("--jobs", *v, 1);
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
    } else if (auto v = value("--array-size")) {
      array_size = ParseNumber<int>("--array-size", *v, 1);
      array_given = true;
    } else if (auto v = value("--partition")) {
      partition = *v;
      partition_given = true;
    } else if (a == "--slurm") {
      slurm = true;
    } else if (a == "--retry-failed") {
      opts.retry_failed = true;
    } else if (a.starts_with("-")) {
      throw UsageError("unknown option " + a);
    } else if (!path.empty()) {
      throw UsageError("more than one sweep file given");
    } else {
      path = a;
    }
  }
  if (path.empty()) throw UsageError("no sweep file given");
  if ((array_given || partition_given) && !slurm)
    throw UsageError("--array-size and --partition need --slurm");
  if (db.empty()) db = std::filesystem::path(path).stem().string() + ".sqlite";

  SweepSpec spec = LoadSweep(path);  // also checks the file before submitting

  if (slurm) {
    SlurmJob job;
    job.exe = SelfExe();
    job.sweep = Absolute(path);
    std::string abs_db = Absolute(db);
    job.dir = (abs_db.ends_with(".sqlite") ? abs_db.substr(0, abs_db.size() - 7) : abs_db) + ".slurm";
    job.array_size = array_size;
    job.partition = partition;
    job.jobs = opts.jobs;
    if (!spec.cfg.name().empty()) job.job_name = "tpsim-" + spec.cfg.name();
    std::string script;
    std::string id = SubmitSlurm(job, &script);
    std::cout << "submitted Slurm job " << id << ": " << array_size << " tasks (" << script << ")\n"
              << "when it has finished, merge the shards:\n  " << ShellQuote(job.exe) << " sweep merge "
              << ShellQuote(db) << " " << ShellQuote(job.dir) << "/shard-*.sqlite\n";
    return 0;
  }

  opts.db = db;
  opts.tty = ::isatty(2) == 1;
  PointRunner runner;
  std::string tmp;
  if (RunsInChildProcess(spec.engine)) {
    tmp = (std::filesystem::temp_directory_path() / ("tpsim-sweep-" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(tmp);
    runner = ChildProcessRunner(SelfExe(), spec.engine, spec.cfg.time_limit_s(), tmp);
  } else {
    runner = InProcessRunner(spec.engine);
  }
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
  std::cerr << "sweep " << (spec.cfg.name().empty() ? path : spec.cfg.name()) << ": " << s.points
            << " points";
  if (opts.shards > 1) std::cerr << " in shard " << opts.shard << "/" << opts.shards;
  std::cerr << "; ran " << s.ran << " (" << s.ok << " ok, " << s.failed << " failed), " << s.skipped
            << " already stored, " << s.filtered << " filtered";
  if (s.duplicates) std::cerr << ", " << s.duplicates << " duplicates";
  std::cerr << "; results in " << db << "\n";
  if (s.interrupted) {
    std::cerr << "sweep interrupted: every finished point is stored; run the same command again to resume\n";
    return 130;
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
