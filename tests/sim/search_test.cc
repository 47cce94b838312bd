// tpsim search (issue 19 item 3): the Pareto front, the lower bounds, the space, and that
// pruning and resuming change nothing the search reports.
#include "sim/search/search.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "result.pb.h"
#include "sim/run.h"

namespace tpsim::search {
namespace {

const std::string kExperiment =
    std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto";

// mesh-4x4-hbm made compute-bound so that the compute roofline is tight enough to prune:
// 16x16 systolic arrays at 1 GHz, utilization 1, wide links and vector units; Qwen3-0.6B,
// 2 layers, a 1024-token prompt, no decode.
sim::Experiment ComputeBound(bool energy = false) {
  sim::Experiment e = sim::LoadExperiment(kExperiment, {{"chip.core.systolic_rows", "16"},
                                                        {"chip.core.systolic_cols", "16"},
                                                        {"chip.core.matrix_utilization", "1"},
                                                        {"chip.core.vector_lanes", "4096"},
                                                        {"chip.core.sram_bandwidth_gbps", "0"},
                                                        {"chip.noc.link_bandwidth_gbps", "4096"},
                                                        {"mapping.pipeline_stages", "1"},
                                                        {"workload.num_layers", "2"},
                                                        {"workload.seq_len", "1024"},
                                                        {"workload.decode_steps", "0"}});
  // Without the chip's energy model the front is (latency, tokens/s): the compute bound
  // alone then prunes. With it, energy per token is a third column (its bound: the MACs'
  // energy).
  if (!energy) e.cfg.mutable_chip()->clear_energy();
  return e;
}

SearchOptions SmallSpace() {
  SearchOptions o;
  o.jobs = 2;
  o.space.tp = {1, 2, 4, 8};
  o.space.stages = {1, 2};
  o.space.partitions = {"n_split", "k_split"};
  o.space.placements = {"ring", "snake"};
  o.space.collectives = {"ring", "bidirectional_ring"};
  return o;
}

std::string Key(const Found& f) {
  return std::to_string(f.index) + ":" + std::to_string(f.p.total_ms) + ":" +
         std::to_string(f.p.tokens_per_s);
}

TEST(SearchTest, ParetoFrontHandExample) {
  // (latency, throughput): (1, 10) and (2, 20) trade off; (2, 5) is beaten by (1, 10),
  // (3, 20) by (2, 20); the duplicate (1, 10) stays (ties are not dominated).
  const std::vector<std::vector<double>> lat = {{1, 2, 2, 3, 1}};
  const std::vector<std::vector<double>> thr = {{10, 20, 5, 20, 10}};
  EXPECT_EQ(ParetoFront(lat, thr), (std::vector<size_t>{0, 1, 4}));
}

TEST(SearchTest, SpaceSizeAndReplicas) {
  const sim::Experiment e = ComputeBound();
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  // 4 tp x 2 stages (all within 16 cores and 2 layers) x 2 x 2 partitions x 2 placements x
  // 2 collectives, times the spans: stage, chip:stage_major and chip:tp_major with 2
  // stages, the first two with 1 (one stage: both chip orders are the same):
  // 16 x (4 x 3 + 4 x 2) = 320.
  const std::vector<Candidate> space = Space(e, chip, SmallSpace().space);
  EXPECT_EQ(space.size(), 320u);
  SpaceOptions local = SmallSpace().space;
  local.spans = {"stage"};
  EXPECT_EQ(Space(e, chip, local).size(), 128u);
  Candidate c;
  c.tp = 4;
  c.stages = 2;
  EXPECT_EQ(Replicas(chip, c), 2u);  // 16 cores / 8
  c.tp = 8;
  EXPECT_EQ(Replicas(chip, c), 1u);
}

TEST(SearchTest, AttentionReplicasCountInTheStage) {
  // The experiment's mapping.attention_dp = 2 (not searched): a stage has tp x 2 cores, so
  // tp 8 x 2 stages (32 cores) no longer fits the 16 cores: of SmallSpace()'s (tp, stages)
  // pairs those with tp x 2 x stages <= 16 remain: (1, 1..2), (2, 1..2), (4, 1..2), (8, 1):
  // 7 pairs (3 with 2 stages: 3 spans; 4 with 1: 2 spans), 16 x (3 x 3 + 4 x 2) = 272
  // candidates. Replicas: 16 / (4 x 2 x 2) = 1. No bound.
  sim::Experiment e = ComputeBound();
  e.cfg.mutable_mapping()->set_attention_dp(2);
  e.cfg.mutable_workload()->set_batch(2);
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  const std::vector<Candidate> space = Space(e, chip, SmallSpace().space);
  EXPECT_EQ(space.size(), 272u);
  for (const Candidate& c : space) {
    ASSERT_EQ(c.attention_dp, 2u);
    ASSERT_LE(c.tp * 2 * c.stages, 16u);
  }
  Candidate c = space.front();
  c.tp = 4;
  c.stages = 2;
  EXPECT_EQ(Replicas(chip, c), 1u);
  const Bounds b = LowerBounds(e, chip, c);
  EXPECT_EQ(b.prefill_ps, 0.0);
}

TEST(SearchTest, AttentionReplicasAreAnAxis) {
  // --attention-dp 1,2,4 at batch 2: D = 4 does not divide the batch and is left out; D = 1
  // gives every (tp, stages) pair of SmallSpace() (tp x stages <= 16: 4 pairs with 2 stages,
  // 3 spans; 4 with 1, 2 spans): 16 x (4 x 3 + 4 x 2) = 320, and D = 2 the 272 above.
  sim::Experiment e = ComputeBound();
  e.cfg.mutable_workload()->set_batch(2);
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  SpaceOptions o = SmallSpace().space;
  o.attention_dp = {1, 2, 4};
  const std::vector<Candidate> space = Space(e, chip, o);
  EXPECT_EQ(space.size(), 320u + 272u);
  size_t with_dp = 0;
  for (const Candidate& c : space) with_dp += c.attention_dp == 2;
  EXPECT_EQ(with_dp, 272u);
  // A candidate's mapping carries its D, and D changes the Program.
  Candidate one = space.front(), two = space.front();
  two.attention_dp = 2;
  EXPECT_EQ(MappingOf(e.cfg.mapping(), two).attention_dp(), 2u);
  EXPECT_EQ(MappingOf(e.cfg.mapping(), one).attention_dp(), 0u);
  EXPECT_NE(ProgramKey(e, chip, one), ProgramKey(e, chip, two));
}

TEST(SearchTest, ComputeBoundByHand) {
  const sim::Experiment e = ComputeBound();
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  Candidate c;
  c.tp = 4;
  c.stages = 1;
  c.batch = 1;
  c.attention = c.mlp = "n_split";
  c.placement = "ring";
  c.collective = "ring";
  // Qwen3-0.6B weight GEMMs per layer (k x n): q 1024x2048, k and v 1024x1024, o
  // 2048x1024, gate, up 1024x3072 and down 3072x1024: 15,728,640 parameters, 12,288
  // output columns. With m = 1024 tokens on 16 x 16 arrays: tile-steps m x 15,728,640 /
  // 256 = 62,914,560 cycles, plus (16 + 16) cycles of fill for each of m x 12,288 / 256
  // tiles: 1,572,864; 64,487,424 cycles a layer, x 2 layers x 1000 ps over 4 cores =
  // 32,243,712,000 ps.
  const Bounds b = LowerBounds(e, chip, c);
  EXPECT_DOUBLE_EQ(b.prefill_ps, 32243712000.0);
  EXPECT_DOUBLE_EQ(b.decode_step_ps, 0.0);
  EXPECT_DOUBLE_EQ(b.total_ps, 32243712000.0);  // weights stay in SRAM: no memory bound
  EXPECT_DOUBLE_EQ(b.energy_per_token_j, 0.0);  // energy model cleared
  // With mesh-4x4-hbm's energy block (mac_bf16_pj 0.116): per token of the 1024, 2 layers x
  // 15,728,640 MACs x 0.116 pJ = 3.64904448e-6 J.
  const sim::Experiment with_energy = ComputeBound(/*energy=*/true);
  EXPECT_NEAR(LowerBounds(with_energy, arch::Chip::Build(with_energy.cfg.chip()), c).energy_per_token_j,
              3.64904448e-6, 1e-15);
}

// Every bound (total, TTFT, TPOT, energy) is at most what the engine gave, for every
// simulated candidate.
void ExpectBoundsBelow(const sim::Experiment& e, const arch::Chip& chip, const SearchResult& r) {
  for (const Found& f : r.ranked) {
    const Bounds b = LowerBounds(e, chip, f.c);
    EXPECT_LE(b.total_ps * 1e-9, f.p.total_ms * (1 + 1e-12)) << f.index;
    EXPECT_LE(b.prefill_ps * 1e-9, f.p.ttft_ms * (1 + 1e-12)) << f.index;
    EXPECT_LE(b.decode_step_ps * 1e-9, f.p.tpot_ms * (1 + 1e-12)) << f.index;
    if (std::isfinite(f.p.energy_mj)) {
      EXPECT_LE(b.energy_per_token_j * 1e3, f.p.energy_mj * (1 + 1e-12)) << f.index;
    }
  }
}

struct PrunedAndExhaustive {
  SearchResult pruned, exhaustive;
};

// Searches SmallSpace() with and without pruning for `objective`; both must give the same
// front and the same best.
PrunedAndExhaustive ExpectPruningKeepsTheFront(const sim::Experiment& e, const arch::Chip& chip,
                                               const std::string& objective) {
  SearchOptions pruned = SmallSpace();
  SearchOptions exhaustive = SmallSpace();
  exhaustive.prune = false;
  pruned.objective = exhaustive.objective = objective;
  PrunedAndExhaustive r{Search(e, chip, pruned, nullptr), Search(e, chip, exhaustive, nullptr)};
  const SearchResult& a = r.pruned;
  const SearchResult& x = r.exhaustive;
  EXPECT_EQ(a.front.size(), x.front.size()) << objective;
  for (size_t i = 0; i < a.front.size() && i < x.front.size(); ++i)
    EXPECT_EQ(Key(a.front[i]), Key(x.front[i])) << objective;
  EXPECT_FALSE(a.ranked.empty());
  EXPECT_FALSE(x.ranked.empty());
  if (!a.ranked.empty() && !x.ranked.empty()) {
    EXPECT_EQ(Key(a.ranked[0]), Key(x.ranked[0])) << objective;
  }
  return r;
}

TEST(SearchTest, PruningKeepsTheFrontAndTheBest) {
  const sim::Experiment e = ComputeBound();
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  for (const char* objective : {"latency", "throughput"}) {
    const PrunedAndExhaustive r = ExpectPruningKeepsTheFront(e, chip, objective);
    EXPECT_GT(r.pruned.pruned, 0u) << objective << ": the test needs pruning to happen";
    EXPECT_EQ(r.exhaustive.pruned, 0u);
    EXPECT_EQ(r.exhaustive.ok, 320u);
    ExpectBoundsBelow(e, chip, r.exhaustive);
  }
}

// A decode step of one token on the same chip: m = 1 streams every weight through the
// 16 columns, n x k / 16 cycles, plus 32 cycles of fill per 1 x 16 tile: per layer
// 15,728,640 / 16 + 32 x 12,288 / 16 = 1,007,616 cycles; 2 layers over 4 cores at
// 1000 ps = 503,808,000 ps a step.
TEST(SearchTest, DecodeStepBoundByHand) {
  sim::Experiment e = ComputeBound();
  e.cfg.mutable_workload()->set_decode_steps(3);
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  Candidate c;
  c.tp = 4;
  c.stages = 1;
  c.attention = c.mlp = "n_split";
  c.placement = c.collective = "ring";
  const Bounds b = LowerBounds(e, chip, c);
  EXPECT_DOUBLE_EQ(b.decode_step_ps, 503808000.0);
  EXPECT_DOUBLE_EQ(b.total_ps, 32243712000.0 + 3 * 503808000.0);
}

// The candidate that is experiment e's own mapping with mn_2d for attention and the MLP.
Candidate Mn2dCandidateOf(const sim::Experiment& e) {
  const config::Mapping& m = e.cfg.mapping();
  Candidate c;
  c.tp = m.tp();
  c.stages = m.pipeline_stages();
  c.batch = e.cfg.workload().batch();
  c.attention = c.mlp = "mn_2d";
  c.placement = m.placement();
  c.collective = m.collective();
  return c;
}

// The bound plans the weights as the run does (mapping::PlanWeights with the candidate's
// workload: the rows of its steps decide each GEMM's partitioner). mesh-4x4-hbm with mn_2d, 16
// layers and a 511-token prompt: every step falls back to n_split (511 and 1 rows do not divide
// by the grid's 2 rows), whose shards (30.0 MiB a core) stay in SRAM; sized at 0 rows (mn_2d's
// replicated shards, 60.0 MiB) they streamed, and the bound added weight reads the run never
// makes: with 20 GB/s HBM, 125.8 ms against the run's 19.6 ms. A lower bound must not exceed
// the run's own time.
TEST(SearchTest, BoundPlansTheWeightsAsTheRunDoes) {
  sim::Experiment e = sim::LoadExperiment(
      std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto",
      {{"mapping.partition", "mn_2d"},
       {"workload.num_layers", "16"},
       {"workload.seq_len", "511"},
       {"chip.memory[0].bandwidth_gbps", "20"},
       {"chip.memory[1].bandwidth_gbps", "20"}});
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  const Candidate c = Mn2dCandidateOf(e);
  const Bounds b = LowerBounds(e, chip, c);
  const config::Summary run = sim::RunSummary(e, "analytical", nullptr);
  EXPECT_GT(b.total_ps, 0);
  EXPECT_LE(b.total_ps, static_cast<double>(run.total_ps()));
  EXPECT_LE(b.decode_step_ps, static_cast<double>(run.decode_step_ps_mean()));
}

// A plan that keeps the decode steps' layout (n_split, 7 layers x 7.5 MiB a core at 64 MiB of
// SRAM) and streams the prefill's mn_2d shards (7 x 15 MiB a core, 4 stages of 4 cores): the
// prefill reads them through the channels, so its bound is at least their bytes over the
// channels' bandwidth (2 x 20 GB/s here), and still no more than the run's prefill.
TEST(SearchTest, BoundCountsTheStreamedLayoutOfATwoLayoutPlan) {
  sim::Experiment e = sim::LoadExperiment(
      std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto",
      {{"mapping.partition", "mn_2d"},
       {"chip.core.sram_bytes", "67108864"},
       {"chip.memory[0].bandwidth_gbps", "20"},
       {"chip.memory[1].bandwidth_gbps", "20"}});
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  const Candidate c = Mn2dCandidateOf(e);
  double gbps = 0;
  for (const arch::MemoryChannel& ch : chip.channels()) gbps += ch.bandwidth_gbps;
  ASSERT_LE(chip.channels().size(), 16u);  // every channel counts (min(channels, tp x stages))
  const double streamed = 4.0 * 4 * 7 * 15 * 1024 * 1024;  // stages x cores x layers x 15 MiB
  const Bounds b = LowerBounds(e, chip, c);
  const config::Summary run = sim::RunSummary(e, "analytical", nullptr);
  EXPECT_EQ(run.weights_location(), "sram (the prefill's layout streamed each use)");
  EXPECT_GE(b.prefill_ps, streamed * 1000.0 / gbps * (1 - 1e-12));
  EXPECT_LE(b.prefill_ps, static_cast<double>(run.prefill_ps()));
  EXPECT_LE(b.total_ps, static_cast<double>(run.total_ps()));
  EXPECT_LE(b.decode_step_ps, static_cast<double>(run.decode_step_ps_mean()));
}

// Shipped chips, where weights stream from DRAM and decode steps are bound by the weight
// reads and the m = 1 GEMMs: wafer-8x8 (a channel stacked under every core) and
// mesh-4x4-hbm (HBM stacks at the edges, shared by the cores). A small space, 2 layers.
sim::Experiment Shipped(const std::string& file) {
  return sim::LoadExperiment(std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/" + file,
                             {{"workload.num_layers", "2"},
                              {"workload.seq_len", "64"},
                              {"workload.decode_steps", "4"},
                              {"mapping.weights", "dram"}});
}

TEST(SearchTest, ShippedChipsPruneToTheExhaustiveFront) {
  for (const char* file : {"reference-qwen3-4b.textproto", "mesh-4x4-hbm-qwen3-0.6b.textproto"}) {
    const sim::Experiment e = Shipped(file);
    const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
    SearchOptions pruned;
    pruned.jobs = 2;
    pruned.space.tp = {1, 2, 4, 8};
    pruned.space.stages = {1, 2};
    pruned.space.partitions = {"n_split", "k_split"};
    pruned.space.placements = {"linear"};
    pruned.space.collectives = {"ring"};
    pruned.space.spans = {"stage"};
    SearchOptions exhaustive = pruned;
    exhaustive.prune = false;
    for (const char* objective : {"latency", "tpot"}) {
      pruned.objective = exhaustive.objective = objective;
      const SearchResult a = Search(e, chip, pruned, nullptr);
      const SearchResult x = Search(e, chip, exhaustive, nullptr);
      ASSERT_EQ(a.front.size(), x.front.size()) << file << " " << objective;
      for (size_t i = 0; i < a.front.size(); ++i) EXPECT_EQ(Key(a.front[i]), Key(x.front[i])) << file;
      ASSERT_FALSE(a.ranked.empty());
      EXPECT_EQ(Key(a.ranked[0]), Key(x.ranked[0])) << file << " " << objective;
      EXPECT_EQ(x.ok, 32u) << file;
      ExpectBoundsBelow(e, chip, x);
    }
  }
}

TEST(SearchTest, EnergyColumnKeepsTheFrontUnderPruning) {
  const sim::Experiment e = ComputeBound(/*energy=*/true);
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  for (const char* objective : {"latency", "energy"}) {
    const PrunedAndExhaustive r = ExpectPruningKeepsTheFront(e, chip, objective);
    for (const Found& f : r.exhaustive.ranked) {
      EXPECT_TRUE(std::isfinite(f.p.energy_mj));
      EXPECT_LE(LowerBounds(e, chip, f.c).energy_per_token_j * 1e3, f.p.energy_mj * (1 + 1e-12)) << f.index;
    }
  }
}

// The work is shared by two orders: ascending bound (the largest tp first: the compute
// bound falls with tp) and ascending estimated Program size (tp 1 first). With a budget of
// two simulations, the first of each runs.
TEST(SearchTest, TheBoundOrderAndTheCheapOrderShareTheWork) {
  const sim::Experiment e = ComputeBound();
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  SearchOptions o = SmallSpace();
  o.budget = 2;
  const SearchResult r = Search(e, chip, o, nullptr);
  EXPECT_EQ(r.simulated, 2u);
  std::set<uint32_t> tps;
  for (const Found& f : r.ranked) tps.insert(f.c.tp);
  EXPECT_EQ(tps, (std::set<uint32_t>{1, 8}));
}

TEST(SearchTest, ResumeFromTheStoreGivesTheSameFront) {
  const sim::Experiment e = ComputeBound();
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  const std::filesystem::path db =
      std::filesystem::temp_directory_path() / ("search_test_" + std::to_string(getpid()) + ".sqlite");
  std::filesystem::remove(db);
  SearchOptions o = SmallSpace();
  o.db = db.string();
  const SearchResult first = Search(e, chip, o, nullptr);
  const SearchResult again = Search(e, chip, o, nullptr);
  EXPECT_EQ(first.reused, 0u);
  EXPECT_EQ(again.reused, again.simulated);
  ASSERT_EQ(first.front.size(), again.front.size());
  for (size_t i = 0; i < first.front.size(); ++i) EXPECT_EQ(Key(first.front[i]), Key(again.front[i]));
  std::filesystem::remove(db);
}

// A candidate's identity in the store covers the files it reads beyond its resolved text (here
// an MoE routing trace), as a sweep point's does: a search rerun on the same store after the
// trace was edited simulates again and gives the new trace's front. It reused the old rows
// ("5 from store") and printed the old front.
TEST(SearchTest, AnEditedRoutingTraceIsSimulatedAgainNotReused) {
  const std::string tag = std::to_string(getpid());
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("search_trace_test_" + tag);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string trace = (dir / "r.csv").string(), db = (dir / "s.sqlite").string();
  // One line per layer, 128 experts: every token to expert 0, or spread evenly.
  auto write_trace = [&](bool hot) {
    std::ofstream out(trace);
    for (int layer = 0; layer < 2; ++layer) {
      out << layer;
      for (int x = 0; x < 128; ++x) out << "," << (hot ? (x == 0 ? 512 : 0) : 4);
      out << "\n";
    }
  };
  const sim::Experiment e =
      sim::LoadExperiment(std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/moe-qwen3-30b-a3b.textproto",
                          {{"workload.num_layers", "2"},
                           {"workload.seq_len", "64"},
                           {"mapping.pipeline_stages", "1"},
                           {"mapping.moe.routing", "trace"},
                           {"mapping.moe.routing_file", trace}});
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  SearchOptions o;
  o.jobs = 2;
  o.space.tp = {16};
  o.space.stages = {1};
  o.space.ep = {4, 16};
  o.space.partitions = {"megatron"};
  o.space.placements = {"ring"};
  o.space.collectives = {"ring"};
  o.space.spans = {"stage"};
  o.db = db;
  write_trace(true);
  const SearchResult hot = Search(e, chip, o, nullptr);
  write_trace(false);
  const SearchResult even = Search(e, chip, o, nullptr);
  SearchOptions fresh_o = o;
  fresh_o.db.clear();
  const SearchResult fresh = Search(e, chip, fresh_o, nullptr);
  EXPECT_EQ(hot.reused, 0u);
  EXPECT_GT(even.simulated, 0u);
  EXPECT_EQ(even.reused, 0u) << "the edited trace's candidates were taken from the store";
  ASSERT_FALSE(hot.front.empty());
  ASSERT_EQ(even.front.size(), fresh.front.size());
  for (size_t i = 0; i < even.front.size(); ++i) EXPECT_EQ(Key(even.front[i]), Key(fresh.front[i]));
  EXPECT_NE(Key(hot.front.front()), Key(even.front.front())) << "the traces should time differently";
  // Unchanged, the trace's candidates are reused.
  const SearchResult again = Search(e, chip, o, nullptr);
  EXPECT_EQ(again.reused, again.simulated);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tpsim::search

namespace tpsim::search {
namespace {

// Candidates with equal ProgramKeys lower the same Program: running one of them and copying
// its metrics gives every candidate exactly what running it gives. tp 1 and 2 on wafer-8x8
// (placements that give the same cores, collectives that do nothing at tp 1).
TEST(SearchTest, SharedProgramsGiveTheSameMetrics) {
  const sim::Experiment e = Shipped("reference-qwen3-4b.textproto");
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  SearchOptions share;
  share.jobs = 2;
  share.prune = false;
  share.space.tp = {1, 2};
  share.space.stages = {1, 2};
  share.space.partitions = {"n_split", "mn_2d", "m_split_rotate"};
  share.space.placements = {"linear", "snake", "ring"};
  share.space.collectives = {"ring", "bidirectional_ring"};
  share.space.spans = {"stage", "chip:stage_major"};
  SearchOptions each = share;
  each.share = false;
  // Some candidates share a Program although their placements give different rank grids
  // (a stage's region of 1 x 2 cores against the wafer-wide order's none): no ring reads the
  // grid (ProgramKey). The metrics below show they lower the same Program.
  std::map<std::string, std::set<std::string>> placed_by_key;
  for (const Candidate& c : Space(e, chip, share.space))
    placed_by_key[ProgramKey(e, chip, c)].insert(PlacedCores(e, chip, c));
  size_t across_grids = 0;
  for (const auto& [key, placed] : placed_by_key) across_grids += placed.size() > 1;
  EXPECT_GT(across_grids, 0u);
  const SearchResult a = Search(e, chip, share, nullptr);
  const SearchResult b = Search(e, chip, each, nullptr);
  EXPECT_EQ(b.shared, 0u);
  EXPECT_EQ(b.simulated,
            432u);  // 4 (tp, stages) x 9 partition pairs x 3 placements x 2 spans x 2 collectives
  EXPECT_GT(a.shared, a.simulated) << "most of this space shares Programs";
  EXPECT_EQ(a.shared + a.simulated, b.simulated);
  ASSERT_EQ(a.ranked.size(), b.ranked.size());
  std::map<size_t, Point> each_point;
  for (const Found& f : b.ranked) each_point[f.index] = f.p;
  for (const Found& f : a.ranked) {
    const Point& p = each_point.at(f.index);
    EXPECT_EQ(f.p.total_ms, p.total_ms) << f.index;
    EXPECT_EQ(f.p.ttft_ms, p.ttft_ms) << f.index;
    EXPECT_EQ(f.p.tpot_ms, p.tpot_ms) << f.index;
    EXPECT_EQ(f.p.energy_mj, p.energy_mj) << f.index;
  }
}

// The rank grids of a placement (" gRxC" after each stage's cores) are part of the key only
// where a collective reads them: mesh_2d on a group of more than one rank, and MoE models.
TEST(SearchTest, ProgramKeyKeepsTheGridOnlyWhereACollectiveReadsIt) {
  Candidate c;
  c.tp = 2;
  c.stages = 2;
  c.attention = c.mlp = "n_split";
  c.weights = "auto";
  c.collective = "ring";
  const std::string region = "| 0 1 g1x2| 2 3 g1x2", chip = "| 0 1 g0x0| 2 3 g0x0";
  // The key: tp, attention_dp, ep, moe_tp, all_to_all, group_order (both "" here), stages,
  // weights, batch, partitions, collective, cores.
  EXPECT_EQ(ProgramKey(c, region), "2 1 0 0   2 auto 1 n_split n_split ring | 0 1| 2 3");
  EXPECT_EQ(ProgramKey(c, region), ProgramKey(c, chip));
  c.collective = "mesh_2d";
  EXPECT_EQ(ProgramKey(c, region), "2 1 0 0   2 auto 1 n_split n_split mesh_2d | 0 1 g1x2| 2 3 g1x2");
  EXPECT_NE(ProgramKey(c, region), ProgramKey(c, chip));
  c.collective = "ring";
  c.ep = 2;  // MoE: the all-to-alls may read the grid
  EXPECT_NE(ProgramKey(c, region), ProgramKey(c, chip));
  // One core per stage: no collective, whatever its name (nor in the key).
  c.ep = 0;
  c.tp = 1;
  c.collective = "mesh_2d";
  EXPECT_EQ(ProgramKey(c, "| 0 g1x1| 1 g1x1"), "1 1 0 0   2 auto 1 n_split n_split | 0| 1");
  c.collective = "ring";
  EXPECT_EQ(ProgramKey(c, "| 0 g0x0| 1 g0x0"), "1 1 0 0   2 auto 1 n_split n_split | 0| 1");
  EXPECT_EQ(ProgramKey(c, ""), "");  // a placement that cannot be met
}

// One stage, megatron, ring placement and collective, per-stage span, every candidate run:
// the MoE tests' space but for the axes each sets.
SearchOptions OneStageMegatronRing() {
  SearchOptions o;
  o.jobs = 2;
  o.prune = false;
  o.space.stages = {1};
  o.space.partitions = {"megatron"};
  o.space.placements = {"ring"};
  o.space.collectives = {"ring"};
  o.space.spans = {"stage"};
  return o;
}

// MoE models: the space has an expert-parallel axis. Qwen3-30B-A3B (128 experts) on wafer-8x8:
// tp 1, 2, 4, 8 give the stage 1, 2, 4, 8 ranks and ep every power of two up to them: 1 + 2 +
// 3 + 4 = 10 (tp, ep) pairs; --ep 2,3 keeps ep 2 where it divides the ranks (3 divides
// neither 128 nor a power of two): tp 2, 4, 8. Searched (tp 4, 1 stage, 2 layers), every
// candidate runs and the best writes its ep and the default moe.tp (0: the ranks / ep).
TEST(SearchTest, MoeModelsSearchTheExpertParallelDegree) {
  const sim::Experiment e = Shipped("moe-qwen3-30b-a3b.textproto");
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  SearchOptions o = OneStageMegatronRing();
  o.space.tp = {1, 2, 4, 8};
  const std::vector<Candidate> space = Space(e, chip, o.space);
  ASSERT_EQ(space.size(), 10u);
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  for (const Candidate& c : space) pairs.emplace_back(c.tp, c.ep);
  EXPECT_EQ(pairs, (std::vector<std::pair<uint32_t, uint32_t>>{
                       {1, 1}, {2, 1}, {2, 2}, {4, 1}, {4, 2}, {4, 4}, {8, 1}, {8, 2}, {8, 4}, {8, 8}}));
  SpaceOptions only = o.space;
  only.ep = {2, 3};
  EXPECT_EQ(Space(e, chip, only).size(), 3u);
  o.space.tp = {4};
  const SearchResult r = Search(e, chip, o, nullptr);
  EXPECT_EQ(r.simulated, 3u);
  EXPECT_EQ(r.ok, 3u);
  ASSERT_FALSE(r.ranked.empty());
  const config::Mapping m = MappingOf(e.cfg.mapping(), r.ranked.front().c);
  EXPECT_EQ(m.moe().ep(), r.ranked.front().c.ep);
  EXPECT_EQ(m.moe().tp(), 0u);
}

// Qwen3-30B-A3B's layers are all sparse: the MLP's partitioner partitions nothing (the MoE block
// is split by ep), so (attention k_split, MLP megatron) times as (k_split, k_split), and the
// space keeps the pairs with one partitioner: 2 candidates of 2 partitioners, not 4. With every
// second layer dense (model.decoder_sparse_step 2) the MLP's partitioner counts: 4.
TEST(SearchTest, AllSparseMoeModelsSearchOnePartitionerPair) {
  const sim::Experiment e = Shipped("moe-qwen3-30b-a3b.textproto");
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  SpaceOptions o = OneStageMegatronRing().space;
  o.tp = {4};
  o.ep = {4};
  o.partitions = {"megatron", "k_split"};
  const std::vector<Candidate> space = Space(e, chip, o);
  ASSERT_EQ(space.size(), 2u);
  for (const Candidate& c : space) EXPECT_EQ(c.attention, c.mlp);
  Candidate mixed = space.front();
  mixed.attention = "k_split";
  mixed.mlp = "megatron";
  Candidate same = mixed;
  same.mlp = "k_split";
  const config::Result a = sim::RunExperiment(Apply(e, mixed), {}).result;
  const config::Result b = sim::RunExperiment(Apply(e, same), {}).result;
  EXPECT_EQ(a.summary().SerializeAsString(), b.summary().SerializeAsString());
  EXPECT_EQ(a.ops_size(), b.ops_size());
  Candidate megatron = same;  // the attention's partitioner does count
  megatron.attention = megatron.mlp = "megatron";
  EXPECT_NE(sim::RunExperiment(Apply(e, megatron), {}).result.summary().total_ps(), a.summary().total_ps());
  const sim::Experiment dense_half =
      sim::LoadExperiment(std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/moe-qwen3-30b-a3b.textproto",
                          {{"workload.num_layers", "2"},
                           {"workload.seq_len", "64"},
                           {"workload.decode_steps", "4"},
                           {"model.decoder_sparse_step", "2"}});
  EXPECT_EQ(Space(dense_half, chip, o).size(), 4u);
}

// Energy per token is the chip's with every replica running, as tokens/s per chip assumes.
// Each candidate runs as one replica and is charged the whole chip's static power, which R
// replicas share: (R x (E - S) + S) / (R x tokens) from the one-replica run's energy E and
// static energy S. It printed E / tokens, so TP 1 (16 replicas) looked 16x costlier in static
// energy than it is.
TEST(SearchTest, EnergyPerTokenSharesStaticPowerAmongReplicas) {
  sim::Experiment e = ComputeBound(/*energy=*/true);
  e.cfg.mutable_chip()->mutable_energy()->set_core_static_w(2.5);  // mesh-4x4-hbm gives none
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  SearchOptions o = OneStageMegatronRing();
  o.space.tp = {1, 16};
  o.objective = "energy";
  const SearchResult r = Search(e, chip, o, nullptr);
  ASSERT_EQ(r.ranked.size(), 2u);
  const double tokens = 1024;  // batch 1 x a 1024-token prompt, no decode
  for (const Found& f : r.ranked) {
    EXPECT_EQ(f.replicas, 16u / f.c.tp);
    const config::Summary s = sim::RunExperiment(Apply(e, f.c), {}).result.summary();
    ASSERT_GT(s.static_energy_j(), 0);
    const double R = f.replicas;
    const double want_mj =
        (R * (s.energy_j() - s.static_energy_j()) + s.static_energy_j()) / (R * tokens) * 1e3;
    EXPECT_NEAR(f.p.energy_mj, want_mj, want_mj * 1e-11) << "tp " << f.c.tp;
    if (f.replicas == 1) {
      EXPECT_NEAR(f.p.energy_mj, s.energy_per_token_j() * 1e3, want_mj * 1e-11);
    } else {
      EXPECT_LT(f.p.energy_mj, s.energy_per_token_j() * 1e3 * (1 - 1e-6));
    }
  }
}

TEST(SearchTest, MoeAttentionReplicasAreSearched) {
  // moe-qwen3-30b-a3b-dp (batch 4, TP 4 x D 4, ep 16) cut to 2 layers: D 1 and 4 at tp 4 with
  // ep 4 (dividing both 4 and 16 ranks); both run and the best's experiment carries its D.
  const sim::Experiment e = Shipped("moe-qwen3-30b-a3b-dp.textproto");
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  SearchOptions o = OneStageMegatronRing();
  o.space.tp = {4};
  o.space.attention_dp = {1, 4};
  o.space.ep = {4};
  const SearchResult r = Search(e, chip, o, nullptr);
  EXPECT_EQ(r.candidates, 2u);
  EXPECT_EQ(r.ok, 2u);
  ASSERT_EQ(r.ranked.size(), 2u);
  for (const Found& f : r.ranked) {
    EXPECT_EQ(f.replicas, 64u / (4 * f.c.attention_dp));
    EXPECT_EQ(Apply(e, f.c).cfg.mapping().attention_dp(), f.c.attention_dp > 1 ? f.c.attention_dp : 0u);
  }
}

// MoE mapping axes beside ep: moe.tp, all_to_all, group_order. Qwen3-30B-A3B at tp 8, ep 4:
// moe.tp 1, 2, 3 leaves out 3 (4 x 3 does not divide 8 ranks), so 2 x 2 all_to_all x 2 orders
// = 8 candidates, each mapping carrying its choices; moe.tp and the all-to-all change the
// Program (ProgramKey), and every candidate runs.
TEST(SearchTest, MoeMappingAxesAreSearched) {
  const sim::Experiment e = Shipped("moe-qwen3-30b-a3b.textproto");
  const arch::Chip chip = arch::Chip::Build(e.cfg.chip());
  SearchOptions o = OneStageMegatronRing();
  o.space.tp = {8};
  o.space.ep = {4};
  o.space.moe_tp = {1, 2, 3};
  o.space.all_to_all = {"direct", "pairwise"};
  o.space.group_order = {"tp_inner", "ep_inner"};
  const std::vector<Candidate> space = Space(e, chip, o.space);
  ASSERT_EQ(space.size(), 8u);
  std::set<std::string> keys;
  for (const Candidate& c : space) {
    EXPECT_TRUE(c.moe_tp == 1 || c.moe_tp == 2) << c.moe_tp;
    const config::Mapping m = MappingOf(e.cfg.mapping(), c);
    EXPECT_EQ(m.moe().ep(), 4u);
    EXPECT_EQ(m.moe().tp(), c.moe_tp);
    EXPECT_EQ(m.moe().all_to_all(), c.all_to_all);
    EXPECT_EQ(m.moe().group_order(), c.group_order);
    keys.insert(ProgramKey(e, chip, c));
  }
  EXPECT_EQ(keys.size(), 8u);
  const SearchResult r = Search(e, chip, o, nullptr);
  EXPECT_EQ(r.ok + r.shared, 8u);
  EXPECT_EQ(r.invalid + r.errors, 0u);
}

}  // namespace
}  // namespace tpsim::search

namespace tpsim::search {
namespace {

namespace fs = std::filesystem;

// A folder of its own per test, removed after it.
struct SearchDir {
  fs::path dir = fs::temp_directory_path() / ("search_cli_test_" + std::to_string(getpid()));
  SearchDir() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~SearchDir() { fs::remove_all(dir); }
  std::string operator()(const std::string& name) const { return (dir / name).string(); }
};

// A small base: Qwen3-0.6B, 2 layers, on mesh-4x4-hbm; mapping.tp 4 on line 11.
std::string SmallBase(const SearchDir& d) {
  const std::string path = d("base.textproto");
  std::ofstream(path) << "name: \"small\"\n"
                         "chip_file: \"" TPSIM_SOURCE_DIR
                         "/configs/chips/mesh-4x4-hbm.textproto\"\n"
                         "model_name: \"qwen3-0.6b\"\n"
                         "workload {\n"
                         "  batch: 1\n"
                         "  seq_len: 64\n"
                         "  decode_steps: 2\n"
                         "  num_layers: 2\n"
                         "}\n"
                         "mapping {\n"
                         "  tp: 4\n"
                         "  pipeline_stages: 2\n"
                         "  partition: \"megatron\"\n"
                         "  placement: \"ring\"\n"
                         "  collective: \"ring\"\n"
                         "}\n";
  return path;
}

struct CliOut {
  int rc = 0;
  std::string out, err;
};
CliOut RunSearchCommand(const std::vector<std::string>& args) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  CliOut r;
  r.rc = SearchCommand(args);
  std::fflush(stdout);
  r.out = testing::internal::GetCapturedStdout();
  r.err = testing::internal::GetCapturedStderr();
  return r;
}

std::vector<std::string> SmallSearch(const std::string& base, std::vector<std::string> more) {
  std::vector<std::string> args = {
      base,   "--tp",          "2",    "--stages", "1",     "--partitions", "megatron", "--placements",
      "ring", "--collectives", "ring", "--spans",  "stage", "--confirm",    "0",        "--top",
      "0",    "--jobs",        "1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The lines of the front table: from its header to the blank line after it.
std::vector<std::string> FrontTable(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out.substr(std::min(out.find("     #"), out.size())));
  for (std::string line; std::getline(in, line) && !line.empty();) lines.push_back(line);
  return lines;
}

// Candidates that differ only in attention_dp were two rows alike in the front table, and the
// store had no column for it. A search that varies it (--attention-dp 1,2) shows a column after
// tp; one that does not prints the header it always did. The header is "  %4s %5s" (#, tp),
// then " %7s" (attn_dp) when varied, then " %6s %8s" (stages, replicas).
TEST(SearchTest, FrontShowsTheAxesTheSearchVaried) {
  const SearchDir d;
  const std::string base = SmallBase(d);
  const CliOut varied =
      RunSearchCommand(SmallSearch(base, {"--batch", "2", "--attention-dp", "1,2", "--db", d("s.sqlite")}));
  ASSERT_EQ(varied.rc, 0) << varied.err;
  const std::vector<std::string> table = FrontTable(varied.out);
  ASSERT_GE(table.size(), 2u) << varied.out;
  EXPECT_TRUE(table[0].starts_with("     #    tp attn_dp stages replicas attention")) << table[0];
  for (size_t r = 1; r < table.size(); ++r) {
    std::istringstream row(table[r]);
    std::string index, tp, dp, stages;
    row >> index >> tp >> dp >> stages;
    EXPECT_EQ(tp, "2") << table[r];
    EXPECT_TRUE(dp == "1" || dp == "2") << table[r];
    EXPECT_EQ(stages, "1") << table[r];
  }
  // The store holds attention_dp: both values, one candidate each.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(d("s.sqlite").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(
      sqlite3_prepare_v2(db, "SELECT \"mapping.attention_dp\", COUNT(*) FROM points GROUP BY 1 ORDER BY 1",
                         -1, &st, nullptr),
      SQLITE_OK);
  std::vector<std::pair<int, int>> dps;
  while (sqlite3_step(st) == SQLITE_ROW)
    dps.emplace_back(sqlite3_column_int(st, 0), sqlite3_column_int(st, 1));
  sqlite3_finalize(st);
  sqlite3_close(db);
  EXPECT_EQ(dps, (std::vector<std::pair<int, int>>{{1, 1}, {2, 1}}));

  const CliOut plain = RunSearchCommand(SmallSearch(base, {"--batch", "2", "--attention-dp", "2"}));
  ASSERT_EQ(plain.rc, 0) << plain.err;
  const std::vector<std::string> one = FrontTable(plain.out);
  ASSERT_GE(one.size(), 2u) << plain.out;
  EXPECT_TRUE(one[0].starts_with("     #    tp stages replicas attention")) << one[0];
}

// --batch above 1 on a request stream is refused before the search (the scheduler batches the
// requests; every candidate was refused by tpsim serve at workload.batch, exit 1).
TEST(SearchTest, BatchOnARequestStreamIsRefused) {
  const CliOut r =
      RunSearchCommand({std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto",
                        "--tp", "8", "--stages", "8", "--batch", "1,4", "--confirm", "0"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("tpsim search: --batch is an axis of fixed batches; "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("set mapping.serving.max_running_requests instead"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

// An --out that cannot be written is refused before any candidate runs (it was found after the
// whole search and its TLM confirmations, exit 1): nothing printed, no store created.
TEST(SearchTest, UnwritableOutIsRefusedBeforeTheSearch) {
  const SearchDir d;
  const std::string base = SmallBase(d);
  const CliOut r =
      RunSearchCommand(SmallSearch(base, {"--out", d("no/such/o.textproto"), "--db", d("s.sqlite")}));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("tpsim search: cannot write " + d("no/such/o.textproto")), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(d("s.sqlite"))) << "the search ran";
  const CliOut ok = RunSearchCommand(SmallSearch(base, {"--out", d("o.textproto")}));
  EXPECT_EQ(ok.rc, 0) << ok.err;
  EXPECT_TRUE(fs::exists(d("o.textproto")));
}

// Values that leave no candidate were searched as 0 candidates ending "no feasible candidate"
// (exit 1, no flag named); empty LIST items read as the option not given (--partitions , searched
// every partitioner); an unknown option at the end of the line "needs a value"; and a string LIST
// given twice kept its last, where a number LIST adds up. 64 cores of wafer-8x8, 16 layers.
TEST(SearchTest, OptionsThatLeaveNoCandidateOrNoValueAreUsageErrors) {
  const std::string ref = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/reference-qwen3-4b.textproto";
  const CliOut tp = RunSearchCommand({ref, "--tp", "128", "--confirm", "0"});
  EXPECT_EQ(tp.rc, 2);
  EXPECT_TRUE(
      tp.err.starts_with("tpsim search: no candidate: --tp 128 leaves none (tp x attention_dp x stages "
                         "<= 64 cores, stages <= 16 layers"))
      << tp.err;
  EXPECT_EQ(tp.out, "");
  // Each value fits alone; together they do not (8 x 16 = 128 cores): dropping either gives
  // candidates, so both are named.
  const CliOut both = RunSearchCommand({ref, "--tp", "8", "--stages", "16", "--confirm", "0"});
  EXPECT_EQ(both.rc, 2);
  EXPECT_TRUE(both.err.starts_with("tpsim search: no candidate: --tp 8, --stages 16 leave none ("))
      << both.err;
  const CliOut moe =
      RunSearchCommand({std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/moe-qwen3-30b-a3b.textproto",
                        "--tp", "16", "--stages", "4", "--ep", "3", "--confirm", "0"});
  EXPECT_EQ(moe.rc, 2);
  EXPECT_TRUE(moe.err.starts_with("tpsim search: no candidate: --ep 3 leaves none")) << moe.err;
  EXPECT_NE(moe.err.find("ep dividing tp x attention_dp and the 128 experts"), std::string::npos) << moe.err;
  for (const auto& [flag, value] : {std::pair{"--tp", "4,,"},
                                    {"--tp", ",4"},
                                    {"--partitions", ","},
                                    {"--placements", "linear,"},
                                    {"--weights", ","}}) {
    const CliOut r = RunSearchCommand({ref, flag, value});
    EXPECT_EQ(r.rc, 2) << flag << " " << value;
    EXPECT_TRUE(r.err.starts_with("tpsim search: bad value '" + std::string(value) + "' for " + flag +
                                  ": a list's items are separated by single commas, with none empty\n"))
        << r.err;
  }
  // A bad number states the rule it broke (it said only "bad value '0' for --tp").
  for (const auto& [flag, value, rule] :
       {std::tuple{"--tp", "0", "'0' is not in 1 .. 1048576"},
        std::tuple{"--stages", "4,2000000", "'2000000' is not in 1 .. 1048576"},
        std::tuple{"--batch", "-1", "'-1' is not a whole number in 0 .. 4294967295"},
        std::tuple{"--budget", "2x", "'2x' is not a whole number in 0 .. 18446744073709551615"},
        std::tuple{"--slo-ttft-ms", "nan", "'nan' is not a finite number"}}) {
    const CliOut r = RunSearchCommand({ref, flag, value});
    EXPECT_EQ(r.rc, 2) << flag << " " << value;
    EXPECT_TRUE(r.err.starts_with("tpsim search: bad value '" + std::string(value) + "' for " + flag + ": " +
                                  rule + "\n"))
        << r.err;
  }
  const CliOut bogus = RunSearchCommand({ref, "--budget", "3", "--bogus"});
  EXPECT_EQ(bogus.rc, 2);
  EXPECT_TRUE(bogus.err.starts_with("tpsim search: unknown option --bogus\n")) << bogus.err;

  // --partitions given twice: both lists, as --tp given twice.
  const SearchDir d;
  const std::string base = SmallBase(d);
  std::vector<std::string> twice = SmallSearch(base, {"--partitions", "n_split", "--db", d("s.sqlite")});
  const CliOut r = RunSearchCommand(twice);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("  4 candidates:"), std::string::npos) << r.out;  // (megatron, n_split)^2
}

// A candidate's error about a value the search chose points at the search flag, not at the base
// file's line, which holds another value (base.textproto:11:3: mapping.tp: 3 where line 11 says
// tp: 4). TP 3 divides none of Qwen3-0.6B's 16 heads: every candidate is invalid.
TEST(SearchTest, CandidateErrorsPointAtTheSearchFlag) {
  const SearchDir d;
  const std::string base = SmallBase(d);
  std::vector<std::string> args = SmallSearch(base, {});
  args[2] = "3";  // --tp 3
  const CliOut r = RunSearchCommand(args);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("no feasible candidate"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<command line: --tp 3>:1:1: mapping.tp: 3: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(base + ":11:3:"), std::string::npos) << r.out;

  // Where the value came from: the flag's list, the search's default list, or the base (equal
  // to it: the file's line says that value).
  const sim::Experiment e = sim::LoadExperiment(base, {{"workload.batch", "2"}});
  Candidate c;
  c.tp = 8;
  c.stages = 2;
  c.attention = c.mlp = "megatron";
  c.placement = "ring";
  c.collective = "ring";
  c.span = "stage";
  c.batch = 2;
  SpaceOptions given;
  given.tp = {8};
  sim::Experiment x = Apply(e, c);
  LocateCandidate(e, c, given, &x);
  EXPECT_EQ(x.locs.Find("mapping.tp").file, "<command line: --tp 8>");
  x = Apply(e, c);
  LocateCandidate(e, c, SpaceOptions{}, &x);
  EXPECT_EQ(x.locs.Find("mapping.tp").file, "<tpsim search: --tp 8 (default list)>");
  // Stages 2, megatron, ring, batch 2 (the --set's): the base's locations.
  for (const char* f :
       {"mapping.pipeline_stages", "mapping.partition", "mapping.placement", "workload.batch"}) {
    EXPECT_EQ(x.locs.Find(f).file, e.locs.Find(f).file) << f;
    EXPECT_EQ(x.locs.Find(f).line, e.locs.Find(f).line) << f;
  }
  EXPECT_EQ(x.locs.Find("mapping.pipeline_stages").line, 12);
  c.tp = 4;
  x = Apply(e, c);
  LocateCandidate(e, c, given, &x);
  EXPECT_EQ(x.locs.Find("mapping.tp").file, base);
  EXPECT_EQ(x.locs.Find("mapping.tp").line, 11);
}

// A base naming a placement file is checked with it as `tpsim run` checks it: a missing file,
// or one that lists a core twice, is refused with run's located message (exit 2). Both were
// searched without a word, exit 0: every candidate replaces the placement. A valid file is
// searched too, with a warning that it is not used.
TEST(SearchTest, ABasePlacementFileIsCheckedAsRunChecksIt) {
  const SearchDir d;
  const std::string base = SmallBase(d);  // tp 4 x 2 stages on mesh-4x4-hbm
  auto with_file = [&](const std::string& file) {
    return SmallSearch(base, {"--set", "mapping.placement=file", "--set", "mapping.placement_file=" + file});
  };
  // What `tpsim run` says of the base with that file (sim::ValidateExperiment, as RunCommand).
  auto run_says = [&](const std::string& file) {
    const sim::Experiment e =
        sim::LoadExperiment(base, {{"mapping.placement", "file"}, {"mapping.placement_file", file}});
    try {
      sim::ValidateExperiment(e);
    } catch (const config::ConfigError& err) {
      std::string out;
      for (const auto& diag : err.diags()) out += diag.str() + "\n";
      return out;
    }
    return std::string("valid");
  };
  const CliOut missing = RunSearchCommand(with_file(d("none.txt")));
  EXPECT_EQ(missing.rc, 2) << missing.err;
  EXPECT_NE(missing.err.find("mapping.placement_file"), std::string::npos) << missing.err;
  EXPECT_TRUE(missing.err.starts_with(run_says(d("none.txt")) +
                                      "tpsim search: the base experiment places its ranks by "
                                      "mapping.placement_file, so it is checked as `tpsim run` checks it"))
      << missing.err;
  EXPECT_EQ(missing.out, "");
  std::ofstream(d("twice.txt")) << "0 1 4 0\n2 3 6 7\n";
  const CliOut twice = RunSearchCommand(with_file(d("twice.txt")));
  EXPECT_EQ(twice.rc, 2) << twice.err;
  EXPECT_NE(twice.err.find("already used by an earlier rank"), std::string::npos) << twice.err;
  EXPECT_TRUE(twice.err.starts_with(run_says(d("twice.txt")) + "tpsim search: the base experiment"))
      << twice.err;
  EXPECT_EQ(twice.out, "");
  std::ofstream(d("good.txt")) << "0 1 4 5\n2 3 6 7\n";
  ASSERT_EQ(run_says(d("good.txt")), "valid");
  const CliOut good = RunSearchCommand(with_file(d("good.txt")));
  EXPECT_EQ(good.rc, 0) << good.err;
  EXPECT_NE(
      good.err.find("tpsim search: warning: mapping.placement file is ignored (mapping.placement_file " +
                    d("good.txt") + "): each candidate takes its placement from --placements"),
      std::string::npos)
      << good.err;
}

// A value of a number LIST that no candidate can take was dropped without a word (--tp 2,128 on
// 16 cores searched tp 2; --stages 1,3 of 2 layers searched 1 stage): a note names each.
TEST(SearchTest, ListValuesThatLeaveNoCandidateAreNoted) {
  const SearchDir d;
  const std::string base = SmallBase(d);  // 16 cores, 2 layers; SmallSearch: --tp 2 --stages 1
  const CliOut r = RunSearchCommand(SmallSearch(base, {"--tp", "128", "--stages", "3"}));
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string rules =
      " leaves no candidate (tp x attention_dp x stages <= 16 cores, stages <= 2 layers";
  EXPECT_NE(r.err.find("tpsim search: note: --tp 128" + rules), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tpsim search: note: --stages 3" + rules), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("note: --tp 2 "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("note: --stages 1 "), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("  1 candidates:"), std::string::npos) << r.out;
  // Every value usable: no note.
  const CliOut all = RunSearchCommand(SmallSearch(base, {"--tp", "4"}));
  ASSERT_EQ(all.rc, 0) << all.err;
  EXPECT_EQ(all.err.find("note:"), std::string::npos) << all.err;
}

}  // namespace
}  // namespace tpsim::search
