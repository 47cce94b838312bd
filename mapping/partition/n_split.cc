// n_split (column-parallel, weights stationary): W split along N (whole heads for
// attention projections; when there are fewer KV heads than ranks each rank computes the
// KV head its query heads use), X replicated; Y split along columns.
#include <algorithm>

#include "mapping/partition/blocks.h"

namespace tpsim::mapping {
namespace {
class NSplit : public Partitioner {
 public:
  const char* name() const override { return "n_split"; }
  Layout Input(const GemmSpec&, const GemmContext&) const override { return Layout::Replicated(); }
  Layout Emit(const GemmSpec& g, GemmContext& ctx) const override {
    Layout out = Layout::Cols(g.n_unit);
    for (int r = 0; r < ctx.P(); ++r) EmitShard(ctx, g, r, {0, g.t}, {0, g.k}, ColsOf(out, g.n, ctx.P(), r));
    return out;
  }
  uint64_t ShardElems(const GemmSpec& g, int p, RankGrid) const override {
    uint64_t most = 0;
    for (int r = 0; r < p; ++r) most = std::max(most, ColsOf(Layout::Cols(g.n_unit), g.n, p, r).size());
    return most * g.k;
  }
};
}  // namespace

const Partitioner& NSplitPartitioner() {
  static const NSplit p;
  return p;
}

namespace {
const PartitionerRegistrar kRegistered(
    "n_split", "column-parallel, weights stationary: W split along N, X replicated; Y split along N",
    &NSplitPartitioner());
}  // namespace
}  // namespace tpsim::mapping
