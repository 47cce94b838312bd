#include "sim/serving/requests.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "configs/files.h"
#include "configs/json_quote.h"
#include "sim/experiment.h"

namespace tpsim::serving {

using config::ConfigError;
using config::Diag;
using config::Location;

namespace {

std::string Trim(std::string_view s) {
  size_t a = s.find_first_not_of(" \t\r\""), b = s.find_last_not_of(" \t\r\"");
  return a == std::string::npos ? "" : std::string(s.substr(a, b - a + 1));
}

// The cells of `line`, trimmed; `cols` (when given) gets the 1-based column where each cell's
// text begins (past blanks and quotes; an empty cell: where it would).
// `unquoted` (when given) gets the 1-based column of the first cell whose quotes do not open and
// close it ("0,10" was split at its comma and read as two cells), else 0.
std::vector<std::string> SplitCsv(const std::string& line, std::vector<int>* cols = nullptr,
                                  int* unquoted = nullptr) {
  std::vector<std::string> out;
  size_t start = 0;
  if (unquoted) *unquoted = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    const std::string_view cell =
        std::string_view(line).substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (unquoted && *unquoted == 0) {
      const size_t a = cell.find_first_not_of(" \t\r"), b = cell.find_last_not_of(" \t\r");
      const std::string_view body = a == std::string::npos ? std::string_view() : cell.substr(a, b - a + 1);
      const size_t quotes = static_cast<size_t>(std::count(body.begin(), body.end(), '"'));
      const bool closed =
          quotes == 0 || (quotes == 2 && body.size() >= 2 && body.front() == '"' && body.back() == '"');
      if (!closed) *unquoted = static_cast<int>(start + (a == std::string::npos ? 0 : a)) + 1;
    }
    out.push_back(Trim(cell));
    if (cols)
      cols->push_back(static_cast<int>(start + std::min(cell.find_first_not_of(" \t\r\""), cell.size())) + 1);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// A number as written compactly (1e+300, not its 301 digits; 1234567 in full).
std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

// What a trace's column or key gives: the arrival, the prompt or the output tokens (-1: none).
int Role(const std::string& name) {
  if (name == "arrival_s" || name == "arrival_ms" || name == "TIMESTAMP") return 0;
  if (name == "prompt_tokens" || name == "ContextTokens") return 1;
  if (name == "output_tokens" || name == "GeneratedTokens") return 2;
  return -1;
}

// A decimal number ("12", "0.5", "1e3", "-2"): hexadecimal (0x10 read as 16), inf, nan and
// blanks inside are not one.
bool ParseDouble(const std::string& s, double* v) {
  if (s.empty() || s.find_first_not_of("0123456789.eE+-") != std::string::npos) return false;
  // strtod, not stod: a value below the normal doubles (1e-310) is read as the subnormal or 0 it
  // rounds to (stod threw on it, and "arrival must be a decimal number >= 0" was said of it);
  // one past the largest is HUGE_VAL, refused below.
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(*v);
}

bool ParseCount(const std::string& s, uint32_t* v) {
  double d;
  if (!ParseDouble(s, &d) || d < 0 || d > kMaxRequestTokens || d != std::floor(d)) return false;
  *v = static_cast<uint32_t>(d);
  return true;
}

// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// "YYYY-MM-DD HH:MM:SS[.frac]" (or with 'T'), then optionally Z or an offset +HH:MM / -HH:MM
// (taken back to UTC) -> seconds since the epoch; or plain seconds. Every field has its digits
// (a 4-digit year, 2-digit month, day, hour, minute and second) and the date exists: February 31
// was read as March 3, trailing text and offsets were dropped, "18:15:1e1" read as 10 s.
bool ParseTimestamp(const std::string& s, double* sec) {
  if (ParseDouble(s, sec)) return true;
  size_t at = 0;
  auto digits = [&](size_t n, int* out) {
    if (at + n > s.size()) return false;
    int v = 0;
    for (size_t i = 0; i < n; ++i) {
      const char ch = s[at + i];
      if (ch < '0' || ch > '9') return false;
      v = v * 10 + (ch - '0');
    }
    at += n;
    *out = v;
    return true;
  };
  auto sep = [&](const char* any) {
    if (at >= s.size() || s[at] == '\0' || !std::strchr(any, s[at])) return false;
    ++at;
    return true;
  };
  int y, mo, d, h, mi, se;
  if (!digits(4, &y) || !sep("-") || !digits(2, &mo) || !sep("-") || !digits(2, &d) || !sep(" T") ||
      !digits(2, &h) || !sep(":") || !digits(2, &mi) || !sep(":") || !digits(2, &se))
    return false;
  double frac = 0;
  if (at < s.size() && s[at] == '.') {
    const size_t first = ++at;
    while (at < s.size() && s[at] >= '0' && s[at] <= '9') ++at;
    if (at == first) return false;
    frac = std::stod("0." + s.substr(first, at - first));
  }
  int offset_s = 0;
  if (at < s.size() && s[at] == 'Z') {
    ++at;
  } else if (at < s.size() && (s[at] == '+' || s[at] == '-')) {
    const int sign = s[at++] == '-' ? -1 : 1;
    int oh, om;
    if (!digits(2, &oh) || !sep(":") || !digits(2, &om) || oh > 23 || om > 59) return false;
    offset_s = sign * (oh * 3600 + om * 60);
  }
  if (at != s.size()) return false;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] + (mo == 2 && leap) || h > 23 || mi > 59 || se > 60)
    return false;
  *sec =
      static_cast<double>(DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d))) * 86400.0 +
      h * 3600.0 + mi * 60.0 + se + frac - offset_s;
  return true;
}

