#pragma once
// Placements map the ranks of a TP group onto physical cores of a region of the
// chip. One file per placement in this folder, registered by name (placer.h):
// linear (row-major), linear_interleave, snake, ring (a Hamiltonian cycle of the
// region so consecutive ranks - and the last and first - are neighbours), block,
// random (seeded), file.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "arch/chip.h"

namespace tpsim::mapping {

// A rectangular region of the core grid (rows x cols starting at row0, col0);
// rings and switches are 1 x N grids. 0 x 0 means the whole grid.
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

// placement = file: a core id of the request's file_cores (index `rank`) that cannot be used
// (outside the region, or already used by an earlier rank).
struct PlacementFileError : std::invalid_argument {
  PlacementFileError(int rank, const std::string& what) : std::invalid_argument(what), rank(rank) {}
  int rank;
};

// Returns core id per rank (distinct cores inside the region; with fewer ranks
// than cells, the first cells of the placement's order). Throws
// std::invalid_argument with a plain message for an unknown name (listing the
// valid ones) or a request that cannot be met.
std::vector<int> Place(const PlacementRequest& req, const arch::Chip& chip);

// StageRegions' refusal: the stage count and tp decide it, not the placement within a region.
struct StageRegionError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Splits the chip's grid into `stages` rectangular regions of exactly `tp` cores,
// in stage order: all the same h x w shape (h * w = tp, the most square shape that
// fits `stages` times; ties go to the wider, i.e. bands of rows), laid out in a
// snake over rows of rectangles so stage s and s+1 share an edge. Throws
// std::invalid_argument when stages * tp exceeds the cores, StageRegionError when no shape fits.
std::vector<Region> StageRegions(const arch::Chip& chip, int stages, int tp);

std::vector<std::string> PlacementNames();  // sorted

}  // namespace tpsim::mapping
