// MoE layers: token routing (mapping/moe_routing.h), the uneven all_to_all
// (LowerAllToAllV), and the lowered block (mapping/moe_pass.h) against hand-computed counts,
// bytes and FLOPs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include "arch/gpu/collective.h"
#include "configs/load.h"
#include "llm/opgraph.h"
#include "mapping/collective/collective.h"
#include "mapping/cost.h"
#include "mapping/mapping.h"
#include "mapping/moe_routing.h"
#include "tests/mapping/mapping_test_util.h"

namespace tpsim::mapping {
namespace {

using testing::Map;
using testing::MeshChip;
using testing::MoeMap;
using testing::MoeModel;
using testing::SmallModel;
using testing::Work;

std::vector<uint64_t> Sorted(std::vector<uint64_t> v) {
  std::sort(v.rbegin(), v.rend());
  return v;
}

TEST(MoeRouting, BalancedSpreadsTheRemainderOverTheExperts) {
  // 20 assignments over 8 experts: 2 each, and the 4 left over go to experts 1, 3, 5, 7
  // (expert e gets floor((e+1) 4 / 8) - floor(e 4 / 8) more).
  EXPECT_EQ(BalancedCounts(20, 8), (std::vector<uint64_t>{2, 3, 2, 3, 2, 3, 2, 3}));
  // Decode of one token, top-2 of 8: experts 3 and 7 (different slots for ep 2 and 4).
  EXPECT_EQ(BalancedCounts(2, 8), (std::vector<uint64_t>{0, 0, 0, 1, 0, 0, 0, 1}));
  Routing r;
  const ExpertLoad l = RouteTokens(r, 8, 2, 10, 0);
  EXPECT_EQ(l.tokens, BalancedCounts(20, 8));
  EXPECT_EQ(l.dropped, 0u);
}

TEST(MoeRouting, ZipfApportionsByWeightWithinTheTokenCap) {
  // Weights 1, 1/2, 1/3, 1/4 (sum 25/12); 24 assignments: quotas 11.52, 5.76, 3.84, 2.88;
  // floors 11, 5, 3, 2 (21) and the 3 largest remainders (.88, .84, .76) one more each.
  EXPECT_EQ(Apportion(24, ZipfWeights(4, 1.0), 1000), (std::vector<uint64_t>{11, 6, 4, 3}));
  // 8 tokens, top-3: no expert above 8. The first takes 8; its excess 3 goes to the others by
  // weight 1/2, 1/3, 1/4 (quotas 1.38, 0.92, 0.69: floors 1, 0, 0, then .92 and .69 one each).
  EXPECT_EQ(Apportion(24, ZipfWeights(4, 1.0), 8), (std::vector<uint64_t>{8, 7, 5, 4}));
  Routing r;
  r.kind = RoutingKind::kZipf;
  r.zipf_s = 1.0;
  r.seed = 7;
  ExpertLoad l = RouteTokens(r, 4, 3, 8, 5);
  EXPECT_EQ(Sorted(l.tokens), (std::vector<uint64_t>{8, 7, 5, 4}));
  // The hottest expert is the first of the layer's shuffle.
  EXPECT_EQ(l.tokens[HotOrder(4, 7, 5)[0]], 8u);
  // Capacity factor 1: ceil(1 x 24 / 4) = 6 per expert; 2 + 1 assignments dropped.
  r.capacity_factor = 1.0;
  l = RouteTokens(r, 4, 3, 8, 5);
  EXPECT_EQ(Sorted(l.tokens), (std::vector<uint64_t>{6, 6, 5, 4}));
  EXPECT_EQ(l.dropped, 3u);
  EXPECT_EQ(ExpertCapacity(1.25, 24, 4), 8u);  // ceil(7.5)
  EXPECT_EQ(ExpertCapacity(0, 24, 4), UINT64_MAX);
}

// Equal weights (a uniform routing trace) give routing balanced's counts: the units a run of tied
// remainders shares are spread over it (they went to the lowest ids: a decode step's 8
// assignments of top-8 over 128 experts all on experts 0..7, one expert slot).
TEST(MoeRouting, EqualWeightsApportionAsBalanced) {
  for (const auto& [total, n] :
       {std::pair<uint64_t, uint32_t>{8, 128}, {20, 8}, {2, 8}, {127, 128}, {300, 7}})
    EXPECT_EQ(Apportion(total, std::vector<double>(n, 5.0), UINT64_MAX), BalancedCounts(total, n))
        << total << " over " << n;
  // A run of ties after a larger remainder: weights 3, 1, 1, 1, 1 over 5 units: quotas 2.14 and
  // 0.71 each; floors 2, 0, 0, 0, 0; the 3 units left go over the four 0.71s as 3 of 4 spread.
  EXPECT_EQ(Apportion(5, {3, 1, 1, 1, 1}, UINT64_MAX), (std::vector<uint64_t>{2, 0, 1, 1, 1}));
  Routing r;
  r.kind = RoutingKind::kTrace;
  RoutingTrace uniform;
  uniform.layers[0] = std::vector<double>(128, 10.0);
  r.trace = &uniform;
  EXPECT_EQ(RouteTokens(r, 128, 8, 1, 0).tokens, BalancedCounts(8, 128));
}

TEST(MoeRouting, HotOrderIsASeededPermutationPerLayer) {
  for (uint32_t layer : {0u, 1u, 47u}) {
    std::vector<uint32_t> o = HotOrder(128, 1, layer);
    EXPECT_EQ(o, HotOrder(128, 1, layer));
    std::sort(o.begin(), o.end());
    for (uint32_t i = 0; i < 128; ++i) EXPECT_EQ(o[i], i);
  }
  EXPECT_NE(HotOrder(128, 1, 0), HotOrder(128, 1, 1));
}

TEST(MoeRouting, ExpertPhasesSpreadTheExperts) {
  // 8 experts: a = round(0.618034 x 8) = 5 (coprime with 8), pi = 5e mod 8 = 0, 5, 2, 7, 4, 1, 6,
  // 3; over 16 tokens the phase is 2 pi.
  const std::vector<uint64_t> want = {0, 10, 4, 14, 8, 2, 12, 6};
  for (uint64_t e = 0; e < 8; ++e) EXPECT_EQ(ExpertPhase(e, 8, 16), want[e]) << e;
  // 64 experts: round(39.55) = 40 shares 8 with 64, 41 does not: pi(1) = 41, over 64 tokens 41.
  EXPECT_EQ(ExpertPhase(1, 64, 64), 41u);
  // 128 experts: a = round(79.108) = 79; over 16 tokens expert 1's phase is floor(79 x 16 / 128) = 9.
  EXPECT_EQ(ExpertPhase(1, 128, 16), 9u);
  EXPECT_EQ(ExpertPhase(0, 1, 7), 0u);
}

TEST(MoeRouting, SplitBySourceIsCumulativeRoundingFromThePhase) {
  // Sources of 2, 1, 1 tokens (T = 4), 2 experts: a = 1, phases 0 and floor(1 x 4 / 2) = 2.
  // Expert 0's 5: floor(5x2/4) = 2, floor(5x3/4) - 2 = 1, 5 - 3 = 2; expert 1's 3 from phase 2:
  // floor((6+2)/4) - floor(2/4) = 2, floor((9+2)/4) - 2 = 0, floor((12+2)/4) - 2 = 1.
  EXPECT_EQ(SplitBySource({5, 3}, {2, 1, 1}), (std::vector<std::vector<uint64_t>>{{2, 2}, {1, 0}, {2, 1}}));
}

TEST(MoeRouting, ExpertsWithOneRowTakeItFromDifferentSources) {
  // Decode of 16 sequences on 16 source ranks (one token each), 128 experts of top-8, balanced:
  // one row per expert. Each source sends 8 rows (its token's 8 experts); before the phases,
  // every expert took the last token and source 15 sent all 128.
  const auto by_src = SplitBySource(std::vector<uint64_t>(128, 1), std::vector<uint64_t>(16, 1));
  for (size_t s = 0; s < 16; ++s) {
    uint64_t rows = 0;
    for (uint64_t n : by_src[s]) rows += n;
    EXPECT_EQ(rows, 8u) << "source " << s;
  }
}

class TraceFile : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    const std::string path =
        (std::filesystem::temp_directory_path() / ("tpsim_moe_trace_" + std::to_string(::getpid()) + ".csv"))
            .string();
    std::ofstream(path) << text;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& p : paths_) std::filesystem::remove(p);
  }
  std::vector<std::string> paths_;
};

