// k_split (row-parallel): X split along K, W rows split; every rank makes a full-size
// partial Y, left as a partial-sum layout for the lowering to all-reduce or reduce-scatter.
#include <algorithm>

#include "mapping/partition/blocks.h"

namespace tpsim::mapping {
namespace {
class KSplit : public Partitioner {
 public:
  const char* name() const override { return "k_split"; }
  // Whole heads of K when there are at least P of them, else single columns (heads shared).
  Layout Input(const GemmSpec& g, const GemmContext& ctx) const override {
    return Layout::Cols(DisjointCols(g.k, g.k_unit, ctx.P()) ? g.k_unit : 1);
  }
  Layout Emit(const GemmSpec& g, GemmContext& ctx) const override {
    Layout in = Input(g, ctx);
    for (int r = 0; r < ctx.P(); ++r) EmitShard(ctx, g, r, {0, g.t}, ColsOf(in, g.k, ctx.P(), r), {0, g.n});
    return Layout::Partial();
  }
  uint64_t ShardElems(const GemmSpec& g, int p, RankGrid) const override {
    uint64_t most = 0;
    Layout in = Layout::Cols(DisjointCols(g.k, g.k_unit, p) ? g.k_unit : 1);
    for (int r = 0; r < p; ++r) most = std::max(most, ColsOf(in, g.k, p, r).size());
    return most * g.n;
  }
};
}  // namespace

const Partitioner& KSplitPartitioner() {
  static const KSplit p;
  return p;
}

namespace {
const PartitionerRegistrar kRegistered(
    "k_split", "row-parallel: X and W split along K; partial Y sums all-reduced or reduce-scattered",
    &KSplitPartitioner());
}  // namespace
}  // namespace tpsim::mapping
