#include "sim/step_reuse.h"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "mapping/cost.h"
#include "mapping/mapping.h"
#include "sim/engine.h"
#include "sim/result.h"
#include "sim/schedule.h"
#include "sim/step_energy.h"
#include "sim/step_period.h"
#include "sim/step_rolling.h"
#include "sim/step_template.h"

namespace tpsim::sim {

namespace {

using mapping::Program;
using mapping::TaskKind;

// The unique task that ends last (-1 when two tie).
int64_t UniqueLast(std::span<const TaskTime> t) {
  int64_t best = -1;
  bool tie = false;
  for (size_t i = 0; i < t.size(); ++i) {
    if (best < 0 || t[i].end_ps > t[best].end_ps) {
      best = static_cast<int64_t>(i);
      tie = false;
    } else if (t[i].end_ps == t[best].end_ps) {
      tie = true;
    }
  }
  return tie ? -1 : best;
}

std::optional<RunOutput> RunSeparate(const Experiment& e, const arch::Chip& chip, Engine& engine,
                                     const RunOptions& opts, StepTemplate& tpl, Program& head,
                                     const Program& step, const EngineOutput& step_out, std::string* why,
                                     SampledRun* view);

// Where decode steps `first` (with `na` tasks) and `last` (`nb`, lowered alone) have different
// numbers of tasks: the step where the count changes, found by lowering steps alone (a memory
// plan that changes with the context, e.g. attention's data outgrowing the SRAM, changes once:
// each step lowered has one of the two counts). 0 when it changes more than once; *what says
// which.
uint32_t PlanChangeAt(const Experiment& e, const arch::Chip& chip, uint32_t first, uint32_t last, size_t na,
                      size_t nb, std::string* what) {
  auto tasks_of = [&](uint32_t k) { return LowerStep(e, chip, k).num_tasks(); };
  uint32_t lo = first, hi = last;  // lo has na tasks, hi nb
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const size_t n = tasks_of(mid);
    if (n != na && n != nb) {
      *what = "; decode step " + std::to_string(mid) + " has " + std::to_string(n) +
              " (the plan changes more than once)";
      return 0;
    }
    (n == na ? lo : hi) = mid;
  }
  *what = "; the plan changes at decode step " + std::to_string(hi) + " (" + std::to_string(nb) +
          " tasks from it on, " + std::to_string(na) + " before)";
  return hi;
}

}  // namespace

std::unique_ptr<PlanChange> FindPlanChange(const Experiment& e, const arch::Chip& chip, const Program& step,
                                           const Program& last, uint32_t first, uint32_t steps,
                                           std::string* reason) {
  std::string what;
  const uint32_t from = PlanChangeAt(e, chip, first, steps, step.num_tasks(), last.num_tasks(), &what);
  *reason += what;
  if (from == 0) return nullptr;
  const config::Workload& wl = e.cfg.workload();
  auto pc = std::make_unique<PlanChange>();
  pc->before_last = LowerStep(e, chip, from - 1);
  pc->after = LowerStep(e, chip, from);
  pc->a = std::make_unique<StepTemplate>(step, chip, DtypeBytes(wl.dtype()), e.cfg.model().head_dim());
  pc->b = std::make_unique<StepTemplate>(pc->after, chip, DtypeBytes(wl.dtype()), e.cfg.model().head_dim());
  pc->plan = PlanSwitch{pc->a.get(), from, {}, {}};
  std::string no;
  if (!pc->a->Classify(pc->before_last, first, from - 1, &no) || !pc->b->Classify(last, from, steps, &no) ||
      !pc->b->Without(*pc->a, &pc->plan.masked, &pc->plan.b_of_a, &no)) {
    *reason += ": " + no;
    return nullptr;
  }
  return pc;
}

