// Lowering: pinned counts and bytes, fallbacks, memory placement and spills, validation
// (mn_2d and the rotating partitioners: lower_mn2d_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "configs/load.h"
#include "llm/model.h"
#include "mapping/mapping.h"
#include "mapping/pipeline.h"
#include "mapping_test_util.h"
#include "tests/arch/test_util.h"
#include "tests/mapping/lower_test_util.h"
#include "tests/mapping/program_test_util.h"

namespace tpsim::mapping {
namespace {

using testing::ExpectWellFormed;
using testing::FindOp;
using testing::Map;
using testing::MeshChip;
using testing::Qwen4b;
using testing::SmallModel;
using testing::Work;

// A stage's layers as a range (StageFirstLayer) are LayerStage's, layer by layer; so are the
// most layers a stage holds.
TEST(LowerTest, StageRangesAreLayerStages) {
  for (int stages : {1, 2, 3, 7, 16}) {
    for (uint32_t layers : {0u, 1u, 5u, 16u, 36u, 61u}) {
      std::vector<uint32_t> count(stages, 0);
      for (uint32_t l = 0; l < layers; ++l) {
        const int s = LayerStage(l, stages, layers);
        ++count[s];
        EXPECT_LE(StageFirstLayer(s, stages, layers), l);
        EXPECT_GT(StageFirstLayer(s + 1, stages, layers), l);
      }
      EXPECT_EQ(StageFirstLayer(stages, stages, layers), layers);
      for (int s = 0; s < stages; ++s)
        EXPECT_EQ(StageFirstLayer(s + 1, stages, layers) - StageFirstLayer(s, stages, layers), count[s]);
      EXPECT_EQ(static_cast<uint32_t>(MostLayersPerStage(stages, layers)),
                *std::max_element(count.begin(), count.end()));
    }
  }
}

TEST(LowerTest, MegatronHasTwoAllReducesPerLayer) {
  arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  Program p = Lower(chip, SmallModel(), Work(8, 2, 2), Map(4, "megatron"));
  ExpectWellFormed(p, chip);
  // 3 phases (prefill, 2 decode steps) x 2 layers, each: o_proj and down_proj all-reduce.
  ASSERT_EQ(p.collectives.size(), 3u * 2u * 2u);
  std::vector<std::string> names;
  for (const CollectiveInfo& c : p.collectives) {
    EXPECT_EQ(c.kind, CollectiveKind::kAllReduce);
    EXPECT_EQ(c.ranks, 4);
    names.push_back(p.ops[c.op].ref.op);
  }
  EXPECT_EQ(std::count(names.begin(), names.end(), "o_proj.all_reduce"), 6);
  EXPECT_EQ(std::count(names.begin(), names.end(), "down_proj.all_reduce"), 6);
  // The prefill all-reduce carries the whole [8, 64] activation: 8 * 64 * 2 bytes.
  EXPECT_EQ(p.collectives[0].bytes, 8u * 64u * 2u);
  EXPECT_EQ(FindOp(p, "prefill", 0, "q_proj")->ref.Label(), "megatron(n_split)");
  EXPECT_EQ(FindOp(p, "prefill", 0, "o_proj")->ref.Label(), "megatron(k_split)");
}

TEST(LowerTest, KSplitOProjAllReduceBytesQwen3_4b) {
  arch::Chip chip = arch::testing::LoadChip("wafer-8x8");
  Program p = Lower(chip, Qwen4b(), Work(256, 0, 1), Map(4, "k_split"));
  ExpectWellFormed(p, chip);
  const CollectiveInfo* o = nullptr;
  for (const CollectiveInfo& c : p.collectives)
    if (p.ops[c.op].ref.op == "o_proj.all_reduce") o = &c;
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(o->bytes, 256u * 2560u * 2u);
  // Ring all-reduce over 4 ranks: 2(P-1) = 6 steps of P transfers of bytes / P.
  uint64_t moved = 0;
  int transfers = 0;
  for (const testing::TaskView& t : testing::TaskViews(p))
    if (t.collective == static_cast<int>(o - p.collectives.data())) moved += t.bytes, ++transfers;
  EXPECT_EQ(transfers, 6 * 4);
  EXPECT_EQ(moved, 6u * 4u * (256u * 2560u * 2u / 4u));
  // Each rank's o_proj shard: [256 x 1024] . [1024 x 2560] (8 of the 32 heads).
  for (const testing::TaskView& t : testing::TaskViews(p))
    if (t.kind == TaskKind::kCompute && p.ops[t.op].ref.op == "o_proj") {
      EXPECT_EQ(t.m, 256u);
      EXPECT_EQ(t.k, 1024u);
      EXPECT_EQ(t.n, 2560u);
      EXPECT_DOUBLE_EQ(t.flops, 2.0 * 256 * 1024 * 2560);
    }
}

TEST(LowerTest, MSplitRotateFallsBackToKSplitInDecode) {
  arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  Program p = Lower(chip, SmallModel(), Work(8, 1, 1), Map(4, "m_split_rotate"));
  ExpectWellFormed(p, chip);
  EXPECT_EQ(FindOp(p, "prefill", 0, "q_proj")->ref.Label(), "m_split_rotate");
  EXPECT_EQ(FindOp(p, "decode", 0, "q_proj")->ref.Label(), "m_split_rotate->k_split (M=1 < tp=4)");
  EXPECT_EQ(FindOp(p, "decode", 0, "down_proj")->ref.Label(), "m_split_rotate->k_split (M=1 < tp=4)");
  // Prefill q_proj rotates its weight shards: a ring rotate has P-1 = 3 steps of 4 transfers,
  // each a [16 x 64] shard (one head of W^T) = 16 * 64 * 2 bytes; and every rank computes
  // [2 x 64] . [64 x 16] on each of the 4 shards.
  int rotates = 0;
  for (size_t c = 0; c < p.collectives.size(); ++c) {
    if (p.collectives[c].kind != CollectiveKind::kRotate || p.ops[p.collectives[c].op].ref.op != "q_proj")
      continue;
    ++rotates;
    int n = 0;
    for (const testing::TaskView& t : testing::TaskViews(p))
      if (t.collective == static_cast<int>(c)) {
        EXPECT_EQ(t.bytes, 16u * 64u * 2u);
        ++n;
      }
    EXPECT_EQ(n, 3 * 4);
  }
  EXPECT_EQ(rotates, 1);
  int shards = 0;
  const OpInfo* q = FindOp(p, "prefill", 0, "q_proj");
  for (const testing::TaskView& t : testing::TaskViews(p))
    if (t.kind == TaskKind::kCompute && &p.ops[t.op] == q) {
      EXPECT_EQ(t.m, 2u);
      EXPECT_EQ(t.k, 64u);
      EXPECT_EQ(t.n, 16u);
      ++shards;
    }
  EXPECT_EQ(shards, 4 * 4);
}

TEST(LowerTest, RowsToHeadsUseAllToAll) {
  // m_split_rotate leaves q, k, v split by rows (2 of 8 tokens per rank); attention needs them
  // by heads: one all_to_all each (q [8 x 64], k and v [8 x 32]), and another turning the
  // head-split attention output back into rows for o_proj.
  arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  Program p = Lower(chip, SmallModel(), Work(8, 0, 1), Map(2, "m_split_rotate", "direct"));
  std::map<std::string, uint64_t> a2a;
  for (const CollectiveInfo& c : p.collectives)
    if (c.kind == CollectiveKind::kAllToAll) a2a[p.ops[c.op].ref.op] = c.bytes;
  // Bytes per rank: its half of the rows, all columns.
  EXPECT_EQ(a2a["q_proj.all_to_all"], 4u * 64u * 2u);
  EXPECT_EQ(a2a["k_proj.all_to_all"], 4u * 32u * 2u);
  EXPECT_EQ(a2a["v_proj.all_to_all"], 4u * 32u * 2u);
  EXPECT_EQ(a2a["o_proj.all_to_all"], 4u * 64u * 2u);
  EXPECT_EQ(a2a.size(), 4u);
  // Direct all_to_all over 2 ranks: each rank sends its off-diagonal block of q, [4 rows x 32 cols], once.
  for (const testing::TaskView& t : testing::TaskViews(p))
    if (t.collective >= 0 && p.ops[p.collectives[t.collective].op].ref.op == "q_proj.all_to_all") {
      EXPECT_EQ(t.bytes, 4u * 32u * 2u);
      EXPECT_NE(t.offset, t.dst_offset);
    }
}

TEST(LowerTest, SramSpillOnTinySram) {
  // tp 2, every GEMM k_split, weights forced to DRAM, 4 KiB of SRAM per core.
  arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, 4096));
  config::Mapping m = Map(2, "k_split");
  m.set_weights("dram");
  Program p = Lower(chip, SmallModel(), Work(8, 0, 1), m);
  ExpectWellFormed(p, chip);
  EXPECT_EQ(p.weights_location, WeightsLocation::kDramStreamed);
  // KV per core: K and V x 8 tokens x 1 KV head x 16 x 2 bytes = 512 B: fits, resident.
  EXPECT_EQ(p.kv_location, KvLocation::kSram);
  const uint64_t avail = 4096 - 2 * 8 * 16 * 2;
  // o_proj per rank: X [8 x 32] + Y [8 x 64] + streamed W shard [32 x 64], 2 bytes each.
  const uint64_t working = (8 * 32 + 8 * 64) * 2 + 32 * 64 * 2;
  const OpInfo* o = FindOp(p, "prefill", 0, "o_proj");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->spilled_bytes, 2 * (working - avail));  // 2 ranks x 2048
  // Per rank: one weight read, one spill write and its read-back, before the GEMM.
  int reads = 0, writes = 0;
  for (const testing::TaskView& t : testing::TaskViews(p))
    if (t.kind == TaskKind::kMemory && &p.ops[t.op] == o) {
      if (t.write) {
        ++writes;
        EXPECT_EQ(t.bytes, working - avail);
      } else {
        ++reads;
      }
    }
  EXPECT_EQ(writes, 2);
  EXPECT_EQ(reads, 4);
  // With 256 bytes of SRAM the KV cache no longer fits: attention reads K and V from DRAM
  // (8 tokens x 1 KV head x 16 x 2 bytes each per rank) and kv_write writes both back.
  arch::Chip tiny = arch::Chip::Build(MeshChip(2, 2, 256));
  Program kv = Lower(tiny, SmallModel(), Work(8, 0, 1), m);
  EXPECT_EQ(kv.kv_location, KvLocation::kDram);
  const OpInfo* qk = FindOp(kv, "prefill", 0, "attn_qk");
  const OpInfo* kvw = FindOp(kv, "prefill", 0, "kv_write");
  int kv_reads = 0, kv_writes = 0;
  for (const testing::TaskView& t : testing::TaskViews(kv)) {
    if (t.kind != TaskKind::kMemory) continue;
    if (&kv.ops[t.op] == qk && !t.write && t.bytes == 8u * 16u * 2u) ++kv_reads;
    if (&kv.ops[t.op] == kvw && t.write && t.bytes == 2u * 8u * 16u * 2u) ++kv_writes;
  }
  EXPECT_EQ(kv_reads, 2);
  EXPECT_EQ(kv_writes, 2);
  // The same chip with ample SRAM spills nothing.
  arch::Chip big = arch::Chip::Build(MeshChip(2, 2, uint64_t{1} << 30));
  EXPECT_EQ(Lower(big, SmallModel(), Work(8, 0, 1), m).spilled_bytes, 0u);
}

