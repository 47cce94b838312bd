// BuildSummary and BuildResult on engine outputs written by hand, where a core's
// queue does not start in id order and an op's compute tasks are interleaved with
// another op's: the cases in which the critical path (sim/schedule.cc PrevInQueue) and
// result.cc (OpCompute) fall back from their one-pass orders to sorting. Numbers worked out in the comments.
#include <gtest/gtest.h>

#include "sim/result.h"
#include "tests/mapping/program_test_util.h"
#include "tests/sim/test_mesh.h"

namespace tpsim::sim {
namespace {

using Program = mapping::testing::TestProgram;  // hand-built; a mapping::Program where one is needed
using Task = mapping::testing::TestTask;
using mapping::TaskKind;

Task Compute(uint32_t id, int core, uint32_t op, std::vector<uint32_t> deps = {}) {
  Task t;
  t.id = mapping::TaskId(id);
  t.kind = TaskKind::kCompute;
  t.core = mapping::CoreId(core);
  t.op = mapping::OpId(op);
  t.flops = 10;
  t.deps = std::vector<mapping::TaskId>(deps.begin(), deps.end());
  return t;
}

Program TwoOps() {
  Program p;
  p.num_cores = 64;
  p.num_channels = 1;
  p.ops.push_back(mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "a", "k_split"}});
  p.ops.push_back(mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "b", "k_split"}});
  return p;
}

// Core 0 runs task 1 [0, 10) before task 0 [10, 15): an engine may start a core's
// queue out of id order.
struct OutOfIdOrder {
  Program p = TwoOps();
  EngineOutput out;
  OutOfIdOrder() {
    p.tasks = {Compute(0, 0, 0), Compute(1, 0, 0)};
    out.tasks = {TaskTime{10, 15}, TaskTime{0, 10}};
    out.makespan_ps = 15;
  }
};

// The critical path from task 0 (the last end) goes to the task before it on core 0 by
// start, task 1: compute = (15 - 10) + (10 - 0) = 15. Ordered by id instead, task 0
// would have no predecessor and compute would be 5.
TEST(BuildSummary, CoreQueueOutOfIdOrder) {
  const OutOfIdOrder c;
  const Program& p = c.p;
  const EngineOutput& out = c.out;
  const config::Summary s = BuildSummary(p, test::Mesh(), out);
  EXPECT_EQ(s.total_ps(), 15);
  EXPECT_EQ(s.compute_ps(), 15);
  EXPECT_EQ(s.communication_ps(), 0);
  EXPECT_EQ(BuildResult(p, test::Mesh(), out, "x", "analytical").summary().SerializeAsString(),
            s.SerializeAsString());
}

// Op a's compute on core 0 is tasks 0 (5 ps) and 2 (7 ps), with op b's task 1
// (4 ps) between them; op a also has task 3 on core 1 (9 ps).
// compute_ps(a) = max(5 + 7, 9) = 12; compute_ps(b) = 4.
TEST(BuildResult, InterleavedOpsSumPerCore) {
  Program p = TwoOps();
  p.tasks = {Compute(0, 0, 0), Compute(1, 0, 1, {0}), Compute(2, 0, 0, {1}), Compute(3, 1, 0)};
  EngineOutput out;
  out.tasks = {TaskTime{0, 5}, TaskTime{5, 9}, TaskTime{9, 16}, TaskTime{0, 9}};
  out.makespan_ps = 16;
  const config::Result r = BuildResult(p, test::Mesh(), out, "x", "analytical");
  ASSERT_EQ(r.ops_size(), 2);
  EXPECT_EQ(r.ops(0).compute_ps(), 12);
  EXPECT_EQ(r.ops(1).compute_ps(), 4);
  // Critical path: 2 <- 1 <- 0, all compute: 16.
  EXPECT_EQ(r.summary().compute_ps(), 16);
  EXPECT_EQ(BuildSummary(p, test::Mesh(), out).SerializeAsString(), r.summary().SerializeAsString());
}

// Ops in order (as Lower emits them): a = tasks 0, 1 on core 0 (3 + 4 ps) and task
// 2 on core 1 (5 ps); b = task 3 on core 1 (6 ps). compute_ps(a) = max(7, 5) = 7,
// compute_ps(b) = 6; a zero-length task on core 2 adds nothing.
TEST(BuildResult, OpsInOrderSumPerCore) {
  Program p = TwoOps();
  p.tasks = {Compute(0, 0, 0), Compute(1, 0, 0, {0}), Compute(2, 1, 0), Compute(3, 1, 1, {2}),
             Compute(4, 2, 1)};
  EngineOutput out;
  out.tasks = {TaskTime{0, 3}, TaskTime{3, 7}, TaskTime{0, 5}, TaskTime{5, 11}, TaskTime{0, 0}};
  out.makespan_ps = 11;
  const config::Result r = BuildResult(p, test::Mesh(), out, "x", "analytical");
  EXPECT_EQ(r.ops(0).compute_ps(), 7);
  EXPECT_EQ(r.ops(1).compute_ps(), 6);
  EXPECT_EQ(r.summary().compute_ps(), 11);  // 3 <- 2
}

}  // namespace
}  // namespace tpsim::sim
