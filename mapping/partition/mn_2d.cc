// mn_2d: P = Pr x Pc grid; rank (i, j) computes Y block (rows i of Pr, columns j of Pc)
// from X rows i (replicated along the grid row) and W columns j (replicated along the
// grid column). Fallback to n_split when rows do not divide by Pr or column units by Pc
// (the grid layout's blocks must be equal for the gathers).
#include <algorithm>

#include "mapping/partition/partitioner.h"

namespace tpsim::mapping {
namespace {
class Mn2d : public Partitioner {
 public:
  const char* name() const override { return "mn_2d"; }
  const Partitioner* Choose(const GemmSpec& g, const GemmContext& ctx, std::string* label) const override {
    RankGrid grid = ctx.Grid();
    uint64_t units = g.n / g.n_unit;
    if (g.t % grid.rows != 0 || units % grid.cols != 0) {
      *label = "mn_2d->n_split (M=" + std::to_string(g.t) + ", N units=" + std::to_string(units) +
               " not divisible by grid " + std::to_string(grid.rows) + "x" + std::to_string(grid.cols) + ")";
      return &NSplitPartitioner();
    }
    *label = "mn_2d(" + std::to_string(grid.rows) + "x" + std::to_string(grid.cols) + ")";
    return this;
  }
  Layout Input(const GemmSpec&, const GemmContext& ctx) const override {
    return Layout::GridRows(ctx.Grid().rows, ctx.Grid().cols);
  }
  Layout Emit(const GemmSpec& g, GemmContext& ctx) const override {
    Layout out = Layout::Grid(ctx.Grid().rows, ctx.Grid().cols, g.n_unit);
    for (int r = 0; r < ctx.P(); ++r)
      ctx.EmitShard(g, r, RowsOf(out, g.t, ctx.P(), r), {0, g.k}, ColsOf(out, g.n, ctx.P(), r));
    return out;
  }
  uint64_t ShardElems(const GemmSpec& g, int p, RankGrid grid) const override {
    if (grid.cols <= 0) return g.k * g.n;
    uint64_t most = 0;
    Layout out = Layout::Grid(grid.rows, grid.cols, g.n_unit);
    for (int r = 0; r < p; ++r) most = std::max(most, ColsOf(out, g.n, p, r).size());
    return most * g.k;
  }
};
}  // namespace

const Partitioner& Mn2dPartitioner() {
  static const Mn2d p;
  return p;
}
}  // namespace tpsim::mapping
