#include "validate/gpu_csv.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "configs/files.h"
#include "configs/load.h"

namespace tpsim::validate {

namespace {

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(line);
  while (std::getline(in, cur, ',')) out.push_back(Trim(cur));
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

// The data lines of a CSV: header fields and the rows, with their 1-based line numbers.
struct Table {
  std::vector<std::string> header;
  int header_line = 0;
  std::vector<std::pair<int, std::vector<std::string>>> rows;
  std::map<std::string, size_t> index;
  bool device_time = false;  // a `# timing: device` line
};

std::string Where(const std::string& name, int line) { return name + ":" + std::to_string(line) + ": "; }

Table Parse(const std::string& text, const std::string& name) {
  Table t;
  // A UTF-8 byte order mark (a spreadsheet's export) read as part of the first column's name:
  // "header has no column m".
  std::istringstream in(text.starts_with("\xEF\xBB\xBF") ? text.substr(3) : text);
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    std::string s = Trim(line);
    if (!s.empty() && s[0] == '#' && Trim(s.substr(1)) == "timing: device") t.device_time = true;
    if (s.empty() || s[0] == '#') continue;
    if (t.header.empty()) {
      t.header = Split(s);
      t.header_line = no;
      for (size_t i = 0; i < t.header.size(); ++i) {
        // A column named twice (m,m,n,k) was read from its last place only.
        if (!t.index.emplace(t.header[i], i).second)
          throw std::runtime_error(Where(name, no) + "column " + t.header[i] +
                                   " is named twice in the header");
      }
      continue;
    }
    // Columns are found by position: a row with a field lost or added would read its later
    // columns from its neighbours (a short row was read as far as its fields went).
    std::vector<std::string> f = Split(s);
    if (f.size() != t.header.size()) {
      throw std::runtime_error(name + ":" + std::to_string(no) + ": " + std::to_string(f.size()) +
                               " fields, the header (line " + std::to_string(t.header_line) + ") has " +
                               std::to_string(t.header.size()));
    }
    t.rows.emplace_back(no, std::move(f));
  }
  if (t.header.empty()) throw std::runtime_error(name + ": no header line (and no rows)");
  return t;
}

struct Row {
  const Table& t;
  const std::string& name;
  int line;
  const std::vector<std::string>& f;
  bool Has(const std::string& col) const {
    auto it = t.index.find(col);
    return it != t.index.end() && it->second < f.size() && !f[it->second].empty();
  }
  const std::string& Text(const std::string& col) const {
    auto it = t.index.find(col);
    if (it == t.index.end()) throw std::runtime_error(Where(name, line) + "no column " + col);
    if (it->second >= f.size()) {
      throw std::runtime_error(Where(name, line) + "has " + std::to_string(f.size()) + " fields, column " +
                               col + " is field " + std::to_string(it->second + 1));
    }
    return f[it->second];
  }
  double Number(const std::string& col, bool positive) const {
    const std::string& s = Text(col);
    char* end = nullptr;
    errno = 0;
    // Decimal only, as the integer columns: strtod also read hexadecimal ("0x10" as 16, "0x1p5"
    // as 32), which size_bytes refuses. Signs, digits, a point and an exponent.
    const bool decimal = !s.empty() && s.find_first_not_of("0123456789+-.eE") == std::string::npos;
    double v = decimal ? std::strtod(s.c_str(), &end) : 0;
    if (decimal && end == s.c_str() + s.size() && errno == ERANGE)
      throw std::runtime_error(Where(name, line) + col + ": '" + config::Clip(s, 80) +
                               "' is out of the range of a double");
    if (!decimal || end != s.c_str() + s.size() || errno != 0 || !std::isfinite(v)) {
      throw std::runtime_error(Where(name, line) + col + ": '" + config::Clip(s, 80) +
                               "' is not a decimal number");
    }
    if (positive ? !(v > 0) : v < 0) {
      throw std::runtime_error(Where(name, line) + col + ": " + s +
                               (positive ? " must be positive" : " must be >= 0"));
    }
    return v;
  }
  // A time in microseconds: positive, and from 1 ps to 2^63-1 ps, what tpsim's clock holds (1e-300
  // printed an error of 64 digits, 1e308 a time of 309).
  double TimeUs(const std::string& col) const {
    const double v = Number(col, true);
    if (v < 1e-6)
      throw std::runtime_error(Where(name, line) + col + ": " + config::Clip(Text(col), 80) +
                               " is below 1 ps (0.000001 us), the shortest time tpsim's clock holds");
    if (v > kMaxTimeUs)
      throw std::runtime_error(Where(name, line) + col + ": " + config::Clip(Text(col), 80) +
                               " is above 2^63-1 ps (9223372036854.775 us, about 106 days), the longest "
                               "time tpsim's clock holds");
    return v;
  }
  static constexpr double kMaxTimeUs = 9223372036854.775807;  // INT64_MAX ps
  uint64_t Count(const std::string& col) const {
    const std::string& s = Text(col);
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || s[0] == '-' || end != s.c_str() + s.size() || errno != 0 || v == 0) {
      throw std::runtime_error(Where(name, line) + col + ": '" + config::Clip(s, 80) +
                               "' is not a positive integer");
    }
    return v;
  }
  // A GEMM dimension: at most 12 digits, as `tpsim gemm --m` takes it (a row of 2^40 was taken
  // where --m refused it).
  uint64_t Dim(const std::string& col) const {
    const uint64_t v = Count(col);
    if (v > 999999999999)
      throw std::runtime_error(
          Where(name, line) + col + ": '" + Text(col) +
          "' is above 999999999999, the largest GEMM dimension tpsim takes (as --m, --n, "
          "--k)");
    return v;
  }
};

