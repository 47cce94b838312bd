// Measured results from launch medians, on a two-GPU plan built by hand.
#include <gtest/gtest.h>

#include "tests/mapping/program_test_util.h"
#include "validate/measured.h"

namespace tpsim::validate {
namespace {

// Op 0 "q_proj": a GEMM on each of cores 0 and 1. Op 1 "o_proj.all_reduce": one all-reduce.
mapping::Program TwoGpuProgram() {
  mapping::testing::TestProgram p;
  p.num_cores = 2;
  p.ops.resize(2);
  p.ops[0].ref = {mapping::Phase::kPrefill, 0, 0, "q_proj", "n_split"};
  p.ops[0].flops = 4e6;
  p.ops[1].ref = {mapping::Phase::kPrefill, 0, 0, "o_proj.all_reduce", "ring"};
  for (int c = 0; c < 2; ++c) {
    mapping::Task t;
    t.core = mapping::CoreId(c);
    t.m = 10, t.n = 20, t.k = 30;
    p.Add(t);
  }
  mapping::CollectiveInfo ci{mapping::CollectiveKind::kAllReduce, mapping::AlgorithmOf("ring"), 1000, 2,
                             mapping::OpId(1)};
  p.collectives.push_back(ci);
  for (int c = 0; c < 2; ++c) {
    mapping::Task t;
    t.kind = mapping::TaskKind::kTransfer;
    t.core = mapping::CoreId(c), t.dst_core = mapping::CoreId(1 - c), t.bytes = 500, t.op = mapping::OpId(1),
    t.collective = 0;
    p.Add(t);
  }
  return p.Build();
}

TEST(Measured, OpTimesAreSlowestGpuAndSumsFollow) {
  mapping::Program p = TwoGpuProgram();
  LaunchPlan plan = PlanLaunches(p, 2);
  ASSERT_EQ(plan.gpus.size(), 2u);
  LaunchTimes t = EmptyTimes(plan);
  t[0][0][0] = 3000;  // GPU 0 GEMM
  t[1][0][0] = 5000;  // GPU 1 GEMM (slowest)
  t[0][1][0] = 7000;  // all-reduce as timed on both
  t[1][1][0] = 7000;
  config::Result r = MeasuredResult(p, plan, t, 0, "x");
  EXPECT_EQ(r.engine(), "gpu");
  ASSERT_EQ(r.ops_size(), 2);
  EXPECT_EQ(r.ops(0).compute_ps(), 5000);
  EXPECT_EQ(r.ops(0).total_ps(), 5000);
  EXPECT_TRUE(r.ops(0).measured());
  EXPECT_EQ(r.ops(1).communication_ps(), 7000);
  EXPECT_EQ(r.ops(1).start_ps(), 5000);
  EXPECT_EQ(r.summary().total_ps(), 12000);  // no whole run: 5000 + 7000
  EXPECT_EQ(r.summary().compute_ps(), 5000);
  EXPECT_EQ(r.summary().communication_ps(), 7000);
  ASSERT_EQ(r.layers_size(), 1);
  EXPECT_EQ(r.layers(0).total_ps(), 12000);
  EXPECT_DOUBLE_EQ(r.summary().achieved_tflops(), 4e6 / 12000);
  // A whole run, when there was one, is the total.
  EXPECT_EQ(MeasuredResult(p, plan, t, 11000, "x").summary().total_ps(), 11000);
}

TEST(Measured, CollectiveThatCouldNotRunIsUnmeasured) {
  mapping::Program p = TwoGpuProgram();
  LaunchPlan plan = PlanLaunches(p, 2);
  LaunchTimes t = EmptyTimes(plan);
  t[0][0][0] = 3000;
  t[1][0][0] = 5000;
  config::Result r = MeasuredResult(p, plan, t, 0, "x");
  EXPECT_TRUE(r.ops(0).measured());
  EXPECT_FALSE(r.ops(1).measured());
  EXPECT_EQ(r.ops(1).total_ps(), 0);
}

TEST(Measured, Median) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({5, 1, 3}), 3);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
}

}  // namespace
}  // namespace tpsim::validate