TEST_F(TraceFile, CountsScaleToTheStepsAssignments) {
  const std::string path = Write("# tokens per expert\nlayer,e0,e1,e2,e3\n0,1,1,2,0\n1, 10, 0, 0, 30\n");
  const RoutingTrace t = ReadRoutingTrace(path, 4, config::kCommandLine);
  ASSERT_EQ(t.layers.size(), 2u);
  Routing r;
  r.kind = RoutingKind::kTrace;
  r.trace = &t;
  // 4 tokens x top-2 = 8 assignments by 1:1:2:0.
  EXPECT_EQ(RouteTokens(r, 4, 2, 4, 0).tokens, (std::vector<uint64_t>{2, 2, 4, 0}));
  // Layer 1 by 1:0:0:3 over 8 = 2, 0, 0, 6; no expert above 4 tokens: expert 3 keeps 4 and
  // its excess 2 goes to the uncapped by weight (expert 0 alone): 4, 0, 0, 4.
  EXPECT_EQ(RouteTokens(r, 4, 2, 4, 1).tokens, (std::vector<uint64_t>{4, 0, 0, 4}));
  EXPECT_THROW(RouteTokens(r, 4, 2, 4, 2), std::invalid_argument);
}

TEST_F(TraceFile, ErrorsNameLineAndColumn) {
  const std::string path = Write("0,1,1,2,0\n1,1,x,2,0\n2,1,1\n0,1,1,1,1\n3,0,0,0,0\n");
  try {
    ReadRoutingTrace(path, 4, config::kCommandLine);
    FAIL() << "a bad trace was read";
  } catch (const config::ConfigError& e) {
    ASSERT_EQ(e.diags().size(), 4u);
    const config::Diag& bad = e.diags()[0];
    EXPECT_EQ(bad.where.file, path);
    EXPECT_EQ(bad.where.line, 2);
    EXPECT_EQ(bad.where.col, 5);
    EXPECT_EQ(bad.field, "mapping.moe.routing_file");
    EXPECT_EQ(bad.value, "x");
    EXPECT_EQ(e.diags()[1].where.line, 3);  // 3 fields, not 5
    EXPECT_EQ(e.diags()[2].where.line, 4);  // layer 0 twice
    EXPECT_EQ(e.diags()[3].where.line, 5);  // all zero
  }
}

