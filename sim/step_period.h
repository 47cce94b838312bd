#pragma once
// Decode steps that overlap, timed from a periodic schedule (issue 18; sim/step_reuse.h
// handles steps that do not overlap).
//
// Where weights stream from DRAM, a stage reads its weights for step s + 1 as soon as their
// SRAM buffer is free, while later stages still run step s: steps overlap, and a step alone
// is not a step of the run. The analytical schedule of such a run becomes periodic: every
// task of step s + 1 runs P picoseconds after the same task of step s, but for attention's
// ends (their durations grow with the context) when no other task waits on them.
// RunPeriodic lowers the prefill and decode steps 1 .. kPeriodHead + 2 (B), the same with
// one step fewer (A), and steps 1 .. kPeriodHead then the run's last two steps at their own
// contexts (T: the run ends with them, and nothing after them reads ahead), times the three
// with the engine (at least kPeriodHead + 5 decode steps), and checks:
//   - settled: A, B and T give steps 1 .. kPeriodHead the same times (the steps after them
//     do not reach back); T's last two steps are the template at their contexts;
//   - every decode step from 2 on is the template (StepTemplate::MatchStep), with the same
//     deps on the L steps before it (relative), L <= kPeriodHead - 3;
//   - periodic: steps kPeriodHead - L - 1 .. kPeriodHead, one after the other, differ by one
//     period P in every start and in every end but attention's (more than L steps: the state
//     a step starts from, the deps it reads and the queues' last tasks, repeats);
//   - slack: in every step, each attention task's end at that step's context is no later
//     than the first start among the tasks that wait on it (its dependents, the next task
//     of its core) in the periodic schedule, and no earlier than in step kPeriodHead: its
//     end is then seen by nobody, and changing it changes no other time;
//   - decode steps' flows take their unloaded times (shared flows are timed from
//     floating-point overlaps of absolute windows, which can round a picosecond apart from
//     one period to the next); sharing in the prefill settles as it does over the whole run
//     (B replayed with the whole run's makespan gives B's times); nothing passes the 2^63 ps
//     clock.
// Then step k > kPeriodHead (but the last two) is step kPeriodHead shifted by
// (k - kPeriodHead) P with its attention tasks timed at step k's context, the last two are
// T's shifted by (N - 2 - kPeriodHead) P, and the Result is composed from those times
// (BuildResult on B with steps kPeriodHead + 1, + 2 so timed, then step by step: op rows,
// layers, cores' compute and busy union, the critical path walked back through every step).

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/engine.h"
#include "sim/run.h"
#include "sim/sampled_run.h"
#include "sim/step_template.h"