// The SRAM timeline: activations held between ops count against SRAM while other ops run.
// tp 1 on one core, weights streamed, 8 tokens, one layer of SmallModel with intermediate 32.
// Resident: the KV cache, 2 x 8 tokens x 2 KV heads x 16 x 2 B = 1024 B. The largest need is
// q_proj's: X [8 x 64] + Y [8 x 64] + W [64 x 64], 2 B each = 10,240 B, while the layer input
// x [8 x 64] (1024 B, read again by attn_residual) is held: 11,264 B. o_proj needs as much
// (attn + o + W) but x is its only other live buffer too; the MLP ops need less.
TEST(LowerTest, SramTimelineEvictsHeldActivations) {
  config::Model model = SmallModel();
  model.set_intermediate_size(32);
  config::Mapping m = Map(1, "megatron");
  m.set_weights("dram");
  auto lower = [&](uint64_t sram) {
    arch::Chip chip = arch::Chip::Build(MeshChip(1, 1, sram));
    Program p = Lower(chip, model, Work(8, 0, 1), m);
    ExpectWellFormed(p, chip);
    EXPECT_EQ(p.kv_location, KvLocation::kSram);
    return p;
  };
  const uint64_t kv = 1024, q_proj = (8 * 64 + 8 * 64) * 2 + 64 * 64 * 2, x = 8 * 64 * 2;
  ASSERT_EQ(q_proj, 10240u);
  // Exactly enough: nothing moves.
  EXPECT_EQ(lower(kv + q_proj + x).spilled_bytes, 0u);
  // One byte less: q_proj evicts x (one 1024 B write after x's producer, none: it is the
  // input) and attn_residual reads it back before the add; nothing else spills.
  {
    Program p = lower(kv + q_proj + x - 1);
    EXPECT_EQ(p.spilled_bytes, x);
    const OpInfo* q = FindOp(p, "prefill", 0, "q_proj");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->spilled_bytes, x);
    int64_t evict = -1, reload = -1;
    for (const testing::TaskView& t : testing::TaskViews(p)) {
      if (t.kind != TaskKind::kMemory || t.bytes != x) continue;
      const std::string& op = p.ops[t.op].ref.op;
      if (t.write && op == "q_proj") evict = t.id;
      if (!t.write && op == "attn_residual") {
        reload = t.id;
        ASSERT_EQ(std::vector<uint32_t>(t.deps.begin(), t.deps.end()),
                  std::vector<uint32_t>{static_cast<uint32_t>(evict)});
      }
    }
    ASSERT_GE(evict, 0);
    ASSERT_GE(reload, 0);
    for (const testing::TaskView& t : testing::TaskViews(p)) {
      const std::string& op = p.ops[t.op].ref.op;
      if (t.kind == TaskKind::kCompute && op == "q_proj") {  // the GEMM waits for the eviction
        EXPECT_NE(std::find(t.deps.begin(), t.deps.end(), static_cast<uint32_t>(evict)), t.deps.end());
      }
      if (t.kind == TaskKind::kCompute && op == "attn_residual") {
        EXPECT_NE(std::find(t.deps.begin(), t.deps.end(), static_cast<uint32_t>(reload)), t.deps.end());
      }
    }
  }
  // 256 B less than that: evicting x is not enough for q_proj, which also spills 256 B of its
  // own data (written and read back); o_proj (same 10,240 B, x already out) spills 256 B.
  {
    Program p = lower(kv + q_proj - 256);
    EXPECT_EQ(FindOp(p, "prefill", 0, "q_proj")->spilled_bytes, x + 256);
    EXPECT_EQ(FindOp(p, "prefill", 0, "o_proj")->spilled_bytes, 256u);
    EXPECT_EQ(p.spilled_bytes, x + 256 + 256);
  }
}

