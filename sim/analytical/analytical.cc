#include "sim/analytical/analytical.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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

// A compute task's arguments to the chip's cost functions: equal keys, equal times.
struct ShapeKey {
  bool gemm;
  uint64_t batch, m, n, k, bytes, vector_ops_bits;
  bool operator==(const ShapeKey&) const = default;
};
struct ShapeHash {
  size_t operator()(const ShapeKey& s) const {
    uint64_t h = s.gemm ? 1 : 2;
    for (uint64_t v : {s.batch, s.m, s.n, s.k, s.bytes, s.vector_ops_bits}) {
      h = (h ^ v) * 0x9e3779b97f4a7c15ull;
      h ^= h >> 29;
    }
    return static_cast<size_t>(h);
  }
};
ShapeKey ShapeOf(const Task& t) {
  if (IsGemmKind(t.op_kind)) return ShapeKey{true, t.batch, t.m, t.n, t.k, t.bytes, 0};
  uint64_t ops_bits;
  static_assert(sizeof ops_bits == sizeof t.vector_ops);
  std::memcpy(&ops_bits, &t.vector_ops, sizeof ops_bits);
  return ShapeKey{false, 0, 0, 0, 0, t.bytes, ops_bits};
}

Ps SatAdd(Ps a, Ps b) {
  Ps r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<Ps>::max() : r;
}

// a * count, saturating (a >= 0).
Ps SatMulPs(Ps a, uint64_t count) {
  Ps r;
  if (count > static_cast<uint64_t>(std::numeric_limits<Ps>::max()))
    return a == 0 ? 0 : std::numeric_limits<Ps>::max();
  return __builtin_mul_overflow(a, static_cast<Ps>(count), &r) ? std::numeric_limits<Ps>::max() : r;
}

// bytes * factor rounded up, saturating.
uint64_t ScaleBytes(uint64_t bytes, double factor) {
  const double x = std::ceil(static_cast<double>(bytes) * factor);
  return x >= 18446744073709549568.0 ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(x);
}

// TransferTime memoised for one Run (for transfers whose payload sharing scaled):
// equal arguments give equal times, so a lookup replaces the floating-point work
// and TransferTime's route walk. Open addressing; its order never reaches the output.
class CostMemo {
 public:
  explicit CostMemo(const arch::Chip& chip) : chip_(chip), slots_(1024) {}
  Ps Transfer(int src, int dst, uint64_t bytes) {
    return Get(Key{kTransfer, static_cast<uint64_t>(src), static_cast<uint64_t>(dst), bytes, 0, 0},
               [&] { return chip_.TransferTime(src, dst, bytes); });
  }

 private:
  enum Fn : uint64_t { kTransfer = 1 };
  struct Key {
    uint64_t fn, a, b, c, d, e;
    bool operator==(const Key&) const = default;
  };
  struct Slot {
    Key key{};  // fn == 0: empty
    Ps value = 0;
  };
  static uint64_t Hash(const Key& k) {
    uint64_t h = k.fn;
    for (uint64_t v : {k.a, k.b, k.c, k.d, k.e}) {
      h = (h ^ v) * 0x9e3779b97f4a7c15ull;
      h ^= h >> 29;
    }
    return h;
  }
  template <class F>
  Ps Get(const Key& key, F compute) {
    size_t mask = slots_.size() - 1;
    for (size_t i = Hash(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.key == key) return s.value;
      if (s.key.fn == 0) break;
    }
    const Ps value = compute();
    if (2 * (used_ + 1) > slots_.size()) Grow();
    mask = slots_.size() - 1;
    size_t i = Hash(key) & mask;
    while (slots_[i].key.fn != 0) i = (i + 1) & mask;
    slots_[i] = Slot{key, value};
    ++used_;
    return value;
  }
  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    const size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.key.fn == 0) continue;
      size_t i = Hash(s.key) & mask;
      while (slots_[i].key.fn != 0) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
  const arch::Chip& chip_;
  std::vector<Slot> slots_;  // a power of two, at most half full
  size_t used_ = 0;
};

