// The one interpreter of functional data (mapping/func_plan.h: the plan and its CPU backend, which
// is also mapping::RunFunctional) must reproduce the unpartitioned reference on the small test
// model of tests/mapping (hidden 64, 4 heads, 2 KV heads, head_dim 16, intermediate 128,
// qk_norm) for every partitioner at TP 1, 2, 4, 8, prefill and decode, batch 1 and 2: that is
// what makes the CUDA backend, which runs the same steps, a check of the partitioned layer and
// not of a re-derivation of it. Also the GPU side (validate/func_plan.h) and the numerics check.
#include "validate/func_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "../mapping/mapping_test_util.h"
#include "configs/load.h"
#include "llm/model.h"
#include "mapping/collective/collective.h"
#include "mapping/mapping.h"
#include "tests/mapping/program_test_util.h"
#include "validate/numerics.h"

namespace tpsim::validate {
namespace {

using mapping::testing::Map;
using mapping::testing::MeshChip;
using mapping::testing::MoeModel;
using mapping::testing::SmallModel;
using mapping::testing::SwitchChip;
using mapping::testing::Work;

config::Mapping Mapping(int tp, const std::string& part, const std::string& coll = "ring") {
  config::Mapping m = Map(tp, part, coll);
  if (part == "mn_2d") m.set_grid_rows(tp >= 4 ? 2 : 1);
  return m;
}

struct Case {
  int tp;
  std::string part;
};
std::vector<Case> Cases() {
  std::vector<Case> cs{{1, "k_split"}};
  for (const char* part : {"k_split", "n_split", "megatron", "m_split_rotate", "mn_2d"})
    for (int tp : {2, 4, 8}) cs.push_back({tp, part});
  return cs;
}

// mapping::RunFunctional is this plan on the CPU backend (one interpreter); what holds it is the
// unpartitioned reference, computed one sequence at a time with its own kernels.
TEST(FuncPlan, CpuBackendAgreesWithTheReferenceOnAMesh) {
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  config::Workload batched = Work(8, 1, 2);
  batched.set_batch(2);
  for (const auto& wl : {Work(8, 1, 2), Work(8, 2, 1, 4), batched})  // + cached 4 + 2 decodes; batch 2
    for (const Case& c : Cases()) {
      SCOPED_TRACE(c.part + " tp " + std::to_string(c.tp) + " seq " + std::to_string(wl.seq_len()) +
                   " batch " + std::to_string(wl.batch()));
      mapping::Program p =
          mapping::Lower(chip, SmallModel(), wl, Mapping(c.tp, c.part), {.functional = true});
      auto got = RunFuncPlanCpu(BuildFuncPlan(p), {});
      ASSERT_EQ(got.size(), 1u + wl.decode_steps());
      OutputDiff d = CompareOutputs(got, mapping::RunReference(SmallModel(), wl));
      EXPECT_FALSE(d.shape_mismatch);
      EXPECT_LT(d.rel, 1e-4) << "output " << d.output << " (" << d.row << ", " << d.col << "): " << d.got
                             << " vs " << d.want;
    }
}

TEST(FuncPlan, CpuBackendAgreesWithTheReferenceOnASwitchWithNvlsAndPipelines) {
  const arch::Chip chip = arch::Chip::Build(SwitchChip(8, 0));
  std::vector<config::Mapping> maps;
  for (const char* part : {"megatron", "k_split", "mn_2d"})
    for (const char* coll : {"nvls", "auto", "direct", "halving_doubling"})
      maps.push_back(Mapping(8, part, coll));
  maps.push_back(Map(4, "megatron", "ring", "linear", 2));  // two pipeline stages of TP 4
  maps.push_back(Map(2, "m_split_rotate", "bidirectional_ring", "linear", 2));
  const auto want = mapping::RunReference(SmallModel(), Work(8, 1, 2));
  for (const config::Mapping& m : maps) {
    SCOPED_TRACE(m.partition() + " / " + m.collective() + " / tp " + std::to_string(m.tp()) + " stages " +
                 std::to_string(m.pipeline_stages()));
    mapping::Program p = mapping::Lower(chip, SmallModel(), Work(8, 1, 2), m, {.functional = true});
    OutputDiff d = CompareOutputs(RunFuncPlanCpu(BuildFuncPlan(p), {}), want);
    EXPECT_LT(d.rel, 1e-4);
  }
}

// Batch B > 1 splits attention, RoPE and the KV write by sequence: with batch 3 a decode step's
// QK^T of one core's heads is one batched matmul per (sequence, KV head); counted here on TP 1
// (4 query heads over 2 KV heads: 2 per sequence).
TEST(FuncPlan, BatchedAttentionIsOneMatmulPerSequenceAndKvHead) {
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  for (uint32_t batch : {1u, 3u}) {
    config::Workload wl = Work(8, 1, 1);
    wl.set_batch(batch);
    mapping::Program p = mapping::Lower(chip, SmallModel(), wl, Map(1, "k_split"), {.functional = true});
    FuncPlan plan = BuildFuncPlan(p);
    size_t decode_scores = 0, decode_ropes = 0;
    for (const FuncStep& s : plan.steps) {
      if (s.task < 0 || s.origin != FuncStepOrigin::kOp) continue;
      const mapping::OpRef& r = p.ops[p.task(s.task).op].ref;
      if (r.phase != mapping::Phase::kDecode) continue;
      decode_scores += s.kind == FuncStepKind::kMatmul && s.transpose_b && s.b.rows == 9;  // 8 + 1 keys
      decode_ropes += s.kind == FuncStepKind::kRope;
    }
    EXPECT_EQ(decode_scores, 2u * batch) << "batch " << batch;
    EXPECT_EQ(decode_ropes, 2u * batch) << "batch " << batch;  // q and k, one row per sequence
    EXPECT_LT(mapping::MaxRelativeError(RunFuncPlanCpu(plan, {}), mapping::RunReference(SmallModel(), wl)),
              1e-4);
  }
}

TEST(FuncPlan, ArenasAndStepsOfOneRank) {
  // TP 1, one layer, prefill of 8 tokens. Weights (shared arena), per layer:
  // q 64x64 + k 64x32 + v 64x32 + o 64x64 + gate 64x128 + up 64x128 + down 128x64
  // = 4096 + 2048 + 2048 + 4096 + 8192 + 8192 + 8192 = 36864 elements. No transfers, so the
  // staging arena is empty and there are no pack / stage / apply / unpack steps.
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  mapping::Program p =
      mapping::Lower(chip, SmallModel(), Work(8, 0, 1), Map(1, "k_split"), {.functional = true});
  FuncPlan plan = BuildFuncPlan(p);
  ASSERT_EQ(plan.arenas.size(), 3u);
  EXPECT_EQ(plan.arenas[0].core, kWeightsCore);
  EXPECT_EQ(plan.arenas[0].elems, 36864u);
  EXPECT_EQ(plan.arenas[1].core, kStagingCore);
  EXPECT_EQ(plan.arenas[1].elems, 0u);
  EXPECT_EQ(plan.arenas[2].core, 0);
  size_t compute = 0;
  for (const auto& t : p.tasks()) compute += t.kind == mapping::TaskKind::kCompute && t.func >= 0;
  // Every compute task is one step, except QK^T and PV: one batched matmul per KV head (2).
  EXPECT_EQ(plan.steps.size(), compute + 2);
  // Matmul FLOPs: 2 * 8 tokens * 36864 weights + QK^T and PV: 2 * 4 heads * 8 * 8 * 16 each.
  EXPECT_DOUBLE_EQ(plan.MatmulFlops(), 2.0 * 8 * 36864 + 2 * (2.0 * 4 * 8 * 8 * 16));
  for (const auto& s : plan.steps) EXPECT_EQ(s.origin, FuncStepOrigin::kOp);
}

TEST(FuncPlan, EveryTransferIsStagedThenApplied) {
  // Megatron TP 4 on a ring: two all-reduces per layer (after o and after down), each 2(P-1)
  // steps of P transfers. Every transfer becomes one stage and one apply step; reductions add.
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  mapping::Program p =
      mapping::Lower(chip, SmallModel(), Work(8, 0, 1), Map(4, "megatron"), {.functional = true});
  FuncPlan plan = BuildFuncPlan(p);
  size_t transfers = 0, reduces = 0, stage = 0, apply_add = 0, apply_copy = 0;
  for (const auto& t : p.tasks()) transfers += t.kind == mapping::TaskKind::kTransfer, reduces += t.reduce;
  for (const auto& s : plan.steps) {
    stage += s.origin == FuncStepOrigin::kStage;
    apply_add += s.origin == FuncStepOrigin::kApply && s.kind == FuncStepKind::kAdd;
    apply_copy += s.origin == FuncStepOrigin::kApply && s.kind == FuncStepKind::kCopy;
  }
  EXPECT_EQ(transfers, 2u * 2 * 3 * 4);
  EXPECT_EQ(stage, transfers);
  EXPECT_EQ(apply_add, reduces);
  EXPECT_EQ(apply_copy, transfers - reduces);
  EXPECT_EQ(plan.arenas.size(), 2u + 4);  // weights, staging, 4 cores
}

TEST(FuncPlan, BadProgramsThrow) {
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  mapping::Program p =
      mapping::Lower(chip, SmallModel(), Work(8, 0, 1), Map(2, "megatron"), {.functional = true});
  {
    mapping::Program q = p;
    q.func.batch = 3;  // 8 rows do not divide into 3 sequences
    EXPECT_THROW(BuildFuncPlan(q), std::invalid_argument);
  }
  {
    mapping::Program q = p;
    q.func.ops[0].a.r1 = q.func.tensors[q.func.ops[0].a.tensor].rows + 1;
    EXPECT_THROW(BuildFuncPlan(q), std::invalid_argument);
  }
  {
    mapping::testing::TestProgram q = mapping::testing::TestProgram::Of(p);
    for (auto& t : q.tasks)
      if (t.kind == mapping::TaskKind::kTransfer) {
        t.offset += uint64_t{1} << 30;
        break;
      }
    EXPECT_THROW(BuildFuncPlan(q), std::invalid_argument);
  }
  {
    mapping::testing::TestProgram q = mapping::testing::TestProgram::Of(p);
    for (auto& t : q.tasks)
      if (t.kind == mapping::TaskKind::kTransfer) {
        t.collective = 999;
        break;
      }
    EXPECT_THROW(BuildFuncPlan(q), std::invalid_argument);
  }
  {
    mapping::Program q = p;
    q.func.ops[0].out.tensor = 1 << 20;
    EXPECT_THROW(BuildFuncPlan(q), std::invalid_argument);
  }
}

// The tolerance of tpsim-validate's check (kNumericsTolerance) against what bf16 storage really
// costs: every partitioner at TP 2, 4, 8 against TP 1, both with every written value rounded to
// bf16, on one layer (prefill 16 after 8 cached, then 2 decode steps).
TEST(FuncPlan, Bf16PartitionedAgreesWithOneRank) {
  const arch::Chip chip = arch::Chip::Build(SwitchChip(8, 0));
  double worst = 0;
  std::string worst_case;
  for (const Case& c : Cases()) {
    if (c.tp == 1) continue;
    for (const char* coll : {"ring", "auto"}) {
      SCOPED_TRACE(c.part + " / " + coll + " tp " + std::to_string(c.tp));
      NumericsPlans np = PlanNumerics(chip, SmallModel(), Work(16, 2, 4, 8), Mapping(c.tp, c.part, coll));
      EXPECT_FALSE(np.instance.reduced);
      EXPECT_EQ(np.instance.workload.num_layers(), 1u);
      auto part = RunFuncPlanCpu(np.part_plan, {true});
      auto ref = RunFuncPlanCpu(np.ref_plan, {true});
      NumericsVerdict v = JudgeNumerics("partitioned vs TP 1", np.part_plan, part, ref);
      EXPECT_TRUE(v.ok) << v.text;
      if (v.diff.rel > worst)
        worst = v.diff.rel, worst_case = c.part + " / " + coll + " tp " + std::to_string(c.tp);
      // bf16 rounding really happened: the unrounded TP 1 run differs from the rounded one.
      EXPECT_GT(CompareOutputs(RunFuncPlanCpu(np.ref_plan, {false}), ref).rel, 1e-4);
    }
  }
  std::printf("worst bf16 relative error, partitioned vs TP 1: %.5f (%s); tolerance %.5f\n", worst,
              worst_case.c_str(), kNumericsTolerance);
  EXPECT_LT(worst, kNumericsTolerance / 2);  // the tolerance keeps a 2x margin
}

// The same on real shapes: a Qwen3-4B layer (hidden 2560, 32 heads, 8 KV heads, head_dim 128,
// intermediate 9728) on 8 tokens + 1 decode step, k_split at TP 8 (eight bf16 partial sums per
// GEMM: the largest error of the partitioners when this was written, 0.0123).
TEST(FuncPlan, Bf16PartitionedAgreesWithOneRankOnQwen3Shapes) {
  const std::string dir = std::string(TPSIM_SOURCE_DIR) + "/configs/";
  config::Chip cfg;
  config::ParseFile(dir + "chips/h200-sxm-8.textproto", &cfg, nullptr);
  const arch::Chip chip = arch::Chip::Build(cfg);
  config::SourceMap locs;
  const config::Model model = llm::LoadModelFile(dir + "models/qwen3-4b.json", &locs);
  NumericsPlans np = PlanNumerics(chip, model, Work(8, 1, 1), Mapping(8, "k_split", "auto"));
  // Both plans read the layer's weights (some 100 M values) from arena 0, made by the same inits,
  // and no step writes there: make them once (bf16), run the partitioned plan on them, then the
  // TP 1 plan on the same memory. The arithmetic is RunFuncPlanCpu's; only the second making of
  // the same weights (and a second 400 MB copy of them) is saved.
  auto same_init = [](const FuncInit& a, const FuncInit& b) {
    return a.arena == b.arena && a.offset == b.offset && a.rows == b.rows && a.cols == b.cols &&
           a.seed == b.seed && a.scale == b.scale;
  };
  auto weights_inits = [](const FuncPlan& p) {
    std::vector<FuncInit> w;
    for (const FuncInit& in : p.inits)
      if (in.arena == 0) w.push_back(in);
    return w;
  };
  const std::vector<FuncInit> wp = weights_inits(np.part_plan), wr = weights_inits(np.ref_plan);
  ASSERT_EQ(np.part_plan.arenas[0].elems, np.ref_plan.arenas[0].elems);
  ASSERT_TRUE(std::equal(wp.begin(), wp.end(), wr.begin(), wr.end(), same_init));
  for (const FuncPlan* p : {&np.part_plan, &np.ref_plan})
    for (const FuncStep& s : p->steps) ASSERT_NE(s.out.arena, 0u);
  std::vector<std::vector<float>> ref_mem = InitialArenas(np.ref_plan, true);
  FuncPlan part_rest = np.part_plan;  // all but the weights
  part_rest.arenas[0].elems = 0;
  std::erase_if(part_rest.inits, [](const FuncInit& in) { return in.arena == 0; });
  std::vector<std::vector<float>> part_mem = InitialArenas(part_rest, true);
  part_mem[0] = std::move(ref_mem[0]);
  part_mem = RunFuncPlanCpuArenas(np.part_plan, {true}, std::move(part_mem));
  const std::vector<mapping::Matrix> part = GatherOutputs(np.part_plan, part_mem);
  ref_mem[0] = std::move(part_mem[0]);
  part_mem.clear();
  const std::vector<mapping::Matrix> ref =
      GatherOutputs(np.ref_plan, RunFuncPlanCpuArenas(np.ref_plan, {true}, std::move(ref_mem)));
  NumericsVerdict v = JudgeNumerics("partitioned vs TP 1", np.part_plan, part, ref);
  std::printf("%s\n", v.text.c_str());
  EXPECT_TRUE(v.ok);
  EXPECT_LT(v.diff.rel, kNumericsTolerance / 2);
}

TEST(FuncPlan, Bf16CheckCatchesADroppedReduction) {
  // Dropping the reduce of one all-reduce transfer (as tests/mapping's CorruptedTransferIsCaught)
  // must fail the check, far beyond bf16 noise.
  const arch::Chip chip = arch::Chip::Build(SwitchChip(8, 0));
  NumericsPlans np = PlanNumerics(chip, SmallModel(), Work(16, 1, 1), Mapping(4, "megatron"));
  bool changed = false;
  mapping::testing::TestProgram part = mapping::testing::TestProgram::Of(np.part);
  for (auto& t : part.tasks)
    if (t.kind == mapping::TaskKind::kTransfer && t.reduce && !changed) t.reduce = false, changed = true;
  ASSERT_TRUE(changed);
  np.part = part;
  FuncPlan broken = BuildFuncPlan(np.part);
  NumericsVerdict v = JudgeNumerics("partitioned vs TP 1", broken, RunFuncPlanCpu(broken, {true}),
                                    RunFuncPlanCpu(np.ref_plan, {true}));
  EXPECT_FALSE(v.ok);
  EXPECT_GT(v.diff.rel, 4 * kNumericsTolerance) << v.text;
  EXPECT_NE(v.text.find("MISMATCH"), std::string::npos);
}

TEST(FuncPlan, NumericsInstanceShrinksToItsBudget) {
  // Batch 4, 2 layers, prompt 64 + 3 decode steps; the check keeps the batch and takes one
  // layer (one stage). A budget nothing fits halves the batch to 1, then seq_len down to 16 (and
  // no further), and keeps 2 decode steps.
  const arch::Chip chip = arch::Chip::Build(SwitchChip(8, 0));
  config::Workload wl = Work(64, 3, 2);
  wl.set_batch(4);
  NumericsPlans full = PlanNumerics(chip, SmallModel(), wl, Mapping(4, "megatron"));
  EXPECT_EQ(full.instance.workload.batch(), 4u);
  EXPECT_EQ(full.instance.workload.num_layers(), 1u);
  EXPECT_EQ(full.instance.workload.seq_len(), 64u);
  EXPECT_EQ(full.instance.workload.decode_steps(), 3u);
  EXPECT_EQ(full.instance.unpartitioned.tp(), 1u);
  EXPECT_EQ(full.ref_plan.arenas.size(), 3u);  // weights, staging, one GPU
  NumericsPlans small = PlanNumerics(chip, SmallModel(), wl, Mapping(4, "megatron"), 1);
  EXPECT_TRUE(small.instance.reduced);
  EXPECT_EQ(small.instance.workload.batch(), 1u);
  EXPECT_EQ(small.instance.workload.seq_len(), 16u);
  EXPECT_EQ(small.instance.workload.decode_steps(), 2u);
  EXPECT_NE(small.instance.description.find("reduced"), std::string::npos);
}

TEST(FuncPlan, TraceFindsTheFirstDivergentStep) {
  // A wrong softmax scale in one step (as a broken kernel would compute) must be pinned to that
  // step and its op, not to a later one it spoils.
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  mapping::Program p =
      mapping::Lower(chip, SmallModel(), Work(8, 1, 1), Map(2, "megatron"), {.functional = true});
  FuncPlan plan = BuildFuncPlan(p);
  FuncPlan broken = plan;
  size_t k = 0;
  while (broken.steps[k].kind != FuncStepKind::kSoftmax) ++k;
  broken.steps[k].scale *= 2;
  StepTrace want, got;
  auto out_want = RunFuncPlanCpu(plan, {true}, &want);
  auto out_got = RunFuncPlanCpu(broken, {true}, &got);
  ASSERT_EQ(want.size(), plan.steps.size());
  EXPECT_GT(CompareOutputs(out_got, out_want).rel, kNumericsTolerance);
  StepDiff d = FirstDivergentStep(got, want, kNumericsTolerance);
  EXPECT_EQ(d.step, static_cast<int64_t>(k));
  const std::string text = plan.Describe(k, p);
  EXPECT_NE(text.find("op softmax"), std::string::npos) << text;
  EXPECT_NE(text.find("prefill layer 0"), std::string::npos) << text;
  EXPECT_EQ(FirstDivergentStep(want, want, 0).step, -1);
}

// tpsim-validate's whole check with the CPU backend standing in for the GPU: it passes, and each
// kind of failure is reported as what it is.
class NumericsCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    chip_ = std::make_unique<arch::Chip>(arch::Chip::Build(SwitchChip(8, 0)));
    np_ = PlanNumerics(*chip_, SmallModel(), Work(16, 2, 1), Mapping(4, "megatron"));
    small_ =
        PlanNumerics(*chip_, SmallModel(), CrossCheckWorkload(np_.instance.workload), Mapping(4, "megatron"));
  }
  static std::vector<mapping::Matrix> Cpu(const FuncPlan& plan, StepTrace* trace) {
    return RunFuncPlanCpu(plan, {true}, trace);
  }
  std::unique_ptr<arch::Chip> chip_;
  NumericsPlans np_, small_;
};

