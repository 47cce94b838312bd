#include "sim/analytical/analytical.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mapping/cost.h"
#include "sim/analytical/links.h"
#include "sim/schedule.h"

namespace tpsim::sim {

namespace {

using mapping::Task;
using mapping::TaskKind;

using mapping::SerialisationPs;

// A compute task's arguments to the chip's cost functions (mapping/cost.h): equal keys, equal
// times. `unit`: kMatrixUnit (GemmTime, or the GPU GEMM model), kVectorUnit (vector_ops and
// bytes only), or kCollectiveKernel: on a GPU-node chip a collective kernel is timed by its kind
// (m), ranks (n) and algorithm (k) as well as its bytes (mapping::GpuCollectiveTime). Before the
// third, an all_gather took the time of the first collective kernel of its bytes, an all_reduce's.
enum : uint8_t { kMatrixUnit = 1, kVectorUnit = 2, kCollectiveKernel = 3 };
struct ShapeKey {
  uint8_t unit;
  uint64_t batch, m, n, k, bytes, vector_ops_bits;
  bool operator==(const ShapeKey&) const = default;
};
struct ShapeHash {
  size_t operator()(const ShapeKey& s) const {
    uint64_t h = s.unit;
    for (uint64_t v : {s.batch, s.m, s.n, s.k, s.bytes, s.vector_ops_bits}) {
      h = (h ^ v) * 0x9e3779b97f4a7c15ull;
      h ^= h >> 29;
    }
    return static_cast<size_t>(h);
  }
};
ShapeKey ShapeOf(const Task& t) {
  if (mapping::OnMatrixUnit(t.op_kind)) return ShapeKey{kMatrixUnit, t.batch, t.m, t.n, t.k, t.bytes, 0};
  if (t.op_kind == llm::OpKind::kCollective)
    return ShapeKey{kCollectiveKernel, t.batch, t.m, t.n, t.k, t.bytes, 0};
  uint64_t ops_bits;
  static_assert(sizeof ops_bits == sizeof t.vector_ops);
  std::memcpy(&ops_bits, &t.vector_ops, sizeof ops_bits);
  return ShapeKey{kVectorUnit, 0, 0, 0, 0, t.bytes, ops_bits};
}

using arch::SatAdd;

// a * count, saturating (a >= 0).
Ps SatMulPs(Ps a, uint64_t count) {
  Ps r;
  if (count > static_cast<uint64_t>(std::numeric_limits<Ps>::max()))
    return a == 0 ? 0 : std::numeric_limits<Ps>::max();
  return __builtin_mul_overflow(a, static_cast<Ps>(count), &r) ? std::numeric_limits<Ps>::max() : r;
}

// Sorts `v` with `less` unless it already is (Programs emit most groups in order).
template <class Less>
void SortIfNeeded(std::vector<uint32_t>& v, Less less) {
  if (!std::is_sorted(v.begin(), v.end(), less)) std::sort(v.begin(), v.end(), less);
}

// An empty FlowSet over the chip's links (their bandwidths and hop latencies).
FlowSet ChipFlowSet(const arch::Chip& chip) {
  std::vector<double> gbps;
  std::vector<Ps> latency;
  for (const auto& l : chip.links()) {
    gbps.push_back(l.bandwidth_gbps);
    latency.push_back(l.latency_ps);
  }
  return FlowSet(std::move(gbps), std::move(latency));
}

// The kind of flow (links.h) of a memory task `t` over `path` (not empty), entering it as
// links.h says.
uint32_t AddMemoryKind(const arch::Chip& chip, const mapping::MemoryDetail& t, Ps busy,
                       const std::vector<int>& path, FlowSet* flows) {
  return flows->AddKind(t.bytes, chip.channels()[t.channel].latency_ps, path.data(), path.size(), busy);
}

// The flows of links.h: linked transfers over their routes, memory tasks whose data crosses
// links (chip.MemoryPath not empty) over that path. A DRAM channel is not a shared resource
// here: the schedule queues its requests (sim/schedule.h), holding each for `busy`. One kind
// of flow per distinct transfer and memory key of the plan (`memory_busy`: per memory key),
// found by the tasks' cost keys: `num_keys` keys, transfer key k at `transfer_base` + k and
// memory key k at `memory_base` + k.
LinkModel BuildLinkModel(const mapping::Program& program, const AnalyticalPlan& plan, const arch::Chip& chip,
                         const std::vector<int>& route_links,
                         const std::vector<std::pair<uint32_t, uint32_t>>& pair_route,
                         const std::map<std::tuple<int, int, bool>, std::vector<int>>& paths,
                         const std::vector<Ps>& memory_busy, size_t num_keys, uint32_t transfer_base,
                         uint32_t memory_base) {
  LinkModel m{ChipFlowSet(chip), {}, std::vector<int32_t>(num_keys, -1)};
  std::vector<const std::vector<int>*> memory_path(plan.memory_keys.size(), nullptr);
  size_t kinds = plan.transfer_keys.size(), incidences = 0;
  for (const auto& key : plan.transfer_keys) incidences += pair_route[plan.shape_of[key.task]].second;
  for (size_t k = 0; k < plan.memory_keys.size(); ++k) {
    const uint32_t i = plan.memory_keys[k].task;
    auto path = paths.find({program.core(i), program.memory(i).channel, program.memory(i).write});
    if (path == paths.end()) continue;
    memory_path[k] = &path->second;
    ++kinds;
    incidences += path->second.size();
  }
  m.flows.Reserve(0, kinds, incidences);
  for (size_t k = 0; k < plan.transfer_keys.size(); ++k) {  // kind k = transfer key k
    const auto [rb, rs] = pair_route[plan.shape_of[plan.transfer_keys[k].task]];
    m.kind_of_key[transfer_base + k] = static_cast<int32_t>(
        m.flows.AddKind(program.transfer(plan.transfer_keys[k].task).bytes, 0, route_links.data() + rb, rs));
  }
  for (size_t k = 0; k < plan.memory_keys.size(); ++k) {
    if (memory_path[k]) {
      m.kind_of_key[memory_base + k] = static_cast<int32_t>(AddMemoryKind(
          chip, program.memory(plan.memory_keys[k].task), memory_busy[k], *memory_path[k], &m.flows));
    }
  }
  return m;
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
  // Room for every transfer and memory task at once: the lists fill it without the copies
  // and page faults of growing by doubling, and pages never written are not resident.
  size_t transfers = 0, memory = 0;
  for (const mapping::TaskRecord& r : program.records()) {
    transfers += r.kind == TaskKind::kTransfer;
    memory += r.kind == TaskKind::kMemory;
  }
  p.linked.reserve(transfers);
  p.transfer_key_of.reserve(transfers);
  p.memory.reserve(memory);
  std::unordered_map<ShapeKey, uint32_t, ShapeHash> shape_index;  // order never reaches output
  // Indices are given in task order; the maps only look them up.
  std::unordered_map<uint64_t, uint32_t> pair_index;
  std::unordered_map<ShapeKey, uint32_t, ShapeHash> transfer_index;  // (pair, bytes) as a ShapeKey
  // The Program stores each distinct compute shape and transfer shape once (mapping/program.h),
  // so the maps are asked once per stored shape (compute) or per stored shape and source
  // core (transfers: the cores of a ring send a shape from one neighbour), not once per task.
  constexpr uint32_t kNone = UINT32_MAX;
  const std::vector<mapping::TaskRecord>& records = program.records();
  std::vector<uint32_t> plan_shape_of_detail(program.shapes().size(), kNone);
  struct SeenTransfer {
    int32_t core = -1;  // the last source core seen with this transfer shape
    uint32_t pair = 0;
    uint32_t key = 0;  // its transfer key (a linked transfer's distinct (pair, bytes))
  };
  std::vector<SeenTransfer> seen(program.transfer_shapes().size());
  for (size_t i = 0; i < n; ++i) {
    const mapping::TaskRecord& r = records[i];
    switch (r.kind) {
      case TaskKind::kCompute: {
        uint32_t& memo = plan_shape_of_detail[r.detail];
        if (memo == kNone) {
          const Task t = tasks[i];
          auto [it, inserted] = shape_index.try_emplace(ShapeOf(t), static_cast<uint32_t>(p.shapes.size()));
          if (inserted) p.shapes.push_back(static_cast<uint32_t>(i));
          memo = it->second;
        }
        p.shape_of[i] = memo;
        break;
      }
      case TaskKind::kTransfer: {
        const mapping::TransferShape& shape = program.transfer(i);
        if (r.core == shape.dst_core) break;
        SeenTransfer& last = seen[program.transfer_shape_id(i)];
        if (last.core != r.core) {
          auto [it, inserted] =
              pair_index.try_emplace((static_cast<uint64_t>(static_cast<uint32_t>(r.core)) << 32) |
                                         static_cast<uint32_t>(shape.dst_core),
                                     static_cast<uint32_t>(p.pairs.size()));
          if (inserted) p.pairs.emplace_back(r.core, shape.dst_core);
          last = SeenTransfer{r.core, it->second, 0};
          if (shape.in_switch_gbps == 0) {
            auto [kit, new_key] = transfer_index.try_emplace(ShapeKey{0, last.pair, shape.bytes, 0, 0, 0, 0},
                                                             static_cast<uint32_t>(p.transfer_keys.size()));
            if (new_key) p.transfer_keys.push_back({static_cast<uint32_t>(i), 0});
            last.key = kit->second;
          }
        }
        p.shape_of[i] = last.pair;
        if (shape.in_switch_gbps > 0) {
          p.in_switch.push_back(static_cast<uint32_t>(i));
        } else {
          p.linked.push_back(static_cast<uint32_t>(i));
          ++p.transfer_keys[last.key].count;
          p.transfer_key_of.push_back(last.key);
        }
        break;
      }
      case TaskKind::kMemory:
        p.memory.push_back(static_cast<uint32_t>(i));
        break;
    }
  }
  // In-switch transfers by (collective, step, core, id).
  SortIfNeeded(p.in_switch, [&](uint32_t a, uint32_t b) {
    const Task& x = tasks[a];
    const Task& y = tasks[b];
    if (x.collective != y.collective) return x.collective < y.collective;
    if (x.coll_step != y.coll_step) return x.coll_step < y.coll_step;
    if (x.core != y.core) return x.core < y.core;
    return a < b;
  });
  p.in_switch.shrink_to_fit();  // grew by doubling: give the slack back
  p.memory_key_of.reserve(p.memory.size());
  // Distinct (channel, bytes) of memory tasks (the transfers' keys were given above).
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
  p.memory_flows.shrink_to_fit();
  return plan;
}

std::shared_ptr<const PreparedProgram> AnalyticalEngine::Prepare(const mapping::Program& program,
                                                                 const arch::Chip& chip) const {
  return PlanAnalytical(program, chip);
}

namespace {

// Every task's unloaded duration, what it holds of its queue, the first links and the flows
// (as LinkProgram's, but from the plan's distinct keys), and the links' and channels' byte
// and busy sums into `out`. The schedule needs nothing else of the plan, so a run without a
// prepared plan frees it before scheduling (the wafer's peak memory).
LinkedProgram CostProgram(const mapping::Program& program, const AnalyticalPlan& plan, const arch::Chip& chip,
                          EngineOutput* out_ptr) {
  EngineOutput& out = *out_ptr;
  const mapping::Program::TaskRange tasks = program.tasks();
  const size_t n = tasks.size();
  const int num_cores = chip.num_cores();
  const auto& links = chip.links();
  const auto& channels = chip.channels();
  if (plan.num_tasks != n || plan.num_cores != num_cores ||
      plan.num_channels != static_cast<int>(channels.size())) {
    throw std::invalid_argument("analytical engine: the plan was made for another Program or chip layout");
  }

  out.links.resize(links.size());
  out.channels.resize(channels.size());

  // ---- Costs by key (schedule.h TaskCosts): key 0 costs nothing (a transfer to its own
  // core), then the distinct compute shapes, each in-switch transfer, the distinct linked
  // transfers and the distinct memory tasks.
  std::vector<uint32_t> key(n, 0);
  std::vector<Ps> duration{0}, busy{0};
  for (size_t s = 0; s < plan.shapes.size(); ++s) {
    duration.push_back(mapping::KernelTime(chip, program, program.shape(plan.shapes[s])));
  }
  for (size_t i = 0; i < n; ++i) {
    if (program.kind(i) == TaskKind::kCompute) key[i] = 1 + plan.shape_of[i];
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
      key[i] = static_cast<uint32_t>(duration.size());
      duration.push_back(mapping::InSwitchTime(latency, tasks[i].bytes, port_bytes, tasks[i].in_switch_gbps));
    }
    g = e;
  }

