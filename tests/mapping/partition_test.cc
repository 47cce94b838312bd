// Partitioners in isolation, through a fake GemmContext that records what they emit
// (shard ranges, weight fetches, collectives, transfers). Every expected number below is
// worked out by hand from the partitioner's rule in mapping/partition/*.cc.
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "mapping/partition/blocks.h"
#include "mapping/partition/partitioner.h"

namespace tpsim::mapping {
namespace {

struct Shard {
  int rank;
  Range rows, ks, cols;
  bool transpose_b, accumulate;
  uint64_t buffer_bytes;
  std::vector<TaskId> deps;
};

struct Coll {
  CollectiveKind kind;
  std::vector<std::vector<int>> groups;
  uint64_t bytes, align;
};

class FakeContext : public GemmContext {
 public:
  FakeContext(int p, RankGrid grid) : p_(p), grid_(grid) {}
  config::Mapping mapping;
  bool stream = false;  // weights streamed from DRAM
  std::vector<Shard> shards;
  std::vector<uint64_t> fetched;  // bytes of each weight read
  std::vector<Coll> colls;
  std::deque<Schedule> schedules;  // CollectiveRun keeps a pointer
  int transfers = 0;
  uint64_t transfer_bytes = 0;
  int func_collectives = 0;

  int P() const override { return p_; }
  RankGrid Grid() const override { return grid_; }
  const config::Mapping& Mapping() const override { return mapping; }
  uint64_t DtypeBytes() const override { return 2; }
  TaskId EmitGemm(const GemmSpec&, int rank, const ShardGemm& s, std::vector<TaskId> deps) override {
    shards.push_back(
        {rank, s.rows, s.ks, s.cols, s.transpose_b, s.accumulate, s.buffer_bytes, std::move(deps)});
    return TaskId(next_++);
  }
  WeightBlock FetchWeights(int, uint64_t bytes) override {
    if (!stream) return {};
    fetched.push_back(bytes);
    return {{TaskId(next_++)}, bytes};
  }
  CollectiveRun AddCollective(CollectiveKind kind, const std::vector<std::vector<int>>& groups,
                              uint64_t bytes, uint64_t align, OpId) override {
    colls.push_back({kind, groups, bytes, align});
    schedules.push_back(LowerCollective("ring", kind, static_cast<int>(groups[0].size()), bytes, align));
    return {static_cast<int32_t>(colls.size() - 1), &schedules.back()};
  }
  TaskId EmitTransfer(const CollectiveRun&, size_t, const Xfer& x, std::vector<TaskId>) override {
    ++transfers;
    transfer_bytes += x.bytes;
    return TaskId(next_++);
  }
  bool Functional() const override { return true; }
  int Core(int rank) const override { return 100 + rank; }
  int32_t NewBuffer(uint64_t, uint64_t) override { return 7; }
  void AddFuncCollective(FuncCollective) override { ++func_collectives; }

