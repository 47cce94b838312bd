#include "arch/chip.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/reverse_graph.hpp>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "arch/dram_device.h"
#include "arch/topology/topology.h"

namespace tpsim::arch {

// Vertices are node ids; edges carry their link id and are added in link-id order.
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, boost::no_property,
                                    boost::property<boost::edge_index_t, int>>;
struct ChipGraph {
  Graph g;
};

namespace {

// ceil(x) as picoseconds, saturating; tolerant of floating-point noise just above an integer.
Ps CeilPs(long double x) {
  if (!(x > 0)) return 0;
  if (x >= static_cast<long double>(std::numeric_limits<Ps>::max())) return std::numeric_limits<Ps>::max();
  // rint, not nearbyint: the same value (both round to nearest), but inlined (x87 frndint)
  // where nearbyint is a library call; rint may raise FE_INEXACT, which nothing reads.
  long double r = std::rint(x);
  if (std::fabs(x - r) <= 1e-9L * std::max(1.0L, r)) return static_cast<Ps>(r);
  return static_cast<Ps>(std::ceil(x));
}

// Picoseconds to move `bytes` at `gbps` (bytes/ns).
Ps SerialisePs(uint64_t bytes, double gbps) {
  if (bytes == 0) return 0;
  if (!(gbps > 0)) return std::numeric_limits<Ps>::max();
  return CeilPs(static_cast<long double>(bytes) * 1000.0L / gbps);
}

void CheckId(int id, int n, const char* what) {
  if (id < 0 || id >= n) {
    throw std::out_of_range(std::string(what) + " id " + std::to_string(id) + " out of range [0, " +
                            std::to_string(n) + ")");
  }
}

// Upper bound on memory channels, all memories together: each is a controller node and two
// links. A 64 MiB config can list millions of attach entries (gigabytes of nodes and links);
// 16 channels for each of kMaxNodes nodes is far beyond any real chip.
constexpr int kMaxChannels = 16 * kMaxNodes;

// Where chip field `sub` ("memory[1].name") is: under "chip." in an experiment's map, at
// `sub` itself in a chip file parsed on its own (as DiagSink finds it).
config::Location Locate(const config::SourceMap& locs, const std::string& sub) {
  return locs.Knows("chip." + sub) ? locs.FindInSetBlock("chip." + sub) : locs.FindInSetBlock(sub);
}

}  // namespace

Ps CyclesPs(long double cycles, long double cycle_ps) { return CeilPs(cycles * cycle_ps); }

std::string Link::name() const {
  return label.empty() ? std::to_string(src) + "->" + std::to_string(dst) : label;
}

Chip Chip::Build(const config::Chip& cfg, const config::SourceMap& locs) {
  std::vector<config::Diag> diags;
  ValidateChip(cfg, locs, "chip", &diags);
  if (!diags.empty()) throw config::ConfigError(std::move(diags));

  Chip chip;
  chip.cfg_ = cfg;
  chip.cycle_ps_ = CyclePs(cfg.clock_mhz());
  const Topology* topo = FindTopology(cfg.noc().topology());
  Network net = topo->Build(cfg, chip.cycle_ps_);
  chip.num_cores_ = net.num_cores;
  chip.grid_rows_ = net.grid_rows;
  chip.grid_cols_ = net.grid_cols;
  chip.nodes_ = net.nodes;
  chip.links_ = net.links;
  const int n_topo = static_cast<int>(chip.nodes_.size());
  for (int i = 0; i < n_topo; ++i) chip.node_index_.emplace(chip.nodes_[i].name, i);

  // Memory channels (per_core memories stacked under each core, in declaration
  // order) and their controllers: one kMemory node per channel after the
  // topology's nodes, wired to the channel's attach node by a link pair.
  int64_t total_channels = 0;
  for (int mi = 0; mi < cfg.memory_size(); ++mi) {
    const auto& m = cfg.memory(mi);
    const int64_t count = m.per_core() ? chip.num_cores_ : m.attach_size();
    total_channels += count;
    if (total_channels > kMaxChannels) {
      const std::string sub = "memory[" + std::to_string(mi) + "]." + (m.per_core() ? "per_core" : "attach");
      throw config::ConfigError(config::Diag{
          Locate(locs, sub), "chip." + sub, m.per_core() ? "true" : std::to_string(count),
          "its " + std::to_string(count) + " channels (one per " + (m.per_core() ? "core" : "attach entry") +
              ") bring the chip's memory channels to " + std::to_string(total_channels) +
              ", past the most a chip may have (" + std::to_string(kMaxChannels) +
              ", all memories together)"});
    }
  }
  for (int mi = 0; mi < cfg.memory_size(); ++mi) {
    const auto& m = cfg.memory(mi);
    auto add = [&](const std::string& name, int attach) {
      MemoryChannel ch;
      ch.name = name;
      ch.memory = mi;
      ch.attach = attach;
      ch.bandwidth_gbps = m.bandwidth_gbps() * MemoryEfficiency(m);
      ch.latency_ps = std::llround(m.latency_ns() * 1000.0);
      ch.capacity_bytes = m.capacity_bytes();
      Node mc;
      mc.name = "mc_" + name;
      mc.kind = Node::kMemory;
      mc.row = chip.nodes_[attach].row;
      mc.col = chip.nodes_[attach].col;
      if (auto [it, added] = chip.node_index_.emplace(mc.name, static_cast<int>(chip.nodes_.size()));
          !added) {
        std::string rule = "its controller node " + mc.name + " clashes with a node of the network";
        if (it->second >= n_topo) {
          // Channel names are the memory's name plus the channel index, so two memories can
          // clash ("d" per_core on 12 cores has d10, and so has "d1"'s channel 0): name the
          // other memory and its channel, not the network.
          const MemoryChannel& other = chip.channels_[it->second - n_topo];
          const std::string& other_name = cfg.memory(other.memory).name();
          rule = "its channel " + name.substr(m.name().size()) + "'s controller node " + mc.name +
                 " clashes with that of memory[" + std::to_string(other.memory) + "] " + other_name +
                 "'s channel " + other.name.substr(other_name.size()) +
                 " (a channel is named by its memory's name and index): rename one of the two memories";
        }
        const std::string sub = "memory[" + std::to_string(mi) + "].name";
        throw config::ConfigError(config::Diag{Locate(locs, sub), "chip." + sub, m.name(), rule});
      }
      ch.node = static_cast<int>(chip.nodes_.size());
      chip.nodes_.push_back(std::move(mc));
      ch.up_link = static_cast<int>(chip.links_.size());
      ch.down_link = ch.up_link + 1;
      for (auto [src, dst] : {std::pair{ch.node, attach}, std::pair{attach, ch.node}}) {
        Link l;
        l.src = src;
        l.dst = dst;
        l.bandwidth_gbps = ch.bandwidth_gbps;
        chip.links_.push_back(l);
      }
      chip.channels_.push_back(std::move(ch));
    };
    if (m.per_core()) {
      for (int c = 0; c < chip.num_cores_; ++c) add(m.name() + std::to_string(c), c);
    } else {
      for (int i = 0; i < m.attach_size(); ++i) add(m.name() + std::to_string(i), chip.FindNode(m.attach(i)));
    }
  }
  const int n = chip.num_nodes();

  auto graph = std::make_shared<ChipGraph>();
  graph->g = Graph(n);
  for (size_t id = 0; id < chip.links_.size(); ++id) {
    Link& l = chip.links_[id];
    l.label = chip.nodes_[l.src].name + "->" + chip.nodes_[l.dst].name;
    boost::add_edge(l.src, l.dst, static_cast<int>(id), graph->g);
  }
  chip.graph_ = graph;

  // Next-hop table: the topology's own routing where it has one, else BFS
  // shortest paths (distances to each destination on the reversed graph),
  // taking the lowest-id out-link that gets one hop closer. Both read the topology's
  // nodes and links only (its links are the first ids): controllers are leaves, on no
  // route between two topology nodes, and with them each destination's BFS cost as
  // many steps as there are channels (channels x nodes where many hang off one node).
  chip.next_hop_.assign(static_cast<size_t>(n_topo) * n_topo, -1);
  Graph topo_g(n_topo);
  for (size_t id = 0; id < net.links.size(); ++id)
    boost::add_edge(chip.links_[id].src, chip.links_[id].dst, static_cast<int>(id), topo_g);
  const auto edge_id = boost::get(boost::edge_index, topo_g);
  const auto reversed = boost::make_reverse_graph(topo_g);
  std::vector<int> dist(n_topo);
  // Each node's out-links as (target, link id), in the graph's order, read once per pair.
  std::vector<size_t> out_begin(static_cast<size_t>(n_topo) + 1, 0);
  std::vector<std::pair<int, int>> out_links;
  for (int a = 0; a < n_topo; ++a) {
    for (auto [e, end] = boost::out_edges(a, topo_g); e != end; ++e)
      out_links.emplace_back(static_cast<int>(boost::target(*e, topo_g)), edge_id[*e]);
    out_begin[a + 1] = out_links.size();
  }
  for (int b = 0; b < n_topo; ++b) {
    bool have_dist = false;
    for (int a = 0; a < n_topo; ++a) {
      if (a == b) continue;
      int next = topo->NextNode(net, a, b);
      int link = -1;
      if (next >= 0) {
        for (size_t e = out_begin[a]; e < out_begin[a + 1] && link < 0; ++e)
          if (out_links[e].first == next) link = out_links[e].second;
      } else {
        if (!have_dist) {
          std::fill(dist.begin(), dist.end(), -1);
          dist[b] = 0;
          boost::breadth_first_search(
              reversed, b,
              boost::visitor(boost::make_bfs_visitor(boost::record_distances(
                  boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, reversed)),
                  boost::on_tree_edge()))));
          have_dist = true;
        }
        if (dist[a] > 0) {
          for (auto [e, end] = boost::out_edges(a, topo_g); e != end; ++e) {
            int t = static_cast<int>(boost::target(*e, topo_g));
            if (dist[t] == dist[a] - 1 && (link < 0 || edge_id[*e] < link)) link = edge_id[*e];
          }
        }
      }
      if (link < 0) {
        throw config::ConfigError(config::Diag{Locate(locs, "noc"), "chip.noc", cfg.noc().topology(),
                                               "no route from " + chip.nodes_[a].name + " to " +
                                                   chip.nodes_[b].name + " (the network is not connected)"});
      }
      chip.next_hop_[static_cast<size_t>(b) * n_topo + a] = link;
    }
  }

  // Controllers are leaves, routed by Route() through their attach node (up_link and
  // down_link, set as they were added: searching the attach node's out-edges for each cost
  // channels x channels where many hang off one node); the table covers the topology's nodes
  // only.
  chip.num_topology_nodes_ = n_topo;

  // Attach nodes, each once, in order of their lowest channel id, and each node's channels in
  // id order: a core chooses a node, then takes one of that node's channels (below).
  std::vector<int> attach_nodes;
  std::vector<std::vector<int>> node_channels(n_topo);
  for (int ch = 0; ch < static_cast<int>(chip.channels_.size()); ++ch) {
    const int at = chip.channels_[ch].attach;
    if (node_channels[at].empty()) attach_nodes.push_back(at);
    node_channels[at].push_back(ch);
  }
  std::vector<int> core_node(chip.num_cores_, -1);

  // Per destination core b, memoised hop counts from every node walked so far; a walk longer
  // than n hops means a topology's routing loops. From the cores they give the diameter; from
  // the attach nodes, each core's nearest nodes in the read direction (attach -> core: weights
  // and KV reads are the bulk of memory traffic, and on a one-way ring the two directions
  // differ). One walk per distinct node, however many channels hang there.
  std::vector<int> hops(n), path, link_dst(chip.links_.size());
  for (size_t l = 0; l < link_dst.size(); ++l) link_dst[l] = chip.links_[l].dst;
  int walked = -1;  // the destination core `hops` holds
  auto hops_to = [&](int b, int a) {
    if (walked != b) {
      std::fill(hops.begin(), hops.end(), -1);
      hops[b] = 0;
      walked = b;
    }
    path.clear();
    int at = a;
    while (hops[at] < 0) {
      path.push_back(at);
      if (static_cast<int>(path.size()) > n_topo)
        throw std::logic_error("routing loop in topology " + cfg.noc().topology());
      at = link_dst[chip.next_hop_[static_cast<size_t>(b) * n_topo + at]];
    }
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      hops[*it] = hops[at] + 1;
      at = *it;
    }
    return hops[a];
  };
  std::vector<int> best_hops(chip.num_cores_, 0), nearest(chip.num_cores_, 0);  // and how many
  for (int b = 0; b < chip.num_cores_; ++b) {
    for (int a = 0; a < chip.num_cores_; ++a) chip.diameter_ = std::max(chip.diameter_, hops_to(b, a));
    for (int at : attach_nodes) {
      const int h = hops_to(b, at);
      if (core_node[b] < 0 || h < best_hops[b]) core_node[b] = at, best_hops[b] = h, nearest[b] = 0;
      nearest[b] += h == best_hops[b];
    }
  }
  // A core with one nearest node takes it; then, in core-id order, a core with several takes the
  // one with the fewest cores per channel so far (the first in channel-id order on ties), so
  // that equidistant memories share the cores instead of the first one taking them all.
  std::vector<size_t> choosers(n_topo, 0);
  for (int b = 0; b < chip.num_cores_; ++b)
    if (nearest[b] == 1) ++choosers[core_node[b]];
  for (int b = 0; b < chip.num_cores_; ++b) {
    if (nearest[b] < 2) continue;
    int& best = core_node[b];
    for (int at : attach_nodes)
      if (hops_to(b, at) == best_hops[b] &&
          choosers[at] * node_channels[best].size() < choosers[best] * node_channels[at].size())
        best = at;
    ++choosers[best];
  }

  // The cores that chose a node share its channels: in core-id order they take them
  // round-robin in channel-id order (the j-th gets channel j mod count). With one channel per
  // node that is the node's channel; before, every core took the lowest id, and a second
  // channel at the same node carried nothing while describe counted its bandwidth.
  chip.core_channel_.assign(chip.num_cores_, -1);
  std::vector<size_t> taken(n_topo, 0);
  for (int c = 0; c < chip.num_cores_ && !attach_nodes.empty(); ++c) {
    const std::vector<int>& at = node_channels[core_node[c]];
    chip.core_channel_[c] = at[taken[core_node[c]]++ % at.size()];
  }

  bool first_cut = true;
  for (const auto& side : topo->BisectionCuts(net)) {
    double sum = 0;
    for (const auto& l : chip.links_) {
      if (l.src >= n_topo || l.dst >= n_topo) continue;  // memory controllers are not cut
      if (side[l.src] && !side[l.dst]) sum += l.bandwidth_gbps;
    }
    chip.bisection_gbps_ = first_cut ? sum : std::min(chip.bisection_gbps_, sum);
    first_cut = false;
  }

  return chip;
}

