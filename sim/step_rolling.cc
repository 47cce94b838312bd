#include "sim/step_rolling.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mapping/mapping.h"
#include "sim/analytical/analytical.h"
#include "sim/engine.h"
#include "sim/result.h"
#include "sim/schedule.h"
#include "sim/step_energy.h"
#include "sim/step_period.h"

namespace tpsim::sim {

namespace {

using mapping::Program;
using mapping::TaskKind;

constexpr Ps kMaxPs = std::numeric_limits<Ps>::max();
constexpr uint64_t kNoTask = std::numeric_limits<uint64_t>::max();

Ps SatAdd(Ps a, Ps b) {
  Ps r;
  return __builtin_add_overflow(a, b, &r) ? kMaxPs : r;
}

// The template's tasks as the schedule reads them: queue, resource, busy time, kind of flow,
// deps on the steps before (CSR) and the dependents there (CSR), in-step dependents (CSR),
// the kind each counts to on the critical path.
struct StepShape {
  const Program* p = nullptr;
  std::vector<Queue> queue;
  std::vector<int32_t> resource;
  const FlowSet* flows = nullptr;  // the template's flows (its LinkModel's)
  std::vector<int32_t> flow_kind;  // per task: its kind of flow, -1 for none
  std::vector<uint32_t> ext_begin, ext_dep_begin, dep_begin;
  std::vector<std::pair<uint32_t, uint32_t>> ext, ext_dep;  // (steps back / on, task of that step)
  std::vector<uint32_t> dependents;                         // in-step, in id order
  std::vector<uint8_t> path_kind;
};

// The analytical engine's schedule (sim::Dispatcher::Run, the same event loop and rules) of
// the unrolled Program of B (the prefill and decode steps 1 .. HB) followed by decode steps
// HB + 1 .. N, each the template's tasks, without materialising it: a step's tasks exist from
// when a task they wait on ends (or from the start, for the first L steps after B) until the
// step is taken (Take) and the L steps after it have started every task. Ids are the unrolled
// Program's. `links`: the reservations of links (null: the schedule without queues on links,
// the contention indicator's); `path`: each task's critical-path split, carried forward.
class StepStream {
 public:
  // Fills a decode step's durations and busy times (sim::TaskCosts), one per template task.
  using Durations = std::function<void(uint32_t, std::vector<Ps>*, std::vector<Ps>*)>;
  StepStream(const StepShape& shape, const Program& B, const LinkedProgram& qb, const std::vector<size_t>& bB,
             uint32_t L, uint32_t N, int cores, size_t channels, size_t links, LinkReservation* reservation,
             bool path, Durations durations);
  // Runs until every task of segments 0 .. seg (0: the prefill, k: decode step k) has ended;
  // false with *why when the schedule cannot go on as the unrolled one.
  bool RunUntil(uint32_t seg, std::string* why);
  // Decode step k > HB, after RunUntil(k): its tasks' times; Take(k) frees its room.
  std::span<const TaskTime> times(uint32_t k) const { return slot(k).times; }
  std::span<const Ps> ready(uint32_t k) const { return slot(k).ready; }
  std::span<const Ps> busy(uint32_t k) const { return slot(k).busy; }
  void Take(uint32_t k) { taken_ = k; }
  // No task of a step after k starts earlier than this (the event time, and the starts so far).
  Ps Horizon(uint32_t k) const {
    Ps h = now_;
    for (const Slot& sl : slots_)
      if (sl.step > k && sl.started) h = std::min(h, sl.first_start);
    return h;
  }
  // B's tasks' times, after RunUntil(HB).
  std::span<const TaskTime> head_times() const { return b_times_; }
  Ps head_ready(size_t g) const { return b_ready_[g]; }
  Ps total() const { return total_; }
  const CriticalPathSplit& path() const { return last_; }
  bool delayed() const { return delayed_; }  // some flow ended later than alone

