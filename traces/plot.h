#pragma once
// `tpsim plot ...`: runs traces/plot/tpsim_plot.py (Python 3 + matplotlib, headless).
//
//   heatmap RESULT.json --out links.png        chip grid, links by utilisation, cores by busy fraction
//   serving R.csv K.csv --out serving.png      TTFT/TPOT CDFs and KV use (from tpsim serve)
//   timeline RESULT.json --out gantt.png       Gantt chart per core from result.tasks[]
//   sweep RESULTS.sqlite --x FIELD --y METRIC [--group FIELD] --out sweep.png
//   energy RESULT.json [RESULT.json...] --out energy.png   energy by event and per op
//
// The script is the one in the source tree (compile-time path), or $TPSIM_PLOT_SCRIPT when
// set. The interpreter is the first of $TPSIM_PYTHON (when set), `python3`, `/usr/bin/python3`
// that can import matplotlib.

#include <optional>
#include <string>
#include <vector>

namespace tpsim::traces {

// Runs the plot script with `args` (the words after `plot`) and returns its exit status:
// 0 on success, 2 on bad input (the script prints a one-line error), 2 with a message on
// stderr naming the package to install when no python3 with matplotlib is found.
int PlotCommand(const std::vector<std::string>& args);

// A python3 that imports matplotlib, or nullopt (config::FindMatplotlibPython, `warning` as
// there). Also used by the tests to decide to skip.
std::optional<std::string> FindPlotPython(std::string* warning = nullptr);

// The script path PlotCommand runs.
std::string PlotScriptPath();

}  // namespace tpsim::traces
