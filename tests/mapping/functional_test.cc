// The proof that the mapping is right: every partitioner x collective algorithm x
// placement, for TP 2, 4, 8 and mn_2d grids, run on real tensors by the functional
// executor, must match the unpartitioned layer (max relative error < 1e-4).
#include "mapping/functional.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "mapping/collective/collective.h"
#include "mapping/mapping.h"
#include "mapping/placement/placement.h"
#include "mapping_test_util.h"
#include "tests/mapping/program_test_util.h"

namespace tpsim::mapping {
namespace {

using testing::Map;
using testing::MeshChip;
using testing::SmallModel;
using testing::Work;

constexpr double kTol = 1e-4;

class FunctionalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    chip_ = new arch::Chip(arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30)));
  }
  static void TearDownTestSuite() {
    delete chip_;
    chip_ = nullptr;
  }
  double Error(const config::Mapping& m, const config::Workload& wl) {
    Program p = Lower(*chip_, SmallModel(), wl, m, {.functional = true});
    return MaxRelativeError(RunFunctional(p), RunReference(SmallModel(), wl));
  }
  static arch::Chip* chip_;
};
arch::Chip* FunctionalTest::chip_ = nullptr;

TEST_F(FunctionalTest, ReferenceIsNotTrivial) {
  // A mapping that skipped the attention or an MLP would still have to match these.
  auto ref = RunReference(SmallModel(), Work(8, 1, 2));
  ASSERT_EQ(ref.size(), 2u);
  EXPECT_EQ(ref[0].rows, 8u);
  EXPECT_EQ(ref[1].rows, 1u);
  double mx = 0;
  for (float v : ref[0].v) mx = std::max(mx, std::fabs(double{v}));
  EXPECT_GT(mx, 0.1);
  // Changing the layer count changes the output: layers are really applied.
  auto one = RunReference(SmallModel(), Work(8, 1, 1));
  EXPECT_GT(MaxRelativeError(one, ref), 1e-2);
}

TEST_F(FunctionalTest, SingleRankMatchesReference) {
  EXPECT_LT(Error(Map(1, "k_split"), Work(8, 1, 2)), kTol);
}

TEST_F(FunctionalTest, EveryPartitionerCollectivePlacementAndTp) {
  const auto wl = Work(8, 1, 2);  // prefill S = 8, then one decode step at context 8
  int runs = 0;
  for (const std::string& part : PartitionerNames())
    for (const std::string& coll : CollectiveNames())
      for (const std::string& place : PlacementNames()) {
        if (coll == "nvls") continue;   // needs a switch chip: NvlsAndAutoOnASwitchChip
        if (place == "file") continue;  // FilePlacement covers it
        for (int tp : {2, 4, 8}) {
          config::Mapping m = Map(tp, part, coll, place);
          m.set_seed(7);
          if (part == "mn_2d") m.set_grid_rows(2);  // grids 1x2 (tp 2: grid_rows 1), 2x2, 2x4
          if (part == "mn_2d" && tp == 2) m.set_grid_rows(1);
          SCOPED_TRACE(part + " / " + coll + " / " + place + " / tp " + std::to_string(tp));
          EXPECT_LT(Error(m, wl), kTol);
          ++runs;
        }
      }
  EXPECT_GE(runs, 5 * 5 * 6 * 3);
}

TEST_F(FunctionalTest, NvlsAndAutoOnASwitchChip) {
  // Every partitioner with nvls forced and with auto (min_bytes 0: every
  // all_reduce over >= 4 ranks goes through the switch) on an 8-core switch chip.
  const arch::Chip chip = arch::Chip::Build(testing::SwitchChip(8, 0));
  const auto wl = Work(8, 1, 2);
  const auto ref = RunReference(SmallModel(), wl);
  int nvls_collectives = 0;
  for (const std::string& part : PartitionerNames())
    for (const char* coll : {"nvls", "auto"})
      for (int tp : {2, 4, 8}) {
        config::Mapping m = Map(tp, part, coll);
        if (part == "mn_2d") m.set_grid_rows(tp == 2 ? 1 : 2);
        SCOPED_TRACE(part + " / " + coll + " / tp " + std::to_string(tp));
        Program p = Lower(chip, SmallModel(), wl, m, {.functional = true});
        for (const auto& c : p.collectives) nvls_collectives += mapping::ToString(c.algorithm) == "nvls";
        EXPECT_LT(MaxRelativeError(RunFunctional(p), ref), kTol);
      }
  EXPECT_GT(nvls_collectives, 0);
}