 private:
  int p_;
  RankGrid grid_;
  uint32_t next_ = 0;
};

GemmSpec Spec(llm::OpClass cls, uint64_t t, uint64_t k, uint64_t n, uint32_t k_unit = 1,
              uint32_t n_unit = 1) {
  GemmSpec g;
  g.cls = cls, g.t = t, g.k = k, g.n = n, g.k_unit = k_unit, g.n_unit = n_unit;
  g.x = 1, g.w = 2, g.y = 3;
  return g;
}

const Partitioner& Get(const std::string& name) {
  const Partitioner* p = FindPartitioner(name);
  EXPECT_NE(p, nullptr) << name;
  return *p;
}

// Chooses, then emits; returns Y's layout and the label through *label.
Layout ChooseAndEmit(const std::string& name, const GemmSpec& g, FakeContext* ctx, std::string* label) {
  const Partitioner* p = Get(name).Choose(g, *ctx, label);
  return p->Emit(g, *ctx);
}

void ExpectRange(Range r, uint64_t lo, uint64_t hi) {
  EXPECT_EQ(r.lo, lo);
  EXPECT_EQ(r.hi, hi);
}

TEST(PartitionTest, KSplitSplitsKAndLeavesPartialSums) {
  FakeContext ctx(4, {2, 2});
  std::string label;
  // X[8, 64] . W[64, 32]: rank r takes K columns [16 r, 16 r + 16), all rows, all of N.
  const Layout out = ChooseAndEmit("k_split", Spec(llm::OpClass::kDown, 8, 64, 32), &ctx, &label);
  EXPECT_EQ(label, "k_split");
  EXPECT_EQ(out.kind, LayoutKind::kPartial);
  ASSERT_EQ(ctx.shards.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(ctx.shards[r].rank, r);
    ExpectRange(ctx.shards[r].rows, 0, 8);
    ExpectRange(ctx.shards[r].ks, 16 * r, 16 * r + 16);
    ExpectRange(ctx.shards[r].cols, 0, 32);
    EXPECT_EQ(ctx.shards[r].buffer_bytes, 0u);  // weights resident
  }
  EXPECT_TRUE(ctx.colls.empty());
  EXPECT_EQ(Get("k_split").ShardElems(Spec(llm::OpClass::kDown, 8, 64, 32), 4, {2, 2}), 16u * 32);
}

TEST(PartitionTest, KSplitKeepsWholeHeadsOnlyWhenThereAreEnough) {
  FakeContext ctx(4, {2, 2});
  std::string label;
  // o_proj with 8 heads of 4: two whole heads (8 columns of K) per rank.
  ChooseAndEmit("k_split", Spec(llm::OpClass::kO, 2, 32, 16, 4, 1), &ctx, &label);
  ASSERT_EQ(ctx.shards.size(), 4u);
  ExpectRange(ctx.shards[3].ks, 24, 32);
  EXPECT_EQ(Get("k_split").Input(Spec(llm::OpClass::kO, 2, 32, 16, 4, 1), ctx).unit, 4u);
  // 2 heads of 8 over 4 ranks: heads would be shared, so K splits by single columns (4 each).
  ctx.shards.clear();
  ChooseAndEmit("k_split", Spec(llm::OpClass::kO, 2, 16, 16, 8, 1), &ctx, &label);
  ASSERT_EQ(ctx.shards.size(), 4u);
  ExpectRange(ctx.shards[1].ks, 4, 8);
  EXPECT_EQ(Get("k_split").Input(Spec(llm::OpClass::kO, 2, 16, 16, 8, 1), ctx).unit, 1u);
}

TEST(PartitionTest, NSplitSharesKvHeadsWhenFewerThanRanks) {
  FakeContext ctx(4, {2, 2});
  std::string label;
  // k_proj with 2 KV heads of 8 over 4 ranks: ranks 0, 1 compute head 0, ranks 2, 3 head 1.
  const Layout out = ChooseAndEmit("n_split", Spec(llm::OpClass::kQkv, 4, 32, 16, 1, 8), &ctx, &label);
  EXPECT_EQ(out.kind, LayoutKind::kCols);
  EXPECT_EQ(Get("n_split").Input(Spec(llm::OpClass::kQkv, 4, 32, 16, 1, 8), ctx).kind,
            LayoutKind::kReplicated);
  ASSERT_EQ(ctx.shards.size(), 4u);
  ExpectRange(ctx.shards[0].cols, 0, 8);
  ExpectRange(ctx.shards[1].cols, 0, 8);
  ExpectRange(ctx.shards[2].cols, 8, 16);
  ExpectRange(ctx.shards[3].cols, 8, 16);
  for (const Shard& s : ctx.shards) ExpectRange(s.ks, 0, 32);
  EXPECT_EQ(Get("n_split").ShardElems(Spec(llm::OpClass::kQkv, 4, 32, 16, 1, 8), 4, {2, 2}), 8u * 32);
}

TEST(PartitionTest, StreamedWeightsAreFetchedPerShard) {
  FakeContext ctx(2, {1, 2});
  ctx.stream = true;
  std::string label;
  // n_split of W[16, 8] over 2 ranks, bf16: each shard reads W[16, 4] = 128 bytes first.
  ChooseAndEmit("n_split", Spec(llm::OpClass::kQkv, 4, 16, 8), &ctx, &label);
  ASSERT_EQ(ctx.fetched, (std::vector<uint64_t>{128, 128}));
  ASSERT_EQ(ctx.shards.size(), 2u);
  EXPECT_EQ(ctx.shards[1].buffer_bytes, 128u);
  ASSERT_EQ(ctx.shards[1].deps.size(), 1u);  // waits for its own read
  EXPECT_EQ(ctx.shards[1].deps[0], 2u);      // ids: read 0, compute 1, read 2, compute 3
}

TEST(PartitionTest, MSplitRotateRotatesWeightShardsRoundTheRing) {
  FakeContext ctx(4, {2, 2});
  std::string label;
  // X[8, 16] . W[16, 32], bf16: W^T shards of 8 columns (8 x 16 x 2 = 256 bytes) rotate.
  const Layout out = ChooseAndEmit("m_split_rotate", Spec(llm::OpClass::kQkv, 8, 16, 32), &ctx, &label);
  EXPECT_EQ(label, "m_split_rotate");
  EXPECT_EQ(out.kind, LayoutKind::kRows);
  ASSERT_EQ(ctx.colls.size(), 1u);
  EXPECT_EQ(ctx.colls[0].kind, CollectiveKind::kRotate);
  EXPECT_EQ(ctx.colls[0].groups, (std::vector<std::vector<int>>{{0, 1, 2, 3}}));
  EXPECT_EQ(ctx.colls[0].bytes, 32u * 16 * 2);
  EXPECT_EQ(ctx.colls[0].align, 16u * 2);
  // Ring rotation: P - 1 = 3 steps of 4 transfers of one 256-byte shard each.
  EXPECT_EQ(ctx.transfers, 12);
  EXPECT_EQ(ctx.transfer_bytes, 12u * 256);
  // Each rank computes on its own shard and on the 3 arrivals: 16 computes, every one on
  // the rank's 2 rows, all 32 columns covered per rank; two shard buffers (512 bytes).
  ASSERT_EQ(ctx.shards.size(), 16u);
  std::vector<uint64_t> cols(4, 0);
  for (const Shard& s : ctx.shards) {
    ExpectRange(s.rows, 2 * s.rank, 2 * s.rank + 2);
    ExpectRange(s.ks, 0, 16);
    EXPECT_TRUE(s.transpose_b);
    EXPECT_EQ(s.buffer_bytes, 512u);
    cols[s.rank] += s.cols.size();
  }
  EXPECT_EQ(cols, (std::vector<uint64_t>{32, 32, 32, 32}));
  EXPECT_EQ(ctx.func_collectives, 1);
}

// Streamed weights with rotation: each rank reads only its own block, once; arrivals come
// over the network, not from DRAM.
TEST(PartitionTest, RotationsReadOnlyTheOwnBlockFromDram) {
  FakeContext rot(4, {2, 2});
  rot.stream = true;
  std::string label;
  ChooseAndEmit("m_split_rotate", Spec(llm::OpClass::kQkv, 8, 16, 32), &rot, &label);
  EXPECT_EQ(rot.fetched, (std::vector<uint64_t>{256, 256, 256, 256}));  // 8 columns x 16 x 2 B
  ASSERT_EQ(rot.shards.size(), 16u);
  EXPECT_EQ(rot.shards[0].deps, (std::vector<TaskId>{TaskId(0)}));  // rank 0's own shard waits for its read
  FakeContext ks(4, {2, 2});
  ks.stream = true;
  ks.mapping.set_mn_2d_weights("k_steps");
  ChooseAndEmit("mn_2d", Spec(llm::OpClass::kGateUp, 8, 16, 32), &ks, &label);
  EXPECT_EQ(ks.fetched, (std::vector<uint64_t>{256, 256, 256, 256}));  // 8 K rows x 16 columns x 2 B
  EXPECT_EQ(ks.transfers, 4);
}

TEST(PartitionTest, MSplitRotateFallsBackToKSplitWithFewerRowsThanRanks) {
  FakeContext ctx(4, {2, 2});
  std::string label;
  const Layout out = ChooseAndEmit("m_split_rotate", Spec(llm::OpClass::kQkv, 2, 16, 32), &ctx, &label);
  EXPECT_EQ(label, "m_split_rotate->k_split (M=2 < tp=4)");
  EXPECT_EQ(out.kind, LayoutKind::kPartial);
  EXPECT_TRUE(ctx.colls.empty());
}

// One rank: nothing rotates. The rank computes X[8, 16] . W[16, 32] whole as a plain shard
// (n_split's), with no collective and no W^T buffer; streamed weights hold only the read
// block W[16, 32] (16 x 32 x 2 = 1024 bytes), as any plain shard.
TEST(PartitionTest, MSplitRotateAtOneRankIsThePlainGemm) {
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream);
    FakeContext ctx(1, {1, 1});
    ctx.stream = stream;
    std::string label;
    const GemmSpec g = Spec(llm::OpClass::kQkv, 8, 16, 32);
    EXPECT_STREQ(Get("m_split_rotate").Choose(g, ctx, &label)->name(), "n_split");
    EXPECT_EQ(label, "m_split_rotate");
    ChooseAndEmit("m_split_rotate", g, &ctx, &label);
    EXPECT_TRUE(ctx.colls.empty());
    EXPECT_EQ(ctx.func_collectives, 0);
    ASSERT_EQ(ctx.shards.size(), 1u);
    ExpectRange(ctx.shards[0].rows, 0, 8);
    ExpectRange(ctx.shards[0].ks, 0, 16);
    ExpectRange(ctx.shards[0].cols, 0, 32);
    EXPECT_FALSE(ctx.shards[0].transpose_b);
    EXPECT_EQ(ctx.shards[0].buffer_bytes, stream ? 1024u : 0u);
    EXPECT_EQ(ctx.fetched, stream ? std::vector<uint64_t>{1024} : std::vector<uint64_t>{});
  }
}

