#include "sim/step_stream.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace tpsim::sim {

namespace {

using mapping::Program;
using mapping::TaskKind;

constexpr Ps kMaxPs = std::numeric_limits<Ps>::max();
constexpr uint64_t kNoTask = std::numeric_limits<uint64_t>::max();

using arch::SatAdd;

}  // namespace

std::shared_ptr<const StepStream::HeadDependents> StepStream::DependentsOf(const StepShape& shape,
                                                                           const Program& B,
                                                                           const std::vector<size_t>& bB,
                                                                           uint32_t L, uint32_t N) {
  const size_t NB = B.num_tasks(), n = shape.task.size();
  const uint32_t HB = static_cast<uint32_t>(bB.size() - 2);
  auto h = std::make_shared<HeadDependents>();
  // The decode steps' deps on B's last L steps, in the order they are listed: each visit(g, x)
  // makes task x (of a decode step after B) a dependent of B's task g. Counted, then written.
  auto each_later = [&](auto&& visit) {
    for (uint32_t s = std::max<uint32_t>(1, HB + 1 - L); s <= HB; ++s)
      for (uint32_t rr = 0; rr < n; ++rr)
        for (uint32_t j = shape.ext_dep_begin[rr]; j < shape.ext_dep_begin[rr + 1]; ++j) {
          const auto [off, i] = shape.ext_dep[j];
          const int64_t hr = shape.head_rel.empty() ? int64_t{rr} : int64_t{shape.head_rel[rr]};
          if (hr >= 0 && s + off > HB && s + off <= N) visit(bB[s] + static_cast<size_t>(hr), Id(s + off, i));
        }
  };
  std::vector<uint32_t>& begin = h->begin;
  begin.assign(NB + 1, 0);
  for (size_t g = 0; g < NB; ++g)
    for (uint32_t d : B.deps(g)) ++begin[d + 1];
  each_later([&](size_t g, uint64_t) { ++begin[g + 1]; });
  for (size_t g = 0; g < NB; ++g) begin[g + 1] += begin[g];
  h->of.resize(begin[NB]);
  std::vector<uint32_t> at(begin.begin(), begin.end() - 1);
  for (size_t g = 0; g < NB; ++g)
    for (uint32_t d : B.deps(g)) h->of[at[d]++] = g;
  each_later([&](size_t g, uint64_t x) { h->of[at[g]++] = x; });
  return h;
}

StepStream::StepStream(const StepShape& shape, const Program& B, const LinkedProgram& qb,
                       const std::vector<size_t>& bB, uint32_t L, uint32_t N, int cores, size_t channels,
                       size_t links, LinkReservation* reservation, bool path, Durations durations,
                       std::shared_ptr<const HeadDependents> dependents, Ring ring)
    : s_(shape),
      B_(B),
      qb_(qb),
      bB_(bB),
      NB_(B.num_tasks()),
      n_(shape.task.size()),
      HB_(static_cast<uint32_t>(bB.size() - 2)),
      L_(L),
      N_(N),
      links_(reservation),
      path_(path),
      durations_(std::move(durations)),
      b_deps_(dependents ? std::move(dependents) : DependentsOf(shape, B, bB, L, N)),
      ring_(ring) {
  q_.Reset(static_cast<size_t>(cores), channels, links);
  b_times_.assign(NB_, {});
  if (path_) b_split_.assign(NB_, {});
  b_waiting_.assign(NB_, {kNoTask, std::numeric_limits<Ps>::min(), 0});
  for (size_t g = 0; g < NB_; ++g) {
    b_waiting_[g].unmet = static_cast<uint32_t>(B.deps(g).size());
    if (b_waiting_[g].unmet == 0) Ready(g);
  }
  seg_ended_.assign(HB_ + 1, 0);
  ctx_of_.assign(n_, 0);
  for (uint32_t i = 0; i < n_; ++i)
    if (s_.task[i].context) {
      ctx_of_[i] = static_cast<uint32_t>(ctx_tasks_.size());
      ctx_tasks_.push_back(i);
    }
  step_duration_ = s_.duration;
  step_busy_ = s_.busy;
  slots_.resize(ring == Ring::kFixed ? std::bit_ceil(size_t{L} + 4) : 1);
  slot_mask_ = static_cast<uint32_t>(slots_.size() - 1);
  step_waiting_.resize(n_);
  for (uint32_t i = 0; i < n_; ++i)
    step_waiting_[i] = {
        kNoTask, std::numeric_limits<Ps>::min(),
        static_cast<uint32_t>(s_.p->deps(i).size() + (s_.ext_begin[i + 1] - s_.ext_begin[i]))};
  started_upto_ = HB_;
  core_last_.assign(cores, {});
  channel_last_.assign(channels, {});
  // The replay: a transfer that reserves links without a queue of its own would reserve them
  // in the order its deps end, which the replay does not keep.
  channel_key_.assign(channels, {});
  link_key_.assign(links, {});
  known_.assign(static_cast<size_t>(cores), std::vector<Known>(8));
  known_size_.assign(static_cast<size_t>(cores), 0);
  seen_.assign(n_, 0);
  for (uint32_t i = 0; i < n_; ++i) {
    const StepShape::Task& t = s_.task[i];
    if (t.queue == Queue::kNone && (t.flow_kind >= 0 || t.step_flow >= 0)) replay_allowed_ = false;
    if (s_.p->deps(i).empty()) ext_only_.push_back(i);
  }
}