// Line `n` (1-based) of `text`, without its newline.
std::string LineAt(const std::string& text, int n) {
  size_t at = 0;
  for (int i = 1; i < n && at != std::string::npos; ++i) {
    at = text.find('\n', at);
    if (at != std::string::npos) ++at;
  }
  if (at == std::string::npos) return "";
  const size_t end = text.find('\n', at);
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

struct Row {
  double arrival_s;
  uint32_t prompt, output;
  int line;
};

// Where a row's arrival is written (column) and how, for an error.
struct Written {
  int col = 1;
  std::string text;
};

// The requests of `rows`. `arrival` finds a row's arrival in the trace, for an error (only
// then: a trace has up to kMaxRequests rows).
std::vector<Request> Finish(std::vector<Row> rows, double scale, const std::string& name,
                            const std::string& field, const std::function<Written(const Row&)>& arrival) {
  if (scale <= 0) scale = 1;
  double t0 = rows.empty() ? 0 : rows[0].arrival_s;
  for (const Row& r : rows) t0 = std::min(t0, r.arrival_s);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.arrival_s < b.arrival_s; });
  std::vector<Request> out;
  for (const Row& r : rows) {
    Request q;
    q.id = static_cast<uint32_t>(out.size());
    const double after_s = (r.arrival_s - t0) * scale;
    const double ps = after_s * 1e12;
    if (!(ps <= static_cast<double>(kMaxArrivalPs))) {
      // Compact numbers (1e+300 was printed as its 301 digits and "arrives inf s").
      const Written w = arrival(r);
      throw ConfigError(Diag{Location{name, r.line, w.col}, field, config::Clip(w.text),
                             "arrives " + (std::isfinite(after_s) ? Num(after_s) : "more than 1.8e+308") +
                                 " s after the first request" +
                                 (scale != 1 ? " (x time_scale " + Num(scale) + ")" : "") +
                                 ", out of range: past the 30 days (2592000 s) a served stream may span"});
    }
    q.arrival_ps = static_cast<Ps>(std::llround(ps));
    q.prompt_tokens = r.prompt;
    q.output_tokens = std::max<uint32_t>(1, r.output);
    q.zero_output = r.output == 0;
    q.trace_line = r.line;
    out.push_back(q);
  }
  return out;
}

}  // namespace

