#pragma once
// DRAM / HBM channels: one FIFO request queue per channel (model in
// tlm_engine.h). One TLM target for all cores; the response time is known when
// the request arrives, so it is returned at once as the annotated delay.

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <cstdint>
#include <systemc>
#include <tlm>
#include <vector>

#include "sim/tlm/run_state.h"

namespace tpsim::sim::tlm_model {

class Dram : public sc_core::sc_module {
 public:
  Dram(sc_core::sc_module_name name, RunState* state);

  tlm_utils::multi_passthrough_target_socket<Dram> socket;

  const std::vector<ChannelUsage>& usage() const { return usage_; }

  // Queues memory task `task` at its channel at `now`: the channel serves it
  // from `start` (FIFO) for `total` ps (latency + bytes at the effective rate).
  struct Grant {
    Ps start = 0, total = 0;
  };
  Grant Reserve(TaskRef task, Ps now);

 private:
  tlm::tlm_sync_enum nb_transport_fw(int port, tlm::tlm_generic_payload& gp, tlm::tlm_phase& phase,
                                     sc_core::sc_time& delay);

  RunState* st_;
  std::vector<Ps> free_;
  std::vector<ChannelUsage> usage_;
};

}  // namespace tpsim::sim::tlm_model
