#include "sim/schedule.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

namespace tpsim::sim {

namespace {

using arch::SatAdd;

// The numeric algebra: starts and ends in picoseconds, written into `times`.
struct Numeric {
  using Time = Ps;
  const Ps* duration;
  const Ps* busy;
  TaskTime* times;
  Ps* queues[4];  // by Queue: core free, -, channel free, link free
  Ps makespan = 0;

  Ps& free(Queue q, int r) const { return queues[static_cast<int>(q)][r]; }
  static Ps Origin() { return 0; }
  Ps EndOf(uint32_t d) const { return times[d].end_ps; }
  Ps FreeAt(Queue q, int r) const { return free(q, r); }
  static Ps Later(Ps a, Ps b) { return std::max(a, b); }
  Ps Finish(size_t i, Ps start) {
    const Ps end = SatAdd(start, duration[i]);
    times[i] = TaskTime{start, end};
    makespan = std::max(makespan, end);
    return end;
  }
  void Release(size_t i, Queue q, int r, Ps start, Ps end) {
    free(q, r) = q == Queue::kCompute ? end : SatAdd(start, busy[i]);
  }
};

void CheckSizes(const char* who, size_t n, std::span<const Ps> duration, std::span<const Ps> busy,
                size_t times) {
  if (duration.size() != n || busy.size() != n || times != n) {
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(duration.size()) + " durations, " +
                                std::to_string(busy.size()) + " busy times and " + std::to_string(times) +
                                " times for " + std::to_string(n) + " tasks");
  }
}

}  // namespace

Dispatcher::Dispatcher(const mapping::Program& p, std::vector<int32_t> first_link, int num_links) : p_(p) {
  const size_t n = p.num_tasks();
  if (!first_link.empty() && first_link.size() != n)
    throw std::invalid_argument("Dispatcher: " + std::to_string(first_link.size()) + " first links for " +
                                std::to_string(n) + " tasks");
  for (int32_t l : first_link)
    if (l >= num_links)
      throw std::invalid_argument("Dispatcher: link " + std::to_string(l) + " out of range");
  auto g = std::make_shared<Graph>();
  g->first_link = std::move(first_link);
  // Task d's dependents, in id order, as 16-bit steps from d (j - d < 0xffff), or 0xffff
  // then j in two halves: 2 bytes a dependent where most are near (the wafer's 4.5 million:
  // 9 MB, not 18). first_dependent[d] counts in those 16-bit units.
  auto units = [](size_t d, size_t j) { return j - d < Graph::kFar ? 1u : 3u; };
  g->first_dependent.assign(n + 1, 0);
  g->kind.resize(n);
  for (size_t i = 0; i < n; ++i) g->kind[i] = p.kind(i);
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t d : p.deps(i)) g->first_dependent[d + 1] += units(d, i);
  }
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    g->max_deps = std::max(g->max_deps, static_cast<uint32_t>(p.deps(i).size()));
    total += g->first_dependent[i + 1];
    if (total > UINT32_MAX) throw std::invalid_argument("Dispatcher: more than 2^32 - 1 units of dependents");
    g->first_dependent[i + 1] += g->first_dependent[i];
  }
  g->dependents.resize(g->first_dependent[n]);
  // Fill with first_dependent[d] as task d's cursor (then it is d + 1's start), and shift
  // the starts back: no second array of cursors.
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t d : p.deps(i)) {
      uint32_t& at = g->first_dependent[d];
      if (i - d < Graph::kFar) {
        g->dependents[at++] = static_cast<uint16_t>(i - d);
      } else {
        g->dependents[at++] = Graph::kFar;
        g->dependents[at++] = static_cast<uint16_t>(i >> 16);
        g->dependents[at++] = static_cast<uint16_t>(i & 0xffff);
      }
    }
  }
  for (size_t i = n; i > 0; --i) g->first_dependent[i] = g->first_dependent[i - 1];
  g->first_dependent[0] = 0;
  graph_ = std::move(g);
  Reset(num_links);
}

Dispatcher::Dispatcher(const Dispatcher& of, int) : p_(of.p_), graph_(of.graph_) { Reset(of.num_links_); }

void Dispatcher::Reset(int num_links) { num_links_ = std::max(0, num_links); }