std::optional<RunOutput> RunWithStepReuse(const Experiment& e, const arch::Chip& chip, Engine& engine,
                                          const RunOptions& opts, std::string* why, SampledRun* view) {
  auto fail = [&](const std::string& reason) -> std::optional<RunOutput> {
    if (why) *why = reason;
    return std::nullopt;
  };
  // A way that timed the steps: *why says which, and why the ways before it did not apply.
  auto took = [&](std::optional<RunOutput>& r, const std::string& way) {
    if (why) *why = way;
    return std::move(r);
  };
  const config::Workload& wl = e.cfg.workload();
  const uint32_t steps = wl.decode_steps();
  if (!engine.ListSchedule()) return fail("the " + engine.name() + " engine does not list its schedule");
  if (steps <= kHeadSteps + 1) return fail("at most " + std::to_string(kHeadSteps + 1) + " decode steps");
  const uint32_t first = kHeadSteps + 1;  // the first step timed from `step`
  Program head;
  {
    mapping::LowerOptions o;
    for (uint32_t s = 1; s <= kHeadSteps; ++s) o.decode_steps_only.push_back(s);
    head = mapping::Lower(chip, e.cfg.model(), wl, e.cfg.mapping(), o);
  }
  const Program step = LowerStep(e, chip, first), last = LowerStep(e, chip, steps);
  if (opts.on_stage) opts.on_stage("timing (decode steps reused)");
  StepTemplate tpl(step, chip, DtypeBytes(wl.dtype()), e.cfg.model().head_dim());
  std::string reason;
  if (!tpl.Classify(last, first, steps, &reason)) {
    if (step.num_tasks() == last.num_tasks()) return fail(reason);
    // A template for the steps before the change and one from it on, the steps before it
    // timed as the later template less the tasks they lack (sim/step_rolling.h).
    const std::unique_ptr<PlanChange> pc = FindPlanChange(e, chip, step, last, first, steps, &reason);
    if (!pc) return fail(reason);
    if (steps < kPeriodHead + 5) return fail(reason + ": fewer steps than step by step needs");
    std::string no;
    std::optional<StepHead> h = LowerStepHead(e, chip, &engine, *pc->a, &no);
    if (!h) return fail(reason + ": " + no);
    const EngineOutput after_out = engine.Run(pc->after, chip);
    std::optional<RunOutput> r =
        RunRolling(e, chip, engine, opts, *pc->b, after_out, *h, &no, view, &pc->plan);
    if (!r) return fail(reason + "; not step by step: " + no);
    return took(r, "step by step, a template on each side of the memory plan's change (" + reason + ")");
  }
  const EngineOutput step_out = engine.Run(step, chip);
  // Steps that overlap (e.g. weights streamed ahead of their step), or whose KV reads from
  // DRAM grow with the context: a periodic schedule, else step by step.
  const bool separate = !opts.step_by_step && !tpl.context_memory() && tpl.MatchHead(head, &reason);
  if (tpl.context_memory())
    reason = "memory tasks follow the context (KV reads from DRAM, attention's spills)";
  if (opts.step_by_step) reason = "step by step (RunOptions::step_by_step)";
  // The ways for steps that overlap, tried when the steps are not separate, or when they are
  // but a check of that way fails (`not_separate` says why).
  auto overlapping = [&](const std::string& not_separate) -> std::optional<RunOutput> {
    if (steps < kPeriodHead + 5) return fail(not_separate);
    // The separate steps' head is not read from here on: it goes before the other ways lower
    // theirs (on wafer-32x32-qwen3-32b, the prefill and 3 decode steps: 4.4 million tasks, 168 MB).
    head = Program();
    std::string periodic =
        opts.step_by_step ? "not tried (RunOptions::step_by_step)" : "not tried (KV reads)";
    std::string lowered;
    std::optional<StepHead> h = LowerStepHead(e, chip, &engine, tpl, &lowered);
    if (!h) return fail(not_separate + "; " + lowered);
    std::optional<RunOutput> r;
    if (!opts.step_by_step && !tpl.context_memory())
      r = RunPeriodic(e, chip, engine, opts, tpl, step_out, *h, &periodic, view);
    if (r) return took(r, "a periodic schedule (" + not_separate + ")");
    std::string rolling;
    r = RunRolling(e, chip, engine, opts, tpl, step_out, *h, &rolling, view);
    if (!r) return fail(not_separate + "; not periodic: " + periodic + "; not step by step: " + rolling);
    return took(r, opts.step_by_step ? "step by step (RunOptions::step_by_step)"
                                     : "step by step (" + not_separate + "; not periodic: " + periodic + ")");
  };
  if (!separate) return overlapping(reason);
  std::string why_not;
  std::optional<RunOutput> r = RunSeparate(e, chip, engine, opts, tpl, head, step, step_out, &why_not, view);
  if (r) return took(r, "separate steps");
  return overlapping("separate steps: " + why_not);
}

