// Lowering: workload -> Program. One canonical dense decoder layer (norm, QKV, per-head
// norm, RoPE, KV write, attention by heads, O, residual, norm, gate/up, SiLU*mul, down,
// residual) is lowered per layer and phase; op names come from llm::BuildLayer.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "mapping/functional.h"
#include "mapping/mapping.h"
#include "mapping/partition/partitioner.h"
#include "mapping/placement/placement.h"

namespace tpsim::mapping {
namespace {

using llm::OpClass;
using llm::OpKind;

// Vector-unit lane-operations per element.
constexpr double kNormOps = 4, kRopeOps = 3, kSoftmaxOps = 5, kAddOps = 1, kSiluMulOps = 5, kCopyOps = 1;

enum Role : int {
  kAttnNorm,
  kQ,
  kK,
  kV,
  kQkNorm,
  kRopeR,
  kKvWriteR,
  kScores,
  kSoftmaxR,
  kPv,
  kO,
  kResid1,
  kMlpNorm,
  kGate,
  kUp,
  kAct,
  kDown,
  kResid2,
  kKNorm,
  kNumRoles
};
const char* const kRoleNames[kNumRoles] = {
    "attn_norm", "q_proj",   "k_proj",    "v_proj",       "q_norm",        "rope",     "kv_write",
    "attn_qk",   "softmax",  "attn_pv",   "o_proj",       "attn_residual", "mlp_norm", "gate_proj",
    "up_proj",   "silu_mul", "down_proj", "mlp_residual", "k_norm"};

// Weight roles, for FuncTensor seeds (shared with the functional reference).
enum WeightRole : int { kWq, kWk, kWv, kWo, kWgate, kWup, kWdown };

// Names of the layer graph's ops by role (canonical names where the graph has none).
std::vector<std::string> RoleNames(const config::Model& model, const llm::LayerGraph& g) {
  std::vector<std::string> names(kRoleNames, kRoleNames + kNumRoles);
  int norms = 0, bgemms = 0, elementwise = 0;
  bool seen_up = false;
  for (const llm::Op& op : g.ops) {
    switch (op.kind) {
      case OpKind::kRouter:
        throw std::invalid_argument("mapping: MoE layers (op " + op.name + ") are not supported yet");
      case OpKind::kNorm:
        if (op.cls == OpClass::kAttention || (op.k == model.head_dim() && op.k != model.hidden_size())) {
          names[op.name.find('k') == 0 ? kKNorm : kQkNorm] = op.name;
        } else {
          names[norms++ == 0 ? kAttnNorm : kMlpNorm] = op.name;
        }
        break;
      case OpKind::kRope:
        names[kRopeR] = op.name;
        break;
      case OpKind::kKvWrite:
        names[kKvWriteR] = op.name;
        break;
      case OpKind::kSoftmax:
        names[kSoftmaxR] = op.name;
        break;
      case OpKind::kBatchedGemm:
        names[bgemms++ == 0 ? kScores : kPv] = op.name;
        break;
      case OpKind::kElementwise:
        if (seen_up && elementwise < 2) {
          names[kAct] = op.name;
          elementwise = 2;
        } else {
          names[elementwise++ == 0 ? kResid1 : kResid2] = op.name;
        }
        break;
      case OpKind::kGemm:
        if (op.cls == OpClass::kExperts)
          throw std::invalid_argument("mapping: MoE layers (op " + op.name + ") are not supported yet");
        if (op.cls == OpClass::kO) names[kO] = op.name;
        if (op.cls == OpClass::kDown) names[kDown] = op.name;
        if (op.cls == OpClass::kQkv) {
          char c = op.name.empty() ? 'q' : op.name[0];
          if (op.name.find("qkv") != std::string::npos) {
            names[kQ] = op.name + ".q", names[kK] = op.name + ".k", names[kV] = op.name + ".v";
          } else {
            names[c == 'k' ? kK : c == 'v' ? kV : kQ] = op.name;
          }
        }
        if (op.cls == OpClass::kGateUp) {
          seen_up = true;
          if (op.name.find("gate_up") != std::string::npos) {
            names[kGate] = op.name + ".gate", names[kUp] = op.name + ".up";
          } else {
            names[op.name.find("up") != std::string::npos ? kUp : kGate] = op.name;
          }
        }
        break;
      default:
        break;
    }
  }
  return names;
}

// Stage s's core ids from a placement file (tp ids per stage, in stage order); the whole
// list when it is too short (Place then reports the count).
std::vector<int> StageFileCores(const std::vector<int>& all, int s, int tp) {
  if (all.size() >= static_cast<size_t>((s + 1) * tp))
    return {all.begin() + s * tp, all.begin() + (s + 1) * tp};
  return all;
}

struct TState {
  Layout layout;
  std::vector<std::vector<uint32_t>> ready;  // per rank: tasks a reader depends on
  // Per rank: the memory task that wrote this tensor's block out to DRAM to make room
  // (SRAM timeline), -1 while it is in SRAM. Empty until something is evicted.
  std::vector<int64_t> evicted;
};

uint64_t DtypeBytes(const config::Workload& wl) { return wl.dtype() == "fp32" ? 4 : 2; }

class Lowerer : public GemmContext {
 public:
  Lowerer(const arch::Chip& chip, const config::Model& model, const config::Workload& wl,
          const config::Mapping& m, const LowerOptions& opts)
      : chip_(chip), model_(model), wl_(wl), m_(m), func_(opts.functional) {}

  Program Run();
  // Mixed-iteration mode (LowerIteration): attention per chunk.
  void SetChunks(std::vector<llm::SeqChunk> chunks) { chunks_ = std::move(chunks); }
  WeightPlan PlanOnly();

  int P() const override { return p_; }
  RankGrid Grid() const override { return grid_; }
  void EmitShard(const GemmSpec& g, int rank, Range rows, Range ks, Range cols) override;
  void EmitRotate(const GemmSpec& g) override;
  bool Mn2dKSteps() const override { return m_.mn_2d_weights() == "k_steps"; }
  void EmitKSteps(const GemmSpec& g) override;
  // The steps of a rotation (kRotate lowered as `sched`, Program collective `coll`) run by
  // `groups` of ranks at once (step s of every group before step s + 1 of any). Each
  // transfer waits for the block it forwards; with two block buffers per rank, the block
  // arriving at step s >= 1 also waits until its destination has computed on, and
  // forwarded, the block it overwrites. Every arrival is computed on:
  // compute(rank, the arrival's units of `unit_bytes`, {transfer}). computes[r] starts with
  // rank r's computes on its own block; last_in[r] is what its own block waits for.
  using RotateCompute = std::function<uint32_t(int, Range, std::vector<uint32_t>)>;
  void RotateSteps(const Schedule& sched, int32_t coll, const std::vector<std::vector<int>>& groups,
                   uint64_t unit_bytes, std::vector<std::vector<uint32_t>> last_in,
                   std::vector<std::vector<std::vector<uint32_t>>>* computes, FuncCollective* fc,
                   const RotateCompute& compute);

 private:
  int32_t NewTensor(FuncTensorKind kind, uint64_t rows, uint64_t cols, uint64_t seed = 0, uint32_t init = 0);
  uint32_t NewOp(const std::string& name, const std::string& partition);
  uint32_t AddTask(Task t, std::vector<uint32_t> deps);
  uint32_t Memory(int rank, uint64_t bytes, bool write, std::vector<uint32_t> deps);
  uint32_t Compute(int rank, Task t, FuncOp f, std::vector<uint32_t> deps, uint64_t transient);
  void Vector(int rank, OpKind kind, FuncKind fk, double ops_per_elem, FuncSlice a, FuncSlice b,
              FuncSlice out, std::vector<uint32_t> deps, uint32_t head_dim = 0, uint32_t position_offset = 0);
  std::vector<uint32_t> Ready(int32_t t, int r) const { return ts_[t].ready[r]; }
  // SRAM timeline: the activations the current stage's cores hold between ops (oldest
  // first). Activation tensors join when created; they leave when their last reader has
  // been emitted (Dead). Compute() counts the idle ones against SRAM and evicts them.
  std::vector<int32_t> live_;
  void Dead(int32_t t) {
    live_.erase(std::remove(live_.begin(), live_.end(), t), live_.end());
    ts_[t].evicted.clear();
  }
  uint64_t Held(int32_t t, int r) const {  // bytes of t rank r holds in t's layout
    const FuncTensor& ft = tensors_[t];
    const Layout& l = ts_[t].layout;
    return RowsOf(l, ft.rows, p_, r).size() * ColsOf(l, ft.cols, p_, r).size() * d_;
  }
  // Reads t's block back into rank r's SRAM when it was evicted; readers then depend on it.
  void Reload(int32_t t, int r, std::vector<uint32_t>* deps);
  static void Append(std::vector<uint32_t>* a, const std::vector<uint32_t>& b) {
    a->insert(a->end(), b.begin(), b.end());
  }

  // Layouts
  // Whether tensor t's current layout already gives every rank what `want` needs: the same
  // layout, or (neither being partial sums) every rank's wanted block inside the one it holds.
  bool Satisfies(int32_t t, const Layout& want) const { return Covers(ts_[t].layout, t, want); }
  // The same for tensor t in layout `have`.
  bool Covers(const Layout& have, int32_t t, const Layout& want) const {
    if (have == want) return true;
    if (have.kind == LayoutKind::kPartial || want.kind == LayoutKind::kPartial) return false;
    const FuncTensor& ft = tensors_[t];
    for (int r = 0; r < p_; ++r) {
      Range hr = RowsOf(have, ft.rows, p_, r), hc = ColsOf(have, ft.cols, p_, r);
      Range wr = RowsOf(want, ft.rows, p_, r), wc = ColsOf(want, ft.cols, p_, r);
      if (wr.lo < hr.lo || wr.hi > hr.hi || wc.lo < hc.lo || wc.hi > hc.hi) return false;
    }
    return true;
  }
  void Convert(int32_t t, const Layout& want, const std::string& base);
  struct Piece {
    FuncSlice region;
    uint64_t offset;
  };
  void Collective(CollectiveKind kind, int32_t t, const std::vector<std::vector<Piece>>& pack,
                  const std::vector<std::vector<Piece>>& unpack, uint64_t elems, uint64_t align_elems,
                  const std::string& base, const Layout& result);
  // The same collective run at once by disjoint groups of ranks (groups[g][i]: group g's
  // i-th rank; all groups the same size), each group on its own buffer of `elems`
  // elements; pack/unpack offsets are within the group's buffer. `what` names the groups
  // in the op label ("grid-row"). One CollectiveInfo with groups = groups.size().
  void GroupCollective(CollectiveKind kind, int32_t t, const std::vector<std::vector<int>>& groups,
                       const std::string& what, const std::vector<std::vector<Piece>>& pack,
                       const std::vector<std::vector<Piece>>& unpack, uint64_t elems, uint64_t align_elems,
                       const std::string& base, const Layout& result);
  // Lowers one collective run by the rank groups `groups` (equal sizes n; algorithm `algo`, a
  // buffer of `bytes` per rank) and records its CollectiveInfo (members: the groups' cores)
  // for op `op`; returns its index. The whole TP group uses the stage region's grid; a
  // sub-group is one line of the TP grid (1 x n, for mesh_2d).
  int32_t AddCollective(CollectiveKind kind, const std::string& algo,
                        const std::vector<std::vector<int>>& groups, uint64_t bytes, uint64_t align_bytes,
                        uint32_t op,
                        const Schedule** sched);  // *sched: the lowered steps (kept by the Lowerer)
  // The TP grid's lines as rank groups: grid rows (ranks i gc .. i gc + gc - 1) or grid
  // columns (ranks j, gc + j, ...); grid rows with gc = p_: one group of every rank.
  std::vector<std::vector<int>> GridLines(int gc, bool columns) const {
    std::vector<std::vector<int>> g(columns ? gc : p_ / gc);
    for (int r = 0; r < p_; ++r) g[columns ? r % gc : r / gc].push_back(r);
    return g;
  }
  // mn_2d sub-group gathers: grid -> grid_rows within each grid row, grid_rows ->
  // replicated within each grid column. False (nothing emitted) when the blocks are unequal.
  bool GatherGridRow(int32_t t, const std::string& base);
  void GatherGridColumn(int32_t t, const std::string& base);
  std::vector<Piece> Blocks(int32_t t, const Layout& l, int r) const;  // rank r's block and its offset