Ps Dispatcher::Run(const TaskCosts& c, std::span<TaskTime> times) {
  const mapping::Program& p = p_;
  const std::vector<int32_t>& first_link = graph_->first_link;
  const uint32_t* first_dependent = graph_->first_dependent.data();
  const uint16_t* dependents = graph_->dependents.data();
  const mapping::TaskKind* kind = graph_->kind.data();
  const size_t n = p.num_tasks();
  const bool record = !times.empty();  // else only the makespan is wanted
  if (!c.by_key) {
    CheckSizes("Dispatcher", n, c.duration, c.busy, record ? times.size() : n);
  } else {
    if (c.key.size() != n || (record && times.size() != n) || c.duration.size() != c.busy.size())
      throw std::invalid_argument(
          "Dispatcher: " + std::to_string(c.key.size()) + " keys, " + std::to_string(c.duration.size()) +
          " durations, " + std::to_string(c.busy.size()) + " busy times and " + std::to_string(times.size()) +
          " times for " + std::to_string(n) + " tasks");
    for (uint32_t k : c.key)
      if (k >= c.duration.size())
        throw std::invalid_argument("Dispatcher: key " + std::to_string(k) + " of " +
                                    std::to_string(c.duration.size()));
  }
  const bool link_by_key = first_link.empty() && !c.first_link_of_key.empty();
  if (link_by_key) {
    if (!c.by_key || c.first_link_of_key.size() != c.duration.size())
      throw std::invalid_argument("Dispatcher: " + std::to_string(c.first_link_of_key.size()) +
                                  " first links by key for " + std::to_string(c.duration.size()) + " keys");
    for (int32_t l : c.first_link_of_key)
      if (l >= num_links_)
        throw std::invalid_argument("Dispatcher: link " + std::to_string(l) + " out of range");
  }
  // The first link of transfer i's route, -1 for none.
  auto link_of = [&](uint32_t i) -> int32_t {
    if (!first_link.empty()) return first_link[i];
    return link_by_key ? c.first_link_of_key[c.key[i]] : -1;
  };
  // Each task's deps not ended yet, in the narrowest counter that holds every task's count
  // (a byte on the shipped Programs: 1.6 MB, not 6.5, a schedule of the 1024-core wafer).
  const uint32_t max_deps = graph_->max_deps;
  unmet8_.assign(max_deps < 256 ? n : 0, 0);
  unmet16_.assign(max_deps >= 256 && max_deps < 65536 ? n : 0, 0);
  unmet32_.assign(max_deps >= 65536 ? n : 0, 0);
  auto ended_dep = [&](uint32_t j) {  // one more dep of task j ended: true when it was the last
    if (!unmet8_.empty()) return --unmet8_[j] == 0;
    if (!unmet16_.empty()) return --unmet16_[j] == 0;
    return --unmet32_[j] == 0;
  };
  q_.Reset(static_cast<size_t>(std::max(0, p.num_cores)), static_cast<size_t>(std::max(0, p.num_channels)),
           static_cast<size_t>(num_links_));
  for (size_t i = 0; i < n; ++i) {
    const size_t deps = p.deps(i).size();
    if (deps == 0) q_.Ready(static_cast<uint32_t>(i));
    if (!unmet8_.empty()) {
      unmet8_[i] = static_cast<uint8_t>(deps);
    } else if (!unmet16_.empty()) {
      unmet16_[i] = static_cast<uint16_t>(deps);
    } else {
      unmet32_[i] = static_cast<uint32_t>(deps);
    }
  }
  order_.clear();
  if (keep_order_) {
    order_.reserve(n);
  } else {
    order_.shrink_to_fit();
  }
  size_t started = 0;
  Ps makespan = 0;
  // The loop's view of the Program (sim/dispatch_loop.h).
  struct Source {
    Dispatcher& d;
    const mapping::Program& p;
    const TaskCosts& c;
    std::span<TaskTime> times;
    const decltype(link_of)& link;
    const mapping::TaskKind* kind;
    bool record;
    size_t& started;
    Ps& makespan;
    Queue QueueOf(uint32_t i) const {
      const mapping::TaskKind k = kind[i];
      return k == mapping::TaskKind::kTransfer && link(i) >= 0 ? Queue::kLink : sim::QueueOf(k);
    }
    int32_t ResourceOf(uint32_t i, Queue q) const {
      return q == Queue::kCompute ? p.core(i)
             : q == Queue::kDram  ? static_cast<int32_t>(p.memory(i).channel)
                                  : link(i);
    }
    Ps BusyOf(uint32_t i) const { return c.busy_of(i); }
    // Called at event time `at` (a queued task's start is an event of its own), so the
    // finisher reserves links in the order of starts; when it was decided is not needed.
    bool Start(uint32_t i, Ps at, Ps) {
      const Ps end = d.finish_ && kind[i] != mapping::TaskKind::kCompute ? d.finish_(i, at, at)
                                                                         : SatAdd(at, c.duration_of(i));
      if (record) times[i] = TaskTime{at, end};
      makespan = std::max(makespan, end);
      if (d.keep_order_) d.order_.push_back(i);
      ++started;
      d.q_.AddEnd(end, i);
      return true;
    }
  } src{*this, p, c, times, link_of, kind, record, started, makespan};
  Ps now = 0;
  for (;;) {
    q_.StartReady(now, src);
    if (q_.idle()) break;
    // Every task that ends at the next event time, before any decision at that time.
    q_.TakeEnded(&now, [&](uint32_t i) {
      if (kind[i] == mapping::TaskKind::kCompute) q_.CoreFree(p.core(i));
      for (uint32_t k = first_dependent[i]; k < first_dependent[i + 1];) {
        uint32_t j = i + dependents[k++];
        if (dependents[k - 1] == Graph::kFar) {
          j = uint32_t{dependents[k]} << 16 | dependents[k + 1];
          k += 2;
        }
        if (ended_dep(j)) q_.Ready(j);
      }
      return true;
    });
  }
  if (started != n) throw std::logic_error("Dispatcher: a task was never ready (a dep cycle)");
  return makespan;
}

