#pragma once
// The queues of the analytical engine's event loop, written once for the two loops that run
// it: sim::Dispatcher::Run (a Program's tasks, uint32_t ids) and sim::StepStream::RunUntil
// (a head Program and decode steps made from a template, uint64_t handles that order as the
// unrolled Program's ids). The rules are schedule.h's; per event time the loop is:
//
//   queues.StartReady(now, source)   the queued tasks whose start is `now` start (in the
//                                     order they were queued); then what became ready at
//                                     `now` starts or waits in its queue
//   queues.TakeEnded(&now, on_end)    the next event time (an end or a queued task's start),
//                                     every task that ends then, in id order: on_end(id)
//                                     frees its core (CoreFree) and makes its dependents
//                                     ready (Ready); false stops the loop
//
// A task that waits in its channel's or first link's queue has its start decided when it is
// queued (first come first served: its queue's busy time does not depend on anything else),
// but is started (Source::Start, where the analytical engine reserves its route's links,
// sim/analytical/links.h) at that start, as an event of its own: so tasks are started, and
// reserve links, in the order of their starts. At one time: after every end then, before
// any decision then, in the order they were queued (by the time they were queued, then first
// links before channels, then id).
//
// `Source` tells a ready task's queue, resource and busy time, and starts it:
//   Queue QueueOf(Id)                 compute, DRAM channel, first link or none
//   int32_t ResourceOf(Id, Queue)     its core, channel or first link
//   Ps BusyOf(Id)                     how long it holds its channel or first link
//   bool Start(Id, Ps at, Ps now)     records the start (and adds its end: AddEnd), called
//                                     at event time `at`; `now` is when it was decided (its
//                                     ready time where it waited in a queue, else `at`);
//                                     false stops the loop

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "mapping/program.h"
#include "sim/engine.h"