  // Ops
  const Partitioner* PartitionerFor(OpClass cls) const;
  GemmSpec Spec(OpClass cls, uint64_t k, uint64_t n, uint32_t k_unit, uint32_t n_unit) const;
  Layout WantedInput(OpClass cls, uint64_t k, uint64_t n, uint32_t k_unit, uint32_t n_unit);
  int32_t Gemm(Role role, OpClass cls, int32_t x, int32_t w, uint64_t k, uint64_t n, uint32_t k_unit,
               uint32_t n_unit);
  void ResolvePartial(int32_t t, const Layout& next_want, const std::string& base);
  int32_t RowNorm(Role role, int32_t x, const Layout& next_want);
  int32_t HeadOp(Role role, const char* suffix, FuncKind fk, double ops, int32_t x, uint64_t heads,
                 uint32_t pos0);
  int32_t Add(Role role, int32_t a, int32_t res, const Layout& next_want, Role producer);
  // The new op `role`: y = a (op) b element-wise over t_ x cols, a and b already in
  // layout `l`; one vector task per rank on its block. Returns y (layout l).
  int32_t Elementwise2(Role role, const Layout& l, int32_t a, int32_t b, uint64_t cols, FuncKind fk,
                       double ops_per_elem);
  int32_t Layer(uint32_t layer, int32_t x, const Layout& next_want);
  int32_t StageSend(int32_t x, const std::vector<int>& to);
  void PlanMemory();
  uint64_t WeightElemsPerCore(int layers);