TEST_F(NumericsCheck, PassesWithACorrectDevice) {
  EXPECT_EQ(small_.instance.workload.seq_len(), 8u);
  EXPECT_EQ(small_.instance.workload.decode_steps(), 1u);
  NumericsReport r = RunNumericsCheck(np_, small_, Cpu, "cpu-as-device");
  EXPECT_TRUE(r.ok);
  ASSERT_EQ(r.verdicts.size(), 2u);
  EXPECT_TRUE(r.verdicts[0].ok) << r.verdicts[0].text;
  EXPECT_TRUE(r.verdicts[1].ok) << r.verdicts[1].text;
  EXPECT_DOUBLE_EQ(r.verdicts[1].diff.rel, 0.0);  // the same backend twice
  EXPECT_NE(r.note.find("matched the same layer at TP 1 on cpu-as-device"), std::string::npos) << r.note;
}

TEST_F(NumericsCheck, ABrokenKernelIsPinnedToItsStep) {
  // A device whose softmax forgets the 1/sqrt(head_dim) scale, in every plan.
  auto broken = [](const FuncPlan& plan, StepTrace* trace) {
    FuncPlan p = plan;
    for (auto& s : p.steps)
      if (s.kind == FuncStepKind::kSoftmax) s.scale = 1;
    return RunFuncPlanCpu(p, {true}, trace);
  };
  NumericsReport r = RunNumericsCheck(np_, small_, broken, "broken");
  for (const auto& v : r.verdicts) std::printf("%s\n", v.text.c_str());
  EXPECT_FALSE(r.ok);
  // Partitioned and TP 1 share the broken kernel: they may well agree with each other; the
  // cross-check against the CPU backend is what catches it, and names the first softmax.
  EXPECT_FALSE(r.verdicts[1].ok);
  EXPECT_NE(r.verdicts[1].text.find("first divergent step"), std::string::npos) << r.verdicts[1].text;
  EXPECT_NE(r.verdicts[1].text.find("op softmax"), std::string::npos) << r.verdicts[1].text;
  EXPECT_NE(r.verdicts[1].text.find("prefill layer 0"), std::string::npos) << r.verdicts[1].text;
  EXPECT_NE(r.note.find("broken did NOT match the CPU backend"), std::string::npos) << r.note;
}

