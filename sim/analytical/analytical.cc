#include "sim/analytical/analytical.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tpsim::sim {

namespace {

using mapping::Task;
using mapping::TaskKind;

bool IsGemmKind(llm::OpKind k) {
  return k == llm::OpKind::kGemm || k == llm::OpKind::kBatchedGemm || k == llm::OpKind::kRouter;
}

// Serialisation of `bytes` at `gbps` (bytes per ns), rounded up to a picosecond.
Ps SerialisationPs(uint64_t bytes, double gbps) {
  if (bytes == 0 || gbps <= 0) return 0;
  const double ps = std::ceil(static_cast<double>(bytes) * 1000.0 / gbps);
  // Saturate: converting a double past int64's range is undefined behaviour.
  if (!(ps < static_cast<double>(std::numeric_limits<Ps>::max()))) return std::numeric_limits<Ps>::max();
  return static_cast<Ps>(ps);
}

// Routes between core pairs, computed once per Run and stored flat.
class RouteCache {
 public:
  explicit RouteCache(const arch::Chip& chip) : chip_(chip) {}
  struct Span {
    uint32_t begin, size;
  };
  Span Get(int src, int dst) {
    const int64_t key = static_cast<int64_t>(src) * chip_.num_nodes() + dst;
    auto [it, inserted] = index_.try_emplace(key, Span{0, 0});
    if (inserted) {
      const std::vector<int> route = chip_.Route(src, dst);
      it->second = Span{static_cast<uint32_t>(links_.size()), static_cast<uint32_t>(route.size())};
      links_.insert(links_.end(), route.begin(), route.end());
    }
    return it->second;
  }
  const int* data() const { return links_.data(); }

 private:
  const arch::Chip& chip_;
  std::unordered_map<int64_t, Span> index_;  // order never reaches output
  std::vector<int> links_;
};

Ps SatAdd(Ps a, Ps b) {
  Ps r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<Ps>::max() : r;
}

// bytes * factor rounded up, saturating.
uint64_t ScaleBytes(uint64_t bytes, double factor) {
  const double x = std::ceil(static_cast<double>(bytes) * factor);
  return x >= 18446744073709549568.0 ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(x);
}

[[noreturn]] void ThrowBadDep(const Task& t, uint32_t dep, size_t n) {
  std::string msg = "analytical engine: task " + std::to_string(t.id) + " (core " + std::to_string(t.core) +
                    ") depends on task " + std::to_string(dep);
  if (dep >= n) {
    msg += ", which does not exist (the Program has " + std::to_string(n) + " tasks)";
  } else {
    msg += ", which is not an earlier task: the Program is not topologically ordered or has a cycle";
  }
  throw StallError(msg);
}

void CheckTask(const Task& t, size_t index, size_t n, int num_cores, int num_channels) {
  if (t.id != index) {
    throw StallError("analytical engine: the task at index " + std::to_string(index) + " has id " +
                     std::to_string(t.id) + " (ids must equal positions)");
  }
  for (uint32_t d : t.deps) {
    if (d >= t.id || d >= n) ThrowBadDep(t, d, n);
  }
  auto bad = [&](const std::string& what, int value) {
    throw std::invalid_argument("analytical engine: task " + std::to_string(t.id) + ": " + what + " " +
                                std::to_string(value) + " out of range");
  };
  if (t.core < 0 || t.core >= num_cores) bad("core", t.core);
  if (t.kind == TaskKind::kTransfer && (t.dst_core < 0 || t.dst_core >= num_cores)) {
    bad("dst_core", t.dst_core);
  }
  if (t.kind == TaskKind::kMemory && (t.channel < 0 || t.channel >= num_channels)) bad("channel", t.channel);
}

}  // namespace

