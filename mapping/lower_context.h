#pragma once
// The state the lowering passes share, and the few emission primitives all of them use.
//
//   lower.cc            Lower / LowerIteration / PlanWeights: runs the passes per phase
//   layer_pass          walks one decoder layer of llm's op graph (by role)
//   gemm_emitter        weight GEMMs: picks the partitioner, implements GemmContext
//   attention           scores / softmax / PV by heads, whole batch or per chunk
//   moe_pass            MoE block: router, dispatch / combine all_to_alls, experts (moe_routing)
//   layout_convert      collectives that move a tensor between layouts
//   memory_plan         where weights and KV live; SRAM timeline, spills, weight prefetch
//   pipeline            layers -> stages, stage placement, stage-to-stage sends
//   validate_mapping    stage-two checks of the mapping (ValidateMapping)
//
// One LowerContext per Lower call; every pass holds a reference to it. Nothing here is
// part of the library's interface (mapping/mapping.h is).

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "arch/chip.h"
#include "llm/opgraph.h"
#include "mapping/collective/collective.h"
#include "mapping/layout.h"
#include "mapping/mapping.h"
#include "model.pb.h"
#include "workload.pb.h"

namespace tpsim::mapping {

class MemoryPlanner;

// Names of the layer graph's ops by role (canonical names where the graph has none, e.g.
// q_norm without qk_norm).
class RoleNames {
 public:
  RoleNames() = default;
  explicit RoleNames(const llm::LayerGraph& g);
  const std::string& operator[](llm::OpRole r) const { return names_[static_cast<int>(r)]; }

 private:
  std::string names_[llm::kNumOpRoles];
};

// A tensor's lowering state.
struct TState {
  Layout layout;
  std::vector<std::vector<TaskId>> ready;  // per rank: tasks a reader depends on
  // Per rank: the memory task that wrote this tensor's block out to DRAM to make room
  // (SRAM timeline), -1 while it is in SRAM. Empty until something is evicted.
  std::vector<int64_t> evicted;
  // The attention replica whose ranks hold it (LowerContext::replica when it was made).
  int replica = 0;
};

struct LowerContext {
  LowerContext(const arch::Chip& c, const config::Model& mo, const config::Workload& w,
               const config::Mapping& ma, const LowerOptions& opts)
      : chip(c), model(mo), wl(w), m(ma), func(opts.functional), plan_layers(opts.plan_layers) {}
  LowerContext(const LowerContext&) = delete;
  LowerContext& operator=(const LowerContext&) = delete;

  const arch::Chip& chip;
  const config::Model& model;
  const config::Workload& wl;
  const config::Mapping& m;
  const bool func;             // build prog.func (LowerOptions::functional)
  const uint32_t plan_layers;  // the layers the memory plan sizes for (LowerOptions::plan_layers)
  ProgramBuilder builder;
  Program& prog = builder.program();  // everything but the tasks, set as lowering goes
  MemoryPlanner* mem = nullptr;       // the memory plan (set by the driver)

  // Every tensor's shape (and, for the functional executor, its initialisation); moved to
  // prog.func.tensors when func. ts: parallel lowering state.
  std::vector<FuncTensor> tensors;
  std::vector<TState> ts;

  // The TP group: ranks, mn_2d grid, dtype bytes, collective choice.
  int p = 1;
  RankGrid grid;
  uint64_t d = 2;
  std::string algo;
  InSwitchReduction sw;    // the chip's in-switch reduction (nvls), for ChooseCollective
  std::vector<int> cores;  // the current stage's cores by rank
  RankGrid coll_grid;      // the stage region's shape, for mesh_2d collectives (0 x 0: let it choose)
  // Attention replicas (mapping.attention_dp = D): the one whose ranks the tensors made now
  // belong to (-1 while the MoE block spans the whole stage; 0 without replicas), and the
  // sequences of the batch it holds (the workload's batch / D).
  int replica = 0;
  uint64_t batch = 1;
  // The replicas lower the same ops in the same order into shared op rows: while kRecord,
  // NewOp remembers the ops it makes (replica 0); while kReplay it hands them out again in
  // turn (the other replicas), so an op's row sums every replica's tasks.
  enum class OpShare : uint8_t { kOff, kRecord, kReplay };
  OpShare op_share = OpShare::kOff;
  std::vector<OpId> shared_ops;
  size_t shared_pos = 0;
  void ShareOps(OpShare mode) {
    op_share = mode;
    shared_pos = 0;
    if (mode == OpShare::kRecord) shared_ops.clear();
  }
  // Lowered schedules by (algorithm, kind, ranks, bytes, align, grid rows, grid cols).
  std::map<std::tuple<std::string, int, int, uint64_t, uint64_t, int, int>, Schedule> schedules;
  // The interned shapes (ProgramBuilder::InternTransfer) of a lowered schedule's transfers
  // on given member cores (CollectiveInfo::members), in the order they are emitted: layers
  // repeat their collectives on the same cores, and a repeat appends its transfers by these
  // indices instead of interning every shape again (LayoutConverter::GroupCollective).
  std::map<std::pair<const Schedule*, std::vector<int>>, std::vector<uint32_t>> transfer_shapes;