TEST_F(TraceFile, ByteOrderMarkIsSkippedAndHexIsRefused) {
  // A first line of numbers after a UTF-8 byte order mark is data, not a header (it was
  // skipped as one, and layer 0 had no line).
  const RoutingTrace t = ReadRoutingTrace(Write("\xEF\xBB\xBF"
                                                "0,1,1,2,0\n"),
                                          4, config::kCommandLine);
  ASSERT_EQ(t.layers.count(0), 1u);
  EXPECT_EQ(t.layers.at(0), (std::vector<double>{1, 1, 2, 0}));
  // "0x10" is not a decimal count (strtod read it as 16).
  try {
    ReadRoutingTrace(Write("0,1,0x10,2,0\n"), 4, config::kCommandLine);
    FAIL() << "a hexadecimal count was read";
  } catch (const config::ConfigError& e) {
    ASSERT_EQ(e.diags().size(), 1u);
    EXPECT_EQ(e.diags()[0].where.col, 5);
    EXPECT_EQ(e.diags()[0].value, "0x10");
  }
}

TEST(AllToAllV, DirectAndPairwiseOnFourRanksByHand) {
  // A 2x2 mesh's 4 ranks. Rank r's send buffer: its blocks for d = 0..3 in order; rank d's
  // receive buffer: the blocks from r = 0..3 in order.
  const std::vector<std::vector<uint64_t>> b = {{5, 10, 0, 30}, {1, 0, 2, 3}, {4, 4, 4, 4}, {0, 6, 7, 0}};
  const Schedule s = LowerAllToAllV("direct", b);
  ASSERT_EQ(s.steps.size(), 1u);
  // Non-empty off-diagonal blocks: 0->1, 0->3, 1->0, 1->2, 1->3, 2->0, 2->1, 2->3, 3->1, 3->2.
  ASSERT_EQ(s.steps[0].xfers.size(), 10u);
  auto find = [&](int src, int dst) -> const Xfer& {
    for (const Xfer& x : s.steps[0].xfers)
      if (x.src == src && x.dst == dst) return x;
    throw std::runtime_error("no transfer");
  };
  // 0 -> 3: 30 bytes from offset 5 + 10 + 0 = 15 of rank 0's buffer; rank 3's blocks start
  // with rank 0's: offset 0.
  EXPECT_EQ(find(0, 3).offset, 15u);
  EXPECT_EQ(find(0, 3).bytes, 30u);
  EXPECT_EQ(find(0, 3).DstOffset(), 0u);
  // 2 -> 1: offset 4 in rank 2's buffer; in rank 1's, after 10 (from 0) and 0 (from 1): 10.
  EXPECT_EQ(find(2, 1).offset, 4u);
  EXPECT_EQ(find(2, 1).DstOffset(), 10u);
  // 3 -> 2: offset 0 + 6 = 6; in rank 2's: 0 + 2 + 4 = 6.
  EXPECT_EQ(find(3, 2).offset, 6u);
  EXPECT_EQ(find(3, 2).DstOffset(), 6u);
  uint64_t sent = 0;
  for (const Xfer& x : s.steps[0].xfers) sent += x.bytes;
  EXPECT_EQ(sent, 10u + 30 + 1 + 2 + 3 + 4 + 4 + 4 + 6 + 7);

  // A collective algorithm that is no all_to_all_v algorithm is an error, not a fallback.
  EXPECT_THROW(LowerAllToAllV("ring", b), std::invalid_argument);
  EXPECT_THROW(LowerAllToAllV("nope", b), std::invalid_argument);
  EXPECT_THROW(LowerAllToAllV("direct", {{1, 2}}), std::invalid_argument);
  EXPECT_THROW(LowerAllToAllV("hierarchical", b, nullptr, {3, 1}), std::invalid_argument);
}

