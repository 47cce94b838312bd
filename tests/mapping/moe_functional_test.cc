// The numerics of the expert-parallel MoE layer (issue 17, item 5): the functional executor runs
// the lowered MoE block (router, dispatch all_to_all, per-expert GEMMs with TP inside each
// expert, combine all_to_all, weighted sum, shared experts) on real tensors, and it must equal
// the unpartitioned layer (mapping::RunReference) within 1e-4 for every routing (balanced, zipf,
// trace, each with and without a capacity factor that drops tokens) and every EP x TP split the
// mapping validation accepts on a 4x4 mesh and an 8-GPU node.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "configs/load.h"
#include "mapping/func_plan.h"
#include "mapping/functional.h"
#include "mapping/mapping.h"
#include "mapping/moe_routing.h"
#include "mapping_test_util.h"
#include "tests/arch/test_util.h"

namespace tpsim::mapping {
namespace {

using testing::Map;
using testing::MeshChip;
using testing::MoeMap;
using testing::MoeModel;
using testing::SmallModel;
using testing::Work;

constexpr double kTol = 1e-4;

// A routing trace for 8 experts, layers 0 and 1 (hot experts 2 and 5 on layer 0, 7 on layer 1).
std::string TraceFile() {
  static const testing::ProcessTempFile file(
      "tpsim_moe_func", "layer,e0,e1,e2,e3,e4,e5,e6,e7\n0,1,0,9,1,2,6,0,1\n1,2,1,1,0,1,1,0,10\n");
  return file.path();
}

// The routings: balanced, zipf, trace; each dropless and with capacity factor 0.5 (an expert
// keeps at most ceil(0.5 x tokens x top_k / E) assignments: 1 of balanced's 2 at 8 tokens).
std::vector<std::pair<std::string, config::MoeMapping>> Routings() {
  std::vector<std::pair<std::string, config::MoeMapping>> out;
  for (const char* kind : {"balanced", "zipf", "trace"})
    for (double cf : {0.0, 0.5}) {
      config::MoeMapping r;
      r.set_routing(kind);
      if (std::string(kind) == "zipf") r.set_zipf_s(1.2), r.set_seed(3);
      if (std::string(kind) == "trace") r.set_routing_file(TraceFile());
      r.set_capacity_factor(cf);
      out.push_back({std::string(kind) + (cf > 0 ? " cf 0.5" : ""), r});
    }
  return out;
}

// Runs `m` (its moe routing replaced by `routing`) functionally; the error against the reference.
double Error(const arch::Chip& chip, const config::Model& model, const config::Workload& wl,
             config::Mapping m, const config::MoeMapping& routing) {
  const int ep = static_cast<int>(m.moe().ep()), etp = static_cast<int>(m.moe().tp());
  *m.mutable_moe() = routing;
  m.mutable_moe()->set_ep(ep);
  m.mutable_moe()->set_tp(etp);
  const Program p = Lower(chip, model, wl, m, {.functional = true});
  return MaxRelativeError(RunFunctional(p), RunReference(model, wl, routing));
}

TEST(MoeFunctional, ExpertTokensGiveEveryRowSplitSplitBySourcesCounts) {
  // 16 tokens, 5 experts: a = round(0.618034 x 5) = 3, pi = 3e mod 5 = 0, 3, 1, 4, 2, phases
  // floor(16 pi / 5) = 0, 9, 3, 12, 6. Expert 0 takes 4 from phase 0: floor(4 (i+1) / 16) >
  // floor(4 i / 16) at i = 3, 7, 11, 15; expert 1 takes 8 from phase 9: 8 i + 9 crosses a
  // multiple of 16 at the even tokens (9 -> 17 at i = 0, 25 -> 33 at i = 2, ...); expert 2 takes 3
  // from phase 3: 3 i + 3 < 16 j <= 3 i + 6 at i = 4, 9, 14; expert 3 none; expert 4 all 16.
  const std::vector<uint64_t> n = {4, 8, 3, 0, 16};
  const auto takes = ExpertTokens(n, 16);
  EXPECT_EQ(takes[0], (std::vector<uint32_t>{3, 7, 11, 15}));
  EXPECT_EQ(takes[1], (std::vector<uint32_t>{0, 2, 4, 6, 8, 10, 12, 14}));
  EXPECT_EQ(takes[2], (std::vector<uint32_t>{4, 9, 14}));
  EXPECT_TRUE(takes[3].empty());
  EXPECT_EQ(takes[4].size(), 16u);
  // Any split into consecutive ranges: each range's tokens per expert are SplitBySource's counts.
  for (const std::vector<uint64_t>& split :
       {std::vector<uint64_t>{16}, {8, 8}, {4, 4, 4, 4}, {5, 4, 7}, {1, 0, 15}, {3, 3, 3, 3, 4}}) {
    const auto by_src = SplitBySource(n, split);
    uint64_t lo = 0;
    for (size_t s = 0; s < split.size(); ++s) {
      for (size_t e = 0; e < n.size(); ++e) {
        uint64_t c = 0;
        for (uint32_t i : takes[e]) c += i >= lo && i < lo + split[s];
        EXPECT_EQ(c, by_src[s][e]) << "source " << s << " expert " << e;
      }
      lo += split[s];
    }
  }
  EXPECT_THROW(ExpertTokens({17}, 16), std::invalid_argument);
}

TEST(MoeFunctional, ReferenceIsNotTrivial) {
  const config::Model moe = MoeModel();
  const auto wl = Work(8, 1, 2);
  const auto balanced = RunReference(moe, wl);
  ASSERT_EQ(balanced.size(), 2u);
  // The MoE block changes the output against the dense model of the same seeds ...
  EXPECT_GT(MaxRelativeError(balanced, RunReference(SmallModel(), wl)), 1e-2);
  // ... the routing matters (zipf sends other tokens to other experts) ...
  config::MoeMapping zipf;
  zipf.set_routing("zipf");
  zipf.set_zipf_s(1.2);
  zipf.set_seed(3);
  const auto skewed = RunReference(moe, wl, zipf);
  EXPECT_GT(MaxRelativeError(skewed, balanced), 1e-2);
  // ... a capacity factor drops tokens: zipf's 16 prefill assignments at capacity
  // ceil(1 x 16 / 8) = 2 per expert keep at most 16 but the hot experts lose theirs.
  config::MoeMapping capped = zipf;
  capped.set_capacity_factor(1.0);
  Routing r;
  r.kind = RoutingKind::kZipf, r.zipf_s = 1.2, r.seed = 3, r.capacity_factor = 1.0;
  EXPECT_GT(RouteTokens(r, 8, 2, 8, 0).dropped, 0u);
  EXPECT_GT(MaxRelativeError(RunReference(moe, wl, capped), skewed), 1e-2);
  // ... and so does the top-k renormalisation.
  config::Model raw = moe;
  raw.set_norm_topk_prob(false);
  EXPECT_GT(MaxRelativeError(RunReference(raw, wl), balanced), 1e-3);
}

TEST(MoeFunctional, EveryRoutingAndEpTpSplitOnAMesh) {
  // Attention TP p = 1, 2, 4, 8, 16 (megatron) on a 4x4 mesh, every (ep, moe tp) the mapping
  // accepts, prefill of 8 tokens + 1 decode step, 2 sparse layers.
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  const config::Model model = MoeModel();
  const auto wl = Work(8, 1, 2);
  // Every capped routing drops tokens in the prefill of layer 0 (8 tokens, 16 assignments).
  for (const auto& [name, moe] : Routings()) {
    RoutingTrace trace;
    Routing r;
    ASSERT_TRUE(ParseRoutingKind(moe.routing(), &r.kind));
    r.zipf_s = moe.zipf_s(), r.seed = moe.seed(), r.capacity_factor = moe.capacity_factor();
    if (r.kind == RoutingKind::kTrace) {
      trace = ReadRoutingTrace(moe.routing_file(), 8, config::Location{"<test>", 1, 1});
      r.trace = &trace;
    }
    EXPECT_EQ(RouteTokens(r, 8, 2, 8, 0).dropped > 0, moe.capacity_factor() > 0) << name;
  }
  int runs = 0, refused = 0;
  for (int p : {1, 2, 4, 8, 16})
    for (int ep : {1, 2, 4, 8})
      for (int etp : {1, 2, 4, 8}) {
        const config::Mapping m = MoeMap(p, ep, etp);
        try {
          Lower(chip, model, wl, m);
        } catch (const config::ConfigError&) {
          ++refused;  // ep x tp does not divide p, or ep does not divide the 8 experts
          continue;
        }
        for (const auto& [name, routing] : Routings()) {
          SCOPED_TRACE("tp " + std::to_string(p) + " ep " + std::to_string(ep) + " moe tp " +
                       std::to_string(etp) + " " + name);
          EXPECT_LT(Error(chip, model, wl, m, routing), kTol);
          ++runs;
        }
      }
  // (p, ep, moe tp) with ep x moe tp dividing p: 1 + 3 + 6 + 10 + 13 = 33 splits, 6 routings each.
  EXPECT_EQ(runs, 33 * 6);
  EXPECT_EQ(refused, 80 - 33);
}

TEST(MoeFunctional, EveryAllToAllAlgorithm) {
  // mapping.moe.all_to_all: pairwise's and hierarchical's multi-step schedules (blocks staged and
  // forwarded, separate send and receive areas) move the same rows as direct. 4x4 mesh, linear
  // and ring placements (hierarchical orders the ranks by their cores' rows and columns), whole
  // groups and replicas (16 = 2 x ep 4 x tp 2), every routing.
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  const config::Model model = MoeModel();
  const auto wl = Work(8, 1, 2);
  int runs = 0;
  for (const std::string a : {"direct", "pairwise", "hierarchical", "auto"})
    for (const char* placement : {"linear", "ring"})
      for (auto [p, ep, etp] : {std::tuple{16, 8, 2}, {16, 4, 2}, {8, 8, 1}, {4, 2, 2}, {16, 2, 1}}) {
        config::Mapping m = MoeMap(p, ep, etp);
        m.set_placement(placement);
        for (auto [name, routing] : Routings()) {
          SCOPED_TRACE(a + " " + placement + " tp " + std::to_string(p) + " ep " + std::to_string(ep) +
                       " moe tp " + std::to_string(etp) + " " + name);
          routing.set_all_to_all(a);
          EXPECT_LT(Error(chip, model, wl, m, routing), kTol);
          ++runs;
        }
      }
  EXPECT_EQ(runs, 4 * 2 * 5 * 6);
}

TEST(MoeFunctional, SharedExpertsBatchesMixedLayersAndRawTopK) {
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  config::Model model = MoeModel();
  model.set_shared_expert_intermediate_size(48);
  model.set_norm_topk_prob(false);
  model.set_decoder_sparse_step(2);  // layer 0 dense, layer 1 sparse
  config::Workload wl = Work(6, 2, 2, 3);
  wl.set_batch(2);  // 12 prefill rows (uneven over 8 ranks), then 2 rows per decode step
  for (const auto& [name, routing] : Routings())
    for (auto [p, ep, etp] : {std::tuple{4, 4, 1}, {4, 2, 2}, {8, 4, 2}, {8, 2, 1}}) {
      SCOPED_TRACE("tp " + std::to_string(p) + " ep " + std::to_string(ep) + " moe tp " +
                   std::to_string(etp) + " " + name);
      EXPECT_LT(Error(chip, model, wl, MoeMap(p, ep, etp), routing), kTol);
    }
}

TEST(MoeFunctional, GroupedExpertsOnAGpuNode) {
  // h100-sxm-8: each GPU's experts are one grouped gate+up task, one SiLU*mul, one grouped down.
  const arch::Chip chip = arch::testing::LoadChip("h100-sxm-8");
  config::Model model = MoeModel();
  model.set_shared_expert_intermediate_size(32);
  const auto wl = Work(8, 1, 2);
  for (const auto& [name, routing] : Routings())
    for (auto [p, ep, etp] : {std::tuple{8, 8, 1}, {8, 4, 2}, {8, 2, 2}, {2, 2, 1}}) {
      SCOPED_TRACE("tp " + std::to_string(p) + " ep " + std::to_string(ep) + " moe tp " +
                   std::to_string(etp) + " " + name);
      EXPECT_LT(Error(chip, model, wl, MoeMap(p, ep, etp), routing), kTol);
    }
}

TEST(MoeFunctional, FunctionalDataLeavesTheTasksAlone) {
  // The functional side tables change nothing the engines read: same tasks, deps, collectives.
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  config::Model model = MoeModel();
  model.set_shared_expert_intermediate_size(48);
  config::Mapping m = MoeMap(8, 4, 2);
  m.mutable_moe()->set_routing("zipf");
  m.mutable_moe()->set_zipf_s(1.2);
  const Program lean = Lower(chip, model, Work(8, 1, 2), m);
  const Program full = Lower(chip, model, Work(8, 1, 2), m, {.functional = true});
  ASSERT_EQ(lean.num_tasks(), full.num_tasks());
  ASSERT_EQ(lean.collectives.size(), full.collectives.size());
  ASSERT_EQ(full.func.collectives.size(), full.collectives.size());
  for (size_t i = 0; i < lean.num_tasks(); ++i) {
    const Task a = lean.task(i), b = full.task(i);
    ASSERT_EQ(a.kind, b.kind) << i;
    EXPECT_EQ(a.core, b.core) << i;
    EXPECT_EQ(a.bytes, b.bytes) << i;
    EXPECT_EQ(a.flops, b.flops) << i;
    EXPECT_EQ(a.offset, b.offset) << i;
    EXPECT_EQ(a.dst_offset, b.dst_offset) << i;
    EXPECT_EQ(a.func, -1) << i;
    EXPECT_EQ(std::vector<TaskId>(lean.deps(i).begin(), lean.deps(i).end()),
              std::vector<TaskId>(full.deps(i).begin(), full.deps(i).end()))
        << i;
  }
}

TEST(MoeFunctional, ADroppedContributionOrAWrongRoutingIsCaught) {
  // The check can fail: skipping one (token, expert) term of the weighted sum, or comparing
  // against a reference that routes differently, breaks the 1e-4 bound by far.
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  const config::Model model = MoeModel();
  const auto wl = Work(8, 0, 1);
  Program p = Lower(chip, model, wl, MoeMap(4, 4, 1), {.functional = true});
  const auto ref = RunReference(model, wl);
  ASSERT_LT(MaxRelativeError(RunFunctional(p), ref), kTol);
  config::MoeMapping zipf;
  zipf.set_routing("zipf");
  zipf.set_zipf_s(1.2);
  EXPECT_GT(MaxRelativeError(RunFunctional(p), RunReference(model, wl, zipf)), 1e-2);
  // The first accumulating matmul with a successor: unlink its successor.
  bool cut = false;
  for (FuncOp& f : p.func.ops)
    if (f.kind == FuncKind::kMatmul && f.accumulate && f.next >= 0 &&
        p.func.ops[f.next].kind == FuncKind::kMatmul && p.func.ops[f.next].accumulate) {
      f.next = p.func.ops[f.next].next;
      cut = true;
      break;
    }
  ASSERT_TRUE(cut);
  EXPECT_GT(MaxRelativeError(RunFunctional(p), ref), 1e-3);
}

}  // namespace
}  // namespace tpsim::mapping
