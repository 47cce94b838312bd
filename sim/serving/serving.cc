#include "sim/serving/serving.h"

#include <nlohmann/json.hpp>

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>

#include "arch/chip.h"
#include "configs/files.h"
#include "llm/model.h"
#include "mapping/estimate.h"
#include "mapping/mapping.h"
#include "sim/run.h"

namespace tpsim::serving {

using config::ConfigError;
using config::Diag;
using config::Location;

uint64_t KvCapacityTokens(const arch::Chip& chip, const config::Model& model, const config::Mapping& m,
                          uint32_t stages, const std::string& dtype) {
  config::Mapping gm = m;
  gm.set_pipeline_stages(stages);
  mapping::WeightPlan plan = mapping::PlanWeights(chip, model, gm, 0, dtype);
  const uint64_t d = sim::DtypeBytes(dtype);
  uint64_t dram = 0;
  for (const auto& ch : chip.channels()) dram += ch.capacity_bytes;
  const uint64_t dram_per_core = chip.num_cores() > 0 ? dram / chip.num_cores() : 0;
  // A GPU node keeps the KV cache in HBM: its "SRAM" (core.sram_bytes, the L2's size) is a
  // cache, not room for KV (before 2026-12-07 it counted: 50 MiB a GPU on h100-sxm-8).
  const uint64_t sram = chip.config().has_gpu() ? 0 : chip.config().core().sram_bytes();
  uint64_t free_sram = sram, free_dram = dram_per_core;
  if (plan.weights_in_sram) {
    free_sram = sram > plan.weight_bytes_per_core ? sram - plan.weight_bytes_per_core : 0;
  } else {
    free_dram = dram_per_core > plan.weight_bytes_per_core ? dram_per_core - plan.weight_bytes_per_core : 0;
  }
  const uint64_t per_token = 2ull * plan.layers_per_core * plan.kv_heads_per_core * model.head_dim() * d;
  return per_token ? (free_sram + free_dram) / per_token : 0;
}

EngineCost::EngineCost(const arch::Chip& chip, const config::Model& model, config::Mapping mapping,
                       uint32_t layers_simulated, std::string dtype, std::string engine, uint32_t bucket)
    : chip_(chip),
      model_(model),
      mapping_(std::move(mapping)),
      layers_(std::max<uint32_t>(1, layers_simulated)),
      bucket_(bucket),
      dtype_(std::move(dtype)),
      engine_(sim::MakeEngine(engine)) {
  if (!engine_) throw std::invalid_argument("serving: unknown engine " + engine);
  // The memory plan is the whole model's: each stage holds all of its layers' weights and KV
  // cache, though only layers_simulated of them are lowered and the makespan scaled.
  lower_.plan_layers = model_.num_layers();
  // The skeletons replay exactly this engine's schedule of a dense layer; an MoE model's
  // iterations (tokens routed per iteration) each lower their own Program.
  if (engine_->ListSchedule() && model_.num_experts() == 0) {
    try {
      skeleton_ =
          std::make_unique<SkeletonCost>(chip_, model_, mapping_, layers_, dtype_, model_.num_layers());
    } catch (const std::exception&) {
      skeleton_.reset();  // no memory plan: every iteration lowers its own Program
    }
  }
}

EngineCost::~EngineCost() = default;

uint64_t EngineCost::skeleton_hits() const { return skeleton_ ? skeleton_->hits() : 0; }
uint64_t EngineCost::skeletons() const { return skeleton_ ? skeleton_->skeletons() : 0; }
uint64_t EngineCost::skeleton_kv_dram() const { return skeleton_ ? skeleton_->kv_dram() : 0; }

Ps EngineCost::operator()(const std::vector<llm::SeqChunk>& chunks) {
  ++calls_;
  std::vector<llm::SeqChunk> key = chunks;
  if (bucket_ > 1)
    for (auto& c : key) {
      uint64_t up = (uint64_t{c.cached} + bucket_ - 1) / bucket_ * bucket_;
      if (max_context_ > uint64_t{c.new_tokens} + c.cached) up = std::min(up, max_context_ - c.new_tokens);
      c.cached = static_cast<uint32_t>(std::max<uint64_t>(up, c.cached));
    }
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  Ps makespan = skeleton_ && use_skeletons_ ? skeleton_->Makespan(key) : -1;
  if (makespan < 0 || verify_) {
    mapping::Program p = mapping::LowerIteration(chip_, model_, mapping_, key, layers_, dtype_, lower_);
    const Ps full = engine_->Makespan(p, chip_);
    if (makespan >= 0 && makespan != full) {
      std::string chunks_text;
      for (const llm::SeqChunk& c : key)
        chunks_text += " {" + std::to_string(c.new_tokens) + "," + std::to_string(c.cached) + "}";
      throw std::logic_error("serving: skeleton makespan " + std::to_string(makespan) + " ps != Program's " +
                             std::to_string(full) + " ps for chunks" + chunks_text);
    }
    makespan = full;
  }
  ++timed_;
  constexpr Ps kMaxPs = std::numeric_limits<Ps>::max();
  if (makespan >= kMaxPs) {
    // Past the clock: the iteration's Program names the task that passes it.
    const mapping::Program p = mapping::LowerIteration(chip_, model_, mapping_, key, layers_, dtype_, lower_);
    sim::CheckRepresentable(p, chip_, engine_->Run(p, chip_));
  }
  const __int128 all = static_cast<__int128>(makespan) * model_.num_layers() / layers_;
  if (makespan >= kMaxPs || all >= kMaxPs) {
    throw sim::TimeOverflowError("an iteration of " + std::to_string(key.size()) +
                                 (key.size() == 1 ? " sequence" : " sequences") + " takes " +
                                 sim::DaysText(static_cast<double>(makespan) * 1e-12) + " for its " +
                                 std::to_string(layers_) + " simulated layers: over the model's " +
                                 std::to_string(model_.num_layers()) + " layers longer than " +
                                 sim::kClockLimit + "; check the chip's bandwidths and compute");
  }
  Ps t = static_cast<Ps>(all);
  cache_.emplace(std::move(key), t);
  return t;
}

namespace {

// KV of `tokens` tokens (all layers) from the prefill group's cores [0, np) to the
// decode group's [np, np + nd): core i sends an equal share to core np + i % nd, all
// in one step, so transfers that share a link share its bandwidth.
Ps TransferTime(const arch::Chip& chip, sim::Engine& engine, int np, int nd, uint64_t kv_bytes) {
  mapping::ProgramBuilder b(chip.num_cores(), static_cast<int>(chip.channels().size()));
  mapping::Program& p = b.program();
  mapping::OpInfo op;
  op.ref.phase = mapping::Phase::kKvTransfer;
  op.ref.op = "kv_transfer";
  p.ops.push_back(op);
  mapping::CollectiveInfo ci;
  ci.kind = mapping::CollectiveKind::kP2p;
  ci.algorithm = mapping::AlgorithmOf("direct");
  ci.bytes = kv_bytes;
  ci.ranks = np + nd;
  p.collectives.push_back(ci);
  for (int i = 0; i < np; ++i) {
    mapping::Task t;
    t.kind = mapping::TaskKind::kTransfer;
    t.core = mapping::CoreId(i);
    t.dst_core = mapping::CoreId(np + i % nd);
    t.bytes = kv_bytes / np + (static_cast<uint64_t>(i) < kv_bytes % np ? 1 : 0);
    t.collective = 0;
    b.Add(t);
  }
  const mapping::Program built = b.Build();
  const Ps makespan = engine.Makespan(built, chip);
  // A transfer past the clock: named (the engine's times say which), not summed.
  if (makespan >= std::numeric_limits<Ps>::max())
    sim::CheckRepresentable(built, chip, engine.Run(built, chip));
  return makespan;
}

std::string Ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms);
  return buf;
}