TEST_F(FunctionalTest, MixedOverridesAndLayoutConversions) {
  struct Case {
    std::vector<std::pair<std::string, std::string>> overrides;
  };
  const Case cases[] = {
      {{{"down", "n_split"}}},  // output split along hidden: next norm gathers
      {{{"o", "n_split"}, {"down", "m_split_rotate"}}},
      {{{"qkv", "k_split"}, {"gate_up", "m_split_rotate"}}},
      {{{"qkv", "m_split_rotate"}, {"o", "k_split"}, {"gate_up", "mn_2d"}, {"down", "k_split"}}},
      {{{"qkv", "mn_2d"}, {"o", "mn_2d"}, {"gate_up", "k_split"}, {"down", "m_split_rotate"}}},
  };
  for (const Case& c : cases)
    for (int tp : {2, 4}) {
      config::Mapping m = Map(tp, "megatron", "bidirectional_ring", "snake");
      std::string label;
      for (const auto& [op, part] : c.overrides) {
        auto* o = m.add_overrides();
        o->set_op(op);
        o->set_partition(part);
        label += op + "=" + part + " ";
      }
      SCOPED_TRACE(label + "tp " + std::to_string(tp));
      EXPECT_LT(Error(m, Work(8, 2, 2)), kTol);
    }
}

TEST_F(FunctionalTest, PipelineStagesAndCachedPrefix) {
  for (const char* part : {"megatron", "m_split_rotate", "k_split"}) {
    SCOPED_TRACE(part);
    EXPECT_LT(Error(Map(4, part, "ring", "ring", 2), Work(8, 2, 2, 4)), kTol);
    EXPECT_LT(Error(Map(2, part, "direct", "linear", 2), Work(8, 1, 2)), kTol);
  }
}

TEST_F(FunctionalTest, FilePlacement) {
  // Ranks in shuffled order over the two 2x2 stage regions of the 4x4 mesh (cores 0 1 4 5,
  // then 2 3 6 7), read from a file.
  const std::string path = ::testing::TempDir() + "/tpsim_mapping_placement.txt";
  {
    std::ofstream out(path);
    out << "5 0 4 1\n7 2 6 3\n";
  }
  for (const char* part : {"megatron", "m_split_rotate", "mn_2d"}) {
    config::Mapping m = Map(4, part, "ring", "file", 2);
    m.set_placement_file(path);
    SCOPED_TRACE(part);
    Program p = Lower(*chip_, SmallModel(), Work(8, 1, 2), m, {.functional = true});
    std::vector<int> first_core(2, -1);
    for (const Task& t : p.tasks())
      if (t.kind == TaskKind::kCompute)
        first_core[p.ops[t.op].ref.layer] =
            first_core[p.ops[t.op].ref.layer] < 0 ? t.core : first_core[p.ops[t.op].ref.layer];
    EXPECT_EQ(first_core[0], 5);  // rank 0 of stage 0
    EXPECT_EQ(first_core[1], 7);  // rank 0 of stage 1
    EXPECT_LT(MaxRelativeError(RunFunctional(p), RunReference(SmallModel(), Work(8, 1, 2))), kTol);
  }
  std::remove(path.c_str());
}

TEST_F(FunctionalTest, CorruptedTransferIsCaught) {
  // The check can fail: dropping the reduce of one all-reduce transfer breaks the result.
  testing::TestProgram p = testing::TestProgram::Of(
      Lower(*chip_, SmallModel(), Work(8, 0, 1), Map(4, "megatron"), {.functional = true}));
  bool changed = false;
  for (Task& t : p.tasks)
    if (t.kind == TaskKind::kTransfer && t.reduce) {
      t.reduce = false;
      changed = true;
      break;
    }
  ASSERT_TRUE(changed);
  EXPECT_GT(MaxRelativeError(RunFunctional(p), RunReference(SmallModel(), Work(8, 0, 1))), 1e-3);
}

