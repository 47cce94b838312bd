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

// Disaggregated: a request whose prompt + output cannot fit the decode group's capacity is
// rejected before it takes any prefill time, as in fused mode (it was prefilled and only then
// rejected by the decode group, delaying the others). Prefill: 30 blocks of 4 (120 tokens);
// decode: 40 blocks (160 tokens); budget and chunks of 100 tokens; prefill 10 ps, decode 7 ps,
// a transfer 1 ps per token. A (100 + 100 = 50 blocks > 40): rejected up front; C (prompt 130 =
// 33 blocks > 30): rejected by the prefill group. B alone: prefilled in [0, 10), in the decode
// group at 10 + 8 = 18, tokens 2 and 3 at 25 and 32. Before, A's 100-token chunk took the first
// iteration and B's first token came at 20.
TEST(ServingScheduler, DisaggregatedRejectsUpFrontWhatTheDecodeGroupCannotHold) {
  std::vector<std::vector<llm::SeqChunk>> prefill_log, decode_log;
  ServeOutcome out =
      RunDisaggregated({Req(0, 0, 100, 100), Req(1, 0, 8, 3), Req(2, 0, 130, 1)}, Cfg(100, 100, 4, 30),
                       Fixed(10, &prefill_log), Cfg(100, 100, 4, 40), Fixed(7, &decode_log),
                       [](uint64_t tokens) { return static_cast<Ps>(tokens); });
  EXPECT_TRUE(out.requests[0].rejected);
  EXPECT_FALSE(out.requests[0].too_long);
  EXPECT_EQ(out.requests[0].first_token_ps, -1);
  EXPECT_TRUE(out.requests[2].rejected);
  EXPECT_FALSE(out.requests[1].rejected);
  EXPECT_EQ(out.requests[1].first_token_ps, 10);
  EXPECT_EQ(out.requests[1].handoff_ps, 18);
  EXPECT_EQ(out.requests[1].finish_ps, 32);
  ASSERT_EQ(prefill_log.size(), 1u);
  EXPECT_EQ(prefill_log[0], (std::vector<llm::SeqChunk>{{8, 0}}));
  EXPECT_EQ(decode_log.size(), 2u);
  const Metrics m = Summarize(out, 0, 0);
  EXPECT_EQ(m.rejected, 2u);
  EXPECT_EQ(m.too_long, 0u);
  EXPECT_EQ(m.completed, 1u);
}

