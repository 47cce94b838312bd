#pragma once
// Energy of a run whose decode steps are reused (sim/step_reuse.h, sim/step_period.h), byte
// for byte what BuildResult gives the unrolled Program (sim/result.h, sim/energy.h).
//
// A reused step's tasks are the template's (sim/step_template.h) with the attention shapes at
// the step's context, so each task's energy is TaskEnergyModel's of that shape: the same
// inputs, the same doubles. Floating-point sums depend on their order, so the run's sums are
// taken in the unrolled Program's order, not multiplied: the summary's parts task by task
// (ComputeEnergy's total), the ops' parts task by task within each step, the phase sums op
// by op, the layers' energies op by op, from the head's sums on (the head, the Program the
// engine timed, is the unrolled Program's prefix: its tasks and ops come first, in order).
// Static power x time uses the composed summary's total, prefill and decode times.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "arch/chip.h"
#include "mapping/program.h"
#include "result.pb.h"
#include "sim/energy.h"
#include "sim/step_template.h"
#include "workload.pb.h"

namespace tpsim::sim {

class StepEnergy {
 public:
  // `head`: the Program timed with the engine (the unrolled Program's first tasks and ops);
  // `tpl`: the template, its attention tasks found (StepTemplate::Classify).
  StepEnergy(const mapping::Program& head, const StepTemplate& tpl, const arch::Chip& chip,
             const config::Workload& wl);
  bool modelled() const { return sums_.modelled; }
  // Decode step k, after every step before it (in order).
  // `none` (empty, or a flag per task): tasks that add nothing in step k.
  void Add(uint32_t k, std::span<const uint8_t> none = {});
  // Per template op, the dynamic energy of the step last added, pJ (empty when not modelled).
  std::span<const double> op_pj() const { return op_pj_; }
  // The energy of the layers' rows and the summary's energy fields, once the summary's total,
  // prefill and decode times are the run's.
  void Finish(const arch::Chip& chip, config::Result* r) const;

 private:
  const StepTemplate& tpl_;
  TaskEnergyModel model_;
  EnergyInputs in_;
  EnergySums sums_;
  std::vector<EnergyParts> base_;       // per template task (attention: recomputed per step)
  std::vector<EnergyParts> ops_;        // per template op: the last step's parts
  std::vector<EnergyParts> fixed_ops_;  // per op with no context task: its parts (others: 0)
  std::vector<uint32_t> follow_tasks_;  // the tasks of the ops with a context task, in id order
  std::vector<double> op_pj_;           // ops_[o].total_pj()
  std::vector<uint32_t> op_layer_;      // per template op: index into layer_pj_
  std::vector<double> layer_pj_;        // per (phase, layer)
  std::map<std::pair<std::string, uint32_t>, size_t> layer_index_;
};

}  // namespace tpsim::sim
