#include "validate/compare_gpu.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>

#include "configs/files.h"
#include "configs/load.h"
#include "validate/compare.h"

namespace tpsim::validate {

namespace {

// A JSON file (a result of `tpsim run --out`, a sweep of `tpsim-validate --collectives --out`)
// among the CSV files of this comparison: it was parsed as CSV and said "a.json:2: 2 fields, the
// header (line 1) has 1". The message, or "" for a file that is not JSON.
std::string JsonGivenForCsv(const std::string& text, const std::string& path) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || (text[first] != '{' && text[first] != '[')) return "";
  return path +
         " is JSON, not CSV: this comparison reads the CSV files of `tpsim collectives --csv`, `tpsim gemm "
         "--csv` or `tpsim-validate --collectives / --gemms --csv`; two result JSON files compare as `tpsim "
         "compare PREDICTED.json MEASURED.json`, a sweep JSON alone as `tpsim compare SWEEP.json`";
}

constexpr const char* kUsage =
    R"(usage: tpsim compare PREDICTED.csv MEASURED.csv [--plot out.png] [--summary]
       tpsim compare --chip CHIP MEASURED.csv... [--set FIELD=VALUE]... [--plot out.png | --plot-dir DIR]
                     [--summary]

GPU microbenchmarks, predicted against measured, in the CSV formats of `tpsim collectives
--csv` / `tpsim gemm --csv` / `tpsim-validate --collectives / --gemms`:
  collectives  op,ranks,size_bytes,time_us,algbw_gbps,busbw_gbps,algorithm,protocol
  GEMMs        m,n,k,dtype,time_us,tflops,bound,tiles,waves
Lines starting with '#' are comments (a measurement's source); in a collectives file the line
`# timing: device` says its times are device times (a CUDA graph's time per call or a kernel
duration), held against the model's device time without the host's issue cost. Tables:
collectives per (op, ranks, algorithm, protocol), GEMMs per (n, k, dtype); error % =
(predicted - measured) / measured on time_us; MAPE = mean |error %| per table and per file.
Every row has as many fields as the header, and no row repeats an earlier one's key ((m, n, k,
dtype); (op, ranks, size_bytes, algorithm, protocol), and with two files (op, ranks,
size_bytes)): either exits 2 naming the file, the line and the first occurrence's line. A file
none of whose rows is compared (no rows, none predicted on CHIP, none in PREDICTED.csv) ends its
report with why, exit 2; rows only in PREDICTED.csv are named.

  PREDICTED.csv MEASURED.csv  rows matched by (op, ranks, size_bytes) or (m, n, k, dtype)
  --chip CHIP       predict every row of each MEASURED file on CHIP (a shipped chip or a
                    path), with the row's own algorithm and protocol (auto = the model's choice)
  --set F=V         override a chip field before predicting (e.g. gpu.ring_efficiency=0.9)
  --plot out.png    draw the comparison (one input file); --plot-dir DIR: DIR/<file>.png each
  --summary         print only the per-table and per-file MAPE lines
)";

std::string Fixed(double v, int d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", d, v);
  return buf;
}

std::string Signed(double v, int d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.*f", d, v);
  return buf;
}

void Finish(GpuFileComparison* c) {
  double sum = 0;
  c->compared = 0;
  for (auto& t : c->tables) {
    double ts = 0;
    for (size_t i = 0; i < t.rows.size(); ++i) {
      const double a = std::fabs(t.rows[i].error_pct);
      ts += a;
      if (t.worst < 0 || a > std::fabs(t.rows[t.worst].error_pct)) t.worst = static_cast<int>(i);
    }
    t.mape_pct = t.rows.empty() ? 0 : ts / t.rows.size();
    sum += ts;
    c->compared += t.rows.size();
  }
  c->mape_pct = c->compared ? sum / c->compared : 0;
}

GpuTable& TableFor(GpuFileComparison* c, std::map<std::string, size_t>* index, const std::string& name) {
  auto [it, added] = index->emplace(name, c->tables.size());
  if (added) {
    c->tables.emplace_back();
    c->tables.back().name = name;
  }
  return c->tables[it->second];
}

std::string CollTable(const CollectiveRow& m) {
  return m.op + ", " + std::to_string(m.ranks) + " ranks, algorithm " + m.algorithm + ", protocol " +
         m.protocol + (m.device_time ? ", device time" : "");
}
std::string GemmTable(const GemmRow& m) {
  return "n=" + std::to_string(m.n) + " k=" + std::to_string(m.k) + " " + m.dtype;
}