// A request's KV peaks at prompt + output - 1 tokens: the prefill writes the prompt's K,V and
// each of the output - 1 decode steps one more; the last output token is never fed back. With
// one 16-token block of capacity, 15 + 2 (peak 16) and 16 + 1 (16) fit and finish, 16 + 2 (17,
// two blocks) does not; the check counted prompt + output and rejected the first two. In a
// disaggregated run a request of one output token never reaches the decode group: a 20-token
// prompt fits the prefill group's 2 blocks and finishes there, whatever the decode group holds.
TEST(ServingScheduler, PeakKvIsPromptPlusOutputMinusOne) {
  ServeOutcome out =
      RunFused({Req(0, 0, 15, 2), Req(1, 0, 16, 1), Req(2, 0, 16, 2)}, Cfg(100, 100, 16, 1), Fixed(10));
  EXPECT_FALSE(out.requests[0].rejected);
  EXPECT_FALSE(out.requests[1].rejected);
  EXPECT_TRUE(out.requests[2].rejected);
  EXPECT_EQ(out.requests[0].finish_ps, 20);  // prefill [0, 10), its decode step [10, 20)
  EXPECT_EQ(out.requests[1].finish_ps, 30);  // admitted when request 0 freed the block
  ServeOutcome dis = RunDisaggregated({Req(0, 0, 20, 1), Req(1, 0, 20, 2)}, Cfg(100, 100, 16, 2), Fixed(10),
                                      Cfg(100, 100, 16, 1), Fixed(7),
                                      [](uint64_t tokens) { return static_cast<Ps>(tokens); });
  EXPECT_FALSE(dis.requests[0].rejected);
  EXPECT_EQ(dis.requests[0].finish_ps, 10);
  EXPECT_TRUE(dis.requests[1].rejected);  // 21 tokens at its peak: two blocks > the decode group's one
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

// The goodput line's SLOs as given: 1e308 ms printed as 31 digits cut off by the buffer
// ("1000000000000000010979063629440"), 1e-300 ms as "0.000", which the flag refuses.
TEST(ServingScheduler, GoodputLineShowsTheSlosAsGiven) {
  const Metrics m;
  auto line = [&](double ttft, double tpot) {
    const std::string t = SummaryText(m, ttft, tpot);
    const size_t at = t.find("goodput (");
    return t.substr(at, t.find(')', at) - at + 1);
  };
  EXPECT_EQ(line(1e308, 1e-300), "goodput (TTFT <= 1e+308 ms, TPOT <= 1e-300 ms)");
  EXPECT_EQ(line(500, 0.0005), "goodput (TTFT <= 500.000 ms, TPOT <= 0.0005 ms)");
  EXPECT_EQ(line(0, 2.5), "goodput (TPOT <= 2.500 ms)");
  EXPECT_EQ(line(0, 0), "goodput (no SLO given)");
}

// Rates below the decimals shown keep significant digits: 5 requests over 1,588,013 s printed
// "0.000 requests/s, 0.0 output tokens/s" for a stream that completed.
TEST(ServingScheduler, SmallRatesAreNotPrintedAsZero) {
  Metrics m;
  m.total = m.completed = m.good = 5;
  m.requests_per_s = m.goodput_per_s = 5 / 1588013.422;
  m.tokens_per_s = 473 / 1588013.422;
  m.span_s = 1588013.422;
  const std::string t = SummaryText(m, 0, 0);
  EXPECT_NE(t.find("throughput: 3.14859e-06 requests/s, 0.000297856 output tokens/s over 1588013.422 s\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("goodput (no SLO given): 3.14859e-06 requests/s (5 of 5 requests)\n"), std::string::npos)
      << t;
  m.requests_per_s = 0.206, m.tokens_per_s = 26.3, m.span_s = 9.72;
  EXPECT_NE(SummaryText(m, 0, 0).find("throughput: 0.206 requests/s, 26.3 output tokens/s over 9.720 s\n"),
            std::string::npos);
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
    // Each iteration's blocks at its start, and 0 where the group idles after one (KvCounters).
    size_t at = 0;
    for (size_t i = 0; i < samples.size(); ++i) {
      ASSERT_LT(at, pts.size());
      EXPECT_EQ(pts[at].first, static_cast<uint64_t>(samples[i]->start_ps / 1000));
      EXPECT_EQ(pts[at].second, static_cast<double>(samples[i]->used_blocks));
      ++at;
      if (at < pts.size() && pts[at].second == 0.0) {
        EXPECT_EQ(pts[at].first, static_cast<uint64_t>(samples[i]->time_ps / 1000));
        ++at;
      }
    }
    EXPECT_EQ(at, pts.size());
    EXPECT_EQ(pts.back().first, static_cast<uint64_t>(samples.back()->time_ps / 1000));
    EXPECT_EQ(pts.back().second, 0.0);
  }
  // By hand (blocks of 4 tokens, times in ns): the prefill group runs request 0's 8 tokens
  // (2 blocks) over [0, 10) us, request 1's first 16 of 20 (5 blocks) with request 2's 4 (1)
  // over [10, 20), request 1's last 4 over [20, 30), never idle between. The decode group takes
  // request 0 at 18 us (8 tokens moved over 8 us from 10; 9 tokens with its next: 3 blocks),
  // request 2 at 24 us (4 + 1 tokens: 2 blocks) beside it over [25, 32), where both finish; it
  // idles until request 1 arrives at 50 us (moved from 30 us: 20 tokens), 6 blocks for its
  // three decode steps: the counter is 0 over [32, 50) us (it held 5 blocks there before).
  using Points = std::vector<std::pair<uint64_t, double>>;
  EXPECT_EQ(counters["kv blocks used (prefill)"], (Points{{0, 2}, {10000, 6}, {20000, 5}, {30000, 0}}));
  EXPECT_EQ(counters["kv blocks used (decode)"],
            (Points{{18000, 3}, {25000, 5}, {32000, 0}, {50000, 6}, {57000, 6}, {64000, 6}, {71000, 0}}));
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
  EXPECT_EQ(n, out.kv.size() + 3);  // each group's last 0, and the decode group's idle 0 at 32 us
  // .JSON is JSON too, as for `tpsim run --trace` (it was written as a binary Perfetto trace).
  const std::string upper = (dir / "serve.JSON").string();
  WriteServeTrace(upper, out, "name: \"t\"\n");
  std::ifstream uf(upper);
  EXPECT_EQ(uf.get(), '{');
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
    EXPECT_EQ(e.diags()[0].where.col, 3);  // the cell's column (it was 1 for every cell)
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

// Malformed traces are refused at the line, column and value that are wrong (each was accepted
// silently: extra cells ignored, the last of two columns or keys for one quantity used), a
// UTF-8 byte order mark is skipped (it was refused as a bad header), a far arrival is printed
// compactly (it was 134 digits and "arrives inf s").
TEST(ServingRequests, MalformedTracesAreRefusedAtTheirField) {
  auto refused = [](const std::string& text, const std::string& name, double scale = 1) {
    try {
      ParseTrace(text, name, "", "workload.requests.trace_file", scale);
    } catch (const config::ConfigError& e) {
      EXPECT_EQ(e.diags().size(), 1u);
      EXPECT_EQ(e.diags()[0].field, "workload.requests.trace_file");
      EXPECT_EQ(e.diags()[0].where.file, name);
      return e.diags()[0];
    }
    ADD_FAILURE() << "accepted: " << text;
    return config::Diag{};
  };
  const std::string header = "arrival_s,prompt_tokens,output_tokens\n";
  config::Diag d = refused(header + "0,5,1\n1,5,1,7\n", "t.csv");
  EXPECT_EQ(d.where.line, 3);
  EXPECT_EQ(d.where.col, 7);  // the first cell past the header's three
  EXPECT_EQ(d.value, "1,5,1,7");
  EXPECT_EQ(d.rule, "has 4 columns, the header 3 (column 4 has no name)");
  d = refused(header + "0,5,1,\n", "t.csv");  // a trailing comma is a fourth, empty, cell
  EXPECT_EQ(d.where.line, 2);
  EXPECT_EQ(d.where.col, 7);
  d = refused("arrival_s,prompt_tokens,prompt_tokens,output_tokens\n0,5,6,1\n", "t.csv");
  EXPECT_EQ(d.where.line, 1);
  EXPECT_EQ(d.where.col, 25);
  EXPECT_EQ(d.value, "prompt_tokens");
  EXPECT_EQ(d.rule, "column named twice (columns 2 and 3)");
  d = refused(header + "0,5,1\n1,5, -2\n", "t.csv");  // a cell's column, after its spaces
  EXPECT_EQ(d.where.line, 3);
  EXPECT_EQ(d.where.col, 6);
  EXPECT_EQ(d.value, "-2");
  d = refused("arrival_s,prompt_tokens,output_tokens,arrival_ms\n0,5,1,7\n", "t.csv");
  EXPECT_EQ(d.where.col, 39);
  EXPECT_EQ(d.value, "arrival_ms");
  EXPECT_EQ(d.rule, "gives the same quantity as column 1 (arrival_s): name one");
  d = refused("{\"arrival_s\": 0, \"prompt_tokens\": 5, \"output_tokens\": 1, \"prompt_tokens\": 9}\n",
              "t.jsonl");
  EXPECT_EQ(d.where.line, 1);
  EXPECT_EQ(d.value, "\"prompt_tokens\"");
  EXPECT_EQ(d.rule, "key given twice in one object");
  d = refused(
      "{\"arrival_s\": 0, \"prompt_tokens\": 5, \"output_tokens\": 1}\n"
      "{\"arrival_s\": 1, \"arrival_ms\": 5, \"prompt_tokens\": 5, \"output_tokens\": 1}\n",
      "t.jsonl");
  EXPECT_EQ(d.where.line, 2);
  EXPECT_EQ(d.rule, "gives both \"arrival_s\" and \"arrival_ms\": give one");
  // A byte order mark before the header (CSV) or the first object (JSONL) is skipped.
  auto bom = ParseTrace("\xEF\xBB\xBF" + header + "0,5,1\n2,6,1\n", "t.csv", "");
  ASSERT_EQ(bom.size(), 2u);
  EXPECT_EQ(bom[1].prompt_tokens, 6u);
  EXPECT_EQ(ParseTrace("\xEF\xBB\xBF{\"arrival_s\": 0, \"prompt_tokens\": 5, \"output_tokens\": 1}\n",
                       "t.jsonl", "")
                .size(),
            1u);
  // Far arrivals: compact (a CSV cell as written, a JSON number in %g), and out of range even
  // where the seconds overflow a double.
  d = refused("prompt_tokens,arrival_s,output_tokens\n1,0,1\n1, 1e300,1\n", "t.csv");
  EXPECT_EQ(d.where.line, 3);
  EXPECT_EQ(d.where.col, 4);    // the arrival's text
  EXPECT_EQ(d.value, "1e300");  // as written
  EXPECT_EQ(d.rule,
            "arrives 1e+300 s after the first request, out of range: past the 30 days (2592000 s) a served "
            "stream may span");
  d = refused(
      "{\"arrival_ms\": 1e300, \"prompt_tokens\": 5, \"output_tokens\": 1}\n"
      "{\"arrival_ms\": 0, \"prompt_tokens\": 5, \"output_tokens\": 1}\n",
      "t.jsonl", 1e6);
  EXPECT_EQ(d.where.line, 1);
  EXPECT_EQ(d.value, "1e+300");
  EXPECT_EQ(d.rule,
            "arrives 1e+303 s after the first request (x time_scale 1000000), out of range: past the 30 days "
            "(2592000 s) a served stream may span");
  d = refused(header + "0,1,1\n1e303,1,1\n", "t.csv", 1e6);
  EXPECT_NE(d.rule.find("arrives more than 1.8e+308 s after the first request"), std::string::npos) << d.rule;
}

// A synthetic length distribution's error is at the field that is wrong (a uniform min of 0
// was reported at .max, a lognormal mu at .sigma).
TEST(ServingRequests, DistributionErrorsNameTheWrongField) {
  config::RequestSource src;
  config::SyntheticRequests* s = src.mutable_synthetic();
  s->set_num_requests(3);
  s->set_rate_per_s(1);
  s->mutable_prompt_tokens()->set_dist("uniform");
  s->mutable_prompt_tokens()->set_max(10);
  s->mutable_output_tokens()->set_dist("lognormal");
  s->mutable_output_tokens()->set_mu(30);
  s->mutable_output_tokens()->set_sigma(1);
  std::vector<config::Diag> diags;
  ValidateRequestSource(src, config::SourceMap("e.textproto"), &diags);
  ASSERT_EQ(diags.size(), 2u);
  EXPECT_EQ(diags[0].field, "workload.requests.synthetic.prompt_tokens.min");
  EXPECT_EQ(diags[0].value, "0");
  EXPECT_EQ(diags[1].field, "workload.requests.synthetic.output_tokens.mu");
  EXPECT_EQ(diags[1].value, "30");
  s->mutable_prompt_tokens()->set_min(11);  // now max < min: at .max
  s->mutable_output_tokens()->set_mu(5);
  diags.clear();
  ValidateRequestSource(src, config::SourceMap("e.textproto"), &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "workload.requests.synthetic.prompt_tokens.max");
  // A lognormal floor above 1e9 (every draw was 1e9, silently).
  s->mutable_prompt_tokens()->set_min(1);
  s->mutable_output_tokens()->set_min(2000000000);
  diags.clear();
  ValidateRequestSource(src, config::SourceMap("e.textproto"), &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "workload.requests.synthetic.output_tokens.min");
  EXPECT_EQ(diags[0].value, "2000000000");
  EXPECT_EQ(diags[0].rule,
            "dist lognormal needs min <= 1000000000 (a request's tokens are at most 1000000000, 1e9, as a "
            "trace's)");
}

// Date-times are read as written or refused: February 31 was March 3, trailing text and offsets
// were dropped, "18:15:1e1" read as 10 s; hexadecimal arrivals were numbers (0x10 = 16 s); a
// quoted cell that holds a comma was split at it ("0,10",5 read as 0,10,5).
TEST(ServingRequests, CellsAreReadAsWrittenOrRefused) {
  auto refused = [](const std::string& text) {
    try {
      ParseTrace(text, "t.csv", "");
    } catch (const config::ConfigError& e) {
      return e.diags().at(0);
    }
    ADD_FAILURE() << "accepted: " << text;
    return config::Diag{};
  };
  const std::string azure = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-28 00:00:00,10,5\n";
  for (const char* bad : {"2023-02-31 00:00:00", "2023-02-29 00:00:00", "2023-11-16 18:15:46.68 garbage",
                          "2023-11-16 18:15:1e1", "2023 - 11 - 16 18 : 15 : 00", "2023-11-16 24:00:00",
                          "2023-11-16T18:15:47+05", "23-11-16 18:15:47"}) {
    const config::Diag d = refused(azure + bad + ",10,5\n");
    EXPECT_EQ(d.where.line, 3) << bad;
    EXPECT_EQ(d.value, bad);
    EXPECT_NE(d.rule.find("TIMESTAMP must be a date-time YYYY-MM-DD HH:MM:SS"), std::string::npos) << d.rule;
  }
  // A leap day, Z, and offsets taken back to UTC: 05:00:01+05:00 is 00:00:01Z, 21:59:59.5-02:00
  // is 23:59:59.5Z.
  auto z = ParseTrace(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-02-29T00:00:00Z,1,1\n2024-02-29T05:00:01+05:00,2,1\n"
      "2024-02-29T21:59:59.5-02:00,3,1\n",
      "t.csv", "");
  ASSERT_EQ(z.size(), 3u);
  EXPECT_EQ(z[0].prompt_tokens, 1u);
  EXPECT_EQ(z[1].prompt_tokens, 2u);
  EXPECT_EQ(z[2].prompt_tokens, 3u);
  // Date-times become double seconds since 1970 (~2e-7 s apart at 2024): within 1 us.
  EXPECT_NEAR(static_cast<double>(z[1].arrival_ps), 1e12, 1e6);
  EXPECT_NEAR(static_cast<double>(z[2].arrival_ps), 86399.5e12, 1e6);
  const std::string header = "arrival_s,prompt_tokens,output_tokens\n";
  for (const char* bad : {"0x10", "inf", " 1 2", "1e400"}) {
    const config::Diag d = refused(header + bad + ",10,5\n");
    EXPECT_EQ(d.rule, "arrival must be a decimal number >= 0") << bad;
  }
  // Below the normal doubles: the subnormal or 0 it rounds to, 0 ps (1e-310 was refused as not
  // ">= 0").
  const auto tiny = ParseTrace(header + "0,10,5\n1e-310,10,5\n1e-400,10,5\n", "t.csv", "");
  ASSERT_EQ(tiny.size(), 3u);
  EXPECT_EQ(tiny[1].arrival_ps, 0);
  EXPECT_EQ(tiny[2].arrival_ps, 0);
  // A date-time before the epoch says so (it was "a date-time ... that exists").
  const config::Diag d0 = refused("TIMESTAMP,ContextTokens,GeneratedTokens\n1969-12-31 23:59:59,374,44\n");
  EXPECT_EQ(d0.rule, "TIMESTAMP is before 1970-01-01 00:00:00 UTC: date-times are read from then on");
  // Why a JSONL line is not JSON, where the parser says (a number past a double's range was "not a
  // JSON object" at column 1).
  try {
    ParseTrace("{\"arrival_s\": 1e400, \"prompt_tokens\": 100, \"output_tokens\": 10}\n", "t.jsonl", "");
    ADD_FAILURE() << "accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.diags().at(0).where.col, 15);
    EXPECT_EQ(e.diags().at(0).rule, "not JSON: number overflow parsing '1e400'");
  }
  try {
    ParseTrace("{\"arrival_s\": 1, \"prompt_tokens\" 100}\n", "t.jsonl", "");
    ADD_FAILURE() << "accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.diags().at(0).where.col, 36);  // the parser's: the end of the number it met
    EXPECT_EQ(e.diags().at(0).rule.rfind("not JSON: parse error at line 1, column 36: syntax error", 0), 0u)
        << e.diags().at(0).rule;
  }
  config::Diag d = refused(header + "\"0,10\",5\n");
  EXPECT_EQ(d.where.line, 2);
  EXPECT_EQ(d.where.col, 1);
  EXPECT_NE(d.rule.find("a quoted cell cannot hold a comma"), std::string::npos) << d.rule;
  EXPECT_EQ(ParseTrace(header + "\"0\", \"10\" ,5\n", "t.csv", "").at(0).prompt_tokens, 10u);  // quoted
  // A JSONL error is at its value's column (every one was at column 1).
  try {
    ParseTrace("{\"arrival_s\": 0, \"prompt_tokens\": -5, \"output_tokens\": 1}\n", "t.jsonl", "");
    ADD_FAILURE() << "accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.diags().at(0).str(),
              "t.jsonl:1:35: workload.requests.trace_file: -5: prompt_tokens must be an integer from 1 to "
              "1000000000 (1e9)");
  }
  // The limit a cell passes is stated (it said "must be a positive integer" of 2147483648).
  d = refused(header + "0,2147483648,5\n");
  EXPECT_EQ(d.rule, "prompt tokens must be an integer from 1 to 1000000000 (1e9)");
}

// An empty trace names its file as the value (the value was empty: "t.csv:1:1: ...: : empty trace").
TEST(ServingRequests, AnEmptyTraceNamesItsFile) {
  try {
    ParseTrace("", "t.csv", "");
    ADD_FAILURE() << "accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.diags().at(0).str(),
              "t.csv:1:1: workload.requests.trace_file: t.csv: empty trace: no header");
  }
}

// A CSV trace's columns that nothing reads are named for a warning (they were ignored silently).
TEST(ServingRequests, UnreadTraceColumnsAreNamed) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tpsim-unread-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "t.csv") << "\n\xEF\xBB\xBF"
                               << "arrival_s,request_id,prompt_tokens,output_tokens,priority\n0,a,1,1,2\n";
  std::ofstream(dir / "az.csv") << "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n";
  config::RequestSource src;
  src.set_trace_file("t.csv");
  EXPECT_EQ(UnreadTraceColumns(src, dir.string()), (std::vector<std::string>{"request_id", "priority"}));
  src.set_trace_file("az.csv");
  EXPECT_TRUE(UnreadTraceColumns(src, dir.string()).empty());
  src.set_trace_file("none.csv");
  EXPECT_TRUE(UnreadTraceColumns(src, dir.string()).empty());
  fs::remove_all(dir);
}