TEST(LowerTest, WeightsStreamedFromDramWhenTheyDoNotFit) {
  arch::Chip chip = arch::testing::LoadChip("wafer-8x8");
  Program p = Lower(chip, Qwen4b(), Work(16, 1, 2), Map(4, "megatron"));
  ExpectWellFormed(p, chip);
  // Per core per layer (megatron, tp 4): 2560 x (1024 + 256 + 256) + 1024 x 2560 +
  // 2 x 2560 x 2432 + 2432 x 2560 elements x 2 bytes = 50.5 MB > 32 MiB of SRAM.
  EXPECT_EQ(p.weights_location, WeightsLocation::kDramStreamed);
  int q_reads = 0;
  const OpInfo* q = FindOp(p, "prefill", 1, "q_proj");
  for (const testing::TaskView& t : testing::TaskViews(p))
    if (t.kind == TaskKind::kMemory && &p.ops[t.op] == q && !t.write) {
      EXPECT_EQ(t.bytes, 2560u * 1024u * 2u);
      ++q_reads;
    }
  EXPECT_EQ(q_reads, 4);
  // The small model fits: no weight reads at all.
  Program small = Lower(chip, SmallModel(), Work(16, 1, 2), Map(4, "megatron"));
  EXPECT_EQ(small.weights_location, WeightsLocation::kSram);
  EXPECT_EQ(small.kv_location, KvLocation::kSram);
  for (const testing::TaskView& t : testing::TaskViews(small)) EXPECT_NE(t.kind, TaskKind::kMemory);
}

