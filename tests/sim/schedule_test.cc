// The schedule (sim/schedule.h) and its critical path on tiny hand-timed Programs.
#include "sim/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

#include "sim/dispatch_loop.h"
#include "tests/mapping/program_test_util.h"

namespace tpsim::sim {
namespace {

using mapping::TaskKind;

// Two cores, one channel; durations in ps beside each task (memory: and how long it holds
// the channel):
//   t0 compute core 0 (5), no deps        0..5
//   t1 transfer 0 -> 1 (3), after t0      5..8
//   t2 compute core 0 (4), after t1       8..12   ready at 8: core 0 ran t3 meanwhile
//   t3 compute core 0 (2), no deps        5..7    the lowest-id ready task when core 0 frees
//                                                 at 5 (t2 is not ready; id order would wait)
//   t4 memory (10, holds 6), after t0     5..15   the channel is free from 2
//   t5 memory (4, holds 2), no deps       0..4    issued first, served first (though id 5)
//   t6 memory (3, holds 2), after t1     11..14   issued at 8, starts when t4's bytes have
//                                                 left the channel (5 + 6), before t4 ends
//   t7 compute core 1 (6), after t4, t6  15..21
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
  task(TaskKind::kTransfer, 0, {0});
  task(TaskKind::kCompute, 0, {1});
  task(TaskKind::kCompute, 0, {});
  task(TaskKind::kMemory, 0, {0});
  task(TaskKind::kMemory, 0, {});
  task(TaskKind::kMemory, 0, {1});
  task(TaskKind::kCompute, 1, {4, 6});
  return p.Build();
}
const std::vector<Ps> kDurations = {5, 3, 4, 2, 10, 4, 3, 6};
const std::vector<Ps> kBusy = {0, 0, 0, 0, 6, 2, 2, 0};

TEST(Schedule, HandTimedProgram) {
  const mapping::Program p = Tiny();
  std::vector<TaskTime> times(p.num_tasks());
  Dispatcher s(p);
  EXPECT_EQ(s.Run(kDurations, kBusy, times), 21);
  const std::vector<std::pair<Ps, Ps>> want = {{0, 5},  {5, 8}, {8, 12},  {5, 7},
                                               {5, 15}, {0, 4}, {11, 14}, {15, 21}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(times[i].start_ps, want[i].first) << "task " << i;
    EXPECT_EQ(times[i].end_ps, want[i].second) << "task " << i;
  }
  // Started in this order (at 0: the channel's request before the core's task; at 8 the
  // core's task 2, while request 6, ready then, waits for the channel until 11 and is started
  // then: a queued task is started at its start, sim/dispatch_loop.h).
  EXPECT_EQ(s.order(), (std::vector<uint32_t>{5, 0, 1, 4, 3, 2, 6, 7}));
  // Buffers are reset between runs: the same answer again.
  EXPECT_EQ(s.Run(kDurations, kBusy, times), 21);
  // With no times to fill, the makespan alone (the unqueued pass of sim/analytical/links.h).
  EXPECT_EQ(s.Run(kDurations, kBusy, {}), 21);
  EXPECT_EQ(s.order(), (std::vector<uint32_t>{5, 0, 1, 4, 3, 2, 6, 7}));
  EXPECT_THROW(s.Run(kDurations, kBusy, std::span<TaskTime>(times.data(), 3)), std::invalid_argument);
  // The max-plus replay in that order gives the same ends.
  EXPECT_EQ(ReplayEnds(p, s.order(), kDurations, kBusy), (std::vector<Ps>{5, 8, 12, 7, 15, 4, 14, 21}));
  EXPECT_EQ(QueueOf(TaskKind::kCompute), Queue::kCompute);
  EXPECT_EQ(QueueOf(TaskKind::kMemory), Queue::kDram);
  EXPECT_EQ(QueueOf(TaskKind::kTransfer), Queue::kNone);
  // Sizes are checked.
  EXPECT_THROW(s.Run(kDurations, {}, times), std::invalid_argument);
}

// The finisher (the analytical engine's links) is called at each transfer's and request's
// start, in start order, with the event time equal to the start: request 6 of Tiny, ready at 8
// and queued behind request 4 (whose busy time keeps the channel until 5 + 6 = 11), is
// finished at 11 with now = 11 (it used to be at 8, when it was queued, before task 2's start).
TEST(Schedule, FinisherCalledAtEachStartInStartOrder) {
  const mapping::Program p = Tiny();
  std::vector<TaskTime> times(p.num_tasks());
  Dispatcher s(p);
  std::vector<std::array<Ps, 3>> calls;  // (task, start, now)
  s.set_finisher([&](uint32_t i, Ps start, Ps now) {
    calls.push_back({Ps{i}, start, now});
    return start + kDurations[i];
  });
  EXPECT_EQ(s.Run(kDurations, kBusy, times), 21);
  const std::vector<std::array<Ps, 3>> want = {{5, 0, 0}, {1, 5, 5}, {4, 5, 5}, {6, 11, 11}};
  EXPECT_EQ(calls, want);
}

TEST(Schedule, TiesGoToTheLowestId) {
  // Core 0 frees at 5 with t1 and t2 both made ready then (by t0): t1 first. Two requests
  // issued together (t3, t4 after t0): t3 first.
  mapping::testing::TestProgram b;
  b.num_cores = 1;
  b.num_channels = 1;
  b.ops.resize(1);
  auto task = [&](TaskKind kind, std::vector<uint32_t> deps) {
    mapping::Task t;
    t.kind = kind;
    t.core = mapping::CoreId(0);
    if (kind == TaskKind::kMemory) t.channel = 0;
    b.Add(t, std::move(deps));
  };
  task(TaskKind::kCompute, {});
  task(TaskKind::kCompute, {0});
  task(TaskKind::kCompute, {0});
  task(TaskKind::kMemory, {0});
  task(TaskKind::kMemory, {0});
  const mapping::Program p = b.Build();
  std::vector<TaskTime> times(p.num_tasks());
  Dispatcher s(p);
  EXPECT_EQ(s.Run(std::vector<Ps>{5, 1, 1, 3, 3}, std::vector<Ps>{0, 0, 0, 2, 2}, times), 10);
  EXPECT_EQ(times[1].start_ps, 5);
  EXPECT_EQ(times[2].start_ps, 6);
  EXPECT_EQ(times[3].start_ps, 5);
  EXPECT_EQ(times[4].start_ps, 7);
}

// Three transfers from core 0 to core 1, no deps.
mapping::Program ThreeTransfers() {
  mapping::testing::TestProgram b;
  b.num_cores = 2;
  b.ops.resize(1);
  for (int k = 0; k < 3; ++k) {
    mapping::Task t;
    t.kind = TaskKind::kTransfer;
    t.core = mapping::CoreId(0);
    t.dst_core = mapping::CoreId(1);
    b.Add(t, {});
  }
  return b.Build();
}

TEST(Schedule, TransfersQueueForTheirFirstLink) {
  // Three transfers from core 0 (t0 5 ps, holding link 0 for 4; t1 3 ps, holding link 0 for
  // 2; t2 2 ps over link 1), all issued at 0: t0 0..5; t1 waits until t0's bytes have left
  // link 0: 4..7; t2 leaves by another link: 0..2. Without first links all start at 0.
  const mapping::Program p = ThreeTransfers();
  const std::vector<Ps> dur = {5, 3, 2}, busy = {4, 2, 2};
  const std::vector<int32_t> first = {0, 0, 1};
  std::vector<TaskTime> times(3);
  Dispatcher s(p, first, 2);
  EXPECT_EQ(s.Run(dur, busy, times), 7);
  EXPECT_EQ(times[1].start_ps, 4);
  EXPECT_EQ(times[2].start_ps, 0);
  EXPECT_EQ(ReplayEnds(p, s.order(), dur, busy, first, 2), (std::vector<Ps>{5, 7, 2}));
  EXPECT_EQ(Dispatcher(p).Run(dur, busy, times), 5);
  EXPECT_THROW(Dispatcher(p, {0, 0, 2}, 2), std::invalid_argument);  // no link 2
}

TEST(Schedule, CostsByKeyTimeAsCostsPerTask) {
  // The three transfers above with t0 and t1 of one key (5 ps, holding link 0 for 4): t1
  // waits for t0's hold, 4..9; t2 (key 1: 2 ps, hold 2) leaves by link 1, 0..2. A key out of
  // range or a key list of the wrong length is refused; order() stays empty without keep_order.
  const mapping::Program p = ThreeTransfers();
  const std::vector<Ps> dur = {5, 2}, busy = {4, 2};
  const std::vector<uint32_t> key = {0, 0, 1};
  std::vector<TaskTime> keyed(3), per_task(3);
  Dispatcher s(p, {0, 0, 1}, 2);
  s.keep_order(false);
  EXPECT_EQ(s.Run(TaskCosts{dur, busy, key, true}, keyed), 9);
  EXPECT_TRUE(s.order().empty());
  EXPECT_EQ(keyed[1].start_ps, 4);
  EXPECT_EQ(keyed[2].end_ps, 2);
  s.keep_order(true);
  EXPECT_EQ(s.Run(std::vector<Ps>{5, 5, 2}, std::vector<Ps>{4, 4, 2}, per_task), 9);
  EXPECT_EQ(s.order().size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(keyed[i].start_ps, per_task[i].start_ps);
    EXPECT_EQ(keyed[i].end_ps, per_task[i].end_ps);
  }
  const std::vector<uint32_t> bad = {0, 2, 1}, short_key = {0, 1};
  EXPECT_THROW(s.Run(TaskCosts{dur, busy, bad, true}, keyed), std::invalid_argument);
  EXPECT_THROW(s.Run(TaskCosts{dur, busy, short_key, true}, keyed), std::invalid_argument);
}

TEST(Schedule, FirstLinksByKeyTimeAsFirstLinksPerTask) {
  // The keyed case above with the first links given per key (key 0: link 0, key 1: link 1)
  // to a Dispatcher made without them: the same times. A list of the wrong length, a link
  // out of range, or first links by key without keys are refused.
  const mapping::Program p = ThreeTransfers();
  const std::vector<Ps> dur = {5, 2}, busy = {4, 2};
  const std::vector<uint32_t> key = {0, 0, 1};
  const std::vector<int32_t> link_of_key = {0, 1};
  std::vector<TaskTime> times(3);
  Dispatcher s(p, {}, 2);
  EXPECT_EQ(s.Run(TaskCosts{dur, busy, key, true, link_of_key}, times), 9);
  EXPECT_EQ(times[1].start_ps, 4);
  EXPECT_EQ(times[2].start_ps, 0);
  EXPECT_EQ(times[2].end_ps, 2);
  // Key 1 without a link: t2 queues for nothing (it starts at 0 either way), t0 and t1 as before.
  const std::vector<int32_t> one_link = {0, -1};
  EXPECT_EQ(s.Run(TaskCosts{dur, busy, key, true, one_link}, times), 9);
  const std::vector<int32_t> short_list = {0}, out_of_range = {0, 2};
  EXPECT_THROW(s.Run(TaskCosts{dur, busy, key, true, short_list}, times), std::invalid_argument);
  EXPECT_THROW(s.Run(TaskCosts{dur, busy, key, true, out_of_range}, times), std::invalid_argument);
  const std::vector<Ps> per_task_dur = {5, 5, 2}, per_task_busy = {4, 4, 2};
  EXPECT_THROW(s.Run(TaskCosts{per_task_dur, per_task_busy, {}, false, link_of_key}, times),
               std::invalid_argument);
}

TEST(Schedule, TasksWithManyDeps) {
  // n transfers (1 ps each, no link) then a compute task (5 ps) after all of them: it starts
  // at 1 and ends at 6 whether its count of deps takes a byte (n = 255), two (256, 65,535)
  // or four (65,536), and whether its first deps are near enough (fewer than 65,535 ids
  // before it) for the dependents' 16-bit steps or written whole (n = 65,535 and 65,536).
  for (uint32_t n : {255u, 256u, 65'535u, 65'536u}) {
    mapping::testing::TestProgram b;
    b.num_cores = 2;
    b.ops.resize(1);
    std::vector<uint32_t> all;
    for (uint32_t k = 0; k < n; ++k) {
      mapping::Task t;
      t.kind = TaskKind::kTransfer;
      t.core = mapping::CoreId(0);
      t.dst_core = mapping::CoreId(1);
      b.Add(t, {});
      all.push_back(k);
    }
    mapping::Task last;
    last.kind = TaskKind::kCompute;
    last.core = mapping::CoreId(1);
    b.Add(last, all);
    const mapping::Program p = b.Build();
    std::vector<Ps> dur(n + 1, 1), busy(n + 1, 0);
    dur[n] = 5;
    std::vector<TaskTime> times(n + 1);
    EXPECT_EQ(Dispatcher(p).Run(dur, busy, times), 6) << n << " deps";
    EXPECT_EQ(times[n].start_ps, 1) << n << " deps";
  }
}

TEST(Schedule, CriticalPathSplitsTheMakespan) {
  // Back from t7 (ends 21): its enabler is t4 (15, not t6 at 14): 6 ps compute; t4's is t0
  // (5; t5 before it on the channel ended at 4): 10 ps memory; t0 has none: 5 ps compute.
  const mapping::Program p = Tiny();
  std::vector<TaskTime> times(p.num_tasks());
  Dispatcher(p).Run(kDurations, kBusy, times);
  const CriticalPathSplit c = CriticalPath(p, times);
  EXPECT_EQ(c.compute_ps, 11);
  EXPECT_EQ(c.communication_ps, 0);
  EXPECT_EQ(c.memory_ps, 10);
  // An empty Program has none.
  const CriticalPathSplit none = CriticalPath(mapping::testing::TestProgram{}.Build(), {});
  EXPECT_EQ(none.compute_ps + none.communication_ps + none.memory_ps, 0);
}

TEST(Schedule, CriticalPathCountsWaitsForQueuesItDoesNotFollow) {
  // t0 compute on core 0, then two transfers 0 -> 1 after it, t2 waiting for t1 on their first
  // link (a queue the walk does not follow), then t3 on core 1 after t2. t0 starts at 2 (as if
  // it waited for its core at the start). Back from t3 (ends 22): 22 - 15 = 7 compute; t2's
  // enabler is t0 (ends 7; t1 is no dep of it): 15 - 7 = 8 communication, its 4-ps wait for the
  // link included; t0 has none: 7 - 0 = 7 compute. 14 + 8 = 22, the makespan. Counted from
  // each task's start, as before, t2 gave 4 and t0 5: 16 of 22.
  mapping::testing::TestProgram b;
  b.num_cores = 2;
  b.ops.resize(1);
  mapping::Task c0;
  c0.kind = TaskKind::kCompute;
  c0.core = mapping::CoreId(0);
  mapping::Task x;
  x.kind = TaskKind::kTransfer;
  x.core = mapping::CoreId(0);
  x.dst_core = mapping::CoreId(1);
  mapping::Task c1 = c0;
  c1.core = mapping::CoreId(1);
  b.Add(c0, {});
  b.Add(x, {0});
  b.Add(x, {0});
  b.Add(c1, {2});
  const mapping::Program p = b.Build();
  const std::vector<TaskTime> times = {{2, 7}, {7, 11}, {11, 15}, {15, 22}};
  const CriticalPathSplit c = CriticalPath(p, times);
  EXPECT_EQ(c.compute_ps, 14);
  EXPECT_EQ(c.communication_ps, 8);
  EXPECT_EQ(c.memory_ps, 0);
  // The rule every walk and carried-forward split takes (sim/step_stream.cc, the TLM engine's).
  const Ps seven = 7;
  EXPECT_EQ(PathPart(15, &seven), 8);
  EXPECT_EQ(PathPart(7, nullptr), 7);
  EXPECT_EQ(PathPart(5, &seven), 0);  // an enabler never ends later; if it did, nothing
}

TEST(Schedule, EndsSaturate) {
  const mapping::Program p = Tiny();
  std::vector<Ps> d(kDurations);
  d[0] = std::numeric_limits<Ps>::max();
  std::vector<TaskTime> times(p.num_tasks());
  EXPECT_EQ(Dispatcher(p).Run(d, kBusy, times), std::numeric_limits<Ps>::max());
  EXPECT_EQ(times[2].end_ps, std::numeric_limits<Ps>::max());
}

// A custom algebra over the same rule: the number of tasks on the longest chain of deps and
// queue predecessors (every duration 1, in integers of another kind).
struct Depth {
  using Time = int;
  std::vector<int> end, core_free, channel_free;
  int& free(Queue q, int r) { return (q == Queue::kCompute ? core_free : channel_free)[r]; }
  static int Origin() { return 0; }
  int EndOf(uint32_t d) const { return end[d]; }
  int FreeAt(Queue q, int r) { return free(q, r); }
  static int Later(int a, int b) { return std::max(a, b); }
  int Finish(size_t i, int start) { return end[i] = start + 1; }
  void Release(size_t, Queue q, int r, int, int e) { free(q, r) = e; }
};

TEST(Schedule, AnyAlgebra) {
  const mapping::Program p = Tiny();
  const std::vector<uint32_t> order = {5, 0, 1, 4, 3, 6, 2, 7};
  Depth d{std::vector<int>(p.num_tasks()), std::vector<int>(2), std::vector<int>(1)};
  ListSchedule(ProgramGraph{p, order}, d);
  EXPECT_EQ(d.end, (std::vector<int>{1, 2, 3, 2, 2, 1, 3, 4}));
}

// A task queued for its channel or first link is started at its start, an event of its own
// (sim/dispatch_loop.h). One channel and one link, busy 10 each, every task 100 long:
//   at 0:   ready 3, 1 (channel) and 12 (link): 12 starts (links first), then 1 (lowest id);
//           3 is queued behind 1 until 10. Deferred by hand: 7 then 6, both at 100.
//   at 10:  3 starts (decided at 0), before any end (the first is at 100).
//   at 100: 1 and 12 end (in id order), then 7 and 6 start (in the order they were queued).
TEST(DispatchQueues, QueuedTasksStartAtTheirStartAfterTheEndsThen) {
  DispatchQueues<uint32_t> q;
  q.Reset(0, 1, 1);
  std::vector<std::array<Ps, 3>> log;  // (task, start, decided); ends as (task, -1, now)
  struct Source {
    DispatchQueues<uint32_t>& q;
    std::vector<std::array<Ps, 3>>& log;
    Queue QueueOf(uint32_t g) const { return g >= 10 ? Queue::kLink : Queue::kDram; }
    int32_t ResourceOf(uint32_t, Queue) const { return 0; }
    Ps BusyOf(uint32_t) const { return 10; }
    bool Start(uint32_t g, Ps at, Ps now) {
      log.push_back({Ps{g}, at, now});
      q.AddEnd(at + 100, g);
      return true;
    }
  } src{q, log};
  for (uint32_t g : {3u, 1u, 12u}) q.Ready(g);
  Ps now = 0;
  ASSERT_TRUE(q.StartReady(now, src));
  q.Defer(100, 7, 0, Queue::kDram, 0, 110);
  q.Defer(100, 6, 0, Queue::kDram, 0, 120);
  EXPECT_EQ(q.channel_free()[0], 20);     // 1's and 3's busy time
  EXPECT_EQ(q.channel_started()[0], 10);  // 1's: 3 has not started
  EXPECT_EQ(q.next_time(), 10);
  while (!q.idle() && now < 100) {
    ASSERT_TRUE(q.TakeEnded(&now, [&](uint32_t g) {
      log.push_back({Ps{g}, -1, now});
      return true;
    }));
    ASSERT_TRUE(q.StartReady(now, src));
  }
  const std::vector<std::array<Ps, 3>> want = {{12, 0, 0},    {1, 0, 0},   {3, 10, 0}, {1, -1, 100},
                                               {12, -1, 100}, {7, 100, 0}, {6, 100, 0}};
  EXPECT_EQ(log, want);
  EXPECT_EQ(q.channel_started()[0], 120);
}

// The event loop's running tasks (DispatchQueues' heap of end times): each TakeEnded
// gives the next end time and every task that ends then, in id order, whatever the order
// and spread of the pushes (times from 0 to 2^62 and negative, as Ps allows); an end at the
// time just taken comes out at that time again; an end before it is refused.
TEST(DispatchQueues, TakeEndedGivesTimesInOrderAndIdsInOrderWithinATime) {
  DispatchQueues<uint32_t> q;
  q.Reset(1, 0, 0);
  EXPECT_TRUE(q.idle());
  const std::vector<std::pair<Ps, uint32_t>> pushes = {
      {40, 7}, {5, 3}, {40, 2}, {Ps{1} << 62, 9}, {5, 1}, {-8, 4}, {40, 5}, {6, 0}, {(Ps{1} << 62) - 1, 8}};
  for (const auto& [end, id] : pushes) q.AddEnd(end, id);
  EXPECT_FALSE(q.idle());
  EXPECT_EQ(q.next_end(), -8);
  std::vector<std::pair<Ps, std::vector<uint32_t>>> taken;
  auto take = [&] {
    Ps now = 0;
    std::vector<uint32_t> ids;
    EXPECT_TRUE(q.TakeEnded(&now, [&](uint32_t g) {
      ids.push_back(g);
      return true;
    }));
    taken.emplace_back(now, ids);
  };
  take();          // -8
  take();          // 5
  q.AddEnd(5, 6);  // ends at the time just taken (a task of duration 0)
  EXPECT_EQ(q.next_end(), 5);
  take();  // 5 again
  EXPECT_THROW(q.AddEnd(4, 10), std::logic_error);
  while (!q.idle()) take();
  using T = std::vector<std::pair<Ps, std::vector<uint32_t>>>;
  EXPECT_EQ(taken, (T{{-8, {4}},
                      {5, {1, 3}},
                      {5, {6}},
                      {6, {0}},
                      {40, {2, 5, 7}},
                      {(Ps{1} << 62) - 1, {8}},
                      {Ps{1} << 62, {9}}}));
  q.Reset(1, 0, 0);  // from the start of time again
  q.AddEnd(3, 1);
  Ps now = 0;
  EXPECT_TRUE(q.TakeEnded(&now, [](uint32_t) { return true; }));
  EXPECT_EQ(now, 3);
  EXPECT_TRUE(q.idle());
}

// The heap of running tasks under load: 5,000 ends in a scrambled order (ids i * 7919 mod
// 5000, a bijection as 7919 is prime to 5000; ends 1000 * (id mod 37), so about 135 tasks end
// at each of 37 times), half of them pushed after the first time (0) is taken, come out as
// sorting (end, id) gives them, each end time taken once.
TEST(DispatchQueues, ManyEndsComeOutSortedByEndThenId) {
  DispatchQueues<uint32_t> q;
  q.Reset(1, 0, 0);
  std::vector<std::pair<Ps, uint32_t>> want, got, later;
  std::vector<Ps> times;
  for (uint32_t i = 0; i < 5000; ++i) {
    const uint32_t id = i * 7919 % 5000;
    want.emplace_back(Ps{1000} * (id % 37), id);
    if (i < 2500 || id % 37 == 0) {
      q.AddEnd(want.back().first, id);
    } else {
      later.push_back(want.back());
    }
  }
  Ps now = -1;
  auto take = [&] {
    ASSERT_TRUE(q.TakeEnded(&now, [&](uint32_t g) {
      got.emplace_back(now, g);
      return true;
    }));
    times.push_back(now);
  };
  take();
  EXPECT_EQ(now, 0);
  for (const auto& [end, id] : later) q.AddEnd(end, id);
  while (!q.idle()) take();
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(times.size(), 37u);  // 0, 1000, ..., 36000
  EXPECT_TRUE(std::adjacent_find(times.begin(), times.end(), std::greater_equal<Ps>()) == times.end());
}

}  // namespace
}  // namespace tpsim::sim
