#pragma once
// The analytical engine's schedule over a head Program and decode steps made from a template
// as they are needed (sim/step_rolling.h has the argument).

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mapping/program.h"
#include "sim/analytical/analytical.h"
#include "sim/analytical/links.h"
#include "sim/engine.h"
#include "sim/schedule.h"

namespace tpsim::sim {

// The template's tasks as the schedule reads them: per task its queue, resource, kind of
// flow and the kind it counts to on the critical path (together: they are read together),
// its durations and busy times (those of the tasks that follow the context are a step's own:
// StepStream::Durations), deps on the steps before (CSR) and the dependents there (CSR),
// in-step dependents (CSR).
// A decode step's own flow (StepShape::step_flows): its bytes, when it enters its route after
// its start, and how long it holds each link (FlowSet::HoldOf).
struct StepFlow {
  uint64_t bytes = 0;
  Ps inject = 0;
  std::vector<Ps> holds;
};

struct StepShape {
  struct Task {
    Queue queue;
    uint8_t path_kind;
    bool compute;
    int32_t resource;
    int32_t flow_kind;  // its kind of flow, -1 for none
    int32_t step_flow;  // its index in step_flows, -1 for none
  };
  const mapping::Program* p = nullptr;
  std::vector<Task> task;
  // The flows whose bytes are each step's own (KV reads over links: their kind's route, with
  // a step's bytes, inject and holds, StepFlow).
  std::vector<uint32_t> step_flows;
  std::vector<Ps> duration, busy;
  const FlowSet* flows = nullptr;  // the template's flows (its LinkModel's)
  std::vector<uint32_t> ext_begin, ext_dep_begin, dep_begin;
  std::vector<std::pair<uint32_t, uint32_t>> ext, ext_dep;  // (steps back / on, task of that step)
  std::vector<uint32_t> dependents;                         // in-step, in id order
};

// The analytical engine's schedule (sim::Dispatcher::Run, the same event loop and rules) of
// the unrolled Program of B (the prefill and decode steps 1 .. HB) followed by decode steps
// HB + 1 .. N, each the template's tasks, without materialising it: a step's tasks exist from
// when a task they wait on ends until the step is taken (Take) and the L steps after it have
// started every task. Ids order as the unrolled Program's. `links`: the reservations of links
// (null: the schedule without queues on links, the contention indicator's); `path`: each
// task's critical-path split, carried forward.
class StepStream {
 public:
  // Sets a decode step's durations and busy times (sim::TaskCosts) of the tasks that follow the
  // context, over the template's (StepShape::duration, busy; the others are never written).
  // And the step's own flows (StepShape::step_flows), one each.
  using Durations = std::function<void(uint32_t, std::vector<Ps>*, std::vector<Ps>*, std::vector<StepFlow>*)>;
  StepStream(const StepShape& shape, const mapping::Program& B, const LinkedProgram& qb,
             const std::vector<size_t>& bB, uint32_t L, uint32_t N, int cores, size_t channels, size_t links,
             LinkReservation* reservation, bool path, Durations durations);
  // Runs until every task of segments 0 .. seg (0: the prefill, k: decode step k) has ended;
  // false with *why when the schedule cannot go on as the unrolled one.
  bool RunUntil(uint32_t seg, std::string* why);
  // Decode step k > HB, after RunUntil(k): its tasks' times; Take(k) frees its room.
  std::span<const TaskTime> times(uint32_t k) const { return slot(k).times; }
  // When task i of decode step k became ready: its latest-ending dep's end (every task of a
  // decode step waits on something).
  Ps ready(uint32_t k, uint32_t i) const { return slot(k).waiting[i].best_end; }
  std::span<const Ps> busy(uint32_t k) const { return slot(k).busy; }
  // Take may come from another thread (the step's composition) than the schedule's: then
  // `wait` is how the schedule waits for a step to be taken before it reuses its room (false:
  // give up).
  void Take(uint32_t k) { taken_.store(k, std::memory_order_release); }
  uint32_t taken() const { return taken_.load(std::memory_order_acquire); }
  void set_wait_for_take(std::function<bool(uint32_t)> wait) { wait_for_take_ = std::move(wait); }
  // No task of a step after k starts earlier than this (the event time, and the starts so far).
  Ps Horizon(uint32_t k) const {
    Ps h = now_;
    for (const Slot& sl : slots_)
      if (sl.step > k && sl.started) h = std::min(h, sl.first_start);
    return h;
  }
  // B's tasks' times, after RunUntil(HB).
  std::span<const TaskTime> head_times() const { return b_times_; }
  Ps total() const { return total_; }
  const CriticalPathSplit& path() const { return last_; }
  bool delayed() const { return delayed_; }  // some flow ended later than alone

 private:
  // A task not started yet: its deps not ended, and the latest-ending one so far (the first
  // to end at that time: ends come in (end, id) order), with its end; kept together, as they
  // are read together.
  struct Waiting {
    uint64_t best;
    Ps best_end;
    uint32_t unmet;
  };
  struct Slot {
    uint32_t step = 0;  // 0: none
    uint32_t started = 0, ended = 0;
    Ps first_start = 0;  // of the tasks started
    std::vector<TaskTime> times;
    std::vector<CriticalPathSplit> split;
    std::vector<Waiting> waiting;
    std::vector<Ps> duration, busy;
    std::vector<StepFlow> flows;  // per StepShape::step_flows
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
  void Ready(uint64_t g) { q_.Ready(g); }
  const CriticalPathSplit& SplitOf(uint64_t g) const {
    return g < NB_ ? b_split_[g] : slot(StepOf(g)).split[RelOf(g)];
  }

  const StepShape& s_;
  const mapping::Program& B_;
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
  std::vector<CriticalPathSplit> b_split_;
  std::vector<Waiting> b_waiting_;
  std::vector<Waiting> step_waiting_;  // a decode step's tasks before any dep ended
  std::vector<uint32_t> seg_ended_;    // B's segments: tasks ended
  std::vector<Slot> slots_;
  std::atomic<uint32_t> taken_{0};
  std::function<bool(uint32_t)> wait_for_take_;
  uint32_t started_upto_ = 0;  // every task of steps <= started_upto_ has started
  // The event loop's state (Dispatcher::Run's queues, sim/dispatch_loop.h).
  Ps now_ = 0;
  DispatchQueues<uint64_t> q_;
  std::vector<Last> core_last_, channel_last_;
  Ps total_ = std::numeric_limits<Ps>::min();
  uint64_t total_id_ = 0;
  CriticalPathSplit last_;
  bool delayed_ = false;
};

}  // namespace tpsim::sim
