#pragma once
// `tpsim compare PREDICTED MEASURED [--plot out.png]`: two results in the Result schema
// (configs/schema/result.proto, JSON as sim::ResultToJson writes it) compared op by op.
//
// Ops are matched by (phase, layer, op) and, for repeats (decode steps), by occurrence:
// the i-th "decode L0 q_proj" of one file with the i-th of the other. The compared quantity
// is OpResult.total_ps. error % = (predicted - measured) / measured x 100. MAPE is the mean
// of |error %| over the compared ops; the worst op has the largest |error %| (first on ties).
// An op is not compared when its measured time is 0, or when the measured file comes from
// the GPU harness (engine "gpu") and marks it measured = false; such ops are counted.
// The command needs ops in both files (exit 2 naming the file otherwise); a file without
// a summary has no total: the table says "not measured" / "not predicted", not 0 us.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "result.pb.h"

namespace tpsim::validate {

struct CompareRow {
  std::string label;  // "prefill L0 q_proj", "decode L0 q_proj #2" (2nd occurrence)
  double predicted_us = 0, measured_us = 0;
  double error_pct = 0;
  bool compared = false;  // false: unmeasured on the GPU or measured as 0
};

struct Comparison {
  std::vector<CompareRow> rows;  // in the predicted file's op order
  size_t compared = 0;
  double mape_pct = 0;
  int worst = -1;                                        // index into rows, -1 when nothing was compared
  size_t unmeasured = 0;                                 // rows not compared
  size_t only_predicted = 0;                             // predicted ops with no measured counterpart
  size_t only_measured = 0;                              // measured ops with no predicted counterpart
  double predicted_total_us = 0, measured_total_us = 0;  // summary.total_ps
  // False when that file has no summary: its total is none, not 0 us.
  bool predicted_total_known = false, measured_total_known = false;
  // GPU runs: ops the prediction gives time but the run left unmeasured (collectives that could
  // not run with fewer GPUs than ranks). The measured total lacks them: the totals are not compared.
  size_t unmeasured_with_time = 0;
};

// Reads a Result JSON file. Throws std::runtime_error naming the file and the problem, at
// FILE:LINE:COL with the field's path where it has one: a key given twice in one object, a null
// value (but a number's: tpsim writes a non-finite one as null) or list element, an op without
// one of the fields compare reads (phase, layer, op, compute_ps, communication_ps, memory_ps;
// measured in a GPU result; summary.total_ps in a summary; tpsim writes every field, 0
// included), a phase tpsim does not write, an empty op name, a negative time, and an op whose
// compute_ps + communication_ps + memory_ps passes 2^63-1 ps. `warning` (may be null) is set
// when its `config` cannot be read as an experiment (exit 0: the comparison does not need it),
// else cleared.
config::Result LoadResultJson(const std::string& path, std::string* warning = nullptr);

Comparison CompareResults(const config::Result& predicted, const config::Result& measured);

// The per-op table (predicted us, measured us, error %), then MAPE, worst op, totals.
std::string ComparisonTable(const Comparison& c);

// What differs between the experiments two results ran (their `config`, the resolved
// experiment): the model, the chip, the workload's shape and the TP x stages, as "model
// qwen3-4b vs qwen3-0.6b, ..."; "" where they agree or either carries no config. `tpsim compare`
// warns with it (exit 0: a comparison across experiments may be meant).
std::string ExperimentsDiffer(const config::Result& a, const config::Result& b);

// A python3 that can import matplotlib (config::FindMatplotlibPython, `warning` as there): empty
// when none can.
std::string FindPlotPython(std::string* warning = nullptr);

// Draws `c` into `png` with validate/plot_compare.py (scatter with the identity line, and
// per-op bars). Returns false with `err` set when it could not.
bool PlotComparison(const Comparison& c, const std::string& png, std::string* err);

// A plot script shipped beside plot_compare.py (same folder), e.g. "plot_gpu.py".
std::string PlotScriptBeside(const std::string& file_name);

// Writes `data_json` to a temporary file (in the system's temporary folder), runs
// `<FindPlotPython()> script data png`, removes the data file. False with `err` set when it
// could not: the script's last line on stderr (`cannot write PNG: REASON`), one line.
bool RunPlotScript(const std::string& script, const std::string& data_json, const std::string& png,
                   std::string* err);

// Empty when `png` is a picture name the plot scripts write (.png, .svg or .pdf, any case; no
// extension only for a device or folder); else the error, starting with `flag png` (exit 2).
std::string PlotPathError(const std::string& flag, const std::string& png);

struct GpuPredictor;
using GpuPredictorFactory =
    std::function<GpuPredictor(const std::string& chip, const std::vector<std::string>& sets)>;

// The subcommand. Inputs ending in .csv (or --chip) go to the GPU microbenchmark comparison
// (validate/compare_gpu.h), which needs `gpu` to predict rows with --chip.
// Exit status: 0 ok, 1 plotting failed, 2 bad usage or unreadable input.
int CompareCommand(const std::vector<std::string>& args, const GpuPredictorFactory* gpu = nullptr);

}  // namespace tpsim::validate
