// tpsim-validate: the Program of an experiment on real GPUs (CUDA, cuBLAS, NCCL), measured.
// Exit status: 0 ok, 1 GPU / numerics failure, 2 bad input (config or usage).

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "arch/chip.h"
#include "configs/files.h"
#include "configs/load.h"
#include "mapping/collective/collective.h"
#include "mapping/mapping.h"
#include "sim/engine.h"
#include "sim/experiment.h"
#include "sim/microbench.h"
#include "sim/result.h"
#include "sim/run.h"
#include "validate/collective_sweep.h"
#include "validate/func_exec.h"
#include "validate/gpu_runner.h"
#include "validate/lowering.h"
#include "validate/measured.h"
#include "validate/microbench_plan.h"
#include "validate/numerics.h"

namespace tpsim::validate {
namespace {

constexpr const char* kUsage =
    "usage: tpsim-validate EXPERIMENT [--set FIELD=VALUE]... [--out measured.json]\n"
    "                      [--predicted predicted.json] [--reps N] [--warmup N] [--no-numerics]\n"
    "                      [--timing queued|alone] [--predicted-program predicted-program.json]\n"
    "       tpsim-validate EXPERIMENT --dry-run      print per GPU the kernels, shapes and NCCL calls\n"
    "       tpsim-validate [EXPERIMENT] --collectives [--set FIELD=VALUE]... [--dry-run] [--out sweep.json]\n"
    "                      [--csv collectives.csv] [--reps N] [--warmup N] [--timing queued|alone]\n"
    "                      all-reduce, all-gather, reduce-scatter from 8 KiB to 1 GiB over 2, 4 and 8\n"
    "                      of this machine's GPUs (as many as both it and the chip have; time, algbw,\n"
    "                      busbw as nccl-tests defines them) next to tpsim's prediction for the\n"
    "                      experiment's chip (default chips/h200-sxm-8.textproto), what `tpsim\n"
    "                      collectives` prints: on a GPU node (a chip with a gpu block) nccl-tests' time\n"
    "                      per call with the host's issue cost; on other chips the analytical engine on\n"
    "                      tpsim's collective lowering; --csv writes the measurements\n"
    "                      in `tpsim collectives --csv` columns for `tpsim compare --chip`; --dry-run\n"
    "                      predicts without measuring ('-' in the measured columns); `tpsim compare\n"
    "                      sweep.json --plot busbw.png` draws busbw over size, predicted and measured\n"
    "       tpsim-validate --gemms [--shapes shapes.csv] --csv gemms.csv [--timing queued|alone]\n"
    "                      [--warm-l2] [--reps N] [--warmup N]\n"
    "                      cuBLAS bf16 GEMMs on GPU 0 over m = 1..8192 and LLM projection shapes (or\n"
    "                      the m,n,k rows of --shapes), written in `tpsim gemm --csv` columns\n"
    "--timing queued (default): a GPU's launches are queued back to back behind a gate kernel that\n"
    "                      holds the stream until the host has queued them all, so a launch's time is\n"
    "                      the GPU's (kernel and gap to the next, as a profiler's timeline shows it),\n"
    "                      without the host's launch latency; --gemms: --reps GEMMs timed together,\n"
    "                      the median of 5 such runs, each GEMM reading its own copy of the weight\n"
    "                      from HBM (--warm-l2: the same weight every time, in L2 where it fits)\n"
    "--timing alone: each launch bracketed by events with the GPU idle before it (the host's\n"
    "                      launch latency counted in; the median of --reps)\n"
    "--predicted: `tpsim run`'s prediction of the experiment (on a GPU node QKV and gate+up fused\n"
    "                      into one GEMM each, as inference engines run them); --predicted-program:\n"
    "                      the analytical engine on the Program the harness runs (q, k, v, gate and\n"
    "                      up apart), so every op compares like with like; both need no GPU (with\n"
    "                      --dry-run they are written and nothing is timed)\n"
    "Before timing, the numerics check runs the experiment's layer as partitioned and the same layer\n"
    "at TP 1 on one GPU (bf16 storage, fp32 arithmetic) and fails the run (exit 1) when an output\n"
    "differs by more than the tolerance --dry-run prints; it also runs the partitioned layer on a\n"
    "small instance on the GPU and on the CPU and compares them. --no-numerics skips it.\n"
    "--reps N (default 20) timed launches after --warmup N (default 3) untimed ones.\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string experiment, out, predicted, predicted_program;
  std::vector<sim::Override> sets;
  std::string csv, shapes;
  bool dry_run = false, collectives = false, gemms = false, no_numerics = false;
  GpuRunOptions run;
};

int ParseInt(const std::string& flag, const std::string& v, int lo) {
  try {
    size_t pos = 0;
    int x = std::stoi(v, &pos);
    if (pos == v.size() && x >= lo) return x;
  } catch (const std::exception&) {
  }
  throw UsageError(flag + " needs an integer >= " + std::to_string(lo) + ", got '" + v + "'");
}

Options Parse(int argc, char** argv) {
  Options o;
  std::map<std::string, std::string> given;  // the flags of one value given (config::GivenTwice)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string& flag) -> std::string {
      std::string v;
      if (a == flag) {
        if (i + 1 >= argc) throw UsageError(flag + " needs a value");
        if (const std::string rule = config::OptionAsValue(argv[i + 1]); !rule.empty())
          throw UsageError(flag + " " + rule);
        v = argv[++i];
      } else {
        v = a.substr(flag.size() + 1);
      }
      // An empty value (a script's unset variable) would read as the flag not given.
      if (v.empty()) throw UsageError(flag + " needs a value, got an empty one");
      if (const std::string twice = config::GivenTwice(&given, flag, v); !twice.empty())
        throw UsageError(flag + " " + twice);
      return v;
    };
    auto is = [&](const std::string& flag) { return a == flag || a.rfind(flag + "=", 0) == 0; };
    if (a == "-h" || a == "--help") throw UsageError("");
    if (a == "--dry-run")
      o.dry_run = true;
    else if (a == "--no-numerics")
      o.no_numerics = true;
    else if (a == "--collectives")
      o.collectives = true;
    else if (a == "--gemms")
      o.gemms = true;
    else if (is("--csv"))
      o.csv = value("--csv");
    else if (is("--shapes"))
      o.shapes = value("--shapes");
    else if (is("--set"))
      o.sets.push_back(sim::ParseOverride(value("--set")));
    else if (is("--out"))
      o.out = value("--out");
    else if (is("--predicted-program"))
      o.predicted_program = value("--predicted-program");
    else if (is("--predicted"))
      o.predicted = value("--predicted");
    else if (is("--reps"))
      o.run.reps = ParseInt("--reps", value("--reps"), 1);
    else if (is("--timing")) {
      const std::string t = value("--timing");
      if (t == "queued")
        o.run.timing = Timing::kQueued;
      else if (t == "alone")
        o.run.timing = Timing::kAlone;
      else
        throw UsageError("--timing needs queued or alone, got '" + t + "'");
    } else if (a == "--warm-l2")
      o.run.warm_l2 = true;
    else if (is("--warmup"))
      o.run.warmup = ParseInt("--warmup", value("--warmup"), 0);
    else if (a.size() > 1 && a[0] == '-')
      throw UsageError("unknown option " + a);
    else if (o.experiment.empty())
      o.experiment = a;
    else
      throw UsageError("more than one EXPERIMENT: " + o.experiment + ", " + a);
  }
  if (o.experiment.empty() && !o.collectives && !o.gemms) throw UsageError("needs an EXPERIMENT");
  if (o.gemms && o.csv.empty()) throw UsageError("--gemms needs --csv FILE");
  if (o.gemms && o.collectives) throw UsageError("give --collectives or --gemms, not both");
  if (!o.shapes.empty() && !o.gemms) throw UsageError("--shapes needs --gemms");
  // What a mode does not read was accepted and ignored (--collectives --predicted p.json wrote
  // no p.json, exit 0).
  if (o.collectives || o.gemms) {
    const std::string mode = o.collectives ? "--collectives" : "--gemms";
    for (const auto& [given, flag] : {std::pair{!o.predicted.empty(), "--predicted"},
                                      {!o.predicted_program.empty(), "--predicted-program"},
                                      {o.no_numerics, "--no-numerics"}})
      if (given)
        throw UsageError(std::string(flag) + " is for an experiment's layer run; " + mode +
                         " does not read it");
  }
  if (o.gemms) {
    for (const auto& [given, flag] : {std::pair{!o.experiment.empty(), "EXPERIMENT"},
                                      {!o.sets.empty(), "--set"},
                                      {!o.out.empty(), "--out"},
                                      {o.dry_run, "--dry-run"}})
      if (given)
        throw UsageError(std::string("--gemms does not read ") + flag +
                         " (it times --shapes, or the default shapes, on GPU 0 into --csv)");
  }
  // The default chip of --collectives takes no --set: its fields are an experiment's (chip.gpu.nvls),
  // and without one they were never read (exit 0, the default chip's predictions).
  if (o.collectives && o.experiment.empty() && !o.sets.empty())
    throw UsageError(
        "--set sets a field of the EXPERIMENT; --collectives without one times the shipped "
        "h200-sxm-8 as it is: give an experiment on the chip wanted");
  // --dry-run measures nothing: what only a measurement reads was accepted and ignored (--out m.json
  // wrote nothing, exit 0).
  if (o.dry_run) {
    for (const char* flag : {"--reps", "--warmup", "--timing"})
      if (given.count(flag))
        throw UsageError(std::string("--dry-run measures nothing: it does not read ") + flag);
    if (!o.collectives && !o.out.empty())
      throw UsageError(
          "--dry-run measures nothing, so there is no measured result for --out (--predicted and "
          "--predicted-program are written)");
  }
  if (o.run.warm_l2 && (!o.gemms || o.run.timing != Timing::kQueued))
    throw UsageError("--warm-l2 needs --gemms with --timing queued");
  return o;
}