TEST_F(NumericsCheck, AMismatchIsPinnedToItsOp) {
  // A device that gets the softmax wrong only when several ranks share it (plans with more than
  // one core arena): partitioned and TP 1 now differ, and the first op that differs is named.
  auto broken = [](const FuncPlan& plan, StepTrace* trace) {
    FuncPlan p = plan;
    if (p.arenas.size() > 3)
      for (auto& s : p.steps)
        if (s.kind == FuncStepKind::kSoftmax) s.scale = 1;
    return RunFuncPlanCpu(p, {true}, trace);
  };
  NumericsReport r = RunNumericsCheck(np_, small_, broken, "broken");
  std::printf("%s\n", r.verdicts[0].text.c_str());
  EXPECT_FALSE(r.verdicts[0].ok);
  EXPECT_NE(r.verdicts[0].text.find("first op that differs: prefill layer 0 softmax [64 x 16]"),
            std::string::npos)
      << r.verdicts[0].text;
  // Every op before the softmax matched, even the ones assembled from 4 ranks' slices.
  StepTrace tp, tr;
  RunFuncPlanCpu(np_.part_plan, {true}, &tp);
  RunFuncPlanCpu(np_.ref_plan, {true}, &tr);
  EXPECT_EQ(FirstDifferingOp(np_, tp, tr), "");
}

