#pragma once
// The on-chip network: every directed link of the chip serialises packets at
// its bandwidth, in age order, with cut-through across hops (the model is
// stated in tlm_engine.h). In-switch transfers (Task::in_switch_gbps > 0) skip
// the links: each core's switch port sends them one after another at that rate,
// and they arrive after their route's hop latencies. One TLM target for all cores; link state is a
// "free at" time per link, packet departures are computed from it, and the
// only events are message starts and packet arrivals at a hop after the first
// (and at the first, for memory data paced by a slower channel; at most one pending
// event per message and hop).
// With chip noc.port_bandwidth_gbps > 0, every route also crosses its source core's
// injection port (first) and its destination core's ejection port (last): two more
// serialising stages per core, with no latency, arbitrated like links.
// With chip noc.router_buffer_packets = B > 0, the input port at the far end of every
// link and injection port (not ejection ports nor memory controllers, which always
// accept) holds B packets. A packet reserves a slot there when it is granted the link
// and frees it when its tail leaves that router (the end of its next link) or, at its
// destination, when its tail arrives. A packet that finds no slot waits at the link
// (the oldest first among those a slot of their class is free for). On tori and rings
// the slots are split into two classes (dateline, as BookSim2's dim_order_torus):
// a packet uses class 1 along a run of hops in one direction that crosses a
// wraparound link, class 0 otherwise, so no cycle of full buffers can form. A router
// forwards from each input port one packet at a time (switch input speedup 1): a
// packet's crossing is booked on its input port too, in a free gap (another virtual
// channel's packet may go first). Each packet, the first hop included, is then an
// event (no closed form for the first hop).
// A packet's head moves on to the next hop when its first byte leaves this link
// (its head is here, the message's previous packet and, with finite buffers, the
// grant and the router's input port allow), not when the link's booking starts:
// a packet whose tail is still coming over a slower link is booked on a faster one
// as late as lets it finish when its tail arrives ([end - serialisation, end]), but
// its bytes already flow on. So an unloaded message takes the hop latencies plus
// its bytes at the route's slowest link, wherever that link is.
// Memory tasks whose data crosses links (RunState::mem_via_net) come here too:
// their channel takes them first (Dram::Request, Granted), and the channel is the path's
// first serialising stage: the message starts when the channel's first bytes are
// out (start + latency), and each packet's tail reaches the first link when the
// channel has delivered the packet's last byte (its bytes at the channel's rate).
// A channel slower than the first link paces that link packet by packet (an event
// per packet on the first hop); otherwise the first link sends back to back as for
// transfers. Unloaded, that is chip.MemoryTime for any order of channel and link
// rates; under load the message contends for links like any transfer.

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <cstdint>
#include <deque>
#include <queue>
#include <systemc>
#include <tlm>
#include <vector>

