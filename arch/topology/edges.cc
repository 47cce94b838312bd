// edges: an explicit network. core_names lists the cores (in core-id order),
// router_names any further nodes (routers, switches, memory controllers), and
// each edge is a wire between two named nodes: a link in each direction, of
// the edge's bandwidth and latency (0 = the noc defaults) plus the router latency.
//
// Routing: shortest path in hops, lowest link id on ties. Bisection: cores
// 0..N/2-1 against the rest with every router on the second side (an upper
// bound on the true minimum bisection of an arbitrary graph).
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>
#include <map>
#include <utility>

#include "arch/topology/grid.h"

namespace tpsim::arch {
namespace {

std::string NodesText(const config::Noc& n) {
  std::vector<std::string> all(n.core_names().begin(), n.core_names().end());
  all.insert(all.end(), n.router_names().begin(), n.router_names().end());
  std::string s;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all.size() > 8 && i == 3) {
      s += ", ..., " + all.back();
      break;
    }
    s += (i ? ", " : "") + all[i];
  }
  return s;
}

class Edges : public Topology {
 public:
  std::string_view params() const override {
    return "core_names, router_names, edges (a, b, bandwidth_gbps, latency_ns), link_bandwidth_gbps, "
           "router_latency_cycles, link_latency_ns";
  }
  void Validate(const config::Chip& c, DiagSink& sink) const override {
    const auto& n = c.noc();
    const size_t before = sink.count();
    if (n.core_names().empty())
      sink.Add("noc.core_names", "", "must list at least one core for topology edges");
    if (static_cast<size_t>(n.core_names_size()) + n.router_names_size() > static_cast<size_t>(kMaxNodes)) {
      sink.Add("noc.core_names", "",
               "core_names and router_names must name at most " + std::to_string(kMaxNodes) + " nodes");
    }
    std::map<std::string, int> ids;
    auto declare = [&](const std::string& field, int i, const std::string& name) {
      std::string sub = "noc." + field + "[" + std::to_string(i) + "]";
      if (name.empty()) {
        sink.Add(sub, name, "must not be empty");
      } else if (!ids.emplace(name, static_cast<int>(ids.size())).second) {
        sink.Add(sub, name, "names a node already declared");
      }
    };
    for (int i = 0; i < n.core_names_size(); ++i) declare("core_names", i, n.core_names(i));
    for (int i = 0; i < n.router_names_size(); ++i) declare("router_names", i, n.router_names(i));
    // The noc default as the other topologies check it (CheckLinkDefaults), except that 0 is
    // "unset": allowed while every edge gives its own bandwidth. Before, it was checked only
    // when some edge defaulted to it, and without the 1e30 bound: NaN, -5 and 1e308 were
    // accepted and describe printed them (bisection inf GB/s).
    const double noc_bw = n.link_bandwidth_gbps();
    const bool noc_bw_set = noc_bw != 0;  // NaN too
    if (noc_bw_set) CheckPositive(sink, "noc.link_bandwidth_gbps", noc_bw);
    bool endpoints_ok = true;
    // The first index of each pair of nodes an edge joins, either way round: a second edge of a
    // pair was kept by describe (its links and bisection) and dropped by routing (the first one
    // routed, so listing the same wires in another order changed the times).
    std::map<std::pair<std::string, std::string>, int> joined;
    bool twice = false;
    for (int i = 0; i < n.edges_size(); ++i) {
      const auto& e = n.edges(i);
      const std::string sub = "noc.edges[" + std::to_string(i) + "]";
      if (!twice && !e.a().empty() && e.a() != e.b()) {
        const auto [it, fresh] = joined.emplace(std::minmax(e.a(), e.b()), i);
        if (!fresh) {
          twice = true;  // said once: a file of a million copies is one error
          sink.Add(sub, e.a() + " - " + e.b(),
                   "joins the nodes noc.edges[" + std::to_string(it->second) +
                       "] joins: give each pair of nodes one edge (it carries both directions)");
        }
      }
      for (const auto& [end, name] : {std::pair{"a", e.a()}, std::pair{"b", e.b()}}) {
        if (!ids.count(name)) {
          sink.Add(sub + "." + end, name, "names no node of the chip (nodes are " + NodesText(n) + ")");
          endpoints_ok = false;
        }
      }
      if (!e.a().empty() && e.a() == e.b()) {
        sink.Add(sub + ".b", e.b(), "must differ from a (no self-loops)");
      }
      if (e.bandwidth_gbps() == 0) {
        if (!noc_bw_set) {  // a bad noc value is reported once, above
          sink.Add(sub + ".bandwidth_gbps", "0",
                   "must be positive, or noc.link_bandwidth_gbps must be positive to default it");
        }
      } else {
        CheckPositive(sink, sub + ".bandwidth_gbps", e.bandwidth_gbps());
      }
      CheckLatencyNs(sink, sub + ".latency_ns", e.latency_ns());
    }
    CheckLatencyNs(sink, "noc.link_latency_ns", n.link_latency_ns());
    if (sink.count() != before || !endpoints_ok || ids.size() < 2) return;
    using G = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
    G g(ids.size());
    for (const auto& e : n.edges()) {
      boost::add_edge(ids[e.a()], ids[e.b()], g);
      boost::add_edge(ids[e.b()], ids[e.a()], g);
    }
    std::vector<int> component(ids.size());
    if (boost::strong_components(g, component.data()) > 1) {
      std::string unreached;
      for (const auto& [name, id] : ids) {
        if (component[id] != component[ids[n.core_names(0)]]) {
          unreached = name;
          break;
        }
      }
      sink.Add(
          "noc.edges", unreached,
          "the network must be connected (" + unreached + " cannot be reached from " + n.core_names(0) + ")");
    }
  }
  Network Build(const config::Chip& c, long double cycle_ps) const override {
    const auto& n = c.noc();
    Network net;
    net.num_cores = n.core_names_size();
    net.grid_rows = 1;
    net.grid_cols = net.num_cores;
    std::map<std::string, int> ids;
    for (int i = 0; i < n.core_names_size(); ++i) {
      ids[n.core_names(i)] = net.AddNode(Node{n.core_names(i), Node::kCore, 0, i});
    }
    for (const auto& r : n.router_names()) ids[r] = net.AddNode(Node{r, Node::kRouter, -1, -1});
    for (const auto& e : n.edges()) {
      double bw = e.bandwidth_gbps() > 0 ? e.bandwidth_gbps() : n.link_bandwidth_gbps();
      double wire = e.latency_ns() > 0 ? e.latency_ns() : n.link_latency_ns();
      net.AddWire(ids[e.a()], ids[e.b()], bw, HopLatencyPs(c, cycle_ps, wire));
    }
    return net;
  }
};

const TopologyRegistrar kRegistered(
    "edges", "an explicit network: named cores and routers, one two-way wire per listed edge",
    std::make_unique<Edges>());

}  // namespace
}  // namespace tpsim::arch
