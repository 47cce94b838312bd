#pragma once
// A chip: cores, a network graph (Boost.Graph) with precomputed routes, memory
// channels, and the cost models both timing engines use.
//
// Nodes of the network are cores (ids 0..num_cores-1, the first nodes), routers
// and switches. On meshes and tori each core sits on its own router; the core and
// its router share a node, so a route between neighbouring cores is one link.
// Links are directed: a bidirectional wire is two links. Every memory channel has
// a controller node (Node::kMemory, named "mc_" + channel name, after all the
// topology's nodes) wired by a link pair to its attach node: its own core when
// stacked (per_core), the named `attach` node otherwise. The controller's links
// carry the channel's effective bandwidth with no latency of their own: they are
// the channel's port, and DramTime already charges them. Between the attach node
// and the core, memory traffic crosses ordinary network links (MemoryTime); on
// stacked DRAM that path is empty. Controllers are leaves: no route between two
// other nodes passes through one, and bisection cuts ignore their links.

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chip.pb.h"
#include "configs/load.h"

namespace tpsim::arch {

using Ps = int64_t;  // picoseconds

// a + b, or the largest Ps where that overflows: times saturate at the 2^63 ps clock, which
// the engines and tpsim::sim::CheckRepresentable report as the run passing it.
inline Ps SatAdd(Ps a, Ps b) {
  Ps r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<Ps>::max() : r;
}

struct Node {
  std::string name;  // "r2c5" on meshes/tori, "n3" on rings, "gpu0"/"switch", edge-list names
  enum Kind { kCore, kRouter, kSwitch, kMemory } kind = kCore;
  int row = -1, col = -1;  // grid position where the topology has one
};

struct Link {
  int src = 0, dst = 0;       // node ids
  double bandwidth_gbps = 0;  // bytes/ns
  Ps latency_ps = 0;          // wire + router pipeline latency of this hop
  bool die_to_die = false;
  std::string name() const;  // filled by Chip: "src->dst"
  std::string label;         // node names, "r0c0->r0c1"; name() returns it when set
};

struct MemoryChannel {
  std::string name;                  // "dram3", "hbm_west0"
  int memory = 0;                    // its memory: index into config().memory()
  int node = 0;                      // its controller node (Node::kMemory, "mc_dram3")
  int attach = 0;                    // the network node the controller hangs off (its core when stacked)
  int up_link = -1, down_link = -1;  // controller -> attach, attach -> controller
  double bandwidth_gbps = 0;         // effective: peak x efficiency
  Ps latency_ps = 0;
  uint64_t capacity_bytes = 0;
};

struct ChipGraph;  // the Boost.Graph adjacency_list, defined in chip.cc

// Cost-model and topology figures, precisely (all times integer picoseconds,
// rounded up unless stated otherwise; cycle_ps = 1e6 / clock_mhz exactly, not rounded: a
// time in cycles is rounded up once, after multiplying by it):
//   hop latency   = ceil(router_latency_cycles * cycle_ps) + round(1000 * link_latency_ns)
//                   (d2d_latency_ns on die-to-die links; switch_latency_ns added
//                   to the switch -> core links)
//   TransferTime  = sum of hop latencies + ceil(1000 * bytes / min link bandwidth);
//                   0 when a == b or bytes == 0
//   DramTime      = round(1000 * latency_ns) + ceil(1000 * bytes / (peak x efficiency));
//                   efficiency = MemoryEfficiency (the device model's when `device` is set)
//                   0 when bytes == 0
//   GemmTime      = max(compute, sram) with
//                   tiles   = ceil(m/R) * ceil(n/C) * batch   (R x C = systolic rows x cols)
//                   compute = ceil(tiles / systolic_arrays) * (k + R + C) * cycle_ps
//                             / matrix_utilization          (output-stationary tile:
//                             k MAC steps plus R + C cycles to fill and drain)
//                   sram    = ceil(1000 * bytes / sram_bandwidth_gbps) (0 when unset)
//                   compute is 0 when any of batch, m, n, k is 0
//   VectorTime    = max(ceil(ops / vector_lanes) * cycle_ps, sram)
//   PeakTflops    = cores * systolic_arrays * R * C * 2 * clock_mhz / 1e6
//   Bisection     = min over the topology's balanced cuts (see arch/topology/*.cc)
//                   of the bandwidth of links from side A to side B (one direction)
// Results past the int64 range saturate at INT64_MAX.
class Chip {
 public:
  // Builds the chip; throws config::ConfigError (fields under "chip.") when the
  // description is inconsistent.
  static Chip Build(const config::Chip& cfg, const config::SourceMap& locs = {});