// The shard buffers a rotating rank holds: the shard arriving while it computes on the
// current one. X[8, 16] . W[16, 32], bf16; shards of 32 / P columns x 16 x 2 bytes.
//   P = 2 (512-byte shards): resident weights hold the own shard, one arrives: 512;
//         streamed, the own shard's read block and the arrival: 1024.
//   P = 4 (256-byte shards): two arrivals overlap (one computed on, the next arriving):
//         512 either way (streamed: the own block's buffer takes arrival 2).
TEST(PartitionTest, MSplitRotateBuffersHoldTheArrivingShardBesidesTheCurrentOne) {
  struct Case {
    int p;
    bool stream;
    uint64_t buffer;
  };
  for (const Case& c : {Case{2, false, 512}, Case{2, true, 1024}, Case{4, false, 512}, Case{4, true, 512}}) {
    SCOPED_TRACE("P=" + std::to_string(c.p) + (c.stream ? " streamed" : " resident"));
    FakeContext ctx(c.p, {1, c.p});
    ctx.stream = c.stream;
    std::string label;
    ChooseAndEmit("m_split_rotate", Spec(llm::OpClass::kQkv, 8, 16, 32), &ctx, &label);
    ASSERT_EQ(ctx.shards.size(), static_cast<size_t>(c.p * c.p));
    for (const Shard& s : ctx.shards) EXPECT_EQ(s.buffer_bytes, c.buffer);
  }
}

