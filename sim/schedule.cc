#include "sim/schedule.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace tpsim::sim {

namespace {

Ps SatAdd(Ps a, Ps b) {
  Ps r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<Ps>::max() : r;
}

// The numeric algebra: starts and ends in picoseconds, written into `times`.
struct Numeric {
  using Time = Ps;
  const Ps* duration;
  TaskTime* times;
  Ps* queues[3];  // by Queue: core_free, -, dram_free
  Ps makespan = 0;

  Ps& free(Queue q, int core) const { return queues[static_cast<int>(q)][core]; }
  static Ps Origin() { return 0; }
  Ps EndOf(uint32_t d) const { return times[d].end_ps; }
  Ps FreeAt(Queue q, int core) const { return free(q, core); }
  static Ps Later(Ps a, Ps b) { return std::max(a, b); }
  Ps Finish(size_t i, Ps start) {
    const Ps end = SatAdd(start, duration[i]);
    times[i] = TaskTime{start, end};
    makespan = std::max(makespan, end);
    return end;
  }
  void Occupy(Queue q, int core, Ps end) { free(q, core) = end; }
};

}  // namespace

Ps ListScheduler::Run(const mapping::Program& p, std::span<const Ps> duration, std::span<TaskTime> times) {
  const size_t n = p.num_tasks();
  if (duration.size() != n || times.size() != n) {
    throw std::invalid_argument("ListScheduler: " + std::to_string(duration.size()) + " durations and " +
                                std::to_string(times.size()) + " times for " + std::to_string(n) + " tasks");
  }
  const size_t cores = static_cast<size_t>(std::max(0, p.num_cores));
  core_free_.assign(cores, 0);
  dram_free_.assign(cores, 0);
  Numeric a{duration.data(), times.data(), {core_free_.data(), nullptr, dram_free_.data()}};
  ListSchedule(ProgramGraph{p}, a);
  return a.makespan;
}

std::vector<Ps> ScheduleEnds(const mapping::Program& p, std::span<const Ps> duration) {
  std::vector<TaskTime> times(p.num_tasks());
  ListScheduler().Run(p, duration, times);
  std::vector<Ps> end(times.size());
  for (size_t i = 0; i < times.size(); ++i) end[i] = times[i].end_ps;
  return end;
}

namespace {

// prev[i] = the task before task i in its queue (same queue and core) in (start, id)
// order, -1 when none. Tasks are bucketed by (queue, core) in id order and a bucket is
// sorted only when its starts are not already in order (ListSchedule serves a queue in id
// order), which gives what one sort of (queue, core, start, id) tuples gives, without
// sorting every task.
void PrevInQueue(const mapping::Program& g, std::span<const TaskTime> times, std::vector<int64_t>* prev) {
  std::vector<uint32_t> ids;    // tasks with a queue, in id order
  std::vector<int> cores;       // their cores
  std::vector<uint8_t> memory;  // 1 for the DRAM queue
  int64_t lo = 0, hi = -1;
  for (size_t i = 0; i < g.num_tasks(); ++i) {
    const Queue q = QueueOf(g.kind(i));
    if (q == Queue::kNone) continue;
    const int core = g.core(i);
    ids.push_back(static_cast<uint32_t>(i));
    cores.push_back(core);
    memory.push_back(q == Queue::kDram ? 1 : 0);
    if (hi < lo) lo = hi = core;
    lo = std::min<int64_t>(lo, core);
    hi = std::max<int64_t>(hi, core);
  }
  if (ids.empty()) return;
  const size_t span = static_cast<size_t>(hi - lo + 1);
  auto bucket = [&](size_t j) { return (memory[j] ? span : 0) + static_cast<size_t>(cores[j] - lo); };
  std::vector<uint32_t> begin(2 * span + 1, 0);
  for (size_t j = 0; j < ids.size(); ++j) ++begin[bucket(j) + 1];
  for (size_t b = 1; b < begin.size(); ++b) begin[b] += begin[b - 1];
  std::vector<uint32_t> order(ids.size());
  std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
  for (size_t j = 0; j < ids.size(); ++j) order[fill[bucket(j)]++] = ids[j];
  auto by_start = [&](uint32_t a, uint32_t b) {
    const Ps sa = times[a].start_ps, sb = times[b].start_ps;
    return sa != sb ? sa < sb : a < b;
  };
  for (size_t b = 0; b + 1 < begin.size(); ++b) {
    auto first = order.begin() + begin[b], last = order.begin() + begin[b + 1];
    if (!std::is_sorted(first, last, by_start)) std::sort(first, last, by_start);
    for (auto it = first; it != last && it + 1 != last; ++it) (*prev)[*(it + 1)] = *it;
  }
}

}  // namespace

CriticalPathSplit CriticalPath(const mapping::Program& g, std::span<const TaskTime> times) {
  CriticalPathSplit split;
  const size_t n = g.num_tasks();
  if (n == 0) return split;
  if (times.size() != n) {
    throw std::invalid_argument("CriticalPath: " + std::to_string(times.size()) + " times for " +
                                std::to_string(n) + " tasks");
  }
  std::vector<int64_t> prev_in_queue(n, -1);
  PrevInQueue(g, times, &prev_in_queue);
  size_t cur = 0;
  for (size_t i = 1; i < n; ++i) {
    if (times[i].end_ps > times[cur].end_ps) cur = i;
  }
  std::vector<bool> visited(n, false);
  Ps by_kind[3] = {0, 0, 0};
  while (!visited[cur]) {
    visited[cur] = true;
    int64_t best = -1;
    auto consider = [&](int64_t c) {
      if (c < 0 || static_cast<size_t>(c) >= n) return;
      if (best < 0 || times[c].end_ps > times[best].end_ps ||
          (times[c].end_ps == times[best].end_ps && c < best)) {
        best = c;
      }
    };
    for (uint32_t d : g.deps(cur)) consider(d);
    consider(prev_in_queue[cur]);
    // Attribute only the part of this task after its predecessor on the path ended, so
    // overlapping spans (a queued DRAM request, an engine that reports issue time as
    // start) are never counted twice and the shares add up to at most the makespan.
    Ps from = times[cur].start_ps;
    if (best >= 0) from = std::max(from, times[best].end_ps);
    // A GPU's collective kernel (op_kind kCollective) is communication, though it runs on its core.
    int kind = static_cast<int>(g.kind(cur));
    if (g.kind(cur) == mapping::TaskKind::kCompute && g.shape(cur).op_kind == llm::OpKind::kCollective)
      kind = static_cast<int>(mapping::TaskKind::kTransfer);
    by_kind[kind] += std::max<Ps>(0, times[cur].end_ps - from);
    if (best < 0) break;
    cur = static_cast<size_t>(best);
  }
  split.compute_ps = by_kind[static_cast<int>(mapping::TaskKind::kCompute)];
  split.communication_ps = by_kind[static_cast<int>(mapping::TaskKind::kTransfer)];
  split.memory_ps = by_kind[static_cast<int>(mapping::TaskKind::kMemory)];
  return split;
}

}  // namespace tpsim::sim