  // Transfers over links and memory tasks: unloaded times first (equal (route, bytes)
  // and (core, channel, direction, bytes) take equal time alone, so each distinct one
  // is timed once), then sharing among the flows that overlap in time (links.h).
  // Link and channel statistics are sums over tasks (added `count` times at once per
  // distinct key) and maxima.
  std::vector<Ps> alone(plan.transfer_keys.size());
  for (size_t k = 0; k < plan.transfer_keys.size(); ++k) {
    const auto& key = plan.transfer_keys[k];
    const Task& t = tasks[key.task];
    alone[k] = mapping::TransferTime(chip, t.core, t.dst_core, t.bytes);
    const auto [rb, rs] = route_of(key.task);
    for (uint32_t h = 0; h < rs; ++h) {
      const int l = route_links[rb + h];
      LinkUsage& u = out.links[l];
      u.bytes += t.bytes * key.count;
      u.busy_ps = SatAdd(u.busy_ps, SatMulPs(SerialisationPs(t.bytes, links[l].bandwidth_gbps), key.count));
    }
  }
  // Each transfer over links queues for the first link of its route (sim/schedule.h) and
  // holds it for its bytes at that link's rate.
  std::vector<int32_t> transfer_first_link(plan.transfer_keys.size(), -1);
  std::vector<Ps> first_hold(plan.transfer_keys.size(), 0);
  for (size_t k = 0; k < plan.transfer_keys.size(); ++k) {
    const auto [rb, rs] = route_of(plan.transfer_keys[k].task);
    if (rs > 0) {
      transfer_first_link[k] = route_links[rb];
      first_hold[k] =
          SerialisationPs(tasks[plan.transfer_keys[k].task].bytes, links[route_links[rb]].bandwidth_gbps);
    }
  }
  std::map<std::tuple<int, int, bool>, std::vector<int>> paths;
  for (const auto& f : plan.memory_flows) {
    std::vector<int> path = chip.MemoryPath(std::get<0>(f), std::get<1>(f), std::get<2>(f));
    if (!path.empty()) paths.emplace(f, std::move(path));
  }
  std::vector<Ps> memory_alone(plan.memory_keys.size()), memory_busy(plan.memory_keys.size());
  for (size_t k = 0; k < plan.memory_keys.size(); ++k) {
    const auto& key = plan.memory_keys[k];
    const Task& t = tasks[key.task];
    memory_alone[k] = mapping::MemoryTime(chip, t.core, t.channel, t.bytes, t.write);
    ChannelUsage& u = out.channels[t.channel];
    u.bytes += t.bytes * key.count;
    memory_busy[k] = mapping::ChannelBusyTime(chip, t.channel, t.bytes);
    u.busy_ps = SatAdd(u.busy_ps, SatMulPs(memory_busy[k], key.count));
    auto path = paths.find({t.core, t.channel, t.write});
    if (path == paths.end()) continue;
    for (int l : path->second) {
      LinkUsage& lu = out.links[l];
      lu.bytes += t.bytes * key.count;
      lu.busy_ps = SatAdd(lu.busy_ps, SatMulPs(SerialisationPs(t.bytes, links[l].bandwidth_gbps), key.count));
    }
  }
  // How long each memory task holds its channel, a transfer over links its first link.
  busy.resize(duration.size(), 0);
  const uint32_t transfer_base = static_cast<uint32_t>(duration.size());
  duration.insert(duration.end(), alone.begin(), alone.end());
  busy.insert(busy.end(), first_hold.begin(), first_hold.end());
  for (size_t j = 0; j < plan.linked.size(); ++j)
    key[plan.linked[j]] = transfer_base + plan.transfer_key_of[j];
  const uint32_t memory_base = static_cast<uint32_t>(duration.size());
  duration.insert(duration.end(), memory_alone.begin(), memory_alone.end());
  busy.insert(busy.end(), memory_busy.begin(), memory_busy.end());
  for (size_t j = 0; j < plan.memory.size(); ++j) key[plan.memory[j]] = memory_base + plan.memory_key_of[j];
  // First links by key: only linked transfers' keys have one.
  std::vector<int32_t> first_link_of_key(duration.size(), -1);
  std::copy(transfer_first_link.begin(), transfer_first_link.end(),
            first_link_of_key.begin() + transfer_base);
  LinkModel model = BuildLinkModel(program, plan, chip, route_links, pair_route, paths, memory_busy,
                                   duration.size(), transfer_base, memory_base);
  return LinkedProgram{std::move(duration),
                       std::move(busy),
                       {},
                       std::move(model),
                       !plan.in_switch.empty(),
                       std::move(key),
                       std::move(first_link_of_key)};
}

// CostProgram with a plan made for this run and freed before the schedule's times and queues
// are allocated (the schedule's dependents may be built meanwhile: CostAndSchedule).
LinkedProgram PlanAndCost(const mapping::Program& program, const arch::Chip& chip, EngineOutput* out) {
  const auto plan = PlanAnalytical(program, chip);
  return CostProgram(program, *plan, chip, out);
}

// CostProgram's costs as the schedule reads them, by key.
TaskCosts CostsByKey(const LinkedProgram& costs) {
  return TaskCosts{costs.duration, costs.busy, costs.key, true, costs.first_link_of_key};
}

// `cost(&out)`'s costs (CostProgram's) scheduled (sim/schedule.h) with queues on links
// (links.h). The schedule's graph of dependents reads only the Program: with a spare core
// (sim::UseSpareThread) it is built while the tasks are costed.
EngineOutput CostAndSchedule(const mapping::Program& program, const arch::Chip& chip,
                             const std::function<LinkedProgram(EngineOutput*)>& cost) {
  const int links = static_cast<int>(chip.links().size());
  std::future<Dispatcher> built;
  if (UseSpareThread(program.num_tasks()))
    built = std::async(std::launch::async, [&] { return Dispatcher(program, {}, links); });
  EngineOutput out;
  const LinkedProgram costs = cost(&out);
  Dispatcher scheduler = built.valid() ? built.get() : Dispatcher(program, {}, links);
  scheduler.keep_order(false);
  out.tasks.resize(program.num_tasks());
  out.contention = ScheduleOnLinks(costs.model, scheduler, CostsByKey(costs), &out);
  AddChannelWaits(program, out.tasks, &out.channels);
  return out;
}

}  // namespace

EngineOutput RunAnalytical(const mapping::Program& program, const AnalyticalPlan& plan,
                           const arch::Chip& chip) {
  return CostAndSchedule(program, chip,
                         [&](EngineOutput* out) { return CostProgram(program, plan, chip, out); });
}

EngineOutput AnalyticalEngine::Run(const mapping::Program& program, const arch::Chip& chip,
                                   const PreparedProgram* prepared) {
  if (prepared) {
    const auto* plan = dynamic_cast<const AnalyticalPlan*>(prepared);
    if (!plan) throw std::invalid_argument("analytical engine: prepared by another engine");
    return RunAnalytical(program, *plan, chip);
  }
  return CostAndSchedule(program, chip, [&](EngineOutput* out) { return PlanAndCost(program, chip, out); });
}

Ps AnalyticalEngine::Makespan(const mapping::Program& program, const arch::Chip& chip) {
  EngineOutput out;  // the links' and channels' sums, unread
  const LinkedProgram costs = PlanAndCost(program, chip, &out);
  Dispatcher scheduler(program, {}, static_cast<int>(chip.links().size()));
  scheduler.keep_order(false);
  return QueuedMakespan(costs.model, scheduler, CostsByKey(costs));
}

LinkedProgram LinkProgram(const mapping::Program& p, const arch::Chip& chip) {
  const size_t n = p.num_tasks();
  const auto& links = chip.links();
  LinkedProgram out{std::vector<Ps>(n),
                    std::vector<Ps>(n, 0),
                    std::vector<int32_t>(n, -1),
                    LinkModel{ChipFlowSet(chip), {}, {}},
                    false,
                    {},
                    {}};
  std::vector<uint32_t> memory;
  for (size_t i = 0; i < n; ++i) {
    out.duration[i] = mapping::TaskTime(chip, p, i);
    if (p.kind(i) == TaskKind::kMemory) {
      const mapping::MemoryDetail& m = p.memory(i);
      out.busy[i] = mapping::ChannelBusyTime(chip, m.channel, m.bytes);
      memory.push_back(static_cast<uint32_t>(i));
    } else if (p.kind(i) == TaskKind::kTransfer && p.core(i) != p.transfer(i).dst_core) {
      if (p.transfer(i).in_switch_gbps > 0) {
        out.in_switch = true;
        continue;
      }
      const std::vector<int> route = chip.Route(p.core(i), p.transfer(i).dst_core);
      out.model.flows.Add(p.transfer(i).bytes, 0, route.data(), route.size());
      out.model.task.push_back(static_cast<uint32_t>(i));
      if (!route.empty()) {
        out.first_link[i] = route[0];
        out.busy[i] = mapping::SerialisationPs(p.transfer(i).bytes, links[route[0]].bandwidth_gbps);
      }
    }
  }
  for (uint32_t i : memory) {
    const mapping::MemoryDetail& m = p.memory(i);
    const std::vector<int> path = chip.MemoryPath(p.core(i), m.channel, m.write);
    if (path.empty()) continue;
    out.model.flows.AddFlow(AddMemoryKind(chip, m, out.busy[i], path, &out.model.flows));
    out.model.task.push_back(i);
  }
  return out;
}

std::unique_ptr<Engine> MakeAnalyticalEngine() { return std::make_unique<AnalyticalEngine>(); }

namespace {
const EngineRegistrar kRegistered(
    "analytical", "closed form: the TLM engine's task order, links shared by flows overlapping in time",
    &MakeAnalyticalEngine);
}  // namespace

}  // namespace tpsim::sim
