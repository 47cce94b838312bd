#include "sim/sweep/runner.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "sim/engine.h"
#include "sim/experiment.h"
#include "sim/run.h"
#include "sim/serving/serving.h"

namespace tpsim::sweep {

namespace {

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) { g_stop.store(true); }

// Installs SIGINT/SIGTERM handlers for its lifetime.
class StopSignals {
 public:
  explicit StopSignals(bool on) : on_(on) {
    if (!on_) return;
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    if (!on_) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  bool on_;
  struct sigaction old_int_ {
  }, old_term_{};
};

std::vector<double> Metrics(const config::Summary& s) {
  return {
      static_cast<double>(s.total_ps()), static_cast<double>(s.prefill_ps()),
      static_cast<double>(s.decode_step_ps_mean()), static_cast<double>(s.compute_ps()),
      static_cast<double>(s.communication_ps()), static_cast<double>(s.memory_ps()), s.core_utilization(),
      static_cast<double>(s.spilled_bytes()), s.contention(),
      // Energy: NULL when the chip has no energy model (sim/energy.h).
      s.energy_modelled() ? s.energy_j() : std::nan(""),
      s.energy_modelled() && s.energy_per_token_j() > 0 ? s.energy_per_token_j() : std::nan(""),
      s.energy_modelled() && s.decode_energy_per_token_j() > 0 ? s.decode_energy_per_token_j() : std::nan(""),
      s.energy_modelled() ? s.average_power_w() : std::nan(""),
      s.energy_modelled() ? s.static_energy_j() : std::nan("")};
}

// A serving point's metrics: the run columns NaN (NULL), then the serving columns in
// MetricColumns() order (serving::MetricValues). SLOs from workload.requests.
std::vector<double> ServingMetrics(const std::vector<std::pair<std::string, double>>& values) {
  std::vector<double> out(RunMetricColumns().size(), std::nan(""));
  for (const auto& [name, v] : values) out.push_back(v);
  return out;
}

std::vector<double> ServingMetrics(const serving::Metrics& m) {
  return ServingMetrics(serving::MetricValues(m));
}

bool IsServing(const sim::Experiment& e) { return e.cfg.workload().has_requests(); }

// `tpsim serve --metrics-json` output of a child process.
PointOutcome ServingFromJson(const std::string& text, const std::string& path) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    std::vector<std::pair<std::string, double>> values;
    for (const auto& [name, unused] : serving::MetricValues(serving::Metrics{}))
      values.emplace_back(
          name, j.at(name).is_null() ? std::nan("") : j.at(name).get<double>());  // null: no samples
    return PointOutcome{"ok", ServingMetrics(values), ""};
  } catch (const std::exception& err) {
    return PointOutcome{"crashed", {}, "unreadable serving metrics " + path + ": " + err.what()};
  }
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string RelocateChildDiags(const std::string& text, const std::string& written,
                               const config::SourceMap& locs) {
  std::istringstream in(text);
  std::string line, out;
  const std::string prefix = written + ":";
  while (std::getline(in, line)) {
    // "WRITTEN:LINE:COL: FIELD: value: rule": a line of the copy the child read.
    size_t at = std::string::npos;
    if (line.starts_with(prefix)) {
      size_t colon = line.find(':', prefix.size());                     // after LINE
      if (colon != std::string::npos) at = line.find(": ", colon + 1);  // after COL
    }
    if (at != std::string::npos) {
      const size_t field_end = line.find(": ", at + 2);
      const std::string field =
          line.substr(at + 2, field_end == std::string::npos ? std::string::npos : field_end - at - 2);
      const config::Location where = locs.Find(field);
      line =
          where.file + ":" + std::to_string(where.line) + ":" + std::to_string(where.col) + line.substr(at);
    }
    out += (out.empty() ? "" : "\n") + line;
  }
  return out;
}

namespace {

std::string Duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  auto t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  }
  return buf;
}

