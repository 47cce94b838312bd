#include "sim/run.h"

#include "mapping/mapping.h"
#include "sim/engine.h"
#include "sim/result.h"

namespace tpsim::sim {

RunOutput RunExperiment(const Experiment& e, const RunOptions& opts) {
  ValidateExperiment(e);
  std::string engine_name = !opts.engine.empty() ? opts.engine : e.cfg.engine();
  if (engine_name.empty()) engine_name = "analytical";
  auto engine = MakeEngine(engine_name);
  if (!engine) {
    std::string valid;
    for (const auto& n : EngineNames()) valid += (valid.empty() ? "" : ", ") + n;
    throw config::ConfigError(config::Diag{config::Location{"<command line>", 1, 1}, "--engine", engine_name,
                                           "unknown engine (valid: " + valid + ")"});
  }
  arch::Chip chip = arch::Chip::Build(e.cfg.chip(), e.locs);
  RunOutput out;
  out.program = mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping());
  EngineOutput timing = engine->Run(out.program, chip);
  out.result = BuildResult(out.program, chip, timing, e.cfg.name(), engine->name());
  if (!opts.keep_task_times) out.result.clear_tasks();
  out.result.set_config(ResolvedText(e));
  return out;
}

}  // namespace tpsim::sim