TEST_F(NumericsCheck, AWrongProgramIsBlamedOnTheMapping) {
  // The partitioned Program drops one reduction (a mapping bug): device and CPU agree on it, TP 1
  // does not.
  for (NumericsPlans* p : {&np_, &small_}) {
    mapping::testing::TestProgram part = mapping::testing::TestProgram::Of(p->part);
    for (auto& t : part.tasks)
      if (t.kind == mapping::TaskKind::kTransfer && t.reduce) {
        t.reduce = false;
        break;
      }
    p->part = part;
    p->part_plan = BuildFuncPlan(p->part);
  }
  NumericsReport r = RunNumericsCheck(np_, small_, Cpu, "cpu-as-device");
  for (const auto& v : r.verdicts) std::printf("%s\n", v.text.c_str());
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.verdicts[0].ok);
  EXPECT_TRUE(r.verdicts[1].ok);
  EXPECT_NE(r.verdicts[0].text.find("MISMATCH"), std::string::npos);
  EXPECT_NE(r.verdicts[0].text.find("data semantics (mapping) are wrong"), std::string::npos)
      << r.verdicts[0].text;
  EXPECT_NE(r.note.find("did NOT match the same layer at TP 1"), std::string::npos) << r.note;
}

// The CUDA backend's cuBLAS and cudaMemcpy2D arguments (ColumnMajorCall, CopyCall), executed by
// naive emulations of those libraries' documented contracts, must do what the CPU backend does
// for every matmul and row-contiguous copy step of several plans (weights transposed or not,
// batched attention, transfers), on arenas full of random values.
void EmulateGemm(const BlasCall& c, std::vector<std::vector<float>>& mem) {
  const float* a = mem[c.arena_a].data() + c.off_a;
  const float* b = mem[c.arena_b].data() + c.off_b;
  float* y = mem[c.arena_c].data() + c.off_c;
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      double acc = 0;
      for (int l = 0; l < c.k; ++l) {
        const float x = c.trans_a ? a[l + int64_t{i} * c.lda] : a[i + int64_t{l} * c.lda];
        const float z = c.trans_b ? b[j + int64_t{l} * c.ldb] : b[l + int64_t{j} * c.ldb];
        acc += double{x} * z;
      }
      float& out = y[i + int64_t{j} * c.ldc];
      out = static_cast<float>(c.beta != 0 ? out + acc : acc);
    }
}
void EmulateMemcpy2D(const Copy2D& c, std::vector<std::vector<float>>& mem) {
  for (uint64_t r = 0; r < c.height; ++r)
    for (uint64_t e = 0; e < c.width; ++e)
      mem[c.dst_arena][c.dst_off + r * c.dpitch + e] = mem[c.src_arena][c.src_off + r * c.spitch + e];
}