std::vector<Request> ParseTrace(const std::string& text, const std::string& name, const std::string& format,
                                const std::string& field, double time_scale) {
  std::string fmt = format;
  if (fmt.empty()) fmt = name.ends_with(".jsonl") ? "jsonl" : "csv";
  auto fail = [&](int line, int col, const std::string& value, const std::string& rule) {
    throw ConfigError(Diag{Location{name, line, col}, field, value, rule});
  };
  std::vector<Row> rows;
  // A UTF-8 byte order mark (as some editors and spreadsheets save) is not part of the header.
  std::istringstream in(text.starts_with("\xEF\xBB\xBF") ? text.substr(3) : text);
  std::string line;
  int lineno = 0;
  if (fmt == "jsonl") {
    std::vector<std::string> keys, dup;  // the object's keys; the first one given twice
    const nlohmann::json::parser_callback_t seen = [&](int depth, nlohmann::json::parse_event_t event,
                                                       nlohmann::json& parsed) {
      if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string()) {
        const std::string& k = parsed.get_ref<const std::string&>();
        if (dup.empty() && std::find(keys.begin(), keys.end(), k) != keys.end()) dup.push_back(k);
        keys.push_back(k);
      }
      return true;
    };
    while (std::getline(in, line)) {
      ++lineno;
      if (Trim(line).empty()) continue;
      keys.clear();
      dup.clear();
      nlohmann::json j = nlohmann::json::parse(line, seen, false);
      if (j.is_discarded()) {
        // Why it is not JSON, where the parser says (a number past a double's range was "not a
        // JSON object", at column 1).
        try {
          const nlohmann::json strict = nlohmann::json::parse(line);
          (void)strict;
        } catch (const nlohmann::json::exception& e) {
          std::string why = e.what();
          why = why.substr(why.find("] ") == std::string::npos ? 0 : why.find("] ") + 2);
          // A syntax error at the parser's byte; "number overflow parsing '1e400'" at that number.
          size_t at = std::string::npos;
          if (const auto* parse = dynamic_cast<const nlohmann::json::parse_error*>(&e)) {
            at = std::min<size_t>(std::max<size_t>(parse->byte, 1), line.size() + 1) - 1;
          } else if (const size_t open = why.find('\''), close = why.rfind('\''); open < close) {
            at = line.find(why.substr(open + 1, close - open - 1));
          }
          fail(lineno, at == std::string::npos ? 1 : static_cast<int>(at + 1), config::Clip(line),
               "not JSON: " + why);
        }
      }
      if (j.is_discarded() || !j.is_object()) fail(lineno, 1, line, "not a JSON object");
      // A key given twice kept its last value, silently.
      if (!dup.empty()) fail(lineno, 1, "\"" + config::Clip(dup[0]) + "\"", "key given twice in one object");
      if (j.contains("arrival_s") && j.contains("arrival_ms"))
        fail(lineno, 1, config::Clip(line), "gives both \"arrival_s\" and \"arrival_ms\": give one");
      Row r{0, 0, 0, lineno};
      // The column of a key's value (its "key", else 1): every error was at column 1.
      auto col = [&](const char* key) {
        const size_t k = line.find(std::string("\"") + key + "\"");
        if (k == std::string::npos) return 1;
        const size_t colon = line.find(':', k);
        const size_t v = colon == std::string::npos ? k : line.find_first_not_of(" \t", colon + 1);
        return static_cast<int>((v == std::string::npos ? k : v) + 1);
      };
      auto num = [&](const char* key, double* v) {
        if (!j.contains(key)) return false;
        if (!j[key].is_number())
          fail(lineno, col(key), config::QuoteJson(j[key]), std::string(key) + " must be a number");
        *v = j[key].get<double>();
        return true;
      };
      double a, p, o;
      if (num("arrival_s", &a)) {
        r.arrival_s = a;
      } else if (num("arrival_ms", &a)) {
        r.arrival_s = a / 1000;
      } else {
        fail(lineno, 1, line, "needs \"arrival_s\" or \"arrival_ms\"");
      }
      if (!num("prompt_tokens", &p)) fail(lineno, 1, line, "needs \"prompt_tokens\"");
      if (!num("output_tokens", &o)) fail(lineno, 1, line, "needs \"output_tokens\"");
      if (p < 1 || p != std::floor(p) || p > kMaxRequestTokens)
        fail(lineno, col("prompt_tokens"), Num(p),
             "prompt_tokens must be an integer from 1 to 1000000000 (1e9)");
      r.prompt = static_cast<uint32_t>(p);
      if (o < 0 || o != std::floor(o) || o > kMaxRequestTokens)
        fail(lineno, col("output_tokens"), Num(o),
             "output_tokens must be an integer from 0 to 1000000000 (1e9; 0 is served as 1)");
      r.output = static_cast<uint32_t>(o);
      if (r.arrival_s < 0 || !std::isfinite(r.arrival_s))
        fail(lineno, col(j.contains("arrival_s") ? "arrival_s" : "arrival_ms"), Num(a),
             "arrival must be >= 0");
      if (rows.size() >= kMaxRequests)
        fail(lineno, 1, "", "more than " + std::to_string(kMaxRequests) + " requests");
      rows.push_back(r);
    }
    // The number as given (in ms for arrival_ms), compactly: 1e+300, not its 301 digits.
    return Finish(std::move(rows), time_scale, name, field, [&](const Row& r) {
      nlohmann::json j = nlohmann::json::parse(LineAt(text, r.line), nullptr, false);
      return Written{
          1, Num(j.contains("arrival_s") ? j["arrival_s"].get<double>() : j["arrival_ms"].get<double>())};
    });
  }
  if (fmt != "csv") fail(1, 1, format, "format must be csv or jsonl");
  int c_arr = -1, c_prompt = -1, c_out = -1;
  size_t columns = 0;  // the header's
  double arr_unit = 1;
  bool azure = false;
  std::vector<int> cols;
  while (std::getline(in, line)) {
    ++lineno;
    if (Trim(line).empty()) continue;
    cols.clear();
    int unquoted = 0;
    std::vector<std::string> cells = SplitCsv(line, &cols, &unquoted);
    if (unquoted)
      fail(lineno, unquoted, config::Clip(line.ends_with('\r') ? line.substr(0, line.size() - 1) : line),
           "a cell's quotes do not open and close it: a quoted cell cannot hold a comma or a quote (the "
           "cells are column names and numbers)");
    if (c_arr < 0) {
      columns = cells.size();
      for (size_t i = 0; i < cells.size(); ++i) {
        const std::string& h = cells[i];
        int ii = static_cast<int>(i);
        // A name given twice, or two names for one quantity (arrival_s and arrival_ms,
        // prompt_tokens and ContextTokens, ...): the last one was used, silently.
        for (size_t k = 0; k < i; ++k) {
          if (h.empty() || (cells[k] != h && (Role(h) < 0 || Role(cells[k]) != Role(h)))) continue;
          fail(lineno, cols[i], config::Clip(h),
               cells[k] == h ? "column named twice (columns " + std::to_string(k + 1) + " and " +
                                   std::to_string(i + 1) + ")"
                             : "gives the same quantity as column " + std::to_string(k + 1) + " (" +
                                   config::Clip(cells[k]) + "): name one");
        }
        if (h == "arrival_s") c_arr = ii, arr_unit = 1;
        if (h == "arrival_ms") c_arr = ii, arr_unit = 1e-3;
        if (h == "TIMESTAMP") c_arr = ii, azure = true;
        if (h == "prompt_tokens" || h == "ContextTokens") c_prompt = ii;
        if (h == "output_tokens" || h == "GeneratedTokens") c_out = ii;
      }
      if (c_arr < 0 || c_prompt < 0 || c_out < 0)
        fail(lineno, 1, Trim(line),
             "header must name arrival_s (or arrival_ms), prompt_tokens, output_tokens, or the Azure "
             "TIMESTAMP,ContextTokens,GeneratedTokens");
      continue;
    }
    int need = std::max({c_arr, c_prompt, c_out});
    if (static_cast<int>(cells.size()) <= need)
      fail(lineno, 1, Trim(line),
           "has " + std::to_string(cells.size()) + " columns, the header " + std::to_string(need + 1));
    // More cells than the header names (a stray comma, a shifted row) were ignored, silently.
    if (cells.size() > columns)
      fail(lineno, cols[columns], config::Clip(Trim(line)),
           "has " + std::to_string(cells.size()) + " columns, the header " + std::to_string(columns) +
               " (column " + std::to_string(columns + 1) + " has no name)");
    Row r{0, 0, 0, lineno};
    double a;
    bool ok = azure ? ParseTimestamp(cells[c_arr], &a) : ParseDouble(cells[c_arr], &a);
    // A date-time that exists but is before the epoch was "a date-time ... that exists".
    if (ok && a < 0 && azure)
      fail(lineno, cols[c_arr], cells[c_arr],
           "TIMESTAMP is before 1970-01-01 00:00:00 UTC: date-times are read from then on");
    if (!ok || a < 0)
      fail(lineno, cols[c_arr], cells[c_arr],
           azure ? "TIMESTAMP must be a date-time YYYY-MM-DD HH:MM:SS[.fraction] (or with T; then Z or "
                   "+HH:MM) that exists, or seconds >= 0"
                 : "arrival must be a decimal number >= 0");
    r.arrival_s = a * (azure ? 1 : arr_unit);
    if (!ParseCount(cells[c_prompt], &r.prompt) || r.prompt == 0)
      fail(lineno, cols[c_prompt], cells[c_prompt],
           "prompt tokens must be an integer from 1 to 1000000000 (1e9)");
    if (!ParseCount(cells[c_out], &r.output))
      fail(lineno, cols[c_out], cells[c_out],
           "output tokens must be an integer from 0 to 1000000000 (1e9; 0 is served as 1)");
    if (rows.size() >= kMaxRequests)
      fail(lineno, 1, "", "more than " + std::to_string(kMaxRequests) + " requests");
    rows.push_back(r);
  }
  if (c_arr < 0) fail(1, 1, config::Clip(name), "empty trace: no header");
  // The cell as written (1e300, or the Azure date-time).
  return Finish(std::move(rows), time_scale, name, field, [&](const Row& r) {
    std::vector<int> at;
    std::string cell = SplitCsv(LineAt(text, r.line), &at)[c_arr];
    return Written{at[c_arr], cell};
  });
}