// Through a temporary file renamed over `path`, every write checked (config::WriteOutputFile;
// an ofstream's failed flush at its close went unnoticed: /dev/full "wrote" the CSV).
void WriteFile(const std::string& path, const std::string& text) { config::WriteOutputFile(path, text); }

// One sweep point's predictions (r->kind, ranks and bytes set), each what `tpsim collectives`
// prints for it (sim::PredictCollective): tpsim's choice (algorithm auto), ring forced, and nvls
// forced where `nvls` (the chip has it for r->kind).
void PredictSweepRow(const arch::Chip& chip, bool nvls, CollectiveSweepRow* r) {
  const CollectiveRow c = sim::PredictCollective(chip, r->kind, r->ranks, r->bytes, "auto", "auto");
  r->predicted_algorithm = c.algorithm;
  r->predicted_us = c.time_us;
  r->predicted_algbw_gbps = c.algbw_gbps;
  r->predicted_busbw_gbps = c.busbw_gbps;
  r->predicted_ring_us = sim::PredictCollective(chip, r->kind, r->ranks, r->bytes, "ring", "auto").time_us;
  if (nvls)
    r->predicted_nvls_us = sim::PredictCollective(chip, r->kind, r->ranks, r->bytes, "nvls", "auto").time_us;
}

int Collectives(const Options& o) {
  std::string chip_path = config::JoinPath(config::ConfigDir(), "chips/h200-sxm-8.textproto");
  config::Chip cfg;
  config::Location noc_at;             // where the chip's core count is written
  std::string noc_field = "chip.noc";  // the noc block, or the --set of its size that made it
  if (!o.experiment.empty()) {
    sim::Experiment e = sim::LoadExperiment(o.experiment, o.sets);
    config::CheckOutputs({{"--out", o.out}, {"--csv", o.csv}}, sim::InputFiles(e));
    sim::ValidateExperiment(e);
    cfg = e.cfg.chip();
    noc_at = e.locs.Find("chip.noc");
    for (const char* f : {"chip.noc.nodes", "chip.noc.rows", "chip.noc.cols"})
      if (sim::SetOnCommandLine(e, f)) {
        noc_at = e.locs.Find(f), noc_field = f;
        break;
      }
  } else {
    config::CheckOutputs({{"--out", o.out}, {"--csv", o.csv}}, {chip_path});
    config::SourceMap locs(chip_path);
    config::ParseFile(chip_path, &cfg, &locs);
    noc_at = locs.Find("noc");
  }
  arch::Chip chip = arch::Chip::Build(cfg);
  const std::vector<uint64_t> sizes = SweepSizes();
  const int devices = DeviceCount();
  std::string ranks_note;
  const std::vector<int> rank_list =
      CollectiveSweepRanks(devices, o.dry_run, chip.num_cores(), cfg.name(), &ranks_note);
  if (rank_list.empty()) {
    // One rank is no collective: the old sweep printed 0 us for every size.
    throw config::ConfigError(config::Diag{
        noc_at, noc_field, std::to_string(chip.num_cores()) + (chip.num_cores() == 1 ? " core" : " cores"),
        "tpsim-validate --collectives needs a chip of at least 2 cores (GPUs): a collective runs over 2 or "
        "more ranks"});
  }
  const mapping::InSwitchReduction sw = mapping::InSwitchReductionOf(cfg);
  // A GPU node is predicted as `tpsim collectives` and `tpsim run` predict it (the NCCL-like
  // model, host-inclusive time per call, which is what the harness measures); the lowered
  // transfers on the analytical engine left out the host's issue cost and NCCL's latencies
  // (4.22 us against 36.33 for reduce_scatter of 8 KiB over 8 H200s).
  const bool gpu_node = cfg.has_gpu();
  std::cout << "# chip " << cfg.name() << "; " << devices << " GPU(s) here"
            << (o.dry_run      ? ": --dry-run, so nothing is measured"
                : devices >= 2 ? ""
                               : ": fewer than 2, so nothing is measured")
            << "; ranks";
  for (int r : rank_list) std::cout << " " << r;
  std::cout << (gpu_node ? " (predictions: tpsim collectives' NCCL-like model, arch/gpu/collective.h)\n"
                         : " (analytical engine predictions)\n");
  if (!ranks_note.empty()) std::cout << "# " << ranks_note << "\n";
  if (gpu_node)
    std::cout << "# pred_* = what `tpsim collectives " << cfg.name()
              << " --op KIND --ranks N --sizes BYTES` prints: time per call as nccl-tests measures it "
                 "(host issue included), for NCCL's tuner choice (algo); ring_us and nvls_us with the "
                 "algorithm forced ('-': nvls is all_reduce only"
              << (cfg.gpu().nvls() ? "" : ", and gpu.nvls is false") << ")\n";
  else if (sw.available)
    std::cout
        << "# algo = tpsim's choice (mapping.collective auto): nvls (in-switch reduction) for all_reduce "
           "from "
        << sw.min_bytes << " bytes and " << sw.min_ranks << " ranks, at " << sw.bandwidth_gbps
        << " GB/s bus bandwidth per GPU; ring otherwise. pred_* are for that choice, ring_us and nvls_us "
           "for each algorithm forced\n";
  else
    std::cout << "# the chip has no in-switch reduction (collectives.in_switch_reduction): every prediction "
                 "is ring\n";
  std::cout << CollectiveSweepHeader();
  std::vector<CollectiveSweepRow> sweep;
  std::vector<CollectiveRow> rows;
  for (int ranks : rank_list) {
    std::vector<CollectivePoint> pts =
        MeasureCollectives(sizes, devices >= 2 && !o.dry_run ? ranks : 0, o.run);
    for (const auto& p : pts) {
      CollectiveSweepRow r;
      r.kind = p.kind;
      r.ranks = ranks;
      r.bytes = p.bytes;
      r.measured = p.measured;
      // nvls forced: the GPU model has it for all_reduce where gpu.nvls; tpsim's lowering for
      // every kind where the chip has in-switch reduction.
      PredictSweepRow(chip, gpu_node ? p.kind == "all_reduce" && cfg.gpu().nvls() : sw.available, &r);
      if (p.measured) {
        r.time_us = p.seconds * 1e6;
        r.algbw_gbps = AlgBandwidthGbps(p.bytes, p.seconds);
        r.busbw_gbps = BusBandwidthGbps(p.kind, p.bytes, p.seconds, ranks);
        rows.push_back(MeasuredCollectiveRow(p.kind, ranks, p.bytes, p.seconds));
      }
      std::cout << CollectiveSweepLine(r);
      sweep.push_back(std::move(r));
    }
  }
  if (!o.csv.empty()) {
    WriteFile(o.csv,
              CollectiveCsvText(
                  {"tpsim-validate --collectives on " + std::to_string(devices) + " x " +
                       (devices ? DeviceName(0) : std::string("(no GPU)")) + ", " + Versions(),
                   "bf16 buffers, one call per GPU from one thread (ncclGroupStart/End); "
                   "time = median of " +
                       std::to_string(o.run.reps) + " timed calls after " + std::to_string(o.run.warmup) +
                       " warm-up ones; algorithm/protocol: "
                       "NCCL's choice"},
                  rows));
    std::cout << "# wrote " << rows.size() << " measured rows to " << o.csv << "\n";
  }
  if (!o.out.empty()) {
    WriteFile(o.out, CollectiveSweepJson(sweep));
    std::cout << "# wrote " << o.out << " (tpsim compare " << o.out << " --plot busbw.png draws it)\n";
  }
  return 0;
}

