#include "sim/tlm/network.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "sim/tlm/dram.h"

namespace tpsim::sim::tlm_model {

namespace {

// Picoseconds to serialise `bytes` at `gbps` (bytes/ns): the ceiling that
// arch::Chip uses, so that per-packet times telescope to chip.TransferTime.
Ps CeilSerialiseDivide(uint64_t bytes, double gbps) {
  const long double x = static_cast<long double>(bytes) * 1000.0L / gbps;
  if (x >= 9.2e18L) return std::numeric_limits<Ps>::max();
  // Integer rounding instead of nearbyintl/ceill (libm calls dominate the profile);
  // same result for x > 0: within 1e-9 relative of an integer -> that integer.
  const Ps nearest = static_cast<Ps>(x + 0.5L);
  const long double diff = x - static_cast<long double>(nearest);
  if ((diff < 0 ? -diff : diff) <= 1e-9L * std::max(1.0L, static_cast<long double>(nearest))) return nearest;
  const Ps floor = static_cast<Ps>(x);
  return static_cast<long double>(floor) < x ? floor + 1 : floor;
}

// The same (bytes, rate) pairs recur for every packet of every message: a direct-mapped memo
// of CeilSerialiseDivide (what it returned for that very pair; bytes 0 marks an empty slot).
Ps CeilSerialisePs(uint64_t bytes, double gbps) {
  if (bytes == 0) return 0;
  struct Entry {
    uint64_t bytes = 0;
    double gbps = 0;
    Ps ps = 0;
  };
  constexpr int kBits = 12;
  thread_local std::array<Entry, size_t{1} << kBits> memo{};
  uint64_t rate;
  std::memcpy(&rate, &gbps, sizeof rate);
  Entry& e = memo[((bytes ^ (rate >> 17)) * 0x9e3779b97f4a7c15ull) >> (64 - kBits)];
  if (e.bytes != bytes || std::memcmp(&e.gbps, &gbps, sizeof gbps) != 0)
    e = Entry{bytes, gbps, CeilSerialiseDivide(bytes, gbps)};
  return e.ps;
}

sc_core::sc_time FromPs(Ps ps) { return sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(ps)); }

// Times saturate at the 2^63 ps clock (arch::SatAdd); an event there stops the run
// (Network::Schedule, Finish) instead of wrapping the kernel's clock.
using arch::SatAdd;
constexpr Ps kMaxPs = std::numeric_limits<Ps>::max();

}  // namespace