// A synthetic length past a request's 1e9 tokens was drawn as 1e9, silently.
TEST(ServingRequests, SyntheticLengthsPastTheLimitAreRefused) {
  config::RequestSource src;
  config::SyntheticRequests* s = src.mutable_synthetic();
  s->set_num_requests(3);
  s->set_rate_per_s(1);
  s->mutable_prompt_tokens()->set_value(2000000000);
  s->mutable_output_tokens()->set_dist("uniform");
  s->mutable_output_tokens()->set_min(5);
  s->mutable_output_tokens()->set_max(2147483647);
  std::vector<config::Diag> diags;
  ValidateRequestSource(src, config::SourceMap("e.textproto"), &diags);
  ASSERT_EQ(diags.size(), 2u);
  EXPECT_EQ(diags[0].field, "workload.requests.synthetic.prompt_tokens.value");
  EXPECT_EQ(diags[0].value, "2000000000");
  EXPECT_NE(diags[0].rule.find("value <= 1000000000"), std::string::npos) << diags[0].rule;
  EXPECT_EQ(diags[1].field, "workload.requests.synthetic.output_tokens.max");
  s->mutable_prompt_tokens()->set_value(1000000000);
  s->mutable_output_tokens()->set_max(1000000000);
  diags.clear();
  ValidateRequestSource(src, config::SourceMap("e.textproto"), &diags);
  EXPECT_TRUE(diags.empty());
}

