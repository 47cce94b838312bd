#pragma once
// The memory plan of a lowering: where weights and the KV cache live, and the memory
// traffic that keeping each compute task's data on chip takes. The lowering talks to it
// through MemoryPlanner only, so a different memory system (a GPU's HBM streamed through
// L2, say) is another implementation of the same interface.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "mapping/lower_context.h"

namespace tpsim::mapping {

class MemoryPlanner {
 public:
  virtual ~MemoryPlanner() = default;
  // Decides where weights and KV live (Program::weights_location, kv_location) from the
  // per-core weight plan and the KV rows per sequence (ctx.lmax).
  virtual void Place(const WeightPlan& plan) = 0;
  virtual bool WeightsResident() const = 0;  // false: every weight block is read from DRAM per use
  // Where only one of the run's two layouts stays (WeightPlan::resident_rows): the rows whose
  // partitioner's shards are resident; a GEMM that runs another partitioner reads from DRAM.
  virtual std::optional<uint64_t> ResidentRows() const { return std::nullopt; }
  virtual bool KvResident() const = 0;  // false: KV written to and read from DRAM
  // Tensor t was created / will not be read again / a phase ended (nothing is held over).
  virtual void Created(int32_t t, FuncTensorKind kind) = 0;
  virtual void Dead(int32_t t) = 0;
  virtual void EndPhase() = 0;
  // Before a compute task of `kind` on rank r that touches tensors used[0..2] (-1: none)
  // with `transient` bytes of its own data: emits what makes room, appending to deps.
  virtual void BeforeCompute(int rank, llm::OpKind kind, const int32_t (&used)[3], uint64_t transient,
                             std::vector<TaskId>* deps) = 0;
  virtual void AfterCompute(int rank, TaskId task) = 0;
  // Reads t's block back to rank r when it was moved out; t's readers (and deps) wait for it.
  virtual void Reload(int32_t t, int r, std::vector<TaskId>* deps) = 0;
  // What the DRAM read of a streamed weight block on rank r waits for (prefetch depth).
  virtual std::vector<TaskId> WeightReadDeps(int rank) = 0;
  // The last compute task emitted so far on rank r's core (none where the plan does not track it).
  virtual std::vector<TaskId> LastCompute(int /*rank*/) const { return {}; }
};

// The scratchpad plan of a systolic core: weights stay in SRAM when every core's shards
// of its stage fit (mapping.weights "auto"; "sram" requires it, "dram" streams them), the
// KV cache when it fits beside them. SRAM timeline, per core: resident weights and KV, the
// activations still live (held between ops), and each task's own data (`transient`) must
// fit. Live activations the task does not touch are evicted to DRAM, oldest first, as far
// as needed (one write each; read back when next used); what still does not fit is
// spilled and read back around the task. Attention tasks (scores, softmax, PV) are checked
// against SRAM less the resident data only (q is read back before attention starts, so
// attention neither evicts nor reloads). Streamed weights are double-buffered: the read
// of a weight op's shard may start once the compute that preceded the previous weight op
// on that core has finished (one op of prefetch).
// The KV cache, when resident, is reserved whole (all the core's layers, lmax positions)
// from the first task of the run, except in the first prefill (Phase::kPrefill with no
// cached prefix): there layer j's KV region holds nothing until layer j's prefill writes
// it, so a task of layer l reserves the KV of the core's layers of its stage up to and
// including l only (at most WeightPlan::layers_per_core), and activations may use the
// rest. The current layer's region is reserved from its first task on, not from its
// kv_write: simple, and conservative. Where KV lives (kv_location) is decided for the whole
// cache as before. Decode steps, prefills after a cached prefix and mixed iterations
// reserve it whole, so every decode step plans alike (sim/step_reuse.h).
class SramTimeline : public MemoryPlanner {
 public:
  explicit SramTimeline(LowerContext& cx) : cx_(cx) {}
  void Place(const WeightPlan& plan) override;
  bool WeightsResident() const override { return weights_sram_; }
  std::optional<uint64_t> ResidentRows() const override { return resident_rows_; }
  bool KvResident() const override { return kv_sram_; }
  void Created(int32_t t, FuncTensorKind kind) override;
  void Dead(int32_t t) override;
  void EndPhase() override { live_.clear(); }
  void BeforeCompute(int rank, llm::OpKind kind, const int32_t (&used)[3], uint64_t transient,
                     std::vector<TaskId>* deps) override;
  void AfterCompute(int rank, TaskId task) override;
  void Reload(int32_t t, int r, std::vector<TaskId>* deps) override;
  std::vector<TaskId> WeightReadDeps(int rank) override;
  std::vector<TaskId> LastCompute(int rank) const override;

