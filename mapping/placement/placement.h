#pragma once
// Placements map the ranks of a TP group onto physical cores of a region of the
// chip. Registry names: linear (row-major), linear_interleave, snake, ring
// (a Hamiltonian cycle of the region so consecutive ranks - and the last and
// first - are neighbours), block, random (seeded), file.

#include <cstdint>
#include <string>
#include <vector>

#include "arch/chip.h"

namespace tpsim::mapping {

// A rectangular region of the core grid (rows x cols starting at row0, col0),
// or, on grid-less chips, cores [first, first + count).
struct Region {
  int row0 = 0, col0 = 0, rows = 0, cols = 0;
};

struct PlacementRequest {
  std::string name;
  int ranks = 0;
  Region region;
  uint64_t seed = 0;
  std::vector<int> file_cores;  // placement = file: one core id per rank (already read)
};

// Returns core id per rank (distinct cores inside the region). Throws
// std::invalid_argument with a plain message for an unknown name (listing the
// valid ones) or a request that cannot be met.
std::vector<int> Place(const PlacementRequest& req, const arch::Chip& chip);

// Splits the chip's grid into `stages` regions of `tp` cores each, in stage order
// (contiguous bands of rows where possible, snaking so consecutive stages are adjacent).
std::vector<Region> StageRegions(const arch::Chip& chip, int stages, int tp);

std::vector<std::string> PlacementNames();

}  // namespace tpsim::mapping