// Runs `s` on per-rank buffers of `layout.buffer_bytes` bytes: every send block filled with its
// (r, d) tag at layout.send_offset, transfers of a step read before any writes; returns whether
// every block r -> d (r != d) ends at layout.recv_offset in d's buffer.
bool DeliversEveryBlock(const Schedule& s, const AllToAllVLayout& layout,
                        const std::vector<std::vector<uint64_t>>& b) {
  const int p = static_cast<int>(b.size());
  std::vector<std::vector<int>> buf(p, std::vector<int>(layout.buffer_bytes, -1));
  for (int r = 0; r < p; ++r)
    for (int d = 0; d < p; ++d)
      for (uint64_t i = 0; i < b[r][d]; ++i) buf[r].at(layout.send_offset[r][d] + i) = r * p + d;
  for (const CollectiveStep& st : s.steps) {
    std::vector<std::vector<int>> read;
    for (const Xfer& x : st.xfers)
      read.emplace_back(buf[x.src].begin() + x.offset, buf[x.src].begin() + x.offset + x.bytes);
    for (size_t k = 0; k < st.xfers.size(); ++k)
      std::copy(read[k].begin(), read[k].end(), buf[st.xfers[k].dst].begin() + st.xfers[k].DstOffset());
  }
  for (int r = 0; r < p; ++r)
    for (int d = 0; d < p; ++d)
      for (uint64_t i = 0; r != d && i < b[r][d]; ++i)
        if (buf[d].at(layout.recv_offset[r][d] + i) != r * p + d) return false;
  return true;
}

TEST(AllToAllV, PairwiseAndHierarchicalOnFourRanksByHand) {
  const std::vector<std::vector<uint64_t>> b = {{5, 10, 0, 30}, {1, 0, 2, 3}, {4, 4, 4, 4}, {0, 6, 7, 0}};
  // pairwise, 4 ranks (a power of two): step k swaps r and r XOR k; every rank sends at most one
  // block and receives at most one per step. Received blocks sit after the sends (S = 45, the
  // largest row: rank 0's; then by source).
  AllToAllVLayout pl;
  const Schedule pw = LowerAllToAllV("pairwise", b, &pl);
  EXPECT_EQ(pw.algorithm, "pairwise");
  ASSERT_EQ(pw.steps.size(), 3u);
  std::vector<size_t> per_step;
  for (size_t k = 0; k < 3; ++k) {
    per_step.push_back(pw.steps[k].xfers.size());
    for (const Xfer& x : pw.steps[k].xfers) EXPECT_EQ(x.dst, x.src ^ static_cast<int>(k + 1));
  }
  // step 1: 0<->1 (10, 1), 2<->3 (4, 7); step 2: 0->2 empty, 2->0 (4), 1<->3 (3, 6);
  // step 3: 0<->3 (30, 0 from 3: dropped), 1<->2 (2, 4).
  EXPECT_EQ(per_step, (std::vector<size_t>{4, 3, 3}));
  EXPECT_EQ(pl.recv_offset[0][3], 45u);           // rank 3's receive area starts with rank 0's block
  EXPECT_EQ(pl.recv_offset[2][1], 45u + 10 + 0);  // after 0's 10 and 1's 0
  EXPECT_EQ(pl.buffer_bytes, 45u + 37);           // S + the largest column (to rank 3: 30 + 3 + 4)
  EXPECT_TRUE(DeliversEveryBlock(pw, pl, b));

  // hierarchical on the 2x2 grid (rank = row * 2 + col): step 1 within rows: 0 <-> 1, 2 <-> 3;
  // step 2 within columns: 0 <-> 2, 1 <-> 3.
  AllToAllVLayout hl;
  const Schedule h = LowerAllToAllV("hierarchical", b, &hl, {2, 2});
  ASSERT_EQ(h.steps.size(), 2u);
  for (const Xfer& x : h.steps[0].xfers) EXPECT_EQ(x.src / 2, x.dst / 2);
  for (const Xfer& x : h.steps[1].xfers) EXPECT_EQ(x.src % 2, x.dst % 2);
  auto bytes_of = [](const CollectiveStep& st, int src, int dst) {
    std::vector<uint64_t> v;
    for (const Xfer& x : st.xfers)
      if (x.src == src && x.dst == dst) v.push_back(x.bytes);
    return v;
  };
  // 0 -> 1 in step 1: the aggregate for column 1 from rows != 0, i.e. 0's block for 3 (30),
  // then 0's block for 1 itself (10).
  EXPECT_EQ(bytes_of(h.steps[0], 0, 1), (std::vector<uint64_t>{30, 10}));
  // 1 -> 3 in step 2: its own block for 3 (3), then 0's block for 3 it holds (30).
  EXPECT_EQ(bytes_of(h.steps[1], 1, 3), (std::vector<uint64_t>{3, 30}));
  // 3 -> 1 in step 2: its own 6, and 2's block for 1 (4) received from 2 in step 1.
  EXPECT_EQ(bytes_of(h.steps[1], 3, 1), (std::vector<uint64_t>{6, 4}));
  // Messages: direct sends 10; hierarchical 7 in step 1 (0->1 x2, 1->0 x2 [1->2's 2 and 1->0's
  // 1], 2->3 x2 [2->1's 4, 2->3's 4], 3->2 x1 [3->0 empty, 3->2's 7]) and 6 in step 2 (0->2: 1's
  // 2 [0's own empty]; 1->3 x2; 2->0: its own 4 [3->0 empty]; 3->1 x2).
  EXPECT_EQ(h.steps[0].xfers.size(), 7u);
  EXPECT_EQ(h.steps[1].xfers.size(), 6u);
  EXPECT_TRUE(DeliversEveryBlock(h, hl, b));

  AllToAllVLayout dl;
  const Schedule d = LowerAllToAllV("direct", b, &dl);
  EXPECT_TRUE(DeliversEveryBlock(d, dl, b));
}