int Chip::FindNode(const std::string& name) const {
  auto it = node_index_.find(name);
  return it == node_index_.end() ? -1 : it->second;
}

std::vector<int> Chip::OutLinks(int node) const {
  CheckId(node, num_nodes(), "node");
  std::vector<int> out;
  const auto edge_id = boost::get(boost::edge_index, graph_->g);
  for (auto [e, end] = boost::out_edges(node, graph_->g); e != end; ++e) out.push_back(edge_id[*e]);
  return out;
}

int Chip::CoreAt(int row, int col) const {
  if (row < 0 || col < 0 || row >= grid_rows_ || col >= grid_cols_) return -1;
  return row * grid_cols_ + col;
}

template <class OnLink>
void Chip::WalkRoute(int a, int b, OnLink&& on_link) const {
  const int n = num_nodes();
  CheckId(a, n, "node");
  CheckId(b, n, "node");
  if (a == b) return;
  const int nt = num_topology_nodes_;
  int links = 0;
  if (a >= nt) {  // leave a controller by its link to the attach node
    const MemoryChannel& ch = channels_[a - nt];
    on_link(ch.up_link), ++links;
    a = ch.attach;
  }
  const int target = b >= nt ? channels_[b - nt].attach : b;
  for (int at = a; at != target && links <= n; ++links) {
    const int link = next_hop_[static_cast<size_t>(target) * nt + at];
    on_link(link);
    at = links_[link].dst;
  }
  if (b >= nt) on_link(channels_[b - nt].down_link);
}