TEST(FuncPlan, CudaLibraryCallsDoWhatTheCpuBackendDoes) {
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  size_t gemms = 0, copies = 0, transposed = 0, batched = 0, accumulating = 0;
  for (const Case& c : {Case{1, "k_split"}, Case{4, "megatron"}, Case{4, "m_split_rotate"}, Case{8, "mn_2d"},
                        Case{2, "k_split"}}) {
    SCOPED_TRACE(c.part + " tp " + std::to_string(c.tp));
    mapping::Program p =
        mapping::Lower(chip, SmallModel(), Work(8, 1, 1, 2), Mapping(c.tp, c.part), {.functional = true});
    const FuncPlan plan = BuildFuncPlan(p);
    FuncPlan one = plan;
    one.outputs.clear();
    one.inits.clear();
    for (uint32_t a = 0; a < one.arenas.size(); ++a)
      if (one.arenas[a].elems)
        one.inits.push_back({a, 0, 1, static_cast<uint32_t>(one.arenas[a].elems), 77 + a, 1.f});
    // Every one-step run starts from the same memory (all of it random), made once: the CPU
    // backend and the emulated library call each get a copy of it, and all of memory is compared.
    const std::vector<std::vector<float>> init = InitialArenas(one, false);
    std::vector<std::vector<float>> got;
    for (const FuncStep& s : plan.steps) {
      const bool gemm = s.kind == FuncStepKind::kMatmul;
      const bool copy = s.kind == FuncStepKind::kCopy && s.a.cs == 1 && s.out.cs == 1;
      if (!gemm && !copy) continue;
      // Matmuls also with accumulate (out += a . b), which no partitioner emits today.
      for (bool acc : {false, true}) {
        if (acc && !gemm) continue;
        FuncStep t = s;
        t.accumulate = t.accumulate || acc;
        one.steps = {t};
        const auto want = RunFuncPlanCpuArenas(one, {}, init);
        got = init;
        if (gemm)
          for (uint32_t b = 0; b < t.batch; ++b) EmulateGemm(ColumnMajorCall(t, b), got);
        else
          EmulateMemcpy2D(CopyCall(t), got);
        ASSERT_EQ(got, want) << ToString(t.origin) << " " << ToString(t.kind);
        accumulating += gemm && t.accumulate;
      }
      gemms += gemm, copies += copy, transposed += gemm && s.transpose_b, batched += gemm && s.batch > 1;
    }
  }
  EXPECT_GT(gemms, 100u);
  EXPECT_GT(copies, 100u);
  EXPECT_GT(transposed, 0u);  // QK^T and m_split_rotate's rotated weights
  EXPECT_GT(batched, 0u);     // query heads sharing a KV head
  EXPECT_EQ(accumulating, gemms);
  std::printf("checked %zu matmul steps (%zu transposed, %zu batched, %zu accumulating), %zu copies\n", gemms,
              transposed, batched, accumulating, copies);
}