TEST_F(FunctionalTest, SideTablesOnlyWhenAsked) {
  // The lean Program (the default) has the same tasks, ops and collectives, no FuncData,
  // no Task::func, and the executor refuses it rather than return nothing.
  config::Mapping m = Map(4, "m_split_rotate");
  Program full = Lower(*chip_, SmallModel(), Work(8, 1, 2), m, {.functional = true});
  Program lean = Lower(*chip_, SmallModel(), Work(8, 1, 2), m);
  EXPECT_EQ(lean.Dump(), full.Dump());
  ASSERT_EQ(lean.num_tasks(), full.num_tasks());
  size_t with_func = 0;
  for (size_t i = 0; i < full.num_tasks(); ++i) {
    EXPECT_EQ(lean.task(i).func, -1);
    EXPECT_TRUE(std::ranges::equal(lean.deps(i), full.deps(i))) << i;
    with_func += full.task(i).func >= 0;
  }
  EXPECT_GT(with_func, 0u);
  EXPECT_FALSE(full.func.ops.empty());
  EXPECT_EQ(full.func.collectives.size(), full.collectives.size());
  EXPECT_EQ(full.func.outputs.size(), 2u);  // prefill + 1 decode step (Work(seq_len, decode_steps, layers))
  EXPECT_TRUE(lean.func.ops.empty());
  EXPECT_TRUE(lean.func.tensors.empty());
  EXPECT_TRUE(lean.func.collectives.empty());
  EXPECT_TRUE(lean.func.outputs.empty());
  EXPECT_THROW(RunFunctional(lean), std::invalid_argument);
}

// ---- Batch B > 1: B independent sequences (GEMM rows B x tokens, attention per sequence) ----

config::Workload Batched(config::Workload wl, uint32_t batch) {
  wl.set_batch(batch);
  return wl;
}

TEST_F(FunctionalTest, BatchedEveryPartitionerCollectivePlacementAndTp) {
  // Batch 2 and 3 (prefill S = 8, GEMM rows 16 / 24, then one decode step, rows 2 / 3) for
  // the same matrix as the batch-1 test: every partitioner x collective x placement x TP 2,
  // 4, 8 (mn_2d grids 1x2, 2x2, 2x4). Row splits cut across sequences (24 rows over 8 ranks).
  int runs = 0;
  for (uint32_t batch : {2u, 3u}) {
    const auto wl = Batched(Work(8, 1, 2), batch);
    const auto ref = RunReference(SmallModel(), wl);
    ASSERT_EQ(ref.size(), 2u);
    ASSERT_EQ(ref[0].rows, 8 * batch);
    ASSERT_EQ(ref[1].rows, batch);
    for (const std::string& part : PartitionerNames())
      for (const std::string& coll : CollectiveNames())
        for (const std::string& place : PlacementNames()) {
          if (coll == "nvls" || place == "file") continue;  // BatchedNvlsOnASwitchChip; FilePlacement
          for (int tp : {2, 4, 8}) {
            config::Mapping m = Map(tp, part, coll, place);
            m.set_seed(7);
            if (part == "mn_2d") m.set_grid_rows(tp == 2 ? 1 : 2);
            SCOPED_TRACE("batch " + std::to_string(batch) + " / " + part + " / " + coll + " / " + place +
                         " / tp " + std::to_string(tp));
            Program p = Lower(*chip_, SmallModel(), wl, m, {.functional = true});
            EXPECT_EQ(p.func.batch, batch);
            EXPECT_LT(MaxRelativeError(RunFunctional(p), ref), kTol);
            ++runs;
          }
        }
  }
  EXPECT_GE(runs, 2 * 5 * 5 * 6 * 3);
}