// Streamed weights are double-buffered: on each core, the read of a weight op's
// shard waits for the compute that preceded the previous weight op, so at most
// one op's weights are fetched ahead of use (not the whole model at t = 0).
TEST(LowerTest, StreamedWeightReadsPrefetchOneOpAhead) {
  arch::Chip chip = arch::testing::LoadChip("wafer-8x8");
  Program p = Lower(chip, Qwen4b(), Work(16, 1, 2), Map(4, "megatron"));
  std::map<int, std::vector<const testing::TaskView*>> reads, computes;  // per core, in program order
  std::map<int, std::vector<uint32_t>> last_compute_before_read;
  std::map<int, uint32_t> last_compute;
  const std::vector<testing::TaskView> tasks = testing::TaskViews(p);
  for (const testing::TaskView& t : tasks) {
    if (t.kind == TaskKind::kCompute) last_compute[t.core] = t.id;
    if (t.kind == TaskKind::kMemory && !t.write) {
      reads[t.core].push_back(&t);
      last_compute_before_read[t.core].push_back(last_compute.count(t.core) ? last_compute[t.core] : ~0u);
    }
  }
  ASSERT_FALSE(reads.empty());
  for (const auto& [core, rs] : reads) {
    ASSERT_GE(rs.size(), 3u);
    EXPECT_TRUE(rs[0]->deps.empty()) << "the first read of core " << core << " starts at once";
    for (size_t i = 1; i < rs.size(); ++i) {
      // Read i waits for the last compute issued before read i-1.
      uint32_t gate = last_compute_before_read[core][i - 1];
      if (gate == ~0u) {
        EXPECT_TRUE(rs[i]->deps.empty());
      } else {
        ASSERT_EQ(rs[i]->deps.size(), 1u) << "core " << core << " read " << i;
        EXPECT_EQ(rs[i]->deps[0], gate) << "core " << core << " read " << i;
      }
    }
  }
}

