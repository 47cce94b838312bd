// Place(): the checks every placement shares, then the registered placement by name.

#include <stdexcept>

#include "mapping/placement/placer.h"

namespace tpsim::mapping {
namespace {

std::string RegionText(const Region& r) {
  return std::to_string(r.rows) + "x" + std::to_string(r.cols) + " region at (" + std::to_string(r.row0) +
         ", " + std::to_string(r.col0) + ")";
}

}  // namespace

std::vector<std::string> PlacementNames() { return placement::PlacementRegistry::Get().Names(); }

std::vector<int> Place(const PlacementRequest& req, const arch::Chip& chip) {
  const placement::PlaceFn* place = placement::PlacementRegistry::Get().Find(req.name);
  if (place == nullptr) {
    throw std::invalid_argument("unknown placement '" + req.name +
                                "' (valid: " + placement::PlacementRegistry::Get().NamesText() + ")");
  }
  Region region = req.region;
  if (region.rows == 0 && region.cols == 0) region = {0, 0, chip.grid_rows(), chip.grid_cols()};
  if (region.rows < 1 || region.cols < 1 || region.row0 < 0 || region.col0 < 0 ||
      region.row0 + region.rows > chip.grid_rows() || region.col0 + region.cols > chip.grid_cols()) {
    throw std::invalid_argument("placement " + req.name + ": " + RegionText(region) + " is not inside the " +
                                std::to_string(chip.grid_rows()) + "x" + std::to_string(chip.grid_cols()) +
                                " core grid");
  }
  for (int i = 0; i < region.rows; ++i) {
    for (int j = 0; j < region.cols; ++j) {
      if (chip.CoreAt(region.row0 + i, region.col0 + j) < 0) {
        throw std::invalid_argument("placement " + req.name + ": " + RegionText(region) +
                                    " has no core at grid position (" + std::to_string(region.row0 + i) +
                                    ", " + std::to_string(region.col0 + j) + ")");
      }
    }
  }
  if (req.ranks < 1 || req.ranks > region.rows * region.cols) {
    throw std::invalid_argument("placement " + req.name + ": " + std::to_string(req.ranks) +
                                " ranks do not fit the " + RegionText(region) + " (1 to " +
                                std::to_string(region.rows * region.cols) + " ranks)");
  }
  return (*place)(req, region, chip);
}

namespace placement {

std::vector<int> ToCores(const std::vector<Cell>& order, int n, const Region& region,
                         const arch::Chip& chip) {
  std::vector<int> cores;
  for (int i = 0; i < n && i < static_cast<int>(order.size()); ++i) {
    cores.push_back(chip.CoreAt(region.row0 + order[i].row, region.col0 + order[i].col));
  }
  return cores;
}

std::vector<Cell> RowMajor(const Region& region) {
  std::vector<Cell> cells;
  for (int i = 0; i < region.rows; ++i)
    for (int j = 0; j < region.cols; ++j) cells.push_back({i, j});
  return cells;
}

std::vector<Cell> Snake(const Region& region) {
  std::vector<Cell> cells;
  for (int i = 0; i < region.rows; ++i)
    for (int j = 0; j < region.cols; ++j) cells.push_back({i, i % 2 == 0 ? j : region.cols - 1 - j});
  return cells;
}

}  // namespace placement
}  // namespace tpsim::mapping
