#pragma once
// Long generations (issue 18): a run's decode steps timed from one lowered step, exactly.
//
// mapping::Lower unrolls every decode step into the Program, so a run's memory and time grow
// with workload.decode_steps. Decode steps differ from one another only by their context:
// the attention tasks' shapes (scores [s, hd] . [hd, ctx], softmax over ctx, PV [s, ctx] .
// [ctx, hd], mapping::AttentionSpanShapes) and hence their durations. RunWithStepReuse lowers
//
//   head  = the prefill and decode steps 1..kHeadSteps, as Lower would (the same prefix);
//   step  = decode step kHeadSteps + 1 alone (LowerOptions::skip_prefill): its tasks with no
//           deps on the step before;
//   last  = decode step decode_steps alone,
//
// times the head with the analytical engine, and times every later step s by the engine's
// schedule (sim::Dispatcher, sim/schedule.h) of `step` with its attention tasks' durations at
// step s's context (mapping::KernelTime of AttentionSpanShapes at that context), shifted to
// start where step s - 1 ended. The Result is composed from those schedules with
// BuildResult's definitions (sim/result.h): per-op rows, layers, summary, critical path,
// links, channels, cores, energy (sim/step_energy.h) and (with RunOptions::keep_task_times)
// tasks, byte for byte what the unrolled Program gives (tests/sim/step_reuse_test.cc
// compares both ways).
//
// Why the shift is exact: the analytical schedule of the unrolled Program splits at each
// step boundary when
//   (gate)    every task of step s + 1 without a dep inside its step depends on every sink of
//             step s (a task of step s that no task of step s depends on): no task of step
//             s + 1 is ready before every task of step s has ended, at B_s;
// and then at B_s every core and channel is free, and every link too: a flow's reservations
// (links.h) end by its own end, and a flow's queueing depends only on the flows reserved
// before it, in integer ticks. So step s + 1 runs as it does alone from time 0, shifted by
// B_s, its flows queueing on links as they do there (the step's template replays the
// engine's schedule with the same queues). The critical path (sim::CriticalPath) crosses a boundary from an
// entry task of step s + 1 to the last-finishing task of step s when that task is unique
// and every task of step s + 1 ends after B_s; then its split is the head's plus each
// step's own.
//
// Where the gate does not hold (steps overlap) RunPeriodic times the steps as a periodic
// schedule (sim/step_period.h), and where that fails, or where the KV cache is read from DRAM
// (StepTemplate::context_memory), RunRolling times them one after the other
// (sim/step_rolling.h); RunOptions::step_by_step sends every run there.
//
// Self-checks (any failure: nullopt with the reason; the caller lowers the whole Program):
//   - the engine lists its schedule (Engine::ListSchedule: the analytical engine);
//   - head, step and last have the same tasks (kind, core, op names and partitions, deps
//     inside the step, transfer and memory payloads, collective steps) but for attention
//     tasks, whose shapes are AttentionSpanShapes at each one's context (steps kHeadSteps - 1
//     and kHeadSteps of the head, step, last); ops' flops and bytes follow from the shapes;
//   - (gate) on the head's last step against the one before;
//   - the head's and every step's last-finishing task is unique, and every step's tasks end
//     after its start;
//   - no time passes the 2^63 ps clock.
// The memory plan of a step may depend on its context (attention's scratch grows with it);
// `last` being the same Program as `step` at the largest context shows that it does not
// over the run (the plan is monotone in the context, as sim/serving/skeleton.h argues).

#include <cstdint>
#include <optional>
#include <string>

#include "sim/run.h"
#include "sim/sampled_run.h"

namespace tpsim::sim {

class Engine;

// Decode steps lowered with the prefill before the others are timed from one step.
inline constexpr uint32_t kHeadSteps = 3;
// Up to this many decode steps (RunOptions::row_steps) the Result has one op row per op and
// step; past it, one row per op sums the steps from kFirstSummedStep on
// (config::OpResult::steps), so that the Result's size does not grow with the steps.
inline constexpr uint32_t kRowSteps = 256;
// Past RunOptions::row_steps, the decode steps from this one on are summed into one row per op;
// the steps before keep a row each, whichever way the run is timed (the head that the periodic
// and the step-by-step ways lower ends at step kPeriodHead + 2, sim/step_period.h; the unrolled
// Program's rows are summed alike, sim::RowSums).
inline constexpr uint32_t kFirstSummedStep = 9;

// Runs `e` (already validated, `chip` built from it) on `engine` with decode-step reuse.
// nullopt when a self-check fails or reuse does not apply; *why then says which.
// RunOutput::program is the head (prefill and kHeadSteps decode steps). `view` (may be null):
// the run at RunOptions::observe_steps (SampleSteps), when those are given.
std::optional<RunOutput> RunWithStepReuse(const Experiment& e, const arch::Chip& chip, Engine& engine,
                                          const RunOptions& opts, std::string* why,
                                          SampledRun* view = nullptr);

}  // namespace tpsim::sim
