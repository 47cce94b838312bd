#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "arch/chip.h"
#include "configs/load.h"
#include "llm/model.h"
#include "mapping/mapping.h"
#include "perfetto_trace.pb.h"
#include "sim/cli/serve.h"
#include "sim/engine.h"
#include "sim/serving/requests.h"
#include "sim/serving/scheduler.h"
#include "sim/serving/serving.h"
#include "tests/arch/test_util.h"

namespace tpsim::serving {
namespace {

using cli::KvCounters;
using cli::ServeCommand;
using cli::WriteServeTrace;

Request Req(uint32_t id, Ps arrival, uint32_t prompt, uint32_t output) {
  return {id, arrival, prompt, output};
}

SchedulerConfig Cfg(uint32_t max_tokens, uint32_t chunk, uint32_t block, uint64_t capacity) {
  SchedulerConfig c;
  c.max_running = 16;
  c.max_tokens = max_tokens;
  c.chunk_tokens = chunk;
  c.block_tokens = block;
  c.capacity_blocks = capacity;
  return c;
}

IterationCost Fixed(Ps ps, std::vector<std::vector<llm::SeqChunk>>* log = nullptr) {
  return [ps, log](const std::vector<llm::SeqChunk>& c) {
    if (log) log->push_back(c);
    return ps;
  };
}

TEST(ServingScheduler, OneRequestAlone) {
  // Prompt 100 in chunks of 64: iterations of 64 and 36 tokens; cost 1000 ps/token + 500.
  IterationCost cost = [](const std::vector<llm::SeqChunk>& c) {
    Ps tokens = 0;
    for (auto& x : c) tokens += x.new_tokens;
    return 1000 * tokens + 500;
  };
  ServeOutcome out = RunFused({Req(0, 0, 100, 5)}, Cfg(64, 64, 16, 100), cost);
  const RequestStats& r = out.requests[0];
  EXPECT_EQ(r.first_token_ps, (1000 * 64 + 500) + (1000 * 36 + 500));  // 101000
  EXPECT_EQ(r.finish_ps, 101000 + 4 * 1500);                           // 4 decode steps of 1 token
  EXPECT_EQ(out.iterations, 2u + 4u);
  Metrics m = Summarize(out, 0, 0);
  EXPECT_DOUBLE_EQ(m.ttft_ms[0], 101000 / 1e9);
  EXPECT_DOUBLE_EQ(m.tpot_ms[0], 1500 / 1e9);
}

TEST(ServingScheduler, TwoRequestsFixedCost) {
  // A: t=0, prompt 8, 3 tokens. B: t=5, prompt 8, 2 tokens. Every iteration 10 ps.
  // it1 [0,10): A prefill -> A token 1.  it2 [10,20): A decode, B prefill -> A 2, B 1.
  // it3 [20,30): A decode, B decode -> A 3 (done), B 2 (done).
  std::vector<std::vector<llm::SeqChunk>> log;
  ServeOutcome out = RunFused({Req(0, 0, 8, 3), Req(1, 5, 8, 2)}, Cfg(100, 100, 4, 100), Fixed(10, &log));
  EXPECT_EQ(out.requests[0].first_token_ps, 10);
  EXPECT_EQ(out.requests[0].finish_ps, 30);
  EXPECT_EQ(out.requests[1].first_token_ps, 20);
  EXPECT_EQ(out.requests[1].finish_ps, 30);
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[1],
            (std::vector<llm::SeqChunk>{{1, 8}, {8, 0}}));  // A decodes after its 8 tokens; B prefills
  EXPECT_EQ(log[2], (std::vector<llm::SeqChunk>{{1, 9}, {1, 8}}));
  Metrics m = Summarize(out, 0, 0);
  EXPECT_DOUBLE_EQ(m.ttft_ms[1], 15 / 1e9);  // p90 of {10, 15}
  EXPECT_DOUBLE_EQ(m.tpot_ms[0], 10 / 1e9);  // A: (30-10)/2, B: (30-20)/1
}

TEST(ServingScheduler, AdmissionBlockedByKvCapacity) {
  // 3 blocks of 4 tokens. A (prompt 8, 2 tokens) reserves 2 blocks; B (prompt 8) needs 2: blocked
  // until A finishes. it1: A prefill (2 blocks). it2: A decode needs ceil(9/4) = 3 blocks.
  // it3: A is gone; B prefills -> its only token at 30.
  ServeOutcome out = RunFused({Req(0, 0, 8, 2), Req(1, 0, 8, 1)}, Cfg(100, 100, 4, 3), Fixed(10));
  EXPECT_EQ(out.requests[0].finish_ps, 20);
  EXPECT_EQ(out.requests[1].first_token_ps, 30);
  EXPECT_EQ(out.requests[1].finish_ps, 30);
  ASSERT_EQ(out.kv.size(), 3u);
  EXPECT_EQ(out.kv[0].used_blocks, 2u);
  EXPECT_EQ(out.kv[1].used_blocks, 3u);
  EXPECT_EQ(out.kv[2].used_blocks, 2u);
}

TEST(ServingScheduler, PreemptsNewestAndRecomputes) {
  // 4 blocks of 2 tokens. A and B: prompt 2, 4 tokens each, both at t=0.
  // it1: both prefill (1 block each). it2: both decode (ctx 3 -> 2 blocks each, 4 used).
  // it3: both decode (ctx 4 -> 2 blocks). it4: A needs ctx 5 -> 3 blocks: B (newest) is
  // preempted (3 tokens generated); B's recompute needs ceil(5/2) = 3 blocks: blocked.
  // A finishes at 40. it5: B re-prefills 2 + 3 = 5 tokens -> its 4th token at 50.
  std::vector<std::vector<llm::SeqChunk>> log;
  ServeOutcome out = RunFused({Req(0, 0, 2, 4), Req(1, 0, 2, 4)}, Cfg(100, 100, 2, 4), Fixed(10, &log));
  EXPECT_EQ(out.requests[0].finish_ps, 40);
  EXPECT_EQ(out.requests[0].preemptions, 0u);
  EXPECT_EQ(out.requests[1].first_token_ps, 10);
  EXPECT_EQ(out.requests[1].finish_ps, 50);
  EXPECT_EQ(out.requests[1].preemptions, 1u);
  ASSERT_EQ(log.size(), 5u);
  EXPECT_EQ(log[3], (std::vector<llm::SeqChunk>{{1, 4}}));
  EXPECT_EQ(log[4], (std::vector<llm::SeqChunk>{{5, 0}}));
  for (const KvSample& k : out.kv) EXPECT_LE(k.used_blocks, 4u);
}

TEST(ServingScheduler, DisaggregatedHandsKvOver) {
  // Prefill group: 10 ps per iteration; the KV of 8 tokens moves in 8 ps; decode group: 7 ps.
  // First token at 10; in the decode group at 18; tokens 2 and 3 at 25 and 32.
  ServeOutcome out =
      RunDisaggregated({Req(0, 0, 8, 3)}, Cfg(100, 100, 4, 10), Fixed(10), Cfg(100, 100, 4, 10), Fixed(7),
                       [](uint64_t tokens) { return static_cast<Ps>(tokens); });
  EXPECT_EQ(out.requests[0].first_token_ps, 10);
  EXPECT_EQ(out.requests[0].handoff_ps, 18);
  EXPECT_EQ(out.requests[0].finish_ps, 32);
}

TEST(ServingScheduler, RejectsRequestsLargerThanCapacity) {
  ServeOutcome out = RunFused({Req(0, 0, 100, 10), Req(1, 0, 4, 2)}, Cfg(100, 100, 4, 5), Fixed(10));
  EXPECT_TRUE(out.requests[0].rejected);  // ceil(110 / 4) = 28 blocks > 5
  EXPECT_FALSE(out.requests[1].rejected);
  EXPECT_EQ(out.requests[1].finish_ps, 20);
}

// A request longer than the model's positions is rejected whatever the capacity: with 40
// positions, 30 + 10 = 40 runs, 31 + 10 = 41 does not; the summary says why.
TEST(ServingScheduler, RejectsRequestsLongerThanThePositions) {
  SchedulerConfig c = Cfg(100, 100, 4, 1000);
  c.max_context = 40;
  ServeOutcome out = RunFused({Req(0, 0, 30, 10), Req(1, 0, 31, 10)}, c, Fixed(10));
  EXPECT_FALSE(out.requests[0].rejected);
  EXPECT_TRUE(out.requests[1].rejected);
  EXPECT_TRUE(out.requests[1].too_long);
  const Metrics m = Summarize(out, 0, 0);
  EXPECT_EQ(m.rejected, 1u);
  EXPECT_EQ(m.too_long, 1u);
  EXPECT_NE(SummaryText(m, 0, 0).find("1 rejected: KV larger than capacity or, 1 of them, longer than the "
                                      "model's positions"),
            std::string::npos)
      << SummaryText(m, 0, 0);
}

// A summary row without samples prints "-", not a percentile of nothing (before: 0.000 ms for
// TTFT, TPOT and latency when every request was rejected). TPOT's samples are the requests
// with a second token.
TEST(ServingScheduler, RowsWithoutSamplesPrintADash) {
  SchedulerConfig c = Cfg(100, 100, 4, 1000);
  c.max_context = 40;
  const Metrics none = Summarize(RunFused({Req(0, 0, 31, 10)}, c, Fixed(10)), 0, 0);
  EXPECT_EQ(none.completed, 0u);
  const std::string t = SummaryText(none, 0, 0);
  for (const char* name : {"TTFT", "TPOT", "latency"}) {
    char want[64];
    std::snprintf(want, sizeof want, "%-8s %10s %10s %10s\n", name, "-", "-", "-");
    EXPECT_NE(t.find(want), std::string::npos) << t;
  }
  // One output token: a TTFT and a latency, no TPOT.
  const Metrics one = Summarize(RunFused({Req(0, 0, 4, 1)}, c, Fixed(10)), 0, 0);
  EXPECT_EQ(one.completed, 1u);
  EXPECT_EQ(one.tpot_samples, 0u);
  const std::string u = SummaryText(one, 0, 0);
  EXPECT_NE(u.find("TPOT              -          -          -\n"), std::string::npos) << u;
  EXPECT_EQ(u.find("TTFT              -"), std::string::npos) << u;
}

config::SyntheticRequests Synth(uint64_t seed, uint32_t n) {
  config::SyntheticRequests s;
  s.set_num_requests(n);
  s.set_rate_per_s(1e9);  // one per ns on average: a busy stream for 10 ps..us iteration costs
  s.set_seed(seed);
  s.mutable_prompt_tokens()->set_dist("uniform");
  s.mutable_prompt_tokens()->set_min(1);
  s.mutable_prompt_tokens()->set_max(300);
  s.mutable_output_tokens()->set_dist("lognormal");
  s.mutable_output_tokens()->set_mu(3);
  s.mutable_output_tokens()->set_sigma(1);
  s.mutable_output_tokens()->set_max(200);
  return s;
}

IterationCost TokenCost() {
  return [](const std::vector<llm::SeqChunk>& c) {
    Ps t = 100;
    for (auto& x : c) t += 10 * x.new_tokens + x.cached;
    return t;
  };
}

TEST(ServingScheduler, EveryRequestFinishesWithinCapacity) {
  std::vector<Request> reqs = Synthesize(Synth(7, 300));
  SchedulerConfig cfg = Cfg(256, 128, 16, 64);  // 1024 tokens of KV: preemptions happen
  cfg.max_running = 32;
  ServeOutcome out = RunFused(reqs, cfg, TokenCost());
  uint32_t preempted = 0;
  for (const RequestStats& r : out.requests) {
    ASSERT_FALSE(r.rejected) << r.id;  // prompt <= 300 and output <= 200 fit in 1024 tokens
    ASSERT_GE(r.finish_ps, r.first_token_ps) << r.id;
    ASSERT_GE(r.first_token_ps, r.arrival_ps) << r.id;
    preempted += r.preemptions;
  }
  EXPECT_GT(preempted, 0u);
  for (const KvSample& k : out.kv) ASSERT_LE(k.used_blocks, 64u);
}

TEST(ServingScheduler, SameSeedSameBytes) {
  auto run = [](uint64_t seed) {
    ServeOutcome out = RunFused(Synthesize(Synth(seed, 100)), Cfg(256, 128, 16, 64), TokenCost());
    return RequestsCsv(out) + KvCsv(out);
  };
  EXPECT_EQ(run(11), run(11));
  EXPECT_NE(run(11), run(12));
}

// The trace's KV counter tracks carry exactly the scheduler's samples: per group, one point
// per iteration at its start (ns = ps / 1000) with the blocks held, then 0 at the group's end.
TEST(ServingTrace, KvCounterEqualsSchedulerSamples) {
  namespace fs = std::filesystem;
  // Prefill iterations 10 us, KV moves 1 us per token, decode iterations 7 us: two groups.
  ServeOutcome out =
      RunDisaggregated({Req(0, 0, 8, 3), Req(1, 5'000'000, 20, 4), Req(2, 6'000'000, 4, 2)},
                       Cfg(100, 16, 4, 20), Fixed(10'000'000), Cfg(100, 100, 4, 20), Fixed(7'000'000),
                       [](uint64_t tokens) { return static_cast<Ps>(tokens) * 1'000'000; });
  ASSERT_GT(out.kv.size(), 4u);
  std::map<std::string, std::vector<const KvSample*>> by_group;
  for (const KvSample& k : out.kv) by_group[k.group].push_back(&k);
  ASSERT_EQ(by_group.size(), 2u);

  const fs::path dir = fs::temp_directory_path() / ("tpsim_serving_trace_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "serve.pftrace").string();
  WriteServeTrace(path, out, "name: \"t\"\n");
  std::ifstream f(path, std::ios::binary);
  std::stringstream bytes;
  bytes << f.rdbuf();
  perfetto::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(bytes.str()));

  std::map<uint64_t, std::string> names;  // counter and thread tracks
  std::map<std::string, std::vector<std::pair<uint64_t, double>>> counters;
  std::vector<std::string> slices;
  for (const auto& pkt : trace.packet()) {
    if (pkt.has_track_descriptor()) {
      const auto& td = pkt.track_descriptor();
      names[td.uuid()] = td.has_counter() ? td.name() : td.thread().thread_name();
    } else if (pkt.has_track_event()) {
      const auto& te = pkt.track_event();
      if (te.type() == perfetto::TrackEvent::TYPE_COUNTER) {
        counters[names.at(te.track_uuid())].emplace_back(pkt.timestamp(), te.double_counter_value());
      } else if (te.type() == perfetto::TrackEvent::TYPE_SLICE_BEGIN &&
                 names.at(te.track_uuid()).rfind("iterations ", 0) == 0) {
        slices.push_back(te.name());
      }
    }
  }
  ASSERT_EQ(counters.size(), 2u);
  for (const auto& [group, samples] : by_group) {
    SCOPED_TRACE(group);
    const auto& pts = counters["kv blocks used (" + group + ")"];
    ASSERT_EQ(pts.size(), samples.size() + 1);
    for (size_t i = 0; i < samples.size(); ++i) {
      EXPECT_EQ(pts[i].first, static_cast<uint64_t>(samples[i]->start_ps / 1000));
      EXPECT_EQ(pts[i].second, static_cast<double>(samples[i]->used_blocks));
    }
    EXPECT_EQ(pts.back().first, static_cast<uint64_t>(samples.back()->time_ps / 1000));
    EXPECT_EQ(pts.back().second, 0.0);
  }
  // One slice per iteration, named by its token counts: the first prefill iteration is
  // request 0's 8 prompt tokens alone (request 1 arrives at 5 us).
  ASSERT_EQ(slices.size(), out.kv.size());
  EXPECT_EQ(out.kv[0].group, "prefill");
  EXPECT_EQ(out.kv[0].prefill_tokens, 8u);
  EXPECT_EQ(out.kv[0].start_ps, 0);
  EXPECT_EQ(out.kv[0].time_ps, 10'000'000);
  EXPECT_EQ(std::count(slices.begin(), slices.end(), "prefill 8 + decode 0"), 1);
  for (const KvSample& k : out.kv) {
    EXPECT_EQ(k.prefill_tokens + k.decode_tokens, k.tokens);
    EXPECT_EQ(k.time_ps - k.start_ps, k.group == "prefill" ? 10'000'000 : 7'000'000);
    if (k.group == "decode") {
      EXPECT_EQ(k.prefill_tokens, 0u);
    }
  }
  // The JSON form holds the same counter points.
  const std::string json = (dir / "serve.json").string();
  WriteServeTrace(json, out, "name: \"t\"\n");
  std::ifstream jf(json);
  std::stringstream js;
  js << jf.rdbuf();
  size_t n = 0;
  for (size_t at = js.str().find("\"ph\":\"C\""); at != std::string::npos;
       at = js.str().find("\"ph\":\"C\"", at + 1))
    ++n;
  EXPECT_EQ(n, out.kv.size() + 2);
  fs::remove_all(dir);
}

TEST(ServingRequests, CsvJsonlAndAzure) {
  auto a = ParseTrace("arrival_ms,prompt_tokens,output_tokens\n1500,10,3\n500,20,0\n", "t.csv", "");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].prompt_tokens, 20u);  // sorted by arrival; times relative to the first
  EXPECT_EQ(a[0].arrival_ps, 0);
  EXPECT_EQ(a[0].output_tokens, 1u);  // 0 output tokens -> 1
  EXPECT_EQ(a[1].arrival_ps, 1000000000000);
  auto z = ParseTrace(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
      "2023-11-16 18:15:50.9951690,396,109\n",
      "azure.csv", "");
  ASSERT_EQ(z.size(), 2u);
  EXPECT_EQ(z[1].prompt_tokens, 396u);
  // Date-times become double seconds since 1970 (~2e-7 s apart at 2023): within 1 us.
  EXPECT_NEAR(static_cast<double>(z[1].arrival_ps), (50.9951690 - 46.6805900) * 1e12, 1e6);
  auto j = ParseTrace("{\"arrival_s\": 0.25, \"prompt_tokens\": 7, \"output_tokens\": 2}\n", "t.jsonl", "");
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0].prompt_tokens, 7u);
  try {
    ParseTrace("arrival_s,prompt_tokens,output_tokens\n0,5,1\n1,x,1\n", "bad.csv", "");
    FAIL() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.diags()[0].where.line, 3);
    EXPECT_EQ(e.diags()[0].value, "x");
  }
  EXPECT_THROW(ParseTrace("a,b\n", "bad.csv", ""), config::ConfigError);
  EXPECT_THROW(ParseTrace("{not json\n", "bad.jsonl", ""), config::ConfigError);
  // A value nested 100,000 deep (a 200 KB line): named by its kind; quoting it recursed once a
  // level and overflowed the stack (SIGSEGV).
  try {
    ParseTrace("{\"arrival_s\": " + std::string(100000, '[') + std::string(100000, ']') +
                   ", \"prompt_tokens\": 10, \"output_tokens\": 5}\n",
               "deep.jsonl", "");
    FAIL() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.diags()[0].value, "an array nested more than 64 levels deep");
  }
}