// Columns that do not divide: 30 over 4 ranks are shards of 8, 8, 7 and 7 columns
// (30 = 4 x 7 + 2), and the buffers are sized by the widest (8 x 16 x 2 = 256 bytes each).
TEST(PartitionTest, MSplitRotateShardsAreBalanced) {
  FakeContext ctx(4, {2, 2});
  ctx.stream = true;
  std::string label;
  ChooseAndEmit("m_split_rotate", Spec(llm::OpClass::kQkv, 8, 16, 30), &ctx, &label);
  EXPECT_EQ(ctx.fetched, (std::vector<uint64_t>{256, 256, 224, 224}));
  std::vector<uint64_t> cols(4, 0);
  for (const Shard& s : ctx.shards) {
    EXPECT_EQ(s.buffer_bytes, 512u);
    cols[s.rank] += s.cols.size();
  }
  EXPECT_EQ(cols, (std::vector<uint64_t>{30, 30, 30, 30}));
  EXPECT_EQ(Get("m_split_rotate").ShardElems(Spec(llm::OpClass::kQkv, 8, 16, 30), 4, {2, 2}), 8u * 16);
}

TEST(PartitionTest, Mn2dComputesGridBlocks) {
  FakeContext ctx(4, {2, 2});
  std::string label;
  // X[8, 16] . W[16, 32] on a 2 x 2 grid: rank (i, j) computes rows [4 i, 4 i + 4) x
  // columns [16 j, 16 j + 16) with all of K.
  const Layout out = ChooseAndEmit("mn_2d", Spec(llm::OpClass::kGateUp, 8, 16, 32), &ctx, &label);
  EXPECT_EQ(label, "mn_2d(2x2)");
  EXPECT_EQ(out.kind, LayoutKind::kGrid);
  ASSERT_EQ(ctx.shards.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    ExpectRange(ctx.shards[r].rows, 4 * (r / 2), 4 * (r / 2) + 4);
    ExpectRange(ctx.shards[r].cols, 16 * (r % 2), 16 * (r % 2) + 16);
    ExpectRange(ctx.shards[r].ks, 0, 16);
  }
  EXPECT_EQ(Get("mn_2d").ShardElems(Spec(llm::OpClass::kGateUp, 8, 16, 32), 4, {2, 2}), 16u * 16);
  // 3 rows do not divide by 2 grid rows: n_split, said in the label.
  ctx.shards.clear();
  ChooseAndEmit("mn_2d", Spec(llm::OpClass::kGateUp, 3, 16, 32), &ctx, &label);
  EXPECT_EQ(label, "mn_2d->n_split (M=3 not divisible by grid_rows=2)");
  // The label names what does not divide: the columns too, where 33 do not divide by 2.
  ctx.shards.clear();
  ChooseAndEmit("mn_2d", Spec(llm::OpClass::kGateUp, 3, 16, 33), &ctx, &label);
  EXPECT_EQ(label,
            "mn_2d->n_split (M=3 not divisible by grid_rows=2, N units=33 not divisible by grid_cols=2)");
  ctx.shards.clear();
  ChooseAndEmit("mn_2d", Spec(llm::OpClass::kGateUp, 4, 16, 33), &ctx, &label);
  EXPECT_EQ(label, "mn_2d->n_split (N units=33 not divisible by grid_cols=2)");
}