  const config::Chip& config() const { return cfg_; }
  int num_cores() const { return num_cores_; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const Node& node(int id) const { return nodes_[id]; }
  const std::vector<Link>& links() const { return links_; }
  const std::vector<MemoryChannel>& channels() const { return channels_; }
  int FindNode(const std::string& name) const;  // -1 when absent
  // Link ids leaving `node`, ascending.
  std::vector<int> OutLinks(int node) const;

  // Grid shape for placement (rows x cols of cores); rings/switches are 1 x N.
  int grid_rows() const { return grid_rows_; }
  int grid_cols() const { return grid_cols_; }
  int CoreAt(int row, int col) const;  // -1 outside the grid

  // Route from node a to node b: the link ids in order, walked from a
  // precomputed next-hop table over the topology's nodes (controllers enter and
  // leave through their attach node). Dimension-order (XY) on meshes and tori,
  // shortest path (lowest link id on ties) otherwise.
  // Node, core and channel ids out of range throw std::out_of_range.
  std::vector<int> Route(int a, int b) const;
  int Hops(int a, int b) const;
  // Unloaded latency of a message of `bytes` from a to b: per-hop latencies plus
  // serialisation at the slowest link of the route (cut-through).
  Ps TransferTime(int a, int b, uint64_t bytes) const;

  // The memory channel core `core` uses. The core chooses the attach node nearest in hops in
  // the read direction (attach -> core; its own node when a channel is stacked there); a core
  // with several nearest nodes, in core-id order after the cores with one, takes the one with
  // the fewest cores per channel so far (the lowest channel id's on ties). The cores choosing
  // one node share its channels, taking them round-robin in core-id and channel-id order (the
  // j-th such core gets the node's channel j mod count); a node's channels are idle only when
  // fewer cores choose it than hang channels there.
  int ChannelOf(int core) const;

  // Whole-chip figures for `tpsim describe`.
  // All cores' bf16 matrix peak: the systolic arrays at the clock, or on a GPU node the gpu
  // block's bf16_tflops per GPU (the kernels' model, arch/gpu; its core block is not read there).
  double PeakTflops() const;
  // PeakTflops at the matrix units' utilisation: core.matrix_utilization, or on a GPU node
  // gpu.tensor_efficiency.
  double AchievableTflops() const;
  uint64_t TotalSramBytes() const;
  double TotalDramBandwidthGbps() const;  // effective
  int Diameter() const;                   // max over core pairs of hops
  double BisectionBandwidthGbps() const;  // min over balanced core cuts on the grid, one direction

  // Core cost model ------------------------------------------------------
  // The clock period in picoseconds, exactly (CyclePs): 2000 at 500 MHz, 666.67 at 1500 MHz.
  long double cycle_ps() const { return cycle_ps_; }
  // A [m,k] x [k,n] GEMM (batch of them) on one core's matrix unit: ceil(m/R)*ceil(n/C)
  // tiles of k steps plus R+C fill/drain cycles each, divided by utilisation;
  // bounded below by SRAM bandwidth for `bytes` moved.
  Ps GemmTime(uint64_t batch, uint64_t m, uint64_t n, uint64_t k, uint64_t bytes) const;
  // Element-wise / reduction work of `ops` lane-operations on the vector unit.
  Ps VectorTime(double ops, uint64_t bytes) const;
  // Moving `bytes` through a memory channel at its effective bandwidth plus latency.
  Ps DramTime(int channel, uint64_t bytes) const;
  // The network links memory data crosses between `channel`'s attach node and
  // `core`: attach -> core for reads, core -> attach for writes; empty when the
  // channel is stacked under the core.
  std::vector<int> MemoryPath(int core, int channel, bool write) const;
  // A memory task of `core` on `channel` whose bandwidth `sharers` cores share:
  // DramTime(channel, bytes * sharers) when MemoryPath is empty; otherwise the data
  // also crosses that path, cut-through behind the channel:
  //   DramTime(channel, bytes * sharers) + path hop latencies
  //     + max(0, ceil(1000 * ceil(bytes * path_factor) / narrowest path link)
  //              - (DramTime - channel latency))
  // path_factor >= 1 scales the bytes the path must carry when its links are shared
  // (the analytical engine's equivalent-payload multiplier).
  Ps MemoryTime(int core, int channel, uint64_t bytes, bool write, uint64_t sharers = 1,
                double path_factor = 1.0) const;

 private:
  config::Chip cfg_;
  int num_cores_ = 0, grid_rows_ = 1, grid_cols_ = 0;
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<MemoryChannel> channels_;
  // [b * num_topology_nodes + a] -> first link id on the route from topology node
  // a to b, -1 when a == b (by destination: building it and walking a route read
  // one row); controllers (ids from num_topology_nodes_) are routed through their
  // attach node.
  std::vector<int> next_hop_;
  // on_link(link) along Route(a, b), without building it (Route, Hops).
  template <class OnLink>
  void WalkRoute(int a, int b, OnLink&& on_link) const;
  int num_topology_nodes_ = 0;
  std::vector<int> core_channel_;
  long double cycle_ps_ = 0;
  std::map<std::string, int> node_index_;
  std::shared_ptr<const ChipGraph> graph_;
  int diameter_ = 0;
  double bisection_gbps_ = 0;
  friend class TopologyBuilder;
};

// The period of a clock of `clock_mhz` in picoseconds, exactly: 1e6 / clock_mhz. It was rounded
// to whole picoseconds, up to half a picosecond off: 0.05% at 1500 MHz (667 for 666.67), a
// third near the 1e6 MHz bound (666,666.67 MHz: 2 ps for 1.5).
inline long double CyclePs(double clock_mhz) { return 1e6L / clock_mhz; }
// `cycles` cycles of `cycle_ps` picoseconds, rounded up to whole picoseconds (saturating).
Ps CyclesPs(long double cycles, long double cycle_ps);

// A memory's achievable fraction of peak: `efficiency`, or with `device` set, the
// device's streaming saturation from the bank-level model (arch/dram_device.h),
// computed once per device per process.
double MemoryEfficiency(const config::Memory& m);

// Second-stage checks of a chip config. Diags name fields under `prefix`.
void ValidateChip(const config::Chip& c, const config::SourceMap& locs, const std::string& prefix,
                  std::vector<config::Diag>* diags);

}  // namespace tpsim::arch