namespace {

uint32_t Draw(const config::LengthDist& d, std::mt19937_64& rng) {
  const std::string& kind = d.dist().empty() ? "fixed" : d.dist();
  double v = d.value();
  if (kind == "uniform") {
    std::uniform_int_distribution<uint32_t> u(d.min(), std::max(d.min(), d.max()));
    v = u(rng);
  } else if (kind == "lognormal") {
    std::lognormal_distribution<double> ln(d.mu(), d.sigma());
    v = std::round(ln(rng));
    v = std::max<double>(v, std::max<uint32_t>(1, d.min()));
    if (d.max() > 0) v = std::min<double>(v, d.max());
  }
  return static_cast<uint32_t>(std::clamp(v, 1.0, kMaxRequestTokens));  // fixed, uniform: validated below it
}

}  // namespace

std::vector<Request> Synthesize(const config::SyntheticRequests& s) {
  std::mt19937_64 rng(s.seed());
  std::exponential_distribution<double> gap(s.rate_per_s() > 0 ? s.rate_per_s() : 1);
  const bool fixed = s.arrivals() == "fixed";
  std::vector<Request> out;
  double t = 0;
  for (uint32_t i = 0; i < s.num_requests(); ++i) {
    if (i > 0) t += fixed ? 1.0 / s.rate_per_s() : gap(rng);
    Request r;
    r.id = i;
    if (!(t * 1e12 <= static_cast<double>(kMaxArrivalPs)))
      throw std::out_of_range("request " + std::to_string(i) + " arrives at " + std::to_string(t) +
                              " s, past the 30 days a served stream may span");
    r.arrival_ps = static_cast<Ps>(std::llround(t * 1e12));
    r.prompt_tokens = Draw(s.prompt_tokens(), rng);
    r.output_tokens = Draw(s.output_tokens(), rng);
    out.push_back(r);
  }
  return out;
}

