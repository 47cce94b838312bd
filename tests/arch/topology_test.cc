// Topology registry and the topologies no shipped chip uses (edges, small grids).
#include "arch/topology/topology.h"

#include <gtest/gtest.h>

#include "arch/chip.h"
#include "tests/arch/test_util.h"

namespace tpsim::arch {
namespace {

TEST(TopologyRegistry, AllRegistered) {
  EXPECT_EQ(TopologyNames(), (std::vector<std::string>{"edges", "mesh", "ring", "switch", "torus", "wafer"}));
  EXPECT_EQ(TopologyNamesText(), "edges, mesh, ring, switch, torus, wafer");
  EXPECT_NE(FindTopology("mesh"), nullptr);
  EXPECT_EQ(FindTopology("hypercube"), nullptr);
  for (const auto& name : TopologyNames()) EXPECT_FALSE(FindTopology(name)->params().empty()) << name;
}

TEST(TopologyRegistry, UnusedNocFieldsAreNamed) {
  // Every shipped chip sets only what its topology reads.
  for (const char* name : {"wafer-8x8", "wafer-32x32", "mesh-4x4-hbm", "torus-8x8", "ring-16", "h100-sxm-8",
                           "h200-sxm-8", "b200-sxm-8"}) {
    EXPECT_EQ(UnusedNocFields(testing::LoadChipConfig(name)), std::vector<std::string>{}) << name;
  }
  // A mesh reads no die-to-die link, ring direction or switch latency (before, accepted and
  // ignored silently); the router model's fields apply to every topology.
  config::Chip c = testing::LoadChipConfig("wafer-8x8");
  c.mutable_noc()->set_d2d_bandwidth_gbps(5);
  c.mutable_noc()->set_bidirectional(true);
  c.mutable_noc()->set_switch_latency_ns(10);
  c.mutable_noc()->set_router_buffer_packets(4);
  c.mutable_noc()->set_port_bandwidth_gbps(100);
  EXPECT_EQ(UnusedNocFields(c),
            (std::vector<std::string>{"bidirectional", "d2d_bandwidth_gbps", "switch_latency_ns"}));
  // A switch reads nodes, not rows and cols.
  config::Chip g = testing::LoadChipConfig("h100-sxm-8");
  g.mutable_noc()->set_rows(2);
  EXPECT_EQ(UnusedNocFields(g), std::vector<std::string>{"rows"});
}

// Energy coefficients for a link or memory kind the chip lacks, and the in-switch reduction's
// settings while it is off, are named (accepted and ignored silently before); no shipped chip
// sets one.
TEST(TopologyRegistry, UnusedChipFieldsAreNamed) {
  using Fields = std::vector<std::pair<std::string, std::string>>;
  for (const char* name : {"wafer-8x8", "wafer-32x32", "mesh-4x4-hbm", "torus-8x8", "ring-16", "h100-sxm-8",
                           "h200-sxm-8", "b200-sxm-8"}) {
    EXPECT_EQ(UnusedChipFields(testing::LoadChipConfig(name)), Fields{}) << name;
  }
  config::Chip c = testing::LoadChipConfig("wafer-8x8");  // a mesh with per-core DRAM
  c.mutable_energy()->set_d2d_hop_pj_per_byte(0.5);
  c.mutable_energy()->set_hbm_pj_per_byte(3);
  c.mutable_collectives()->set_in_switch_min_bytes(1024);
  EXPECT_EQ(
      UnusedChipFields(c),
      (Fields{{"energy.d2d_hop_pj_per_byte", "topology mesh has no die-to-die links (topology wafer does)"},
              {"energy.hbm_pj_per_byte", "no chip.memory is of kind hbm"},
              {"collectives.in_switch_min_bytes", "collectives.in_switch_reduction is off"}}));
  // A GPU node's dram coefficient (its traffic is charged at its HBM's, whatever the memory's
  // kind: the hbm one was named as unread where a memory was of kind dram); the in-switch
  // settings with the reduction off.
  config::Chip h = testing::LoadChipConfig("h100-sxm-8");
  h.mutable_energy()->set_dram_pj_per_byte(20);
  EXPECT_EQ(UnusedChipFields(h), (Fields{{"energy.dram_pj_per_byte",
                                          "a GPU node's memory traffic is charged at energy.hbm_pj_per_byte "
                                          "(its HBM)"}}));
  config::Chip dram_kind = h;
  dram_kind.mutable_memory(0)->set_kind("dram");
  EXPECT_EQ(UnusedChipFields(dram_kind).size(), 1u);  // the same: hbm_pj_per_byte is read
  h.mutable_collectives()->set_in_switch_reduction(false);
  EXPECT_EQ(UnusedChipFields(h).size(), 4u);
}

// A diamond with a router in the middle:
//
//   c0 -- c1
//   |      |
//   c3 -- rt -- c2
config::Chip Diamond() {
  config::Chip cfg = testing::LoadChipConfig("wafer-8x8");
  auto* noc = cfg.mutable_noc();
  noc->Clear();
  noc->set_topology("edges");
  noc->set_link_bandwidth_gbps(100);
  noc->set_link_latency_ns(1);
  for (const char* c : {"c0", "c1", "c2", "c3"}) noc->add_core_names(c);
  noc->add_router_names("rt");
  auto edge = [&](const char* a, const char* b, double bw) {
    auto* e = noc->add_edges();
    e->set_a(a);
    e->set_b(b);
    e->set_bandwidth_gbps(bw);
  };
  edge("c0", "c1", 0);
  edge("c1", "rt", 50);
  edge("rt", "c2", 0);
  edge("c0", "c3", 0);
  edge("c3", "rt", 0);
  return cfg;
}

TEST(Edges, BuildsAndRoutesShortestLowestLinkFirst) {
  Chip chip = Chip::Build(Diamond());
  EXPECT_EQ(chip.num_cores(), 4);
  // 4 cores + 1 router, then one controller per stacked DRAM channel (wafer-8x8's memory).
  EXPECT_EQ(chip.num_nodes(), 5 + 4);
  EXPECT_EQ(chip.node(4).kind, Node::kRouter);
  EXPECT_EQ(chip.node(5).kind, Node::kMemory);
  // 5 wires, then a wire per controller (mc_dram0 is links 10 and 11).
  EXPECT_EQ(chip.links().size(), 10u + 2 * 4);
  // c0 -> c2 has two 3-hop paths, via c1 and via c3; the first link of the
  // one via c1 (c0->c1, link 0) has the lower id.
  auto route = chip.Route(chip.FindNode("c0"), chip.FindNode("c2"));
  ASSERT_EQ(route.size(), 3u);
  EXPECT_EQ(chip.links()[route[0]].name(), "c0->c1");
  EXPECT_EQ(chip.links()[route[1]].name(), "c1->rt");
  // Per hop: 0 router cycles (cleared) + 1 ns wire.
  // Slowest link c1->rt at 50 GB/s: 5000 bytes = 100000 ps.
  EXPECT_EQ(chip.TransferTime(chip.FindNode("c0"), chip.FindNode("c2"), 5000), 3000 + 100000);
  EXPECT_EQ(chip.Diameter(), 3);
  EXPECT_EQ(chip.OutLinks(0), (std::vector<int>{0, 6, 11}));
}

TEST(Edges, RoutesToRoutersToo) {
  Chip chip = Chip::Build(Diamond());
  EXPECT_EQ(chip.Hops(chip.FindNode("c0"), chip.FindNode("rt")), 2);
  EXPECT_EQ(chip.Hops(chip.FindNode("rt"), chip.FindNode("c0")), 2);
}

TEST(Grid, SmallToriHaveNoDuplicateWraparound) {
  config::Chip cfg = testing::LoadChipConfig("torus-8x8");
  cfg.mutable_noc()->set_rows(2);
  cfg.mutable_noc()->set_cols(3);
  Chip chip = Chip::Build(cfg);
  // Mesh wires: 2 x 2 horizontal + 3 vertical = 7; wraparound only along the 3 columns: 2;
  // plus one wire per stacked DRAM controller: 6.
  EXPECT_EQ(chip.links().size(), 2u * (9 + 6));
  EXPECT_EQ(chip.Diameter(), 2);
}

TEST(Grid, SingleCoreMesh) {
  config::Chip cfg = testing::LoadChipConfig("wafer-8x8");
  cfg.mutable_noc()->set_rows(1);
  cfg.mutable_noc()->set_cols(1);
  Chip chip = Chip::Build(cfg);
  EXPECT_EQ(chip.Diameter(), 0);
  EXPECT_EQ(chip.BisectionBandwidthGbps(), 0);
  EXPECT_TRUE(chip.Route(0, 0).empty());
  // Node 1 is the core's DRAM controller, one link away; node 2 does not exist.
  EXPECT_EQ(chip.Route(0, 1).size(), 1u);
  EXPECT_THROW(chip.Route(0, 2), std::out_of_range);
}

TEST(Grid, MeshIsDeterministic) {
  Chip a = testing::LoadChip("wafer-8x8");
  Chip b = testing::LoadChip("wafer-8x8");
  for (int s = 0; s < 64; s += 7) {
    for (int d = 0; d < 64; d += 5) EXPECT_EQ(a.Route(s, d), b.Route(s, d));
  }
}

}  // namespace
}  // namespace tpsim::arch
