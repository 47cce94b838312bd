#include "sim/microbench.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "arch/device.h"
#include "arch/gpu/collective.h"
#include "configs/files.h"
#include "mapping/collective/collective.h"
#include "sim/engine.h"
#include "sim/run.h"

namespace tpsim::sim {

namespace {

// The 2^63 ps clock in microseconds: a time at or past it is no result. Throws
// TimeOverflowError "WHAT takes longer than ...: check CHECK" there.
constexpr double kClockUs = 9223372036854775807.0 * 1e-6;
void CheckClock(double time_us, const std::string& what, const std::string& check) {
  if (!(time_us < kClockUs))
    throw TimeOverflowError(what + " takes longer than " + kClockLimit + ": check " + check);
}

}  // namespace

std::vector<std::string> ShippedChipNames() { return config::ShippedNames("chips", ".textproto"); }

arch::Chip LoadChipArg(const std::string& arg, const std::vector<Override>& sets) {
  std::string path = arg;
  if (arg.find('/') == std::string::npos && !config::HasExtension(arg, ".textproto") &&
      !config::HasExtension(arg, ".json")) {
    path = config::JoinPath(config::ConfigDir(), "chips/" + arg + ".textproto");
    if (!std::filesystem::exists(path)) {
      throw std::invalid_argument(
          "unknown chip '" + arg + "' (shipped: " + config::ShippedList("chips", ".textproto") +
          "; or give a path to a chip .textproto / .json)" + config::DidYouMean(arg, ShippedChipNames()));
    }
  }
  config::Chip cfg;
  config::SourceMap raw(path);
  config::ParseFile(path, &cfg, &raw);
  config::SourceMap locs(path);
  locs.Merge("chip", raw, config::Location{path, 1, 1});
  for (const auto& s : sets) {
    // Errors about an overridden field name the --set that set it, as `tpsim run` says them (they
    // named the chip file's line of the field).
    const config::Location where = OverrideLocation(s);
    const std::string field = s.path.rfind("chip.", 0) == 0 ? s.path.substr(5) : s.path;
    config::SetScalarField(&cfg, field, s.value, where);
    locs.SetAppending("chip." + field, where);
  }
  return arch::Chip::Build(cfg, locs);
}

validate::CollectiveRow PredictCollective(const arch::Chip& chip, const std::string& op, int ranks,
                                          uint64_t bytes, const std::string& algo, const std::string& proto) {
  validate::CollectiveRow row;
  row.op = op;
  row.ranks = ranks;
  row.size_bytes = bytes;
  arch::gpu::CollOp cop;
  if (!arch::gpu::ParseCollOp(op, &cop)) {
    throw std::invalid_argument("unknown op '" + op +
                                "' (valid: " + config::JoinNames(arch::gpu::CollOpNames()) + ")");
  }
  const config::Chip& cfg = chip.config();
  if (cfg.has_gpu()) {
    arch::gpu::CollQuery q;
    q.op = cop;
    q.ranks = ranks;
    q.bytes = bytes;
    if (!arch::gpu::ParseAlgo(algo, &q.algo)) {
      throw std::invalid_argument("unknown algorithm '" + algo + "' (valid: auto, ring, tree, nvls, p2p)");
    }
    if (!arch::gpu::ParseProto(proto, &q.proto)) {
      throw std::invalid_argument("unknown protocol '" + proto + "' (valid: auto, ll, ll128, simple)");
    }
    const arch::gpu::CollEstimate e = arch::gpu::EstimateCollective(cfg.gpu(), chip.num_cores(), q);
    CheckClock(e.time_us,
               "one " + op + " of " + std::to_string(bytes) + " bytes over " + std::to_string(ranks) +
                   " ranks of " + cfg.name(),
               "the size and the chip's gpu block");
    row.time_us = e.time_us;
    row.gpu_us = e.gpu_us;
    row.algbw_gbps = e.algbw_gbps;
    row.busbw_gbps = e.busbw_gbps;
    row.algorithm = arch::gpu::ToString(e.algo);
    row.protocol = arch::gpu::ToString(e.proto);
    return row;
  }
  // A chip without a GPU device: tpsim's own collective lowering, analytical engine.
  mapping::CollectiveKind kind;
  switch (cop) {
    case arch::gpu::CollOp::kAllReduce:
      kind = mapping::CollectiveKind::kAllReduce;
      break;
    case arch::gpu::CollOp::kAllGather:
      kind = mapping::CollectiveKind::kAllGather;
      break;
    case arch::gpu::CollOp::kReduceScatter:
      kind = mapping::CollectiveKind::kReduceScatter;
      break;
    case arch::gpu::CollOp::kAllToAll:
      kind = mapping::CollectiveKind::kAllToAll;
      break;
    default:
      throw std::invalid_argument(op + " is not modelled on " + cfg.name() +
                                  " (a chip without a gpu block: all_reduce, all_gather, reduce_scatter, "
                                  "all_to_all)");
  }
  if (proto != "auto") {
    throw std::invalid_argument("--proto " + proto + ": " + cfg.name() +
                                " has no NCCL protocols (a chip without a gpu block); use auto");
  }
  const auto names = mapping::CollectiveNames();
  if (algo != "auto" && std::find(names.begin(), names.end(), algo) == names.end()) {
    throw std::invalid_argument("unknown algorithm '" + algo + "' for " + cfg.name() + " (valid: auto, " +
                                config::JoinNames(names) + ")");
  }
  if (ranks < 2 || ranks > chip.num_cores()) {
    throw std::invalid_argument("ranks " + std::to_string(ranks) + " outside [2, " +
                                std::to_string(chip.num_cores()) + "] (the cores of " + cfg.name() + ")");
  }
  if (bytes == 0) throw std::invalid_argument("size 0: a collective needs at least one byte");
  // The lowering cuts the buffer into a chunk per rank in whole 2-byte elements: below one element
  // a rank, some chunks were empty and the times meaningless (an all_gather of 2 bytes over 8
  // ranks was timed faster than one of 1 byte).
  if (bytes < 2 * static_cast<uint64_t>(ranks))
    throw std::invalid_argument(op + " of " + std::to_string(bytes) + " bytes over " + std::to_string(ranks) +
                                " ranks: less than one 2-byte element a rank (the buffer is cut into a chunk "
                                "per rank); give at least " +
                                std::to_string(2 * static_cast<uint64_t>(ranks)) + " bytes");
  // Certain to pass the clock before anything is lowered, as `tpsim run` refuses it (exit 2): a
  // rank's chunk crosses a link between cores at least once, at best the fastest one's rate. (It was found
  // after lowering, at the transfer, exit 1.) Half the clock, so that rounding cannot refuse a
  // run that fits.
  double fastest = 0;
  for (const arch::Link& l : chip.links())  // not a memory controller's
    if (chip.node(l.src).kind != arch::Node::kMemory && chip.node(l.dst).kind != arch::Node::kMemory)
      fastest = std::max(fastest, l.bandwidth_gbps);
  const double chunk_s = fastest > 0 ? static_cast<double>(bytes) / ranks / (fastest * 1e9) : 0;
  if (chunk_s > 0.5 * 9223372036854775807.0 * 1e-12) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%g", fastest);
    throw std::invalid_argument(op + " of " + std::to_string(bytes) + " bytes over " + std::to_string(ranks) +
                                " ranks: a rank's chunk over the fastest link (" + rate +
                                " GB/s) would take at least " + DaysText(chunk_s) + ", longer than " +
                                kClockLimit + ": check chip.noc.link_bandwidth_gbps");
  }
  const mapping::Program p = mapping::CollectiveProgram(chip, algo, kind, ranks, bytes, 2);
  Ps ps = 0;
  if (!p.empty()) {
    const EngineOutput timing = MakeEngine("analytical")->Run(p, chip);
    // A saturated time is no result. This command has no --engine: an experiment with the
    // collective is timed on TLM by `tpsim run`.
    CheckRepresentable(p, chip, timing, "tpsim run --engine tlm on an experiment with this collective");
    ps = timing.makespan_ps;
  }
  row.time_us = static_cast<double>(ps) * 1e-6;
  row.gpu_us = row.time_us;  // no host issue cost in tpsim's own lowering
  row.algbw_gbps = ps > 0 ? static_cast<double>(bytes) / (row.time_us * 1000.0) : 0;
  row.busbw_gbps = row.algbw_gbps * arch::gpu::BusBwFactor(cop, ranks);
  row.algorithm = p.collectives.empty() ? algo : mapping::ToString(p.collectives[0].algorithm);
  if (!p.ops.empty()) row.fallback = p.ops[0].ref.note;
  row.protocol = "none";
  return row;
}

