// Which memory channel each core uses (Chip::ChannelOf), and the controller-name clash
// between two memories' channels.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "arch/chip.h"
#include "tests/arch/test_util.h"

namespace tpsim::arch {
namespace {

// A 1000 MHz chip (1000 ps cycles) with `noc` and `memory` as given, parsed with locations
// from "x.textproto" (the chip fields at lines 1-3, noc on line 4, the memories from line 5).
config::Chip Parse(const std::string& noc, const std::string& memory, config::SourceMap* locs = nullptr) {
  const std::string text =
      "clock_mhz: 1000\n"
      "core { systolic_rows: 32 systolic_cols: 32 matrix_utilization: 1 vector_lanes: 64\n"
      "       sram_bytes: 67108864 }\n" +
      noc + "\n" + memory + "\n";
  config::Chip cfg;
  config::SourceMap own("x.textproto");
  config::ParseMessage(text, "x.textproto", &cfg, locs ? locs : &own);
  return cfg;
}

std::string Hbm(const std::string& name, const std::string& attach) {
  return "memory { name: \"" + name + "\" kind: \"hbm\" attach: [" + attach +
         "] bandwidth_gbps: 100 efficiency: 1 latency_ns: 100 capacity_bytes: 1 }";
}

// The one error Chip::Build gives `cfg`, as printed ("accepted" where it gives none).
std::string BuildError(const config::Chip& cfg, const config::SourceMap& locs) {
  try {
    Chip::Build(cfg, locs);
  } catch (const config::ConfigError& e) {
    return e.diags().size() == 1 ? e.diags()[0].str() : std::to_string(e.diags().size()) + " diags";
  }
  return "accepted";
}

std::vector<int> Channels(const Chip& chip) {
  std::vector<int> out;
  for (int c = 0; c < chip.num_cores(); ++c) out.push_back(chip.ChannelOf(c));
  return out;
}

const char kMesh2x2[] =
    "noc { topology: \"mesh\" rows: 2 cols: 2 link_bandwidth_gbps: 100 router_latency_cycles: 1 "
    "link_latency_ns: 1 }";

TEST(ChannelOf, CoLocatedChannelsOfOneMemoryAreShared) {
  // Both channels of h hang off r0c0, the only attach node, so all four cores choose it and
  // take its channels round-robin: cores 0, 1, 2, 3 -> h0, h1, h0, h1. Before, every core took
  // h0 and h1 carried nothing, while the chip's DRAM bandwidth counted it (200 GB/s).
  Chip chip = Chip::Build(Parse(kMesh2x2, Hbm("h", "\"r0c0\", \"r0c0\"")));
  ASSERT_EQ(chip.channels().size(), 2u);
  EXPECT_EQ(Channels(chip), (std::vector<int>{0, 1, 0, 1}));
  EXPECT_DOUBLE_EQ(chip.TotalDramBandwidthGbps(), 200.0);
}

TEST(ChannelOf, TwoMemoriesAtTheSameNodesShareThem) {
  // As agree's random chips draw them: hbm0 and hbm1 both at r0c0 and r1c0, so channels
  // 0 hbm00 @ r0c0, 1 hbm01 @ r1c0, 2 hbm10 @ r0c0, 3 hbm11 @ r1c0. Read hops (XY, the column
  // first): core 0 (r0c0) is at r0c0; core 1 (r0c1) is 1 hop from r0c0 and 2 (r1c0 -> r1c1 ->
  // r0c1) from r1c0; core 2 (r1c0) is at r1c0; core 3 (r1c1) is 2 from r0c0 and 1 from r1c0.
  // So r0c0 serves cores 0, 1 (channels 0, 2) and r1c0 cores 2, 3 (channels 1, 3): each
  // channel one core. Before: 0, 0, 1, 1, and hbm1's two channels were dead.
  Chip chip = Chip::Build(
      Parse(kMesh2x2, Hbm("hbm0", "\"r0c0\", \"r1c0\"") + "\n" + Hbm("hbm1", "\"r0c0\", \"r1c0\"")));
  ASSERT_EQ(chip.channels().size(), 4u);
  EXPECT_EQ(chip.channels()[2].name, "hbm10");
  EXPECT_EQ(Channels(chip), (std::vector<int>{0, 2, 1, 3}));
}

TEST(ChannelOf, ShippedChipsKeepTheNearestChannel) {
  // Every shipped chip has one channel per attach node, so the sharing rule changes nothing:
  // each core takes a channel nearest in hops. On these chips the lowest id wins every tie as
  // well (no two nearest nodes differ in load when a tied core chooses), as before the ties were
  // shared. The shipped networks are two-way, where attach -> core counts as many hops as core ->
  // attach (the direction the choice used before), so the read-direction rule changes nothing.
  for (const char* name : {"wafer-8x8", "mesh-4x4-hbm", "torus-8x8", "ring-16", "wafer-32x32", "h100-sxm-8",
                           "h200-sxm-8", "b200-sxm-8"}) {
    SCOPED_TRACE(name);
    Chip chip = testing::LoadChip(name);
    std::vector<int> nodes;
    for (const auto& ch : chip.channels()) nodes.push_back(ch.attach);
    std::sort(nodes.begin(), nodes.end());
    ASSERT_EQ(std::adjacent_find(nodes.begin(), nodes.end()), nodes.end()) << "two channels at one node";
    for (int c = 0; c < chip.num_cores(); ++c) {
      for (const auto& ch : chip.channels()) ASSERT_EQ(chip.Hops(ch.attach, c), chip.Hops(c, ch.attach));
      int best = 0;
      for (int ch = 1; ch < static_cast<int>(chip.channels().size()); ++ch) {
        if (chip.Hops(chip.channels()[ch].attach, c) < chip.Hops(chip.channels()[best].attach, c)) best = ch;
      }
      EXPECT_EQ(chip.ChannelOf(c), best) << "core " << c;
    }
  }
}

TEST(ChannelOf, EquidistantMemoriesShareTheCores) {
  // An 8-node switch with h0 at gpu0 and h1 at gpu4: cores 0 and 4 are at their memory's node
  // (0 hops) and take it; every other core reads either over 2 hops (node -> switch -> core).
  // Those choose in core-id order the node with fewer cores so far, gpu0 on ties: 1 -> h0
  // (1 : 1), 2 -> h1 (2 : 1), 3 -> h0 (2 : 2), 5 -> h1 (3 : 2), 6 -> h0 (3 : 3), 7 -> h1 (4 : 3):
  // four cores a channel. Before, every tie went to the lowest channel id, h0: seven cores on
  // h0 and one on h1 (`tpsim agree --seed 9201 --only 218`, 16 cores on a switch with four HBMs,
  // had nine of its cores spill through one channel).
  Chip chip =
      Chip::Build(Parse("noc { topology: \"switch\" nodes: 8 link_bandwidth_gbps: 100 "
                        "router_latency_cycles: 1 switch_latency_ns: 100 }",
                        Hbm("h", "\"gpu0\", \"gpu4\"")));
  ASSERT_EQ(chip.channels().size(), 2u);
  EXPECT_EQ(chip.Hops(chip.channels()[0].attach, 1), 2);
  EXPECT_EQ(chip.Hops(chip.channels()[1].attach, 1), 2);
  EXPECT_EQ(Channels(chip), (std::vector<int>{0, 0, 1, 0, 1, 1, 0, 1}));
}

TEST(ChannelOf, OneWayRingChoosesByTheReadDirection) {
  // A one-way ring n0 -> n1 -> n2 -> n3 -> n0 with h0 at n1 and h1 at n3. Reads travel
  // attach -> core: to n0, 3 hops from n1 (n1 -> n2 -> n3 -> n0) and 1 from n3; to n2, 1 from
  // n1 and 3 from n3. So cores 0..3 take h1, h0, h0, h1. Before, the choice counted core ->
  // attach hops (n0 -> n1 is 1), gave n0 h0 and n2 h1, and their reads crossed 3 links.
  const std::string noc =
      "noc { topology: \"ring\" nodes: 4 bidirectional: false link_bandwidth_gbps: 200 "
      "router_latency_cycles: 1 link_latency_ns: 1 }";
  Chip chip = Chip::Build(Parse(noc, Hbm("h", "\"n1\", \"n3\"")));
  EXPECT_EQ(chip.Hops(chip.FindNode("n1"), 0), 3);
  EXPECT_EQ(chip.Hops(chip.FindNode("n3"), 0), 1);
  EXPECT_EQ(chip.Hops(0, chip.FindNode("n1")), 1);
  EXPECT_EQ(Channels(chip), (std::vector<int>{1, 0, 0, 1}));
  // Core 0 reading 1 MiB: the channel's 100 ns = 100,000 ps, plus 1,048,576 B at 100 GB/s =
  // 10,485,760 ps, plus one hop of 1 router cycle (1000 ps) + 1 ns wire = 2000 ps; the 200 GB/s
  // link is faster than the channel, so it adds no serialisation. Before: 3 hops, 6000 ps.
  const int ch = chip.ChannelOf(0);
  EXPECT_EQ(chip.MemoryPath(0, ch, false).size(), 1u);
  EXPECT_EQ(chip.MemoryTime(0, ch, 1 << 20, false), 100'000 + 10'485'760 + 2000);
  EXPECT_EQ(chip.MemoryTime(2, chip.ChannelOf(2), 1 << 20, false), 100'000 + 10'485'760 + 2000);
}

TEST(ChannelOf, ManyChannelsAtOneNodeOfALargeRing) {
  // 1024 channels at n0 of a 4096-node ring: every core chooses n0, the only attach node,
  // and core c takes channel c mod 1024. The choice walks routes once per distinct attach
  // node; before, once per channel (cores x channels x route length: describe ran past 60 s),
  // and every core took channel 0.
  std::string attach;
  for (int i = 0; i < 1024; ++i) attach += std::string(i ? ", " : "") + "\"n0\"";
  Chip chip =
      Chip::Build(Parse("noc { topology: \"ring\" nodes: 4096 link_bandwidth_gbps: 100 }", Hbm("h", attach)));
  ASSERT_EQ(chip.num_cores(), 4096);
  ASSERT_EQ(chip.channels().size(), 1024u);
  for (int c = 0; c < chip.num_cores(); ++c) ASSERT_EQ(chip.ChannelOf(c), c % 1024) << "core " << c;
  // Each channel's controller links are the pair added with it.
  EXPECT_EQ(chip.Route(chip.channels()[1023].node, 0), std::vector<int>{chip.channels()[1023].up_link});
  EXPECT_EQ(chip.links()[chip.channels()[1023].down_link].name(), "n0->mc_h1023");
}

TEST(ChannelOf, AtMost65536ChannelsAChip) {
  // Each channel is a controller node and two links, and a 64 MiB config can list millions
  // of attach entries: 16 x kMaxNodes = 65536 channels, all memories together, and the
  // memory that passes it is named at its attach list. Before, any number was built (with a
  // search of the attach node's out-links per channel: channels x channels steps).
  std::string attach;
  for (int i = 0; i < 65536; ++i) attach += std::string(i ? "," : "") + "\"n0\"";
  const std::string ring = "noc { topology: \"ring\" nodes: 8 link_bandwidth_gbps: 100 }";
  Chip chip = Chip::Build(Parse(ring, Hbm("h", attach)));
  EXPECT_EQ(chip.channels().size(), 65536u);
  EXPECT_EQ(chip.ChannelOf(7), 7);
  // One more, in a second memory after 8 stacked channels: 8 + 65529 = 65537.
  std::string more;
  for (int i = 0; i < 65529; ++i) more += std::string(i ? "," : "") + "\"n1\"";
  const std::string stacked =
      "memory { name: \"d\" kind: \"dram\" per_core: true bandwidth_gbps: 100 efficiency: 1 latency_ns: 10 "
      "capacity_bytes: 1 }";
  config::SourceMap locs("x.textproto");
  config::Chip cfg = Parse(ring, stacked + "\n" + Hbm("h", more), &locs);
  EXPECT_EQ(BuildError(cfg, locs),
            "x.textproto:6:32: chip.memory[1].attach: 65529: its 65529 channels (one per attach entry) bring "
            "the chip's memory channels to 65537, past the most a chip may have (65536, all memories "
            "together)");
}

TEST(ChannelOf, ControllerClashBetweenTwoMemoriesNamesTheOtherChannel) {
  // d is stacked on 12 cores (d0..d11); d1's channel 0 is also named d10: controller mc_d10.
  const std::string noc =
      "noc { topology: \"mesh\" rows: 3 cols: 4 link_bandwidth_gbps: 100 router_latency_cycles: 1 "
      "link_latency_ns: 1 }";
  const std::string stacked =
      "memory { name: \"d\" kind: \"dram\" per_core: true bandwidth_gbps: 100 efficiency: 1 latency_ns: 10 "
      "capacity_bytes: 1 }";
  config::SourceMap locs("x.textproto");
  config::Chip cfg = Parse(noc, stacked + "\n" + Hbm("d1", "\"r0c0\""), &locs);
  EXPECT_EQ(
      BuildError(cfg, locs),
      "x.textproto:6:10: chip.memory[1].name: d1: its channel 0's controller node mc_d10 clashes with "
      "that of memory[0] d's channel 10 (a channel is named by its memory's name and index): rename one "
      "of the two memories");
}

}  // namespace
}  // namespace tpsim::arch
