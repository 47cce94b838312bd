// The analytical engine's two schedules on two threads (sim::SetSpareThread) and its
// makespan alone (Engine::Makespan) against one thread, Run and a hand count, on the test
// mesh of tests/sim/test_mesh.h (160 GB/s links, 2,000 ps a hop).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "sim/analytical/analytical.h"
#include "sim/analytical/links.h"
#include "sim/schedule.h"
#include "tests/mapping/program_test_util.h"
#include "tests/sim/test_mesh.h"

namespace tpsim::sim {
namespace {

using test::Core;
using test::Mesh;

// `rounds` rounds of two 160,000 B transfers, each round after both of the round before:
// t0 r0c0 -> r0c2 (links a, b), t1 r0c1 -> r0c2 (link b). Queued, t1 waits on b for t0's
// bytes: a round takes 2,004,000 ps (AnalyticalEngine.TransfersSharingALinkQueueThereIn-
// StartOrder); unloaded, t0 alone takes 1,004,000 ps (1,000,000 on a link + 2 hops) and t1
// 1,002,000, so a round takes 1,004,000 ps.
mapping::Program Rounds(int rounds) {
  mapping::testing::TestProgram p;
  p.num_cores = 64;
  p.num_channels = 1;
  p.ops.push_back(mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "op", "k_split"}, 0, 0, 0});
  p.collectives.push_back(mapping::CollectiveInfo{
      mapping::CollectiveKind::kAllGather, mapping::AlgorithmOf("direct"), 160'000, 3, mapping::OpId(0)});
  for (int r = 0; r < rounds; ++r) {
    for (int src : {Core(0, 0), Core(0, 1)}) {
      mapping::testing::TestTask t;
      t.id = mapping::TaskId(static_cast<uint32_t>(p.tasks.size()));
      t.kind = mapping::TaskKind::kTransfer;
      t.core = mapping::CoreId(src);
      t.dst_core = mapping::CoreId(Core(0, 2));
      t.bytes = 160'000;
      t.collective = 0;
      if (r > 0) t.deps = {mapping::TaskId(2 * r - 2), mapping::TaskId(2 * r - 1)};
      p.tasks.push_back(std::move(t));
    }
  }
  return p;
}

TEST(ParallelSchedules, SameOutputAsOneThread) {
  const mapping::Program p = Rounds(100'000);  // 200,000 tasks: where a second thread is used
  SetSpareThread(false);
  const EngineOutput one = AnalyticalEngine().Run(p, Mesh());
  SetSpareThread(true);
  const EngineOutput two = AnalyticalEngine().Run(p, Mesh());
  SetSpareThread(false);
  EXPECT_EQ(one.makespan_ps, int64_t{100'000} * 2'004'000);
  EXPECT_EQ(one.unloaded_makespan_ps, int64_t{100'000} * 1'004'000);
  EXPECT_EQ(two.makespan_ps, one.makespan_ps);
  EXPECT_EQ(two.unloaded_makespan_ps, one.unloaded_makespan_ps);
  EXPECT_EQ(two.contention, one.contention);
  ASSERT_EQ(two.tasks.size(), one.tasks.size());
  for (size_t i = 0; i < one.tasks.size(); ++i) {
    ASSERT_EQ(two.tasks[i].start_ps, one.tasks[i].start_ps) << "task " << i;
    ASSERT_EQ(two.tasks[i].end_ps, one.tasks[i].end_ps) << "task " << i;
  }
  for (size_t l = 0; l < one.links.size(); ++l)
    EXPECT_EQ(two.links[l].max_queue_ps, one.links[l].max_queue_ps);
}

TEST(ParallelSchedules, SiblingTimesAsItsDispatcher) {
  // Two compute tasks on core 0 and a transfer after the first: a sibling shares the
  // dependents and gives the same times, also while the first has a finisher of its own.
  mapping::testing::TestProgram t;
  t.num_cores = 2;
  t.ops.push_back(mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "op", "k_split"}, 0, 0, 0});
  for (int i = 0; i < 3; ++i) {
    mapping::testing::TestTask k;
    k.id = mapping::TaskId(static_cast<uint32_t>(i));
    k.kind = i == 2 ? mapping::TaskKind::kTransfer : mapping::TaskKind::kCompute;
    k.core = mapping::CoreId(0);
    if (i == 2) {
      k.dst_core = mapping::CoreId(1);
      k.deps = {mapping::TaskId(0)};
    }
    t.tasks.push_back(std::move(k));
  }
  const mapping::Program p = t;
  Dispatcher d(p);
  Dispatcher s = d.Sibling();
  const std::vector<Ps> duration{5, 4, 3}, busy{0, 0, 0};
  d.set_finisher([](uint32_t, Ps start, Ps) { return start + 100; });  // the sibling has none
  std::vector<TaskTime> a(3), b(3);
  EXPECT_EQ(d.Run(duration, busy, a), 105);  // t2 at 5, ends 100 later
  EXPECT_EQ(s.Run(duration, busy, b), 9);    // t0 0..5, t1 5..9, t2 5..8
  EXPECT_EQ(b[2].start_ps, 5);
  EXPECT_EQ(b[2].end_ps, 8);
  EXPECT_EQ(s.order(), (std::vector<uint32_t>{0, 2, 1}));  // at 5 the transfer starts before t1
}

TEST(EngineMakespan, AnalyticalAsRun) {
  // Queued on links, and a Program with no flow at all.
  const mapping::Program queued = Rounds(3);
  EXPECT_EQ(AnalyticalEngine().Makespan(queued, Mesh()), 3 * 2'004'000);
  EXPECT_EQ(AnalyticalEngine().Makespan(queued, Mesh()), AnalyticalEngine().Run(queued, Mesh()).makespan_ps);
  mapping::testing::TestProgram local;
  local.num_cores = 64;
  local.ops.push_back(
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "op", "k_split"}, 0, 0, 0});
  mapping::testing::TestTask gemm;
  gemm.kind = mapping::TaskKind::kCompute;
  gemm.op_kind = llm::OpKind::kGemm;
  gemm.core = mapping::CoreId(5);
  gemm.m = gemm.n = gemm.k = 64;
  gemm.flops = 2.0 * 64 * 64 * 64;
  gemm.bytes = 2 * 3 * 64 * 64;
  local.tasks.push_back(gemm);
  const mapping::Program p = local;
  const Ps run = AnalyticalEngine().Run(p, Mesh()).makespan_ps;
  EXPECT_GT(run, 0);
  EXPECT_EQ(AnalyticalEngine().Makespan(p, Mesh()), run);
}

}  // namespace
}  // namespace tpsim::sim
