#pragma once
// `tpsim serve`: a request stream through the continuous-batching scheduler
// (sim/serving/scheduler.h), each iteration timed by an engine on its Program
// (mapping::LowerIteration), with per-request and summary metrics.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arch/chip.h"
#include "mapping/mapping.h"
#include "sim/engine.h"
#include "sim/experiment.h"
#include "sim/serving/scheduler.h"
#include "sim/serving/skeleton.h"

namespace tpsim::serving {

// KV capacity of a group of `stages` pipeline stages of mapping.tp cores, in tokens:
// per core, SRAM left after its weight shards (when the mapping keeps weights in SRAM; none on
// a GPU node, whose L2 is a cache)
// plus its share of DRAM (total channel capacity / cores) less the weights streamed
// from there, divided by the KV bytes one token takes on a core of the most loaded
// stage (2 x its layers x its KV heads x head_dim x dtype bytes).
uint64_t KvCapacityTokens(const arch::Chip& chip, const config::Model& model, const config::Mapping& m,
                          uint32_t stages, const std::string& dtype);

// Iteration cost from an engine: lowers `layers_simulated` layers of the iteration
// (mapping::LowerIteration) and scales the makespan by num_layers / layers_simulated. The
// memory plan (weights in SRAM or streamed, the KV cache beside them) is the one of the
// model's num_layers over the mapping's stages (LowerOptions::plan_layers), as KvCapacityTokens
// sizes the KV: the layers each stage really holds, not the simulated ones.
// Exact-key cache: an iteration with the same chunks (after rounding each context up
// to `bucket` tokens when bucket > 1) is timed once. With the analytical engine, an
// iteration the skeleton model covers (sim/serving/skeleton.h: KV in SRAM, no spills) is
// timed from its rows' skeleton instead of its own Program, to the same picosecond.
class EngineCost {
 public:
  EngineCost(const arch::Chip& chip, const config::Model& model, config::Mapping mapping,
             uint32_t layers_simulated, std::string dtype, std::string engine, uint32_t bucket);
  ~EngineCost();
  Ps operator()(const std::vector<llm::SeqChunk>& chunks);
  uint64_t timed() const { return timed_; }
  uint64_t calls() const { return calls_; }
  // Iterations timed from a skeleton, and skeleton Programs lowered (0 without one).
  uint64_t skeleton_hits() const;
  uint64_t skeletons() const;
  uint64_t skeleton_kv_dram() const;  // distinct iterations refused because the KV is in DRAM
  // Off: every distinct iteration lowers its own Program (the reference path).
  void set_use_skeletons(bool on) { use_skeletons_ = on; }
  // The longest context a sequence can reach (0: no bound): a context rounded up to the bucket
  // is not timed past it (a bucket of 4096 timed every context of a 1000-position model at 4096).
  void set_max_context(uint64_t tokens) { max_context_ = tokens; }
  // On: time every distinct iteration both ways and throw std::logic_error when a
  // skeleton's answer differs from the Program's (tests).
  void set_verify(bool on) { verify_ = on; }

 private:
  const arch::Chip& chip_;
  const config::Model& model_;
  config::Mapping mapping_;
  uint32_t layers_, bucket_;
  uint64_t max_context_ = 0;
  std::string dtype_;
  std::unique_ptr<sim::Engine> engine_;
  mapping::LowerOptions lower_;             // LowerIteration's: the model's layers planned
  std::unique_ptr<SkeletonCost> skeleton_;  // analytical engine only
  bool use_skeletons_ = true, verify_ = false;
  std::map<std::vector<llm::SeqChunk>, Ps> cache_;
  uint64_t timed_ = 0, calls_ = 0;
};

struct Metrics {
  uint32_t completed = 0, rejected = 0, total = 0;
  uint32_t too_long = 0;  // of the rejected: longer than the model's positions
  double ttft_ms[3] = {0, 0, 0}, tpot_ms[3] = {0, 0, 0}, latency_ms[3] = {0, 0, 0};  // p50, p90, p99
  double span_s = 0;  // first arrival to last finish
  double requests_per_s = 0, tokens_per_s = 0;
  uint64_t output_tokens = 0;
  uint32_t good = 0;  // completed within both SLOs
  double goodput_per_s = 0;
  uint32_t preemptions = 0;
  uint32_t tpot_samples = 0;  // completed requests with more than one output token (TPOT's samples)
};

// Percentile by nearest rank (ceil(p/100 * n)-th smallest); 0 for an empty vector.
double Percentile(std::vector<double> v, double p);

// slo_*_ms <= 0: no constraint.
Metrics Summarize(const ServeOutcome& out, double slo_ttft_ms, double slo_tpot_ms);

// The metrics a sweep stores per serving point, by column name, in column order:
// ttft/tpot p50 and p99 (ms), latency p99 (ms), requests/s, tokens/s, goodput/s,
// completed, rejected.
std::vector<std::pair<std::string, double>> MetricValues(const Metrics& m);
// MetricValues and the SLOs used, as a JSON object (`tpsim serve --metrics-json`).
std::string MetricsJson(const Metrics& m, double slo_ttft_ms, double slo_tpot_ms);

// One serving run: the request stream of `e` through continuous batching.
struct ServeRun {
  std::string mode, engine;
  uint32_t tp = 0, block_tokens = 0;
  struct Group {
    uint32_t stages = 0;
    uint64_t capacity_blocks = 0;
    uint64_t calls = 0, timed = 0;  // iterations, distinct iterations timed
    uint64_t skeletons = 0, skeleton_hits = 0, skeleton_kv_dram = 0;
    uint32_t layers = 0;  // layers an iteration is timed on (then scaled to the model's)
    // The tokens the group's memory holds (KvCapacityTokens), where mapping.serving.
    // kv_capacity_tokens asked for more (Caveats says so).
    std::optional<uint64_t> capacity_over;
  };
  std::vector<Group> groups;  // fused: one; disaggregated: prefill, decode
  ServeOutcome outcome;
  uint64_t zero_output_requests = 0;  // requests the trace gave 0 output tokens (served as 1)
};

// Validates `e` for serving (throws config::ConfigError with located diagnostics) and
// runs it with `engine` (empty: the experiment's engine, else analytical). Throws
// sim::StallError when an iteration's Program cannot progress. `tpsim serve` and
// serving sweeps (sim/sweep) call it.
// `on_iteration`, where given, is called after each iteration is timed with the count so far
// (tpsim serve's progress line).
ServeRun Serve(const sim::Experiment& e, const std::string& engine = "",
               const std::function<void(uint64_t iterations)>& on_iteration = {});

// Bytes a served request takes (its record, its outcome, its CSV row): 226 B measured as the
// growth of peak RSS from 1,000 to 8,000 requests of serving-fused, doubled.
inline constexpr double kBytesPerRequest = 512;
// Throws config::ConfigError at workload.requests.synthetic.num_requests when `e`'s synthetic
// requests would take more than `max_memory` bytes (0: no limit) to serve: `tpsim serve
// --max-memory`, and the points and candidates sweeps and searches run in their own process.
void CheckRequestMemory(const sim::Experiment& e, uint64_t max_memory);

// The modelling simplifications that apply to `run` of `cfg`, one sentence each, as
// `tpsim serve` prints them ("caveat: ...").
std::vector<std::string> Caveats(const config::Experiment& cfg, const ServeRun& run);

// CSV writers: one row per request; one row per iteration.
std::string RequestsCsv(const ServeOutcome& out);
std::string KvCsv(const ServeOutcome& out);
std::string SummaryText(const Metrics& m, double slo_ttft_ms, double slo_tpot_ms);

}  // namespace tpsim::serving
