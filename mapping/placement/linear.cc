// linear: rank i on the i-th core of the region in row-major order.

#include "mapping/placement/placer.h"

namespace tpsim::mapping::placement {

namespace {

std::vector<int> PlaceLinear(const PlacementRequest& req, const Region& region, const arch::Chip& chip) {
  return ToCores(RowMajor(region), req.ranks, region, chip);
}

const PlacementRegistrar kRegistered("linear", "rank i on the i-th core of the region, row-major",
                                     &PlaceLinear);

}  // namespace
}  // namespace tpsim::mapping::placement
