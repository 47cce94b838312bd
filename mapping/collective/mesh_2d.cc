// mesh_2d: ranks form an R x C grid, rank = row * C + col (RankGrid; 0 x 0 picks the
// most square R <= C). Row passes run in every row at once, column passes in every
// column at once; each pass is a ring over the row or column.
//
//   all_reduce (buffer cut into C column chunks, chunk j cut again into R pieces):
//
//        col 0   col 1   col 2          1. reduce-scatter along rows: (i,j) holds the
//      +-------+-------+-------+           row sum of chunk j          (C-1 steps)
//   r0 | c0    | c1    | c2    |  ->    2. all-reduce chunk j along column j (ring
//   r1 | c0    | c1    | c2    |           reduce-scatter + all-gather of its R
//      +-------+-------+-------+           pieces): (i,j) holds the total of chunk j
//        ^ |     ^ |     ^ |                                           (2(R-1) steps)
//        | v     | v     | v            3. all-gather along rows: everyone has all
//                                                                       (C-1 steps)
//   reduce_scatter: rows reduce-scatter with (i,j)'s share = chunks {k*C + j : k}
//     of P, then columns reduce-scatter with (i,j)'s share = chunk i*C + j.
//     (C-1) + (R-1) steps; rank r ends with chunk r.
//   all_gather: the reverse: columns, then rows. (R-1) + (C-1) steps.
//   all_to_all and rotate: ring, with a note.

#include <stdexcept>

#include "mapping/collective/algorithm.h"

namespace tpsim::mapping::collective {

namespace {

RankGrid ChooseGrid(const Args& a) {
  RankGrid g = a.grid;
  if (g.rows == 0 && g.cols == 0) {
    for (int r = 1; static_cast<int64_t>(r) * r <= a.ranks; ++r) {
      if (a.ranks % r == 0) g = {r, a.ranks / r};
    }
    return g;
  }
  if (g.rows < 1 || g.cols < 1 || static_cast<int64_t>(g.rows) * g.cols != a.ranks) {
    throw std::invalid_argument("mesh_2d grid " + std::to_string(g.rows) + "x" + std::to_string(g.cols) +
                                " does not have " + std::to_string(a.ranks) +
                                " ranks (rows * cols must equal ranks, or 0x0 to choose)");
  }
  return g;
}

Schedule LowerMesh2d(const Args& a) {
  if (a.kind == CollectiveKind::kAllToAll || a.kind == CollectiveKind::kRotate) {
    return RingFallback(a, std::string("mesh_2d has no ") + ToString(a.kind) + ": used ring");
  }
  const RankGrid g = ChooseGrid(a);
  const int R = g.rows, C = g.cols, P = a.ranks;
  Schedule s;
  s.algorithm = "mesh_2d";
  if (R == 1) s.note = "mesh_2d grid 1x" + std::to_string(C) + " is a single row: same transfers as ring";
  std::vector<std::vector<int>> rows(R), cols(C);
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < C; ++j) {
      rows[i].push_back(i * C + j);
      cols[j].push_back(i * C + j);
    }
  }
  // Shares for reduce_scatter / all_gather: row share j = chunks {k*C + j}, column share i = chunk i*C + j.
  std::vector<Segment> row_share(C);
  for (int j = 0; j < C; ++j) {
    for (int k = 0; k < R; ++k) row_share[j].push_back(Chunk(a.bytes, P, k * C + j, a.align));
  }
  auto col_share = [&](int j) {
    std::vector<Segment> seg(R);
    for (int i = 0; i < R; ++i) seg[i] = {Chunk(a.bytes, P, i * C + j, a.align)};
    return seg;
  };

  switch (a.kind) {
    case CollectiveKind::kAllReduce: {
      std::vector<Segment> row_seg(C);
      for (int j = 0; j < C; ++j) row_seg[j] = {Chunk(a.bytes, C, j, a.align)};
      size_t t = 0;
      for (int i = 0; i < R; ++i) t = RingReduceScatter(rows[i], row_seg, 0, &s.steps);
      size_t u = t;
      for (int j = 0; j < C; ++j) {
        std::vector<Segment> seg(R);
        for (int i = 0; i < R; ++i) seg[i] = {SubChunk(row_seg[j][0], R, i, a.align)};
        const size_t n = RingReduceScatter(cols[j], seg, t, &s.steps);
        u = t + n + RingAllGather(cols[j], seg, t + n, &s.steps);
      }
      for (int i = 0; i < R; ++i) RingAllGather(rows[i], row_seg, u, &s.steps);
      break;
    }
    case CollectiveKind::kReduceScatter: {
      size_t t = 0;
      for (int i = 0; i < R; ++i) t = RingReduceScatter(rows[i], row_share, 0, &s.steps);
      for (int j = 0; j < C; ++j) RingReduceScatter(cols[j], col_share(j), t, &s.steps);
      break;
    }
    case CollectiveKind::kAllGather: {
      size_t t = 0;
      for (int j = 0; j < C; ++j) t = RingAllGather(cols[j], col_share(j), 0, &s.steps);
      for (int i = 0; i < R; ++i) RingAllGather(rows[i], row_share, t, &s.steps);
      break;
    }
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kRotate:
      break;
    case CollectiveKind::kP2p:  // no algorithm lowers it (LowerCollective refuses)
      break;
  }
  return s;
}

const CollectiveRegistrar kRegistered("mesh_2d",
                                      "ring passes along the rows, then the columns, of an R x C rank grid",
                                      &LowerMesh2d);

}  // namespace
}  // namespace tpsim::mapping::collective