std::string GemmTimingText(const GpuRunOptions& r) {
  if (r.timing == Timing::kAlone)
    return "time = median of " + std::to_string(r.reps) + " timed runs after " + std::to_string(r.warmup) +
           " warm-up ones, each alone (CUDA events; the host's launch latency counted in)";
  return "time = " + std::to_string(r.reps) +
         " GEMMs queued back to back behind a gate kernel and timed together (CUDA events), per "
         "GEMM; the median of 5 such runs after " +
         std::to_string(r.warmup * r.reps) + " warm-up GEMMs; " +
         (r.warm_l2 ? "every GEMM reads the same weight (warm in L2 where it fits)"
                    : "each GEMM reads its own copy of the weight (cold: from HBM)");
}

int Gemms(const Options& o) {
  config::CheckOutputs({{"--csv", o.csv}}, {o.shapes});
  std::vector<GemmShapeRow> shapes;
  try {
    shapes =
        o.shapes.empty() ? DefaultGemmShapes() : ReadShapesCsv(ReadTextFile(o.shapes, "--shapes"), o.shapes);
  } catch (const config::ConfigError&) {
    throw;
  } catch (const std::runtime_error& e) {
    // A malformed shapes file is bad input, as `tpsim gemm --shapes` says it (it was exit 1).
    std::cerr << "tpsim-validate: " << e.what() << "\n";
    return 2;
  }
  if (shapes.empty()) {
    std::cerr << "tpsim-validate: " << o.shapes << ": no shapes\n";
    return 2;
  }
  for (auto& s : shapes) {
    if (s.dtype.empty()) s.dtype = "bf16";
  }
  const int devices = DeviceCount();
  if (devices == 0) {
    std::cerr << "tpsim-validate: no CUDA device found (--gemms times cuBLAS on GPU 0)\n";
    return 1;
  }
  const std::vector<double> seconds = MeasureGemms(shapes, o.run);
  std::vector<GemmRow> rows;
  for (size_t i = 0; i < shapes.size(); ++i) {
    rows.push_back(MeasuredGemmRow(shapes[i].m, shapes[i].n, shapes[i].k, shapes[i].dtype, seconds[i]));
    std::cout << GemmCsvLine(rows.back()) << "\n";
  }
  WriteFile(o.csv,
            GemmCsvText({"tpsim-validate --gemms on " + DeviceName(0) + ", " + Versions(),
                         "cuBLAS cublasGemmEx bf16 in and out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT, "
                         "row-major Y[m,n] = X[m,k] W[k,n]; " +
                             GemmTimingText(o.run)},
                        rows));
  std::cout << "# wrote " << rows.size() << " rows to " << o.csv << "\n";
  return 0;
}

