#include "sim/cli/serve.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <utility>

#include "configs/files.h"
#include "mapping/estimate.h"
#include "sim/cli/args.h"
#include "sim/cli/progress_line.h"
#include "sim/engine.h"
#include "sim/experiment.h"
#include "sim/run.h"

namespace tpsim::cli {

using config::ConfigError;
using config::Diag;
using sim::Ps;
using namespace serving;

std::vector<traces::CounterTrack> KvCounters(const serving::ServeOutcome& out) {
  std::vector<traces::CounterTrack> tracks;
  std::vector<std::vector<const KvSample*>> samples;  // per track, in time order
  for (const KvSample& k : out.kv) {
    size_t g = 0;
    while (g < tracks.size() && tracks[g].name != "kv blocks used (" + k.group + ")") ++g;
    if (g == tracks.size()) {
      tracks.push_back({"kv blocks used (" + k.group + ")", "blocks", {}});
      samples.emplace_back();
    }
    samples[g].push_back(&k);
  }
  for (size_t g = 0; g < tracks.size(); ++g) {
    const std::vector<const KvSample*>& ks = samples[g];
    for (size_t i = 0; i < ks.size(); ++i) {
      tracks[g].points.emplace_back(ks[i]->start_ps, static_cast<double>(ks[i]->used_blocks));
      // An iteration that leaves nothing running frees every block (running requests hold
      // them all): 0 from its end until the next iteration, which may start long after (the
      // counter held the last iteration's blocks through the idle gap). Where the next one
      // starts as this one ends, its own point says what is held.
      const bool idle_after = i + 1 == ks.size() || ks[i + 1]->start_ps > ks[i]->time_ps;
      if (ks[i]->running == 0 && idle_after) tracks[g].points.emplace_back(ks[i]->time_ps, 0.0);
    }
    // Every request has left after the group's last iteration (the scheduler stops only then).
    if (!ks.empty() && ks.back()->running != 0) tracks[g].points.emplace_back(ks.back()->time_ps, 0.0);
  }
  return tracks;
}

void WriteServeTrace(const std::string& path, const serving::ServeOutcome& out,
                     const std::string& config_text) {
  std::vector<traces::ServingIteration> its;
  its.reserve(out.kv.size());
  for (const KvSample& k : out.kv) {
    traces::ServingIteration it;
    it.group = k.group;
    it.start_ps = k.start_ps;
    it.end_ps = k.time_ps;
    it.prefill_tokens = k.prefill_tokens;
    it.decode_tokens = k.decode_tokens;
    it.sequences = k.sequences;
    it.running = k.running;
    it.waiting = k.waiting;
    it.kv_blocks = k.used_blocks;
    its.push_back(std::move(it));
  }
  traces::WriteServingTrace(path, its, KvCounters(out), config_text);
}

namespace {

const char* kUsage =
    "usage: tpsim serve EXPERIMENT [--set FIELD=VALUE]... [--model MODEL] [--engine analytical|tlm]\n"
    "                   [--requests-csv out.csv] [--kv-csv kv.csv] [--slo-ttft-ms X] [--slo-tpot-ms Y]\n"
    "                   [--trace out.pftrace|out.json] [--metrics-json m.json] [--max-memory SIZE]\n"
    "Runs the experiment's request stream (workload.requests) through continuous batching\n"
    "(mapping.serving) and prints TTFT / TPOT / latency percentiles, throughput and goodput.\n"
    "--trace writes one slice per iteration and the KV-cache use as a counter track.\n"
    "--metrics-json writes the summary metrics (percentiles, throughput, goodput) as JSON.\n"
    "--model replaces the experiment's model (a catalog name or a HuggingFace config.json).\n"
    "Lines starting with 'caveat:' name the modelling simplifications that apply to the run.\n"
    "SLOs: --slo-ttft-ms / --slo-tpot-ms, else workload.requests.slo_ttft_ms / slo_tpot_ms.\n"
    "--max-memory SIZE (8G, 512M; 0: no limit; default 80% of this machine's memory) refuses,\n"
    "before drawing or reading them, synthetic requests or a trace's rows whose records would\n"
    "take more (512 B each).\n";

double ParsePositive(const std::string& flag, const std::string& v) {
  double d = 0;
  try {
    d = config::ParseNumber(v);
  } catch (const std::invalid_argument&) {
  }
  if (!(d > 0)) throw ConfigError(Diag{config::kCommandLine, flag, v, "must be a finite number > 0"});
  return d;
}

// Written whole to a temporary file and renamed; a failure is std::runtime_error (exit 1).
void WriteFile(const std::string& path, const std::string& text) { config::WriteOutputFile(path, text); }

}  // namespace

int ServeCommand(const std::vector<std::string>& args) {
  try {
    std::string path, engine_flag, requests_csv, kv_csv, trace_path, model;
    double slo_ttft_flag = 0, slo_tpot_flag = 0;
    std::string metrics_json;
    uint64_t max_memory = sim::DefaultMaxMemory();
    std::vector<sim::Override> sets;
    bool have_path = false;
    std::map<std::string, std::string> given;  // the one-value flags seen, with their values
    for (size_t i = 0; i < args.size(); ++i) {
      // "--flag=VALUE" as "--flag VALUE", as tpsim's other commands take it (cli::FlagAt).
      std::string a = args[i];
      std::optional<std::string> inline_value;
      if (const size_t eq = a.find('='); a.starts_with("--") && eq != std::string::npos) {
        inline_value = a.substr(eq + 1);
        a.resize(eq);
      }
      auto raw_value = [&]() -> std::string {
        if (inline_value) {
          if (inline_value->empty())
            throw ConfigError(Diag{config::kCommandLine, a, "", "needs a value, got an empty one"});
          return *std::exchange(inline_value, std::nullopt);
        }
        if (i + 1 >= args.size()) throw ConfigError(Diag{config::kCommandLine, a, "", "needs a value"});
        if (const std::string rule = config::OptionAsValue(args[i + 1]); !rule.empty())
          throw ConfigError(Diag{config::kCommandLine, a, "", rule});
        // An empty value (a script's unset variable) would read as the flag not given.
        if (args[i + 1].empty())
          throw ConfigError(Diag{config::kCommandLine, a, "", "needs a value, got an empty one"});
        return args[++i];
      };
      // A flag of one value given twice is refused (GivenTwice).
      auto value = [&]() -> std::string {
        const std::string v = raw_value();
        if (const std::string twice = GivenTwice(&given, a, v); !twice.empty())
          throw ConfigError(Diag{config::kCommandLine, a, v, twice});
        return v;
      };
      // --help=X is no help (tpsim run refuses it as an unknown option; it printed the usage).
      if ((a == "--help" || a == "-h") && !inline_value) {
        std::cout << kUsage;
        return 0;
      } else if (a == "--set") {
        sets.push_back(sim::ParseOverride(value()));
      } else if (a == "--engine") {
        engine_flag = value();
      } else if (a == "--model") {
        model = value();
      } else if (a == "--requests-csv") {
        requests_csv = value();
      } else if (a == "--kv-csv") {
        kv_csv = value();
      } else if (a == "--trace") {
        trace_path = value();
      } else if (a == "--metrics-json") {
        metrics_json = value();
      } else if (a == "--slo-ttft-ms") {
        slo_ttft_flag = ParsePositive(a, value());
      } else if (a == "--slo-tpot-ms") {
        slo_tpot_flag = ParsePositive(a, value());
      } else if (a == "--max-memory") {
        const std::string v = value();
        const std::optional<uint64_t> bytes = sim::ParseByteSize(v);
        if (!bytes)
          throw ConfigError(Diag{config::kCommandLine, a, v, "expects a size such as 8G, 512M or 1000000"});
        max_memory = *bytes;
      } else if (!a.empty() && a[0] == '-') {
        // With the value it was given ("--jobs=4": "--jobs: 4", not "--jobs: " with it dropped).
        throw ConfigError(Diag{config::kCommandLine, a, inline_value.value_or(""),
                               "unknown option (tpsim serve --help lists them)"});
      } else if (!have_path) {
        // An empty word (a script's unset variable) would read as no experiment, as `run` and
        // `describe` refuse it; it ran serving-fused when one followed.
        if (a.empty())
          throw ConfigError(Diag{config::kCommandLine, "EXPERIMENT", "",
                                 "is empty (a script's unset variable?); name a file or a shipped "
                                 "experiment"});
        path = a;
        have_path = true;
      } else {
        throw ConfigError(Diag{config::kCommandLine, "EXPERIMENT", a, "only one experiment file"});
      }
    }
    if (path.empty()) {
      // What is missing first (the usage alone said nothing of it); `run` and `describe` take
      // a default experiment, which holds no request stream.
      std::cerr << "tpsim serve: needs an EXPERIMENT with a request stream (workload.requests): a file, or "
                   "a shipped one (serving-fused, serving-disaggregated)\n\n"
                << kUsage;
      return 2;
    }
    sim::Experiment e = sim::LoadExperiment(path, sets, model);
    const config::Experiment& cfg = e.cfg;
    config::CheckOutputs({{"--requests-csv", requests_csv},
                          {"--kv-csv", kv_csv},
                          {"--trace", trace_path},
                          {"--metrics-json", metrics_json}},
                         sim::InputFiles(e));
    traces::CheckTraceName(trace_path);
    // An output that cannot be written (a missing folder, a directory) is found now, not after
    // the whole stream (exit 1, as a failed write): nothing is created or truncated.
    config::CheckOutputsWritable({{"--requests-csv", requests_csv},
                                  {"--kv-csv", kv_csv},
                                  {"--trace", trace_path},
                                  {"--metrics-json", metrics_json}});
    CheckRequestMemory(e, max_memory);
    // A trace's columns that are read by nothing (they were ignored silently).
    if (const std::vector<std::string> unread =
            UnreadTraceColumns(cfg.workload().requests(), config::DirName(e.path));
        !unread.empty()) {
      std::cerr << "tpsim: warning: workload.requests.trace_file: column" << (unread.size() == 1 ? " " : "s ")
                << config::JoinNames(unread)
                << " not read (read: arrival_s or arrival_ms, prompt_tokens, output_tokens; or "
                << "TIMESTAMP, ContextTokens, GeneratedTokens)\n";
    }
    // On a terminal, stderr shows the seconds and iterations so far: one request of 2,000,000
    // output tokens runs for minutes, silently.
    ServeRun run = [&] {
      ProgressLine progress("tpsim serve");
      progress.Stage("serving");
      return Serve(e, engine_flag, [&progress](uint64_t n) { progress.Count(n, 0, "iterations timed"); });
    }();
    // What the stream's run does not read, as tpsim run names it (the serving block is this
    // command's): --set mapping.seed=5 with placement ring served the same stream, silently.
    for (const std::string& w : sim::SetTwice(sets)) std::cerr << "tpsim: warning: " << w << "\n";
    for (const std::string& w : sim::IgnoredFields(e, true, engine_flag))
      std::cerr << "tpsim: warning: " << w << "\n";
    const double slo_ttft = slo_ttft_flag > 0 ? slo_ttft_flag : cfg.workload().requests().slo_ttft_ms();
    const double slo_tpot = slo_tpot_flag > 0 ? slo_tpot_flag : cfg.workload().requests().slo_tpot_ms();
    const ServeOutcome& out = run.outcome;
    Metrics m = Summarize(out, slo_ttft, slo_tpot);
    std::cout << "serve " << (cfg.name().empty() ? path : cfg.name()) << ": " << cfg.model().name() << " on "
              << cfg.chip().name() << ", mode " << run.mode << ", engine " << run.engine << "\n";
    for (size_t i = 0; i < run.groups.size(); ++i) {
      const ServeRun::Group& g = run.groups[i];
      const char* gname = run.groups.size() == 1 ? "cores" : i == 0 ? "prefill group" : "decode group";
      std::cout << gname << ": " << g.stages << " stages x tp " << run.tp << " = " << g.stages * run.tp
                << " cores; KV capacity " << g.capacity_blocks << " blocks of " << run.block_tokens
                << " tokens; " << g.calls << " iterations, " << g.timed << " distinct timed\n";
    }
    std::cout << SummaryText(m, slo_ttft, slo_tpot);
    for (const std::string& c : Caveats(e.cfg, run)) std::cout << "caveat: " << c << "\n";
    if (std::getenv("TPSIM_SERVE_STATS"))
      for (const auto& g : run.groups)
        std::cerr << "skeletons " << g.skeletons << ", iterations from a skeleton " << g.skeleton_hits
                  << " of " << g.timed << " timed (" << g.skeleton_kv_dram << " with KV in DRAM)\n";
    if (!metrics_json.empty()) WriteFile(metrics_json, MetricsJson(m, slo_ttft, slo_tpot));
    if (!requests_csv.empty()) WriteFile(requests_csv, RequestsCsv(out));
    if (!kv_csv.empty()) WriteFile(kv_csv, KvCsv(out));
    if (!trace_path.empty()) WriteServeTrace(trace_path, out, sim::ResolvedText(e));
    return 0;
  } catch (const ConfigError& err) {
    for (const Diag& d : err.diags()) std::cerr << d.str() << "\n";
    return 2;
  } catch (const sim::StallError& err) {
    std::cerr << "tpsim serve: the iteration Program cannot progress: " << err.what() << "\n";
    return 1;
  } catch (const std::exception& err) {
    std::cerr << "tpsim serve: " << err.what() << "\n";
    return 1;
  }
}

}  // namespace tpsim::cli