validate::GemmRow PredictGemm(const arch::Chip& chip, uint64_t m, uint64_t n, uint64_t k,
                              const std::string& dtype) {
  arch::GemmShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  if (!arch::ParseDtype(dtype, &s.dtype)) {
    throw std::invalid_argument("unknown dtype '" + dtype + "' (valid: bf16, fp16, fp8)");
  }
  const arch::GemmEstimate e = arch::CoreGemm(chip, s);
  // The systolic core's time saturates at the 2^63 ps clock (Chip::GemmTime), the GPU model's
  // (a double) passes it: neither is a time tpsim can represent.
  CheckClock(e.time_us,
             "a GEMM of m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                 (chip.config().has_gpu() ? " on one GPU of " : " on one core of ") + chip.config().name(),
             std::string("the shape and the chip's ") +
                 (chip.config().has_gpu() ? "gpu block" : "clock_mhz and core"));
  validate::GemmRow r;
  r.m = m;
  r.n = n;
  r.k = k;
  r.dtype = dtype;
  r.time_us = e.time_us;
  r.tflops = e.tflops;
  r.bound = arch::ToString(e.bound);
  r.tiles = e.tiles;
  r.waves = e.waves;
  r.has_tiles = true;
  return r;
}

std::vector<std::string> UnreadChipSets(const std::string& command, bool gpu_node,
                                        const std::vector<Override>& sets) {
  std::vector<std::string> out;
  for (const Override& o : sets) {
    const std::string p = o.path.starts_with("chip.") ? o.path.substr(5) : o.path;
    if (p == "name") continue;  // read: it names the chip in the output
    // On a GPU node the collective model reads the gpu block and the GPU count, the GEMM model the
    // gpu block alone.
    const bool gpu_collectives_read =
        p.starts_with("gpu.") || p == "noc.nodes";  // a GPU node's switch counts its GPUs by nodes alone
    std::string why;
    if (gpu_node && command == "collectives") {
      if (!gpu_collectives_read)
        why = "a GPU node's collectives are the NCCL-like model of chip.gpu over its GPUs (noc.nodes)";
    } else if (gpu_node && command == "compare") {
      // What neither reads (on other chips the collective lowering reads every chip field).
      if (!gpu_collectives_read) why = "neither the GEMM nor the collective model of the chip reads it";
    } else if (gpu_node) {
      if (!p.starts_with("gpu.")) why = "a GPU's GEMMs are the model of chip.gpu";
    } else if (command == "gemm") {
      for (const char* other : {"noc.", "memory", "energy.", "collectives."})
        if (p.starts_with(other)) why = "a GEMM on one core reads the core and its clock (core, clock_mhz)";
    }
    if (!why.empty()) out.push_back("--set " + o.path + " is ignored: " + why);
  }
  return out;
}

validate::GpuPredictorFactory MicrobenchPredictorFactory() {
  return [](const std::string& chip_arg, const std::vector<std::string>& sets) {
    std::vector<Override> overrides;
    for (const auto& s : sets) overrides.push_back(ParseOverride(s));
    auto chip = std::make_shared<const arch::Chip>(LoadChipArg(chip_arg, overrides));
    // A --set that neither model reads (a file's rows are collectives or GEMMs).
    for (const std::string& w : UnreadChipSets("compare", chip->config().has_gpu(), overrides))
      std::cerr << "tpsim compare: warning: " << w << "\n";
    validate::GpuPredictor p;
    p.chip_name = chip->config().name();
    p.collective = [chip](const validate::CollectiveRow& m) {
      return PredictCollective(*chip, m.op, m.ranks, m.size_bytes, m.algorithm, m.protocol);
    };
    p.gemm = [chip](const validate::GemmRow& m) { return PredictGemm(*chip, m.m, m.n, m.k, m.dtype); };
    return p;
  };
}

}  // namespace tpsim::sim