TEST_F(FunctionalTest, Mn2dGridShapesSubGroupCollectivesAndMixedLayouts) {
  // Row-group (grid -> grid_rows) and column-group (grid_rows -> replicated) gathers move the
  // right data: tp 8 grids 4x2, 8x1 and 1x8 and tp 4 (2x2) with every collective algorithm,
  // batched, with a cached prefix, pipeline stages (rows sent, then gathered within grid
  // rows for the next mn_2d GEMM); then
  // mn_2d mixed with every other partitioner per op class (adds between grid, grid_rows,
  // replicated, row and column splits).
  int runs = 0;
  for (const std::string& coll : CollectiveNames()) {
    if (coll == "nvls") continue;  // NvlsAndAutoOnASwitchChip
    for (auto [tp, rows] : {std::pair{8, 4}, {8, 8}, {8, 1}, {4, 2}}) {
      config::Mapping m = Map(tp, "mn_2d", coll, "snake");
      m.set_grid_rows(rows);
      SCOPED_TRACE(coll + " / tp " + std::to_string(tp) + " grid_rows " + std::to_string(rows));
      EXPECT_LT(Error(m, Work(8, 1, 2)), kTol);
      EXPECT_LT(Error(m, Batched(Work(8, 1, 2, 4), 2)), kTol);
      ++runs;
    }
    config::Mapping piped = Map(4, "mn_2d", coll, "linear", 2);
    piped.set_grid_rows(2);
    SCOPED_TRACE(coll + " / pipeline");
    EXPECT_LT(Error(piped, Work(8, 1, 3)), kTol);
  }
  EXPECT_EQ(runs, 5 * 4);
  for (const std::string& other : PartitionerNames())
    for (const char* cls : {"qkv", "o", "gate_up", "down"})
      for (int tp : {4, 8}) {
        config::Mapping m = Map(tp, "mn_2d", "ring", "linear");
        m.set_grid_rows(2);
        auto* o = m.add_overrides();
        o->set_op(cls);
        o->set_partition(other);
        SCOPED_TRACE(std::string(cls) + "=" + other + " / tp " + std::to_string(tp));
        EXPECT_LT(Error(m, Work(8, 1, 2)), kTol);
      }
}

TEST_F(FunctionalTest, BatchedCachedPrefixPipelineAndOverrides) {
  // Prefill after a cached prefix of 4 (each sequence its own prefix), two decode steps,
  // pipeline stages, and mixed per-op partitioners with layout conversions.
  for (uint32_t batch : {2u, 3u}) {
    const auto wl = Batched(Work(8, 2, 2, 4), batch);
    const auto ref = RunReference(SmallModel(), wl);
    for (const char* part : {"megatron", "m_split_rotate", "k_split", "n_split", "mn_2d"}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + " / " + part);
      EXPECT_LT(Error(Map(4, part, "ring", "ring", 2), wl), kTol);
      EXPECT_LT(Error(Map(8, part, "halving_doubling", "snake"), wl), kTol);
      EXPECT_LT(Error(Map(2, part, "direct", "linear", 2), Batched(Work(5, 1, 2), batch)), kTol);
    }
    config::Mapping m = Map(4, "megatron", "bidirectional_ring", "snake");
    for (const auto& [op, part] : std::vector<std::pair<std::string, std::string>>{
             {"qkv", "m_split_rotate"}, {"o", "k_split"}, {"gate_up", "mn_2d"}, {"down", "n_split"}}) {
      auto* o = m.add_overrides();
      o->set_op(op);
      o->set_partition(part);
    }
    SCOPED_TRACE("batch " + std::to_string(batch) + " / overrides");
    EXPECT_LT(Error(m, wl), kTol);
  }
}

TEST_F(FunctionalTest, BatchedNvlsOnASwitchChip) {
  const arch::Chip chip = arch::Chip::Build(testing::SwitchChip(8, 0));
  for (uint32_t batch : {2u, 3u}) {
    const auto wl = Batched(Work(8, 1, 2, 3), batch);
    const auto ref = RunReference(SmallModel(), wl);
    for (const std::string& part : PartitionerNames()) {
      config::Mapping m = Map(8, part, "nvls");
      if (part == "mn_2d") m.set_grid_rows(2);
      SCOPED_TRACE("batch " + std::to_string(batch) + " / " + part);
      EXPECT_LT(MaxRelativeError(RunFunctional(Lower(chip, SmallModel(), wl, m, {.functional = true})), ref),
                kTol);
    }
  }
}

// Rows [s * rows, (s + 1) * rows) of m.
std::vector<float> SequenceRows(const Matrix& m, uint32_t s, uint32_t rows) {
  return {m.v.begin() + uint64_t{s} * rows * m.cols, m.v.begin() + uint64_t{s + 1} * rows * m.cols};
}

