#include "sim/step_period.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "mapping/cost.h"
#include "mapping/mapping.h"
#include "sim/analytical/analytical.h"
#include "sim/engine.h"
#include "sim/result.h"
#include "sim/schedule.h"
#include "sim/step_energy.h"
#include "sim/step_reuse.h"
#include "sim/step_source.h"

namespace tpsim::sim {

namespace {

using mapping::Program;
using mapping::TaskKind;

using arch::SatAdd;

// The analytical engine's run of `p` (sim/analytical/analytical.cc: unloaded times, then the
// schedule with queues on links, ScheduleOnLinks), but with extra(times) added to the
// makespan: `p` is the head of a run whose steps after it end that much later. Tasks, makespan (with the
// extra), contention and the links' max_queue_ps. false for a Program with in-switch transfers.
bool Replay(const Program& p, const arch::Chip& chip,
            const std::function<Ps(std::span<const TaskTime>)>& extra, EngineOutput* o) {
  const size_t n = p.num_tasks();
  const auto& links = chip.links();
  const auto& channels = chip.channels();
  LinkedProgram q = LinkProgram(p, chip);
  if (q.in_switch) return false;
  std::vector<Ps>& duration = q.duration;
  std::vector<Ps>& busy = q.busy;
  const LinkModel& model = q.model;
  Dispatcher d(p, std::move(q.first_link), static_cast<int>(links.size()));
  o->tasks.assign(n, {});
  o->links.assign(links.size(), {});
  o->channels.assign(channels.size(), {});
  o->contention = ScheduleOnLinks(model, d, TaskCosts{duration, busy}, o, extra);
  return true;
}

}  // namespace

mapping::Program LowerStep(const Experiment& e, const arch::Chip& chip, uint32_t k) {
  mapping::LowerOptions o;
  o.skip_prefill = true;
  o.decode_steps_only = {k};
  return mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping(), o);
}

std::optional<StepHead> LowerStepHead(const Experiment& e, const arch::Chip& chip, Engine* engine,
                                      const StepTemplate& tpl, std::string* why, uint32_t head_steps) {
  const uint32_t HB = head_steps;
  StepHead h;
  mapping::LowerOptions o;
  for (uint32_t s = 1; s <= HB; ++s) o.decode_steps_only.push_back(s);
  h.program = mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping(), o);
  if (engine) h.timing = engine->Run(h.program, chip);
  if (h.timing.makespan_ps >= std::numeric_limits<Ps>::max()) {
    *why = "the head's times overflow";
    return std::nullopt;
  }
  h.begin = SegmentBegins(h.program);
  if (h.begin.size() != HB + 2) {
    *why = "the head's steps are not in order";
    return std::nullopt;
  }
  for (uint32_t s = 2; s <= HB; ++s)
    if (!tpl.MatchStep(h.program, h.begin[s], h.begin[s + 1], s, why)) return std::nullopt;
  if (!DepsOnStepsBefore(h.program, h.begin, tpl.program().num_tasks(), HB, HB, &h.deps, &h.steps_back, why))
    return std::nullopt;
  return h;
}

