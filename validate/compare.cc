#include "validate/compare.h"

#include "configs/files.h"
#include "configs/load.h"
#include "experiment.pb.h"
#include "validate/collective_sweep.h"
#include "validate/compare_gpu.h"
#include "validate/gpu_csv.h"

#include <fcntl.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

namespace tpsim::validate {

namespace {

constexpr const char* kUsage =
    "usage: tpsim compare PREDICTED MEASURED [--plot out.png]\n"
    "  PREDICTED, MEASURED  result JSON files (tpsim run --out, tpsim-validate --out)\n"
    "  --plot out.png       also draw predicted vs measured (needs python3 with matplotlib)\n"
    "  Both files need ops (exit 2 naming the file otherwise): ops are compared one by one, and\n"
    "  where none is (no op in both, or each unmeasured) the report ends in why, exit 2. A\n"
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

// The structure of a result JSON that protobuf's JSON parser does not check: it keeps the last of
// a key given twice (`"total_ps": 1, "total_ps": 5000000`, `"ops": [], "ops": [...]`), skips a
// null element of a list and reads a null value as the field's default (0, "", false), and does
// not tell a field that is absent from one written as 0. Walks the text protobuf has accepted (so
// well-formed JSON), with the Result schema to name fields as protobuf does (compute_ps and
// computePs are one field), refuses those at their line and column, and records where each op's
// fields were written.
class ResultScan {
 public:
  static constexpr size_t kAbsent = std::string::npos;
  // The fields of an op that compare reads.
  enum OpField { kPhase, kLayer, kOp, kCompute, kCommunication, kMemory, kMeasured, kOpFields };
  static constexpr const char* kOpFieldNames[kOpFields] = {
      "phase", "layer", "op", "compute_ps", "communication_ps", "memory_ps", "measured"};
  struct OpAt {
    size_t at = 0;  // its '{'
    std::array<size_t, kOpFields> fields;
    OpAt() { fields.fill(kAbsent); }
  };

  ResultScan(const std::string& text, const std::string& file) : t_(text), file_(file) {}

  void Run() {
    Ws();
    if (p_ < t_.size() && t_[p_] == '{') Object(config::Result::descriptor(), "", 0, -1);
  }

  std::vector<OpAt> ops;
  size_t summary_at = kAbsent, summary_total_at = kAbsent, config_at = kAbsent;

  // "FILE:LINE:COL: field: value: rule", the project's form of an input error.
  std::string At(size_t pos, const std::string& field, const std::string& value,
                 const std::string& rule) const {
    return config::Diag{config::LocationIn(t_, pos, file_), field, value, rule}.str();
  }

 private:
  static constexpr int kMaxDepth = 200;  // protobuf's parser refuses deeper nesting before this

  [[noreturn]] void Fail(size_t pos, const std::string& field, const std::string& value,
                         const std::string& rule) const {
    throw std::runtime_error(At(pos, field, value, rule));
  }

  void Ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
  }

  // A string at p_ ('"'), its escapes decoded as far as names need (\uXXXX kept as written).
  std::string String() {
    std::string out;
    for (++p_; p_ < t_.size() && t_[p_] != '"'; ++p_) {
      if (t_[p_] == '\\' && p_ + 1 < t_.size()) {
        const char e = t_[++p_];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f' : e;
        if (e == 'u') out += t_.substr(p_ + 1, 4), p_ += 4;
        continue;
      }
      out += t_[p_];
    }
    ++p_;
    return out;
  }

  bool Null() const { return t_.compare(p_, 4, "null") == 0; }

  // A value of field `f` (null: not a field of the schema) at p_; `op`: the index of the op it is
  // in, -1 outside ops.
  void Value(const google::protobuf::FieldDescriptor* f, const std::string& path, int depth, int op) {
    using FD = google::protobuf::FieldDescriptor;
    if (depth > kMaxDepth) Fail(p_, path, "", "nested too deeply");
    Ws();
    if (p_ >= t_.size()) return;
    const char c = t_[p_];
    if (c == '{') {
      Object(f && f->cpp_type() == FD::CPPTYPE_MESSAGE && !f->is_map() ? f->message_type() : nullptr, path,
             depth + 1, op);
    } else if (c == '[') {
      ++p_;
      Ws();
      for (int i = 0; p_ < t_.size() && t_[p_] != ']'; ++i) {
        const std::string ep = path + "[" + std::to_string(i) + "]";
        Ws();
        if (Null()) Fail(p_, ep, "null", "a list's element cannot be null (it would be skipped, not read)");
        int sub = op;
        if (f && f == config::Result::descriptor()->FindFieldByName("ops")) {
          ops.emplace_back();
          ops.back().at = p_;
          sub = static_cast<int>(ops.size()) - 1;
        }
        Value(f, ep, depth + 1, sub);
        Ws();
        if (p_ < t_.size() && t_[p_] == ',') ++p_;
        Ws();
      }
      ++p_;
    } else if (c == '"') {
      String();
    } else {
      while (p_ < t_.size() && !std::strchr(",]} \t\r\n", t_[p_])) ++p_;
    }
  }

