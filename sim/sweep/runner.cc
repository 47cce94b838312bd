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
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "sim/engine.h"
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
  return {static_cast<double>(s.total_ps()),
          static_cast<double>(s.prefill_ps()),
          static_cast<double>(s.decode_step_ps_mean()),
          static_cast<double>(s.compute_ps()),
          static_cast<double>(s.communication_ps()),
          static_cast<double>(s.memory_ps()),
          s.core_utilization(),
          static_cast<double>(s.spilled_bytes()),
          s.contention()};
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
      values.emplace_back(name, j.at(name).get<double>());
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

// A point to run, kept small (the overrides are made again by the worker): a
// sweep of a million points plans in tens of MB.
struct Planned {
  uint64_t index;
  std::string hash;
};

}  // namespace

void RequestStop() { g_stop.store(true); }

bool RunsInChildProcess(const std::string& engine) { return engine == "tlm"; }

PointRunner InProcessRunner(const std::string& engine) {
  // One cache shared by the workers: points that differ only in chip timing fields
  // lower once (sim/run.h ProgramCache); freed with the runner.
  auto cache = std::make_shared<sim::ProgramCache>(kCachedPrograms);
  return [engine, cache](const sim::Experiment& e, const Point&) -> PointOutcome {
    try {
      if (IsServing(e)) {
        // A request stream: what `tpsim serve` prints, per point.
        serving::ServeRun run = serving::Serve(e, engine);
        const auto& rq = e.cfg.workload().requests();
        return PointOutcome{
            "ok", ServingMetrics(serving::Summarize(run.outcome, rq.slo_ttft_ms(), rq.slo_tpot_ms())), ""};
      }
      return PointOutcome{"ok", Metrics(sim::RunSummary(e, engine, cache.get())), ""};
    } catch (const config::ConfigError& err) {
      std::string msg;
      for (const auto& d : err.diags()) msg += (msg.empty() ? "" : "\n") + d.str();
      return PointOutcome{"invalid", {}, msg};
    } catch (const sim::StallError& err) {
      return PointOutcome{"error", {}, std::string("simulation stalled: ") + err.what()};
    } catch (const std::exception& err) {
      return PointOutcome{"error", {}, err.what()};
    }
  };
}