  const arch::Chip& chip_;
  const config::Model& model_;
  const config::Workload& wl_;
  const config::Mapping& m_;
  const bool func_;  // build prog_.func (LowerOptions::functional)
  ProgramBuilder builder_;
  Program& prog_ = builder_.program();  // everything but the tasks, set as lowering goes
  // Every tensor's shape (and, for the functional executor, its initialisation); moved
  // to prog_.func.tensors when func_.
  std::vector<FuncTensor> tensors_;
  int p_ = 1;
  RankGrid grid_;
  uint64_t d_ = 2;
  std::string algo_;
  InSwitchReduction switch_;  // the chip's in-switch reduction (nvls), for ChooseCollective
  std::vector<int> cores_;
  RankGrid coll_grid_;  // the stage region's shape, for mesh_2d collectives (0 x 0: let it choose)
  // Lowered schedules by (algorithm, kind, ranks, bytes, align, grid rows, grid cols).
  std::map<std::tuple<std::string, int, int, uint64_t, uint64_t, int, int>, Schedule> schedules_;
  std::vector<RankGrid> stage_grids_;
  std::vector<TState> ts_;
  std::vector<std::string> names_;
  // Phase state
  Phase phase_ = Phase::kPrefill;
  uint32_t step_ = 0, layer_ = 0;
  uint64_t t_ = 0, cached_ = 0, lmax_ = 0;
  std::vector<int32_t> kcache_, vcache_;  // per layer
  // Memory plan
  bool weights_sram_ = true, kv_sram_ = true;
  uint64_t resident_ = 0, sram_ = 0;
  // Streamed weights are double-buffered: the read of a weight op's shard may
  // start once the compute that preceded the previous weight op on that core
  // has finished (one op of prefetch), not arbitrarily early.
  std::vector<int64_t> last_compute_, prefetch_mark_;
  std::vector<uint32_t> WeightReadDeps(int rank);
  uint32_t cur_op_ = 0;
  std::vector<llm::SeqChunk> chunks_;
  void ChunkAttention(int32_t q, int32_t kc, int32_t vc, int32_t attn, const std::vector<Range>& qh,
                      const std::function<void(int, Role, uint64_t, uint64_t, uint64_t, uint64_t, FuncOp,
                                               std::vector<uint32_t>, uint64_t)>& attn_task);
};

int32_t Lowerer::NewTensor(FuncTensorKind kind, uint64_t rows, uint64_t cols, uint64_t seed, uint32_t init) {
  FuncTensor ft;
  ft.kind = kind;
  ft.rows = static_cast<uint32_t>(rows);
  ft.cols = static_cast<uint32_t>(cols);
  ft.seed = seed;
  ft.init_rows = init;
  tensors_.push_back(ft);
  TState st;
  st.ready.resize(p_);
  ts_.push_back(std::move(st));
  const int32_t id = static_cast<int32_t>(tensors_.size() - 1);
  if (kind == FuncTensorKind::kActivation || kind == FuncTensorKind::kInput) live_.push_back(id);
  return id;
}

uint32_t Lowerer::NewOp(const std::string& name, const std::string& partition) {
  OpInfo info;
  info.ref.phase = phase_;
  info.ref.step = step_;
  info.ref.layer = layer_;
  info.ref.op = name;
  info.ref.partition = partition;
  prog_.ops.push_back(std::move(info));
  cur_op_ = static_cast<uint32_t>(prog_.ops.size() - 1);
  return cur_op_;
}

uint32_t Lowerer::AddTask(Task t, std::vector<uint32_t> deps) {
  t.op = cur_op_;
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  return builder_.Add(t, deps);
}

uint32_t Lowerer::Memory(int rank, uint64_t bytes, bool write, std::vector<uint32_t> deps) {
  Task t;
  t.kind = TaskKind::kMemory;
  t.core = cores_[rank];
  t.channel = chip_.ChannelOf(t.core);
  t.write = write;
  t.bytes = bytes;
  return AddTask(t, std::move(deps));
}

std::vector<uint32_t> Lowerer::WeightReadDeps(int rank) {
  size_t core = static_cast<size_t>(cores_[rank]);
  if (prefetch_mark_.size() <= core) {
    prefetch_mark_.resize(core + 1, -1);
    last_compute_.resize(core + 1, -1);
  }
  int64_t gate = prefetch_mark_[core];
  prefetch_mark_[core] = last_compute_[core];
  if (gate < 0) return {};
  return {static_cast<uint32_t>(gate)};
}

void Lowerer::Reload(int32_t t, int r, std::vector<uint32_t>* deps) {
  if (t < 0 || ts_[t].evicted.empty() || ts_[t].evicted[r] < 0) return;
  uint32_t rd = Memory(r, Held(t, r), false, {static_cast<uint32_t>(ts_[t].evicted[r])});
  ts_[t].evicted[r] = -1;
  ts_[t].ready[r].push_back(rd);
  if (deps) deps->push_back(rd);
}

// SRAM timeline, per core: resident weights and KV, the activations still live (held
// between ops), and this task's own data (`transient`) must fit. Live activations this task
// does not touch are evicted to DRAM, oldest first, as far as needed (one write each; read
// back when next used); what still does not fit is spilled and read back around the task.
// Attention tasks (scores, softmax, PV) are the exception: they are checked against SRAM
// less the resident data only, as before the timeline (see Layer: q is read back before
// attention starts, so attention neither evicts nor reloads).
uint32_t Lowerer::Compute(int rank, Task t, FuncOp f, std::vector<uint32_t> deps, uint64_t transient) {
  const int32_t used[3] = {f.a.tensor, f.b.tensor, f.out.tensor};
  auto touched = [&](int32_t x) { return x == used[0] || x == used[1] || x == used[2]; };
  for (int32_t u : used) Reload(u, rank, &deps);
  uint64_t avail = sram_ > resident_ ? sram_ - resident_ : 0;
  uint64_t idle = 0;
  auto in_sram = [&](int32_t x) { return ts_[x].evicted.empty() || ts_[x].evicted[rank] < 0; };
  const bool attention = t.op_kind == OpKind::kBatchedGemm || t.op_kind == OpKind::kSoftmax;
  for (int32_t x : live_)
    if (!attention && !touched(x) && in_sram(x)) idle += Held(x, rank);
  for (size_t i = 0; !attention && i < live_.size() && transient + idle > avail; ++i) {
    const int32_t x = live_[i];
    const uint64_t held = Held(x, rank);
    if (touched(x) || !in_sram(x) || held == 0) continue;
    uint32_t w = Memory(rank, held, true, Ready(x, rank));
    if (ts_[x].evicted.empty()) ts_[x].evicted.assign(p_, -1);
    ts_[x].evicted[rank] = w;
    deps.push_back(w);
    idle -= held;
    prog_.ops[cur_op_].spilled_bytes += held;
    prog_.spilled_bytes += held;
  }
  if (transient + idle > avail) {
    uint64_t spill = transient + idle - avail;
    if (spill > transient) spill = transient;
    uint32_t w = Memory(rank, spill, true, deps);
    uint32_t rd = Memory(rank, spill, false, {w});
    deps.push_back(rd);
    prog_.ops[cur_op_].spilled_bytes += spill;
    prog_.spilled_bytes += spill;
  }
  f.core = cores_[rank];
  t.kind = TaskKind::kCompute;
  t.core = cores_[rank];
  if (func_) {
    t.func = static_cast<int32_t>(prog_.func.ops.size());
    prog_.func.ops.push_back(f);
  }
  prog_.ops[cur_op_].flops += t.flops + t.vector_ops;
  prog_.ops[cur_op_].bytes += t.bytes;
  uint32_t id = AddTask(t, std::move(deps));
  size_t core = static_cast<size_t>(cores_[rank]);
  if (last_compute_.size() <= core) {
    last_compute_.resize(core + 1, -1);
    prefetch_mark_.resize(core + 1, -1);
  }
  last_compute_[core] = id;
  return id;
}

void Lowerer::Vector(int rank, OpKind kind, FuncKind fk, double ops_per_elem, FuncSlice a, FuncSlice b,
                     FuncSlice out, std::vector<uint32_t> deps, uint32_t head_dim, uint32_t position_offset) {
  uint64_t elems = uint64_t{out.r1 - out.r0} * (out.c1 - out.c0);
  uint64_t in =
      uint64_t{a.r1 - a.r0} * (a.c1 - a.c0) + (b.tensor >= 0 ? uint64_t{b.r1 - b.r0} * (b.c1 - b.c0) : 0);
  Task t;
  t.op_kind = kind;
  t.m = out.r1 - out.r0;
  t.n = out.c1 - out.c0;
  t.vector_ops = ops_per_elem * static_cast<double>(elems);
  t.bytes = (in + elems) * d_;
  FuncOp f;
  f.kind = fk;
  f.a = a, f.b = b, f.out = out;
  f.head_dim = head_dim, f.position_offset = position_offset;
  uint32_t id = Compute(rank, t, f, std::move(deps), t.bytes);
  ts_[out.tensor].ready[rank].push_back(id);
}

bool IsGridKind(const Layout& l) { return l.kind == LayoutKind::kGrid || l.kind == LayoutKind::kGridRows; }

FuncSlice Sl(int32_t t, Range rows, Range cols) {
  return {t, static_cast<uint32_t>(rows.lo), static_cast<uint32_t>(rows.hi), static_cast<uint32_t>(cols.lo),
          static_cast<uint32_t>(cols.hi)};
}

// ---- Collectives -------------------------------------------------------------------------

std::vector<Lowerer::Piece> Lowerer::Blocks(int32_t t, const Layout& l, int r) const {
  const FuncTensor& ft = tensors_[t];
  Range rows = RowsOf(l, ft.rows, p_, r), cols = ColsOf(l, ft.cols, p_, r);
  uint64_t off = 0;
  switch (l.kind) {
    case LayoutKind::kRows:
      off = rows.lo * ft.cols;
      break;
    case LayoutKind::kCols:
      off = uint64_t{ft.rows} * cols.lo;
      break;
    case LayoutKind::kGrid:
      off = static_cast<uint64_t>(r) * rows.size() * cols.size();
      break;
    default:
      break;
  }
  return {{Sl(t, rows, cols), off}};
}

void Lowerer::Collective(CollectiveKind kind, int32_t t, const std::vector<std::vector<Piece>>& pack,
                         const std::vector<std::vector<Piece>>& unpack, uint64_t elems, uint64_t align_elems,
                         const std::string& base, const Layout& result) {
  GroupCollective(kind, t, GridLines(p_, false), "", pack, unpack, elems, align_elems, base, result);
}

int32_t Lowerer::AddCollective(CollectiveKind kind, const std::string& algo,
                               const std::vector<std::vector<int>>& groups, uint64_t bytes,
                               uint64_t align_bytes, uint32_t op, const Schedule** sched) {
  const int n = static_cast<int>(groups[0].size());
  const bool sub = groups.size() > 1 || n != p_;
  // Layers repeat their collectives: each distinct one is lowered once.
  const RankGrid grid = sub ? RankGrid{1, n} : coll_grid_;
  auto [it, inserted] = schedules_.try_emplace(
      std::make_tuple(algo, static_cast<int>(kind), n, bytes, align_bytes, grid.rows, grid.cols));
  if (inserted) it->second = LowerCollective(algo, kind, n, bytes, align_bytes, grid);
  *sched = &it->second;
  CollectiveInfo ci;
  ci.kind = kind;
  ci.algorithm = (*sched)->algorithm;
  ci.bytes = bytes;
  ci.ranks = n;
  ci.groups = static_cast<int>(groups.size());
  ci.op = op;
  ci.members.reserve(groups.size() * n);
  for (const std::vector<int>& g : groups)
    for (int r : g) ci.members.push_back(cores_[r]);
  prog_.collectives.push_back(ci);
  return static_cast<int32_t>(prog_.collectives.size() - 1);
}

void Lowerer::GroupCollective(CollectiveKind kind, int32_t t, const std::vector<std::vector<int>>& groups,
                              const std::string& what, const std::vector<std::vector<Piece>>& pack,
                              const std::vector<std::vector<Piece>>& unpack, uint64_t elems,
                              uint64_t align_elems, const std::string& base, const Layout& result) {
  std::string kname = ToString(kind);
  const int n = static_cast<int>(groups[0].size());
  const bool sub = groups.size() > 1 || n != p_;
  const std::string algo = ChooseCollective(algo_, kind, n, elems * d_, switch_);
  NewOp(base + "." + kname, algo);
  const Schedule* lowered = nullptr;  // (mesh_2d's note says when a sub-group's grid is a single row)
  const int32_t coll = AddCollective(kind, algo, groups, elems * d_, align_elems * d_, cur_op_, &lowered);
  const Schedule& sched = *lowered;
  std::string label = sched.note;
  if (sub) {
    label = std::to_string(groups.size()) + " " + what + " groups of " + std::to_string(n) + " ranks" +
            (label.empty() ? "" : "; " + label);
  }
  if (!label.empty()) {
    prog_.ops[cur_op_].ref.partition = sched.algorithm;
    prog_.ops[cur_op_].ref.note = label;
  }
  FuncCollective fc;
  // One buffer tensor: every core keeps its own copy, so each group's ranks use theirs.
  fc.buffer = NewTensor(FuncTensorKind::kBuffer, 1, elems);
  for (int r = 0; func_ && r < p_; ++r) {
    for (const Piece& pc : pack[r]) fc.pack.push_back({cores_[r], pc.region, pc.offset, false});
    for (const Piece& pc : unpack[r]) fc.unpack.push_back({cores_[r], pc.region, pc.offset, false});
  }
  for (int r = 0; r < p_; ++r) Reload(t, r, nullptr);
  std::vector<std::vector<uint32_t>> last_in(p_), all_in(p_);
  for (size_t s = 0; s < sched.steps.size(); ++s) {
    std::vector<std::vector<uint32_t>> now(p_);
    // Step s of every group before step s + 1 of any: the groups' transfers interleave.
    for (const std::vector<int>& g : groups)
      for (Xfer x : sched.steps[s].xfers) {
        x.src = g[x.src], x.dst = g[x.dst];
        Task tk = XferTask(x, sched, switch_, coll, s, cores_);
        std::vector<uint32_t> deps = last_in[x.src].empty() ? Ready(t, x.src) : last_in[x.src];
        if (x.reduce) Append(&deps, Ready(t, x.dst));
        uint32_t id = AddTask(tk, std::move(deps));
        if (fc.first_task < 0) fc.first_task = id;
        fc.last_task = id;
        now[x.dst].push_back(id);
        all_in[x.dst].push_back(id);
      }
    for (int r = 0; r < p_; ++r)
      if (!now[r].empty()) last_in[r] = std::move(now[r]);
  }
  if (func_) prog_.func.collectives.push_back(std::move(fc));
  for (int r = 0; r < p_; ++r) Append(&ts_[t].ready[r], all_in[r]);
  ts_[t].layout = result;
}

bool Lowerer::GatherGridRow(int32_t t, const std::string& base) {
  const Layout have = ts_[t].layout;
  const FuncTensor& ft = tensors_[t];
  const bool rows_split = have.kind == LayoutKind::kRows;
  const int gr = rows_split ? grid_.rows : have.gr, gc = rows_split ? grid_.cols : have.gc;
  if (rows_split ? ft.rows % p_ != 0
                 : ft.rows % gr != 0 || ft.cols % have.unit != 0 || (ft.cols / have.unit) % gc != 0)
    return false;
  // Group i = grid row i (ranks i*gc .. i*gc + gc-1); its buffer is row block i, the
  // group's rank j contributing chunk j: its grid block (column block j), or from a row
  // split its rows (row sub-block j, contiguous).
  const uint64_t blk = uint64_t{ft.rows / gr} * ft.cols / gc;
  auto block = [&](int r) { return Sl(t, RowsOf(have, ft.rows, p_, r), ColsOf(have, ft.cols, p_, r)); };
  std::vector<std::vector<Piece>> pack(p_), unpack(p_);
  for (int r = 0; func_ && r < p_; ++r) {
    const int i = r / gc, j = r % gc;
    pack[r].push_back({block(r), j * blk});
    for (int b = 0; b < gc; ++b) unpack[r].push_back({block(i * gc + b), b * blk});
  }
  GroupCollective(CollectiveKind::kAllGather, t, GridLines(gc, false), "grid-row", pack, unpack, gc * blk,
                  blk, base, Layout::GridRows(gr, gc));
  return true;
}

void Lowerer::GatherGridColumn(int32_t t, const std::string& base) {
  const Layout have = ts_[t].layout;
  const FuncTensor& ft = tensors_[t];
  const int gc = have.gc;
  // Group j = grid column j (ranks j, gc + j, ...); its buffer is the whole tensor, the
  // group's rank i contributing row block i (row-major, so chunk i at rows.lo * cols).
  std::vector<std::vector<Piece>> pack(p_), unpack(p_);
  for (int r = 0; func_ && r < p_; ++r) {
    const Range rows = RowsOf(have, ft.rows, p_, r);
    pack[r] = {{Sl(t, rows, {0, ft.cols}), rows.lo * ft.cols}};
    for (int i = 0; i < have.gr; ++i) {
      const Range ri = RowsOf(have, ft.rows, p_, i * gc);
      unpack[r].push_back({Sl(t, ri, {0, ft.cols}), ri.lo * ft.cols});
    }
  }
  GroupCollective(CollectiveKind::kAllGather, t, GridLines(gc, true), "grid-column", pack, unpack,
                  uint64_t{ft.rows} * ft.cols, ft.cols, base, Layout::Replicated());
}

void Lowerer::Convert(int32_t t, const Layout& want, const std::string& base) {
  Layout have = ts_[t].layout;
  if (p_ == 1 || Satisfies(t, want)) return;
  const FuncTensor& ft = tensors_[t];
  uint64_t elems = uint64_t{ft.rows} * ft.cols;
  std::vector<std::vector<Piece>> pack(p_), unpack(p_);
  Piece whole{Sl(t, {0, ft.rows}, {0, ft.cols}), 0};
  if (have.kind == LayoutKind::kPartial) {
    bool cols_ok = want.kind == LayoutKind::kCols && DisjointCols(ft.cols, want.unit, p_);
    if (want.kind == LayoutKind::kRows || cols_ok) {
      for (int r = 0; func_ && r < p_; ++r) {
        for (int b = 0; b < p_; ++b) pack[r].push_back(Blocks(t, want, b)[0]);
        unpack[r] = Blocks(t, want, r);
      }
      uint64_t align = want.kind == LayoutKind::kRows ? ft.cols : uint64_t{ft.rows} * want.unit;
      Collective(CollectiveKind::kReduceScatter, t, pack, unpack, elems, align, base, want);
      return;
    }
    for (int r = 0; func_ && r < p_; ++r) pack[r] = {whole}, unpack[r] = {whole};
    Collective(CollectiveKind::kAllReduce, t, pack, unpack, elems, 1, base, Layout::Replicated());
    return;
  }
  // rows <-> whole-head columns with equal blocks: all_to_all; block (r, d) goes from rank r's
  // chunk d to rank d's chunk r.
  bool rows_to_cols = have.kind == LayoutKind::kRows && want.kind == LayoutKind::kCols;
  bool cols_to_rows = have.kind == LayoutKind::kCols && want.kind == LayoutKind::kRows;
  if (rows_to_cols || cols_to_rows) {
    uint32_t unit = rows_to_cols ? want.unit : have.unit;
    uint64_t units = ft.cols / unit;
    if (ft.rows % p_ == 0 && ft.cols % unit == 0 && units % p_ == 0) {
      Layout rl = Layout::Rows(), cl = Layout::Cols(unit);
      uint64_t blk = (ft.rows / p_) * (ft.cols / p_);
      auto block = [&](int src, int dst) {
        int row_owner = rows_to_cols ? src : dst, col_owner = rows_to_cols ? dst : src;
        return Sl(t, RowsOf(rl, ft.rows, p_, row_owner), ColsOf(cl, ft.cols, p_, col_owner));
      };
      for (int r = 0; func_ && r < p_; ++r)
        for (int d = 0; d < p_; ++d) {
          pack[r].push_back({block(r, d), d * blk});
          unpack[d].push_back({block(r, d), r * blk});
        }
      // Each rank's buffer: its P blocks.
      Collective(CollectiveKind::kAllToAll, t, pack, unpack, p_ * blk, blk, base, rows_to_cols ? cl : rl);
      return;
    }
  }
  // mn_2d layouts: within a grid row when whole rows are all `want` needs, else within a
  // grid column (grid_rows -> replicated); a grid that needs more gathers over everyone.
  const bool to_grid_rows =
      (have.kind == LayoutKind::kGrid && Covers(Layout::GridRows(have.gr, have.gc), t, want)) ||
      (have.kind == LayoutKind::kRows && want.kind == LayoutKind::kGridRows);
  if (to_grid_rows && GatherGridRow(t, base)) return;
  if (have.kind == LayoutKind::kGridRows) {
    GatherGridColumn(t, base);
    return;
  }
  if (have.kind == LayoutKind::kCols && !DisjointCols(ft.cols, have.unit, p_)) {
    // Shared heads: gather from disjoint column blocks inside them.
    if (!Satisfies(t, Layout::Cols(1)))
      throw std::logic_error("mapping: cannot gather " + ToString(have) + " of " + std::to_string(ft.cols) +
                             " columns");
    have = Layout::Cols(1);
  }
  uint64_t align = 1;
  if (have.kind == LayoutKind::kRows) align = ft.cols;
  if (have.kind == LayoutKind::kCols) align = uint64_t{ft.rows} * have.unit;
  for (int r = 0; func_ && r < p_; ++r) {
    pack[r] = Blocks(t, have, r);
    for (int b = 0; b < p_; ++b) unpack[r].push_back(Blocks(t, have, b)[0]);
  }
  if (have.kind == LayoutKind::kGrid) {
    FuncSlice s = Blocks(t, have, 0)[0].region;
    align = uint64_t{s.r1 - s.r0} * (s.c1 - s.c0);
  }
  Collective(CollectiveKind::kAllGather, t, pack, unpack, elems, align, base, Layout::Replicated());
}

// ---- GEMMs -------------------------------------------------------------------------------

const Partitioner* Lowerer::PartitionerFor(OpClass cls) const {
  std::string name = m_.partition().empty() ? "megatron" : m_.partition();
  for (const auto& o : m_.overrides())
    if (o.op() == llm::ToString(cls)) name = o.partition();
  const Partitioner* p = FindPartitioner(name);
  if (!p) throw std::invalid_argument("mapping: unknown partition " + name);
  return p;
}

GemmSpec Lowerer::Spec(OpClass cls, uint64_t k, uint64_t n, uint32_t k_unit, uint32_t n_unit) const {
  GemmSpec g;
  g.cls = cls;
  g.t = t_, g.k = k, g.n = n, g.k_unit = k_unit, g.n_unit = n_unit;
  return g;
}

Layout Lowerer::WantedInput(OpClass cls, uint64_t k, uint64_t n, uint32_t k_unit, uint32_t n_unit) {
  GemmSpec g = Spec(cls, k, n, k_unit, n_unit);
  std::string label;
  const Partitioner* p = PartitionerFor(cls)->Choose(g, *this, &label);
  return p->Input(g, *this);
}

int32_t Lowerer::Gemm(Role role, OpClass cls, int32_t x, int32_t w, uint64_t k, uint64_t n, uint32_t k_unit,
                      uint32_t n_unit) {
  GemmSpec g = Spec(cls, k, n, k_unit, n_unit);
  std::string label;
  const Partitioner* p = PartitionerFor(cls)->Choose(g, *this, &label);
  Convert(x, p->Input(g, *this), names_[role]);
  g.op = NewOp(names_[role], label);
  g.x = x, g.w = w;
  g.y = NewTensor(FuncTensorKind::kActivation, t_, n);
  Layout out = p->Emit(g, *this);
  ts_[g.y].layout = p_ == 1 ? Layout::Replicated() : out;
  return g.y;
}

void Lowerer::EmitShard(const GemmSpec& g, int rank, Range rows, Range ks, Range cols) {
  std::vector<uint32_t> deps = Ready(g.x, rank);
  uint64_t wbytes = ks.size() * cols.size() * d_;
  if (!weights_sram_) deps.push_back(Memory(rank, wbytes, false, WeightReadDeps(rank)));
  Task t;
  t.op_kind = OpKind::kGemm;
  t.m = rows.size(), t.n = cols.size(), t.k = ks.size();
  t.flops = 2.0 * t.m * t.n * t.k;
  t.bytes = (t.m * t.k + t.m * t.n) * d_ + wbytes;
  FuncOp f;
  f.kind = FuncKind::kMatmul;
  f.a = Sl(g.x, rows, ks);
  f.b = Sl(g.w, ks, cols);
  f.out = Sl(g.y, rows, cols);
  uint64_t transient = (t.m * t.k + t.m * t.n) * d_ + (weights_sram_ ? 0 : wbytes);
  ts_[g.y].ready[rank].push_back(Compute(rank, t, f, std::move(deps), transient));
}

void Lowerer::EmitRotate(const GemmSpec& g) {
  uint64_t col_bytes = g.k * d_;
  const Schedule* lowered = nullptr;
  const int32_t coll = AddCollective(
      CollectiveKind::kRotate, ChooseCollective(algo_, CollectiveKind::kRotate, p_, g.n * col_bytes, switch_),
      GridLines(p_, false), g.n * col_bytes, col_bytes, g.op, &lowered);
  const Schedule& sched = *lowered;
  FuncCollective fc;
  fc.buffer = NewTensor(FuncTensorKind::kBuffer, g.n, g.k);  // W^T: shard = whole rows
  std::vector<std::vector<uint32_t>> shard_ready(p_);
  auto compute = [&](int r, Range cols, std::vector<uint32_t> deps) {
    Range rows = Split(g.t, p_, r);
    Task t;
    t.op_kind = OpKind::kGemm;
    t.m = rows.size(), t.n = cols.size(), t.k = g.k;
    t.flops = 2.0 * t.m * t.n * t.k;
    t.bytes = (t.m * t.k + t.m * t.n + t.k * t.n) * d_;
    FuncOp f;
    f.kind = FuncKind::kMatmul;
    f.a = Sl(g.x, rows, {0, g.k});
    f.b = Sl(fc.buffer, cols, {0, g.k});
    f.transpose_b = true;
    f.out = Sl(g.y, rows, cols);
    Append(&deps, Ready(g.x, r));
    uint64_t shard = Split(g.n, p_, 0).size() * col_bytes;
    uint64_t transient = (t.m * t.k + t.m * t.n) * d_ + 2 * shard;
    const uint32_t id = Compute(r, t, f, std::move(deps), transient);
    ts_[g.y].ready[r].push_back(id);
    return id;
  };
  // computes[r][a]: rank r's computes on arrival a (a = 0: its own shard; a = s + 1: step s).
  std::vector<std::vector<std::vector<uint32_t>>> computes(p_, std::vector<std::vector<uint32_t>>(1));
  for (int r = 0; r < p_; ++r) {
    Range cols = Split(g.n, p_, r);
    if (func_) fc.pack.push_back({cores_[r], Sl(g.w, {0, g.k}, cols), cols.lo * g.k, true});
    if (!weights_sram_)
      shard_ready[r].push_back(Memory(r, cols.size() * col_bytes, false, WeightReadDeps(r)));
    computes[r][0].push_back(compute(r, cols, shard_ready[r]));
  }
  // Two shard buffers per rank (the SRAM `transient` counts two).
  RotateSteps(sched, coll, GridLines(p_, false), col_bytes, shard_ready, &computes, &fc, compute);
  if (func_) prog_.func.collectives.push_back(std::move(fc));
}

void Lowerer::RotateSteps(const Schedule& sched, int32_t coll, const std::vector<std::vector<int>>& groups,
                          uint64_t unit_bytes, std::vector<std::vector<uint32_t>> last_in,
                          std::vector<std::vector<std::vector<uint32_t>>>* computes, FuncCollective* fc,
                          const RotateCompute& compute) {
  std::vector<std::vector<uint32_t>> sent(p_);  // each rank's sends of the previous step
  for (size_t s = 0; s < sched.steps.size(); ++s) {
    std::vector<std::vector<uint32_t>> now(p_), sending(p_);
    for (const std::vector<int>& grp : groups)
      for (Xfer x : sched.steps[s].xfers) {
        x.src = grp[x.src], x.dst = grp[x.dst];
        Task tk = XferTask(x, sched, switch_, coll, s, cores_);
        std::vector<uint32_t> deps = last_in[x.src];
        // Arrival s + 1 overwrites arrival s - 1's buffer, which the destination must have
        // computed on and forwarded (its sends of step s - 1).
        std::vector<std::vector<uint32_t>>& at = (*computes)[x.dst];
        if (s >= 1 && at.size() > s - 1) Append(&deps, at[s - 1]);
        if (s >= 1) Append(&deps, sent[x.dst]);
        uint32_t id = AddTask(tk, std::move(deps));
        if (fc->first_task < 0) fc->first_task = id;
        fc->last_task = id;
        now[x.dst].push_back(id);
        sending[x.src].push_back(id);
        if (at.size() < s + 2) at.resize(s + 2);
        const Range units{x.offset / unit_bytes, (x.offset + x.bytes + unit_bytes - 1) / unit_bytes};
        if (units.size() > 0) {
          const uint32_t c = compute(x.dst, units, {id});
          (*computes)[x.dst][s + 1].push_back(c);
        }
      }
    for (int r = 0; r < p_; ++r)
      if (!now[r].empty()) last_in[r] = std::move(now[r]);
    sent = std::move(sending);
  }
}

void Lowerer::EmitKSteps(const GemmSpec& g) {
  const int gr = grid_.rows, gc = grid_.cols;
  const Layout out = Layout::Grid(gr, gc, g.n_unit);
  const uint64_t kb = g.k / gr, nc = ColsOf(out, g.n, p_, 0).size();  // Choose: k % gr == 0, equal columns
  const uint64_t row_bytes = nc * d_, block_bytes = kb * row_bytes;
  // Group j = grid column j (ranks j, gc + j, ...); its buffer is W[:, cols j] as [k, nc],
  // member i's chunk being its K-block i (rows i kb .. (i+1) kb - 1).
  const std::vector<std::vector<int>> groups = GridLines(gc, true);
  const Schedule* lowered = nullptr;
  const int32_t coll = AddCollective(
      CollectiveKind::kRotate, ChooseCollective(algo_, CollectiveKind::kRotate, gr, g.k * row_bytes, switch_),
      groups, g.k * row_bytes, row_bytes, g.op, &lowered);
  const Schedule& sched = *lowered;
  FuncCollective fc;
  fc.buffer = NewTensor(FuncTensorKind::kBuffer, g.k, nc);  // per core: its grid column's W[:, cols j]
  // computes[r][a]: rank r's computes on arrival a (a = 0: its own block; a = s + 1: step s).
  std::vector<std::vector<std::vector<uint32_t>>> computes(p_, std::vector<std::vector<uint32_t>>(1));
  std::vector<int64_t> prev(p_, -1);  // the compute each next one accumulates after
  auto compute = [&](int r, Range ks, std::vector<uint32_t> deps) {
    const Range rows = RowsOf(out, g.t, p_, r), cols = ColsOf(out, g.n, p_, r);
    Task t;
    t.op_kind = OpKind::kGemm;
    t.m = rows.size(), t.n = cols.size(), t.k = ks.size();
    t.flops = 2.0 * t.m * t.n * t.k;
    t.bytes = (t.m * t.k + t.m * t.n + t.k * t.n) * d_;
    FuncOp f;
    f.kind = FuncKind::kMatmul;
    f.a = Sl(g.x, rows, ks);
    f.b = Sl(fc.buffer, ks, {0, nc});
    f.out = Sl(g.y, rows, cols);
    f.accumulate = prev[r] >= 0;
    Append(&deps, Ready(g.x, r));
    if (prev[r] >= 0) deps.push_back(static_cast<uint32_t>(prev[r]));
    // Its operands and output plus the two K-blocks in SRAM (the one computed on, the one
    // arriving); streamed weights are read into the first.
    uint64_t transient = (t.m * t.k + t.m * t.n) * d_ + 2 * block_bytes;
    uint32_t id = Compute(r, t, f, std::move(deps), transient);
    prev[r] = id;
    ts_[g.y].ready[r].push_back(id);
    return id;
  };
  std::vector<std::vector<uint32_t>> last_in(p_);
  for (int r = 0; r < p_; ++r) {
    const int i = r / gc;
    const Range ks{i * kb, (i + 1) * kb}, cols = ColsOf(out, g.n, p_, r);
    if (func_) fc.pack.push_back({cores_[r], Sl(g.w, ks, cols), ks.lo * nc, false});
    if (!weights_sram_) last_in[r].push_back(Memory(r, block_bytes, false, WeightReadDeps(r)));
    computes[r][0].push_back(compute(r, ks, last_in[r]));
  }
  // Two K-block buffers per rank; the grid columns' steps interleave.
  RotateSteps(sched, coll, groups, row_bytes, last_in, &computes, &fc, compute);
  if (func_) prog_.func.collectives.push_back(std::move(fc));
}

// ---- Element-wise ops --------------------------------------------------------------------

void Lowerer::ResolvePartial(int32_t t, const Layout& next_want, const std::string& base) {
  if (ts_[t].layout.kind == LayoutKind::kPartial)
    Convert(t, next_want.kind == LayoutKind::kRows ? Layout::Rows() : Layout::Replicated(), base);
  if (ts_[t].layout.kind == LayoutKind::kGrid || ts_[t].layout.kind == LayoutKind::kCols) {
    // Stays split: the element-wise op follows it.
  }
}

int32_t Lowerer::RowNorm(Role role, int32_t x, const Layout& next_want) {
  Layout l = ts_[x].layout;
  // A row norm needs whole rows. Feeding mn_2d, a grid gathers within grid rows only (ranks
  // of one grid row then compute the same rows), so the residual is grid_rows too; a row
  // split stays (fewer rows per rank: the next GEMM's input gathers within grid rows);
  // any other layout without whole rows becomes replicated.
  if (l.kind == LayoutKind::kGrid && next_want.kind == LayoutKind::kGridRows) {
    Convert(x, next_want, names_[role]);
    l = ts_[x].layout;
  }
  if (l.kind != LayoutKind::kReplicated && l.kind != LayoutKind::kRows && l.kind != LayoutKind::kGridRows) {
    Convert(x, Layout::Replicated(), names_[role]);
    l = ts_[x].layout;
  }
  if (l.kind == LayoutKind::kReplicated && p_ > 1 &&
      (next_want.kind == LayoutKind::kRows || next_want.kind == LayoutKind::kGridRows))
    l = next_want.kind == LayoutKind::kRows ? Layout::Rows() : next_want;
  NewOp(names_[role], ToString(l));
  uint64_t h = model_.hidden_size();
  int32_t y = NewTensor(FuncTensorKind::kActivation, t_, h);
  for (int r = 0; r < p_; ++r) {
    Range rows = RowsOf(l, t_, p_, r);
    if (rows.size() == 0) continue;
    Vector(r, OpKind::kNorm, FuncKind::kRmsNorm, kNormOps, Sl(x, rows, {0, h}), {}, Sl(y, rows, {0, h}),
           Ready(x, r));
  }
  ts_[y].layout = l;
  return y;
}

// Per-head op (qk_norm, rope) on a [t, heads*head_dim] tensor: in its layout when rows or
// heads, else on each rank's heads.
int32_t Lowerer::HeadOp(Role role, const char* suffix, FuncKind fk, double ops, int32_t x, uint64_t heads,
                        uint32_t pos0) {
  uint32_t hd = model_.head_dim();
  Layout heads_l = Layout::Cols(hd);
  Layout l = ts_[x].layout;
  if (l.kind != LayoutKind::kRows && !(l == heads_l)) {
    Convert(x, heads_l, names_[role]);
    l = ts_[x].layout;
    if (l.kind == LayoutKind::kReplicated) l = heads_l;
  }
  NewOp(names_[role] + suffix, ToString(l));
  int32_t y = NewTensor(FuncTensorKind::kActivation, t_, heads * hd);
  for (int r = 0; r < p_; ++r) {
    Range rows = RowsOf(l, t_, p_, r), cols = ColsOf(l, heads * hd, p_, r);
    if (rows.size() == 0 || cols.size() == 0) continue;
    Vector(r, fk == FuncKind::kRope ? OpKind::kRope : OpKind::kNorm, fk, ops, Sl(x, rows, cols), {},
           Sl(y, rows, cols), Ready(x, r), hd, pos0);
    // Batch B > 1: rows are B sequences of t_ / B tokens, each starting at position pos0.
    const uint64_t b = std::max<uint32_t>(1, wl_.batch());
    if (func_ && fk == FuncKind::kRope && b > 1)
      prog_.func.ops.back().tokens_per_sequence = static_cast<uint32_t>(t_ / b);
  }
  ts_[y].layout = p_ == 1 ? Layout::Replicated() : l;
  Dead(x);
  return y;
}

int32_t Lowerer::Add(Role role, int32_t a, int32_t res, const Layout& next_want, Role producer) {
  ResolvePartial(a, next_want, names_[producer]);
  Layout la = ts_[a].layout, lr = ts_[res].layout, l;
  if (la == lr || lr.kind == LayoutKind::kReplicated) {
    l = la;
  } else if (la.kind == LayoutKind::kReplicated) {
    l = lr;
  } else if (IsGridKind(la) || IsGridKind(lr)) {
    // mn_2d: add in the narrower layout when the other operand holds all of it (o_proj's
    // grid + a grid_rows residual: no collective); else bring `a` to the residual's.
    if (Satisfies(res, la)) {
      l = la;
    } else if (Satisfies(a, lr)) {
      l = lr;
    } else {
      Convert(a, lr, names_[role]);
      l = lr;
    }
  } else {
    Convert(a, Layout::Replicated(), names_[role]);
    l = lr;
  }
  if (p_ == 1) l = Layout::Replicated();
  return Elementwise2(role, l, a, res, model_.hidden_size(), FuncKind::kAdd, kAddOps);
}

int32_t Lowerer::Elementwise2(Role role, const Layout& l, int32_t a, int32_t b, uint64_t cols, FuncKind fk,
                              double ops_per_elem) {
  NewOp(names_[role], ToString(l));
  int32_t y = NewTensor(FuncTensorKind::kActivation, t_, cols);
  for (int r = 0; r < p_; ++r) {
    Range rr = RowsOf(l, t_, p_, r), cr = ColsOf(l, cols, p_, r);
    if (rr.size() == 0 || cr.size() == 0) continue;
    std::vector<uint32_t> deps = Ready(a, r);
    Append(&deps, Ready(b, r));
    Vector(r, OpKind::kElementwise, fk, ops_per_elem, Sl(a, rr, cr), Sl(b, rr, cr), Sl(y, rr, cr), deps);
  }
  ts_[y].layout = l;
  Dead(a), Dead(b);  // residual adds and SiLU*mul are their inputs' last readers
  return y;
}

// ---- One layer ---------------------------------------------------------------------------

uint64_t WeightSeed(uint32_t layer, int role) { return FuncSeed(layer, role); }

int32_t Lowerer::Layer(uint32_t layer, int32_t x, const Layout& next_want) {
  layer_ = layer;
  const uint64_t h = model_.hidden_size(), hd = model_.head_dim(), nq = model_.num_attention_heads();
  const uint64_t nkv = model_.num_key_value_heads() ? model_.num_key_value_heads() : nq;
  const uint64_t inter = model_.intermediate_size();
  const uint32_t hdu = static_cast<uint32_t>(hd);
  const uint64_t ltot = cached_ + t_ / std::max<uint32_t>(1, wl_.batch());
  auto weight = [&](int role, uint64_t k, uint64_t n) {
    return NewTensor(FuncTensorKind::kWeight, k, n, WeightSeed(layer, role));
  };

  // Attention block.
  Layout want_qkv = WantedInput(OpClass::kQkv, h, nq * hd, 1, hdu);
  int32_t xn = RowNorm(kAttnNorm, x, want_qkv);
  int32_t q = Gemm(kQ, OpClass::kQkv, xn, weight(kWq, h, nq * hd), h, nq * hd, 1, hdu);
  int32_t k = Gemm(kK, OpClass::kQkv, xn, weight(kWk, h, nkv * hd), h, nkv * hd, 1, hdu);
  int32_t v = Gemm(kV, OpClass::kQkv, xn, weight(kWv, h, nkv * hd), h, nkv * hd, 1, hdu);
  Dead(xn);
  Layout heads = Layout::Cols(hdu);
  for (int32_t* tp : {&q, &k})
    if (ts_[*tp].layout.kind == LayoutKind::kPartial || ts_[*tp].layout.kind == LayoutKind::kGrid)
      Convert(*tp, heads, names_[tp == &q ? kQ : kK]);
  if (model_.qk_norm()) {
    q = HeadOp(kQkNorm, "", FuncKind::kHeadNorm, kNormOps, q, nq, 0);
    k = HeadOp(kKNorm, "", FuncKind::kHeadNorm, kNormOps, k, nkv, 0);
  }
  q = HeadOp(kRopeR, ".q", FuncKind::kRope, kRopeOps, q, nq, static_cast<uint32_t>(cached_));
  k = HeadOp(kRopeR, ".k", FuncKind::kRope, kRopeOps, k, nkv, static_cast<uint32_t>(cached_));
  Convert(q, heads, names_[kQ]);
  Convert(k, heads, names_[kK]);
  Convert(v, heads, names_[kV]);

  // KV write and attention, by heads.
  int32_t kc = kcache_[layer], vc = vcache_[layer];
  NewOp(names_[kKvWriteR], "heads");
  for (int r = 0; r < p_; ++r) ts_[kc].ready[r].clear(), ts_[vc].ready[r].clear();
  for (int r = 0; r < p_; ++r) {
    Range kv = ColsOf(heads, nkv * hd, p_, r);
    Range rows{cached_, cached_ + t_};
    // Batch B > 1 (data semantics only; the task stays one copy of t_ rows): sequence i's
    // t_ / B rows land at rows [i * lmax_ + cached_, ...) of the caches.
    const uint64_t bs = std::max<uint32_t>(1, wl_.batch());
    auto seq_rows = [&](int32_t cache) {
      if (!func_ || bs == 1) return;
      FuncOp& f = prog_.func.ops.back();
      f.out = Sl(cache, {cached_, cached_ + t_ / bs}, kv);
      f.tokens_per_sequence = static_cast<uint32_t>(t_ / bs), f.block_stride = static_cast<uint32_t>(lmax_);
    };
    Vector(r, OpKind::kKvWrite, FuncKind::kCopy, kCopyOps, Sl(k, {0, t_}, kv), {}, Sl(kc, rows, kv),
           Ready(k, r));
    seq_rows(kc);
    Vector(r, OpKind::kKvWrite, FuncKind::kCopy, kCopyOps, Sl(v, {0, t_}, kv), {}, Sl(vc, rows, kv),
           Ready(v, r));
    seq_rows(vc);
    if (!kv_sram_) {
      std::vector<uint32_t> deps = Ready(kc, r);
      Append(&deps, Ready(vc, r));
      uint32_t w = Memory(r, 2 * t_ * kv.size() * d_, true, deps);
      ts_[kc].ready[r].push_back(w), ts_[vc].ready[r].push_back(w);
    }
  }
  Dead(k), Dead(v);                                    // now in the caches
  for (int r = 0; r < p_; ++r) Reload(q, r, nullptr);  // attention reads q from SRAM
  int32_t scores = chunks_.empty() ? NewTensor(FuncTensorKind::kActivation, nq * t_, ltot) : -1;
  int32_t probs = chunks_.empty() ? NewTensor(FuncTensorKind::kActivation, nq * t_, ltot) : -1;
  // Scores and probabilities are the attention tasks' own data (their `transient`), not
  // buffers held between ops.
  if (scores >= 0) Dead(scores), Dead(probs);
  int32_t attn = NewTensor(FuncTensorKind::kActivation, t_, nq * hd);
  ts_[attn].layout = p_ == 1 ? Layout::Replicated() : Layout::Cols(hdu);  // filled by heads below
  const uint32_t group = static_cast<uint32_t>(nq / nkv);
  const uint64_t b = std::max<uint32_t>(1, wl_.batch()), s = t_ / b;
  auto attn_task = [&](int r, Role role, uint64_t m, uint64_t n, uint64_t kk, uint64_t nh, FuncOp f,
                       std::vector<uint32_t> deps, uint64_t kv_bytes) {
    if (!kv_sram_) deps.push_back(Memory(r, kv_bytes, false, Ready(role == kScores ? kc : vc, r)));
    Task t;
    t.op_kind = OpKind::kBatchedGemm;
    t.batch = nh * b, t.m = m, t.n = n, t.k = kk;
    t.flops = 2.0 * t.batch * m * n * kk;
    t.bytes = t.batch * (m * kk + n * kk + m * n) * d_;
    uint64_t transient = t.batch * (m * kk + m * n) * d_ + (kv_sram_ ? 0 : kv_bytes);
    ts_[f.out.tensor].ready[r].push_back(Compute(r, t, f, std::move(deps), transient));
  };
  std::vector<Range> qh(p_);
  for (int r = 0; r < p_; ++r) qh[r] = ColsOf(heads, nq * hd, p_, r);
  if (!chunks_.empty()) {
    ChunkAttention(q, kc, vc, attn, qh, attn_task);
  } else {
    NewOp(names_[kScores], "heads");
    for (int r = 0; r < p_; ++r) {
      uint64_t h0 = qh[r].lo / hd, h1 = qh[r].hi / hd;
      FuncOp f;
      f.kind = FuncKind::kScores;
      f.a = Sl(q, {0, t_}, qh[r]);
      f.b = Sl(kc, {0, ltot}, {0, nkv * hd});
      f.out = Sl(scores, {h0 * t_, h1 * t_}, {0, ltot});
      f.head_dim = hdu, f.kv_group = group, f.head_begin = static_cast<uint32_t>(h0),
      f.head_end = static_cast<uint32_t>(h1);
      std::vector<uint32_t> deps = Ready(q, r);
      Append(&deps, Ready(kc, r));
      uint64_t kvh = ColsOf(heads, nkv * hd, p_, r).size();
      attn_task(r, kScores, s, ltot, hd, h1 - h0, f, deps, b * ltot * kvh * d_);
    }
    NewOp(names_[kSoftmaxR], "heads");
    for (int r = 0; r < p_; ++r) {
      uint64_t h0 = qh[r].lo / hd, h1 = qh[r].hi / hd;
      Range rows{h0 * t_, h1 * t_};
      Vector(r, OpKind::kSoftmax, FuncKind::kSoftmax, kSoftmaxOps, Sl(scores, rows, {0, ltot}), {},
             Sl(probs, rows, {0, ltot}), Ready(scores, r), hdu, static_cast<uint32_t>(cached_));
      if (func_) prog_.func.ops.back().tokens_per_sequence = static_cast<uint32_t>(s);
    }
    NewOp(names_[kPv], "heads");
    for (int r = 0; r < p_; ++r) {
      uint64_t h0 = qh[r].lo / hd, h1 = qh[r].hi / hd;
      FuncOp f;
      f.kind = FuncKind::kPv;
      f.a = Sl(probs, {h0 * t_, h1 * t_}, {0, ltot});
      f.b = Sl(vc, {0, ltot}, {0, nkv * hd});
      f.out = Sl(attn, {0, t_}, qh[r]);
      f.head_dim = hdu, f.kv_group = group, f.head_begin = static_cast<uint32_t>(h0),
      f.head_end = static_cast<uint32_t>(h1);
      std::vector<uint32_t> deps = Ready(probs, r);
      Append(&deps, Ready(vc, r));
      uint64_t kvh = ColsOf(heads, nkv * hd, p_, r).size();
      attn_task(r, kPv, s, hd, ltot, h1 - h0, f, deps, b * ltot * kvh * d_);
    }
  }
  ts_[attn].layout = p_ == 1 ? Layout::Replicated() : heads;
  Dead(q);

  Layout want_mlp = WantedInput(OpClass::kGateUp, h, inter, 1, 1);
  int32_t o = Gemm(kO, OpClass::kO, attn, weight(kWo, nq * hd, h), nq * hd, h, hdu, 1);
  Dead(attn);
  int32_t h1 = Add(kResid1, o, x, want_mlp, kO);

  // MLP block.
  int32_t hn = RowNorm(kMlpNorm, h1, want_mlp);
  int32_t gate = Gemm(kGate, OpClass::kGateUp, hn, weight(kWgate, h, inter), h, inter, 1, 1);
  int32_t up = Gemm(kUp, OpClass::kGateUp, hn, weight(kWup, h, inter), h, inter, 1, 1);
  Dead(hn);
  Layout want_down = WantedInput(OpClass::kDown, inter, h, 1, 1);
  for (int32_t t : {gate, up})
    if (ts_[t].layout.kind == LayoutKind::kPartial) {
      bool cols = want_down.kind == LayoutKind::kCols;
      Convert(t,
              cols                                  ? want_down
              : want_down.kind == LayoutKind::kRows ? Layout::Rows()
                                                    : Layout::Replicated(),
              names_[t == gate ? kGate : kUp]);
    }
  if (!(ts_[gate].layout == ts_[up].layout)) {
    Convert(gate, Layout::Replicated(), names_[kGate]);
    Convert(up, Layout::Replicated(), names_[kUp]);
  }
  Layout la = p_ == 1 ? Layout::Replicated() : ts_[gate].layout;
  int32_t act = Elementwise2(kAct, la, gate, up, inter, FuncKind::kSiluMul, kSiluMulOps);
  int32_t down = Gemm(kDown, OpClass::kDown, act, weight(kWdown, inter, h), inter, h, 1, 1);
  Dead(act);
  return Add(kResid2, down, h1, next_want, kDown);
}

// Mixed iteration: chunk c's rows [row0, row0 + s) of q attend to rows [0, cached + s) of
// the caches (timing only: every chunk reads its own context's worth of K and V).
void Lowerer::ChunkAttention(int32_t q, int32_t kc, int32_t vc, int32_t attn, const std::vector<Range>& qh,
                             const std::function<void(int, Role, uint64_t, uint64_t, uint64_t, uint64_t,
                                                      FuncOp, std::vector<uint32_t>, uint64_t)>& attn_task) {
  const uint64_t hd = model_.head_dim(), nq = model_.num_attention_heads();
  const uint64_t nkv = model_.num_key_value_heads() ? model_.num_key_value_heads() : nq;
  const uint32_t hdu = static_cast<uint32_t>(hd), group = static_cast<uint32_t>(nq / nkv);
  const Layout heads = Layout::Cols(hdu);
  uint64_t row0 = 0;
  for (const llm::SeqChunk& ch : chunks_) {
    const uint64_t s = ch.new_tokens, lt = uint64_t{ch.cached} + ch.new_tokens;
    int32_t scores = NewTensor(FuncTensorKind::kActivation, nq * s, lt);
    int32_t probs = NewTensor(FuncTensorKind::kActivation, nq * s, lt);
    Dead(scores), Dead(probs);  // the attention tasks' own data
    NewOp(names_[kScores], "heads");
    for (int r = 0; r < p_; ++r) {
      uint64_t h0 = qh[r].lo / hd, h1 = qh[r].hi / hd;
      FuncOp f;
      f.kind = FuncKind::kScores;
      f.a = Sl(q, {row0, row0 + s}, qh[r]);
      f.b = Sl(kc, {0, lt}, {0, nkv * hd});
      f.out = Sl(scores, {h0 * s, h1 * s}, {0, lt});
      f.head_dim = hdu, f.kv_group = group, f.head_begin = static_cast<uint32_t>(h0),
      f.head_end = static_cast<uint32_t>(h1);
      std::vector<uint32_t> deps = Ready(q, r);
      Append(&deps, Ready(kc, r));
      uint64_t kvh = ColsOf(heads, nkv * hd, p_, r).size();
      attn_task(r, kScores, s, lt, hd, h1 - h0, f, deps, lt * kvh * d_);
    }
    NewOp(names_[kSoftmaxR], "heads");
    for (int r = 0; r < p_; ++r) {
      uint64_t h0 = qh[r].lo / hd, h1 = qh[r].hi / hd;
      Range rows{h0 * s, h1 * s};
      Vector(r, OpKind::kSoftmax, FuncKind::kSoftmax, kSoftmaxOps, Sl(scores, rows, {0, lt}), {},
             Sl(probs, rows, {0, lt}), Ready(scores, r), hdu, ch.cached);
      if (func_) prog_.func.ops.back().tokens_per_sequence = static_cast<uint32_t>(s);
    }
    NewOp(names_[kPv], "heads");
    for (int r = 0; r < p_; ++r) {
      uint64_t h0 = qh[r].lo / hd, h1 = qh[r].hi / hd;
      FuncOp f;
      f.kind = FuncKind::kPv;
      f.a = Sl(probs, {h0 * s, h1 * s}, {0, lt});
      f.b = Sl(vc, {0, lt}, {0, nkv * hd});
      f.out = Sl(attn, {row0, row0 + s}, qh[r]);
      f.head_dim = hdu, f.kv_group = group, f.head_begin = static_cast<uint32_t>(h0),
      f.head_end = static_cast<uint32_t>(h1);
      std::vector<uint32_t> deps = Ready(probs, r);
      Append(&deps, Ready(vc, r));
      uint64_t kvh = ColsOf(heads, nkv * hd, p_, r).size();
      attn_task(r, kPv, s, hd, lt, h1 - h0, f, deps, lt * kvh * d_);
    }
    row0 += s;
  }
}

WeightPlan Lowerer::PlanOnly() {
  p_ = static_cast<int>(m_.tp());
  d_ = DtypeBytes(wl_);
  int rows = static_cast<int>(m_.grid_rows());
  if (rows <= 0) {
    rows = 1;
    for (int r = 1; r * r <= p_; ++r)
      if (p_ % r == 0) rows = r;
  }
  grid_ = {rows, p_ / rows};
  const int stages = std::max<int>(1, static_cast<int>(m_.pipeline_stages()));
  const uint32_t layers = wl_.num_layers() ? wl_.num_layers() : model_.num_layers();
  std::vector<int> per_stage(stages, 0);
  for (uint32_t l = 0; l < layers; ++l) per_stage[static_cast<int>(uint64_t{l} * stages / layers)]++;
  const int most_layers = *std::max_element(per_stage.begin(), per_stage.end());
  const uint64_t nkv =
      model_.num_key_value_heads() ? model_.num_key_value_heads() : model_.num_attention_heads();
  WeightPlan plan;
  plan.weight_bytes_per_core = WeightElemsPerCore(most_layers) * d_;
  plan.weights_in_sram =
      m_.weights() == "sram" ||
      (m_.weights() != "dram" && plan.weight_bytes_per_core <= chip_.config().core().sram_bytes());
  plan.layers_per_core = static_cast<uint32_t>(most_layers);
  plan.kv_heads_per_core = static_cast<uint32_t>(nkv >= static_cast<uint64_t>(p_) ? (nkv + p_ - 1) / p_ : 1);
  return plan;
}

// Moves x from the current stage's ranks to `to` (rank r -> rank r): split rows when every
// rank has some, else the whole tensor from each rank.
int32_t Lowerer::StageSend(int32_t x, const std::vector<int>& to) {
  Layout out = (t_ >= static_cast<uint64_t>(p_) && p_ > 1) ? Layout::Rows() : Layout::Replicated();
  // mn_2d layouts gather no more than `out` needs: a grid within grid rows when those cover
  // the row split (the next stage then norms split rows, not whole grid rows redundantly).
  if (!Satisfies(x, out) && IsGridKind(ts_[x].layout)) Convert(x, out, "stage_send");
  if (!Satisfies(x, out)) Convert(x, Layout::Replicated(), "stage_send");
  uint64_t h = model_.hidden_size();
  NewOp("stage_send", ToString(out));
  for (int r = 0; r < p_; ++r) Reload(x, r, nullptr);
  CollectiveInfo ci;
  ci.kind = CollectiveKind::kP2p;
  ci.algorithm = "direct";
  ci.bytes = t_ * h * d_;
  ci.ranks = p_;
  ci.op = cur_op_;
  int32_t coll = static_cast<int32_t>(prog_.collectives.size());
  prog_.collectives.push_back(ci);
  FuncCollective fc;
  fc.buffer = NewTensor(FuncTensorKind::kBuffer, 1, t_ * h);
  int32_t y = NewTensor(FuncTensorKind::kActivation, t_, h);
  std::vector<std::vector<uint32_t>> landed(p_);
  for (int r = 0; r < p_; ++r) {
    Range rows = RowsOf(out, t_, p_, r);
    if (rows.size() == 0) continue;
    FuncSlice sx = Sl(x, rows, {0, h}), sy = Sl(y, rows, {0, h});
    if (func_) {
      fc.pack.push_back({cores_[r], sx, rows.lo * h, false});
      fc.unpack.push_back({to[r], sy, rows.lo * h, false});
    }
    Task tk;
    tk.kind = TaskKind::kTransfer;
    tk.core = cores_[r];
    tk.dst_core = to[r];
    tk.bytes = rows.size() * h * d_;
    tk.offset = rows.lo * h * d_;
    tk.dst_offset = tk.offset;
    tk.collective = coll;
    uint32_t id = AddTask(tk, Ready(x, r));
    if (fc.first_task < 0) fc.first_task = id;
    fc.last_task = id;
    landed[r].push_back(id);
  }
  if (func_) prog_.func.collectives.push_back(std::move(fc));
  ts_[y].ready = landed;
  ts_[y].layout = out;
  Dead(x);  // the next stage's cores hold y; these cores are done with the layer output
  return y;
}

uint64_t Lowerer::WeightElemsPerCore(int layers) {
  const uint64_t h = model_.hidden_size(), hd = model_.head_dim(), nq = model_.num_attention_heads();
  const uint64_t nkv = model_.num_key_value_heads() ? model_.num_key_value_heads() : nq;
  const uint64_t inter = model_.intermediate_size();
  const uint32_t hdu = static_cast<uint32_t>(hd);
  struct G {
    OpClass cls;
    uint64_t k, n;
    uint32_t ku, nu;
  };
  const G gs[] = {{OpClass::kQkv, h, nq * hd, 1, hdu},  {OpClass::kQkv, h, nkv * hd, 1, hdu},
                  {OpClass::kQkv, h, nkv * hd, 1, hdu}, {OpClass::kO, nq * hd, h, hdu, 1},
                  {OpClass::kGateUp, h, inter, 1, 1},   {OpClass::kGateUp, h, inter, 1, 1},
                  {OpClass::kDown, inter, h, 1, 1}};
  uint64_t total = 0;
  for (const G& g : gs) {
    GemmSpec s = Spec(g.cls, g.k, g.n, g.ku, g.nu);
    std::string label;
    const Partitioner* p = PartitionerFor(g.cls)->Choose(s, *this, &label);
    total += p->ShardElems(s, p_, grid_);
  }
  return total * layers;
}

Program Lowerer::Run() {
  const WeightPlan plan = PlanOnly();  // also sets p_, d_ and grid_
  algo_ = m_.collective();  // resolved per collective by ChooseCollective ("" -> ring, "auto" -> rule)
  switch_ = InSwitchReductionOf(chip_.config());
  const int stages = std::max<int>(1, static_cast<int>(m_.pipeline_stages()));
  const uint32_t layers = wl_.num_layers() ? wl_.num_layers() : model_.num_layers();
  const uint64_t b = std::max<uint32_t>(1, wl_.batch());
  lmax_ = wl_.cached_prefix() + wl_.seq_len() + wl_.decode_steps();
  if (!chunks_.empty()) {
    lmax_ = 0;
    for (const llm::SeqChunk& c : chunks_) lmax_ += uint64_t{c.cached} + c.new_tokens;
  }
  prog_.num_cores = chip_.num_cores();
  prog_.num_channels = static_cast<int>(chip_.channels().size());
  if (func_) {
    prog_.func.dtype_bytes = static_cast<uint32_t>(d_);
    prog_.func.head_dim = model_.head_dim();
    prog_.func.batch = static_cast<uint32_t>(b);
  }

  // Stages: regions and placements.
  std::vector<Region> regions = StageRegions(chip_, stages, p_);
  std::vector<int> file_cores;
  if (m_.placement() == "file") {
    std::ifstream in(m_.placement_file());
    int c;
    while (in >> c) file_cores.push_back(c);
  }
  std::vector<std::vector<int>> stage_cores;
  for (int s = 0; s < stages; ++s) {
    PlacementRequest req;
    req.name = m_.placement().empty() ? "linear" : m_.placement();
    req.ranks = p_;
    req.region = regions.at(s);
    req.seed = m_.seed() + static_cast<uint64_t>(s);
    req.file_cores = StageFileCores(file_cores, s, p_);
    stage_cores.push_back(Place(req, chip_));
    const Region& reg = regions[s];
    stage_grids_.push_back(reg.rows * reg.cols == p_ ? RankGrid{reg.rows, reg.cols} : RankGrid{});
  }
  std::vector<int> stage_of(layers);
  for (uint32_t l = 0; l < layers; ++l) stage_of[l] = static_cast<int>(uint64_t{l} * stages / layers);

  // Memory plan: weights and KV resident in SRAM when they fit.
  sram_ = chip_.config().core().sram_bytes();
  const uint64_t wbytes = plan.weight_bytes_per_core;
  const uint64_t nkv =
      model_.num_key_value_heads() ? model_.num_key_value_heads() : model_.num_attention_heads();
  const uint64_t kvbytes =
      2 * b * lmax_ * plan.kv_heads_per_core * model_.head_dim() * d_ * plan.layers_per_core;
  weights_sram_ = plan.weights_in_sram;
  kv_sram_ = (weights_sram_ ? wbytes : 0) + kvbytes <= sram_;
  resident_ = (weights_sram_ ? wbytes : 0) + (kv_sram_ ? kvbytes : 0);
  prog_.weights_location = weights_sram_ ? WeightsLocation::kSram : WeightsLocation::kDramStreamed;
  prog_.kv_location = kv_sram_ ? KvLocation::kSram : KvLocation::kDram;

  for (uint32_t l = 0; l < layers; ++l) {
    kcache_.push_back(NewTensor(FuncTensorKind::kCache, b * lmax_, nkv * model_.head_dim(),
                                WeightSeed(l, 100), wl_.cached_prefix()));
    vcache_.push_back(NewTensor(FuncTensorKind::kCache, b * lmax_, nkv * model_.head_dim(),
                                WeightSeed(l, 101), wl_.cached_prefix()));
  }
  llm::Phase ph;
  ph.batch = static_cast<uint32_t>(b);
  ph.dtype_bytes = static_cast<uint32_t>(d_);
  std::vector<uint32_t> prev_out;
  for (uint32_t step = 0; step <= wl_.decode_steps(); ++step) {
    bool decode = step > 0;
    phase_ = !chunks_.empty() ? Phase::kMixed : decode ? Phase::kDecode : Phase::kPrefill;
    step_ = decode ? step - 1 : 0;
    ph.decode = decode;
    ph.new_tokens = decode ? 1 : wl_.seq_len();
    ph.cached = decode ? wl_.cached_prefix() + wl_.seq_len() + step_ : wl_.cached_prefix();
    if (step <= 1) names_ = RoleNames(model_, llm::BuildLayer(model_, ph));
    t_ = b * ph.new_tokens;
    cached_ = ph.cached;
    cores_ = stage_cores[stage_of.empty() ? 0 : stage_of[0]];
    layer_ = 0;
    NewOp("input", "replicated");
    int32_t x = NewTensor(FuncTensorKind::kInput, t_, model_.hidden_size(), WeightSeed(step, 200));
    for (int r = 0; r < p_; ++r) ts_[x].ready[r] = prev_out;
    for (uint32_t l = 0; l < layers; ++l) {
      int s = stage_of[l];
      cores_ = stage_cores[s];
      coll_grid_ = stage_grids_[s];
      Layout next = Layout::Replicated();
      if (l + 1 < layers && stage_of[l + 1] == s)
        next = WantedInput(OpClass::kQkv, model_.hidden_size(),
                           uint64_t{model_.num_attention_heads()} * model_.head_dim(), 1, model_.head_dim());
      x = Layer(l, x, next);
      if (l + 1 < layers && stage_of[l + 1] != s) x = StageSend(x, stage_cores[stage_of[l + 1]]);
    }
    FuncOutput out;
    out.phase = phase_;
    out.step = step_;
    out.rows = static_cast<uint32_t>(t_);
    out.cols = model_.hidden_size();
    prev_out.clear();
    for (int r = 0; r < p_; ++r) {
      Range rows = RowsOf(ts_[x].layout, t_, p_, r), cols = ColsOf(ts_[x].layout, out.cols, p_, r);
      if (func_ && rows.size() && cols.size()) out.parts.push_back({cores_[r], Sl(x, rows, cols)});
      Append(&prev_out, ts_[x].ready[r]);
    }
    if (func_) prog_.func.outputs.push_back(std::move(out));
    live_.clear();
  }
  if (func_) prog_.func.tensors = std::move(tensors_);
  return builder_.Build();
}

}  // namespace

Program Lower(const arch::Chip& chip, const config::Model& model, const config::Workload& wl,
              const config::Mapping& m, const LowerOptions& opts) {
  std::vector<config::Diag> diags;
  ValidateMapping(m, chip, model, wl, config::SourceMap(), &diags);
  if (!diags.empty()) throw config::ConfigError(std::move(diags));
  Lowerer lowerer(chip, model, wl, m, opts);
  return lowerer.Run();
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
  std::vector<config::Diag> diags;
  ValidateMapping(m, chip, model, wl, config::SourceMap(), &diags);
  if (!diags.empty()) throw config::ConfigError(std::move(diags));
  Lowerer lowerer(chip, model, wl, m, opts);
  lowerer.SetChunks(chunks);
  return lowerer.Run();
}

WeightPlan PlanWeights(const arch::Chip& chip, const config::Model& model, const config::Mapping& m,
                       uint32_t layers, const std::string& dtype) {
  config::Workload wl;
  wl.set_batch(1);
  wl.set_seq_len(1);
  wl.set_num_layers(layers);
  wl.set_dtype(dtype);
  Lowerer lowerer(chip, model, wl, m, LowerOptions{});
  return lowerer.PlanOnly();
}

// ---- Validation --------------------------------------------------------------------------

namespace {
std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}
bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
}  // namespace

