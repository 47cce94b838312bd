#pragma once
// The SystemC / TLM-2.0 timing engine ("tlm"): the Program executed by one
// sc_module per core, a packet-switched network with contended links and DRAM
// channels with FIFO request queues. SystemC stays behind this header.
//
// Model (all times integer picoseconds; SystemC time resolution 1 ps)
// -----
//   core      executes its tasks as their deps complete. Compute tasks take
//             the cost model's mapping::ComputeTime (mapping/cost.h: GemmTime on
//             the matrix unit, VectorTime on the vector unit), one at a time,
//             lowest task id first among the ready
//             ones (work-conserving). Transfer and memory tasks are issued as
//             TLM-2.0 transactions the moment they are ready and overlap with
//             compute and with each other.
//   protocol  non-blocking (AT, base protocol): the core sends BEGIN_REQ
//             through nb_transport_fw. The network answers END_REQ at once and
//             later, when the last packet has arrived, BEGIN_RESP through
//             nb_transport_bw with the remaining time as annotated delay; DRAM
//             answers END_REQ at once too and BEGIN_RESP once the channel has
//             taken the request (a delta cycle later), when the completion time
//             is known, with that delay. Either way the core completes the
//             transaction (TLM_COMPLETED) and honours the delay through the
//             chip's queue of ends (sim/tlm/ends.h; a peq_with_cb_and_phase per
//             core cost more than the rest of the run on large chips). Payloads
//             carry the task id as address and
//             no data (a timing model). The network keeps its own event queue
//             (time, task id, packet) and one SC_METHOD woken at the earliest
//             pending time.
//   ties      what happens at one time goes as sim/schedule.h's queue rule says,
//             lowest task id first, whatever the order of the SystemC processes:
//             the tasks that end at a time end in its first delta cycle (timed
//             notifications; one of no duration a delta cycle or two after its
//             start) and make their dependents ready there; the cores, the
//             channels and the network decide in the next one, each with every
//             task made ready by then (a core starts its lowest-id ready task, a
//             channel takes the requests in id order, the network takes its
//             events of that time by (task id, packet)).
//   network   a message of B bytes is cut into ceil(B / packet_bytes) packets
//             (4 KiB by default). Each directed link of chip.Route(src, dst)
//             serialises packets at its bandwidth; a packet's head moves on to
//             the next link after the link's latency_ps (cut-through), and a
//             packet cannot finish on a link before its tail has arrived.
//             Arbitration is age-based: each link serves packets in order of
//             arrival at it (ties: lower task id, then lower packet index); a
//             message's packets are all queued at the source at its start.
//             An unloaded message takes exactly chip.TransferTime(src, dst, B):
//             the hop latencies plus B at the slowest link's bandwidth.
//             src == dst or B == 0 takes 0 ps, as in TransferTime.
//             Events: one per message start and one per packet per hop after
//             the first; nothing happens on an idle link.
//             In-switch transfers (Task::in_switch_gbps > 0, collective nvls)
//             bypass the links: the source core's switch port sends them in
//             arrival order at in_switch_gbps, each arriving the route's hop
//             latencies after its last byte left the port.
//   memory    each channel serves requests in arrival order (those that arrive
//             at one time lowest id first): a request waits for the channel,
//             occupies it for DramTime - latency (the serialisation) and
//             completes DramTime after it started, so an unloaded request takes
//             exactly chip.DramTime(channel, bytes).
//             A channel stacked under its core (chip.MemoryPath empty) is all
//             there is. Otherwise the data also crosses the links of
//             chip.MemoryPath (attach node -> core for reads, core -> attach
//             for writes) as a network message that starts once the channel
//             is reserved, at start + latency, the channel being the path's
//             first serialising stage (no packet finishes on the first link
//             before the channel has delivered its last byte: network.h), so
//             that it is cut-through behind the channel and contends for links
//             like any transfer. Unloaded, for any order of channel and link
//             rates, it takes exactly chip.MemoryTime(core, channel, bytes, write).
//
// Statistics: task start/end, the start as sim/schedule.h and the analytical
// engine have it: when the task gets its queue (a compute task its core, a memory
// task its channel, a transfer the first link or switch port of its route), not
// when it is issued; a transfer that queues for nothing (to its own core, or of
// no bytes) starts when issued. Per link bytes, busy (serialising) time and the
// longest wait of a packet behind other messages; per channel bytes, busy time
// and the longest wait in the request queue.
//
// Errors: when the simulation runs out of events with tasks left (a dep that
// never completes: out of range, a cycle), Run throws StallError listing the
// stuck tasks per core with their unmet deps. A task whose id is not its index,
// or a core, destination or channel out of range, throws std::invalid_argument.
//
// Run may be called any number of times per process, from one thread at a
// time: each call resets the SystemC simulation context and elaborates afresh.

#include <cstdint>
#include <memory>

#include "sim/engine.h"

namespace tpsim::sim {

inline constexpr uint64_t kTlmDefaultPacketBytes = 4096;

std::unique_ptr<Engine> MakeTlmEngine();
// Same engine with another packet size (bytes, > 0).
std::unique_ptr<Engine> MakeTlmEngineWithPacketBytes(uint64_t packet_bytes);

}  // namespace tpsim::sim
