// m_split_rotate (activations stationary): X split along M (tokens); W column shards
// rotate around the ring in P steps overlapped with compute; Y split along rows.
// Fallback: when M < P some ranks would have no rows, so the op runs as k_split and the
// label says so, e.g. "m_split_rotate->k_split (M=1 < tp=4)". P = 1 has nothing to rotate:
// the one rank computes the whole GEMM as n_split does (same Program, label unchanged).
#include <algorithm>

#include "mapping/partition/blocks.h"

namespace tpsim::mapping {
namespace {
class MSplitRotate : public Partitioner {
 public:
  const char* name() const override { return "m_split_rotate"; }
  const Partitioner* Choose(const GemmSpec& g, const GemmContext& ctx, std::string* label) const override {
    if (ctx.P() == 1) {
      *label = name();
      return &NSplitPartitioner();
    }
    if (g.t < static_cast<uint64_t>(ctx.P())) {
      *label = "m_split_rotate->k_split (M=" + std::to_string(g.t) + " < tp=" + std::to_string(ctx.P()) + ")";
      return &KSplitPartitioner();
    }
    *label = name();
    return this;
  }
  Layout Input(const GemmSpec&, const GemmContext&) const override { return Layout::Rows(); }
  Layout Emit(const GemmSpec& g, GemmContext& ctx) const override {
    EmitRotation(ctx, g);
    return Layout::Rows();
  }
  uint64_t ShardElems(const GemmSpec& g, int p, RankGrid) const override {
    uint64_t most = 0;
    for (int r = 0; r < p; ++r) most = std::max(most, Split(g.n, p, r).size());
    return most * g.k;
  }
};

const MSplitRotate kPartitioner;
const PartitionerRegistrar kRegistered(
    "m_split_rotate", "activations stationary: X split along M, W shards rotate round the ring",
    &kPartitioner);
}  // namespace
}  // namespace tpsim::mapping
