#pragma once
// The on-chip network: every directed link of the chip serialises packets at
// its bandwidth, in age order, with cut-through across hops (the model is
// stated in tlm_engine.h). In-switch transfers (Task::in_switch_gbps > 0) skip
// the links: each core's switch port sends them one after another at that rate,
// and they arrive after their route's hop latencies. One TLM target for all cores; link state is a
// "free at" time per link, packet departures are computed from it, and the
// only events are message starts and packet arrivals at a hop after the first
// (at most one pending event per message and hop).
// Memory tasks whose data crosses links (RunState::mem_via_net) come here too:
// their channel is reserved first (Dram::Reserve), and the message starts as
// late as lets its first link finish no earlier than the channel delivers the
// last byte, i.e. at start + latency + max(0, channel time - first-link time):
// cut-through behind the channel, contending for links like any transfer.

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <cstdint>
#include <queue>
#include <systemc>
#include <tlm>
#include <vector>

#include "sim/tlm/run_state.h"

namespace tpsim::sim::tlm_model {

class Network : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Network);
  // Precomputes the route of every transfer of the Program; throws
  // std::invalid_argument for a link without bandwidth on a route.
  Network(sc_core::sc_module_name name, RunState* state, uint64_t packet_bytes);

  tlm_utils::multi_passthrough_target_socket<Network> socket;

  const std::vector<LinkUsage>& usage() const { return usage_; }
  // The channels memory tasks with a network path are queued at (required when
  // the Program has such tasks).
  void set_dram(class Dram* dram) { dram_ = dram; }

 private:
  struct Message {
    uint32_t task = 0;
    int port = 0;
    tlm::tlm_generic_payload* gp = nullptr;
    uint32_t route_begin = 0, hops = 0;
    uint32_t packets = 0, arrived = 0;
    uint64_t bytes = 0;
    Ps start_ps = 0;  // when the first link starts sending this message
    Ps done_ps = 0;
    std::vector<Ps> last_end;  // per hop: when this message's previous packet left the link
  };
  static constexpr uint32_t kInject = 0xffffffffu;
  // A packet's head reaching hop `hop` of its route at `t` (its tail at `tail`),
  // or (packet == kInject) a message starting at `t`.
  struct Event {
    Ps t;
    uint32_t task;
    uint32_t packet;
    uint32_t slot;
    uint32_t hop;
    Ps tail;
    bool operator>(const Event& o) const {
      if (t != o.t) return t > o.t;
      if (task != o.task) return task > o.task;
      return packet > o.packet;
    }
  };

  tlm::tlm_sync_enum nb_transport_fw(int port, tlm::tlm_generic_payload& gp, tlm::tlm_phase& phase,
                                     sc_core::sc_time& delay);
  void Process();
  void Inject(const Event& e);
  // Sends packet `p` of message `m` over hop `hop`; schedules its next hop or its arrival.
  // Schedules packet `p`'s arrival at hop 1 (its departure from hop 0 is closed form).
  void ScheduleFirstHop(const Message& m, uint32_t slot, uint32_t p);
  void Hop(Message& m, uint32_t slot, uint32_t p, uint32_t hop, Ps head, Ps tail);
  void Finish(Message& m, uint32_t slot);
  uint64_t PacketBytes(const Message& m, uint32_t p) const;
  Ps Serialise(const Message& m, uint32_t p, int link) const;
  void Schedule(const Event& e);

  RunState* st_;
  class Dram* dram_ = nullptr;
  uint64_t packet_bytes_;
  std::vector<int> route_links_;    // concatenated routes
  std::vector<uint32_t> route_of_;  // per task: offset into route_links_ (transfers, memory via links)
  std::vector<uint32_t> hops_of_;
  std::vector<Ps> link_free_;
  std::vector<Ps> port_free_;  // per core: when its switch port is free (in-switch transfers)
  std::vector<LinkUsage> usage_;
  std::vector<Message> messages_;
  std::vector<uint32_t> free_slots_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  sc_core::sc_event wake_;
};

}  // namespace tpsim::sim::tlm_model