TEST(LowerTest, NormGathersASplitHiddenInput) {
  // down_proj n_split leaves the layer output split along hidden; the next layer's
  // attn_norm needs whole rows, so an all-gather precedes it.
  arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  config::Mapping m = Map(4, "megatron");
  auto* o = m.add_overrides();
  o->set_op("down");
  o->set_partition("n_split");
  Program p = Lower(chip, SmallModel(), Work(8, 0, 2), m);
  const OpInfo* ag = FindOp(p, "prefill", 1, "attn_norm.all_gather");
  ASSERT_NE(ag, nullptr);
  EXPECT_EQ(FindOp(p, "prefill", 0, "attn_norm.all_gather"), nullptr);
  EXPECT_EQ(FindOp(p, "prefill", 0, "mlp_residual")->ref.Label(), "split(cols)");
}

TEST(LowerTest, PipelineStagesSendActivations) {
  arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  Program p = Lower(chip, SmallModel(), Work(8, 1, 2), Map(4, "megatron", "ring", "linear", 2));
  ExpectWellFormed(p, chip);
  // One send per phase between the stages: prefill rows split 2 per rank (8 rows / 4), decode
  // the whole [1 x 64] row from every rank.
  int sends = 0;
  for (const testing::TaskView& t : testing::TaskViews(p))
    if (p.ops[t.op].ref.op == "stage_send") {
      ++sends;
      EXPECT_EQ(t.bytes, p.ops[t.op].ref.phase == Phase::kPrefill ? 2u * 64u * 2u : 64u * 2u);
    }
  EXPECT_EQ(sends, 8);
}

