#pragma once
// Lowering a workload to a Program: layers split into pipeline stages, each stage a TP
// group placed on its own region of cores; every op partitioned (mapping/partition/),
// layouts converted by collectives (mapping/collective/), ranks placed on cores
// (mapping/placement/).

#include <string>
#include <vector>

#include "arch/chip.h"
#include "configs/load.h"
#include "mapping.pb.h"
#include "mapping/program.h"
#include "model.pb.h"
#include "workload.pb.h"

namespace tpsim::mapping {

// Lowers the workload (prefill of all simulated layers, then each decode step) to a
// Program. Memory: weights stay in SRAM when every core's shards of its stage fit
// (mapping.weights "auto"; "sram" pins them, "dram" streams them), the KV cache when it fits
// beside them; each compute task's activations, partial sums and streamed or rotating
// weight shards beyond the remaining SRAM are spilled (write + read-back memory tasks). Throws config::ConfigError when ValidateMapping finds problems, and
// std::invalid_argument for layers it cannot map (MoE).
Program Lower(const arch::Chip& chip, const config::Model& model, const config::Workload& wl,
              const config::Mapping& m);

// Stage-two checks of the mapping against chip, model and workload. Diags name fields
// under "mapping.".
void ValidateMapping(const config::Mapping& m, const arch::Chip& chip, const config::Model& model,
                     const config::Workload& wl, const config::SourceMap& locs,
                     std::vector<config::Diag>* diags);

// Registered partitioner names, sorted.
std::vector<std::string> PartitionerNames();

}  // namespace tpsim::mapping