void ValidateMapping(const config::Mapping& m, const arch::Chip& chip, const config::Model& model,
                     const config::Workload& wl, const config::SourceMap& locs,
                     std::vector<config::Diag>* diags) {
  const size_t before = diags->size();
  auto add = [&](const std::string& field, const std::string& value, const std::string& rule) {
    diags->push_back({locs.Find(field), field, value, rule});
  };
  // Sizes beyond the chip are rejected before any int arithmetic on them.
  const int64_t cores = chip.num_cores();
  const int tp = m.tp() > cores ? -1 : static_cast<int>(m.tp());
  const int stages = m.pipeline_stages() > cores ? static_cast<int>(cores) + 1
                                                 : std::max<int>(1, static_cast<int>(m.pipeline_stages()));
  const uint32_t layers = wl.num_layers() ? wl.num_layers() : model.num_layers();
  if (m.tp() == 0) add("mapping.tp", "0", "must be > 0");
  if (tp < 0) {
    add("mapping.tp", std::to_string(m.tp()), "exceeds the chip's " + std::to_string(cores) + " cores");
  }
  if (tp > 0 && static_cast<int64_t>(tp) * stages > chip.num_cores())
    add("mapping.tp", std::to_string(tp),
        "tp x pipeline_stages (" + std::to_string(int64_t{tp} * stages) + ") exceeds the chip's " +
            std::to_string(chip.num_cores()) + " cores");
  if (static_cast<uint32_t>(stages) > layers)
    add("mapping.pipeline_stages", std::to_string(std::max<uint32_t>(1, m.pipeline_stages())),
        "more stages than simulated layers (" + std::to_string(layers) + ")");
  const std::vector<std::string> parts = PartitionerNames();
  std::vector<std::string> used;
  const std::string dflt = m.partition().empty() ? "megatron" : m.partition();
  if (!Contains(parts, dflt))
    add("mapping.partition", m.partition(), "unknown partitioner; valid: " + Join(parts));
  used.push_back(dflt);
  const std::vector<std::string> weight_classes = {"qkv", "o", "gate_up", "down"};
  const std::vector<std::string> fixed_classes = {"attention", "norm", "elementwise", "router", "experts"};
  for (int i = 0; i < m.overrides_size(); ++i) {
    const auto& o = m.overrides(i);
    std::string f = "mapping.overrides[" + std::to_string(i) + "]";
    if (Contains(fixed_classes, o.op()))
      add(f + ".op", o.op(),
          "op class has a fixed partition (attention splits by heads; norms and element-wise ops follow "
          "their input; MoE is not mapped); partitioners apply to: " +
              Join(weight_classes));
    else if (!Contains(weight_classes, o.op()))
      add(f + ".op", o.op(), "unknown op class; valid: " + Join(weight_classes));
    if (!Contains(parts, o.partition()))
      add(f + ".partition", o.partition(), "unknown partitioner; valid: " + Join(parts));
    used.push_back(o.partition());
  }
  const std::vector<std::string> places = PlacementNames();
  if (!m.placement().empty() && !Contains(places, m.placement()))
    add("mapping.placement", m.placement(), "unknown placement; valid: " + Join(places));
  const std::vector<std::string> colls = CollectiveNames();
  if (!m.collective().empty() && m.collective() != "auto" && !Contains(colls, m.collective()))
    add("mapping.collective", m.collective(),
        "unknown collective algorithm; valid: " + Join(colls) + ", auto");
  if (m.collective() == "nvls" && !InSwitchReductionOf(chip.config()).available)
    add("mapping.collective", m.collective(),
        "needs a chip with noc.topology switch and collectives.in_switch_reduction true");
  const std::vector<std::string> weights = {"", "auto", "sram", "dram"};
  if (!Contains(weights, m.weights())) add("mapping.weights", m.weights(), "must be auto, sram or dram");
  const std::vector<std::string> mn_2d_weights = {"", "replicated", "k_steps"};
  if (!Contains(mn_2d_weights, m.mn_2d_weights()))
    add("mapping.mn_2d_weights", m.mn_2d_weights(), "must be replicated or k_steps");
  if (tp > 0) {
    uint32_t nq = model.num_attention_heads();
    uint32_t nkv = model.num_key_value_heads() ? model.num_key_value_heads() : nq;
    if (nq == 0 || (nq % tp != 0 && tp % nq != 0))
      add("mapping.tp", std::to_string(tp),
          "attention splits by heads: num_attention_heads (" + std::to_string(nq) +
              ") must divide by tp, or tp by it (heads are then replicated)");
    if (nkv > 0 && nkv % tp != 0 && tp % nkv != 0)
      add("mapping.tp", std::to_string(tp),
          "num_key_value_heads (" + std::to_string(nkv) +
              ") must divide by tp, or tp by it (KV heads are then replicated)");
    if (Contains(used, "mn_2d") && m.grid_rows() > 0 && tp % static_cast<int>(m.grid_rows()) != 0)
      add("mapping.grid_rows", std::to_string(m.grid_rows()), "must divide tp (" + std::to_string(tp) + ")");
  }
  if (m.placement() == "file") {
    std::ifstream in(m.placement_file());
    if (m.placement_file().empty() || !in) {
      add("mapping.placement_file", m.placement_file(), "placement = file needs a readable file");
    } else {
      std::vector<int> cores;
      int c;
      while (in >> c) cores.push_back(c);
      if (!in.eof())
        add("mapping.placement_file", m.placement_file(), "must hold whitespace-separated core ids");
      if (tp > 0 && static_cast<int64_t>(cores.size()) < tp)
        add("mapping.placement_file", m.placement_file(),
            "has " + std::to_string(cores.size()) + " core ids, tp needs " + std::to_string(tp));
      for (int id : cores)
        if (id < 0 || id >= chip.num_cores()) {
          add("mapping.placement_file", m.placement_file(),
              "core id " + std::to_string(id) + " is not on the chip");
          break;
        }
    }
  }
  if (diags->size() == before) {
    // Everything else is consistent: the placements themselves must be possible.
    try {
      std::vector<int> file_cores;
      if (m.placement() == "file") {
        std::ifstream in(m.placement_file());
        int c;
        while (in >> c) file_cores.push_back(c);
      }
      std::vector<Region> regions = StageRegions(chip, stages, tp);
      for (int s = 0; s < stages; ++s) {
        PlacementRequest req;
        req.name = m.placement().empty() ? "linear" : m.placement();
        req.ranks = tp;
        req.region = regions.at(s);
        req.seed = m.seed() + static_cast<uint64_t>(s);
        req.file_cores = StageFileCores(file_cores, s, tp);
        Place(req, chip);
      }
    } catch (const std::exception& e) {
      add(m.placement() == "file" ? "mapping.placement_file" : "mapping.placement",
          m.placement() == "file" ? m.placement_file() : m.placement(), e.what());
    }
  }
}

}  // namespace tpsim::mapping