StepComposer::StepComposer(const Experiment& e, const arch::Chip& chip, const Engine& engine,
                           const RunOptions& opts, const StepTemplate& tpl, const StepHead& head,
                           const EngineOutput& bo, const PlanSwitch* plan)
    : tpl_(tpl),
      res_(BuildResult(head.program, chip, bo, e.cfg.name(), engine.name(), opts.keep_task_times,
                       EnergyInputsOf(e.cfg.workload()))),
      energy_(std::make_unique<StepEnergy>(head.program, tpl, chip, e.cfg.workload())),
      busy_(chip.num_cores()),
      decode_layer_(DecodeLayers(res_)),
      prev_end_(std::numeric_limits<Ps>::min()),
      rows_(tpl.program(), e.cfg.workload().decode_steps() > opts.row_steps, kFirstSummedStep),
      pairs_(IndexOpCores(tpl.program())),
      plan_(plan && plan->before ? plan : nullptr),
      head_start_(std::numeric_limits<Ps>::max()),
      head_spilled_(head.program.spilled_bytes),
      head_steps_(static_cast<uint32_t>(head.begin.size() - 2)) {
  for (const TaskTime& x : bo.tasks) head_start_ = std::min(head_start_, x.start_ps);
  if (plan_) before_pairs_ = IndexOpCores(plan_->before->program());
  const Program& B = head.program;
  const int cores = chip.num_cores();
  tot_.core_compute.assign(cores, 0);
  for (int c = 0; c < cores && c < res_.cores_size(); ++c) tot_.core_compute[c] = res_.cores(c).compute_ps();
  for (size_t g = 0; g < B.num_tasks(); ++g)
    if (B.core(g) >= 0 && B.core(g) < cores) busy_.Add(B.core(g), bo.tasks[g].start_ps, bo.tasks[g].end_ps);
  tot_.flops = B.ComputeFlops();
  const size_t last = head.begin.size() - 2;  // B's last segment
  for (size_t g = head.begin[last]; g < head.begin[last + 1]; ++g)
    prev_end_ = std::max(prev_end_, bo.tasks[g].end_ps);
}

StepComposer::~StepComposer() = default;

void StepComposer::AddTaskRecords(uint32_t k, std::span<const TaskTime> t, uint64_t head_tasks,
                                  uint32_t head_steps) {
  const Program& tp = tpl_.program();
  // Ids as the unrolled Program's: the steps before the plan changes have fewer tasks.
  const uint64_t id0 = UnrolledStepBegin(head_tasks, head_steps, k, plan_ ? plan_->from : 0,
                                         plan_ ? plan_->b_of_a.size() : 0, tp.num_tasks());
  if (!plan_ || !plan_->Masked(k)) return AddTaskTimings(tp, t, 0, id0, &res_);
  plan_->OwnTimes(t, &before_times_);
  AddTaskTimings(plan_->before->program(), before_times_, 0, id0, &res_);
}

bool StepComposer::Add(uint32_t k, std::span<const TaskTime> t, std::string* why) {
  // A step before the plan changes: its own tasks (the template's less the masked ones, in
  // order) as plan_->before's, whose ops are the template's.
  const bool before = plan_ && plan_->Masked(k);
  if (before) {
    plan_->OwnTimes(t, &before_times_);
    t = before_times_;
  }
  const StepTemplate& work = before ? *plan_->before : tpl_;
  const Program& tp = work.program();
  ReduceOps(tp, t, &st_, before ? before_pairs_ : pairs_);
  work.WorkAt(k, &st_);
  // Energy in the template's tasks (the masked ones add nothing: the same sums in the same order).
  energy_->Add(k, plan_ ? plan_->Lacks(k) : std::span<const uint8_t>());
  rows_.Add(k, st_, 0, &res_, energy_->op_pj());
  if (!AddLayerTotals(tp, st_, decode_layer_, &prev_end_, &res_)) {
    *why = "a decode layer the head does not have";
    return false;
  }
  // The tasks by (start, end) in this step (the last step's order, sorted by insertion: a
  // step's order changes little from the last one's), as BusyUnion sorts them.
  std::vector<uint32_t>& order = before ? before_by_start_ : by_start_;
  if (order.empty())
    for (uint32_t i = 0; i < tp.num_tasks(); ++i) order.push_back(i);
  for (size_t a = 1; a < order.size(); ++a) {
    const uint32_t x = order[a];
    size_t b = a;
    const std::pair<Ps, Ps> key{t[x].start_ps, t[x].end_ps};
    for (; b > 0 && std::pair<Ps, Ps>{t[order[b - 1]].start_ps, t[order[b - 1]].end_ps} > key; --b)
      order[b] = order[b - 1];
    order[b] = x;
  }
  AddStepCores(tp, t, &busy_, &tot_.core_compute, order);
  for (double f : st_.compute_flops) tot_.flops += f;
  return true;
}