TEST(ServingRequests, FixedRateIsExact) {
  config::SyntheticRequests s;
  s.set_num_requests(3);
  s.set_rate_per_s(4);
  s.set_arrivals("fixed");
  s.mutable_prompt_tokens()->set_value(5);
  s.mutable_output_tokens()->set_value(2);
  auto r = Synthesize(s);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[2].arrival_ps, 500000000000);  // 2 gaps of 0.25 s
  EXPECT_EQ(r[2].prompt_tokens, 5u);
}

TEST(ServingPercentile, NearestRank) {
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 50), 2);  // ceil(0.5*4) = 2nd
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 99), 4);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
}

// ---- With the real analytical engine, on a small chip and Qwen3-0.6B.

TEST(ServingEngine, OneChunkIterationTimesLikeAPrefill) {
  config::Chip cc = arch::testing::LoadChipConfig("mesh-4x4-hbm");
  arch::Chip chip = arch::Chip::Build(cc, config::SourceMap());
  config::Model model =
      llm::LoadModelFile(std::string(TPSIM_SOURCE_DIR) + "/configs/models/qwen3-0.6b.json", nullptr);
  config::Mapping m;
  m.set_tp(4);
  config::Workload wl;
  wl.set_batch(1);
  wl.set_seq_len(64);
  wl.set_num_layers(1);
  auto engine = sim::MakeEngine("analytical");
  ASSERT_TRUE(engine);
  Ps prefill = engine->Run(mapping::Lower(chip, model, wl, m), chip).makespan_ps;
  Ps iter = engine->Run(mapping::LowerIteration(chip, model, m, {{64, 0}}, 1, "bf16"), chip).makespan_ps;
  EXPECT_GT(prefill, 0);
  EXPECT_EQ(iter, prefill);
  // A decode token beside the prompt makes the iteration longer, not shorter.
  Ps mixed =
      engine->Run(mapping::LowerIteration(chip, model, m, {{64, 0}, {1, 500}}, 1, "bf16"), chip).makespan_ps;
  EXPECT_GT(mixed, iter);
  EngineCost cost(chip, model, m, 1, "bf16", "analytical", 0);
  Ps a = cost({{64, 0}});
  Ps b = cost({{64, 0}});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, prefill * model.num_layers());  // one layer lowered, scaled to all layers
  EXPECT_EQ(cost.timed(), 1u);
  EXPECT_EQ(cost.calls(), 2u);
}

