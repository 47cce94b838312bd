// The TLM engine against hand-computed numbers on an 8x8 mesh: 500 MHz (cycle
// 2000 ps), 160 GB/s links (160 bytes/ns, so a byte takes 6.25 ps), 1-cycle
// routers and no wire latency (one hop = 2000 ps), a 64x64 systolic array at
// 0.7 utilisation, one DRAM channel at r0c0: 100 GB/s x 0.8 = 80 GB/s, 50 ns.
// Every test runs the engine in this one process (the SystemC context is reset
// by each Run).
#include "sim/tlm/tlm_engine.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "configs/load.h"
#include "mapping/collective/collective.h"
#include "mapping/cost.h"
#include "mapping/mapping.h"
#include "mapping/placement/placement.h"
#include "sim/analytical/analytical.h"
#include "sim/schedule.h"
#include "sim/step_source.h"
#include "tests/arch/test_util.h"
#include "tests/mapping/mapping_test_util.h"
#include "tests/mapping/program_test_util.h"
#include "tests/sim/test_mesh.h"

namespace tpsim::sim {
namespace {

using Program = mapping::testing::TestProgram;  // hand-built; a mapping::Program where one is needed
using Task = mapping::testing::TestTask;
using mapping::TaskKind;

using test::Core;
using test::Mesh;
using test::MeshConfig;

int LinkBetween(int a, int b) {
  std::vector<int> r = Mesh().Route(a, b);
  EXPECT_EQ(r.size(), 1u);
  return r.empty() ? -1 : r[0];
}

Program NewProgram() {
  Program p;
  p.num_cores = 64;
  p.num_channels = 1;
  p.ops.push_back(mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "op", "k_split"}, 0, 0, 0});
  return p;
}

uint32_t Add(Program& p, Task t) {
  t.id = mapping::TaskId(static_cast<uint32_t>(p.tasks.size()));
  p.tasks.push_back(std::move(t));
  return p.tasks.back().id;
}

uint32_t AddTransfer(Program& p, int src, int dst, uint64_t bytes, std::vector<uint32_t> deps = {},
                     int32_t collective = -1, uint16_t step = 0) {
  Task t;
  t.kind = TaskKind::kTransfer;
  t.core = mapping::CoreId(src);
  t.dst_core = mapping::CoreId(dst);
  t.bytes = bytes;
  t.collective = collective;
  t.coll_step = step;
  t.deps = std::vector<mapping::TaskId>(deps.begin(), deps.end());
  return Add(p, std::move(t));
}

uint32_t AddMemory(Program& p, int core, uint64_t bytes, std::vector<uint32_t> deps = {}) {
  Task t;
  t.kind = TaskKind::kMemory;
  t.core = mapping::CoreId(core);
  t.channel = 0;
  t.bytes = bytes;
  t.deps = std::vector<mapping::TaskId>(deps.begin(), deps.end());
  return Add(p, std::move(t));
}

uint32_t AddGemm(Program& p, int core, uint64_t m, uint64_t n, uint64_t k, std::vector<uint32_t> deps = {}) {
  Task t;
  t.kind = TaskKind::kCompute;
  t.op_kind = llm::OpKind::kGemm;
  t.core = mapping::CoreId(core);
  t.m = m;
  t.n = n;
  t.k = k;
  t.flops = 2.0 * m * n * k;
  t.bytes = 2 * (m * k + k * n + m * n);
  t.deps = std::vector<mapping::TaskId>(deps.begin(), deps.end());
  return Add(p, std::move(t));
}

EngineOutput RunTlm(const mapping::Program& p) { return MakeTlmEngine()->Run(p, Mesh()); }

// Ring all-reduce of S bytes over the 2x2 block r0c0 -> r0c1 -> r1c1 -> r1c0 ->
// r0c0: 2(P-1) steps, each rank sends S/P to its successor once it has received
// the previous step's chunk.
Program RingAllReduce(uint64_t S) {
  const int ring[4] = {Core(0, 0), Core(0, 1), Core(1, 1), Core(1, 0)};
  const uint64_t P = 4;
  Program p = NewProgram();
  p.collectives.push_back(mapping::CollectiveInfo{mapping::CollectiveKind::kAllReduce,
                                                  mapping::AlgorithmOf("ring"), S, 4, mapping::OpId(0)});
  std::vector<int64_t> received(P, -1);
  for (uint16_t step = 0; step < 2 * (P - 1); ++step) {
    std::vector<int64_t> next(P, -1);
    for (uint64_t r = 0; r < P; ++r) {
      std::vector<uint32_t> deps;
      if (received[r] >= 0) deps.push_back(static_cast<uint32_t>(received[r]));
      next[(r + 1) % P] = AddTransfer(p, ring[r], ring[(r + 1) % P], S / P, deps, 0, step);
    }
    received = next;
  }
  return p;
}

TEST(TlmEngine, Name) {
  auto e = MakeTlmEngine();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->name(), "tlm");
}

TEST(TlmEngine, OneTransferTakesChipTransferTime) {
  // r0c0 -> r3c5: XY route of 5 + 3 = 8 hops, 1 MiB in 256 packets of 4 KiB.
  //   8 * 2000 ps + 1,048,576 B * 6.25 ps/B = 16,000 + 6,553,600 = 6,569,600 ps
  Program p = NewProgram();
  AddTransfer(p, Core(0, 0), Core(3, 5), 1 << 20);
  EngineOutput out = RunTlm(p);
  EXPECT_EQ(out.tasks[0].start_ps, 0);
  EXPECT_EQ(out.tasks[0].end_ps, 6'569'600);
  EXPECT_EQ(out.tasks[0].end_ps, Mesh().TransferTime(Core(0, 0), Core(3, 5), 1 << 20));
  EXPECT_EQ(out.makespan_ps, 6'569'600);
  int used = 0;
  for (const LinkUsage& l : out.links) {
    if (l.bytes == 0) continue;
    ++used;
    EXPECT_EQ(l.bytes, 1u << 20);
    EXPECT_EQ(l.busy_ps, 6'553'600);
    EXPECT_EQ(l.max_queue_ps, 0);
  }
  EXPECT_EQ(used, 8);
}

TEST(TlmEngine, UnevenSizesAndPacketsStillTakeTransferTime) {
  // A size that is no multiple of the packet, and a packet size of 1000 bytes:
  // per-packet serialisation telescopes to the message's.
  for (uint64_t bytes : {1ull, 4095ull, 4097ull, 1'000'003ull}) {
    Program p = NewProgram();
    AddTransfer(p, Core(7, 0), Core(2, 6), bytes);
    for (uint64_t packet : {4096ull, 1000ull}) {
      EngineOutput out = MakeTlmEngineWithPacketBytes(packet)->Run(p, Mesh());
      EXPECT_EQ(out.makespan_ps, Mesh().TransferTime(Core(7, 0), Core(2, 6), bytes))
          << bytes << " " << packet;
    }
  }
}

