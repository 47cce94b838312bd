#include "validate/numerics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "mapping/mapping.h"

namespace tpsim::validate {
namespace {

std::string Describe(const config::Workload& w, bool reduced) {
  std::string s =
      "batch " + std::to_string(std::max(1u, w.batch())) + ", seq_len " + std::to_string(w.seq_len());
  if (w.cached_prefix()) s += " after " + std::to_string(w.cached_prefix()) + " cached";
  s += ", " + std::to_string(w.decode_steps()) + " decode step" + (w.decode_steps() == 1 ? "" : "s") + ", " +
       std::to_string(w.num_layers()) + " layer" + (w.num_layers() == 1 ? "" : "s");
  if (reduced) s += " (batch and seq_len reduced to fit the check's memory budget)";
  return s;
}

}  // namespace

NumericsPlans PlanNumerics(const arch::Chip& chip, const config::Model& model, const config::Workload& wl,
                           const config::Mapping& m, uint64_t max_bytes) {
  NumericsPlans out;
  NumericsInstance& in = out.instance;
  in.workload = wl;
  in.workload.set_batch(std::max(1u, wl.batch()));
  in.workload.set_num_layers(std::max(1u, m.pipeline_stages()));
  in.partitioned = m;
  in.unpartitioned = m;
  in.unpartitioned.set_tp(1);
  in.unpartitioned.set_pipeline_stages(1);
  in.unpartitioned.clear_overrides();
  in.unpartitioned.set_partition("k_split");
  in.unpartitioned.set_collective("ring");
  in.unpartitioned.set_placement("linear");
  in.unpartitioned.set_grid_rows(0);
  in.unpartitioned.set_attention_dp(0);  // one replica: the whole batch on the one rank
  if (in.unpartitioned.has_moe()) {      // one rank holds every expert whole; the routing stays
    in.unpartitioned.mutable_moe()->set_ep(1);
    in.unpartitioned.mutable_moe()->set_tp(1);
  }
  for (;;) {
    out.part = mapping::Lower(chip, model, in.workload, in.partitioned, {.functional = true});
    out.ref = mapping::Lower(chip, model, in.workload, in.unpartitioned, {.functional = true});
    out.part_plan = BuildFuncPlan(out.part);
    out.ref_plan = BuildFuncPlan(out.ref);
    // Attention replicas (mapping.attention_dp) each keep whole sequences: the batch stays a
    // multiple of their count.
    const uint32_t dp = std::max(1u, m.attention_dp());
    if (out.Bytes() <= max_bytes || (in.workload.batch() <= dp && in.workload.seq_len() <= 16)) break;
    in.reduced = true;
    if (in.workload.batch() > dp)  // fewer sequences first: each is checked the same way
      in.workload.set_batch(std::max(dp, in.workload.batch() / 2 / dp * dp));
    else
      in.workload.set_seq_len(std::max(16u, in.workload.seq_len() / 2));
    in.workload.set_decode_steps(std::min(2u, in.workload.decode_steps()));
  }
  in.description = Describe(in.workload, in.reduced);
  return out;
}

NumericsVerdict JudgeNumerics(const std::string& what, const FuncPlan& plan,
                              const std::vector<mapping::Matrix>& got,
                              const std::vector<mapping::Matrix>& want, double tolerance) {
  NumericsVerdict v;
  v.diff = CompareOutputs(got, want);
  const OutputDiff& d = v.diff;
  std::string name = "output " + std::to_string(d.output);
  if (d.output < plan.outputs.size()) {
    const FuncPlanOutput& o = plan.outputs[d.output];
    name = o.phase + (o.phase == "decode" ? " step " + std::to_string(o.step) : "") + " output [" +
           std::to_string(o.rows) + " x " + std::to_string(o.cols) + "]";
  }
  char buf[512];
  if (d.shape_mismatch) {
    v.ok = false;
    std::snprintf(buf, sizeof buf, "%s: %s: the outputs' count or shapes differ", what.c_str(), name.c_str());
  } else {
    v.ok = d.rel <= tolerance;
    std::snprintf(buf, sizeof buf,
                  "%s: worst is the %s: max |error| %.4g at (row %u, col %u): %.6g vs %.6g; relative to max "
                  "|reference| %.4g: %.4g (tolerance %.4g)%s",
                  what.c_str(), name.c_str(), d.max_abs, d.row, d.col, d.got, d.want, d.max_ref, d.rel,
                  tolerance, v.ok ? "" : ": MISMATCH");
  }
  v.text = buf;
  return v;
}

namespace {

using OpKey = std::tuple<std::string, uint32_t, uint32_t, std::string>;  // phase, step, layer, op

OpKey KeyOf(const mapping::Program& p, const FuncStep& s) {
  const mapping::OpRef& r = p.ops[p.task(s.task).op].ref;
  return {mapping::ToString(r.phase), r.step, r.layer, r.op};
}

// Per op of `p`, its op steps, in order.
std::map<OpKey, std::vector<size_t>> StepsByOp(const mapping::Program& p, const FuncPlan& plan) {
  std::map<OpKey, std::vector<size_t>> m;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const FuncStep& s = plan.steps[i];
    if (s.origin != FuncStepOrigin::kOp || s.tensor < 0 || s.task < 0 ||
        static_cast<size_t>(s.task) >= p.num_tasks() || p.task(s.task).op >= p.ops.size())
      continue;
    m[KeyOf(p, s)].push_back(i);
  }
  return m;
}

// The logical tensor an op wrote, put together from its steps' traced values. `partial` when two
// ranks wrote the same element of a matmul result (partial sums).
struct Assembled {
  uint32_t rows = 0, cols = 0;
  std::vector<float> v;
  std::vector<uint8_t> set;
  std::vector<int> core;
  bool partial = false;
  bool ok = false;
};
Assembled Assemble(const mapping::Program& p, const FuncPlan& plan, const StepTrace& trace,
                   const std::vector<size_t>& steps) {
  Assembled a;
  if (steps.empty() || plan.steps[steps[0]].tensor < 0) return a;
  const mapping::FuncTensor& ft = p.func.tensors[plan.steps[steps[0]].tensor];
  a.rows = ft.rows, a.cols = ft.cols;
  const uint64_t n = uint64_t{a.rows} * a.cols;
  a.v.assign(n, 0.f), a.set.assign(n, 0), a.core.assign(n, -1);
  for (size_t i : steps) {
    const FuncStep& s = plan.steps[i];
    if (i >= trace.size() || s.tensor != plan.steps[steps[0]].tensor) return a;
    const FuncView& o = s.out;
    size_t idx = 0;
    for (uint32_t b = 0; b < s.batch; ++b)
      for (uint32_t r = 0; r < o.rows; ++r)
        for (uint32_t c = 0; c < o.cols; ++c, ++idx) {
          const uint64_t at = o.offset + b * s.stride_out + r * o.ld + c * o.cs - s.tensor_base;
          if (at >= n || idx >= trace[i].size()) return a;
          if (a.set[at] && a.core[at] != s.core && s.kind == FuncStepKind::kMatmul) a.partial = true;
          a.v[at] = trace[i][idx], a.set[at] = 1, a.core[at] = s.core;
        }
  }
  a.ok = true;
  return a;
}

}  // namespace