EngineOutput AnalyticalEngine::Run(const mapping::Program& program, const arch::Chip& chip) {
  const std::vector<Task>& tasks = program.tasks;
  const size_t n = tasks.size();
  const int num_cores = chip.num_cores();
  const auto& links = chip.links();
  const auto& channels = chip.channels();
  const int num_channels = static_cast<int>(channels.size());

  EngineOutput out;
  out.tasks.resize(n);
  out.links.resize(links.size());
  out.channels.resize(channels.size());

  for (size_t i = 0; i < n; ++i) CheckTask(tasks[i], i, n, num_cores, num_channels);

  // ---- Durations.
  std::vector<Ps> duration(n, 0);
  RouteCache routes(chip);
  std::vector<RouteCache::Span> route_of(n, RouteCache::Span{0, 0});
  std::vector<uint32_t> grouped;  // transfers of a collective, sorted by (collective, step, id)
  std::vector<std::pair<int, int>> channel_cores;  // (channel, core) of every memory task
  std::vector<uint32_t> in_switch;  // transfers through the switch engine (Task::in_switch_gbps)

  for (size_t i = 0; i < n; ++i) {
    const Task& t = tasks[i];
    switch (t.kind) {
      case TaskKind::kCompute:
        duration[i] = IsGemmKind(t.op_kind) ? chip.GemmTime(t.batch, t.m, t.n, t.k, t.bytes)
                                            : chip.VectorTime(t.vector_ops, t.bytes);
        break;
      case TaskKind::kTransfer:
        if (t.core != t.dst_core) {
          route_of[i] = routes.Get(t.core, t.dst_core);
          if (t.in_switch_gbps > 0) {
            in_switch.push_back(static_cast<uint32_t>(i));
          } else if (t.collective >= 0) {
            grouped.push_back(static_cast<uint32_t>(i));
          }
        }
        break;
      case TaskKind::kMemory:
        channel_cores.emplace_back(t.channel, t.core);
        break;
    }
  }

  // Link loads within each (collective, step).
  std::sort(grouped.begin(), grouped.end(), [&](uint32_t a, uint32_t b) {
    const Task& x = tasks[a];
    const Task& y = tasks[b];
    if (x.collective != y.collective) return x.collective < y.collective;
    if (x.coll_step != y.coll_step) return x.coll_step < y.coll_step;
    return a < b;
  });
  std::vector<double> factor(n, 1.0);  // equivalent-payload multiplier per transfer
  std::vector<uint32_t> load(links.size(), 0);
  const int* route_links = routes.data();
  for (size_t g = 0; g < grouped.size();) {
    size_t e = g + 1;
    while (e < grouped.size() && tasks[grouped[e]].collective == tasks[grouped[g]].collective &&
           tasks[grouped[e]].coll_step == tasks[grouped[g]].coll_step) {
      ++e;
    }
    if (e - g > 1) {
      for (size_t j = g; j < e; ++j) {
        const auto r = route_of[grouped[j]];
        for (uint32_t h = 0; h < r.size; ++h) ++load[route_links[r.begin + h]];
      }
      for (size_t j = g; j < e; ++j) {
        const auto r = route_of[grouped[j]];
        double bw_min = links[route_links[r.begin]].bandwidth_gbps;
        for (uint32_t h = 1; h < r.size; ++h)
          bw_min = std::min(bw_min, links[route_links[r.begin + h]].bandwidth_gbps);
        double f = 1.0;
        for (uint32_t h = 0; h < r.size; ++h) {
          const int l = route_links[r.begin + h];
          const double bw = links[l].bandwidth_gbps;
          const double fl = bw == bw_min ? static_cast<double>(load[l]) : load[l] * (bw_min / bw);
          f = std::max(f, fl);
        }
        factor[grouped[j]] = f;
      }
      for (size_t j = g; j < e; ++j) {
        const auto r = route_of[grouped[j]];
        for (uint32_t h = 0; h < r.size; ++h) load[route_links[r.begin + h]] = 0;
      }
    }
    g = e;
  }

  // In-switch transfers (program.h): no link bandwidth or contention; the source
  // core's switch port carries the bytes of all its in-switch transfers of one
  // (collective, step), and each of them ends when the port has sent them all.
  std::sort(in_switch.begin(), in_switch.end(), [&](uint32_t a, uint32_t b) {
    const Task& x = tasks[a];
    const Task& y = tasks[b];
    if (x.collective != y.collective) return x.collective < y.collective;
    if (x.coll_step != y.coll_step) return x.coll_step < y.coll_step;
    if (x.core != y.core) return x.core < y.core;
    return a < b;
  });
  for (size_t g = 0; g < in_switch.size();) {
    const Task& first = tasks[in_switch[g]];
    size_t e = g + 1;
    uint64_t port_bytes = first.bytes;
    while (first.collective >= 0 && e < in_switch.size() &&
           tasks[in_switch[e]].collective == first.collective &&
           tasks[in_switch[e]].coll_step == first.coll_step && tasks[in_switch[e]].core == first.core) {
      port_bytes = std::min(std::numeric_limits<uint64_t>::max() - tasks[in_switch[e]].bytes, port_bytes) +
                   tasks[in_switch[e]].bytes;
      ++e;
    }
    for (size_t j = g; j < e; ++j) {
      const uint32_t i = in_switch[j];
      const auto r = route_of[i];
      Ps latency = 0;
      for (uint32_t h = 0; h < r.size; ++h)
        latency = SatAdd(latency, links[route_links[r.begin + h]].latency_ps);
      duration[i] =
          tasks[i].bytes == 0 ? 0 : SatAdd(latency, SerialisationPs(port_bytes, tasks[i].in_switch_gbps));
    }
    g = e;
  }

  for (size_t i = 0; i < n; ++i) {
    const Task& t = tasks[i];
    if (t.kind != TaskKind::kTransfer || t.core == t.dst_core || t.in_switch_gbps > 0) continue;
    const Ps alone = chip.TransferTime(t.core, t.dst_core, t.bytes);
    Ps extra = 0;
    if (factor[i] > 1.0) {
      duration[i] = chip.TransferTime(t.core, t.dst_core, ScaleBytes(t.bytes, factor[i]));
      extra = duration[i] - alone;
    } else {
      duration[i] = alone;
    }
    const auto r = route_of[i];
    for (uint32_t h = 0; h < r.size; ++h) {
      const int l = route_links[r.begin + h];
      LinkUsage& u = out.links[l];
      u.bytes += t.bytes;
      u.busy_ps = SatAdd(u.busy_ps, SerialisationPs(t.bytes, links[l].bandwidth_gbps));
      u.max_queue_ps = std::max(u.max_queue_ps, extra);
    }
  }

  // DRAM channels shared by the distinct cores that use them.
  std::sort(channel_cores.begin(), channel_cores.end());
  channel_cores.erase(std::unique(channel_cores.begin(), channel_cores.end()), channel_cores.end());
  std::vector<uint64_t> sharers(channels.size(), 0);
  for (const auto& [c, core] : channel_cores) ++sharers[c];
  // Memory data crossing network links: every link counts the distinct
  // (core, channel, direction) flows whose path uses it, over the whole Program.
  std::vector<std::tuple<int, int, bool>> flows;
  for (const Task& t : tasks) {
    if (t.kind == TaskKind::kMemory) flows.emplace_back(t.core, t.channel, t.write);
  }
  std::sort(flows.begin(), flows.end());
  flows.erase(std::unique(flows.begin(), flows.end()), flows.end());
  std::vector<uint32_t> flow_load(links.size(), 0);
  std::map<std::tuple<int, int, bool>, std::vector<int>> paths;
  for (const auto& f : flows) {
    std::vector<int> path = chip.MemoryPath(std::get<0>(f), std::get<1>(f), std::get<2>(f));
    for (int l : path) ++flow_load[l];
    if (!path.empty()) paths.emplace(f, std::move(path));
  }
  for (size_t i = 0; i < n; ++i) {
    const Task& t = tasks[i];
    if (t.kind != TaskKind::kMemory) continue;
    // Stacked channels: DramTime; others also cross the network path (arch/chip.h MemoryTime),
    // whose links the other memory flows over them share.
    const Ps dram_alone = chip.DramTime(t.channel, t.bytes);
    const uint64_t share = std::max<uint64_t>(1, sharers[t.channel]);
    const Ps alone = chip.MemoryTime(t.core, t.channel, t.bytes, t.write);
    auto path = paths.find({t.core, t.channel, t.write});
    double f = 1.0;
    if (path != paths.end()) {
      double bw_min = links[path->second[0]].bandwidth_gbps;
      for (int l : path->second) bw_min = std::min(bw_min, links[l].bandwidth_gbps);
      for (int l : path->second) f = std::max(f, flow_load[l] * (bw_min / links[l].bandwidth_gbps));
    }
    duration[i] =
        share > 1 || f > 1.0 ? chip.MemoryTime(t.core, t.channel, t.bytes, t.write, share, f) : alone;
    ChannelUsage& u = out.channels[t.channel];
    u.bytes += t.bytes;
    u.busy_ps = SatAdd(u.busy_ps, std::max<Ps>(0, dram_alone - channels[t.channel].latency_ps));
    u.max_queue_ps = std::max(u.max_queue_ps, duration[i] - alone);
    if (path == paths.end()) continue;
    for (int l : path->second) {
      LinkUsage& lu = out.links[l];
      lu.bytes += t.bytes;
      lu.busy_ps = SatAdd(lu.busy_ps, SerialisationPs(t.bytes, links[l].bandwidth_gbps));
    }
  }

  // ---- Schedule: one forward pass in id order.
  std::vector<Ps> core_free(num_cores, 0), dram_free(num_cores, 0);
  Ps makespan = 0;
  for (size_t i = 0; i < n; ++i) {
    const Task& t = tasks[i];
    Ps start = 0;
    for (uint32_t d : t.deps) start = std::max(start, out.tasks[d].end_ps);
    Ps* resource = t.kind == TaskKind::kCompute  ? &core_free[t.core]
                   : t.kind == TaskKind::kMemory ? &dram_free[t.core]
                                                 : nullptr;
    if (resource) start = std::max(start, *resource);
    const Ps end = SatAdd(start, duration[i]);
    if (resource) *resource = end;
    out.tasks[i] = TaskTime{start, end};
    makespan = std::max(makespan, end);
  }
  out.makespan_ps = makespan;
  return out;
}

std::unique_ptr<Engine> MakeAnalyticalEngine() { return std::make_unique<AnalyticalEngine>(); }

}  // namespace tpsim::sim