// Sorts `v` with `less` unless it already is (Programs emit most groups in order).
template <class Less>
void SortIfNeeded(std::vector<uint32_t>& v, Less less) {
  if (!std::is_sorted(v.begin(), v.end(), less)) std::sort(v.begin(), v.end(), less);
}

}  // namespace

std::shared_ptr<const AnalyticalPlan> PlanAnalytical(const mapping::Program& program,
                                                     const arch::Chip& chip) {
  const mapping::Program::TaskRange tasks = program.tasks();
  const size_t n = tasks.size();
  auto plan = std::make_shared<AnalyticalPlan>();
  AnalyticalPlan& p = *plan;
  p.num_cores = chip.num_cores();
  p.num_channels = static_cast<int>(chip.channels().size());
  // The Program was verified when it was built (mapping::Verify); it must fit the chip.
  mapping::VerifyFits(program, p.num_cores, p.num_channels);
  p.num_tasks = n;
  p.shape_of.assign(n, 0);
  std::unordered_map<ShapeKey, uint32_t, ShapeHash> shape_index;  // order never reaches output
  std::vector<std::pair<int, int>> channel_cores;                 // (channel, core) of every memory task
  // Indices are given in task order; the maps only look them up.
  std::unordered_map<uint64_t, uint32_t> pair_index;
  for (size_t i = 0; i < n; ++i) {
    const Task& t = tasks[i];
    switch (t.kind) {
      case TaskKind::kCompute: {
        auto [it, inserted] = shape_index.try_emplace(ShapeOf(t), static_cast<uint32_t>(p.shapes.size()));
        if (inserted) p.shapes.push_back(static_cast<uint32_t>(i));
        p.shape_of[i] = it->second;
        break;
      }
      case TaskKind::kTransfer:
        if (t.core != t.dst_core) {
          auto [it, inserted] =
              pair_index.try_emplace((static_cast<uint64_t>(static_cast<uint32_t>(t.core)) << 32) |
                                         static_cast<uint32_t>(t.dst_core),
                                     static_cast<uint32_t>(p.pairs.size()));
          if (inserted) p.pairs.emplace_back(t.core, t.dst_core);
          p.shape_of[i] = it->second;
          if (t.in_switch_gbps > 0) {
            p.in_switch.push_back(static_cast<uint32_t>(i));
          } else {
            p.linked.push_back(static_cast<uint32_t>(i));
            if (t.collective >= 0) p.grouped.push_back(static_cast<uint32_t>(i));
          }
        }
        break;
      case TaskKind::kMemory:
        p.memory.push_back(static_cast<uint32_t>(i));
        channel_cores.emplace_back(t.channel, t.core);
        break;
    }
  }
  // Transfers of a collective step, by (collective, step, id); in-switch ones also by core.
  SortIfNeeded(p.grouped, [&](uint32_t a, uint32_t b) {
    const Task& x = tasks[a];
    const Task& y = tasks[b];
    if (x.collective != y.collective) return x.collective < y.collective;
    if (x.coll_step != y.coll_step) return x.coll_step < y.coll_step;
    return a < b;
  });
  for (size_t g = 0; g < p.grouped.size();) {
    size_t e = g + 1;
    while (e < p.grouped.size() && tasks[p.grouped[e]].collective == tasks[p.grouped[g]].collective &&
           tasks[p.grouped[e]].coll_step == tasks[p.grouped[g]].coll_step) {
      ++e;
    }
    if (e - g > 1) p.group_spans.emplace_back(static_cast<uint32_t>(g), static_cast<uint32_t>(e));
    g = e;
  }
  SortIfNeeded(p.in_switch, [&](uint32_t a, uint32_t b) {
    const Task& x = tasks[a];
    const Task& y = tasks[b];
    if (x.collective != y.collective) return x.collective < y.collective;
    if (x.coll_step != y.coll_step) return x.coll_step < y.coll_step;
    if (x.core != y.core) return x.core < y.core;
    return a < b;
  });
  // DRAM channels shared by the distinct cores that use them.
  std::sort(channel_cores.begin(), channel_cores.end());
  channel_cores.erase(std::unique(channel_cores.begin(), channel_cores.end()), channel_cores.end());
  p.sharers.assign(p.num_channels, 0);
  for (const auto& [c, core] : channel_cores) ++p.sharers[c];
  // Distinct (pair, bytes) of linked transfers and (channel, bytes) of memory tasks.
  std::unordered_map<ShapeKey, uint32_t, ShapeHash> transfer_index;  // (pair, bytes) as a ShapeKey
  for (uint32_t i : p.linked) {
    auto [it, inserted] =
        transfer_index.try_emplace(ShapeKey{false, p.shape_of[i], tasks[i].bytes, 0, 0, 0, 0},
                                   static_cast<uint32_t>(p.transfer_keys.size()));
    if (inserted) p.transfer_keys.push_back({i, 0});
    ++p.transfer_keys[it->second].count;
    p.transfer_key_of.push_back(it->second);
  }
  std::unordered_map<ShapeKey, uint32_t, ShapeHash> memory_index;  // (core, channel, write, bytes)
  for (uint32_t i : p.memory) {
    const Task& t = tasks[i];
    auto [it, inserted] = memory_index.try_emplace(
        ShapeKey{t.write, static_cast<uint64_t>(t.core), static_cast<uint64_t>(t.channel), t.bytes, 0, 0, 0},
        static_cast<uint32_t>(p.memory_keys.size()));
    if (inserted) p.memory_keys.push_back({i, 0});
    ++p.memory_keys[it->second].count;
    p.memory_key_of.push_back(it->second);
    p.memory_flows.emplace_back(t.core, t.channel, t.write);
  }
  std::sort(p.memory_flows.begin(), p.memory_flows.end());
  p.memory_flows.erase(std::unique(p.memory_flows.begin(), p.memory_flows.end()), p.memory_flows.end());
  return plan;
}

