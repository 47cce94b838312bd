#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "configs/files.h"
#include "configs/load.h"
#include "mapping/collective/collective.h"
#include "mapping/mapping.h"
#include "mapping/placement/placement.h"
#include "sim/energy.h"
#include "sim/search/detail.h"
#include "sim/search/search.h"
#include "sim/sweep/runner.h"
#include "sim/sweep/slurm.h"
#include "sim/sweep/spec.h"
#include "sim/sweep/store.h"

// `tpsim search`: the command line, the printed front and best, --out and the TLM
// confirmation.
namespace tpsim::search {

const char* const kSearchUsage =
    R"(usage: tpsim search EXPERIMENT [options]

Searches mappings of the experiment's model and workload on its chip with the analytical
engine and prints the Pareto front (total latency, tokens/s per chip, energy per token when
the chip has an energy model, and TTFT / TPOT when the objective or an SLO uses them), the best candidate for the objective, and the top ones
confirmed with the TLM engine.

The space: TP x pipeline stages (powers of two, tp x stages <= cores), the partitioner of
the attention projections (qkv, o) and of the MLP (gate_up, down), placement (but file),
collective, weights location (the KV cache's follows) and batch, and for MoE models the
expert-parallel degree (mapping.moe.ep; each expert slot takes the stage's ranks / ep) and,
on request, moe.tp, the all-to-all and the group order. Each candidate is one replica
on tp x stages cores (x mapping.attention_dp, the experiment's unless --attention-dp);
the chip holds floor(cores / (tp x stages)) of them, which multiplies tokens/s per chip
(replicas are not simulated together). Candidates are visited from two orders that share
the simulated work (estimated from the Program's size) half and half: ascending lower bound
of the objective, and cheapest first; one whose bounds an evaluated point already beats on
every front column is skipped (pruned): it cannot be on the front nor the best. The front
and the best are the same for any --jobs.

A request stream (workload.requests, e.g. configs/experiments/serving-fused.textproto) is
served by each candidate as `tpsim serve` serves it, by one group of tp x stages cores
(disaggregated: a prefill and a decode group of tp x stages cores each): total_ms, ttft_ms
and tpot_ms are then the p99 request latency, TTFT and TPOT, tokens/s the group's output
tokens per second, a candidate that rejects a request is not feasible, and there is no
energy column and no bound (every candidate runs: keep the space small with the options below).

  --objective O        latency (default: total time), ttft, tpot, throughput (tokens/s
                       per chip), energy (per token; needs chip.energy)
  --slo-ttft-ms X      only candidates with TTFT (prefill) <= X ms count as feasible
  --slo-tpot-ms Y      only candidates with TPOT (mean decode step) <= Y ms
  --budget N           simulate at most N candidates (default 10000)
  --jobs J             worker threads, 1 .. 256 (default: all cores)
  --confirm K          rerun the K best feasible candidates with the TLM engine (default 5,
                       0: none), one child process each
  --out FILE           write the best candidate as an experiment `tpsim run` accepts
                       (`tpsim serve` for a request stream)
  --db FILE            store every simulated candidate in SQLite (the `points` table of
                       sweeps); a rerun with the same file reuses them (resumable)
  --shard I/N          simulate only candidates whose index is I mod N (merge the shards'
                       databases with `tpsim sweep merge`, then rerun without --shard
                       on the merged file: stored points are reused)
  --slurm              do not search here: write DB-without-.sqlite.slurm/sweep.sbatch, a job
                       array of --array-size tasks (default 4), task I searching the
                       candidates I mod N into DIR/shard-I.sqlite (no TLM confirmation),
                       submit it with sbatch, and print the merge command and the rerun on
                       --db (needed) that prints the front from the stored candidates
    --array-size N (1 .. 100000), --partition P, --account A, --time T, --mem M
                       as for `tpsim sweep --slurm`
    --dry-run          write the script and print it, do not submit
  --no-prune           simulate every candidate (up to --budget): the exhaustive reference
  --no-share           simulate candidates that lower the same Program (same tp, stages,
                       partitions, collective, weights, batch and cores per stage; at tp 1
                       the collective does not matter) one by one; by default
                       one runs and the others take its metrics
  --top N              rows of the front to print (default 20; 0: all)
  --tp LIST            e.g. 4,8,16 (default: powers of two)
  --stages LIST        pipeline stages (default: powers of two up to the layers)
  --ep LIST            MoE models: expert-parallel degrees (default: the powers of two that
                       divide both num_experts and the stage's ranks)
  --moe-tp LIST        MoE models: ranks per expert slot (mapping.moe.tp; default: the
                       stage's ranks / ep; fewer replicate each slot); a value with
                       ep x moe-tp not dividing the stage's ranks is left out
  --all-to-all LIST    MoE models: direct, pairwise, hierarchical, auto (mapping.moe.all_to_all;
                       default: the experiment's)
  --group-order LIST   MoE models: tp_inner, ep_inner (mapping.moe.group_order; default: the
                       experiment's)
  --attention-dp LIST  attention replicas per stage (mapping.attention_dp; default: the
                       experiment's); a stage then has tp x D cores; values that do not
                       divide the batch are left out
  --partitions LIST    partitioners for both op kinds (default: all registered)
  --placements LIST    (default: all but file)
  --collectives LIST   (default: all registered, nvls only on in-switch chips; auto may be
                       named: nvls where the chip allows it, else ring)
  --spans LIST         where a placement applies: stage (each stage's own region),
                       chip:stage_major, chip:tp_major (one order over the whole chip,
                       mapping.span); default: all three
  --weights LIST       auto, sram (a candidate whose weights do not fit SRAM is invalid),
                       dram (default: the experiment's)
  --batch LIST         batch sizes (default: the experiment's)
  --set FIELD=VALUE    override a field of the experiment first (as tpsim run)
  --model MODEL        catalog name or config.json (as tpsim run)
  A LIST is comma-separated, without empty items; a LIST option given twice adds to its list.
  Values that leave no candidate at all (--tp 128 on 64 cores) are refused (exit 2, naming
  the options and the rules: tp x attention_dp x stages <= cores, and so on).
)";

namespace detail {

std::string Ms(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// The placement column: "snake", or "snake@chip:tp_major" for a wafer-wide one.
std::string Placed(const Candidate& c) {
  return c.span.starts_with("chip") ? c.placement + "@" + c.span : c.placement;
}

std::string Describe(const Found& x) {
  std::ostringstream os;
  os << "tp " << x.c.tp;
  if (x.c.attention_dp > 1) os << " x attention_dp " << x.c.attention_dp;
  if (x.c.ep > 0) {
    os << " (moe ep " << x.c.ep;
    if (x.c.moe_tp > 0) os << ", moe.tp " << x.c.moe_tp;
    if (!x.c.all_to_all.empty()) os << ", all_to_all " << x.c.all_to_all;
    if (!x.c.group_order.empty()) os << ", " << x.c.group_order;
    os << ")";
  }
  os << " x " << x.c.stages << " stages x " << x.replicas << " replicas, attention " << x.c.attention
     << ", mlp " << x.c.mlp << ", " << x.c.placement
     << (x.c.span.starts_with("chip") ? " over the chip (" + x.c.span.substr(5) + ")" : "") << ", "
     << x.c.collective;
  if (!x.c.weights.empty()) os << ", weights " << x.c.weights;
  os << ", batch " << x.c.batch;
  return os.str();
}

}  // namespace detail

namespace {

using detail::Columns;
using detail::Describe;
using detail::FrontColumns;
using detail::MetricIndex;
using detail::Ms;
using detail::Placed;

struct Options {
  std::string path, model, out;
  std::vector<sim::Override> sets;
  uint32_t confirm = 5, top = 20;
  SearchOptions search;
  // --slurm: the job, whether to submit it, the Slurm options given (for the error without
  // --slurm) and the arguments each shard passes on (the space, objective, --set, --model...).
  sweep::SlurmJob job;
  bool slurm = false, dry_run = false;
  std::vector<std::string> slurm_only, forward;
};
// Each value of a flag's lists once (`--partitions megatron,megatron` searched every candidate
// twice and counted each twice on the front).
template <class T, class V>
void AddOnce(std::vector<T>* out, const V& v) {
  if (std::find(out->begin(), out->end(), v) == out->end()) out->push_back(static_cast<T>(v));
}
// A LIST option's items; an empty one (`--tp 4,,`, `--partitions ,`) is a bad value: it read as
// the option not given (the whole default axis) or was dropped.
std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (;;) {
    const size_t comma = s.find(',', begin);
    const std::string item = s.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    if (item.empty())
      throw std::invalid_argument("a list's items are separated by single commas, with none empty");
    AddOnce(&out, item);
    if (comma == std::string::npos) return out;
    begin = comma + 1;
  }
}
// The options that take a value: another word of two dashes is unknown, at the end of the line
// too (`--bogus` said "needs a value").
bool TakesValue(const std::string& flag) {
  static const char* const kFlags[] = {
      "--objective", "--slo-ttft-ms", "--slo-tpot-ms",  "--budget",      "--jobs",       "--confirm",
      "--top",       "--out",         "--db",           "--shard",       "--array-size", "--partition",
      "--account",   "--time",        "--mem",          "--set",         "--model",      "--tp",
      "--stages",    "--ep",          "--attention-dp", "--moe-tp",      "--all-to-all", "--group-order",
      "--batch",     "--partitions",  "--placements",   "--collectives", "--spans",      "--weights"};
  return std::find(std::begin(kFlags), std::end(kFlags), flag) != std::end(kFlags);
}
// The registered collectives and "auto" (mapping.collective: nvls where the chip allows it,
// else ring; the GPU-node experiments' choice).
std::vector<std::string> CollectiveChoices() {
  std::vector<std::string> names = mapping::CollectiveNames();
  names.push_back("auto");
  return names;
}
int Usage(const std::string& msg) {
  std::cerr << "tpsim search: " << msg << "\n\n" << kSearchUsage;
  return 2;
}

// --slurm: a job array whose task I searches the candidates of index I mod N into its own
// store (no TLM confirmation there), then the merge and the rerun on the merged store that
// prints the front (every simulated candidate reused).
int SubmitSearch(Options& o, const sim::Experiment& base, const arch::Chip& chip) {
  sweep::SlurmJob& job = o.job;
  sweep::FitArraySize(&job, std::max<size_t>(1, Space(base, chip, o.search.space).size()), "search",
                      "candidate", std::cerr);
  job.exe = sweep::SelfExe();
  job.sweep = sweep::Absolute(base.path);  // the file found: a shipped name is no path on the node
  job.command = {"search", job.sweep};
  job.command.insert(job.command.end(), o.forward.begin(), o.forward.end());
  job.command.insert(job.command.end(), {"--confirm", "0", "--top", "0"});
  job.dir = sweep::SlurmDirOf(o.search.db);
  job.db = o.search.db;
  job.jobs = o.search.jobs;
  job.job_name = "tpsim-search-" + std::filesystem::path(o.path).stem().string();  // SbatchScript cleans it
  std::string rerun = sweep::ShellQuote(job.exe) + " search " + sweep::ShellQuote(job.sweep);
  for (const std::string& a : o.forward) rerun += " " + sweep::ShellQuote(a);
  rerun += " --db " + sweep::ShellQuote(o.search.db);
  try {
    sweep::SubmitOrWrite(job, o.dry_run, std::cout);
    std::cout << (o.dry_run ? "# " : "") << "then print the front (the stored candidates are reused):\n  "
              << rerun << "\n";
  } catch (const std::exception& err) {
    std::cerr << "tpsim search: " << err.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
int SearchCommand(const std::vector<std::string>& args) {
  Options o;
  // Arguments a shard does not pass on: its own store, shard, workers and the lead's output.
  const std::vector<std::string> not_forwarded = {"--db", "--shard", "--jobs", "--out", "--confirm", "--top"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const size_t first = i;
    const std::string name = a.substr(0, a.find('='));
    auto forward = [&] {
      if (std::find(not_forwarded.begin(), not_forwarded.end(), name) != not_forwarded.end()) return;
      o.forward.insert(o.forward.end(), args.begin() + static_cast<std::ptrdiff_t>(first),
                       args.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    };
    if (a == "-h" || a == "--help") {
      std::cout << kSearchUsage;
      return 0;
    }
    // A word of one dash is an option too (-q, -v), as tpsim run refuses it: it was taken for the
    // experiment's path.
    if (a.size() > 1 && a[0] == '-' && a[1] != '-') return Usage("unknown option " + a);
    if (!a.starts_with("--")) {
      if (!o.path.empty()) return Usage("unexpected argument " + a + " (one experiment only)");
      o.path = a;
      continue;
    }
    if (a == "--no-prune") {
      o.search.prune = false;
      forward();
      continue;
    }
    if (a == "--no-share") {
      o.search.share = false;
      forward();
      continue;
    }
    if (a == "--slurm") {
      o.slurm = true;
      continue;
    }
    if (a == "--dry-run") {
      o.dry_run = true;
      o.slurm_only.push_back(a);
      continue;
    }
    // "--flag=VALUE" as "--flag VALUE", as tpsim run takes it (cli::FlagAt), --set=FIELD=VALUE
    // too: the value is what follows the first '=' (--set=F=V took the next word as its value
    // and was then an unknown option).
    std::string flag = a, value;
    const size_t eq = a.find('=');
    if (eq != std::string::npos) flag = a.substr(0, eq);
    if (!TakesValue(flag)) return Usage("unknown option " + a);
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      if (const std::string rule = config::OptionAsValue(args[i + 1]); !rule.empty())
        return Usage(a + " " + rule);
      value = args[++i];
    } else {
      return Usage(a + " needs a value");
    }
    // An empty value (a script's unset variable) would read as the flag not given.
    if (value.empty()) return Usage(flag + " needs a value, got an empty one");
    auto u32list = [&](std::vector<uint32_t>* out) {
      for (const auto& s : SplitList(value)) {
        const uint64_t v = config::ParseCount(s, UINT32_MAX);
        if (v == 0 || v > 1u << 20) throw std::out_of_range("'" + s + "' is not in 1 .. 1048576");
        AddOnce(out, v);
      }
    };
    try {
      if (flag == "--objective") {
        if (value != "latency" && value != "ttft" && value != "tpot" && value != "throughput" &&
            value != "energy")
          return Usage("--objective must be latency, ttft, tpot, throughput or energy, not '" + value + "'");
        o.search.objective = value;
      } else if (flag == "--slo-ttft-ms") {
        o.search.slo_ttft_ms = config::ParseNumber(value);  // read whole: std::stod took "5x" as 5
        if (!(o.search.slo_ttft_ms > 0)) return Usage("--slo-ttft-ms must be > 0");
      } else if (flag == "--slo-tpot-ms") {
        o.search.slo_tpot_ms = config::ParseNumber(value);
        if (!(o.search.slo_tpot_ms > 0)) return Usage("--slo-tpot-ms must be > 0");
      } else if (flag == "--budget") {
        o.search.budget = config::ParseCount(value, UINT64_MAX);
        if (o.search.budget == 0) return Usage("--budget must be >= 1");
      } else if (flag == "--jobs") {
        const uint64_t jobs = config::ParseCount(value, UINT64_MAX);  // a value past 256 gets this message
        if (jobs < 1 || jobs > 256) return Usage("--jobs must be 1 .. 256");
        o.search.jobs = static_cast<int>(jobs);
      } else if (flag == "--confirm") {
        o.confirm = static_cast<uint32_t>(config::ParseCount(value, UINT32_MAX));
      } else if (flag == "--top") {
        o.top = static_cast<uint32_t>(config::ParseCount(value, UINT32_MAX));
      } else if (flag == "--out") {
        o.out = value;
      } else if (flag == "--db") {
        o.search.db = value;
      } else if (flag == "--shard") {
        const size_t slash = value.find('/');
        if (slash == std::string::npos) return Usage("--shard needs I/N, e.g. 0/4");
        o.search.shard = static_cast<uint32_t>(config::ParseCount(value.substr(0, slash), UINT32_MAX));
        o.search.shards = static_cast<uint32_t>(config::ParseCount(value.substr(slash + 1), UINT32_MAX));
        if (o.search.shards == 0 || o.search.shard >= o.search.shards)
          return Usage("--shard I/N needs 0 <= I < N");
      } else if (flag == "--array-size") {
        o.job.array_size = static_cast<int>(config::ParseCount(value, 100000));
        if (o.job.array_size < 1 || o.job.array_size > 100000)
          return Usage("--array-size must be 1 .. 100000, got '" + value + "'");
        o.slurm_only.push_back(flag);
        continue;
      } else if (flag == "--partition" || flag == "--account" || flag == "--time" || flag == "--mem") {
        (flag == "--partition" ? o.job.partition
         : flag == "--account" ? o.job.account
         : flag == "--time"    ? o.job.time
                               : o.job.mem) = value;
        o.slurm_only.push_back(flag);
        continue;
      } else if (flag == "--set") {
        o.sets.push_back(sim::ParseOverride(value));
      } else if (flag == "--model") {
        o.model = value;
      } else if (flag == "--tp") {
        u32list(&o.search.space.tp);
      } else if (flag == "--stages") {
        u32list(&o.search.space.stages);
      } else if (flag == "--ep") {
        u32list(&o.search.space.ep);
      } else if (flag == "--attention-dp") {
        u32list(&o.search.space.attention_dp);
      } else if (flag == "--moe-tp") {
        u32list(&o.search.space.moe_tp);
      } else if (flag == "--all-to-all" || flag == "--group-order") {
        // The all-to-all algorithms registered (and auto), as mapping.moe.all_to_all takes them.
        std::vector<std::string> valid = mapping::AllToAllVNames();
        valid.push_back("auto");
        if (flag == "--group-order") valid = {"tp_inner", "ep_inner"};
        std::vector<std::string>& into =
            flag == "--all-to-all" ? o.search.space.all_to_all : o.search.space.group_order;
        for (const std::string& v : SplitList(value)) {
          if (std::find(valid.begin(), valid.end(), v) == valid.end()) {
            return Usage(flag + " takes " + config::JoinNames(valid) + ", not '" + v + "'");
          }
          AddOnce(&into, v);
        }
      } else if (flag == "--batch") {
        u32list(&o.search.space.batch);
      } else if (flag == "--partitions") {
        for (const std::string& v : SplitList(value)) AddOnce(&o.search.space.partitions, v);
      } else if (flag == "--placements") {
        for (const std::string& v : SplitList(value)) AddOnce(&o.search.space.placements, v);
      } else if (flag == "--collectives") {
        for (const std::string& v : SplitList(value)) AddOnce(&o.search.space.collectives, v);
      } else if (flag == "--spans") {
        for (const std::string& v : SplitList(value)) AddOnce(&o.search.space.spans, v);
      } else if (flag == "--weights") {
        for (const std::string& v : SplitList(value)) AddOnce(&o.search.space.weights, v);
      } else {
        return Usage("unknown option " + a);
      }
    } catch (const config::ConfigError& err) {
      for (const auto& d : err.diags()) std::cerr << d.str() << "\n";
      return 2;
    } catch (const std::logic_error& err) {
      // The rule the value broke (a whole number in range, a list without empty items); --jobs
      // is read up to 2^64 - 1 and has a narrower range.
      if (flag == "--jobs") return Usage("--jobs must be 1 .. 256, got '" + value + "'");
      if (flag == "--array-size") return Usage("--array-size must be 1 .. 100000, got '" + value + "'");
      return Usage("bad value '" + value + "' for " + flag + ": " + err.what());
    }
    forward();
  }
  if (o.path.empty()) return Usage("needs an experiment file");
  if (!o.slurm && !o.slurm_only.empty()) return Usage(o.slurm_only.front() + " needs --slurm");
  if (o.slurm) {
    if (o.search.db.empty()) return Usage("--slurm needs --db FILE: the store the shards are merged into");
    if (o.search.shards > 1) return Usage("--slurm makes the shards itself: no --shard");
    if (std::string problem = sweep::CheckSlurmJob(o.job); !problem.empty()) return Usage(problem);
    if (std::string problem = sweep::CheckSlurmStore(o.search.db); !problem.empty()) return Usage(problem);
  }
  // Names in the lists must be registered (a typo would silently search nothing).
  auto known = [&](const std::vector<std::string>& given, const std::vector<std::string>& names,
                   const char* flag) -> std::string {
    for (const auto& g : given)
      if (std::find(names.begin(), names.end(), g) == names.end())
        return std::string(flag) + ": unknown '" + g + "'";
    return "";
  };
  for (const std::string& err :
       {known(o.search.space.partitions, mapping::PartitionerNames(), "--partitions"),
        known(o.search.space.placements, mapping::PlacementNames(), "--placements"),
        known(o.search.space.collectives, CollectiveChoices(), "--collectives"),
        known(o.search.space.weights, {"auto", "sram", "dram"}, "--weights"),
        known(o.search.space.spans, {"stage", "chip:stage_major", "chip:tp_major"}, "--spans")}) {
    if (!err.empty()) return Usage(err);
  }
  if (std::find(o.search.space.placements.begin(), o.search.space.placements.end(), "file") !=
      o.search.space.placements.end())
    return Usage("--placements: file needs a placement file per candidate; not searched");

  sim::Experiment base;
  arch::Chip chip;
  try {
    base = sim::LoadExperiment(o.path, o.sets, o.model);
    // The chip, model and workload are checked with the plainest mapping (the base's own
    // mapping is replaced by every candidate's).
    sim::Experiment plain = base;
    config::Mapping* m = plain.cfg.mutable_mapping();
    m->set_tp(1);
    m->set_pipeline_stages(1);
    m->set_partition("n_split");
    m->set_placement("linear");
    m->set_collective("ring");
    m->clear_overrides();
    m->clear_grid_rows();
    m->clear_placement_file();
    m->clear_attention_dp();
    m->clear_weights();  // candidates set their own (--weights)
    if (m->has_moe()) {  // one expert slot of one rank; the routing settings are still checked
      m->mutable_moe()->set_ep(1);
      m->mutable_moe()->clear_tp();
    }
    // Whether the model fits the memory channels depends on the mapping: each candidate is
    // checked (mapping::ValidateDramCapacity; one that does not fit is stored as invalid).
    chip = sim::ValidateExperiment(plain, /*memory_capacity=*/false);
    // A base that names a placement file is checked with it as `tpsim run` checks it (the file
    // read, its cores against the base's tp x stages; the file fits that mapping only): a missing
    // file or one listing a core twice was searched without a word, exit 0, since every
    // candidate replaces the placement. Run's messages, then what the check was.
    if (base.cfg.mapping().placement() == "file") {
      try {
        sim::ValidateExperiment(base, /*memory_capacity=*/false);
      } catch (const config::ConfigError& err) {
        for (const auto& d : err.diags()) std::cerr << d.str() << "\n";
        const config::Mapping& m = base.cfg.mapping();
        std::cerr << "tpsim search: the base experiment places its ranks by mapping.placement_file, so it is "
                     "checked as `tpsim run` checks it, with its own mapping (tp "
                  << m.tp() << " x " << m.pipeline_stages()
                  << " stages); the candidates replace that placement (a placement file is not searched): "
                     "fix the base, or drop mapping.placement file\n";
        return 2;
      }
    }
    config::CheckOutputs({{"--db", o.search.db}, {"--out", o.out}}, sim::InputFiles(base));
    // A store that cannot be created is refused here, at --db (config::CheckStorePath).
    config::CheckStorePath("--db", o.search.db);
    sweep::CheckStoreWriter("--db", o.search.db, /*search=*/true);
  } catch (const config::ConfigError& err) {
    for (const auto& d : err.diags()) std::cerr << d.str() << "\n";
    return 2;
  }
  // The expert axes of a model without experts: refused, not ignored (`--ep 4` on Qwen3-4B
  // searched the dense space, 59,500 candidates, as if it were not given).
  if (base.cfg.model().num_experts() == 0) {
    const SpaceOptions& sp = o.search.space;
    for (const auto& [given, flag] : {std::pair{!sp.ep.empty(), "--ep"},
                                      {!sp.moe_tp.empty(), "--moe-tp"},
                                      {!sp.all_to_all.empty(), "--all-to-all"},
                                      {!sp.group_order.empty(), "--group-order"}}) {
      if (given)
        return Usage(std::string(flag) + " is an axis of mixture-of-experts models; " +
                     base.cfg.model().name() + " has no experts");
    }
  }
  // A request stream is batched by the scheduler (mapping.serving.max_running_requests):
  // every candidate of a --batch above 1 was refused by tpsim serve at workload.batch.
  if (detail::Serving(base))
    for (const uint32_t b : o.search.space.batch)
      if (b > 1)
        return Usage("--batch is an axis of fixed batches; " + o.path +
                     " serves a request stream (workload.requests), which the scheduler batches: set "
                     "mapping.serving.max_running_requests instead");
  // Options whose values leave no candidate (--tp 128 on 64 cores): a usage error naming them,
  // not a search of 0 candidates that ends "no feasible candidate".
  if (const std::string why = EmptySpaceWhy(base, chip, o.search.space); !why.empty()) return Usage(why);
  // Values no candidate can take (--tp 4,128 on 16 cores searched tp 4 and said nothing of 128).
  for (const std::string& note : UnusedValues(base, chip, o.search.space))
    std::cerr << "tpsim search: note: " << note << "\n";
  // The base's placement file is not searched: each candidate takes a placement of --placements.
  if (base.cfg.mapping().placement() == "file")
    std::cerr << "tpsim search: warning: mapping.placement file is ignored (mapping.placement_file "
              << base.cfg.mapping().placement_file()
              << "): each candidate takes its placement from --placements; a placement file fits one "
                 "tp x stages and is not searched\n";
  if (o.slurm) return SubmitSearch(o, base, chip);
  // An --out that cannot be written (a missing folder, a directory) is found now, not after the
  // whole search and its TLM confirmations (exit 1, as the failed write): nothing is created.
  try {
    if (!o.out.empty()) config::CheckOutputWritable(o.out);
  } catch (const std::runtime_error& e) {
    std::cerr << "tpsim search: " << e.what() << "\n";
    return 1;
  }
  SearchResult res;
  try {
    res = Search(base, chip, o.search, &std::cerr);
  } catch (const std::exception& err) {
    std::cerr << "tpsim search: " << err.what() << "\n";
    return 1;
  }
  const SearchOptions& so = o.search;
  const bool serving = detail::Serving(base);
  const Columns cols = FrontColumns(so, !serving && sim::EnergyModelled(chip, base.cfg.workload().dtype()));
  std::cout << "tpsim search " << o.path << ": " << base.cfg.model().name() << " on "
            << base.cfg.chip().name() << ", objective " << so.objective;
  if (so.slo_ttft_ms > 0) std::cout << ", TTFT <= " << so.slo_ttft_ms << " ms";
  if (so.slo_tpot_ms > 0) std::cout << ", TPOT <= " << so.slo_tpot_ms << " ms";
  std::cout << "\n  " << res.candidates << " candidates: " << res.simulated << " simulated (" << res.reused
            << " of them from the store), " << res.shared << " sharing the Program of a simulated one, "
            << res.pruned << " pruned by bounds, " << res.skipped << " not visited (budget or shard); "
            << res.ok << " ok, " << res.invalid << " invalid, " << res.errors << " errors; "
            << res.ranked.size() << " feasible\n\n";
  if (res.front.empty()) {
    std::cout << "no feasible candidate\n";
    // Why, where candidates were refused or failed (a --tp that divides no head count, weights
    // that fit no SRAM): the most frequent messages, as `tpsim run` prints them.
    for (const auto& [msg, n] : res.reasons) {
      std::cout << "  " << n << (n == 1 ? " candidate: " : " candidates: ");
      for (char ch : msg) std::cout << ch << (ch == '\n' ? "    " : "");
      std::cout << "\n";
    }
    return 1;
  }
  // Candidates with equal metrics share a row (`ties`): the points are the rows; the header
  // said "19 points" over 17 rows where two pairs tied.
  auto same_metrics = [](const Found& a, const Found& b) {
    return b.p.total_ms == a.p.total_ms && b.p.tokens_per_s == a.p.tokens_per_s &&
           b.p.ttft_ms == a.p.ttft_ms && b.p.tpot_ms == a.p.tpot_ms &&
           (std::isnan(a.p.energy_mj) || b.p.energy_mj == a.p.energy_mj);
  };
  size_t points = 0;
  for (size_t r = 0; r < res.front.size(); ++r)
    points += r == 0 || !same_metrics(res.front[r - 1], res.front[r]);
  std::cout << "Pareto front (total latency, tokens/s per chip" << (cols.ttft ? ", TTFT" : "")
            << (cols.tpot ? ", TPOT" : "") << (cols.energy ? ", energy per token" : "") << "), " << points
            << " points"
            << (points != res.front.size() ? " (" + std::to_string(res.front.size()) + " candidates)" : "")
            << "; candidates with equal metrics are counted in `ties`, the first shown"
            << (serving ? " (served requests: total, TTFT and TPOT are p99 over the requests)" : "") << ":\n";
  // MoE models: the tp column also names the expert-parallel degree ("8 ep4").
  const bool moe = res.front.front().c.ep > 0;
  auto tp_of = [&](const Candidate& c) {
    return moe ? std::to_string(c.tp) + " ep" + std::to_string(c.ep) : std::to_string(c.tp);
  };
  // The axes the search varied (more than one value listed) beyond those every table shows get
  // a column after tp: candidates that differ only there (attention_dp 1 and 2) were rows alike.
  // A search that does not vary them prints the table it always did.
  const SpaceOptions& sp = so.space;
  const bool dp_col = sp.attention_dp.size() > 1, moe_tp_col = sp.moe_tp.size() > 1,
             a2a_col = sp.all_to_all.size() > 1, order_col = sp.group_order.size() > 1;
  auto varied = [&](const std::string& dp, const std::string& moe_tp, const std::string& a2a,
                    const std::string& order) {
    if (dp_col) std::printf(" %7s", dp.c_str());
    if (moe_tp_col) std::printf(" %6s", moe_tp.c_str());
    if (a2a_col) std::printf(" %-12s", a2a.c_str());
    if (order_col) std::printf(" %-11s", order.c_str());
  };
  auto or_dash = [](const std::string& v) { return v.empty() ? std::string("-") : v; };
  std::printf(moe ? "  %4s %-9s" : "  %4s %5s", "#", moe ? "tp ep" : "tp");
  varied("attn_dp", "moe_tp", "all_to_all", "group_order");
  std::printf(" %6s %8s %-15s %-15s %-28s %-19s %7s %5s %12s %10s %10s %12s %9s %5s\n", "stages", "replicas",
              "attention", "mlp", "placement", "collective", "weights", "batch", "total_ms", "ttft_ms",
              "tpot_ms", "tokens/s", "mJ/token", "ties");
  size_t shown = 0;
  for (size_t r = 0; r < res.front.size(); ++r) {
    const Found& x = res.front[r];
    size_t ties = 1;
    while (r + ties < res.front.size() && same_metrics(x, res.front[r + ties])) ++ties;
    if (o.top == 0 || shown < o.top) {
      std::printf(moe ? "  %4zu %-9s" : "  %4zu %5s", shown + 1, tp_of(x.c).c_str());
      varied(std::to_string(x.c.attention_dp), x.c.moe_tp > 0 ? std::to_string(x.c.moe_tp) : "-",
             or_dash(x.c.all_to_all), or_dash(x.c.group_order));
      std::printf(" %6u %8u %-15s %-15s %-28s %-19s %7s %5u %12s %10s %10s %12.1f %9.3f %5zu\n", x.c.stages,
                  x.replicas, x.c.attention.c_str(), x.c.mlp.c_str(), Placed(x.c).c_str(),
                  x.c.collective.c_str(), x.c.weights.empty() ? "-" : x.c.weights.c_str(), x.c.batch,
                  Ms(x.p.total_ms).c_str(), Ms(x.p.ttft_ms).c_str(), Ms(x.p.tpot_ms).c_str(),
                  x.p.tokens_per_s, x.p.energy_mj, ties);
    }
    ++shown;
    r += ties - 1;
  }
  if (o.top > 0 && shown > o.top) std::cout << "  ... " << shown - o.top << " more (--top 0)\n";

  const Found& best = res.ranked[0];
  std::cout << "\nbest (" << so.objective << "): " << Describe(best) << "\n  total " << Ms(best.p.total_ms)
            << " ms, TTFT " << Ms(best.p.ttft_ms) << " ms, TPOT " << Ms(best.p.tpot_ms) << " ms, "
            << Ms(best.p.tokens_per_s) << " tokens/s per chip";
  if (cols.energy) std::cout << ", " << Ms(best.p.energy_mj) << " mJ/token";
  std::cout << "\n";
  if (!o.out.empty()) {
    const std::string text = "# tpsim search " + o.path + " --objective " + so.objective +
                             ": the best candidate\n# proto-file: configs/schema/experiment.proto\n"
                             "# proto-message: tpsim.config.Experiment\n" +
                             sim::ResolvedText(Apply(base, best.c));
    try {
      config::WriteOutputFile(o.out, text);  // every write checked, renamed into place
    } catch (const std::runtime_error& e) {
      std::cerr << "tpsim search: " << e.what() << "\n";
      return 1;
    }
    std::cout << "  written to " << o.out << " (tpsim " << (serving ? "serve " : "run ") << o.out << ")\n";
  }
  if (o.confirm > 0) {
    std::error_code ec;
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    const std::filesystem::path tmp =
        std::filesystem::temp_directory_path() / ("tpsim-search-" + std::to_string(getpid()));
    std::filesystem::create_directories(tmp, ec);
    const sweep::PointRunner tlm = sweep::ChildProcessRunner(exe, "tlm", 600, tmp.string());
    std::cout << "\nconfirmed with the TLM engine (the " << std::min<size_t>(o.confirm, res.ranked.size())
              << " best by " << so.objective << "; " << (serving ? "p99 request latency" : "total time")
              << "):\n";
    std::printf("  %4s %12s %12s %9s  %s\n", "#", "analytical", "tlm", "ratio", "candidate");
    for (size_t r = 0; r < res.ranked.size() && r < o.confirm; ++r) {
      const Found& x = res.ranked[r];
      const sweep::PointOutcome t = tlm(Apply(base, x.c), sweep::Point{x.index, {}});
      if (t.status != "ok") {
        std::printf("  %4zu %12s %12s %9s  %s (%s)\n", r + 1, Ms(x.p.total_ms).c_str(), t.status.c_str(), "-",
                    Describe(x).c_str(), t.error.c_str());
        continue;
      }
      const double tlm_ms =
          serving ? t.metrics[MetricIndex("latency_p99_ms")] : t.metrics[MetricIndex("total_ps")] * 1e-9;
      std::printf("  %4zu %12s %12s %9.3f  %s\n", r + 1, Ms(x.p.total_ms).c_str(), Ms(tlm_ms).c_str(),
                  x.p.total_ms / tlm_ms, Describe(x).c_str());
    }
    std::filesystem::remove_all(tmp, ec);
  }
  return 0;
}

}  // namespace tpsim::search