 private:
  void Grow(size_t core);
  // The resident bytes a compute task of the current phase and layer (cx_.layer) plans
  // around: the resident weights and the KV room (see the class comment).
  uint64_t Resident() const;
  // Rank r of the current group as a rank of its attention replica (mapping.attention_dp): r
  // itself, or, while the MoE block spans the whole stage (LowerContext::replica -1), rank
  // r % (p / D) of replica r / (p / D) of p / D ranks. Tensors are tagged with their replica.
  struct Local {
    int replica, rank, p;
  };
  Local LocalOf(int r) const;
  // Bytes of x rank l.rank of its l.p ranks holds.
  uint64_t Held(int32_t x, const Local& l) const;
  LowerContext& cx_;
  std::vector<int32_t> live_;  // activations the stage's cores hold between ops, oldest first
  bool weights_sram_ = true, kv_sram_ = true;
  std::optional<uint64_t> resident_rows_;              // WeightPlan::resident_rows
  uint64_t weights_ = 0, kv_layer_ = 0, sram_ = 0;     // resident weights, one layer's resident KV
  uint32_t kv_layers_ = 0;                             // the layers a core's KV cache holds
  std::vector<int64_t> last_compute_, prefetch_mark_;  // per core
};

// The plan of a GPU-node chip (chip.gpu present): weights and the KV cache live in HBM and are
// read by the kernels that use them, which the cost model times with that traffic included
// (mapping/cost.h: a GEMM's weights, attention's KV through the GPU GEMM model), so the plan
// emits no memory task: no weight reads, no KV writes or reads, no eviction, no spill. The
// GPU's L2 is a cache inside those kernel times, not a scratchpad this plan fills.
class GpuHbmPlan : public MemoryPlanner {
 public:
  explicit GpuHbmPlan(LowerContext& cx) : cx_(cx) {}
  void Place(const WeightPlan& plan) override;
  bool WeightsResident() const override { return true; }  // no weight-read tasks: the GEMM streams them
  bool KvResident() const override { return true; }       // no KV memory tasks: attention reads it
  void Created(int32_t, FuncTensorKind) override {}
  void Dead(int32_t) override {}
  void EndPhase() override {}
  void BeforeCompute(int, llm::OpKind, const int32_t (&)[3], uint64_t, std::vector<TaskId>*) override {}
  void AfterCompute(int, TaskId) override {}
  void Reload(int32_t, int, std::vector<TaskId>*) override {}
  std::vector<TaskId> WeightReadDeps(int) override { return {}; }

 private:
  LowerContext& cx_;
};

class GemmEmitter;
// Weights per core of the most loaded stage and whether they stay in SRAM (sets cx.p,
// cx.d and cx.grid from the mapping first), for cx.plan_layers layers over the stages when
// set, else the workload's. On a GPU-node chip they never do (HBM).
// `gemm_rows`: the rows the run's weight GEMMs have, one entry per kind of step (GemmRows). Each
// GEMM's shard is what the emitter lowers at those rows (GemmEmitter::ShardElems): where the
// partitioner that runs differs between them (mn_2d in the prefill, its n_split fallback in
// decode), the run holds both layouts' shards. Weights are laid out once for the whole run,
// and a GEMM of either layout reads resident weights without a DRAM read (GemmEmitter::
// FetchWeights), so the plan counts both (summed; their overlap on a core is not subtracted).
// Where they do not fit together (or leave the KV cache no room) but the decode steps' layout
// does, that one stays and the prefill's streams (WeightPlan::resident_rows; GemmEmitter::Gemm
// reads a GEMM's weights from DRAM when its partitioner is not the resident rows' one). Every
// step of the run gets the same plan.
// Empty: the rows are not known (PlanWeights without a run, a request stream's iterations,
// whose rows vary): sized for 0 rows, which every grid divides (mn_2d's own shards).
WeightPlan SizeWeights(LowerContext& cx, const GemmEmitter& gemm, std::span<const uint64_t> gemm_rows);
// The rows of Lower's weight GEMMs for workload wl under mapping m: the prefill's (its
// sequences' new tokens) and, with decode steps, a decode step's (one per sequence), per
// attention replica (mapping.attention_dp).
std::vector<uint64_t> GemmRows(const config::Workload& wl, const config::Mapping& m);

}  // namespace tpsim::mapping