// A request of one output token has no TPOT: its CSV cell is empty (it was 0.000), as the
// summary's "-"; the goodput line judges it by its TTFT.
TEST(ServingScheduler, OneTokenRequestsHaveNoTpotCell) {
  ServeOutcome out = RunFused({Req(0, 0, 8, 1), Req(1, 0, 8, 3)}, Cfg(100, 100, 4, 100), TokenCost());
  const std::string csv = RequestsCsv(out);
  std::istringstream in(csv);
  std::string header, one, three;
  std::getline(in, header);
  std::getline(in, one);
  std::getline(in, three);
  auto cell = [](const std::string& row, int i) {
    std::stringstream ss(row);
    std::string c;
    for (int k = 0; k <= i; ++k) std::getline(ss, c, ',');
    return c;
  };
  EXPECT_EQ(cell(header, 7), "mean_tpot_ms");
  EXPECT_EQ(cell(one, 3), "1");
  EXPECT_EQ(cell(one, 7), "");
  EXPECT_EQ(cell(three, 3), "3");
  EXPECT_NE(cell(three, 7), "");
  EXPECT_EQ(Summarize(out, 0, 1e-300).good, 1u);  // the one-token request: no TPOT to miss
}

// mapping.serving.kv_capacity_tokens past what the memory holds was served silently (KV the chip
// has no room for); it is a caveat, and one within the memory is not.
TEST(Serving, KvCapacityPastTheMemoryIsACaveat) {
  const std::string fused = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto";
  const std::vector<sim::Override> few = {{"workload.requests.synthetic.num_requests", "2"}};
  auto caveats = [&](const std::string& tokens) {
    std::vector<sim::Override> set = few;
    set.push_back({"mapping.serving.kv_capacity_tokens", tokens});
    const sim::Experiment e = sim::LoadExperiment(fused, set);
    std::string all;
    for (const std::string& c : Caveats(e.cfg, Serve(e))) all += c + "\n";
    return all;
  };
  const std::string over = caveats("9223372036854775807");
  EXPECT_NE(
      over.find("the group's KV capacity is mapping.serving.kv_capacity_tokens (9223372036854775807 tokens), "
                "more than the 1359744 its memory holds beside the weights"),
      std::string::npos)
      << over;
  EXPECT_EQ(caveats("100000").find("KV capacity"), std::string::npos);
}

// Serve reports each timed iteration (tpsim serve's progress line on a terminal): 1, 2, ... up to
// the iterations its groups ran.
TEST(Serving, EveryIterationIsReportedInOrder) {
  const std::string fused = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto";
  std::vector<uint64_t> seen;
  const ServeRun run = Serve(sim::LoadExperiment(fused, {{"workload.requests.synthetic.num_requests", "3"}}),
                             "", [&seen](uint64_t n) { seen.push_back(n); });
  uint64_t calls = 0;
  for (const auto& g : run.groups) calls += g.calls;
  ASSERT_EQ(seen.size(), calls);
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], i + 1);
}

