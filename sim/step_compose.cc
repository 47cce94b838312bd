#include "sim/step_compose.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "sim/schedule.h"
#include "sim/step_source.h"

namespace tpsim::sim {

namespace {

using mapping::Program;
using mapping::TaskKind;

}  // namespace

namespace {
double Ratio(Ps num, Ps den) {  // as BuildResult's (sim/result.cc)
  if (den <= 0) return 0.0;
  return std::clamp(static_cast<double>(num) / static_cast<double>(den), 0.0, 1.0);
}
}  // namespace

void FinishResult(const arch::Chip& chip, const RunTotals& t, config::Result* r) {
  config::Summary& s = *r->mutable_summary();
  const Ps total = t.total;
  s.set_total_ps(total);
  const Ps decode = std::max<Ps>(0, total - t.prefill_end);
  s.set_decode_ps(decode);
  if (t.decode_steps) s.set_decode_step_ps_mean((decode + t.decode_steps / 2) / t.decode_steps);
  s.set_compute_ps(t.path.compute_ps);
  s.set_communication_ps(t.path.communication_ps);
  s.set_memory_ps(t.path.memory_ps);
  const int num_cores = chip.num_cores();
  double util_sum = 0;
  for (int c = 0; c < num_cores; ++c) util_sum += Ratio(t.core_compute[c], total);
  s.set_core_utilization(num_cores > 0 ? util_sum / num_cores : 0.0);
  s.set_achieved_tflops(total > 0 ? t.flops / static_cast<double>(total) : 0.0);
  s.set_spilled_bytes(t.spilled_bytes);
  // A link's or a channel's row (LinkStat and DramStat have the same fields).
  auto fill = [&](auto* row, const std::string& name, const auto& u) {
    row->set_name(name);
    row->set_bytes(u.bytes);
    row->set_busy_ps(u.busy_ps);
    row->set_utilization(Ratio(u.busy_ps, total));
    row->set_max_queue_ps(u.max_queue_ps);
  };
  r->clear_links();
  const auto& links = chip.links();
  for (size_t l = 0; l < t.links.size() && l < links.size(); ++l)
    if (t.links[l].bytes != 0)
      fill(r->add_links(), chip.node(links[l].src).name + "->" + chip.node(links[l].dst).name, t.links[l]);
  r->clear_dram();
  const auto& channels = chip.channels();
  for (size_t c = 0; c < t.channels.size() && c < channels.size(); ++c)
    if (t.channels[c].bytes != 0) fill(r->add_dram(), channels[c].name, t.channels[c]);
  for (int c = 0; c < num_cores && c < r->cores_size(); ++c) {
    config::CoreStat* cs = r->mutable_cores(c);
    cs->set_compute_ps(t.core_compute[c]);
    cs->set_busy_ps(t.core_busy[c]);
    cs->set_utilization(Ratio(t.core_compute[c], total));
  }
}

void AddStepsUse(const EngineOutput& step_out, uint64_t steps, std::vector<LinkUsage>* links,
                 std::vector<ChannelUsage>* channels) {
  for (size_t l = 0; l < links->size() && l < step_out.links.size(); ++l) {
    (*links)[l].bytes += step_out.links[l].bytes * steps;
    (*links)[l].busy_ps += step_out.links[l].busy_ps * static_cast<Ps>(steps);
  }
  for (size_t c = 0; c < channels->size() && c < step_out.channels.size(); ++c) {
    (*channels)[c].bytes += step_out.channels[c].bytes * steps;
    (*channels)[c].busy_ps += step_out.channels[c].busy_ps * static_cast<Ps>(steps);
  }
}

void AddStepCores(const Program& step, std::span<const TaskTime> t, BusyUnion* busy,
                  std::vector<Ps>* core_compute, std::span<const uint32_t> order) {
  const int cores = static_cast<int>(core_compute->size());
  // A core's compute time leaves out GPU collective kernels; a Program without any (every chip
  // but a GPU node) skips the per-task look at its shape (this runs for every decode step).
  const bool kernels =
      std::any_of(step.shapes().begin(), step.shapes().end(),
                  [](const mapping::ComputeShape& s) { return s.op_kind == llm::OpKind::kCollective; });
  auto computes = [&](size_t i) {
    return step.kind(i) == TaskKind::kCompute && !(kernels && CollectiveKernel(step, i));
  };
  auto add = [&](size_t i) {
    const int c = step.core(i);
    if (c < 0 || c >= cores) return;
    busy->Add(c, t[i].start_ps, t[i].end_ps);
    if (computes(i)) (*core_compute)[c] += t[i].end_ps - t[i].start_ps;
  };
  if (order.empty()) {
    for (size_t i = 0; i < step.num_tasks(); ++i) add(i);
    return;
  }
  // In start order, a core's intervals that overlap or touch are joined before they reach the
  // union (the same union: BusyUnion joins them alike, in integers), so that it sorts and
  // merges a few runs per core and step instead of every task.
  constexpr Ps kNone = std::numeric_limits<Ps>::min();
  thread_local std::vector<std::pair<Ps, Ps>> run;
  run.assign(static_cast<size_t>(cores), {0, kNone});
  for (uint32_t i : order) {
    const int c = step.core(i);
    if (c < 0 || c >= cores) continue;
    const Ps s = t[i].start_ps, e = t[i].end_ps;
    if (computes(i)) (*core_compute)[c] += e - s;
    auto& [rs, re] = run[c];
    if (re != kNone && s <= re) {
      re = std::max(re, e);
      continue;
    }
    if (re != kNone) busy->Add(c, rs, re);
    rs = s, re = e;
  }
  for (int c = 0; c < cores; ++c)
    if (run[c].second != kNone) busy->Add(c, run[c].first, run[c].second);
}

SampledRun SampleComposed(const Experiment& e, const arch::Chip& chip,
                          const std::vector<uint32_t>& observe_steps, std::span<const TaskTime> head,
                          const std::vector<size_t>& begin,
                          const std::map<uint32_t, std::vector<TaskTime>>& observed,
                          std::vector<LinkUsage> links, std::vector<ChannelUsage> channels, Ps makespan) {
  EngineOutput whole;
  whole.links = std::move(links);
  whole.channels = std::move(channels);
  whole.makespan_ps = makespan;
  return SampleSteps(
      e, chip, observe_steps,
      [&](uint32_t seg) {
        if (seg + 1 < begin.size())
          return std::vector<TaskTime>(head.begin() + static_cast<std::ptrdiff_t>(begin[seg]),
                                       head.begin() + static_cast<std::ptrdiff_t>(begin[seg + 1]));
        return observed.at(seg);
      },
      whole);
}

bool DepsOnStepsBefore(const Program& head, const std::vector<size_t>& begin, size_t n, uint32_t ref,
                       uint32_t last, StepDeps* deps, uint32_t* steps_back, std::string* why) {
  auto seg_of = [&](size_t id) { return SegmentOf(begin, id); };
  auto deps_of = [&](uint32_t s, size_t i, std::vector<std::pair<uint32_t, uint32_t>>* out) {
    out->clear();
    for (uint32_t d : head.deps(begin[s] + i)) {
      if (d >= begin[s]) continue;
      const uint32_t sd = seg_of(d);
      out->emplace_back(s - sd, static_cast<uint32_t>(d - begin[sd]));
    }
  };
  deps->assign(n, {});
  *steps_back = 0;
  for (size_t i = 0; i < n; ++i) {
    deps_of(ref, i, &(*deps)[i]);
    for (const auto& [off, r] : (*deps)[i]) *steps_back = std::max(*steps_back, off);
  }
  std::vector<std::pair<uint32_t, uint32_t>> tmp;
  for (uint32_t s = 3; s <= last; ++s)
    for (size_t i = 0; i < n; ++i) {
      deps_of(s, i, &tmp);
      if (tmp != (*deps)[i]) {
        *why = "decode steps depend on the steps before them differently";
        return false;
      }
    }
  return true;
}

void AddTaskTimings(const Program& step, std::span<const TaskTime> t, Ps offset, uint64_t id0,
                    config::Result* r) {
  for (size_t i = 0; i < step.num_tasks(); ++i) {
    config::TaskTiming* tt = r->add_tasks();
    const mapping::Task task = step.task(i);
    const mapping::OpRef& ref = step.ops[task.op].ref;
    tt->set_id(id0 + i);
    tt->set_start_ps(offset + t[i].start_ps);
    tt->set_end_ps(offset + t[i].end_ps);
    tt->set_core(static_cast<uint32_t>(std::max<int>(task.core, 0)));
    tt->set_dst_core(task.kind == TaskKind::kTransfer ? task.dst_core : -1);
    tt->set_kind(task.kind == TaskKind::kCompute    ? "compute"
                 : task.kind == TaskKind::kTransfer ? "transfer"
                                                    : "memory");
    tt->set_op(ref.op);
    tt->set_layer(ref.layer);
    tt->set_phase(mapping::ToString(ref.phase));
  }
}

std::map<uint32_t, int> DecodeLayers(const config::Result& r) {
  std::map<uint32_t, int> out;
  for (int i = 0; i < r.layers_size(); ++i)
    if (r.layers(i).phase() == "decode") out[r.layers(i).layer()] = i;
  return out;
}

bool AddLayerTotals(const Program& step, const StepTimes& st, const std::map<uint32_t, int>& decode_layer,
                    Ps* prev_end, config::Result* r) {
  std::map<uint32_t, Ps> layer_end;
  Ps seg_end = std::numeric_limits<Ps>::min();
  for (size_t o = 0; o < step.ops.size(); ++o) {
    if (st.op_all[o].empty()) continue;
    Ps& le = layer_end.try_emplace(step.ops[o].ref.layer, std::numeric_limits<Ps>::min()).first->second;
    le = std::max(le, st.op_all[o].last);
    seg_end = std::max(seg_end, st.op_all[o].last);
  }
  Ps baseline = *prev_end;
  for (const auto& [layer, end] : layer_end) {
    auto it = decode_layer.find(layer);
    if (it == decode_layer.end()) return false;
    config::LayerResult* lr = r->mutable_layers(it->second);
    lr->set_total_ps(lr->total_ps() + std::max<Ps>(0, end - baseline));
    baseline = std::max(baseline, end);
  }
  *prev_end = seg_end;
  return true;
}

OpCores IndexOpCores(const Program& p) {
  OpCores out;
  out.pair.assign(p.num_tasks(), 0);
  std::map<std::pair<uint32_t, int>, uint32_t> index;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    if (p.kind(i) != TaskKind::kCompute) continue;
    auto [it, added] = index.try_emplace({p.op(i), p.core(i)}, static_cast<uint32_t>(out.op_of_pair.size()));
    if (added) out.op_of_pair.push_back(p.op(i));
    out.pair[i] = it->second;
    if (CollectiveKernel(p, i)) out.collective.push_back(static_cast<uint32_t>(i));
  }
  return out;
}

