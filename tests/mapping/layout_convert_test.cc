// The layout converter in isolation: a LowerContext with a fake memory plan, tensors set in
// a layout by hand, one Convert each; the collective recorded and the transfer tasks it
// lowered to are checked against hand-computed counts and bytes (ring algorithm, P = 4 on
// a 2 x 2 grid, bf16).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mapping/layout_convert.h"
#include "mapping/memory_plan.h"
#include "tests/mapping/mapping_test_util.h"

namespace tpsim::mapping {
namespace {

using testing::MeshChip;

// Nothing is ever evicted: the converter's reloads are no-ops; counts them.
class FakeMemory : public MemoryPlanner {
 public:
  int reloads = 0;
  void Place(const WeightPlan&) override {}
  bool WeightsResident() const override { return true; }
  bool KvResident() const override { return true; }
  void Created(int32_t, FuncTensorKind) override {}
  void Dead(int32_t) override {}
  void EndPhase() override {}
  void BeforeCompute(int, llm::OpKind, const int32_t (&)[3], uint64_t, std::vector<TaskId>*) override {}
  void AfterCompute(int, TaskId) override {}
  void Reload(int32_t, int, std::vector<TaskId>*) override { ++reloads; }
  std::vector<TaskId> WeightReadDeps(int) override { return {}; }
};

class LayoutConvertTest : public ::testing::Test {
 protected:
  LayoutConvertTest() {
    cx_.mem = &mem_;
    cx_.p = 4, cx_.d = 2, cx_.grid = {2, 2}, cx_.coll_grid = {2, 2};
    cx_.cores = {0, 1, 2, 3};
    cx_.algo = "ring";
    cx_.prog.num_cores = chip_.num_cores();
    cx_.prog.num_channels = static_cast<int>(chip_.channels().size());
    cx_.NewOp("producer", "test");
  }
  int32_t Tensor(uint64_t rows, uint64_t cols, Layout l) {
    const int32_t t = cx_.NewTensor(FuncTensorKind::kActivation, rows, cols);
    cx_.ts[t].layout = l;
    return t;
  }
  // Transfer tasks of the built Program: count and total bytes.
  void Transfers(int* n, uint64_t* bytes) {
    Program p = cx_.builder.Build();
    *n = 0, *bytes = 0;
    for (uint32_t i = 0; i < p.num_tasks(); ++i) {
      const Task t = p.task(i);
      if (t.kind != TaskKind::kTransfer) continue;
      ++*n;
      *bytes += t.bytes;
    }
  }

