#pragma once
// Topologies. A topology turns the `noc` section of a chip config into nodes and
// directed links, and may supply its own routing and bisection cuts. Adding a
// topology is one new file in this folder (ring.cc is a small example):
//
//   class Hypercube : public Topology { ... };
//   const TopologyRegistrar kRegistered("hypercube", "one line on what it builds",
//                                       std::make_unique<Hypercube>());
//
// The folder is globbed into a library linked whole-archive (configs/registry.h).

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "arch/chip.h"
#include "configs/registry.h"

namespace tpsim::arch {

// What a topology builds: cores are nodes 0..num_cores-1, then any other nodes.
struct Network {
  int num_cores = 0;
  int grid_rows = 1, grid_cols = 0;
  std::vector<Node> nodes;
  std::vector<Link> links;

  int AddNode(Node n);
  int AddLink(int src, int dst, double bandwidth_gbps, Ps latency_ps, bool die_to_die = false);
  // Two links, a->b then b->a.
  void AddWire(int a, int b, double bandwidth_gbps, Ps latency_ps, bool die_to_die = false);
};

// Collects stage-two config errors as config::Diags. Sub-paths are relative to
// the chip ("noc.rows"); fields are reported as prefix + "." + sub.
class DiagSink {
 public:
  DiagSink(const config::SourceMap& locs, std::string prefix, std::vector<config::Diag>* diags)
      : locs_(locs), prefix_(std::move(prefix)), diags_(diags) {}
  void Add(const std::string& sub, const std::string& value, const std::string& rule);
  std::string Path(const std::string& sub) const { return prefix_.empty() ? sub : prefix_ + "." + sub; }
  size_t count() const { return count_; }
  // Whether `sub` was given by a --set or a sweep point (located at "<command line: ...>" or
  // "<sweep point ...>"), not a file: a rule between two fields is said at the one given there.
  bool Given(const std::string& sub) const { return locs_.Find(Path(sub)).file.starts_with("<"); }

 private:
  const config::SourceMap& locs_;
  std::string prefix_;
  std::vector<config::Diag>* diags_;
  size_t count_ = 0;
};

// Shortest text for a number as it would be written in a config ("160", "0.7").
std::string NumText(double v);

// Common checks: `v` > 0 and finite; `v` >= 0 and finite. Return whether it passed.
bool CheckPositive(DiagSink& sink, const std::string& sub, double v);
bool CheckNonNegative(DiagSink& sink, const std::string& sub, double v);
// A latency in ns: in [0, 1e9] (larger ones would overflow picosecond sums).
bool CheckLatencyNs(DiagSink& sink, const std::string& sub, double v);

// noc.link_bandwidth_gbps > 0 and noc.link_latency_ns >= 0.
void CheckLinkDefaults(const config::Chip& c, DiagSink& sink);

// Upper bound on network nodes: routing tables are num_nodes^2 entries.
inline constexpr int kMaxNodes = 4096;

class Topology {
 public:
  virtual ~Topology() = default;
  // One line: the noc fields it reads.
  virtual std::string_view params() const = 0;
  // Checks the noc fields this topology reads; Build is only called when this
  // added no diag (and the chip-wide checks passed).
  virtual void Validate(const config::Chip& c, DiagSink& sink) const = 0;
  // cycle_ps: the clock period, exactly (CyclePs in chip.h).
  virtual Network Build(const config::Chip& c, long double cycle_ps) const = 0;
  // Next node on the route from `at` to `dst` (at != dst), or -1 for the default:
  // shortest path in hops, lowest link id on ties.
  virtual int NextNode(const Network& /*net*/, int /*at*/, int /*dst*/) const { return -1; }
  // Candidate balanced cuts for bisection bandwidth; each marks the nodes of
  // side A. Default: cores 0..N/2-1 on side A, every other node on side B.
  virtual std::vector<std::vector<bool>> BisectionCuts(const Network& net) const;
};

// The registry of topologies by name (noc.topology).
struct TopologyKind {
  using Value = std::unique_ptr<const Topology>;
  static constexpr std::string_view kName = "topology";
};
using TopologyRegistry = Registry<TopologyKind>;
using TopologyRegistrar = Registrar<TopologyKind>;

inline const Topology* FindTopology(std::string_view name) {  // nullptr when unknown
  const auto* t = TopologyRegistry::Get().Find(name);
  return t ? t->get() : nullptr;
}
// The noc fields `c` sets (non-default) that its topology does not read (not in its params(),
// nor the router-model fields every topology takes: port_bandwidth_gbps, router_buffer_packets),
// by field name in field order; empty for an unknown topology. A d2d_bandwidth_gbps on a mesh
// was accepted and ignored silently.
std::vector<std::string> UnusedNocFields(const config::Chip& c);
// The other chip fields `c` sets that nothing reads, as (field under chip., why): an energy
// coefficient for a link or memory kind the chip lacks (d2d_hop_pj_per_byte off topology wafer,
// hbm_pj_per_byte or dram_pj_per_byte with no memory of that kind), and the in-switch reduction's
// thresholds and rate while collectives.in_switch_reduction is off. Accepted and ignored silently
// before (--set chip.energy.hbm_pj_per_byte=5 on wafer-8x8: the same energy).
std::vector<std::pair<std::string, std::string>> UnusedChipFields(const config::Chip& c);
inline std::vector<std::string> TopologyNames() { return TopologyRegistry::Get().Names(); }  // sorted
inline std::string TopologyNamesText() { return TopologyRegistry::Get().NamesText(); }  // "edges, mesh, ..."

}  // namespace tpsim::arch