TEST(FuncPlan, CompareOutputsFindsTheWorstElement) {
  mapping::Matrix a{2, 2, {1, 2, 3, 4}}, b{2, 2, {1, 2, 3.5f, 8}}, c{1, 1, {0}};
  OutputDiff d = CompareOutputs({a}, {b});
  EXPECT_EQ(d.row, 1u);
  EXPECT_EQ(d.col, 1u);
  EXPECT_DOUBLE_EQ(d.max_abs, 4.0);  // |4 - 8|
  EXPECT_DOUBLE_EQ(d.rel, 0.5);      // 4 / max |b| = 4 / 8
  EXPECT_EQ(d.got, 4.f);
  EXPECT_TRUE(CompareOutputs({a}, {c}).shape_mismatch);
  EXPECT_TRUE(CompareOutputs({a}, {}).shape_mismatch);
  EXPECT_DOUBLE_EQ(CompareOutputs({a}, {a}).rel, 0.0);
}

// An MoE layer (8 experts of intermediate 32, top-2, zipf routing with capacity factor 0.5,
// shared experts) at attention TP 8 with EP 4 x expert TP 2 on a switch chip: the whole numerics
// check with the CPU backend for the device passes (bf16 partitioned vs bf16 at TP 1, where one
// rank holds every expert), and the plan's CPU backend unrounded equals the reference.
TEST(FuncPlan, MoeLayerPassesTheNumericsCheck) {
  const arch::Chip chip = arch::Chip::Build(SwitchChip(8, 0));
  config::Model model = MoeModel();
  model.set_shared_expert_intermediate_size(32);
  config::Mapping m = Mapping(8, "megatron");
  m.mutable_moe()->set_ep(4);
  m.mutable_moe()->set_tp(2);
  m.mutable_moe()->set_routing("zipf");
  m.mutable_moe()->set_zipf_s(1.2);
  m.mutable_moe()->set_capacity_factor(0.5);
  const NumericsPlans np = PlanNumerics(chip, model, Work(16, 2, 1), m);
  EXPECT_EQ(np.instance.unpartitioned.moe().ep(), 1u);
  EXPECT_EQ(np.instance.unpartitioned.moe().routing(), "zipf");
  const NumericsPlans small = PlanNumerics(chip, model, CrossCheckWorkload(np.instance.workload), m);
  const auto cpu = [](const FuncPlan& plan, StepTrace* trace) { return RunFuncPlanCpu(plan, {true}, trace); };
  const NumericsReport r = RunNumericsCheck(np, small, cpu, "cpu-as-device");
  EXPECT_TRUE(r.ok) << r.note;
  ASSERT_EQ(r.verdicts.size(), 2u);
  EXPECT_TRUE(r.verdicts[0].ok) << r.verdicts[0].text;
  EXPECT_LT(CompareOutputs(RunFuncPlanCpu(np.part_plan, {}),
                           mapping::RunReference(model, np.instance.workload, m.moe()))
                .rel,
            1e-4);
}

