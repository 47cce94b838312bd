// The analytical engine against hand-computed numbers on an 8x8 mesh:
// 500 MHz (cycle 2000 ps), 160 GB/s links (160 bytes/ns), 1-cycle routers and
// no wire latency (one hop = 2000 ps), 64x64 systolic array at 0.7 utilisation,
// one DRAM channel at r0c0: 100 GB/s x 0.8 efficiency = 80 GB/s, 50 ns latency.
#include "sim/analytical/analytical.h"

#include <gtest/gtest.h>

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <string>

#include "configs/load.h"
#include "mapping/collective/collective.h"
#include "mapping/cost.h"
#include "mapping/mapping.h"
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

Program NewProgram() {
  Program p;
  p.num_cores = 64;
  p.num_channels = 1;
  p.ops.push_back(mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "op", "k_split"}, 0, 0, 0});
  return p;
}

uint32_t AddTransfer(Program& p, int src, int dst, uint64_t bytes, int32_t collective, uint16_t step,
                     std::vector<uint32_t> deps = {}) {
  Task t;
  t.id = mapping::TaskId(static_cast<uint32_t>(p.tasks.size()));
  t.kind = TaskKind::kTransfer;
  t.core = mapping::CoreId(src);
  t.dst_core = mapping::CoreId(dst);
  t.bytes = bytes;
  t.collective = collective;
  t.coll_step = step;
  t.deps = std::vector<mapping::TaskId>(deps.begin(), deps.end());
  p.tasks.push_back(std::move(t));
  return p.tasks.back().id;
}

uint32_t AddMemory(Program& p, int core, int channel, uint64_t bytes, std::vector<uint32_t> deps = {}) {
  Task t;
  t.id = mapping::TaskId(static_cast<uint32_t>(p.tasks.size()));
  t.kind = TaskKind::kMemory;
  t.core = mapping::CoreId(core);
  t.channel = channel;
  t.bytes = bytes;
  t.deps = std::vector<mapping::TaskId>(deps.begin(), deps.end());
  p.tasks.push_back(std::move(t));
  return p.tasks.back().id;
}

uint32_t AddGemm(Program& p, int core, uint64_t m, uint64_t n, uint64_t k, std::vector<uint32_t> deps = {}) {
  Task t;
  t.id = mapping::TaskId(static_cast<uint32_t>(p.tasks.size()));
  t.kind = TaskKind::kCompute;
  t.op_kind = llm::OpKind::kGemm;
  t.core = mapping::CoreId(core);
  t.m = m;
  t.n = n;
  t.k = k;
  t.flops = 2.0 * m * n * k;
  t.bytes = 2 * (m * k + k * n + m * n);
  t.deps = std::vector<mapping::TaskId>(deps.begin(), deps.end());
  p.tasks.push_back(std::move(t));
  return p.tasks.back().id;
}

TEST(AnalyticalEngine, Name) {
  auto engine = MakeAnalyticalEngine();
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->name(), "analytical");
}

TEST(AnalyticalEngine, OneGemmOnOneCore) {
  // Y[256,640] = X[256,2560] . W[2560,640] on a 64x64 array:
  //   tiles       = ceil(256/64) * ceil(640/64) = 4 * 10 = 40
  //   cycles/tile = k + R + C = 2560 + 64 + 64  = 2688
  //   cycles      = 40 * 2688 / 0.7 = 107520 / 0.7 = 153600
  //   time        = 153600 * 2000 ps = 307,200,000 ps
  Program p = NewProgram();
  AddGemm(p, Core(3, 4), 256, 640, 2560);
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  ASSERT_EQ(out.tasks.size(), 1u);
  EXPECT_EQ(out.tasks[0].start_ps, 0);
  EXPECT_EQ(out.tasks[0].end_ps, 307'200'000);
  EXPECT_EQ(out.makespan_ps, 307'200'000);
}

TEST(AnalyticalEngine, ComputeTasksOnOneCoreSerialise) {
  // Two independent GEMMs on the same core run one after the other; on another
  // core they overlap. Each: 4 * 10 tiles, (2560 + 128) cycles, as above.
  Program p = NewProgram();
  AddGemm(p, 0, 256, 640, 2560);
  AddGemm(p, 0, 256, 640, 2560);
  AddGemm(p, 1, 256, 640, 2560);
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.tasks[1].start_ps, 307'200'000);
  EXPECT_EQ(out.tasks[1].end_ps, 2 * 307'200'000);
  EXPECT_EQ(out.tasks[2].start_ps, 0);
  EXPECT_EQ(out.makespan_ps, 614'400'000);
}

TEST(AnalyticalEngine, TransferOverlapsCompute) {
  // A transfer sourced at a busy core starts at once (own DMA engine):
  // 1 hop (2000 ps) + 160,000 B / 160 B/ns (1,000,000 ps).
  Program p = NewProgram();
  AddGemm(p, 0, 256, 640, 2560);
  AddTransfer(p, 0, 1, 160'000, -1, 0);
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.tasks[1].start_ps, 0);
  EXPECT_EQ(out.tasks[1].end_ps, 1'002'000);
}

