#pragma once
// Internal to sim/search: what the search loop (search.cc), the bounds (bounds.cc), the
// space (space.cc) and the command line (command.cc) share. Not a public interface.

#include <string>
#include <vector>

#include "sim/search/search.h"

namespace tpsim::search::detail {

// Layers the workload runs (workload.num_layers, else the model's).
uint32_t Layers(const sim::Experiment& e);

// A request stream (workload.requests): each candidate serves it (`tpsim serve`).
bool Serving(const sim::Experiment& e);
// mapping.serving.mode is disaggregated: a candidate's stages are the prefill group's and
// the decode group's each (2 x tp x stages cores).
bool Disaggregated(const config::Mapping& m);
bool Disaggregated(const sim::Experiment& e);
// A candidate's fields that shape its Program but the collective and the placement: tp,
// attention_dp, the MoE choices, stages, weights, batch and the partitions, space-separated
// (ProgramKey's start; the search keys its bounds by it too).
std::string FieldsKey(const Candidate& c);
// PlacedCores' text split into the cores alone and the rank grids alone (" gRxC" after each
// stage's cores).
struct PlacedParts {
  std::string cores, grids;
};
PlacedParts SplitGrids(const std::string& placed);
// What simulating a candidate costs, for the order of the search: mapping::EstimateProgram's
// bound on its Program's tasks (time and memory of lowering and timing grow with them), at
// least 1.
double EstimatedWork(const sim::Experiment& base, const arch::Chip& chip, const Candidate& c);

// The front's columns for this search: total latency and tokens/s always, TTFT and
// TPOT where the objective or an SLO uses them, energy per token where the chip has an
// energy model (chip.energy).
struct Columns {
  bool ttft = false, tpot = false, energy = false;
};
Columns FrontColumns(const SearchOptions& o, bool energy);

// The index of a metric in sweep::MetricColumns().
size_t MetricIndex(const std::string& name);

// "%.3f".
std::string Ms(double v);
// The placement column: "snake", or "snake@chip:tp_major" for a wafer-wide one.
std::string Placed(const Candidate& c);
// One line naming a candidate.
std::string Describe(const Found& x);

}  // namespace tpsim::search::detail