TEST(LowerTest, ReferenceQwen3_4bLowers) {
  arch::Chip chip = arch::testing::LoadChip("wafer-8x8");
  config::Mapping m = Map(4, "k_split", "ring", "linear", 16);
  Program p = Lower(chip, Qwen4b(), Work(256, 20, 16), m, {.functional = true});
  ExpectWellFormed(p, chip);
  EXPECT_EQ(p.func.outputs.size(), 21u);
  std::string dump = p.Dump();
  EXPECT_EQ(static_cast<size_t>(std::count(dump.begin(), dump.end(), '\n')), p.num_tasks() + 1);
}

// Mapping fields another field or the chip leaves unread are listed with why (tpsim run warns;
// they were ignored silently), and none where each is read.
TEST(LowerTest, UnreadMappingFieldsAreListed) {
  config::Chip chip = MeshChip(2, 2, uint64_t{1} << 30);
  config::Mapping m = Map(2, "megatron");
  EXPECT_TRUE(UnreadMappingFields(m, chip, SmallModel()).empty());
  m.set_seed(5);
  m.set_placement_file("cores.txt");
  m.set_grid_rows(2);
  m.set_mn_2d_weights("k_steps");
  m.set_enforce_eager(true);
  m.mutable_serving()->set_max_running_requests(3);
  std::vector<UnreadField> u = UnreadMappingFields(m, chip, SmallModel());
  ASSERT_EQ(u.size(), 6u);
  EXPECT_EQ(u[0].field, "mapping.seed");
  EXPECT_EQ(u[0].why, "placement linear does not read it (placement random does)");
  EXPECT_EQ(u[1].field, "mapping.placement_file");
  EXPECT_EQ(u[2].field, "mapping.grid_rows");
  EXPECT_EQ(u[2].why, "no op class is mapped to mn_2d (mapping.partition megatron, no mn_2d override)");
  EXPECT_EQ(u[3].field, "mapping.mn_2d_weights");
  EXPECT_EQ(u[4].field, "mapping.enforce_eager");
  EXPECT_EQ(u[5].field, "mapping.serving");
  // Each read where its condition holds: random placement reads the seed, an mn_2d override the
  // grid fields.
  m.set_placement("random");
  auto* o = m.add_overrides();
  o->set_op("down");
  o->set_partition("mn_2d");
  m.clear_placement_file();
  m.clear_serving();
  u = UnreadMappingFields(m, chip, SmallModel());
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].field, "mapping.enforce_eager");
  chip.mutable_gpu();
  EXPECT_TRUE(UnreadMappingFields(m, chip, SmallModel()).empty());
  // A GPU node keeps the weights in HBM: weights sram is named there (and read elsewhere).
  m.set_weights("sram");
  u = UnreadMappingFields(m, chip, SmallModel());
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].field, "mapping.weights");
  EXPECT_EQ(u[0].why, "sram: a GPU node (chip.gpu) keeps the weights in HBM");
  m.set_weights("auto");
  // Routing fields the routing does not read, on a model with experts.
  m.mutable_moe()->set_zipf_s(1.2);
  m.mutable_moe()->set_seed(3);
  m.mutable_moe()->set_routing_file("r.csv");
  // On a model without experts the whole block is named once, not field by field.
  config::Model dense = SmallModel();
  dense.set_name("tiny-dense");
  u = UnreadMappingFields(m, chip, dense);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].field, "mapping.moe");
  EXPECT_EQ(u[0].why, "tiny-dense has no experts");
  config::Model moe = testing::MoeModel();
  moe.set_decoder_sparse_step(2);  // layer 0 dense: the override of down (above) is read there
  u = UnreadMappingFields(m, chip, moe);
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[0].field, "mapping.moe.zipf_s");
  EXPECT_EQ(u[0].why, "routing balanced does not read it (routing zipf does)");
  EXPECT_EQ(u[1].field, "mapping.moe.seed");
  EXPECT_EQ(u[2].field, "mapping.moe.routing_file");
  EXPECT_EQ(u[2].why, "routing balanced does not read it (routing trace does)");
  m.mutable_moe()->set_routing("zipf");
  u = UnreadMappingFields(m, chip, moe);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].why, "routing zipf does not read it (routing trace does)");
  // Every layer an MoE block: no dense MLP for the override of down.
  m.mutable_moe()->clear_routing_file();
  moe.set_decoder_sparse_step(1);
  moe.set_name("tiny-moe");
  u = UnreadMappingFields(m, chip, moe);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].field, "mapping.overrides[0]");
  EXPECT_EQ(
      u[0].why,
      "op class down is the dense MLP's, and every layer of tiny-moe is an MoE block (its experts follow "
      "mapping.moe)");
  // With qkv and o overridden too, the partition reaches no op; with one of them, it does.
  m.clear_overrides();  // the mn_2d override of down too: its grid fields go with it
  m.clear_grid_rows();
  m.clear_mn_2d_weights();
  m.set_partition("k_split");
  for (const char* op : {"qkv", "o"}) {
    config::PartitionOverride* o = m.add_overrides();
    o->set_op(op);
    o->set_partition("megatron");
  }
  u = UnreadMappingFields(m, chip, moe);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].field, "mapping.partition");
  EXPECT_EQ(u[0].why,
            "overrides set the attention projections' (qkv, o), and every layer of tiny-moe is an MoE block "
            "(its experts follow mapping.moe)");
  m.mutable_overrides()->RemoveLast();
  EXPECT_TRUE(UnreadMappingFields(m, chip, moe).empty());
  config::PartitionOverride* back = m.add_overrides();
  back->set_op("o");
  back->set_partition("megatron");
  moe.set_decoder_sparse_step(2);  // a dense layer's MLP reads it
  EXPECT_TRUE(UnreadMappingFields(m, chip, moe).empty());
}

