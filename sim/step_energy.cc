#include "sim/step_energy.h"

#include <algorithm>

#include "sim/result.h"

namespace tpsim::sim {

namespace {

std::pair<std::string, uint32_t> LayerKey(const mapping::OpRef& ref) {
  return {std::string(mapping::ToString(ref.phase)), ref.layer};
}

}  // namespace

StepEnergy::StepEnergy(const mapping::Program& head, const StepTemplate& tpl, const arch::Chip& chip,
                       const config::Workload& wl)
    : tpl_(tpl), model_(chip, EnergyInputsOf(wl).dtype), in_(EnergyInputsOf(wl)) {
  const ProgramEnergy pe = ComputeEnergy(head, chip, in_.dtype);
  sums_ = SumEnergy(head, pe);
  if (!sums_.modelled) return;
  // The layers' sums over the head's ops, in op order (BuildResult's).
  auto index = [&](const mapping::OpRef& ref) {
    auto [it, inserted] = layer_index_.try_emplace(LayerKey(ref), layer_pj_.size());
    if (inserted) layer_pj_.push_back(0);
    return it->second;
  };
  for (size_t o = 0; o < head.ops.size() && o < pe.ops.size(); ++o)
    layer_pj_[index(head.ops[o].ref)] += pe.ops[o].total_pj();
  const mapping::Program& p = tpl.program();
  for (const mapping::OpInfo& op : p.ops) op_layer_.push_back(static_cast<uint32_t>(index(op.ref)));
  base_.resize(p.num_tasks());
  for (size_t i = 0; i < p.num_tasks(); ++i)
    if (!tpl.IsContext(i)) base_[i] = model_.Task(p, i);
  op_pj_.resize(p.ops.size());
  // The ops with no context task sum the same parts in the same order every step.
  std::vector<uint8_t> follows(p.ops.size(), 0);
  for (uint32_t i : tpl.context_tasks())
    if (p.op(i) < follows.size()) follows[p.op(i)] = 1;
  fixed_ops_.assign(p.ops.size(), EnergyParts{});
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    const uint32_t op = p.op(i);
    if (op >= follows.size()) continue;
    if (follows[op]) {
      follow_tasks_.push_back(static_cast<uint32_t>(i));
    } else {
      fixed_ops_[op] += base_[i];
    }
  }
}

void StepEnergy::Add(uint32_t k, std::span<const uint8_t> none) {
  if (!sums_.modelled) return;
  const mapping::Program& p = tpl_.program();
  for (uint32_t i : tpl_.context_tasks()) {
    if (!none.empty() && none[i]) {
      base_[i] = EnergyParts{};  // + 0.0 leaves every sum as it is
    } else if (p.kind(i) == mapping::TaskKind::kMemory) {
      const mapping::MemoryDetail& m = p.memory(i);
      base_[i] = model_.MemoryAs(p.core(i), m.channel, tpl_.MemoryBytesIn(i, k), m.write);
    } else {
      base_[i] = model_.ComputeAs(tpl_.ShapeIn(i, k), p.core(i));
    }
  }
  // ComputeEnergy's loop over this step's tasks: the total task by task, each op's parts in
  // id order (those of the ops with no context task, fixed_ops_, are the same every step).
  for (const EnergyParts& e : base_) sums_.total += e;
  ops_ = fixed_ops_;
  for (uint32_t i : follow_tasks_) ops_[p.op(i)] += base_[i];
  // SumEnergy's and BuildResult's loops over this step's ops.
  for (size_t o = 0; o < ops_.size(); ++o) {
    const mapping::Phase ph = p.ops[o].ref.phase;
    if (ph == mapping::Phase::kPrefill) sums_.prefill += ops_[o];
    if (ph == mapping::Phase::kDecode) sums_.decode += ops_[o];
    op_pj_[o] = ops_[o].total_pj();
    layer_pj_[op_layer_[o]] += op_pj_[o];
  }
}

void StepEnergy::Finish(const arch::Chip& chip, config::Result* r) const {
  if (!sums_.modelled) return;
  for (config::LayerResult& lr : *r->mutable_layers()) {
    auto it = layer_index_.find({lr.phase(), lr.layer()});
    if (it != layer_index_.end()) lr.set_energy_j(layer_pj_[it->second] * 1e-12);
  }
  FillEnergy(chip, sums_, in_, r->mutable_summary());
}

}  // namespace tpsim::sim
