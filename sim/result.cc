#include "sim/result.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

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

// Walks the critical path backwards (see result.h) and adds durations by kind.
void CriticalPath(const mapping::Program& program, const EngineOutput& out, config::Summary* s) {
  const auto& tasks = program.tasks;
  const size_t n = tasks.size();
  if (n == 0) return;
  // Previous task of the same kind (compute, memory) on the same core, by (start, id).
  std::vector<int64_t> prev_on_core(n, -1);
  std::vector<std::tuple<int, int, Ps, uint32_t>> queued;  // kind, core, start, id
  for (size_t i = 0; i < n; ++i) {
    if (tasks[i].kind != TaskKind::kTransfer) {
      queued.emplace_back(static_cast<int>(tasks[i].kind), tasks[i].core, out.tasks[i].start_ps,
                          static_cast<uint32_t>(i));
    }
  }
  std::sort(queued.begin(), queued.end());
  for (size_t j = 1; j < queued.size(); ++j) {
    if (std::get<0>(queued[j]) == std::get<0>(queued[j - 1]) &&
        std::get<1>(queued[j]) == std::get<1>(queued[j - 1])) {
      prev_on_core[std::get<3>(queued[j])] = std::get<3>(queued[j - 1]);
    }
  }
  size_t cur = 0;
  for (size_t i = 1; i < n; ++i) {
    if (out.tasks[i].end_ps > out.tasks[cur].end_ps) cur = i;
  }
  std::vector<bool> visited(n, false);
  Ps by_kind[3] = {0, 0, 0};
  while (!visited[cur]) {
    visited[cur] = true;
    int64_t best = -1;
    auto consider = [&](int64_t c) {
      if (c < 0 || static_cast<size_t>(c) >= n) return;
      if (best < 0 || out.tasks[c].end_ps > out.tasks[best].end_ps ||
          (out.tasks[c].end_ps == out.tasks[best].end_ps && c < best)) {
        best = c;
      }
    };
    for (uint32_t d : tasks[cur].deps) consider(d);
    consider(prev_on_core[cur]);
    // Attribute only the part of this task after its predecessor on the path
    // ended, so overlapping spans (a queued DRAM request, an engine that reports
    // issue time as start) are never counted twice and the shares add up to at
    // most the makespan.
    Ps from = out.tasks[cur].start_ps;
    if (best >= 0) from = std::max(from, out.tasks[best].end_ps);
    by_kind[static_cast<int>(tasks[cur].kind)] += std::max<Ps>(0, out.tasks[cur].end_ps - from);
    if (best < 0) break;
    cur = static_cast<size_t>(best);
  }
  s->set_compute_ps(by_kind[static_cast<int>(TaskKind::kCompute)]);
  s->set_communication_ps(by_kind[static_cast<int>(TaskKind::kTransfer)]);
  s->set_memory_ps(by_kind[static_cast<int>(TaskKind::kMemory)]);
}