std::vector<Ps> ReplayEnds(const mapping::Program& p, std::span<const uint32_t> order,
                           std::span<const Ps> duration, std::span<const Ps> busy,
                           std::span<const int32_t> first_link, int num_links) {
  const size_t n = p.num_tasks();
  std::vector<TaskTime> times(n);
  CheckSizes("ReplayEnds", n, duration, busy, n);
  if (order.size() != n) throw std::invalid_argument("ReplayEnds: the order does not hold every task once");
  std::vector<Ps> core_free(static_cast<size_t>(std::max(0, p.num_cores)), 0);
  std::vector<Ps> channel_free(static_cast<size_t>(std::max(0, p.num_channels)), 0);
  std::vector<Ps> link_free(static_cast<size_t>(std::max(0, num_links)), 0);
  Numeric a{duration.data(),
            busy.data(),
            times.data(),
            {core_free.data(), nullptr, channel_free.data(), link_free.data()}};
  ListSchedule(ProgramGraph{p, order, first_link}, a);
  std::vector<Ps> end(n);
  for (size_t i = 0; i < n; ++i) end[i] = times[i].end_ps;
  return end;
}

namespace {

// The tasks with a queue (compute: a core; memory: a channel) in id order, and for each the
// task before it in its queue in (start, id) order, -1 when none.
struct QueuedTasks {
  std::vector<uint32_t> ids;
  std::vector<int64_t> prev;  // parallel to ids
  // The task before task i in its queue, -1 when none (or when i has no queue).
  int64_t PrevOf(size_t i) const {
    const auto it = std::lower_bound(ids.begin(), ids.end(), static_cast<uint32_t>(i));
    return it != ids.end() && *it == i ? prev[static_cast<size_t>(it - ids.begin())] : -1;
  }
};

// Tasks are bucketed by queue in id order and a bucket is sorted only when its starts are not
// already in order, which gives what one sort of (queue, start, id) tuples gives, without
// sorting every task. Kept per queued task, not per task (the wafer has 114,688 of 1.6 million).
QueuedTasks PrevInQueue(const mapping::Program& g, std::span<const TaskTime> times) {
  QueuedTasks out;
  std::vector<uint32_t>& ids = out.ids;  // tasks with a queue, in id order
  std::vector<int64_t> resource;         // their core (compute) or channel (memory)
  std::vector<uint8_t> memory;           // 1 for a channel
  int64_t lo[2] = {0, 0}, hi[2] = {-1, -1};
  for (size_t i = 0; i < g.num_tasks(); ++i) {
    const Queue q = QueueOf(g.kind(i));
    if (q == Queue::kNone) continue;
    const int m = q == Queue::kDram ? 1 : 0;
    const int64_t r = m ? g.memory(i).channel : g.core(i);
    ids.push_back(static_cast<uint32_t>(i));
    resource.push_back(r);
    memory.push_back(static_cast<uint8_t>(m));
    if (hi[m] < lo[m]) lo[m] = hi[m] = r;
    lo[m] = std::min(lo[m], r);
    hi[m] = std::max(hi[m], r);
  }
  if (ids.empty()) return out;
  out.prev.assign(ids.size(), -1);
  const size_t span0 = static_cast<size_t>(hi[0] - lo[0] + 1);
  const size_t span1 = static_cast<size_t>(hi[1] - lo[1] + 1);
  auto bucket = [&](size_t j) {
    return memory[j] ? span0 + static_cast<size_t>(resource[j] - lo[1])
                     : static_cast<size_t>(resource[j] - lo[0]);
  };
  std::vector<uint32_t> begin(span0 + span1 + 1, 0);
  for (size_t j = 0; j < ids.size(); ++j) ++begin[bucket(j) + 1];
  for (size_t b = 1; b < begin.size(); ++b) begin[b] += begin[b - 1];
  std::vector<uint32_t> order(ids.size());  // positions into ids, bucket by bucket
  std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
  for (size_t j = 0; j < ids.size(); ++j) order[fill[bucket(j)]++] = static_cast<uint32_t>(j);
  auto by_start = [&](uint32_t a, uint32_t b) {  // positions; ids rise with them
    const Ps sa = times[ids[a]].start_ps, sb = times[ids[b]].start_ps;
    return sa != sb ? sa < sb : a < b;
  };
  for (size_t b = 0; b + 1 < begin.size(); ++b) {
    auto first = order.begin() + begin[b], last = order.begin() + begin[b + 1];
    if (!std::is_sorted(first, last, by_start)) std::sort(first, last, by_start);
    for (auto it = first; it != last && it + 1 != last; ++it) out.prev[*(it + 1)] = ids[*it];
  }
  return out;
}

}  // namespace