void ValidateRequestSource(const config::RequestSource& r, const config::SourceMap& locs,
                           std::vector<Diag>* diags) {
  auto add = [&](const std::string& f, const std::string& value, const std::string& rule) {
    std::string path = "workload.requests." + f;
    diags->push_back(Diag{locs.Find(path), path, value, rule});
  };
  const bool synth = r.has_synthetic();
  if (synth == !r.trace_file().empty())
    add(synth ? "trace_file" : "synthetic", r.trace_file(), "set exactly one of trace_file and synthetic");
  if (synth && !r.format().empty())
    // It read nothing: a synthetic stream has no file (it was accepted and ignored, silently).
    add("format", r.format(),
        "format names a trace file's layout (csv or jsonl); a synthetic stream reads no file (remove it)");
  else if (!r.format().empty() && r.format() != "csv" && r.format() != "jsonl")
    add("format", r.format(), "must be csv or jsonl (or empty: by extension)");
  if (r.time_scale() < 0 || !std::isfinite(r.time_scale()) || r.time_scale() > kMaxTimeScale)
    add("time_scale", Num(r.time_scale()), "must be >= 0 and at most 1e6");
  else if (synth && r.time_scale() != 0)
    // It scaled nothing: synthetic arrivals come from rate_per_s alone.
    add("time_scale", Num(r.time_scale()),
        "time_scale applies to trace files; a synthetic stream's arrivals follow synthetic.rate_per_s "
        "(divide the rate instead)");
  for (const auto& [f, v] : {std::pair{"slo_ttft_ms", r.slo_ttft_ms()}, {"slo_tpot_ms", r.slo_tpot_ms()}}) {
    if (v < 0 || !std::isfinite(v)) add(f, Num(v), "must be a finite number >= 0 (0: no constraint)");
  }
  if (!synth) return;
  const auto& s = r.synthetic();
  if (s.num_requests() == 0) add("synthetic.num_requests", "0", "must be positive");
  if (s.num_requests() > kMaxRequests)
    add("synthetic.num_requests", std::to_string(s.num_requests()),
        "must be at most " + std::to_string(kMaxRequests) + " (each request is simulated)");
  if (!(s.rate_per_s() > 0) || !std::isfinite(s.rate_per_s())) {
    add("synthetic.rate_per_s", Num(s.rate_per_s()), "must be > 0 (requests per second)");
  } else if (s.num_requests() > 1 &&
             !((s.num_requests() - 1) / s.rate_per_s() <= static_cast<double>(kMaxArrivalPs) / 1e12)) {
    char v[32], span[32];
    std::snprintf(v, sizeof v, "%g", s.rate_per_s());
    std::snprintf(span, sizeof span, "%.3g", (s.num_requests() - 1) / s.rate_per_s());
    add("synthetic.rate_per_s", v,
        std::to_string(s.num_requests()) + " requests at this rate span " + span +
            " s, more than the 30 days (2592000 s) a served stream may span");
  }
  if (!s.arrivals().empty() && s.arrivals() != "poisson" && s.arrivals() != "fixed")
    add("synthetic.arrivals", s.arrivals(), "must be poisson or fixed");
  for (const char* which : {"prompt_tokens", "output_tokens"}) {
    const config::LengthDist& d =
        std::string(which) == "prompt_tokens" ? s.prompt_tokens() : s.output_tokens();
    std::string f = std::string("synthetic.") + which;
    const std::string& kind = d.dist().empty() ? "fixed" : d.dist();
    // A request's tokens are at most kMaxRequestTokens, as a trace's: a longer length was
    // drawn as 1e9, silently.
    const std::string most = " (a request's tokens are at most 1000000000, 1e9, as a trace's)";
    if (kind == "fixed") {
      if (d.value() == 0) add(f + ".value", "0", "dist fixed needs value >= 1");
      if (d.value() > kMaxRequestTokens)
        add(f + ".value", std::to_string(d.value()), "dist fixed needs value <= 1000000000" + most);
    } else if (kind == "uniform") {
      // At the field that is wrong (a min of 0 was reported at .max).
      if (d.min() == 0)
        add(f + ".min", "0", "dist uniform needs 1 <= min <= max");
      else if (d.max() < d.min())
        add(f + ".max", std::to_string(d.max()), "dist uniform needs 1 <= min <= max");
      else if (d.max() > kMaxRequestTokens)
        add(f + ".max", std::to_string(d.max()), "dist uniform needs max <= 1000000000" + most);
    } else if (kind == "lognormal") {
      // At the field that is wrong (a bad mu was reported at .sigma).
      if (!(d.sigma() >= 0))
        add(f + ".sigma", Num(d.sigma()), "dist lognormal needs sigma >= 0 and mu <= 20");
      if (!std::isfinite(d.mu()) || d.mu() > 20)
        add(f + ".mu", Num(d.mu()), "dist lognormal needs sigma >= 0 and mu <= 20");
      if (d.max() > 0 && d.max() < d.min())
        add(f + ".max", std::to_string(d.max()), "must be >= min");
      else if (d.max() > kMaxRequestTokens)
        add(f + ".max", std::to_string(d.max()), "must be <= 1000000000" + most);
      // The floor of every draw: above 1e9 (with max 0, no cap) each was drawn as 1e9, silently.
      if (d.min() > kMaxRequestTokens)
        add(f + ".min", std::to_string(d.min()), "dist lognormal needs min <= 1000000000" + most);
    } else {
      add(f + ".dist", d.dist(), "must be fixed, uniform or lognormal");
      continue;
    }
    // A field this dist does not read changed nothing (--set ...output_tokens.value=2000 on a
    // lognormal stream was accepted and ignored): refused, but for the file's fields where the
    // dist itself was switched on the command line (what it leaves behind there is not read).
    auto on_command_line = [&](const std::string& field) {
      return sim::SetOnCommandLine(locs, "workload.requests." + f + "." + field);
    };
    const bool dist_switched = on_command_line("dist");
    auto unread = [&](const char* field, bool set, const std::string& value, const std::string& rule) {
      if (set && (!dist_switched || on_command_line(field))) add(f + "." + field, value, rule);
    };
    const std::string dist = "dist " + kind + " does not read ";
    if (kind != "fixed")
      unread("value", d.value() != 0, std::to_string(d.value()),
             dist + "value (dist fixed does): set dist: \"fixed\" too, or remove it");
    if (kind == "fixed") {
      unread("min", d.min() != 0, std::to_string(d.min()),
             dist + "min (every length is value; dist uniform and lognormal read min and max): remove it");
      unread("max", d.max() != 0, std::to_string(d.max()),
             dist + "max (every length is value; dist uniform and lognormal read min and max): remove it");
    }
    if (kind != "lognormal") {
      unread("mu", d.mu() != 0, Num(d.mu()), dist + "mu (dist lognormal does): remove it");
      unread("sigma", d.sigma() != 0, Num(d.sigma()), dist + "sigma (dist lognormal does): remove it");
    }
  }
}

