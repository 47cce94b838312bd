#include "mapping/estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <utility>

#include "configs/files.h"
#include "mapping/collective/collective.h"
#include "mapping/mapping.h"
#include "mapping/moe_routing.h"

namespace tpsim::mapping {

namespace {

// Of the largest collective `algorithm` makes on `p` ranks (all_reduce, reduce_scatter,
// all_gather, all_to_all, rotate), counted from its schedule: its transfers, and their deps as
// LayoutConverter::RunSchedule gives them (a transfer waits on every transfer into its source
// in the step before that had any, or on one task, plus one when it reduces). Above kCounted
// ranks the counts at kCounted are scaled: transfers by p(p-1) / (kCounted(kCounted-1)), as
// the algorithms' transfer counts grow at most as rank pairs do (ring and direct exactly so,
// halving_doubling and mesh_2d slower); deps the same where a transfer's deps stay as many at
// half the ranks, else (direct: p - 1 each in its second step) one power of p more.
struct CollectiveCount {
  double transfers = 0, deps = 0;
};
CollectiveCount CountTransfers(const std::string& algorithm, int p);

// CountTransfers, remembered per (algorithm, ranks): a sweep asks for the same few.
CollectiveCount CollectiveTransfers(const std::string& algorithm, int p) {
  if (p <= 1) return {};
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, CollectiveCount> counted;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = counted.try_emplace({algorithm, p});
  if (fresh) it->second = CountTransfers(algorithm, p);
  return it->second;
}

// The counts at exactly q ranks (the largest of each over the kinds).
CollectiveCount CountAt(const std::string& algorithm, int q) {
  CollectiveCount most;
  for (CollectiveKind kind :
       {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,
        CollectiveKind::kAllToAll, CollectiveKind::kRotate}) {
    const uint64_t bytes = uint64_t{64} * static_cast<uint64_t>(q) * static_cast<uint64_t>(q);
    CollectiveCount n;
    for (const std::string& algo : {algorithm, std::string("ring")}) {
      try {
        const Schedule s = LowerCollective(algo, kind, q, bytes, 2);
        std::vector<double> last_in(static_cast<size_t>(q), 0), now(static_cast<size_t>(q), 0);
        for (const CollectiveStep& step : s.steps) {
          for (const Xfer& x : step.xfers) {
            n.transfers += 1;
            n.deps += std::max(1.0, last_in[static_cast<size_t>(x.src)]) + (x.reduce ? 1 : 0);
            now[static_cast<size_t>(x.dst)] += 1;
          }
          for (size_t r = 0; r < now.size(); ++r)
            if (now[r] > 0) last_in[r] = now[r], now[r] = 0;
        }
        break;
      } catch (const std::exception&) {
        n = {};  // this algorithm cannot (a grid it needs, an unknown name): count the ring
      }
    }
    most.transfers = std::max(most.transfers, n.transfers);
    most.deps = std::max(most.deps, n.deps);
  }
  return most;
}

CollectiveCount CountTransfers(const std::string& algorithm, int p) {
  constexpr int kCounted = 128;
  const int q = std::min(p, kCounted);
  CollectiveCount c = CountAt(algorithm, q);
  if (p > q) {
    const double pairs = (static_cast<double>(p) * (p - 1)) / (static_cast<double>(q) * (q - 1));
    const CollectiveCount half = CountAt(algorithm, q / 2);
    const bool deps_grow = c.deps / c.transfers > 1.5 * (half.deps / half.transfers);
    c.transfers *= pairs;
    c.deps *= pairs * (deps_grow ? static_cast<double>(p - 1) / (q - 1) : 1.0);
  }
  return c;
}

// What one collective's deps past 2 a transfer (kBytesPerTask's share) take.
double ExtraDepBytes(const CollectiveCount& c) {
  return std::max(0.0, c.deps - 2 * c.transfers) * ProgramEstimate::kBytesPerDep;
}

// Collectives per layer (both blocks) that a partitioner's layouts need, an upper bound
// counted from the lowering of each (tests/mapping/estimate_test.cc): the converting
// collectives before and after its GEMMs, the heads conversions of q, k and v, and the
// residual adds. An unknown (newly registered) partitioner gets the largest.
double CollectivesPerLayer(const std::string& partition) {
  struct Count {
    const char* name;
    double collectives;
  };
  static constexpr Count kCounts[] = {
      {"k_split", 8}, {"n_split", 6}, {"megatron", 4}, {"m_split_rotate", 9}, {"mn_2d", 8},
  };
  double most = 0;
  for (const Count& c : kCounts) {
    if (partition == c.name) return c.collectives;
    most = std::max(most, c.collectives);
  }
  return most;
}

}  // namespace

ProgramEstimate EstimateProgram(const arch::Chip& chip, const config::Model& model,
                                const config::Workload& wl, const config::Mapping& m) {
  ProgramEstimate e;
  const int p = std::max<int>(1, static_cast<int>(m.tp()));
  const double stages = std::max<double>(1, m.pipeline_stages());
  const uint32_t layers = wl.num_layers() ? wl.num_layers() : model.num_layers();
  e.tp = p;
  e.passes = static_cast<double>(wl.decode_steps()) + 1;
  e.layers = layers;

  // The partitioners used: the mapping's (where empty, the one lowering uses: megatron; this
  // counted k_split's 8 collectives a layer for it), and those of its overrides.
  std::vector<std::string> parts = {config::EffectivePartition(m.partition())};
  for (const auto& o : m.overrides()) parts.push_back(o.partition());
  // mn_2d's grid: mapping.grid_rows, else the most square (as Lower resolves it).
  int grid_rows = static_cast<int>(m.grid_rows());
  if (grid_rows <= 0) {
    grid_rows = 1;
    for (int r = 1; r * r <= p; ++r)
      if (p % r == 0) grid_rows = r;
  }
  double shards = 1, coll = 0;
  for (const std::string& part : parts) {
    if (part == "m_split_rotate") shards = std::max<double>(shards, p);
    if (part == "mn_2d" && m.mn_2d_weights() == "k_steps") shards = std::max<double>(shards, grid_rows);
    coll = std::max(coll, CollectivesPerLayer(part));
  }
  // An MoE model whose simulated layers are all sparse has 4 weight GEMMs a layer (q, k, v, o;
  // its MoE blocks are counted below), no dense MLP intermediate, and the attention block's
  // half of the collectives (counted as all-reduces: twice a gather's transfers, which covers
  // the MoE block's conversion of its input to rows; tests/sim/estimate_test.cc).
  const bool all_sparse = llm::AllMoeLayers(model, layers);
  const double kGemms = all_sparse ? 4 : 7;
  if (all_sparse) coll = coll / 2;
  // A GPU-node chip's memory plan (GpuHbmPlan) emits no memory tasks: no reads, no spills.
  const bool gpu = chip.config().has_gpu();
  const double vector_ops = 12 + (model.qk_norm() ? 2 : 0);
  const double compute = p * (vector_ops + kGemms * shards);

  // Memory tasks: one read per streamed weight shard; a KV write and two reads per rank
  // when the KV cache is in DRAM; when a task's data and the activations held between ops
  // may not fit beside the resident weights and KV, evictions and spills, at most
  // kSpillsPerCompute per compute task (2.4 measured with 256 KiB of SRAM per core).
  constexpr double kSpillsPerCompute = 3;
  const double d = wl.dtype() == "fp32" ? 4 : 2;
  const double b = std::max<uint32_t>(1, wl.batch());
  const double h = model.hidden_size(), hd = model.head_dim(), nq = model.num_attention_heads();
  const double widest = std::max(
      {h, static_cast<double>(all_sparse ? model.moe_intermediate_size() : model.intermediate_size()),
       nq * hd});
  const double rows = b * std::max<uint32_t>(1, wl.seq_len());  // the prefill's rows, the most of any pass
  const double context = static_cast<double>(wl.cached_prefix()) + wl.seq_len() + wl.decode_steps();
  double memory = 0;
  bool weights_sram = false, kv_sram = false, weights_read = true;
  double resident = 0;
  try {
    const WeightPlan plan = PlanWeights(chip, model, m, layers, wl.dtype(), &wl);
    const double kv = 2.0 * b * context * plan.kv_heads_per_core * hd * d * plan.layers_per_core;
    const double sram = static_cast<double>(chip.config().core().sram_bytes());
    weights_sram = plan.weights_in_sram;
    // One layout resident, the other streamed (WeightPlan::resident_rows): its weight reads are
    // counted in every pass (more tasks than the run's).
    weights_read = !weights_sram || plan.resident_rows;
    kv_sram = (weights_sram ? static_cast<double>(plan.weight_bytes_per_core) : 0) + kv <= sram;
    resident = (weights_sram ? static_cast<double>(plan.weight_bytes_per_core) : 0) + (kv_sram ? kv : 0);
  } catch (const std::exception&) {
  }
  if (weights_read) memory += p * kGemms * shards;
  if (!kv_sram) memory += 3.0 * p;
  // Spills where a pass of `n` rows (the prefill's, or a decode step's batch) may not fit: a
  // decode step's attention, GEMM operands and held activations are those of its batch, so
  // spills in the prefill alone do not count in every decode step (moe-qwen3-235b-a22b, 32 MiB
  // per core: 3,456 spills a decode layer were counted, none are lowered;
  // Estimate.BoundsDecodeStepsOfTheirOwnSize).
  const double heads_per_rank = std::ceil(nq / p);
  const double sram = static_cast<double>(chip.config().core().sram_bytes());
  auto memory_at = [&](double n) {
    if (gpu) return 0.0;
    const double attention = heads_per_rank * b * (2 * (n / b) * context + 2 * context * hd) * d;
    const double gemm = 2 * n * widest * d + (weights_read ? 2 * h * widest / p * d : 0);
    const double held = 4 * n * widest * d;
    return memory + (std::max(attention, gemm) + held > sram - resident ? kSpillsPerCompute * compute : 0);
  };

  const CollectiveCount per_collective = CollectiveTransfers(CountedAlgorithm(m.collective()), p);
  const double rotations = kGemms * shards * (shards > 1 ? p : 0);
  // A pass of T tokens. An all-sparse layer under megatron alone has two collectives, both
  // between rows and replicated (o_proj's reduce_scatter into the MoE block's rows, q/k/v's
  // all_gather of them), each aligned to whole rows: a transfer carries a row at least, and a
  // row's partials meet (or its copies spread) in P - 1 transfers under every algorithm, so
  // such a collective has at most T (P - 1) transfers, an all-reduce twice that (in a decode
  // step of moe-qwen3-235b-a22b, T = 1: 63 each, against the 4,032 of a whole ring;
  // Estimate.BoundsMoeDecodeSteps). Elsewhere a collective's blocks need not be rows.
  const bool by_rows =
      all_sparse && !gpu &&
      std::all_of(parts.begin(), parts.end(), [](const std::string& x) { return x == "megatron"; });
  // A GPU node lowers a collective as one NCCL kernel a rank (layout_convert.cc NcclCollective),
  // not as the algorithm's transfers (moe-mixtral-8x7b's all-reduces: 8 kernels, 112 counted
  // before 2026-12-07; Estimate.BoundsDecodeStepsOfTheirOwnSize).
  auto transfers_at = [&](double tokens) {
    const double most = gpu ? p : per_collective.transfers;
    return coll * (by_rows ? std::min(most, 2 * tokens * (p - 1)) : most) + rotations;
  };
  // Attention replicas (mapping.attention_dp) repeat the dense part on their own ranks.
  const double dp = std::max(1, static_cast<int>(m.attention_dp()));
  e.per_layer = (compute + memory_at(rows) + transfers_at(rows)) * dp;
  e.per_layer_decode = (compute + memory_at(b) + transfers_at(b)) * dp;
  // A stage's hand-over of T tokens: P sends, after converting its output to whole rows or
  // replicated (pipeline.cc StageSend), P x P in all. Where the collectives move whole rows
  // (by_rows), that conversion spreads each row in P - 1 transfers: P + 2 T (P - 1) at most (in
  // a decode step of moe-qwen3-235b-a22b, 64 + 63 lowered against the 4,096 counted before
  // 2026-12-07; Estimate.BoundsDecodeStepsOfTheirOwnSize).
  auto handover_at = [&](double tokens) {
    const double all = static_cast<double>(p) * p;
    if (gpu) return (stages - 1) * dp * std::min(all, 2.0 * p);  // the conversion's p kernels
    return (stages - 1) * dp * (by_rows ? std::min(all, p + 2 * tokens * (p - 1)) : all);
  };
  e.tasks = e.layers * e.per_layer + handover_at(rows) +
            wl.decode_steps() * (e.layers * e.per_layer_decode + handover_at(b));
  if (model.num_experts() > 0) {
    // MoE blocks (moe_pass.h), per layer and pass of T tokens: at most min(E, T top_k) experts
    // get tokens, each on tp_moe ranks in each replica: 3 compute tasks (and a weight read when
    // weights stream); per rank the router's 2 tasks, the weighted sum, 4 shared-expert tasks,
    // and 2 weight reads; the dispatch and combine (direct) at most P (P - 1) transfers each.
    // A GPU-node chip: 3 grouped tasks per rank, no weight reads.
    const MoeGroups g = MoeGroupsOf(m, model, StageRanks(m));
    const double per_task = weights_sram || gpu ? 3 : 4;
    // A token's row goes to each of the g.tp ranks of each of its top_k experts' slots: an
    // all_to_all of T tokens has at most T top_k g.tp non-empty blocks, and every algorithm
    // sends a block in at most 2 transfers (hierarchical forwards it once).
    const double p_moe = g.p;
    auto all_to_all = [&](double tokens) {
      return std::min(p_moe * (p_moe - 1), 2.0 * tokens * model.num_experts_per_token() * g.tp);
    };
    auto block = [&](double tokens) {
      const double active = std::min<double>(model.num_experts(), tokens * model.num_experts_per_token());
      const double experts = gpu ? 3.0 * p_moe : active * g.tp * g.Replicas() * per_task;
      return experts + p_moe * (7.0 + (!weights_read || gpu ? 0 : 2)) + 2.0 * all_to_all(tokens);
    };
    e.tasks += e.layers * (block(rows) + wl.decode_steps() * block(b));
    // A combine transfer waits on its sender's experts' down GEMMs: one per expert of its slot
    // that got rows (128 a transfer at moe.ep 1, where every rank holds every expert).
    auto waits = [&](double tokens) {
      return all_to_all(tokens) *
             std::min<double>(g.ExpertsPerSlot(), tokens * model.num_experts_per_token());
    };
    if (!gpu) e.all_to_all_deps = e.layers * (waits(rows) + wl.decode_steps() * waits(b));
  }
  // The collectives' deps past 2 a transfer: direct's second step waits on every transfer into
  // its source, p - 1 deps a transfer, p^3 a collective.
  const double collectives = e.passes * e.layers * coll * dp;
  e.collective_deps = collectives * per_collective.deps;
  e.peak_bytes = e.tasks * ProgramEstimate::kBytesPerTask + collectives * ExtraDepBytes(per_collective) +
                 e.all_to_all_deps * ProgramEstimate::kBytesPerDep + ProgramEstimate::kBaseBytes;
  return e;
}

std::string CountedAlgorithm(const std::string& collective) {
  return collective == "auto" ? std::string(config::kDefaultCollective)
                              : config::EffectiveCollective(collective);
}

double CollectivePeakBytes(const std::string& algorithm, int ranks, double* transfers, double* deps) {
  const CollectiveCount c = CollectiveTransfers(CountedAlgorithm(algorithm), ranks);
  if (transfers) *transfers = c.transfers;
  if (deps) *deps = c.deps;
  return c.transfers * ProgramEstimate::kBytesPerTask + ExtraDepBytes(c) + ProgramEstimate::kBaseBytes;
}

std::string FormatBytes(double bytes) {
  char buf[64];
  if (bytes >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.3g GB", bytes / 1e9);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g MB", bytes / 1e6);
  }
  return buf;
}

}  // namespace tpsim::mapping
