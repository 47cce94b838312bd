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

Ps SatAdd(Ps a, Ps b) {
  Ps r;
  return __builtin_add_overflow(a, b, &r) ? kMaxPs : r;
}

}  // namespace

StepStream::StepStream(const StepShape& shape, const Program& B, const LinkedProgram& qb,
                       const std::vector<size_t>& bB, uint32_t L, uint32_t N, int cores, size_t channels,
                       size_t links, LinkReservation* reservation, bool path, Durations durations)
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
      durations_(std::move(durations)) {
  q_.Reset(static_cast<size_t>(cores), channels, links);
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
  if (path_) b_split_.assign(NB_, {});
  b_waiting_.assign(NB_, {kNoTask, std::numeric_limits<Ps>::min(), 0});
  for (size_t g = 0; g < NB_; ++g) {
    b_waiting_[g].unmet = static_cast<uint32_t>(B.deps(g).size());
    if (b_waiting_[g].unmet == 0) Ready(g);
  }
  seg_ended_.assign(HB_ + 1, 0);
  slots_.resize(std::bit_ceil(size_t{L} + 8));
  for (Slot& sl : slots_) {
    sl.times.resize(n_);
    if (path_) sl.split.resize(n_);
    sl.waiting.resize(n_);
    sl.duration = s_.duration;
    sl.busy = s_.busy;
    sl.flows.resize(s_.step_flows.size());
  }
  step_waiting_.resize(n_);
  for (uint32_t i = 0; i < n_; ++i)
    step_waiting_[i] = {
        kNoTask, std::numeric_limits<Ps>::min(),
        static_cast<uint32_t>(s_.p->deps(i).size() + (s_.ext_begin[i + 1] - s_.ext_begin[i]))};
  started_upto_ = HB_;
  core_last_.assign(cores, {});
  channel_last_.assign(channels, {});
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
  if (sl.step != 0 && (sl.step > taken_.load(std::memory_order_acquire) || sl.step + L_ > started_upto_)) {
    *why = "decode step " + std::to_string(k) + " starts while decode step " + std::to_string(sl.step) +
           " is still needed (more than " + std::to_string(slots_.size()) + " steps at once)";
    return false;
  }
  sl.step = k;
  sl.started = sl.ended = 0;
  durations_(k, &sl.duration, &sl.busy, &sl.flows);
  std::copy(step_waiting_.begin(), step_waiting_.end(), sl.waiting.begin());
  return true;
}

bool StepStream::Start(uint64_t g, Ps at, std::string* why) {
  const bool in_b = g < NB_;
  const uint32_t k = in_b ? 0 : StepOf(g), i = in_b ? 0 : RelOf(g);
  Slot* sl = in_b ? nullptr : &slot(k);
  const StepShape::Task* st = in_b ? nullptr : &s_.task[i];
  const bool compute = in_b ? B_.kind(g) == TaskKind::kCompute : st->compute;
  const Ps duration = in_b ? qb_.duration[g] : sl->duration[i];
  Ps end = SatAdd(at, duration);
  if (links_ && !compute) {
    if (in_b) {
      end = links_->Finish(static_cast<uint32_t>(g), at, duration, now_);
    } else if (st->step_flow >= 0) {
      const StepFlow& f = sl->flows[st->step_flow];
      end = links_->FinishRoute(*s_.flows, s_.flows->kind_resources(static_cast<uint32_t>(st->flow_kind)),
                                f.holds, f.bytes, f.inject, at, duration, now_);
    } else if (st->flow_kind >= 0) {
      end = links_->FinishKind(*s_.flows, static_cast<uint32_t>(st->flow_kind), at, duration, now_);
    }
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
    const uint64_t best = in_b ? b_waiting_[g].best : sl->waiting[i].best;
    const bool any = best != kNoTask;
    Ps best_end = any ? (in_b ? b_waiting_[g].best_end : sl->waiting[i].best_end) : 0;
    const bool by_queue = last && last->any && last->end <= end &&
                          (!any || last->end > best_end || (last->end == best_end && last->id < best));
    if (by_queue) {
      split = last->split;
      best_end = last->end;
    } else if (any) {
      split = SplitOf(best);
    }
    const Ps part = std::max<Ps>(0, end - ((by_queue || any) ? std::max(at, best_end) : at));
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
  q_.AddEnd(end, g);
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
      Waiting& w = b_waiting_[j];
      if (w.best_end < now_) w.best = g, w.best_end = now_;
      if (--w.unmet == 0) Ready(j);
      return true;
    }
    const uint32_t k = StepOf(j);
    Slot& sl = slot(k);
    if (sl.step != k && !Ensure(k, why)) return false;
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
    Ps BusyOf(uint64_t g) const { return g < s.NB_ ? s.qb_.busy[g] : s.slot(StepOf(g)).busy[RelOf(g)]; }
    bool Start(uint64_t g, Ps at, Ps) { return s.Start(g, at, why); }
  } src{*this, why};
  while (!done()) {
    if (!q_.StartReady(now_, src)) return false;
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
        for (uint32_t x = b_dep_begin_[g]; x < b_dep_begin_[g + 1]; ++x)
          if (!decrement(b_dependents_[x], g)) return false;
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

}  // namespace tpsim::sim