std::vector<int> Chip::Route(int a, int b) const {
  std::vector<int> route;
  WalkRoute(a, b, [&](int link) { route.push_back(link); });
  return route;
}

int Chip::Hops(int a, int b) const {
  int hops = 0;
  WalkRoute(a, b, [&](int) { ++hops; });
  return hops;
}

Ps Chip::TransferTime(int a, int b, uint64_t bytes) const {
  std::vector<int> route = Route(a, b);
  if (route.empty() || bytes == 0) return 0;
  Ps t = 0;
  double min_bw = std::numeric_limits<double>::infinity();
  for (int l : route) {
    t = SatAdd(t, links_[l].latency_ps);
    min_bw = std::min(min_bw, links_[l].bandwidth_gbps);
  }
  return SatAdd(t, SerialisePs(bytes, min_bw));
}

int Chip::ChannelOf(int core) const {
  CheckId(core, num_cores_, "core");
  return core_channel_[core];
}

double Chip::PeakTflops() const {
  if (cfg_.has_gpu()) return num_cores_ * cfg_.gpu().bf16_tflops();
  const auto& c = cfg_.core();
  double arrays = std::max<uint32_t>(1, c.systolic_arrays());
  return num_cores_ * arrays * c.systolic_rows() * c.systolic_cols() * 2.0 * cfg_.clock_mhz() / 1e6;
}

