#include "sim/result.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/energy.h"
#include "sim/schedule.h"

namespace tpsim::sim {

namespace {

using mapping::TaskKind;

constexpr Ps kNoTime = std::numeric_limits<Ps>::min();
constexpr const char* kKindNames[] = {"compute", "transfer", "memory"};  // by TaskKind

struct Span {
  Ps first = std::numeric_limits<Ps>::max();
  Ps last = kNoTime;
  void Add(Ps start, Ps end) {
    first = std::min(first, start);
    last = std::max(last, end);
  }
  bool empty() const { return last == kNoTime; }
  Ps length() const { return empty() ? 0 : last - first; }
  Ps start() const { return empty() ? 0 : first; }
};

double Ratio(Ps num, Ps den) {
  if (den <= 0) return 0.0;
  return std::clamp(static_cast<double>(num) / static_cast<double>(den), 0.0, 1.0);
}

// Length of the union of intervals, sorted by start (when they are not already).
Ps UnionLength(std::span<std::pair<Ps, Ps>> iv) {
  if (!std::is_sorted(iv.begin(), iv.end())) std::sort(iv.begin(), iv.end());
  Ps total = 0, cur_s = 0, cur_e = kNoTime;
  for (const auto& [s, e] : iv) {
    if (cur_e == kNoTime || s > cur_e) {
      if (cur_e != kNoTime) total += cur_e - cur_s;
      cur_s = s;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (cur_e != kNoTime) total += cur_e - cur_s;
  return total;
}

}  // namespace

namespace {

void CheckInputs(const mapping::Program& program, const EngineOutput& out) {
  const mapping::Program::TaskRange tasks = program.tasks();
  const size_t n = tasks.size();
  if (out.tasks.size() != n) {
    throw std::invalid_argument("BuildResult: the engine timed " + std::to_string(out.tasks.size()) +
                                " tasks but the Program has " + std::to_string(n));
  }
}

[[noreturn]] void ThrowBadOp(const mapping::Program& program, size_t i) {
  throw std::invalid_argument("BuildResult: task " + std::to_string(i) + " names op " +
                              std::to_string(program.op(i)) + " of " + std::to_string(program.ops.size()));
}

// Segments: prefill, then decode steps in order (other phase names last).
using Segment = std::tuple<int, std::string, uint32_t>;  // (phase rank, phase, step)
int PhaseRank(mapping::Phase ph) {
  return ph == mapping::Phase::kPrefill ? 0 : ph == mapping::Phase::kDecode ? 1 : 2;
}
Segment SegmentOf(const mapping::OpRef& ref) {
  return Segment{PhaseRank(ref.phase), mapping::ToString(ref.phase), ref.step};
}

// What the summary needs from one pass over the tasks.
struct TaskTotals {
  std::vector<Span> op_all;      // per op: all its tasks
  std::vector<Ps> core_compute;  // per core of the chip: sum of compute durations
  double flops = 0;
  Ps t0 = 0;  // first task start
};

TaskTotals Totals(const mapping::Program& program, const mapping::Program& g, const arch::Chip& chip,
                  const EngineOutput& out) {
  const size_t n = g.num_tasks();
  const int num_cores = chip.num_cores();
  TaskTotals tt;
  tt.op_all.resize(program.ops.size());
  tt.core_compute.assign(std::max(num_cores, 0), 0);
  tt.t0 = n == 0 ? 0 : std::numeric_limits<Ps>::max();
  for (size_t i = 0; i < n; ++i) {
    const TaskTime& time = out.tasks[i];
    const uint32_t op = g.op(i);
    if (op >= tt.op_all.size()) ThrowBadOp(program, i);
    tt.op_all[op].Add(time.start_ps, time.end_ps);
    tt.t0 = std::min(tt.t0, time.start_ps);
    const int core = g.core(i);
    if (g.kind(i) == TaskKind::kCompute && core >= 0 && core < num_cores && !CollectiveKernel(g, i)) {
      tt.core_compute[core] += time.end_ps - time.start_ps;
    }
  }
  tt.flops = g.ComputeFlops();
  return tt;
}

// Last task end of each segment.
std::map<Segment, Ps> SegmentEnds(const mapping::Program& program, const std::vector<Span>& op_all) {
  std::map<Segment, Ps> segment_end;
  for (size_t o = 0; o < program.ops.size(); ++o) {
    if (op_all[o].empty()) continue;
    Ps& se = segment_end.try_emplace(SegmentOf(program.ops[o].ref), kNoTime).first->second;
    se = std::max(se, op_all[o].last);
  }
  return segment_end;
}

}  // namespace

void FillEnergy(const arch::Chip& chip, const EnergySums& pe, const EnergyInputs& in, config::Summary* s) {
  s->set_energy_modelled(pe.modelled);
  if (!pe.modelled) return;
  constexpr double kJPerPj = 1e-12, kSPerPs = 1e-12;
  const EnergyParts& prefill = pe.prefill;
  const EnergyParts& decode = pe.decode;
  const double static_j = pe.static_w * static_cast<double>(s->total_ps()) * kSPerPs;
  const double energy = pe.total.total_pj() * kJPerPj + static_j;
  s->set_energy_j(energy);
  s->set_static_energy_j(static_j);
  s->set_compute_energy_j(pe.total.compute_pj * kJPerPj);
  s->set_sram_energy_j(pe.total.sram_pj * kJPerPj);
  s->set_network_energy_j(pe.total.network_pj * kJPerPj);
  s->set_memory_energy_j(pe.total.memory_pj * kJPerPj);
  s->set_prefill_energy_j(prefill.total_pj() * kJPerPj +
                          pe.static_w * static_cast<double>(s->prefill_ps()) * kSPerPs);
  s->set_decode_energy_j(decode.total_pj() * kJPerPj +
                         pe.static_w * static_cast<double>(s->decode_ps()) * kSPerPs);
  const uint64_t tokens = in.prompt_tokens + in.generated_tokens;
  if (tokens > 0) s->set_energy_per_token_j(energy / static_cast<double>(tokens));
  if (in.generated_tokens > 0) {
    s->set_decode_energy_per_token_j(s->decode_energy_j() / static_cast<double>(in.generated_tokens));
  }
  if (s->total_ps() > 0) s->set_average_power_w(energy / (static_cast<double>(s->total_ps()) * kSPerPs));
  s->set_tdp_w(chip.config().energy().core_tdp_w() * chip.num_cores());
}

namespace {

// A location off chip ("dram ...", mapping::ToString) named by the chip's memory kind: "hbm ..."
// where every memory is HBM (mesh-4x4-hbm: it said "weights in dram"), as `tpsim describe` names it
// (OffChipWord; a GPU node's locations are named hbm already).
std::string OffChipNamed(std::string_view location, const arch::Chip& chip) {
  if (location.starts_with("dram") && OffChipWord(chip) == "HBM")
    return "hbm" + std::string(location.substr(4));
  return std::string(location);
}

// `path`: the critical path of `g` when it was worked out already (else FillSummary does).
void FillSummary(const mapping::Program& program, const mapping::Program& g, const arch::Chip& chip,
                 const EngineOutput& out, const TaskTotals& tt, const std::map<Segment, Ps>& segment_end,
                 config::Summary* s, const CriticalPathSplit* known_path = nullptr) {
  const Ps total = out.makespan_ps;
  const int num_cores = chip.num_cores();
  const Ps t0 = tt.t0;
  Ps prefill_end = kNoTime, decode_end = kNoTime;
  uint32_t decode_steps = 0;
  for (const auto& [seg, end] : segment_end) {
    if (std::get<0>(seg) == 0) prefill_end = std::max(prefill_end, end);
    if (std::get<0>(seg) == 1) decode_end = std::max(decode_end, end), ++decode_steps;
  }
  s->set_total_ps(total);
  const Ps decode_base = prefill_end != kNoTime ? prefill_end : t0;
  s->set_prefill_ps(prefill_end != kNoTime ? prefill_end - t0 : 0);
  if (decode_end != kNoTime) {
    const Ps decode = std::max<Ps>(0, decode_end - decode_base);
    s->set_decode_ps(decode);
    s->set_decode_step_ps_mean((decode + decode_steps / 2) / decode_steps);
  }
  const CriticalPathSplit path = known_path ? *known_path : CriticalPath(g, out.tasks);
  s->set_compute_ps(path.compute_ps);
  s->set_communication_ps(path.communication_ps);
  s->set_memory_ps(path.memory_ps);
  double util_sum = 0;
  for (int c = 0; c < num_cores; ++c) util_sum += Ratio(tt.core_compute[c], total);
  s->set_core_utilization(num_cores > 0 ? util_sum / num_cores : 0.0);
  s->set_achieved_tflops(total > 0 ? tt.flops / static_cast<double>(total) : 0.0);
  s->set_spilled_bytes(program.spilled_bytes);
  s->set_contention(out.contention);
  s->set_weights_location(OffChipNamed(mapping::ToString(program.weights_location), chip));
  s->set_kv_location(OffChipNamed(mapping::ToString(program.kv_location), chip));
}

// compute_ps of every op: max over cores of the sum of the op's compute durations.
// When compute tasks come op by op (op ids never decrease in id order, as Lower
// emits them), each (op, core) sum is complete when the op changes; otherwise the
// (op, core, duration) triples are sorted, as for any Program.
std::vector<Ps> OpCompute(const mapping::Program& program, const EngineOutput& out) {
  const std::vector<mapping::TaskRecord>& tasks = program.records();  // kind, core, op
  const size_t n = tasks.size();
  std::vector<Ps> op_compute(program.ops.size(), 0);
  bool in_order = true;
  int lo = 0, hi = -1;
  uint32_t last_op = 0;
  for (const auto& t : tasks) {
    if (t.kind != TaskKind::kCompute) continue;
    if (t.op < last_op) in_order = false;
    last_op = t.op;
    if (hi < lo) lo = hi = t.core;
    lo = std::min<int>(lo, t.core);
    hi = std::max<int>(hi, t.core);
  }
  if (hi < lo) return op_compute;
  if (in_order) {
    std::vector<Ps> sum(static_cast<size_t>(static_cast<int64_t>(hi) - lo + 1), 0);
    std::vector<size_t> touched;
    auto flush = [&](uint32_t op) {
      for (size_t c : touched) {
        op_compute[op] = std::max(op_compute[op], sum[c]);
        sum[c] = 0;
      }
      touched.clear();
    };
    uint32_t cur = 0;
    bool any = false;
    for (size_t i = 0; i < n; ++i) {
      const auto& t = tasks[i];
      if (t.kind != TaskKind::kCompute) continue;
      if (any && t.op != cur) flush(cur);
      cur = t.op;
      any = true;
      const size_t c = static_cast<size_t>(t.core - lo);
      if (sum[c] == 0) touched.push_back(c);
      sum[c] += out.tasks[i].end_ps - out.tasks[i].start_ps;
    }
    flush(cur);
    return op_compute;
  }
  std::vector<std::tuple<uint32_t, int, Ps>> op_core_compute;  // op, core, duration
  for (size_t i = 0; i < n; ++i) {
    const auto& t = tasks[i];
    if (t.kind == TaskKind::kCompute) {
      op_core_compute.emplace_back(t.op, t.core, out.tasks[i].end_ps - out.tasks[i].start_ps);
    }
  }
  std::sort(op_core_compute.begin(), op_core_compute.end());
  for (size_t j = 0; j < op_core_compute.size();) {
    const auto [op, core, d0] = op_core_compute[j];
    Ps sum = 0;
    size_t e = j;
    while (e < op_core_compute.size() && std::get<0>(op_core_compute[e]) == op &&
           std::get<1>(op_core_compute[e]) == core) {
      sum += std::get<2>(op_core_compute[e]);
      ++e;
    }
    op_compute[op] = std::max(op_compute[op], sum);
    j = e;
  }
  return op_compute;
}

// Where BuildResult sums op rows (RowSums): the ops of decode steps sums.from .. last, `per_step`
// of them each, step k's at begin + (k - sums.from) x per_step, when the Program has more than
// sums.row_steps decode steps and each of those steps has the same ops as the first of them (phase,
// layer, name, partition), in the same order, after every other op.
struct SummedOps {
  size_t begin = 0, per_step = 0;
  uint64_t steps = 0;
};
std::optional<SummedOps> FindSummedOps(const mapping::Program& p, RowSums sums) {
  if (sums.row_steps == 0 || sums.from == 0) return std::nullopt;
  // Decode step k's ops have OpRef::step k - 1.
  uint32_t steps = 0;
  for (const auto& op : p.ops)
    if (op.ref.phase == mapping::Phase::kDecode) steps = std::max(steps, op.ref.step + 1);
  if (steps <= sums.row_steps || steps < sums.from) return std::nullopt;
  const uint32_t first = sums.from - 1;
  SummedOps s;
  while (s.begin < p.ops.size() &&
         !(p.ops[s.begin].ref.phase == mapping::Phase::kDecode && p.ops[s.begin].ref.step == first))
    ++s.begin;
  while (s.begin + s.per_step < p.ops.size() && p.ops[s.begin + s.per_step].ref.step == first) ++s.per_step;
  s.steps = steps - first;
  if (s.per_step == 0 || p.ops.size() - s.begin != s.steps * s.per_step) return std::nullopt;
  for (size_t o = s.begin; o < p.ops.size(); ++o) {
    const mapping::OpRef &a = p.ops[o].ref, &b = p.ops[s.begin + (o - s.begin) % s.per_step].ref;
    if (a.phase != b.phase || a.step != first + (o - s.begin) / s.per_step || a.layer != b.layer ||
        a.op != b.op || a.Label() != b.Label())
      return std::nullopt;
  }
  return s;
}

}  // namespace

void AddOpRow(const mapping::OpRef& ref, const OpRowValues& v, uint64_t steps, bool energy,
              config::Result* r) {
  config::OpResult* op = r->add_ops();
  op->set_phase(mapping::ToString(ref.phase));
  op->set_layer(ref.layer);
  op->set_op(ref.op);
  op->set_partition(ref.Label());
  op->set_compute_ps(v.compute);
  op->set_communication_ps(v.comm);
  op->set_memory_ps(v.mem);
  op->set_total_ps(v.total);
  op->set_start_ps(v.start);
  op->set_flops(v.flops);
  op->set_bytes(v.bytes);
  op->set_spilled_bytes(v.spilled);
  if (steps > 0) op->set_steps(static_cast<uint32_t>(steps));
  if (energy) op->set_energy_j(v.energy_pj * 1e-12);
}

config::Summary BuildSummary(const mapping::Program& program, const arch::Chip& chip, const EngineOutput& out,
                             const EnergyInputs& energy) {
  CheckInputs(program, out);
  const TaskTotals tt = Totals(program, program, chip, out);
  config::Summary s;
  FillSummary(program, program, chip, out, tt, SegmentEnds(program, tt.op_all), &s);
  FillEnergy(chip, SumEnergy(program, ComputeEnergy(program, chip, energy.dtype)), energy, &s);
  return s;
}

config::Result BuildResult(const mapping::Program& program, const arch::Chip& chip, const EngineOutput& out,
                           const std::string& experiment, const std::string& engine, bool with_tasks,
                           const EnergyInputs& energy, RowSums sums) {
  CheckInputs(program, out);
  const std::vector<mapping::TaskRecord>& tasks = program.records();  // kind, core, op
  const size_t n = tasks.size();
  // The energy and the critical path read only the Program and the times: with a spare core
  // (sim::UseSpareThread) they are worked out meanwhile, and so is half of the cores' busy time.
  const bool spare = UseSpareThread(n);
  auto side_work = [&] {
    return std::pair{ComputeEnergy(program, chip, energy.dtype), CriticalPath(program, out.tasks)};
  };
  std::future<std::pair<ProgramEnergy, CriticalPathSplit>> side;
  if (spare) side = std::async(std::launch::async, side_work);
  const int num_cores = chip.num_cores();
  // Each core's tasks, core by core in one array (core c's from core_begin[c]), in id order.
  std::vector<size_t> core_begin(static_cast<size_t>(std::max(num_cores, 0)) + 1, 0);
  for (size_t i = 0; i < n; ++i)
    if (tasks[i].core >= 0 && tasks[i].core < num_cores) ++core_begin[tasks[i].core + 1];
  for (size_t c = 1; c < core_begin.size(); ++c) core_begin[c] += core_begin[c - 1];
  std::vector<uint32_t> core_tasks(core_begin.back());
  {
    std::vector<size_t> core_fill(core_begin.begin(), core_begin.end() - 1);
    for (size_t i = 0; i < n; ++i)
      if (tasks[i].core >= 0 && tasks[i].core < num_cores)
        core_tasks[core_fill[tasks[i].core]++] = static_cast<uint32_t>(i);
  }
  // Cores [from, to)'s busy time: the union of their tasks' intervals.
  std::vector<Ps> core_busy(static_cast<size_t>(std::max(num_cores, 0)), 0);
  auto busy_of = [&](int from, int to) {
    std::vector<std::pair<Ps, Ps>> intervals;  // one core's
    for (int c = from; c < to; ++c) {
      intervals.clear();
      for (size_t k = core_begin[c]; k < core_begin[c + 1]; ++k)
        intervals.emplace_back(out.tasks[core_tasks[k]].start_ps, out.tasks[core_tasks[k]].end_ps);
      core_busy[c] = UnionLength(intervals);
    }
  };
  const int half = spare ? num_cores / 2 : 0;
  std::future<void> side_busy;
  if (spare) side_busy = std::async(std::launch::async, busy_of, 0, half);
  const Ps total = out.makespan_ps;
  const TaskTotals tt = Totals(program, program, chip, out);
  const std::vector<Span>& op_all = tt.op_all;
  const std::vector<Ps>& core_compute = tt.core_compute;

  config::Result r;
  r.set_experiment(experiment);
  r.set_engine(engine);

  // ---- Per op.
  const size_t num_ops = program.ops.size();
  std::vector<Span> op_comm(num_ops), op_mem(num_ops);
  std::vector<bool> coll_kernels(num_ops, false);  // ops run as a GPU's collective kernels
  for (size_t i = 0; i < n; ++i) {
    const auto& t = tasks[i];
    const TaskTime& time = out.tasks[i];
    const bool coll = CollectiveKernel(program, i);
    if (t.kind == TaskKind::kTransfer || coll) op_comm[t.op].Add(time.start_ps, time.end_ps);
    if (coll) coll_kernels[t.op] = true;
    if (t.kind == TaskKind::kMemory) op_mem[t.op].Add(time.start_ps, time.end_ps);
  }
  const std::vector<Ps> op_compute = OpCompute(program, out);
  busy_of(half, num_cores);
  // Named, not bound: clang 14 does not let a lambda capture a structured binding.
  const std::pair<ProgramEnergy, CriticalPathSplit> side_result = side.valid() ? side.get() : side_work();
  if (side_busy.valid()) side_busy.get();
  const ProgramEnergy& pe = side_result.first;
  const CriticalPathSplit& path = side_result.second;
  // One op's row, or (`steps` > 0) the sum of the same op's rows over `steps` decode steps, the
  // ops `o`, `o + stride`, ...: the sums of OpRows (sim/step_compose.h), in the same order.
  auto add_row = [&](size_t o, uint64_t steps, size_t stride) {
    OpRowValues v;
    v.start = op_all[o].start();
    for (uint64_t k = 0; k < std::max<uint64_t>(steps, 1); ++k) {
      const size_t x = o + k * stride;
      v.compute += coll_kernels[x] ? 0 : op_compute[x];  // a collective kernel is communication
      v.comm += op_comm[x].length();
      v.mem += op_mem[x].length();
      v.total += op_all[x].length();
      v.flops += program.ops[x].flops;
      v.bytes += program.ops[x].bytes;
      v.spilled += program.ops[x].spilled_bytes;
      if (pe.modelled) v.energy_pj += pe.ops[x].total_pj();
    }
    AddOpRow(program.ops[o].ref, v, steps, pe.modelled, &r);
  };
  const std::optional<SummedOps> summed = FindSummedOps(program, sums);
  for (size_t o = 0; o < (summed ? summed->begin : num_ops); ++o) add_row(o, 0, 0);
  if (summed)
    for (size_t j = 0; j < summed->per_step; ++j) add_row(summed->begin + j, summed->steps, summed->per_step);

  // ---- Phases, decode steps and layers, from the ends of their tasks.
  const Ps t0 = tt.t0;
  const std::map<Segment, Ps> segment_end = SegmentEnds(program, op_all);
  std::map<std::pair<Segment, uint32_t>, Ps> layer_end;      // (segment, layer)
  std::vector<std::pair<std::string, uint32_t>> layer_keys;  // (phase, layer), first appearance
  std::map<std::pair<std::string, uint32_t>, size_t> layer_index;
  for (size_t o = 0; o < num_ops; ++o) {
    const auto& ref = program.ops[o].ref;
    const auto key = std::make_pair(std::string(mapping::ToString(ref.phase)), ref.layer);
    if (layer_index.try_emplace(key, layer_keys.size()).second) layer_keys.push_back(key);
    if (op_all[o].empty()) continue;
    Ps& le = layer_end.try_emplace({SegmentOf(ref), ref.layer}, kNoTime).first->second;
    le = std::max(le, op_all[o].last);
  }
  // Layer time: end of the layer minus end of the previous layer of the same
  // segment (the previous segment's end, or t0, for the first layer).
  std::vector<Ps> layer_total(layer_keys.size(), 0);
  std::vector<double> layer_energy_pj(layer_keys.size(), 0);
  if (pe.modelled) {
    for (size_t o = 0; o < num_ops; ++o) {
      const auto& ref = program.ops[o].ref;
      layer_energy_pj[layer_index.at({std::string(mapping::ToString(ref.phase)), ref.layer})] +=
          pe.ops[o].total_pj();
    }
  }
  Ps baseline = t0, prev_segment_end = t0;
  const Segment* cur = nullptr;
  for (const auto& [k, end] : layer_end) {
    const auto& [seg, layer] = k;
    if (cur == nullptr || *cur != seg) {
      if (cur != nullptr) prev_segment_end = segment_end.at(*cur);
      cur = &seg;
      baseline = prev_segment_end;
    }
    layer_total[layer_index.at({std::get<1>(seg), layer})] += std::max<Ps>(0, end - baseline);
    baseline = std::max(baseline, end);
  }
  for (size_t l = 0; l < layer_keys.size(); ++l) {
    config::LayerResult* lr = r.add_layers();
    lr->set_phase(layer_keys[l].first);
    lr->set_layer(layer_keys[l].second);
    lr->set_total_ps(layer_total[l]);
    lr->set_energy_j(layer_energy_pj[l] * 1e-12);
  }

  // ---- Summary.
  FillSummary(program, program, chip, out, tt, segment_end, r.mutable_summary(), &path);
  FillEnergy(chip, SumEnergy(program, pe), energy, r.mutable_summary());

  // ---- Links, DRAM channels, cores.
  const auto& links = chip.links();
  for (size_t l = 0; l < out.links.size() && l < links.size(); ++l) {
    const LinkUsage& u = out.links[l];
    if (u.bytes == 0) continue;
    config::LinkStat* ls = r.add_links();
    ls->set_name(chip.node(links[l].src).name + "->" + chip.node(links[l].dst).name);
    ls->set_bytes(u.bytes);
    ls->set_busy_ps(u.busy_ps);
    ls->set_utilization(Ratio(u.busy_ps, total));
    ls->set_max_queue_ps(u.max_queue_ps);
  }
  const auto& channels = chip.channels();
  for (size_t c = 0; c < out.channels.size() && c < channels.size(); ++c) {
    const ChannelUsage& u = out.channels[c];
    if (u.bytes == 0) continue;
    config::DramStat* ds = r.add_dram();
    ds->set_name(channels[c].name);
    ds->set_bytes(u.bytes);
    ds->set_busy_ps(u.busy_ps);
    ds->set_utilization(Ratio(u.busy_ps, total));
    ds->set_max_queue_ps(u.max_queue_ps);
  }
  for (int c = 0; c < num_cores; ++c) {
    config::CoreStat* cs = r.add_cores();
    cs->set_core(static_cast<uint32_t>(c));
    cs->set_compute_ps(core_compute[c]);
    cs->set_busy_ps(core_busy[c]);
    cs->set_utilization(Ratio(core_compute[c], total));
  }

  if (with_tasks) {
    for (size_t i = 0; i < n; ++i) {
      config::TaskTiming* tt = r.add_tasks();
      tt->set_id(i);
      tt->set_start_ps(out.tasks[i].start_ps);
      tt->set_end_ps(out.tasks[i].end_ps);
      const mapping::Task t = program.task(i);
      const auto& ref = program.ops[t.op].ref;
      tt->set_core(static_cast<uint32_t>(std::max<int>(t.core, 0)));
      tt->set_dst_core(t.kind == TaskKind::kTransfer ? t.dst_core : -1);
      tt->set_kind(kKindNames[static_cast<int>(t.kind)]);
      tt->set_op(ref.op);
      tt->set_layer(ref.layer);
      tt->set_phase(mapping::ToString(ref.phase));
    }
  }
  return r;
}

// ---- JSON.
namespace {

using google::protobuf::FieldDescriptor;
using Json = nlohmann::ordered_json;

// A scalar field's value (a message field's is written by AppendJson).
Json FieldValue(const google::protobuf::Message& m, const FieldDescriptor* f, int index) {
  const auto* refl = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return rep ? refl->GetRepeatedInt32(m, f, index) : refl->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64:
      return rep ? refl->GetRepeatedInt64(m, f, index) : refl->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return rep ? refl->GetRepeatedUInt32(m, f, index) : refl->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return rep ? refl->GetRepeatedUInt64(m, f, index) : refl->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return rep ? refl->GetRepeatedDouble(m, f, index) : refl->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return static_cast<double>(rep ? refl->GetRepeatedFloat(m, f, index) : refl->GetFloat(m, f));
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? refl->GetRepeatedBool(m, f, index) : refl->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* ev = rep ? refl->GetRepeatedEnum(m, f, index) : refl->GetEnum(m, f);
      return std::string(ev->name());
    }
    case FieldDescriptor::CPPTYPE_STRING:
      return rep ? refl->GetRepeatedString(m, f, index) : refl->GetString(m, f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return nullptr;
}

// Appends m's JSON at `depth` levels of indent, laid out as nlohmann's dump(2) lays out the
// same object (every field in declaration order, "{}" and "[]" when empty), without building
// it as a JSON object first: a Result with every task's times (`--tasks`) took about five
// times its JSON's size that way. Scalars are nlohmann's own (numbers, escapes, invalid
// UTF-8 replaced). `spill`, when given, takes what is made so far after an element of a list
// once it passes 1 MiB.
void AppendJson(const google::protobuf::Message& m, int depth, std::string* out,
                const std::function<void(std::string*)>* spill) {
  const auto* desc = m.GetDescriptor();
  const auto* refl = m.GetReflection();
  auto indent = [&](int d) { out->append(2 * static_cast<size_t>(d), ' '); };
  auto value = [&](const FieldDescriptor* f, int index, int d) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      AppendJson(f->is_repeated() ? refl->GetRepeatedMessage(m, f, index) : refl->GetMessage(m, f), d, out,
                 spill);
    } else {
      *out += FieldValue(m, f, index).dump(-1, ' ', false, Json::error_handler_t::replace);
    }
  };
  bool first = true;
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* f = desc->field(i);
    if (f->real_containing_oneof() != nullptr && !refl->HasField(m, f)) continue;
    *out += first ? "{\n" : ",\n";
    first = false;
    indent(depth + 1);
    *out += '"';
    *out += f->name();
    *out += "\": ";
    if (!f->is_repeated()) {
      value(f, 0, depth + 1);
      continue;
    }
    const int size = refl->FieldSize(m, f);
    if (size == 0) {
      *out += "[]";
      continue;
    }
    *out += "[\n";
    for (int k = 0; k < size; ++k) {
      if (k > 0) *out += ",\n";
      indent(depth + 2);
      value(f, k, depth + 2);
      if (spill && out->size() >= (size_t{1} << 20)) (*spill)(out);
    }
    *out += '\n';
    indent(depth + 1);
    *out += ']';
  }
  if (first) {
    *out += "{}";
    return;
  }
  *out += '\n';
  indent(depth);
  *out += '}';
}

std::string Us(Ps ps) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ps) / 1e6);
  return buf;
}

}  // namespace