std::string NumericsPlanText(const NumericsPlans& np, const NumericsPlans& small) {
  const config::Mapping& m = np.instance.partitioned;
  char tol[64];
  std::snprintf(tol, sizeof tol, "%.4g", kNumericsTolerance);
  std::string s =
      "# numerics check (before timing; --no-numerics skips it): the layer as partitioned (tp " +
      std::to_string(m.tp()) + ", " + m.partition() + ", collective " +
      (m.collective().empty() ? "ring" : m.collective()) +
      ") against the same layer at TP 1, both on GPU 0 (every rank's data and transfer on that GPU), "
      "on " +
      np.instance.description + (np.instance.reduced ? "" : " (the experiment's batch and shapes)") + "\n";
  s += "#   bf16 storage (every value written rounded to bf16), fp32 arithmetic (cuBLAS fp32 GEMMs, "
       "CUBLAS_COMPUTE_32F, pedantic math); pass: every output's max |error| / max |TP 1 output| <= " +
       std::string(tol) + "\n";
  s += "#   partitioned plan: " + np.part_plan.Summary() + "\n";
  s += "#   TP 1 plan: " + np.ref_plan.Summary() + "\n";
  s += "#   kernel cross-check: the partitioned plan on " + small.instance.description +
       ", GPU against the CPU backend (same steps), same tolerance\n";
  return s;
}