double Chip::AchievableTflops() const {
  return PeakTflops() * (cfg_.has_gpu() ? cfg_.gpu().tensor_efficiency() : cfg_.core().matrix_utilization());
}

uint64_t Chip::TotalSramBytes() const {
  uint64_t total;  // saturating: cores x a sram_bytes near 2^63 passes 2^64
  return __builtin_mul_overflow(static_cast<uint64_t>(num_cores_), cfg_.core().sram_bytes(), &total)
             ? UINT64_MAX
             : total;
}

double MemoryEfficiency(const config::Memory& m) {
  if (!m.has_device()) return m.efficiency();
  const dram::DeviceSpec* preset = dram::FindPreset(m.device().preset());
  if (!preset) return m.efficiency();  // ValidateChip reports it
  dram::DeviceSpec spec = *preset;
  spec.bus = m.device().command_bus() == "split" ? dram::CommandBus::kSplit : dram::CommandBus::kShared;
  spec.refresh = m.device().refresh();
  if (m.device().queue_depth() > 0) spec.queue_depth = static_cast<int>(m.device().queue_depth());
  return dram::StreamingEfficiency(spec);
}

double Chip::TotalDramBandwidthGbps() const {
  double sum = 0;
  for (const auto& ch : channels_) sum += ch.bandwidth_gbps;
  return sum;
}