// Throws "name:line: duplicate row KEY (first at line N)" when `key` was seen before.
void CheckUnique(std::map<std::string, int>* first, const std::string& key, const std::string& name,
                 int line) {
  auto [it, fresh] = first->emplace(key, line);
  if (!fresh) {
    throw std::runtime_error(Where(name, line) + "duplicate row " + key + " (first at line " +
                             std::to_string(it->second) + ")");
  }
}

void Require(const Table& t, const std::string& name, std::initializer_list<const char*> cols) {
  for (const char* c : cols) {
    if (!t.index.count(c)) throw std::runtime_error(name + ": header has no column " + c);
  }
}

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

}  // namespace

std::string CollectiveCsvLine(const CollectiveRow& r) {
  return r.op + "," + std::to_string(r.ranks) + "," + std::to_string(r.size_bytes) + "," + Num(r.time_us) +
         "," + Num(r.algbw_gbps) + "," + Num(r.busbw_gbps) + "," + r.algorithm + "," + r.protocol;
}

std::string GemmCsvLine(const GemmRow& r) {
  return std::to_string(r.m) + "," + std::to_string(r.n) + "," + std::to_string(r.k) + "," + r.dtype + "," +
         Num(r.time_us) + "," + Num(r.tflops) + "," + r.bound + "," +
         (r.has_tiles ? std::to_string(r.tiles) : "") + "," + (r.has_tiles ? Num(r.waves) : "");
}

std::string CollectiveKeyText(const CollectiveRow& r) {
  return r.op + " " + std::to_string(r.ranks) + " ranks " + std::to_string(r.size_bytes) + " B";
}

std::string GemmKeyText(const GemmRow& r) {
  return "m=" + std::to_string(r.m) + " n=" + std::to_string(r.n) + " k=" + std::to_string(r.k) + " " +
         r.dtype;
}

CsvKind DetectCsvKind(const std::string& text, const std::string& name) {
  Table t = Parse(text, name);
  if (t.index.count("size_bytes")) return CsvKind::kCollective;
  if (t.index.count("m") && t.index.count("n") && t.index.count("k")) return CsvKind::kGemm;
  throw std::runtime_error(name + ": neither a collectives CSV (" + kCollectiveCsvHeader +
                           ") nor a GEMM CSV (" + kGemmCsvHeader + ")");
}

std::vector<CollectiveRow> ReadCollectiveCsv(const std::string& text, const std::string& name) {
  Table t = Parse(text, name);
  Require(t, name, {"op", "ranks", "size_bytes", "time_us"});
  std::vector<CollectiveRow> out;
  std::map<std::string, int> first;
  for (const auto& [line, f] : t.rows) {
    Row r{t, name, line, f};
    CollectiveRow c;
    c.op = r.Text("op");
    if (c.op.empty()) throw std::runtime_error(Where(name, line) + "op: empty");
    const uint64_t ranks = r.Count("ranks");
    if (ranks > 1000000)
      throw std::runtime_error(Where(name, line) + "ranks: " + r.Text("ranks") + " is too large");
    c.ranks = static_cast<int>(ranks);
    c.size_bytes = r.Count("size_bytes");
    c.time_us = r.TimeUs("time_us");
    if (r.Has("algbw_gbps")) c.algbw_gbps = r.Number("algbw_gbps", false);
    if (r.Has("busbw_gbps")) c.busbw_gbps = r.Number("busbw_gbps", false);
    if (r.Has("algorithm")) c.algorithm = r.Text("algorithm");
    if (r.Has("protocol")) c.protocol = r.Text("protocol");
    c.device_time = t.device_time;
    c.line = line;
    CheckUnique(&first, CollectiveKeyText(c) + ", algorithm " + c.algorithm + ", protocol " + c.protocol,
                name, line);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<GemmRow> ReadGemmCsv(const std::string& text, const std::string& name) {
  Table t = Parse(text, name);
  Require(t, name, {"m", "n", "k", "time_us"});
  std::vector<GemmRow> out;
  std::map<std::string, int> first;
  for (const auto& [line, f] : t.rows) {
    Row r{t, name, line, f};
    GemmRow g;
    g.m = r.Dim("m");
    g.n = r.Dim("n");
    g.k = r.Dim("k");
    if (r.Has("dtype")) g.dtype = r.Text("dtype");
    g.time_us = r.TimeUs("time_us");
    if (r.Has("tflops")) g.tflops = r.Number("tflops", false);
    if (r.Has("bound")) g.bound = r.Text("bound");
    if (r.Has("tiles")) {
      g.tiles = r.Count("tiles");
      g.has_tiles = true;
    }
    if (r.Has("waves")) g.waves = r.Number("waves", false);
    g.line = line;
    CheckUnique(&first, GemmKeyText(g), name, line);
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<GemmShapeRow> ReadShapesCsv(const std::string& text, const std::string& name) {
  Table t = Parse(text, name);
  Require(t, name, {"m", "n", "k"});
  std::vector<GemmShapeRow> out;
  for (const auto& [line, f] : t.rows) {
    Row r{t, name, line, f};
    GemmShapeRow g;
    g.m = r.Dim("m");
    g.n = r.Dim("n");
    g.k = r.Dim("k");
    if (r.Has("dtype")) g.dtype = r.Text("dtype");
    g.line = line;
    out.push_back(std::move(g));
  }
  return out;
}

std::string ReadTextFile(const std::string& path, const std::string& field) {
  // A regular UTF-8 file of at most 64 MiB (a FIFO would block, /dev/zero never ends).
  return config::ReadInputFile(path, config::kCommandLine, field, config::kMaxConfigBytes);
}

}  // namespace tpsim::validate