TEST(AllToAllV, EveryAlgorithmDeliversEveryBlockOnSixRanks) {
  // 6 ranks: pairwise as shifts (not a power of two), hierarchical on 2x3, 3x2 and 1x6 grids.
  std::vector<std::vector<uint64_t>> b(6, std::vector<uint64_t>(6));
  for (int r = 0; r < 6; ++r)
    for (int d = 0; d < 6; ++d) b[r][d] = static_cast<uint64_t>((r * 7 + d * 3) % 5);
  for (const std::string& a : AllToAllVNames()) {
    AllToAllVLayout l;
    const Schedule s = LowerAllToAllV(a, b, &l);
    EXPECT_TRUE(DeliversEveryBlock(s, l, b)) << a;
  }
  const Schedule pw = LowerAllToAllV("pairwise", b);
  EXPECT_EQ(pw.steps.size(), 5u);
  for (size_t k = 0; k < pw.steps.size(); ++k)
    for (const Xfer& x : pw.steps[k].xfers) EXPECT_EQ(x.dst, (x.src + static_cast<int>(k) + 1) % 6);
  for (const RankGrid g : {RankGrid{2, 3}, RankGrid{3, 2}, RankGrid{1, 6}}) {
    AllToAllVLayout l;
    const Schedule s = LowerAllToAllV("hierarchical", b, &l, g);
    EXPECT_EQ(s.steps.size(), g.rows == 1 ? 1u : 2u);
    EXPECT_TRUE(DeliversEveryBlock(s, l, b)) << g.rows << "x" << g.cols;
  }
  EXPECT_EQ(AllToAllVNames(), (std::vector<std::string>{"direct", "hierarchical", "pairwise"}));
}

const OpInfo* FindOp(const Program& p, const std::string& name, Phase phase = Phase::kPrefill) {
  for (const OpInfo& o : p.ops)
    if (o.ref.op == name && o.ref.phase == phase) return &o;
  return nullptr;
}