#include "sim/tlm/dram.h"
#include "sim/tlm/ends.h"
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
  void set_dram(Dram* dram) { dram_ = dram; }
  // The cores' ends, when the network serves cores (the engine): a time at which no task ends
  // lets the network take its events in its first delta cycle (Process).
  void set_ends(const Ends* ends) { ends_ = ends; }
  // The channel took the memory task of message `slot` (Dram::Request): its data starts.
  void Granted(uint32_t slot, const Dram::Grant& g);
  // Whether events are due now.
  bool Due(Ps now) const { return !events_.empty() && events_.top().t <= now; }
  // Takes the events due now at once, instead of in the next delta cycle (Process): Ends, at
  // the end of a time's first delta cycle, where nothing else would run in the next one (the
  // time's later delta cycles then come one earlier, in the same order).
  void TakeNow();

 private:
  struct Message {
    TaskRef task = 0;
    int port = 0;
    tlm::tlm_generic_payload* gp = nullptr;
    uint32_t route_begin = 0, hops = 0;
    uint32_t packets = 0, arrived = 0;
    uint64_t bytes = 0;
    bool memory = false;  // a memory task's data (its channel took it first: Granted)
    Ps start_ps = 0;      // when the first link starts sending this message
    Ps done_ps = 0;
    std::vector<Ps> last_end;  // per hop: when this message's previous packet left the link
    // A memory message whose channel is slower than its first link: the channel
    // delivers its bytes from src_ps at src_gbps, the last one src_total later.
    bool paced = false;
    Ps src_ps = 0, src_total = 0;
    double src_gbps = 0;
  };
  static constexpr uint32_t kInject = 0xffffffffu;
  static constexpr uint32_t kCredit = 0xfffffffeu;  // a slot (class `slot`) past link `hop` frees
  // A packet's head reaching hop `hop` of its route at `t` (its tail at `tail`),
  // or (packet == kInject) a message starting at `t`.
  struct Event {
    Ps t;
    TaskRef task;
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
  // Takes this time's events in task id order (Event), one delta cycle after the first of
  // them is due (when the tasks that end now have issued their messages), or at once where
  // no task ends at this time (set_ends): then nothing else happens in the first delta cycle,
  // and the time's delta cycles all come one earlier, in the same order.
  void Process();
  // Takes the events due by `now` in Event order; wakes for the next one.
  void Take(Ps now);
  void Inject(const Event& e);
  // Sends packet `p` of message `m` over hop `hop`; schedules its next hop or its arrival.
  // Schedules packet `p`'s arrival at hop 1 (its departure from hop 0 is closed form).
  void ScheduleFirstHop(const Message& m, uint32_t slot, uint32_t p);
  void Hop(Message& m, uint32_t slot, uint32_t p, uint32_t hop, Ps head, Ps tail);
  // Grants packet `p` hop `hop` now: reserves the link (and a slot past it).
  void Send(Message& m, uint32_t slot, uint32_t p, uint32_t hop, Ps head, Ps tail);
  // Grants the oldest packets waiting at `link` whose slot need is met.
  void Serve(int link);
  // Books the router input port packets arriving over `in` cross the switch from: the
  // earliest start >= `earliest` at which it is free for `ser` ps (a packet may use a
  // gap before later bookings, as a packet in another virtual channel would).
  Ps BookInput(int in, Ps earliest, Ps ser);
  void Finish(Message& m, uint32_t slot);
  uint64_t PacketBytes(const Message& m, uint32_t p) const;
  // A paced message: when the channel has delivered its first `bytes` bytes.
  Ps SourceOut(const Message& m, uint64_t bytes) const;
  Ps Serialise(const Message& m, uint32_t p, int link) const;
  // Adds e to the events; an event at the saturated clock stops the run on `owner`'s task.
  void Schedule(const Event& e, TaskRef owner);
  void Schedule(const Event& e) { Schedule(e, e.task); }

  RunState* st_;
  Dram* dram_ = nullptr;
  const Ends* ends_ = nullptr;
  uint64_t packet_bytes_;
  int num_links_ = 0;             // the chip's links; ids from here on are ports
  std::vector<double> bw_;        // per link, then per injection and ejection port: GB/s
  std::vector<Ps> lat_;           // per link and port: latency (ports: 0)
  std::vector<int> route_links_;  // concatenated routes (link and port ids)
  // Finite router buffers (router_buffer_packets > 0), per link and port id:
  bool buffered_ = false;
  uint32_t buffer_packets_ = 0;
  int classes_ = 1;                   // slot classes per input port (2 on tori and rings: dateline)
  bool one_way_ = false;              // a one-way ring: the class changes at the dateline
  std::vector<uint8_t> limited_;      // the far end has a finite input buffer
  std::vector<uint32_t> credits_;     // [link * classes_ + class]: free slots there
  std::vector<int8_t> dir_;           // grid direction (0..3), -1 when none or a port
  std::vector<uint8_t> wrap_;         // a wraparound link
  std::vector<uint8_t> route_class_;  // parallel to route_links_ (finite buffers only)
  struct Waiter {
    uint32_t slot, packet, hop;
    Ps head, tail;
  };
  std::vector<std::deque<Waiter>> waiting_;
  std::vector<std::vector<std::pair<Ps, Ps>>> in_busy_;  // per input port: booked [start, end)
  std::vector<uint32_t> route_of_;  // per record (RunState::Record): offset into route_links_
  std::vector<uint32_t> hops_of_;   // (transfers, memory via links)
  std::vector<Ps> link_free_;
  std::vector<Ps> port_free_;  // per core: when its switch port is free (in-switch transfers)
  std::vector<LinkUsage> usage_;
  std::vector<Message> messages_;
  std::vector<uint32_t> free_slots_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  sc_core::sc_event wake_;
};

}  // namespace tpsim::sim::tlm_model