// Length of the union of intervals, sorted by start.
Ps UnionLength(std::vector<std::pair<Ps, Ps>>& iv) {
  std::sort(iv.begin(), iv.end());
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

config::Result BuildResult(const mapping::Program& program, const arch::Chip& chip, const EngineOutput& out,
                           const std::string& experiment, const std::string& engine, bool with_tasks) {
  const auto& tasks = program.tasks;
  const size_t n = tasks.size();
  if (out.tasks.size() != n) {
    throw std::invalid_argument("BuildResult: the engine timed " + std::to_string(out.tasks.size()) +
                                " tasks but the Program has " + std::to_string(n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (tasks[i].op >= program.ops.size()) {
      throw std::invalid_argument("BuildResult: task " + std::to_string(i) + " names op " +
                                  std::to_string(tasks[i].op) + " of " + std::to_string(program.ops.size()));
    }
  }
  const Ps total = out.makespan_ps;
  const int num_cores = chip.num_cores();

  config::Result r;
  r.set_experiment(experiment);
  r.set_engine(engine);

  // ---- Per op.
  const size_t num_ops = program.ops.size();
  std::vector<Span> op_all(num_ops), op_comm(num_ops), op_mem(num_ops);
  std::vector<std::tuple<uint32_t, int, Ps>> op_core_compute;  // op, core, duration
  double flops = 0;
  std::vector<Ps> core_compute(std::max(num_cores, 0), 0);
  std::vector<std::vector<std::pair<Ps, Ps>>> core_intervals(std::max(num_cores, 0));
  for (size_t i = 0; i < n; ++i) {
    const auto& t = tasks[i];
    const TaskTime& tt = out.tasks[i];
    const Ps dur = tt.end_ps - tt.start_ps;
    op_all[t.op].Add(tt.start_ps, tt.end_ps);
    switch (t.kind) {
      case TaskKind::kCompute:
        op_core_compute.emplace_back(t.op, t.core, dur);
        flops += t.flops;
        if (t.core >= 0 && t.core < num_cores) core_compute[t.core] += dur;
        break;
      case TaskKind::kTransfer:
        op_comm[t.op].Add(tt.start_ps, tt.end_ps);
        break;
      case TaskKind::kMemory:
        op_mem[t.op].Add(tt.start_ps, tt.end_ps);
        break;
    }
    if (t.core >= 0 && t.core < num_cores) core_intervals[t.core].emplace_back(tt.start_ps, tt.end_ps);
  }
  std::sort(op_core_compute.begin(), op_core_compute.end());
  std::vector<Ps> op_compute(num_ops, 0);
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
  for (size_t o = 0; o < num_ops; ++o) {
    const auto& info = program.ops[o];
    config::OpResult* op = r.add_ops();
    op->set_phase(info.ref.phase);
    op->set_layer(info.ref.layer);
    op->set_op(info.ref.op);
    op->set_partition(info.ref.partition);
    op->set_compute_ps(op_compute[o]);
    op->set_communication_ps(op_comm[o].length());
    op->set_memory_ps(op_mem[o].length());
    op->set_total_ps(op_all[o].length());
    op->set_start_ps(op_all[o].start());
    op->set_flops(info.flops);
    op->set_bytes(info.bytes);
    op->set_spilled_bytes(info.spilled_bytes);
  }

  // ---- Phases, decode steps and layers, from the ends of their tasks.
  // Segments: prefill, then decode steps in order (other phase names last).
  auto phase_rank = [](const std::string& ph) { return ph == "prefill" ? 0 : ph == "decode" ? 1 : 2; };
  Ps t0 = n == 0 ? 0 : std::numeric_limits<Ps>::max();
  for (const auto& tt : out.tasks) t0 = std::min(t0, tt.start_ps);
  using Segment = std::tuple<int, std::string, uint32_t>;  // (phase rank, phase, step)
  std::map<Segment, Ps> segment_end;
  std::map<std::pair<Segment, uint32_t>, Ps> layer_end;      // (segment, layer)
  std::vector<std::pair<std::string, uint32_t>> layer_keys;  // (phase, layer), first appearance
  std::map<std::pair<std::string, uint32_t>, size_t> layer_index;
  for (size_t o = 0; o < num_ops; ++o) {
    const auto& ref = program.ops[o].ref;
    const auto key = std::make_pair(ref.phase, ref.layer);
    if (layer_index.try_emplace(key, layer_keys.size()).second) layer_keys.push_back(key);
    if (op_all[o].empty()) continue;
    const int rank = phase_rank(ref.phase);
    const Segment seg{rank, ref.phase, ref.step};
    Ps& se = segment_end.try_emplace(seg, kNoTime).first->second;
    se = std::max(se, op_all[o].last);
    Ps& le = layer_end.try_emplace({seg, ref.layer}, kNoTime).first->second;
    le = std::max(le, op_all[o].last);
  }
  Ps prefill_end = kNoTime, decode_end = kNoTime;
  uint32_t decode_steps = 0;
  for (const auto& [seg, end] : segment_end) {
    if (std::get<0>(seg) == 0) prefill_end = std::max(prefill_end, end);
    if (std::get<0>(seg) == 1) decode_end = std::max(decode_end, end), ++decode_steps;
  }
  // Layer time: end of the layer minus end of the previous layer of the same
  // segment (the previous segment's end, or t0, for the first layer).
  std::vector<Ps> layer_total(layer_keys.size(), 0);
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
  }

  // ---- Summary.
  config::Summary* s = r.mutable_summary();
  s->set_total_ps(total);
  const Ps decode_base = prefill_end != kNoTime ? prefill_end : t0;
  s->set_prefill_ps(prefill_end != kNoTime ? prefill_end - t0 : 0);
  if (decode_end != kNoTime) {
    const Ps decode = std::max<Ps>(0, decode_end - decode_base);
    s->set_decode_ps(decode);
    s->set_decode_step_ps_mean((decode + decode_steps / 2) / decode_steps);
  }
  CriticalPath(program, out, s);
  double util_sum = 0;
  for (int c = 0; c < num_cores; ++c) util_sum += Ratio(core_compute[c], total);
  s->set_core_utilization(num_cores > 0 ? util_sum / num_cores : 0.0);
  s->set_achieved_tflops(total > 0 ? flops / static_cast<double>(total) : 0.0);
  s->set_spilled_bytes(program.spilled_bytes);
  s->set_weights_location(program.weights_location);
  s->set_kv_location(program.kv_location);

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
    cs->set_busy_ps(UnionLength(core_intervals[c]));
    cs->set_utilization(Ratio(core_compute[c], total));
  }

  if (with_tasks) {
    for (size_t i = 0; i < n; ++i) {
      config::TaskTiming* tt = r.add_tasks();
      tt->set_id(i);
      tt->set_start_ps(out.tasks[i].start_ps);
      tt->set_end_ps(out.tasks[i].end_ps);
      const auto& t = tasks[i];
      const auto& ref = program.ops[t.op].ref;
      tt->set_core(static_cast<uint32_t>(std::max(t.core, 0)));
      tt->set_dst_core(t.kind == TaskKind::kTransfer ? t.dst_core : -1);
      tt->set_kind(kKindNames[static_cast<int>(t.kind)]);
      tt->set_op(ref.op);
      tt->set_layer(ref.layer);
      tt->set_phase(ref.phase);
    }
  }
  return r;
}

// ---- JSON.
namespace {

using google::protobuf::FieldDescriptor;
using Json = nlohmann::ordered_json;

Json ToJson(const google::protobuf::Message& m);

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
      return ToJson(rep ? refl->GetRepeatedMessage(m, f, index) : refl->GetMessage(m, f));
  }
  return nullptr;
}

