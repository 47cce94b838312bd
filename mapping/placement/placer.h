#pragma once
// Internal to mapping/placement: the placement registry and shared helpers.

#include <string>
#include <string_view>
#include <vector>

#include "configs/registry.h"
#include "mapping/placement/placement.h"

namespace tpsim::mapping::placement {

struct Cell {
  int row = 0, col = 0;  // relative to the region's corner
};

// Returns one core id per rank. The request is already checked: 1 <= ranks <=
// region cells, region inside the grid (0 x 0 already replaced by the whole grid).
using PlaceFn = std::vector<int> (*)(const PlacementRequest& req, const Region& region,
                                     const arch::Chip& chip);

// The registry of placements by name (mapping.placement). Adding a placement is one new
// file in this folder defining a PlaceFn and its registrar (snake.cc is a small example):
//
//   const PlacementRegistrar kRegistered("diagonal", "one line on the order", &PlaceDiagonal);
struct PlacementKind {
  using Value = PlaceFn;
  static constexpr std::string_view kName = "placement";
};
using PlacementRegistry = Registry<PlacementKind>;
using PlacementRegistrar = Registrar<PlacementKind>;

// The first `n` cells of `order` as core ids.
std::vector<int> ToCores(const std::vector<Cell>& order, int n, const Region& region, const arch::Chip& chip);
// All cells of the region, row-major.
std::vector<Cell> RowMajor(const Region& region);
// Boustrophedon: even rows left to right, odd rows right to left.
std::vector<Cell> Snake(const Region& region);

}  // namespace tpsim::mapping::placement
