// wafer: a rows x cols mesh of cores cut into dies of die_rows x die_cols
// cores. Links inside a die use the noc link numbers; links crossing a die
// boundary are die-to-die links (d2d_bandwidth_gbps, d2d_latency_ns instead of
// link_latency_ns; the router latency applies to both).
//
//   +-----------+   +-----------+
//   | c  -  c   |===| c  -  c   |     -  on-die link
//   | |     |   |   | |     |   |     == die-to-die link
//   | c  -  c   |===| c  -  c   |
//   +-----------+   +-----------+
//
// Routing: dimension order like the mesh. Bisection: the middle cuts of the
// mesh (die-to-die bandwidth where a cut runs along a die boundary).
#include "arch/topology/grid.h"

#include <tuple>

namespace tpsim::arch {
namespace {

class Wafer : public Topology {
 public:
  std::string_view params() const override {
    return "rows, cols, die_rows, die_cols, link_bandwidth_gbps, router_latency_cycles, link_latency_ns, "
           "d2d_bandwidth_gbps, d2d_latency_ns";
  }
  void Validate(const config::Chip& c, DiagSink& sink) const override {
    const auto& n = c.noc();
    ValidateGridDims(c, sink);
    CheckLinkDefaults(c, sink);
    // At the die size where a --set gave it and not the grid's (it was said at the chip file's
    // rows line for --set chip.noc.die_rows=64).
    for (const auto& [grid, die, g, d] : {std::tuple{"rows", "die_rows", n.rows(), n.die_rows()},
                                          std::tuple{"cols", "die_cols", n.cols(), n.die_cols()}}) {
      const std::string grid_f = std::string("noc.") + grid, die_f = std::string("noc.") + die;
      if (d == 0)
        sink.Add(die_f, "0", "must be positive for topology wafer");
      else if (g % d != 0 && sink.Given(die_f) && !sink.Given(grid_f))
        sink.Add(die_f, std::to_string(d),
                 std::string("must divide ") + grid + " (" + std::to_string(g) + ")");
      else if (g % d != 0)
        sink.Add(grid_f, std::to_string(g),
                 std::string("must be a multiple of ") + die + " (" + std::to_string(d) + ")");
    }
    CheckPositive(sink, "noc.d2d_bandwidth_gbps", n.d2d_bandwidth_gbps());
    CheckLatencyNs(sink, "noc.d2d_latency_ns", n.d2d_latency_ns());
  }
  Network Build(const config::Chip& c, long double cycle_ps) const override {
    const auto& n = c.noc();
    const int rows = n.rows(), cols = n.cols(), dr = n.die_rows(), dc = n.die_cols();
    Network net = GridNodes(rows, cols);
    const Ps lat = HopLatencyPs(c, cycle_ps, n.link_latency_ns());
    const Ps d2d_lat = HopLatencyPs(c, cycle_ps, n.d2d_latency_ns());
    auto wire = [&](int a, int b, bool d2d) {
      net.AddWire(a, b, d2d ? n.d2d_bandwidth_gbps() : n.link_bandwidth_gbps(), d2d ? d2d_lat : lat, d2d);
    };
    for (int r = 0; r < rows; ++r) {
      for (int col = 0; col < cols; ++col) {
        int id = r * cols + col;
        if (col + 1 < cols) wire(id, id + 1, (col + 1) % dc == 0);
        if (r + 1 < rows) wire(id, id + cols, (r + 1) % dr == 0);
      }
    }
    return net;
  }
  int NextNode(const Network& net, int at, int dst) const override {
    return GridNextNode(net, at, dst, /*wrap=*/false);
  }
  std::vector<std::vector<bool>> BisectionCuts(const Network& net) const override { return GridCuts(net); }
};

const TopologyRegistrar kRegistered(
    "wafer", "a mesh of cores cut into dies; links across die edges are die-to-die links",
    std::make_unique<Wafer>());

}  // namespace
}  // namespace tpsim::arch