// Runs the numerics check on GPU 0; returns false (after printing why to stderr) on a mismatch.
bool CheckNumerics(const NumericsPlans& np, const NumericsPlans& small, std::string* note) {
  std::cout << "# numerics: partitioned layer against TP 1 on GPU 0, " << np.instance.description << "\n";
  const FuncRunner gpu = [](const FuncPlan& plan, StepTrace* trace) {
    return RunFuncPlanCuda(plan, FuncExecOptions{true}, 0, trace).outputs;
  };
  NumericsReport r = RunNumericsCheck(np, small, gpu, "GPU 0");
  for (const auto& v : r.verdicts) {
    std::cout << "#   " << v.text << "\n";
    if (!v.ok) std::cerr << "tpsim-validate: numerics: " << v.text << "\n";
  }
  *note = r.note;
  return r.ok;
}

int Main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  if (o.collectives) return Collectives(o);
  if (o.gemms) return Gemms(o);
  sim::Experiment e = sim::LoadExperiment(o.experiment, o.sets);
  config::CheckOutputs(
      {{"--out", o.out}, {"--predicted", o.predicted}, {"--predicted-program", o.predicted_program}},
      sim::InputFiles(e));
  arch::Chip chip = sim::ValidateExperiment(e);
  if (const std::string w = GpuNodeWarning(e.cfg.chip()); !w.empty())
    std::cerr << "tpsim-validate: warning: " << w << "\n";
  mapping::Program prog =
      mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping(), {.functional = true});
  LaunchPlan plan = PlanLaunches(prog, sim::DtypeBytes(e.cfg.workload().dtype()));
  std::unique_ptr<NumericsPlans> np, small;
  if (!o.no_numerics) {
    np = std::make_unique<NumericsPlans>(
        PlanNumerics(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping(), kNumericsMaxBytes));
    small = std::make_unique<NumericsPlans>(
        PlanNumerics(chip, e.cfg.model(), CrossCheckWorkload(np->instance.workload), e.cfg.mapping()));
  }
  if (!o.predicted_program.empty()) {
    const sim::EngineOutput out = sim::MakeEngine("analytical")->Run(prog, chip);
    config::Result pr = sim::BuildResult(prog, chip, out, e.cfg.name(), "analytical", false,
                                         sim::EnergyInputsOf(e.cfg.workload()));
    pr.set_config(sim::ResolvedText(e));
    WriteFile(o.predicted_program, sim::ResultToJson(pr));
  }
  // tpsim run's prediction needs no GPU: written under --dry-run too (it was skipped, silently).
  auto write_predicted = [&] {
    if (o.predicted.empty()) return;
    sim::RunOutput pr = sim::RunExperiment(e, {});
    WriteFile(o.predicted, sim::ResultToJson(pr.result));
  };
  if (o.dry_run) {
    write_predicted();
    std::cout << plan.Dump(prog);
    std::cout << (np ? NumericsPlanText(*np, *small) : "# numerics check: skipped (--no-numerics)\n");
    return 0;
  }
  const int devices = DeviceCount();
  if (devices == 0) {
    std::cerr << "tpsim-validate: no CUDA device found (use --dry-run to see the plan)\n";
    return 1;
  }
  std::cout << "# " << devices << " x " << DeviceName(0) << "\n";
  std::string report;
  std::vector<std::string> fails = SelfCheck(&report);
  std::cout << "# kernel self-check against host references:\n" << report;
  if (!fails.empty()) {
    for (const auto& f : fails) std::cerr << "tpsim-validate: numerics: " << f << "\n";
    return 1;
  }
  std::string numerics_note = "numerics of the partitioned layer were NOT checked (--no-numerics)";
  if (np && !CheckNumerics(*np, *small, &numerics_note)) return 1;
  GpuRunOutput run = RunOnGpus(plan, o.run);
  run.notes.insert(run.notes.begin(),
                   o.run.timing == Timing::kQueued
                       ? "per-op times: each GPU's launches queued back to back behind a gate kernel, an "
                         "event between launches (the GPU's time, not the host's launch latency); the "
                         "total: the whole plan run end to end"
                       : "per-op times: each launch alone with the GPU idle before it (the host's launch "
                         "latency counted in); the total: the whole plan run end to end");
  config::Result r = MeasuredResult(prog, plan, run.times, run.whole_ps, e.cfg.name());
  r.set_config(sim::ResolvedText(e));
  std::cout << sim::ResultTable(r);
  size_t unmeasured = 0;
  for (const auto& op : r.ops()) unmeasured += !op.measured();
  for (const auto& n : run.notes) std::cout << "NOTE: " << n << "\n";
  if (unmeasured)
    std::cout << "NOTE: " << unmeasured << " of " << r.ops_size()
              << " ops are UNMEASURED (measured = false): their collectives could not run here\n";
  std::cout << "NOTE: " << numerics_note << "\n";
  if (!o.out.empty()) WriteFile(o.out, sim::ResultToJson(r));
  write_predicted();
  return 0;
}

}  // namespace
}  // namespace tpsim::validate

// Main, with what it throws said and turned into exit statuses.
static int GuardedMain(int argc, char** argv) {
  try {
    return tpsim::validate::Main(argc, argv);
  } catch (const tpsim::validate::UsageError& u) {
    // --help is asked for: on stdout, exit 0 (it went to stderr); a usage error on stderr.
    if (!*u.what()) {
      std::cout << tpsim::validate::kUsage;
      return 0;
    }
    std::cerr << "tpsim-validate: " << u.what() << "\n\n" << tpsim::validate::kUsage;
    return 2;
  } catch (const tpsim::config::ConfigError& e) {
    for (const auto& d : e.diags()) std::cerr << d.str() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tpsim-validate: error: " << e.what() << "\n";
    return 1;
  }
}

int main(int argc, char** argv) {
  const int rc = GuardedMain(argc, argv);
  if (!tpsim::config::FlushStandardOutput()) {
    std::cerr << "tpsim-validate: error: writing standard output failed (a full disk?): what it shows is "
                 "incomplete\n";
    return rc == 0 ? 1 : rc;
  }
  return rc;
}