void AddChannelWaits(const mapping::Program& p, std::span<const TaskTime> times,
                     std::vector<ChannelUsage>* channels) {
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    if (p.kind(i) != mapping::TaskKind::kMemory) continue;
    Ps ready = 0;
    for (uint32_t d : p.deps(i)) ready = std::max(ready, times[d].end_ps);
    Ps& q = (*channels)[p.memory(i).channel].max_queue_ps;
    q = std::max(q, times[i].start_ps - ready);
  }
}

int PathKind(const mapping::Program& g, size_t i) {
  if (CollectiveKernel(g, i)) return static_cast<int>(mapping::TaskKind::kTransfer);
  return static_cast<int>(g.kind(i));
}

CriticalPathSplit CriticalPath(const mapping::Program& g, std::span<const TaskTime> times) {
  CriticalPathSplit split;
  const size_t n = g.num_tasks();
  if (n == 0) return split;
  if (times.size() != n) {
    throw std::invalid_argument("CriticalPath: " + std::to_string(times.size()) + " times for " +
                                std::to_string(n) + " tasks");
  }
  const QueuedTasks queued = PrevInQueue(g, times);
  size_t cur = 0;
  for (size_t i = 1; i < n; ++i) {
    if (times[i].end_ps > times[cur].end_ps) cur = i;
  }
  std::vector<bool> visited(n, false);
  Ps by_kind[3] = {0, 0, 0};
  while (!visited[cur]) {
    visited[cur] = true;
    int64_t best = -1;
    // An enabler ends no later than the task it enables (a dep always does; a DRAM request
    // may end after the next one on its channel when its network path is slower, and is then
    // passed over), so the parts below add up to the makespan.
    auto consider = [&](int64_t c) {
      if (c < 0 || static_cast<size_t>(c) >= n || times[c].end_ps > times[cur].end_ps) return;
      if (best < 0 || times[c].end_ps > times[best].end_ps ||
          (times[c].end_ps == times[best].end_ps && c < best)) {
        best = c;
      }
    };
    for (uint32_t d : g.deps(cur)) consider(d);
    consider(queued.PrevOf(cur));
    // Overlapping spans (a queued DRAM request, an engine that reports issue time as start) are
    // never counted twice (PathPart). Counted from the task's start, the waits PathPart gives
    // the task were nobody's: 12.5% of mesh-4x4-hbm-qwen3-0.6b's makespan at batch 1000 on the
    // analytical engine, whose tasks start when they get their queue (the TLM engine's did at
    // issue until 2026-12-06; both now start them when their queue takes them).
    by_kind[PathKind(g, cur)] += PathPart(times[cur].end_ps, best >= 0 ? &times[best].end_ps : nullptr);
    if (best < 0) break;
    cur = static_cast<size_t>(best);
  }
  split.compute_ps = by_kind[static_cast<int>(mapping::TaskKind::kCompute)];
  split.communication_ps = by_kind[static_cast<int>(mapping::TaskKind::kTransfer)];
  split.memory_ps = by_kind[static_cast<int>(mapping::TaskKind::kMemory)];
  return split;
}

}  // namespace tpsim::sim
