#pragma once
// The one schedule: the analytical engine's timing rule, written once. The analytical
// engine times Programs with it, the serving skeletons replay it (numerically, and
// symbolically as max-plus polynomials), and the Result's critical path walks it back.
// It follows the rules by which the TLM engine's cores and DRAM channels pick their work
// (sim/tlm/core.cc, sim/tlm/dram.cc), so that the two engines run tasks in the same order:
//
//   compute:   a core runs one compute task at a time; whenever it is free it starts the
//              lowest-id task among those whose deps have all ended (every task that became
//              ready at that instant competes), and it never waits for a lower id that is
//              not ready yet
//   memory:    a DRAM request is issued when its deps have ended and its channel serves
//              requests first come first served (by that time, ties by lowest id): it starts
//              at max(issue, channel free), holds the channel for `busy` ps (its bytes at the
//              channel's rate, mapping::ChannelBusyTime) and ends `duration` ps after its
//              start (latency included, and its network path when it has one), so the
//              next request's transfer overlaps this one's latency
//   transfer:  issued when its deps have ended; over links, it queues for the first link
//              of its route first come first served (by that time, ties by lowest id), as a
//              TLM message does, and holds it for its bytes at that link's rate; then the
//              other links and the rest of its duration. Transfers overlap with compute,
//              with DRAM accesses and with transfers that leave by other links.
//   end = start + duration (saturating); makespan = max end (0 for an empty Program).
//
// Dispatch runs this as a discrete-event pass (O(n log n)) and records the order in which
// it starts tasks: by start time (a task that waits in its channel's or first link's queue
// is started when its queue lets it go, not when it joins the queue; sim/dispatch_loop.h has
// the order at one time), so that links are reserved in the order flows start. Given that order, the rule is
// max-plus: each task starts at
//   max(end of its deps, the time its queue is free)
// where the queue is its core's compute unit (free at the previous task's end), its
// channel or first link (free at the previous one's start + busy), or none (a transfer
// without links: to its own core, or through the switch engine). ListSchedule
// is that pass over any algebra (numbers, max-plus polynomials, ...) in a given order; over
// numbers in Dispatch's order it gives Dispatch's times to the picosecond. The critical
// path walks the same edges backwards.
//
//   core 0 compute  [ a ][    b    ]          b waits for a (its queue) and for t
//   transfers            [ t ]                t waits for a (a dep)
//   core 1 compute             [ c ]          c waits for t (a dep)
//   channel 0       [ r1 ]..                  r2 issued with r1 starts when r1's bytes
//                          [ r2 ]..           have left the channel; ".." its latency

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "mapping/program.h"
#include "sim/dispatch_loop.h"
#include "sim/engine.h"

