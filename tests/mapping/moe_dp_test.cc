// Issue 17, the attention parallelism chosen apart from the MoE's and the placement of expert
// groups: mapping.attention_dp (D replicas of TP mapping.tp for attention and the dense parts,
// the MoE block over all tp x D ranks) and mapping.moe.group_order (which ranks form each
// expert slot). The functional executor proves the layer equals the unpartitioned one within
// 1e-4; the combine's talkers on a 2x2 mesh are checked by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "configs/load.h"
#include "mapping/functional.h"
#include "mapping/mapping.h"
#include "mapping/moe_routing.h"
#include "mapping_test_util.h"
#include "tests/arch/test_util.h"

namespace tpsim::mapping {
namespace {

using testing::MeshChip;
using testing::MoeMap;
using testing::MoeModel;
using testing::SmallModel;
using testing::Work;

constexpr double kTol = 1e-4;

config::Mapping DpMap(int tp, int dp, int ep, int etp, const std::string& order = "") {
  config::Mapping m = MoeMap(tp, ep, etp);
  m.set_attention_dp(static_cast<uint32_t>(dp));
  m.mutable_moe()->set_group_order(order);
  return m;
}

double Error(const arch::Chip& chip, const config::Model& model, const config::Workload& wl,
             const config::Mapping& m) {
  const Program p = Lower(chip, model, wl, m, {.functional = true});
  return MaxRelativeError(RunFunctional(p), RunReference(model, wl, m.moe()));
}

TEST(MoeDp, ReplicasEqualTheUnpartitionedLayer) {
  // 16 experts of Im 32, top-2, hidden 64, 4 heads (2 KV heads); batch 4 (4 sequences of 3
  // prompt tokens, then 2 decode steps), 2 sparse layers, on a 4x4 mesh. The case is
  // attention TP 4 x D 4 with EP 16 over the same 16 cores.
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  config::Model model = MoeModel();
  model.set_num_experts(16);
  config::Workload wl = Work(3, 2, 2);
  wl.set_batch(4);
  int runs = 0;
  for (const char* routing : {"balanced", "zipf"})
    for (auto [tp, dp, ep, etp] : {std::tuple{4, 4, 16, 1},
                                   {2, 2, 4, 1},
                                   {1, 4, 4, 1},
                                   {2, 4, 4, 2},
                                   {4, 2, 8, 1},
                                   {2, 2, 2, 2},
                                   {1, 2, 2, 1}})
      for (const char* order : {"", "ep_inner"}) {
        config::Mapping m = DpMap(tp, dp, ep, etp, order);
        m.mutable_moe()->set_routing(routing);
        if (std::string(routing) == "zipf") m.mutable_moe()->set_zipf_s(1.2), m.mutable_moe()->set_seed(3);
        SCOPED_TRACE("tp " + std::to_string(tp) + " dp " + std::to_string(dp) + " ep " + std::to_string(ep) +
                     " moe tp " + std::to_string(etp) + " " + routing + " " + order);
        EXPECT_LT(Error(chip, model, wl, m), kTol);
        ++runs;
      }
  EXPECT_EQ(runs, 2 * 7 * 2);
}

TEST(MoeDp, DenseLayersSharedExpertsAndAGpuNode) {
  // Layer 0 dense (decoder_sparse_step 2), shared experts, raw top-k; and a dense model:
  // attention_dp needs no MoE block. A GPU node (grouped experts) too.
  const arch::Chip mesh = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  config::Model model = MoeModel();
  model.set_shared_expert_intermediate_size(48);
  model.set_norm_topk_prob(false);
  model.set_decoder_sparse_step(2);
  config::Workload wl = Work(5, 1, 2, 3);  // 3 cached tokens before the prompt
  wl.set_batch(2);
  for (auto [tp, dp, ep, etp] : {std::tuple{4, 2, 8, 1}, {2, 2, 2, 2}, {1, 2, 2, 1}}) {
    SCOPED_TRACE("tp " + std::to_string(tp) + " dp " + std::to_string(dp));
    EXPECT_LT(Error(mesh, model, wl, DpMap(tp, dp, ep, etp)), kTol);
  }
  config::Mapping dense = testing::Map(2, "megatron");
  dense.set_attention_dp(2);
  EXPECT_LT(Error(mesh, SmallModel(), wl, dense), kTol);
  dense.set_pipeline_stages(2);  // stage sends per replica
  EXPECT_LT(Error(mesh, SmallModel(), wl, dense), kTol);
  const arch::Chip node = arch::testing::LoadChip("h100-sxm-8");
  EXPECT_LT(Error(node, model, wl, DpMap(4, 2, 8, 1)), kTol);
  // 16 KiB of SRAM per core: activations are evicted and read back inside the replicas and
  // inside the MoE block (each rank's own replica's tensors, on its own core); the numbers
  // stay the same.
  const arch::Chip tiny = arch::Chip::Build(MeshChip(4, 4, uint64_t{16} << 10));
  config::Workload longer = Work(32, 1, 2);
  longer.set_batch(2);
  const Program p = Lower(tiny, model, longer, DpMap(4, 2, 8, 1), {.functional = true});
  EXPECT_GT(p.spilled_bytes, 0u);
  bool block_spills = false;  // a DRAM write inside the MoE block
  for (size_t i = 0; i < p.num_tasks(); ++i)
    block_spills = block_spills || (p.task(i).kind == TaskKind::kMemory && p.task(i).write &&
                                    p.ops[p.task(i).op].ref.op.rfind("experts", 0) == 0);
  EXPECT_TRUE(block_spills);
  EXPECT_LT(MaxRelativeError(RunFunctional(p), RunReference(model, longer, DpMap(4, 2, 8, 1).moe())), kTol);
}

TEST(MoeDp, AStageHasTpTimesDpCores) {
  // tp 4 x D 4: 16 distinct cores; the dense ops run once per replica in one op row (4 x the
  // tasks of tp 4 alone), the MoE dispatch spans all 16 ranks.
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  config::Model model = MoeModel();
  model.set_num_experts(16);
  config::Workload wl = Work(4, 0, 1);
  wl.set_batch(4);
  const Program p = Lower(chip, model, wl, DpMap(4, 4, 16, 1));
  const Program one = Lower(chip, model, Work(4, 0, 1), DpMap(4, 1, 4, 1));
  std::set<int> cores;
  size_t qkv = 0, qkv_one = 0;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    cores.insert(static_cast<int>(p.task(i).core));
    if (p.task(i).kind == TaskKind::kCompute && p.ops[p.task(i).op].ref.op.rfind("q_proj", 0) == 0) ++qkv;
  }
  for (size_t i = 0; i < one.num_tasks(); ++i)
    if (one.task(i).kind == TaskKind::kCompute && one.ops[one.task(i).op].ref.op.rfind("q_proj", 0) == 0)
      ++qkv_one;
  EXPECT_EQ(cores.size(), 16u);
  EXPECT_EQ(qkv, 4 * qkv_one);
  bool dispatch = false;
  for (const CollectiveInfo& c : p.collectives)
    if (c.kind == CollectiveKind::kAllToAll) {
      EXPECT_EQ(c.ranks, 16);
      EXPECT_EQ(c.members.size(), 16u);
      dispatch = true;
    }
  EXPECT_TRUE(dispatch);
}

TEST(MoeDp, LocatedErrors) {
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  config::Model model = MoeModel();
  model.set_num_experts(16);
  config::Workload wl = Work(4, 0, 1);
  wl.set_batch(4);
  auto rule = [&](const config::Mapping& m, const config::Workload& w) -> std::string {
    try {
      Lower(chip, model, w, m);
    } catch (const config::ConfigError& e) {
      return e.diags().at(0).field + ": " + e.diags().at(0).value + ": " + e.diags().at(0).rule;
    }
    return "";
  };
  config::Workload three = wl;
  three.set_batch(3);
  EXPECT_EQ(rule(DpMap(4, 4, 16, 1), three),
            "mapping.attention_dp: 4: must divide workload.batch (3): each attention replica takes whole "
            "sequences");
  EXPECT_EQ(rule(DpMap(4, 4, 16, 2), wl),
            "mapping.moe.tp: 2: moe.ep x moe.tp (16 x 2) must divide mapping.tp x mapping.attention_dp (16)");
  EXPECT_EQ(rule(DpMap(4, 8, 16, 1), wl),
            "mapping.attention_dp: 8: tp x attention_dp x pipeline_stages (32) exceeds the chip's 16 cores");
  EXPECT_EQ(rule(DpMap(4, 4, 16, 1, "ep_outer"), wl),
            "mapping.moe.group_order: ep_outer: must be tp_inner or ep_inner");
  // EP 16 over attention TP 4 alone is refused as before.
  EXPECT_EQ(rule(DpMap(4, 1, 16, 1), wl),
            "mapping.moe.tp: 1: moe.ep x moe.tp (16 x 1) must divide mapping.tp (4)");
}

// A routing trace for 8 experts on layer 0: every token to experts 0 and 1 (slot 0 of ep 2).
std::string HotTrace() {
  static const testing::ProcessTempFile file("tpsim_moe_dp", "0,8,8,0,0,0,0,0,0\n");
  return file.path();
}

// (sender core, receiver core, bytes) of layer 0's prefill combine.
std::set<std::tuple<int, int, uint64_t>> CombineTalkers(const std::string& order) {
  const arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, uint64_t{1} << 30));
  config::Mapping m = DpMap(4, 1, 2, 2, order);
  m.mutable_moe()->set_routing("trace");
  m.mutable_moe()->set_routing_file(HotTrace());
  const Program p = Lower(chip, MoeModel(), Work(8, 0, 1), m);
  std::set<std::tuple<int, int, uint64_t>> out;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    const Task t = p.task(i);
    const std::string& op = p.ops[t.op].ref.op;
    if (t.kind == TaskKind::kTransfer && op.size() > 8 && op.substr(op.size() - 8) == ".combine")
      out.insert({static_cast<int>(t.core), static_cast<int>(t.dst_core), t.bytes});
  }
  return out;
}

