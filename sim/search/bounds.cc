#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "llm/opgraph.h"
#include "mapping/mapping.h"
#include "mapping/pipeline.h"
#include "sim/energy.h"
#include "sim/search/detail.h"
#include "sim/search/search.h"

// Lower bounds of a candidate's metrics (search.h: LowerBounds). Every term is a bound of
// what the analytical engine computes for any partitioner, placement and collective:
//
// Compute. A weight GEMM [m,k] x [k,n] is cut into blocks m_c x n_c x k_c over the cores
// (any partition: split, replicated or rotated, every MAC at least once). A block takes
// ceil(m_c/R) ceil(n_c/C) tiles of k_c + R + C cycles over `arrays` arrays, divided by
// matrix_utilization (arch/chip.h GemmTime). Summed over the blocks, the tile-steps are at
// least max(m n k / R, n k) / C (ceil(m_c/R) >= max(m_c/R, 1), and the blocks' (n, k)
// faces cover the weight) and the tiles at least m n / (min(m, R) C) (a tile covers at
// most min(m, R) x C outputs). The busiest of the tp cores of a stage takes at least the
// sum over tp. In decode m is the batch (often 1): a weight is then streamed through the
// array at C columns a cycle, R times slower than the MAC peak.
//
// Chain. The tokens of a pass (the prompt, or one decode step) go through the layers in
// order (no micro-batching: mapping/pipeline.h), and a core runs its compute tasks one
// after another: a pass takes at least the sum over its stages of the stage's compute
// (above). A decode step also waits for the previous one (the next token).
//
// Memory. Weights the memory plan leaves in DRAM (mapping::PlanWeights) are read in every
// pass, each byte at least once, by the cores of its stage, through their channels
// (chip.ChannelOf); a channel serves its requests one after another at its effective
// bandwidth (sim/analytical: the schedule queues them; busy time = bytes / bandwidth).
// So the run takes at least passes x the weight bytes over the bandwidth of the
// min(tp x stages, channels) fastest channels. Within a decode step, a core's weight
// reads are double-buffered (mapping/memory_plan.h: the read of a weight op waits for
// the compute that preceded the previous weight op on that core), so every read but the
// first two of a stage's step starts after the step's input reached the stage: the stage
// takes at least (its weight bytes - twice its largest weight op) over the bandwidth of
// tp channels. GPU-node chips, MoE models, attention replicas and request streams get no bound
// (0: never pruned).
namespace tpsim::search {

using detail::Layers;

namespace {

// Picoseconds the busiest of `tp` cores spends at least on the weight GEMMs of `ops`.
double GemmGroupPs(const arch::Chip& chip, const std::vector<llm::Op>& ops, uint32_t tp) {
  const auto& core = chip.config().core();
  const double r = std::max<uint32_t>(1, core.systolic_rows()),
               cc = std::max<uint32_t>(1, core.systolic_cols());
  const double arrays = std::max<uint32_t>(1, core.systolic_arrays());
  // GemmTime divides by the utilisation; one above 1 would be faster than the peak.
  const double util = core.matrix_utilization() > 0 ? core.matrix_utilization() : 1.0;
  double cycles = 0;
  for (const llm::Op& op : ops) {
    if (op.kind != llm::OpKind::kGemm || op.weight_bytes == 0) continue;
    const double m = static_cast<double>(op.m) * std::max<uint64_t>(1, op.batch);
    const double n = static_cast<double>(op.n), k = static_cast<double>(op.k);
    if (m == 0 || n == 0 || k == 0) continue;
    const double steps = std::max(m * n * k / r, n * k) / cc;
    const double tiles = m * n / (std::min(m, r) * cc);
    cycles += (steps + (r + cc) * tiles) / arrays;
  }
  return cycles * static_cast<double>(chip.cycle_ps()) / util / tp;
}

}  // namespace

Bounds LowerBounds(const sim::Experiment& base, const arch::Chip& chip, const Candidate& c) {
  Bounds b;
  const config::Chip& cc = chip.config();
  const config::Model& model = base.cfg.model();
  // Attention replicas (mapping.attention_dp > 1) split the batch, which the per-group
  // bounds below do not model: no bound either.
  // A served request stream is timed by the serving scheduler (queueing, batching): no bound.
  if (cc.has_gpu() || model.num_experts() > 0 || c.attention_dp > 1 || detail::Serving(base)) return b;
  if (!(chip.cycle_ps() > 0) || c.tp == 0 || c.stages == 0) return b;
  const config::Workload& wl = base.cfg.workload();
  const uint32_t layers = Layers(base);
  const uint32_t dtype_bytes = sim::DtypeBytes(wl.dtype());
  auto layer_ops = [&](bool decode, uint32_t tokens) {
    llm::Phase ph;
    ph.decode = decode;
    ph.batch = c.batch;
    ph.new_tokens = tokens;
    ph.cached = decode ? wl.seq_len() : 0;
    ph.dtype_bytes = dtype_bytes;
    return llm::BuildLayer(model, ph).ops;
  };
  const std::vector<llm::Op> pre = layer_ops(false, wl.seq_len());
  const std::vector<llm::Op> dec = layer_ops(true, 1);
  // Weight-GEMM parameters only (kGemm always runs on the matrix unit, mapping/cost.h);
  // norm weights are not MACs.
  double params = 0, layer_bytes = 0, largest_op = 0;
  for (const llm::Op& op : pre) {
    if (op.kind != llm::OpKind::kGemm) continue;
    params += static_cast<double>(op.weight_bytes) / dtype_bytes;
    layer_bytes += static_cast<double>(op.weight_bytes);
    largest_op = std::max(largest_op, static_cast<double>(op.weight_bytes));
  }
  // Compute: every layer in sequence on the tp cores of its stage.
  b.prefill_ps = layers * GemmGroupPs(chip, pre, c.tp);
  const double step_compute = wl.decode_steps() > 0 ? layers * GemmGroupPs(chip, dec, c.tp) : 0;
  b.decode_step_ps = step_compute;

  // Energy per token: at least the weight GEMMs' MACs at the chip's MAC energy (every
  // other term of sim/energy.h is >= 0), plus the weights read from DRAM below.
  const bool fp32 = wl.dtype() == "fp32";
  const double mac_pj = fp32 ? cc.energy().mac_fp32_pj() : cc.energy().mac_bf16_pj();
  const double tokens =
      static_cast<double>(c.batch) * (static_cast<double>(wl.seq_len()) + wl.decode_steps());
  double energy_j = tokens * params * layers * mac_pj * 1e-12;
  const double passes = 1.0 + wl.decode_steps();
  double run_memory_ps = 0;
  try {
    const config::Mapping m = MappingOf(base.cfg.mapping(), c);
    // The run's plan: its steps' rows decide each GEMM's partitioner and so its shards (an mn_2d
    // that falls back to n_split holds n_split's). Sized at 0 rows, such weights could stream
    // here while the run keeps them in SRAM, and the bound passed the run's own time.
    const config::Workload run = WorkloadOf(wl, c);
    const mapping::WeightPlan plan = mapping::PlanWeights(chip, model, m, layers, wl.dtype(), &run);
    std::vector<double> gbps;
    for (const auto& ch : chip.channels()) gbps.push_back(ch.bandwidth_gbps);
    std::sort(gbps.rbegin(), gbps.rend());
    const size_t group = std::min<size_t>(gbps.size(), uint64_t{c.tp} * c.stages);
    const size_t tp_channels = std::min<size_t>(gbps.size(), c.tp);
    double group_gbps = 0, tp_gbps = 0;
    for (size_t i = 0; i < group; ++i) group_gbps += gbps[i];
    for (size_t i = 0; i < tp_channels; ++i) tp_gbps += gbps[i];
    // A plan that keeps the decode steps' layout and streams the prefill's (resident_rows): the
    // prefill reads those shards, each core of a stage its own, through the same channels.
    if (plan.resident_rows && group_gbps > 0) {
      double bytes = 0;
      for (uint64_t stage : plan.stage_streamed_bytes) bytes += static_cast<double>(stage) * c.tp;
      run_memory_ps = bytes * 1000.0 / group_gbps;
      b.prefill_ps = std::max(b.prefill_ps, run_memory_ps);
    }
    if (!plan.weights_in_sram && group_gbps > 0) {
      const double bytes = layer_bytes * layers;
      run_memory_ps = passes * bytes * 1000.0 / group_gbps;
      b.prefill_ps = std::max(b.prefill_ps, bytes * 1000.0 / group_gbps);
      if (wl.decode_steps() > 0) {
        // A step: each stage's reads but its first two, over its tp channels.
        std::vector<double> stage_layers(c.stages, 0);
        for (uint32_t l = 0; l < layers; ++l)
          stage_layers[static_cast<size_t>(mapping::LayerStage(l, static_cast<int>(c.stages), layers))] += 1;
        const double layer_compute = step_compute / layers;
        double step = 0;
        for (double sl : stage_layers) {
          const double reads = std::max(0.0, sl * layer_bytes - 2 * largest_op) * 1000.0 / tp_gbps;
          step += std::max(sl * layer_compute, reads);
        }
        b.decode_step_ps = std::max(b.decode_step_ps, step);
      }
      double pj_per_byte = std::numeric_limits<double>::infinity();  // the cheapest memory kind
      for (const auto& mem : cc.memory())
        pj_per_byte = std::min(pj_per_byte, mem.kind() == "hbm" ? cc.energy().hbm_pj_per_byte()
                                                                : cc.energy().dram_pj_per_byte());
      if (std::isfinite(pj_per_byte)) energy_j += passes * bytes * pj_per_byte * 1e-12;
    }
  } catch (const std::exception&) {
    // An invalid mapping: the run reports it; no memory bound.
  }
  b.total_ps = std::max(b.prefill_ps + b.decode_step_ps * wl.decode_steps(), run_memory_ps);
  b.energy_per_token_j = cc.has_energy() && tokens > 0 ? energy_j / tokens : 0;
  return b;
}

}  // namespace tpsim::search