TEST(AnalyticalEngine, RingAllReduceOnTwoByTwoBlock) {
  // Ring all-reduce of S = 640,000 bytes over P = 4 cores in ring order
  // r0c0 -> r0c1 -> r1c1 -> r1c0 -> r0c0 (every step one hop, distinct links).
  // 2(P-1) = 6 steps (3 reduce-scatter, 3 all-gather), each rank sends a chunk
  // S/P = 160,000 bytes to its successor once it has received the previous step.
  //   per step  = 1 hop (2000 ps) + 160,000 / 160 ns (1,000,000 ps) = 1,002,000 ps
  //   total     = 6 * 1,002,000 = 6,012,000 ps
  //             = 2(P-1)/P * S/B + 2(P-1) hops = 6/4 * 640,000/160 ns + 6 * 2 ns
  //             = 6000 ns + 12 ns.
  const int ring[4] = {Core(0, 0), Core(0, 1), Core(1, 1), Core(1, 0)};
  const uint64_t S = 640'000, P = 4;
  Program p = NewProgram();
  p.collectives.push_back(mapping::CollectiveInfo{mapping::CollectiveKind::kAllReduce,
                                                  mapping::AlgorithmOf("ring"), S, 4, mapping::OpId(0)});
  std::vector<int64_t> received(P, -1);  // last transfer into rank r
  for (uint16_t step = 0; step < 2 * (P - 1); ++step) {
    std::vector<int64_t> next(P, -1);
    for (uint64_t r = 0; r < P; ++r) {
      std::vector<uint32_t> deps;
      if (received[r] >= 0) deps.push_back(static_cast<uint32_t>(received[r]));
      next[(r + 1) % P] = AddTransfer(p, ring[r], ring[(r + 1) % P], S / P, 0, step, deps);
    }
    received = next;
  }
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.makespan_ps, 6'012'000);
  EXPECT_EQ(out.makespan_ps, static_cast<int64_t>(2 * (P - 1) * S / P * 1000 / 160 + 2 * (P - 1) * 2000));
  // Each of the 4 ring links carries 6 chunks and is busy 6 * 1,000,000 ps, with no sharing.
  const auto& links = Mesh().links();
  int used = 0;
  for (size_t l = 0; l < links.size(); ++l) {
    if (out.links[l].bytes == 0) continue;
    ++used;
    EXPECT_EQ(out.links[l].bytes, 6 * S / P) << links[l].name();
    EXPECT_EQ(out.links[l].busy_ps, 6'000'000) << links[l].name();
    EXPECT_EQ(out.links[l].max_queue_ps, 0) << links[l].name();
  }
  EXPECT_EQ(used, 4);
}

// The uneven all_to_all of MoE dispatch (mapping::LowerAllToAllV, direct) on a 2x2 block:
// ranks 0..3 on r0c0, r0c1, r1c0, r1c1; only neighbours exchange (the diagonal pairs send
// nothing), so each of the 8 directed links carries one flow and nothing is shared. One
// step: every transfer starts at 0 and takes 1 hop (2000 ps) + bytes / 160 B/ns.
//   0->1 160,000 B: 1,002,000   1->0 320,000: 2,002,000   0->2 480,000: 3,002,000
//   2->0 160,000:   1,002,000   1->3 160,000: 1,002,000   3->1 640,000: 4,002,000
//   2->3 320,000:   2,002,000   3->2 160,000: 1,002,000   makespan 4,002,000
mapping::Schedule TwoByTwoAllToAllV(std::vector<std::vector<uint64_t>>* bytes) {
  *bytes = {
      {0, 160'000, 480'000, 0}, {320'000, 0, 0, 160'000}, {160'000, 0, 0, 320'000}, {0, 640'000, 160'000, 0}};
  return mapping::LowerAllToAllV("direct", *bytes);
}