Network::Network(sc_core::sc_module_name name, RunState* state, uint64_t packet_bytes)
    : sc_module(name), socket("socket"), st_(state), packet_bytes_(packet_bytes) {
  socket.register_nb_transport_fw(this, &Network::nb_transport_fw);
  SC_METHOD(Process);
  sensitive << wake_;
  dont_initialize();

  const arch::Chip& chip = st_->chip;
  const auto& links = chip.links();
  const int cores = std::max(0, chip.num_cores());
  num_links_ = static_cast<int>(links.size());
  for (const arch::Link& l : links) {
    bw_.push_back(l.bandwidth_gbps);
    lat_.push_back(l.latency_ps);
  }
  // Network-interface ports: injection ports num_links_ + core, then ejection ports.
  const double port_gbps = chip.config().noc().port_bandwidth_gbps();
  const bool ports = port_gbps > 0;
  if (ports) {
    bw_.resize(bw_.size() + 2 * static_cast<size_t>(cores), port_gbps);
    lat_.resize(lat_.size() + 2 * static_cast<size_t>(cores), 0);
  }
  link_free_.assign(bw_.size(), 0);
  port_free_.assign(static_cast<size_t>(cores), 0);
  usage_.assign(links.size(), LinkUsage{});
  buffer_packets_ = chip.config().noc().router_buffer_packets();
  buffered_ = buffer_packets_ > 0;
  if (buffered_) {
    const std::string& topo = chip.config().noc().topology();
    // Tori and rings: two slot classes per input port (dateline), as BookSim2's
    // dimension-order torus routing splits its virtual channels.
    classes_ = topo == "torus" || topo == "ring" ? 2 : 1;
    one_way_ = topo == "ring" && !chip.config().noc().bidirectional();
    limited_.assign(bw_.size(), 0);
    dir_.assign(bw_.size(), -1);
    wrap_.assign(bw_.size(), 0);
    for (int l = 0; l < num_links_; ++l) {
      const arch::Node& a = chip.node(links[l].src);
      const arch::Node& b = chip.node(links[l].dst);
      limited_[l] = b.kind != arch::Node::kMemory;
      if (a.row < 0 || a.col < 0 || b.row < 0 || b.col < 0) continue;
      const int dc = b.col - a.col, dr = b.row - a.row;  // a step of more than one: wraparound
      if (dc != 0 && dr == 0) dir_[l] = (dc == 1 || dc < -1) ? 0 : 1;
      if (dr != 0 && dc == 0) dir_[l] = (dr == 1 || dr < -1) ? 2 : 3;
      wrap_[l] = std::abs(dc) > 1 || std::abs(dr) > 1;
    }
    for (int c = 0; c < (ports ? cores : 0); ++c) limited_[num_links_ + c] = 1;  // injection ports
    // classes_ == 2: class 0 gets the odd slot of an odd buffer.
    credits_.assign(bw_.size() * classes_, 0);
    for (size_t l = 0; l < bw_.size(); ++l) {
      for (int k = 0; k < classes_; ++k)
        credits_[l * classes_ + k] = (buffer_packets_ + (k == 0 ? classes_ - 1 : 0)) / classes_;
    }
    waiting_.resize(bw_.size());
    in_busy_.resize(bw_.size());
  }
  // The records' fields, not Program::task (which decodes every field of every task).
  route_of_.assign(st_->records(), 0);
  hops_of_.assign(st_->records(), 0);
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> cache;  // lookup only
  for (size_t r = 0; r < st_->records(); ++r) {
    const auto [q, i] = st_->RecordAt(r);
    const mapping::Program& p = *q;
    const mapping::TaskKind kind = p.kind(i);
    const bool memory = kind == mapping::TaskKind::kMemory && st_->mem_via_net[r];
    if (kind != mapping::TaskKind::kTransfer && !memory) continue;
    struct {
      int core, channel, dst_core;
      bool write;
    } t{p.core(i), memory ? p.memory(i).channel : -1, memory ? -1 : p.transfer(i).dst_core,
        memory && p.memory(i).write};
    // Transfers by (src, dst); memory paths by (core, channel, write), tagged in bit 63.
    const uint64_t key = memory ? (uint64_t{1} << 63) | static_cast<uint64_t>(t.core) << 32 |
                                      static_cast<uint32_t>(t.channel) << 1 | (t.write ? 1u : 0u)
                                : static_cast<uint64_t>(t.core) << 32 | static_cast<uint32_t>(t.dst_core);
    auto it = cache.find(key);
    if (it == cache.end()) {
      std::vector<int> route =
          memory ? chip.MemoryPath(t.core, t.channel, t.write) : chip.Route(t.core, t.dst_core);
      for (int l : route) {
        if (!(links[l].bandwidth_gbps > 0)) {
          throw std::invalid_argument("tlm: link " + links[l].name() + " on the route of task " +
                                      std::to_string(i) + " has no bandwidth");
        }
      }
      if (ports && (!route.empty() || !memory)) {
        // A transfer leaves through its source's injection port and arrives through its
        // destination's ejection port (a transfer to its own core loops back through
        // both); memory data only through the core's end.
        if (!memory || t.write) route.insert(route.begin(), num_links_ + t.core);
        if (!memory || !t.write) route.push_back(num_links_ + cores + (memory ? t.core : t.dst_core));
      }
      auto entry =
          std::make_pair(static_cast<uint32_t>(route_links_.size()), static_cast<uint32_t>(route.size()));
      route_links_.insert(route_links_.end(), route.begin(), route.end());
      if (buffered_) {
        // Dateline class of each hop: 1 along a run of hops in one direction that
        // crosses a wraparound link (BookSim2's dim_order_torus picks the class as a run
        // starts), else 0. That is deadlock-free where routes are minimal both ways round
        // (no class-1 run reaches the link opposite the dateline); on a one-way ring a run
        // can go nearly all the way round, so class 1 would cover every link and close a
        // cycle of waits: there the class changes at the dateline, 1 before the wraparound
        // link and 0 from it on (one_way_).
        for (size_t h = 0; h < route.size();) {
          size_t e = h + 1;
          while (e < route.size() && dir_[route[h]] >= 0 && dir_[route[e]] == dir_[route[h]]) ++e;
          bool wraps = false;
          for (size_t j = h; j < e; ++j) wraps = wraps || wrap_[route[j]];
          bool crossed = false;
          for (size_t j = h; j < e; ++j) {
            crossed = crossed || (one_way_ && wrap_[route[j]]);
            route_class_.push_back(classes_ == 2 && wraps && !crossed ? 1 : 0);
          }
          h = e;
        }
      }
      it = cache.emplace(key, entry).first;
    }
    route_of_[r] = it->second.first;
    hops_of_[r] = it->second.second;
  }
}

