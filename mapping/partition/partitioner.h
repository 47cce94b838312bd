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
#include "mapping/collective/collective.h"
#include "mapping/layout.h"

namespace tpsim::mapping {

struct GemmSpec {
  uint32_t op = 0;  // Program::ops index
  llm::OpClass cls = llm::OpClass::kQkv;
  uint64_t t = 0, k = 0, n = 0;
  uint32_t k_unit = 1, n_unit = 1;  // head_dim where the dimension is made of heads
  int32_t x = -1, w = -1, y = -1;   // FuncData tensors
};

// What a partitioner may ask of the lowering.
class GemmContext {
 public:
  virtual ~GemmContext() = default;
  virtual int P() const = 0;
  virtual RankGrid Grid() const = 0;  // resolved mn_2d grid (rows x cols = P)
  // Rank r computes Y[rows, cols] (+)= X[rows, ks] . W[ks, cols] (accumulating into a
  // partial when ks is not all of k). Deps, weight streaming and spills are handled.
  virtual void EmitShard(const GemmSpec& g, int rank, Range rows, Range ks, Range cols) = 0;
  // X split along rows; W column shards rotate around the ring (CollectiveKind::kRotate),
  // each rank computing on every shard as it arrives.
  virtual void EmitRotate(const GemmSpec& g) = 0;
  // mapping.mn_2d_weights == "k_steps".
  virtual bool Mn2dKSteps() const = 0;
  // mn_2d K-steps (SUMMA) on the gr x gc grid, k a multiple of gr: rank (i, j) holds
  // W[k-block i, cols j]; within each grid column the K-blocks rotate around the column's
  // ring (CollectiveKind::kRotate, one collective of gc groups of gr ranks), and rank (i, j)
  // computes Y[rows i, cols j] (+)= X[rows i, k-block s] . W[k-block s, cols j] on its own
  // block, then on each block as it arrives (the first compute writes, the others add).
  //
  //   grid column j:  (0,j) -> (1,j) -> ... -> (gr-1,j) -> (0,j)   gr-1 steps
  virtual void EmitKSteps(const GemmSpec& g) = 0;
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
