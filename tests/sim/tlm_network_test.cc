// The TLM network's optional router model (chip noc.port_bandwidth_gbps and
// noc.router_buffer_packets) against hand-computed numbers on the engine tests' 8x8
// mesh (tests/sim/test_mesh.h): 160 GB/s links, so a 4 KiB packet takes
// 4096 x 6.25 = 25,600 ps on a link, and 2000 ps per hop.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "arch/chip.h"
#include "mapping/program.h"
#include "sim/tlm/tlm_engine.h"
#include "tests/mapping/program_test_util.h"
#include "tests/sim/test_mesh.h"

namespace tpsim::sim {
namespace {

using Program = mapping::testing::TestProgram;  // hand-built; a mapping::Program where one is needed
using Task = mapping::testing::TestTask;
using mapping::TaskKind;
using test::Core;

arch::Chip MeshWith(double port_gbps, uint32_t buffer_packets) {
  config::Chip c = test::MeshConfig();
  c.mutable_noc()->set_port_bandwidth_gbps(port_gbps);
  c.mutable_noc()->set_router_buffer_packets(buffer_packets);
  return arch::Chip::Build(c);
}

Program Transfers(const std::vector<std::pair<int, int>>& pairs, uint64_t bytes) {
  Program p;
  p.num_cores = 64;
  p.ops.push_back(mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "op", "k_split"}, 0, 0, 0});
  for (const auto& [src, dst] : pairs) {
    Task t;
    t.id = mapping::TaskId(static_cast<uint32_t>(p.tasks.size()));
    t.kind = TaskKind::kTransfer;
    t.core = mapping::CoreId(src);
    t.dst_core = mapping::CoreId(dst);
    t.bytes = bytes;
    p.tasks.push_back(t);
  }
  return p;
}