TEST_F(FunctionalTest, BatchSequenceZeroIsTheBatchOneRunExactly) {
  // Sequence 0 of a batch reads exactly the batch-1 data (rows 0.. of the same input and
  // cache streams) and nothing of the other sequences, so on one rank (no reduction whose
  // order depends on the buffer size) its outputs equal the batch-1 outputs bit for bit, in
  // the Program and in the reference; the other sequences get other data, other outputs.
  const auto wl1 = Work(8, 2, 2, 4);
  for (uint32_t batch : {2u, 3u}) {
    const auto wlb = Batched(wl1, batch);
    for (bool reference : {false, true}) {
      SCOPED_TRACE(std::string(reference ? "reference" : "program") + " batch " + std::to_string(batch));
      auto one =
          reference
              ? RunReference(SmallModel(), wl1)
              : RunFunctional(Lower(*chip_, SmallModel(), wl1, Map(1, "k_split"), {.functional = true}));
      auto many =
          reference
              ? RunReference(SmallModel(), wlb)
              : RunFunctional(Lower(*chip_, SmallModel(), wlb, Map(1, "k_split"), {.functional = true}));
      ASSERT_EQ(one.size(), 3u);  // prefill + 2 decode steps
      ASSERT_EQ(many.size(), 3u);
      for (size_t i = 0; i < one.size(); ++i) {
        const uint32_t rows = one[i].rows;  // 8 in prefill, 1 per decode step
        ASSERT_EQ(many[i].rows, batch * rows);
        EXPECT_EQ(SequenceRows(many[i], 0, rows), one[i].v);
        for (uint32_t s = 1; s < batch; ++s) EXPECT_NE(SequenceRows(many[i], s, rows), one[i].v);
      }
    }
  }
}

TEST_F(FunctionalTest, AttentionAcrossSequencesIsCaught) {
  // The check can fail: read as batch 1, the batch-3 Program's attention lets every
  // sequence attend to sequence 0's cache rows.
  const auto wl = Batched(Work(8, 1, 2), 3);
  Program p = Lower(*chip_, SmallModel(), wl, Map(4, "megatron"), {.functional = true});
  EXPECT_LT(MaxRelativeError(RunFunctional(p), RunReference(SmallModel(), wl)), kTol);
  p.func.batch = 1;
  EXPECT_GT(MaxRelativeError(RunFunctional(p), RunReference(SmallModel(), wl)), 1e-3);
}

TEST_F(FunctionalTest, BatchedSideTablesLeaveTheTasksAlone) {
  // The batch's data semantics change only FuncData, never a task.
  config::Mapping m = Map(4, "m_split_rotate");
  const auto wl = Batched(Work(8, 1, 2, 4), 3);
  EXPECT_EQ(Lower(*chip_, SmallModel(), wl, m, {.functional = true}).Dump(),
            Lower(*chip_, SmallModel(), wl, m).Dump());
}

// ---- mn_2d K-steps (mapping.mn_2d_weights = "k_steps") ----

config::Mapping KSteps(int tp, int grid_rows, const std::string& coll = "ring",
                       const std::string& place = "linear") {
  config::Mapping m = Map(tp, "mn_2d", coll, place);
  m.set_grid_rows(grid_rows);
  m.set_mn_2d_weights("k_steps");
  return m;
}

TEST_F(FunctionalTest, Mn2dKStepsEveryGridCollectiveAndPhase) {
  // Rank (i, j) holds W[k-block i, cols j] only; the K-blocks rotate within grid columns
  // and every rank accumulates its Y block over them. Grids 2x2, 4x2, 2x4, 1x4 (no
  // rotation: plain mn_2d) and 4x1, every collective algorithm (rotate is a ring for all
  // but bidirectional_ring), prefill then decode, batch 1 and 2, weights in SRAM and
  // streamed from DRAM.
  int runs = 0, rotations = 0;
  for (const std::string& coll : CollectiveNames()) {
    if (coll == "nvls") continue;  // Mn2dKStepsOnASwitchChip
    for (auto [tp, rows] : {std::pair{4, 2}, {8, 4}, {8, 2}, {4, 1}, {4, 4}})
      for (uint32_t batch : {1u, 2u})
        for (const char* weights : {"auto", "dram"}) {
          config::Mapping m = KSteps(tp, rows, coll, "snake");
          m.set_weights(weights);
          const auto wl = Batched(Work(8, 1, 2), batch);
          SCOPED_TRACE(coll + " / tp " + std::to_string(tp) + " grid_rows " + std::to_string(rows) +
                       " / batch " + std::to_string(batch) + " / weights " + weights);
          Program p = Lower(*chip_, SmallModel(), wl, m, {.functional = true});
          EXPECT_EQ(p.weights_location,
                    std::string(weights) == "dram" ? WeightsLocation::kDramStreamed : WeightsLocation::kSram);
          for (const CollectiveInfo& c : p.collectives) rotations += c.kind == CollectiveKind::kRotate;
          int k_step_ops = 0;
          for (const OpInfo& o : p.ops) k_step_ops += o.ref.partition.find(", k_steps)") != std::string::npos;
          EXPECT_EQ(k_step_ops > 0, rows > 1);  // grid_rows 1: plain mn_2d
          EXPECT_LT(MaxRelativeError(RunFunctional(p), RunReference(SmallModel(), wl)), kTol);
          ++runs;
        }
  }
  EXPECT_EQ(runs, 5 * 5 * 2 * 2);
  EXPECT_GT(rotations, 0);
}