int Chip::Diameter() const { return diameter_; }

double Chip::BisectionBandwidthGbps() const { return bisection_gbps_; }

Ps Chip::GemmTime(uint64_t batch, uint64_t m, uint64_t n, uint64_t k, uint64_t bytes) const {
  const auto& c = cfg_.core();
  const uint64_t rows = c.systolic_rows(), cols = c.systolic_cols();
  const uint64_t arrays = std::max<uint32_t>(1, c.systolic_arrays());
  Ps compute = 0;
  if (batch && m && n && k) {
    long double tiles = static_cast<long double>((m + rows - 1) / rows) * ((n + cols - 1) / cols) * batch;
    long double per_array = std::ceil(tiles / arrays);
    compute =
        CeilPs(per_array * (static_cast<long double>(k) + rows + cols) * cycle_ps_ / c.matrix_utilization());
  }
  Ps sram = c.sram_bandwidth_gbps() > 0 ? SerialisePs(bytes, c.sram_bandwidth_gbps()) : 0;
  return std::max(compute, sram);
}

Ps Chip::VectorTime(double ops, uint64_t bytes) const {
  const auto& c = cfg_.core();
  Ps compute = 0;
  if (ops > 0) compute = CeilPs(std::ceil(static_cast<long double>(ops) / c.vector_lanes()) * cycle_ps_);
  Ps sram = c.sram_bandwidth_gbps() > 0 ? SerialisePs(bytes, c.sram_bandwidth_gbps()) : 0;
  return std::max(compute, sram);
}

std::vector<int> Chip::MemoryPath(int core, int channel, bool write) const {
  CheckId(core, num_cores_, "core");
  CheckId(channel, static_cast<int>(channels_.size()), "channel");
  const int attach = channels_[channel].attach;
  return write ? Route(core, attach) : Route(attach, core);
}

Ps Chip::MemoryTime(int core, int channel, uint64_t bytes, bool write, uint64_t sharers,
                    double path_factor) const {
  CheckId(core, num_cores_, "core");
  CheckId(channel, static_cast<int>(channels_.size()), "channel");
  sharers = std::max<uint64_t>(1, sharers);
  uint64_t shared = 0;
  if (__builtin_mul_overflow(bytes, sharers, &shared)) shared = std::numeric_limits<uint64_t>::max();
  const Ps dram = DramTime(channel, shared);
  const std::vector<int> path = MemoryPath(core, channel, write);
  if (path.empty() || bytes == 0) return dram;
  Ps latency = 0;
  double min_bw = std::numeric_limits<double>::infinity();
  for (int l : path) {
    latency = SatAdd(latency, links_[l].latency_ps);
    min_bw = std::min(min_bw, links_[l].bandwidth_gbps);
  }
  // Cut-through: the slower of the channel (its share) and the path's narrowest link.
  const Ps at_channel = dram - channels_[channel].latency_ps;
  uint64_t path_bytes = bytes;
  if (path_factor > 1.0) {
    const long double scaled = std::ceil(static_cast<long double>(bytes) * path_factor);
    path_bytes = scaled >= 1.8e19L ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(scaled);
  }
  return SatAdd(SatAdd(dram, latency), std::max<Ps>(0, SerialisePs(path_bytes, min_bw) - at_channel));
}

Ps Chip::DramTime(int channel, uint64_t bytes) const {
  CheckId(channel, static_cast<int>(channels_.size()), "channel");
  if (bytes == 0) return 0;
  const MemoryChannel& ch = channels_[channel];
  return SatAdd(ch.latency_ps, SerialisePs(bytes, ch.bandwidth_gbps));
}

}  // namespace tpsim::arch