TEST(ServingEngine, ServeCommandEndToEnd) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "tpsim_serving_test";
  fs::create_directories(dir);
  std::string src = TPSIM_SOURCE_DIR;
  std::ofstream(dir / "exp.textproto")
      << "name: \"tiny-serve\"\n"
      << "chip_file: \"" << src << "/configs/chips/mesh-4x4-hbm.textproto\"\n"
      << "model_file: \"" << src << "/configs/models/qwen3-0.6b.json\"\n"
      << "workload { dtype: \"bf16\" requests { synthetic { num_requests: 12 "
         "rate_per_s: 200 seed: 3 prompt_tokens { dist: \"uniform\" min: 16 max: 96 } "
         "output_tokens { value: 4 } } } }\n"
      << "mapping { tp: 4 serving { max_tokens_per_iteration: 128 chunk_tokens: 64 "
         "layers_simulated: 1 } }\n";
  std::string csv = (dir / "req.csv").string(), kv = (dir / "kv.csv").string();
  std::string trace = (dir / "serve.pftrace").string();
  int rc = ServeCommand({(dir / "exp.textproto").string(), "--requests-csv", csv, "--kv-csv", kv,
                         "--slo-ttft-ms", "1000", "--trace", trace});
  ASSERT_EQ(rc, 0);
  {
    std::ifstream tf(trace, std::ios::binary);
    std::stringstream tb;
    tb << tf.rdbuf();
    perfetto::Trace t;
    ASSERT_TRUE(t.ParseFromString(tb.str()));
    int counter_points = 0;
    for (const auto& pkt : t.packet())
      if (pkt.has_track_event() && pkt.track_event().type() == perfetto::TrackEvent::TYPE_COUNTER)
        ++counter_points;
    EXPECT_GT(counter_points, 1);
  }
  // A write error is exit 1 with its reason, like every failure after the input was accepted.
  EXPECT_EQ(
      ServeCommand({(dir / "exp.textproto").string(), "--trace", (dir / "no/such/dir/t.json").string()}), 1);
  std::ifstream in(csv);
  std::string line;
  int rows = 0;
  std::getline(in, line);
  while (std::getline(in, line)) {
    ++rows;
    EXPECT_NE(line.find(",ok"), std::string::npos) << line;
  }
  EXPECT_EQ(rows, 12);
  // A bad field is a config error (exit 2).
  EXPECT_EQ(ServeCommand({(dir / "exp.textproto").string(), "--set", "mapping.serving.mode=split"}), 2);
  EXPECT_EQ(ServeCommand({(dir / "exp.textproto").string(), "--slo-ttft-ms", "-1"}), 2);
  // Attention replicas are a tpsim run layout: refused with their own rule.
  EXPECT_THROW(
      {
        try {
          Serve(sim::LoadExperiment((dir / "exp.textproto").string(), {{"mapping.attention_dp", "2"}}));
        } catch (const config::ConfigError& e) {
          ASSERT_EQ(e.diags().size(), 1u);
          EXPECT_EQ(e.diags()[0].field, "mapping.attention_dp");
          EXPECT_NE(e.diags()[0].rule.find("attention replicas are not served"), std::string::npos);
          throw;
        }
      },
      config::ConfigError);
  fs::remove_all(dir);
}