bool StepStream::Ensure(uint32_t k, std::string* why) {
  Slot& sl = slot(k);
  if (sl.step == k) return true;
  // The room of step k - slots: taken, and every task of the L steps after it started (they
  // read its tasks' times when they start).
  if (sl.step != 0 && wait_for_take_ && sl.step + L_ <= started_upto_ &&
      sl.step > taken_.load(std::memory_order_acquire) && !wait_for_take_(sl.step)) {
    *why = "stopped";
    return false;
  }
  const bool still_needed =
      sl.step != 0 && (sl.step > taken_.load(std::memory_order_acquire) || sl.step + L_ > started_upto_);
  if (still_needed && ring_ == Ring::kGrowing && !wait_for_take_) {
    Grow();
    return Ensure(k, why);
  }
  if (still_needed) {
    *why = "decode step " + std::to_string(k) + " starts while decode step " + std::to_string(sl.step) +
           " is still needed (more than " + std::to_string(slots_.size()) + " steps at once)";
    return false;
  }
  if (sl.times.empty()) {
    sl.times.resize(n_);
    if (path_) sl.split.resize(n_);
    sl.waiting.resize(n_);
    sl.duration.assign(ctx_tasks_.size(), 0);
    sl.busy.assign(ctx_tasks_.size(), 0);
    sl.flows.resize(s_.step_flows.size());
    sl.begun.assign(n_, 0);
  }
  sl.step = k;
  sl.started = sl.ended = 0;
  durations_(k, &step_duration_, &step_busy_, &sl.flows);
  for (size_t j = 0; j < ctx_tasks_.size(); ++j) {
    sl.duration[j] = step_duration_[ctx_tasks_[j]];
    sl.busy[j] = step_busy_[ctx_tasks_[j]];
  }
  // The replay does not count deps (a rollback rebuilds the counts of every room).
  const bool masked = k < masked_from_;
  const std::vector<Waiting>& waiting = masked ? masked_waiting_ : step_waiting_;
  if (!replay_) std::copy(waiting.begin(), waiting.end(), sl.waiting.begin());
  std::fill(sl.begun.begin(), sl.begun.end(), 0);
  if (masked) {
    // The tasks this step lacks: started and ended (never a dependent's latest end), never ready.
    for (uint32_t i = 0; i < n_; ++i)
      if (masked_[i])
        sl.begun[i] = 1, sl.times[i] = {std::numeric_limits<Ps>::min(), std::numeric_limits<Ps>::min()};
    sl.started = sl.ended = masked_count_;
    sl.first_start = std::numeric_limits<Ps>::max();
  }
  return true;
}

void StepStream::Grow() {
  std::vector<Slot> bigger(slots_.size() * 2);
  const uint32_t mask = static_cast<uint32_t>(bigger.size() - 1);
  // Steps that differ modulo the ring differ modulo twice the ring: no two meet.
  std::vector<Slot*> spare;
  for (Slot& sl : slots_)
    if (sl.step != 0) {
      bigger[sl.step & mask] = std::move(sl);
    } else if (!sl.times.empty()) {
      spare.push_back(&sl);
    }
  for (Slot& sl : bigger)
    if (sl.step == 0 && sl.times.empty() && !spare.empty()) {
      sl = std::move(*spare.back());
      spare.pop_back();
    }
  slots_.swap(bigger);
  slot_mask_ = mask;
}

void StepStream::set_masked(uint32_t from, std::vector<uint8_t> masked) {
  masked_from_ = from;
  masked_ = std::move(masked);
  masked_count_ = 0;
  masked_waiting_ = step_waiting_;
  for (uint32_t i = 0; i < n_; ++i) {
    if (masked_[i]) {
      ++masked_count_;
      masked_waiting_[i].unmet = std::numeric_limits<uint32_t>::max() / 2;
      continue;
    }
    for (uint32_t d : s_.p->deps(i)) masked_waiting_[i].unmet -= masked_[d];
  }
}