  void Object(const google::protobuf::Descriptor* d, const std::string& path, int depth, int op) {
    using FD = google::protobuf::FieldDescriptor;
    if (depth > kMaxDepth) Fail(p_, path, "", "nested too deeply");
    ++p_;                                // '{'
    std::map<std::string, size_t> seen;  // field name (or key) -> where first written
    for (;;) {
      Ws();
      if (p_ >= t_.size()) return;
      if (t_[p_] == '}') {
        ++p_;
        return;
      }
      if (t_[p_] == ',') {
        ++p_;
        continue;
      }
      const size_t key_at = p_;
      const std::string key = String();
      const FD* f = nullptr;
      if (d) {
        f = d->FindFieldByName(key);
        for (int i = 0; !f && i < d->field_count(); ++i)
          if (d->field(i)->json_name() == key) f = d->field(i);
      }
      const std::string name = f ? std::string(f->name()) : key;
      const std::string fpath = path.empty() ? name : path + "." + name;
      if (auto [it, fresh] = seen.emplace(name, key_at); !fresh)
        Fail(key_at + 1, fpath, "",
             "given twice in one object (first on line " +
                 std::to_string(config::LocationIn(t_, it->second, file_).line) +
                 "): a JSON parser keeps the last, silently; give it once");
      Ws();
      if (p_ < t_.size() && t_[p_] == ':') ++p_;
      Ws();
      // tpsim writes null only for a number that is not finite (a double); protobuf reads a null
      // integer, string, bool, list or object as 0, "", false or none.
      if (f && Null() && f->cpp_type() != FD::CPPTYPE_DOUBLE && f->cpp_type() != FD::CPPTYPE_FLOAT)
        Fail(p_, fpath, "null",
             "not a value of this field (" + std::string(f->is_repeated() ? "a list" : f->cpp_type_name()) +
                 "): tpsim writes every field's value, 0 included");
      // Where the name starts, as the configs' errors point.
      if (f && d == config::OpResult::descriptor() && op >= 0) {
        for (int k = 0; k < kOpFields; ++k)
          if (name == kOpFieldNames[k]) ops[op].fields[k] = key_at + 1;
      }
      if (f && d == config::Summary::descriptor() && name == "total_ps") summary_total_at = key_at + 1;
      if (f && d == config::Result::descriptor() && name == "summary") summary_at = key_at + 1;
      if (f && d == config::Result::descriptor() && name == "config") config_at = key_at + 1;
      Value(f, fpath, depth, op);
    }
  }

  const std::string& t_;
  const std::string& file_;
  size_t p_ = 0;
};

// Parses a result's `config` (the experiment it ran, protobuf text format) without protobuf's
// logging, which printed "[libprotobuf ERROR ...text_format.cc:337] ..." on stderr: "" when it
// parsed (or is empty), else the first error as "line L column C: MESSAGE".
class QuietErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (first.empty())
      first = "line " + std::to_string(line + 1) + " column " + std::to_string(column + 1) + ": " + message;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  std::string first;
};

std::string ParseExperiment(const std::string& text, config::Experiment* e) {
  if (text.empty()) return "";
  google::protobuf::TextFormat::Parser parser;
  QuietErrors errors;
  parser.RecordErrorsTo(&errors);
  if (parser.ParseFromString(text, e)) return "";
  return errors.first.empty() ? std::string("not protobuf text format") : config::Clip(errors.first, 200);
}

