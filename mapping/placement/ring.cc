// ring: a Hamiltonian cycle of the region, so rank i and i+1 - and the last and
// the first - are grid neighbours. One exists when the region has at least 2 rows
// and 2 columns and an even number of rows or of columns:
//   rows even: down column 0, then snake the other columns row by row back up.
//   rows odd, cols even: the same, transposed (along row 0, then snake columns).
//     4x4:  0 15 14 13       3x4:  0  1  2  3
//           1 10 11 12            11  8  7  4
//           2  9  8  7            10  9  6  5
//           3  4  5  6
// Otherwise (1xN, Nx1, odd x odd) no cycle exists and the ranks take the snake, an
// open path; on ring and torus chips a 1xN row is already a cycle through the
// wrap-around link. With fewer ranks than cells, the cycle is built on the first
// ranks/cols rows (or ranks/rows columns) when that sub-region has one; otherwise the
// ranks take the first cells of the region's cycle (an open path).

#include "mapping/placement/placer.h"

namespace tpsim::mapping::placement {

namespace {

bool HasCycle(int rows, int cols) { return rows >= 2 && cols >= 2 && (rows % 2 == 0 || cols % 2 == 0); }

std::vector<Cell> Cycle(int rows, int cols) {
  std::vector<Cell> cells;
  if (rows % 2 == 0) {
    for (int i = 0; i < rows; ++i) cells.push_back({i, 0});
    for (int k = 0; k < rows; ++k)
      for (int j = 1; j < cols; ++j) cells.push_back({rows - 1 - k, k % 2 == 0 ? j : cols - j});
  } else {
    for (int j = 0; j < cols; ++j) cells.push_back({0, j});
    for (int k = 0; k < cols; ++k)
      for (int i = 1; i < rows; ++i) cells.push_back({k % 2 == 0 ? i : rows - i, cols - 1 - k});
  }
  return cells;
}

std::vector<int> PlaceRing(const PlacementRequest& req, const Region& region, const arch::Chip& chip) {
  const int n = req.ranks, rows = region.rows, cols = region.cols;
  if (n < rows * cols) {
    if (n % cols == 0 && HasCycle(n / cols, cols)) return ToCores(Cycle(n / cols, cols), n, region, chip);
    if (n % rows == 0 && HasCycle(rows, n / rows)) return ToCores(Cycle(rows, n / rows), n, region, chip);
  }
  if (!HasCycle(rows, cols)) return ToCores(Snake(region), n, region, chip);
  return ToCores(Cycle(rows, cols), n, region, chip);
}

const PlacementRegistrar kRegistered("ring", "a Hamiltonian cycle of the region (snake when none exists)",
                                     &PlaceRing);

}  // namespace
}  // namespace tpsim::mapping::placement
