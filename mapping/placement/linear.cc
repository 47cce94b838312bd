// linear: rank i on the i-th core of the region in row-major order.

#include "mapping/placement/placer.h"

namespace tpsim::mapping::placement {

std::vector<int> PlaceLinear(const PlacementRequest& req, const Region& region, const arch::Chip& chip) {
  return ToCores(RowMajor(region), req.ranks, region, chip);
}

}  // namespace tpsim::mapping::placement