tlm::tlm_sync_enum Network::nb_transport_fw(int port, tlm::tlm_generic_payload& gp, tlm::tlm_phase& phase,
                                            sc_core::sc_time&) {
  if (phase != tlm::BEGIN_REQ) return tlm::TLM_ACCEPTED;
  const TaskRef task = gp.get_address();
  const mapping::TaskKind kind = st_->kind(task);
  const uint64_t bytes = st_->bytes(task);  // a KV read's at its step's context
  uint32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<uint32_t>(messages_.size());
    messages_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  Message& m = messages_[slot];
  m.task = task;
  m.port = port;
  m.gp = &gp;
  m.route_begin = route_of_[st_->Record(task)];
  m.hops = bytes == 0 ? 0 : hops_of_[st_->Record(task)];
  m.bytes = bytes;
  m.packets = static_cast<uint32_t>(std::max<uint64_t>(1, (bytes + packet_bytes_ - 1) / packet_bytes_));
  m.arrived = 0;
  m.done_ps = NowPs();
  m.last_end.assign(m.hops, std::numeric_limits<Ps>::min());
  m.paced = false;
  m.memory = kind == mapping::TaskKind::kMemory;
  phase = tlm::END_REQ;
  if (m.memory) {
    // The channel is the path's first stage: the message starts once the channel has
    // taken the request (Granted).
    if (!dram_) throw std::logic_error("tlm: network has memory traffic but no DRAM model");
    dram_->Request(task, slot);
    return tlm::TLM_UPDATED;
  }
  Schedule(Event{NowPs(), task, kInject, slot, 0, 0});
  return tlm::TLM_UPDATED;
}

void Network::Granted(uint32_t slot, const Dram::Grant& g) {
  Message& m = messages_[slot];
  const arch::MemoryChannel& channel =
      st_->chip.channels()[st_->ProgramOf(m.task).memory(RunState::IndexOf(m.task)).channel];
  const Ps latency = m.bytes == 0 ? 0 : channel.latency_ps;
  // The channel is the path's first stage: its first bytes are out after its latency.
  const Ps inject = SatAdd(g.start, latency);
  if (m.hops == 0) m.done_ps = SatAdd(g.start, g.total);
  // A channel no slower than the first link never holds that link back (it
  // delivers every prefix of the message no later than the link sends it), so
  // the link sends back to back from `inject`, in closed form. A slower one
  // paces the first link packet by packet.
  if (m.hops > 0 && channel.bandwidth_gbps < bw_[route_links_[m.route_begin]]) {
    m.paced = true;
    m.src_ps = inject;
    m.src_total = g.total - latency;
    m.src_gbps = channel.bandwidth_gbps;
  }
  Schedule(Event{inject, m.task, kInject, slot, 0, 0});
}

void Network::Schedule(const Event& e, TaskRef owner) {
  if (e.t >= kMaxPs) {
    st_->StopOnOverflow(owner);
    return;
  }
  const Ps now = NowPs();
  if (events_.empty() || e.t < events_.top().t) {
    if (e.t == now) {
      wake_.notify(sc_core::SC_ZERO_TIME);
    } else {
      wake_.notify(FromPs(e.t - now));
    }
  }
  events_.push(e);
}