// A trace's request past the sliding window is named at its row (it was "request N", N its place
// in arrival order); an iteration's Program that cannot be counted is said at the stream with its
// size (it was ":1:1: workload.seq_len", no file).
TEST(Serving, RequestErrorsNameTheTraceRowOrTheIteration) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tpsim-serve-rows-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string exp =
      std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto";
  const std::string trace = (dir / "sw.csv").string();
  std::ofstream(trace) << "arrival_s,prompt_tokens,output_tokens\n0.5,290,20\n0,100,10\n0.2,100,10\n";
  try {
    Serve(sim::LoadExperiment(exp, {{"workload.requests.trace_file", trace},
                                    {"mapping.serving.layers_simulated", "4"},
                                    {"model.sliding_window", "300"}}));
    ADD_FAILURE() << "accepted";
  } catch (const config::ConfigError& e) {
    const config::Diag& d = e.diags().at(0);
    EXPECT_EQ(d.where.file, trace);
    EXPECT_EQ(d.where.line, 2);
    EXPECT_EQ(d.field, "workload.requests.trace_file");
    EXPECT_NE(d.rule.find("290 prompt + 20 output tokens"), std::string::npos) << d.rule;
  }
  // A trace of its header alone: at the file (it was "workload.requests: : no requests" at the
  // experiment).
  const std::string empty = (dir / "h.csv").string();
  std::ofstream(empty) << "arrival_s,prompt_tokens,output_tokens\n";
  try {
    Serve(sim::LoadExperiment(
        exp, {{"workload.requests.trace_file", empty}, {"mapping.serving.layers_simulated", "4"}}));
    ADD_FAILURE() << "accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.diags().at(0).str(), empty + ":1:1: workload.requests.trace_file: " + empty +
                                         ": no requests: the trace has no rows");
  }
  const std::string big = (dir / "big.csv").string();
  std::ofstream(big) << "arrival_s,prompt_tokens,output_tokens\n0.5,1000000000,1\n0,100,10\n";
  try {
    Serve(sim::LoadExperiment(exp, {{"workload.requests.trace_file", big},
                                    {"mapping.serving.layers_simulated", "4"},
                                    {"model.max_position_embeddings", "0"},
                                    {"mapping.serving.kv_capacity_tokens", "9223372036854775807"},
                                    {"mapping.serving.max_tokens_per_iteration", "2147483647"},
                                    {"mapping.serving.chunk_tokens", "2147483647"}}));
    ADD_FAILURE() << "accepted";
  } catch (const config::ConfigError& e) {
    const config::Diag& d = e.diags().at(0);
    EXPECT_FALSE(d.where.file.empty()) << d.str();
    EXPECT_EQ(d.field, "workload.requests");
    EXPECT_NE(
        d.rule.find("an iteration of 1 sequence and 1000000000 new tokens (its Program's workload.seq_len "
                    "1000000000): a layer's attention scores"),
        std::string::npos)
        << d.rule;
  }
  fs::remove_all(dir);
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
  // One layer lowered, scaled to all layers, on the memory plan of the model's: the one stage
  // holds the 28 layers' weights, 28 x 7.5 MiB per core of tp 4, more than 48 MiB of SRAM, so
  // they are streamed (the prefill of one layer alone keeps its 7.5 MiB in SRAM, which is how
  // the iteration was timed before).
  mapping::LowerOptions all_layers;
  all_layers.plan_layers = model.num_layers();
  const mapping::Program planned = mapping::Lower(chip, model, wl, m, all_layers);
  EXPECT_EQ(planned.weights_location, mapping::WeightsLocation::kDramStreamed);
  EXPECT_GT(engine->Run(planned, chip).makespan_ps, prefill);
  EXPECT_EQ(a, engine->Run(planned, chip).makespan_ps * model.num_layers());
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
  // A flag of one value given twice: refused (the first output was never written).
  EXPECT_EQ(ServeCommand({(dir / "exp.textproto").string(), "--requests-csv", (dir / "a.csv").string(),
                          "--requests-csv", (dir / "b.csv").string()}),
            2);
  EXPECT_FALSE(fs::exists(dir / "b.csv"));
  // A bad field is a config error (exit 2).
  EXPECT_EQ(ServeCommand({(dir / "exp.textproto").string(), "--set", "mapping.serving.mode=split"}), 2);
  EXPECT_EQ(ServeCommand({(dir / "exp.textproto").string(), "--slo-ttft-ms", "-1"}), 2);
  // No experiment: said before the usage (the usage alone said nothing of it).
  testing::internal::CaptureStderr();
  EXPECT_EQ(ServeCommand({"--set", "a=b"}), 2);
  const std::string none = testing::internal::GetCapturedStderr();
  EXPECT_EQ(
      none.rfind("tpsim serve: needs an EXPERIMENT with a request stream (workload.requests): a file, or "
                 "a shipped one (serving-fused, serving-disaggregated)\n\nusage: tpsim serve EXPERIMENT",
                 0),
      0u)
      << none;
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
  // Both given on the command line: at the larger (it was always decode_stages).
  auto d = diags_of(
      dis, {{"mapping.serving.prefill_stages", "2147483647"}, {"mapping.serving.decode_stages", "2"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].field, "mapping.serving.prefill_stages");
  EXPECT_EQ(d[0].rule, "(prefill_stages + decode_stages) x tp = 8589934596 exceeds the chip's 64 cores");
  // One given: at it, where it was given; (40 + 8) x 4 = 192 cores.
  d = diags_of(dis, {{"mapping.serving.prefill_stages", "40"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(
      d[0].str(),
      "<command line: --set mapping.serving.prefill_stages=40>:1:1: mapping.serving.prefill_stages: 40: "
      "(prefill_stages + decode_stages) x tp = 192 exceeds the chip's 64 cores");
  // Neither (both from the file) and equal: at both.
  d = diags_of(dis, {{"mapping.tp", "8"}});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].field, "mapping.serving.prefill_stages");
  EXPECT_EQ(d[1].field, "mapping.serving.decode_stages");
  EXPECT_EQ(d[1].rule, "(prefill_stages + decode_stages) x tp = 128 exceeds the chip's 64 cores");
  d = diags_of(dis, {{"mapping.serving.prefill_stages", "12"},
                     {"mapping.serving.decode_stages", "4"},
                     {"model.num_layers", "10"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].field, "mapping.serving.prefill_stages");
  EXPECT_EQ(d[0].value, "12");
  EXPECT_NE(d[0].rule.find("more stages than the model's layers (10)"), std::string::npos);
  // An error of a field both groups read, once (it was printed once per group).
  d = diags_of(dis, {{"mapping.partition", "bogus"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].field, "mapping.partition");
  EXPECT_EQ(d[0].rule.rfind("unknown partitioner", 0), 0u) << d[0].rule;
  // chunk_tokens above max_tokens_per_iteration: at the one given on the command line, with the
  // other's value (it was at chunk_tokens, without the 1 given).
  d = diags_of(fused, {{"mapping.serving.max_tokens_per_iteration", "1"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].str(),
            "<command line: --set mapping.serving.max_tokens_per_iteration=1>:1:1: "
            "mapping.serving.max_tokens_per_iteration: 1: must be >= chunk_tokens (512)");
  d = diags_of(fused, {{"mapping.serving.chunk_tokens", "100000"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].rule, "must be <= max_tokens_per_iteration (1024)");
  // Fewer simulated layers than a group's stages: at each group's field, not pipeline_stages.
  d = diags_of(dis, {{"mapping.serving.layers_simulated", "4"}});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].field, "mapping.serving.prefill_stages");
  EXPECT_EQ(d[1].field, "mapping.serving.decode_stages");
  EXPECT_EQ(d[1].rule, "more stages than simulated layers (4)");
  d = diags_of(dis, {{"mapping.serving.layers_simulated", "100"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].field, "mapping.serving.layers_simulated");
  // The fused layout's 16 stages with 4 simulated layers: at layers_simulated, which was set (it
  // was said at mapping.pipeline_stages).
  d = diags_of(fused, {{"mapping.serving.layers_simulated", "4"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(
      d[0].str(),
      "<command line: --set mapping.serving.layers_simulated=4>:1:1: mapping.serving.layers_simulated: 4: "
      "fewer than mapping.pipeline_stages (16): each stage simulates at least one layer");
  d = diags_of(fused, {{"mapping.pipeline_stages", "100"}});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].field, "mapping.pipeline_stages");
  EXPECT_EQ(d[1].rule, "tp x pipeline_stages (400) exceeds the chip's 64 cores");
  // A disaggregated group's stages in mode fused sized nothing (accepted and ignored before).
  d = diags_of(fused, {{"mapping.serving.prefill_stages", "3"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(
      d[0].str(),
      "<command line: --set mapping.serving.prefill_stages=3>:1:1: mapping.serving.prefill_stages: 3: mode "
      "fused does not read it (its one group is mapping.pipeline_stages x mapping.tp cores): remove it, or "
      "set mapping.serving.mode: \"disaggregated\"");
  d = diags_of(fused, {{"mapping.serving.decode_stages", "2"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].field, "mapping.serving.decode_stages");
  EXPECT_EQ(ServeCommand({fused, "--set", "mapping.serving.prefill_stages=3"}), 2);
  // A mapping field nothing reads is named, as tpsim run names it (and the serving block, which
  // tpsim run names, is not).
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(
      ServeCommand({fused, "--set", "mapping.seed=5", "--set", "workload.requests.synthetic.num_requests=2"}),
      0);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(
      err.find("tpsim: warning: mapping.seed is ignored: placement ring does not read it (placement random "
               "does)"),
      std::string::npos)
      << err;
  EXPECT_EQ(err.find("mapping.serving"), std::string::npos) << err;
  // The disaggregated groups' stages are the serving block's: mapping.pipeline_stages given on the
  // command line is refused (the shipped file's, marked unused there, is not).
  d = diags_of(dis, {{"mapping.pipeline_stages", "8"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(
      d[0].str(),
      "<command line: --set mapping.pipeline_stages=8>:1:1: mapping.pipeline_stages: 8: mode disaggregated "
      "does not read it (its groups are mapping.serving.prefill_stages and decode_stages x mapping.tp "
      "cores): set those");
}

// Disaggregated end to end (Qwen3-4B on wafer-8x8, a decode group of one stage on small DRAM):
// a request the decode group's KV cannot hold (11,000 + 400 tokens) is rejected before any
// prefill, so the others are served exactly as without it. Before, the prefill group spent 22
// iterations on its prompt and then dropped it: TTFT 489/2194/1933 ms against 92.8/496.7/496.7.
// The caveats say each group's scaled layers (8 of 36 and 1 of 36 here); a trace with a cell
// past its header is refused at exit 2 like every trace error.
TEST(Serving, DisaggregatedRejectionTakesNoPrefillTime) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("tpsim_serving_reject_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string src = TPSIM_SOURCE_DIR;
  std::ofstream(dir / "exp.textproto")
      << "name: \"reject\"\n"
      << "chip_file: \"" << src << "/configs/chips/wafer-8x8.textproto\"\n"
      << "model_file: \"" << src << "/configs/models/qwen3-4b.json\"\n"
      << "workload { dtype: \"bf16\" requests { trace_file: \"big.csv\" } }\n"
      << "mapping { tp: 4 partition: \"megatron\" placement: \"ring\" collective: \"ring\" serving { mode: "
         "\"disaggregated\" prefill_stages: 8 decode_stages: 1 max_running_requests: 64 "
         "max_tokens_per_iteration: 1024 chunk_tokens: 512 kv_block_tokens: 16 context_bucket_tokens: 64 } "
         "}\n";
  const std::string header = "arrival_s,prompt_tokens,output_tokens\n";
  const std::string rest = "0,100,10\n1,600,10\n2,600,10\n";
  std::ofstream(dir / "big.csv") << header << "0,11000,400\n" << rest;
  std::ofstream(dir / "small.csv") << header << rest;
  std::ofstream(dir / "bad.csv") << header << rest << "3,600,10,1\n";
  const std::string exp = (dir / "exp.textproto").string();
  const sim::Override dram{"chip.memory[0].capacity_bytes", "2200000000"};
  const sim::Experiment e = sim::LoadExperiment(exp, {dram});
  const ServeRun big = Serve(e);
  const ServeRun small =
      Serve(sim::LoadExperiment(exp, {dram, {"workload.requests.trace_file", "small.csv"}}));
  ASSERT_EQ(big.groups.size(), 2u);
  // Rejected for the decode group's capacity only: its prompt fits the prefill group's.
  EXPECT_LE((11000 + 15) / 16, big.groups[0].capacity_blocks);
  EXPECT_GT((11400 + 15) / 16, big.groups[1].capacity_blocks);
  ASSERT_EQ(big.outcome.requests.size(), 4u);
  EXPECT_TRUE(big.outcome.requests[0].rejected);
  EXPECT_EQ(big.outcome.requests[0].first_token_ps, -1);
  ASSERT_EQ(small.outcome.requests.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const RequestStats &b = big.outcome.requests[i + 1], &s = small.outcome.requests[i];
    EXPECT_FALSE(b.rejected);
    EXPECT_EQ(b.first_token_ps - b.arrival_ps, s.first_token_ps - s.arrival_ps) << i;
    EXPECT_EQ(b.finish_ps - b.arrival_ps, s.finish_ps - s.arrival_ps) << i;
  }
  EXPECT_EQ(big.groups[0].calls, small.groups[0].calls);  // no prefill iteration for the rejected one
  EXPECT_EQ(Summarize(big.outcome, 0, 0).rejected, 1u);
  const std::vector<std::string> caveats = Caveats(e.cfg, big);
  auto has = [&](const std::string& text) {
    return std::find(caveats.begin(), caveats.end(), text) != caveats.end();
  };
  EXPECT_TRUE(
      has("the prefill group's iterations are timed on 8 of 36 layers and scaled (one per stage; "
          "mapping.serving.layers_simulated sets it)"));
  EXPECT_TRUE(
      has("the decode group's iterations are timed on 1 of 36 layers and scaled (one per stage; "
          "mapping.serving.layers_simulated sets it)"));
  EXPECT_EQ(ServeCommand({exp, "--set", "chip.memory[0].capacity_bytes=2200000000", "--set",
                          "workload.requests.trace_file=bad.csv"}),
            2);
  fs::remove_all(dir);
}

// Caveats: every group with more than one stage is said not pipelined (the decode group of a
// disaggregated layout was not), and layers timed on fewer than the model's are said scaled
// whether mapping.serving.layers_simulated sets them or one per stage does (serving-fused times
// 16 of Qwen3-4B's 36 and said nothing).
TEST(Serving, CaveatsSayWhatAppliesToEachGroup) {
  config::Experiment cfg;
  cfg.mutable_model()->set_num_layers(36);
  ServeRun fused;
  fused.groups.push_back({});
  fused.groups[0].stages = 16;
  fused.groups[0].layers = 16;
  EXPECT_EQ(
      Caveats(cfg, fused),
      (std::vector<std::string>{
          "the group's iterations are not pipelined across its 16 stages (one iteration passes every stage "
          "before the next starts): throughput is understated, latency per iteration is not",
          "iterations are timed on 16 of 36 layers and scaled (one per stage; "
          "mapping.serving.layers_simulated "
          "sets it)"}));
  ServeRun dis;
  dis.groups.resize(2);
  for (auto& g : dis.groups) g.stages = g.layers = 8;
  const std::vector<std::string> c = Caveats(cfg, dis);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].rfind("the prefill group's iterations are not pipelined across its 8 stages", 0), 0u)
      << c[0];
  EXPECT_EQ(c[1].rfind("the decode group's iterations are not pipelined across its 8 stages", 0), 0u) << c[1];
  EXPECT_EQ(c[2].rfind("the prefill and decode groups do not contend", 0), 0u) << c[2];
  EXPECT_EQ(
      c[3],
      "iterations are timed on 8 of 36 layers and scaled (one per stage; mapping.serving.layers_simulated "
      "sets it)");
  // Set by layers_simulated: said as before; all 36 layers: nothing to say.
  cfg.mutable_mapping()->mutable_serving()->set_layers_simulated(4);
  for (auto& g : dis.groups) g.stages = 1, g.layers = 4;
  EXPECT_EQ(Caveats(cfg, dis).back(),
            "iterations are timed on 4 of 36 layers and scaled (mapping.serving.layers_simulated)");
  cfg.mutable_mapping()->mutable_serving()->set_layers_simulated(36);
  for (auto& g : dis.groups) g.layers = 36;
  EXPECT_EQ(Caveats(cfg, dis).size(), 1u);  // the groups' contention only
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

// A GPU node's KV capacity is its HBM less the weights: the core block's sram_bytes (the L2's
// size, a cache) is no room for KV. Before 2026-12-07 it counted: qwen3-4b at TP 8 on
// h100-sxm-8 had about 2,844 tokens more (52,428,800 B / 18,432 B a token; `tpsim serve` printed
// 288368 blocks of 16 tokens, now 288191).
TEST(Serving, GpuKvCapacityIsTheHbmLessTheWeights) {
  const std::string exp =
      std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/moe-qwen3-30b-a3b-h200.textproto";
  auto capacity = [&](const std::vector<sim::Override>& set) {
    const sim::Experiment e = sim::LoadExperiment(exp, set);
    const arch::Chip chip = arch::Chip::Build(e.cfg.chip(), e.locs);
    return KvCapacityTokens(chip, e.cfg.model(), e.cfg.mapping(), 1, "bf16");
  };
  const uint64_t base = capacity({});
  EXPECT_EQ(base, capacity({{"chip.core.sram_bytes", "524288000"}}));
  // By hand: per GPU 2 x 48 layers x 1 KV head (4 over TP 8) x 128 x 2 B = 24,576 B a token;
  // HBM 141 GiB (h200-sxm-8's capacity_bytes) less the GPU's weight shards.
  const sim::Experiment e = sim::LoadExperiment(exp, {});
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip(), e.locs);
  const mapping::WeightPlan plan = mapping::PlanWeights(chip, e.cfg.model(), e.cfg.mapping(), 0, "bf16");
  EXPECT_EQ(plan.layers_per_core, 48u);
  EXPECT_EQ(plan.kv_heads_per_core, 1u);
  const uint64_t hbm = chip.channels().at(0).capacity_bytes;
  EXPECT_EQ(base, (hbm - plan.weight_bytes_per_core) / 24576);
}

// Serving times each iteration on the memory plan of the model's stages, not of the simulated
// layers (LowerOptions::plan_layers). Qwen3-0.6B on mesh-4x4-hbm, tp 4 in 4 stages: a stage holds
// 7 of the 28 layers, 7 x 7.5 MiB = 52.5 MiB of weight shards per core, more than its 48 MiB of
// SRAM, so they are streamed from HBM whatever the layers simulated. Before, the default (one
// layer per stage, 7.5 MiB) kept them in SRAM: TPOT 1.898 ms, 15% under the 2.234 ms with all 28
// layers lowered and the 2230.902 us decode step of `tpsim run`. One request of 512 prompt
// tokens and 2 output tokens: its TPOT is one decode iteration at context 512. Lowered on 28
// layers it is run's decode step (the same layers, weights and KV placed alike: within 1%); on 4
// layers scaled x 7, each layer streams its weights as there, but the iteration's 3 stage sends
// and pipeline start are counted 7 times, not once: longer, and within 5% (4.1% here).
TEST(Serving, IterationsAreTimedOnTheModelsMemoryPlan) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tpsim_serving_plan_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string src = TPSIM_SOURCE_DIR;
  std::ofstream(dir / "exp.textproto")
      << "name: \"plan\"\n"
      << "chip_file: \"" << src << "/configs/chips/mesh-4x4-hbm.textproto\"\n"
      << "model_name: \"qwen3-0.6b\"\n"
      << "workload { dtype: \"bf16\" requests { trace_file: \"t.csv\" } }\n"
      << "mapping { tp: 4 pipeline_stages: 4 partition: \"megatron\" placement: \"ring\" collective: "
         "\"ring\" serving { mode: \"fused\" } }\n";
  std::ofstream(dir / "t.csv") << "arrival_s,prompt_tokens,output_tokens\n0,512,2\n";
  const std::string exp = (dir / "exp.textproto").string();
  auto tpot_ps = [&](const std::vector<sim::Override>& set) {
    const ServeRun run = Serve(sim::LoadExperiment(exp, set));
    EXPECT_EQ(run.outcome.requests.size(), 1u);
    const RequestStats& r = run.outcome.requests.at(0);
    return static_cast<double>(r.finish_ps - r.first_token_ps);
  };
  const double by_stage = tpot_ps({}), all = tpot_ps({{"mapping.serving.layers_simulated", "28"}});
  EXPECT_GE(by_stage, all);
  EXPECT_LT(by_stage / all, 1.05) << by_stage << " ps against " << all << " ps";

  // `tpsim run`'s decode step: the experiment with 1 decode step, less its prefill.
  const sim::Experiment e = sim::LoadExperiment(exp, {});
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip(), e.locs);
  config::Workload wl;
  wl.set_batch(1);
  wl.set_seq_len(512);
  wl.set_dtype("bf16");
  auto engine = sim::MakeEngine("analytical");
  const Ps prefill = engine->Run(mapping::Lower(chip, e.cfg.model(), wl, e.cfg.mapping()), chip).makespan_ps;
  wl.set_decode_steps(1);
  const Ps total = engine->Run(mapping::Lower(chip, e.cfg.model(), wl, e.cfg.mapping()), chip).makespan_ps;
  const double step = static_cast<double>(total - prefill);
  EXPECT_NEAR(all / step, 1.0, 0.01) << all << " ps against run's " << step << " ps";

  // The reference path (TPSIM_SERVE_NO_SKELETONS) and the skeletons' verify mode agree to the
  // picosecond on this layout's iterations.
  config::Mapping m = e.cfg.mapping();
  m.clear_serving();
  EngineCost fast(chip, e.cfg.model(), m, 4, "bf16", "analytical", 0),
      ref = {chip, e.cfg.model(), m, 4, "bf16", "analytical", 0};
  ref.set_use_skeletons(false);
  fast.set_verify(true);
  for (const std::vector<llm::SeqChunk>& c :
       std::vector<std::vector<llm::SeqChunk>>{{{512, 0}}, {{1, 512}}, {{1, 512}, {64, 0}}, {{1, 40000}}})
    EXPECT_EQ(fast(c), ref(c)) << c.size();

  // Weights pinned in SRAM must fit for the model's 7 layers a stage, not the one simulated.
  try {
    Serve(sim::LoadExperiment(exp, {{"mapping.weights", "sram"}}));
    ADD_FAILURE() << "accepted";
  } catch (const config::ConfigError& err) {
    ASSERT_EQ(err.diags().size(), 1u);
    EXPECT_EQ(err.diags()[0].field, "mapping.weights");
    EXPECT_NE(err.diags()[0].rule.find("each core of the stage with the most layers (7)"), std::string::npos)
        << err.diags()[0].rule;
  }
  fs::remove_all(dir);
}

// The KV counter drops to 0 when an iteration leaves nothing running and the next starts
// later: it held the last iteration's blocks through the idle gap. Fixed 1 ms iterations,
// blocks of 4 tokens: requests 0 and 1 (8 prompt tokens, 2 output) run iterations [0, 1) and
// [1, 2) ms, holding 2 blocks each as they prefill (3 blocks each in the decode: 9 tokens);
// request 2 arrives at 10 ms and runs [10, 11) and [11, 12).
TEST(ServingTrace, KvCounterDropsToZeroThroughIdleGaps) {
  const Ps ms = 1'000'000'000;
  const ServeOutcome out =
      RunFused({Req(0, 0, 8, 2), Req(1, 0, 8, 2), Req(2, 10 * ms, 8, 2)}, Cfg(100, 100, 4, 100), Fixed(ms));
  const std::vector<traces::CounterTrack> tracks = KvCounters(out);
  ASSERT_EQ(tracks.size(), 1u);
  const std::vector<std::pair<int64_t, double>> want = {{0, 4},       {ms, 6},      {2 * ms, 0},
                                                        {10 * ms, 2}, {11 * ms, 3}, {12 * ms, 0}};
  EXPECT_EQ(tracks[0].points, want);
}

// time_scale multiplies a trace's arrivals; a synthetic stream's come from its rate, and the
// field was ignored there (the same arrivals at time_scale 1000).
TEST(ServingRequests, TimeScaleIsRefusedForASyntheticStream) {
  config::RequestSource src;
  *src.mutable_synthetic() = Synth(1, 3);
  src.set_time_scale(1000);
  config::SourceMap locs("e.textproto");
  locs.Set("workload.requests.time_scale", {"e.textproto", 7, 5});
  std::vector<config::Diag> diags;
  ValidateRequestSource(src, locs, &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].str().rfind("e.textproto:7:5: workload.requests.time_scale: 1000: time_scale applies to "
                                 "trace files",
                                 0),
            0u)
      << diags[0].str();
  // 0 (unset) is accepted, and a trace takes a scale.
  src.set_time_scale(0);
  diags.clear();
  ValidateRequestSource(src, locs, &diags);
  EXPECT_TRUE(diags.empty());
  src.clear_synthetic();
  src.set_trace_file("t.csv");
  src.set_time_scale(1000);
  ValidateRequestSource(src, locs, &diags);
  EXPECT_TRUE(diags.empty());
}

// A synthetic length's fields that its dist does not read are refused at their field (--set
// workload.requests.synthetic.output_tokens.value=2000 on the shipped lognormal stream was
// accepted and changed nothing), but for what the file leaves behind where the dist itself is
// switched on the command line (--set ...dist=fixed --set ...value=N keeps working).
TEST(ServingRequests, FieldsADistDoesNotReadAreRefused) {
  config::RequestSource src;
  *src.mutable_synthetic() = Synth(1, 3);
  config::LengthDist* out = src.mutable_synthetic()->mutable_output_tokens();
  out->set_dist("lognormal");
  out->set_mu(4.8);
  out->set_sigma(0.5);
  out->set_min(4);
  out->set_max(1024);
  out->set_value(2000);
  config::SourceMap locs("e.textproto");
  const std::string o = "workload.requests.synthetic.output_tokens.";
  for (const char* f : {"dist", "mu", "sigma", "min", "max", "value"}) locs.Set(o + f, {"e.textproto", 9, 3});
  auto diags_of = [&] {
    std::vector<config::Diag> diags;
    ValidateRequestSource(src, locs, &diags);
    return diags;
  };
  auto d = diags_of();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(
      d[0].str(),
      "e.textproto:9:3: workload.requests.synthetic.output_tokens.value: 2000: dist lognormal does not read "
      "value (dist fixed does): set dist: \"fixed\" too, or remove it");
  // The same value given on the command line: at the command line.
  const config::Location cli{"<command line: --set " + o + "value=2000>", 1, 1};
  locs.Set(o + "value", cli);
  d = diags_of();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].where.file, cli.file);
  // dist fixed in the file: its min, max, mu and sigma are each refused.
  out->set_dist("fixed");
  locs.Set(o + "value", {"e.textproto", 9, 3});
  d = diags_of();
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].field, o + "min");
  EXPECT_EQ(d[0].value, "4");
  EXPECT_EQ(d[1].field, o + "max");
  EXPECT_EQ(d[2].field, o + "mu");
  EXPECT_EQ(d[2].value, "4.8");
  EXPECT_EQ(d[2].rule, "dist fixed does not read mu (dist lognormal does): remove it");
  EXPECT_EQ(d[3].field, o + "sigma");
  // Switched to fixed on the command line: the file's lognormal fields are left behind, not
  // refused; one given on the command line still is.
  locs.Set(o + "dist", {"<command line: --set " + o + "dist=fixed>", 1, 1});
  EXPECT_TRUE(diags_of().empty());
  locs.Set(o + "mu", {"<command line: --set " + o + "mu=3>", 1, 1});
  out->set_mu(3);
  d = diags_of();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].field, o + "mu");
  // uniform reads min and max only.
  out->set_dist("uniform");
  out->set_mu(0);
  out->set_value(0);
  locs.Set(o + "dist", {"e.textproto", 9, 3});
  d = diags_of();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].field, o + "sigma");
  EXPECT_EQ(d[0].rule, "dist uniform does not read sigma (dist lognormal does): remove it");
  out->set_sigma(0);
  EXPECT_TRUE(diags_of().empty());
}