template <bool in_b>
[[gnu::always_inline]] inline bool StepStream::StartT(uint64_t g, Ps at, Ps now, std::string* why,
                                                      const Waiting* replayed) {
  const uint32_t k = in_b ? 0 : StepOf(g), i = in_b ? 0 : RelOf(g);
  Slot* sl = in_b ? nullptr : &slot(k);
  const StepShape::Task* st = in_b ? nullptr : &s_.task[i];
  const bool compute = in_b ? B_.kind(g) == TaskKind::kCompute : st->compute;
  const Ps duration = in_b ? qb_.duration[g] : DurationOf(*sl, i);
  Ps end = SatAdd(at, duration);
  if (links_ && !compute) {
    // Reserved at its start, now_ (the event loop starts a queued task then, not when it is
    // queued, sim/dispatch_loop.h).
    const Booking key{now_, {now, static_cast<uint8_t>(in_b || st->queue == Queue::kLink ? 0 : 1), g}};
    if (in_b) {
      finish_key_ = key;
      end = links_->Finish(static_cast<uint32_t>(g), at, duration, now_);
    } else if (st->step_flow >= 0) {
      finish_key_ = key;
      const StepFlow& f = sl->flows[st->step_flow];
      end = links_->FinishRoute(*s_.flows, s_.flows->kind_resources(static_cast<uint32_t>(st->flow_kind)),
                                f.holds, f.lags, f.bytes, f.inject, at, duration, now_);
    } else if (st->flow_kind >= 0) {
      finish_key_ = key;
      end = links_->FinishKind(*s_.flows, static_cast<uint32_t>(st->flow_kind), at, duration, now_);
    }
    delayed_ = delayed_ || end != SatAdd(at, duration);
  }
  if (end >= kMaxPs) {
    *why = "the run passes the 2^63 ps clock";
    // The replay's starts are checked, not yet the event loop's: it goes back and finds it again.
    if (!replayed) overflow_ = OverflowAt(g, at);
    return false;
  }
  if (in_b) {
    b_times_[g] = {at, end};
  } else {
    sl->times[i] = {at, end};
    sl->first_start = sl->started++ ? std::min(sl->first_start, at) : at;
    sl->begun[i] = 1;
    if (st->queue == Queue::kDram) channel_key_[st->resource] = {now, 0, g};
    if (st->queue == Queue::kLink) link_key_[st->resource] = {now, 0, g};
  }
  {
    // Branch-free: whether a task ends last is hard to predict.
    const bool last_end = (end > total_) | ((end == total_) & (g < total_id_));
    total_ = last_end ? end : total_;
    total_id_ = last_end ? g : total_id_;
  }
  // The critical path to this task (CriticalPath's rule): its enabler's split, then its own
  // part after the enabler ended. The enabler has started before it, so its split is known.
  const Queue q = in_b ? QueueOf(B_.kind(g), qb_.first_link, g) : st->queue;
  const int32_t r = in_b ? (q == Queue::kCompute ? B_.core(g)
                            : q == Queue::kDram  ? B_.memory(g).channel
                                                 : -1)
                         : st->resource;
  Last* last = q == Queue::kCompute ? &core_last_[r] : q == Queue::kDram ? &channel_last_[r] : nullptr;
  if (last && last->any && last->start == at && last->id > g) {
    *why = "two tasks of one queue start at once out of id order";
    return false;
  }
  CriticalPathSplit split;
  if (path_) {
    // The latest-ending dep (lowest id on ties): the first to end at its ready time.
    const Waiting& w = in_b ? b_waiting_[g] : replayed ? *replayed : sl->waiting[i];
    const uint64_t best = w.best;
    const bool any = best != kNoTask;
    Ps best_end = any ? w.best_end : 0;
    const bool by_queue = last && last->any && last->end <= end &&
                          (!any || last->end > best_end || (last->end == best_end && last->id < best));
    if (by_queue) {
      split = last->split;
      best_end = last->end;
    } else if (any) {
      split = SplitOf(best);
    }
    const Ps part = PathPart(end, (by_queue || any) ? &best_end : nullptr);
    const int pk = in_b ? PathKind(B_, g) : st->path_kind;
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
  if (!replayed) q_.AddEnd(end, g);
  return true;
}

bool StepStream::Start(uint64_t g, Ps at, Ps now, std::string* why, const Waiting* replayed) {
  return g < NB_ ? StartT<true>(g, at, now, why, replayed) : StartT<false>(g, at, now, why, replayed);
}

StepOverflow StepStream::OverflowAt(uint64_t g, Ps at) const {
  if (g < NB_) {
    const uint32_t seg = SegmentOf(bB_, g);
    return {true, g, g, seg, at};
  }
  const uint32_t k = StepOf(g), i = RelOf(g);
  // A step before the plan changes (set_masked) lacks the masked tasks: its ids skip them.
  uint64_t rel = i;
  if (k < masked_from_)
    for (uint32_t j = 0; j < i; ++j) rel -= masked_[j];
  return {false, i, UnrolledStepBegin(NB_, HB_, k, masked_from_, n_ - masked_count_, n_) + rel, k, at};
}

void StepStream::Ended(uint64_t g) {
  if (g < NB_) {
    const uint32_t seg = SegmentOf(bB_, g);
    ++seg_ended_[seg];
    // B has ended: every start from now on is a decode step's, and the event loop's starts
    // are logged for the replay.
    if (++b_ended_ == NB_) record_ = replay_allowed_;
  } else {
    ++slot(StepOf(g)).ended;
  }
}

bool StepStream::RunUntil(uint32_t seg, std::string* why) {
  auto done = [&] {
    if (replay_) return seg <= complete_;
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
      Waiting& w = b_waiting_[j];
      if (w.best_end < now_) w.best = g, w.best_end = now_;
      if (--w.unmet == 0) Ready(j);
      return true;
    }
    const uint32_t k = StepOf(j);
    if (slot(k).step != k && !Ensure(k, why)) return false;
    Slot& sl = slot(k);  // after Ensure, which may grow the ring
    const uint32_t i = RelOf(j);
    Waiting& w = sl.waiting[i];
    if (w.best_end < now_) w.best = g, w.best_end = now_;
    if (--w.unmet == 0) Ready(j);
    return true;
  };
  // The loop's view of B and the steps (sim/dispatch_loop.h).
  struct Source {
    StepStream& s;
    std::string* why;
    Queue QueueOf(uint64_t g) const {
      return g < s.NB_ ? sim::QueueOf(s.B_.kind(g), s.qb_.first_link, g) : s.s_.task[RelOf(g)].queue;
    }
    int32_t ResourceOf(uint64_t g, Queue q) const {
      if (g >= s.NB_) return s.s_.task[RelOf(g)].resource;
      return q == Queue::kCompute ? s.B_.core(g)
             : q == Queue::kDram  ? static_cast<int32_t>(s.B_.memory(g).channel)
                                  : s.qb_.first_link[g];
    }
    Ps BusyOf(uint64_t g) const { return g < s.NB_ ? s.qb_.busy[g] : s.BusyOf(s.slot(StepOf(g)), RelOf(g)); }
    bool Start(uint64_t g, Ps at, Ps now) {
      if (!s.Start(g, at, now, why)) return false;
      if (s.record_) s.Log(g, at);
      return true;
    }
  } src{*this, why};
  while (!done()) {
    // Every task of B has ended: what only its tasks' starts and ends read goes (on
    // wafer-32x32-qwen3-32b, a head of 9 million tasks: about 0.5 GB a schedule).
    if (b_ended_ == NB_ && !b_waiting_.empty()) {
      std::vector<Waiting>().swap(b_waiting_);
      b_deps_.reset();
    }
    if (drop_head_times_ && b_ended_ == NB_ && started_upto_ >= HB_ + L_ && !b_times_.empty()) {
      std::vector<TaskTime>().swap(b_times_);
      std::vector<CriticalPathSplit>().swap(b_split_);
    }
    if (replay_) {
      if (!Replay(seg, why)) return false;
      continue;
    }
    if (!q_.StartReady(now_, src)) return false;
    if (enter_) {
      enter_ = false;
      if (!EnterReplay(log_base_, static_cast<uint32_t>(log_.size()), why)) return false;
      if (replay_) continue;
    }
    // Every task of steps up to started_upto_ + 1 started: the rooms they read may go.
    while (started_upto_ < N_ && slot(started_upto_ + 1).step == started_upto_ + 1 &&
           slot(started_upto_ + 1).started == n_)
      ++started_upto_;
    if (q_.idle()) {
      if (!done()) {
        *why = "a task of segment " + std::to_string(seg) + " never became ready";
        return false;
      }
      break;
    }
    const bool ok = q_.TakeEnded(&now_, [&](uint64_t g) {
      Ended(g);
      const bool in_b = g < NB_;
      const uint32_t i = in_b ? 0 : RelOf(g);
      if (in_b ? B_.kind(g) == TaskKind::kCompute : s_.task[i].compute)
        q_.CoreFree(in_b ? B_.core(g) : s_.task[i].resource);
      if (in_b) {
        const HeadDependents& bd = *b_deps_;
        for (uint32_t x = bd.begin[g]; x < bd.begin[g + 1]; ++x)
          if (!decrement(bd.of[x], g)) return false;
        return true;
      }
      // The step's own dependents are in its room (no Ensure), the later steps' maybe not.
      const uint32_t k = StepOf(g);
      Slot& sl = slot(k);
      for (uint32_t x = s_.dep_begin[i]; x < s_.dep_begin[i + 1]; ++x) {
        const uint32_t j = s_.dependents[x];
        Waiting& w = sl.waiting[j];
        if (w.best_end < now_) w.best = g, w.best_end = now_;
        if (--w.unmet == 0) Ready(Id(k, j));
      }
      for (uint32_t x = s_.ext_dep_begin[i]; x < s_.ext_dep_begin[i + 1]; ++x) {
        const auto [off, j] = s_.ext_dep[x];
        if (k + off <= N_ && !decrement(Id(k + off, j), g)) return false;
      }
      return true;
    });
    if (!ok) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// The replay. The event loop's starts are logged by period (from decode step k's first
// task's start to step k + 1's: every task of the template once, as (step - k, task)). Once
// two periods in a row are the same (after a rollback that follows a long replay, one: see
// Rollback), later periods are taken to start their tasks in that order, and each start is
// computed and checked instead of run through the event loop:
//
//   ready r   = the latest end of its deps (all started before it, else the order is wrong)
//   compute   starts at max(r, its core's last end); it is the event loop's choice if no
//             other compute task of that core whose deps have all started (`known_`) is
//             ready by then with a lower id, or ready earlier while the core was idle
//   queued    (a DRAM channel, a first link) starts at max(r, the queue's free time); it is
//             the event loop's if (r, id) comes after the queue's last (first come, first
//             served, ties by id). Decided at r, it is started (and logged, and replayed) at
//             its start, as the event loop starts it (sim/dispatch_loop.h)
//   none      starts at r
//
// Each start must not be earlier than the one before, and the reservations of links must come
// in the event loop's order (start, then decision time, first links before channels, id).
// With every duration above 0, every task ends after it starts, so each decision time is one
// round of the event loop (sim/dispatch_loop.h); a task ready by a start has had every dep
// started earlier, so `known_` holds every compute task the event loop chooses among then, and
// a queued task's predecessors in its queue start no later than it (the check on (r, id) finds
// one replayed after it). These checks are its rules: a start that passes them is the event
// loop's, and the times, critical path, links' queues and everything else of
// sim::StepStream::Start are the event loop's. A start that fails them goes back to the last
// state known to be the event loop's (a cut: every start up to a time made, none after;
// checked once the next start is later) and rebuilds the event loop's queues there
// (Rollback), where the queued tasks decided by then that start later are decided again.

[[gnu::always_inline]] inline bool StepStream::DepsOf(uint32_t k, uint32_t i, Ps* r, uint64_t* best) const {
  Ps end = std::numeric_limits<Ps>::min();
  uint64_t b = kNoTask;
  auto take = [&](uint32_t step, uint32_t d) {
    const Slot& ds = slot(step);
    if (ds.step != step || !ds.begun[d]) return false;
    const Ps e = ds.times[d].end_ps;
    const uint64_t h = Id(step, d);
    if (e > end || (e == end && h < b)) end = e, b = h;
    return true;
  };
  const Slot& own = slot(k);
  for (uint32_t d : s_.p->deps(i)) {
    if (!own.begun[d]) return false;
    const Ps e = own.times[d].end_ps;
    const uint64_t h = Id(k, d);
    if (e > end || (e == end && h < b)) end = e, b = h;
  }
  for (uint32_t x = s_.ext_begin[i]; x < s_.ext_begin[i + 1]; ++x) {
    const auto [off, rr] = s_.ext[x];
    if (k <= HB_ + off || !take(k - off, rr)) return false;
  }
  *r = end;
  *best = b;
  return b != kNoTask;
}

void StepStream::Log(uint64_t g, Ps now) {
  const uint32_t k = StepOf(g);
  if (RelOf(g) == 0 && k != log_base_) {
    // Step k's first task: the period of log_base_ is the starts before this time.
    size_t split = log_.size();
    while (split > 0 && log_[split - 1].second == now) --split;
    if (log_base_ != 0) {
      period_.clear();
      // A period starts every task of a step once (those a step lacks never start).
      bool ok = split == n_ || (masked_count_ > 0 && split == n_ - masked_count_);
      ++seen_stamp_;
      for (size_t j = 0; j < split && ok; ++j) {
        const uint32_t rel = RelOf(log_[j].first);
        ok = seen_[rel] != seen_stamp_;
        seen_[rel] = seen_stamp_;
        period_.push_back(
            {static_cast<int32_t>(StepOf(log_[j].first)) - static_cast<int32_t>(log_base_), rel});
      }
      if (ok && period_ == pattern_) {
        ++same_;
      } else if (ok) {
        pattern_.swap(period_);
        same_ = 1;
        statics_ok_ = false;
      } else {
        same_ = 0;
      }
      enter_ = ok && same_ >= need_;
    }
    log_.erase(log_.begin(), log_.begin() + static_cast<std::ptrdiff_t>(split));
    log_base_ = k;
  }
  log_.push_back({g, now});
}

bool StepStream::EnterReplay(uint32_t base, uint32_t cursor, std::string* why) {
  if (!statics_ok_) {
    statics_ok_ = true;
    topological_ = false;
    // Per position of the period, the compute tasks whose last dep starts there (in this
    // period or one before theirs); the period must start every dep before its dependents.
    const uint32_t P = static_cast<uint32_t>(pattern_.size());
    std::vector<uint32_t> pos(n_);
    std::vector<int32_t> off(n_);
    std::vector<uint8_t> in(n_, 0);  // a task the steps replayed lack (set_masked) is not
    min_off_ = pattern_[0].off;
    for (uint32_t q = 0; q < P; ++q) {
      pos[pattern_[q].rel] = q;
      off[pattern_[q].rel] = pattern_[q].off;
      in[pattern_[q].rel] = 1;
      min_off_ = std::min(min_off_, pattern_[q].off);
    }
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> at(P);
    for (uint32_t q = 0; q < P; ++q) {
      const Entry e = pattern_[q];
      int64_t last_d = std::numeric_limits<int64_t>::min();
      uint32_t last_p = 0;
      bool order = true;
      auto dep = [&](int32_t o, uint32_t r) {
        // A task the steps lack started and ended at the start of time (a step that has it
        // starts it, which this pattern does not: ReplayOne finds its dependents not ready).
        if (!in[r]) return;
        const int64_t d = int64_t{o} - off[r];  // the dep's period, after this one's
        if (d > 0 || (d == 0 && pos[r] >= q)) order = false;
        if (d > last_d || (d == last_d && pos[r] > last_p)) last_d = d, last_p = pos[r];
      };
      for (uint32_t d : s_.p->deps(e.rel)) dep(e.off, d);
      for (uint32_t x = s_.ext_begin[e.rel]; x < s_.ext_begin[e.rel + 1]; ++x)
        dep(e.off - static_cast<int32_t>(s_.ext[x].first), s_.ext[x].second);
      if (!order) return true;
      if (s_.task[e.rel].compute) at[last_p].emplace_back(q, static_cast<uint32_t>(-last_d));
    }
    ready_begin_.assign(1, 0);
    ready_at_.clear();
    for (auto& v : at) {
      ready_at_.insert(ready_at_.end(), v.begin(), v.end());
      ready_begin_.push_back(static_cast<uint32_t>(ready_at_.size()));
    }
    topological_ = true;
  }
  if (!topological_) return true;
  // Every dep of the steps replayed is a decode step's after B; every end up to now_ has been
  // taken (a task that started and ended at now_ would not have: the cut would not be one).
  if (int64_t{base} + min_off_ - L_ <= int64_t{HB_} + 1 || (!q_.idle() && q_.next_time() <= now_))
    return true;
  for (uint32_t j = 0; j < cursor; ++j)
    if (j >= pattern_.size() ||
        !(Entry{static_cast<int32_t>(StepOf(log_[j].first)) - static_cast<int32_t>(base),
                RelOf(log_[j].first)} == pattern_[j]))
      return true;
  // The compute tasks whose deps have all started: the event loop's ready ones and those whose
  // deps are still running (of steps in rooms, and of the next steps that wait on earlier
  // steps only).
  std::fill(known_size_.begin(), known_size_.end(), 0);
  uint32_t top = 0;
  for (Slot& sl : slots_) {
    if (sl.step <= HB_) continue;
    top = std::max(top, sl.step);
    for (uint32_t i = 0; i < n_; ++i) {
      Ps r;
      uint64_t best;
      if (s_.task[i].compute && !sl.begun[i] && DepsOf(sl.step, i, &r, &best)) {
        PushKnown(s_.task[i].resource, {Id(sl.step, i), r, best});
      }
    }
  }
  for (uint32_t k = top + 1; k <= std::min(N_, top + L_); ++k)
    for (uint32_t i : ext_only_) {
      Ps r;
      uint64_t best;
      if (!s_.task[i].compute || !DepsOf(k, i, &r, &best)) continue;
      if (slot(k).step != k && !Ensure(k, why)) {
        if (*why == "stopped") return false;
        why->clear();
        same_ = 0;
        return true;
      }
      PushKnown(s_.task[i].resource, {Id(k, i), r, best});
    }
  // The queues as the tasks started left them: the queued tasks that start later are
  // replayed at their starts, and decided again there.
  channel_free_ = q_.channel_started();
  link_free_ = q_.link_started();
  base_ = base;
  cursor_ = cursor;
  last_start_ = now_;
  undo_.clear();
  complete_ = started_upto_;
  SaveCut(&verified_, now_, complete_);
  strict_ = true;
  pending_ = false;
  replay_ = true;
  entered_at_ = replayed_;
  return true;
}

void StepStream::SaveCut(Cut* c, Ps time, uint32_t complete) {
  c->time = time;
  c->undo = undo_.size();
  c->complete = complete;
  if (links_) links_->Save(&c->links);
  c->channel_free = channel_free_;
  c->link_free = link_free_;
  c->core_last = core_last_;
  c->channel_last = channel_last_;
  c->channel_key = channel_key_;
  c->link_key = link_key_;
  c->finish_key = finish_key_;
  c->total = total_;
  c->total_id = total_id_;
  c->last = last_;
  c->delayed = delayed_;
}

[[gnu::always_inline]] inline bool StepStream::ReplayOne(uint32_t k, uint32_t i, bool* ok, std::string* why) {
  *ok = false;
  if (slot(k).step != k && !Ensure(k, why)) {
    if (*why == "stopped") return false;
    why->clear();
    return true;
  }
  Slot& sl = slot(k);
  if (sl.begun[i]) return true;
  const StepShape::Task& st = s_.task[i];
  const uint64_t g = Id(k, i);
  Ps r, at, decision;
  uint64_t best;
  Ps* free = nullptr;
  if (st.compute) {
    Known* kn = known_[st.resource].data();
    uint32_t& size = known_size_[st.resource];
    uint32_t j = 0;
    while (j < size && kn[j].g != g) ++j;
    if (j == size) return true;
    r = kn[j].r;
    best = kn[j].best;
    kn[j] = kn[--size];
    const Last& last = core_last_[st.resource];
    const Ps core_free = last.any ? last.end : 0;
    at = decision = std::max(r, core_free);
    const bool idle = at > core_free;
    for (uint32_t x = 0; x < size; ++x)
      if (kn[x].r <= at && (kn[x].g < g || (kn[x].r < at && idle))) return true;
  } else {
    if (!DepsOf(k, i, &r, &best)) return true;
    at = decision = r;
    if (st.queue == Queue::kDram || st.queue == Queue::kLink) {
      const bool dram = st.queue == Queue::kDram;
      const Key& key = (dram ? channel_key_ : link_key_)[st.resource];
      if (!(key < Key{r, 0, g})) return true;
      free = &(dram ? channel_free_ : link_free_)[st.resource];
      at = std::max(r, *free);
    }
    if (links_ && (st.flow_kind >= 0 || st.step_flow >= 0) &&
        !(finish_key_ < Booking{at, {decision, static_cast<uint8_t>(st.queue == Queue::kLink ? 0 : 1), g}}))
      return true;
  }
  if (at < last_start_ || (strict_ && at == last_start_) || DurationOf(sl, i) <= 0) return true;
  if (strict_) {
    strict_ = false;
    if (pending_) {
      // The tentative cut is one: every start up to its time was made before it.
      std::swap(verified_, tentative_);
      undo_.erase(undo_.begin(), undo_.begin() + static_cast<std::ptrdiff_t>(verified_.undo));
      verified_.undo = 0;
      complete_ = verified_.complete;
      started_upto_ = std::max(started_upto_, complete_);
      pending_ = false;
    }
  }
  if (free) *free = SatAdd(at, BusyOf(sl, i));
  last_start_ = now_ = at;
  // When it became ready: the composition reads it for memory tasks (ready()).
  const Waiting w{best, r, 0};
  if (st.queue == Queue::kDram) sl.waiting[i] = w;
  if (!StartT<false>(g, at, decision, why, &w)) {
    why->clear();
    return true;
  }
  undo_.push_back(g);
  ++replayed_;
  // The compute tasks whose last dep this was.
  for (uint32_t x = ready_begin_[cursor_]; x < ready_begin_[cursor_ + 1]; ++x) {
    const auto [q, ahead] = ready_at_[x];
    const Entry e = pattern_[q];
    const int64_t kk = int64_t{base_} + ahead + e.off;
    if (kk > N_) continue;
    const uint32_t k2 = static_cast<uint32_t>(kk);
    if (slot(k2).step != k2 && !Ensure(k2, why)) {
      if (*why == "stopped") return false;
      why->clear();
      return true;
    }
    Slot& s2 = slot(k2);
    Ps r2;
    uint64_t best2;
    if (s2.begun[e.rel] || !DepsOf(k2, e.rel, &r2, &best2)) return true;
    PushKnown(s_.task[e.rel].resource, {Id(k2, e.rel), r2, best2});
  }
  *ok = true;
  return true;
}

bool StepStream::Replay(uint32_t seg, std::string* why) {
  while (replay_ && seg > complete_) {
    if (cursor_ == pattern_.size()) {
      // The period's end: every task of steps up to base_ + min_off_ has started.
      if (int64_t{base_} + min_off_ >= N_) {
        complete_ = started_upto_ = N_;
        undo_.clear();
        pending_ = false;
        break;
      }
      SaveCut(&tentative_, last_start_, static_cast<uint32_t>(int64_t{base_} + min_off_));
      pending_ = strict_ = true;
      ++base_;
      cursor_ = 0;
      continue;
    }
    const Entry e = pattern_[cursor_];
    const int64_t k = int64_t{base_} + e.off;
    bool ok = true;
    if (k <= N_ && !ReplayOne(static_cast<uint32_t>(k), e.rel, &ok, why)) return false;
    if (!ok) return Rollback(why);
    ++cursor_;
  }
  return true;
}

bool StepStream::Rollback(std::string* why) {
  ++rollbacks_;
  // Back to verified_: what started after it did not.
  for (size_t j = verified_.undo; j < undo_.size(); ++j) {
    Slot& sl = slot(StepOf(undo_[j]));
    if (sl.step == StepOf(undo_[j])) sl.begun[RelOf(undo_[j])] = 0;
  }
  replayed_ -= undo_.size() - verified_.undo;
  undo_.clear();
  const Cut& c = verified_;
  if (links_) links_->Restore(c.links);
  core_last_ = c.core_last;
  channel_last_ = c.channel_last;
  channel_key_ = c.channel_key;
  link_key_ = c.link_key;
  finish_key_ = c.finish_key;
  total_ = c.total;
  total_id_ = c.total_id;
  last_ = c.last;
  delayed_ = c.delayed;
  now_ = c.time;
  started_upto_ = std::max(started_upto_, c.complete);
  replay_ = pending_ = strict_ = false;
  // A replay that failed soon waits longer before the next. After a longer one, one period
  // of the event loop (from the cut, a period's start, so logged whole) is the next pattern:
  // on wafer-32x32-qwen3-32b at 32 layers the order of starts changes every 11 to 13 steps
  // (23 rollbacks in 300 steps), and a second period run to confirm it cost 5% of the run.
  need_ = replayed_ - entered_at_ < 4 * uint64_t{n_} ? std::min<uint32_t>(need_ * 2, 256) : 1;
  log_.clear();
  log_base_ = 0;
  same_ = 0;
  // The event loop's queues at that state: the running tasks' ends, the ready compute tasks
  // waiting for their busy cores, and each task's deps not ended.
  q_.Reset(core_last_.size(), channel_last_.size(), link_key_.size());
  q_.SetFree(c.channel_free, c.link_free);
  for (size_t core = 0; core < core_last_.size(); ++core)
    if (core_last_[core].any && core_last_[core].end > now_) q_.SetCoreBusy(static_cast<int>(core));
  // Steps whose tasks wait on an ended task: those in rooms, and the next ones.
  uint32_t top = 0;
  for (const Slot& sl : slots_)
    if (sl.step > HB_) top = std::max(top, sl.step);
  for (uint32_t k = top + 1; k <= std::min(N_, top + L_); ++k) {
    bool needed = false;
    for (uint32_t i = 0; i < n_ && !needed; ++i)
      for (uint32_t x = s_.ext_begin[i]; x < s_.ext_begin[i + 1] && !needed; ++x) {
        const auto [off, rr] = s_.ext[x];
        const Slot& ds = slot(k - off);
        needed = k - off > HB_ && ds.step == k - off && ds.begun[rr] && ds.times[rr].end_ps <= now_;
      }
    if (needed && !Ensure(k, why)) return false;
  }
  requeue_.clear();
  for (Slot& sl : slots_) {
    if (sl.step <= HB_) continue;
    if (!Rebuild(sl.step, why)) return false;
  }
  // The queued tasks ready by now_ that have not started: decided again, in the event loop's
  // order (ready time, first links before channels, id), each after its queue's last started
  // task (as first come first served puts them), to start after now_.
  std::sort(requeue_.begin(), requeue_.end());
  for (const Key& x : requeue_) {
    const StepShape::Task& st = s_.task[RelOf(x.g)];
    const bool dram = st.queue == Queue::kDram;
    Ps& free = (dram ? q_.channel_free() : q_.link_free())[st.resource];
    const Ps at = std::max(x.now, free);
    if (!((dram ? channel_key_ : link_key_)[st.resource] < Key{x.now, 0, x.g}) || at <= now_) {
      *why = "the replay's state at " + std::to_string(now_) + " ps is not the event loop's (decode step " +
             std::to_string(StepOf(x.g)) + ", task " + std::to_string(RelOf(x.g)) + " queued)";
      return false;
    }
    free = SatAdd(at, BusyOf(slot(StepOf(x.g)), RelOf(x.g)));
    q_.Defer(at, x.g, x.now, st.queue, st.resource, free);
  }
  return true;
}

bool StepStream::Rebuild(uint32_t k, std::string* why) {
  Slot& sl = slot(k);
  sl.started = sl.ended = 0;
  sl.first_start = std::numeric_limits<Ps>::max();
  const bool lacks = k < masked_from_;  // some tasks (set_masked): begun at the start of time
  for (uint32_t i = 0; i < n_; ++i) {
    const uint64_t g = Id(k, i);
    if (sl.begun[i]) {
      ++sl.started;
      if (!(lacks && masked_[i])) sl.first_start = std::min(sl.first_start, sl.times[i].start_ps);
      if (sl.times[i].end_ps > now_) {
        q_.AddEnd(sl.times[i].end_ps, g);
      } else {
        ++sl.ended;
      }
      continue;
    }
    Waiting w{kNoTask, std::numeric_limits<Ps>::min(), 0};
    auto dep = [&](uint32_t step, uint32_t d) {
      const Slot& ds = slot(step);
      if (ds.step != step || !ds.begun[d] || ds.times[d].end_ps > now_) {
        ++w.unmet;
        return;
      }
      const Ps e = ds.times[d].end_ps;
      const uint64_t h = Id(step, d);
      if (e > w.best_end || (e == w.best_end && h < w.best)) w.best = h, w.best_end = e;
    };
    for (uint32_t d : s_.p->deps(i)) dep(k, d);
    for (uint32_t x = s_.ext_begin[i]; x < s_.ext_begin[i + 1]; ++x)
      dep(k - s_.ext[x].first, s_.ext[x].second);
    sl.waiting[i] = w;
    if (w.unmet == 0) {
      const StepShape::Task& st = s_.task[i];
      if (st.queue == Queue::kDram || st.queue == Queue::kLink) {
        requeue_.push_back({w.best_end, static_cast<uint8_t>(st.queue == Queue::kLink ? 0 : 1), g});
        continue;
      }
      if (!st.compute || !core_last_[st.resource].any || core_last_[st.resource].end <= now_) {
        *why = "the replay's state at " + std::to_string(now_) + " ps is not the event loop's (decode step " +
               std::to_string(k) + ", task " + std::to_string(i) + ")";
        return false;
      }
      q_.WaitForCore(st.resource, g);
    }
  }
  return true;
}

}  // namespace tpsim::sim
