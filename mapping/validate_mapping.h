#pragma once
// ValidateMapping (mapping.h) with the placement file already read, so that one lowering
// reads it once (Lower checks the mapping, then places the stages from the same read).

#include <vector>

#include "mapping/mapping.h"
#include "mapping/pipeline.h"

namespace tpsim::mapping {

void ValidateMapping(const config::Mapping& m, const arch::Chip& chip, const config::Model& model,
                     const config::Workload& wl, const config::SourceMap& locs, const PlacementFile& file,
                     std::vector<config::Diag>* diags);

}  // namespace tpsim::mapping