TEST(MoeDp, GroupOrderDecidesWhichRanksTalkInTheCombine) {
  // 2x2 mesh, linear placement (rank r on core r), attention TP 4, ep 2 x moe tp 2, 8 experts:
  // slot 0 holds experts 0-3. Every token goes to experts 0 and 1, so only slot 0's ranks
  // return rows. Each rank holds 2 of the 8 tokens: 2 tokens x 2 experts = 4 rows of H 64 bf16
  // = 512 B to (and back from) each rank of slot 0 (both need whole rows for their N split).
  // tp_inner: slot 0 = ranks {0, 1}; ep_inner: slot 0 = ranks {0, 2}.
  using T = std::tuple<int, int, uint64_t>;
  EXPECT_EQ(CombineTalkers(""),
            (std::set<T>{{0, 1, 512}, {0, 2, 512}, {0, 3, 512}, {1, 0, 512}, {1, 2, 512}, {1, 3, 512}}));
  EXPECT_EQ(CombineTalkers("tp_inner"), CombineTalkers(""));
  EXPECT_EQ(CombineTalkers("ep_inner"),
            (std::set<T>{{0, 1, 512}, {0, 2, 512}, {0, 3, 512}, {2, 0, 512}, {2, 1, 512}, {2, 3, 512}}));
  MoeGroups g;
  g.p = 16, g.ep = 4, g.tp = 2, g.experts = 8, g.ep_inner = true;  // 2 replicas of 8 ranks
  EXPECT_EQ(g.Slot(13), 1);  // local rank 5: slot 5 % 4, rank 5 / 4 of it
  EXPECT_EQ(g.J(13), 1);
  EXPECT_EQ(g.Rank(1, 1, 1), 13);
  g.ep_inner = false;
  EXPECT_EQ(g.Slot(13), 2);
  EXPECT_EQ(g.J(13), 1);
  EXPECT_EQ(g.Rank(1, 2, 1), 13);
}

}  // namespace
}  // namespace tpsim::mapping
