#include "sim/step_rolling.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mapping/cost.h"
#include "mapping/mapping.h"
#include "sim/analytical/analytical.h"
#include "sim/engine.h"
#include "sim/result.h"
#include "sim/schedule.h"
#include "sim/step_period.h"
#include "sim/step_stream.h"

namespace tpsim::sim {

namespace {

using mapping::Program;
using mapping::TaskKind;

// Decode steps handed from the schedule (one thread) to their composition (another), in order:
// Ran(k) once step k's tasks have all ended, with its horizon; Took() once it is composed. A
// side is woken only when it waits (a wake is a system call), the composition once kBatch
// steps wait for it, the schedule waits for a room, or the last step ran.
class StepHandoff {
 public:
  // `last`: no step follows (the composition is woken whatever it has to do).
  void Ran(uint32_t k, Ps horizon, bool last) {
    std::lock_guard<std::mutex> lock(m_);
    ran_.emplace_back(k, horizon);
    last_ran_ = k;
    if (composer_waits_ && (last || ran_.size() >= kBatch)) composer_cv_.notify_one();
  }
  // The composition: step k (the next) if it has run, without waiting.
  bool TryRan(uint32_t k, Ps* horizon) {
    std::lock_guard<std::mutex> lock(m_);
    if (ran_.empty() || ran_.front().first != k) return false;
    *horizon = ran_.front().second;
    ran_.pop_front();
    return true;
  }
  // The composition: waits for step k (the next); false when stopped.
  bool WaitRan(uint32_t k, Ps* horizon) {
    std::unique_lock<std::mutex> lock(m_);
    composer_waits_ = true;
    composer_cv_.wait(lock, [&] { return stop_ || (!ran_.empty() && ran_.front().first == k); });
    composer_waits_ = false;
    if (stop_) return false;
    *horizon = ran_.front().second;
    ran_.pop_front();
    return true;
  }
  void Took() {
    std::lock_guard<std::mutex> lock(m_);
    if (schedule_waits_) schedule_cv_.notify_one();
  }
  // The schedule: waits until `run` has step k taken, when step k was handed over (else it
  // never will be: no wait); false when stopped.
  bool WaitTaken(const StepStream& run, uint32_t k) {
    std::unique_lock<std::mutex> lock(m_);
    if (composer_waits_ && !ran_.empty()) composer_cv_.notify_one();
    schedule_waits_ = true;
    schedule_cv_.wait(lock, [&] { return stop_ || k > last_ran_ || run.taken() >= k; });
    schedule_waits_ = false;
    return !stop_;
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
    stopped_.store(true, std::memory_order_relaxed);
    composer_cv_.notify_one();
    schedule_cv_.notify_one();
  }
  bool stopped() const { return stopped_.load(std::memory_order_relaxed); }