EngineOutput AnalyticalEngine::Run(const mapping::Program& program, const arch::Chip& chip) {
  return RunAnalytical(program, *PlanAnalytical(program, chip), chip);
}

EngineOutput RunAnalytical(const mapping::Program& program, const AnalyticalPlan& plan,
                           const arch::Chip& chip) {
  const mapping::Program::TaskRange tasks = program.tasks();
  const size_t n = tasks.size();
  const int num_cores = chip.num_cores();
  const auto& links = chip.links();
  const auto& channels = chip.channels();
  if (plan.num_tasks != n || plan.num_cores != num_cores ||
      plan.num_channels != static_cast<int>(channels.size())) {
    throw std::invalid_argument("analytical engine: the plan was made for another Program or chip layout");
  }

  EngineOutput out;
  out.tasks.resize(n);
  out.links.resize(links.size());
  out.channels.resize(channels.size());

  // ---- Durations: compute from each distinct shape's time.
  std::vector<Ps> duration(n, 0);
  {
    std::vector<Ps> shape_time(plan.shapes.size());
    for (size_t s = 0; s < plan.shapes.size(); ++s) {
      const Task& t = tasks[plan.shapes[s]];
      shape_time[s] = IsGemmKind(t.op_kind) ? chip.GemmTime(t.batch, t.m, t.n, t.k, t.bytes)
                                            : chip.VectorTime(t.vector_ops, t.bytes);
    }
    for (size_t i = 0; i < n; ++i) {
      if (program.kind(i) == TaskKind::kCompute) duration[i] = shape_time[plan.shape_of[i]];
    }
  }
  // Routes of the distinct (src, dst) pairs, stored flat.
  std::vector<int> route_links;
  std::vector<std::pair<uint32_t, uint32_t>> pair_route(plan.pairs.size());  // (begin, size)
  for (size_t q = 0; q < plan.pairs.size(); ++q) {
    const std::vector<int> r = chip.Route(plan.pairs[q].first, plan.pairs[q].second);
    pair_route[q] = {static_cast<uint32_t>(route_links.size()), static_cast<uint32_t>(r.size())};
    route_links.insert(route_links.end(), r.begin(), r.end());
  }
  auto route_of = [&](uint32_t i) { return pair_route[plan.shape_of[i]]; };
  CostMemo memo(chip);

  // Link loads within each (collective, step).
  std::vector<double> factor(plan.grouped.size(), 1.0);  // equivalent-payload multiplier, by grouped index
  std::vector<uint32_t> load(links.size(), 0);
  for (const auto& [g, e] : plan.group_spans) {
    for (size_t j = g; j < e; ++j) {
      const auto [rb, rs] = route_of(plan.grouped[j]);
      for (uint32_t h = 0; h < rs; ++h) ++load[route_links[rb + h]];
    }
    for (size_t j = g; j < e; ++j) {
      const auto [rb, rs] = route_of(plan.grouped[j]);
      double bw_min = links[route_links[rb]].bandwidth_gbps;
      for (uint32_t h = 1; h < rs; ++h) bw_min = std::min(bw_min, links[route_links[rb + h]].bandwidth_gbps);
      double f = 1.0;
      for (uint32_t h = 0; h < rs; ++h) {
        const int l = route_links[rb + h];
        const double bw = links[l].bandwidth_gbps;
        const double fl = bw == bw_min ? static_cast<double>(load[l]) : load[l] * (bw_min / bw);
        f = std::max(f, fl);
      }
      factor[j] = f;
    }
    for (size_t j = g; j < e; ++j) {
      const auto [rb, rs] = route_of(plan.grouped[j]);
      for (uint32_t h = 0; h < rs; ++h) load[route_links[rb + h]] = 0;
    }
  }

  // In-switch transfers (program.h): no link bandwidth or contention; the source
  // core's switch port carries the bytes of all its in-switch transfers of one
  // (collective, step), and each of them ends when the port has sent them all.
  const std::vector<uint32_t>& in_switch = plan.in_switch;
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
      const auto [rb, rs] = route_of(i);
      Ps latency = 0;
      for (uint32_t h = 0; h < rs; ++h) latency = SatAdd(latency, links[route_links[rb + h]].latency_ps);
      duration[i] =
          tasks[i].bytes == 0 ? 0 : SatAdd(latency, SerialisationPs(port_bytes, tasks[i].in_switch_gbps));
    }
    g = e;
  }

  // Transfers over links. Equal (route, bytes) take equal time alone, so each
  // distinct one is timed once; a link's statistics are sums and maxima over its
  // transfers (saturating sums of non-negative terms), so adding a distinct
  // transfer's share `count` times at once gives what adding them one by one gives.
  std::vector<Ps> alone(plan.transfer_keys.size());
  for (size_t k = 0; k < plan.transfer_keys.size(); ++k) {
    const auto& key = plan.transfer_keys[k];
    const Task& t = tasks[key.task];
    alone[k] = chip.TransferTime(t.core, t.dst_core, t.bytes);
    const auto [rb, rs] = route_of(key.task);
    for (uint32_t h = 0; h < rs; ++h) {
      const int l = route_links[rb + h];
      LinkUsage& u = out.links[l];
      u.bytes += t.bytes * key.count;
      u.busy_ps = SatAdd(u.busy_ps, SatMulPs(SerialisationPs(t.bytes, links[l].bandwidth_gbps), key.count));
    }
  }
  for (size_t j = 0; j < plan.linked.size(); ++j) duration[plan.linked[j]] = alone[plan.transfer_key_of[j]];
  // Transfers slowed by sharing links with their step (factor > 1): `grouped` holds
  // a subset of `linked` in another order, so their keys are looked up by task id.
  if (!plan.grouped.empty()) {
    std::vector<uint32_t> key_of(n, 0);
    for (size_t j = 0; j < plan.linked.size(); ++j) key_of[plan.linked[j]] = plan.transfer_key_of[j];
    for (size_t j = 0; j < plan.grouped.size(); ++j) {
      if (!(factor[j] > 1.0)) continue;
      const uint32_t i = plan.grouped[j];
      const Task& t = tasks[i];
      duration[i] = memo.Transfer(t.core, t.dst_core, ScaleBytes(t.bytes, factor[j]));
      const Ps extra = duration[i] - alone[key_of[i]];
      const auto [rb, rs] = route_of(i);
      for (uint32_t h = 0; h < rs; ++h) {
        LinkUsage& u = out.links[route_links[rb + h]];
        u.max_queue_ps = std::max(u.max_queue_ps, extra);
      }
    }
  }

  // DRAM channels shared by the distinct cores that use them. Memory data crossing
  // network links: every link counts the distinct (core, channel, direction) flows
  // whose path uses it, over the whole Program. A memory task's time depends on its
  // (core, channel, direction, bytes) only, so each distinct one is timed once and
  // its statistics added `count` times at once (sums and maxima, as for transfers).
  const std::vector<uint64_t>& sharers = plan.sharers;
  std::vector<uint32_t> flow_load(links.size(), 0);
  std::map<std::tuple<int, int, bool>, std::vector<int>> paths;
  for (const auto& f : plan.memory_flows) {
    std::vector<int> path = chip.MemoryPath(std::get<0>(f), std::get<1>(f), std::get<2>(f));
    for (int l : path) ++flow_load[l];
    if (!path.empty()) paths.emplace(f, std::move(path));
  }
  std::vector<Ps> memory_time(plan.memory_keys.size());
  for (size_t k = 0; k < plan.memory_keys.size(); ++k) {
    const auto& key = plan.memory_keys[k];
    const Task& t = tasks[key.task];
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
    memory_time[k] =
        share > 1 || f > 1.0 ? chip.MemoryTime(t.core, t.channel, t.bytes, t.write, share, f) : alone;
    ChannelUsage& u = out.channels[t.channel];
    u.bytes += t.bytes * key.count;
    u.busy_ps =
        SatAdd(u.busy_ps, SatMulPs(std::max<Ps>(0, dram_alone - channels[t.channel].latency_ps), key.count));
    u.max_queue_ps = std::max(u.max_queue_ps, memory_time[k] - alone);
    if (path == paths.end()) continue;
    for (int l : path->second) {
      LinkUsage& lu = out.links[l];
      lu.bytes += t.bytes * key.count;
      lu.busy_ps = SatAdd(lu.busy_ps, SatMulPs(SerialisationPs(t.bytes, links[l].bandwidth_gbps), key.count));
    }
  }
  for (size_t j = 0; j < plan.memory.size(); ++j)
    duration[plan.memory[j]] = memory_time[plan.memory_key_of[j]];

  // ---- Schedule: one forward pass in id order.
  std::vector<Ps> core_free(num_cores, 0), dram_free(num_cores, 0);
  Ps makespan = 0;
  for (size_t i = 0; i < n; ++i) {
    Ps start = 0;
    for (uint32_t d : program.deps(i)) start = std::max(start, out.tasks[d].end_ps);
    const TaskKind kind = program.kind(i);
    Ps* resource = kind == TaskKind::kCompute  ? &core_free[program.core(i)]
                   : kind == TaskKind::kMemory ? &dram_free[program.core(i)]
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

namespace {
const EngineRegistrar kRegistered("analytical", "closed form: list schedule of the Program, no contention",
                                  &MakeAnalyticalEngine);
}  // namespace

}  // namespace tpsim::sim
