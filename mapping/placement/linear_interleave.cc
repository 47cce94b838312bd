// linear_interleave: take the first `ranks` cores of the region in row-major order
// and split them into halves A (the first ceil(ranks/2)) and B (the rest); rank 2i
// goes on A[i], rank 2i+1 on B[i]. Consecutive ranks land half the group apart
// (the interleaved placement of WaferAI-SIM), which stresses ring collectives.
//   4x4, 16 ranks:  row-major cores 0..15 -> ranks on cores 0 8 1 9 2 10 3 11 4 12 ...

#include "mapping/placement/placer.h"

namespace tpsim::mapping::placement {

namespace {

std::vector<int> PlaceLinearInterleave(const PlacementRequest& req, const Region& region,
                                       const arch::Chip& chip) {
  const std::vector<int> linear = ToCores(RowMajor(region), req.ranks, region, chip);
  const int half = (req.ranks + 1) / 2;
  std::vector<int> cores(req.ranks);
  for (int r = 0; r < req.ranks; ++r) cores[r] = linear[r % 2 == 0 ? r / 2 : half + r / 2];
  return cores;
}

const PlacementRegistrar kRegistered(
    "linear_interleave", "row-major cores in two halves, consecutive ranks alternating between them",
    &PlaceLinearInterleave);

}  // namespace
}  // namespace tpsim::mapping::placement