std::string FirstDifferingOp(const NumericsPlans& np, const StepTrace& part, const StepTrace& ref,
                             double tolerance) {
  const auto part_ops = StepsByOp(np.part, np.part_plan);
  const auto ref_ops = StepsByOp(np.ref, np.ref_plan);
  std::vector<std::pair<size_t, OpKey>> order;  // TP 1 ops by first step
  for (const auto& [key, steps] : ref_ops) order.push_back({steps[0], key});
  std::sort(order.begin(), order.end());
  for (const auto& [first, key] : order) {
    auto it = part_ops.find(key);
    if (it == part_ops.end()) continue;
    const Assembled want = Assemble(np.ref, np.ref_plan, ref, ref_ops.at(key));
    const Assembled got = Assemble(np.part, np.part_plan, part, it->second);
    if (!want.ok || !got.ok || got.partial || got.rows != want.rows || got.cols != want.cols) continue;
    double mx = 0, err = 0;
    for (size_t i = 0; i < want.v.size(); ++i) {
      if (!want.set[i] || !got.set[i]) continue;
      mx = std::max(mx, std::fabs(double{want.v[i]}));
      const double e = std::fabs(double{got.v[i]} - want.v[i]);
      err = std::isnan(e) ? INFINITY : std::max(err, e);
    }
    const double rel = err / std::max(mx, 1e-30);
    if (rel <= tolerance) continue;
    const auto& [phase, step, layer, op] = key;
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "first op that differs: %s%s layer %u %s [%u x %u]: max |error| %.4g, relative %.4g",
                  phase.c_str(), phase == "decode" ? (" step " + std::to_string(step)).c_str() : "", layer,
                  op.c_str(), want.rows, want.cols, err, rel);
    return buf;
  }
  return "";
}