  arch::Chip chip_ = arch::Chip::Build(MeshChip(2, 2, uint64_t{1} << 30));
  config::Model model_ = testing::SmallModel();
  config::Workload wl_;
  config::Mapping m_;
  LowerContext cx_{chip_, model_, wl_, m_, LowerOptions{}};
  FakeMemory mem_;
  LayoutConverter conv_{cx_};
};

TEST_F(LayoutConvertTest, PartialToRowsIsOneReduceScatter) {
  const int32_t t = Tensor(8, 32, Layout::Partial());
  conv_.Convert(t, Layout::Rows(), "o_proj");
  EXPECT_EQ(cx_.ts[t].layout.kind, LayoutKind::kRows);
  ASSERT_EQ(cx_.prog.collectives.size(), 1u);
  const CollectiveInfo& ci = cx_.prog.collectives[0];
  EXPECT_EQ(ci.kind, CollectiveKind::kReduceScatter);
  EXPECT_EQ(ci.bytes, 8u * 32 * 2);
  EXPECT_EQ(ci.ranks, 4);
  EXPECT_EQ(ci.members, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(cx_.prog.ops.back().ref.op, "o_proj.reduce_scatter");
  EXPECT_EQ(mem_.reloads, 4);  // the tensor's block on every rank
  // Ring: P - 1 = 3 steps of 4 transfers of one 128-byte chunk.
  int n;
  uint64_t bytes;
  Transfers(&n, &bytes);
  EXPECT_EQ(n, 12);
  EXPECT_EQ(bytes, 12u * 128);
}

TEST_F(LayoutConvertTest, PartialToReplicatedIsOneAllReduce) {
  const int32_t t = Tensor(8, 32, Layout::Partial());
  conv_.Convert(t, Layout::Replicated(), "down_proj");
  EXPECT_EQ(cx_.ts[t].layout.kind, LayoutKind::kReplicated);
  ASSERT_EQ(cx_.prog.collectives.size(), 1u);
  EXPECT_EQ(cx_.prog.collectives[0].kind, CollectiveKind::kAllReduce);
  // Ring all-reduce: 2 (P - 1) = 6 steps of 4 transfers of 128 bytes.
  int n;
  uint64_t bytes;
  Transfers(&n, &bytes);
  EXPECT_EQ(n, 24);
  EXPECT_EQ(bytes, 24u * 128);
}

TEST_F(LayoutConvertTest, RowsToWholeHeadColumnsIsAnAllToAll) {
  const int32_t t = Tensor(8, 32, Layout::Rows());
  conv_.Convert(t, Layout::Cols(8), "q_proj");
  EXPECT_EQ(cx_.ts[t].layout, Layout::Cols(8));
  ASSERT_EQ(cx_.prog.collectives.size(), 1u);
  EXPECT_EQ(cx_.prog.collectives[0].kind, CollectiveKind::kAllToAll);
  // Each rank's buffer: its 4 blocks of 2 rows x 8 columns (4 x 16 x 2 = 128 bytes); every
  // rank sends the 3 blocks that belong to others: 12 blocks of 32 bytes in all.
  EXPECT_EQ(cx_.prog.collectives[0].bytes, 128u);
  int n;
  uint64_t bytes;
  Transfers(&n, &bytes);
  EXPECT_EQ(bytes, 12u * 32);
}

TEST_F(LayoutConvertTest, GridToGridRowsGathersWithinGridRows) {
  const int32_t t = Tensor(8, 32, Layout::Grid(2, 2, 1));
  conv_.Convert(t, Layout::GridRows(2, 2), "gate_proj");
  EXPECT_EQ(cx_.ts[t].layout, Layout::GridRows(2, 2));
  ASSERT_EQ(cx_.prog.collectives.size(), 1u);
  const CollectiveInfo& ci = cx_.prog.collectives[0];
  EXPECT_EQ(ci.kind, CollectiveKind::kAllGather);
  EXPECT_EQ(ci.groups, 2);
  EXPECT_EQ(ci.ranks, 2);
  EXPECT_EQ(ci.members, (std::vector<int>{0, 1, 2, 3}));  // grid rows {0, 1}, {2, 3}
  EXPECT_EQ(ci.bytes, 4u * 32 * 2);                       // one grid row's 4 rows
  EXPECT_EQ(cx_.prog.ops.back().ref.note, "2 grid-row groups of 2 ranks");
  // One step per group, each rank sending its 4 x 16 block (128 bytes): 4 transfers.
  int n;
  uint64_t bytes;
  Transfers(&n, &bytes);
  EXPECT_EQ(n, 4);
  EXPECT_EQ(bytes, 4u * 128);
}

TEST_F(LayoutConvertTest, GridRowsToReplicatedGathersWithinGridColumns) {
  const int32_t t = Tensor(8, 32, Layout::GridRows(2, 2));
  conv_.Convert(t, Layout::Replicated(), "stage_send");
  EXPECT_EQ(cx_.ts[t].layout.kind, LayoutKind::kReplicated);
  ASSERT_EQ(cx_.prog.collectives.size(), 1u);
  EXPECT_EQ(cx_.prog.collectives[0].members, (std::vector<int>{0, 2, 1, 3}));  // grid columns
  EXPECT_EQ(cx_.prog.collectives[0].bytes, 8u * 32 * 2);
  int n;
  uint64_t bytes;
  Transfers(&n, &bytes);
  EXPECT_EQ(n, 4);
  EXPECT_EQ(bytes, 4u * 256);  // each rank's 4 rows x 32 columns
}

TEST_F(LayoutConvertTest, SatisfiedLayoutsNeedNoCollective) {
  const int32_t heads = Tensor(8, 32, Layout::Cols(8));
  conv_.Convert(heads, Layout::Cols(8), "k_proj");
  const int32_t rep = Tensor(8, 32, Layout::Replicated());
  conv_.Convert(rep, Layout::Rows(), "x");  // every rank already holds its rows
  const int32_t grid_rows = Tensor(8, 32, Layout::GridRows(2, 2));
  conv_.Convert(grid_rows, Layout::GridRows(2, 2), "x");
  EXPECT_TRUE(cx_.prog.collectives.empty());
  EXPECT_EQ(cx_.ts[rep].layout.kind, LayoutKind::kReplicated);
}

}  // namespace
}  // namespace tpsim::mapping
