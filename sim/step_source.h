#pragma once
// A run too long to hold as one Program, handed to an engine that is not a list schedule (the
// TLM engine) step by step (issue 18; sim/step_streamed.h builds it from the step templates):
// the prefill and decode steps 1 .. head_steps lowered (the head), then decode steps
// head_steps + 1 .. steps, each the template's tasks with attention and KV reads at its own
// context and the same deps on the steps before it. The engine times the tasks the unrolled
// Program would have, in the same order (its ids: the head's, then step after step), holding a
// few steps at a time, and hands each step's times out as the step ends.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mapping/program.h"
#include "sim/engine.h"
#include "sim/schedule.h"

namespace tpsim::sim {

// The unrolled Program's id of decode step k's first task (k past the head): `head_tasks` tasks
// of the prefill and decode steps 1 .. head_steps, then the steps before `from` with `short_n`
// tasks each (where a memory plan changes at `from`; from = head_steps + 1: none) and the
// others with `n`.
inline uint64_t UnrolledStepBegin(uint64_t head_tasks, uint32_t head_steps, uint32_t k, uint32_t from,
                                  uint64_t short_n, uint64_t n) {
  from = std::max(from, head_steps + 1);
  const uint64_t shorter = std::min(k, from) - head_steps - 1, full = k > from ? k - from : 0;
  return head_tasks + shorter * short_n + full * n;
}

// Task `id`'s segment by SegmentBegins' `begin` (sim/sampled_run.h; 0: the prefill, s: decode
// step s): the last s with begin[s] <= id.
inline uint32_t SegmentOf(std::span<const size_t> begin, uint64_t id) {
  return static_cast<uint32_t>(std::upper_bound(begin.begin(), begin.end(), id) - begin.begin() - 1);
}

struct StepSource {
  const mapping::Program* head = nullptr;
  std::vector<size_t> head_begin;          // SegmentBegins(*head): segment s is decode step s (0: prefill)
  const mapping::Program* step = nullptr;  // the template
  uint32_t head_steps = 0, steps = 0;
  // Per task of the template: its deps on earlier steps, (steps back, task of that step), and
  // its dependents in later steps, (steps on, task), as CSR lists, each sorted.
  std::vector<uint32_t> ext_begin, ext_dep_begin;
  std::vector<std::pair<uint32_t, uint32_t>> ext, ext_dep;
  // Per task of the template: its duration (a compute task) or bytes (a memory task) are
  // each step's own.
  std::vector<uint8_t> context;
  // Where a memory plan changes at decode step `masked_from` (sim/step_period.h PlanChange):
  // the steps before it lack the template's tasks that `masked` marks, and the head's steps are
  // such steps (the template's other tasks, in order). Empty `masked`: every step has them all.
  uint32_t masked_from = 0;
  std::vector<uint8_t> masked;
  // Decode step k's own durations and bytes of those tasks, written at their index (one entry
  // per task of the template; the others, and those the step lacks, are left as they are).
  std::function<void(uint32_t, std::span<Ps>, std::span<uint64_t>)> at;
  // Called in order on the engine's thread: on_head once the head's tasks have all ended (their
  // times, by id), then on_step(k, times, horizon) once decode step k's tasks and those of the
  // steps before it have (its tasks' times, by task of the template; no task of a later step
  // starts before `horizon`). false with *why stops the run.
  std::function<bool(std::span<const TaskTime>, std::string*)> on_head;
  std::function<bool(uint32_t, std::span<const TaskTime>, Ps, std::string*)> on_step;
};

// A task of a run made from steps (streamed, or step by step: sim/step_rolling.h) that ends
// past the 2^63 ps clock: task `task` of the head (in_head) or of the template; its id in the
// unrolled Program, its decode step (0: the prefill) and when it started. Its times are the
// unrolled Program's, so lowering every step would pass the clock too: the run stops with
// sim::TimeOverflowError (ThrowStepOverflow, sim/run.h), as an unrolled run does
// (CheckRepresentable), instead of falling back to lowering every step.
struct StepOverflow {
  bool in_head = false;
  uint64_t task = 0, id = 0;
  uint32_t step = 0;
  Ps start_ps = 0;
};

// What the engine reports of a streamed run: its links' and channels' use, its makespan, and
// the critical path's split (sim::CriticalPath's rule over the unrolled Program). `overflow`:
// where a run that stopped (RunSteps false) passed the clock.
struct StepsOutput {
  std::vector<LinkUsage> links;
  std::vector<ChannelUsage> channels;
  Ps makespan_ps = 0;
  CriticalPathSplit path;
  std::optional<StepOverflow> overflow;
};

}  // namespace tpsim::sim