double ToMs(Ps ps) { return static_cast<double>(ps) / 1e9; }

}  // namespace

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

Metrics Summarize(const ServeOutcome& out, double slo_ttft_ms, double slo_tpot_ms) {
  Metrics m;
  std::vector<double> ttft, tpot, lat;
  Ps t0 = -1, t1 = 0;
  for (const RequestStats& r : out.requests) {
    m.total++;
    m.preemptions += r.preemptions;
    if (t0 < 0 || r.arrival_ps < t0) t0 = r.arrival_ps;
    if (r.rejected || r.finish_ps < 0) {
      m.rejected += r.rejected ? 1 : 0;
      m.too_long += r.too_long ? 1 : 0;
      continue;
    }
    // A time that went backwards can only come from arithmetic that overflowed:
    // say so instead of reporting it (or counting it as good).
    if (r.first_token_ps < r.arrival_ps || r.finish_ps < r.first_token_ps) {
      throw std::runtime_error(
          "request " + std::to_string(r.id) + " has times that cannot be represented (arrival " +
          std::to_string(r.arrival_ps) + " ps, first token " + std::to_string(r.first_token_ps) +
          " ps, finish " + std::to_string(r.finish_ps) + " ps): a duration overflowed");
    }
    m.completed++;
    m.output_tokens += r.output_tokens;
    t1 = std::max(t1, r.finish_ps);
    double a = ToMs(r.first_token_ps - r.arrival_ps), l = ToMs(r.finish_ps - r.arrival_ps);
    ttft.push_back(a);
    lat.push_back(l);
    double tp = 0;
    if (r.output_tokens > 1) {
      tp = ToMs(r.finish_ps - r.first_token_ps) / (r.output_tokens - 1);
      tpot.push_back(tp);
    }
    if ((slo_ttft_ms <= 0 || a <= slo_ttft_ms) && (slo_tpot_ms <= 0 || tp <= slo_tpot_ms)) m.good++;
  }
  m.tpot_samples = static_cast<uint32_t>(tpot.size());
  const double ps[3] = {50, 90, 99};
  for (int i = 0; i < 3; ++i) {
    m.ttft_ms[i] = Percentile(ttft, ps[i]);
    m.tpot_ms[i] = Percentile(tpot, ps[i]);
    m.latency_ms[i] = Percentile(lat, ps[i]);
  }
  m.span_s = t0 >= 0 && t1 > t0 ? static_cast<double>(t1 - t0) / 1e12 : 0;
  if (m.span_s > 0) {
    m.requests_per_s = m.completed / m.span_s;
    m.tokens_per_s = static_cast<double>(m.output_tokens) / m.span_s;
    m.goodput_per_s = m.good / m.span_s;
  }
  return m;
}

