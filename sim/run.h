#pragma once
// Running one experiment end to end: build the chip, lower to a Program, time it
// with an engine, and shape the Result.

#include <string>

#include "mapping/program.h"
#include "result.pb.h"
#include "sim/experiment.h"

namespace tpsim::sim {

struct RunOptions {
  std::string engine;          // empty: the experiment's engine, else "analytical"
  bool keep_task_times = false;  // fill Result.tasks
  std::string trace_path;        // non-empty: write a Perfetto (or .json: Chrome) trace there
};

struct RunOutput {
  config::Result result;
  mapping::Program program;
};

// Validates, lowers and times `e`. Throws config::ConfigError for bad input and
// sim::StallError when the Program cannot progress.
RunOutput RunExperiment(const Experiment& e, const RunOptions& opts);

}  // namespace tpsim::sim
