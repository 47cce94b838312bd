// mn_2d: P = Pr x Pc grid; rank (i, j) computes Y block (rows i of Pr, columns j of Pc)
// from X rows i (replicated along the grid row) and W columns j (replicated along the
// grid column). Fallback to n_split when rows do not divide by Pr or column units by Pc
// (the grid layout's blocks must be equal for the gathers).
//
// mapping.mn_2d_weights = "k_steps" (SUMMA K-steps): the same layouts, but rank (i, j)
// holds only W[k-block i, cols j] (1/P of W, no replication) and the K-blocks rotate
// within each grid column (EmitKSteps, blocks.h). Pr = 1 needs no rotation: plain
// mn_2d already holds 1/P (same Program, same labels). k not a multiple of Pr (no equal
// K-blocks) falls back to replicated mn_2d and says so, e.g.
// "mn_2d(k_steps)->mn_2d (k=10 not divisible by grid_rows=4)" or "(k=2 < grid_rows=4)".
#include <algorithm>

#include "mapping/partition/blocks.h"

namespace tpsim::mapping {
namespace {

std::string GridName(RankGrid grid) { return std::to_string(grid.rows) + "x" + std::to_string(grid.cols); }

uint64_t MostCols(const GemmSpec& g, int p, RankGrid grid) {
  uint64_t most = 0;
  Layout out = Layout::Grid(grid.rows, grid.cols, g.n_unit);
  for (int r = 0; r < p; ++r) most = std::max(most, ColsOf(out, g.n, p, r).size());
  return most;
}

class Mn2dKSteps : public Partitioner {
 public:
  const char* name() const override { return "mn_2d(k_steps)"; }
  Layout Input(const GemmSpec&, const GemmContext& ctx) const override {
    return Layout::GridRows(ctx.Grid().rows, ctx.Grid().cols);
  }
  Layout Emit(const GemmSpec& g, GemmContext& ctx) const override {
    EmitKSteps(ctx, g);
    return Layout::Grid(ctx.Grid().rows, ctx.Grid().cols, g.n_unit);
  }
  uint64_t ShardElems(const GemmSpec& g, int p, RankGrid grid) const override {
    if (grid.cols <= 0) return g.k * g.n;
    return (g.k + grid.rows - 1) / grid.rows * MostCols(g, p, grid);
  }
};

const Partitioner& KSteps() {
  static const Mn2dKSteps p;
  return p;
}

class Mn2d : public Partitioner {
 public:
  const char* name() const override { return "mn_2d"; }
  const Partitioner* Choose(const GemmSpec& g, const GemmContext& ctx, std::string* label) const override {
    RankGrid grid = ctx.Grid();
    uint64_t units = g.n / g.n_unit;
    const bool k_steps =
        ctx.Mapping().mn_2d_weights() == "k_steps" && grid.rows > 1;  // one grid row: nothing to rotate
    if (g.t % grid.rows != 0 || units % grid.cols != 0) {
      // Names what does not divide (both when neither does).
      std::string why;
      if (g.t % grid.rows != 0)
        why = "M=" + std::to_string(g.t) + " not divisible by grid_rows=" + std::to_string(grid.rows);
      if (units % grid.cols != 0)
        why += (why.empty() ? "" : ", ") + std::string("N units=") + std::to_string(units) +
               " not divisible by grid_cols=" + std::to_string(grid.cols);
      *label = std::string(k_steps ? "mn_2d(k_steps)" : "mn_2d") + "->n_split (" + why + ")";
      return &NSplitPartitioner();
    }
    *label = "mn_2d(" + GridName(grid) + ")";
    if (!k_steps) return this;
    const uint64_t gr = static_cast<uint64_t>(grid.rows);
    if (g.k % gr != 0) {
      *label = "mn_2d(k_steps)->mn_2d (k=" + std::to_string(g.k) +
               (g.k < gr ? " < grid_rows=" : " not divisible by grid_rows=") + std::to_string(gr) + ")";
      return this;
    }
    *label = "mn_2d(" + GridName(grid) + ", k_steps)";
    return &KSteps();
  }
  Layout Input(const GemmSpec&, const GemmContext& ctx) const override {
    return Layout::GridRows(ctx.Grid().rows, ctx.Grid().cols);
  }
  Layout Emit(const GemmSpec& g, GemmContext& ctx) const override {
    Layout out = Layout::Grid(ctx.Grid().rows, ctx.Grid().cols, g.n_unit);
    for (int r = 0; r < ctx.P(); ++r)
      EmitShard(ctx, g, r, RowsOf(out, g.t, ctx.P(), r), {0, g.k}, ColsOf(out, g.n, ctx.P(), r));
    return out;
  }
  uint64_t ShardElems(const GemmSpec& g, int p, RankGrid grid) const override {
    if (grid.cols <= 0) return g.k * g.n;
    return MostCols(g, p, grid) * g.k;
  }
};

const Mn2d kPartitioner;
const PartitionerRegistrar kRegistered(
    "mn_2d", "a rows x cols grid of ranks (SUMMA-style); optional K-steps (mn_2d_weights)", &kPartitioner);
}  // namespace
}  // namespace tpsim::mapping