GpuCompareRow CollRow(const CollectiveRow& m, const CollectiveRow& p) {
  GpuCompareRow r;
  r.key = std::to_string(m.size_bytes);
  r.x = static_cast<double>(m.size_bytes);
  // Device-time measurements are held against the model's device time (no host issue cost).
  const double pred = m.device_time && p.gpu_us > 0 ? p.gpu_us : p.time_us;
  r.measured_us = m.time_us;
  r.predicted_us = pred;
  r.error_pct = (pred - m.time_us) / m.time_us * 100.0;
  r.measured_rate = m.busbw_gbps;
  r.predicted_rate = p.busbw_gbps * p.time_us / pred;
  r.predicted_as = p.algorithm + "/" + p.protocol;
  return r;
}

GpuCompareRow GemmCmpRow(const GemmRow& m, const GemmRow& p) {
  GpuCompareRow r;
  r.key = "m=" + std::to_string(m.m);
  r.x = static_cast<double>(m.m);
  r.measured_us = m.time_us;
  r.predicted_us = p.time_us;
  r.error_pct = (p.time_us - m.time_us) / m.time_us * 100.0;
  r.measured_rate = 2.0 * m.m * m.n * m.k / (m.time_us * 1e-6) / 1e12;
  r.predicted_rate = 2.0 * p.m * p.n * p.k / (p.time_us * 1e-6) / 1e12;
  r.predicted_as =
      p.bound + (p.has_tiles ? " " + std::to_string(p.tiles) + " tiles " + Fixed(p.waves, 2) + " waves" : "");
  return r;
}

}  // namespace

namespace {

// "FILE:LINE: " for a row read from a file (line 0: a row made in memory, named by its file).
std::string RowAt(const std::string& file, int line) {
  return line > 0 ? file + ":" + std::to_string(line) + ": " : file + ": ";
}
std::string FirstAt(int line) { return line > 0 ? " (first at line " + std::to_string(line) + ")" : ""; }

}  // namespace

GpuFileComparison CompareCollectives(const std::string& file, const std::vector<CollectiveRow>& measured,
                                     const std::vector<CollectiveRow>& predicted,
                                     const std::string& predicted_file) {
  // Matched by (op, ranks, size) alone: two rows that differ only in algorithm or protocol
  // (which ReadCollectiveCsv lets through) would be matched to one counterpart.
  using Key = std::tuple<std::string, int, uint64_t>;
  std::map<Key, const CollectiveRow*> pred;
  for (const auto& p : predicted) {
    auto [it, fresh] = pred.emplace(Key{p.op, p.ranks, p.size_bytes}, &p);
    if (!fresh) {
      throw std::runtime_error(RowAt(predicted_file, p.line) + "duplicate row " + CollectiveKeyText(p) +
                               FirstAt(it->second->line) +
                               " (compare files with one algorithm each, or use --chip)");
    }
  }
  GpuFileComparison c;
  c.file = file;
  c.kind = CsvKind::kCollective;
  std::map<std::string, size_t> index;
  std::map<Key, const CollectiveRow*> seen;
  for (const auto& m : measured) {
    const Key k{m.op, m.ranks, m.size_bytes};
    auto [first, fresh] = seen.emplace(k, &m);
    if (!fresh) {
      throw std::runtime_error(RowAt(file, m.line) + "duplicate row " + CollectiveKeyText(m) +
                               FirstAt(first->second->line) +
                               " (compare files with one algorithm each, or use --chip)");
    }
    auto it = pred.find(k);
    if (it == pred.end()) {
      c.not_predicted.push_back(CollectiveKeyText(m) + ": not in the predicted file");
      continue;
    }
    TableFor(&c, &index, CollTable(m)).rows.push_back(CollRow(m, *it->second));
  }
  // Predicted rows without a measured counterpart were dropped without a word.
  c.predicted_file = predicted_file;
  for (const auto& p : predicted)
    if (!seen.count(Key{p.op, p.ranks, p.size_bytes})) c.only_predicted.push_back(CollectiveKeyText(p));
  Finish(&c);
  return c;
}

