// hilbert: the region's cells in the order of a Hilbert curve over the smallest
// power-of-two square that holds the region (cells outside the region skipped), so
// ranks close in number are close on the grid in both directions. On a power-of-two
// square region consecutive ranks are always grid neighbours; on other shapes the
// curve may jump where it leaves the region.

#include <algorithm>
#include <cstdint>
#include <utility>

#include "mapping/placement/placer.h"

namespace tpsim::mapping::placement {

namespace {

// The distance along the Hilbert curve of an n x n square (n a power of two) of cell
// (x, y), by the classic rotate-and-accumulate walk from the largest quadrant down.
uint64_t HilbertIndex(uint64_t n, uint64_t x, uint64_t y) {
  uint64_t d = 0;
  for (uint64_t s = n / 2; s > 0; s /= 2) {
    const uint64_t rx = (x & s) ? 1 : 0;
    const uint64_t ry = (y & s) ? 1 : 0;
    d += s * s * ((3 * rx) ^ ry);
    if (ry == 0) {  // rotate the quadrant so the sub-curve enters and leaves where it should
      if (rx == 1) {
        x = s - 1 - (x & (s - 1));
        y = s - 1 - (y & (s - 1));
      }
      std::swap(x, y);
    }
  }
  return d;
}

std::vector<int> PlaceHilbert(const PlacementRequest& req, const Region& region, const arch::Chip& chip) {
  uint64_t n = 1;
  while (n < static_cast<uint64_t>(std::max(region.rows, region.cols))) n *= 2;
  std::vector<std::pair<uint64_t, Cell>> cells;
  for (const Cell& c : RowMajor(region))
    cells.emplace_back(HilbertIndex(n, static_cast<uint64_t>(c.col), static_cast<uint64_t>(c.row)), c);
  std::sort(cells.begin(), cells.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Cell> order;
  for (const auto& [d, c] : cells) order.push_back(c);
  return ToCores(order, req.ranks, region, chip);
}

const PlacementRegistrar kRegistered("hilbert",
                                     "a Hilbert curve over the region: nearby ranks stay nearby in 2-D",
                                     &PlaceHilbert);

}  // namespace
}  // namespace tpsim::mapping::placement