namespace {

// The steps that do not overlap (the header's argument), after Classify and MatchHead.
std::optional<RunOutput> RunSeparate(const Experiment& e, const arch::Chip& chip, Engine& engine,
                                     const RunOptions& opts, StepTemplate& tpl, Program& head,
                                     const Program& step, const EngineOutput& step_out, std::string* why,
                                     SampledRun* view) {
  auto fail = [&](const std::string& reason) -> std::optional<RunOutput> {
    *why = reason;
    return std::nullopt;
  };
  const config::Workload& wl = e.cfg.workload();
  const uint32_t steps = wl.decode_steps(), first = kHeadSteps + 1;
  std::string reason;
  const EngineOutput head_out = engine.Run(head, chip);
  if (head_out.makespan_ps >= std::numeric_limits<Ps>::max()) return fail("the head's times overflow");
  if (UniqueLast(head_out.tasks) < 0) return fail("two tasks of the head end last");
  if (!tpl.Calibrate(step_out, &reason)) return fail(reason);

  RunOutput out;
  out.result = BuildResult(head, chip, head_out, e.cfg.name(), engine.name(), opts.keep_task_times,
                           EnergyInputsOf(wl));
  StepEnergy energy(head, tpl, chip, wl);
  config::Result& r = out.result;
  config::Summary& s = *r.mutable_summary();
  // Totals carried over from the head, then added to step by step.
  const int num_cores = chip.num_cores();
  std::vector<Ps> core_compute(num_cores, 0), core_busy(num_cores, 0);
  for (int c = 0; c < num_cores && c < r.cores_size(); ++c) {
    core_compute[c] = r.cores(c).compute_ps();
    core_busy[c] = r.cores(c).busy_ps();
  }
  std::vector<LinkUsage> links = head_out.links;
  std::vector<ChannelUsage> channels = head_out.channels;
  const uint64_t reused = steps - kHeadSteps;
  AddStepsUse(step_out, reused, &links, &channels);
  const std::map<uint32_t, int> decode_layer = DecodeLayers(r);
  double flops = head.ComputeFlops();
  Ps compute_path = s.compute_ps(), comm_path = s.communication_ps(), memory_path = s.memory_ps();
  Ps t0 = std::numeric_limits<Ps>::max();  // the first task's start (BuildResult's t0)
  for (const TaskTime& x : head_out.tasks) t0 = std::min(t0, x.start_ps);
  const Ps prefill_end = t0 + s.prefill_ps();
  Ps boundary = head_out.makespan_ps;
  Ps unloaded = head_out.unloaded_makespan_ps;  // the run without queues on links, composed alike
  uint64_t task_id = head.num_tasks();
  // Past kRowSteps decode steps, one row per op sums the steps from kFirstSummedStep on
  // (OpResult::steps).
  OpRows rows(step, steps > opts.row_steps, kFirstSummedStep);
  std::map<uint32_t, std::vector<TaskTime>> observed;  // observe_steps past the head, shifted
  for (uint32_t k = first; k <= steps; ++k) {
    const StepTimes& t = tpl.Time(k, &reason);
    if (!t.ok) return fail(reason);
    energy.Add(k);
    rows.Add(k, t, boundary, &r, energy.op_pj());
    for (const auto& [layer, inc] : t.layer_inc) {
      auto it = decode_layer.find(layer);
      if (it == decode_layer.end()) return fail("a decode layer the head does not have");
      config::LayerResult* lr = r.mutable_layers(it->second);
      lr->set_total_ps(lr->total_ps() + inc);
    }
    for (int c = 0; c < num_cores; ++c) {
      core_compute[c] += t.core_compute[c];
      core_busy[c] += t.core_busy[c];
    }
    for (size_t c = 0; c < channels.size(); ++c)
      channels[c].max_queue_ps = std::max(channels[c].max_queue_ps, t.channel_queue[c]);
    for (size_t l = 0; l < links.size() && l < t.link_wait.size(); ++l)
      links[l].max_queue_ps = std::max(links[l].max_queue_ps, t.link_wait[l]);
    if (!AddBelowClock(unloaded, t.unloaded, &unloaded)) return fail("the run passes the 2^63 ps clock");
    for (size_t i = 0; i < t.compute_flops.size(); ++i) flops += t.compute_flops[i];
    compute_path += t.path.compute_ps;
    comm_path += t.path.communication_ps;
    memory_path += t.path.memory_ps;
    if (opts.keep_task_times) {
      AddTaskTimings(step, t.times, boundary, task_id, &r);
      task_id += step.num_tasks();
    }
    if (view && std::binary_search(opts.observe_steps.begin(), opts.observe_steps.end(), k)) {
      std::vector<TaskTime>& kept = observed[k];
      kept = t.times;
      for (TaskTime& x : kept) x.start_ps += boundary, x.end_ps += boundary;
    }
    if (!AddBelowClock(boundary, t.makespan, &boundary)) return fail("the run passes the 2^63 ps clock");
    if (opts.on_count) opts.on_count(k, steps, "decode steps");
  }
  rows.Finish(&r);
  // The summary, links, channels and cores over the whole run (BuildResult's definitions).
  RunTotals tot;
  tot.total = boundary;
  tot.prefill_end = prefill_end;
  tot.decode_steps = steps;
  tot.path = {compute_path, comm_path, memory_path};
  tot.core_compute = std::move(core_compute);
  tot.core_busy = std::move(core_busy);
  tot.flops = flops;
  tot.spilled_bytes = head.spilled_bytes + tpl.SpilledOver(first, steps);
  tot.links = links;
  tot.channels = channels;
  FinishResult(chip, tot, &r);
  s.set_contention(ContentionIndicator(boundary, unloaded));
  energy.Finish(chip, &r);
  const Ps total = boundary;
  if (view && !opts.observe_steps.empty())
    *view = SampleComposed(e, chip, opts.observe_steps, head_out.tasks, SegmentBegins(head), observed,
                           std::move(links), std::move(channels), total);
  out.program = std::move(head);
  return out;
}

}  // namespace

}  // namespace tpsim::sim