// tpsim run's fixed-batch fields mean nothing with a request stream: each is refused at its
// field, naming what to set instead (they were silently ignored: --set workload.cached_prefix=4000
// changed nothing). batch 1, which the serving search's candidates carry, is no change.
TEST(Serving, RunWorkloadFieldsAreRefusedWithRequests) {
  const std::string fused = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto";
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"workload.num_layers", "mapping.serving.layers_simulated"},
      {"workload.batch", "mapping.serving.max_running_requests"},
      {"workload.seq_len", "prompt_tokens"},
      {"workload.cached_prefix", "prompt_tokens"},
      {"workload.decode_steps", "output_tokens"}};
  for (const auto& [field, instead] : fields) {
    SCOPED_TRACE(field);
    try {
      Serve(sim::LoadExperiment(fused, {{field, "4"}}));
      ADD_FAILURE() << "accepted";
    } catch (const config::ConfigError& e) {
      ASSERT_EQ(e.diags().size(), 1u);
      EXPECT_EQ(e.diags()[0].field, field);
      EXPECT_EQ(e.diags()[0].value, "4");
      EXPECT_EQ(e.diags()[0].where.file, "<command line: --set " + field + "=4>");
      EXPECT_NE(e.diags()[0].rule.find(instead), std::string::npos) << e.diags()[0].rule;
    }
  }
  EXPECT_NO_THROW(Serve(sim::LoadExperiment(
      fused, {{"workload.batch", "1"}, {"workload.requests.synthetic.num_requests", "2"}})));
  EXPECT_EQ(ServeCommand({fused, "--set", "workload.cached_prefix=4000"}), 2);
  // A `tpsim run` experiment served with a stream given on the command line keeps its file's
  // batch 1, seq_len 512 and decode_steps 16 (for tpsim run); one given with the stream is refused.
  const std::string run_exp =
      std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto";
  const std::vector<sim::Override> stream = {{"workload.requests.synthetic.num_requests", "2"},
                                             {"workload.requests.synthetic.rate_per_s", "1"},
                                             {"workload.requests.synthetic.prompt_tokens.value", "64"},
                                             {"workload.requests.synthetic.output_tokens.value", "2"},
                                             {"mapping.serving.layers_simulated", "4"}};
  EXPECT_EQ(Serve(sim::LoadExperiment(run_exp, stream)).outcome.requests.size(), 2u);
  std::vector<sim::Override> with_prefix = stream;
  with_prefix.push_back({"workload.cached_prefix", "4"});
  EXPECT_THROW(Serve(sim::LoadExperiment(run_exp, with_prefix)), config::ConfigError);
}

