#pragma once
// What lowering an experiment will cost, before lowering it: an upper bound on the
// Program's tasks and on the memory that lowering and timing it take, in closed form
// from the workload, the model's layer shape, the mapping and the collective algorithm
// (microseconds, no Program built). `tpsim run`, `serve` and sweep points refuse an
// experiment whose estimate exceeds --max-memory before they allocate it.
//
//   tasks <= passes x layers x P x (V + G x R) x (1 + mem)      compute and memory tasks
//          + passes x layers x C x X(P)                           collective transfers
//          + passes x (stages - 1) x P x P                        stage hand-overs
//          + layers x (MoE blocks: prefill + decode steps)        MoE models (estimate.cc;
//            an all_to_all of T tokens: at most 2 T top_k x moe.tp transfers)
//   passes = decode_steps + 1 (the prefill, then one per decode step)
//   V      = vector tasks per rank and layer (norms, rope, KV writes, attention, adds)
//   G x R  = the 7 weight GEMMs, R shards per rank (P for m_split_rotate, the grid's
//            rows for mn_2d k_steps, else 1)
//   mem    = memory tasks per compute task (weights streamed, KV in DRAM, spills)
//   C      = collectives per layer of the partitioners used (counted per partitioner)
//   X(P)   = transfers of the largest collective the algorithm makes on P ranks; for an
//            all-sparse MoE layer under megatron, whose collectives move whole rows, at most
//            2 T (P - 1) in a pass of T tokens (a decode step's: the batch)
// and in bytes, kBytesPerTask a task plus kBytesPerDep for each of the collectives' deps past 2
// a transfer (direct's all-reduce has P^3 of them).
// tests/sim/estimate_test.cc holds the bound against the lowering of every shipped
// experiment and of each partitioner x algorithm, within a stated factor.

#include <cstdint>
#include <string>

#include "arch/chip.h"
#include "mapping.pb.h"
#include "model.pb.h"
#include "workload.pb.h"

namespace tpsim::mapping {

struct ProgramEstimate {
  double tasks = 0;             // upper bound on Program::num_tasks()
  double peak_bytes = 0;        // upper bound on the memory lowering + timing take at once
  double passes = 0;            // decode_steps + 1
  double layers = 0;            // simulated layers
  double per_layer = 0;         // tasks per layer of the prefill (the most of any pass)
  double per_layer_decode = 0;  // of a decode step (fewer where collectives scale with tokens)
  int tp = 1;
  // Bytes per task at the peak of a run (Program records, details, deps, the lowerer's
  // bookkeeping, an engine's per-task times): 228-229 measured as peak RSS / tasks of
  // `tpsim run` (analytical) on reference-qwen3-4b with 400 and 1000 decode steps and on
  // wafer-32x32-qwen3-32b (README, "Bad input, files and resource limits"); 131, 125 and 85
  // on the same runs since the Program's records shrank (2026-12-04); and the process's own,
  // without a Program.
  static constexpr double kBytesPerTask = 256;
  static constexpr double kBaseBytes = 64e6;
  // More per task when the Result keeps every task's times (`tpsim run --tasks`): 242
  // measured as the growth of peak RSS per task of `tpsim run --tasks --out` against the same
  // without --tasks (356 against 114 per task: reference-qwen3-4b --no-reuse, 400 -> 800 decode
  // steps, 2026-12-04; 356 on the TLM engine too).
  static constexpr double kTaskRecordBytes = 256;
  // Deps of the collectives' transfers (an upper bound; direct's grow as p^3 a collective), and
  // what each past 2 a transfer takes at the peak: 10.7 and 10.3 bytes measured as peak RSS per
  // dep of `tpsim collectives wafer-32x32 --op all_reduce --sizes 1G --algo direct` at 512 and
  // 1024 ranks (1.43 GB, 11.0 GB; 2026-12-05).
  double collective_deps = 0;
  // The MoE blocks' combine transfers' deps: each waits on the down GEMMs of its sender's
  // experts that got rows; counted at kBytesPerDep each.
  double all_to_all_deps = 0;
  static constexpr double kBytesPerDep = 12;
};

// The estimate for lowering `wl` on `chip` (Lower's arguments). Never throws for a
// validated experiment; saturates in doubles rather than overflowing.
ProgramEstimate EstimateProgram(const arch::Chip& chip, const config::Model& model,
                                const config::Workload& wl, const config::Mapping& m);

// The algorithm the estimate counts for a mapping.collective or --algo value: the value, ring
// where it is empty or auto.
std::string CountedAlgorithm(const std::string& collective);

// What lowering and timing one collective of `algorithm` (auto: ring) over `ranks` ranks takes
// at most (`tpsim collectives` on a chip without a gpu block): the largest kind's transfers at
// kBytesPerTask, their deps past 2 a transfer at kBytesPerDep, and kBaseBytes. `*transfers` and
// `*deps` (when not null): the counts.
double CollectivePeakBytes(const std::string& algorithm, int ranks, double* transfers = nullptr,
                           double* deps = nullptr);

// "N.N GB" / "N MB" for messages.
std::string FormatBytes(double bytes);

}  // namespace tpsim::mapping