// Stage regions that cannot tile the grid are said at mapping.pipeline_stages, with the way
// out (no placement value fixes them; they were said at mapping.placement): on a 3x3 grid, 4
// stages of 2 cores need 4 rectangles of 1x2 or 2x1, and each shape fits 3 times (3 rows of
// one 1x2, or one row of three 2x1). One op class overridden twice is refused at the second
// (the last ran, silently).
TEST(LowerTest, ValidateMappingBlamesStageRegionsOnTheStagesAndRefusesTwinOverrides) {
  arch::Chip chip = arch::Chip::Build(MeshChip(3, 3, uint64_t{1} << 30));
  std::vector<config::Diag> diags;
  ValidateMapping(Map(2, "megatron", "ring", "snake", 4), chip, SmallModel(), Work(8, 0, 4),
                  config::SourceMap(), &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "mapping.pipeline_stages");
  EXPECT_EQ(diags[0].value, "4");
  EXPECT_NE(diags[0].rule.find("no rectangle of 2 cores tiles the grid 4 times (1x2 fits 3, 2x1 fits 3)"),
            std::string::npos)
      << diags[0].rule;
  EXPECT_NE(diags[0].rule.find("or set mapping.span: chip"), std::string::npos) << diags[0].rule;
  config::Mapping span = Map(2, "megatron", "ring", "snake", 4);
  span.set_span("chip");
  diags.clear();
  ValidateMapping(span, chip, SmallModel(), Work(8, 0, 4), config::SourceMap(), &diags);
  EXPECT_TRUE(diags.empty()) << diags[0].rule;

  config::Mapping twice = Map(2, "megatron");
  for (const char* part : {"n_split", "k_split"}) {
    auto* o = twice.add_overrides();
    o->set_op("down");
    o->set_partition(part);
  }
  diags.clear();
  ValidateMapping(twice, chip, SmallModel(), Work(8, 0, 1), config::SourceMap(), &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "mapping.overrides[1].op");
  EXPECT_EQ(diags[0].rule,
            "op class already overridden by mapping.overrides[0] (partition n_split): give each class one "
            "override");
}

