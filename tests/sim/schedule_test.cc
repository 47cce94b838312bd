// The list schedule (sim/schedule.h) and its critical path on a tiny hand-timed Program.
#include "sim/schedule.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "tests/mapping/program_test_util.h"

namespace tpsim::sim {
namespace {

using mapping::TaskKind;

// Two cores, one channel; durations in ps beside each task:
//   t0 compute core 0 (5)                 0..5
//   t1 compute core 0 (7), no deps        5..12   waits for core 0 (t0)
//   t2 transfer 0 -> 1 (3), after t0      5..8
//   t3 memory core 0 (4), after t2        8..12
//   t4 memory core 0 (1), no deps        12..13   waits for core 0's DRAM queue (t3)
//   t5 compute core 1 (6), after t2, t4  13..19
mapping::Program Tiny() {
  mapping::testing::TestProgram p;
  p.num_cores = 2;
  p.num_channels = 1;
  p.ops.resize(1);
  auto task = [&](TaskKind kind, int core, std::vector<uint32_t> deps) {
    mapping::Task t;
    t.kind = kind;
    t.core = mapping::CoreId(core);
    if (kind == TaskKind::kTransfer) t.dst_core = mapping::CoreId(1);
    if (kind == TaskKind::kMemory) t.channel = 0;
    p.Add(t, std::move(deps));
  };
  task(TaskKind::kCompute, 0, {});
  task(TaskKind::kCompute, 0, {});
  task(TaskKind::kTransfer, 0, {0});
  task(TaskKind::kMemory, 0, {2});
  task(TaskKind::kMemory, 0, {});
  task(TaskKind::kCompute, 1, {2, 4});
  return p.Build();
}
const std::vector<Ps> kDurations = {5, 7, 3, 4, 1, 6};

TEST(ListSchedule, HandTimedProgram) {
  const mapping::Program p = Tiny();
  std::vector<TaskTime> times(p.num_tasks());
  ListScheduler s;
  EXPECT_EQ(s.Run(p, kDurations, times), 19);
  const std::vector<std::pair<Ps, Ps>> want = {{0, 5}, {5, 12}, {5, 8}, {8, 12}, {12, 13}, {13, 19}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(times[i].start_ps, want[i].first) << "task " << i;
    EXPECT_EQ(times[i].end_ps, want[i].second) << "task " << i;
  }
  // Buffers are reset between runs: the same answer again.
  EXPECT_EQ(s.Run(p, kDurations, times), 19);
  EXPECT_EQ(ScheduleEnds(p, kDurations), (std::vector<Ps>{5, 12, 8, 12, 13, 19}));
  EXPECT_EQ(QueueOf(TaskKind::kCompute), Queue::kCompute);
  EXPECT_EQ(QueueOf(TaskKind::kMemory), Queue::kDram);
  EXPECT_EQ(QueueOf(TaskKind::kTransfer), Queue::kNone);
}

TEST(ListSchedule, CriticalPathSplitsTheMakespan) {
  // Back from t5 (ends 19): its enabler is t4 (13, not t2 at 8): 6 ps compute; t4's is t3,
  // before it in the DRAM queue (12): 1 ps memory; t3's is t2 (8): 4 ps memory; t2's is t0
  // (5): 3 ps communication; t0 has none: 5 ps compute. 11 + 3 + 5 = 19.
  const mapping::Program p = Tiny();
  std::vector<TaskTime> times(p.num_tasks());
  ListScheduler().Run(p, kDurations, times);
  const CriticalPathSplit c = CriticalPath(p, times);
  EXPECT_EQ(c.compute_ps, 11);
  EXPECT_EQ(c.communication_ps, 3);
  EXPECT_EQ(c.memory_ps, 5);
  // An empty Program has none.
  const CriticalPathSplit none = CriticalPath(mapping::testing::TestProgram{}.Build(), {});
  EXPECT_EQ(none.compute_ps + none.communication_ps + none.memory_ps, 0);
}

TEST(ListSchedule, EndsSaturate) {
  const mapping::Program p = Tiny();
  std::vector<Ps> d(kDurations);
  d[0] = std::numeric_limits<Ps>::max();
  EXPECT_EQ(ScheduleEnds(p, d)[1], std::numeric_limits<Ps>::max());
}

// A custom algebra over the same rule: the number of tasks on the longest chain of deps and
// queue predecessors (every duration 1, in integers of another kind).
struct Depth {
  using Time = int;
  std::vector<int> end, core_free, dram_free;
  int& free(Queue q, int core) { return (q == Queue::kCompute ? core_free : dram_free)[core]; }
  static int Origin() { return 0; }
  int EndOf(uint32_t d) const { return end[d]; }
  int FreeAt(Queue q, int core) { return free(q, core); }
  static int Later(int a, int b) { return std::max(a, b); }
  int Finish(size_t i, int start) { return end[i] = start + 1; }
  void Occupy(Queue q, int core, int e) { free(q, core) = e; }
};

TEST(ListSchedule, AnyAlgebra) {
  const mapping::Program p = Tiny();
  Depth d{std::vector<int>(p.num_tasks()), std::vector<int>(2), std::vector<int>(2)};
  ListSchedule(ProgramGraph{p}, d);
  EXPECT_EQ(d.end, (std::vector<int>{1, 2, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace tpsim::sim
