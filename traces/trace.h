#pragma once
// Trace writer: one timed Program as a Perfetto trace (protobuf, `.pftrace`) or, when
// the path ends in ".json", as a Chrome JSON trace. Both open in ui.perfetto.dev.
//
// Layout (the same in both formats):
//   process "tpsim"            pid 1: track "run" with one metadata slice [0, makespan]
//                              whose debug annotation "config" is the resolved experiment
//                              (text format); counter tracks "link <src->dst> util" (bytes
//                              in flight / link bandwidth) and "dram <name> GB/s".
//   process "stage i: ..."     pid 2+i: one per pipeline stage. A core's stage is the set
//                              of layers its compute and memory tasks belong to (cores with
//                              the same [first, last] layer range form a stage, ordered by
//                              first layer); cores without such tasks form "idle cores".
//   per core                   thread "core c (node)" with compute and wait slices, plus
//                              lanes "core c send", "core c recv", "core c dram" (and
//                              "... #2" up to "#4" when slices of one kind overlap; past four
//                              lanes a slice nests in the shallowest lane whose open slice
//                              contains it; only a slice that fits nowhere opens a fifth).
//                              Slices on one track never partially overlap.
// Slices: every Program task appears exactly once, on its core (transfers: the source's
// send lane), categorised "compute", "send" or "memory", named "<op> L<layer>" (prefixed
// "send "/"dram rd "/"dram wr "), with debug annotations task, phase, step, layer, op,
// partition, flops, bytes, shape (compute), src/dst (transfers), channel (memory),
// start_ps and end_ps (exact; the timeline itself is in ns). Derived slices, not tasks:
// "recv" on the destination's recv lane over [start + unloaded route latency, end] with a
// flow arrow (id = task id + 1) from the send, annotated as the send but for its own
// start_ps and end_ps; "wait" over each gap before a compute task on its core, annotated
// before_task, waiting_for_task and waiting_for (the dependency that ended last, when one
// ended inside the gap), start_ps and end_ps. A Program of a few decode steps (tpsim run
// --trace-steps, sim/sampled_run.h) gets only the waits the whole run's trace has: none
// where the gap may span skipped steps' work, or a dependency differs from the whole run's.
// Time: Perfetto timestamps are ns: ts = floor(ps / 1000) for both ends (monotone, so
// slices that did not overlap in ps do not overlap in ns); a slice whose ns duration is 0
// is written as an instant. JSON timestamps are microseconds with 6 decimals (exact ps).
// Counters: a transfer of B bytes over [s, e) adds B / (e - s) to every link on its route
// for that interval (memory tasks likewise to their channel); link utilisation is that
// rate over the link's bandwidth. Only links and channels that carry traffic get a track.
// Output bytes depend only on the inputs.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "arch/chip.h"
#include "mapping/program.h"
#include "sim/engine.h"

namespace tpsim::traces {

// Writes the trace. Throws std::invalid_argument when `out` does not match `program`
// (task count, or a task naming a core, channel or op that does not exist), and
// std::runtime_error when the file cannot be written.
void WriteTrace(const std::string& path, const mapping::Program& program, const arch::Chip& chip,
                const sim::EngineOutput& out, const std::string& resolved_config_text);

// ---- Serving traces (`tpsim serve --trace`) ---------------------------------------------
// One iteration of a continuous-batching group: a slice named
// "prefill <prefill_tokens> + decode <decode_tokens>" on the group's track.
struct ServingIteration {
  std::string group;  // "fused", "prefill" or "decode": one thread track each, in first-seen order
  int64_t start_ps = 0, end_ps = 0;
  uint32_t prefill_tokens = 0, decode_tokens = 0;
  uint32_t sequences = 0;  // chunks in the iteration (requests that got work)
  uint32_t running = 0, waiting = 0;
  uint64_t kv_blocks = 0;  // KV blocks held during the iteration
};

// A counter track ("kv blocks used (fused)"): the value holds from each point's time on.
// Points must be in ascending time.
struct CounterTrack {
  std::string name, unit;
  std::vector<std::pair<int64_t, double>> points;  // (time_ps, value)
};

// Refuses (ConfigError at --trace, exit 2) a trace name that says neither format: the writers
// take ".json" (any case) as Chrome JSON and anything else as Perfetto protobuf, so
// `--trace t.json.gz` or `t.txt` got protobuf bytes, silently. ".pftrace" and ".perfetto-trace"
// name protobuf; a device or FIFO (/dev/null) is taken as it is.
void CheckTraceName(const std::string& path);

// Writes a serving trace, Perfetto protobuf or (path ending ".json") Chrome JSON:
// process "tpsim serve" (pid 1) with track "run" holding one metadata slice [0, last
// iteration end] annotated "config" (the resolved experiment), one thread track per group
// with a slice per iteration (annotations: prefill_tokens, decode_tokens, sequences, running,
// waiting, kv_blocks, start_ps, end_ps), and the counter tracks. Time as in WriteTrace
// (Perfetto: ns = floor(ps / 1000), the last counter value within one ns wins; JSON: us with
// exact ps). Output bytes depend only on the inputs. Throws std::invalid_argument for an
// iteration ending before it starts or counter points out of order, std::runtime_error when
// the file cannot be written.
void WriteServingTrace(const std::string& path, const std::vector<ServingIteration>& iterations,
                       const std::vector<CounterTrack>& counters, const std::string& config_text);

}  // namespace tpsim::traces