namespace tpsim::sim {

// The queue a task waits for besides its deps: its core's compute unit, its channel's
// request queue, its first link (transfers over links), or none.
// Numbered like TaskKind, so that QueueOf is free in the hot loop.
enum class Queue : uint8_t { kCompute, kNone, kDram, kLink };
static_assert(static_cast<int>(mapping::TaskKind::kCompute) == static_cast<int>(Queue::kCompute) &&
              static_cast<int>(mapping::TaskKind::kTransfer) == static_cast<int>(Queue::kNone) &&
              static_cast<int>(mapping::TaskKind::kMemory) == static_cast<int>(Queue::kDram));
constexpr Queue QueueOf(mapping::TaskKind k) { return static_cast<Queue>(k); }
// A task's queue when `first_link` (one per task, -1 for none; empty: none at all) gives
// the first link of each transfer's route.
inline Queue QueueOf(mapping::TaskKind k, std::span<const int32_t> first_link, size_t i) {
  return k == mapping::TaskKind::kTransfer && !first_link.empty() && first_link[i] >= 0 ? Queue::kLink
                                                                                        : QueueOf(k);
}

template <class Id>
class DispatchQueues {
 public:
  // Empty queues of `cores` cores, `channels` channels and `links` links, all free at 0.
  void Reset(size_t cores, size_t channels, size_t links) {
    core_ready_.resize(cores);
    for (auto& h : core_ready_) h.clear();
    core_busy_.assign(cores, 0);
    core_dirty_.assign(cores, 0);
    dirty_cores_.clear();
    channel_free_.assign(channels, 0);
    link_free_.assign(links, 0);
    channel_started_.assign(channels, 0);
    link_started_.assign(links, 0);
    starts_.clear();
    queued_ = 0;
    ready_.clear();
    ends_.clear();
    last_ = std::numeric_limits<Ps>::min();
  }
  // Task g's deps have all ended.
  void Ready(Id g) { ready_.push_back(g); }
  // A compute task of core c ended: the core picks its next task at this time.
  void CoreFree(int c) {
    core_busy_[c] = 0;
    Dirty(c);
  }
  // A started task's end: no earlier than the last event time taken (TakeEnded).
  void AddEnd(Ps end, Id g) {
    if (end < last_) throw std::logic_error("dispatch loop: a task ends before the time taken last");
    ends_.emplace_back(end, g);
    std::push_heap(ends_.begin(), ends_.end(), std::greater<std::pair<Ps, Id>>());
  }
  // Queued task g, decided at `decided`, starts at `at` (later than the event time): it
  // holds queue (q, r) until `free` (its start + busy). Queued tasks start in the order of
  // Defer at one time.
  void Defer(Ps at, Id g, Ps decided, Queue q, int32_t r, Ps free) {
    starts_.push_back({at, queued_++, decided, free, g, r, q});
    std::push_heap(starts_.begin(), starts_.end(), LaterStart);
  }
  bool idle() const { return ends_.empty() && starts_.empty(); }
  // The earliest end (some end held).
  Ps next_end() const { return ends_.front().first; }
  // The next event time (not idle()): the earliest end or queued task's start.
  Ps next_time() const {
    if (ends_.empty()) return starts_.front().at;
    const Ps end = next_end();
    return starts_.empty() ? end : std::min(end, starts_.front().at);
  }
  // To set up a state mid-schedule (sim::StepStream's replay, going back): after Reset, the
  // channels' and first links' free times (SetFree: after the tasks started; then Defer
  // those queued, not started), the busy cores, the compute tasks ready and waiting for their
  // core, and the running tasks' ends (AddEnd).
  void SetFree(const std::vector<Ps>& channel, const std::vector<Ps>& link) {
    channel_free_ = channel_started_ = channel;
    link_free_ = link_started_ = link;
  }
  // When each channel and first link is free: after the tasks queued (the next one queued
  // starts no earlier), and after the tasks started (excluding those queued that start later).
  std::vector<Ps>& channel_free() { return channel_free_; }
  std::vector<Ps>& link_free() { return link_free_; }
  const std::vector<Ps>& channel_started() const { return channel_started_; }
  const std::vector<Ps>& link_started() const { return link_started_; }
  void SetCoreBusy(int c) { core_busy_[c] = 1; }
  void WaitForCore(int c, Id g) {
    core_ready_[c].push_back(g);
    std::push_heap(core_ready_[c].begin(), core_ready_[c].end(), std::greater<Id>());
  }

  // The queued tasks that start at `now` start (Defer's order); then what became ready at
  // `now`: DRAM requests join their channel's queue and transfers their first link's (first
  // come first served, ties by lowest id, first links first), transfers without a link start,
  // compute waits for its core; then each free core starts its lowest-id ready task.
  template <class Source>
  bool StartReady(Ps now, Source& src) {
    while (!starts_.empty() && starts_.front().at <= now) {
      std::pop_heap(starts_.begin(), starts_.end(), LaterStart);
      const Deferred d = starts_.back();
      starts_.pop_back();
      (d.q == Queue::kDram ? channel_started_ : link_started_)[d.r] = d.free;
      if (!src.Start(d.g, d.at, d.decided)) return false;
    }
    memory_ready_.clear();
    link_ready_.clear();
    for (const Id g : ready_) {
      switch (src.QueueOf(g)) {
        case Queue::kCompute: {
          const int c = src.ResourceOf(g, Queue::kCompute);
          core_ready_[c].push_back(g);
          std::push_heap(core_ready_[c].begin(), core_ready_[c].end(), std::greater<Id>());
          Dirty(c);
          break;
        }
        case Queue::kDram:
          memory_ready_.push_back(g);
          break;
        case Queue::kLink:
          link_ready_.push_back(g);
          break;
        case Queue::kNone:
          if (!src.Start(g, now, now)) return false;
          break;
      }
    }
    ready_.clear();
    std::sort(link_ready_.begin(), link_ready_.end());
    for (const Id g : link_ready_)
      if (!StartQueued(now, src, g, Queue::kLink)) return false;
    std::sort(memory_ready_.begin(), memory_ready_.end());
    for (const Id g : memory_ready_)
      if (!StartQueued(now, src, g, Queue::kDram)) return false;
    for (const int c : dirty_cores_) {
      core_dirty_[c] = 0;
      auto& h = core_ready_[c];
      if (core_busy_[c] || h.empty()) continue;
      std::pop_heap(h.begin(), h.end(), std::greater<Id>());
      const Id g = h.back();
      h.pop_back();
      core_busy_[c] = 1;
      if (!src.Start(g, now, now)) return false;
    }
    dirty_cores_.clear();
    return true;
  }