// Stage counts past the chip or the model: each error names the field that sets the stages and
// the sizes as given. Before, (prefill + decode) wrapped in 32 bits (2^31 - 1 + 2 stages "= 4"
// cores), each group's check printed tp x stages clamped to the chip's cores + 1 ("260") at
// mapping.tp, and a group with more stages than layers blamed layers_simulated, unset.
TEST(Serving, StageCountErrorsNameTheirFieldAndTheSizesGiven) {
  const std::string dis =
      std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-disaggregated.textproto";
  const std::string fused = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto";
  auto diags_of = [](const std::string& path, const std::vector<sim::Override>& set) {
    try {
      Serve(sim::LoadExperiment(path, set));
    } catch (const config::ConfigError& e) {
      return e.diags();
    }
    ADD_FAILURE() << "accepted";
    return std::vector<config::Diag>{};
  };
  auto d = diags_of(
      dis, {{"mapping.serving.prefill_stages", "2147483647"}, {"mapping.serving.decode_stages", "2"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].field, "mapping.serving.decode_stages");
  EXPECT_EQ(d[0].rule, "(prefill_stages + decode_stages) x tp = 8589934596 exceeds the chip's 64 cores");
  d = diags_of(dis, {{"mapping.serving.prefill_stages", "12"},
                     {"mapping.serving.decode_stages", "4"},
                     {"model.num_layers", "10"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].field, "mapping.serving.prefill_stages");
  EXPECT_EQ(d[0].value, "12");
  EXPECT_NE(d[0].rule.find("more stages than the model's layers (10)"), std::string::npos);
  // Fewer simulated layers than a group's stages: at each group's field, not pipeline_stages.
  d = diags_of(dis, {{"mapping.serving.layers_simulated", "4"}});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].field, "mapping.serving.prefill_stages");
  EXPECT_EQ(d[1].field, "mapping.serving.decode_stages");
  EXPECT_EQ(d[1].rule, "more stages than simulated layers (4)");
  d = diags_of(dis, {{"mapping.serving.layers_simulated", "100"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].field, "mapping.serving.layers_simulated");
  d = diags_of(fused, {{"mapping.pipeline_stages", "100"}});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].field, "mapping.pipeline_stages");
  EXPECT_EQ(d[1].rule, "tp x pipeline_stages (400) exceeds the chip's 64 cores");
}

