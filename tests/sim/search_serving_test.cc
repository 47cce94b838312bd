// tpsim search of a request stream (issue 19: every shipped experiment is searched, the
// serving ones too): each candidate is served as `tpsim serve` serves it, its point is the
// p99 request latency, TTFT and TPOT and the group's tokens/s, and a candidate that rejects
// a request is not feasible.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/search/search.h"
#include "sim/serving/serving.h"

namespace tpsim::search {
namespace {

// A shipped serving experiment with 24 requests instead of 200 (the same distributions).
sim::Experiment Served(const std::string& file, std::vector<sim::Override> sets = {}) {
  sets.push_back({"workload.requests.synthetic.num_requests", "24"});
  return sim::LoadExperiment(TPSIM_SOURCE_DIR "/configs/experiments/" + file, sets);
}

SearchOptions Small() {
  SearchOptions o;
  o.jobs = 2;
  o.space.partitions = {"megatron"};
  o.space.placements = {"ring"};
  o.space.collectives = {"ring"};
  o.space.spans = {"stage"};
  return o;
}

// Every candidate's point is what `tpsim serve` reports for its experiment (p99s, tokens/s),
// one replica, no energy; the shipped mapping (tp 4 x 16 stages) is one of them, so the
// best is no worse.
TEST(SearchServingTest, CandidatesAreServedAsTpsimServeServesThem) {
  const sim::Experiment e = Served("serving-fused.textproto");
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  SearchOptions o = Small();
  o.space.tp = {2, 4};
  o.space.stages = {8, 16};
  const SearchResult r = Search(e, chip, o, nullptr);
  EXPECT_EQ(r.candidates, 4u);
  EXPECT_EQ(r.ok, 4u);
  ASSERT_EQ(r.ranked.size(), 4u);
  double shipped = -1;
  for (const Found& f : r.ranked) {
    EXPECT_EQ(f.replicas, 1u);
    EXPECT_TRUE(std::isnan(f.p.energy_mj));
    const serving::Metrics m = serving::Summarize(serving::Serve(Apply(e, f.c)).outcome, 0, 0);
    EXPECT_EQ(m.rejected, 0u);
    EXPECT_EQ(f.p.total_ms, m.latency_ms[2]) << Apply(e, f.c).cfg.name();
    EXPECT_EQ(f.p.ttft_ms, m.ttft_ms[2]);
    EXPECT_EQ(f.p.tpot_ms, m.tpot_ms[2]);
    EXPECT_EQ(f.p.tokens_per_s, m.tokens_per_s);
    if (f.c.tp == 4 && f.c.stages == 16) shipped = f.p.total_ms;
  }
  ASSERT_GT(shipped, 0);
  EXPECT_LE(r.ranked.front().p.total_ms, shipped);
  for (size_t i = 1; i < r.ranked.size(); ++i) EXPECT_LE(r.ranked[i - 1].p.total_ms, r.ranked[i].p.total_ms);
}

// Disaggregated: a candidate's stages are the prefill group's and the decode group's, so
// it takes 2 x tp x stages cores: on 64 cores tp 8 x 8 stages (128) is not in the space.
TEST(SearchServingTest, DisaggregatedStagesAreEachGroups) {
  const sim::Experiment e = Served("serving-disaggregated.textproto");
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  SearchOptions o = Small();
  o.space.tp = {4, 8};
  o.space.stages = {4, 8};
  const std::vector<Candidate> space = Space(e, chip, o.space);
  std::vector<std::pair<uint32_t, uint32_t>> got;
  for (const Candidate& c : space) got.emplace_back(c.tp, c.stages);
  EXPECT_EQ(got, (std::vector<std::pair<uint32_t, uint32_t>>{{4, 4}, {4, 8}, {8, 4}}));
  const config::Mapping m = MappingOf(e.cfg.mapping(), space[0]);
  EXPECT_EQ(m.serving().prefill_stages(), 4u);
  EXPECT_EQ(m.serving().decode_stages(), 4u);
  EXPECT_EQ(m.serving().mode(), "disaggregated");
  // Searched, each candidate is served: --stages sets mapping.pipeline_stages beside the groups'
  // stages, which a --set of it (refused in mode disaggregated, which does not read it) is not.
  o.space.tp = {4};
  o.space.stages = {4};
  const SearchResult r = Search(e, chip, o, nullptr);
  EXPECT_EQ(r.ok, 1u);
  EXPECT_EQ(r.ranked.size(), 1u);
}

// A KV cache of 256 tokens holds none of these prompts (lognormal around 490 tokens, at
// least 16): candidates that reject requests run but are not feasible, whatever their
// latency over the requests they did serve.
TEST(SearchServingTest, RejectingRequestsIsNotFeasible) {
  const sim::Experiment e =
      Served("serving-fused.textproto", {{"mapping.serving.kv_capacity_tokens", "256"}});
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  SearchOptions o = Small();
  o.space.tp = {4};
  o.space.stages = {16};
  const serving::Metrics m = serving::Summarize(serving::Serve(e).outcome, 0, 0);
  ASSERT_GT(m.rejected, 0u);
  const SearchResult r = Search(e, chip, o, nullptr);
  EXPECT_EQ(r.ok, 1u);
  EXPECT_TRUE(r.ranked.empty());
  EXPECT_TRUE(r.front.empty());
}

}  // namespace
}  // namespace tpsim::search