TEST(TlmEngine, SelfAndEmptyTransfersTakeNoTime) {
  Program p = NewProgram();
  AddTransfer(p, Core(2, 2), Core(2, 2), 1 << 20);
  AddTransfer(p, Core(0, 0), Core(5, 5), 0);
  EngineOutput out = RunTlm(p);
  EXPECT_EQ(out.tasks[0].end_ps, 0);
  EXPECT_EQ(out.tasks[1].end_ps, 0);
  for (const LinkUsage& l : out.links) EXPECT_EQ(l.bytes, 0u);
}

TEST(TlmEngine, MessagesMadeReadyAtOneTimeTakeALinkByIdWhetherOrNotACoreDecides) {
  // Transfers 0 (r0c0 -> r0c1) and 1 (r1c0 -> r1c1) of 160,000 B end at 2000 + 1,000,000 =
  // 1,002,000 ps; 2 (after 1) and 3 (after 0) then both want r0c1 -> r0c2: 2, the lower id,
  // first (start 1,002,000, end 1,002,000 + 1,000,000 + 2000 = 2,004,000), 3 when the link is
  // free (start 2,002,000, end 3,004,000). Without compute the network alone decides after
  // those ends (it takes them in the ends' delta cycle: sim/tlm/ends.h); with a GEMM on r2c2
  // made ready at that time too, its core decides in the next delta cycle and so does the
  // network. The same times either way.
  for (bool gemm : {false, true}) {
    Program p = NewProgram();
    const uint32_t a = AddTransfer(p, Core(0, 0), Core(0, 1), 160'000);
    const uint32_t b = AddTransfer(p, Core(1, 0), Core(1, 1), 160'000);
    const uint32_t second = AddTransfer(p, Core(0, 1), Core(0, 2), 160'000, {b});
    const uint32_t third = AddTransfer(p, Core(0, 1), Core(0, 2), 160'000, {a});
    if (gemm) AddGemm(p, Core(2, 2), 64, 64, 64, {a, b});
    EngineOutput out = RunTlm(p);
    EXPECT_EQ(out.tasks[a].end_ps, 1'002'000) << gemm;
    EXPECT_EQ(out.tasks[b].end_ps, 1'002'000) << gemm;
    EXPECT_EQ(out.tasks[second].start_ps, 1'002'000) << gemm;
    EXPECT_EQ(out.tasks[second].end_ps, 2'004'000) << gemm;
    EXPECT_EQ(out.tasks[third].start_ps, 2'002'000) << gemm;
    EXPECT_EQ(out.tasks[third].end_ps, 3'004'000) << gemm;
    if (gemm) {
      EXPECT_EQ(out.tasks[4].start_ps, 1'002'000);
    }
  }
}

TEST(TlmEngine, AMessageMadeReadyByATaskOfNoDurationWaitsForTheDeltaCycleAfterIt) {
  // As above, but transfer 3 follows 0 through a transfer of no time (2, r0c1 to itself): 2
  // ends one delta cycle after 0 and 1, so the network has taken 4 (after 1) by then although
  // 3 has the lower id: 4 from 1,002,000 to 2,004,000, 3 from 2,002,000 to 3,004,000.
  Program p = NewProgram();
  const uint32_t a = AddTransfer(p, Core(0, 0), Core(0, 1), 160'000);
  const uint32_t b = AddTransfer(p, Core(1, 0), Core(1, 1), 160'000);
  const uint32_t self = AddTransfer(p, Core(0, 1), Core(0, 1), 160'000, {a});
  const uint32_t low = AddTransfer(p, Core(0, 1), Core(0, 2), 160'000, {self});
  const uint32_t high = AddTransfer(p, Core(0, 1), Core(0, 2), 160'000, {b});
  EngineOutput out = RunTlm(p);
  EXPECT_EQ(out.tasks[self].end_ps, 1'002'000);
  EXPECT_EQ(out.tasks[high].start_ps, 1'002'000);
  EXPECT_EQ(out.tasks[high].end_ps, 2'004'000);
  EXPECT_EQ(out.tasks[low].start_ps, 2'002'000);
  EXPECT_EQ(out.tasks[low].end_ps, 3'004'000);
}

TEST(TlmEngine, RingAllReduceMatchesClosedForm) {
  // S = 640,000 B, P = 4: 6 steps of 1 hop + 160,000 B:
  //   2(P-1)/P * S/B + 2(P-1) hops = 6/4 * 640,000 B / 160 B/ns + 6 * 2 ns
  //                                = 6,000,000 + 12,000 = 6,012,000 ps
  const uint64_t S = 640'000, P = 4;
  EngineOutput out = RunTlm(RingAllReduce(S));
  const int64_t closed = static_cast<int64_t>(2 * (P - 1) * S / P * 1000 / 160 + 2 * (P - 1) * 2000);
  EXPECT_EQ(closed, 6'012'000);
  EXPECT_NEAR(static_cast<double>(out.makespan_ps), static_cast<double>(closed), 0.02 * closed);
  EXPECT_EQ(out.makespan_ps, closed);  // contention-free: exact
  int used = 0;
  for (const LinkUsage& l : out.links) {
    if (l.bytes == 0) continue;
    ++used;
    EXPECT_EQ(l.bytes, 6 * S / P);
    EXPECT_EQ(l.busy_ps, 6'000'000);
    EXPECT_EQ(l.max_queue_ps, 0);
  }
  EXPECT_EQ(used, 4);
}

TEST(TlmEngine, UnevenAllToAllOnTwoByTwoBlockMatchesClosedForm) {
  // As AnalyticalEngine.UnevenAllToAllOnTwoByTwoBlockByHand: neighbours only, one flow per
  // link, each 1 hop (2000 ps) + bytes / 160 B/ns; the largest, 3->1 640,000 B: 4,002,000 ps.
  const int cores[4] = {Core(0, 0), Core(0, 1), Core(1, 0), Core(1, 1)};
  const std::vector<std::vector<uint64_t>> bytes = {
      {0, 160'000, 480'000, 0}, {320'000, 0, 0, 160'000}, {160'000, 0, 0, 320'000}, {0, 640'000, 160'000, 0}};
  const mapping::Schedule s = mapping::LowerAllToAllV("direct", bytes);
  Program p = NewProgram();
  p.collectives.push_back(mapping::CollectiveInfo{
      mapping::CollectiveKind::kAllToAll, mapping::AlgorithmOf("direct"), 800'000, 4, mapping::OpId(0)});
  for (const mapping::Xfer& x : s.steps.at(0).xfers)
    AddTransfer(p, cores[x.src], cores[x.dst], x.bytes, {}, 0, 0);
  const EngineOutput out = RunTlm(p);
  for (size_t i = 0; i < p.tasks.size(); ++i)
    EXPECT_EQ(out.tasks[i].end_ps, static_cast<int64_t>(2000 + p.tasks[i].bytes * 1000 / 160)) << i;
  EXPECT_EQ(out.makespan_ps, 4'002'000);
}

TEST(TlmEngine, SingleGemmTakesChipGemmTime) {
  // Y[256,256] = X[256,1024] . W[1024,256] on a 64x64 array:
  //   tiles = 4 * 4 = 16, cycles/tile = 1024 + 64 + 64 = 1152
  //   16 * 1152 * 2000 ps / 0.7 = 36,864,000 / 0.7 = 52,662,857.14 -> 52,662,858 ps
  Program p = NewProgram();
  AddGemm(p, Core(4, 4), 256, 256, 1024);
  EngineOutput out = RunTlm(p);
  EXPECT_EQ(out.tasks[0].end_ps, 52'662'858);
  EXPECT_EQ(out.tasks[0].end_ps, Mesh().GemmTime(1, 256, 256, 1024, p.tasks[0].bytes));
}

TEST(TlmEngine, ComputeSerialisesPerCoreAndOverlapsTransfers) {
  // Two GEMMs on core 0 run back to back (52,662,858 ps each); a transfer from
  // core 0 starts at once (1 hop + 160,000 B = 1,002,000 ps); core 1 runs in parallel.
  Program p = NewProgram();
  AddGemm(p, 0, 256, 256, 1024);
  AddGemm(p, 0, 256, 256, 1024);
  AddTransfer(p, 0, 1, 160'000);
  AddGemm(p, 1, 256, 256, 1024, {2});
  EngineOutput out = RunTlm(p);
  EXPECT_EQ(out.tasks[1].start_ps, 52'662'858);
  EXPECT_EQ(out.tasks[1].end_ps, 2 * 52'662'858);
  EXPECT_EQ(out.tasks[2].start_ps, 0);
  EXPECT_EQ(out.tasks[2].end_ps, 1'002'000);
  EXPECT_EQ(out.tasks[3].start_ps, 1'002'000);
  EXPECT_EQ(out.tasks[3].end_ps, 1'002'000 + 52'662'858);
  EXPECT_EQ(out.makespan_ps, 2 * 52'662'858);
}

TEST(TlmEngine, ReadyComputeRunsLowestIdFirst) {
  // Task 1 waits for a transfer; task 2 is ready at 0 and runs first
  // (work-conserving); task 1 follows when the core frees up.
  Program p = NewProgram();
  AddTransfer(p, 1, 0, 160'000);       // 0: ends at 1,002,000
  AddGemm(p, 0, 256, 256, 1024, {0});  // 1
  AddGemm(p, 0, 256, 256, 1024);       // 2
  EngineOutput out = RunTlm(p);
  EXPECT_EQ(out.tasks[2].start_ps, 0);
  EXPECT_EQ(out.tasks[1].start_ps, 52'662'858);
  EXPECT_EQ(out.makespan_ps, 2 * 52'662'858);
}

TEST(TlmEngine, TransfersSharingALinkContend) {
  // t0: r0c0 -> r0c2 (links r0c0->r0c1, r0c1->r0c2), t1: r0c1 -> r0c2; 1 MiB each.
  // Alone: t0 = 2 * 2000 + 6,553,600 = 6,557,600; t1 = 2000 + 6,553,600 = 6,555,600.
  // Together on r0c1->r0c2 (age-based): t1's packets are queued at r0c1 at 0,
  // t0's first head arrives at 2000, so t1 goes first and t0 waits:
  //   t1 = 6,555,600;  t0 = 2 * 6,553,600 + 2000 = 13,109,200
  //   longest wait on r0c1->r0c2 = 6,553,600 - 2000 = 6,551,600 (t0's first packet)
  const uint64_t B = 1 << 20;
  Program alone0 = NewProgram(), alone1 = NewProgram(), both = NewProgram();
  AddTransfer(alone0, Core(0, 0), Core(0, 2), B);
  AddTransfer(alone1, Core(0, 1), Core(0, 2), B);
  AddTransfer(both, Core(0, 0), Core(0, 2), B);
  AddTransfer(both, Core(0, 1), Core(0, 2), B);
  const Ps t0 = RunTlm(alone0).makespan_ps, t1 = RunTlm(alone1).makespan_ps;
  EXPECT_EQ(t0, 6'557'600);
  EXPECT_EQ(t1, 6'555'600);
  EngineOutput out = RunTlm(both);
  EXPECT_GT(out.makespan_ps, std::max(t0, t1));
  EXPECT_EQ(out.tasks[1].end_ps, 6'555'600);
  EXPECT_EQ(out.tasks[0].end_ps, 13'109'200);
  const LinkUsage& shared = out.links[LinkBetween(Core(0, 1), Core(0, 2))];
  EXPECT_EQ(shared.bytes, 2 * B);
  EXPECT_EQ(shared.busy_ps, 2 * 6'553'600);
  EXPECT_EQ(shared.max_queue_ps, 6'551'600);
  const LinkUsage& first = out.links[LinkBetween(Core(0, 0), Core(0, 1))];
  EXPECT_EQ(first.bytes, B);
  EXPECT_EQ(first.max_queue_ps, 0);
}

TEST(TlmEngine, ContentionOnAMiddleLinkConservesBytes) {
  // Four 3-hop transfers along row 0 and a crossing one share r0c2->r0c3: every
  // link carries the bytes of the routes over it, the shared one is busy for
  // all of them, and the last arrival is no earlier than that busy time.
  Program p = NewProgram();
  const uint64_t B = 300'000;
  AddTransfer(p, Core(0, 0), Core(0, 3), B);
  AddTransfer(p, Core(0, 1), Core(0, 4), B);
  AddTransfer(p, Core(0, 2), Core(0, 5), B);
  AddTransfer(p, Core(0, 1), Core(0, 3), B);
  AddTransfer(p, Core(1, 2), Core(0, 3), B);  // XY: r1c2 -> r1c3 -> r0c3, does not share
  EngineOutput out = RunTlm(p);
  std::vector<uint64_t> expect(Mesh().links().size(), 0);
  for (const Task& t : p.tasks) {
    for (int l : Mesh().Route(t.core, t.dst_core)) expect[l] += t.bytes;
  }
  for (size_t l = 0; l < expect.size(); ++l) EXPECT_EQ(out.links[l].bytes, expect[l]) << l;
  const LinkUsage& mid = out.links[LinkBetween(Core(0, 2), Core(0, 3))];
  EXPECT_EQ(mid.bytes, 4 * B);
  EXPECT_EQ(mid.busy_ps, 4 * 1'875'000);  // 300,000 B * 6.25 ps/B each
  EXPECT_GT(mid.max_queue_ps, 0);
  EXPECT_GE(out.makespan_ps, 4 * 1'875'000);
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    EXPECT_GE(out.tasks[i].end_ps, Mesh().TransferTime(p.tasks[i].core, p.tasks[i].dst_core, B)) << i;
  }
  EXPECT_EQ(out.tasks[4].end_ps, Mesh().TransferTime(Core(1, 2), Core(0, 3), B));
}

TEST(TlmEngine, DramRequestsQueueAtTheChannel) {
  // Two reads of 1,000,000 B on channel 0 at time 0: 80 B/ns -> 12,500,000 ps
  // serialisation each, 50,000 ps latency. FIFO, task 0 first:
  //   task 0: 12,500,000 + 50,000 = 12,550,000
  //   task 1: waits 12,500,000 at the channel. Its core r0c1 is one hop from the
  //   attach node r0c0, so the data also crosses that 160 B/ns link (6,250,000 ps):
  //   the message starts at 12,500,000 + 50,000 + (12,500,000 - 6,250,000) = 18,800,000
  //   and ends 6,250,000 + 2,000 (hop) later: 25,052,000 = 25,050,000 + the hop latency.
  Program p = NewProgram();
  AddMemory(p, Core(0, 0), 1'000'000);
  AddMemory(p, Core(0, 1), 1'000'000);
  EngineOutput out = RunTlm(p);
  EXPECT_EQ(out.tasks[0].end_ps, 12'550'000);
  EXPECT_EQ(out.tasks[0].end_ps, Mesh().DramTime(0, 1'000'000));
  EXPECT_EQ(out.tasks[1].end_ps, 25'052'000);
  ASSERT_EQ(out.channels.size(), 1u);
  EXPECT_EQ(out.channels[0].bytes, 2'000'000u);
  EXPECT_EQ(out.channels[0].busy_ps, 25'000'000);
  EXPECT_EQ(out.channels[0].max_queue_ps, 12'500'000);
}

TEST(TlmEngine, MemoryReadAcrossTheMeshTakesMemoryTime) {
  // Core r2c3 reads 1,000,000 B from the channel at r0c0. The data crosses
  // r0c0 -> r0c1 -> r0c2 -> r0c3 -> r1c3 -> r2c3 (XY from the attach node): 5 hops at
  // 160 B/ns (6,250,000 ps) behind a channel at 80 B/ns (12,500,000 ps): the channel
  // decides, so 50,000 + 12,500,000 + 5 x 2,000 = 12,560,000 ps, in both engines.
  Program p = NewProgram();
  AddMemory(p, Core(2, 3), 1'000'000);
  EngineOutput out = RunTlm(p);
  EXPECT_EQ(Mesh().MemoryPath(Core(2, 3), 0, false).size(), 5u);
  EXPECT_EQ(out.tasks[0].end_ps, 12'560'000);
  EXPECT_EQ(out.tasks[0].end_ps, Mesh().MemoryTime(Core(2, 3), 0, 1'000'000, false));
  EXPECT_EQ(AnalyticalEngine().Run(p, Mesh()).tasks[0].end_ps, 12'560'000);
  // Every link of the path carried the bytes.
  for (int l : Mesh().MemoryPath(Core(2, 3), 0, false)) EXPECT_EQ(out.links[l].bytes, 1'000'000u);
}

TEST(TlmEngine, MemoryTrafficContendsWithTransfersOnLinks) {
  // A read by r0c2 from the channel at r0c0 and a transfer r0c0 -> r0c2 both need
  // r0c0 -> r0c1 and r0c1 -> r0c2. The read's data reaches the links from 50,000 ps on
  // (paced by the 80 B/ns channel), while the 4x larger transfer (50,000,000 ps of
  // serialisation) still holds them: together they take longer than alone, and the
  // shared links carry both payloads.
  const uint64_t B = 2'000'000;
  Program read = NewProgram(), xfer = NewProgram(), both = NewProgram();
  AddMemory(read, Core(0, 2), B);
  AddTransfer(xfer, Core(0, 0), Core(0, 2), 4 * B);
  AddMemory(both, Core(0, 2), B);
  AddTransfer(both, Core(0, 0), Core(0, 2), 4 * B);
  const Ps read_alone = RunTlm(read).tasks[0].end_ps;
  const Ps xfer_alone = RunTlm(xfer).tasks[0].end_ps;
  EngineOutput out = RunTlm(both);
  EXPECT_EQ(read_alone, Mesh().MemoryTime(Core(0, 2), 0, B, false));
  EXPECT_EQ(xfer_alone, Mesh().TransferTime(Core(0, 0), Core(0, 2), 4 * B));
  EXPECT_GT(out.tasks[0].end_ps + out.tasks[1].end_ps, read_alone + xfer_alone);
  EXPECT_GE(out.tasks[0].end_ps, read_alone);
  EXPECT_GE(out.tasks[1].end_ps, xfer_alone);
  const int first = Mesh().Route(Core(0, 0), Core(0, 1))[0];
  EXPECT_EQ(out.links[first].bytes, 5 * B);
  // 5 x 2,000,000 B at 160 B/ns.
  EXPECT_EQ(out.links[first].busy_ps, 62'500'000);
}

TEST(TlmEngine, UnsatisfiableDependenciesCannotReachTheEngine) {
  // A dep on a task that does not exist, or a cycle, would stall the simulation; the
  // builder refuses such a Program (mapping::Verify: deps point backwards).
  Program p = NewProgram();
  AddGemm(p, 0, 64, 64, 64);            // 0: runs
  AddTransfer(p, 0, 1, 4096, {0, 17});  // 1: 17 does not exist
  EXPECT_THROW(RunTlm(p), mapping::InvalidProgram);
  p.tasks[1].deps = {mapping::TaskId(0)};
  AddGemm(p, 2, 64, 64, 64, {3});  // 2 and 3: a cycle
  AddGemm(p, 2, 64, 64, 64, {2});
  EXPECT_THROW(RunTlm(p), mapping::InvalidProgram);
  Program ok = NewProgram();
  AddGemm(ok, 0, 256, 256, 1024);
  EXPECT_EQ(RunTlm(ok).makespan_ps, 52'662'858);
}

TEST(TlmEngine, ProgramForALargerChipThrowsInvalidArgument) {
  Program p = NewProgram();
  p.num_cores = 128;
  AddTransfer(p, 0, 64, 100);
  EXPECT_THROW(RunTlm(p), std::invalid_argument);
  Program q = NewProgram();
  q.num_channels = 4;
  AddMemory(q, 0, 100);
  q.tasks[0].channel = 3;
  EXPECT_THROW(RunTlm(q), std::invalid_argument);
}

TEST(TlmEngine, EmptyProgram) {
  EngineOutput out = RunTlm(NewProgram());
  EXPECT_TRUE(out.tasks.empty());
  EXPECT_EQ(out.makespan_ps, 0);
}

Program Mixed() {
  // Compute, contended transfers across the mesh, DRAM traffic, chained.
  Program p = NewProgram();
  for (int c = 0; c < 16; ++c) {
    uint32_t g = AddGemm(p, Core(c / 4, c % 4), 128, 256, 512);
    uint32_t m = AddMemory(p, Core(c / 4, c % 4), 50'000 + 1000 * c, {g});
    AddTransfer(p, Core(c / 4, c % 4), Core(7 - c / 4, 7 - c % 4), 200'000 + 333 * c, {g});
    AddTransfer(p, Core(c / 4, c % 4), Core(c % 4, c / 4), 70'000, {m});
  }
  return p;
}

bool Same(const EngineOutput& a, const EngineOutput& b) {
  if (a.makespan_ps != b.makespan_ps || a.tasks.size() != b.tasks.size() ||
      a.links.size() != b.links.size() || a.channels.size() != b.channels.size()) {
    return false;
  }
  for (size_t i = 0; i < a.tasks.size(); ++i) {
    if (a.tasks[i].start_ps != b.tasks[i].start_ps || a.tasks[i].end_ps != b.tasks[i].end_ps) return false;
  }
  for (size_t i = 0; i < a.links.size(); ++i) {
    const LinkUsage &x = a.links[i], &y = b.links[i];
    if (x.bytes != y.bytes || x.busy_ps != y.busy_ps || x.max_queue_ps != y.max_queue_ps) return false;
  }
  for (size_t i = 0; i < a.channels.size(); ++i) {
    const ChannelUsage &x = a.channels[i], &y = b.channels[i];
    if (x.bytes != y.bytes || x.busy_ps != y.busy_ps || x.max_queue_ps != y.max_queue_ps) return false;
  }
  return true;
}

// Decode steps handed over one by one (Engine::RunSteps, sim/step_source.h) against the same
// run as one Program: a prefill GEMM, then steps of two KV reads whose bytes grow with the
// step (core r0c0 reads its channel directly, r0c1 across a link), a GEMM after each and a
// transfer r0c1 -> r0c0 after both, each step's reads waiting on the step before's transfer.
// The head is the prefill and steps 1 .. 3; steps 4 .. 9 are made from the template.
struct Streamed {
  static constexpr uint32_t kHead = 3, kSteps = 9, kTasks = 5;
  static uint64_t Bytes(uint32_t k, uint32_t read) { return (read == 0 ? 64 : 32) * (100 + uint64_t{k}); }
  // Step k's tasks after `prev` (the task its reads wait on; -1: none, the template).
  static void AddStep(Program& p, uint32_t k, int64_t prev) {
    std::vector<uint32_t> after;
    if (prev >= 0) after.push_back(static_cast<uint32_t>(prev));
    const uint32_t a = AddMemory(p, Core(0, 0), Bytes(k, 0), after);
    const uint32_t b = AddMemory(p, Core(0, 1), Bytes(k, 1), after);
    const uint32_t ga = AddGemm(p, Core(0, 0), 16, 64, 64, {a});
    const uint32_t gb = AddGemm(p, Core(0, 1), 16, 64, 64, {b});
    AddTransfer(p, Core(0, 1), Core(0, 0), 4096, {ga, gb});
  }
  // The prefill and steps 1 .. last.
  static Program Run(uint32_t last) {
    Program p = NewProgram();
    int64_t prev = AddGemm(p, Core(0, 0), 64, 64, 64);
    for (uint32_t k = 1; k <= last; ++k) {
      AddStep(p, k, prev);
      prev = static_cast<int64_t>(p.tasks.size()) - 1;
    }
    return p;
  }
};

// Runs `src` (whose handlers it sets) and compares what the engine hands out and reports with
// `whole`, the same run as one Program (the head's tasks, then `step_tasks` a step): every
// task's times, the steps in order, each step's horizon, the makespan, the critical path and
// the links' and channels' use.
StepsOutput ExpectStreamedIsWhole(StepSource src, const mapping::Program& whole, size_t step_tasks) {
  const EngineOutput want = RunTlm(whole);
  const size_t head = src.head->num_tasks();
  std::vector<TaskTime> got;
  std::vector<uint32_t> order;
  src.on_head = [&](std::span<const TaskTime> t, std::string*) {
    got.assign(t.begin(), t.end());
    return true;
  };
  src.on_step = [&](uint32_t k, std::span<const TaskTime> t, Ps horizon, std::string*) {
    order.push_back(k);
    // No later step's task starts before the horizon.
    for (size_t i = head + (k - src.head_steps) * step_tasks; i < want.tasks.size(); ++i) {
      EXPECT_GE(want.tasks[i].start_ps, horizon) << k << " " << i;
    }
    got.insert(got.end(), t.begin(), t.end());
    return true;
  };
  StepsOutput out;
  std::string why;
  EXPECT_TRUE(MakeTlmEngine()->RunSteps(src, Mesh(), &out, &why)) << why;
  std::vector<uint32_t> steps;
  for (uint32_t k = src.head_steps + 1; k <= src.steps; ++k) steps.push_back(k);
  EXPECT_EQ(order, steps);
  EXPECT_EQ(got.size(), want.tasks.size());
  for (size_t i = 0; i < got.size() && i < want.tasks.size(); ++i) {
    EXPECT_EQ(got[i].start_ps, want.tasks[i].start_ps) << i;
    EXPECT_EQ(got[i].end_ps, want.tasks[i].end_ps) << i;
  }
  EXPECT_EQ(out.makespan_ps, want.makespan_ps);
  const CriticalPathSplit path = CriticalPath(whole, want.tasks);
  EXPECT_EQ(out.path.compute_ps, path.compute_ps);
  EXPECT_EQ(out.path.communication_ps, path.communication_ps);
  EXPECT_EQ(out.path.memory_ps, path.memory_ps);
  EngineOutput use = want;
  use.links = out.links;
  use.channels = out.channels;
  EXPECT_TRUE(Same(use, want));
  return out;
}

TEST(TlmEngine, StepsHandedOverOneByOneAreTheWholeRun) {
  const mapping::Program whole = Streamed::Run(Streamed::kSteps), head = Streamed::Run(Streamed::kHead);
  Program tp = NewProgram();
  Streamed::AddStep(tp, 4, -1);
  const mapping::Program step = tp;
  for (const bool broken : {false, true}) {
    StepSource src;
    src.head = &head;
    src.head_begin = {0, 1, 6, 11, 16};
    src.step = &step;
    src.head_steps = Streamed::kHead;
    src.steps = Streamed::kSteps;
    src.ext_begin = {0, 1, 2, 2, 2, 2};
    src.ext = {{1, 4}, {1, 4}};
    // Broken: the transfer does not list the second read of the next step as its dependent,
    // which then never starts: the run stalls and says where.
    src.ext_dep_begin = {0, 0, 0, 0, 0, broken ? 1u : 2u};
    src.ext_dep = {{1, 0}, {1, 1}};
    src.context = {1, 1, 0, 0, 0};
    src.at = [](uint32_t k, std::span<Ps>, std::span<uint64_t> bytes) {
      bytes[0] = Streamed::Bytes(k, 0);
      bytes[1] = Streamed::Bytes(k, 1);
    };
    if (!broken) {
      const StepsOutput out = ExpectStreamedIsWhole(src, whole, Streamed::kTasks);
      EXPECT_GT(out.path.memory_ps, 0);
      EXPECT_GT(out.path.communication_ps, 0);
      // The channel's bytes over the run: the steps' own.
      uint64_t read = 0;
      for (uint32_t k = 1; k <= Streamed::kSteps; ++k) read += Streamed::Bytes(k, 0) + Streamed::Bytes(k, 1);
      ASSERT_EQ(out.channels.size(), 1u);
      EXPECT_EQ(out.channels[0].bytes, read);
      continue;
    }
    src.on_head = [](std::span<const TaskTime>, std::string*) { return true; };
    src.on_step = [](uint32_t, std::span<const TaskTime>, Ps, std::string*) { return true; };
    StepsOutput out;
    std::string why;
    try {
      MakeTlmEngine()->RunSteps(src, Mesh(), &out, &why);
      ADD_FAILURE() << "a step that never starts did not stall the run";
    } catch (const StallError& e) {
      // Step 4's second read (id 16 + 1) and what waits on it.
      EXPECT_NE(std::string(e.what()).find("tlm: simulation stalled at"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("of 46 tasks not done"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("task 17 memory op 0 (op) waits on"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("task 20 transfer op 0 (op) waits on 19"), std::string::npos)
          << e.what();
    }
  }
}

// Steps whose first task takes no time and waits only on the step before's: every step is made
// at once, far more than the ring's first 4 slots hold, so the ring doubles (RunState::Grow) with
// the steps in it; their GEMMs then queue on one core, one step after the other.
TEST(TlmEngine, StepsInFlightGrowTheRing) {
  constexpr uint32_t kHead = 3, kSteps = 40;
  auto run = [](uint32_t last) {
    Program p = NewProgram();
    uint32_t prev = AddGemm(p, Core(0, 1), 64, 64, 64);
    for (uint32_t k = 1; k <= last; ++k) {
      prev = AddTransfer(p, Core(0, 0), Core(0, 0), 0, {prev});
      AddGemm(p, Core(0, 1), 64, 64, 64, {prev});
    }
    return p;
  };
  const mapping::Program whole = run(kSteps), head = run(kHead);
  Program tp = NewProgram();
  const uint32_t t = AddTransfer(tp, Core(0, 0), Core(0, 0), 0);
  AddGemm(tp, Core(0, 1), 64, 64, 64, {t});
  const mapping::Program step = tp;
  StepSource src;
  src.head = &head;
  src.head_begin = {0, 1, 3, 5, 7};
  src.step = &step;
  src.head_steps = kHead;
  src.steps = kSteps;
  src.ext_begin = {0, 1, 1};
  src.ext = {{1, 0}};
  src.ext_dep_begin = {0, 1, 1};
  src.ext_dep = {{1, 0}};
  src.context = {0, 0};
  src.at = [](uint32_t, std::span<Ps>, std::span<uint64_t>) {};
  const StepsOutput out = ExpectStreamedIsWhole(src, whole, 2);
  EXPECT_EQ(out.path.compute_ps, out.makespan_ps);  // the GEMMs one after the other
}

TEST(TlmEngine, DeterministicAcrossRuns) {
  Program p = Mixed();
  EngineOutput a = RunTlm(p);
  EngineOutput b = MakeTlmEngine()->Run(p, Mesh());
  auto engine = MakeTlmEngine();
  EngineOutput c = engine->Run(p, Mesh());
  EngineOutput d = engine->Run(p, Mesh());
  EXPECT_TRUE(Same(a, b));
  EXPECT_TRUE(Same(a, c));
  EXPECT_TRUE(Same(a, d));
  EXPECT_GT(a.makespan_ps, 0);
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    for (uint32_t dep : p.tasks[i].deps) EXPECT_GE(a.tasks[i].start_ps, a.tasks[dep].end_ps);
  }
}

// Contention-free cases: TLM and analytical agree within 2% (here exactly).
void ExpectAgreement(const Program& p) {
  EngineOutput tlm = RunTlm(p);
  EngineOutput ana = MakeAnalyticalEngine()->Run(p, Mesh());
  EXPECT_NEAR(static_cast<double>(tlm.makespan_ps), static_cast<double>(ana.makespan_ps),
              0.02 * static_cast<double>(ana.makespan_ps));
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(tlm.tasks[i].end_ps), static_cast<double>(ana.tasks[i].end_ps),
                0.02 * static_cast<double>(ana.tasks[i].end_ps))
        << i;
  }
}

TEST(TlmEngine, AgreesWithAnalyticalOnOneTransfer) {
  Program p = NewProgram();
  AddTransfer(p, Core(0, 0), Core(7, 7), 1'600'000);
  ExpectAgreement(p);
}

TEST(TlmEngine, AgreesWithAnalyticalOnRingAllReduce) { ExpectAgreement(RingAllReduce(4 << 20)); }

TEST(TlmEngine, AgreesWithAnalyticalOnSingleGemm) {
  Program p = NewProgram();
  AddGemm(p, Core(3, 4), 256, 640, 2560);
  ExpectAgreement(p);
}

TEST(TlmEngine, AgreesWithAnalyticalOnAChainAcrossKinds) {
  Program p = NewProgram();
  uint32_t g = AddGemm(p, Core(0, 0), 256, 640, 2560);
  uint32_t m = AddMemory(p, Core(0, 0), 1'000'000, {g});
  uint32_t t = AddTransfer(p, Core(0, 0), Core(5, 3), 500'000, {m});
  AddGemm(p, Core(5, 3), 256, 640, 2560, {t});
  ExpectAgreement(p);
}

TEST(TlmEngine, AgreesWithAnalyticalOnNvlsAllReduce) {
  // 64 MiB all_reduce over the 8 GPUs of h200-sxm-8 through the switch (nvls),
  // contention-free. Chunk 8,388,608 B; the switch port of each GPU sends 7 chunks
  // per step at 480 GB/s. TLM serialises them: ceil(8,388,608,000 / 480) =
  // 17,476,267 ps each, 7 x = 122,333,869 ps, + 600,000 ps latency (250 ns
  // GPU -> switch, 250 + 100 ns switch -> GPU), two steps: 245,867,738 ps.
  const arch::Chip chip = arch::testing::LoadChip("h200-sxm-8");
  const mapping::Program p =
      mapping::CollectiveProgram(chip, "nvls", mapping::CollectiveKind::kAllReduce, 8, uint64_t{64} << 20, 2);
  ASSERT_EQ(mapping::ToString(p.collectives[0].algorithm), "nvls");
  EngineOutput tlm = MakeTlmEngine()->Run(p, chip);
  EngineOutput ana = MakeAnalyticalEngine()->Run(p, chip);
  EXPECT_EQ(tlm.makespan_ps, 245'867'738);
  EXPECT_NEAR(static_cast<double>(tlm.makespan_ps), static_cast<double>(ana.makespan_ps),
              0.02 * static_cast<double>(ana.makespan_ps));
  // The links carry nothing: the switch engine moved the data.
  for (const LinkUsage& u : tlm.links) EXPECT_EQ(u.bytes, 0u);
}

TEST(TlmEngine, GpuLayerIsASumOfKernelsOnBothEngines) {
  // A 2-layer decode-and-prefill of the small model on h100-sxm-8. At TP 1 every kernel runs
  // in series on one GPU (no collective, no memory task), so the makespan is the sum of the
  // kernels' durations, and eager mode adds exactly one launch (6.7 us) per kernel. At TP 2
  // (NCCL kernels, all ranks of a group starting together) both engines agree exactly.
  const arch::Chip chip = arch::testing::LoadChip("h100-sxm-8");
  const config::Model model = mapping::testing::SmallModel();
  const config::Workload wl = mapping::testing::Work(16, 1, 2);
  config::Mapping graphs = mapping::testing::Map(1, "megatron"), eager = graphs;
  eager.set_enforce_eager(true);
  const mapping::Program g = mapping::Lower(chip, model, wl, graphs);
  const mapping::Program e = mapping::Lower(chip, model, wl, eager);
  Ps sum = 0;
  int64_t kernels = 0;
  for (size_t i = 0; i < g.num_tasks(); ++i) {
    ASSERT_EQ(g.kind(i), TaskKind::kCompute);
    sum += mapping::TaskTime(chip, g, i);
    ++kernels;
  }
  for (const mapping::Program* p : {&g, &e}) {
    const Ps want = sum + (p == &e ? kernels * 6'700'000 : 0);
    EXPECT_EQ(MakeAnalyticalEngine()->Run(*p, chip).makespan_ps, want);
    EXPECT_EQ(MakeTlmEngine()->Run(*p, chip).makespan_ps, want);
  }
  const mapping::Program tp2 = mapping::Lower(chip, model, wl, mapping::testing::Map(2, "megatron"));
  EXPECT_EQ(MakeTlmEngine()->Run(tp2, chip).makespan_ps, MakeAnalyticalEngine()->Run(tp2, chip).makespan_ps);
}

// One 16 MiB all-reduce over 16 ranks placed on the 2 x 8 band of rows 0-1 of
// wafer-8x8 by `placement`, timed by the TLM engine.
Ps PlacedAllReduce(const std::string& algorithm, const std::string& placement) {
  const arch::Chip chip = arch::testing::LoadChip("wafer-8x8");
  mapping::PlacementRequest req;
  req.name = placement;
  req.ranks = 16;
  req.region = mapping::Region{0, 0, 2, 8};
  const std::vector<int> cores = mapping::Place(req, chip);
  Program p = Program::Of(mapping::CollectiveProgram(chip, algorithm, mapping::CollectiveKind::kAllReduce, 16,
                                                     uint64_t{16} << 20, 2));
  for (Task& t : p.tasks) {
    t.core = mapping::CoreId(cores[t.core]);
    if (t.kind == TaskKind::kTransfer) t.dst_core = mapping::CoreId(cores[t.dst_core]);
  }
  for (int& c : p.collectives[0].members) c = cores[c];
  return MakeTlmEngine()->Run(p, chip).makespan_ps;
}

TEST(TlmEngine, RingPlacementBeatsLinearOnceTheRingRunsBothWays) {
  // `ring` placement walks the band as a cycle (row 0 east, row 1 west), so every
  // ring step moves between neighbours and each directed link carries one message.
  // `linear` (row-major) puts ranks 7 -> 8 and 15 -> 0 at opposite ends of the
  // rows. With a one-way ring their XY routes run west along the rows on links no
  // other message of the step uses: only hop latency, so the two placements are
  // within 1%. With a bidirectional ring the other direction's neighbour messages
  // (i -> i-1, also westbound in row 0) share those links with 7 -> 8: two
  // messages on a link, so the step takes about twice as long and `linear` loses
  // by more than 1.5x.
  const double ring_ring = static_cast<double>(PlacedAllReduce("ring", "ring"));
  const double ring_linear = static_cast<double>(PlacedAllReduce("ring", "linear"));
  EXPECT_NEAR(ring_linear / ring_ring, 1.0, 0.01);
  const Ps bidir_ring = PlacedAllReduce("bidirectional_ring", "ring");
  const Ps bidir_linear = PlacedAllReduce("bidirectional_ring", "linear");
  EXPECT_GT(static_cast<double>(bidir_linear), 1.5 * static_cast<double>(bidir_ring));
  // And the bidirectional ring on `ring` placement is the fastest of the four.
  EXPECT_LT(static_cast<double>(bidir_ring), ring_ring);
}

TEST(TlmEngine, Mn2dSubGroupGatherTransfersTakeTheAnalyticalTime) {
  // The lowered grid -> grid_rows gather before the MLP norm of an mn_2d layer on a 2 x 2
  // rank grid (ranks on r0c0..r0c3; grid rows {r0c0, r0c1} and {r0c2, r0c3}), 80 tokens of
  // SmallModel (hidden 64), bf16: one collective of 2 groups of 2 ranks, each rank sending
  // its (80 / 2) x (64 / 2) x 2 B = 2560 B block to its neighbour over its own link, as in
  // AnalyticalEngine.Mn2dRowGroupAllGatherOfTheLoweredLayerByHand: 1 hop (2000 ps) +
  // 2560 B / 160 B/ns (16,000 ps) = 18,000 ps each, the two groups concurrently.
  config::Mapping m = mapping::testing::Map(4, "mn_2d");
  m.set_grid_rows(2);
  const mapping::Program p =
      mapping::Lower(Mesh(), mapping::testing::SmallModel(), mapping::testing::Work(80, 0, 1), m);
  int32_t coll = -1;
  for (size_t c = 0; c < p.collectives.size(); ++c)
    if (p.ops[p.collectives[c].op].ref.op == "mlp_norm.all_gather") coll = static_cast<int32_t>(c);
  ASSERT_GE(coll, 0);
  ASSERT_EQ(p.collectives[coll].groups, 2);
  const EngineOutput out = RunTlm(p);
  int xfers = 0;
  Ps first = -1, last = 0;
  for (const mapping::Task& t : p.tasks()) {
    if (t.kind != TaskKind::kTransfer || t.collective != coll) continue;
    ++xfers;
    EXPECT_EQ(out.tasks[t.id].end_ps - out.tasks[t.id].start_ps, 18'000) << t.core << "->" << t.dst_core;
    first = first < 0 ? out.tasks[t.id].start_ps : std::min(first, out.tasks[t.id].start_ps);
    last = std::max(last, out.tasks[t.id].end_ps);
  }
  EXPECT_EQ(xfers, 4);
  EXPECT_LT(last - first, 2 * 18'000);  // the groups overlap
}

// Same-time ties go by the lowest task id (sim/schedule.h's queue rule), whichever SystemC
// process made the tasks ready. Two GEMMs of 52,662,858 ps (D) end at D on cores `a` and `b`;
// each makes one of two later tasks ready. Each test runs both ways round, so that in one of
// them the process that runs first makes the higher id ready.
constexpr Ps kGemm = 52'662'858;  // 256 x 256 x 1024 on the mesh (SingleGemmTakesChipGemmTime)

TEST(TlmEngine, SameTimeDramRequestsAreServedLowestIdFirst) {
  // Reads of 1,000,000 B on channel 0 (12,500,000 ps of bytes at 80 B/ns, 50,000 ps latency),
  // ready at D: task 2 by r0c0 (under the channel), task 3 by r0c1 (one 160 B/ns hop away:
  // 2,000 ps more, the channel being slower than the link). Task 2 first:
  //   task 2: [D, D + 12,550,000]
  //   task 3: the channel takes it when task 2's bytes are out, at D + 12,500,000 (its start),
  //           and it ends 12,552,000 later (DramRequestsQueueAtTheChannel).
  // Then the same with the two cores swapped (task 2 from r0c1 first).
  for (const bool swap_deps : {false, true}) {
    for (const bool swap_cores : {false, true}) {
      Program p = NewProgram();
      AddGemm(p, Core(1, 1), 256, 256, 1024);
      AddGemm(p, Core(2, 2), 256, 256, 1024);
      const int c2 = swap_cores ? Core(0, 1) : Core(0, 0), c3 = swap_cores ? Core(0, 0) : Core(0, 1);
      AddMemory(p, c2, 1'000'000, {swap_deps ? 0u : 1u});
      AddMemory(p, c3, 1'000'000, {swap_deps ? 1u : 0u});
      const EngineOutput out = RunTlm(p);
      SCOPED_TRACE(testing::Message() << "swap_deps " << swap_deps << " swap_cores " << swap_cores);
      EXPECT_EQ(out.tasks[0].end_ps, kGemm);
      EXPECT_EQ(out.tasks[1].end_ps, kGemm);
      EXPECT_EQ(out.tasks[2].start_ps, kGemm);
      EXPECT_EQ(out.tasks[2].end_ps, kGemm + (swap_cores ? 12'552'000 : 12'550'000));
      EXPECT_EQ(out.tasks[3].start_ps, kGemm + 12'500'000);
      EXPECT_EQ(out.tasks[3].end_ps, kGemm + 12'500'000 + (swap_cores ? 12'550'000 : 12'552'000));
      EXPECT_EQ(out.channels[0].max_queue_ps, 12'500'000);
      // The analytical engine's times, task by task.
      const EngineOutput ana = MakeAnalyticalEngine()->Run(p, Mesh());
      for (size_t i = 0; i < p.tasks.size(); ++i) {
        EXPECT_EQ(out.tasks[i].start_ps, ana.tasks[i].start_ps) << i;
        EXPECT_EQ(out.tasks[i].end_ps, ana.tasks[i].end_ps) << i;
      }
    }
  }
}

TEST(TlmEngine, SameTimeReadyComputeRunsLowestIdFirst) {
  // Tasks 2 and 3 run on the core of task 0 or of task 1 (`on`); one of them is made ready at
  // D by that core's own GEMM, the other by the other core's. Task 2 runs first: [D, 2D], then
  // task 3: [2D, 3D].
  for (const int on : {0, 1}) {
    for (const bool swap_deps : {false, true}) {
      Program p = NewProgram();
      AddGemm(p, Core(0, 0), 256, 256, 1024);
      AddGemm(p, Core(0, 1), 256, 256, 1024);
      const int core = on == 0 ? Core(0, 0) : Core(0, 1);
      AddGemm(p, core, 256, 256, 1024, {swap_deps ? 0u : 1u});
      AddGemm(p, core, 256, 256, 1024, {swap_deps ? 1u : 0u});
      const EngineOutput out = RunTlm(p);
      SCOPED_TRACE(testing::Message() << "on " << on << " swap_deps " << swap_deps);
      EXPECT_EQ(out.tasks[2].start_ps, kGemm);
      EXPECT_EQ(out.tasks[2].end_ps, 2 * kGemm);
      EXPECT_EQ(out.tasks[3].start_ps, 2 * kGemm);
      EXPECT_EQ(out.tasks[3].end_ps, 3 * kGemm);
    }
  }
}

TEST(TlmEngine, SameTimePacketsTakeALinkLowestIdFirst) {
  // Link r0c1 -> r0c2 at T = 2,000 + 4 x 25,600 = 104,400 ps: packet 4 (4,096 B, 25,600 ps)
  // of X (r0c0 -> r0c2, 1 MiB, issued at 0) has its head there, the link free since its
  // packet 3 left; W (r0c1 -> r0c2, 8,192 B: 51,200 ps) is issued then, when Y (r1c1 ->
  // r1c2, 4 x 4,096 B: 2,000 + 102,400) ends. The lower id takes the link first:
  //   W before X (W's id lower): W takes it at T and ends at T + 51,200 + 2,000
  //   X before W: W takes it at T + 25,600, after X's packet 4, and ends 53,200 later.
  // Either way X's packets 5 on wait for W's 51,200 ps: X ends at 6,557,600 (alone:
  // TransfersSharingALinkContend) + 51,200 = 6,608,800.
  const Ps T = 104'400;
  for (const bool w_first : {true, false}) {
    Program p = NewProgram();
    uint32_t x = 0;
    if (!w_first) x = AddTransfer(p, Core(0, 0), Core(0, 2), 1 << 20);
    const uint32_t y = AddTransfer(p, Core(1, 1), Core(1, 2), 4 * 4096);
    const uint32_t w = AddTransfer(p, Core(0, 1), Core(0, 2), 2 * 4096, {y});
    if (w_first) x = AddTransfer(p, Core(0, 0), Core(0, 2), 1 << 20);
    const EngineOutput out = RunTlm(p);
    SCOPED_TRACE(testing::Message() << "w_first " << w_first);
    EXPECT_EQ(out.tasks[y].end_ps, T);
    EXPECT_EQ(out.tasks[w].start_ps, w_first ? T : T + 25'600);
    EXPECT_EQ(out.tasks[w].end_ps, out.tasks[w].start_ps + 53'200);
    EXPECT_EQ(out.tasks[x].end_ps, 6'608'800);
  }
}

TEST(TlmEngine, MemoryTasksAndTransfersStartWhenTheirQueueTakesThem) {
  // A task's start is when its queue takes it (sim/schedule.h), as in the analytical engine:
  // the second of two reads issued together at 0 on core r0c0 starts when the channel has
  // sent the first one's 12,500,000 ps of bytes; the second of two 1 MiB transfers r0c0 ->
  // r0c1 when their first link has sent the first one's (6,553,600 ps); both end as before.
  Program p = NewProgram();
  AddMemory(p, Core(0, 0), 1'000'000);
  AddMemory(p, Core(0, 0), 1'000'000);
  AddTransfer(p, Core(0, 0), Core(0, 1), 1 << 20);
  AddTransfer(p, Core(0, 0), Core(0, 1), 1 << 20);
  const EngineOutput out = RunTlm(p);
  EXPECT_EQ(out.tasks[0].start_ps, 0);
  EXPECT_EQ(out.tasks[0].end_ps, 12'550'000);
  EXPECT_EQ(out.tasks[1].start_ps, 12'500'000);
  EXPECT_EQ(out.tasks[1].end_ps, 25'050'000);
  EXPECT_EQ(out.tasks[2].start_ps, 0);
  EXPECT_EQ(out.tasks[2].end_ps, 6'555'600);
  EXPECT_EQ(out.tasks[3].start_ps, 6'553'600);
  EXPECT_EQ(out.tasks[3].end_ps, 2 * 6'553'600 + 2'000);
  const EngineOutput ana = MakeAnalyticalEngine()->Run(p, Mesh());
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    EXPECT_EQ(out.tasks[i].start_ps, ana.tasks[i].start_ps) << i;
    EXPECT_EQ(out.tasks[i].end_ps, ana.tasks[i].end_ps) << i;
  }
}

}  // namespace
}  // namespace tpsim::sim