std::vector<std::string> UnreadTraceColumns(const config::RequestSource& r, const std::string& base_dir) {
  std::vector<std::string> out;
  if (r.trace_file().empty()) return out;
  const std::string path = config::JoinPath(base_dir, r.trace_file());
  const std::string fmt = !r.format().empty() ? r.format() : path.ends_with(".jsonl") ? "jsonl" : "csv";
  if (fmt != "csv") return out;
  std::ifstream in(path, std::ios::binary);
  std::string line;
  while (in && std::getline(in, line) && Trim(line).empty()) {
  }
  if (Trim(line).empty()) return out;
  if (line.starts_with("\xEF\xBB\xBF")) line = line.substr(3);
  for (const std::string& h : SplitCsv(line))
    if (!h.empty() && Role(h) < 0) out.push_back(config::Clip(h, 80));
  return out;
}

std::vector<Request> LoadRequests(const config::RequestSource& r, const std::string& base_dir,
                                  const config::SourceMap& locs) {
  std::vector<Diag> diags;
  ValidateRequestSource(r, locs, &diags);
  if (!diags.empty()) throw ConfigError(std::move(diags));
  std::vector<Request> reqs;
  if (r.has_synthetic()) {
    try {
      reqs = Synthesize(r.synthetic());
    } catch (const std::out_of_range& e) {
      const std::string f = "workload.requests.synthetic.rate_per_s";
      throw ConfigError(Diag{locs.Find(f), f, Num(r.synthetic().rate_per_s()), e.what()});
    }
  } else {
    const std::string field = "workload.requests.trace_file";
    std::string path = config::JoinPath(base_dir, r.trace_file());
    std::string text = config::ReadInputFile(path, locs.Find(field), field, config::kMaxTraceBytes);
    reqs = ParseTrace(text, path, r.format(), field, r.time_scale());
  }
  if (r.max_requests() > 0 && reqs.size() > r.max_requests()) reqs.resize(r.max_requests());
  if (reqs.empty()) {
    // A trace of a header and no rows: at the file (it was said at the experiment's stream).
    if (!r.has_synthetic())
      throw ConfigError(Diag{Location{config::JoinPath(base_dir, r.trace_file()), 1, 1},
                             "workload.requests.trace_file", r.trace_file(),
                             "no requests: the trace has no rows"});
    throw ConfigError(Diag{locs.Find("workload.requests"), "workload.requests", "", "no requests"});
  }
  return reqs;
}

}  // namespace tpsim::serving