TEST(MoeLower, OneLayersFlopsByHand) {
  // 16 tokens, H 64, E 8, top-2 (R = 32 assignments), Im 32:
  //   router   2 x 16 x 64 x 8 = 16,384 + softmax 5 x 16 x 8 = 640 + renorm 2 x 16 x 2 = 64
  //            = 17,088
  //   experts  gate+up 2 x 32 x 64 x 64 = 262,144 + SiLU*mul 5 x 32 x 32 = 5,120
  //            + down 2 x 32 x 32 x 64 = 131,072 = 398,336
  //   sum      2 x 32 x 64 = 4,096 a partial: a multiply-add per value of each of the moe.tp
  //            partial rows an expert returns (4,096 x moe.tp executed; llm's graph counts 4,096)
  // router and experts the same for every EP x TP split, and what llm's graph counts.
  const arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, uint64_t{1} << 30));
  const config::Model model = MoeModel();
  llm::Phase ph;
  ph.new_tokens = 16;
  const llm::LayerGraph g = llm::BuildLayer(model, ph);
  double graph_router = 0, graph_experts = 0;
  for (const llm::Op& op : g.ops) {
    if (op.role == llm::OpRole::kRouter) graph_router = op.flops;
    if (op.role == llm::OpRole::kExperts) graph_experts = op.flops;
  }
  EXPECT_DOUBLE_EQ(graph_router, 17'088);
  EXPECT_DOUBLE_EQ(graph_experts, 398'336 + 4'096);
  for (auto [ep, etp] : {std::pair{4, 1}, std::pair{2, 2}, std::pair{1, 4}, std::pair{2, 1}}) {
    SCOPED_TRACE("ep " + std::to_string(ep) + " tp " + std::to_string(etp));
    const Program p = Lower(chip, model, Work(16, 0, 1), MoeMap(4, ep, etp));
    ASSERT_NE(FindOp(p, "router"), nullptr);
    EXPECT_DOUBLE_EQ(FindOp(p, "router")->flops, 17'088);
    EXPECT_DOUBLE_EQ(FindOp(p, "experts")->flops, 398'336);
    EXPECT_DOUBLE_EQ(FindOp(p, "experts.sum")->flops, 4'096.0 * etp);
  }
}

TEST(MoeLower, SharedExpertsFlopsByHand) {
  // Shared experts of intermediate 16 on every one of the 16 rows: gate+up 2 x 16 x 64 x 32 =
  // 65,536, SiLU*mul 5 x 16 x 16 = 1,280, down 2 x 16 x 16 x 64 = 32,768, the add 16 x 64 =
  // 1,024: 100,608, as llm's graph counts; the routed experts' ops are unchanged.
  const arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, uint64_t{1} << 30));
  config::Model model = MoeModel();
  model.set_shared_expert_intermediate_size(16);
  llm::Phase ph;
  ph.new_tokens = 16;
  double graph_shared = 0;
  for (const llm::Op& op : llm::BuildLayer(model, ph).ops)
    if (op.role == llm::OpRole::kSharedExperts) graph_shared = op.flops;
  EXPECT_DOUBLE_EQ(graph_shared, 100'608);
  const Program p = Lower(chip, model, Work(16, 0, 1), MoeMap(4, 4, 1));
  ASSERT_NE(FindOp(p, "shared_experts"), nullptr);
  EXPECT_DOUBLE_EQ(FindOp(p, "shared_experts")->flops, 100'608);
  EXPECT_DOUBLE_EQ(FindOp(p, "experts")->flops, 398'336);
  // Its weights (3 x 64 x 16) are on every rank.
  EXPECT_EQ(PlanWeights(chip, model, MoeMap(4, 4, 1), 1, "bf16").weight_bytes_per_core,
            (4'096u + 12'800 + 3'072) * 2);
}

TEST(MoeLower, DispatchAndCombineBytesByHand) {
  // 16 tokens on 4 ranks (4 rows each), balanced: 32 / 8 = 4 rows per expert, 1 from each
  // rank. ep 4: slot s holds experts 2s, 2s+1, so rank r sends 2 rows x 64 x 2 B = 256 B to
  // every other rank: 12 transfers of 256 B each way.
  const arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, uint64_t{1} << 30));
  const Program p = Lower(chip, MoeModel(), Work(16, 0, 1), MoeMap(4, 4, 1));
  int a2a = 0;
  for (size_t c = 0; c < p.collectives.size(); ++c) {
    const CollectiveInfo& ci = p.collectives[c];
    if (ci.kind != CollectiveKind::kAllToAll) continue;
    ++a2a;
    EXPECT_EQ(ToString(ci.algorithm), "direct");
    EXPECT_EQ(ci.ranks, 4);
    EXPECT_EQ(ci.bytes, 3u * 256 + 256);  // the largest send buffer, own block included
    int n = 0;
    for (size_t i = 0; i < p.num_tasks(); ++i)
      if (p.kind(i) == TaskKind::kTransfer && p.collective(i) == static_cast<int32_t>(c)) {
        ++n;
        EXPECT_EQ(p.transfer(i).bytes, 256u);
      }
    EXPECT_EQ(n, 12);
  }
  EXPECT_EQ(a2a, 2);
  // Each rank runs 2 experts of 4 rows: gate+up [4, 64] x [64, 64], down [4, 32] x [32, 64].
  int gemms = 0;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    if (p.kind(i) != TaskKind::kCompute || p.ops[p.op(i)].ref.op != "experts") continue;
    const ComputeShape& s = p.shape(i);
    if (s.op_kind != llm::OpKind::kGemm) continue;
    ++gemms;
    EXPECT_EQ(s.m, 4u);
    EXPECT_TRUE((s.k == 64 && s.n == 64) || (s.k == 32 && s.n == 64)) << s.k << " " << s.n;
  }
  EXPECT_EQ(gemms, 4 * 2 * 2);
}

TEST(MoeLower, CombineWaitsOnItsSendersDownGemmsOnly) {
  // DispatchAndCombineBytesByHand's layer: each rank runs 2 experts, so each combine transfer
  // waits on its sender's 2 down GEMMs ([4, 32] x [32, 64]). Those wait on everything the
  // experts read (the 3 dispatch transfers into the rank, its router), which the combine waited
  // on too before: a transfer of moe-qwen3-235b-a22b's waited on 62 (25.7 million deps in all).
  const arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, uint64_t{1} << 30));
  const Program p = Lower(chip, MoeModel(), Work(16, 0, 1), MoeMap(4, 4, 1));
  const OpInfo* combine = FindOp(p, "experts.combine");
  ASSERT_NE(combine, nullptr);
  int n = 0;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    if (&p.ops[p.op(i)] != combine) continue;
    ++n;
    ASSERT_EQ(p.deps(i).size(), 2u);
    for (TaskId d : p.deps(i)) {
      EXPECT_EQ(p.ops[p.op(d)].ref.op, "experts");
      EXPECT_EQ(p.core(d), p.core(i));
      EXPECT_EQ(p.shape(d).k, 32u);  // the down GEMM
    }
  }
  EXPECT_EQ(n, 12);
}