  // The next event time into *now (not idle()): on_end(g) for every task that ends then, in
  // id order, before any decision at that time; false as soon as on_end is. A queued task's
  // start earlier than every end is an event time of its own (StartReady starts it).
  template <class OnEnd>
  bool TakeEnded(Ps* now, OnEnd&& on_end) {
    if (!starts_.empty() && (ends_.empty() || starts_.front().at < next_end())) {
      *now = starts_.front().at;
      return true;
    }
    const Ps t = ends_.front().first;
    *now = last_ = t;
    // on_end adds no end (AddEnd comes from a start, in StartReady): the ends at t are those
    // held now, taken in id order.
    while (!ends_.empty() && ends_.front().first == t) {
      std::pop_heap(ends_.begin(), ends_.end(), std::greater<std::pair<Ps, Id>>());
      const Id g = ends_.back().second;
      ends_.pop_back();
      if (!on_end(g)) return false;
    }
    return true;
  }

 private:
  void Dirty(int c) {
    if (!core_dirty_[c]) {
      core_dirty_[c] = 1;
      dirty_cores_.push_back(c);
    }
  }
  // A queue served first come first served: g starts once it is free, and holds it for its
  // busy time; it is started then (Defer), not now, where that is later.
  template <class Source>
  bool StartQueued(Ps now, Source& src, Id g, Queue q) {
    const int32_t r = src.ResourceOf(g, q);
    Ps& free = (q == Queue::kDram ? channel_free_ : link_free_)[r];
    const Ps at = std::max(now, free);
    free = arch::SatAdd(at, src.BusyOf(g));
    if (at > now) {
      Defer(at, g, now, q, r, free);
      return true;
    }
    (q == Queue::kDram ? channel_started_ : link_started_)[r] = free;
    return src.Start(g, at, now);
  }
  // A queued task that starts later than it was decided (Defer).
  struct Deferred {
    Ps at;
    uint64_t seq;  // the order it was queued in
    Ps decided, free;
    Id g;
    int32_t r;
    Queue q;
  };
  static bool LaterStart(const Deferred& a, const Deferred& b) {  // a heap's order: earliest on top
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }
  std::vector<Deferred> starts_;  // a min-heap by (at, seq)
  uint64_t queued_ = 0;
  std::vector<Ps> channel_started_, link_started_;  // free after the tasks started

  std::vector<Id> ready_, memory_ready_, link_ready_;
  std::vector<std::vector<Id>> core_ready_;  // per core: a min-heap of ready ids
  std::vector<uint8_t> core_busy_, core_dirty_;
  std::vector<int> dirty_cores_;
  std::vector<Ps> channel_free_, link_free_;
  // The running tasks' (end, id) in a binary min-heap: the tasks that end at one time come
  // off it in id order. It holds the tasks running at once (on wafer-32x32-qwen3-32b at most
  // 1,024 of 1.6 million), so it stays in cache; the radix heap it replaced moved each event
  // between its 65 buckets 3.6 times on average and scanned them at every event time (20% of
  // the wafer's queued schedule).
  std::vector<std::pair<Ps, Id>> ends_;
  Ps last_ = std::numeric_limits<Ps>::min();  // the last event time taken
};

}  // namespace tpsim::sim
