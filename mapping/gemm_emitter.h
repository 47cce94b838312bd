#pragma once
// Weight GEMMs: the partitioner named by the mapping (mapping.partition, overrides[])
// chooses how each GEMM splits over the TP group; the emitter brings X into the layout it
// needs (LayoutConverter) and implements GemmContext, the interface partitioners emit
// through: shard computes with their weight traffic, and the collectives of rotations.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mapping/lower_context.h"
#include "mapping/partition/partitioner.h"

namespace tpsim::mapping {

class LayoutConverter;

// A weight GEMM of the layer: its class, W's shape [k, n] and the column units of k and n
// (head_dim where the dimension is made of heads).
struct LayerGemm {
  llm::OpRole role;
  llm::OpClass cls;
  uint64_t k, n;
  uint32_t k_unit, n_unit;
};
// Whether ops of this role are weight GEMMs the emitter lowers (q, k, v, o, gate, up, down).
bool IsWeightGemm(llm::OpRole role);
// The weight GEMM of a graph op (IsWeightGemm(op.role)): W's shape [k, n] and the column
// units (head_dim where the dimension is made of heads).
LayerGemm GemmOf(const llm::Op& op, const config::Model& model);
// The dense layer's weight GEMMs, in layer order (q, k, v, o, gate, up, down), from llm's
// op graph.
std::vector<LayerGemm> LayerGemms(const config::Model& model);

class GemmEmitter : public GemmContext {
 public:
  GemmEmitter(LowerContext& cx, LayoutConverter& conv) : cx_(cx), conv_(conv) {}

  // The layout the GEMM's partitioner wants its input in.
  Layout WantedInput(const LayerGemm& lg) const;
  // Emits Y = X . W for the current rows (cx.t); returns Y (its layout set). The op is named
  // after lg.role unless `name` is given.
  int32_t Gemm(const LayerGemm& lg, int32_t x, int32_t w, const std::string* name = nullptr);
  // The GEMMs `parts` (same input, same k) concatenated along n, when they run as one GEMM: on
  // a GPU-node chip without functional data, when each part and the whole run n_split (fused
  // QKV and gate+up, as inference engines run them); nullopt otherwise.
  std::optional<LayerGemm> Fused(std::span<const LayerGemm* const> parts) const;
  // Most weight elements one rank holds at rest over a run whose steps lower this GEMM with
  // each of `rows` (the partitioner that runs may differ with the rows: mn_2d falls back to
  // n_split when they do not divide by the grid rows, m_split_rotate to k_split below P): the
  // shards of the different partitioners that run, summed, as the run keeps one set of
  // weights resident for all of its steps (memory_plan.h, SizeWeights). Not empty.
  uint64_t ShardElems(const LayerGemm& lg, std::span<const uint64_t> rows) const;

  // GemmContext
  int P() const override { return cx_.p; }
  RankGrid Grid() const override { return cx_.grid; }
  const config::Mapping& Mapping() const override { return cx_.m; }
  uint64_t DtypeBytes() const override { return cx_.d; }
  TaskId EmitGemm(const GemmSpec& g, int rank, const ShardGemm& s, std::vector<TaskId> deps) override;
  WeightBlock FetchWeights(int rank, uint64_t bytes) override;
  std::vector<TaskId> BufferFree(int rank) override;
  CollectiveRun AddCollective(CollectiveKind kind, const std::vector<std::vector<int>>& groups,
                              uint64_t bytes, uint64_t align_bytes, OpId op) override;
  TaskId EmitTransfer(const CollectiveRun& c, size_t step, const Xfer& x, std::vector<TaskId> deps) override;
  bool Functional() const override { return cx_.func; }
  int Core(int rank) const override { return cx_.cores[rank]; }
  int32_t NewBuffer(uint64_t rows, uint64_t cols) override;
  void AddFuncCollective(FuncCollective fc) override;

 private:
  const Partitioner* PartitionerFor(llm::OpClass cls) const;
  GemmSpec Spec(const LayerGemm& lg) const;
  const Partitioner* Choose(const GemmSpec& g, std::string* label) const;

  LowerContext& cx_;
  LayoutConverter& conv_;
  bool streamed_ = false;  // the GEMM being emitted reads its weights from DRAM (Gemm)
};

}  // namespace tpsim::mapping