// The context rules sum cached_prefix, seq_len and decode_steps: said at the one given on the
// command line (it was the unchanged seq_len at its line in the file).
TEST(Serving, ContextRuleNamesTheFieldGivenOnTheCommandLine) {
  const std::string exp =
      std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto";
  auto diags_of = [&](const std::vector<sim::Override>& set) {
    std::vector<config::Diag> diags;
    sim::ValidateWorkload(sim::LoadExperiment(exp, set), &diags);
    return diags;
  };
  // 40960 + 512 + 16 = 41488 positions, past Qwen3-0.6B's 40960.
  auto d = diags_of({{"workload.cached_prefix", "40960"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(
      d[0].str(),
      "<command line: --set workload.cached_prefix=40960>:1:1: workload.cached_prefix: 40960: cached_prefix "
      "+ seq_len + decode_steps (41488) exceeds the model's max_position_embeddings (40960)");
  // Several given: the largest of them; none: seq_len at its line, as before.
  d = diags_of({{"workload.decode_steps", "40000"}, {"workload.cached_prefix", "1000"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].field, "workload.decode_steps");
  d = diags_of({{"model.max_position_embeddings", "100"}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].field, "workload.seq_len");
  EXPECT_EQ(d[0].where.file.rfind("<command line", 0), std::string::npos);
}

}  // namespace
}  // namespace tpsim::serving
