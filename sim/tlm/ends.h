#pragma once
// The ends of the tasks of every core: compute tasks' (their duration after they start) and
// transactions' (BEGIN_RESP's annotated delay after the response). One queue and one SC_METHOD
// for the whole chip, not a process and a timed notification per core (each core's
// peq_with_cb_and_phase and compute event made the kernel's timed-event heap and its process
// activations most of the run's time on large chips).
//
// Same delta cycles as those per-core queues (tlm_engine.h, ties): a task that ends after a
// delay > 0 ends in the first delta cycle of that time, one that ends after no delay in the
// next delta cycle. What ends in one delta cycle ends in one activation, lowest task id first.
//
// The network takes a time's events in the delta cycle after its first one, when the tasks
// that end then have issued their messages (network.h, Process). Where no core decides and no
// DRAM request waits for that delta cycle (they would decide there too), the network alone
// would run in it: then Fire has the network take them at once, at the end of the first
// delta cycle, and saves a delta cycle and an activation of the kernel per time.

#include <cstdint>
#include <limits>
#include <queue>
#include <systemc>
#include <vector>

#include "sim/tlm/run_state.h"

namespace tpsim::sim::tlm_model {

class Dram;
class Network;

class Ends : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Ends);
  Ends(sc_core::sc_module_name name, RunState* state);

  // Compute task `task` of core `core` ends `delay_ps` (>= 0) from now (Core::ComputeDone).
  void Compute(TaskRef task, int core, Ps delay_ps) { Add(End{NowPs() + delay_ps, task, core}, delay_ps); }
  // The transaction of memory task or transfer `task` completes `delay_ps` (>= 0) from now.
  void Response(TaskRef task, Ps delay_ps) { Add(End{NowPs() + delay_ps, task, -1}, delay_ps); }
  // The modules whose next delta cycle a time's first one may take (Fire).
  void set_neighbours(Network* net, const Dram* dram) {
    net_ = net;
    dram_ = dram;
  }
  // Whether tasks end (or ended) in the first delta cycle of time `now` (the current time).
  bool EndsAt(Ps now) const { return fired_ == now || (!timed_.empty() && timed_.top().t <= now); }

 private:
  struct End {
    Ps t;
    TaskRef task;
    int core;  // a compute task's core; -1: a transaction
    bool operator>(const End& o) const { return t != o.t ? t > o.t : task > o.task; }
  };
  static constexpr Ps kNever = std::numeric_limits<Ps>::max();
  void Add(const End& e, Ps delay_ps);
  // Ends what is due in this delta cycle.
  void Fire();
  void Finish(const End& e);

  RunState* st_;
  Network* net_ = nullptr;
  const Dram* dram_ = nullptr;
  std::priority_queue<End, std::vector<End>, std::greater<End>> timed_;
  std::vector<End> next_delta_, now_;  // ends of no delay: in the next delta cycle
  // What ev_ is notified for (none while Fire runs: it notifies once, at its end).
  Ps armed_ = kNever;
  Ps fired_ = -1;  // when Fire last ran
  bool delta_armed_ = false, firing_ = false;
  sc_core::sc_event ev_;
};

}  // namespace tpsim::sim::tlm_model