GpuFileComparison CompareGemms(const std::string& file, const std::vector<GemmRow>& measured,
                               const std::vector<GemmRow>& predicted, const std::string& predicted_file) {
  using Key = std::tuple<uint64_t, uint64_t, uint64_t, std::string>;
  std::map<Key, const GemmRow*> pred;
  for (const auto& p : predicted) {
    auto [it, fresh] = pred.emplace(Key{p.m, p.n, p.k, p.dtype}, &p);
    if (!fresh) {
      throw std::runtime_error(RowAt(predicted_file, p.line) + "duplicate row " + GemmKeyText(p) +
                               FirstAt(it->second->line));
    }
  }
  GpuFileComparison c;
  c.file = file;
  c.kind = CsvKind::kGemm;
  std::map<std::string, size_t> index;
  std::map<Key, const GemmRow*> seen;
  for (const auto& m : measured) {
    const Key k{m.m, m.n, m.k, m.dtype};
    auto [first, fresh] = seen.emplace(k, &m);
    if (!fresh) {
      throw std::runtime_error(RowAt(file, m.line) + "duplicate row " + GemmKeyText(m) +
                               FirstAt(first->second->line));
    }
    auto it = pred.find(k);
    if (it == pred.end()) {
      c.not_predicted.push_back(GemmKeyText(m) + ": not in the predicted file");
      continue;
    }
    TableFor(&c, &index, GemmTable(m)).rows.push_back(GemmCmpRow(m, *it->second));
  }
  c.predicted_file = predicted_file;
  for (const auto& p : predicted)
    if (!seen.count(Key{p.m, p.n, p.k, p.dtype})) c.only_predicted.push_back(GemmKeyText(p));
  Finish(&c);
  return c;
}

GpuFileComparison PredictAndCompare(const std::string& file, const std::string& text, const GpuPredictor& p) {
  GpuFileComparison c;
  c.file = file;
  c.kind = DetectCsvKind(text, file);
  std::map<std::string, size_t> index;
  if (c.kind == CsvKind::kCollective) {
    for (const auto& m : ReadCollectiveCsv(text, file)) {
      try {
        const CollectiveRow pred = p.collective(m);  // before the table: a row that throws adds none
        TableFor(&c, &index, CollTable(m)).rows.push_back(CollRow(m, pred));
      } catch (const std::invalid_argument& e) {
        c.not_predicted.push_back(m.op + " " + std::to_string(m.ranks) + " ranks " +
                                  std::to_string(m.size_bytes) + " B: " + e.what());
      }
    }
  } else {
    for (const auto& m : ReadGemmCsv(text, file)) {
      try {
        const GemmRow pred = p.gemm(m);
        TableFor(&c, &index, GemmTable(m)).rows.push_back(GemmCmpRow(m, pred));
      } catch (const std::invalid_argument& e) {
        c.not_predicted.push_back("m=" + std::to_string(m.m) + " n=" + std::to_string(m.n) +
                                  " k=" + std::to_string(m.k) + " " + m.dtype + ": " + e.what());
      }
    }
  }
  Finish(&c);
  return c;
}

std::string GpuComparisonText(const GpuFileComparison& c, bool summary) {
  std::string s = "== " + c.file + " (" + (c.kind == CsvKind::kCollective ? "collectives" : "GEMMs") + ")\n";
  const bool coll = c.kind == CsvKind::kCollective;
  char buf[256];
  for (const auto& t : c.tables) {
    s += t.name + ": " + std::to_string(t.rows.size()) + (coll ? " sizes" : " rows") + ", MAPE " +
         Fixed(t.mape_pct, 2) + " %";
    if (t.worst >= 0) {
      s += ", worst " + Signed(t.rows[t.worst].error_pct, 1) + " % at " + t.rows[t.worst].key +
           (coll ? " B" : "");
    }
    s += "\n";
    if (summary) continue;
    std::snprintf(buf, sizeof buf, "  %14s %12s %13s %8s %11s %11s  %s\n", coll ? "size_bytes" : "m",
                  "measured_us", "predicted_us", "error_%", coll ? "meas_busbw" : "meas_tflops",
                  coll ? "pred_busbw" : "pred_tflops", "predicted_as");
    s += buf;
    for (const auto& r : t.rows) {
      std::snprintf(buf, sizeof buf, "  %14s %12s %13s %8s %11s %11s  %s\n",
                    coll ? r.key.c_str() : r.key.substr(2).c_str(), Fixed(r.measured_us, 3).c_str(),
                    Fixed(r.predicted_us, 3).c_str(), Signed(r.error_pct, 1).c_str(),
                    Fixed(r.measured_rate, 2).c_str(), Fixed(r.predicted_rate, 2).c_str(),
                    r.predicted_as.c_str());
      s += buf;
    }
  }
  // No row compared: no MAPE (as tpsim compare's per-op table says), not 0.00 %.
  s += c.compared == 0 ? std::string("file MAPE: n/a (no row compared)")
                       : "file MAPE: " + Fixed(c.mape_pct, 2) + " % over " + std::to_string(c.compared) +
                             " rows in " + std::to_string(c.tables.size()) + " tables";
  if (!c.not_predicted.empty()) s += "; " + std::to_string(c.not_predicted.size()) + " rows not compared";
  s += "\n";
  for (const auto& n : c.not_predicted) s += "  not compared: " + n + "\n";
  if (!c.only_predicted.empty()) {
    constexpr size_t kShown = 5;
    s += std::to_string(c.only_predicted.size()) + " rows only in the predicted file " + c.predicted_file +
         " (not measured, not compared): ";
    for (size_t i = 0; i < c.only_predicted.size() && i < kShown; ++i)
      s += (i ? "; " : "") + c.only_predicted[i];
    if (c.only_predicted.size() > kShown)
      s += "; and " + std::to_string(c.only_predicted.size() - kShown) + " more";
    s += "\n";
  }
  return s;
}