TEST(LowerTest, ValidateMappingReportsEveryProblem) {
  arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, uint64_t{1} << 30));
  config::Mapping m = Map(3, "nope", "carrier_pigeon", "linear", 2);
  auto* o = m.add_overrides();
  o->set_op("attention");
  o->set_partition("k_split");
  std::vector<config::Diag> diags;
  ValidateMapping(m, chip, SmallModel(), Work(8, 0, 1), config::SourceMap(), &diags);
  auto has = [&](const std::string& field, const std::string& text) {
    for (const auto& d : diags)
      if (d.field == field && d.rule.find(text) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("mapping.tp", "exceeds the chip's 4 cores"));
  EXPECT_TRUE(has("mapping.pipeline_stages", "more stages than simulated layers (1)"));
  EXPECT_TRUE(has("mapping.partition", "valid: k_split, m_split_rotate, megatron, mn_2d, n_split"));
  EXPECT_TRUE(has("mapping.collective", "valid:"));
  EXPECT_TRUE(has("mapping.overrides[0].op", "fixed partition"));
  EXPECT_TRUE(has("mapping.tp", "num_attention_heads (4) must divide by tp, or tp by it"));
  // The product the message prints is the sizes given, not the stages the check clamps to
  // the chip's cores + 1 (before: 3 x 5 = 15, for any stages past 4).
  diags.clear();
  config::Mapping many = Map(3, "k_split", "ring", "linear", 1000);
  ValidateMapping(many, chip, SmallModel(), Work(8, 0, 1), config::SourceMap(), &diags);
  EXPECT_TRUE(has("mapping.tp", "tp x pipeline_stages (3000) exceeds the chip's 4 cores"));
  // 3 x 4e9 x 4e9 passes 2^64: printed whole.
  diags.clear();
  many.set_pipeline_stages(4000000000u);
  many.set_attention_dp(4000000000u);
  ValidateMapping(many, chip, SmallModel(), Work(8, 0, 1), config::SourceMap(), &diags);
  EXPECT_TRUE(has("mapping.tp", "tp x pipeline_stages (12000000000) exceeds"));
  EXPECT_TRUE(
      has("mapping.attention_dp", "tp x attention_dp x pipeline_stages (48000000000000000000) exceeds"));
  diags.clear();
  config::Mapping g = Map(4, "mn_2d");
  g.set_grid_rows(3);
  ValidateMapping(g, chip, SmallModel(), Work(8, 0, 1), config::SourceMap(), &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "mapping.grid_rows");
  EXPECT_THROW(Lower(chip, SmallModel(), Work(8, 0, 1), g), config::ConfigError);
  // A placement file naming a core outside the stage's region (the 2x2 chip is one region
  // for tp 4, so core 7 is off the chip) and a missing file.
  const std::string path = ::testing::TempDir() + "/tpsim_mapping_bad_placement.txt";
  {
    std::ofstream out(path);
    out << "0 1 2 7\n";
  }
  config::Mapping f = Map(4, "megatron", "ring", "file");
  f.set_placement_file(path);
  diags.clear();
  ValidateMapping(f, chip, SmallModel(), Work(8, 0, 1), config::SourceMap(), &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "mapping.placement_file");
  EXPECT_EQ(diags[0].value, "7");
  EXPECT_EQ(diags[0].rule, "core id (rank 3 of the file) is not on the chip (0 to 3)");
  // Located in the file: line 1, column 7.
  EXPECT_EQ(diags[0].where.file, path);
  EXPECT_EQ(diags[0].where.line, 1);
  EXPECT_EQ(diags[0].where.col, 7);
  f.set_placement_file(path + ".missing");
  diags.clear();
  ValidateMapping(f, chip, SmallModel(), Work(8, 0, 1), config::SourceMap(), &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_NE(diags[0].rule.find("readable"), std::string::npos);
  std::remove(path.c_str());
}

// mn_2d K-steps (mapping.mn_2d_weights = "k_steps") on the 2x2 grid of SmallModel, prefill
// t = 8, bf16, 2 layers: rank (i, j) holds W[k-block i of 2, cols j of 2].

}  // namespace
}  // namespace tpsim::mapping
