// Lowering: workload -> Program. The driver: for each phase (prefill, then each decode
// step) it walks the simulated layers through the passes (lower_context.h lists them),
// stage by stage, and sends the activation between stages.
#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>

#include "mapping/attention.h"
#include "mapping/functional.h"
#include "mapping/gemm_emitter.h"
#include "mapping/layer_pass.h"
#include "mapping/layout_convert.h"
#include "mapping/memory_plan.h"
#include "mapping/pipeline.h"
#include "mapping/validate_mapping.h"

namespace tpsim::mapping {
namespace {

// The passes of one lowering over one LowerContext.
class Lowering {
 public:
  Lowering(const arch::Chip& chip, const config::Model& model, const config::Workload& wl,
           const config::Mapping& m, const LowerOptions& opts)
      : cx_(chip, model, wl, m, opts),
        opts_(opts),
        sram_(cx_),
        gpu_(cx_),
        conv_(cx_),
        gemm_(cx_, conv_),
        attn_(cx_),
        layer_(cx_, conv_, gemm_, attn_) {
    cx_.mem = chip.config().has_gpu() ? static_cast<MemoryPlanner*>(&gpu_) : &sram_;
  }
  // Mixed-iteration mode (LowerIteration): attention per chunk.
  void SetChunks(std::vector<llm::SeqChunk> chunks) { cx_.chunks = std::move(chunks); }
  // The memory plan for a run whose weight GEMMs have `rows` (SizeWeights; empty: not known).
  WeightPlan PlanOnly(std::span<const uint64_t> rows) { return SizeWeights(cx_, gemm_, rows); }
  Program Run(const PlacementFile& file);