namespace tpsim::sim {

class Engine;
class StepEnergy;

// *r = a + b, false when that passes the 2^63 ps clock (reaches its maximum or wraps).
inline bool AddBelowClock(Ps a, Ps b, Ps* r) {
  return !__builtin_add_overflow(a, b, r) && *r < std::numeric_limits<Ps>::max();
}

// Decode steps of B (and A) whose times are taken from the engine as they are.
inline constexpr uint32_t kPeriodHead = 6;
// Reuse holds at most three Programs of the prefill and kPeriodHead + 2 decode steps at once,
// which the memory guard (sim/run.cc) counts as one of this many decode steps.
inline constexpr uint32_t kReuseCountedSteps = 3 * (kPeriodHead + 3) - 1;

// B: the prefill and decode steps 1 .. kPeriodHead + 2, lowered and timed by the engine, and
// checked as the periodic and the step-by-step ways (sim/step_rolling.h) both read it: every
// decode step from 2 on is the template at its context, and steps 3 on depend on the same tasks
// of the same steps before them (`deps`, at most `steps_back` steps back). Lowered once for
// the two.
struct StepHead {
  mapping::Program program;
  EngineOutput timing;
  std::vector<size_t> begin;  // SegmentBegins
  StepDeps deps;
  uint32_t steps_back = 0;
};
// `engine` null: B is not timed (StepHead::timing empty). `head_steps`: B's decode steps (at
// least 4: steps 3 on are compared for their deps on the steps before).
std::optional<StepHead> LowerStepHead(const Experiment& e, const arch::Chip& chip, Engine* engine,
                                      const StepTemplate& tpl, std::string* why,
                                      uint32_t head_steps = kPeriodHead + 2);
// Decode step k lowered alone (mapping::LowerOptions::skip_prefill): a template's Program.
mapping::Program LowerStep(const Experiment& e, const arch::Chip& chip, uint32_t k);

// A memory plan that changes at decode step `from` (sim/step_reuse.cc): the steps before it are
// `before`'s tasks, the template's less those `masked` marks (StepTemplate::Without); b_of_a:
// per task of `before`, its task in the template.
struct PlanSwitch {
  const StepTemplate* before = nullptr;
  uint32_t from = 0;
  std::vector<uint8_t> masked;
  std::vector<uint32_t> b_of_a;
  bool Masked(uint32_t k) const { return before != nullptr && k < from; }
  // Per task of the template: whether decode step k lacks it (empty: it lacks none).
  std::span<const uint8_t> Lacks(uint32_t k) const {
    return Masked(k) ? std::span<const uint8_t>(masked) : std::span<const uint8_t>();
  }
  // A step before `from`: its own tasks' times (before's tasks, in order) out of the template's.
  void OwnTimes(std::span<const TaskTime> t, std::vector<TaskTime>* own) const {
    own->resize(b_of_a.size());
    for (size_t j = 0; j < b_of_a.size(); ++j) (*own)[j] = t[b_of_a[j]];
  }
  // Deps on the steps before, (steps back, task of that step), of before's tasks as those of the
  // template's `n` tasks.
  StepDeps InTemplate(const StepDeps& deps, size_t n) const {
    StepDeps mapped(n);
    for (size_t j = 0; j < deps.size() && j < b_of_a.size(); ++j)
      for (const auto& [off, rr] : deps[j]) mapped[b_of_a[j]].emplace_back(off, b_of_a[rr]);
    return mapped;
  }
};

// A memory plan that changes once (sim/step_reuse.cc): where the template `step` (decode step
// `first` alone) and `last` (decode step `steps` alone) have different numbers of tasks, the
// step where the count changes (found by lowering single steps), the steps on each side lowered
// alone, their templates (`a` on `step`, which must outlive it; `b` from the change on) and the
// PlanSwitch between them, checked. nullptr where the count changes more than once or a check
// fails. *reason (Classify's) gets where the plan changes, and on failure why.
struct PlanChange {
  mapping::Program before_last, after;
  std::unique_ptr<StepTemplate> a, b;
  PlanSwitch plan;
};
std::unique_ptr<PlanChange> FindPlanChange(const Experiment& e, const arch::Chip& chip,
                                           const mapping::Program& step, const mapping::Program& last,
                                           uint32_t first, uint32_t steps, std::string* reason);

// `tpl`: the template (Classify done); `step_out`: the engine's times of the template alone
// (its links' and channels' bytes and busy time are one step's). nullopt with *why when a
// check fails.
// A run composed from its head B (LowerStepHead's; timed `bo`: its tasks as the whole run
// times them) and reused steps after it, as RunPeriodic and RunRolling both compose it with
// BuildResult's definitions (sim/step_compose.h): B's Result, then each step's op rows, layer
// totals, cores' compute and busy union, flops and energy (sim/step_energy.h).
class StepComposer {
 public:
  // `plan` (may be null, else it outlives the composer): the steps before plan->from are
  // composed as `plan->before`'s.
  StepComposer(const Experiment& e, const arch::Chip& chip, const Engine& engine, const RunOptions& opts,
               const StepTemplate& tpl, const StepHead& head, const EngineOutput& bo,
               const PlanSwitch* plan = nullptr);
  ~StepComposer();
  config::Result& result() { return res_; }
  RunTotals& totals() { return tot_; }
  BusyUnion& busy() { return busy_; }
  // Decode step k, after the steps before it, with its tasks' times `t`; false with *why when
  // it has a decode layer B has no row for.
  bool Add(uint32_t k, std::span<const TaskTime> t, std::string* why);
  // Decode step k's task records (RunOptions::keep_task_times), after Add, with the unrolled
  // Program's ids: `head_tasks` tasks in the head's `head_steps` decode steps and prefill, and
  // the steps before the plan changes as plan->before's tasks.
  void AddTaskRecords(uint32_t k, std::span<const TaskTime> t, uint64_t head_tasks, uint32_t head_steps);
  // After the last decode step, `steps`: the summed op rows (past RunOptions::row_steps), the
  // cores' busy union, and the totals that follow from the composition: the prefill's end (from
  // B's first start), the decode steps, the cores' busy time and the spilled bytes (B's and the
  // composed steps'). The caller sets the path, total, links and channels.
  void FinishSteps(uint32_t steps);
  // After FinishResult: the layers' and summary's energy.
  void FinishEnergy(const arch::Chip& chip);

 private:
  const StepTemplate& tpl_;
  config::Result res_;
  std::unique_ptr<StepEnergy> energy_;
  RunTotals tot_;
  BusyUnion busy_;
  std::map<uint32_t, int> decode_layer_;
  Ps prev_end_;  // the last composed segment's end
  OpRows rows_;
  StepTimes st_;
  OpCores pairs_;
  std::vector<uint32_t> by_start_;  // the template's tasks by their start in the last step added
  const PlanSwitch* plan_;
  Ps head_start_;                          // B's first task's start (BuildResult's t0)
  uint64_t head_spilled_;                  // B's spilled bytes
  uint32_t head_steps_;                    // B's decode steps
  OpCores before_pairs_;                   // plan_->before's
  std::vector<uint32_t> before_by_start_;  // plan_->before's tasks, as by_start_
  std::vector<TaskTime> before_times_;     // a step before plan_->from: its tasks' times
};

// `head`: LowerStepHead's (its Program moves into the RunOutput on success).
std::optional<RunOutput> RunPeriodic(const Experiment& e, const arch::Chip& chip, Engine& engine,
                                     const RunOptions& opts, const StepTemplate& tpl,
                                     const EngineOutput& step_out, StepHead& head, std::string* why,
                                     SampledRun* view);

}  // namespace tpsim::sim