namespace tpsim::sim {

// The rule over any max-plus algebra, in a fixed order. `Graph`:
//   order()   the tasks in the order to time them (Dispatch's start order: every task after
//             its deps and after the tasks before it in its queue)
//   deps(i)   iterable of uint32_t task ids; Queue queue(i); int resource(i) (the core of a
//             compute task, the channel of a memory task, the first link of a transfer)
// `Algebra` holds the times of type Algebra::Time, a value or a handle to one:
//   Time Origin()                  the time origin (a task with no constraint starts there)
//   Time EndOf(d)                  end of task d (d timed earlier in the order)
//   Time FreeAt(q, r)              the time queue (q, r) is free
//   Time Later(Time a, Time b)     max(a, b) (may reuse a's storage)
//   Time Finish(i, Time start)     end of task i := start + its duration; returns it
//   void Release(i, q, r, Time start, Time end)
//                                  queue (q, r) is free after task i: at `end` for a core,
//                                  at start + busy(i) for a channel or a link
// ProgramGraph adapts a Program.
template <class Graph, class Algebra>
void ListSchedule(const Graph& g, Algebra& a) {
  for (uint32_t i : g.order()) {
    const Queue q = g.queue(i);
    typename Algebra::Time start = a.Origin();
    for (uint32_t d : g.deps(i)) start = a.Later(start, a.EndOf(d));
    if (q == Queue::kNone) {
      a.Finish(i, start);
    } else {
      const int r = g.resource(i);
      start = a.Later(start, a.FreeAt(q, r));
      a.Release(i, q, r, start, a.Finish(i, start));
    }
  }
}

// A Program, a timing order and the transfers' first links (as Dispatcher's) as
// ListSchedule's Graph.
struct ProgramGraph {
  const mapping::Program& p;
  std::span<const uint32_t> task_order;
  std::span<const int32_t> first_link = {};
  std::span<const uint32_t> order() const { return task_order; }
  std::span<const mapping::TaskId> deps(size_t i) const { return p.deps(i); }
  Queue queue(size_t i) const { return QueueOf(p.kind(i), first_link, i); }
  int resource(size_t i) const {
    switch (queue(i)) {
      case Queue::kDram:
        return p.memory(i).channel;
      case Queue::kLink:
        return first_link[i];
      default:
        return p.core(i);
    }
  }
};

// Every task's duration and what it holds of its queue (Dispatcher::Run): one entry per
// task, or, with `key` (one per task), one per key, tasks of one key costing the same (the
// analytical engine keys them by distinct shape: for the 1.6 million tasks of wafer-32x32
// that is 4 bytes a task instead of 16, 20 MB less).
struct TaskCosts {
  std::span<const Ps> duration, busy;
  std::span<const uint32_t> key = {};
  bool by_key = false;  // `key` gives each task's entry (else task i's is entry i)
  // By key, and for a Dispatcher made without first links: per key, the first link of a
  // transfer's route (-1 for none; the engine's keys, 4 bytes a task less than per task).
  std::span<const int32_t> first_link_of_key = {};
  size_t tasks() const { return by_key ? key.size() : duration.size(); }
  Ps duration_of(size_t i) const { return duration[by_key ? key[i] : i]; }
  Ps busy_of(size_t i) const { return busy[by_key ? key[i] : i]; }
};

// The numeric schedule of one Program, with its dependents and buffers kept between runs
// (the analytical engine schedules one Program twice: with and without queues on links).
class Dispatcher {
 public:
  // Every task's core must be in [0, p.num_cores) and every memory task's channel in
  // [0, p.num_channels), as mapping::Verify checks when the Program is built.
  // `first_link`: per task, the first link of a transfer's route in [0, num_links), -1
  // for a transfer that queues for none (and for every other task); empty: none does.
  explicit Dispatcher(const mapping::Program& p, std::vector<int32_t> first_link = {}, int num_links = 0);
  // A Dispatcher of the same Program and links that shares this one's first links and
  // dependents (built once) and nothing else: the two may Run at once on two threads.
  // It has no finisher and keeps its order.
  Dispatcher Sibling() const { return Dispatcher(*this, 0); }
  // Times the Program with `duration` (one per task) and `busy` (one per task: how long a
  // memory task holds its channel and a transfer its first link; other tasks' entries are
  // not read): times[i] = {start, end} (none written when `times` is empty); returns the
  // makespan. Ends saturate at INT64_MAX.
  Ps Run(std::span<const Ps> duration, std::span<const Ps> busy, std::span<TaskTime> times) {
    return Run(TaskCosts{duration, busy}, times);
  }
  // The same with costs per task or per key.
  Ps Run(const TaskCosts& costs, std::span<TaskTime> times);
  // The order in which the last Run started the tasks (ListSchedule's order); empty after
  // keep_order(false), which saves 4 bytes a task where no one replays the schedule.
  const std::vector<uint32_t>& order() const { return order_; }
  void keep_order(bool keep) { keep_order_ = keep; }
  // Every transfer's and memory task's end decided at its start by `finish(task, start, now)`
  // instead of start + duration (the analytical engine's queues on links,
  // sim/analytical/links.h); called in start order at the event time of the start, `now`
  // (equal to `start`, no later than any later call's). Compute tasks keep start + duration.
  void set_finisher(std::function<Ps(uint32_t, Ps, Ps)> finish) { finish_ = std::move(finish); }

