#include "sim/run.h"

#include "mapping/mapping.h"
#include "sim/engine.h"
#include "sim/result.h"
#include "traces/trace.h"

namespace tpsim::sim {

RunOutput RunExperiment(const Experiment& e, const RunOptions& opts) {
  arch::Chip chip = ValidateExperiment(e);
  if (e.cfg.workload().has_requests() && (e.cfg.workload().batch() == 0 || e.cfg.workload().seq_len() == 0)) {
    throw config::ConfigError(config::Diag{e.locs.Find("workload.requests"), "workload.requests", "",
                                           "a request stream is served, not run: use `tpsim serve`"});
  }
  std::string engine_name = !opts.engine.empty() ? opts.engine : e.cfg.engine();
  if (engine_name.empty()) engine_name = "analytical";
  auto engine = MakeEngine(engine_name);
  if (!engine) {
    throw config::ConfigError(
        UnknownEngineDiag(config::Location{"<command line>", 1, 1}, "--engine", engine_name));
  }
  RunOutput out;
  out.program = mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping());
  EngineOutput timing = engine->Run(out.program, chip);
  out.result = BuildResult(out.program, chip, timing, e.cfg.name(), engine->name());
  if (!opts.keep_task_times) out.result.clear_tasks();
  out.result.set_config(ResolvedText(e));
  if (!opts.trace_path.empty()) {
    traces::WriteTrace(opts.trace_path, out.program, chip, timing, out.result.config());
  }
  return out;
}

}  // namespace tpsim::sim
