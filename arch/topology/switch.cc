// switch: `nodes` cores gpu0..gpu<N-1>, each linked both ways to one switch
// node "switch" (NVSwitch-style). Every core-to-core route is two hops; the
// switch's own latency (switch_latency_ns) is added to the switch -> core links.
//
//   gpu0   gpu1   ...   gpu<N-1>
//     \      |            /
//      +--- switch ------+
//
// Bisection: N/2 cores on one side, the switch on the other: N/2 x link bandwidth.
#include "arch/topology/grid.h"

namespace tpsim::arch {
namespace {

class Switch : public Topology {
 public:
  std::string_view params() const override {
    return "nodes, link_bandwidth_gbps, router_latency_cycles, link_latency_ns, switch_latency_ns";
  }
  void Validate(const config::Chip& c, DiagSink& sink) const override {
    const uint32_t n = c.noc().nodes();
    if (n < 2) sink.Add("noc.nodes", std::to_string(n), "must be at least 2 for topology switch");
    if (n >= static_cast<uint32_t>(kMaxNodes)) {
      sink.Add("noc.nodes", std::to_string(n), "must be less than " + std::to_string(kMaxNodes));
    }
    CheckLinkDefaults(c, sink);
    CheckLatencyNs(sink, "noc.switch_latency_ns", c.noc().switch_latency_ns());
  }
  Network Build(const config::Chip& c, long double cycle_ps) const override {
    const int n = c.noc().nodes();
    Network net = LineNodes(n, "gpu");
    const int sw = net.AddNode(Node{"switch", Node::kSwitch, -1, -1});
    const double bw = c.noc().link_bandwidth_gbps();
    const Ps up = HopLatencyPs(c, cycle_ps, c.noc().link_latency_ns());
    const Ps down = up + HopLatencyPs(c, 0, c.noc().switch_latency_ns());
    for (int i = 0; i < n; ++i) {
      net.AddLink(i, sw, bw, up);
      net.AddLink(sw, i, bw, down);
    }
    return net;
  }
};

const TopologyRegistrar kRegistered(
    "switch", "N cores wired to one central switch (NVSwitch-style); two hops between any two",
    std::make_unique<Switch>());

}  // namespace
}  // namespace tpsim::arch
