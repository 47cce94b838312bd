#pragma once
// The queues of the analytical engine's event loop, written once for the two loops that run
// it: sim::Dispatcher::Run (a Program's tasks, uint32_t ids) and sim::StepStream::RunUntil
// (a head Program and decode steps made from a template, uint64_t handles that order as the
// unrolled Program's ids). The rules are schedule.h's; per event time the loop is:
//
//   queues.StartReady(now, source)   what became ready at `now` starts or waits in its queue
//   queues.TakeEnded(&now, on_end)    the next event time, every task that ends then, in id
//                                     order: on_end(id) frees its core (CoreFree) and makes
//                                     its dependents ready (Ready); false stops the loop
//
// `Source` tells a ready task's queue, resource and busy time, and starts it:
//   Queue QueueOf(Id)                 compute, DRAM channel, first link or none
//   int32_t ResourceOf(Id, Queue)     its core, channel or first link
//   Ps BusyOf(Id)                     how long it holds its channel or first link
//   bool Start(Id, Ps at, Ps now)     records the start (and adds its end: AddEnd); false
//                                     stops the loop

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
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
    ready_.clear();
    events_.clear();
    events_.reserve(1024);
  }
  // Task g's deps have all ended.
  void Ready(Id g) { ready_.push_back(g); }
  // A compute task of core c ended: the core picks its next task at this time.
  void CoreFree(int c) {
    core_busy_[c] = 0;
    Dirty(c);
  }
  // A started task's end.
  void AddEnd(Ps end, Id g) {
    events_.emplace_back(end, g);
    std::push_heap(events_.begin(), events_.end(), std::greater<std::pair<Ps, Id>>());
  }
  bool idle() const { return events_.empty(); }
  Ps next_end() const { return events_.front().first; }  // not idle()
  // To set up a state mid-schedule (sim::StepStream's replay, going back): after Reset, the
  // channels' and first links' free times, the busy cores, the compute tasks ready and
  // waiting for their core, and the running tasks' ends (AddEnd).
  std::vector<Ps>& channel_free() { return channel_free_; }
  std::vector<Ps>& link_free() { return link_free_; }
  void SetCoreBusy(int c) { core_busy_[c] = 1; }
  void WaitForCore(int c, Id g) {
    core_ready_[c].push_back(g);
    std::push_heap(core_ready_[c].begin(), core_ready_[c].end(), std::greater<Id>());
  }

  // What became ready at `now`: DRAM requests join their channel's queue and transfers their
  // first link's (first come first served, ties by lowest id), transfers without a link start,
  // compute waits for its core; then each free core starts its lowest-id ready task.
  template <class Source>
  bool StartReady(Ps now, Source& src) {
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
      if (!StartQueued(now, src, g, link_free_[src.ResourceOf(g, Queue::kLink)])) return false;
    std::sort(memory_ready_.begin(), memory_ready_.end());
    for (const Id g : memory_ready_)
      if (!StartQueued(now, src, g, channel_free_[src.ResourceOf(g, Queue::kDram)])) return false;
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
  // id order, before any decision at that time; false as soon as on_end is.
  template <class OnEnd>
  bool TakeEnded(Ps* now, OnEnd&& on_end) {
    const auto later = std::greater<std::pair<Ps, Id>>();
    *now = events_.front().first;
    while (!events_.empty() && events_.front().first == *now) {
      std::pop_heap(events_.begin(), events_.end(), later);
      const Id g = events_.back().second;
      events_.pop_back();
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
  // busy time.
  template <class Source>
  bool StartQueued(Ps now, Source& src, Id g, Ps& free) {
    const Ps at = std::max(now, free);
    free = arch::SatAdd(at, src.BusyOf(g));
    return src.Start(g, at, now);
  }

  std::vector<Id> ready_, memory_ready_, link_ready_;
  std::vector<std::vector<Id>> core_ready_;  // per core: a min-heap of ready ids
  std::vector<uint8_t> core_busy_, core_dirty_;
  std::vector<int> dirty_cores_;
  std::vector<Ps> channel_free_, link_free_;
  std::vector<std::pair<Ps, Id>> events_;  // min-heap of (end, id) of running tasks
};

}  // namespace tpsim::sim
