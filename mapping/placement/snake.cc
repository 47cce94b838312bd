// snake: boustrophedon rows of the region (row 0 left to right, row 1 right to
// left, ...), so consecutive ranks are always grid neighbours.

#include "mapping/placement/placer.h"

namespace tpsim::mapping::placement {

namespace {

std::vector<int> PlaceSnake(const PlacementRequest& req, const Region& region, const arch::Chip& chip) {
  return ToCores(Snake(region), req.ranks, region, chip);
}

const PlacementRegistrar kRegistered("snake", "boustrophedon rows, so consecutive ranks are grid neighbours",
                                     &PlaceSnake);

}  // namespace
}  // namespace tpsim::mapping::placement
