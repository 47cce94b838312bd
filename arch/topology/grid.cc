#include "arch/topology/grid.h"

#include <cmath>

namespace tpsim::arch {

Ps HopLatencyPs(const config::Chip& c, long double cycle_ps, double wire_ns) {
  return CyclesPs(c.noc().router_latency_cycles(), cycle_ps) + std::llround(wire_ns * 1000.0);
}

void ValidateGridDims(const config::Chip& c, DiagSink& sink) {
  const auto& n = c.noc();
  if (n.rows() == 0) sink.Add("noc.rows", "0", "must be positive for topology " + n.topology());
  if (n.cols() == 0) sink.Add("noc.cols", "0", "must be positive for topology " + n.topology());
  uint64_t cores = uint64_t{n.rows()} * n.cols();
  if (cores > static_cast<uint64_t>(kMaxNodes)) {
    sink.Add("noc.rows", std::to_string(n.rows()),
             "rows x cols (" + std::to_string(cores) + ") must be at most " + std::to_string(kMaxNodes) +
                 " cores");
  }
}

Network GridNodes(int rows, int cols) {
  Network net;
  net.num_cores = rows * cols;
  net.grid_rows = rows;
  net.grid_cols = cols;
  for (int r = 0; r < rows; ++r) {
    for (int col = 0; col < cols; ++col) {
      net.AddNode(Node{"r" + std::to_string(r) + "c" + std::to_string(col), Node::kCore, r, col});
    }
  }
  return net;
}

Network LineNodes(int n, const std::string& prefix) {
  Network net;
  net.num_cores = n;
  net.grid_rows = 1;
  net.grid_cols = n;
  for (int i = 0; i < n; ++i) net.AddNode(Node{prefix + std::to_string(i), Node::kCore, 0, i});
  return net;
}

void AddMeshWires(Network& net, int rows, int cols, double bandwidth_gbps, Ps latency_ps) {
  for (int r = 0; r < rows; ++r) {
    for (int col = 0; col < cols; ++col) {
      int id = r * cols + col;
      if (col + 1 < cols) net.AddWire(id, id + 1, bandwidth_gbps, latency_ps);
      if (r + 1 < rows) net.AddWire(id, id + cols, bandwidth_gbps, latency_ps);
    }
  }
}

namespace {
// Step (-1, 0, +1) from `from` towards `to` in a dimension of `size`.
int Step(int from, int to, int size, bool wrap) {
  if (from == to) return 0;
  if (!wrap) return to > from ? 1 : -1;
  int forward = ((to - from) % size + size) % size;
  return 2 * forward <= size ? 1 : -1;
}
}  // namespace

int GridNextNode(const Network& net, int at, int dst, bool wrap) {
  const int rows = net.grid_rows, cols = net.grid_cols;
  const Node& a = net.nodes[at];
  const Node& b = net.nodes[dst];
  int r = a.row, c = a.col;
  if (int s = Step(a.col, b.col, cols, wrap); s != 0) {
    c = (c + s + cols) % cols;
  } else {
    r = (r + Step(a.row, b.row, rows, wrap) + rows) % rows;
  }
  return r * cols + c;
}

std::vector<std::vector<bool>> GridCuts(const Network& net) {
  std::vector<std::vector<bool>> cuts;
  if (net.grid_cols >= 2) {
    std::vector<bool> side(net.nodes.size(), false);
    for (size_t i = 0; i < net.nodes.size(); ++i) side[i] = net.nodes[i].col < net.grid_cols / 2;
    cuts.push_back(std::move(side));
  }
  if (net.grid_rows >= 2) {
    std::vector<bool> side(net.nodes.size(), false);
    for (size_t i = 0; i < net.nodes.size(); ++i) side[i] = net.nodes[i].row < net.grid_rows / 2;
    cuts.push_back(std::move(side));
  }
  return cuts;
}

void GridTopology::Validate(const config::Chip& c, DiagSink& sink) const {
  ValidateGridDims(c, sink);
  CheckLinkDefaults(c, sink);
}

Network GridTopology::Build(const config::Chip& c, long double cycle_ps) const {
  const int rows = c.noc().rows(), cols = c.noc().cols();
  Network net = GridNodes(rows, cols);
  const double bw = c.noc().link_bandwidth_gbps();
  const Ps lat = HopLatencyPs(c, cycle_ps, c.noc().link_latency_ns());
  AddMeshWires(net, rows, cols, bw, lat);
  if (wrap_ && cols > 2) {
    for (int r = 0; r < rows; ++r) net.AddWire(r * cols + cols - 1, r * cols, bw, lat);
  }
  if (wrap_ && rows > 2) {
    for (int col = 0; col < cols; ++col) net.AddWire((rows - 1) * cols + col, col, bw, lat);
  }
  return net;
}

}  // namespace tpsim::arch
