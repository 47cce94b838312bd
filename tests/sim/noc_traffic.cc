#include "tests/sim/noc_traffic.h"

#include <tlm_utils/simple_initiator_socket.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <systemc>
#include <tlm>
#include <vector>

#include "arch/chip.h"
#include "chip.pb.h"
#include "mapping/program.h"
#include "sim/tlm/network.h"
#include "sim/tlm/run_state.h"

namespace tpsim::sim::test {

namespace {

constexpr uint64_t kPacketBytes = 4096;
constexpr double kFlitBytes = 256;
constexpr double kFlitsPerPacket = kPacketBytes / kFlitBytes;
constexpr Ps kCyclePs = 1000;

config::Chip GridChip(const NocTraffic& t) {
  config::Chip c;
  c.set_name("noc-" + t.topology);
  c.set_clock_mhz(1000);
  auto* core = c.mutable_core();
  core->set_systolic_rows(16);
  core->set_systolic_cols(16);
  core->set_systolic_arrays(1);
  core->set_matrix_utilization(1);
  core->set_vector_lanes(16);
  core->set_sram_bytes(1 << 20);
  auto* noc = c.mutable_noc();
  noc->set_topology(t.topology);
  noc->set_rows(t.k);
  noc->set_cols(t.k);
  noc->set_link_bandwidth_gbps(kFlitBytes);  // 256 bytes per 1 ns cycle
  noc->set_router_latency_cycles(t.router_latency_cycles);
  noc->set_link_latency_ns(0);
  noc->set_port_bandwidth_gbps(t.port_gbps);
  noc->set_router_buffer_packets(t.buffer_packets);
  auto* mem = c.add_memory();
  mem->set_name("dram");
  mem->set_kind("dram");
  mem->set_per_core(true);
  mem->set_bandwidth_gbps(100);
  mem->set_efficiency(1);
  mem->set_latency_ns(50);
  mem->set_capacity_bytes(1 << 30);
  return c;
}

// Hands transfer i to the network at inject_ps[i] (ascending) and records its end.
class Injector : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Injector);
  Injector(sc_core::sc_module_name name, const std::vector<Ps>& inject_ps, std::vector<Ps>* done_ps)
      : sc_module(name), socket("socket"), inject_(inject_ps), done_(done_ps), gps_(inject_ps.size()) {
    socket.register_nb_transport_bw(this, &Injector::nb_transport_bw);
    SC_METHOD(Next);
  }
  tlm_utils::simple_initiator_socket<Injector> socket;

 private:
  void Next() {
    const Ps now = tlm_model::NowPs();
    while (next_ < inject_.size() && inject_[next_] <= now) {
      tlm::tlm_generic_payload& gp = gps_[next_];
      gp.set_address(next_);
      gp.set_command(tlm::TLM_WRITE_COMMAND);
      tlm::tlm_phase phase = tlm::BEGIN_REQ;
      sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
      socket->nb_transport_fw(gp, phase, delay);
      ++next_;
    }
    if (next_ < inject_.size()) {
      next_trigger(sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(inject_[next_] - now)));
    }
  }
  tlm::tlm_sync_enum nb_transport_bw(tlm::tlm_generic_payload& gp, tlm::tlm_phase& phase,
                                     sc_core::sc_time& delay) {
    if (phase == tlm::BEGIN_RESP) {
      (*done_)[gp.get_address()] = tlm_model::NowPs() + static_cast<Ps>(delay.value());
    }
    return tlm::TLM_COMPLETED;
  }
  const std::vector<Ps>& inject_;
  std::vector<Ps>* done_;
  std::vector<tlm::tlm_generic_payload> gps_;
  size_t next_ = 0;
};

}  // namespace

int NocDestination(const std::string& pattern, int k, int src, int uniform_draw) {
  const int n = k * k;
  const int row = src / k, col = src % k;
  if (pattern == "uniform") return uniform_draw;
  if (pattern == "transpose") return col * k + row;
  if (pattern == "hotspot") return (k / 2) * k + k / 2;
  if (pattern == "neighbor") return ((row + 1) % k) * k + (col + 1) % k;
  if (pattern == "ring_step") return (src + 1) % n;
  throw std::invalid_argument("unknown traffic pattern " + pattern);
}

NocStats RunNocTraffic(const NocTraffic& t) {
  const arch::Chip chip = arch::Chip::Build(GridChip(t));
  const int n = t.k * t.k;
  // Packets are created until the measured ones have surely arrived, so that they
  // cross a network that is still loaded (as BookSim keeps injecting while draining).
  // At low rates the window grows so that it holds about `min_measured` packets.
  const double rate = t.offered / kFlitsPerPacket * n;  // packets per cycle, all nodes
  const int measure_cycles = static_cast<int>(
      std::min(1e7, std::max<double>(t.measure_cycles, rate > 0 ? t.min_measured / rate : 0)));
  const int create_cycles = t.warmup_cycles + 2 * measure_cycles;
  mapping::ProgramBuilder builder(n, static_cast<int>(chip.channels().size()));
  builder.program().ops.push_back(
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "traffic", "none"}, 0, 0, 0});
  std::vector<Ps> inject;
  std::mt19937_64 rng(t.seed);
  auto uniform01 = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  const double p = t.offered / kFlitsPerPacket;  // packets per node per cycle
  for (int cycle = 0; cycle < create_cycles; ++cycle) {
    for (int s = 0; s < n; ++s) {
      if (!(uniform01() < p)) continue;
      const int draw = static_cast<int>(uniform01() * n);
      mapping::Task task;
      task.kind = mapping::TaskKind::kTransfer;
      task.core = mapping::CoreId(s);
      task.dst_core = mapping::CoreId(NocDestination(t.pattern, t.k, s, draw));
      task.bytes = kPacketBytes;
      builder.Add(task);
      inject.push_back(static_cast<Ps>(cycle) * kCyclePs);
    }
  }

  const mapping::Program program = builder.Build();
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  sc_core::sc_get_curr_simcontext()->reset();
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  std::vector<Ps> done(inject.size(), -1);
  {
    tlm_model::RunState st(program, chip);
    tlm_model::Network net("network", &st, kPacketBytes);
    Injector injector("injector", inject, &done);
    injector.socket.bind(net.socket);
    sc_core::sc_start();
  }

  NocStats out;
  const Ps w0 = static_cast<Ps>(t.warmup_cycles) * kCyclePs;
  const Ps w1 = w0 + static_cast<Ps>(measure_cycles) * kCyclePs;
  double latency_sum = 0;
  uint64_t delivered = 0;
  for (size_t i = 0; i < inject.size(); ++i) {
    if (done[i] < 0) throw std::runtime_error("noc traffic: packet " + std::to_string(i) + " never arrived");
    if (inject[i] >= w0 && inject[i] < w1) {
      latency_sum += static_cast<double>(done[i] - inject[i]) / kCyclePs;
      ++out.measured_packets;
    }
    if (done[i] >= w0 && done[i] < w1) ++delivered;
  }
  out.avg_latency_cycles = out.measured_packets ? latency_sum / static_cast<double>(out.measured_packets) : 0;
  out.accepted = static_cast<double>(delivered) * kFlitsPerPacket / (static_cast<double>(n) * measure_cycles);
  return out;
}

}  // namespace tpsim::sim::test
