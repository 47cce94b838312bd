#pragma once
// A run seen at a few decode steps (tpsim run --trace-steps): the Program of the prefill and
// those steps (mapping::LowerOptions::decode_steps_only), each task timed as the same task of
// the whole run. Observers (the trace writer) read it like a whole run; a long generation's
// trace stays small, and with decode-step reuse (sim/step_reuse.h) no whole Program exists.

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/engine.h"
#include "sim/experiment.h"

namespace tpsim::sim {

struct SampledRun {
  mapping::Program program;
  EngineOutput timing;  // tasks: the sampled Program's; links, channels, makespan: the whole run's
};

// `times_of(s)`: the whole run's times of segment s's tasks (0: the prefill, k: decode step k),
// in task order. `whole` gives the links, channels, makespan and contention. Throws
// std::logic_error when a segment's times do not fit the sampled Program's tasks.
SampledRun SampleSteps(const Experiment& e, const arch::Chip& chip, const std::vector<uint32_t>& steps,
                       const std::function<std::vector<TaskTime>(uint32_t)>& times_of,
                       const EngineOutput& whole);

// The segment of each task of `p` (0: the prefill, k: decode step k) must not decrease in id
// order; begin[s] .. begin[s + 1] are then segment s's tasks, s = 0 .. max; empty when `p`
// has other phases or its segments are not in order.
std::vector<size_t> SegmentBegins(const mapping::Program& p);

}  // namespace tpsim::sim