// Attention TP 2 x 4 replicas (mapping.attention_dp) with EP 4 x expert TP 2 over the same 8
// GPUs: the numerics check passes, the unpartitioned side drops the replicas, and shrinking the
// workload to the memory budget keeps the batch a multiple of the 4 replicas.
TEST(FuncPlan, MoeLayerWithAttentionReplicasPassesTheNumericsCheck) {
  const arch::Chip chip = arch::Chip::Build(SwitchChip(8, 0));
  config::Model model = MoeModel();
  config::Mapping m = Mapping(2, "megatron");
  m.set_attention_dp(4);
  m.mutable_moe()->set_ep(4);
  m.mutable_moe()->set_tp(2);
  config::Workload wl = Work(16, 2, 1);
  wl.set_batch(8);
  const NumericsPlans np = PlanNumerics(chip, model, wl, m);
  EXPECT_EQ(np.instance.unpartitioned.attention_dp(), 0u);
  const NumericsPlans tight = PlanNumerics(chip, model, wl, m, 1);
  EXPECT_EQ(tight.instance.workload.batch(), 4u);
  const NumericsPlans small = PlanNumerics(chip, model, CrossCheckWorkload(np.instance.workload), m);
  const auto cpu = [](const FuncPlan& plan, StepTrace* trace) { return RunFuncPlanCpu(plan, {true}, trace); };
  const NumericsReport r = RunNumericsCheck(np, small, cpu, "cpu-as-device");
  EXPECT_TRUE(r.ok) << r.note;
  EXPECT_LT(CompareOutputs(RunFuncPlanCpu(np.part_plan, {}),
                           mapping::RunReference(model, np.instance.workload, m.moe()))
                .rel,
            1e-4);
}

}  // namespace
}  // namespace tpsim::validate
