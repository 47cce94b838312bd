#pragma once
// DRAM / HBM channels: one FIFO request queue per channel (model in
// tlm_engine.h). One TLM target for all cores; the network hands it the memory
// tasks whose data crosses links (Request).
//
// Requests that arrive at one time are served in id order (sim/schedule.h's queue rule):
// a request is collected when it arrives and the channel takes it one delta cycle later,
// with every other request that arrived in the same delta (those are the ones made ready
// by the tasks that ended at that time), lowest id first. The response time is known
// then, and goes back as BEGIN_RESP with the remaining time as annotated delay.

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <cstdint>
#include <systemc>
#include <tlm>
#include <vector>

#include "sim/tlm/run_state.h"

namespace tpsim::sim::tlm_model {

class Network;

class Dram : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Dram);
  Dram(sc_core::sc_module_name name, RunState* state);

  tlm_utils::multi_passthrough_target_socket<Dram> socket;

  const std::vector<ChannelUsage>& usage() const { return usage_; }

  // What a channel gives a request: it serves it from `start` (FIFO) for `total` ps
  // (latency + bytes at the effective rate).
  struct Grant {
    Ps start = 0, total = 0;
  };
  // Memory task `task`, whose data crosses links, arrives at its channel now: the network's
  // message `slot` gets its Grant (Network::Granted) when the channel takes it.
  void Request(TaskRef task, uint32_t slot);
  void set_network(Network* net) { net_ = net; }
  // Requests wait for the next delta cycle (Serve is notified).
  bool waiting() const { return !arrived_.empty(); }

 private:
  tlm::tlm_sync_enum nb_transport_fw(int port, tlm::tlm_generic_payload& gp, tlm::tlm_phase& phase,
                                     sc_core::sc_time& delay);
  // The requests that arrived before this delta cycle, in id order, each to its channel.
  void Serve();
  Grant Reserve(TaskRef task, Ps now);

  // A request waiting for the delta cycle after its arrival: a core's (gp, its socket port)
  // or the network's (gp null, its message slot).
  struct Arrival {
    TaskRef task;
    sc_dt::uint64 delta;  // sc_delta_count() at its arrival
    tlm::tlm_generic_payload* gp;
    uint32_t port_or_slot;
  };

  RunState* st_;
  Network* net_ = nullptr;
  std::vector<Ps> free_;
  std::vector<ChannelUsage> usage_;
  std::vector<Arrival> arrived_, serving_;
  sc_core::sc_event serve_ev_;
};

}  // namespace tpsim::sim::tlm_model
