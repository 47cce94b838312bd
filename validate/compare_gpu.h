#pragma once
// `tpsim compare` on the CSV formats of validate/gpu_csv.h: collectives (busbw over size,
// per op and rank count) and GEMMs (time over M, per shape), predicted against measured.
//
//   tpsim compare PREDICTED.csv MEASURED.csv          rows matched by (op, ranks, size_bytes)
//                                                     or (m, n, k, dtype); duplicates are errors
//   tpsim compare --chip CHIP MEASURED.csv...         every measured row predicted on CHIP with
//                                                     its own op, ranks, size, algorithm and
//                                                     protocol (or m, n, k, dtype)
//
// Tables: collectives grouped by (op, ranks, algorithm, protocol) of the measured rows,
// GEMMs by (n, k, dtype), in the order they first appear. error % = (predicted - measured)
// / measured x 100 on time_us; a table's MAPE is the mean |error %| over its rows, a file's
// over all its compared rows. busbw and TFLOP/s are shown beside the times.

#include <functional>
#include <string>
#include <vector>

#include "validate/gpu_csv.h"

namespace tpsim::validate {

struct GpuCompareRow {
  std::string key;  // "8192" (size in B) or "m=64"
  double x = 0;     // size_bytes or m
  double measured_us = 0, predicted_us = 0, error_pct = 0;
  double measured_rate = 0, predicted_rate = 0;  // busbw GB/s (collectives) or TFLOP/s (GEMMs)
  std::string predicted_as;                      // "ring/ll" or "memory 132 tiles 1.00 waves"
};

struct GpuTable {
  std::string name;  // "all_reduce, 4 ranks, algorithm auto, protocol auto" or "n=4096 k=4096 bf16"
  std::vector<GpuCompareRow> rows;
  double mape_pct = 0;
  int worst = -1;  // index into rows
};

struct GpuFileComparison {
  std::string file;
  CsvKind kind = CsvKind::kCollective;
  std::vector<GpuTable> tables;
  size_t compared = 0;
  double mape_pct = 0;
  std::vector<std::string> not_predicted;  // "row: why" for measured rows the chip cannot do
  // Two files: the predicted one, and the keys of its rows the measured file lacks (not compared).
  std::string predicted_file;
  std::vector<std::string> only_predicted;
};

// Predicts the counterpart of a measured row (throws std::invalid_argument when the chip
// cannot do it). Supplied by the command line, which links the models.
struct GpuPredictor {
  std::string chip_name;
  std::function<CollectiveRow(const CollectiveRow& measured)> collective;
  std::function<GemmRow(const GemmRow& measured)> gemm;
};
// Builds a predictor for CHIP (a name or path) with --set FIELD=VALUE overrides.
using GpuPredictorFactory =
    std::function<GpuPredictor(const std::string& chip, const std::vector<std::string>& sets)>;

// `file` names the measured rows, `predicted_file` the predicted ones in errors: a duplicate
// key (collectives: the same op, ranks and size, whatever the algorithm; GEMMs: m, n, k,
// dtype) throws std::runtime_error "FILE:LINE: duplicate row KEY (first at line N)" (the
// lines of CollectiveRow::line / GemmRow::line; "FILE: ..." for rows not read from a file).
GpuFileComparison CompareCollectives(const std::string& file, const std::vector<CollectiveRow>& measured,
                                     const std::vector<CollectiveRow>& predicted,
                                     const std::string& predicted_file = "predicted file");
GpuFileComparison CompareGemms(const std::string& file, const std::vector<GemmRow>& measured,
                               const std::vector<GemmRow>& predicted,
                               const std::string& predicted_file = "predicted file");
// Predicts every row of a measured file with `p`; rows it cannot predict are listed in
// not_predicted and left out.
GpuFileComparison PredictAndCompare(const std::string& file, const std::string& text, const GpuPredictor& p);

// The text report: per table a line (name, rows, MAPE, worst) and, unless `summary`, the rows.
std::string GpuComparisonText(const GpuFileComparison& c, bool summary);

// Draws a file's comparison into `png` with validate/plot_gpu.py (busbw over size per table,
// or a predicted-vs-measured scatter and time over M for up to 12 shapes). False + `err` when
// it could not.
bool PlotGpuComparison(const GpuFileComparison& c, const std::string& png, std::string* err);

// The CSV half of `tpsim compare` (CompareCommand hands over when an input ends in .csv or
// --chip is given). Exit status: 0 ok, 1 plotting failed, 2 bad usage or input.
int CompareGpuCommand(const std::vector<std::string>& args, const GpuPredictorFactory* factory);

}  // namespace tpsim::validate