bool PlotGpuComparison(const GpuFileComparison& c, const std::string& png, std::string* err) {
  nlohmann::json data;
  data["kind"] = c.kind == CsvKind::kCollective ? "collective" : "gemm";
  data["title"] = c.file + (c.compared == 0 ? std::string("  (no row compared)")
                                            : "  (MAPE " + Fixed(c.mape_pct, 1) + " %)");
  data["tables"] = nlohmann::json::array();
  for (const auto& t : c.tables) {
    nlohmann::json tj;
    tj["name"] = t.name + " (MAPE " + Fixed(t.mape_pct, 1) + " %)";
    for (const auto& r : t.rows) {
      tj["x"].push_back(r.x);
      tj["measured_us"].push_back(r.measured_us);
      tj["predicted_us"].push_back(r.predicted_us);
      tj["measured_rate"].push_back(r.measured_rate);
      tj["predicted_rate"].push_back(r.predicted_rate);
    }
    data["tables"].push_back(tj);
  }
  return RunPlotScript(PlotScriptBeside("plot_gpu.py"), data.dump(1), png, err);
}

int CompareGpuCommand(const std::vector<std::string>& args, const GpuPredictorFactory* factory) {
  std::vector<std::string> files, sets;
  std::string chip, plot, plot_dir;
  bool summary = false;
  std::map<std::string, std::string> given;  // --chip, --plot, --plot-dir take one value each
  auto usage = [](const std::string& msg) {
    std::cerr << "tpsim compare: " << msg << "\n\n" << kUsage;
    return 2;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag, std::string* out) {
      if (a == flag) {
        if (i + 1 >= args.size()) return -1;
        if (!config::OptionAsValue(args[i + 1]).empty()) return -2;  // the next option, not a value
        *out = args[++i];
        return out->empty() ? -1 : 1;  // an empty value is none
      }
      if (a.rfind(flag + "=", 0) == 0) {
        *out = a.substr(flag.size() + 1);
        return out->empty() ? -1 : 1;
      }
      return 0;
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--summary") {
      summary = true;
      continue;
    }
    std::string v;
    int got = 0;
    if ((got = value("--chip", &chip)) || (got = value("--plot", &plot)) ||
        (got = value("--plot-dir", &plot_dir))) {
      if (got == -2) return usage(a + " " + config::OptionAsValue(args[i + 1]));
      if (got < 0) return usage(a + " needs a value");
      const std::string flag = a.substr(0, a.find('='));
      const std::string& given_value = flag == "--chip" ? chip : flag == "--plot" ? plot : plot_dir;
      if (const std::string twice = config::GivenTwice(&given, flag, given_value); !twice.empty())
        return usage(flag + " " + twice);
      continue;
    }
    if ((got = value("--set", &v))) {
      if (got == -2) return usage("--set " + config::OptionAsValue(args[i + 1]));
      if (got < 0) return usage("--set needs a value");
      if (v.find('=') == std::string::npos || v[0] == '=')
        return usage("--set '" + v + "': expected FIELD=VALUE");
      sets.push_back(v);
      continue;
    }
    if (a.size() > 1 && a[0] == '-') return usage("unknown option " + a);
    files.push_back(a);
  }
  if (!chip.empty() && files.empty()) return usage("--chip needs at least one MEASURED.csv");
  if (chip.empty() && files.size() != 2)
    return usage("needs PREDICTED.csv and MEASURED.csv (or --chip CHIP MEASURED.csv...)");
  if (chip.empty() && !sets.empty()) return usage("--set needs --chip");
  if (!plot.empty() && !plot_dir.empty()) return usage("give --plot or --plot-dir, not both");
  if (!plot.empty() && !chip.empty() && files.size() > 1)
    return usage("--plot takes one MEASURED file; use --plot-dir");
  if (!plot.empty()) {
    if (const std::string e = PlotPathError("--plot", plot); !e.empty()) return usage(e);
    config::CheckOutputNotInput("--plot", plot, files);  // located: the command line prints it (exit 2)
  }
  std::vector<GpuFileComparison> results;
  try {
    if (chip.empty()) {
      const std::string pt = ReadTextFile(files[0]), mt = ReadTextFile(files[1]);
      for (const auto& [text, path] : {std::pair{&pt, &files[0]}, std::pair{&mt, &files[1]}})
        if (const std::string e = JsonGivenForCsv(*text, *path); !e.empty()) return usage(e);
      const CsvKind pk = DetectCsvKind(pt, files[0]), mk = DetectCsvKind(mt, files[1]);
      if (pk != mk)
        return usage(files[0] + " and " + files[1] + " hold different kinds (collectives vs GEMMs)");
      results.push_back(
          mk == CsvKind::kCollective
              ? CompareCollectives(files[1], ReadCollectiveCsv(mt, files[1]), ReadCollectiveCsv(pt, files[0]),
                                   files[0])
              : CompareGemms(files[1], ReadGemmCsv(mt, files[1]), ReadGemmCsv(pt, files[0]), files[0]));
    } else {
      if (!factory) {
        std::cerr << "tpsim compare: --chip is not available in this build (no GPU models linked)\n";
        return 2;
      }
      const GpuPredictor p = (*factory)(chip, sets);
      for (const auto& f : files) {
        const std::string text = ReadTextFile(f);
        if (const std::string e = JsonGivenForCsv(text, f); !e.empty()) return usage(e);
        results.push_back(PredictAndCompare(f, text, p));
      }
    }
  } catch (const config::ConfigError&) {
    throw;                             // located config errors: the command line prints them (exit 2)
  } catch (const std::exception& e) {  // unreadable or malformed CSV, a chip that cannot be loaded
    std::cerr << "tpsim compare: " << e.what() << "\n";
    return 2;
  }
  if (!chip.empty()) std::cout << "# predicted on " << chip << "\n";
  for (const auto& r : results) std::cout << GpuComparisonText(r, summary);
  // A file that compared no row made no comparison (as a result JSON without ops): exit 2
  // saying why (a header-only file, a chip that predicts none of its rows exited 0).
  bool none = false;
  for (const auto& r : results) {
    if (r.compared > 0) continue;
    none = true;
    std::cerr << "tpsim compare: " << r.file << ": no row compared ("
              << (r.not_predicted.empty() ? std::string("the file has no rows")
                  : !chip.empty()         ? "none of its " + std::to_string(r.not_predicted.size()) +
                                        " rows could be predicted on " + chip
                                  : "none of its " + std::to_string(r.not_predicted.size()) +
                                        " rows is in the predicted file " + r.predicted_file)
              << ")\n";
  }
  if (none) return 2;
  int rc = 0;
  for (const auto& r : results) {
    std::string png = plot;
    if (!plot_dir.empty()) {
      std::string stem = r.file.substr(r.file.rfind('/') + 1);
      if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".csv") == 0) stem.resize(stem.size() - 4);
      png = plot_dir + "/" + stem + ".png";
    }
    if (png.empty()) continue;
    std::string err;
    if (!PlotGpuComparison(r, png, &err)) {
      std::cerr << "tpsim compare: " << (plot_dir.empty() ? "--plot: " : "--plot-dir: ") << err << "\n";
      rc = 1;
    } else {
      std::cout << "plot: " << png << "\n";
    }
  }
  return rc;
}

}  // namespace tpsim::validate