TEST(MoeLower, GpuNodeAllToAllIsOneNcclKernelPerGpuByHand) {
  // h200-sxm-8, TP 8 = EP 8, 16 tokens (2 rows per GPU: GPU g holds tokens 2g, 2g + 1),
  // balanced: every expert takes 4 of the 16 tokens, from its phase (ExpertTokens; phases 0,
  // 10, 4, 14, 8, 2, 12, 6): tokens 0 mod 4 take experts 3 and 6, 1 mod 4 experts 1 and 4, 2 mod
  // 4 experts 2 and 7, 3 mod 4 experts 0 and 5. Expert e is GPU e. So an even GPU's two tokens
  // go to GPUs 3, 6, 1, 4 and an odd GPU's to 2, 7, 0, 5; a row is 64 x 2 B = 128 B. GPUs 0 to 3
  // send 4 rows (512 B) and receive 4; GPUs 4 to 7 keep one row of their own expert's and send
  // and receive 3 (384 B). NCCL's all_to_all size is a rank's send buffer, (n - 1) / n of which
  // leaves it: 512 x 8 / 7 = 585.14, rounded up to 586 B, and 384 x 8 / 7 = 438.86, 439 B.
  // Combine is the reverse: the same sizes. Each GPU's kernel waits for its own rows and for
  // those of the GPUs it sends to or receives from (GPU 0: sends to 1, 3, 4, 6, receives expert
  // 0's rows from 1, 3, 5, 7), and is timed as arch/gpu's all_to_all of that size (CUDA graphs:
  // its device time).
  const std::string dir = std::string(TPSIM_SOURCE_DIR) + "/configs/";
  config::Chip cfg;
  config::ParseFile(dir + "chips/h200-sxm-8.textproto", &cfg, nullptr);
  const arch::Chip chip = arch::Chip::Build(cfg);
  const Program p = Lower(chip, MoeModel(), Work(16, 0, 1), MoeMap(8, 8, 1));
  for (const char* name : {"experts.dispatch", "experts.combine"}) {
    SCOPED_TRACE(name);
    const OpInfo* op = FindOp(p, name);
    ASSERT_NE(op, nullptr);
    EXPECT_EQ(op->ref.partition, "nccl");
    EXPECT_EQ(op->ref.note, "p2p/simple");
    std::vector<size_t> kernels(8, SIZE_MAX);
    for (size_t i = 0; i < p.num_tasks(); ++i) {
      if (p.ops[p.op(i)].ref.op != name) continue;
      ASSERT_EQ(p.kind(i), TaskKind::kCompute) << "no transfers on a GPU node";
      ASSERT_EQ(p.shape(i).op_kind, llm::OpKind::kCollective);
      ASSERT_EQ(kernels[p.core(i)], SIZE_MAX) << "one kernel per GPU";
      kernels[p.core(i)] = i;
    }
    for (int g = 0; g < 8; ++g) {
      SCOPED_TRACE("GPU " + std::to_string(g));
      ASSERT_NE(kernels[g], SIZE_MAX);
      const ComputeShape& s = p.shape(kernels[g]);
      EXPECT_EQ(s.m, static_cast<uint64_t>(CollectiveKind::kAllToAll));
      EXPECT_EQ(s.n, 8u);
      EXPECT_EQ(s.bytes, g < 4 ? 586u : 439u);
      const arch::gpu::CollEstimate e = arch::gpu::EstimateCollective(
          cfg.gpu(), 8, {.op = arch::gpu::CollOp::kAllToAll, .ranks = 8, .bytes = s.bytes});
      EXPECT_EQ(TaskTime(chip, p, kernels[g]), static_cast<Ps>(std::ceil(e.gpu_us * 1e6)));
      // The GPUs whose tasks it waits on, through its deps (each a task of one GPU).
      std::vector<int> waits;
      for (TaskId d : p.deps(kernels[g])) waits.push_back(p.core(d));
      std::sort(waits.begin(), waits.end());
      waits.erase(std::unique(waits.begin(), waits.end()), waits.end());
      const std::vector<std::vector<int>> want = {
          {0, 1, 3, 4, 5, 6, 7}, {0, 1, 2, 4, 5, 6, 7}, {1, 2, 3, 4, 5, 6, 7}, {0, 2, 3, 4, 5, 6, 7},
          {0, 1, 2, 3, 4, 6},    {0, 1, 2, 3, 5, 7},    {0, 1, 2, 3, 4, 6},    {0, 1, 2, 3, 5, 7}};
      EXPECT_EQ(waits, want[g]);
    }
  }
}

TEST(MoeLower, StreamedWeightsAreReadOnlyForExpertsWithTokens) {
  // Decode of one token: top-2 balanced picks experts 3 and 7 (BalancedCounts(2, 8)), in
  // slots 1 and 3 (ep 4): two reads of 3 x 64 x 32 x 2 B = 12,288 B, on ranks 1 and 3.
  const arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, uint64_t{1} << 30));
  config::Mapping m = MoeMap(4, 4, 1);
  m.set_weights("dram");
  const Program p = Lower(chip, MoeModel(), Work(16, 1, 1), m);
  std::vector<int> cores;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    const OpRef& ref = p.ops[p.op(i)].ref;
    if (p.kind(i) != TaskKind::kMemory || ref.op != "experts" || ref.phase != Phase::kDecode) continue;
    EXPECT_EQ(p.memory(i).bytes, 12'288u);
    cores.push_back(p.core(i));
  }
  EXPECT_EQ(cores, (std::vector<int>{1, 3}));  // linear placement: rank r on core r
}