TEST_F(FunctionalTest, Mn2dKStepsOnASwitchChipPipelinedAndMixed) {
  const arch::Chip chip = arch::Chip::Build(testing::SwitchChip(8, 0));
  for (const char* coll : {"nvls", "auto"}) {
    SCOPED_TRACE(coll);
    const auto wl = Work(8, 1, 2);
    EXPECT_LT(MaxRelativeError(
                  RunFunctional(Lower(chip, SmallModel(), wl, KSteps(8, 2, coll), {.functional = true})),
                  RunReference(SmallModel(), wl)),
              kTol);
  }
  // Pipeline stages with a cached prefix and two decode steps.
  EXPECT_LT(Error(KSteps(4, 2, "ring", "linear"), Work(8, 2, 2, 4)), kTol);
  config::Mapping piped = KSteps(4, 2);
  piped.set_pipeline_stages(2);
  EXPECT_LT(Error(piped, Batched(Work(8, 2, 3, 4), 2)), kTol);
  // Per-op overrides: k_steps mn_2d next to every other partitioner.
  for (const std::string& other : PartitionerNames())
    for (const char* cls : {"qkv", "o", "gate_up", "down"})
      for (auto [tp, rows] : {std::pair{4, 2}, {8, 4}}) {
        config::Mapping m = KSteps(tp, rows);
        auto* o = m.add_overrides();
        o->set_op(cls);
        o->set_partition(other);
        SCOPED_TRACE(std::string(cls) + "=" + other + " / tp " + std::to_string(tp));
        EXPECT_LT(Error(m, Work(8, 1, 2)), kTol);
      }
  config::Mapping mixed = Map(4, "megatron", "bidirectional_ring", "snake");
  mixed.set_grid_rows(2);
  mixed.set_mn_2d_weights("k_steps");
  for (const auto& [op, part] : std::vector<std::pair<std::string, std::string>>{
           {"qkv", "mn_2d"}, {"o", "m_split_rotate"}, {"gate_up", "mn_2d"}, {"down", "k_split"}}) {
    auto* o = mixed.add_overrides();
    o->set_op(op);
    o->set_partition(part);
  }
  EXPECT_LT(Error(mixed, Batched(Work(8, 1, 2), 2)), kTol);
}

TEST_F(FunctionalTest, Mn2dKStepsWithoutAccumulateIsCaught) {
  // The check can fail: a K-step compute that overwrites instead of adding leaves Y with
  // one K-block's contribution.
  const auto wl = Work(8, 0, 1);
  Program p = Lower(*chip_, SmallModel(), wl, KSteps(4, 2), {.functional = true});
  EXPECT_LT(MaxRelativeError(RunFunctional(p), RunReference(SmallModel(), wl)), kTol);
  int accumulating = 0;
  for (FuncOp& f : p.func.ops)
    if (f.accumulate) {
      f.accumulate = false;
      ++accumulating;
    }
  // 7 GEMMs x 4 ranks x (gr - 1 = 1) arriving blocks.
  EXPECT_EQ(accumulating, 7 * 4);
  EXPECT_GT(MaxRelativeError(RunFunctional(p), RunReference(SmallModel(), wl)), 1e-3);
}

}  // namespace
}  // namespace tpsim::mapping