void Network::Process() {
  const Ps now = NowPs();
  if (sc_core::sc_delta_count_at_current_time() == 0 && (!ends_ || ends_->EndsAt(now))) {
    // Woken by the first events due at this time, in the delta cycle where the tasks that
    // end now make their dependents ready: take this time's events in the next one, when
    // the messages those issue now are in, so that every tie goes by task id (Event).
    wake_.notify(sc_core::SC_ZERO_TIME);
    return;
  }
  Take(now);
}

void Network::TakeNow() {
  wake_.cancel();
  Take(NowPs());
}

void Network::Take(Ps now) {
  while (!events_.empty() && events_.top().t <= now) {
    Event e = events_.top();
    events_.pop();
    if (e.packet == kInject) {
      Inject(e);
    } else if (e.packet == kCredit) {
      ++credits_[static_cast<size_t>(e.hop) * classes_ + e.slot];
      Serve(static_cast<int>(e.hop));
    } else {
      Hop(messages_[e.slot], e.slot, e.packet, e.hop, e.t, e.tail);
    }
  }
  if (!events_.empty()) wake_.notify(FromPs(events_.top().t - now));
}

void Network::Inject(const Event& e) {
  Message& m = messages_[e.slot];
  if (m.hops == 0) {
    Finish(m, e.slot);
    return;
  }
  const mapping::Program& p = st_->ProgramOf(m.task);
  const uint32_t i = RunState::IndexOf(m.task);
  const double in_switch_gbps = p.kind(i) == mapping::TaskKind::kTransfer ? p.transfer(i).in_switch_gbps : 0;
  if (in_switch_gbps > 0) {
    // Through the switch engine (mapping/program.h): the source core's switch
    // port serialises its in-switch transfers; the links are not used.
    Ps latency = 0;
    for (uint32_t h = 0; h < m.hops; ++h) latency += lat_[route_links_[m.route_begin + h]];
    Ps& port = port_free_[p.core(i)];
    const Ps start = std::max(e.t, port);
    const Ps ser = CeilSerialisePs(m.bytes, in_switch_gbps);
    port = ser > std::numeric_limits<Ps>::max() - start ? std::numeric_limits<Ps>::max() : start + ser;
    m.start_ps = start;
    st_->Served(m.task, start);  // its start: when the port takes it
    m.done_ps =
        port > std::numeric_limits<Ps>::max() - latency ? std::numeric_limits<Ps>::max() : port + latency;
    m.arrived = m.packets;
    Finish(m, e.slot);
    return;
  }
  if (buffered_) {
    // Packet by packet: each first waits for a slot past the first link; the next one
    // is offered when this one is granted.
    m.start_ps = e.t;
    Hop(m, e.slot, 0, 0, e.t, m.paced ? SatAdd(m.src_ps, SourceOut(m, PacketBytes(m, 0))) : e.t);
    return;
  }
  if (m.paced) {
    // Packet by packet as the channel delivers them: packet p's head is at the first
    // link when the channel starts on it, its tail when the channel is done with it.
    m.start_ps = e.t;
    Send(m, e.slot, 0, 0, e.t, SatAdd(m.src_ps, SourceOut(m, PacketBytes(m, 0))));
    return;
  }
  // Every packet is queued at the source when the message starts, so the first
  // link sends them back to back from `start`: packet p leaves at
  // start + ser(bytes before p). No event per packet on this hop.
  const int link = route_links_[m.route_begin];
  const Ps start = std::max(e.t, link_free_[link]);
  const Ps ser = CeilSerialisePs(m.bytes, bw_[link]);
  link_free_[link] = SatAdd(start, ser);
  if (link < num_links_) {
    LinkUsage& u = usage_[link];
    u.bytes += m.bytes;
    u.busy_ps = SatAdd(u.busy_ps, ser);
    u.max_queue_ps = std::max(u.max_queue_ps, start - e.t);
  }
  m.start_ps = start;
  if (!m.memory) st_->Served(m.task, start);  // a transfer starts when its first link takes it
  const Ps latency = lat_[link];
  if (m.hops == 1) {
    m.done_ps = SatAdd(SatAdd(start, ser), latency);
    m.arrived = m.packets;
    Finish(m, e.slot);
    return;
  }
  ScheduleFirstHop(m, e.slot, 0);
}