 private:
  struct Slot {
    uint32_t step = 0;  // 0: none
    uint32_t started = 0, ended = 0;
    Ps first_start = 0;  // of the tasks started
    std::vector<TaskTime> times;
    std::vector<Ps> ready;
    std::vector<CriticalPathSplit> split;
    std::vector<uint16_t> unmet;
    std::vector<uint64_t> best;  // the latest-ending dep so far (kNoTask: none)
    std::vector<Ps> duration, busy;
  };
  // The last task started on a core or channel (the critical path's queue predecessor).
  struct Last {
    bool any = false;
    Ps start = 0, end = 0;
    uint64_t id = 0;
    CriticalPathSplit split;
  };
  const Slot& slot(uint32_t k) const { return slots_[k & (slots_.size() - 1)]; }
  Slot& slot(uint32_t k) { return slots_[k & (slots_.size() - 1)]; }
  // A task's handle: B's task id, or (step << 32 | task of the template) for a later step's,
  // which orders as the unrolled Program's ids do (every step after B is at least 9 << 32).
  static uint32_t StepOf(uint64_t h) { return static_cast<uint32_t>(h >> 32); }
  static uint32_t RelOf(uint64_t h) { return static_cast<uint32_t>(h); }
  static uint64_t Id(uint32_t k, uint32_t rel) { return uint64_t{k} << 32 | rel; }
  bool Ensure(uint32_t k, std::string* why);
  bool Start(uint64_t g, Ps at, std::string* why);
  void Ended(uint64_t g);
  void Ready(uint64_t g) { ready_.push_back(g); }
  TaskTime TimeOf(uint64_t g) const { return g < NB_ ? b_times_[g] : slot(StepOf(g)).times[RelOf(g)]; }
  const CriticalPathSplit& SplitOf(uint64_t g) const {
    return g < NB_ ? b_split_[g] : slot(StepOf(g)).split[RelOf(g)];
  }