void ReduceOps(const Program& p, std::span<const TaskTime> t, StepTimes* out, const OpCores& pairs) {
  const size_t ops = p.ops.size();
  out->op_all.assign(ops, {});
  out->op_comm.assign(ops, {});
  out->op_mem.assign(ops, {});
  out->op_compute.assign(ops, 0);
  out->pair_compute.assign(pairs.op_of_pair.size(), 0);
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    const uint32_t o = p.op(i);
    const TaskKind k = p.kind(i);
    out->op_all[o].Add(t[i].start_ps, t[i].end_ps);
    if (k == TaskKind::kTransfer) out->op_comm[o].Add(t[i].start_ps, t[i].end_ps);
    if (k == TaskKind::kMemory) out->op_mem[o].Add(t[i].start_ps, t[i].end_ps);
    if (k == TaskKind::kCompute) out->pair_compute[pairs.pair[i]] += t[i].end_ps - t[i].start_ps;
  }
  for (size_t q = 0; q < pairs.op_of_pair.size(); ++q) {
    Ps& c = out->op_compute[pairs.op_of_pair[q]];
    c = std::max(c, out->pair_compute[q]);
  }
  // A GPU's collective kernel is communication, and its op has no compute.
  for (uint32_t i : pairs.collective) {
    out->op_comm[p.op(i)].Add(t[i].start_ps, t[i].end_ps);
    out->op_compute[p.op(i)] = 0;
  }
}

