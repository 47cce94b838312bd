#pragma once
// The rows of `tpsim-validate --collectives`: each collective, rank count and size with what
// the GPUs measured (when they could) next to tpsim's analytical prediction. tpsim-validate
// prints them with CollectiveSweepLine and writes them with --out as CollectiveSweepJson;
// `tpsim compare SWEEP.json [--plot busbw.png]` reads that file back, prints the same table
// and draws bus bandwidth over message size (predicted lines, measured dots), so the sweep
// can be inspected on a machine without a GPU. Unmeasured values print as "-", never 0.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tpsim::validate {

struct CollectiveSweepRow {
  std::string kind;  // all_reduce, all_gather, reduce_scatter
  int ranks = 0;
  uint64_t bytes = 0;
  bool measured = false;  // false: the time, algbw and busbw below mean nothing
  double time_us = 0, algbw_gbps = 0, busbw_gbps = 0;
  std::string predicted_algorithm;  // tpsim's choice (mapping.collective auto)
  double predicted_us = 0, predicted_algbw_gbps = 0, predicted_busbw_gbps = 0;
  double predicted_ring_us = 0;             // ring forced
  std::optional<double> predicted_nvls_us;  // nvls forced; absent without in-switch reduction
};

// Column names and units (two '#' lines), then one line per row; measured columns of an
// unmeasured row and an absent nvls time print as "-".
std::string CollectiveSweepHeader();
std::string CollectiveSweepLine(const CollectiveSweepRow& r);

// The --out file: a JSON array of objects with the fields above (predicted_nvls_us null when
// absent).
std::string CollectiveSweepJson(const std::vector<CollectiveSweepRow>& rows);
// True when `text` is such an array (its first element has kind, bytes and predicted_us).
bool IsCollectiveSweepJson(const std::string& text);
// Throws std::runtime_error "name: rows[i]: problem" for a missing or mistyped field.
std::vector<CollectiveSweepRow> ParseCollectiveSweepJson(const std::string& text, const std::string& name);

// Per (kind, ranks), in first-seen order: "all_reduce, 8 ranks: 18 sizes, 18 measured, busbw
// MAPE 4.21 %, worst -9.8 % at 8192 B" (error % = (predicted - measured) / measured x 100 on
// busbw), or "..., none measured (predictions only)".
std::string CollectiveSweepSummary(const std::vector<CollectiveSweepRow>& rows);

// The data validate/plot_gpu.py draws: one panel per (kind, ranks) with busbw over size of
// tpsim's choice (line), ring and nvls forced (dashed; their busbw is the choice's scaled by
// predicted_us / forced time) and the measured points (dots; none when unmeasured).
std::string CollectiveSweepPlotData(const std::vector<CollectiveSweepRow>& rows, const std::string& title);

// `tpsim compare SWEEP.json [--plot out.png]`: the table, the summary and the plot. Exit
// status 0, 1 when the plot could not be drawn, 2 when the file cannot be read.
int CompareCollectiveSweep(const std::string& path, const std::string& plot);

}  // namespace tpsim::validate