PointRunner ChildProcessRunner(const std::string& exe, const std::string& engine, double time_limit_s,
                               const std::string& tmp_dir) {
  if (time_limit_s <= 0) time_limit_s = 600;
  return [=](const sim::Experiment& e, const Point& p) -> PointOutcome {
    std::string stem = tmp_dir + "/point-" + std::to_string(p.index) + "-" + std::to_string(::getpid());
    std::string cfg = stem + ".textproto", json = stem + ".json", err = stem + ".err";
    {
      std::ofstream out(cfg, std::ios::binary);
      out << sim::ResolvedText(e);
      if (!out) return PointOutcome{"error", {}, "cannot write " + cfg};
    }
    std::vector<std::string> args =
        IsServing(e)
            ? std::vector<std::string>{exe, "serve", cfg, "--engine", engine, "--metrics-json", json}
            : std::vector<std::string>{exe, "run", cfg, "--engine", engine, "--out", json, "--quiet"};
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
        return PointOutcome{
            "timeout", {}, "ran past the time limit of " + std::to_string(time_limit_s) + " s"};
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
      out = PointOutcome{"invalid", {}, err_text};
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
  if (in_shard > kMaxSweepPoints) {
    // Refused before anything is planned: planning visits every point of the shard.
    throw config::ConfigError(config::Diag{
        spec.locs.Find(spec.cfg.axis_size() ? "axis" : "zip"), spec.cfg.axis_size() ? "axis" : "zip",
        total == UINT64_MAX ? std::string("more than 1.8e19 points") : std::to_string(total) + " points",
        (shards > 1 ? std::to_string(in_shard) + " points in shard " + std::to_string(opts.shard) + "/" +
                          std::to_string(shards) + "; a"
                    : std::string("a")) +
            " run takes at most " + std::to_string(kMaxSweepPoints) +
            " points: use fewer values, or --shard I/N with N >= " +
            std::to_string((total + kMaxSweepPoints - 1) / kMaxSweepPoints)});
  }
  g_stop.store(false);
  StopSignals signals(opts.handle_signals);
  Store store(opts.db, spec.fields, SweepIdentity(spec), spec.cfg.name());
  SweepStats stats;

  // Plan: which points of this shard still need running.
  std::unordered_map<std::string, std::string> done;
  for (auto& [hash, status] : store.Statuses()) done.emplace(std::move(hash), std::move(status));
  std::unordered_set<std::string> planned_hashes;
  std::vector<Planned> work;
  std::vector<Row> plan_failures;  // points whose overrides cannot even be applied
  for (uint64_t i = shards > 1 ? opts.shard : 0; i < total && !g_stop.load(); i += shards) {
    ++stats.points;
    Point p = PointAt(spec, i);
    std::string hash;
    try {
      sim::Experiment e = MakeExperiment(spec, p);
      if (!PassesFilter(spec, e)) {
        ++stats.filtered;
        continue;
      }
      hash = ConfigHash(e);
    } catch (const std::exception& err) {
      std::string key;
      for (const auto& s : p.sets) key += s.path + "=" + s.value + "\n";
      hash = HashText("unresolvable point\n" + sim::ResolvedText(spec.base) + key);
      std::string msg = err.what();
      if (auto* ce = dynamic_cast<const config::ConfigError*>(&err)) {
        msg.clear();
        for (const auto& d : ce->diags()) msg += (msg.empty() ? "" : "\n") + d.str();
      }
      Row row{hash, i, "invalid", spec.engine, {}, {}, 0, msg, key};
      for (const auto& s : p.sets) row.field_values.push_back(s.value);
      if (!planned_hashes.insert(hash).second) continue;
      auto it = done.find(hash);
      if (it != done.end() && !(opts.retry_failed || Retryable(it->second))) {
        ++stats.skipped;
      } else {
        plan_failures.push_back(std::move(row));
      }
      continue;
    }
    if (!planned_hashes.insert(hash).second) {
      ++stats.duplicates;
      continue;
    }
    auto it = done.find(hash);
    if (it != done.end() && !(it->second != "ok" && (opts.retry_failed || Retryable(it->second)))) {
      ++stats.skipped;
      continue;
    }
    work.push_back(Planned{i, std::move(hash)});
  }
  done.clear();

  std::mutex mu;  // guards the store and the counters below
  std::condition_variable cv;
  for (const auto& row : plan_failures) {
    store.Insert(row);
    ++stats.ran;
    ++stats.failed;
  }
  const uint64_t to_run = work.size() + plan_failures.size();

  unsigned jobs =
      opts.jobs > 0 ? static_cast<unsigned>(opts.jobs) : std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, std::max<size_t>(work.size(), 1)));
  std::atomic<size_t> next{0};
  size_t active = jobs;
  std::string store_error;
  auto worker = [&] {
    for (;;) {
      if (g_stop.load()) break;
      size_t k = next.fetch_add(1);
      if (k >= work.size()) break;
      const Planned& job = work[k];
      const Point point = PointAt(spec, job.index);
      auto t0 = std::chrono::steady_clock::now();
      PointOutcome out;
      sim::Experiment e;
      try {
        e = MakeExperiment(spec, point);
        out = runner(e, point);
      } catch (const std::exception& err) {
        out = PointOutcome{"error", {}, err.what()};
      }
      if (out.status == "interrupted" || (g_stop.load() && Retryable(out.status))) continue;
      Row row;
      row.config_hash = job.hash;
      row.point_index = job.index;
      row.status = out.status;
      row.engine = spec.engine;
      for (const auto& s : point.sets) row.field_values.push_back(s.value);
      if (out.status == "ok") row.metrics = out.metrics;
      row.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      row.error = out.error;
      row.config = sim::ResolvedText(e);
      std::lock_guard<std::mutex> lock(mu);
      try {
        store.Insert(row);
      } catch (const std::exception& err) {
        if (store_error.empty()) store_error = err.what();
        g_stop.store(true);
        break;
      }
      ++stats.ran;
      ++(out.status == "ok" ? stats.ok : stats.failed);
    }
    std::lock_guard<std::mutex> lock(mu);
    --active;
    cv.notify_all();
  };

  auto start = std::chrono::steady_clock::now();
  auto last_line = start;
  bool drew = false;
  auto progress = [&](bool final) {
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    uint64_t finished = stats.ran;
    double rate = el > 0 ? static_cast<double>(finished) / el : 0;
    double eta = rate > 0 ? static_cast<double>(to_run - finished) / rate : NAN;
    char buf[256];
    if (opts.tty) {
      // One line, redrawn in place: fitted to the terminal's width (read at each draw,
      // so a resize is followed) and cleared to its end, so that it never wraps.
      std::snprintf(buf, sizeof(buf), " %llu/%llu  failed %llu  %.1f pt/s  ETA %s",
                    static_cast<unsigned long long>(finished), static_cast<unsigned long long>(to_run),
                    static_cast<unsigned long long>(stats.failed), rate, Duration(eta).c_str());
      std::string text = buf;
      const int cols = TerminalColumns();
      const int width = std::min(30, cols - 1 - 2 - static_cast<int>(text.size()));
      std::string line;
      if (width >= 10) {
        int fill = to_run ? static_cast<int>(static_cast<uint64_t>(width) * finished / to_run) : width;
        std::string bar(static_cast<size_t>(fill), '#');
        bar.resize(static_cast<size_t>(width), '.');
        line = "[" + bar + "]";
      }
      line += text;
      if (static_cast<int>(line.size()) > cols - 1) line.resize(static_cast<size_t>(std::max(cols - 1, 0)));
      log << "\r" << line << "\x1b[K" << (final ? "\n" : "") << std::flush;
      drew = true;
    } else {
      std::snprintf(buf, sizeof(buf), "sweep: %llu/%llu points done, %llu failed, %.1f points/s, ETA %s\n",
                    static_cast<unsigned long long>(finished), static_cast<unsigned long long>(to_run),
                    static_cast<unsigned long long>(stats.failed), rate, Duration(eta).c_str());
      log << buf << std::flush;
    }
  };

  std::vector<std::thread> threads;
  if (!work.empty()) {
    for (unsigned t = 0; t < jobs; ++t) threads.emplace_back(worker);
  } else {
    active = 0;
  }
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
    if (opts.tty || drew || to_run > 0) progress(true);
  }
  for (auto& t : threads) t.join();
  stats.interrupted = g_stop.load() && store_error.empty() && stats.ran < to_run;
  if (!store_error.empty()) throw StoreError(store_error);
  return stats;
}

}  // namespace tpsim::sweep
