#pragma once
// One core: runs its compute tasks one at a time and issues its transfer and
// memory tasks as TLM-2.0 transactions (see tlm_engine.h for the protocol).

#include <tlm_utils/simple_initiator_socket.h>
#include <cstdint>
#include <memory>
#include <queue>
#include <systemc>
#include <tlm>
#include <vector>

#include "sim/tlm/run_state.h"

namespace tpsim::sim::tlm_model {

class Ends;

class Core : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Core);
  // Its compute tasks and its transactions end through `ends` (shared by every core).
  Core(sc_core::sc_module_name name, int id, RunState* state, Ends* ends);

  tlm_utils::simple_initiator_socket<Core> net_socket;
  tlm_utils::simple_initiator_socket<Core> mem_socket;

  // `task` (bound to this core) has all its deps done at the current time.
  void Ready(TaskRef task);
  int id() const { return id_; }  // the core's index on the chip
  // Its running compute task `task` ends now (Ends).
  void ComputeDone(TaskRef task);

 private:
  // StartNext in the next delta cycle (counted in RunState::deciding until it runs).
  void Decide();
  void StartNext();
  tlm::tlm_sync_enum nb_transport_bw(tlm::tlm_generic_payload& gp, tlm::tlm_phase& phase,
                                     sc_core::sc_time& delay);
  tlm::tlm_generic_payload* Acquire();

  int id_;
  RunState* st_;
  Ends* ends_;
  std::priority_queue<TaskRef, std::vector<TaskRef>, std::greater<TaskRef>> ready_;
  TaskRef running_ = kIdle;
  bool deciding_ = false;
  static constexpr TaskRef kIdle = ~TaskRef{0};
  sc_core::sc_event start_ev_;
  std::vector<std::unique_ptr<tlm::tlm_generic_payload>> pool_;
  std::vector<tlm::tlm_generic_payload*> free_;
};

}  // namespace tpsim::sim::tlm_model