void OpRows::Add(uint32_t k, const StepTimes& t, Ps offset, config::Result* r,
                 std::span<const double> energy_pj) {
  energy_ = !energy_pj.empty();
  const bool sum = sum_ && k >= first_summed_;
  for (size_t o = 0; o < step_.ops.size(); ++o) {
    OpRowValues one;
    OpRowValues& row = sum ? rows_[o] : one;
    if (!sum || summed_ == 0) row.start = t.op_all[o].empty() ? 0 : offset + t.op_all[o].first;
    row.compute += t.op_compute[o];
    row.comm += t.op_comm[o].length();
    row.mem += t.op_mem[o].length();
    row.total += t.op_all[o].length();
    row.flops += t.op_flops[o];
    row.bytes += t.op_bytes[o];
    row.spilled += t.op_spilled[o];
    if (energy_) row.energy_pj += energy_pj[o];
    if (!sum) AddOpRow(step_.ops[o].ref, row, 0, energy_, r);
  }
  summed_ += sum;
}

void OpRows::Finish(config::Result* r) const {
  // None when the run ends before kFirstSummedStep (a row_steps below it, in tests).
  if (summed_ == 0) return;
  for (size_t o = 0; o < rows_.size(); ++o) AddOpRow(step_.ops[o].ref, rows_[o], summed_, energy_, r);
}

}  // namespace tpsim::sim