// Strings are UTF-8 by the time they get here (configs/files.h); any byte that is
// not is replaced rather than thrown on.
std::string ResultToJson(const config::Result& result) {
  std::string out;
  AppendJson(result, 0, &out, nullptr);
  out += '\n';
  return out;
}

void WriteResultJson(const config::Result& result, const std::function<void(std::string_view)>& write) {
  std::string out;
  const std::function<void(std::string*)> spill = [&](std::string* s) {
    write(*s);
    s->clear();
  };
  AppendJson(result, 0, &out, &spill);
  out += '\n';
  write(out);
}

std::string MemoryKindWord(const arch::Chip& chip, int memory) {
  return chip.config().has_gpu() || chip.config().memory(memory).kind() == "hbm" ? "HBM" : "DRAM";
}

std::string OffChipWord(const arch::Chip& chip) {
  std::string word = chip.config().has_gpu() ? "HBM" : "DRAM";
  for (int m = 0; m < chip.config().memory_size(); ++m) {
    if (m == 0) word = MemoryKindWord(chip, m);
    if (MemoryKindWord(chip, m) != word) return "DRAM/HBM";
  }
  return word;
}

std::string ResultTable(const config::Result& r, bool with_ops) {
  std::string s;
  char line[512];
  // Ops: same (phase, layer, op, partition) summed over decode steps.
  struct Row {
    std::string phase, op, partition;
    uint32_t layer = 0;
    Ps compute = 0, comm = 0, mem = 0, total = 0;
    int count = 0;
  };
  std::vector<Row> rows;
  std::map<std::tuple<std::string, uint32_t, std::string, std::string>, size_t> index;
  for (const auto& op : r.ops()) {
    auto [it, inserted] = index.try_emplace({op.phase(), op.layer(), op.op(), op.partition()}, rows.size());
    if (inserted) rows.push_back(Row{op.phase(), op.op(), op.partition(), op.layer()});
    Row& row = rows[it->second];
    row.compute += op.compute_ps();
    row.comm += op.communication_ps();
    row.mem += op.memory_ps();
    row.total += op.total_ps();
    row.count += op.has_steps() ? static_cast<int>(op.steps()) : 1;
  }
  s += r.experiment() + " (" + r.engine() + " engine)\n";
  if (!r.title().empty()) s += r.title() + "\n";
  s += "\n";
  if (with_ops) {
    std::snprintf(line, sizeof line, "%-8s %5s  %-24s %-16s %12s %12s %12s %12s %6s\n", "phase", "layer",
                  "op", "partition", "compute_us", "comm_us", "memory_us", "total_us", "steps");
    s += line;
    for (const Row& row : rows) {
      std::snprintf(line, sizeof line, "%-8s %5u  %-24s %-16s %12s %12s %12s %12s %6d\n", row.phase.c_str(),
                    row.layer, row.op.c_str(), row.partition.c_str(), Us(row.compute).c_str(),
                    Us(row.comm).c_str(), Us(row.mem).c_str(), Us(row.total).c_str(), row.count);
      s += line;
    }
    s += "\n";
  }
  std::snprintf(line, sizeof line, "%-8s %5s  %12s\n", "phase", "layer", "total_us");
  s += line;
  for (const auto& l : r.layers()) {
    std::snprintf(line, sizeof line, "%-8s %5u  %12s\n", l.phase().c_str(), l.layer(),
                  Us(l.total_ps()).c_str());
    s += line;
  }
  const auto& m = r.summary();
  auto share = [&](Ps part) {
    return m.total_ps() > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(m.total_ps()) : 0.0;
  };
  s += "\nsummary\n";
  std::snprintf(line, sizeof line,
                "  total          %12s us\n  prefill        %12s us\n  decode         %12s us\n"
                "  decode step    %12s us (mean)\n",
                Us(m.total_ps()).c_str(), Us(m.prefill_ps()).c_str(), Us(m.decode_ps()).c_str(),
                Us(m.decode_step_ps_mean()).c_str());
  s += line;
  std::snprintf(
      line, sizeof line,
      "  critical path  compute %s us (%.1f%%), communication %s us (%.1f%%), memory %s us (%.1f%%)\n",
      Us(m.compute_ps()).c_str(), share(m.compute_ps()), Us(m.communication_ps()).c_str(),
      share(m.communication_ps()), Us(m.memory_ps()).c_str(), share(m.memory_ps()));
  s += line;
  std::snprintf(line, sizeof line,
                "  core utilization %.4f, achieved %.3f TFLOP/s, spilled %llu bytes\n"
                "  weights in %s, KV cache in %s\n",
                m.core_utilization(), m.achieved_tflops(), static_cast<unsigned long long>(m.spilled_bytes()),
                m.weights_location().empty() ? "-" : m.weights_location().c_str(),
                m.kv_location().empty() ? "-" : m.kv_location().c_str());
  s += line;
  if (!m.energy_modelled()) {
    s += "  energy not modelled (the chip has no energy block, or an fp32 workload meets no mac_fp32_pj)\n";
    return s;
  }
  std::snprintf(
      line, sizeof line,
      "  energy         %12.6f J: compute %.6f, SRAM %.6f, network %.6f, memory %.6f, static %.6f\n",
      m.energy_j(), m.compute_energy_j(), m.sram_energy_j(), m.network_energy_j(), m.memory_energy_j(),
      m.static_energy_j());
  s += line;
  if (m.decode_energy_per_token_j() > 0) {
    std::snprintf(line, sizeof line, "  energy/token   %12.3f mJ (decode: %.3f mJ per generated token)\n",
                  m.energy_per_token_j() * 1e3, m.decode_energy_per_token_j() * 1e3);
  } else {
    std::snprintf(line, sizeof line, "  energy/token   %12.3f mJ (no generated token)\n",
                  m.energy_per_token_j() * 1e3);
  }
  s += line;
  if (m.tdp_w() > 0) {
    std::snprintf(line, sizeof line, "  average power  %12.1f W (TDP %.0f W)\n", m.average_power_w(),
                  m.tdp_w());
  } else {
    std::snprintf(line, sizeof line, "  average power  %12.1f W\n", m.average_power_w());
  }
  s += line;
  return s;
}

}  // namespace tpsim::sim