Json ToJson(const google::protobuf::Message& m) {
  Json j = Json::object();
  const auto* desc = m.GetDescriptor();
  const auto* refl = m.GetReflection();
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* f = desc->field(i);
    if (f->real_containing_oneof() != nullptr && !refl->HasField(m, f)) continue;
    if (f->is_repeated()) {
      Json arr = Json::array();
      const int size = refl->FieldSize(m, f);
      for (int k = 0; k < size; ++k) arr.push_back(FieldValue(m, f, k));
      j[std::string(f->name())] = std::move(arr);
    } else {
      j[std::string(f->name())] = FieldValue(m, f, 0);
    }
  }
  return j;
}

std::string Us(Ps ps) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ps) / 1e6);
  return buf;
}

}  // namespace

std::string ResultToJson(const config::Result& result) { return ToJson(result).dump(2) + "\n"; }

std::string ResultTable(const config::Result& r) {
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
    ++row.count;
  }
  std::snprintf(line, sizeof line, "%s (%s engine)\n\n", r.experiment().c_str(), r.engine().c_str());
  s += line;
  std::snprintf(line, sizeof line, "%-8s %5s  %-24s %-16s %12s %12s %12s %12s %6s\n", "phase", "layer", "op",
                "partition", "compute_us", "comm_us", "memory_us", "total_us", "steps");
  s += line;
  for (const Row& row : rows) {
    std::snprintf(line, sizeof line, "%-8s %5u  %-24s %-16s %12s %12s %12s %12s %6d\n", row.phase.c_str(),
                  row.layer, row.op.c_str(), row.partition.c_str(), Us(row.compute).c_str(),
                  Us(row.comm).c_str(), Us(row.mem).c_str(), Us(row.total).c_str(), row.count);
    s += line;
  }
  s += "\n";
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
  return s;
}

}  // namespace tpsim::sim
