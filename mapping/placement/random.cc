// random: a Fisher-Yates shuffle of the region's row-major cores driven by
// std::mt19937_64(seed) (raw engine output modulo the range, so the order is the
// same with every standard library); ranks take the first cores of the shuffle.

#include <random>
#include <utility>

#include "mapping/placement/placer.h"

namespace tpsim::mapping::placement {

namespace {

std::vector<int> PlaceRandom(const PlacementRequest& req, const Region& region, const arch::Chip& chip) {
  std::vector<Cell> cells = RowMajor(region);
  std::mt19937_64 rng(req.seed);
  for (size_t i = cells.size(); i > 1; --i) std::swap(cells[i - 1], cells[rng() % i]);
  return ToCores(cells, req.ranks, region, chip);
}

const PlacementRegistrar kRegistered("random", "a seeded shuffle of the region (mapping.seed)", &PlaceRandom);

}  // namespace
}  // namespace tpsim::mapping::placement