TEST(PartitionTest, Mn2dKStepsRotatesKBlocksWithinGridColumns) {
  FakeContext ctx(4, {2, 2});
  ctx.mapping.set_mn_2d_weights("k_steps");
  std::string label;
  const Layout out = ChooseAndEmit("mn_2d", Spec(llm::OpClass::kGateUp, 8, 16, 32), &ctx, &label);
  EXPECT_EQ(label, "mn_2d(2x2, k_steps)");
  EXPECT_EQ(out.kind, LayoutKind::kGrid);
  // One rotate collective of the 2 grid columns {0, 2} and {1, 3}; each buffer is W[:, 16
  // columns] = 16 x 16 x 2 = 512 bytes, chunks of whole K rows (32 bytes).
  ASSERT_EQ(ctx.colls.size(), 1u);
  EXPECT_EQ(ctx.colls[0].groups, (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  EXPECT_EQ(ctx.colls[0].bytes, 512u);
  EXPECT_EQ(ctx.colls[0].align, 32u);
  // 2 ranks per ring: 1 step, 2 transfers per group of one 256-byte K-block.
  EXPECT_EQ(ctx.transfers, 4);
  EXPECT_EQ(ctx.transfer_bytes, 4u * 256);
  // 4 computes on the own K-block (rank (i, j): K rows [8 i, 8 i + 8)), then 4 accumulating
  // on the arrived one.
  ASSERT_EQ(ctx.shards.size(), 8u);
  for (int r = 0; r < 4; ++r) {
    ExpectRange(ctx.shards[r].ks, 8 * (r / 2), 8 * (r / 2) + 8);
    EXPECT_FALSE(ctx.shards[r].accumulate);
  }
  for (size_t i = 4; i < 8; ++i) {
    const Shard& s = ctx.shards[i];
    EXPECT_TRUE(s.accumulate);
    ExpectRange(s.ks, 8 * (1 - s.rank / 2), 8 * (1 - s.rank / 2) + 8);
    EXPECT_EQ(s.buffer_bytes, 2u * 256);
  }
  EXPECT_EQ(Get("mn_2d").ShardElems(Spec(llm::OpClass::kGateUp, 8, 16, 32), 4, {2, 2}), 16u * 16);
  // k = 9 has no equal K-blocks over 2 grid rows: replicated mn_2d.
  ChooseAndEmit("mn_2d", Spec(llm::OpClass::kGateUp, 8, 9, 32), &ctx, &label);
  EXPECT_EQ(label, "mn_2d(k_steps)->mn_2d (k=9 not divisible by grid_rows=2)");
}

TEST(PartitionTest, MegatronPairsColumnThenRowParallel) {
  FakeContext ctx(2, {1, 2});
  std::string label;
  // QKV and gate/up: n_split (Y split by columns); O and down: k_split (partial sums).
  EXPECT_EQ(ChooseAndEmit("megatron", Spec(llm::OpClass::kQkv, 4, 16, 8), &ctx, &label).kind,
            LayoutKind::kCols);
  EXPECT_EQ(label, "megatron(n_split)");
  EXPECT_EQ(ChooseAndEmit("megatron", Spec(llm::OpClass::kGateUp, 4, 16, 8), &ctx, &label).kind,
            LayoutKind::kCols);
  EXPECT_EQ(ChooseAndEmit("megatron", Spec(llm::OpClass::kO, 4, 8, 16), &ctx, &label).kind,
            LayoutKind::kPartial);
  EXPECT_EQ(label, "megatron(k_split)");
  EXPECT_EQ(ChooseAndEmit("megatron", Spec(llm::OpClass::kDown, 4, 8, 16), &ctx, &label).kind,
            LayoutKind::kPartial);
  // The O shards take K halves: rank 1 K [4, 8).
  ExpectRange(ctx.shards[5].ks, 4, 8);
  EXPECT_TRUE(ctx.colls.empty());
}

}  // namespace
}  // namespace tpsim::mapping
