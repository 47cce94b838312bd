#pragma once
// Decode steps handed one by one to an engine that is not a list schedule (the TLM engine;
// issue 18): where every decode step is the template's tasks with attention and KV reads at
// its own context, and depends on the same tasks of the same steps before it (the checks of
// sim/step_rolling.h's head: StepTemplate::Classify, LowerStepHead), the engine simulates the
// unrolled Program's tasks without it being lowered (Engine::RunSteps, sim/step_source.h): the
// head B (the prefill and decode steps 1 .. kStreamHeadSteps), then each later step made from
// the template when one of its deps ends, a few steps held at once. Each step is composed
// into the Result as it ends (StepComposer: op rows, layers, cores' compute and busy union,
// energy), with the links' and channels' use as the engine counted them over the run and the
// critical path carried forward by the engine. The same simulation as the unrolled Program's,
// so byte for byte its Result (tests/sim/step_streamed_test.cc); where the engine cannot keep
// to the unrolled run's order (RunSteps says why), nullopt: the caller lowers every step.

#include <cstdint>
#include <optional>
#include <string>

#include "sim/run.h"
#include "sim/sampled_run.h"

namespace tpsim::sim {

class Engine;

// The head's decode steps: the fewest that show the deps on the steps before (steps 3 and 4
// compared); the engine keeps a streamed task's bookkeeping for each of the head's tasks.
inline constexpr uint32_t kStreamHeadSteps = 4;

// nullopt with *why when the steps are not the template's or the engine cannot stream them.
std::optional<RunOutput> RunStreamed(const Experiment& e, const arch::Chip& chip, Engine& engine,
                                     const RunOptions& opts, std::string* why, SampledRun* view);

}  // namespace tpsim::sim