// A request whose times went backwards (an overflowed duration) is an error with its
// cause, never a negative TTFT nor a good request (issue 16).
TEST(Serving, SummaryRefusesTimesThatCannotBeRepresented) {
  ServeOutcome out;
  RequestStats r;
  r.id = 3;
  r.arrival_ps = 1000;
  r.first_token_ps = -5;
  r.finish_ps = 2000;
  r.prompt_tokens = 4;
  r.output_tokens = 2;
  out.requests.push_back(r);
  try {
    Summarize(out, 100, 100);
    ADD_FAILURE() << "summarised";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("request 3 has times that cannot be represented"),
              std::string::npos);
  }
}

TEST(Serving, SyntheticArrivalsPastTheHorizonAreRefused) {
  config::SyntheticRequests s;
  s.set_num_requests(3);
  s.set_rate_per_s(1e-300);
  s.set_arrivals("fixed");
  s.mutable_prompt_tokens()->set_value(4);
  s.mutable_output_tokens()->set_value(4);
  EXPECT_THROW(Synthesize(s), std::out_of_range);
  config::RequestSource src;
  *src.mutable_synthetic() = s;
  std::vector<config::Diag> diags;
  ValidateRequestSource(src, config::SourceMap("e.textproto"), &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "workload.requests.synthetic.rate_per_s");
  EXPECT_THROW(ParseTrace("arrival_s,prompt_tokens,output_tokens\n0,1,1\n3e6,1,1\n", "t.csv", ""),
               config::ConfigError);
  EXPECT_NO_THROW(ParseTrace("arrival_s,prompt_tokens,output_tokens\n0,1,1\n2e6,1,1\n", "t.csv", ""));
}

}  // namespace
}  // namespace tpsim::serving
