#pragma once
// Synthetic NoC traffic through the TLM network module alone (sim/tlm/network.h), the
// way BookSim2 drives its network: every node creates 4 KiB packets by a Bernoulli
// process at an offered load in flits per node per cycle, each packet a one-packet
// transfer; an initiator hands each to the network at its creation time and records
// when its last byte arrives. Used by noc_booksim_test.cc to compare with the
// committed BookSim2 figures (validate/results/noc/).
//
// Units as in validate/noc/booksim/*.cfg: 1 cycle = 1 ns (a 1 GHz chip), 1 flit =
// 256 bytes, links of 256 GB/s = 1 flit per cycle, 16-flit (4096-byte) packets.

#include <cstdint>
#include <string>

namespace tpsim::sim::test {

struct NocTraffic {
  std::string topology = "mesh";    // mesh | torus
  int k = 8;                        // k x k
  std::string pattern = "uniform";  // uniform | transpose | hotspot | neighbor | ring_step
  double offered = 0.1;             // flits per node per cycle
  int router_latency_cycles = 1;    // per hop (router pipeline + channel)
  // chip noc.port_bandwidth_gbps (network-interface ports): 0 = none.
  double port_gbps = 0;
  // chip noc.router_buffer_packets (packets per router input port): 0 = unbounded.
  uint32_t buffer_packets = 0;
  int warmup_cycles = 2000;
  int measure_cycles = 10000;  // at least; longer at low rates (min_measured packets)
  double min_measured = 8000;
  uint64_t seed = 1;
};

struct NocStats {
  double avg_latency_cycles = 0;  // packets created in the measurement window: creation -> last byte
  double accepted = 0;            // flits delivered per node per cycle in the measurement window
  uint64_t measured_packets = 0;
};

NocStats RunNocTraffic(const NocTraffic& t);

// Destination of `src` under `pattern` on a k x k grid (BookSim2's definitions;
// uniform draws from `uniform_draw` in [0, k*k)).
int NocDestination(const std::string& pattern, int k, int src, int uniform_draw);

}  // namespace tpsim::sim::test