std::string RequestsCsv(const ServeOutcome& out) {
  std::ostringstream s;
  s << "id,arrival_ms,prompt_tokens,output_tokens,first_token_ms,finish_ms,ttft_ms,mean_tpot_ms,latency_ms,"
       "preemptions,status\n";
  for (const RequestStats& r : out.requests) {
    s << r.id << ',' << Ms(ToMs(r.arrival_ps)) << ',' << r.prompt_tokens << ',' << r.output_tokens << ',';
    if (r.rejected || r.finish_ps < 0) {
      s << ",,,,," << r.preemptions << ",rejected\n";
      continue;
    }
    // A request of one output token has no time per output token: empty, as the summary's "-"
    // and the metrics' null (it printed 0.000).
    const std::string tpot =
        r.output_tokens > 1 ? Ms(ToMs(r.finish_ps - r.first_token_ps) / (r.output_tokens - 1)) : "";
    s << Ms(ToMs(r.first_token_ps)) << ',' << Ms(ToMs(r.finish_ps)) << ','
      << Ms(ToMs(r.first_token_ps - r.arrival_ps)) << ',' << tpot << ','
      << Ms(ToMs(r.finish_ps - r.arrival_ps)) << ',' << r.preemptions << ",ok\n";
  }
  return s.str();
}

std::string KvCsv(const ServeOutcome& out) {
  std::ostringstream s;
  s << "group,time_ms,kv_blocks_used,kv_blocks_capacity,running,waiting,iteration_tokens\n";
  for (const KvSample& k : out.kv) {
    uint64_t cap = k.group == "prefill" ? out.prefill_capacity_blocks : out.capacity_blocks;
    s << k.group << ',' << Ms(ToMs(k.time_ps)) << ',' << k.used_blocks << ',' << cap << ',' << k.running
      << ',' << k.waiting << ',' << k.tokens << '\n';
  }
  return s.str();
}

std::string SummaryText(const Metrics& m, double slo_ttft_ms, double slo_tpot_ms) {
  std::ostringstream s;
  char buf[256];
  s << "requests: " << m.total << " (" << m.completed << " completed, " << m.rejected
    << " rejected: KV larger than capacity";
  if (m.too_long > 0) s << " or, " << m.too_long << " of them, longer than the model's positions";
  s << "), preemptions " << m.preemptions << "\n";
  s << "              p50        p90        p99   (ms)\n";
  // A row without samples (no request completed; for TPOT, none with a second token) has no
  // percentiles: "-" (MetricValues: NaN).
  auto row = [&](const char* name, const double* v, uint32_t samples) {
    if (samples == 0)
      std::snprintf(buf, sizeof buf, "%-8s %10s %10s %10s\n", name, "-", "-", "-");
    else
      std::snprintf(buf, sizeof buf, "%-8s %10.3f %10.3f %10.3f\n", name, v[0], v[1], v[2]);
    s << buf;
  };
  row("TTFT", m.ttft_ms, m.completed);
  row("TPOT", m.tpot_ms, m.tpot_samples);
  row("latency", m.latency_ms, m.completed);
  s << "throughput: " << config::DecimalsOrDigits(m.requests_per_s, 3) << " requests/s, "
    << config::DecimalsOrDigits(m.tokens_per_s, 1) << " output tokens/s over "
    << config::DecimalsOrDigits(m.span_s, 3) << " s\n";
  // An SLO as given (1e-300 ms printed as 0.000).
  auto slo_ms = [](double ms) { return config::DecimalsOrDigits(ms, 3); };
  std::string slo;
  if (slo_ttft_ms > 0) slo += "TTFT <= " + slo_ms(slo_ttft_ms) + " ms";
  if (slo_tpot_ms > 0) slo += std::string(slo.empty() ? "" : ", ") + "TPOT <= " + slo_ms(slo_tpot_ms) + " ms";
  if (slo.empty()) slo = "no SLO given";
  s << "goodput (" << slo << "): " << config::DecimalsOrDigits(m.goodput_per_s, 3) << " requests/s ("
    << m.good << " of " << m.total << " requests)\n";
  return s.str();
}

std::vector<std::pair<std::string, double>> MetricValues(const Metrics& m) {
  // A percentile without samples is NaN: null in --metrics-json, NULL in a sweep's store (it
  // was 0, which a TPOT search or plot ranked as the best).
  auto pct = [](double v, uint32_t samples) { return samples == 0 ? std::nan("") : v; };
  return {{"ttft_p50_ms", pct(m.ttft_ms[0], m.completed)},
          {"ttft_p99_ms", pct(m.ttft_ms[2], m.completed)},
          {"tpot_p50_ms", pct(m.tpot_ms[0], m.tpot_samples)},
          {"tpot_p99_ms", pct(m.tpot_ms[2], m.tpot_samples)},
          {"latency_p99_ms", pct(m.latency_ms[2], m.completed)},
          {"requests_per_s", m.requests_per_s},
          {"tokens_per_s", m.tokens_per_s},
          {"goodput_per_s", m.goodput_per_s},
          {"completed", static_cast<double>(m.completed)},
          {"rejected", static_cast<double>(m.rejected)}};
}

std::string MetricsJson(const Metrics& m, double slo_ttft_ms, double slo_tpot_ms) {
  nlohmann::ordered_json j;
  for (const auto& [k, v] : MetricValues(m)) j[k] = v;
  j["slo_ttft_ms"] = slo_ttft_ms;
  j["slo_tpot_ms"] = slo_tpot_ms;
  return j.dump(2) + "\n";
}

