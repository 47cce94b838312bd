#pragma once
// The random family behind `tpsim agree` (agree.h describes it), for agree.cc: a drawn
// experiment with its resolved config, chip and lowered Program.

#include <cstdint>
#include <string>
#include <vector>

#include "arch/chip.h"
#include "mapping/program.h"
#include "sim/agree/agree.h"
#include "sim/experiment.h"

namespace tpsim::sim::agree {

struct Case {
  Drawn drawn;
  Experiment e;
  arch::Chip chip;
  mapping::Program program;
};

// The catalog models a family draws from, by name: the catalog as it was when the families
// were first drawn, named so that a model added to the catalog does not change what a seed
// draws (the README's `tpsim agree --seed S --only I` commands keep reproducing their cases).
const std::vector<std::string>& FamilyModels(Family family);

// Experiment `index` of `seed`: the first attempt that validates, lowers and stays
// within kMaxPacketHops. Throws std::runtime_error after 1000 attempts.
Case Draw(uint64_t seed, uint32_t index, Family family = Family::kDense);

}  // namespace tpsim::sim::agree
