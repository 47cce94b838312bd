// Shipped chips: every one builds, and their headline numbers match hand arithmetic.
#include "arch/chip.h"

#include <gtest/gtest.h>

#include "tests/arch/test_util.h"

namespace tpsim::arch {
namespace {

using testing::LoadChip;

TEST(ShippedChips, AllBuild) {
  for (const char* name : {"wafer-8x8", "mesh-4x4-hbm", "torus-8x8", "ring-16", "wafer-32x32", "h100-sxm-8",
                           "h200-sxm-8", "b200-sxm-8"}) {
    SCOPED_TRACE(name);
    Chip chip = LoadChip(name);
    EXPECT_GT(chip.num_cores(), 0);
    EXPECT_GT(chip.PeakTflops(), 0);
    for (int c = 0; c < chip.num_cores(); ++c) EXPECT_GE(chip.ChannelOf(c), 0);
  }
}

TEST(Wafer8x8, Shape) {
  Chip chip = LoadChip("wafer-8x8");
  EXPECT_EQ(chip.num_cores(), 64);
  // 64 core/router nodes, then 64 memory controllers (one per stacked channel).
  EXPECT_EQ(chip.num_nodes(), 128);
  EXPECT_EQ(chip.node(64).name, "mc_dram0");
  EXPECT_EQ(chip.node(64).kind, Node::kMemory);
  EXPECT_EQ(chip.grid_rows(), 8);
  EXPECT_EQ(chip.grid_cols(), 8);
  EXPECT_EQ(chip.CoreAt(2, 5), 21);
  EXPECT_EQ(chip.CoreAt(8, 0), -1);
  EXPECT_EQ(chip.node(21).name, "r2c5");
  EXPECT_EQ(chip.FindNode("r7c7"), 63);
  EXPECT_EQ(chip.FindNode("nope"), -1);
  // 8 rows x 7 horizontal wires + 7 x 8 vertical wires, plus one wire from each of
  // the 64 controllers to its core, two links each.
  EXPECT_EQ(chip.links().size(), 2u * (8 * 7 + 7 * 8 + 64));
  EXPECT_EQ(chip.cycle_ps(), 2000);  // 500 MHz
}

TEST(Wafer8x8, HopsDiameterBisection) {
  Chip chip = LoadChip("wafer-8x8");
  EXPECT_EQ(chip.Hops(0, 63), 14);  // 7 + 7
  EXPECT_EQ(chip.Hops(63, 0), 14);
  EXPECT_EQ(chip.Hops(9, 9), 0);
  EXPECT_EQ(chip.Diameter(), 14);
  // Middle cut: 8 rows x one 160 GB/s link crossing left to right.
  EXPECT_DOUBLE_EQ(chip.BisectionBandwidthGbps(), 8 * 160.0);
}

TEST(Wafer8x8, XyRouteGoesAlongTheRowFirst) {
  Chip chip = LoadChip("wafer-8x8");
  std::vector<std::string> hops;
  for (int l : chip.Route(chip.FindNode("r0c0"), chip.FindNode("r2c3")))
    hops.push_back(chip.links()[l].name());
  EXPECT_EQ(hops,
            (std::vector<std::string>{"r0c0->r0c1", "r0c1->r0c2", "r0c2->r0c3", "r0c3->r1c3", "r1c3->r2c3"}));
  // And back: columns first again (r2c3 -> r2c0), then rows.
  auto back = chip.Route(chip.FindNode("r2c3"), chip.FindNode("r0c0"));
  ASSERT_EQ(back.size(), 5u);
  EXPECT_EQ(chip.links()[back[0]].name(), "r2c3->r2c2");
  EXPECT_EQ(chip.links()[back[3]].name(), "r2c0->r1c0");
}

TEST(Wafer8x8, TransferTimeAcrossTheDiagonal) {
  Chip chip = LoadChip("wafer-8x8");
  // 14 hops x (1 router cycle = 2000 ps + 0 ns wire) = 28000 ps,
  // plus 1 MiB at 160 GB/s = 1048576 * 1000 / 160 = 6553600 ps.
  EXPECT_EQ(chip.TransferTime(0, 63, 1 << 20), 28000 + 6553600);
  // 1 byte: 1000/160 = 6.25 ps, rounded up to 7.
  EXPECT_EQ(chip.TransferTime(0, 1, 1), 2000 + 7);
  EXPECT_EQ(chip.TransferTime(5, 5, 1 << 20), 0);
  EXPECT_EQ(chip.TransferTime(0, 63, 0), 0);
}

TEST(Wafer8x8, GemmTime) {
  Chip chip = LoadChip("wafer-8x8");
  // [128 x 512] x [512 x 256] on a 64x64 array: ceil(128/64) * ceil(256/64) = 8 tiles,
  // each 512 + 64 + 64 = 640 cycles: 5120 cycles x 2000 ps / 0.7 = 14628571.43 -> 14628572 ps.
  // Operands and result in bf16: (128*512 + 512*256 + 128*256) * 2 = 458752 bytes at 256 GB/s
  // = 1792000 ps, below the compute time.
  EXPECT_EQ(chip.GemmTime(1, 128, 256, 512, 458752), 14628572);
  // Batch of 3 triples the tiles.
  EXPECT_EQ(chip.GemmTime(3, 128, 256, 512, 0), 43885715);  // 15360 * 2000 / 0.7 = 43885714.29
  // SRAM-bound: one 64x64x64 tile is 192 cycles = 548572 ps, but 1e6 bytes at 256 GB/s
  // take 3906250 ps.
  EXPECT_EQ(chip.GemmTime(1, 64, 64, 64, 1000000), 3906250);
  EXPECT_EQ(chip.GemmTime(0, 64, 64, 64, 0), 0);
}

TEST(Wafer8x8, VectorAndDramTime) {
  Chip chip = LoadChip("wafer-8x8");
  // ceil(1000 / 64) = 16 cycles x 2000 ps.
  EXPECT_EQ(chip.VectorTime(1000, 0), 32000);
  // SRAM-bound: 512000 bytes at 256 GB/s = 2000000 ps.
  EXPECT_EQ(chip.VectorTime(1000, 512000), 2000000);
  // Stacked DRAM: core 5 uses dram5, 60 GB/s x 0.7 = 42 GB/s effective, 50 ns latency.
  ASSERT_EQ(chip.channels().size(), 64u);
  EXPECT_EQ(chip.ChannelOf(5), 5);
  EXPECT_EQ(chip.channels()[5].name, "dram5");
  EXPECT_EQ(chip.channels()[5].attach, 5);
  EXPECT_EQ(chip.channels()[5].node, chip.FindNode("mc_dram5"));
  EXPECT_EQ(chip.channels()[5].node, 64 + 5);
  // Stacked: no network path, so a memory task costs DramTime (shared: bytes x sharers).
  EXPECT_TRUE(chip.MemoryPath(5, 5, false).empty());
  EXPECT_EQ(chip.MemoryTime(5, 5, 1 << 20, false), chip.DramTime(5, 1 << 20));
  EXPECT_EQ(chip.MemoryTime(5, 5, 1 << 20, true, 2), chip.DramTime(5, 2 << 20));
  EXPECT_DOUBLE_EQ(chip.channels()[5].bandwidth_gbps, 42.0);
  // 1048576 * 1000 / 42 = 24966095.24 -> 24966096, + 50000.
  EXPECT_EQ(chip.DramTime(5, 1 << 20), 50000 + 24966096);
  EXPECT_EQ(chip.DramTime(5, 0), 0);
  EXPECT_THROW(chip.DramTime(64, 1), std::out_of_range);
}

TEST(Wafer8x8, Totals) {
  Chip chip = LoadChip("wafer-8x8");
  EXPECT_NEAR(chip.PeakTflops(), 64 * 64 * 64 * 2 * 500e6 / 1e12, 1e-9);  // 262.144
  EXPECT_EQ(chip.TotalSramBytes(), 64ull * 32 * 1024 * 1024);
  EXPECT_NEAR(chip.TotalDramBandwidthGbps(), 64 * 42.0, 1e-9);
}

// The clock period is 1e6 / clock_mhz exactly, a time in cycles rounded up once. It was rounded
// to whole picoseconds first: at 1500 MHz 667 ps for 666.67. wafer-8x8 at 1500 MHz with 3
// router cycles a hop: a hop is 3 x 2000/3 = 2000 ps (was 3 x 667 = 2001); 192 vector ops on
// 64 lanes are 3 cycles, 2000 ps (2001); a 64x64x64 GEMM is one tile of 64 + 64 + 64 = 192
// cycles, 192 x 2000/3 / 0.7 = 182857.14 -> 182858 ps (192 x 667 / 0.7 = 182948.57 -> 182949).
TEST(Clock, CyclesAreTimedAtTheExactPeriod) {
  config::Chip cfg = testing::LoadChipConfig("wafer-8x8");
  cfg.set_clock_mhz(1500);
  cfg.mutable_noc()->set_router_latency_cycles(3);
  Chip chip = Chip::Build(cfg);
  EXPECT_NEAR(static_cast<double>(chip.cycle_ps()), 2000.0 / 3, 1e-9);
  EXPECT_EQ(chip.links()[chip.Route(0, 1)[0]].latency_ps, 2000);
  EXPECT_EQ(chip.TransferTime(0, 1, 1), 2000 + 7);  // 1 byte at 160 GB/s: 6.25 -> 7 ps
  EXPECT_EQ(chip.VectorTime(192, 0), 2000);
  EXPECT_EQ(chip.GemmTime(1, 64, 64, 64, 0), 182858);
  // Near the 1e6 MHz bound the rounding was a large fraction of the cycle: at 600,000 MHz a
  // cycle is 5/3 ps and 3 cycles are 5 ps (rounded to 2 ps a cycle: 6, 20% more).
  cfg.set_clock_mhz(600000);
  Chip fast = Chip::Build(cfg);
  EXPECT_EQ(fast.links()[fast.Route(0, 1)[0]].latency_ps, 5);
  EXPECT_EQ(fast.VectorTime(192, 0), 5);
}

TEST(Torus8x8, WraparoundRoutes) {
  Chip chip = LoadChip("torus-8x8");
  EXPECT_EQ(chip.Hops(0, 63), 2);  // r0c0 -> r0c7 -> r7c7, one wraparound each way
  EXPECT_EQ(chip.Diameter(), 8);   // 4 + 4
  // Tie at distance 4 goes the positive way.
  auto route = chip.Route(chip.FindNode("r0c0"), chip.FindNode("r0c4"));
  ASSERT_EQ(route.size(), 4u);
  EXPECT_EQ(chip.links()[route[0]].name(), "r0c0->r0c1");
  auto wrap = chip.Route(chip.FindNode("r0c0"), chip.FindNode("r0c5"));
  ASSERT_EQ(wrap.size(), 3u);
  EXPECT_EQ(chip.links()[wrap[0]].name(), "r0c0->r0c7");
  // Per row the middle cut crosses r?c3->r?c4 and the wraparound r?c0->r?c7: 16 x 160.
  EXPECT_DOUBLE_EQ(chip.BisectionBandwidthGbps(), 16 * 160.0);
}

TEST(Ring16, Bidirectional) {
  Chip chip = LoadChip("ring-16");
  EXPECT_EQ(chip.num_cores(), 16);
  EXPECT_EQ(chip.grid_rows(), 1);
  EXPECT_EQ(chip.grid_cols(), 16);
  EXPECT_EQ(chip.Diameter(), 8);
  EXPECT_EQ(chip.Hops(0, 15), 1);
  auto tie = chip.Route(0, 8);
  ASSERT_EQ(tie.size(), 8u);
  EXPECT_EQ(chip.links()[tie[0]].name(), "n0->n1");
  // Arcs n0..n7 | n8..n15: n7->n8 and n0->n15 cross: 2 x 160.
  EXPECT_DOUBLE_EQ(chip.BisectionBandwidthGbps(), 320.0);
}

TEST(Ring16, Unidirectional) {
  config::Chip cfg = testing::LoadChipConfig("ring-16");
  cfg.mutable_noc()->set_bidirectional(false);
  Chip chip = Chip::Build(cfg);
  EXPECT_EQ(chip.links().size(), 16u + 2 * 16);  // + one wire per stacked DRAM controller
  EXPECT_EQ(chip.Diameter(), 15);
  EXPECT_EQ(chip.Hops(1, 0), 15);
  EXPECT_DOUBLE_EQ(chip.BisectionBandwidthGbps(), 160.0);  // only n7->n8 crosses forward
}

TEST(Wafer32x32, DiesAndD2dLinks) {
  Chip chip = LoadChip("wafer-32x32");
  EXPECT_EQ(chip.num_cores(), 1024);
  EXPECT_EQ(chip.Diameter(), 62);  // 31 + 31
  // The middle cut (col 15 | col 16) is a die boundary: 32 d2d links at 64 GB/s.
  EXPECT_DOUBLE_EQ(chip.BisectionBandwidthGbps(), 32 * 64.0);
  // r0c3 -> r0c4 crosses a die edge: 1 cycle (2000 ps) + 5 ns, 64000 bytes at 64 GB/s = 1e6 ps.
  auto route = chip.Route(chip.FindNode("r0c3"), chip.FindNode("r0c4"));
  ASSERT_EQ(route.size(), 1u);
  EXPECT_TRUE(chip.links()[route[0]].die_to_die);
  EXPECT_EQ(chip.TransferTime(chip.FindNode("r0c3"), chip.FindNode("r0c4"), 64000), 7000 + 1000000);
  // r0c2 -> r0c3 stays on the die: 2000 ps + 64000 bytes at 160 GB/s = 400000 ps.
  EXPECT_EQ(chip.TransferTime(chip.FindNode("r0c2"), chip.FindNode("r0c3"), 64000), 2000 + 400000);
  // r0c0 -> r0c8: 8 hops, two of them d2d (c3->c4, c7->c8): 6 x 2000 + 2 x 7000, slowest link 64 GB/s.
  EXPECT_EQ(chip.TransferTime(chip.FindNode("r0c0"), chip.FindNode("r0c8"), 64000), 26000 + 1000000);
}

TEST(Mesh4x4Hbm, EdgeChannels) {
  Chip chip = LoadChip("mesh-4x4-hbm");
  EXPECT_EQ(chip.Diameter(), 6);
  EXPECT_DOUBLE_EQ(chip.BisectionBandwidthGbps(), 4 * 256.0);
  ASSERT_EQ(chip.channels().size(), 4u);
  EXPECT_EQ(chip.channels()[0].name, "hbm_west0");
  EXPECT_EQ(chip.channels()[0].attach, chip.FindNode("r1c0"));
  EXPECT_EQ(chip.channels()[0].node, chip.FindNode("mc_hbm_west0"));
  EXPECT_EQ(chip.channels()[3].name, "hbm_east1");
  EXPECT_EQ(chip.channels()[3].attach, chip.FindNode("r2c3"));
  EXPECT_EQ(chip.channels()[3].node, chip.FindNode("mc_hbm_east1"));
  EXPECT_EQ(chip.ChannelOf(chip.FindNode("r0c0")), 0);  // 1 hop to r1c0
  EXPECT_EQ(chip.ChannelOf(chip.FindNode("r0c3")), 2);  // 1 hop to r1c3
  EXPECT_EQ(chip.ChannelOf(chip.FindNode("r0c1")), 0);  // 2 hops west, 3 east
  EXPECT_EQ(chip.ChannelOf(chip.FindNode("r3c2")), 3);  // r2c3: 2 hops
  EXPECT_NEAR(chip.TotalDramBandwidthGbps(), 4 * 819.2 * 0.85, 1e-9);
  // Hop: 2 cycles at 1 GHz + 0.5 ns = 2500 ps.
  EXPECT_EQ(chip.TransferTime(0, 1, 256), 2500 + 1000);
}

TEST(Mesh4x4Hbm, MemoryControllersAreNodes) {
  Chip chip = LoadChip("mesh-4x4-hbm");
  // 16 core/router nodes, then 4 HBM controllers hanging off r1c0, r2c0, r1c3, r2c3.
  EXPECT_EQ(chip.num_nodes(), 20);
  const int mc = chip.FindNode("mc_hbm_west0");
  EXPECT_EQ(mc, 16);
  EXPECT_EQ(chip.node(mc).kind, Node::kMemory);
  EXPECT_EQ(chip.node(mc).row, 1);
  EXPECT_EQ(chip.node(mc).col, 0);
  // 2 x (4 x 3 + 3 x 4) mesh links + 2 per controller.
  EXPECT_EQ(chip.links().size(), 2u * (24 + 4));
  // Routes reach a controller through its attach node and leave it the same way.
  std::vector<std::string> in, out;
  for (int l : chip.Route(chip.FindNode("r0c1"), mc)) in.push_back(chip.links()[l].name());
  for (int l : chip.Route(mc, chip.FindNode("r0c1"))) out.push_back(chip.links()[l].name());
  EXPECT_EQ(in, (std::vector<std::string>{"r0c1->r0c0", "r0c0->r1c0", "r1c0->mc_hbm_west0"}));
  EXPECT_EQ(out, (std::vector<std::string>{"mc_hbm_west0->r1c0", "r1c0->r1c1", "r1c1->r0c1"}));
  EXPECT_EQ(chip.Hops(mc, chip.FindNode("mc_hbm_east1")), 1 + 4 + 1);  // r1c0 -> r2c3: 3 + 1
  // Controllers do not change the cores' figures.
  EXPECT_EQ(chip.Diameter(), 6);
  EXPECT_DOUBLE_EQ(chip.BisectionBandwidthGbps(), 4 * 256.0);
  // A read by r0c1 (core 1) from hbm_west0 crosses r1c0 -> r1c1 -> r0c1 (XY from the attach node).
  ASSERT_EQ(chip.MemoryPath(1, 0, false).size(), 2u);
  EXPECT_EQ(chip.links()[chip.MemoryPath(1, 0, true)[0]].name(), "r0c1->r0c0");  // writes go the XY way back
  // 1 MiB: the channel (819.2 x 0.85 = 696.32 GB/s) needs 1048576000 / 696.32 = 1505882.35 -> 1505883
  // ps after 100 ns; the 256 GB/s mesh links need 1048576000 / 256 = 4096000 ps, so they decide:
  // 100000 + 2 hops x 2500 + 4096000.
  EXPECT_EQ(chip.MemoryTime(1, 0, 1 << 20, false), 100000 + 5000 + 4096000);
  // r1c0 (core 4) is the attach node: no path, the channel alone.
  EXPECT_TRUE(chip.MemoryPath(4, 0, false).empty());
  EXPECT_EQ(chip.MemoryTime(4, 0, 1 << 20, false), 100000 + 1505883);
  // Shared by 4 cores, the channel is the slower stage again: 4 MiB at 696.32 GB/s = 6023529.41 ->
  // 6023530 ps, longer than 4096000 on the links: 100000 + 5000 + 6023530.
  EXPECT_EQ(chip.MemoryTime(1, 0, 1 << 20, false, 4), 100000 + 5000 + 6023530);
}

TEST(H100, SwitchAndNumbers) {
  Chip chip = LoadChip("h100-sxm-8");
  EXPECT_EQ(chip.num_cores(), 8);
  EXPECT_EQ(chip.num_nodes(), 9 + 8);  // 8 GPUs, the switch, 8 HBM controllers
  EXPECT_EQ(chip.node(8).kind, Node::kSwitch);
  EXPECT_EQ(chip.Diameter(), 2);
  EXPECT_EQ(chip.Hops(0, 7), 2);
  // 4 GPUs on one side, the switch on the other: 4 x 450 GB/s.
  EXPECT_DOUBLE_EQ(chip.BisectionBandwidthGbps(), 1800.0);
  // The gpu block's bf16_tflops, 989.4 per GPU; achievable at tensor_efficiency 0.82. (The core
  // block, which the GPU kernels do not read, gives 528 x 16 x 32 x 2 x 1830 MHz = 989.43.)
  EXPECT_DOUBLE_EQ(chip.PeakTflops(), 8 * 989.4);
  EXPECT_DOUBLE_EQ(chip.AchievableTflops(), 8 * 989.4 * 0.82);
  // An override of the gpu block moves the peak (it printed the core block's 7915.4 TFLOP/s in
  // `describe` for any gpu.bf16_tflops).
  config::Chip slower = chip.config();
  slower.mutable_gpu()->set_bf16_tflops(100);
  EXPECT_DOUBLE_EQ(Chip::Build(slower).PeakTflops(), 800);
  // 250 ns up, 250 + 100 ns down, 1 MiB at 450 GB/s = 2330168.9 -> 2330169 ps.
  EXPECT_EQ(chip.TransferTime(0, 1, 1 << 20), 600000 + 2330169);
  // 3350 x 0.9 = 3015 GB/s; 1 GiB: 356133274.96 -> 356133275 ps, + 500 ns.
  EXPECT_EQ(chip.DramTime(chip.ChannelOf(3), 1ull << 30), 500000 + 356133275);
  EXPECT_NEAR(chip.TotalDramBandwidthGbps(), 8 * 3015.0, 1e-6);
  EXPECT_TRUE(chip.config().collectives().in_switch_reduction());
}

TEST(H200, Numbers) {
  Chip chip = LoadChip("h200-sxm-8");
  EXPECT_DOUBLE_EQ(chip.BisectionBandwidthGbps(), 1800.0);
  EXPECT_NEAR(chip.TotalDramBandwidthGbps(), 8 * 4800 * 0.9, 1e-6);
  EXPECT_EQ(chip.channels()[0].capacity_bytes, 141ull << 30);
}

}  // namespace
}  // namespace tpsim::arch