TEST(AnalyticalEngine, UnevenAllToAllOnTwoByTwoBlockByHand) {
  const int cores[4] = {Core(0, 0), Core(0, 1), Core(1, 0), Core(1, 1)};
  std::vector<std::vector<uint64_t>> bytes;
  const mapping::Schedule s = TwoByTwoAllToAllV(&bytes);
  ASSERT_EQ(s.steps.size(), 1u);
  ASSERT_EQ(s.steps[0].xfers.size(), 8u);
  Program p = NewProgram();
  p.collectives.push_back(mapping::CollectiveInfo{
      mapping::CollectiveKind::kAllToAll, mapping::AlgorithmOf("direct"), 800'000, 4, mapping::OpId(0)});
  for (const mapping::Xfer& x : s.steps[0].xfers) AddTransfer(p, cores[x.src], cores[x.dst], x.bytes, 0, 0);
  const EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  for (size_t i = 0; i < p.tasks.size(); ++i)
    EXPECT_EQ(out.tasks[i].end_ps, static_cast<int64_t>(2000 + p.tasks[i].bytes * 1000 / 160)) << i;
  EXPECT_EQ(out.makespan_ps, 4'002'000);
  int used = 0;
  for (const auto& l : out.links) {
    if (l.bytes == 0) continue;
    ++used;
    EXPECT_EQ(l.max_queue_ps, 0);
  }
  EXPECT_EQ(used, 8);
}

TEST(AnalyticalEngine, Mn2dRowGroupAllGatherOfTheLoweredLayerByHand) {
  // The lowering's grid -> grid_rows gather before the MLP norm: mn_2d on a 2x2 rank grid,
  // linear placement (ranks 0..3 on r0c0..r0c3; grid rows {r0c0, r0c1} and {r0c2, r0c3}),
  // SmallModel (hidden 64), prefill of 80 tokens, bf16. Each grid row is a 2-rank ring
  // all-gather of one step in which each rank sends its block (80/2) x (64/2) x 2 B =
  // 2560 B to its neighbour; the 4 transfers use 4 distinct links, so nothing is shared:
  //   each = 1 hop (2000 ps) + 2560 B / 160 B/ns (16,000 ps) = 18,000 ps
  //        = alpha + (gc - 1)/gc * (t/gr x h x 2 B) / B with gc = gr = 2.
  // Over all 4 ranks (the gather of the whole 80 x 64 tensor before this change) the ring
  // would take 3 steps of 2560 B chunks, one over the 3-hop wrap r0c3 -> r0c0.
  const config::Workload wl = mapping::testing::Work(80, 0, 1);
  config::Mapping m = mapping::testing::Map(4, "mn_2d");
  m.set_grid_rows(2);
  const mapping::Program p = mapping::Lower(Mesh(), mapping::testing::SmallModel(), wl, m);
  int32_t coll = -1;
  for (size_t c = 0; c < p.collectives.size(); ++c)
    if (p.ops[p.collectives[c].op].ref.op == "mlp_norm.all_gather") coll = static_cast<int32_t>(c);
  ASSERT_GE(coll, 0);
  EXPECT_EQ(p.collectives[coll].groups, 2);
  EXPECT_EQ(p.collectives[coll].ranks, 2);
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  int xfers = 0;
  for (const mapping::Task& t : p.tasks()) {
    if (t.kind != TaskKind::kTransfer || t.collective != coll) continue;
    ++xfers;
    EXPECT_EQ(t.bytes, 2560u);
    EXPECT_EQ(Mesh().Hops(t.core, t.dst_core), 1);
    EXPECT_EQ(t.core / 2, t.dst_core / 2);  // within a grid row
    EXPECT_EQ(out.tasks[t.id].end_ps - out.tasks[t.id].start_ps, 18'000) << t.core << "->" << t.dst_core;
  }
  EXPECT_EQ(xfers, 4);
}

// Op `op` of `p` alone: its tasks (ids renumbered, deps on other ops' tasks dropped) and
// its collectives, as if its inputs were ready at time 0.
Program OneOp(const mapping::Program& p, uint32_t op) {
  Program q;
  q.num_cores = p.num_cores;
  q.num_channels = p.num_channels;
  q.ops = {p.ops[op]};
  std::vector<int32_t> coll(p.collectives.size(), -1);
  std::vector<int64_t> id(p.num_tasks(), -1);
  for (const mapping::testing::TaskView& t : mapping::testing::TaskViews(p)) {
    if (t.op != op) continue;
    Task u;
    static_cast<mapping::Task&>(u) = t;
    u.id = mapping::TaskId(static_cast<uint32_t>(q.tasks.size()));
    u.op = mapping::OpId(0);
    u.func = -1;
    for (uint32_t d : t.deps)
      if (id[d] >= 0) u.deps.push_back(mapping::TaskId(static_cast<uint32_t>(id[d])));
    if (t.collective >= 0) {
      if (coll[t.collective] < 0) {
        coll[t.collective] = static_cast<int32_t>(q.collectives.size());
        q.collectives.push_back(p.collectives[t.collective]);
        q.collectives.back().op = mapping::OpId(0);
      }
      u.collective = coll[t.collective];
    }
    id[t.id] = u.id;
    q.tasks.push_back(std::move(u));
  }
  return q;
}

TEST(AnalyticalEngine, Mn2dKStepsGemmOverlapsTheRotationByHand) {
  // gate_proj of SmallModel (k = hidden 64, n = intermediate 128) lowered with mn_2d on a
  // 2x2 rank grid and mapping.mn_2d_weights = k_steps, prefill of 80 tokens, bf16; ranks
  // 0..3 on r0c0, r0c1, r1c0, r1c1 (placement file), so each grid column ({r0c0, r1c0},
  // {r0c1, r1c1}) is one hop and the 4 rotate transfers use 4 distinct links. Rank (i, j):
  //   compute 1 (own K-block):  m = 80/2 = 40, k = 64/2 = 32, n = 128/2 = 64: 1 tile,
  //     c = ceil((32 + 64 + 64) cycles x 2000 ps / 0.7) = ceil(457,142.86) = 457,143 ps
  //   rotate (1 step): its block 32 x 64 x 2 B = 4096 B to the other rank of its column,
  //     x = 1 hop (2000 ps) + 4096 B / 160 B/ns (25,600 ps) = 27,600 ps, from time 0 (the
  //     weights are resident): it overlaps compute 1
  //   compute 2 (arrived K-block, accumulating) starts at max(c, x) = 457,143
  //   total = max(c, x) + c = 914,286 ps.
  // With 1 GB/s links the transfer dominates: x = 2000 + 4096 B / 1 B/ns = 4,098,000 ps,
  // total = x + c = 4,555,143 ps.
  const std::string path = ::testing::TempDir() + "/tpsim_ksteps_placement.txt";
  {
    std::ofstream out(path);
    out << Core(0, 0) << " " << Core(0, 1) << " " << Core(1, 0) << " " << Core(1, 1) << "\n";
  }
  config::Mapping m = mapping::testing::Map(4, "mn_2d", "ring", "file");
  m.set_placement_file(path);
  m.set_grid_rows(2);
  m.set_mn_2d_weights("k_steps");
  config::Chip slow_cfg = MeshConfig();
  slow_cfg.mutable_noc()->set_link_bandwidth_gbps(1);
  const arch::Chip slow = arch::Chip::Build(slow_cfg);
  struct Case {
    const arch::Chip* chip;
    int64_t x, total;
  };
  const int64_t c = 457'143;
  for (const Case& k : {Case{&Mesh(), 27'600, 914'286}, Case{&slow, 4'098'000, 4'555'143}}) {
    SCOPED_TRACE(k.x);
    const mapping::Program full =
        mapping::Lower(*k.chip, mapping::testing::SmallModel(), mapping::testing::Work(80, 0, 1), m);
    uint32_t gate = 0;
    while (gate < full.ops.size() && full.ops[gate].ref.op != "gate_proj") ++gate;
    ASSERT_LT(gate, full.ops.size());
    EXPECT_EQ(full.ops[gate].ref.Label(), "mn_2d(2x2, k_steps)");
    const Program p = OneOp(full, gate);
    EngineOutput out = AnalyticalEngine().Run(p, *k.chip);
    std::map<int, std::vector<uint32_t>> computes;  // per core, in task order
    int xfers = 0;
    for (const Task& t : p.tasks) {
      if (t.kind == TaskKind::kCompute) computes[t.core].push_back(t.id);
      if (t.kind != TaskKind::kTransfer) continue;
      ++xfers;
      EXPECT_EQ(t.bytes, 4096u);
      EXPECT_EQ(k.chip->Hops(t.core, t.dst_core), 1);
      EXPECT_EQ(out.tasks[t.id].start_ps, 0);
      EXPECT_EQ(out.tasks[t.id].end_ps, k.x);
    }
    EXPECT_EQ(xfers, 4);
    ASSERT_EQ(computes.size(), 4u);
    for (const auto& [core, ids] : computes) {
      ASSERT_EQ(ids.size(), 2u) << core;
      EXPECT_EQ(out.tasks[ids[0]].start_ps, 0) << core;
      EXPECT_EQ(out.tasks[ids[0]].end_ps, c) << core;
      EXPECT_EQ(out.tasks[ids[1]].start_ps, std::max(c, k.x)) << core;
      EXPECT_EQ(out.tasks[ids[1]].end_ps, k.total) << core;
    }
    EXPECT_EQ(out.makespan_ps, k.total);
  }
  std::remove(path.c_str());
}

TEST(AnalyticalEngine, TransferAcrossTheMeshDiagonal) {
  // r0c0 -> r7c7: XY route of 7 + 7 = 14 hops.
  //   14 * 2000 ps + 1,600,000 B / 160 B/ns = 28,000 + 10,000,000 = 10,028,000 ps
  Program p = NewProgram();
  AddTransfer(p, Core(0, 0), Core(7, 7), 1'600'000, -1, 0);
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(Mesh().Hops(Core(0, 0), Core(7, 7)), 14);
  EXPECT_EQ(out.makespan_ps, 10'028'000);
  int used = 0;
  for (const auto& l : out.links) used += l.bytes > 0 ? 1 : 0;
  EXPECT_EQ(used, 14);
}

TEST(AnalyticalEngine, TransfersSharingALinkQueueThereInStartOrder) {
  // t0: r0c0 -> r0c2 (links a = r0c0->r0c1, b = r0c1->r0c2), t1: r0c1 -> r0c2 (link b),
  // 160,000 B each at 160 B/ns (1,000,000 ps on a link), 2,000 ps per hop, both ready at 0
  // (sim/analytical/links.h). The schedule starts t0 first (lower id), then t1:
  //   t0: a from 0, free at 1,000,000; b from its arrival 2,000, free at 1,002,000;
  //       end = max(1,000,000 + 4,000, 1,002,000 + 2,000) = 1,004,000 (its unloaded time)
  //   t1: b from 0, but b is t0's until 1,002,000 (a wait of 1,002,000); free at
  //       2,002,000; end 2,002,000 + 2,000 = 2,004,000.
  Program p = NewProgram();
  p.collectives.push_back(mapping::CollectiveInfo{
      mapping::CollectiveKind::kAllGather, mapping::AlgorithmOf("direct"), 160'000, 3, mapping::OpId(0)});
  AddTransfer(p, Core(0, 0), Core(0, 2), 160'000, 0, 0);
  AddTransfer(p, Core(0, 1), Core(0, 2), 160'000, 0, 0);
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.tasks[0].end_ps, 1'004'000);
  EXPECT_EQ(out.tasks[1].start_ps, 0);
  EXPECT_EQ(out.tasks[1].end_ps, 2'004'000);
  // The shared link carried both payloads, busy 2 * 1,000,000 ps; t1 waited 1,002,000 ps there.
  const int shared = Mesh().Route(Core(0, 1), Core(0, 2)).at(0);
  EXPECT_EQ(out.links[shared].bytes, 320'000u);
  EXPECT_EQ(out.links[shared].busy_ps, 2'000'000);
  EXPECT_EQ(out.links[shared].max_queue_ps, 1'002'000);
  EXPECT_GT(out.contention, 0.0);

  // Steps and collectives do not matter, only time: in another step or outside any
  // collective they still queue ...
  p.tasks[1].coll_step = 1;
  p.tasks[1].collective = -1;
  out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.tasks[0].end_ps, 1'004'000);
  EXPECT_EQ(out.tasks[1].end_ps, 2'004'000);
  // ... and once t1 waits for t0 the link is free again: each takes its unloaded time.
  p.tasks[1].deps = {mapping::TaskId(0)};
  out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.tasks[0].end_ps, 1'004'000);
  EXPECT_EQ(out.tasks[1].start_ps, 1'004'000);
  EXPECT_EQ(out.tasks[1].end_ps, 1'004'000 + 1'002'000);
}

TEST(AnalyticalEngine, LinksQueueAfterTwoAndAHalfHours) {
  // The transfers of TransfersSharingALinkQueueThereInStartOrder after a DRAM read of 864 TB
  // (80 B/ns: 3 hours). The links' calendars count in 1/1024 ps: in 64 bits they ended at
  // 2^53 ps (2.5 hours), and every flow after that ended "past the 2^63 ps clock".
  Program p = NewProgram();
  p.collectives.push_back(mapping::CollectiveInfo{
      mapping::CollectiveKind::kAllGather, mapping::AlgorithmOf("direct"), 160'000, 3, mapping::OpId(0)});
  AddMemory(p, 0, 0, 864'000'000'000'000);
  AddTransfer(p, Core(0, 0), Core(0, 2), 160'000, 0, 0, {0});
  AddTransfer(p, Core(0, 1), Core(0, 2), 160'000, 0, 0, {0});
  const EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  const Ps read_end = out.tasks[0].end_ps;
  ASSERT_GT(read_end, Ps{1} << 53);
  EXPECT_EQ(out.tasks[1].start_ps, read_end);
  EXPECT_EQ(out.tasks[1].end_ps, read_end + 1'004'000);
  EXPECT_EQ(out.tasks[2].end_ps, read_end + 2'004'000);
  const int shared = Mesh().Route(Core(0, 1), Core(0, 2)).at(0);
  EXPECT_EQ(out.links[shared].max_queue_ps, 1'002'000);

  // Once more after another 3 hours (past a second origin of the calendars): the same times
  // after the second read's end.
  AddMemory(p, 0, 0, 864'000'000'000'000, {2});
  AddTransfer(p, Core(0, 0), Core(0, 2), 160'000, 0, 0, {3});
  AddTransfer(p, Core(0, 1), Core(0, 2), 160'000, 0, 0, {3});
  const EngineOutput twice = AnalyticalEngine().Run(p, Mesh());
  const Ps read2_end = twice.tasks[3].end_ps;
  ASSERT_EQ(read2_end, twice.tasks[2].end_ps + (read_end - out.tasks[0].start_ps));
  EXPECT_EQ(twice.tasks[4].end_ps, read2_end + 1'004'000);
  EXPECT_EQ(twice.tasks[5].end_ps, read2_end + 2'004'000);
}

TEST(LinkReservation, RestoreGoesBackToTheSavedQueues) {
  // One link of 10 GB/s, no hop latency: a flow of 1,000 B holds it 100 ns (100,000 ps). The
  // replay of decode steps (sim/step_stream.cc) saves the queues at a cut and restores them
  // when it goes back: the flows reserved after Save are forgotten, those before kept.
  LinkModel m{FlowSet({10.0}, {0}), {}, {}};
  const int link = 0;
  const uint32_t kind = m.flows.AddKind(1000, 0, &link, 1);
  LinkReservation r(m, 0);
  EXPECT_EQ(r.FinishKind(m.flows, kind, 0, 100'000, 0), 100'000);
  LinkReservation::State saved;
  r.Save(&saved);
  // Queued behind the first: starts at 50 ns, waits 50 ns, ends at 200 ns.
  EXPECT_EQ(r.FinishKind(m.flows, kind, 50'000, 100'000, 50'000), 200'000);
  EXPECT_EQ(r.max_wait()[0], 50'000);
  r.Restore(saved);
  EXPECT_EQ(r.max_wait()[0], 0);
  // The same flow again finds the same queue; one at 150 ns would have waited for the second.
  EXPECT_EQ(r.FinishKind(m.flows, kind, 150'000, 100'000, 50'000), 250'000);
  r.Restore(saved);
  EXPECT_EQ(r.FinishKind(m.flows, kind, 50'000, 100'000, 50'000), 200'000);

  // In 128 bits (a flow 3 hours ahead widens the calendars) the same.
  const Ps hours = Ps{3} * 3600 * 1'000'000'000'000;
  EXPECT_EQ(r.FinishKind(m.flows, kind, hours, 100'000, 50'000), hours + 100'000);
  r.Save(&saved);
  EXPECT_EQ(r.FinishKind(m.flows, kind, hours, 100'000, 50'000), hours + 200'000);
  r.Restore(saved);
  EXPECT_EQ(r.FinishKind(m.flows, kind, hours + 50'000, 100'000, 50'000), hours + 200'000);
  r.Restore(saved);
  EXPECT_EQ(r.FinishKind(m.flows, kind, hours + 100'000, 100'000, 50'000), hours + 200'000);
}

TEST(AnalyticalEngine, MemoryFlowQueuedHoursAhead) {
  // Two DRAM reads of 864 TB (80 B/ns: 3 hours each) by core r0c2, whose data cross two links
  // from the channel at r0c0, both ready at 0: the second queues for the channel behind the
  // first and starts 3 hours after the schedule's time, so its flow enters the links more
  // than 2.5 hours (2^53 ps, what 64 bits of 1/1024 ps hold) after the calendars' origin.
  // Alone on the links, each ends its unloaded time after its start, the second at twice the
  // first's (no time passes the 2^63 ps clock).
  Program p = NewProgram();
  AddMemory(p, Core(0, 2), 0, 864'000'000'000'000);
  AddMemory(p, Core(0, 2), 0, 864'000'000'000'000);
  const EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  const Ps alone = out.tasks[0].end_ps;
  ASSERT_GT(alone, Ps{1} << 53);
  EXPECT_EQ(out.tasks[0].start_ps, 0);
  EXPECT_EQ(out.tasks[1].start_ps, Ps{10'800'000'000'000'000});  // the first's 864e12 B at 80 B/ns
  EXPECT_EQ(out.tasks[1].end_ps - out.tasks[1].start_ps, alone);
}

TEST(AnalyticalEngine, DramReadSharedByTwoCores) {
  // Channel 0 (80 B/ns effective, 50 ns) read by cores 0 and 1, 80,000 B each, both at 0:
  //   alone:  core 0: 50,000 + 80,000 / 80 ns (1,000,000) = 1,050,000 ps; core 1 (r0c1)
  //           one hop from the attach node r0c0: + 2,000 ps of hop latency (its
  //           160 B/ns link outpaces the channel, so only the latency shows).
  //   queued (sim/schedule.h): the channel serves core 0's request first (lower id), which
  //           holds it for 1,000,000 ps; core 1's starts then, overlapping core 0's
  //           latency: 1,000,000 .. 1,000,000 + 1,052,000 = 2,052,000.
  Program p = NewProgram();
  AddMemory(p, 0, 0, 80'000);
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.tasks[0].end_ps, 1'050'000);

  AddMemory(p, 1, 0, 80'000);
  out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.tasks[0].end_ps, 1'050'000);
  EXPECT_EQ(out.tasks[1].start_ps, 1'000'000);
  EXPECT_EQ(out.tasks[1].end_ps, 2'052'000);
  EXPECT_EQ(out.channels[0].bytes, 160'000u);
  // Core 1's data crossed r0c0 -> r0c1: 80,000 B at 160 B/ns = 500,000 ps busy.
  EXPECT_EQ(out.links[Mesh().Route(0, 1)[0]].bytes, 80'000u);
  EXPECT_EQ(out.links[Mesh().Route(0, 1)[0]].busy_ps, 500'000);
  EXPECT_EQ(out.channels[0].busy_ps, 2'000'000);       // 2 x 1,000,000 unshared serialisation
  EXPECT_EQ(out.channels[0].max_queue_ps, 1'000'000);  // core 1's read waited 1,000,000 ps

  // A second read by core 0 that waits for both: the channel is free, so it takes its
  // unloaded time.
  AddMemory(p, 0, 0, 80'000, {0, 1});
  out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.tasks[2].start_ps, 2'052'000);
  EXPECT_EQ(out.tasks[2].end_ps, 2'052'000 + 1'050'000);
}

TEST(AnalyticalEngine, OneCoresDramReadsQueueButOverlapComputeAndTransfers) {
  // Core 0 issues two 80,000 B reads with no deps (prefetches), a GEMM and a
  // transfer. The reads queue on the channel (1,050,000 ps each: 50,000 latency +
  // 1,000,000 holding the channel), the second from when the first's bytes have left
  // it (1,000,000); the GEMM and the transfer start at 0 beside them.
  Program p = NewProgram();
  AddMemory(p, 0, 0, 80'000);
  AddMemory(p, 0, 0, 80'000);
  AddGemm(p, 0, 256, 640, 2560);
  AddTransfer(p, 0, 1, 160'000, -1, 0);
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.tasks[0].end_ps, 1'050'000);
  EXPECT_EQ(out.tasks[1].start_ps, 1'000'000);
  EXPECT_EQ(out.tasks[1].end_ps, 2'050'000);
  EXPECT_EQ(out.tasks[2].start_ps, 0);
  EXPECT_EQ(out.tasks[3].start_ps, 0);
  EXPECT_EQ(out.tasks[3].end_ps, 1'002'000);
}

TEST(AnalyticalEngine, DepsChainAcrossKinds) {
  // DRAM read (1,050,000) -> GEMM (307,200,000) -> transfer of 160,000 B over one hop (1,002,000).
  Program p = NewProgram();
  AddMemory(p, 0, 0, 80'000);
  AddGemm(p, 0, 256, 640, 2560, {0});
  AddTransfer(p, 0, 1, 160'000, -1, 0, {1});
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.tasks[1].start_ps, 1'050'000);
  EXPECT_EQ(out.tasks[2].start_ps, 1'050'000 + 307'200'000);
  EXPECT_EQ(out.makespan_ps, 1'050'000 + 307'200'000 + 1'002'000);
}

// The Program's own contract (deps, cores, channels) is the builder's (mapping::Verify,
// tests/mapping/program_test.cc); the engine checks that a valid Program fits the chip.
TEST(AnalyticalEngine, ProgramForALargerChipThrowsInsteadOfCrashing) {
  Program p = NewProgram();
  p.num_cores = 128;
  AddTransfer(p, 0, 64, 100, -1, 0);
  EXPECT_THROW(AnalyticalEngine().Run(p, Mesh()), mapping::InvalidProgram);
  p.tasks[0].dst_core = mapping::CoreId(1);
  EXPECT_EQ(AnalyticalEngine().Run(p, Mesh()).tasks.size(), 1u);  // fits: only cores 0, 1 used
  Program q = NewProgram();
  q.num_channels = 4;
  AddMemory(q, 0, 3, 100);
  EXPECT_THROW(AnalyticalEngine().Run(q, Mesh()), mapping::InvalidProgram);
}

TEST(AnalyticalEngine, HugePayloadsSaturateInsteadOfOverflowing) {
  // 2^63 bytes shared by two transfers (4 * 2^63 equivalent bytes overflows uint64),
  // then a dependent DRAM read shared by two cores: every time saturates at the
  // largest Ps rather than wrapping.
  constexpr Ps kMax = std::numeric_limits<Ps>::max();
  Program p = NewProgram();
  p.collectives.push_back(mapping::CollectiveInfo{mapping::CollectiveKind::kAllGather,
                                                  mapping::AlgorithmOf("direct"), uint64_t{1} << 63, 3,
                                                  mapping::OpId(0)});
  AddTransfer(p, Core(0, 0), Core(0, 2), uint64_t{1} << 63, 0, 0);
  AddTransfer(p, Core(0, 1), Core(0, 2), uint64_t{1} << 63, 0, 0);
  AddMemory(p, 0, 0, uint64_t{1} << 63, {0});
  AddMemory(p, 1, 0, uint64_t{1} << 63);
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.tasks[0].end_ps, kMax);
  EXPECT_EQ(out.tasks[2].end_ps, kMax);
  EXPECT_EQ(out.makespan_ps, kMax);
}

TEST(AnalyticalEngine, EmptyProgram) {
  Program p = NewProgram();
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  EXPECT_EQ(out.makespan_ps, 0);
  EXPECT_TRUE(out.tasks.empty());
  EXPECT_EQ(out.links.size(), Mesh().links().size());
}

TEST(AnalyticalEngine, HbmReadsCrossTheMeshAndShareItsLinks) {
  // mesh-4x4-hbm: hbm_west0 (channel 0) hangs off r1c0: 819.2 x 0.85 = 696.32 B/ns,
  // 100 ns; mesh links 256 B/ns, 2,500 ps per hop. Cores r0c1 (1) and r1c1 (5) each
  // read 1 MiB (1,048,576 B). Paths from r1c0: r1c0->r1c1->r0c1 and r1c0->r1c1, so
  // link r1c0->r1c1 carries two flows.
  //   channel: first come first served (sim/schedule.h): core 1's read (lower id) from 0,
  //            holding it for ceil(1 MiB / 696.32 B/ns) = 1,505,883 ps; core 5's from then.
  //   alone:   core 1 100,000 + 5,000 + 4,096,000 (1 MiB at 256 B/ns, slower than the
  //            channel) = 4,201,000; core 5 100,000 + 2,500 + 4,096,000 = 4,198,500.
  //   links (sim/analytical/links.h): each read enters its path 100,000 ps (the channel's
  //            latency; the channel outpaces the link) after it starts. Core 1's holds
  //            r1c0->r1c1 from 100,000 to 4,196,000 and ends as alone; core 5's arrives there
  //            at 1,505,883 + 100,000 = 1,605,883, waits until 4,196,000 (2,590,117 ps),
  //            holds it until 8,292,000 and ends one hop later: 8,294,500.
  const arch::Chip chip = arch::testing::LoadChip("mesh-4x4-hbm");
  ASSERT_EQ(chip.ChannelOf(1), 0);
  ASSERT_EQ(chip.ChannelOf(5), 0);
  Program p = NewProgram();
  p.num_cores = 16;
  AddMemory(p, 1, 0, 1 << 20);
  EngineOutput out = AnalyticalEngine().Run(p, chip);
  EXPECT_EQ(out.tasks[0].end_ps, 100'000 + 5'000 + 4'096'000);
  AddMemory(p, 5, 0, 1 << 20);
  out = AnalyticalEngine().Run(p, chip);
  EXPECT_EQ(out.tasks[0].end_ps, 4'201'000);
  EXPECT_EQ(out.tasks[1].start_ps, 1'505'883);
  EXPECT_EQ(out.tasks[1].end_ps, 8'294'500);
  // The shared link carried both reads; core 5's waited there.
  const int shared = chip.Route(chip.FindNode("r1c0"), chip.FindNode("r1c1"))[0];
  EXPECT_EQ(out.links[shared].bytes, 2u << 20);
  EXPECT_EQ(out.links[shared].max_queue_ps, 2'590'117);
}

TEST(AnalyticalEngine, QueuedReadReservesItsLinksAtItsStartNotWhenQueued) {
  // mesh-4x4-hbm as above (channel 0 at r1c0: 696.32 B/ns, 100 ns; links 256 B/ns, 2,500 ps a
  // hop). Link L = r1c0->r1c1.
  //   r0 (id 0): core r1c0 (4) reads 1 MiB, ready at 0: holds the channel until 1,505,883 and
  //              crosses no link.
  //   r1 (id 1): core r1c1 (5) reads 1 MiB, ready at 0: queued behind r0, starts at 1,505,883;
  //              its data cross L from 1,505,883 + 100,000 = 1,605,883, held 4,096,000 ps.
  //   t0 (id 2): r0c0 -> r1c0, 256,000 B, ready at 0: 1,000,000 ps on r0c0->r1c0 + 2,500 =
  //              ends at 1,002,500.
  //   t  (id 3): r1c0 -> r1c1 (L), 256,000 B, after t0: starts at 1,002,500, which is after r1
  //              was queued (0) and before r1 starts (1,505,883).
  // Links are reserved in start order (sim/analytical/links.h): t first, alone on L, in its
  // unloaded time 2,500 + 1,000,000: L is t's over [1,002,500, 2,002,500) and t ends at
  // 2,005,000. r1 arrives on L at 1,605,883, waits there until 2,002,500 (396,617 ps), holds
  // it until 6,098,500 and ends one hop later, 6,101,000. Before, r1 reserved L when
  // it was queued (at 0), so t found L taken over [1,605,883, 5,701,883), too soon to fit its
  // 1,000,000 ps before, and waited until 5,701,883: t ended at 6,704,383 (r1 at 5,704,383).
  const arch::Chip chip = arch::testing::LoadChip("mesh-4x4-hbm");
  ASSERT_EQ(chip.ChannelOf(4), 0);
  ASSERT_EQ(chip.ChannelOf(5), 0);
  Program p = NewProgram();
  p.num_cores = 16;
  AddMemory(p, 4, 0, 1 << 20);
  AddMemory(p, 5, 0, 1 << 20);
  AddTransfer(p, 0, 4, 256'000, -1, 0);
  AddTransfer(p, 4, 5, 256'000, -1, 0, {2});
  const EngineOutput out = AnalyticalEngine().Run(p, chip);
  EXPECT_EQ(out.tasks[1].start_ps, 1'505'883);
  EXPECT_EQ(out.tasks[2].end_ps, 1'002'500);
  EXPECT_EQ(out.tasks[3].start_ps, 1'002'500);
  EXPECT_EQ(out.tasks[3].end_ps, 2'005'000);
  EXPECT_EQ(out.tasks[1].end_ps, 6'101'000);
  EXPECT_EQ(out.makespan_ps, 6'101'000);
  const int l = chip.Route(chip.FindNode("r1c0"), chip.FindNode("r1c1"))[0];
  EXPECT_EQ(out.links[l].max_queue_ps, 396'617);
}

TEST(AnalyticalEngine, MemoryReadWhoseLaterLinkIsSlowestTakesMemoryTime) {
  // A 1x4 wafer of two 1x2 dies: mesh links 160 B/ns, the die-to-die link r0c2->r0c1 64 B/ns
  // (+5 ns), routers 1 ns; an HBM channel at r0c3, 100 B/ns, 100 ns. Core r0c0 reads 2 MiB
  // (2,097,152 B) over r0c3->r0c2 (160), r0c2->r0c1 (64), r0c1->r0c0 (160): unloaded it takes
  // Chip::MemoryTime, 100 ns + 2,097,152 / 64 ns (the narrowest link, slower than the channel)
  // + 1 + 6 + 1 ns of hops = 32,876,000 ps. Before, every hop entered the path as late as kept
  // the FIRST link from outrunning the channel (2,097,152 / 100 - 2,097,152 / 160 = 7,864.32 ns
  // late), so the 64 B/ns link started late too: 40,740,320 ps.
  config::Chip cfg;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"(name: "wafer-1x4-hbm" clock_mhz: 1000
         core { systolic_rows: 32 systolic_cols: 32 systolic_arrays: 1 mac_dtype: "bf16"
                matrix_utilization: 1.0 vector_lanes: 32 sram_bytes: 1073741824 }
         noc { topology: "wafer" rows: 1 cols: 4 die_rows: 1 die_cols: 2 link_bandwidth_gbps: 160
               router_latency_cycles: 1 link_latency_ns: 0 d2d_bandwidth_gbps: 64 d2d_latency_ns: 5 }
         memory { name: "hbm" kind: "hbm" attach: ["r0c3"] bandwidth_gbps: 100 efficiency: 1.0
                  latency_ns: 100 capacity_bytes: 4294967296 })",
      &cfg));
  const arch::Chip chip = arch::Chip::Build(cfg);
  const int core = chip.FindNode("r0c0");
  ASSERT_EQ(chip.ChannelOf(core), 0);
  ASSERT_EQ(chip.MemoryTime(core, 0, 2'097'152, false), 32'876'000);
  Program p = NewProgram();
  p.num_cores = 4;
  AddMemory(p, core, 0, 2'097'152);
  const EngineOutput out = AnalyticalEngine().Run(p, chip);
  EXPECT_EQ(out.tasks[0].end_ps - out.tasks[0].start_ps, 32'876'000);
  // The channel slower than every link (links 400 B/ns): the links still finish as it
  // delivers the last byte, 100 ns + 20,971.52 ns + 8 ns = 21,079,520 ps, as before.
  cfg.mutable_noc()->set_link_bandwidth_gbps(400);
  cfg.mutable_noc()->set_d2d_bandwidth_gbps(400);
  const arch::Chip fast = arch::Chip::Build(cfg);
  EXPECT_EQ(fast.MemoryTime(core, 0, 2'097'152, false), 21'079'520);
  EXPECT_EQ(AnalyticalEngine().Run(p, fast).tasks[0].end_ps, 21'079'520);
}

TEST(AnalyticalEngine, NvlsAgainstRingAllReduceOnH200ByHand) {
  // 64 MiB (67,108,864 B) all_reduce over the 8 GPUs of h200-sxm-8, bf16.
  // Route GPU -> switch -> GPU: 250 ns + (250 + 100) ns = 600,000 ps of latency.
  // Chunk = 67,108,864 / 8 = 8,388,608 B.
  const arch::Chip chip = arch::testing::LoadChip("h200-sxm-8");
  const uint64_t bytes = uint64_t{64} << 20;
  const auto kAr = mapping::CollectiveKind::kAllReduce;
  auto run = [&](const std::string& algo) {
    return MakeAnalyticalEngine()->Run(mapping::CollectiveProgram(chip, algo, kAr, 8, bytes, 2), chip);
  };
  // ring: 2 (P-1) = 14 steps, each rank sends one chunk to its successor over its
  // own two links (no sharing): ceil(8,388,608,000 / 450) = 18,641,352 ps + 600,000
  // = 19,241,352 ps per step; 14 x = 269,378,928 ps (busbw = 1.75 x 64 MiB / that
  // = 436 GB/s).
  EXPECT_EQ(run("ring").makespan_ps, 269'378'928);
  // nvls: 2 steps; in each, a GPU's switch port carries 7 chunks = 58,720,256 B at
  // 480 GB/s: ceil(58,720,256,000 / 480) = 122,333,867 ps + 600,000 = 122,933,867;
  // 2 x = 245,867,734 ps (busbw = 1.75 x 64 MiB / that = 477.6 GB/s).
  EXPECT_EQ(run("nvls").makespan_ps, 245'867'734);
  // auto picks nvls here (64 MiB >= 1 MiB, 8 >= 4 ranks): the same time.
  mapping::Program autop = mapping::CollectiveProgram(chip, "auto", kAr, 8, bytes, 2);
  EXPECT_EQ(mapping::ToString(autop.collectives[0].algorithm), "nvls");
  EXPECT_EQ(autop.ops[0].ref.Label(), "nvls");
  EXPECT_EQ(MakeAnalyticalEngine()->Run(autop, chip).makespan_ps, 245'867'734);
  // Below in_switch_min_bytes auto is ring: 512 KiB, chunk 65,536 B:
  // ceil(65,536,000 / 450) = 145,636 + 600,000 = 745,636 ps per step, 14 x = 10,438,904.
  mapping::Program small = mapping::CollectiveProgram(chip, "auto", kAr, 8, 512 << 10, 2);
  EXPECT_EQ(mapping::ToString(small.collectives[0].algorithm), "ring");
  EXPECT_EQ(MakeAnalyticalEngine()->Run(small, chip).makespan_ps, 10'438'904);
}

// On a GPU node each collective kernel takes its own NCCL time (mapping::GpuCollectiveTime):
// the engine's memo of compute shapes keys a collective kernel by its kind, ranks and algorithm
// too. It keyed it by bytes only, so an all_gather of 1.25 MiB over 4 GPUs took the time of the
// all_reduce of 1.25 MiB before it (38.333 us instead of 27.594 us on h200-sxm-8's model).
TEST(AnalyticalEngine, GpuCollectiveKernelsOfEqualBytesTakeTheirOwnTimes) {
  const arch::Chip chip = arch::testing::LoadChip("h200-sxm-8");
  Program p;
  p.num_cores = chip.num_cores();
  p.num_channels = static_cast<int>(chip.channels().size());
  p.ops = NewProgram().ops;
  auto collective = [&](int core, mapping::CollectiveKind kind, uint64_t ranks) {
    mapping::Task c;
    c.kind = TaskKind::kCompute;
    c.op_kind = llm::OpKind::kCollective;
    c.core = mapping::CoreId(core);
    c.m = static_cast<uint64_t>(kind);
    c.n = ranks;
    c.bytes = 1310720;
    p.Add(c);
    return mapping::ComputeShape{.op_kind = c.op_kind, .m = c.m, .n = c.n, .bytes = c.bytes};
  };
  const mapping::ComputeShape shapes[] = {collective(0, mapping::CollectiveKind::kAllReduce, 4),
                                          collective(1, mapping::CollectiveKind::kAllGather, 4),
                                          collective(2, mapping::CollectiveKind::kReduceScatter, 4),
                                          collective(3, mapping::CollectiveKind::kAllReduce, 8)};
  const EngineOutput out = MakeAnalyticalEngine()->Run(p, chip);
  Ps want[4];
  for (size_t i = 0; i < 4; ++i) {
    want[i] = mapping::GpuCollectiveTime(chip, shapes[i], false);
    EXPECT_EQ(out.tasks[i].end_ps - out.tasks[i].start_ps, want[i]) << i;
  }
  // The all_reduce's time differs from the all_gather's and from 8 ranks': the test can tell.
  EXPECT_NE(want[0], want[1]);
  EXPECT_NE(want[0], want[3]);
}

}  // namespace
}  // namespace tpsim::sim
