#pragma once
// Pipeline and placement: layers split into contiguous pipeline stages, each stage a TP
// group placed on its own region of cores (StageRegions, then the placement by name), and
// the activation sent from one stage's cores to the next's.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "arch/chip.h"
#include "mapping.pb.h"
#include "mapping/lower_context.h"
#include "mapping/placement/placement.h"

namespace tpsim::mapping {

// The stage layer l of `layers` runs in: floor(l * stages / layers).
int LayerStage(uint32_t l, int stages, uint32_t layers);
// The most layers any stage holds.
int MostLayersPerStage(int stages, uint32_t layers);
// The first layer LayerStage puts in `stage` (`layers` for stage == stages): stage s holds
// layers StageFirstLayer(s) .. StageFirstLayer(s + 1) - 1, so per-stage sums need no loop over
// layers (2^31 of them took minutes).
uint32_t StageFirstLayer(int stage, int stages, uint32_t layers);

// mapping.placement_file, read once per lowering (placement = file only).
struct PlacementFile {
  bool readable = false;     // the file opened
  bool well_formed = false;  // whitespace-separated integers to the end
  std::vector<int> cores;    // the ids read (up to the first bad token)
  // Each id's line and column in the file (its Location: At(k)); kept as two ints an id, not a
  // Location holding the path: a 63 MB file of ids took 3 GB.
  std::vector<std::pair<int, int>> line_col;
  config::Location At(size_t k) const { return {path, line_col[k].first, line_col[k].second}; }
  std::string path;
  config::Location bad;  // the first token that is no core id (not well formed)
  std::string bad_token;
  bool bad_range = false;  // that token is an integer past int's range (no core of any chip)
};
PlacementFile ReadPlacementFile(const config::Mapping& m);

// Every stage's cores by rank and its region's grid (rows x cols when the region has
// exactly tp cells, else 0 x 0). Throws std::invalid_argument when a placement cannot be met.
struct StagePlacement {
  std::vector<std::vector<int>> cores;
  std::vector<RankGrid> grids;
};
StagePlacement PlaceStages(const arch::Chip& chip, const config::Mapping& m, int stages, int tp,
                           const PlacementFile& file);

class LayoutConverter;

// Moves x from the current stage's ranks to cores `to` (rank r -> rank r): split rows when
// every rank has some, else the whole tensor from each rank. Returns the moved tensor.
int32_t StageSend(LowerContext& cx, LayoutConverter& conv, int32_t x, const std::vector<int>& to);

}  // namespace tpsim::mapping
