#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <string_view>

#include "arch/topology/topology.h"

namespace tpsim::arch {

int Network::AddNode(Node n) {
  nodes.push_back(std::move(n));
  return static_cast<int>(nodes.size()) - 1;
}

int Network::AddLink(int src, int dst, double bandwidth_gbps, Ps latency_ps, bool die_to_die) {
  Link l;
  l.src = src;
  l.dst = dst;
  l.bandwidth_gbps = bandwidth_gbps;
  l.latency_ps = latency_ps;
  l.die_to_die = die_to_die;
  links.push_back(std::move(l));
  return static_cast<int>(links.size()) - 1;
}

void Network::AddWire(int a, int b, double bandwidth_gbps, Ps latency_ps, bool die_to_die) {
  AddLink(a, b, bandwidth_gbps, latency_ps, die_to_die);
  AddLink(b, a, bandwidth_gbps, latency_ps, die_to_die);
}

void DiagSink::Add(const std::string& sub, const std::string& value, const std::string& rule) {
  ++count_;
  if (!diags_) return;
  std::string path = Path(sub);
  config::Location where = locs_.FindInSetBlock(path);
  // A chip file parsed on its own records paths without the prefix.
  if (!prefix_.empty() && !locs_.Knows(path)) where = locs_.FindInSetBlock(sub);
  diags_->push_back(config::Diag{std::move(where), std::move(path), value, rule});
}

std::string NumText(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

// Rates, sizes and times past kMaxChipValue are no chip: sums over its cores or channels reached
// inf (describe printed `DRAM bandwidth inf GB/s` for a channel of 1e308 GB/s).
constexpr double kMaxChipValue = 1e30;

bool CheckPositive(DiagSink& sink, const std::string& sub, double v) {
  if (v > 0 && v <= kMaxChipValue) return true;
  sink.Add(sub, NumText(v), v > kMaxChipValue ? "must be at most 1e30" : "must be positive");
  return false;
}

bool CheckNonNegative(DiagSink& sink, const std::string& sub, double v) {
  if (v >= 0 && v <= kMaxChipValue) return true;
  sink.Add(sub, NumText(v), v > kMaxChipValue ? "must be at most 1e30" : "must be zero or positive");
  return false;
}

bool CheckLatencyNs(DiagSink& sink, const std::string& sub, double v) {
  if (!CheckNonNegative(sink, sub, v)) return false;
  if (v <= 1e9) return true;
  sink.Add(sub, NumText(v), "must be at most 1e9 ns (1 s)");
  return false;
}

void CheckLinkDefaults(const config::Chip& c, DiagSink& sink) {
  CheckPositive(sink, "noc.link_bandwidth_gbps", c.noc().link_bandwidth_gbps());
  CheckLatencyNs(sink, "noc.link_latency_ns", c.noc().link_latency_ns());
}

std::vector<std::vector<bool>> Topology::BisectionCuts(const Network& net) const {
  if (net.num_cores < 2) return {};
  std::vector<bool> side(net.nodes.size(), false);
  for (int i = 0; i < net.num_cores / 2; ++i) side[i] = true;
  return {side};
}

std::vector<std::string> UnusedNocFields(const config::Chip& c) {
  std::vector<std::string> out;
  const Topology* t = FindTopology(c.noc().topology());
  if (!t) return out;
  const std::string_view params = t->params();
  // Whole words of params(): "link_bandwidth_gbps" does not count as "bandwidth_gbps".
  const auto reads = [&](const std::string& f) {
    for (size_t at = params.find(f); at != std::string_view::npos; at = params.find(f, at + 1)) {
      const auto word = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
      const bool starts = at == 0 || !word(params[at - 1]);
      const bool ends = at + f.size() == params.size() || !word(params[at + f.size()]);
      if (starts && ends) return true;
    }
    return false;
  };
  std::vector<const google::protobuf::FieldDescriptor*> set;
  c.noc().GetReflection()->ListFields(c.noc(), &set);
  for (const google::protobuf::FieldDescriptor* f : set) {
    const std::string name(f->name());
    if (name == "topology" || name == "port_bandwidth_gbps" || name == "router_buffer_packets") continue;
    if (!reads(name)) out.push_back(name);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> UnusedChipFields(const config::Chip& c) {
  std::vector<std::pair<std::string, std::string>> out;
  const config::Energy& e = c.energy();
  if (e.d2d_hop_pj_per_byte() != 0 && c.noc().topology() != "wafer")
    out.emplace_back("energy.d2d_hop_pj_per_byte",
                     "topology " + c.noc().topology() + " has no die-to-die links (topology wafer does)");
  // A GPU node's memory traffic is its HBM's whatever chip.memory's kind (sim/energy.cc): the hbm
  // rate is read, the dram one never (it warned of the one it read).
  for (const auto& [kind, pj] : {std::pair{"hbm", e.hbm_pj_per_byte()}, {"dram", e.dram_pj_per_byte()}}) {
    bool has = c.has_gpu() && std::string_view(kind) == "hbm";
    if (!c.has_gpu())
      for (const config::Memory& m : c.memory()) has = has || m.kind() == kind;
    if (pj != 0 && !has)
      out.emplace_back(std::string("energy.") + kind + "_pj_per_byte",
                       c.has_gpu()
                           ? std::string("a GPU node's memory traffic is charged at energy.hbm_pj_per_byte "
                                         "(its HBM)")
                           : std::string("no chip.memory is of kind ") + kind);
  }
  const config::CollectiveModel& k = c.collectives();
  if (!k.in_switch_reduction())
    for (const auto& [f, set] : {std::pair{"in_switch_min_bytes", k.in_switch_min_bytes() != 0},
                                 {"in_switch_min_ranks", k.in_switch_min_ranks() != 0},
                                 {"in_switch_bandwidth_gbps", k.in_switch_bandwidth_gbps() != 0}})
      if (set) out.emplace_back(std::string("collectives.") + f, "collectives.in_switch_reduction is off");
  return out;
}

}  // namespace tpsim::arch
