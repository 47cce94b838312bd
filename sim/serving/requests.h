#pragma once
// Request streams for serving: trace files (CSV, JSONL, the Azure LLM inference
// trace layout) and a seeded synthetic generator. Deterministic: the same config
// gives the same requests, in arrival order (ties by trace order).

#include <cstdint>
#include <string>
#include <vector>

#include "configs/load.h"
#include "serving.pb.h"

namespace tpsim::serving {

using Ps = int64_t;  // picoseconds

// Limits that keep every time of a served stream representable in int64
// picoseconds (about 106 days) with room for the service after the last arrival,
// and its memory bounded.
inline constexpr Ps kMaxArrivalPs = Ps{30} * 86400 * 1000000000000;  // 30 days
inline constexpr uint32_t kMaxRequests = 10000000;
inline constexpr double kMaxTimeScale = 1e6;
// The most tokens of a request's prompt or output (a trace's cells, a synthetic stream's lengths).
inline constexpr double kMaxRequestTokens = 1e9;

struct Request {
  uint32_t id = 0;  // 0-based, in arrival order
  Ps arrival_ps = 0;
  uint32_t prompt_tokens = 0;
  uint32_t output_tokens = 0;  // tokens generated, the first one by the prefill; >= 1
  bool zero_output = false;    // the trace asked for 0 output tokens (served as 1: Caveats says so)
  int trace_line = 0;          // the trace file's line that gave it (0: a synthetic request)
};

// Parses a trace (see serving.proto RequestSource for the formats). `format` is "csv",
// "jsonl" or "" (by `display_name`'s extension). Arrivals are relative to the earliest
// one and scaled by `time_scale` (<= 0 means 1); requests with 0 output tokens get 1.
// An arrival past kMaxArrivalPs, or more than kMaxRequests rows, is a ConfigError.
// Bad rows are config::ConfigError at display_name:line:col, field `field`.
std::vector<Request> ParseTrace(const std::string& text, const std::string& display_name,
                                const std::string& format,
                                const std::string& field = "workload.requests.trace_file",
                                double time_scale = 1);

// The header cells of a CSV trace that name none of the columns ParseTrace reads (arrival_s,
// arrival_ms, prompt_tokens, output_tokens, TIMESTAMP, ContextTokens, GeneratedTokens), for a
// warning: they were ignored silently. Empty for JSONL or a trace that cannot be read.
std::vector<std::string> UnreadTraceColumns(const config::RequestSource& r, const std::string& base_dir);

// Draws `s.num_requests` requests with std::mt19937_64 seeded by s.seed. Throws
// std::out_of_range when an arrival falls past kMaxArrivalPs.
std::vector<Request> Synthesize(const config::SyntheticRequests& s);

// Second-stage checks of a RequestSource (fields under "workload.requests.").
void ValidateRequestSource(const config::RequestSource& r, const config::SourceMap& locs,
                           std::vector<config::Diag>* diags);

// The source's requests: the trace (path relative to `base_dir`) or the generator,
// cut to max_requests. Throws config::ConfigError.
std::vector<Request> LoadRequests(const config::RequestSource& r, const std::string& base_dir,
                                  const config::SourceMap& locs);

}  // namespace tpsim::serving
