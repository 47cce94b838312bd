#pragma once
// Helpers shared by the grid topologies (mesh, torus, wafer): cores on a
// rows x cols grid, core id = row * cols + col, named "r<row>c<col>", each core
// sharing a node with its router.

#include "arch/topology/topology.h"

namespace tpsim::arch {

// Latency of one hop: router pipeline (noc.router_latency_cycles at the chip
// clock, cycle_ps exact; rounded up) plus `wire_ns` of wire, rounded to the nearest picosecond.
Ps HopLatencyPs(const config::Chip& c, long double cycle_ps, double wire_ns);

// rows, cols > 0 and rows x cols <= kMaxNodes.
void ValidateGridDims(const config::Chip& c, DiagSink& sink);

// The grid's nodes, no links.
Network GridNodes(int rows, int cols);
// A 1 x n line of core nodes named prefix0 .. prefix<n-1> (rings and switches).
Network LineNodes(int n, const std::string& prefix);
// Adds a two-way wire between every pair of horizontal and vertical neighbours
// of a rows x cols grid made by GridNodes (no wraparound).
void AddMeshWires(Network& net, int rows, int cols, double bandwidth_gbps, Ps latency_ps);

// Dimension-order routing: along the row (columns) first, then along the
// column (rows). With `wrap`, each dimension goes the shorter way round,
// the positive direction on ties.
int GridNextNode(const Network& net, int at, int dst, bool wrap);

// The vertical middle cut (cols < cols/2 on side A) and the horizontal one
// (rows < rows/2); a dimension of size 1 has no cut.
std::vector<std::vector<bool>> GridCuts(const Network& net);

// Mesh and torus: rows x cols cores wired to their four neighbours (GridNodes,
// AddMeshWires), dimension-order routing (GridNextNode) and the middle cuts
// (GridCuts). With `wrap` (torus) every row and column also wraps around, except
// a dimension of size 1 or 2 (the wire would be a self-loop or a duplicate).
class GridTopology : public Topology {
 public:
  explicit GridTopology(bool wrap) : wrap_(wrap) {}
  std::string_view params() const override {
    return "rows, cols, link_bandwidth_gbps, router_latency_cycles, link_latency_ns";
  }
  void Validate(const config::Chip& c, DiagSink& sink) const override;
  Network Build(const config::Chip& c, long double cycle_ps) const override;
  int NextNode(const Network& net, int at, int dst) const override {
    return GridNextNode(net, at, dst, wrap_);
  }
  std::vector<std::vector<bool>> BisectionCuts(const Network& net) const override { return GridCuts(net); }

 private:
  bool wrap_;
};

}  // namespace tpsim::arch