 private:
  // The phases with attention replicas (mapping.attention_dp = dp > 1): each op of a layer
  // lowered for every replica in turn (LayerPass::Layers), the MoE block once per stage.
  void RunReplicas(const StagePlacement& placed, const std::vector<int>& stage_of, uint32_t layers,
                   uint64_t b, int dp);
  // The phase steps to lower (0: the prefill).
  std::vector<uint32_t> Steps() const;
  // Sets up step `step` (0: the prefill; the `si`-th of Steps()) for the layer pass: cx_'s
  // phase, decode step and context, `ph`'s decode flag, new tokens and context, and the
  // role names of llm's layer at the first step and the first decode step.
  void StartStep(size_t si, uint32_t step, llm::Phase* ph, bool* named_decode);
  LowerContext cx_;
  LowerOptions opts_;
  SramTimeline sram_;  // systolic cores
  GpuHbmPlan gpu_;     // GPU-node chips (chip.gpu)
  LayoutConverter conv_;
  GemmEmitter gemm_;
  AttentionEmitter attn_;
  LayerPass layer_;
};

Program Lowering::Run(const PlacementFile& file) {
  // Also sets p, d and grid. Sized for the rows of every step of the workload, whichever of
  // them are lowered (LowerOptions::decode_steps_only), so that every step plans alike; a mixed
  // iteration's rows are its own only, and the request stream it is one of keeps one plan
  // for all of its iterations (PlanWeights without a run): not known.
  const WeightPlan plan = PlanOnly(cx_.chunks.empty() ? GemmRows(cx_.wl, cx_.m) : std::vector<uint64_t>{});
  cx_.algo = cx_.m.collective();  // resolved per collective by ChooseCollective ("" -> ring, "auto" -> rule)
  cx_.sw = InSwitchReductionOf(cx_.chip.config());
  const config::Model& model = cx_.model;
  const config::Workload& wl = cx_.wl;
  const int p = cx_.p;
  const int stages = std::max<int>(1, static_cast<int>(cx_.m.pipeline_stages()));
  const uint32_t layers = wl.num_layers() ? wl.num_layers() : model.num_layers();
  const uint64_t b = std::max<uint32_t>(1, wl.batch());
  cx_.lmax = wl.cached_prefix() + wl.seq_len() + wl.decode_steps();
  if (!cx_.chunks.empty()) {
    cx_.lmax = 0;
    for (const llm::SeqChunk& c : cx_.chunks) cx_.lmax += uint64_t{c.cached} + c.new_tokens;
  }
  Program& prog = cx_.prog;
  prog.num_cores = cx_.chip.num_cores();
  prog.num_channels = static_cast<int>(cx_.chip.channels().size());
  if (cx_.func) {
    prog.func.dtype_bytes = static_cast<uint32_t>(cx_.d);
    prog.func.head_dim = model.head_dim();
    prog.func.batch = static_cast<uint32_t>(b);
  }

  // Attention replicas (mapping.attention_dp): a stage has p x dp cores, replica k its ranks
  // [k p, (k+1) p) and the batch's sequences [k b / dp, (k+1) b / dp) (ValidateMapping: dp
  // divides b).
  const int dp = std::max(1, static_cast<int>(cx_.m.attention_dp()));
  if (dp > 1 && !cx_.chunks.empty())
    throw std::invalid_argument(
        "mapping.attention_dp > 1 is not supported in mixed iterations (tpsim serve); use attention_dp 1");
  cx_.batch = b / static_cast<uint64_t>(dp);
  const StagePlacement placed = PlaceStages(cx_.chip, cx_.m, stages, p * dp, file);
  std::vector<int> stage_of(layers);
  for (uint32_t l = 0; l < layers; ++l) stage_of[l] = LayerStage(l, stages, layers);

  cx_.mem->Place(plan);  // SRAM: weights and KV resident when they fit; GPU: both in HBM
  if (cx_.chip.config().has_gpu() && cx_.m.enforce_eager())
    prog.kernel_launch_ps =
        static_cast<int64_t>(std::llround(cx_.chip.config().gpu().kernel_launch_us() * 1e6));

  const uint64_t kv_cols = cx_.NumKvHeads() * model.head_dim();
  if (dp > 1) {
    RunReplicas(placed, stage_of, layers, b, dp);
    if (cx_.func) prog.func.tensors = std::move(cx_.tensors);
    return cx_.builder.Build();
  }
  for (uint32_t l = 0; l < layers; ++l) {
    cx_.kcache.push_back(
        cx_.NewTensor(FuncTensorKind::kCache, b * cx_.lmax, kv_cols, FuncSeed(l, 100), wl.cached_prefix()));
    cx_.vcache.push_back(
        cx_.NewTensor(FuncTensorKind::kCache, b * cx_.lmax, kv_cols, FuncSeed(l, 101), wl.cached_prefix()));
  }
  llm::Phase ph;
  ph.batch = static_cast<uint32_t>(b);
  ph.dtype_bytes = static_cast<uint32_t>(cx_.d);
  std::vector<TaskId> prev_out;
  const std::vector<uint32_t> steps = Steps();
  ProgramBuilder::Fill after_first;
  bool named_decode = false;
  for (size_t si = 0; si < steps.size(); ++si) {
    const uint32_t step = steps[si];
    StartStep(si, step, &ph, &named_decode);
    cx_.t = b * ph.new_tokens;
    cx_.cores = placed.cores[stage_of.empty() ? 0 : stage_of[0]];
    cx_.layer = 0;
    cx_.NewOp("input", "replicated");
    int32_t x = cx_.NewTensor(FuncTensorKind::kInput, cx_.t, model.hidden_size(), FuncSeed(step, 200));
    for (int r = 0; r < p; ++r) cx_.ts[x].ready[r] = prev_out;
    for (uint32_t l = 0; l < layers; ++l) {
      const int s = stage_of[l];
      cx_.cores = placed.cores[s];
      cx_.coll_grid = placed.grids[s];
      Layout next = Layout::Replicated();
      if (l + 1 < layers && stage_of[l + 1] == s) next = layer_.WantedInput();
      x = layer_.Layer(l, x, next);
      if (l + 1 < layers && stage_of[l + 1] != s) x = StageSend(cx_, conv_, x, placed.cores[stage_of[l + 1]]);
      // The second layer of the first step is what each of its later layers takes: room for
      // them at once (and one more, for stage sends and the like). Decode steps differ in
      // size and number: their tasks grow the arrays as they come.
      if (si == 0 && l == 0) after_first = cx_.builder.fill();
      if (si == 0 && l == 1) cx_.builder.ReserveMore(after_first, layers - 1);
    }
    FuncOutput out;
    out.phase = cx_.phase;
    out.step = cx_.step;
    out.rows = static_cast<uint32_t>(cx_.t);
    out.cols = model.hidden_size();
    prev_out.clear();
    for (int r = 0; r < p; ++r) {
      const Range rows = RowsOf(cx_.ts[x].layout, cx_.t, p, r),
                  cols = ColsOf(cx_.ts[x].layout, out.cols, p, r);
      if (cx_.func && rows.size() && cols.size()) out.parts.push_back({cx_.cores[r], Sl(x, rows, cols)});
      Append(&prev_out, cx_.ts[x].ready[r]);
    }
    if (cx_.func) prog.func.outputs.push_back(std::move(out));
    cx_.mem->EndPhase();
    if (opts_.on_pass) opts_.on_pass(si + 1, steps.size());
  }
  if (cx_.func) prog.func.tensors = std::move(cx_.tensors);
  return cx_.builder.Build();
}

std::vector<uint32_t> Lowering::Steps() const {
  std::vector<uint32_t> steps;  // 0: the prefill
  if (opts_.decode_steps_only.empty()) {
    for (uint32_t step = 0; step <= cx_.wl.decode_steps(); ++step) steps.push_back(step);
  } else {
    if (!opts_.skip_prefill) steps.push_back(0);
    for (uint32_t step : opts_.decode_steps_only) {
      if (step == 0 || step > cx_.wl.decode_steps() || (!steps.empty() && step <= steps.back()))
        throw std::invalid_argument("mapping: decode_steps_only must increase within 1..decode_steps");
      steps.push_back(step);
    }
  }
  return steps;
}

void Lowering::StartStep(size_t si, uint32_t step, llm::Phase* ph, bool* named_decode) {
  const config::Workload& wl = cx_.wl;
  const bool decode = step > 0;
  cx_.phase = !cx_.chunks.empty() ? Phase::kMixed : decode ? Phase::kDecode : Phase::kPrefill;
  cx_.step = decode ? step - 1 : 0;
  ph->decode = decode;
  ph->new_tokens = decode ? 1 : wl.seq_len();
  ph->cached = decode ? wl.cached_prefix() + wl.seq_len() + cx_.step : wl.cached_prefix();
  if (si == 0 || (decode && !*named_decode)) cx_.names = RoleNames(llm::BuildLayer(cx_.model, *ph));
  *named_decode = *named_decode || decode;
  cx_.cached = ph->cached;
}

void Lowering::RunReplicas(const StagePlacement& placed, const std::vector<int>& stage_of, uint32_t layers,
                           uint64_t b, int dp) {
  const config::Model& model = cx_.model;
  const config::Workload& wl = cx_.wl;
  const int p = cx_.p;
  const uint64_t bk = b / static_cast<uint64_t>(dp), h = model.hidden_size();
  const uint64_t kv_cols = cx_.NumKvHeads() * model.head_dim();
  // Replica k's caches: its sequences' blocks (FuncTensor::seq0 / seqs).
  std::vector<std::vector<int32_t>> kc(dp), vc(dp);
  auto seqs = [&](int32_t t, int k) {
    cx_.tensors[t].seq0 = static_cast<uint32_t>(bk * k), cx_.tensors[t].seqs = static_cast<uint32_t>(bk);
  };
  for (int k = 0; k < dp; ++k) {
    cx_.replica = k;
    for (uint32_t l = 0; l < layers; ++l) {
      kc[k].push_back(cx_.NewTensor(FuncTensorKind::kCache, bk * cx_.lmax, kv_cols, FuncSeed(l, 100),
                                    wl.cached_prefix()));
      vc[k].push_back(cx_.NewTensor(FuncTensorKind::kCache, bk * cx_.lmax, kv_cols, FuncSeed(l, 101),
                                    wl.cached_prefix()));
      seqs(kc[k].back(), k), seqs(vc[k].back(), k);
    }
  }
  uint64_t t_all = 0;
  int stage = 0;
  // Replica k of the current stage (k = -1: the whole stage, for the MoE block).
  auto use = [&](int k) {
    const std::vector<int>& all = placed.cores[stage];
    cx_.replica = k;
    if (k < 0) {
      cx_.p = p * dp, cx_.cores = all, cx_.coll_grid = placed.grids[stage], cx_.t = t_all, cx_.batch = b;
      return;
    }
    cx_.p = p, cx_.t = t_all / dp, cx_.batch = bk, cx_.coll_grid = RankGrid{};
    cx_.cores.assign(all.begin() + k * p, all.begin() + (k + 1) * p);
    cx_.kcache = kc[k], cx_.vcache = vc[k];
  };
  llm::Phase ph;
  ph.batch = static_cast<uint32_t>(b);
  ph.dtype_bytes = static_cast<uint32_t>(cx_.d);
  std::vector<TaskId> prev_out;
  bool named_decode = false;
  const std::vector<uint32_t> steps = Steps();
  for (size_t si = 0; si < steps.size(); ++si) {
    const uint32_t step = steps[si];
    StartStep(si, step, &ph, &named_decode);  // no chunks here (Run refuses them with replicas)
    t_all = b * ph.new_tokens;
    stage = stage_of.empty() ? 0 : stage_of[0];
    cx_.layer = 0;
    std::vector<int32_t> xs(dp);
    for (int k = 0; k < dp; ++k) {
      use(k);
      cx_.ShareOps(k == 0 ? LowerContext::OpShare::kRecord : LowerContext::OpShare::kReplay);
      cx_.NewOp("input", "replicated");
      // Rows [k t / dp, (k+1) t / dp) of the phase's input: replica k's sequences.
      xs[k] = cx_.NewTensor(FuncTensorKind::kInput, cx_.t, h, FuncSeed(step, 200));
      seqs(xs[k], k);
      for (int r = 0; r < p; ++r) cx_.ts[xs[k]].ready[r] = prev_out;
    }
    cx_.ShareOps(LowerContext::OpShare::kOff);
    for (uint32_t l = 0; l < layers; ++l) {
      stage = stage_of[l];
      Layout next = Layout::Replicated();
      if (l + 1 < layers && stage_of[l + 1] == stage) next = layer_.WantedInput();
      xs = layer_.Layers(l, xs, next, use);
      if (l + 1 < layers && stage_of[l + 1] != stage) {
        const std::vector<int>& to_all = placed.cores[stage_of[l + 1]];
        for (int k = 0; k < dp; ++k) {
          use(k);
          cx_.ShareOps(k == 0 ? LowerContext::OpShare::kRecord : LowerContext::OpShare::kReplay);
          xs[k] = StageSend(cx_, conv_, xs[k],
                            std::vector<int>(to_all.begin() + k * p, to_all.begin() + (k + 1) * p));
        }
        cx_.ShareOps(LowerContext::OpShare::kOff);
      }
    }
    FuncOutput out;
    out.phase = cx_.phase;
    out.step = cx_.step;
    out.rows = static_cast<uint32_t>(t_all);
    out.cols = static_cast<uint32_t>(h);
    prev_out.clear();
    for (int k = 0; k < dp; ++k) {
      use(k);
      for (int r = 0; r < p; ++r) {
        const int32_t x = xs[k];
        const Range rows = RowsOf(cx_.ts[x].layout, cx_.t, p, r),
                    cols = ColsOf(cx_.ts[x].layout, out.cols, p, r);
        if (cx_.func && rows.size() && cols.size()) {
          out.parts.push_back({cx_.cores[r], Sl(x, rows, cols)});
          out.part_row0.push_back(static_cast<uint32_t>(k * cx_.t + rows.lo));
        }
        Append(&prev_out, cx_.ts[x].ready[r]);
      }
    }
    if (cx_.func) cx_.prog.func.outputs.push_back(std::move(out));
    cx_.mem->EndPhase();
  }
}

// Checks the mapping (reading the placement file once) and lowers.
Program CheckAndRun(Lowering* lowering, const arch::Chip& chip, const config::Model& model,
                    const config::Workload& wl, const config::Mapping& m) {
  const PlacementFile file = ReadPlacementFile(m);
  std::vector<config::Diag> diags;
  ValidateMapping(m, chip, model, wl, config::SourceMap(), file, &diags);
  if (!diags.empty()) throw config::ConfigError(std::move(diags));
  return lowering->Run(file);
}

}  // namespace

Program Lower(const arch::Chip& chip, const config::Model& model, const config::Workload& wl,
              const config::Mapping& m, const LowerOptions& opts) {
  Lowering lowering(chip, model, wl, m, opts);
  return CheckAndRun(&lowering, chip, model, wl, m);
}

Program LowerIteration(const arch::Chip& chip, const config::Model& model, const config::Mapping& m,
                       const std::vector<llm::SeqChunk>& chunks, uint32_t layers, const std::string& dtype,
                       const LowerOptions& opts) {
  if (chunks.empty()) throw std::invalid_argument("mapping: an iteration needs at least one chunk");
  config::Workload wl;
  wl.set_batch(1);
  uint64_t rows = 0;
  for (const llm::SeqChunk& c : chunks) {
    if (c.new_tokens == 0) throw std::invalid_argument("mapping: an iteration chunk has 0 new tokens");
    rows += c.new_tokens;
  }
  wl.set_seq_len(static_cast<uint32_t>(rows));
  wl.set_num_layers(layers);
  wl.set_dtype(dtype);
  Lowering lowering(chip, model, wl, m, opts);
  lowering.SetChunks(chunks);
  return CheckAndRun(&lowering, chip, model, wl, m);
}

WeightPlan PlanWeights(const arch::Chip& chip, const config::Model& model, const config::Mapping& m,
                       uint32_t layers, const std::string& dtype, const config::Workload* run) {
  // The run's workload where given (its KV cache decides which layout a two-layout plan keeps:
  // SizeWeights), else one token.
  const bool known = run && !run->has_requests();
  config::Workload wl;
  if (known) {
    wl = *run;
  } else {
    wl.set_batch(1);
    wl.set_seq_len(1);
  }
  wl.set_num_layers(layers);
  wl.set_dtype(dtype);
  Lowering lowering(chip, model, wl, m, LowerOptions{});
  // A request stream's iterations have rows of their own (LowerIteration): not known here.
  return lowering.PlanOnly(known ? GemmRows(*run, m) : std::vector<uint64_t>{});
}

}  // namespace tpsim::mapping