std::string ConfigParseError(const std::string& text) {
  config::Experiment e;
  return ParseExperiment(text, &e);
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

config::Result LoadResultJson(const std::string& path, std::string* warning) {
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
  // Keys given twice, null values and elements, where each op's fields are.
  ResultScan scan(text, path);
  scan.Run();
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
  if (scan.summary_at != ResultScan::kAbsent && scan.summary_total_at == ResultScan::kAbsent)
    throw std::runtime_error(scan.At(scan.summary_at, "summary.total_ps", "",
                                     "missing: the total compared; tpsim writes every field, 0 included (an "
                                     "absent one is not read as 0)"));
  // What compare reads of an op must be written: tpsim writes every field (0 included; its Result
  // JSON has been field by field since its first version), and protobuf's JSON reads an absent one
  // as 0 (a missing compute_ps made "worst op: prefill L0 k_proj (786.2 %)").
  if (scan.ops.size() != static_cast<size_t>(r.ops_size()))
    throw std::runtime_error(path + ": ops: " + std::to_string(scan.ops.size()) + " found, " +
                             std::to_string(r.ops_size()) + " read: the file is not JSON as tpsim writes it");
  const bool gpu = r.engine() == "gpu";
  for (int i = 0; i < r.ops_size(); ++i) {
    const ResultScan::OpAt& at = scan.ops[static_cast<size_t>(i)];
    const config::OpResult& o = r.ops(i);
    const std::string where = "ops[" + std::to_string(i) + "].";
    for (int k = 0; k < ResultScan::kOpFields; ++k) {
      if (at.fields[k] != ResultScan::kAbsent || (k == ResultScan::kMeasured && !gpu)) continue;
      throw std::runtime_error(
          scan.At(at.at, where + ResultScan::kOpFieldNames[k], "",
                  std::string("missing: ") +
                      (k == ResultScan::kMeasured ? "a GPU result says of each op whether it was measured"
                                                  : "compare matches ops by phase, layer and op and compares "
                                                    "compute_ps + communication_ps + memory_ps") +
                      "; tpsim writes every field, 0 included (an absent one is not read as 0)"));
    }
    // The phases tpsim writes (mapping::ToString(Phase)); ops are matched by them.
    static const std::set<std::string> kPhases = {"prefill", "decode", "mixed", "kv_transfer"};
    if (!kPhases.count(o.phase()))
      throw std::runtime_error(scan.At(at.fields[ResultScan::kPhase], where + "phase",
                                       "\"" + o.phase() + "\"",
                                       "not a phase tpsim writes (prefill, decode, mixed, kv_transfer)"));
    if (o.op().empty())
      throw std::runtime_error(scan.At(at.fields[ResultScan::kOp], where + "op", "\"\"",
                                       "empty: an op is named (ops are matched by phase, layer and op)"));
    // Each time is at most 2^63-1 ps; their sum, the op's kernel time, may not be (both
    // compute_ps and memory_ps at 2^63-1 printed 18446744073709.551 us).
    const int64_t parts[] = {o.compute_ps(), o.communication_ps(), o.memory_ps()};
    int64_t sum = 0;
    for (int64_t v : parts) {
      if (v > std::numeric_limits<int64_t>::max() - sum)
        throw std::runtime_error(scan.At(
            at.at, where + "compute_ps + communication_ps + memory_ps",
            std::to_string(parts[0]) + " + " + std::to_string(parts[1]) + " + " + std::to_string(parts[2]),
            "the op's kernel time, beyond 2^63-1 ps (about 106 days), the longest time tpsim's clock "
            "holds"));
      sum += v;
    }
  }
  if (warning) {
    warning->clear();
    if (const std::string why = ConfigParseError(r.config()); !why.empty())
      *warning = scan.At(scan.config_at == ResultScan::kAbsent ? 0 : scan.config_at, "config",
                         config::Clip(r.config(), 60),
                         "cannot be read as an experiment (" + why +
                             "): whether the two results ran the same experiment is not checked");
  }
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
  // One that cannot be read: LoadResultJson's warning says so.
  if (!ParseExperiment(a.config(), &x).empty() || !ParseExperiment(b.config(), &y).empty()) return "";
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
  // The files decide, not a flag's value (`a.json b.json --plot x.csv` went to the CSV usage).
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--plot" || a == "--plot-dir" || a == "--set") {
      ++i;
      continue;
    }
    const bool csv = a.size() > 4 && a[0] != '-' && a.compare(a.size() - 4, 4, ".csv") == 0;
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
      if (const std::string rule = config::OptionAsValue(args[i + 1]); !rule.empty()) {
        std::cerr << "tpsim compare: --plot " << rule << "\n\n" << kUsage;
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
    std::string warned[2];
    const config::Result predicted = LoadResultJson(files[0], &warned[0]),
                         measured = LoadResultJson(files[1], &warned[1]);
    for (const std::string& w : warned)
      if (!w.empty()) std::cerr << "tpsim compare: warning: " << w << "\n";
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
  // Nothing compared is no comparison (as a file without ops): exit 2 saying why.
  if (c.compared == 0) {
    std::cerr << "tpsim compare: " << files[0] << " and " << files[1] << ": no op was compared ("
              << (c.rows.empty()
                      ? "no op of one is in the other: they match by phase, layer and op"
                      : std::to_string(c.rows.size()) + " ops matched, each unmeasured or measured as 0")
              << ")\n";
    return 2;
  }
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