config::Workload CrossCheckWorkload(const config::Workload& wl) {
  config::Workload w = wl;
  w.set_seq_len(std::min(8u, std::max(1u, wl.seq_len())));
  w.set_cached_prefix(std::min(8u, wl.cached_prefix()));
  w.set_decode_steps(std::min(1u, wl.decode_steps()));
  return w;
}

NumericsReport RunNumericsCheck(const NumericsPlans& np, const NumericsPlans& small, const FuncRunner& device,
                                const std::string& device_name, double tolerance) {
  const FuncExecOptions bf16{true};
  NumericsReport r;
  NumericsVerdict whole =
      JudgeNumerics("partitioned vs TP 1 (" + device_name + ")", np.part_plan, device(np.part_plan, nullptr),
                    device(np.ref_plan, nullptr), tolerance);
  const auto cpu = RunFuncPlanCpu(small.part_plan, bf16);
  if (!whole.ok) {
    StepTrace tp, tr;  // trace both runs to find the op
    device(np.part_plan, &tp);
    device(np.ref_plan, &tr);
    const std::string op = FirstDifferingOp(np, tp, tr, tolerance);
    if (!op.empty()) whole.text += "; " + op;
    NumericsVerdict c =
        JudgeNumerics("", small.part_plan, cpu, RunFuncPlanCpu(small.ref_plan, bf16), tolerance);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4g", c.diff.rel);
    whole.text +=
        "; on " + small.instance.description +
        " the CPU backend gives partitioned vs TP 1 a relative error of " + buf + ": " +
        (c.ok ? "within tolerance there, so suspect the " + device_name + " run or the larger shapes"
              : std::string("the Program's data semantics (mapping) are wrong, not the device run"));
  }
  NumericsVerdict cross =
      JudgeNumerics("partitioned, " + device_name + " vs CPU (" + small.instance.description + ")",
                    small.part_plan, device(small.part_plan, nullptr), cpu, tolerance);
  if (!cross.ok) {  // the same steps on both: find the first one whose values differ
    StepTrace td, tc;
    device(small.part_plan, &td);
    RunFuncPlanCpu(small.part_plan, bf16, &tc);
    const StepDiff d = FirstDivergentStep(td, tc, tolerance);
    if (d.step >= 0) {
      char buf[128];
      std::snprintf(buf, sizeof buf, ": max |error| %.4g, relative %.4g", d.max_abs, d.rel);
      cross.text +=
          "; first divergent " + small.part_plan.Describe(static_cast<size_t>(d.step), small.part) + buf;
    }
  }
  r.ok = whole.ok && cross.ok;
  char buf[160];
  std::snprintf(buf, sizeof buf, "max relative error %.4g (tolerance %.4g)", whole.diff.rel, tolerance);
  r.note = std::string("numerics: the partitioned layer ") + (whole.ok ? "matched" : "did NOT match") +
           " the same layer at TP 1 on " + device_name + " on " + np.instance.description + ": " + buf +
           "; " + device_name + " " + (cross.ok ? "matched" : "did NOT match") + " the CPU backend on " +
           small.instance.description;
  r.verdicts = {whole, cross};
  return r;
}

}  // namespace tpsim::validate
