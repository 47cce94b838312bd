#pragma once
// Decode steps timed one after the other from the steps before them, without lowering them
// (issue 18): where the periodic schedule fails (sim/step_period.h: from some context on
// attention decides when a stage's step ends, so no step is the one before it shifted) and
// where a step's KV reads from DRAM grow with its context (StepTemplate::context_memory; where
// the DRAM is reached over links, each step's reads are flows with its own bytes, holds and
// inject: StepShape::step_flows, LinkReservation::FinishRoute).
//
// Every decode step is the template's tasks (StepTemplate) with attention and KV reads at
// its own context, and depends on the same tasks of the same L steps before it. RunRolling
// takes the prefill and decode steps 1 .. kPeriodHead + 2 (B: sim/step_period.h
// LowerStepHead, lowered once for both ways), whose decode steps from 2 on are the template
// at their contexts and whose steps 3 on have the same deps on the steps before them
// (L <= kPeriodHead - 1), and runs the analytical engine's schedule (sim/step_stream.h:
// sim::Dispatcher::Run's events, choices and link reservations, links.h) over B followed by
// decode steps kPeriodHead + 3 .. N, each made from the template when one of its deps ends
// and dropped once it is composed and the L steps after it have started every task: a few
// steps are held at once, whatever N. The times are the engine's on the unrolled Program by
// construction (the same event loop over the same tasks), so nothing is checked against them;
// what is checked is what the construction needs:
//   - every task of the template waits on something (a task that waits on nothing would be
//     ready at time 0 in the unrolled Program);
//   - no more steps are in flight at once than the ring of steps holds (where a second thread
//     composes the steps, L + 4 rounded up to a power of two; else nullopt: the caller lowers
//     every step; on one thread the ring grows);
//   - two tasks of one core or channel do not start at the same time out of id order (the
//     critical path orders a queue by start, then id; the stream by the order it starts them);
//   - nothing passes the 2^63 ps clock.
// The Result is composed as RunPeriodic's (op rows, layers, cores' compute and busy union,
// DRAM channels' waits and bytes, energy with each step's KV reads: sim/step_energy.h), with
// the links' waits from the reservations, the critical path carried forward (each task's split
// is its enabler's, the latest-ending dep or its queue's previous task, plus its own part:
// CriticalPath's rule, at its start), and the contention indicator from a second schedule
// without queues on links when some flow waited (on a second core where there is one,
// sim::UseSpareThread). Byte for byte the unrolled Program's Result
// (tests/sim/step_reuse_test.cc, RunOptions::step_by_step forces this path).
//
// Cost: the engine's event loop over every task of every step (no Program, no per-task
// record beyond the steps in flight), and what composing any reused step costs (op rows,
// energy, busy union): about 0.2 ms per step of the reference experiment (3,580 tasks). With
// a spare core (sim::UseSpareThread) each step is composed on a thread of its own, a step
// behind the schedule, which waits for a step's composition before it reuses that step's
// room: three threads (schedule, composition, the schedule without queues on links).

#include <optional>
#include <string>

#include "sim/run.h"
#include "sim/sampled_run.h"
#include "sim/step_period.h"
#include "sim/step_template.h"

namespace tpsim::sim {

class Engine;

// `tpl`: the template (Classify done); `step_out`: the engine's times of the template alone
// (its links' and channels' bytes and busy time are one step's). nullopt with *why when a
// check fails.
// `head`: LowerStepHead's (sim/step_period.h; its Program moves into the RunOutput on success).
// `plan` (may be null): a memory plan that changes at plan->from (sim/step_reuse.cc): `tpl` is
// the template from there on, `step_out` its times alone, `head` lowered with plan->before.
std::optional<RunOutput> RunRolling(const Experiment& e, const arch::Chip& chip, Engine& engine,
                                    const RunOptions& opts, const StepTemplate& tpl,
                                    const EngineOutput& step_out, StepHead& head, std::string* why,
                                    SampledRun* view, const PlanSwitch* plan = nullptr);

}  // namespace tpsim::sim