// Columns of the terminal on stderr; 80 when unknown.
int TerminalColumns() {
  struct winsize ws {};
  if (::ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

// Lowered Programs the in-process workers keep (a full reference-qwen3-4b Program
// is about 75,000 tasks, tens of MB).
constexpr size_t kCachedPrograms = 4;

}  // namespace

void RequestStop() { g_stop.store(true); }

bool RunsInChildProcess(const std::string& engine) { return engine == "tlm"; }

bool IsServingPoint(const sim::Experiment& e) { return IsServing(e); }

PointRunner SweepRunner(const std::string& exe, const std::string& engine, double time_limit_s,
                        const std::string& tmp_dir, uint64_t max_memory_bytes) {
  if (RunsInChildProcess(engine))
    return ChildProcessRunner(exe, engine, time_limit_s, tmp_dir, max_memory_bytes);
  // Serving points: serving::Serve cannot be stopped or memory-checked in this process (see
  // InProcessRunner); as TLM points, in a child, with no time limit (time_limit_s is TLM's).
  PointRunner served =
      ChildProcessRunner(exe, engine, std::numeric_limits<double>::infinity(), tmp_dir, max_memory_bytes);
  PointRunner in_process = InProcessRunner(engine, max_memory_bytes);
  return [served, in_process](const sim::Experiment& e, const Point& p) {
    return IsServing(e) ? served(e, p) : in_process(e, p);
  };
}

PointRunner InProcessRunner(const std::string& engine, uint64_t max_memory_bytes, bool cache_programs) {
  // One cache shared by the workers: points that differ only in chip timing fields
  // lower once (sim/run.h ProgramCache); freed with the runner.
  auto cache = cache_programs ? std::make_shared<sim::ProgramCache>(kCachedPrograms) : nullptr;
  return [engine, cache, max_memory_bytes](const sim::Experiment& e, const Point&) -> PointOutcome {
    try {
      if (IsServing(e)) {
        // A request stream: what `tpsim serve` prints, per point, after its --max-memory check.
        serving::CheckRequestMemory(e, max_memory_bytes);
        serving::ServeRun run = serving::Serve(e, engine);
        const auto& rq = e.cfg.workload().requests();
        return PointOutcome{
            "ok", ServingMetrics(serving::Summarize(run.outcome, rq.slo_ttft_ms(), rq.slo_tpot_ms())), ""};
      }
      return PointOutcome{"ok", Metrics(sim::RunSummary(e, engine, cache.get(), max_memory_bytes)), ""};
    } catch (const config::ConfigError& err) {
      std::string msg;
      for (const auto& d : err.diags()) msg += (msg.empty() ? "" : "\n") + d.str();
      return PointOutcome{"invalid", {}, msg};
    } catch (const sim::StallError& err) {
      return PointOutcome{"error", {}, std::string("simulation stalled: ") + err.what()};
    } catch (const std::bad_alloc&) {
      return PointOutcome{
          "error", {}, "out of memory (std::bad_alloc): the point needs more memory than is left"};
    } catch (const std::exception& err) {
      return PointOutcome{"error", {}, err.what()};
    }
  };
}

PointRunner ChildProcessRunner(const std::string& exe, const std::string& engine, double time_limit_s,
                               const std::string& tmp_dir, uint64_t max_memory_bytes) {
  if (time_limit_s <= 0) time_limit_s = 600;
  return [=](const sim::Experiment& e, const Point& p) -> PointOutcome {
    std::string stem = tmp_dir + "/point-" + std::to_string(p.index) + "-" + std::to_string(::getpid());
    std::string cfg = stem + ".textproto", json = stem + ".json", err = stem + ".err";
    {
      std::ofstream out(cfg, std::ios::binary);
      out << sim::ResolvedText(e);
      out.close();  // a failed flush shows only here
      if (!out) return PointOutcome{"error", {}, "cannot write " + cfg};
    }
    // `tpsim serve` applies its own --max-memory check (the synthetic request count).
    std::vector<std::string> args =
        IsServing(e) ? std::vector<std::string>{exe,        "serve",        cfg,
                                                "--engine", engine,         "--metrics-json",
                                                json,       "--max-memory", std::to_string(max_memory_bytes)}
                     : std::vector<std::string>{
                           exe,     "run", cfg,       "--engine",     engine,
                           "--out", json,  "--quiet", "--max-memory", std::to_string(max_memory_bytes)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // fork + exec rather than posix_spawn: the child asks to be killed when this
    // worker thread's process dies (PR_SET_PDEATHSIG), so a SIGKILLed sweep leaves no
    // orphaned simulation running. Only async-signal-safe calls after fork.
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the sweep died before prctl
      int in = ::open("/dev/null", O_RDONLY);
      int devnull = ::open("/dev/null", O_WRONLY);
      int errfd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || devnull < 0 || errfd < 0) ::_exit(126);
      ::dup2(in, 0);
      ::dup2(devnull, 1);
      ::dup2(errfd, 2);
      ::execv(exe.c_str(), argv.data());
      ::_exit(127);
    }
    const int rc = pid < 0 ? errno : 0;
    auto cleanup = [&] {
      std::error_code ec;
      for (const auto& f : {cfg, json, err}) std::filesystem::remove(f, ec);
    };
    if (rc != 0) {
      cleanup();
      return PointOutcome{"error", {}, "cannot start " + exe + ": " + std::strerror(rc)};
    }
    auto start = std::chrono::steady_clock::now();
    int status = 0;
    PointOutcome out;
    for (;;) {
      pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      bool stop = g_stop.load();
      if (stop || elapsed > time_limit_s || w < 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        cleanup();
        if (stop) return PointOutcome{"interrupted", {}, ""};
        char limit[32];  // 1e-300 s, not 0.000000 s
        std::snprintf(limit, sizeof limit, "%.6g", time_limit_s);
        return PointOutcome{"timeout", {}, std::string("ran past the time limit of ") + limit + " s"};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string err_text = Trim(ReadAll(err));
    if (WIFSIGNALED(status)) {
      out = PointOutcome{
          g_stop.load() ? "interrupted" : "crashed",
          {},
          "killed by signal " + std::to_string(WTERMSIG(status)) + (err_text.empty() ? "" : ": ") + err_text};
    } else if (WEXITSTATUS(status) == 2) {
      // Located in the sweep's files, not in the copy the child read (deleted below).
      out = PointOutcome{"invalid", {}, RelocateChildDiags(err_text, cfg, e.locs)};
    } else if (WEXITSTATUS(status) != 0) {
      out = PointOutcome{
          "error", {}, err_text.empty() ? "exit status " + std::to_string(WEXITSTATUS(status)) : err_text};
    } else if (IsServing(e)) {
      out = ServingFromJson(ReadAll(json), json);
    } else {
      config::Result r;
      google::protobuf::util::JsonParseOptions jo;
      jo.ignore_unknown_fields = true;
      auto st = google::protobuf::util::JsonStringToMessage(ReadAll(json), &r, jo);
      out = st.ok()
                ? PointOutcome{"ok", Metrics(r.summary()), ""}
                : PointOutcome{"crashed", {}, "unreadable result " + json + ": " + std::string(st.message())};
    }
    cleanup();
    return out;
  };
}

SweepStats RunSweep(const SweepSpec& spec, const SweepOptions& opts, const PointRunner& runner) {
  std::ostream& log = opts.log ? *opts.log : std::cerr;
  const uint64_t total = PointCount(spec);
  const uint64_t shards = std::max<uint32_t>(1, opts.shards);
  const uint64_t in_shard = total > opts.shard ? (total - opts.shard + shards - 1) / shards : 0;
  g_stop.store(false);
  StopSignals signals(opts.handle_signals);
  Store store(opts.db, spec.fields, SweepIdentity(spec), spec.cfg.name());
  SweepStats stats;

  // Planning is lazy: the workers take the shard's points in index order, one at a time,
  // decoding each from its index and applying the filters then, so the first point runs
  // at once whatever the sweep's size, and memory grows with the points visited, not
  // with the points in the sweep.
  std::mutex mu;  // guards the planner, the store and the counters below
  std::condition_variable cv;
  struct Done {
    std::string status;
    uint64_t index;
    bool missing_value;  // Store::Stored::missing_value
  };
  std::unordered_map<std::string, Done> done;
  for (auto& r : store.Rows())
    done.emplace(std::move(r.config_hash), Done{std::move(r.status), r.point_index, r.missing_value});
  std::unordered_set<std::string> planned_hashes;
  FileDigests digests;  // referenced files' contents, hashed once per sweep (PointHash)
  uint64_t cursor = shards > 1 ? opts.shard : 0;  // next index to plan
  uint64_t started = 0;                           // points handed to a worker or stored as unresolvable
  std::string store_error;
  bool dropped = false;  // a point in flight was stopped and not stored
  auto insert = [&](const Row& row, bool ok) {
    try {
      store.Insert(row);
    } catch (const std::exception& err) {
      if (store_error.empty()) store_error = err.what();
      g_stop.store(true);
      return false;
    }
    ++stats.ran;
    ++(ok ? stats.ok : stats.failed);
    return true;
  };
  struct Job {
    Point point;
    sim::Experiment e;
    std::string hash;
  };
  // The identity of a point whose overrides cannot be applied.
  auto unresolvable_hash = [&](const Point& p, std::string* key) {
    key->clear();
    for (const auto& s : p.sets) *key += s.path + "=" + s.value + "\n";
    return HashText("unresolvable point\n" + sim::ResolvedText(spec.base) + *key);
  };
  // A stored point found as point `p`: its row takes p's index and values when its stored index is
  // stale (an edited sweep moved the point), i.e. unless that index is p's or a smaller index of
  // the same point (two indices that resolve to one config keep the first). A row kept at its
  // index still takes that index's values when one of its swept fields is NULL: a sweep that did
  // not sweep the field stored it (an axis added since, or another sweep into the store), and
  // the value is the one the point ran with (the base experiment's for an added axis). With `mu`
  // held; false when the store failed.
  auto reindex = [&](const std::string& hash, Done& row, const Point& p, bool unresolvable) {
    const Point* at = &p;  // the point whose index and values the row keeps
    Point q;
    if (row.index < p.index && row.index < total) {
      try {
        q = PointAt(spec, row.index);
        std::string key;
        if (unresolvable ? unresolvable_hash(q, &key) == hash
                         : PointHash(MakeExperiment(spec, q), &digests) == hash)
          at = &q;
      } catch (const std::exception&) {
        // the stored index does not resolve: stale
      }
    }
    if (row.index == at->index && !row.missing_value) return true;
    std::vector<std::string> values;
    for (const auto& s : at->sets) values.push_back(s.value);
    try {
      store.SetPoint(hash, at->index, values);
    } catch (const std::exception& err) {
      if (store_error.empty()) store_error = err.what();
      g_stop.store(true);
      return false;
    }
    row.index = at->index;
    row.missing_value = false;
    return true;
  };
  // The next point of the shard to run, with `mu` held; false when there is none (the
  // shard is done, the limit reached or a stop requested). Points whose overrides cannot
  // be applied are stored as invalid here.
  auto next_job = [&](Job* job) -> bool {
    while (cursor < total && !g_stop.load()) {
      if (opts.limit > 0 && started >= opts.limit) {
        stats.limited = true;
        return false;
      }
      const uint64_t i = cursor;
      cursor = total - cursor > shards ? cursor + shards : total;
      ++stats.points;
      Point p = PointAt(spec, i);
      try {
        sim::Experiment e = MakeExperiment(spec, p);
        std::string undefined;
        if (!PassesFilter(spec, e, &undefined)) {
          ++stats.filtered;
          if (!undefined.empty()) ++stats.undefined[undefined];
          continue;
        }
        std::string hash = PointHash(e, &digests);
        if (!planned_hashes.insert(hash).second) {
          ++stats.duplicates;
          continue;
        }
        auto it = done.find(hash);
        if (it != done.end() &&
            !(it->second.status != "ok" && (opts.retry_failed || Retryable(it->second.status)))) {
          ++stats.skipped;
          if (!reindex(hash, it->second, p, false)) return false;
          continue;
        }
        ++started;
        for (const std::string& w : sim::IgnoredFields(e, IsServing(e))) ++stats.ignored[w];
        *job = Job{std::move(p), std::move(e), std::move(hash)};
        return true;
      } catch (const std::exception& err) {
        std::string key;
        const std::string hash = unresolvable_hash(p, &key);
        if (!planned_hashes.insert(hash).second) continue;
        auto it = done.find(hash);
        if (it != done.end() && !(opts.retry_failed || Retryable(it->second.status))) {
          ++stats.skipped;
          if (!reindex(hash, it->second, p, true)) return false;
          continue;
        }
        std::string msg = err.what();
        if (auto* ce = dynamic_cast<const config::ConfigError*>(&err)) {
          msg.clear();
          for (const auto& d : ce->diags()) msg += (msg.empty() ? "" : "\n") + d.str();
        }
        Row row{hash, i, "invalid", spec.engine, {}, {}, 0, msg, key};
        for (const auto& s : p.sets) row.field_values.push_back(s.value);
        ++started;
        if (!insert(row, false)) return false;
      }
    }
    return false;
  };

  unsigned jobs =
      opts.jobs > 0 ? static_cast<unsigned>(opts.jobs) : std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<uint64_t>(jobs, std::max<uint64_t>(in_shard, 1)));
  if (opts.limit > 0) jobs = static_cast<unsigned>(std::min<uint64_t>(jobs, opts.limit));
  size_t active = jobs;
  auto worker = [&] {
    for (;;) {
      Job job;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!next_job(&job)) break;
      }
      auto t0 = std::chrono::steady_clock::now();
      PointOutcome out;
      try {
        out = runner(job.e, job.point);
      } catch (const std::exception& err) {
        out = PointOutcome{"error", {}, err.what()};
      }
      if (out.status == "interrupted" || (g_stop.load() && Retryable(out.status))) {
        std::lock_guard<std::mutex> lock(mu);
        dropped = true;  // not stored: the sweep is unfinished even when no point is left to plan
        continue;
      }
      Row row;
      row.config_hash = job.hash;
      row.point_index = job.point.index;
      row.status = out.status;
      row.engine = spec.engine;
      for (const auto& s : job.point.sets) row.field_values.push_back(s.value);
      if (out.status == "ok") row.metrics = out.metrics;
      row.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      row.error = out.error;
      row.config = sim::ResolvedText(job.e);
      std::lock_guard<std::mutex> lock(mu);
      if (!insert(row, out.status == "ok")) break;
    }
    std::lock_guard<std::mutex> lock(mu);
    --active;
    cv.notify_all();
  };

  auto start = std::chrono::steady_clock::now();
  auto last_line = start;
  bool drew = false;
  // Progress over the shard's points visited (planned, filtered or skipped); the points
  // that will run are not known before the end (filters and the store decide).
  auto progress = [&](bool final) {
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const uint64_t visited = stats.points;
    double rate = el > 0 ? static_cast<double>(stats.ran) / el : 0;
    double visit_rate = el > 0 ? static_cast<double>(visited) / el : 0;
    double eta =
        visit_rate > 0 ? static_cast<double>(in_shard - std::min(visited, in_shard)) / visit_rate : NAN;
    char buf[256];
    if (opts.tty) {
      // One line, redrawn in place: fitted to the terminal's width (read at each draw,
      // so a resize is followed) and cleared to its end, so that it never wraps.
      std::snprintf(buf, sizeof(buf), " %llu/%llu  ran %llu  failed %llu  %.1f pt/s  ETA %s",
                    static_cast<unsigned long long>(visited), static_cast<unsigned long long>(in_shard),
                    static_cast<unsigned long long>(stats.ran), static_cast<unsigned long long>(stats.failed),
                    rate, Duration(eta).c_str());
      std::string text = buf;
      const int cols = TerminalColumns();
      const int width = std::min(30, cols - 1 - 2 - static_cast<int>(text.size()));
      std::string line;
      if (width >= 10) {
        int fill = in_shard ? static_cast<int>(static_cast<double>(width) * static_cast<double>(visited) /
                                               static_cast<double>(in_shard))
                            : width;
        std::string bar(static_cast<size_t>(std::clamp(fill, 0, width)), '#');
        bar.resize(static_cast<size_t>(width), '.');
        line = "[" + bar + "]";
      }
      line += text;
      if (static_cast<int>(line.size()) > cols - 1) line.resize(static_cast<size_t>(std::max(cols - 1, 0)));
      log << "\r" << line << "\x1b[K" << (final ? "\n" : "") << std::flush;
      drew = true;
    } else {
      std::snprintf(buf, sizeof(buf),
                    "sweep: %llu/%llu points visited, %llu run, %llu failed, %.1f points/s, ETA %s\n",
                    static_cast<unsigned long long>(visited), static_cast<unsigned long long>(in_shard),
                    static_cast<unsigned long long>(stats.ran), static_cast<unsigned long long>(stats.failed),
                    rate, Duration(eta).c_str());
      log << buf << std::flush;
    }
  };

  std::vector<std::thread> threads;
  for (unsigned t = 0; t < jobs; ++t) threads.emplace_back(worker);
  {
    std::unique_lock<std::mutex> lock(mu);
    while (active > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(opts.tty ? 200 : 1000));
      auto now = std::chrono::steady_clock::now();
      if (active > 0 && (opts.tty || now - last_line >= std::chrono::seconds(10))) {
        progress(false);
        last_line = now;
      }
    }
    if (opts.tty || drew || stats.ran > 0) progress(true);
  }
  for (auto& t : threads) t.join();
  stats.interrupted = g_stop.load() && store_error.empty() && (cursor < total || dropped);
  if (!store_error.empty()) throw StoreError(store_error);
  return stats;
}

}  // namespace tpsim::sweep