void Network::ScheduleFirstHop(const Message& m, uint32_t slot, uint32_t p) {
  const int link = route_links_[m.route_begin];
  const uint64_t begin = static_cast<uint64_t>(p) * packet_bytes_;
  const uint64_t end = std::min(m.bytes, begin + packet_bytes_);
  const Ps head = SatAdd(SatAdd(m.start_ps, CeilSerialisePs(begin, bw_[link])), lat_[link]);
  const Ps tail = SatAdd(SatAdd(m.start_ps, CeilSerialisePs(end, bw_[link])), lat_[link]);
  Schedule(Event{head, m.task, p, slot, 1, tail});
}

uint64_t Network::PacketBytes(const Message& m, uint32_t p) const {
  uint64_t begin = static_cast<uint64_t>(p) * packet_bytes_;
  return std::min(m.bytes, begin + packet_bytes_) - begin;
}

Ps Network::SourceOut(const Message& m, uint64_t bytes) const {
  // The channel's last byte is out src_total after its first (Dram::Reserve's
  // DramTime); a prefix at the channel's rate, never later than that.
  if (bytes >= m.bytes) return m.src_total;
  return std::min(m.src_total, CeilSerialisePs(bytes, m.src_gbps));
}

Ps Network::Serialise(const Message& m, uint32_t p, int link) const {
  const double bw = bw_[link];
  uint64_t begin = static_cast<uint64_t>(p) * packet_bytes_;
  uint64_t end = std::min(m.bytes, begin + packet_bytes_);
  return CeilSerialisePs(end, bw) - CeilSerialisePs(begin, bw);
}

void Network::Hop(Message& m, uint32_t slot, uint32_t p, uint32_t hop, Ps head, Ps tail) {
  const int link = route_links_[m.route_begin + hop];
  if (buffered_ && limited_[link]) {
    waiting_[link].push_back(Waiter{slot, p, hop, head, tail});
    Serve(link);
    return;
  }
  Send(m, slot, p, hop, head, tail);
}

Ps Network::BookInput(int in, Ps earliest, Ps ser) {
  std::vector<std::pair<Ps, Ps>>& busy = in_busy_[in];  // sorted, disjoint
  const Ps now = NowPs();
  size_t keep = 0;
  while (keep < busy.size() && busy[keep].second <= now) ++keep;
  busy.erase(busy.begin(), busy.begin() + static_cast<std::ptrdiff_t>(keep));
  Ps start = earliest;
  size_t at = 0;
  for (; at < busy.size(); ++at) {
    if (SatAdd(start, ser) <= busy[at].first) break;  // fits in the gap before this booking
    start = std::max(start, busy[at].second);
  }
  busy.insert(busy.begin() + static_cast<std::ptrdiff_t>(at), {start, SatAdd(start, ser)});
  return start;
}

void Network::Serve(int link) {
  std::deque<Waiter>& q = waiting_[link];
  const uint32_t* credits = &credits_[static_cast<size_t>(link) * classes_];
  for (size_t i = 0; i < q.size();) {
    // No free slot of any class past this link: no waiter behind can go either (the scan
    // would skip every one of them).
    if (credits[0] == 0 && (classes_ == 1 || credits[1] == 0)) break;
    const Waiter w = q[i];
    Message& m = messages_[w.slot];
    if (credits[route_class_[m.route_begin + w.hop]] == 0) {
      ++i;
      continue;
    }
    q.erase(q.begin() + static_cast<std::ptrdiff_t>(i));
    Send(m, w.slot, w.packet, w.hop, w.head, w.tail);
  }
}