namespace {

// Iteration contexts are rounded up to a multiple of this many tokens at most (a
// larger bucket would only wrap the 32-bit context lengths).
constexpr uint32_t kMaxContextBucketTokens = 1u << 24;

struct Group {
  uint32_t stages = 1;
  config::Mapping mapping;
  uint64_t capacity_tokens = 0;
  std::optional<uint64_t> capacity_over;  // ServeRun::Group's
};

}  // namespace

std::vector<std::string> Caveats(const config::Experiment& cfg, const ServeRun& run) {
  std::vector<std::string> out;
  const config::Serving& sv = cfg.mapping().serving();
  auto group_name = [&](size_t i) {
    return std::string(run.groups.size() == 1 ? "the" : i == 0 ? "the prefill" : "the decode");
  };
  // Each group with more than one stage (before, only the first such group was said: a
  // disaggregated decode group of 8 stages went unmentioned).
  for (size_t i = 0; i < run.groups.size(); ++i)
    if (run.groups[i].stages > 1)
      out.push_back(group_name(i) + " group's iterations are not pipelined across its " +
                    std::to_string(run.groups[i].stages) +
                    " stages (one iteration passes every stage before the next starts): throughput is "
                    "understated, latency per iteration is not");
  if (run.groups.size() == 2)
    out.push_back(
        "the prefill and decode groups do not contend for links or DRAM in the timing; KV transfers "
        "between them are serialised on one FIFO resource");
  // Layers timed per group: mapping.serving.layers_simulated, else one per stage. Before, said only when
  // layers_simulated was set, though one layer per stage (16 of 36 for serving-fused) is scaled just the
  // same.
  const uint32_t num_layers = cfg.model().num_layers();
  auto layers_of = [&](size_t i) { return run.groups[i].layers; };
  const std::string why = sv.layers_simulated()
                              ? " (mapping.serving.layers_simulated)"
                              : " (one per stage; mapping.serving.layers_simulated sets it)";
  bool same = true;
  for (size_t i = 1; i < run.groups.size(); ++i) same = same && layers_of(i) == layers_of(0);
  for (size_t i = 0; i < run.groups.size(); ++i) {
    const uint32_t layers = layers_of(i);
    if (layers == 0 || layers >= num_layers) continue;
    out.push_back((same ? std::string("iterations are") : group_name(i) + " group's iterations are") +
                  " timed on " + std::to_string(layers) + " of " + std::to_string(num_layers) +
                  " layers and scaled" + why);
    if (same) break;
  }
  for (size_t i = 0; i < run.groups.size(); ++i)
    if (run.groups[i].capacity_over)
      out.push_back(
          group_name(i) + " group's KV capacity is mapping.serving.kv_capacity_tokens (" +
          std::to_string(sv.kv_capacity_tokens()) + " tokens), more than the " +
          std::to_string(*run.groups[i].capacity_over) +
          " its memory holds beside the weights: requests are admitted to KV the chip has no room for");
  if (sv.context_bucket_tokens() > 1)
    out.push_back("contexts are rounded up to " + std::to_string(sv.context_bucket_tokens()) +
                  " tokens for the timing key (mapping.serving.context_bucket_tokens): iteration times are "
                  "approximate");
  if (run.zero_output_requests > 0)
    out.push_back(
        std::to_string(run.zero_output_requests) +
        " requests of the trace ask for 0 output tokens: each is served as 1 (the prefill makes the "
        "first token), which the throughput counts");
  return out;
}

void CheckRequestMemory(const sim::Experiment& e, uint64_t max_memory) {
  const config::RequestSource& r = e.cfg.workload().requests();
  if (max_memory == 0) return;
  auto need_for = [](double n) { return n * kBytesPerRequest + mapping::ProgramEstimate::kBaseBytes; };
  auto limit = [&] { return mapping::FormatBytes(static_cast<double>(max_memory)); };
  if (!r.has_synthetic() && !r.trace_file().empty()) {
    // A trace's requests are its rows: at least its lines with text, less a CSV's header (and at
    // most workload.requests.max_requests). 2,000,000 rows were served at 662 MB under a
    // --max-memory of 100M: the guard looked at synthetic streams only. A file that cannot be
    // read is left to LoadRequests, which says why.
    const std::string field = "workload.requests.trace_file";
    std::FILE* f = std::fopen(config::JoinPath(config::DirName(e.path), r.trace_file()).c_str(), "rb");
    if (!f) return;
    uint64_t lines = 0;
    bool text_on_line = false;
    std::vector<char> buf(1 << 16);  // streamed: the guard must not hold the file it guards against
    for (size_t got; (got = std::fread(buf.data(), 1, buf.size(), f)) > 0;) {
      for (size_t i = 0; i < got; ++i) {
        const char c = buf[i];
        if (c == '\n') {
          lines += text_on_line;
          text_on_line = false;
        } else if (c != ' ' && c != '\t' && c != '\r') {
          text_on_line = true;
        }
      }
    }
    lines += text_on_line;
    std::fclose(f);
    uint64_t n = lines > 0 ? lines - 1 : 0;
    if (r.max_requests() > 0) n = std::min<uint64_t>(n, r.max_requests());
    if (n <= kMaxRequests && need_for(static_cast<double>(n)) > static_cast<double>(max_memory)) {
      throw config::ConfigError(
          config::Diag{e.locs.Find(field), field, r.trace_file(),
                       "its " + std::to_string(n) + " or more requests take about " +
                           mapping::FormatBytes(need_for(static_cast<double>(n))) + " to serve (" +
                           mapping::FormatBytes(mapping::ProgramEstimate::kBaseBytes) +
                           " for the process and " + mapping::FormatBytes(kBytesPerRequest * 1e6) +
                           " per million requests), more than --max-memory " + limit() +
                           ": serve fewer (workload.requests.max_requests), or raise --max-memory"});
    }
    return;
  }
  if (!r.has_synthetic()) return;
  const uint32_t n = r.synthetic().num_requests();
  const double need = need_for(n);
  // Beyond kMaxRequests, LoadRequests refuses the count itself.
  if (n <= kMaxRequests && need > static_cast<double>(max_memory)) {
    const std::string field = "workload.requests.synthetic.num_requests";
    throw config::ConfigError(config::Diag{
        e.locs.Find(field), field, std::to_string(n),
        "serving them takes about " + mapping::FormatBytes(need) + " (" +
            mapping::FormatBytes(mapping::ProgramEstimate::kBaseBytes) + " for the process and " +
            mapping::FormatBytes(kBytesPerRequest * 1e6) + " per million requests), more than --max-memory " +
            limit() + ": serve fewer requests, or raise --max-memory"});
  }
}

