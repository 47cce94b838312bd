// hierarchical (uneven all_to_all): two steps over an R x C grid of ranks, rank = row * C + col
// (the caller's grid, e.g. the placement region's; 0 x 0 picks the most square R <= C).
//
//   step 1, within rows: (i, j) -> (i, c) for every other column c
//             - one aggregated transfer: j's blocks for (i'', c), every row i'' != i, into
//               (i, c)'s staging area (to be forwarded)
//             - the block for (i, c) itself, straight to its place
//   step 2, within columns: (i, c) -> (i'', c) for every other row i''
//             - its own block for (i'', c)
//             - the blocks for (i'', c) it received in step 1 from each row-mate j (one
//               transfer each: they sit by source in the staging area)
//
//        c0    c1             (0,0)'s block for (1,1) goes (0,0) -> (0,1) in step 1 inside the
//   r0  (0,0)-(0,1)           aggregate for column 1, then (0,1) -> (1,1) in step 2: a row hop,
//         |     |             then a column hop, as dimension-order routing takes it, but in
//   r1  (1,0)-(1,1)           (C - 1) + (R - 1) messages per rank's sends instead of P - 1.
//
// Buffer: send blocks in [0, S), by destination column, and within a column rows other than the
// sender's first (ascending), then its own row, so each aggregate is one range; the staging area
// [S, S + I) by source column, each segment the aggregate as sent; received blocks from S + I by
// source. S, I: the largest over the ranks. A step-2 transfer waits for everything the rank
// received in step 1 (the lowering's deps). A 1 x C (or R x 1) grid: step 1 (or 2) alone, the
// transfers of direct.

#include <algorithm>

#include "mapping/collective/algorithm.h"

namespace tpsim::mapping::collective {
namespace {

RankGrid GridOf(const AllToAllVArgs& a) {
  if (a.grid.rows > 0) return a.grid;
  RankGrid g{1, a.ranks};
  for (int r = 1; static_cast<int64_t>(r) * r <= a.ranks; ++r)
    if (a.ranks % r == 0) g = {r, a.ranks / r};
  return g;
}

Schedule LowerHierarchicalV(const AllToAllVArgs& a, AllToAllVLayout* layout) {
  const std::vector<std::vector<uint64_t>>& b = *a.bytes;
  const int p = a.ranks;
  const RankGrid g = GridOf(a);
  const int R = g.rows, C = g.cols;
  auto at = [&](int i, int j) { return i * C + j; };
  std::vector<std::vector<uint64_t>>& send = layout->send_offset;
  send.assign(p, std::vector<uint64_t>(p, 0));
  // agg[r][c]: offset and length of r's aggregate for column c (rows other than r's).
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> agg(p,
                                                              std::vector<std::pair<uint64_t, uint64_t>>(C));
  uint64_t s_max = 0;
  for (int r = 0; r < p; ++r) {
    const int i = r / C;
    uint64_t off = 0;
    for (int c = 0; c < C; ++c) {
      agg[r][c].first = off;
      for (int ii = 0; ii < R; ++ii)
        if (ii != i) send[r][at(ii, c)] = off, off += b[r][at(ii, c)];
      agg[r][c].second = off - agg[r][c].first;
      send[r][at(i, c)] = off, off += b[r][at(i, c)];
    }
    s_max = std::max(s_max, off);
  }
  // stage[q][j]: where the aggregate from row-mate column j starts in q's staging area.
  std::vector<std::vector<uint64_t>> stage(p, std::vector<uint64_t>(C, 0));
  uint64_t i_max = 0;
  for (int q = 0; q < p; ++q) {
    const int i = q / C, c = q % C;
    uint64_t off = s_max;
    for (int j = 0; j < C; ++j)
      if (j != c) stage[q][j] = off, off += agg[at(i, j)][c].second;
    i_max = std::max(i_max, off - s_max);
  }
  layout->buffer_bytes = s_max + i_max + PackByRecvOrder(b, s_max + i_max, &layout->recv_offset);
  const std::vector<std::vector<uint64_t>>& recv = layout->recv_offset;

  Schedule s;
  s.algorithm = "hierarchical";
  if (R == 1 || C == 1)
    s.note = "hierarchical grid " + std::to_string(R) + "x" + std::to_string(C) +
             ": one step, direct's blocks from each rank in grid order";
  const size_t row_step = 0, col_step = C > 1 ? 1 : 0;
  for (int r = 0; r < p; ++r) {
    const int i = r / C, j = r % C;
    for (int c = 0; c < C; ++c) {
      if (c == j) continue;
      const int q = at(i, c);
      AddBlock(&s.steps, row_step, r, q, agg[r][c].first, agg[r][c].second, stage[q][j]);
      AddBlock(&s.steps, row_step, r, q, send[r][q], b[r][q], recv[r][q]);
    }
  }
  for (int q = 0; q < p; ++q) {
    const int i = q / C, c = q % C;
    for (int ii = 0; ii < R; ++ii) {
      if (ii == i) continue;
      const int t = at(ii, c);
      AddBlock(&s.steps, col_step, q, t, send[q][t], b[q][t], recv[q][t]);
      for (int j = 0; j < C; ++j) {
        if (j == c) continue;
        const int src = at(i, j);
        // src's block for t inside its aggregate for column c, now at q.
        const uint64_t off = stage[q][j] + (send[src][t] - agg[src][c].first);
        AddBlock(&s.steps, col_step, q, t, off, b[src][t], recv[src][t]);
      }
    }
  }
  return s;
}

const AllToAllVRegistrar kRegistered(
    "hierarchical", "rows then columns of a rank grid, each row hop aggregating the blocks for a column",
    &LowerHierarchicalV);

}  // namespace
}  // namespace tpsim::mapping::collective
