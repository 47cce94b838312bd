#pragma once
// Internal to mapping/placement: the placement registry and shared helpers.

#include <string>
#include <vector>

#include "mapping/placement/placement.h"

namespace tpsim::mapping::placement {

struct Cell {
  int row = 0, col = 0;  // relative to the region's corner
};

// Returns one core id per rank. The request is already checked: 1 <= ranks <=
// region cells, region inside the grid (0 x 0 already replaced by the whole grid).
using PlaceFn = std::vector<int> (*)(const PlacementRequest& req, const Region& region,
                                     const arch::Chip& chip);

struct Placer {
  const char* name;
  PlaceFn place;
};

std::vector<int> PlaceLinear(const PlacementRequest&, const Region&, const arch::Chip&);
std::vector<int> PlaceLinearInterleave(const PlacementRequest&, const Region&, const arch::Chip&);
std::vector<int> PlaceSnake(const PlacementRequest&, const Region&, const arch::Chip&);
std::vector<int> PlaceRing(const PlacementRequest&, const Region&, const arch::Chip&);
std::vector<int> PlaceBlock(const PlacementRequest&, const Region&, const arch::Chip&);
std::vector<int> PlaceRandom(const PlacementRequest&, const Region&, const arch::Chip&);
std::vector<int> PlaceFile(const PlacementRequest&, const Region&, const arch::Chip&);

// The first `n` cells of `order` as core ids.
std::vector<int> ToCores(const std::vector<Cell>& order, int n, const Region& region, const arch::Chip& chip);
// All cells of the region, row-major.
std::vector<Cell> RowMajor(const Region& region);
// Boustrophedon: even rows left to right, odd rows right to left.
std::vector<Cell> Snake(const Region& region);

}  // namespace tpsim::mapping::placement