TEST(MoeLower, WeightPlanCountsEveryExpertOfTheSlot) {
  // Per core, tp 4 megatron attention: q 64x64/4 + o 64x64/4, and k, v a whole KV head each
  // (2 KV heads over 4 ranks: each rank keeps one) 64x16: 1,024 x 4 = 4,096; MoE ep 4: router
  // 64 x 8 = 512 and 2 experts x 3 x 64 x 32 = 12,288. (4,096 + 12,800) x 2 B per layer, 2 layers.
  const arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, uint64_t{1} << 30));
  EXPECT_EQ(PlanWeights(chip, MoeModel(), MoeMap(4, 4, 1), 2, "bf16").weight_bytes_per_core,
            2u * (4'096 + 12'800) * 2);
  // ep 2 x tp 2: 4 experts per slot, each a half: the same 12,288.
  EXPECT_EQ(PlanWeights(chip, MoeModel(), MoeMap(4, 2, 2), 2, "bf16").weight_bytes_per_core,
            2u * (4'096 + 12'800) * 2);
  // ep 1 x tp 2 (2 replicas): all 8 experts, halves: 8 x 3 x 64 x 16 = 24,576.
  EXPECT_EQ(PlanWeights(chip, MoeModel(), MoeMap(4, 1, 2), 2, "bf16").weight_bytes_per_core,
            2u * (4'096 + 512 + 24'576) * 2);
}

TEST(MoeLower, ValidationNamesTheMoeFields) {
  const arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, uint64_t{1} << 30));
  auto diags = [&](const config::Mapping& m) {
    std::vector<config::Diag> d;
    ValidateMapping(m, chip, MoeModel(), Work(16, 0, 1), config::SourceMap(), &d);
    std::string s;
    for (const config::Diag& x : d) s += x.field + ": " + x.value + ": " + x.rule + "\n";
    return s;
  };
  EXPECT_EQ(diags(MoeMap(4, 4, 1)), "");
  EXPECT_NE(diags(MoeMap(4, 3, 1)).find("mapping.moe.ep: 3: must divide num_experts (8)"), std::string::npos);
  EXPECT_NE(
      diags(MoeMap(4, 2, 4)).find("mapping.moe.tp: 4: moe.ep x moe.tp (2 x 4) must divide mapping.tp (4)"),
      std::string::npos);
  // moe.tp unset: only moe.ep is said, with no derived moe.tp quoted as if given ("moe.ep x moe.tp
  // (8 x 0)").
  EXPECT_EQ(diags(MoeMap(4, 8, 0)), "mapping.moe.ep: 8: must be at most mapping.tp (4)\n");
  config::Mapping third = MoeMap(4, 3, 0);
  EXPECT_NE(
      diags(third).find("mapping.moe.ep: 3: must divide mapping.tp (4): with mapping.moe.tp unset, each "
                        "expert slot has mapping.tp / moe.ep ranks\n"),
      std::string::npos)
      << diags(third);
  config::Mapping z = MoeMap(4, 4, 1);
  z.mutable_moe()->set_routing("zipf");
  EXPECT_NE(diags(z).find("zipf routing needs mapping.moe.zipf_s > 0"), std::string::npos);
  z.mutable_moe()->set_routing("hot");
  EXPECT_NE(diags(z).find("mapping.moe.routing: hot: must be balanced, zipf or trace"), std::string::npos);
  z.mutable_moe()->set_routing("trace");
  EXPECT_NE(diags(z).find("trace routing needs mapping.moe.routing_file"), std::string::npos);
  z.mutable_moe()->set_routing("");
  z.mutable_moe()->set_capacity_factor(-1);
  EXPECT_NE(diags(z).find("mapping.moe.capacity_factor: -1: must be 0 (dropless)"), std::string::npos);
}

TEST(MoeLower, ChannelCapacityErrorNamesTheExpertSplit) {
  // Weights streamed (64 B of SRAM) into 1,000-byte channels: a rank of ep 4 holds 2 experts'
  // 12,288 B a layer (WeightPlanCountsEveryExpertOfTheSlot), far more. The advice names the
  // expert split, which mapping.tp alone does not shrink; a dense model's does not.
  config::Chip cfg = MeshChip(2, 2, 64);
  cfg.mutable_memory(0)->set_capacity_bytes(1000);
  const arch::Chip chip = arch::Chip::Build(cfg);
  auto rule = [&](const config::Model& model, const config::Mapping& m) {
    std::vector<config::Diag> d;
    ValidateDramCapacity(m, chip, model, Work(16, 0, 1), config::SourceMap(), &d);
    return d.empty() ? std::string("no error") : d[0].rule;
  };
  EXPECT_NE(rule(MoeModel(), MoeMap(4, 4, 1))
                .find("an MoE layer's experts over more ranks: mapping.moe.ep, "
                      "mapping.moe.tp"),
            std::string::npos);
  const std::string dense = rule(SmallModel(), Map(4, "megatron"));
  EXPECT_NE(dense.find("spread the model over more cores (mapping.tp, mapping.pipeline_stages)"),
            std::string::npos)
      << dense;
}

}  // namespace
}  // namespace tpsim::mapping
