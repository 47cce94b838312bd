#include "sim/step_streamed.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "mapping/mapping.h"
#include "sim/engine.h"
#include "sim/result.h"
#include "sim/step_compose.h"
#include "sim/step_period.h"
#include "sim/step_reuse.h"
#include "sim/step_source.h"
#include "sim/step_template.h"

namespace tpsim::sim {

namespace {

using mapping::Program;
using mapping::TaskKind;

}  // namespace

std::optional<RunOutput> RunStreamed(const Experiment& e, const arch::Chip& chip, Engine& engine,
                                     const RunOptions& opts, std::string* why, SampledRun* view) {
  auto fail = [&](const std::string& reason) -> std::optional<RunOutput> {
    if (why) *why = reason;
    return std::nullopt;
  };
  const config::Workload& wl = e.cfg.workload();
  const uint32_t N = wl.decode_steps(), HB = kStreamHeadSteps, first = kHeadSteps + 1;
  if (N < HB + 2) return fail("fewer than " + std::to_string(HB + 2) + " decode steps");
  // The template (decode step `first` alone), checked against the last step alone, and the
  // head B, whose steps 2 .. HB are checked against it (as sim/step_reuse.cc's).
  // Where the memory plan changes once (attention spilling from some step on), the steps are
  // the later template's, those before the change lacking its spills (sim/step_period.h
  // PlanChange), and the head is lowered with the earlier one.
  const Program step = LowerStep(e, chip, first), last = LowerStep(e, chip, N);
  StepTemplate one(step, chip, DtypeBytes(wl.dtype()), e.cfg.model().head_dim());
  std::string reason;
  std::unique_ptr<PlanChange> pc;
  if (!one.Classify(last, first, N, &reason)) {
    if (step.num_tasks() == last.num_tasks()) return fail(reason);
    pc = FindPlanChange(e, chip, step, last, first, N, &reason);
    if (!pc) return fail(reason);
    if (pc->plan.from <= HB + 1) return fail(reason + ": the plan changes within the head's steps");
    // A sampled step before the change is its own tasks, not the template's (as step by step).
    if (view && !opts.observe_steps.empty()) return fail(reason + ": sampled steps where the plan changes");
  }
  const StepTemplate& tpl = pc ? *pc->b : one;
  const PlanSwitch* plan = pc ? &pc->plan : nullptr;
  const Program& tp = tpl.program();
  std::optional<StepHead> head = LowerStepHead(e, chip, nullptr, pc ? *pc->a : one, &reason, HB);
  if (!head) return fail(reason);
  Program& B = head->program;
  const size_t n = tp.num_tasks(), NB = B.num_tasks();

  StepSource src;
  src.head = &B;
  src.head_begin = head->begin;
  src.step = &tp;
  src.head_steps = HB;
  src.steps = N;
  if (plan) {
    src.masked_from = plan->from;
    src.masked = plan->masked;
  }
  {
    // The head's deps on the steps before, in the template's tasks.
    StepDeps ext = plan ? plan->InTemplate(head->deps, n) : head->deps;
    ext.resize(n);
    StepDeps ext_dep(n);
    for (uint32_t i = 0; i < ext.size(); ++i)
      for (const auto& [off, j] : ext[i]) ext_dep[j].emplace_back(off, i);
    FlattenSorted(ext, &src.ext, &src.ext_begin);
    FlattenSorted(ext_dep, &src.ext_dep, &src.ext_dep_begin);
  }
  src.context.assign(n, 0);
  for (uint32_t i : tpl.context_tasks()) src.context[i] = 1;
  std::vector<Ps> busy_room(n);  // CostsAt's channel times, which the engine works out itself
  src.at = [&](uint32_t k, std::span<Ps> duration, std::span<uint64_t> bytes) {
    const std::span<const uint8_t> lacks = plan ? plan->Lacks(k) : std::span<const uint8_t>();
    tpl.CostsAt(k, duration, busy_room, lacks);
    for (uint32_t i : tpl.context_tasks())
      if (tp.kind(i) == TaskKind::kMemory && (lacks.empty() || !lacks[i])) bytes[i] = tpl.MemoryBytesIn(i, k);
  };

  // The Result: B's once its tasks have ended (their times in the whole run), then step by step.
  EngineOutput bo;
  bo.links.resize(chip.links().size());
  bo.channels.resize(chip.channels().size());
  std::unique_ptr<StepComposer> compose;
  std::map<uint32_t, std::vector<TaskTime>> observed;
  // The engine calls on_head, on_step and at inside its simulation; what they throw comes out of
  // RunSteps as itself (Engine::RunSteps).
  src.on_head = [&](std::span<const TaskTime> t, std::string*) {
    bo.tasks.assign(t.begin(), t.end());
    for (const TaskTime& x : t) bo.makespan_ps = std::max(bo.makespan_ps, x.end_ps);
    compose = std::make_unique<StepComposer>(e, chip, engine, opts, tpl, *head, bo, plan);
    return true;
  };
  auto compose_step = [&](uint32_t k, std::span<const TaskTime> t, Ps horizon, std::string* no) {
    if (!compose->Add(k, t, no)) return false;
    if (opts.keep_task_times) compose->AddTaskRecords(k, t, NB, HB);
    if (view && std::binary_search(opts.observe_steps.begin(), opts.observe_steps.end(), k))
      observed[k].assign(t.begin(), t.end());
    // A core's intervals that start before every task not added yet can be merged for good.
    compose->busy().Flush(horizon);
    return true;
  };
  // With a spare core (sim::UseSpareThread) the steps are composed on a thread of their own:
  // the engine's thread hands each step's times over (a copy: it reuses the step's room) and
  // goes on, at most kAhead steps ahead.
  constexpr size_t kAhead = 8;
  struct Handed {
    uint32_t k;
    Ps horizon;
    std::vector<TaskTime> t;
  };
  std::mutex m;
  std::condition_variable cv;
  std::deque<Handed> handed;
  std::vector<std::vector<TaskTime>> spare;  // rooms of steps composed
  bool finished = false, failed = false;
  std::string compose_why;
  std::exception_ptr thrown;
  const bool aside = UseSpareThread(uint64_t{N - HB} * n);
  std::future<void> composer;
  if (aside)
    composer = std::async(std::launch::async, [&] {
      for (;;) {
        Handed h;
        {
          std::unique_lock<std::mutex> lock(m);
          cv.wait(lock, [&] { return finished || !handed.empty(); });
          if (handed.empty()) return;
          h = std::move(handed.front());
          handed.pop_front();
        }
        cv.notify_all();
        std::string no;
        bool ok = false;
        try {
          ok = compose_step(h.k, h.t, h.horizon, &no);
        } catch (...) {
          thrown = std::current_exception();
        }
        std::lock_guard<std::mutex> lock(m);
        if (!ok) {
          compose_why = no;
          failed = true;
          cv.notify_all();
          return;
        }
        spare.push_back(std::move(h.t));
      }
    });
  // Whatever way this function leaves, the composition stops before its thread is joined.
  struct StopOnExit {
    std::mutex& m;
    std::condition_variable& cv;
    bool& finished;
    ~StopOnExit() {
      {
        std::lock_guard<std::mutex> lock(m);
        finished = true;
      }
      cv.notify_all();
    }
  } stop_composer{m, cv, finished};
  // Step k composed here, or handed to the composition's thread.
  src.on_step = [&](uint32_t k, std::span<const TaskTime> t, Ps horizon, std::string* no) {
    if (opts.on_count) opts.on_count(k, N, "decode steps");
    if (!aside) return compose_step(k, t, horizon, no);
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return failed || handed.size() < kAhead; });
    if (failed) {
      *no = "the composition stopped";
      return false;
    }
    std::vector<TaskTime> room;
    if (!spare.empty()) {
      room = std::move(spare.back());
      spare.pop_back();
    }
    room.assign(t.begin(), t.end());
    handed.push_back(Handed{k, horizon, std::move(room)});
    cv.notify_all();
    return true;
  };
  StepsOutput so;
  const bool ran = engine.RunSteps(src, chip, &so, &reason);
  if (aside) {
    {
      std::lock_guard<std::mutex> lock(m);
      finished = true;
    }
    cv.notify_all();
    composer.get();
    if (thrown) std::rethrow_exception(thrown);
    if (failed) return fail(compose_why);
  }
  // Past the clock the unrolled Program would stop too (TimeOverflowError), not fall back to it.
  if (!ran && so.overflow) ThrowStepOverflow(*so.overflow, B, *src.step, chip);
  if (!ran) return fail(reason);
  if (so.makespan_ps >= std::numeric_limits<Ps>::max()) return fail("a time passes the 2^63 ps clock");

  config::Result& res = compose->result();
  compose->FinishSteps(N);
  RunTotals& tot = compose->totals();
  tot.path = so.path;
  tot.total = so.makespan_ps;
  tot.links = std::move(so.links);
  tot.channels = std::move(so.channels);
  FinishResult(chip, tot, &res);
  compose->FinishEnergy(chip);
  if (view && !opts.observe_steps.empty())
    *view = SampleComposed(e, chip, opts.observe_steps, bo.tasks, head->begin, observed, tot.links,
                           tot.channels, tot.total);
  RunOutput out;
  out.result = std::move(res);
  out.program = std::move(B);
  return out;
}

}  // namespace tpsim::sim
