// The Program IR's cost: lowering time of an experiment (a fresh Lower every iteration,
// nothing reused) and the bytes its tasks take (TaskRecords, interned details, CSR deps;
// Program::TaskBytes) per task.
//
//   program_bench --benchmark_repetitions=11 --benchmark_report_aggregates_only=true
// prints per experiment: the lowering time, and counters tasks, deps/task, bytes/task.
// tests/bench/program_bench.sh runs it with the wafer's analytical run (peak RSS, wall).
#include <benchmark/benchmark.h>

#include <string>

#include "mapping/mapping.h"
#include "sim/experiment.h"

namespace tpsim::sim {
namespace {

const char* const kExperiments[] = {"reference-qwen3-4b", "wafer-32x32-qwen3-32b"};

void BM_Lower(benchmark::State& state) {
  const std::string name = kExperiments[state.range(0)];
  state.SetLabel(name);
  const Experiment e =
      LoadExperiment(std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/" + name + ".textproto", {});
  const arch::Chip chip = ValidateExperiment(e);
  size_t tasks = 0, deps = 0, bytes = 0;
  for (auto _ : state) {
    const mapping::Program p = mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping());
    tasks = p.num_tasks();
    deps = p.dep_list().size();
    bytes = p.TaskBytes();
    benchmark::DoNotOptimize(tasks);
  }
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["deps/task"] = tasks ? static_cast<double>(deps) / static_cast<double>(tasks) : 0;
  state.counters["bytes/task"] = tasks ? static_cast<double>(bytes) / static_cast<double>(tasks) : 0;
}
BENCHMARK(BM_Lower)->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Lower)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace tpsim::sim

BENCHMARK_MAIN();
