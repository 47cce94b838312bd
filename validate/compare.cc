#include "validate/compare.h"

#include "configs/files.h"
#include "configs/load.h"
#include "experiment.pb.h"
#include "validate/collective_sweep.h"
#include "validate/compare_gpu.h"
#include "validate/gpu_csv.h"

#include <fcntl.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

namespace tpsim::validate {

namespace {

constexpr const char* kUsage =
    "usage: tpsim compare PREDICTED MEASURED [--plot out.png]\n"
    "  PREDICTED, MEASURED  result JSON files (tpsim run --out, tpsim-validate --out)\n"
    "  --plot out.png       also draw predicted vs measured (needs python3 with matplotlib)\n"
    "  Both files need ops (exit 2 naming the file otherwise): ops are compared one by one. A\n"
    "  file without a summary has no total: its total prints as not measured (or not\n"
    "  predicted) and the totals are not compared.\n"
    "       tpsim compare SWEEP.json [--plot busbw.png]\n"
    "  SWEEP.json           tpsim-validate --collectives --out (with or without a GPU): the table\n"
    "                       ('-' where nothing was measured), busbw MAPE per collective and rank\n"
    "                       count, and busbw over size: predicted lines, measured dots\n"
    "GPU microbenchmarks (collectives / GEMM CSV files; tpsim compare --chip CHIP --help):\n"
    "       tpsim compare PREDICTED.csv MEASURED.csv [--plot out.png] [--summary]\n"
    "       tpsim compare --chip CHIP MEASURED.csv... [--set F=V]... [--plot-dir DIR] [--summary]\n";

std::string OpLabel(const config::OpResult& o) {
  return o.phase() + " L" + std::to_string(o.layer()) + " " + o.op();
}

std::string PlotScript() {
  if (const char* env = std::getenv("TPSIM_PLOT_SCRIPT")) return env;
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    std::string exe(buf, static_cast<size_t>(n));
    std::string dir = exe.substr(0, exe.rfind('/'));
    for (const std::string& cand : {dir + "/plot_compare.py", dir + "/../plot_compare.py"}) {
      if (std::ifstream(cand)) return cand;
    }
  }
#ifdef TPSIM_PLOT_SCRIPT
  return TPSIM_PLOT_SCRIPT;
#else
  return "plot_compare.py";
#endif
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

config::Result LoadResultJson(const std::string& path) {
  // A regular UTF-8 file of at most 1 GiB (a FIFO would block, /dev/zero never ends).
  const std::string text =
      config::ReadInputFile(path, config::kCommandLine, "result", config::kMaxTraceBytes);
  config::Result r;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(text, &r, opts);
  // The parser's message may span lines (the offending text, a caret): one line, clipped.
  if (!st.ok())
    throw std::runtime_error(path + ": not a result JSON (" + config::Clip(std::string(st.message()), 200) +
                             ")");
  // `{}` parses as an empty Result: it would compare nothing and print zeros.
  if (r.engine().empty() && !r.has_summary() && r.ops_size() == 0)
    throw std::runtime_error(path +
                             ": not a tpsim result (no engine, summary or ops; `tpsim run --out` and "
                             "`tpsim-validate --out` write one)");
  // The times compared are durations and instants from the run's start: never negative (a
  // negative one was compared as "unmeasured" or printed as a measured total).
  auto non_negative = [&](const google::protobuf::Message& m, const std::string& where) {
    const google::protobuf::Descriptor* d = m.GetDescriptor();
    const google::protobuf::Reflection* refl = m.GetReflection();
    for (int i = 0; i < d->field_count(); ++i) {
      const google::protobuf::FieldDescriptor* f = d->field(i);
      if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_INT64 || f->is_repeated() ||
          !std::string(f->name()).ends_with("_ps"))
        continue;
      const int64_t v = refl->GetInt64(m, f);
      if (v < 0)
        throw std::runtime_error(path + ": " + where + std::string(f->name()) + ": " + std::to_string(v) +
                                 ": a time in picoseconds, must be >= 0");
    }
  };
  non_negative(r.summary(), "summary.");
  for (int i = 0; i < r.ops_size(); ++i) non_negative(r.ops(i), "ops[" + std::to_string(i) + "].");
  return r;
}

static double KernelPs(const config::OpResult& o) {
  return static_cast<double>(o.compute_ps()) + static_cast<double>(o.communication_ps()) +
         static_cast<double>(o.memory_ps());
}

Comparison CompareResults(const config::Result& predicted, const config::Result& measured) {
  Comparison c;
  using Key = std::tuple<std::string, uint32_t, std::string, int>;
  auto key_of = [](const config::OpResult& o,
                   std::map<std::tuple<std::string, uint32_t, std::string>, int>* seen) {
    int occ = (*seen)[{o.phase(), o.layer(), o.op()}]++;
    return Key{o.phase(), o.layer(), o.op(), occ};
  };
  std::map<Key, int> meas_index;
  {
    std::map<std::tuple<std::string, uint32_t, std::string>, int> seen;
    for (int i = 0; i < measured.ops_size(); ++i) meas_index[key_of(measured.ops(i), &seen)] = i;
  }
  const bool gpu = measured.engine() == "gpu";
  std::map<std::tuple<std::string, uint32_t, std::string>, int> seen;
  size_t matched = 0;
  double sum_abs = 0;
  for (const config::OpResult& p : predicted.ops()) {
    Key k = key_of(p, &seen);
    auto it = meas_index.find(k);
    if (it == meas_index.end()) {
      ++c.only_predicted;
      continue;
    }
    ++matched;
    const config::OpResult& m = measured.ops(it->second);
    CompareRow row;
    row.label = OpLabel(p);
    if (std::get<3>(k) > 0) row.label += " #" + std::to_string(std::get<3>(k) + 1);
    // Like with like: the op's kernel time (its slowest rank's compute + the spans of its
    // communication and memory tasks), not its span (total_ps), which adds the time it waited
    // for its inputs.
    row.predicted_us = KernelPs(p) / 1e6;
    row.measured_us = KernelPs(m) / 1e6;
    row.compared = KernelPs(m) > 0 && (!gpu || m.measured());
    if (row.compared) {
      row.error_pct = (row.predicted_us - row.measured_us) / row.measured_us * 100.0;
      sum_abs += std::fabs(row.error_pct);
      ++c.compared;
      if (c.worst < 0 || std::fabs(row.error_pct) > std::fabs(c.rows[c.worst].error_pct))
        c.worst = static_cast<int>(c.rows.size());
    } else {
      ++c.unmeasured;
      if (gpu && !m.measured() && row.predicted_us > 0) ++c.unmeasured_with_time;
    }
    c.rows.push_back(std::move(row));
  }
  c.only_measured = meas_index.size() - matched;
  c.mape_pct = c.compared ? sum_abs / static_cast<double>(c.compared) : 0.0;
  c.predicted_total_us = predicted.summary().total_ps() / 1e6;
  c.measured_total_us = measured.summary().total_ps() / 1e6;
  // A result without a summary has no total: 0.000 us would read as a measured or predicted time.
  c.predicted_total_known = predicted.has_summary();
  c.measured_total_known = measured.has_summary();
  return c;
}

std::string ComparisonTable(const Comparison& c) {
  size_t w = 2;
  for (const auto& r : c.rows) w = std::max(w, r.label.size());
  std::ostringstream os;
  char buf[512];
  os << "per op: kernel time (slowest rank's compute + spans of communication and memory), not its "
        "span including waiting (tpsim run's total_us)\n";
  std::snprintf(buf, sizeof buf, "%-*s %14s %14s %10s\n", static_cast<int>(w), "op", "predicted_us",
                "measured_us", "error_%");
  os << buf;
  for (const auto& r : c.rows) {
    std::string err = r.compared ? Fixed(r.error_pct, 1) : "unmeasured";
    std::snprintf(buf, sizeof buf, "%-*s %14.3f %14.3f %10s\n", static_cast<int>(w), r.label.c_str(),
                  r.predicted_us, r.measured_us, err.c_str());
    os << buf;
  }
  os << "\ncompared ops: " << c.compared << ", not compared (unmeasured or 0): " << c.unmeasured
     << ", only in predicted: " << c.only_predicted << ", only in measured: " << c.only_measured << "\n";
  if (c.worst >= 0) {
    os << "MAPE: " << Fixed(c.mape_pct, 2) << " %\n";
    os << "worst op: " << c.rows[c.worst].label << " (" << Fixed(c.rows[c.worst].error_pct, 1) << " %)\n";
  } else {
    os << "MAPE: n/a (no op was compared)\n";
  }
  os << "total: "
     << (c.predicted_total_known ? "predicted " + Fixed(c.predicted_total_us, 3) + " us"
                                 : std::string("not predicted (the predicted file has no summary)"))
     << ", "
     << (c.measured_total_known ? "measured " + Fixed(c.measured_total_us, 3) + " us"
                                : std::string("not measured (the measured file has no summary)"));
  if (c.predicted_total_known && c.measured_total_known) {
    if (c.unmeasured_with_time > 0)
      os << " (not compared: the measured total lacks " << c.unmeasured_with_time
         << " unmeasured ops the prediction times)";
    else if (c.measured_total_us > 0)
      os << " (" << Fixed((c.predicted_total_us - c.measured_total_us) / c.measured_total_us * 100.0, 1)
         << " %)";
  }
  os << "\n";
  return os.str();
}

std::string FindPlotPython(std::string* warning) { return config::FindMatplotlibPython(warning); }

std::string PlotScriptBeside(const std::string& file_name) {
  const std::string base = PlotScript();
  const size_t slash = base.rfind('/');
  return slash == std::string::npos ? file_name : base.substr(0, slash + 1) + file_name;
}

std::string PlotPathError(const std::string& flag, const std::string& png) {
  // The extension as Python's os.path.splitext reads it (leading dots of the name are none).
  const std::string name = png.substr(png.rfind('/') + 1);
  const size_t first = name.find_first_not_of('.');
  const size_t dot = name.rfind('.');
  std::string ext =
      first == std::string::npos || dot == std::string::npos || dot < first ? "" : name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == "png" || ext == "svg" || ext == "pdf") return "";
  struct stat st {};
  if (ext.empty() && ::stat(png.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return "";  // a device or folder
  return flag + " " + png + ": " + (ext.empty() ? std::string("no extension") : "." + ext) +
         ": not a picture format; name a .png, .svg or .pdf file";
}

namespace {

// A temporary file in the system's temporary folder (never beside the picture, whose folder
// may not exist): its path, or empty with *err set. *fd is open for writing.
std::string TempFile(const std::string& suffix, int* fd, std::string* err) {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  std::string path = (dir / ("tpsim-plot-XXXXXX" + suffix)).string();
  *fd = ::mkstemps(path.data(), static_cast<int>(suffix.size()));
  if (*fd < 0) {
    *err = "cannot create a temporary file in " + dir.string() + ": " + std::strerror(errno);
    return "";
  }
  return path;
}

}  // namespace

bool RunPlotScript(const std::string& script, const std::string& data_json, const std::string& png,
                   std::string* err) {
  std::string warning;
  std::string py = FindPlotPython(&warning);
  if (!warning.empty()) std::cerr << "tpsim compare: warning: " << warning << "\n";
  if (py.empty()) {
    *err =
        "no python3 with matplotlib found (tried $TPSIM_PYTHON, python3, /usr/bin/python3; "
        "install it with `apt-get install -y python3-matplotlib`)";
    return false;
  }
  int fd = -1;
  const std::string data = TempFile(".json", &fd, err);
  if (data.empty()) return false;
  const std::string text = data_json + "\n";
  bool written = true;
  for (size_t done = 0; written && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    written = n > 0;
    if (written) done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) written = false;
  if (!written) {
    *err = "cannot write the plot data to " + data + ": " + std::strerror(errno);
    ::unlink(data.c_str());
    return false;
  }
  // The script's stderr is kept: on failure its last line (`cannot write PNG: REASON`) is the
  // error, one line, instead of a traceback and a line naming the interpreter.
  int log_fd = -1;
  const std::string log = TempFile(".log", &log_fd, err);
  if (log.empty()) {
    ::unlink(data.c_str());
    return false;
  }
  // The script dies with tpsim (config::RunChildProcess): a SIGTERM to `tpsim compare --plot`
  // left it running on.
  const int rc = config::RunChildProcess({py, script, data, png}, -1, log_fd);
  ::close(log_fd);
  ::unlink(data.c_str());
  std::string last;
  {
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) last = line;
  }
  ::unlink(log.c_str());
  if (rc != 0) {
    *err = !last.empty() ? config::Clip(last, 300)
                         : py + " " + script + " failed (exit " + std::to_string(rc) + ")";
    return false;
  }
  return true;
}

bool PlotComparison(const Comparison& c, const std::string& png, std::string* err) {
  nlohmann::json data;
  data["mape_pct"] = c.mape_pct;
  data["ops"] = nlohmann::json::array();
  for (const auto& r : c.rows) {
    if (!r.compared) continue;
    data["ops"].push_back(
        {{"label", r.label}, {"predicted_us", r.predicted_us}, {"measured_us", r.measured_us}});
  }
  return RunPlotScript(PlotScript(), data.dump(2), png, err);
}

// Comparing reference-qwen3-4b with mesh-4x4-hbm-qwen3-0.6b printed a MAPE of 1011.84 % and
// nothing else (compare.h).
std::string ExperimentsDiffer(const config::Result& a, const config::Result& b) {
  if (a.config().empty() || b.config().empty()) return "";
  config::Experiment x, y;
  if (!google::protobuf::TextFormat::ParseFromString(a.config(), &x) ||
      !google::protobuf::TextFormat::ParseFromString(b.config(), &y))
    return "";
  std::string out;
  auto differ = [&](const std::string& what, const std::string& u, const std::string& v) {
    if (u != v) out += (out.empty() ? "" : ", ") + what + " " + u + " vs " + v;
  };
  differ("model", x.model().name(), y.model().name());
  differ("chip", x.chip().name(), y.chip().name());
  const config::Workload &wx = x.workload(), &wy = y.workload();
  auto shape = [](const config::Workload& w) {
    return "batch " + std::to_string(w.batch()) + " x seq_len " + std::to_string(w.seq_len()) + " + " +
           std::to_string(w.decode_steps()) + " decode steps, " +
           (w.num_layers() ? std::to_string(w.num_layers()) : std::string("all")) + " layers, " + w.dtype();
  };
  differ("workload", shape(wx), shape(wy));
  auto group = [](const config::Mapping& m) {
    return "TP " + std::to_string(m.tp()) + " x " + std::to_string(m.pipeline_stages()) + " stages";
  };
  differ("mapping", group(x.mapping()), group(y.mapping()));
  return out;
}

int CompareCommand(const std::vector<std::string>& args, const GpuPredictorFactory* gpu) {
  for (const auto& a : args) {
    const bool csv = a.size() > 4 && a.compare(a.size() - 4, 4, ".csv") == 0;
    if (csv || a == "--chip" || a.rfind("--chip=", 0) == 0) return CompareGpuCommand(args, gpu);
  }
  std::vector<std::string> files;
  std::string plot;
  std::map<std::string, std::string> given;  // --plot takes one value (config::GivenTwice)
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--plot") {
      if (i + 1 >= args.size()) {
        std::cerr << "tpsim compare: --plot needs a value\n\n" << kUsage;
        return 2;
      }
      plot = args[++i];
    } else if (a.rfind("--plot=", 0) == 0) {
      plot = a.substr(7);
    } else if (a.size() > 1 && a[0] == '-') {
      std::cerr << "tpsim compare: unknown option " << a << "\n\n" << kUsage;
      return 2;
    } else {
      files.push_back(a);
      continue;
    }
    if (plot.empty()) {  // an empty value (a script's unset variable) would read as no --plot
      std::cerr << "tpsim compare: --plot needs a value, got an empty one\n\n" << kUsage;
      return 2;
    }
    if (const std::string twice = config::GivenTwice(&given, "--plot", plot); !twice.empty()) {
      std::cerr << "tpsim compare: --plot " << twice << "\n\n" << kUsage;
      return 2;
    }
  }
  // The picture's name before any work: a format drawn the same each run, and no input
  // overwritten.
  if (!plot.empty()) {
    if (const std::string e = PlotPathError("--plot", plot); !e.empty()) {
      std::cerr << "tpsim compare: " << e << "\n";
      return 2;
    }
    try {
      config::CheckOutputNotInput("--plot", plot, files);
    } catch (const config::ConfigError& e) {
      for (const auto& d : e.diags()) std::cerr << d.str() << "\n";
      return 2;
    }
  }
  if (files.size() == 1) {
    std::string text;
    try {
      text = ReadTextFile(files[0]);
    } catch (const std::exception& e) {
      std::cerr << "tpsim compare: " << e.what() << "\n";
      return 2;
    }
    if (IsCollectiveSweepJson(text)) return CompareCollectiveSweep(files[0], plot);
  }
  if (files.size() != 2) {
    std::cerr << "tpsim compare: needs PREDICTED and MEASURED (or one SWEEP.json)\n\n" << kUsage;
    return 2;
  }
  Comparison c;
  try {
    const config::Result predicted = LoadResultJson(files[0]), measured = LoadResultJson(files[1]);
    // Without ops nothing is compared: "no op was compared" and exit 0 read as a comparison made.
    for (const auto& [r, path] : {std::pair{&predicted, &files[0]}, std::pair{&measured, &files[1]}}) {
      if (r->ops_size() == 0)
        throw std::runtime_error(*path +
                                 ": no ops (field `ops` missing or empty): tpsim compare compares op by op");
    }
    c = CompareResults(predicted, measured);
    const std::string differ = ExperimentsDiffer(predicted, measured);
    if (!differ.empty())
      std::cerr << "tpsim compare: warning: " << files[0] << " and " << files[1]
                << " are results of different experiments (" << differ
                << "): their ops are compared by name, not like with like\n";
  } catch (const std::exception& e) {
    std::cerr << "tpsim compare: " << e.what() << "\n";
    return 2;
  }
  std::cout << ComparisonTable(c);
  if (!plot.empty()) {
    std::string err;
    if (!PlotComparison(c, plot, &err)) {
      std::cerr << "tpsim compare: --plot: " << err << "\n";
      return 1;
    }
    std::cout << "plot: " << plot << "\n";
  }
  return 0;
}

}  // namespace tpsim::validate