 private:
  static constexpr size_t kBatch = 4;
  std::mutex m_;
  std::condition_variable composer_cv_, schedule_cv_;
  std::deque<std::pair<uint32_t, Ps>> ran_;
  uint32_t last_ran_ = 0;
  bool stop_ = false, composer_waits_ = false, schedule_waits_ = false;
  std::atomic<bool> stopped_{false};
};

}  // namespace

std::optional<RunOutput> RunRolling(const Experiment& e, const arch::Chip& chip, Engine& engine,
                                    const RunOptions& opts, const StepTemplate& tpl,
                                    const EngineOutput& step_out, StepHead& head, std::string* why,
                                    SampledRun* view, const PlanSwitch* plan) {
  auto fail = [&](const std::string& reason) -> std::optional<RunOutput> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (!engine.ListSchedule()) return fail("the " + engine.name() + " engine does not list its schedule");
  const config::Workload& wl = e.cfg.workload();
  const uint32_t N = wl.decode_steps(), HB = kPeriodHead + 2;
  if (N <= HB + 1) return fail("fewer than " + std::to_string(HB + 2) + " decode steps");
  const Program& tp = tpl.program();
  const size_t n = tp.num_tasks();
  Program& B = head.program;  // the prefill and steps 1 .. HB (LowerStepHead)
  const std::vector<size_t>& bB = head.begin;
  std::string reason;
  const size_t NB = B.num_tasks();
  // B's queues and flows, on a second thread where one is allowed while this one makes the
  // template's and its shape and B's dependents (wafer-32x32-qwen3-32b: a head of 10.8 million
  // tasks).
  std::future<LinkedProgram> qb_made = std::async(
      UseSpareThread(NB) ? std::launch::async : std::launch::deferred, [&] { return LinkProgram(B, chip); });
  const LinkedProgram qt = LinkProgram(tp, chip);
  if (qt.in_switch) return fail("in-switch transfers");

  // Deps on the steps before, as (steps back, task of that step), the same from step 3 on.
  StepDeps ext = head.deps;  // sorted below, with the dependents
  const uint32_t L = head.steps_back;
  if (plan && !plan->before) plan = nullptr;
  if (plan) {
    // A memory plan that changes at decode step plan->from: the head's steps and the steps
    // before it are plan->before's tasks; the schedule runs the template's, those it lacks
    // masked (StepStream::set_masked). Its deps on the steps before, in the template's tasks.
    if (plan->from <= HB + 1) return fail("the plan changes within the head's steps");
    if (plan->from >= N) return fail("the plan changes at the last step");
    if (view && !opts.observe_steps.empty()) return fail("sampled steps where the plan changes");
    ext = plan->InTemplate(ext, n);
  }
  if (L == 0 || L + 3 > HB) return fail("decode steps depend on " + std::to_string(L) + " steps before them");

  // The template's tasks as the schedule reads them.
  StepShape shape;
  shape.p = &tp;
  shape.task.resize(n);
  shape.duration = qt.duration;
  shape.busy = qt.busy;
  shape.flows = &qt.model.flows;
  for (StepShape::Task& t : shape.task) {
    t.flow_kind = t.step_flow = -1;
    t.context = false;
  }
  if (plan) {
    shape.head_rel.assign(n, -1);
    for (size_t j = 0; j < plan->b_of_a.size(); ++j)
      shape.head_rel[plan->b_of_a[j]] = static_cast<int32_t>(j);
  }
  for (size_t f = 0; f < qt.model.task.size(); ++f)
    shape.task[qt.model.task[f]].flow_kind =
        static_cast<int32_t>(qt.model.flows.kind(static_cast<uint32_t>(f)));
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> ext_dep(n);  // (steps on, task)
  std::vector<std::vector<uint32_t>> dependents(n);
  for (uint32_t i = 0; i < n; ++i) {
    StepShape::Task& t = shape.task[i];
    const Queue q = t.queue = QueueOf(tp.kind(i), qt.first_link, i);
    t.resource = q == Queue::kCompute ? tp.core(i)
                 : q == Queue::kDram  ? static_cast<int32_t>(tp.memory(i).channel)
                 : q == Queue::kLink  ? qt.first_link[i]
                                      : -1;
    t.path_kind = static_cast<uint8_t>(PathKind(tp, i));
    t.compute = tp.kind(i) == TaskKind::kCompute;
    if (tp.deps(i).empty() && ext[i].empty())
      return fail("a decode step's task waits on nothing (task " + std::to_string(i) + " of the template, " +
                  tp.ops[tp.op(i)].ref.op + ")");
    for (uint32_t d : tp.deps(i)) dependents[d].push_back(i);
    for (const auto& [off, rr] : ext[i]) ext_dep[rr].emplace_back(off, i);
  }
  // The tasks whose durations are each step's own, and among them KV reads over links: flows
  // whose bytes are each step's own.
  for (uint32_t i : tpl.context_tasks()) {
    shape.task[i].context = true;
    if (tp.kind(i) == TaskKind::kMemory && shape.task[i].flow_kind >= 0) {
      shape.task[i].step_flow = static_cast<int32_t>(shape.step_flows.size());
      shape.step_flows.push_back(i);
    }
  }
  FlattenSorted(ext, &shape.ext, &shape.ext_begin);
  FlattenSorted(ext_dep, &shape.ext_dep, &shape.ext_dep_begin);
  FlattenSorted(dependents, &shape.dependents, &shape.dep_begin);

  // Each step's durations and busy times (attention's and KV reads' at its context).
  const std::vector<uint32_t>& ctx = tpl.context_tasks();
  // A KV read over links enters its path as the engine's memory flows do (AddMemoryKind).
  auto costs_of = [&](uint32_t k, std::vector<Ps>* duration, std::vector<Ps>* busy,
                      std::vector<StepFlow>* flows) {
    const std::span<const uint8_t> lacks = plan ? plan->Lacks(k) : std::span<const uint8_t>();
    tpl.CostsAt(k, *duration, *busy, lacks);
    for (size_t j = 0; j < shape.step_flows.size(); ++j) {
      const uint32_t i = shape.step_flows[j];
      if (!lacks.empty() && lacks[i]) continue;
      const auto route = qt.model.flows.kind_resources(static_cast<uint32_t>(shape.task[i].flow_kind));
      StepFlow& f = (*flows)[j];
      f.bytes = tpl.MemoryBytesIn(i, k);
      f.inject = chip.channels()[tp.memory(i).channel].latency_ps;
      f.holds.resize(route.size());
      f.lags.resize(route.size());
      for (size_t h = 0; h < route.size(); ++h) {
        // A hop as fast as the one before holds and lags alike (a division each, per hop and
        // step, was 4% of the reference's 32,768 steps).
        if (h > 0 && qt.model.flows.gbps(route[h]) == qt.model.flows.gbps(route[h - 1])) {
          f.holds[h] = f.holds[h - 1];
          f.lags[h] = f.lags[h - 1];
          continue;
        }
        f.holds[h] = qt.model.flows.HoldOf(f.bytes, route[h]);
        f.lags[h] = qt.model.flows.LagOf(f.bytes, (*busy)[i], route[h]);
      }
    }
  };
  const int cores = chip.num_cores();
  const size_t num_channels = chip.channels().size(), num_links = chip.links().size();
  // B's dependents, for this schedule and the one without queues on links (made below).
  std::shared_ptr<const StepStream::HeadDependents> head_deps = StepStream::DependentsOf(shape, B, bB, L, N);
  const LinkedProgram qb = qb_made.get();
  if (qb.in_switch) return fail("in-switch transfers");
  LinkReservation reservation(qb.model, NB);
  // The steps composed on a second thread (below), which the schedule waits for: a fixed
  // ring; else each step is composed as it ends, on this thread.
  const bool compose_aside = UseSpareThread(uint64_t{N - HB} * n);
  StepStream run(shape, B, qb, bB, L, N, cores, num_channels, num_links, &reservation, true, costs_of,
                 head_deps, compose_aside ? StepStream::Ring::kFixed : StepStream::Ring::kGrowing);
  run.set_replay(opts.step_replay);
  if (plan) run.set_masked(plan->from, plan->masked);
  // The schedule stopped: past the clock the unrolled Program would stop too (TimeOverflowError).
  auto stopped = [&](const std::string& reason) {
    if (run.overflow()) ThrowStepOverflow(*run.overflow(), B, tp, chip);
    return fail(reason);
  };
  // The schedule without queues on links, for the contention indicator when a flow waits:
  // its makespan, a step at a time (Step), on the thread that composes the steps where there
  // is one (it runs a step whenever the next step to compose has not run yet), else on a
  // second core of its own, else after the run.
  struct Unloaded {
    StepStream u;
    uint32_t next;  // the next segment to run
    const uint32_t last;
    std::string why;
    bool failed = false;
    bool done() const { return failed || next > last; }
    void Step() {
      if (!u.RunUntil(next, &why)) {
        failed = true;
        return;
      }
      u.Take(next++);
    }
    // Runs the rest; `stop`: give up (the run failed, nobody waits for it).
    std::optional<Ps> Finish(const std::atomic<bool>& stop) {
      while (!done() && !stop.load(std::memory_order_relaxed)) Step();
      if (failed || !done()) return std::nullopt;
      return u.total();
    }
  };
  // Its steps are taken as they end, on one thread: a ring that grows as needed.
  auto make_unloaded = [&] {
    std::unique_ptr<Unloaded> x(
        new Unloaded{StepStream(shape, B, qb, bB, L, N, cores, num_channels, num_links, nullptr, false,
                                costs_of, head_deps, StepStream::Ring::kGrowing),
                     HB,
                     N,
                     {},
                     false});
    x->u.set_replay(opts.step_replay);
    x->u.DropHeadTimes();  // only its makespan is read
    if (plan) x->u.set_masked(plan->from, plan->masked);
    return x;
  };
  // `stop`: the run failed, nobody waits for the schedule without queues (a future's
  // destructor joins its thread).
  std::atomic<bool> stop{false};
  std::unique_ptr<Unloaded> unloaded;
  std::future<std::optional<Ps>> unloaded_alone;
  const bool alone = !compose_aside && UseSpareThread(NB + uint64_t{N - HB} * n);
  {
    // Made on a second thread while this one runs B (both only read what they share).
    std::future<std::unique_ptr<Unloaded>> made;
    if (compose_aside || alone) made = std::async(std::launch::async, make_unloaded);
    if (!run.RunUntil(HB, &reason)) return stopped(reason);
    if (made.valid()) unloaded = made.get();
  }
  if (alone) unloaded_alone = std::async(std::launch::async, [&] { return unloaded->Finish(stop); });
  // A schedule made after this (the run's end) makes its own: this one goes once both have
  // ended B.
  head_deps.reset();
  struct StopOnExit {
    std::atomic<bool>& stop;
    ~StopOnExit() { stop = true; }
  } stop_on_exit{stop};

  // The Result: B's (its tasks' times in the whole run), then step by step. The engine's run of
  // B alone is read by nothing else from here on: its times' room takes the stream's (on
  // wafer-32x32-qwen3-32b, 10,817,472 tasks x 16 B that a copy would add).
  EngineOutput bo = std::move(head.timing);
  bo.tasks.assign(run.head_times().begin(), run.head_times().end());
  for (ChannelUsage& c : bo.channels) c.max_queue_ps = 0;
  AddChannelWaits(B, bo.tasks, &bo.channels);
  run.DropHeadTimes();  // bo.tasks has them
  // B's Result, then each step added: made on the thread that composes the steps, while this
  // one runs the first steps.
  std::optional<StepComposer> composer_made;
  auto make_composer = [&] { composer_made.emplace(e, chip, engine, opts, tpl, head, bo, plan); };
  std::vector<ChannelUsage> channel_use = bo.channels;
  const uint64_t reused = N - HB;
  std::map<uint32_t, std::vector<TaskTime>> observed;
  // KV reads from DRAM (StepTemplate::context_memory): the template's and the run's.
  std::vector<ChannelUsage> kv_template(num_channels), kv_run(num_channels);
  for (uint32_t x : ctx)
    if (tp.kind(x) == TaskKind::kMemory) {
      kv_template[tp.memory(x).channel].bytes += tp.memory(x).bytes;
      kv_template[tp.memory(x).channel].busy_ps += qt.busy[x];
    }
  // And over links (the engine's LinkUsage: bytes, and their serialisation at each link's rate).
  std::vector<LinkUsage> kv_links_template(num_links), kv_links_run(num_links);
  auto add_kv_links = [&](uint32_t i, uint64_t bytes, std::vector<LinkUsage>* use) {
    for (int l : qt.model.flows.kind_resources(static_cast<uint32_t>(shape.task[i].flow_kind))) {
      (*use)[l].bytes += bytes;
      (*use)[l].busy_ps += mapping::SerialisationPs(bytes, chip.links()[l].bandwidth_gbps);
    }
  };
  for (uint32_t i : shape.step_flows) add_kv_links(i, tp.memory(i).bytes, &kv_links_template);
  std::vector<uint32_t> memory_tasks;
  for (uint32_t i = 0; i < n; ++i)
    if (tp.kind(i) == TaskKind::kMemory) memory_tasks.push_back(i);
  // Step k into the Result, after the steps before it; `horizon`: no task of a later step
  // starts before it (StepStream::Horizon once step k ended).
  auto compose_step = [&](uint32_t k, Ps horizon, std::string* why) {
    // The tasks step k lacks before the plan changes (none without `plan`).
    const std::span<const uint8_t> lacks_of = plan ? plan->Lacks(k) : std::span<const uint8_t>();
    auto lacks = [&](uint32_t i) { return !lacks_of.empty() && lacks_of[i]; };
    for (uint32_t x : ctx)
      if (tp.kind(x) == TaskKind::kMemory && !lacks(x)) {
        kv_run[tp.memory(x).channel].bytes += tpl.MemoryBytesIn(x, k);
        kv_run[tp.memory(x).channel].busy_ps += run.busy(k, x);
      }
    for (uint32_t i : shape.step_flows)
      if (!lacks(i)) add_kv_links(i, tpl.MemoryBytesIn(i, k), &kv_links_run);
    const std::span<const TaskTime> tk = run.times(k);
    for (uint32_t i : memory_tasks) {
      if (lacks(i)) continue;
      Ps& q = channel_use[tp.memory(i).channel].max_queue_ps;
      q = std::max(q, tk[i].start_ps - run.ready(k, i));
    }
    StepComposer& compose = *composer_made;
    if (!compose.Add(k, tk, why)) return false;
    if (opts.keep_task_times) compose.AddTaskRecords(k, tk, NB, HB);
    if (view && std::binary_search(opts.observe_steps.begin(), opts.observe_steps.end(), k))
      observed[k].assign(tk.begin(), tk.end());
    // A core's intervals that start before every task not added yet can be merged for good.
    compose.busy().Flush(horizon);
    run.Take(k);
    return true;
  };
  std::optional<Ps> unloaded_total;  // the composer's, where it ran the schedule without queues
  if (compose_aside) {
    // The composition on a thread of its own, a step behind the schedule (which waits for a
    // step's composition before it reuses the step's room); while the next step has not run,
    // that thread runs the schedule without queues on links.
    // A side that fails or throws stops the other (the guard, destroyed before the future,
    // whose destructor joins the thread); the composer's exception is rethrown by get().
    StepHandoff handoff;
    run.set_wait_for_take([&](uint32_t k) { return handoff.WaitTaken(run, k); });
    std::string compose_why;
    auto composer = std::async(std::launch::async, [&] {
      try {
        make_composer();
        for (uint32_t k = HB + 1; k <= N; ++k) {
          Ps horizon = 0;
          bool got = false;
          while (!unloaded->done() && !handoff.stopped() && !(got = handoff.TryRan(k, &horizon)))
            unloaded->Step();
          if (!got && !handoff.WaitRan(k, &horizon)) return;
          if (!compose_step(k, horizon, &compose_why)) return handoff.Stop();
          handoff.Took();
        }
        unloaded_total = unloaded->Finish(stop);
      } catch (...) {
        handoff.Stop();
        throw;
      }
    });
    struct StopOnExit {
      StepHandoff& handoff;
      ~StopOnExit() { handoff.Stop(); }
    } stop_composer{handoff};
    bool ran = true;
    for (uint32_t k = HB + 1; k <= N && ran && !handoff.stopped(); ++k) {
      ran = run.RunUntil(k, &reason);
      if (ran) handoff.Ran(k, run.Horizon(k), k == N);
      if (ran && opts.on_count) opts.on_count(k, N, "decode steps");
    }
    if (!ran) handoff.Stop();
    composer.get();
    run.set_wait_for_take(nullptr);
    if (!compose_why.empty()) return fail(compose_why);
    if (!ran) return stopped(reason);
  } else {
    make_composer();
    for (uint32_t k = HB + 1; k <= N; ++k) {
      if (!run.RunUntil(k, &reason)) return stopped(reason);
      if (!compose_step(k, run.Horizon(k), &reason)) return fail(reason);
      if (opts.on_count) opts.on_count(k, N, "decode steps");
    }
  }
  if (opts.replay_stats) *opts.replay_stats = {true, run.replayed(), run.rollbacks()};
  StepComposer& compose = *composer_made;
  config::Result& res = compose.result();
  RunTotals& tot = compose.totals();
  compose.FinishSteps(N);
  const Ps total = run.total();
  tot.path = run.path();
  tot.total = total;
  tot.links = bo.links;  // B's, as the engine counted them
  for (size_t l = 0; l < tot.links.size() && l < reservation.max_wait().size(); ++l)
    tot.links[l].max_queue_ps = reservation.max_wait()[l];
  tot.channels = std::move(channel_use);
  AddStepsUse(step_out, reused, &tot.links, &tot.channels);
  for (size_t c = 0; c < tot.channels.size(); ++c) {
    // The template's KV reads, each step's at its context instead (unsigned: modulo 2^64).
    tot.channels[c].bytes += kv_run[c].bytes - kv_template[c].bytes * reused;
    tot.channels[c].busy_ps += kv_run[c].busy_ps - kv_template[c].busy_ps * static_cast<Ps>(reused);
  }
  for (size_t l = 0; l < tot.links.size() && l < kv_links_run.size(); ++l) {
    tot.links[l].bytes += kv_links_run[l].bytes - kv_links_template[l].bytes * reused;
    tot.links[l].busy_ps += kv_links_run[l].busy_ps - kv_links_template[l].busy_ps * static_cast<Ps>(reused);
  }
  FinishResult(chip, tot, &res);
  // Where no flow waited, the schedule without queues on links is this one.
  std::optional<Ps> free = total;
  if (compose_aside) {
    free = unloaded_total;
  } else if (unloaded_alone.valid()) {
    free = unloaded_alone.get();
  } else if (run.delayed()) {
    unloaded = make_unloaded();
    free = unloaded->Finish(stop);
  }
  if (!free) return fail(unloaded->why + " (without queues on links)");
  res.mutable_summary()->set_contention(ContentionIndicator(total, run.delayed() ? *free : total));
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
