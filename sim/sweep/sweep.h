#pragma once
// `tpsim sweep`: the command-line entry point of sweeps.
//
//   tpsim sweep SWEEP [--jobs N] [--db FILE] [--csv FILE] [--shard I/N] [--retry-failed]
//                     [--slurm [--array-size N] [--partition P]]
//   tpsim sweep merge OUT.sqlite IN.sqlite...
//   tpsim sweep --help

#include <string>
#include <vector>

namespace tpsim::sweep {

// The usage text printed by --help and after a usage error.
extern const char* const kSweepUsage;

// `args` are the words after `sweep`. Returns the exit status: 0 done (failed
// points are recorded, not fatal), 1 store or Slurm failure, 2 bad input or
// usage, 130 interrupted (SIGINT/SIGTERM; rerun to resume). Never throws.
int SweepCommand(const std::vector<std::string>& args);

}  // namespace tpsim::sweep
