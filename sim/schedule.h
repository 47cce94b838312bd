#pragma once
// The list schedule: the analytical engine's timing rule, written once. The analytical
// engine times Programs with it, the serving skeletons replay it (numerically, and
// symbolically as max-plus polynomials), and the Result's critical path walks it back.
//
// One pass over tasks in id order (a Program is topologically ordered):
//   compute:   start = max(end of deps, end of the core's previous compute task)
//              (a core runs one compute task at a time, in id order)
//   memory:    start = max(end of deps, end of the core's previous memory task)
//              (each core has one DRAM DMA queue, served in id order)
//   transfer:  start = max(end of deps)
//              (network DMA engines: transfers overlap with compute, with DRAM
//              accesses and with each other)
//   end = start + duration; makespan = max end (0 for an empty Program).
//
// The queue a task waits on besides its deps is QueueOf(kind). The critical path walks
// the same edges backwards: from a task to its enabler, the latest-ending of its deps and
// of the task before it in its queue.
//
//   core 0 compute  [ a ][    b    ]          b waits for a (its queue) and for t
//   transfers            [ t ]                t waits for a (a dep)
//   core 1 compute             [ c ]          c waits for t (a dep)

#include <cstdint>
#include <span>
#include <vector>

#include "mapping/program.h"
#include "sim/engine.h"

namespace tpsim::sim {

// The queue a task waits for besides its deps: its core's compute unit, its core's DRAM
// DMA queue, or none (transfers).
// Numbered like TaskKind, so that QueueOf is free in the hot loop.
enum class Queue : uint8_t { kCompute, kNone, kDram };
static_assert(static_cast<int>(mapping::TaskKind::kCompute) == static_cast<int>(Queue::kCompute) &&
              static_cast<int>(mapping::TaskKind::kTransfer) == static_cast<int>(Queue::kNone) &&
              static_cast<int>(mapping::TaskKind::kMemory) == static_cast<int>(Queue::kDram));
constexpr Queue QueueOf(mapping::TaskKind k) { return static_cast<Queue>(k); }

// The rule over any max-plus algebra. `Graph` is a DAG in topological id order:
//   size_t size(); deps(i) (iterable of uint32_t ids < i); Queue queue(i); int core(i).
// `Algebra` holds the times (numbers, max-plus polynomials, ...) of type Algebra::Time,
// a value or a handle to one:
//   Time Origin()                  the time origin (a task with no constraint starts there)
//   Time EndOf(d)                  end of task d (d < the task being timed)
//   Time FreeAt(q, core)           the time queue (q, core) is free
//   Time Later(Time a, Time b)     max(a, b) (may reuse a's storage)
//   Time Finish(i, Time start)     end of task i := start + its duration; returns it
//   void Occupy(q, core, Time end) queue (q, core) is free from `end`
// ProgramGraph adapts a Program; ListScheduler below is the numeric algebra.
template <class Graph, class Algebra>
void ListSchedule(const Graph& g, Algebra& a) {
  const size_t n = g.size();
  for (size_t i = 0; i < n; ++i) {
    const Queue q = g.queue(i);
    typename Algebra::Time start = a.Origin();
    for (uint32_t d : g.deps(i)) start = a.Later(start, a.EndOf(d));
    if (q == Queue::kNone) {
      a.Finish(i, start);
    } else {
      const int core = g.core(i);
      a.Occupy(q, core, a.Finish(i, a.Later(start, a.FreeAt(q, core))));
    }
  }
}

// A Program as ListSchedule's Graph.
struct ProgramGraph {
  const mapping::Program& p;
  size_t size() const { return p.num_tasks(); }
  std::span<const mapping::TaskId> deps(size_t i) const { return p.deps(i); }
  Queue queue(size_t i) const { return QueueOf(p.kind(i)); }
  int core(size_t i) const { return p.core(i); }
};

// The numeric schedule, with buffers kept between runs (the analytical engine schedules
// one Program several times while link sharing settles).
class ListScheduler {
 public:
  // Times `p` with `duration` (one per task): times[i] = {start, end}; returns the
  // makespan. Ends saturate at INT64_MAX. Every task's core must be in [0, p.num_cores),
  // as mapping::Verify checks when the Program is built.
  Ps Run(const mapping::Program& p, std::span<const Ps> duration, std::span<TaskTime> times);

 private:
  std::vector<Ps> core_free_, dram_free_;
};

// Every task's end under ListSchedule with `duration`.
std::vector<Ps> ScheduleEnds(const mapping::Program& p, std::span<const Ps> duration);

// The critical path of a timed Program, split by task kind (Result summary, sim/result.h):
// walked backwards from the last-finishing task (lowest id on ties) to its enabler, the
// latest-ending (lowest id on ties) of its deps and of the task before it in its queue
// (same queue and core, by start time then id, as the engine ran it). Each task on the path
// adds to its kind the part of its span after its enabler ended, so the three sum to at
// most the makespan, and to the makespan for a ListSchedule. `times` has one per task. A
// GPU's collective kernel (a compute task of op_kind kCollective) counts as communication.
struct CriticalPathSplit {
  Ps compute_ps = 0, communication_ps = 0, memory_ps = 0;
};
CriticalPathSplit CriticalPath(const mapping::Program& p, std::span<const TaskTime> times);

}  // namespace tpsim::sim
