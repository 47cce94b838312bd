// torus: a mesh whose rows and columns wrap around (r0c<cols-1> -- r0c0).
// A dimension of size 1 or 2 gets no extra wraparound wire (it would be a
// self-loop or duplicate the existing one).
//
// Routing: dimension order (columns, then rows), each dimension the shorter way
// round; on a tie (distance size/2) the positive direction.
// Bisection: min of the vertical and horizontal middle cuts; each cuts two
// links per row (or column) in one direction, the middle one and the wraparound.
#include "arch/topology/grid.h"

namespace tpsim::arch {
namespace {

class Torus : public Topology {
 public:
  std::string_view name() const override { return "torus"; }
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
    if (cols > 2) {
      for (int r = 0; r < rows; ++r) net.AddWire(r * cols + cols - 1, r * cols, bw, lat);
    }
    if (rows > 2) {
      for (int col = 0; col < cols; ++col) net.AddWire((rows - 1) * cols + col, col, bw, lat);
    }
    return net;
  }
  int NextNode(const Network& net, int at, int dst) const override {
    return GridNextNode(net, at, dst, /*wrap=*/true);
  }
  std::vector<std::vector<bool>> BisectionCuts(const Network& net) const override { return GridCuts(net); }
};

TPSIM_REGISTER_TOPOLOGY(Torus);

}  // namespace
}  // namespace tpsim::arch