 private:
  // What no Run changes: the transfers' first links, every task's kind and dependents
  // (dependents[first_dependent[i]..first_dependent[i + 1]) of task i, encoded as the
  // constructor says).
  struct Graph {
    static constexpr uint16_t kFar = 0xffff;  // a dependent kFar or more ids on: written whole
    std::vector<int32_t> first_link;
    std::vector<uint32_t> first_dependent;
    std::vector<uint16_t> dependents;
    // Every task's kind, as the Program's: the loop reads it for each task it makes ready,
    // starts and ends, and the Program's records are 16 bytes a task (1.6 MB, not 26, on the
    // wafer: 8% off its queued schedule).
    std::vector<mapping::TaskKind> kind;
    uint32_t max_deps = 0;  // the most deps of one task
  };
  Dispatcher(const Dispatcher& of, int);  // Sibling
  void Reset(int num_links);
  const mapping::Program& p_;
  std::shared_ptr<const Graph> graph_;
  std::vector<uint8_t> unmet8_;  // one of the three holds the unmet deps (Run)
  std::vector<uint16_t> unmet16_;
  std::vector<uint32_t> unmet32_, order_;
  DispatchQueues<uint32_t> q_;  // the loop's queues (sim/dispatch_loop.h)
  int num_links_ = 0;
  std::function<Ps(uint32_t, Ps, Ps)> finish_;
  bool keep_order_ = true;
};

// The numeric ListSchedule of `p` in `order` with `duration` and `busy` as in Dispatcher::Run:
// every task's end (Dispatcher's ends when `order` is its order for the same durations).
std::vector<Ps> ReplayEnds(const mapping::Program& p, std::span<const uint32_t> order,
                           std::span<const Ps> duration, std::span<const Ps> busy,
                           std::span<const int32_t> first_link = {}, int num_links = 0);

// The critical path of a timed Program, split by task kind (Result summary, sim/result.h):
// walked backwards from the last-finishing task (lowest id on ties) to its enabler, the
// latest-ending (lowest id on ties) of its deps and of the task before it in its queue
// (a compute task: the same core's compute; a memory task: the same channel's requests; by
// start time then id, as the engine ran them) among those that end no later than it. Each
// task on the path adds to its kind the time from its enabler's end to its own (PathPart), so
// the three sum to the makespan. `times` has one per task. A
// GPU's collective kernel (a compute task of op_kind kCollective) counts as communication.
struct CriticalPathSplit {
  Ps compute_ps = 0, communication_ps = 0, memory_ps = 0;
};
// What a task on the critical path adds to its kind: from its enabler's end (`enabler_end`, null
// for the path's first task: from the start of time) to its own end. Not from its start: a
// wait for a queue the walk does not follow (a transfer's first link; a channel whose request
// before this one ends later) is this task's, so the three parts add up to the makespan.
// CriticalPath, the decode steps' schedule (sim/step_stream.cc) and the TLM engine's streamed
// steps (sim/tlm/run_state.cc) all take it from here.
inline Ps PathPart(Ps end, const Ps* enabler_end) {
  return std::max<Ps>(0, end - (enabler_end ? *enabler_end : 0));
}
CriticalPathSplit CriticalPath(const mapping::Program& p, std::span<const TaskTime> times);
// Each DRAM channel's max_queue_ps: the longest a memory task of `p` waited for its channel
// after its deps ended (start - the latest end of its deps), over `times` (one per task); the
// maxima already in `channels` are kept.
void AddChannelWaits(const mapping::Program& p, std::span<const TaskTime> times,
                     std::vector<ChannelUsage>* channels);
// A GPU's collective kernel: a compute task of op_kind kCollective, which runs on its core but
// is communication (the critical path, the op rows and the cores' compute time count it so).
inline bool CollectiveKernel(const mapping::Program& p, size_t i) {
  return p.kind(i) == mapping::TaskKind::kCompute && p.shape(i).op_kind == llm::OpKind::kCollective;
}
// The kind a task's span counts to on the critical path, as a TaskKind index: its own, but
// communication for a GPU's collective kernel.
int PathKind(const mapping::Program& p, size_t i);

}  // namespace tpsim::sim
