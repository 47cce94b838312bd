#pragma once
// `tpsim serve` on the command line: runs serving::Serve (sim/serving/serving.h), prints its
// metrics and writes the CSVs, the metrics JSON and, with --trace, the serving trace (the
// trace writer is attached here: the serving library knows nothing of traces).

#include <string>
#include <vector>

#include "sim/serving/serving.h"
#include "traces/trace.h"

namespace tpsim::cli {

// The KV use of each group as a counter track "kv blocks used (<group>)" (unit "blocks"):
// one point per iteration at its start with the blocks held during it (KvSample::used_blocks),
// and 0 at the end of each iteration that leaves no request running when the group's next
// iteration starts later (or there is none): the blocks are freed through the idle gap.
// Groups in first-seen order of out.kv.
std::vector<traces::CounterTrack> KvCounters(const serving::ServeOutcome& out);

// `tpsim serve --trace`: a Perfetto (or, for ".json", Chrome JSON) trace with one slice per
// iteration on its group's track and the KvCounters (traces::WriteServingTrace).
void WriteServeTrace(const std::string& path, const serving::ServeOutcome& out,
                     const std::string& config_text);

// The `serve` subcommand; `args` are the words after "serve". Returns the exit code
// (0 ok, 2 config errors printed as file:line:col: field: value: rule). With the
// environment variable TPSIM_SERVE_STATS set, one line per group goes to stderr: skeletons
// lowered and distinct iterations timed from one (tests/bench/serving_bench.sh); with
// TPSIM_SERVE_NO_SKELETONS set, every distinct iteration lowers its own Program (for
// before/after timings; the output is the same).
int ServeCommand(const std::vector<std::string>& args);

}  // namespace tpsim::cli
