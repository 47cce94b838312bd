// ring: `nodes` cores n0..n<N-1>, a link from each to the next (n<N-1> -> n0);
// with `bidirectional`, also one from each to the previous.
//
//   n0 -> n1 -> n2 -> ... -> n<N-1>
//    ^_________________________|
//
// Routing: unidirectional, forward; bidirectional, the shorter way round, forward
// on ties. Bisection: cores split into two arcs of N/2; links from the first arc
// to the second: 1 (unidirectional) or 2 (bidirectional), times the link bandwidth.
#include "arch/topology/grid.h"

namespace tpsim::arch {
namespace {

class Ring : public Topology {
 public:
  std::string_view params() const override {
    return "nodes, bidirectional, link_bandwidth_gbps, router_latency_cycles, link_latency_ns";
  }
  void Validate(const config::Chip& c, DiagSink& sink) const override {
    const uint32_t n = c.noc().nodes();
    if (n < 2) sink.Add("noc.nodes", std::to_string(n), "must be at least 2 for topology ring");
    if (n > static_cast<uint32_t>(kMaxNodes)) {
      sink.Add("noc.nodes", std::to_string(n), "must be at most " + std::to_string(kMaxNodes));
    }
    CheckLinkDefaults(c, sink);
  }
  Network Build(const config::Chip& c, long double cycle_ps) const override {
    const int n = c.noc().nodes();
    Network net = LineNodes(n, "n");
    const double bw = c.noc().link_bandwidth_gbps();
    const Ps lat = HopLatencyPs(c, cycle_ps, c.noc().link_latency_ns());
    for (int i = 0; i < n; ++i) {
      net.AddLink(i, (i + 1) % n, bw, lat);
      if (c.noc().bidirectional() && n > 2) net.AddLink((i + 1) % n, i, bw, lat);
    }
    return net;
  }
  int NextNode(const Network& net, int at, int dst) const override {
    const int n = net.num_cores;
    int forward = ((dst - at) % n + n) % n;
    const bool bi = net.links.size() > static_cast<size_t>(n);  // a bidirectional ring of n > 2
    return (!bi || 2 * forward <= n) ? (at + 1) % n : (at + n - 1) % n;
  }
};

const TopologyRegistrar kRegistered("ring", "a ring of N cores, one way or both ways; shorter-way routing",
                                    std::make_unique<Ring>());

}  // namespace
}  // namespace tpsim::arch