ServeRun Serve(const sim::Experiment& e, const std::string& engine_flag,
               const std::function<void(uint64_t iterations)>& on_iteration) {
#ifdef __GLIBC__
  // Every iteration that is lowered builds and frees a Program of up to tens of MB; keep
  // freed memory in the heap instead of returning it to the kernel (munmap, then page
  // faults on the next Program: a fifth of the run time of 100 requests at 1 req/s).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  const config::Experiment& cfg = e.cfg;
  std::vector<Diag> diags;
  config::CheckIntegerRanges(cfg, e.locs, "", &diags);
  if (!diags.empty()) throw ConfigError(std::move(diags));
  sim::CheckPlacementFile(e);
  arch::ValidateChip(cfg.chip(), e.locs, "chip", &diags);
  llm::ValidateModel(cfg.model(), e.locs, "model", &diags);
  auto add = [&](const std::string& f, const std::string& v, const std::string& rule) {
    diags.push_back(Diag{e.locs.Find(f), f, v, rule});
  };
  const config::Workload& wl = cfg.workload();
  if (!wl.has_requests())
    add("workload.requests", "", "tpsim serve needs a request stream (workload.requests)");
  if (sim::DtypeBytes(wl.dtype()) == 0) add("workload.dtype", wl.dtype(), "must be bf16, fp16 or fp32");
  std::string engine = !engine_flag.empty()   ? engine_flag
                       : cfg.engine().empty() ? "analytical"
                                              : cfg.engine();
  if (!sim::MakeEngine(engine)) {
    diags.push_back(sim::UnknownEngineDiag(engine_flag.empty() ? e.locs.Find("engine") : config::kCommandLine,
                                           engine_flag.empty() ? "engine" : "--engine", engine));
  }
  const config::Serving& sv = cfg.mapping().serving();
  const std::string mode = sv.mode().empty() ? "fused" : sv.mode();
  if (mode != "fused" && mode != "disaggregated")
    add("mapping.serving.mode", sv.mode(), "must be fused or disaggregated");
  // The scheduler batches requests into one TP group per stage; attention replicas (each on
  // whole sequences of a fixed batch) are a `tpsim run` layout.
  if (cfg.mapping().attention_dp() > 1)
    add("mapping.attention_dp", std::to_string(cfg.mapping().attention_dp()),
        "tpsim serve runs one TP group per stage: attention replicas are not served (1 or unset; tpsim run "
        "runs them)");
  if (mode == "disaggregated") {
    if (sv.prefill_stages() == 0) add("mapping.serving.prefill_stages", "0", "disaggregated needs >= 1");
    if (sv.decode_stages() == 0) add("mapping.serving.decode_stages", "0", "disaggregated needs >= 1");
    // The groups' stages are the serving block's; mapping.pipeline_stages sized nothing (--set
    // mapping.pipeline_stages=8 on serving-disaggregated changed nothing). Said where a --set gave
    // it: the shipped file keeps one, marked unused, and tpsim search's --stages sets it beside
    // the groups' stages.
    if (sim::SetBySet(e, "mapping.pipeline_stages"))
      add("mapping.pipeline_stages", std::to_string(cfg.mapping().pipeline_stages()),
          "mode disaggregated does not read it (its groups are mapping.serving.prefill_stages and "
          "decode_stages x mapping.tp cores): set those");
  } else if (mode == "fused") {
    // They sized nothing: the fused group is mapping.pipeline_stages x mapping.tp cores (--set
    // mapping.serving.prefill_stages=3 on serving-fused was accepted and changed nothing).
    for (const auto& [f, v] : {std::pair{"mapping.serving.prefill_stages", sv.prefill_stages()},
                               {"mapping.serving.decode_stages", sv.decode_stages()}})
      if (v != 0)
        add(f, std::to_string(v),
            "mode fused does not read it (its one group is mapping.pipeline_stages x mapping.tp cores): "
            "remove it, or set mapping.serving.mode: \"disaggregated\"");
  }
  if (sv.chunk_tokens() > 0 && sv.max_tokens_per_iteration() > 0 &&
      sv.chunk_tokens() > sv.max_tokens_per_iteration()) {
    // At the one a --set (or sweep point) gave, with the other's value (it was said at
    // chunk_tokens without the other, for --set max_tokens_per_iteration=1).
    const std::string chunk = "mapping.serving.chunk_tokens",
                      most = "mapping.serving.max_tokens_per_iteration";
    if (e.locs.Find(most).file.starts_with("<") && !e.locs.Find(chunk).file.starts_with("<"))
      add(most, std::to_string(sv.max_tokens_per_iteration()),
          "must be >= chunk_tokens (" + std::to_string(sv.chunk_tokens()) + ")");
    else
      add(chunk, std::to_string(sv.chunk_tokens()),
          "must be <= max_tokens_per_iteration (" + std::to_string(sv.max_tokens_per_iteration()) + ")");
  }
  if (sv.context_bucket_tokens() > kMaxContextBucketTokens)
    add("mapping.serving.context_bucket_tokens", std::to_string(sv.context_bucket_tokens()),
        "must be at most " + std::to_string(kMaxContextBucketTokens) + " tokens");
  if (wl.has_requests()) {
    ValidateRequestSource(wl.requests(), e.locs, &diags);
    // The fixed-batch fields of `tpsim run` mean nothing to a request stream: each request
    // brings its own prompt and output, the scheduler makes the batch. They were ignored
    // (--set workload.cached_prefix=4000 changed nothing): refused where the stream is the
    // experiment's own or the field was given on the command line. A `tpsim run` experiment
    // served with a stream given by --set (README "Chunked prefill of a long prompt") keeps
    // its file's fields for `tpsim run`.
    const Location stream = e.locs.Find("workload.requests"), section = e.locs.Find("workload");
    const bool stream_in_file =
        stream.file != section.file || stream.line != section.line || stream.col != section.col;
    const std::string per_request =
        " (a trace's prompt_tokens and output_tokens columns, or workload.requests.synthetic."
        "prompt_tokens and output_tokens)";
    auto refuse = [&](const std::string& f, uint32_t v, uint32_t unset, const std::string& rule) {
      if (v != unset && (stream_in_file || sim::SetOnCommandLine(e, f))) add(f, std::to_string(v), rule);
    };
    refuse("workload.num_layers", wl.num_layers(), 0,
           "tpsim serve does not read it: set mapping.serving.layers_simulated for the layers an iteration "
           "is timed on");
    // batch 1, which the search's serving candidates carry (sim/search/space.cc), changes nothing.
    refuse("workload.batch", wl.batch() > 1 ? wl.batch() : 0, 0,
           "tpsim serve does not read it: the scheduler batches the requests it admits (at most "
           "mapping.serving.max_running_requests at a time)");
    refuse("workload.seq_len", wl.seq_len(), 0,
           "tpsim serve does not read it: each request's prompt tokens are its own" + per_request);
    refuse("workload.cached_prefix", wl.cached_prefix(), 0,
           "tpsim serve does not read it (no prefix cache: a request's whole prompt is prefilled): each "
           "request's prompt tokens are its own" +
               per_request);
    refuse("workload.decode_steps", wl.decode_steps(), 0,
           "tpsim serve does not read it: each request's output tokens are its own" + per_request);
  }
  if (!diags.empty()) throw ConfigError(std::move(diags));

  arch::Chip chip = arch::Chip::Build(cfg.chip(), e.locs);
  const uint32_t tp = cfg.mapping().tp();
  std::vector<Group> groups;
  if (mode == "fused") {
    groups.push_back(
        {std::max<uint32_t>(1, cfg.mapping().pipeline_stages()), cfg.mapping(), 0, std::nullopt});
  } else {
    groups.push_back({sv.prefill_stages(), cfg.mapping(), 0, std::nullopt});
    groups.push_back({sv.decode_stages(), cfg.mapping(), 0, std::nullopt});
    // In 64 bits: each size is below 2^32, so the sum and its product with tp fit.
    const uint64_t cores_needed = (uint64_t{sv.prefill_stages()} + sv.decode_stages()) * tp;
    if (cores_needed > static_cast<uint64_t>(chip.num_cores())) {
      // Said at the group size given on the command line (--set) where only one was, else at the
      // larger, at both when equal: decode_stages was named even for --set prefill_stages=40.
      const std::string rule = "(prefill_stages + decode_stages) x tp = " + std::to_string(cores_needed) +
                               " exceeds the chip's " + std::to_string(chip.num_cores()) + " cores";
      const bool p_cli = sim::SetOnCommandLine(e, "mapping.serving.prefill_stages"),
                 d_cli = sim::SetOnCommandLine(e, "mapping.serving.decode_stages");
      const bool name_p = p_cli != d_cli ? p_cli : sv.prefill_stages() >= sv.decode_stages();
      const bool name_d = p_cli != d_cli ? d_cli : sv.decode_stages() >= sv.prefill_stages();
      if (name_p) add("mapping.serving.prefill_stages", std::to_string(sv.prefill_stages()), rule);
      if (name_d) add("mapping.serving.decode_stages", std::to_string(sv.decode_stages()), rule);
      // Each group's own checks would repeat it (tp x pipeline_stages) at fields it does not read.
      throw ConfigError(std::move(diags));
    }
  }
  // A group's stages: the field that sets them (each stage simulates one layer unless
  // mapping.serving.layers_simulated says how many).
  auto stages_field = [&](size_t gi) {
    return mode == "fused" ? std::string("mapping.pipeline_stages")
           : gi == 0       ? std::string("mapping.serving.prefill_stages")
                           : std::string("mapping.serving.decode_stages");
  };
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    g.mapping.set_pipeline_stages(g.stages);
    g.mapping.clear_serving();
    config::Workload probe;
    probe.set_batch(1);
    probe.set_seq_len(1);
    probe.set_num_layers(sv.layers_simulated() ? sv.layers_simulated() : g.stages);
    probe.set_dtype(wl.dtype());
    *probe.mutable_requests() = wl.requests();  // weights pinned in SRAM: the model's must fit
    if (probe.num_layers() > cfg.model().num_layers()) {
      // layers_simulated is every group's: said once.
      if (!sv.layers_simulated())
        add(stages_field(gi), std::to_string(g.stages),
            "more stages than the model's layers (" + std::to_string(cfg.model().num_layers()) +
                "): without mapping.serving.layers_simulated each stage simulates one layer");
      else if (gi == 0)
        add("mapping.serving.layers_simulated", std::to_string(probe.num_layers()),
            "exceeds the model's layers (" + std::to_string(cfg.model().num_layers()) + ")");
    }
    // The group's checks, with its stages at the field that sets them; fewer simulated layers
    // than stages, when mapping.serving.layers_simulated sets them, at that field (it was said
    // at mapping.pipeline_stages, which the fused layout's --set layers_simulated=1 left alone).
    const size_t first = diags.size();
    mapping::ValidateMapping(g.mapping, chip, cfg.model(), probe, e.locs, &diags);
    for (size_t d = first; d < diags.size(); ++d) {
      if (diags[d].field != "mapping.pipeline_stages") continue;
      const bool too_few_layers = diags[d].rule.starts_with("more stages than simulated layers");
      if (mode == "fused" && too_few_layers && sv.layers_simulated()) {
        diags[d].field = "mapping.serving.layers_simulated";
        diags[d].value = std::to_string(sv.layers_simulated());
        diags[d].rule = "fewer than mapping.pipeline_stages (" + std::to_string(g.stages) +
                        "): each stage simulates at least one layer";
      } else if (mode != "fused") {
        diags[d].field = stages_field(gi);
      } else {
        continue;
      }
      diags[d].where = e.locs.Find(diags[d].field);
    }
  }
  if (!diags.empty()) {
    // An error of a field both groups read (disaggregated: the partition, tp, a placement file)
    // once: it was printed once per group.
    std::vector<Diag> once;
    std::set<std::string> said;
    for (Diag& d : diags)
      if (said.insert(d.str()).second) once.push_back(std::move(d));
    throw ConfigError(std::move(once));
  }
  // Every layer's weights must fit the memory channels the group's cores use (the KV cache is
  // admitted to the capacity left, KvCapacityTokens).
  for (const Group& g : groups) {
    config::Workload whole;
    whole.set_dtype(wl.dtype());
    *whole.mutable_requests() = wl.requests();  // weights only
    mapping::ValidateDramCapacity(g.mapping, chip, cfg.model(), whole, e.locs, &diags);
    if (!diags.empty()) throw ConfigError(std::move(diags));
  }
  std::vector<Request> reqs = LoadRequests(wl.requests(), config::DirName(e.path), e.locs);
  // A request timed past the model's sliding window would be timed with full attention. Its
  // last iteration attends to its prompt and every output token but the last; a request past
  // max_position_embeddings is rejected (too long), not timed.
  for (const Request& r : reqs) {
    if (LongerThanPositions(r, cfg.model().max_position_embeddings())) continue;
    const uint64_t ctx = uint64_t{r.prompt_tokens} + r.output_tokens;
    if (std::string rule = llm::SlidingWindowRule(cfg.model(), ctx - 1); !rule.empty()) {
      rule = std::to_string(r.prompt_tokens) + " prompt + " + std::to_string(r.output_tokens) +
             " output tokens: its last iteration's context (" + std::to_string(ctx - 1) + ") " + rule;
      // A trace's request at its own row (it was "request N", N its place in arrival order).
      if (r.trace_line > 0)
        throw ConfigError(Diag{
            Location{config::JoinPath(config::DirName(e.path), wl.requests().trace_file()), r.trace_line, 1},
            "workload.requests.trace_file", "request " + std::to_string(r.id), rule});
      throw ConfigError(Diag{e.locs.Find("workload.requests"), "workload.requests",
                             "request " + std::to_string(r.id), rule});
    }
  }

  SchedulerConfig sc;
  sc.max_running = sv.max_running_requests() ? sv.max_running_requests() : 256;
  sc.max_tokens = sv.max_tokens_per_iteration() ? sv.max_tokens_per_iteration() : 2048;
  sc.chunk_tokens = sv.chunk_tokens() ? sv.chunk_tokens() : sc.max_tokens;
  sc.block_tokens = sv.kv_block_tokens() ? sv.kv_block_tokens() : 16;
  std::vector<std::unique_ptr<EngineCost>> costs;
  std::vector<SchedulerConfig> scs;
  std::vector<uint32_t> layers;  // per group, as EngineCost times them
  for (Group& g : groups) {
    const uint64_t fits = KvCapacityTokens(chip, cfg.model(), g.mapping, g.stages, wl.dtype());
    g.capacity_tokens = sv.kv_capacity_tokens() ? sv.kv_capacity_tokens() : fits;
    // An override past what the memory holds served KV the chip has no room for, silently
    // (9223372036854775807 tokens on a 64 GiB chip): said as a caveat.
    // (A channel of capacity 0 is unchecked: no caveat.)
    const bool unchecked = std::any_of(chip.channels().begin(), chip.channels().end(),
                                       [](const arch::MemoryChannel& ch) { return ch.capacity_bytes == 0; });
    if (sv.kv_capacity_tokens() > fits && !unchecked) g.capacity_over = fits;
    SchedulerConfig c = sc;
    c.capacity_blocks = g.capacity_tokens / sc.block_tokens;
    c.max_context = cfg.model().max_position_embeddings();
    scs.push_back(c);
    layers.push_back(sv.layers_simulated() ? sv.layers_simulated() : g.stages);
    costs.push_back(std::make_unique<EngineCost>(chip, cfg.model(), g.mapping, layers.back(), wl.dtype(),
                                                 engine, sv.context_bucket_tokens()));
    if (std::getenv("TPSIM_SERVE_NO_SKELETONS")) costs.back()->set_use_skeletons(false);
    // The longest context a sequence reaches: the model's positions, its sliding window (past
    // which serving refuses) and the group's KV capacity, whichever is least.
    uint64_t reach = g.capacity_tokens;
    for (uint64_t bound :
         {uint64_t{cfg.model().max_position_embeddings()}, uint64_t{cfg.model().sliding_window()}})
      if (bound > 0) reach = reach > 0 ? std::min(reach, bound) : bound;
    costs.back()->set_max_context(reach);
  }
  // An iteration's Program is checked as a run's (mapping::ValidateMapping), with no file behind
  // its workload: its errors (a prompt chunk whose attention scores pass 2^61 bytes) named
  // ":1:1: workload.seq_len". Said at the request stream, with the iteration's size.
  uint64_t iterations = 0;
  auto cost_fn = [&e, &iterations, &on_iteration](EngineCost* c) {
    return [c, &e, &iterations, &on_iteration](const std::vector<llm::SeqChunk>& ch) {
      try {
        const Ps t = (*c)(ch);
        if (on_iteration) on_iteration(++iterations);
        return t;
      } catch (const ConfigError& err) {
        std::vector<Diag> diags = err.diags();
        uint64_t tokens = 0;
        for (const llm::SeqChunk& k : ch) tokens += k.new_tokens;
        for (Diag& d : diags) {
          if (!d.where.file.empty()) continue;
          d.rule = "an iteration of " + std::to_string(ch.size()) + " sequence" +
                   (ch.size() == 1 ? "" : "s") + " and " + std::to_string(tokens) +
                   " new tokens (its Program's " + d.field + " " + d.value + "): " + d.rule +
                   "; shorter prompts, or mapping.serving.chunk_tokens to split them into smaller chunks";
          d.where = e.locs.Find("workload.requests");
          d.field = "workload.requests";
          d.value = "";
        }
        throw ConfigError(std::move(diags));
      }
    };
  };
  ServeOutcome out;
  if (mode == "fused") {
    out = RunFused(reqs, scs[0], cost_fn(costs[0].get()));
  } else {
    auto xfer_engine = sim::MakeEngine(engine);
    const uint64_t nkv = cfg.model().num_key_value_heads() ? cfg.model().num_key_value_heads()
                                                           : cfg.model().num_attention_heads();
    const uint64_t per_token =
        2ull * cfg.model().num_layers() * nkv * cfg.model().head_dim() * sim::DtypeBytes(wl.dtype());
    const int np = static_cast<int>(sv.prefill_stages() * tp), nd = static_cast<int>(sv.decode_stages() * tp);
    std::map<uint64_t, Ps> xcache;
    TransferCost xfer = [&](uint64_t tokens) {
      auto it = xcache.find(tokens);
      if (it != xcache.end()) return it->second;
      Ps t = TransferTime(chip, *xfer_engine, np, nd, tokens * per_token);
      xcache.emplace(tokens, t);
      return t;
    };
    out = RunDisaggregated(reqs, scs[0], cost_fn(costs[0].get()), scs[1], cost_fn(costs[1].get()), xfer);
  }
  ServeRun run;
  run.mode = mode;
  run.engine = engine;
  run.tp = tp;
  run.block_tokens = sc.block_tokens;
  for (size_t i = 0; i < groups.size(); ++i) {
    run.groups.push_back(ServeRun::Group{groups[i].stages, scs[i].capacity_blocks, costs[i]->calls(),
                                         costs[i]->timed(), costs[i]->skeletons(), costs[i]->skeleton_hits(),
                                         costs[i]->skeleton_kv_dram(), layers[i], groups[i].capacity_over});
  }
  run.outcome = std::move(out);
  run.zero_output_requests = static_cast<uint64_t>(
      std::count_if(reqs.begin(), reqs.end(), [](const Request& r) { return r.zero_output; }));
  return run;
}

}  // namespace tpsim::serving
