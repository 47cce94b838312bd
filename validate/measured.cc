#include "validate/measured.h"

#include <algorithm>
#include <map>
#include <utility>

namespace tpsim::validate {

LaunchTimes EmptyTimes(const LaunchPlan& plan) {
  LaunchTimes t(plan.gpus.size());
  for (size_t g = 0; g < plan.gpus.size(); ++g) {
    t[g].resize(plan.gpus[g].ops.size());
    for (size_t o = 0; o < plan.gpus[g].ops.size(); ++o)
      t[g][o].assign(plan.gpus[g].ops[o].launches.size(), -1);
  }
  return t;
}

config::Result MeasuredResult(const mapping::Program& p, const LaunchPlan& plan, const LaunchTimes& t,
                              int64_t whole_ps, const std::string& experiment) {
  const size_t n = p.ops.size();
  std::vector<int64_t> comp(n, 0), comm(n, 0);
  std::vector<bool> seen(n, false), ok(n, true);
  for (size_t g = 0; g < plan.gpus.size() && g < t.size(); ++g) {
    for (size_t o = 0; o < plan.gpus[g].ops.size() && o < t[g].size(); ++o) {
      const OpPlan& op = plan.gpus[g].ops[o];
      if (op.op >= n) continue;
      int64_t c = 0, m = 0;
      for (size_t l = 0; l < op.launches.size(); ++l) {
        int64_t v = l < t[g][o].size() ? t[g][o][l] : -1;
        if (v < 0) {
          ok[op.op] = false;
          continue;
        }
        (IsCollective(op.launches[l].kind) ? m : c) += v;
      }
      seen[op.op] = true;
      comp[op.op] = std::max(comp[op.op], c);
      comm[op.op] = std::max(comm[op.op], m);
    }
  }
  config::Result r;
  r.set_experiment(experiment);
  r.set_engine("gpu");
  auto* s = r.mutable_summary();
  int64_t start = 0, sum_comp = 0, sum_comm = 0;
  std::vector<std::pair<std::string, uint32_t>> layer_order;
  std::map<std::pair<std::string, uint32_t>, int64_t> layer_ps;
  for (size_t i = 0; i < n; ++i) {
    const mapping::OpInfo& info = p.ops[i];
    config::OpResult* o = r.add_ops();
    o->set_phase(mapping::ToString(info.ref.phase));
    o->set_layer(info.ref.layer);
    o->set_op(info.ref.op);
    o->set_partition(info.ref.Label());
    o->set_compute_ps(comp[i]);
    o->set_communication_ps(comm[i]);
    o->set_total_ps(comp[i] + comm[i]);
    o->set_start_ps(start);
    o->set_flops(info.flops);
    o->set_bytes(info.bytes);
    o->set_spilled_bytes(info.spilled_bytes);
    o->set_measured(seen[i] && ok[i]);
    start += comp[i] + comm[i];
    sum_comp += comp[i];
    sum_comm += comm[i];
    auto key = std::make_pair(std::string(mapping::ToString(info.ref.phase)), info.ref.layer);
    if (!layer_ps.count(key)) layer_order.push_back(key);
    layer_ps[key] += comp[i] + comm[i];
  }
  for (const auto& k : layer_order) {
    auto* l = r.add_layers();
    l->set_phase(k.first);
    l->set_layer(k.second);
    l->set_total_ps(layer_ps[k]);
  }
  s->set_total_ps(whole_ps > 0 ? whole_ps : start);
  s->set_compute_ps(sum_comp);
  s->set_communication_ps(sum_comm);
  int64_t prefill = 0, decode = 0;
  for (const auto& o : r.ops()) (o.phase() == "decode" ? decode : prefill) += o.total_ps();
  s->set_prefill_ps(prefill);
  s->set_decode_ps(decode);
  s->set_spilled_bytes(p.spilled_bytes);
  s->set_weights_location(mapping::ToString(p.weights_location));
  s->set_kv_location(mapping::ToString(p.kv_location));
  double flops = 0;
  for (const auto& info : p.ops) flops += info.flops;
  if (s->total_ps() > 0) s->set_achieved_tflops(flops / static_cast<double>(s->total_ps()));
  return r;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

}  // namespace tpsim::validate
