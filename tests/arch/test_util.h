#pragma once
// Loading shipped chip configs in arch tests.

#include <string>

#include "arch/chip.h"
#include "configs/load.h"

namespace tpsim::arch::testing {

inline config::Chip LoadChipConfig(const std::string& name, config::SourceMap* locs = nullptr) {
  config::Chip cfg;
  config::ParseFile(TPSIM_SOURCE_DIR "/configs/chips/" + name + ".textproto", &cfg, locs);
  return cfg;
}

inline Chip LoadChip(const std::string& name) { return Chip::Build(LoadChipConfig(name)); }

}  // namespace tpsim::arch::testing
