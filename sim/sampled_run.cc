#include "sim/sampled_run.h"

#include <stdexcept>
#include <string>

#include "mapping/mapping.h"

namespace tpsim::sim {

std::vector<size_t> SegmentBegins(const mapping::Program& p) {
  std::vector<size_t> begin{0};
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    const mapping::OpRef& ref = p.ops[p.op(i)].ref;
    int64_t s = -1;
    if (ref.phase == mapping::Phase::kPrefill) s = 0;
    if (ref.phase == mapping::Phase::kDecode) s = int64_t{ref.step} + 1;
    if (s < static_cast<int64_t>(begin.size()) - 1) return {};
    while (static_cast<int64_t>(begin.size()) - 1 < s) begin.push_back(i);
  }
  begin.push_back(p.num_tasks());
  return begin;
}

SampledRun SampleSteps(const Experiment& e, const arch::Chip& chip, const std::vector<uint32_t>& steps,
                       const std::function<std::vector<TaskTime>(uint32_t)>& times_of,
                       const EngineOutput& whole) {
  SampledRun r;
  mapping::LowerOptions o;
  o.decode_steps_only = steps;
  r.program = mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping(), o);
  const std::vector<size_t> begin = SegmentBegins(r.program);
  if (begin.empty()) throw std::logic_error("sampled run: the Program's steps are not in order");
  r.timing.tasks.resize(r.program.num_tasks());
  for (size_t s = 0; s + 1 < begin.size(); ++s) {
    if (begin[s] == begin[s + 1]) continue;
    const std::vector<TaskTime> t = times_of(static_cast<uint32_t>(s));
    if (t.size() != begin[s + 1] - begin[s])
      throw std::logic_error("sampled run: step " + std::to_string(s) + " has another number of tasks");
    std::copy(t.begin(), t.end(), r.timing.tasks.begin() + static_cast<std::ptrdiff_t>(begin[s]));
  }
  r.timing.links = whole.links;
  r.timing.channels = whole.channels;
  r.timing.makespan_ps = whole.makespan_ps;
  r.timing.contention = whole.contention;
  return r;
}

}  // namespace tpsim::sim
