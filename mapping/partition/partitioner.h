#pragma once
// Partitioners of a weight GEMM  Y[t,n] = X[t,k] . W[k,n]  over a TP group of P ranks.
// Each states the layout it needs X in and the layout Y comes out in; the lowering
// inserts the converting collective before it. One file per partitioner (registry below).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "configs/registry.h"
#include "llm/opgraph.h"
#include "mapping.pb.h"
#include "mapping/collective/collective.h"
#include "mapping/func_data.h"
#include "mapping/layout.h"

namespace tpsim::mapping {

struct GemmSpec {
  OpId op{0};  // Program::ops index
  llm::OpClass cls = llm::OpClass::kQkv;
  uint64_t t = 0, k = 0, n = 0;
  uint32_t k_unit = 1, n_unit = 1;  // head_dim where the dimension is made of heads
  int32_t x = -1, w = -1, y = -1;   // FuncData tensors
};

// One shard of a GEMM on one rank:  Y[rows, cols] (+)= X[rows, ks] . B, B being W[ks, cols]
// or a block of a collective's buffer (rotating weights).
struct ShardGemm {
  Range rows, ks, cols;
  FuncSlice b;                // B's slice (functional data)
  bool transpose_b = false;   // B held as [cols, ks] (a rotated W^T buffer)
  bool accumulate = false;    // adds to Y (the rank's previous shard compute is in the deps)
  uint64_t buffer_bytes = 0;  // SRAM the compute holds besides X, Y: streamed or arriving weight blocks
};

// A collective the partitioner runs itself (rotation): its index in Program::collectives
// and its lowered steps (ranks within a group).
struct CollectiveRun {
  int32_t id = -1;
  const Schedule* schedule = nullptr;
};

// The emission interface a partitioner writes through: the lowering implements it
// (GemmEmitter, mapping/gemm_emitter.h), tests implement it with fakes. It knows nothing
// of any particular partitioner; rotation and K-steps are building blocks over it
// (mapping/partition/blocks.h).
class GemmContext {
 public:
  virtual ~GemmContext() = default;
  virtual int P() const = 0;
  virtual RankGrid Grid() const = 0;  // resolved mn_2d grid (rows x cols = P)
  // The mapping, for options a partitioner reads (mn_2d_weights).
  virtual const config::Mapping& Mapping() const = 0;
  virtual uint64_t DtypeBytes() const = 0;
  // Emits rank `rank`'s compute of shard `s` after `deps` and X's producers; returns its task.
  virtual TaskId EmitGemm(const GemmSpec& g, int rank, const ShardGemm& s, std::vector<TaskId> deps) = 0;
  // Rank `rank`'s weight block of `bytes`: when weights stream from DRAM, its read (the
  // compute depends on `deps`) and the SRAM it holds (sram_bytes); nothing when resident.
  struct WeightBlock {
    std::vector<TaskId> deps;
    uint64_t sram_bytes = 0;
  };
  virtual WeightBlock FetchWeights(int rank, uint64_t bytes) = 0;
  // What a block sent into rank's second (arriving) buffer at a rotation's first step waits
  // for: with weights held in SRAM, the last compute on rank's core before the rotation op
  // (the buffer's earlier user); with streamed weights nothing more (the sender's read of its
  // block is gated already).
  virtual std::vector<TaskId> BufferFree(int /*rank*/) { return {}; }
  // A collective of `kind` run at once by disjoint equal-size `groups` of ranks, `bytes`
  // per rank, for op `op` (Program::ops index): records it and returns its lowered steps.
  virtual CollectiveRun AddCollective(CollectiveKind kind, const std::vector<std::vector<int>>& groups,
                                      uint64_t bytes, uint64_t align_bytes, OpId op) = 0;
  // The transfer x (ranks) of step `step` of collective c, after `deps`; returns its task.
  virtual TaskId EmitTransfer(const CollectiveRun& c, size_t step, const Xfer& x,
                              std::vector<TaskId> deps) = 0;
  // Functional data: whether it is built, a rank's core, a collective buffer tensor, and
  // the record of a collective's pack/unpack copies (parallel to Program::collectives).
  virtual bool Functional() const = 0;
  virtual int Core(int rank) const = 0;
  virtual int32_t NewBuffer(uint64_t rows, uint64_t cols) = 0;
  virtual void AddFuncCollective(FuncCollective fc) = 0;
};

class Partitioner {
 public:
  virtual ~Partitioner() = default;
  virtual const char* name() const = 0;
  // The partitioner that actually runs: this one, or a stated fallback (label says why).
  virtual const Partitioner* Choose(const GemmSpec& g, const GemmContext& ctx, std::string* label) const;
  virtual Layout Input(const GemmSpec& g, const GemmContext& ctx) const = 0;
  // Emits the shards (X already in Input()); returns Y's layout.
  virtual Layout Emit(const GemmSpec& g, GemmContext& ctx) const = 0;
  // Most weight elements one rank holds at rest.
  virtual uint64_t ShardElems(const GemmSpec& g, int p, RankGrid grid) const = 0;
};

// The registry of partitioners by name (mapping.partition, overrides[].partition). Adding
// a partitioner is one new file in this folder defining a Partitioner and its registrar
// (n_split.cc is a small example):
//
//   const MyPartitioner kPartitioner;
//   const PartitionerRegistrar kRegistered("my_split", "one line on how it splits", &kPartitioner);
//
// The registered name must equal the object's name() (tests/mapping/registry_test.cc).
struct PartitionerKind {
  using Value = const Partitioner*;
  static constexpr std::string_view kName = "partitioner";
};
using PartitionerRegistry = Registry<PartitionerKind>;
using PartitionerRegistrar = Registrar<PartitionerKind>;

// nullptr when unknown.
inline const Partitioner* FindPartitioner(std::string_view name) {
  const Partitioner* const* p = PartitionerRegistry::Get().Find(name);
  return p ? *p : nullptr;
}

// The building blocks other partitioners fall back to (megatron, m_split_rotate, mn_2d).
const Partitioner& KSplitPartitioner();
const Partitioner& NSplitPartitioner();

}  // namespace tpsim::mapping