  const StepShape& s_;
  const Program& B_;
  const LinkedProgram& qb_;
  const std::vector<size_t>& bB_;
  const uint64_t NB_, n_;
  const uint32_t HB_, L_, N_;
  LinkReservation* links_;
  const bool path_;
  Durations durations_;
  std::vector<uint32_t> b_dep_begin_;  // B's dependents (CSR), in id order
  std::vector<uint64_t> b_dependents_;
  std::vector<TaskTime> b_times_;
  std::vector<Ps> b_ready_;
  std::vector<CriticalPathSplit> b_split_;
  std::vector<uint32_t> b_unmet_;
  std::vector<uint64_t> b_best_;
  std::vector<uint32_t> seg_ended_;  // B's segments: tasks ended
  std::vector<Slot> slots_;
  uint32_t taken_ = 0, started_upto_ = 0;  // every task of steps <= started_upto_ has started
  // The event loop's state (Dispatcher::Run's).
  Ps now_ = 0;
  std::vector<uint64_t> ready_, memory_ready_, link_ready_;
  std::vector<std::vector<uint64_t>> core_ready_;  // min-heaps of ids
  std::vector<uint8_t> core_busy_, core_dirty_;
  std::vector<int> dirty_cores_;
  std::vector<Ps> channel_free_, link_free_;
  std::vector<std::pair<Ps, uint64_t>> events_;  // min-heap of (end, id)
  std::vector<Last> core_last_, channel_last_;
  Ps total_ = std::numeric_limits<Ps>::min();
  uint64_t total_id_ = 0;
  CriticalPathSplit last_;
  bool delayed_ = false;
};

StepStream::StepStream(const StepShape& shape, const Program& B, const LinkedProgram& qb,
                       const std::vector<size_t>& bB, uint32_t L, uint32_t N, int cores, size_t channels,
                       size_t links, LinkReservation* reservation, bool path, Durations durations)
    : s_(shape),
      B_(B),
      qb_(qb),
      bB_(bB),
      NB_(B.num_tasks()),
      n_(shape.queue.size()),
      HB_(static_cast<uint32_t>(bB.size() - 2)),
      L_(L),
      N_(N),
      links_(reservation),
      path_(path),
      durations_(std::move(durations)) {
  // B's dependents: its own, then the decode steps' after it (the template's ext deps).
  std::vector<std::vector<uint64_t>> more(NB_);
  for (uint32_t s = std::max<uint32_t>(1, HB_ + 1 - L); s <= HB_; ++s)
    for (uint32_t rr = 0; rr < n_; ++rr)
      for (uint32_t j = s_.ext_dep_begin[rr]; j < s_.ext_dep_begin[rr + 1]; ++j) {
        const auto [off, i] = s_.ext_dep[j];
        if (s + off > HB_ && s + off <= N_) more[bB[s] + rr].push_back(Id(s + off, i));
      }
  b_dep_begin_.assign(NB_ + 1, 0);
  for (size_t g = 0; g < NB_; ++g)
    for (uint32_t d : B.deps(g)) ++b_dep_begin_[d + 1];
  for (size_t g = 0; g < NB_; ++g)
    b_dep_begin_[g + 1] += b_dep_begin_[g] + static_cast<uint32_t>(more[g].size());
  b_dependents_.resize(b_dep_begin_[NB_]);
  {
    std::vector<uint32_t> at(b_dep_begin_.begin(), b_dep_begin_.end() - 1);
    for (size_t g = 0; g < NB_; ++g)
      for (uint32_t d : B.deps(g)) b_dependents_[at[d]++] = g;
    for (size_t g = 0; g < NB_; ++g)
      for (uint64_t x : more[g]) b_dependents_[at[g]++] = x;
  }
  b_times_.assign(NB_, {});
  b_ready_.assign(NB_, 0);
  if (path_) b_split_.assign(NB_, {});
  b_unmet_.assign(NB_, 0);
  b_best_.assign(NB_, kNoTask);
  for (size_t g = 0; g < NB_; ++g) {
    b_unmet_[g] = static_cast<uint32_t>(B.deps(g).size());
    if (b_unmet_[g] == 0) Ready(g);
  }
  seg_ended_.assign(HB_ + 1, 0);
  slots_.resize(std::bit_ceil(size_t{L} + 8));
  for (Slot& sl : slots_) {
    sl.times.resize(n_);
    sl.ready.resize(n_);
    if (path_) sl.split.resize(n_);
    sl.unmet.resize(n_);
    sl.best.resize(n_);
  }
  started_upto_ = HB_;
  core_ready_.resize(cores);
  core_busy_.assign(cores, 0);
  core_dirty_.assign(cores, 0);
  channel_free_.assign(channels, 0);
  link_free_.assign(links, 0);
  core_last_.assign(cores, {});
  channel_last_.assign(channels, {});
}

bool StepStream::Ensure(uint32_t k, std::string* why) {
  Slot& sl = slot(k);
  if (sl.step == k) return true;
  // The room of step k - slots: taken, and every task of the L steps after it started (they
  // read its tasks' times when they start).
  if (sl.step != 0 && (sl.step > taken_ || sl.step + L_ > started_upto_)) {
    *why = "decode step " + std::to_string(k) + " starts while decode step " + std::to_string(sl.step) +
           " is still needed (more than " + std::to_string(slots_.size()) + " steps at once)";
    return false;
  }
  sl.step = k;
  sl.started = sl.ended = 0;
  durations_(k, &sl.duration, &sl.busy);
  std::fill(sl.best.begin(), sl.best.end(), kNoTask);
  for (uint32_t i = 0; i < n_; ++i)
    sl.unmet[i] = static_cast<uint16_t>(s_.p->deps(i).size() + (s_.ext_begin[i + 1] - s_.ext_begin[i]));
  return true;
}

bool StepStream::Start(uint64_t g, Ps at, std::string* why) {
  const bool in_b = g < NB_;
  const uint32_t k = in_b ? 0 : StepOf(g), i = in_b ? 0 : RelOf(g);
  Slot* sl = in_b ? nullptr : &slot(k);
  const TaskKind kind = in_b ? B_.kind(g) : s_.p->kind(i);
  const Ps duration = in_b ? qb_.duration[g] : sl->duration[i];
  Ps end = SatAdd(at, duration);
  if (links_ && kind != TaskKind::kCompute) {
    end = in_b ? links_->Finish(static_cast<uint32_t>(g), at, duration, now_)
          : s_.flow_kind[i] >= 0
              ? links_->FinishKind(*s_.flows, static_cast<uint32_t>(s_.flow_kind[i]), at, duration, now_)
              : end;
    delayed_ = delayed_ || end != SatAdd(at, duration);
  }
  if (end >= kMaxPs) {
    *why = "the run passes the 2^63 ps clock";
    return false;
  }
  if (in_b) {
    b_times_[g] = {at, end};
  } else {
    sl->times[i] = {at, end};
    sl->first_start = sl->started++ ? std::min(sl->first_start, at) : at;
  }
  if (end > total_ || (end == total_ && g < total_id_)) total_ = end, total_id_ = g;
  // The critical path to this task (CriticalPath's rule): its enabler's split, then its own
  // part after the enabler ended. The enabler has started before it, so its split is known.
  const Queue q = in_b ? QueueOf(B_.kind(g), qb_.first_link, g) : s_.queue[i];
  const int32_t r = in_b ? (q == Queue::kCompute ? B_.core(g)
                            : q == Queue::kDram  ? B_.memory(g).channel
                                                 : -1)
                         : s_.resource[i];
  Last* last = q == Queue::kCompute ? &core_last_[r] : q == Queue::kDram ? &channel_last_[r] : nullptr;
  if (last && last->any && last->start == at && last->id > g) {
    *why = "two tasks of one queue start at once out of id order";
    return false;
  }
  CriticalPathSplit split;
  if (path_) {
    // The latest-ending dep (lowest id on ties): the first to end at its ready time.
    const uint64_t best = in_b ? b_best_[g] : sl->best[i];
    const bool any = best != kNoTask;
    Ps best_end = any ? (in_b ? b_ready_[g] : sl->ready[i]) : 0;
    const bool by_queue = last && last->any && last->end <= end &&
                          (!any || last->end > best_end || (last->end == best_end && last->id < best));
    if (by_queue) {
      split = last->split;
      best_end = last->end;
    } else if (any) {
      split = SplitOf(best);
    }
    const Ps part = std::max<Ps>(0, end - ((by_queue || any) ? std::max(at, best_end) : at));
    const int pk = in_b ? PathKind(B_, g) : s_.path_kind[i];
    (pk == static_cast<int>(TaskKind::kCompute)    ? split.compute_ps
     : pk == static_cast<int>(TaskKind::kTransfer) ? split.communication_ps
                                                   : split.memory_ps) += part;
    if (in_b) {
      b_split_[g] = split;
    } else {
      sl->split[i] = split;
    }
    if (g == total_id_) last_ = split;
  }
  if (last) *last = {true, at, end, g, split};
  events_.emplace_back(end, g);
  std::push_heap(events_.begin(), events_.end(), std::greater<std::pair<Ps, uint64_t>>());
  return true;
}

void StepStream::Ended(uint64_t g) {
  if (g < NB_) {
    const uint32_t seg = static_cast<uint32_t>(std::upper_bound(bB_.begin(), bB_.end(), g) - bB_.begin() - 1);
    ++seg_ended_[seg];
  } else {
    ++slot(StepOf(g)).ended;
  }
}

bool StepStream::RunUntil(uint32_t seg, std::string* why) {
  auto done = [&] {
    if (seg <= HB_) {
      for (uint32_t s = 0; s <= seg; ++s)
        if (seg_ended_[s] != bB_[s + 1] - bB_[s]) return false;
      return true;
    }
    const Slot& sl = slot(seg);
    return sl.step == seg && sl.ended == n_;
  };
  // One more dep of j ended: g, at now_ (ends come in (end, id) order, so the first dep to
  // end at j's ready time is its latest-ending one, lowest id on ties).
  auto decrement = [&](uint64_t j, uint64_t g) -> bool {
    if (j < NB_) {
      if (b_best_[j] == kNoTask || b_times_[b_best_[j]].end_ps < now_) b_best_[j] = g;
      if (--b_unmet_[j] == 0) Ready(j);
      return true;
    }
    const uint32_t k = StepOf(j);
    Slot& sl = slot(k);
    if (sl.step != k && !Ensure(k, why)) return false;
    const uint32_t i = RelOf(j);
    if (sl.best[i] == kNoTask || TimeOf(sl.best[i]).end_ps < now_) sl.best[i] = g;
    if (--sl.unmet[i] == 0) Ready(j);
    return true;
  };
  const auto later = std::greater<std::pair<Ps, uint64_t>>();
  while (!done()) {
    memory_ready_.clear();
    link_ready_.clear();
    for (uint64_t g : ready_) {
      const bool in_b = g < NB_;
      const uint32_t i = in_b ? 0 : RelOf(g);
      const Queue q = in_b ? QueueOf(B_.kind(g), qb_.first_link, g) : s_.queue[i];
      if (in_b) {
        b_ready_[g] = now_;
      } else {
        slot(StepOf(g)).ready[i] = now_;
      }
      switch (q) {
        case Queue::kCompute: {
          const int c = in_b ? B_.core(g) : s_.resource[i];
          core_ready_[c].push_back(g);
          std::push_heap(core_ready_[c].begin(), core_ready_[c].end(), std::greater<uint64_t>());
          if (!core_dirty_[c]) core_dirty_[c] = 1, dirty_cores_.push_back(c);
          break;
        }
        case Queue::kDram:
          memory_ready_.push_back(g);
          break;
        case Queue::kLink:
          link_ready_.push_back(g);
          break;
        case Queue::kNone:
          if (!Start(g, now_, why)) return false;
          break;
      }
    }
    ready_.clear();
    std::sort(link_ready_.begin(), link_ready_.end());
    for (uint64_t g : link_ready_) {
      const bool in_b = g < NB_;
      const int32_t l = in_b ? qb_.first_link[g] : s_.resource[RelOf(g)];
      Ps& free = link_free_[l];
      const Ps at = std::max(now_, free);
      free = SatAdd(at, in_b ? qb_.busy[g] : slot(StepOf(g)).busy[RelOf(g)]);
      if (!Start(g, at, why)) return false;
    }
    std::sort(memory_ready_.begin(), memory_ready_.end());
    for (uint64_t g : memory_ready_) {
      const bool in_b = g < NB_;
      const int32_t ch = in_b ? static_cast<int32_t>(B_.memory(g).channel) : s_.resource[RelOf(g)];
      Ps& free = channel_free_[ch];
      const Ps at = std::max(now_, free);
      free = SatAdd(at, in_b ? qb_.busy[g] : slot(StepOf(g)).busy[RelOf(g)]);
      if (!Start(g, at, why)) return false;
    }
    for (int c : dirty_cores_) {
      core_dirty_[c] = 0;
      auto& h = core_ready_[c];
      if (core_busy_[c] || h.empty()) continue;
      std::pop_heap(h.begin(), h.end(), std::greater<uint64_t>());
      const uint64_t g = h.back();
      h.pop_back();
      core_busy_[c] = 1;
      if (!Start(g, now_, why)) return false;
    }
    dirty_cores_.clear();
    // Every task of steps up to started_upto_ + 1 started: the rooms they read may go.
    while (started_upto_ < N_ && slot(started_upto_ + 1).step == started_upto_ + 1 &&
           slot(started_upto_ + 1).started == n_)
      ++started_upto_;
    if (events_.empty()) {
      if (!done()) {
        *why = "a task of segment " + std::to_string(seg) + " never became ready";
        return false;
      }
      break;
    }
    now_ = events_.front().first;
    while (!events_.empty() && events_.front().first == now_) {
      std::pop_heap(events_.begin(), events_.end(), later);
      const uint64_t g = events_.back().second;
      events_.pop_back();
      Ended(g);
      const bool in_b = g < NB_;
      const uint32_t i = in_b ? 0 : RelOf(g);
      if ((in_b ? B_.kind(g) : s_.p->kind(i)) == TaskKind::kCompute) {
        const int c = in_b ? B_.core(g) : s_.resource[i];
        core_busy_[c] = 0;
        if (!core_dirty_[c]) core_dirty_[c] = 1, dirty_cores_.push_back(c);
      }
      if (in_b) {
        for (uint32_t x = b_dep_begin_[g]; x < b_dep_begin_[g + 1]; ++x)
          if (!decrement(b_dependents_[x], g)) return false;
      } else {
        const uint32_t k = StepOf(g);
        for (uint32_t x = s_.dep_begin[i]; x < s_.dep_begin[i + 1]; ++x)
          if (!decrement(Id(k, s_.dependents[x]), g)) return false;
        for (uint32_t x = s_.ext_dep_begin[i]; x < s_.ext_dep_begin[i + 1]; ++x) {
          const auto [off, j] = s_.ext_dep[x];
          if (k + off <= N_ && !decrement(Id(k + off, j), g)) return false;
        }
      }
    }
  }
  return true;
}

}  // namespace

std::optional<RunOutput> RunRolling(const Experiment& e, const arch::Chip& chip, Engine& engine,
                                    const RunOptions& opts, const StepTemplate& tpl,
                                    const EngineOutput& step_out, std::string* why, SampledRun* view) {
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
  Program B;
  {
    mapping::LowerOptions o;
    for (uint32_t s = 1; s <= HB; ++s) o.decode_steps_only.push_back(s);
    B = mapping::Lower(chip, e.cfg.model(), wl, e.cfg.mapping(), o);
  }
  const EngineOutput ub = engine.Run(B, chip);
  if (ub.makespan_ps >= kMaxPs) return fail("the head's times overflow");
  const std::vector<size_t> bB = SegmentBegins(B);
  if (bB.size() != HB + 2) return fail("the head's steps are not in order");
  std::string reason;
  for (uint32_t s = 2; s <= HB; ++s)
    if (!tpl.MatchStep(B, bB[s], bB[s + 1], s, &reason)) return fail(reason);
  const size_t NB = B.num_tasks();
  const LinkedProgram qb = LinkProgram(B, chip);
  const LinkedProgram qt = LinkProgram(tp, chip);
  if (qb.in_switch || qt.in_switch) return fail("in-switch transfers");

  // Deps on the steps before, as (steps back, task of that step), the same from step 3 on.
  StepDeps ext;
  uint32_t L = 0;
  if (!DepsOnStepsBefore(B, bB, n, HB, HB, &ext, &L, &reason)) return fail(reason);
  if (L == 0 || L + 3 > HB) return fail("decode steps depend on " + std::to_string(L) + " steps before them");

  // The template's tasks as the schedule reads them.
  StepShape shape;
  shape.p = &tp;
  shape.queue.resize(n);
  shape.resource.assign(n, -1);
  shape.flows = &qt.model.flows;
  shape.flow_kind.assign(n, -1);
  for (size_t f = 0; f < qt.model.task.size(); ++f)
    shape.flow_kind[qt.model.task[f]] = static_cast<int32_t>(qt.model.flows.kind(static_cast<uint32_t>(f)));
  shape.path_kind.resize(n);
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> ext_dep(n);  // (steps on, task)
  std::vector<std::vector<uint32_t>> dependents(n);
  for (uint32_t i = 0; i < n; ++i) {
    const Queue q = shape.queue[i] = QueueOf(tp.kind(i), qt.first_link, i);
    shape.resource[i] = q == Queue::kCompute ? tp.core(i)
                        : q == Queue::kDram  ? static_cast<int32_t>(tp.memory(i).channel)
                        : q == Queue::kLink  ? qt.first_link[i]
                                             : -1;
    shape.path_kind[i] = static_cast<uint8_t>(PathKind(tp, i));
    if (tp.deps(i).empty() && ext[i].empty()) return fail("a decode step's task waits on nothing");
    if (tp.deps(i).size() + ext[i].size() > UINT16_MAX) return fail("a task with more than 65535 deps");
    for (uint32_t d : tp.deps(i)) dependents[d].push_back(i);
    for (const auto& [off, rr] : ext[i]) ext_dep[rr].emplace_back(off, i);
  }
  auto flatten = [](auto& lists, auto* flat, std::vector<uint32_t>* begin) {
    begin->assign(1, 0);
    for (auto& v : lists) {
      std::sort(v.begin(), v.end());
      flat->insert(flat->end(), v.begin(), v.end());
      begin->push_back(static_cast<uint32_t>(flat->size()));
    }
  };
  flatten(ext, &shape.ext, &shape.ext_begin);
  flatten(ext_dep, &shape.ext_dep, &shape.ext_dep_begin);
  flatten(dependents, &shape.dependents, &shape.dep_begin);

  // Each step's durations and busy times (attention's and KV reads' at its context).
  const std::vector<uint32_t>& ctx = tpl.context_tasks();
  auto costs_of = [&](uint32_t k, std::vector<Ps>* duration, std::vector<Ps>* busy) {
    *duration = qt.duration;
    *busy = qt.busy;
    tpl.CostsAt(k, *duration, *busy);
  };
  const int cores = chip.num_cores();
  const size_t num_channels = chip.channels().size(), num_links = chip.links().size();
  LinkReservation reservation(qb.model, NB);
  StepStream run(shape, B, qb, bB, L, N, cores, num_channels, num_links, &reservation, true, costs_of);
  if (!run.RunUntil(HB, &reason)) return fail(reason);
  // The schedule without queues on links, for the contention indicator when a flow waits:
  // its makespan, on a second core where there is one (sim::UseSpareThread).
  // `stop`: the run failed, nobody waits for it (a future's destructor joins its thread).
  std::atomic<bool> stop{false};
  auto unloaded_makespan = [&](std::string* why) -> std::optional<Ps> {
    StepStream u(shape, B, qb, bB, L, N, cores, num_channels, num_links, nullptr, false, costs_of);
    for (uint32_t k = HB; k <= N && !stop.load(std::memory_order_relaxed); ++k) {
      if (!u.RunUntil(k, why)) return std::nullopt;
      u.Take(k);
    }
    return u.total();
  };
  std::string unloaded_why;
  std::future<std::optional<Ps>> unloaded;
  if (UseSpareThread(NB + uint64_t{N - HB} * n))
    unloaded = std::async(std::launch::async, unloaded_makespan, &unloaded_why);
  struct StopOnExit {
    std::atomic<bool>& stop;
    ~StopOnExit() { stop = true; }
  } stop_on_exit{stop};

  // The Result: B's (its tasks' times in the whole run), then step by step.
  EngineOutput bo = ub;
  const std::span<const TaskTime> bt = run.head_times();
  bo.tasks.assign(bt.begin(), bt.end());
  for (ChannelUsage& c : bo.channels) c.max_queue_ps = 0;
  for (size_t g = 0; g < NB; ++g) {
    if (B.kind(g) != TaskKind::kMemory) continue;
    Ps& q = bo.channels[B.memory(g).channel].max_queue_ps;
    q = std::max(q, bt[g].start_ps - run.head_ready(g));
  }
  RunOutput out;
  out.result = BuildResult(B, chip, bo, e.cfg.name(), engine.name(), opts.keep_task_times,
                           EnergyInputsOf(e.cfg.workload()));
  StepEnergy energy(B, tpl, chip, e.cfg.workload());
  config::Result& res = out.result;
  RunTotals tot;
  tot.core_compute.assign(cores, 0);
  for (int c = 0; c < cores && c < res.cores_size(); ++c) tot.core_compute[c] = res.cores(c).compute_ps();
  BusyUnion busy(cores);
  for (size_t g = 0; g < NB; ++g)
    if (B.core(g) >= 0 && B.core(g) < cores) busy.Add(B.core(g), bt[g].start_ps, bt[g].end_ps);
  const std::map<uint32_t, int> decode_layer = DecodeLayers(res);
  tot.flops = B.ComputeFlops();
  std::vector<ChannelUsage> channel_use = bo.channels;
  Ps prev_end = std::numeric_limits<Ps>::min();
  for (size_t g = bB[HB]; g < bB[HB + 1]; ++g) prev_end = std::max(prev_end, bt[g].end_ps);
  const uint64_t reused = N - HB;
  OpRows rows(tp, N > opts.row_steps);
  StepTimes st;
  const OpCores pairs = IndexOpCores(tp);
  std::map<uint32_t, std::vector<TaskTime>> observed;
  // KV reads from DRAM (StepTemplate::context_memory): the template's and the run's.
  std::vector<ChannelUsage> kv_template(num_channels), kv_run(num_channels);
  for (uint32_t x : ctx)
    if (tp.kind(x) == TaskKind::kMemory) {
      kv_template[tp.memory(x).channel].bytes += tp.memory(x).bytes;
      kv_template[tp.memory(x).channel].busy_ps += qt.busy[x];
    }
  for (uint32_t k = HB + 1; k <= N; ++k) {
    if (!run.RunUntil(k, &reason)) return fail(reason);
    for (uint32_t x : ctx)
      if (tp.kind(x) == TaskKind::kMemory) {
        kv_run[tp.memory(x).channel].bytes += tpl.MemoryBytesIn(x, k);
        kv_run[tp.memory(x).channel].busy_ps += run.busy(k)[x];
      }
    const std::span<const TaskTime> tk = run.times(k);
    const std::span<const Ps> ready = run.ready(k);
    for (size_t i = 0; i < n; ++i) {
      if (tp.kind(i) != TaskKind::kMemory) continue;
      Ps& q = channel_use[tp.memory(i).channel].max_queue_ps;
      q = std::max(q, tk[i].start_ps - ready[i]);
    }
    ReduceOps(tp, tk, &st, pairs);
    tpl.WorkAt(k, &st.op_flops, &st.op_bytes, &st.compute_flops);
    energy.Add(k);
    rows.Add(st, 0, &res, energy.op_pj());
    if (!AddLayerTotals(tp, st, decode_layer, &prev_end, &res))
      return fail("a decode layer the head does not have");
    AddStepCores(tp, tk, &busy, &tot.core_compute);
    for (double f : st.compute_flops) tot.flops += f;
    if (opts.keep_task_times) AddTaskTimings(tp, tk, 0, NB + uint64_t{k - HB - 1} * n, &res);
    if (view && std::binary_search(opts.observe_steps.begin(), opts.observe_steps.end(), k))
      observed[k].assign(tk.begin(), tk.end());
    // A core's intervals that start before every task not added yet can be merged for good.
    busy.Flush(run.Horizon(k));
    run.Take(k);
  }
  if (N > opts.row_steps) rows.Finish(reused, &res);
  busy.Flush(kMaxPs);
  const Ps total = run.total();
  tot.path = run.path();
  tot.total = total;
  Ps t0 = kMaxPs;
  for (const TaskTime& x : bt) t0 = std::min(t0, x.start_ps);
  tot.prefill_end = t0 + res.summary().prefill_ps();
  tot.decode_steps = N;
  tot.core_busy.assign(cores, 0);
  for (int c = 0; c < cores; ++c) tot.core_busy[c] = busy.Total(static_cast<size_t>(c));
  tot.spilled_bytes = B.spilled_bytes + tpl.spilled_per_step() * reused;
  tot.links = ub.links;
  for (size_t l = 0; l < tot.links.size() && l < reservation.max_wait().size(); ++l)
    tot.links[l].max_queue_ps = reservation.max_wait()[l];
  tot.channels = std::move(channel_use);
  AddStepsUse(step_out, reused, &tot.links, &tot.channels);
  for (size_t c = 0; c < tot.channels.size(); ++c) {
    // The template's KV reads, each step's at its context instead (unsigned: modulo 2^64).
    tot.channels[c].bytes += kv_run[c].bytes - kv_template[c].bytes * reused;
    tot.channels[c].busy_ps += kv_run[c].busy_ps - kv_template[c].busy_ps * static_cast<Ps>(reused);
  }
  FinishResult(chip, tot, &res);
  // Where no flow waited, the schedule without queues on links is this one.
  std::optional<Ps> free = total;
  if (unloaded.valid()) {
    free = unloaded.get();
  } else if (run.delayed()) {
    free = unloaded_makespan(&unloaded_why);
  }
  if (!free) return fail(unloaded_why + " (without queues on links)");
  res.mutable_summary()->set_contention(ContentionIndicator(total, run.delayed() ? *free : total));
  energy.Finish(chip, &res);
  if (view && !opts.observe_steps.empty())
    *view = SampleComposed(e, chip, opts.observe_steps, bt, bB, observed, tot.links, tot.channels, total);
  out.program = std::move(B);
  return out;
}

}  // namespace tpsim::sim
