#pragma once
// Measured times -> the Result schema (engine "gpu"), plain C++ so it is tested on the CPU.
//
// Ops run one after another on the GPU(s), each timed alone (median of N repetitions), so:
//   ops[i].compute_ps        max over GPUs of the sum of that op's kernel medians on the GPU
//   ops[i].communication_ps  max over GPUs of that op's NCCL call medians
//   ops[i].total_ps          compute_ps + communication_ps; start_ps the running sum
//   ops[i].measured          false when any of its launches could not run (e.g. a collective
//                            over more GPUs than the machine has); its time then covers only
//                            what ran
//   summary.total_ps         the whole run when it ran end to end (`whole_ps` > 0), else the
//                            sum of ops' total_ps; compute/communication_ps sums over ops
//   layers                   per (phase, layer): sum of its ops' total_ps

#include <cstdint>
#include <string>
#include <vector>

#include "mapping/program.h"
#include "result.pb.h"
#include "validate/lowering.h"

namespace tpsim::validate {

// Median per launch, parallel to LaunchPlan::gpus[g].ops[o].launches[l]; < 0: not measured.
using LaunchTimes = std::vector<std::vector<std::vector<int64_t>>>;

LaunchTimes EmptyTimes(const LaunchPlan& plan);

config::Result MeasuredResult(const mapping::Program& p, const LaunchPlan& plan, const LaunchTimes& t,
                              int64_t whole_ps, const std::string& experiment);

// Median of `v` (mean of the two middle values for an even count; 0 when empty).
double Median(std::vector<double> v);

}  // namespace tpsim::validate
