// block: the region is cut into 2x2 blocks, taken row-major; within a block ranks
// go row-major too. Edge blocks of an odd-sized region are 1x2, 2x1 or 1x1.
//   4x4 region (cells numbered row-major):   ranks:
//     0  1  2  3                                0  1  4  5
//     4  5  6  7                                2  3  6  7
//     8  9 10 11                                8  9 12 13
//    12 13 14 15                               10 11 14 15

#include "mapping/placement/placer.h"

namespace tpsim::mapping::placement {

namespace {

std::vector<int> PlaceBlock(const PlacementRequest& req, const Region& region, const arch::Chip& chip) {
  std::vector<Cell> order;
  for (int bi = 0; bi < region.rows; bi += 2)
    for (int bj = 0; bj < region.cols; bj += 2)
      for (int i = bi; i < bi + 2 && i < region.rows; ++i)
        for (int j = bj; j < bj + 2 && j < region.cols; ++j) order.push_back({i, j});
  return ToCores(order, req.ranks, region, chip);
}

const PlacementRegistrar kRegistered("block", "2x2 blocks taken row-major, row-major inside each block",
                                     &PlaceBlock);

}  // namespace
}  // namespace tpsim::mapping::placement
