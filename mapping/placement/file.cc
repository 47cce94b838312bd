// file: the core ids given in the request (req.file_cores, already read from the
// mapping file), checked: one per rank, distinct, each inside the region.

#include <set>
#include <stdexcept>
#include <string>

#include "mapping/placement/placer.h"

namespace tpsim::mapping::placement {

namespace {

std::vector<int> PlaceFile(const PlacementRequest& req, const Region& region, const arch::Chip& chip) {
  if (static_cast<int>(req.file_cores.size()) != req.ranks) {
    throw std::invalid_argument("placement file: " + std::to_string(req.file_cores.size()) +
                                " core ids for " + std::to_string(req.ranks) + " ranks (need one per rank)");
  }
  std::set<int> inside;
  std::string cells;  // the region's core ids, for the message
  for (const Cell& c : RowMajor(region)) {
    const int core = chip.CoreAt(region.row0 + c.row, region.col0 + c.col);
    inside.insert(core);
    if (inside.size() <= 16) cells += (cells.empty() ? "" : ", ") + std::to_string(core);
  }
  if (inside.size() > 16) cells += ", ...";
  std::set<int> seen;
  for (size_t r = 0; r < req.file_cores.size(); ++r) {
    const int core = req.file_cores[r];
    const std::string rank = "core " + std::to_string(core) + " (rank " + std::to_string(r) + ")";
    if (!inside.count(core)) {
      throw PlacementFileError(static_cast<int>(r), rank + " is not in the " + std::to_string(region.rows) +
                                                        "x" + std::to_string(region.cols) + " region at (" +
                                                        std::to_string(region.row0) + ", " +
                                                        std::to_string(region.col0) + "): cores " + cells);
    }
    if (!seen.insert(core).second)
      throw PlacementFileError(static_cast<int>(r), rank + " is already used by an earlier rank");
  }
  return req.file_cores;
}

const PlacementRegistrar kRegistered("file", "one core id per rank, read from mapping.placement_file",
                                     &PlaceFile);

}  // namespace
}  // namespace tpsim::mapping::placement
