// mesh: rows x cols cores, each linked both ways to its four neighbours.
//
//   r0c0 -- r0c1 -- r0c2
//    |       |       |
//   r1c0 -- r1c1 -- r1c2
//
// Routing: dimension order, along the row first (X), then along the column (Y).
// Bisection: min of the vertical and horizontal middle cuts.
#include "arch/topology/grid.h"

namespace tpsim::arch {
namespace {

class Mesh : public Topology {
 public:
  std::string_view name() const override { return "mesh"; }
  std::string_view params() const override {
    return "rows, cols, link_bandwidth_gbps, router_latency_cycles, link_latency_ns";
  }
  void Validate(const config::Chip& c, DiagSink& sink) const override {
    ValidateGridDims(c, sink);
    CheckLinkDefaults(c, sink);
  }
  Network Build(const config::Chip& c, Ps cycle_ps) const override {
    const int rows = c.noc().rows(), cols = c.noc().cols();
    Network net = GridNodes(rows, cols);
    const double bw = c.noc().link_bandwidth_gbps();
    const Ps lat = HopLatencyPs(c, cycle_ps, c.noc().link_latency_ns());
    AddMeshWires(net, rows, cols, bw, lat);
    return net;
  }
  int NextNode(const Network& net, int at, int dst) const override {
    return GridNextNode(net, at, dst, /*wrap=*/false);
  }
  std::vector<std::vector<bool>> BisectionCuts(const Network& net) const override { return GridCuts(net); }
};

TPSIM_REGISTER_TOPOLOGY(Mesh);

}  // namespace
}  // namespace tpsim::arch