void Network::Send(Message& m, uint32_t slot, uint32_t p, uint32_t hop, Ps head, Ps tail) {
  const int link = route_links_[m.route_begin + hop];
  const Ps ser = Serialise(m, p, link);
  // Without other messages the first byte may leave when the head is here and this
  // message's previous packet has left (with finite buffers, not before the grant);
  // the whole packet cannot finish before its tail has arrived.
  Ps ready = std::max(head, m.last_end[hop]);
  if (buffered_) ready = std::max(ready, NowPs());
  const Ps due = tail - ser;
  // The first byte leaves when the link is free too; the link is booked for
  // [depart, end], as late as lets the packet finish when its tail is in.
  Ps first = std::max(ready, link_free_[link]);
  Ps depart = std::max(first, due);
  if (buffered_ && hop > 0) {
    // A packet held back at the router's input port leaves whole, when it crosses.
    const Ps crossing = BookInput(route_links_[m.route_begin + hop - 1], depart, ser);
    if (crossing > depart) first = depart = crossing;
  }
  const Ps end = SatAdd(depart, ser);
  link_free_[link] = end;
  m.last_end[hop] = end;
  // A transfer starts when its first link takes its first packet (a memory task when its
  // channel takes it: Dram).
  if (hop == 0 && p == 0 && !m.memory) st_->Served(m.task, first);
  if (link < num_links_) {
    LinkUsage& u = usage_[link];
    u.bytes += PacketBytes(m, p);
    u.busy_ps = SatAdd(u.busy_ps, ser);
    u.max_queue_ps = std::max(u.max_queue_ps, depart - std::max(ready, due));
  }
  const Ps latency = lat_[link];
  if (buffered_) {
    const uint32_t cls = route_class_[m.route_begin + hop];
    if (limited_[link]) --credits_[static_cast<size_t>(link) * classes_ + cls];
    // The slot this packet held before this link frees when its tail has left.
    const int prev = hop > 0 ? route_links_[m.route_begin + hop - 1] : -1;
    if (prev >= 0 && limited_[prev]) {
      Schedule(Event{end, 0, kCredit, route_class_[m.route_begin + hop - 1], static_cast<uint32_t>(prev), 0},
               m.task);
    }
    if (hop + 1 == m.hops && limited_[link]) {
      Schedule(Event{SatAdd(end, latency), 0, kCredit, cls, static_cast<uint32_t>(link), 0}, m.task);
    }
  }
  if (hop == 0 && p + 1 < m.packets && (buffered_ || m.paced)) {
    // The message's next packet is offered to the first link: with finite buffers once
    // this one is granted; paced by a channel, from when the channel starts on it (its
    // head) until it is done with it (its tail).
    Ps at = buffered_ ? depart : 0;
    Ps next_tail = m.start_ps;
    if (m.paced) {
      const uint64_t begin = static_cast<uint64_t>(p + 1) * packet_bytes_;
      at = std::max(at, SatAdd(m.src_ps, SourceOut(m, begin)));
      next_tail = SatAdd(m.src_ps, SourceOut(m, begin + PacketBytes(m, p + 1)));
    }
    Schedule(Event{at, m.task, p + 1, slot, 0, next_tail});
  } else if (!buffered_ && !m.paced && hop == 1 && p + 1 < m.packets) {
    // Packets reach each hop in order, so one pending event per hop suffices:
    // the packet behind this one on hop 1 is scheduled here.
    ScheduleFirstHop(m, slot, p + 1);
  }
  if (hop + 1 < m.hops) {
    // The head moves on as the first byte leaves (not at `depart`: a slower next
    // link must not wait for this one's booking), the tail as the last one does.
    Schedule(Event{SatAdd(first, latency), m.task, p, slot, hop + 1, SatAdd(end, latency)});
    return;
  }
  m.done_ps = std::max(m.done_ps, SatAdd(end, latency));
  if (++m.arrived == m.packets) Finish(m, slot);
}

void Network::Finish(Message& m, uint32_t slot) {
  if (m.done_ps >= kMaxPs) {
    st_->StopOnOverflow(m.task);
    return;
  }
  tlm::tlm_generic_payload* gp = m.gp;
  gp->set_response_status(tlm::TLM_OK_RESPONSE);
  tlm::tlm_phase phase = tlm::BEGIN_RESP;
  sc_core::sc_time delay = FromPs(m.done_ps - NowPs());
  const int port = m.port;
  free_slots_.push_back(slot);
  socket[port]->nb_transport_bw(*gp, phase, delay);
}

}  // namespace tpsim::sim::tlm_model
