#pragma once
// From an engine's task times to the Result schema (configs/schema/result.proto),
// its JSON form and its human table. Every engine's output goes through here, so
// the analytical and TLM engines emit the same keys with the same definitions.
//
// Definitions (all times integer picoseconds):
//   summary.total_ps          EngineOutput::makespan_ps.
//   Ends, not spans, delimit phases, so prefetches issued early (DRAM reads with
//   no deps) do not stretch them. t0 = first task start (0 for the engines here).
//   summary.prefill_ps        last end over prefill tasks - t0.
//   summary.decode_ps         last end over decode tasks - last end over prefill tasks
//                             (t0 when there is no prefill).
//   summary.decode_step_ps_mean
//                             decode_ps / number of decode steps (OpRef::step),
//                             rounded to the nearest ps.
//   summary.compute_ps / communication_ps / memory_ps
//                             the critical path, split by task kind (sim::CriticalPath,
//                             sim/schedule.h). It is walked backwards from the
//                             last-finishing task (lowest id on ties); from each task
//                             it moves to its enabler: the latest-ending, among those
//                             ending no later than it, of its deps and of the task
//                             before it in its queue (a compute task: the same core's
//                             compute; a memory task: the same channel's requests; by
//                             start, lowest id on ties). Each task on the path adds
//                             to its kind the part of its span after its enabler
//                             ended (a TLM DRAM request whose span includes queueing
//                             behind its enabler is not counted twice). Idle gaps on
//                             the path belong to no kind, so the three sum to at most
//                             total_ps (for the analytical engine nearly always to
//                             total_ps: its tasks start when a dep or queue frees, but
//                             a transfer's first-link queue is not on the walk).
//   summary.core_utilization  mean over the chip's cores of (sum of compute task
//                             durations) / total_ps, in [0, 1].
//   summary.achieved_tflops   sum of compute task flops / total_ps (flop/ps = Tflop/s).
//   ops[i]                    one per Program::ops entry, in that order (with RowSums,
//                             past its row_steps decode steps, one row per op of a step
//                             sums the steps from its `from` on, with `steps` set, as a run
//                             that reuses decode steps writes them: sim/step_reuse.h):
//       compute_ps            max over cores of the sum of that op's compute durations;
//       communication_ps      span of the op's transfer tasks (0 when none);
//       memory_ps             span of the op's memory tasks (0 when none);
//       start_ps, total_ps    first start, last end - first start of all its tasks;
//       flops, bytes, spilled_bytes from OpInfo.
//   layers                    one per (phase, layer), in order of first appearance
//                             in Program::ops. Within each segment (prefill, or one
//                             decode step), layers in index order: a layer's time is
//                             its last task end minus the previous layer's (for the
//                             first layer, the previous segment's end, or t0), at
//                             least 0; total_ps sums that over decode steps. When
//                             layers finish in order, a phase's layer totals add up
//                             to its prefill_ps / decode_ps.
//   links                     links that carried bytes, by link id; name "src->dst"
//                             from node names; utilization = busy_ps / total_ps.
//   dram                      channels that moved bytes, by channel id; likewise.
//   cores                     every core of the chip: compute_ps = sum of compute
//                             durations; busy_ps = length of the union of the
//                             intervals of every task the core runs or sends
//                             (compute, transfer sources, memory);
//                             utilization = compute_ps / total_ps.
//   tasks                     one per task, in id order, when `with_tasks` (the default):
//                             start/end, core (transfers: source), dst_core (-1 unless a
//                             transfer), kind, and the op name, layer and phase of its op.
//   config                    left empty (the caller fills in the resolved experiment).
//   energy (summary.energy_*, ops[i].energy_j, layers[i].energy_j)
//                             sim/energy.h: dynamic energy per task from the Program and
//                             chip.energy, summed per op and per (phase, layer); static power
//                             x total_ps; per token over EnergyInputs' token counts.

#include <functional>
#include <string>
#include <string_view>

#include "result.pb.h"
#include "sim/energy.h"
#include "sim/engine.h"

namespace tpsim::sim {

// `energy` carries the workload's dtype and token counts for the energy fields (sim/energy.h;
// the defaults: bf16, tokens unknown, so the per-token fields stay 0).
// An op row's values (config::OpResult): one step's, or sums over decode steps (start_ps the
// first one's).
struct OpRowValues {
  Ps start = 0, compute = 0, comm = 0, mem = 0, total = 0;
  double flops = 0, energy_pj = 0;
  uint64_t bytes = 0, spilled = 0;
};
// Appends op `ref`'s row to r: one step's (`steps` 0) or the sum of `steps` decode steps
// (OpResult::steps); its energy_j only when `energy` (an energy model). BuildResult's rows and
// the rows of reused steps (sim/step_compose.h, OpRows) both.
void AddOpRow(const mapping::OpRef& ref, const OpRowValues& v, uint64_t steps, bool energy,
              config::Result* r);

// Op rows summed over long runs, as a run that reuses decode steps writes them (sim/step_reuse.h,
// OpRows): past `row_steps` decode steps (0: never), one row per op of a step sums decode steps
// `from` on (config::OpResult::steps); the rows before stay one per op and step.
struct RowSums {
  uint32_t row_steps = 0;
  uint32_t from = 0;
};
config::Result BuildResult(const mapping::Program& program, const arch::Chip& chip, const EngineOutput& out,
                           const std::string& experiment, const std::string& engine, bool with_tasks = true,
                           const EnergyInputs& energy = {}, RowSums sums = {});

// Result::summary alone, field for field what BuildResult writes there, without
// the per-op, per-layer, per-link, per-core and per-task parts (sweeps keep only
// the summary). Throws like BuildResult.
config::Summary BuildSummary(const mapping::Program& program, const arch::Chip& chip, const EngineOutput& out,
                             const EnergyInputs& energy = {});

// The summary's energy fields (summary.energy_*) from the sums (sim/energy.h), with the
// static power over s's total_ps, prefill_ps and decode_ps (set before).
void FillEnergy(const arch::Chip& chip, const EnergySums& sums, const EnergyInputs& in, config::Summary* s);

// JSON of any Result: proto field names (snake_case) in declaration order, every
// field present (defaults included), 64-bit integers as JSON numbers (protobuf's
// own printer writes them as strings), doubles in shortest round-trip form,
// non-finite doubles as null, two-space indent, trailing newline. Deterministic.
std::string ResultToJson(const config::Result& result);
// The same text, handed to `write` in pieces as it is made (about 1 MiB each): a long run's
// JSON is not held in memory beside its Result.
void WriteResultJson(const config::Result& result, const std::function<void(std::string_view)>& write);

// The human table: per op (compute, communication, memory, total in µs; decode
// ops of the same layer and name summed over steps, with the step count), per
// layer, then the workload summary.
std::string ResultTable(const config::Result& result, bool with_ops = true);

// A memory by its kind ("hbm" memories were called DRAM): a GPU's is HBM.
std::string MemoryKindWord(const arch::Chip& chip, int memory);
// The chip's off-chip memory: DRAM, HBM, or DRAM/HBM where it has both kinds (`tpsim describe`,
// and the summary's names of off-chip locations).
std::string OffChipWord(const arch::Chip& chip);

}  // namespace tpsim::sim