// B's steps end at kPeriodHead + 2: every step this composes is one that is summed.
static_assert(kFirstSummedStep == kPeriodHead + 3);

void StepComposer::FinishSteps(uint32_t steps) {
  rows_.Finish(&res_);
  busy_.Flush(std::numeric_limits<Ps>::max());
  tot_.prefill_end = head_start_ + res_.summary().prefill_ps();
  tot_.decode_steps = steps;
  tot_.core_busy.assign(tot_.core_compute.size(), 0);
  for (size_t c = 0; c < tot_.core_busy.size(); ++c) tot_.core_busy[c] = busy_.Total(c);
  const uint32_t first = head_steps_ + 1;
  tot_.spilled_bytes = head_spilled_ + (plan_ ? plan_->before->SpilledOver(first, plan_->from - 1) +
                                                    tpl_.SpilledOver(plan_->from, steps)
                                              : tpl_.SpilledOver(first, steps));
}

void StepComposer::FinishEnergy(const arch::Chip& chip) { energy_->Finish(chip, &res_); }

std::optional<RunOutput> RunPeriodic(const Experiment& e, const arch::Chip& chip, Engine& engine,
                                     const RunOptions& opts, const StepTemplate& tpl,
                                     const EngineOutput& step_out, StepHead& head, std::string* why,
                                     SampledRun* view) {
  auto fail = [&](const std::string& reason) -> std::optional<RunOutput> {
    if (why) *why = reason;
    return std::nullopt;
  };
  const config::Workload& wl = e.cfg.workload();
  const uint32_t N = wl.decode_steps(), H = kPeriodHead;
  if (N < H + 5) return fail("fewer than " + std::to_string(H + 5) + " decode steps");
  const Program& tp = tpl.program();
  const size_t n = tp.num_tasks();
  Program& B = head.program;  // B: steps 1 .. H + 2 (LowerStepHead)
  const EngineOutput& ub0 = head.timing;
  const std::vector<size_t>& bB = head.begin;
  // The checks on B's own times first (steps up to H: the run's, as checked below once the
  // steps after B are added), before A and T are lowered and timed: on wafer-32x32-qwen3-32b
  // at 32 layers those took 6.8 s of a run that then fails here.
  // Deps on the steps before, as (steps back, task of that step): the same from step 3 on.
  auto seg_of = [&](size_t id) { return SegmentOf(bB, id); };
  const StepDeps& ext = head.deps;
  const uint32_t L = head.steps_back;
  if (L == 0 || L + 3 > H) return fail("decode steps depend on " + std::to_string(L) + " steps before them");
  // Memory tasks that wait on attention: their wait for the channel (max_queue_ps) follows
  // the attention's end, step by step.
  std::vector<uint32_t> waits_on_attention;
  for (size_t i = 0; i < n; ++i) {
    if (tp.kind(i) != TaskKind::kMemory) continue;
    bool w = false;
    for (uint32_t d : tp.deps(i)) w = w || tpl.IsContext(d);
    for (const auto& [off, r] : ext[i]) w = w || tpl.IsContext(r);
    if (w) waits_on_attention.push_back(static_cast<uint32_t>(i));
  }
  // Attention chains: an attention task starts at max(its start one period earlier shifted,
  // the ends of the attention tasks before it: its deps, and its core's previous task when
  // that is attention). ctx_prev: per attention task, those tasks of its step.
  const std::span<const TaskTime> tb(ub0.tasks);
  const Ps P = tb[bB[H]].start_ps - tb[bB[H - 1]].start_ps;
  if (P <= 0) return fail("no period");
  std::vector<std::vector<uint32_t>> ctx_prev(n);
  std::vector<Ps> bound(n, std::numeric_limits<Ps>::max());  // step H: when a non-attention task sees it
  {
    // Compute queues of steps H and H + 1 (step H + 1: step H shifted; the order by start).
    std::map<int, std::vector<std::pair<Ps, uint64_t>>> by_core;
    for (uint32_t s = H; s <= H + 1; ++s)
      for (size_t i = 0; i < n; ++i)
        if (tp.kind(i) == TaskKind::kCompute)
          by_core[tp.core(i)].emplace_back(tb[bB[H] + i].start_ps + (s - H) * P, uint64_t{s - H} * n + i);
    for (auto& [c, v] : by_core) {
      std::sort(v.begin(), v.end());
      for (size_t j = 0; j + 1 < v.size(); ++j) {
        if (v[j].second >= n) continue;  // a task of step H + 1
        const uint32_t x = static_cast<uint32_t>(v[j].second);
        const uint64_t next = v[j + 1].second;
        if (!tpl.IsContext(x)) continue;
        if (next < n && tpl.IsContext(next)) {
          ctx_prev[next].push_back(x);
        } else {
          bound[x] = std::min(bound[x], v[j + 1].first);
        }
      }
    }
    for (uint32_t x : tpl.context_tasks()) {
      if (tpl.IsContext(x) && by_core[tp.core(x)].back().second == x)
        return fail("no task after an attention task");
      for (uint32_t d : tp.deps(x))
        if (tpl.IsContext(d)) ctx_prev[x].push_back(d);
      for (const auto& [off, rr] : ext[x])
        if (tpl.IsContext(rr)) return fail("attention waits on attention of a step before");
    }
    // Non-attention dependents, in the step and in the L steps after it.
    for (size_t i = 0; i < n; ++i) {
      if (tpl.IsContext(i)) continue;
      for (uint32_t d : tp.deps(i))
        if (tpl.IsContext(d)) bound[d] = std::min(bound[d], tb[bB[H] + i].start_ps);
      for (const auto& [off, rr] : ext[i])
        if (tpl.IsContext(rr))
          bound[rr] = std::min(bound[rr], tb[bB[H] + i].start_ps - static_cast<Ps>(off) * P);
    }
  }
  // Step k's times (k > H - L - 1): step `from`'s non-attention times shifted by (k - from)
  // periods, attention by the chain rule at step k's context, each attention task's end no
  // later than the first non-attention task that sees it.
  std::vector<TaskTime> tk(n), tc(n);
  auto predict = [&](std::span<const TaskTime> prev, uint32_t from, uint32_t k,
                     std::vector<TaskTime>& tk) -> bool {
    Ps shift;
    if (__builtin_mul_overflow(static_cast<Ps>(k - from), P, &shift)) return false;
    for (size_t i = 0; i < n; ++i)
      if (!AddBelowClock(prev[i].start_ps, shift, &tk[i].start_ps) ||
          !AddBelowClock(prev[i].end_ps, shift, &tk[i].end_ps))
        return false;
    const Ps to_h = static_cast<Ps>(k) * P - static_cast<Ps>(H) * P;  // bound is step H's
    for (uint32_t x : tpl.context_tasks()) {
      Ps st = tk[x].start_ps;
      for (uint32_t c : ctx_prev[x]) st = std::max(st, tk[c].end_ps);
      const Ps d = tpl.DurationAt(x, k);
      if (d < prev[x].end_ps - prev[x].start_ps) return false;
      tk[x] = {st, st + d};
      if (bound[x] != std::numeric_limits<Ps>::max() && tk[x].end_ps > bound[x] + to_h) return false;
    }
    return true;
  };
  // Periodic: each of steps H - L .. H is the one before it so predicted.
  for (uint32_t s = H - L; s <= H; ++s) {
    if (!predict(tb.subspan(bB[s - 1], n), s - 1, s, tk)) return fail("attention would delay another task");
    for (size_t i = 0; i < n; ++i)
      if (tk[i].start_ps != tb[bB[s] + i].start_ps || tk[i].end_ps != tb[bB[s] + i].end_ps)
        return fail("the schedule is not periodic by decode step " + std::to_string(H));
  }
  const std::vector<TaskTime> base(tb.begin() + static_cast<std::ptrdiff_t>(bB[H]),
                                   tb.begin() + static_cast<std::ptrdiff_t>(bB[H + 1]));
  Ps min_start = std::numeric_limits<Ps>::max(), max_start = std::numeric_limits<Ps>::min();
  for (const TaskTime& x : base)
    min_start = std::min(min_start, x.start_ps), max_start = std::max(max_start, x.start_ps);
  // Every task of a step starts after every task three steps before (queues' predecessors of
  // a step's tasks then lie within two steps after it).
  if (min_start + 3 * P <= max_start) return fail("decode steps overlap by more than two periods");
  auto times_at = [&](uint32_t k) { return predict(base, H, k, tk); };
  Program A, T;
  {
    mapping::LowerOptions o;
    for (uint32_t s = 1; s <= H + 1; ++s) o.decode_steps_only.push_back(s);
    A = mapping::Lower(chip, e.cfg.model(), wl, e.cfg.mapping(), o);
    // The run's last two steps end it (no step after them reads its weights ahead): lowered
    // at their own contexts right after step H, they are the run's last two steps shifted.
    o.decode_steps_only.resize(H);
    o.decode_steps_only.push_back(N - 1);
    o.decode_steps_only.push_back(N);
    T = mapping::Lower(chip, e.cfg.model(), wl, e.cfg.mapping(), o);
  }
  const EngineOutput ua = engine.Run(A, chip), ut = engine.Run(T, chip);
  const std::vector<size_t> bA = SegmentBegins(A);
  if (bA.size() != H + 3) return fail("the head's steps are not in order");
  // Settled: one more step, or the last two at their contexts, change nothing up to step H.
  if (T.num_tasks() != B.num_tasks()) return fail("the last steps have other tasks");
  for (size_t i = 0; i < bB[H + 1]; ++i)
    if (ua.tasks[i].start_ps != ub0.tasks[i].start_ps || ua.tasks[i].end_ps != ub0.tasks[i].end_ps ||
        ut.tasks[i].start_ps != ub0.tasks[i].start_ps || ut.tasks[i].end_ps != ub0.tasks[i].end_ps)
      return fail("later steps change the times of step " + std::to_string(H));
  for (uint32_t j = 0; j < 2; ++j)
    if (!tpl.MatchStep(T, bB[H + 1 + j], bB[H + 2 + j], N - 1 + j, why)) return std::nullopt;
  // The contention indicator compares the whole run's makespan with its unqueued one: B
  // replayed as the engine times it (checked), then with one period per step after B added
  // to each of the two schedules (links.h ScheduleOnLinks).
  EngineOutput ub;
  {
    const Ps P0 = ub0.tasks[bB[H]].start_ps - ub0.tasks[bB[H - 1]].start_ps;
    Ps extra;
    if (P0 <= 0 || __builtin_mul_overflow(static_cast<Ps>(N - H - 2), P0, &extra)) return fail("no period");
    EngineOutput same;
    if (!Replay(
            B, chip, [](std::span<const TaskTime>) { return Ps{0}; }, &same))
      return fail("in-switch transfers");
    bool ok = same.makespan_ps == ub0.makespan_ps && same.contention == ub0.contention;
    for (size_t i = 0; ok && i < B.num_tasks(); ++i)
      ok = same.tasks[i].start_ps == ub0.tasks[i].start_ps && same.tasks[i].end_ps == ub0.tasks[i].end_ps;
    for (size_t l = 0; ok && l < same.links.size(); ++l)
      ok = same.links[l].max_queue_ps == ub0.links[l].max_queue_ps;
    if (!ok) return fail("the engine's run of the head is not its replay");
    // Each round's schedule is periodic in the decode steps (their flows share alike), so the
    // whole run ends (N - H - 2) of that round's periods after B.
    Replay(
        B, chip,
        [&](std::span<const TaskTime> t) {
          const Ps p = t[bB[H]].start_ps - t[bB[H - 1]].start_ps;
          return p > 0 ? SatAdd(0, static_cast<Ps>(N - H - 2) * p) : Ps{0};
        },
        &ub);
    for (size_t l = 0; l < ub.links.size(); ++l) {
      const Ps q = ub.links[l].max_queue_ps;
      ub.links[l] = ub0.links[l];
      ub.links[l].max_queue_ps = q;
    }
    ub.channels = ub0.channels;
    // The added periods must not change B's times (they only extend the makespans).
    for (size_t i = 0; i < bB[H + 1]; ++i)
      if (ub.tasks[i].start_ps != ub0.tasks[i].start_ps || ub.tasks[i].end_ps != ub0.tasks[i].end_ps)
        return fail("link sharing settles differently over the whole run");
    (void)extra;
  }
  // B with steps H + 1 and H + 2 so timed: the run's times up to step H + 2.
  EngineOutput bo;
  bo.tasks = ub.tasks;
  for (uint32_t k = H + 1; k <= H + 2; ++k) {
    if (!times_at(k))
      return fail("attention of decode step " + std::to_string(k) + " would delay another task");
    std::copy(tk.begin(), tk.end(), bo.tasks.begin() + static_cast<std::ptrdiff_t>(bB[k]));
  }
  bo.links = ub.links;
  bo.channels = ub.channels;
  bo.contention = ub.contention;
  for (ChannelUsage& c : bo.channels) c.max_queue_ps = 0;
  AddChannelWaits(B, bo.tasks, &bo.channels);
  for (size_t g = 0; g < B.num_tasks(); ++g) bo.makespan_ps = std::max(bo.makespan_ps, bo.tasks[g].end_ps);
  // Totals from B, then step by step.
  StepComposer compose(e, chip, engine, opts, tpl, head, bo);
  config::Result& res = compose.result();
  RunTotals& tot = compose.totals();
  BusyUnion& busy = compose.busy();
  Ps total = bo.makespan_ps;
  uint64_t last_task = 0;  // the first task (lowest id) to end at `total`
  for (size_t g = 0; g < B.num_tasks(); ++g)
    if (bo.tasks[g].end_ps == total) {
      last_task = g;
      break;
    }
  const uint64_t NB = B.num_tasks();
  const uint64_t reused = N - (H + 2);
  auto gid = [&](uint32_t s, uint32_t rel) -> uint64_t {
    return s <= H + 2 ? bB[s] + rel : NB + uint64_t{s - H - 3} * n + rel;
  };
  auto step_of = [&](uint64_t g) -> uint32_t {
    return g < NB ? seg_of(static_cast<size_t>(g)) : H + 3 + static_cast<uint32_t>((g - NB) / n);
  };
  auto rel_of = [&](uint64_t g) -> uint32_t {
    return static_cast<uint32_t>(g < NB ? g - bB[seg_of(static_cast<size_t>(g))] : (g - NB) % n);
  };
  // The last two steps: T's, shifted to where step H + 1 of T runs in the whole run.
  auto tail_at = [&](uint32_t k, std::vector<TaskTime>& out) {
    const Ps shift = static_cast<Ps>(N - 2 - H) * P;
    const size_t b = bB[H + 1 + (k - (N - 1))];
    for (size_t i = 0; i < n; ++i)
      out[i] = {ut.tasks[b + i].start_ps + shift, ut.tasks[b + i].end_ps + shift};
  };
  uint32_t cached_step = 0;  // tc holds this step's times (0: none)
  auto time_of = [&](uint64_t g) -> TaskTime {
    if (g < NB) return bo.tasks[g];
    const uint32_t k = step_of(g), i = rel_of(g);
    if (!tpl.IsContext(i) && k + 1 < N) {
      const Ps shift = static_cast<Ps>(k - H) * P;
      return TaskTime{base[i].start_ps + shift, base[i].end_ps + shift};
    }
    if (cached_step != k) {
      predict(base, H, k, tc);  // checked when the step was composed
      if (k + 1 >= N) tail_at(k, tc);
      cached_step = k;
    }
    return tc[i];
  };
  std::map<uint32_t, std::vector<TaskTime>> observed;
  for (uint32_t k = H + 3; k <= N; ++k) {
    if (!times_at(k))
      return fail("attention of decode step " + std::to_string(k) + " would delay another task");
    if (k >= N - 1) tail_at(k, tk);
    busy.Flush(tk.empty() ? 0 : min_start + static_cast<Ps>(k - H) * P);
    std::string reason;
    if (!compose.Add(k, tk, &reason)) return fail(reason);
    for (uint32_t m : waits_on_attention) {
      Ps ready = 0;
      for (uint32_t d : tp.deps(m)) ready = std::max(ready, tk[d].end_ps);
      for (const auto& [off, rr] : ext[m]) ready = std::max(ready, time_of(gid(k - off, rr)).end_ps);
      Ps& q = bo.channels[tp.memory(m).channel].max_queue_ps;
      q = std::max(q, tk[m].start_ps - ready);
    }
    const uint64_t id0 = NB + uint64_t{k - H - 3} * n;
    for (size_t i = 0; i < n; ++i)
      if (tk[i].end_ps > total) total = tk[i].end_ps, last_task = id0 + i;
    if (opts.keep_task_times) AddTaskTimings(tp, tk, 0, id0, &res);
    if (view && std::binary_search(opts.observe_steps.begin(), opts.observe_steps.end(), k)) observed[k] = tk;
    if (opts.on_count) opts.on_count(k, N, "decode steps");
  }
  // B's op rows of steps H + 3 .. are not there; steps H + 1 and H + 2 are (one row each).
  compose.FinishSteps(N);
  // The critical path, walked back over the whole run (sim::CriticalPath's rule).
  // Queue predecessors (by start, then id) of a step's tasks, as (step offset, task): from the
  // run's times over steps 0 .. H + 4, the same for steps H + 1 and H + 2.
  std::vector<int64_t> pred_b(NB, -1);  // B's tasks (steps <= H): the predecessor's id
  std::vector<std::pair<int32_t, int32_t>> pred_rel(n, {0, -1});
  {
    std::map<int64_t, std::vector<std::pair<Ps, uint64_t>>> queues;  // core >= 0, -1 - channel
    const uint64_t upto = gid(H + 4, 0) + n;
    for (uint64_t g = 0; g < upto; ++g) {
      const uint32_t i = rel_of(g);
      const Program& p = g < NB ? B : tp;
      const size_t at = g < NB ? static_cast<size_t>(g) : i;
      if (p.kind(at) == TaskKind::kCompute) queues[p.core(at)].emplace_back(time_of(g).start_ps, g);
      if (p.kind(at) == TaskKind::kMemory)
        queues[-1 - int64_t{p.memory(at).channel}].emplace_back(time_of(g).start_ps, g);
    }
    std::vector<std::pair<int32_t, int32_t>> other(n, {0, -1});
    for (auto& [q, v] : queues) {
      std::sort(v.begin(), v.end());
      for (size_t j = 1; j < v.size(); ++j) {
        const uint64_t g = v[j].second, pg = v[j - 1].second;
        const uint32_t s = step_of(g);
        if (s <= H) pred_b[g] = static_cast<int64_t>(pg);
        const std::pair<int32_t, int32_t> rel{static_cast<int32_t>(step_of(pg)) - static_cast<int32_t>(s),
                                              static_cast<int32_t>(rel_of(pg))};
        if (s == H + 1) pred_rel[rel_of(g)] = rel;
        if (s == H + 2) other[rel_of(g)] = rel;
      }
    }
    if (other != pred_rel) return fail("the queues' order is not periodic");
  }
  // Near the end, the queues' order is not the periodic one: explicit over steps N - 5 .. N
  // (the steps before N - 3 see nothing of the tail: tasks of step s + 3 start after step s's).
  std::map<uint64_t, int64_t> pred_tail;
  const uint32_t tail_from = std::max<uint32_t>(H + 3, N - 5);
  {
    std::map<int64_t, std::vector<std::pair<Ps, uint64_t>>> queues;
    for (uint64_t g = gid(tail_from, 0); g < gid(N, 0) + n; ++g) {
      const uint32_t i = rel_of(g);
      if (tp.kind(i) == TaskKind::kCompute) queues[tp.core(i)].emplace_back(time_of(g).start_ps, g);
      if (tp.kind(i) == TaskKind::kMemory)
        queues[-1 - int64_t{tp.memory(i).channel}].emplace_back(time_of(g).start_ps, g);
    }
    for (auto& [q, v] : queues) {
      std::sort(v.begin(), v.end());
      for (size_t j = 1; j < v.size(); ++j)
        if (step_of(v[j].second) >= tail_from + 2)
          pred_tail[v[j].second] = static_cast<int64_t>(v[j - 1].second);
    }
  }
  auto pred_of = [&](uint64_t g) -> int64_t {
    const uint32_t s = step_of(g);
    if (s <= H) return pred_b[g];
    if (s >= tail_from + 2) {
      auto it = pred_tail.find(g);
      if (it != pred_tail.end()) return it->second;
    }
    const auto [off, rel] = pred_rel[rel_of(g)];
    if (rel < 0) return -1;
    return static_cast<int64_t>(
        gid(static_cast<uint32_t>(static_cast<int32_t>(s) + off), static_cast<uint32_t>(rel)));
  };
  std::vector<uint64_t> deps;
  auto deps_of = [&](uint64_t g) {
    deps.clear();
    if (step_of(g) <= H + 2) {
      for (uint32_t d : B.deps(static_cast<size_t>(g))) deps.push_back(d);
      return;
    }
    const uint32_t k = step_of(g), i = rel_of(g);
    for (const auto& [off, rr] : ext[i]) deps.push_back(gid(k - off, rr));
    for (uint32_t d : tp.deps(i)) deps.push_back(gid(k, d));
  };
  Ps by_kind[3] = {0, 0, 0};
  {
    uint64_t cur = last_task;
    Ps same_end = std::numeric_limits<Ps>::min();
    std::vector<uint64_t> seen;  // visited tasks that end at same_end
    for (;;) {
      const TaskTime tc = time_of(cur);
      if (tc.end_ps != same_end) same_end = tc.end_ps, seen.clear();
      if (std::find(seen.begin(), seen.end(), cur) != seen.end()) break;
      seen.push_back(cur);
      int64_t best = -1;
      Ps best_end = 0;
      auto consider = [&](int64_t c) {
        if (c < 0) return;
        const Ps ce = time_of(static_cast<uint64_t>(c)).end_ps;
        if (ce > tc.end_ps) return;
        if (best < 0 || ce > best_end || (ce == best_end && c < best)) best = c, best_end = ce;
      };
      deps_of(cur);
      for (uint64_t d : deps) consider(static_cast<int64_t>(d));
      consider(pred_of(cur));
      by_kind[PathKind(cur < NB ? B : tp, cur < NB ? static_cast<size_t>(cur) : rel_of(cur))] +=
          PathPart(tc.end_ps, best >= 0 ? &best_end : nullptr);
      if (best < 0) break;
      cur = static_cast<uint64_t>(best);
    }
  }
  tot.path = {by_kind[0], by_kind[1], by_kind[2]};
  tot.total = total;
  tot.links = bo.links;
  tot.channels = bo.channels;
  AddStepsUse(step_out, reused, &tot.links, &tot.channels);
  FinishResult(chip, tot, &res);
  compose.FinishEnergy(chip);
  if (view && !opts.observe_steps.empty())
    *view =
        SampleComposed(e, chip, opts.observe_steps, bo.tasks, bB, observed, tot.links, tot.channels, total);
  RunOutput out;
  out.result = std::move(res);
  out.program = std::move(B);
  return out;
}

}  // namespace tpsim::sim
