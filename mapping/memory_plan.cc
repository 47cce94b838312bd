#include "mapping/memory_plan.h"

#include <algorithm>

#include "mapping/gemm_emitter.h"
#include "mapping/moe_routing.h"
#include "mapping/pipeline.h"

namespace tpsim::mapping {

std::vector<uint64_t> GemmRows(const config::Workload& wl, const config::Mapping& m) {
  const uint64_t seqs = std::max<uint64_t>(1, wl.batch()) /
                        std::max<uint64_t>(1, m.attention_dp());  // ValidateMapping: divides
  std::vector<uint64_t> rows{seqs * wl.seq_len()};
  if (wl.decode_steps() > 0) rows.push_back(seqs);
  return rows;
}

double KvBytesPerLayer(const config::Model& model, const config::Workload& wl, const config::Mapping& m,
                       uint64_t kv_heads) {
  const uint64_t d = wl.dtype() == "fp32" ? 4 : 2;
  const uint64_t seqs = std::max<uint64_t>(1, wl.batch()) / std::max<uint64_t>(1, m.attention_dp());
  const uint64_t positions = uint64_t{wl.cached_prefix()} + wl.seq_len() + wl.decode_steps();
  return 2.0 * static_cast<double>(seqs) * static_cast<double>(positions) * static_cast<double>(kv_heads) *
         model.head_dim() * static_cast<double>(d);
}

WeightPlan SizeWeights(LowerContext& cx, const GemmEmitter& gemm, std::span<const uint64_t> gemm_rows) {
  cx.p = static_cast<int>(cx.m.tp());
  cx.d = cx.wl.dtype() == "fp32" ? 4 : 2;
  int rows = static_cast<int>(cx.m.grid_rows());
  if (rows <= 0) {
    rows = 1;
    for (int r = 1; r * r <= cx.p; ++r)
      if (cx.p % r == 0) rows = r;
  }
  cx.grid = {rows, cx.p / rows};
  const int stages = std::max<int>(1, static_cast<int>(cx.m.pipeline_stages()));
  // The layers each stage holds (LowerOptions::plan_layers), which may be more than lowered.
  const uint32_t layers = cx.plan_layers       ? cx.plan_layers
                          : cx.wl.num_layers() ? cx.wl.num_layers()
                                               : cx.model.num_layers();
  const int most_layers = MostLayersPerStage(stages, layers);
  const uint64_t nkv = cx.NumKvHeads();
  const uint64_t unknown[] = {0};
  if (gemm_rows.empty()) gemm_rows = unknown;
  WeightPlan plan;
  plan.stage_layers.assign(static_cast<size_t>(stages), 0);
  for (int s = 0; s < stages; ++s)
    plan.stage_layers[static_cast<size_t>(s)] =
        StageFirstLayer(s + 1, stages, layers) - StageFirstLayer(s, stages, layers);
  // Per stage, the weight elements each of its cores holds for GEMMs lowered at `rows`.
  const uint64_t moe = cx.model.num_experts()
                           ? MoeLayerWeightElems(cx.model, MoeGroupsOf(cx.m, cx.model, StageRanks(cx.m)))
                           : 0;
  auto per_stage = [&](std::span<const uint64_t> rows) {
    // Attention's shards every layer; the dense MLP's or (MoE models) the MoE block's by layer.
    uint64_t attn = 0, mlp = 0;
    for (const LayerGemm& g : LayerGemms(cx.model)) {
      const bool is_mlp = g.role == llm::OpRole::kGateProj || g.role == llm::OpRole::kUpProj ||
                          g.role == llm::OpRole::kDownProj;
      (is_mlp && cx.model.num_experts() ? mlp : attn) += gemm.ShardElems(g, rows);
    }
    std::vector<uint64_t> elems(static_cast<size_t>(stages), 0);
    for (int s = 0; s < stages; ++s) {
      const uint32_t first = StageFirstLayer(s, stages, layers), end = StageFirstLayer(s + 1, stages, layers);
      const uint64_t sparse = cx.model.num_experts()
                                  ? llm::MoeLayerCount(cx.model, end) - llm::MoeLayerCount(cx.model, first)
                                  : 0;
      elems[static_cast<size_t>(s)] = (end - first) * attn + sparse * moe + (end - first - sparse) * mlp;
    }
    return elems;
  };
  auto most = [&](const std::vector<uint64_t>& elems) {
    return *std::max_element(elems.begin(), elems.end()) * cx.d;
  };
  const std::vector<uint64_t> all = per_stage(gemm_rows);
  plan.weight_bytes_per_core = most(all);
  for (uint64_t e : all) plan.stage_weight_bytes.push_back(e * cx.d);
  const bool gpu = cx.chip.config().has_gpu();
  const bool automatic = cx.m.weights() != "sram" && cx.m.weights() != "dram";
  const uint64_t sram = cx.chip.config().core().sram_bytes();
  plan.weights_in_sram =
      !gpu && (cx.m.weights() == "sram" || (automatic && plan.weight_bytes_per_core <= sram));
  // The KV cache of a core of the stage with the most layers, as SramTimeline::Place sizes it
  // (in double: absurd sizes saturate rather than wrap).
  const uint64_t kv_heads = nkv >= static_cast<uint64_t>(cx.p) ? (nkv + cx.p - 1) / cx.p : 1;
  const double kv = KvBytesPerLayer(cx.model, cx.wl, cx.m, kv_heads) * most_layers;
  auto fits = [&](uint64_t bytes, double beside) {
    return static_cast<double>(bytes) + beside <= static_cast<double>(sram);
  };
  if (!gpu && automatic && gemm_rows.size() == 2 && !fits(plan.weight_bytes_per_core, kv)) {
    // Both layouts do not fit together, or the KV cache does not fit beside them: keep the
    // decode steps' layout (every step runs it) where it fits, and where both fit, only if the
    // KV cache then fits beside it (each decode step would otherwise read the cache from DRAM,
    // where the prefill streams its layout once); the prefill's layout streams.
    const std::vector<uint64_t> one = per_stage(gemm_rows.subspan(1, 1));
    if (most(one) <= sram && (!plan.weights_in_sram || fits(most(one), kv))) {
      plan.weights_in_sram = true;
      plan.resident_rows = gemm_rows[1];
      plan.weight_bytes_per_core = most(one);
      plan.stage_weight_bytes.clear();
      std::vector<uint64_t> streamed(static_cast<size_t>(stages));
      for (size_t s = 0; s < one.size(); ++s) {
        plan.stage_weight_bytes.push_back(one[s] * cx.d);
        streamed[s] = all[s] - one[s];  // each GEMM's distinct layouts include the resident one
        plan.stage_streamed_bytes.push_back(streamed[s] * cx.d);
      }
      plan.streamed_bytes_per_core = most(streamed);
    }
  }
  plan.layers_per_core = static_cast<uint32_t>(most_layers);
  plan.kv_heads_per_core = static_cast<uint32_t>(kv_heads);
  return plan;
}

void SramTimeline::Place(const WeightPlan& plan) {
  sram_ = cx_.chip.config().core().sram_bytes();
  const uint64_t b = cx_.batch;  // the sequences one core's replica holds
  const uint64_t wbytes = plan.weight_bytes_per_core;
  const uint64_t per_layer = 2 * b * cx_.lmax * plan.kv_heads_per_core * cx_.model.head_dim() * cx_.d;
  const uint64_t kvbytes = per_layer * plan.layers_per_core;
  weights_sram_ = plan.weights_in_sram;
  resident_rows_ = plan.resident_rows;
  kv_sram_ = (weights_sram_ ? wbytes : 0) + kvbytes <= sram_;
  weights_ = weights_sram_ ? wbytes : 0;
  kv_layer_ = kv_sram_ ? per_layer : 0;
  kv_layers_ = plan.layers_per_core;
  cx_.prog.weights_location = !weights_sram_       ? WeightsLocation::kDramStreamed
                              : plan.resident_rows ? WeightsLocation::kSramPrefillStreamed
                                                   : WeightsLocation::kSram;
  cx_.prog.kv_location = kv_sram_ ? KvLocation::kSram : KvLocation::kDram;
}

void GpuHbmPlan::Place(const WeightPlan&) {
  cx_.prog.weights_location = WeightsLocation::kHbm;
  cx_.prog.kv_location = KvLocation::kHbm;
}

uint64_t SramTimeline::Resident() const {
  uint64_t layers = kv_layers_;
  if (cx_.phase == Phase::kPrefill && cx_.cached == 0) {
    // The first prefill: the core's layers of its stage up to and including cx_.layer, the
    // stages cut from the lowered layers as Lower cuts them.
    const int stages = std::max<int>(1, static_cast<int>(cx_.m.pipeline_stages()));
    const uint32_t lowered = cx_.wl.num_layers() ? cx_.wl.num_layers() : cx_.model.num_layers();
    const uint32_t first = StageFirstLayer(LayerStage(cx_.layer, stages, lowered), stages, lowered);
    layers = std::min<uint64_t>(layers, uint64_t{cx_.layer} - first + 1);
  }
  return weights_ + kv_layer_ * layers;
}

void SramTimeline::Created(int32_t t, FuncTensorKind kind) {
  if (kind == FuncTensorKind::kActivation || kind == FuncTensorKind::kInput) live_.push_back(t);
}

void SramTimeline::Dead(int32_t t) {
  live_.erase(std::remove(live_.begin(), live_.end(), t), live_.end());
  cx_.ts[t].evicted.clear();
}

void SramTimeline::Grow(size_t core) {
  if (prefetch_mark_.size() <= core) {
    prefetch_mark_.resize(core + 1, -1);
    last_compute_.resize(core + 1, -1);
  }
}

std::vector<TaskId> SramTimeline::WeightReadDeps(int rank) {
  const size_t core = static_cast<size_t>(cx_.cores[rank]);
  Grow(core);
  const int64_t gate = prefetch_mark_[core];
  prefetch_mark_[core] = last_compute_[core];
  if (gate < 0) return {};
  return {TaskId(static_cast<uint32_t>(gate))};
}

std::vector<TaskId> SramTimeline::LastCompute(int rank) const {
  const size_t core = static_cast<size_t>(cx_.cores[rank]);
  if (core >= last_compute_.size() || last_compute_[core] < 0) return {};
  return {TaskId(static_cast<uint32_t>(last_compute_[core]))};
}

void SramTimeline::AfterCompute(int rank, TaskId task) {
  const size_t core = static_cast<size_t>(cx_.cores[rank]);
  Grow(core);
  last_compute_[core] = task;
}

SramTimeline::Local SramTimeline::LocalOf(int r) const {
  if (cx_.replica >= 0) return {cx_.replica, r, cx_.p};
  const int pr = cx_.p / std::max(1, static_cast<int>(cx_.m.attention_dp()));
  return {r / pr, r % pr, pr};
}

uint64_t SramTimeline::Held(int32_t x, const Local& l) const {
  const FuncTensor& ft = cx_.tensors[x];
  const Layout& lay = cx_.ts[x].layout;
  return RowsOf(lay, ft.rows, l.p, l.rank).size() * ColsOf(lay, ft.cols, l.p, l.rank).size() * cx_.d;
}

void SramTimeline::Reload(int32_t t, int r, std::vector<TaskId>* deps) {
  const Local l = LocalOf(r);
  // Another attention replica's tensor lives on other cores.
  if (t < 0 || cx_.ts[t].replica != l.replica || cx_.ts[t].evicted.empty() || cx_.ts[t].evicted[l.rank] < 0)
    return;
  TaskId rd = cx_.Memory(r, Held(t, l), false, {TaskId(static_cast<uint32_t>(cx_.ts[t].evicted[l.rank]))});
  cx_.ts[t].evicted[l.rank] = -1;
  cx_.ts[t].ready[l.rank].push_back(rd);
  if (deps) deps->push_back(rd);
}

void SramTimeline::BeforeCompute(int rank, llm::OpKind kind, const int32_t (&used)[3], uint64_t transient,
                                 std::vector<TaskId>* deps) {
  auto touched = [&](int32_t x) { return x == used[0] || x == used[1] || x == used[2]; };
  for (int32_t u : used) Reload(u, rank, deps);
  const uint64_t resident = Resident();
  const uint64_t avail = sram_ > resident ? sram_ - resident : 0;
  uint64_t idle = 0;
  // Only the rank's own attention replica's tensors live on its core (mapping.attention_dp).
  const Local l = LocalOf(rank);
  // An activation no task has produced on this rank yet (an op's output made before the task
  // that writes it, such as the MoE block's weighted sum) holds no data: it takes no SRAM and
  // there is nothing to write back. Inputs are there from the start.
  auto in_sram = [&](int32_t x) {
    const std::vector<std::vector<TaskId>>& ready = cx_.ts[x].ready;
    if (cx_.tensors[x].kind == FuncTensorKind::kActivation && static_cast<size_t>(l.rank) < ready.size() &&
        ready[l.rank].empty())
      return false;
    return cx_.ts[x].replica == l.replica && (cx_.ts[x].evicted.empty() || cx_.ts[x].evicted[l.rank] < 0);
  };
  const bool attention = kind == llm::OpKind::kBatchedGemm || kind == llm::OpKind::kSoftmax;
  for (int32_t x : live_)
    if (!attention && !touched(x) && in_sram(x)) idle += Held(x, l);
  for (size_t i = 0; !attention && i < live_.size() && transient + idle > avail; ++i) {
    const int32_t x = live_[i];
    const uint64_t held = Held(x, l);
    if (touched(x) || !in_sram(x) || held == 0) continue;
    const TaskId w = cx_.Memory(rank, held, true, cx_.Ready(x, l.rank));
    if (cx_.ts[x].evicted.empty()) cx_.ts[x].evicted.assign(l.p, -1);
    cx_.ts[x].evicted[l.rank] = w;
    deps->push_back(w);
    idle -= held;
    cx_.prog.ops[cx_.cur_op].spilled_bytes += held;
    cx_.prog.spilled_bytes += held;
  }
  if (transient + idle > avail) {
    uint64_t spill = transient + idle - avail;
    if (spill > transient) spill = transient;
    const TaskId w = cx_.Memory(rank, spill, true, *deps);
    const TaskId rd = cx_.Memory(rank, spill, false, {w});
    deps->push_back(rd);
    cx_.prog.ops[cx_.cur_op].spilled_bytes += spill;
    cx_.prog.spilled_bytes += spill;
  }
}

}  // namespace tpsim::mapping