TEST(TlmNetwork, WithoutPortsTwoSendersReachOneCoreAtOnce) {
  // r0c0 -> r0c1 and r0c2 -> r0c1 use different links: both 2000 + 25,600 ps.
  const Program p = Transfers({{Core(0, 0), Core(0, 1)}, {Core(0, 2), Core(0, 1)}}, 4096);
  const EngineOutput out = MakeTlmEngine()->Run(p, MeshWith(0, 0));
  EXPECT_EQ(out.tasks[0].end_ps, 27'600);
  EXPECT_EQ(out.tasks[1].end_ps, 27'600);
}

TEST(TlmNetwork, EjectionPortSerialisesArrivals) {
  // With 160 GB/s ports the ejection port of r0c1 takes one packet at a time: the first
  // (lower task id) is out at 2000 + 25,600; the second reached the port at 2000 and
  // waits until 27,600, then takes 25,600 more.
  const Program p = Transfers({{Core(0, 0), Core(0, 1)}, {Core(0, 2), Core(0, 1)}}, 4096);
  const arch::Chip chip = MeshWith(160, 0);
  const EngineOutput out = MakeTlmEngine()->Run(p, chip);
  EXPECT_EQ(out.tasks[0].end_ps, chip.TransferTime(Core(0, 0), Core(0, 1), 4096));
  EXPECT_EQ(out.tasks[0].end_ps, 27'600);
  EXPECT_EQ(out.tasks[1].end_ps, 53'200);
}

TEST(TlmNetwork, InjectionPortSerialisesDepartures) {
  // r1c1 sends east and south at once: without ports both take 27,600 ps; through one
  // 160 GB/s injection port the second starts after the first's 25,600 ps.
  const Program p = Transfers({{Core(1, 1), Core(1, 2)}, {Core(1, 1), Core(2, 1)}}, 4096);
  const EngineOutput free_out = MakeTlmEngine()->Run(p, MeshWith(0, 0));
  EXPECT_EQ(free_out.tasks[1].end_ps, 27'600);
  const EngineOutput out = MakeTlmEngine()->Run(p, MeshWith(160, 0));
  EXPECT_EQ(out.tasks[0].end_ps, 27'600);
  EXPECT_EQ(out.tasks[1].end_ps, 25'600 + 27'600);
}

TEST(TlmNetwork, SelfTransferLoopsBackThroughThePorts) {
  // No links: without ports it takes no time; with ports 8 KiB at 160 GB/s = 51,200 ps
  // (injection and ejection pipelined packet by packet, no latency).
  const Program p = Transfers({{Core(3, 3), Core(3, 3)}}, 8192);
  EXPECT_EQ(MakeTlmEngine()->Run(p, MeshWith(0, 0)).tasks[0].end_ps, 0);
  EXPECT_EQ(MakeTlmEngine()->Run(p, MeshWith(160, 0)).tasks[0].end_ps, 51'200);
}

TEST(TlmNetwork, TwoSlotBuffersKeepTheUnloadedTime) {
  // r0c0 -> r0c2: 2 hops, 2 packets: 2 x 2000 + 8192 x 6.25 = 55,200 ps
  // (chip.TransferTime), whether the buffers are unbounded or hold 2 packets.
  const Program p = Transfers({{Core(0, 0), Core(0, 2)}}, 8192);
  EXPECT_EQ(MakeTlmEngine()->Run(p, MeshWith(0, 0)).tasks[0].end_ps, 55'200);
  EXPECT_EQ(MakeTlmEngine()->Run(p, MeshWith(0, 2)).tasks[0].end_ps, 55'200);
  EXPECT_EQ(MakeTlmEngine()->Run(p, MeshWith(160, 2)).tasks[0].end_ps, 55'200);
}

TEST(TlmNetwork, OneSlotBufferChargesTheCreditRoundTrip) {
  // One slot at r0c1: packet 1 may enter the first link only when packet 0's tail has
  // left r0c1, at 2000 + 25,600 = 27,600, so it starts 2000 ps (one hop) later than
  // back to back: 55,200 + 2000 = 57,200 ps.
  const Program p = Transfers({{Core(0, 0), Core(0, 2)}}, 8192);
  EXPECT_EQ(MakeTlmEngine()->Run(p, MeshWith(0, 1)).tasks[0].end_ps, 57'200);
}

Program BlockedAtMiddle(uint64_t second_bytes) {
  // Task 0: r0c1 -> r0c2, 8 KiB: the east link of r0c1 is busy [0, 51,200).
  // Task 1: r0c0 -> r0c2, 4 KiB: reaches r0c1 at 2000 and waits for the east link.
  // Task 2: r0c0 -> r1c1: leaves r0c0 after task 1 (at 25,600), reaches r0c1 at 27,600
  //         through the same (west) input port and turns south onto a free link.
  Program p = Transfers({{Core(0, 1), Core(0, 2)}, {Core(0, 0), Core(0, 2)}}, 8192);
  p.tasks[1].bytes = 4096;
  Program q = Transfers({{Core(0, 0), Core(1, 1)}}, second_bytes);
  q.tasks[0].id = mapping::TaskId(2);
  p.tasks.push_back(q.tasks[0]);
  return p;
}

TEST(TlmNetwork, InputPortForwardsOnePacketAtATime) {
  // Unbounded buffers: task 1 leaves r0c1 at 51,200 (done 51,200 + 25,600 + 2000);
  // task 2 goes south at once: 27,600 + 25,600 + 2000.
  const EngineOutput a = MakeTlmEngine()->Run(BlockedAtMiddle(4096), MeshWith(0, 0));
  EXPECT_EQ(a.tasks[1].end_ps, 78'800);
  EXPECT_EQ(a.tasks[2].end_ps, 55'200);
  // Finite buffers: r0c1's west input port has task 1 booked [51,200, 76,800) from
  // when it arrived; task 2 (25,600 ps long) does not fit in the gap before it, so it
  // crosses after: 76,800 + 25,600 + 2000. (A virtual-channel router would let task 2
  // go first and delay task 1 by 2000 ps instead: the bookings are made in arrival order.)
  const EngineOutput b = MakeTlmEngine()->Run(BlockedAtMiddle(4096), MeshWith(0, 4));
  EXPECT_EQ(b.tasks[1].end_ps, 78'800);
  EXPECT_EQ(b.tasks[2].end_ps, 104'400);
  // A 1 KiB task 2 (6400 ps) fits in the gap [27,600, 51,200): 27,600 + 6400 + 2000.
  const EngineOutput c = MakeTlmEngine()->Run(BlockedAtMiddle(1024), MeshWith(0, 4));
  EXPECT_EQ(c.tasks[2].end_ps, 36'000);
}

// The test mesh's cores, memory and link timing on another topology: a memory per core,
// no grid.
config::Chip OtherTopology(const char* topology) {
  config::Chip c = test::MeshConfig();
  c.mutable_memory(0)->clear_attach();
  c.mutable_memory(0)->set_per_core(true);
  c.mutable_noc()->clear_rows();
  c.mutable_noc()->clear_cols();
  c.mutable_noc()->set_topology(topology);
  return c;
}

arch::Chip OneWayRing(int nodes, uint32_t buffer_packets) {
  config::Chip c = OtherTopology("ring");
  auto* noc = c.mutable_noc();
  noc->set_nodes(nodes);
  noc->set_bidirectional(false);
  noc->set_router_buffer_packets(buffer_packets);
  return arch::Chip::Build(c);
}

TEST(TlmNetwork, OneWayRingWithTwoSlotBuffersDoesNotDeadlock) {
  // A one-way ring of 4 (links i -> i + 1, the wraparound 3 -> 0), one slot per dateline
  // class (2 packets): 1 -> 0, 2 -> 1 and 3 -> 2 each go 3 hops round the wraparound link,
  // 8 packets each, all at time 0. When the whole of a wrapping run took class 1 (as
  // BookSim2's torus routing, which assumes routes shorter than half the ring), their
  // class-1 slots covered every link and the three waited on one another for good: the
  // run stopped with "simulation stalled". With the class changing at the dateline they
  // all arrive, none before its unloaded time (3 x 2000 + 8 x 25,600 = 210,800 ps).
  Program p = Transfers({{1, 0}, {2, 1}, {3, 2}}, 8 * 4096);
  p.num_cores = 4;
  const EngineOutput out = MakeTlmEngine()->Run(p, OneWayRing(4, 2));
  ASSERT_EQ(out.tasks.size(), 3u);
  for (const TaskTime& t : out.tasks) EXPECT_GE(t.end_ps, 210'800);
  // Alone, a transfer is timed as before (no wraparound: 0 -> 3 in class 0, and 1 -> 0).
  for (auto [src, dst] : {std::pair{0, 3}, std::pair{1, 0}}) {
    Program one = Transfers({{src, dst}}, 8 * 4096);
    one.num_cores = 4;
    EXPECT_EQ(MakeTlmEngine()->Run(one, OneWayRing(4, 0)).tasks[0].end_ps, 210'800) << src << " -> " << dst;
  }
}

arch::Chip Chain(double middle_gbps) {
  // c0 -> r1 -> r2 -> c1 over three links: 16, middle_gbps and 16 GB/s, 2000 ps each.
  config::Chip c = OtherTopology("edges");
  auto* noc = c.mutable_noc();
  for (const char* name : {"c0", "c1"}) noc->add_core_names(name);
  for (const char* name : {"r1", "r2"}) noc->add_router_names(name);
  const std::vector<std::tuple<const char*, const char*, double>> edges = {
      {"c0", "r1", 16}, {"r1", "r2", middle_gbps}, {"r2", "c1", 16}};
  for (const auto& [a, b, gbps] : edges) {
    config::Edge* e = noc->add_edges();
    e->set_a(a);
    e->set_b(b);
    e->set_bandwidth_gbps(gbps);
  }
  return arch::Chip::Build(c);
}

TEST(TlmNetwork, AFastLinkBetweenSlowOnesKeepsTheTransferTime) {
  // 16 KiB (4 packets) c0 -> c1: 3 x 2000 + 16,384 / 16 B/ns = 1,030,000 ps whatever
  // the middle link's rate from 16 GB/s up (chip.TransferTime), and 3 x 2000 + 16,384 /
  // 8 B/ns = 2,054,000 ps at 8 GB/s. Before, a faster middle link (X GB/s) booked each
  // packet as late as lets it finish when its tail is in and handed that late start on
  // as the next link's head, so the last 16 GB/s link started 256,000 - 4,096,000 / X
  // ps late: 1,030,000 + 51,200 at 20 GB/s, + 192,000 at 64 and + 251,904 at 1000
  // (finite buffers are not modelled on edges: PortsSlowerThanTheLinksSetTheRate has them).
  Program p = Transfers({{0, 1}}, 16384);
  p.num_cores = 2;
  for (double x : {16.0, 20.0, 64.0, 160.0, 1000.0}) {
    const arch::Chip chip = Chain(x);
    EXPECT_EQ(MakeTlmEngine()->Run(p, chip).tasks[0].end_ps, 1'030'000) << x;
    EXPECT_EQ(chip.TransferTime(0, 1, 16384), 1'030'000) << x;
  }
  EXPECT_EQ(MakeTlmEngine()->Run(p, Chain(8)).tasks[0].end_ps, 2'054'000);
}

TEST(TlmNetwork, PortsSlowerThanTheLinksSetTheRate) {
  // 100 GB/s ports around 160 GB/s links, r0c0 -> r0c2, 8 KiB: 2 x 2000 + 8192 / 100
  // B/ns = 85,920 ps (ports have no latency). Before, each 160 GB/s link started a
  // packet 40,960 - 25,600 ps after its head came and handed that on: the ejection
  // port began 15,360 ps late, 101,280 ps in all.
  // The same with 2-packet router buffers.
  const Program p = Transfers({{Core(0, 0), Core(0, 2)}}, 8192);
  EXPECT_EQ(MakeTlmEngine()->Run(p, MeshWith(100, 0)).tasks[0].end_ps, 85'920);
  EXPECT_EQ(MakeTlmEngine()->Run(p, MeshWith(100, 2)).tasks[0].end_ps, 85'920);
}

arch::Chip WaferWithHbm(const std::string& attach, double hbm_gbps) {
  // A 1x4 wafer of dies of 1x2 cores at 1000 MHz: 160 GB/s links, 1000 ps a hop; the
  // die-to-die link r0c1 <-> r0c2 64 GB/s, 1000 + 5000 ps. One HBM channel at `attach`:
  // hbm_gbps, 100 ns.
  config::Chip c = test::MeshConfig();
  c.set_clock_mhz(1000);
  auto* noc = c.mutable_noc();
  noc->set_topology("wafer");
  noc->set_rows(1);
  noc->set_cols(4);
  noc->set_die_rows(1);
  noc->set_die_cols(2);
  noc->set_d2d_bandwidth_gbps(64);
  noc->set_d2d_latency_ns(5);
  auto* mem = c.mutable_memory(0);
  mem->clear_attach();
  mem->add_attach(attach);
  mem->set_bandwidth_gbps(hbm_gbps);
  mem->set_efficiency(1.0);
  mem->set_latency_ns(100);
  return arch::Chip::Build(c);
}

Program MemoryAccess(int core, uint64_t bytes, bool write) {
  Program p;
  p.num_cores = 4;
  p.num_channels = 1;
  p.ops.push_back(mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "op", "k_split"}, 0, 0, 0});
  Task t;
  t.id = mapping::TaskId(0);
  t.kind = TaskKind::kMemory;
  t.core = mapping::CoreId(core);
  t.channel = 0;
  t.write = write;
  t.bytes = bytes;
  p.tasks.push_back(t);
  return p;
}

TEST(TlmNetwork, MemoryPathWhoseSecondLinkIsSlowestTakesTheMemoryTime) {
  // Core 0 reads 64 KiB (16 packets) from the 100 GB/s HBM at r0c3 over r0c3 -> r0c2
  // (160 GB/s), r0c2 -> r0c1 (die-to-die, 64 GB/s), r0c1 -> r0c0 (160 GB/s):
  // chip.MemoryTime = 100,000 + 65,536 / 64 B/ns + 1000 + 6000 + 1000 = 1,132,000 ps.
  // Before, the message started as late as let the first link finish with the channel,
  // 655,360 - 409,600 ps after the channel's first bytes, and the die-to-die link
  // started as late: 1,377,760 ps.
  const arch::Chip chip = WaferWithHbm("r0c3", 100);
  EXPECT_EQ(chip.MemoryTime(0, 0, 65536, false), 1'132'000);
  EXPECT_EQ(MakeTlmEngine()->Run(MemoryAccess(0, 65536, false), chip).tasks[0].end_ps, 1'132'000);
  // Writing the same bytes back crosses r0c0 -> r0c1 -> r0c2 -> r0c3: the same time.
  EXPECT_EQ(MakeTlmEngine()->Run(MemoryAccess(0, 65536, true), chip).tasks[0].end_ps, 1'132'000);
  // The first link the slowest (HBM at r0c2, core 1 reads over the die-to-die link
  // first), or the channel the slowest (40 GB/s), in either direction, on any core:
  // chip.MemoryTime too, with unbounded or 4-packet router buffers.
  for (uint32_t buffers : {0u, 4u}) {
    for (const auto& [attach, gbps] :
         {std::pair{"r0c2", 100.0}, std::pair{"r0c3", 40.0}, std::pair{"r0c3", 100.0}}) {
      config::Chip c = WaferWithHbm(attach, gbps).config();
      c.mutable_noc()->set_router_buffer_packets(buffers);
      const arch::Chip x = arch::Chip::Build(c);
      for (int core = 0; core < 4; ++core) {
        for (bool write : {false, true}) {
          EXPECT_EQ(MakeTlmEngine()->Run(MemoryAccess(core, 65536, write), x).tasks[0].end_ps,
                    x.MemoryTime(core, 0, 65536, write))
              << attach << " " << gbps << " GB/s, buffers " << buffers << ", core " << core
              << (write ? " write" : " read");
        }
      }
    }
  }
}

TEST(TlmNetwork, RejectsOneSlotOnATorusAndNegativePorts) {
  config::Chip c = test::MeshConfig();
  c.mutable_noc()->set_topology("torus");
  c.mutable_noc()->set_router_buffer_packets(1);
  std::vector<config::Diag> diags;
  arch::ValidateChip(c, {}, "chip", &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "chip.noc.router_buffer_packets") << diags[0].str();
  c.mutable_noc()->set_router_buffer_packets(2);
  diags.clear();
  arch::ValidateChip(c, {}, "chip", &diags);
  EXPECT_TRUE(diags.empty());
  c.mutable_noc()->set_port_bandwidth_gbps(-1);
  arch::ValidateChip(c, {}, "chip", &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "chip.noc.port_bandwidth_gbps") << diags[0].str();
}

}  // namespace
}  // namespace tpsim::sim