  // Phase state
  Phase phase = Phase::kPrefill;
  uint32_t step = 0, layer = 0;
  uint64_t t = 0, cached = 0, lmax = 0;  // rows, cached tokens, KV rows per sequence
  std::vector<llm::SeqChunk> chunks;     // LowerIteration: attention per chunk
  std::vector<int32_t> kcache, vcache;   // per layer
  RoleNames names;
  OpId cur_op{0};

  int32_t NewTensor(FuncTensorKind kind, uint64_t rows, uint64_t cols, uint64_t seed = 0, uint32_t init = 0);
  OpId NewOp(const std::string& name, const std::string& partition);
  TaskId AddTask(Task t, std::vector<TaskId> deps);
  // Sorts deps and drops repeats (what AddTask does to the deps it is given).
  void SortUnique(std::vector<TaskId>* deps);
  std::vector<TaskId> merged;  // SortUnique's scratch
  // A DRAM read or write of `bytes` by rank's core.
  TaskId Memory(int rank, uint64_t bytes, bool write, std::vector<TaskId> deps);
  // A compute task on rank's core with its functional op; the memory plan adds what
  // keeping `transient` bytes of its own data in SRAM takes.
  TaskId Compute(int rank, Task t, FuncOp f, std::vector<TaskId> deps, uint64_t transient);
  // An element-wise / reduction op of out's elements; out's readers depend on it.
  void Vector(int rank, llm::OpKind kind, FuncKind fk, double ops_per_elem, FuncSlice a, FuncSlice b,
              FuncSlice out, std::vector<TaskId> deps, uint32_t head_dim = 0, uint32_t position_offset = 0);
  std::vector<TaskId> Ready(int32_t t, int r) const { return ts[t].ready[r]; }
  // Bytes of tensor x rank r holds in x's layout.
  uint64_t Held(int32_t x, int r) const {
    const FuncTensor& ft = tensors[x];
    const Layout& l = ts[x].layout;
    return RowsOf(l, ft.rows, p, r).size() * ColsOf(l, ft.cols, p, r).size() * d;
  }
  // Whether tensor x's layout `have` already gives every rank what `want` needs: the same
  // layout, or (neither being partial sums) every rank's wanted block inside the one it holds.
  bool Covers(const Layout& have, int32_t x, const Layout& want) const;
  bool Satisfies(int32_t x, const Layout& want) const { return Covers(ts[x].layout, x, want); }
  uint64_t NumKvHeads() const {
    return model.num_key_value_heads() ? model.num_key_value_heads() : model.num_attention_heads();
  }
};

// Vector-unit lane-operations per element.
constexpr double kNormOps = 4, kRopeOps = 3, kSoftmaxOps = 5, kAddOps = 1, kSiluMulOps = 5, kCopyOps = 1;

inline FuncSlice Sl(int32_t t, Range rows, Range cols) {
  return {t, static_cast<uint32_t>(rows.lo), static_cast<uint32_t>(rows.hi), static_cast<uint32_t>(cols.lo),
          static_cast<uint32_t>(cols.hi)};
}
inline void Append(std::vector<TaskId>* a, const std::vector<TaskId>& b) {
  a->insert(a->end(), b.begin(), b.end());
}
inline bool IsGridKind(const Layout& l) {
  return l.kind == LayoutKind::kGrid || l.kind == LayoutKind::kGridRows;
}

}  // namespace tpsim::mapping
