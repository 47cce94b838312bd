// Lowering of mn_2d (grid-row gathers, stage sends, K-steps) and the rotating partitioners
// (double-buffered shards and K-blocks, fallbacks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "configs/load.h"
#include "llm/model.h"
#include "mapping/mapping.h"
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

// mn_2d on a 2x2 grid (rank r = (r / 2, r % 2)), SmallModel (hidden h = 64, 4 heads and
// 2 KV heads of 16, intermediate 128), prefill t = 8 tokens, bf16, 2 layers.
std::vector<int> RankCores(const Program& p, const std::string& op) {  // rank r's core
  std::vector<int> cores;
  for (const testing::TaskView& t : testing::TaskViews(p))
    if (t.kind == TaskKind::kCompute && p.ops[t.op].ref.layer == 0 && p.ops[t.op].ref.op == op)
      cores.push_back(t.core);
  return cores;
}

TEST(LowerTest, Mn2dGathersWithinGridRowsBeforeTheMlpNorm) {
  arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  config::Mapping m = Map(4, "mn_2d");
  m.set_grid_rows(2);
  Program p = Lower(chip, SmallModel(), Work(8, 0, 2), m);
  ExpectWellFormed(p, chip);
  const std::vector<int> cores = RankCores(p, "gate_proj");
  ASSERT_EQ(cores.size(), 4u);
  auto grid_row = [&](int core) {
    return static_cast<int>(std::find(cores.begin(), cores.end(), core) - cores.begin()) / 2;
  };

  // o_proj's output (grid) + the residual (replicated) add in the grid; the MLP norm then
  // needs whole rows: ONE all_gather of 2 groups (grid rows) of 2 ranks, per group a buffer
  // of row block i = (t/2) x h = 4 x 64 x 2 B = 512 B, each rank sending its block
  // (t/2) x (h/2) x 2 B = 4 x 32 x 2 = 256 B to the other rank of its grid row.
  uint32_t o_op = 0, gate_op = 0;
  for (uint32_t i = 0; i < p.ops.size(); ++i) {
    if (p.ops[i].ref.layer != 0) continue;
    if (p.ops[i].ref.op == "o_proj") o_op = i;
    if (p.ops[i].ref.op == "gate_proj") gate_op = i;
  }
  ASSERT_LT(o_op, gate_op);
  std::vector<const CollectiveInfo*> between;
  for (const CollectiveInfo& c : p.collectives)
    if (c.op > o_op && c.op < gate_op) between.push_back(&c);
  ASSERT_EQ(between.size(), 1u);  // no collective over all 4 ranks between o_proj and gate/up
  const CollectiveInfo& ag = *between[0];
  EXPECT_EQ(p.ops[ag.op].ref.op, "mlp_norm.all_gather");
  EXPECT_EQ(ag.kind, CollectiveKind::kAllGather);
  EXPECT_EQ(ag.groups, 2);
  EXPECT_EQ(ag.ranks, 2);
  EXPECT_EQ(ag.bytes, 4u * 64u * 2u);
  EXPECT_EQ(p.ops[ag.op].ref.Label(), "ring (2 grid-row groups of 2 ranks)");
  EXPECT_EQ(FindOp(p, "prefill", 0, "attn_residual")->ref.Label(), "grid(2x2)");
  EXPECT_EQ(FindOp(p, "prefill", 0, "mlp_norm")->ref.Label(), "grid_rows(2x2)");
  int xfers = 0;
  const int32_t coll = static_cast<int32_t>(&ag - p.collectives.data());
  for (const testing::TaskView& t : testing::TaskViews(p)) {
    if (t.kind != TaskKind::kTransfer || t.collective != coll) continue;
    ++xfers;
    EXPECT_EQ(t.bytes, (8u / 2) * (64u / 2) * 2u);
    EXPECT_EQ(t.coll_step, 0);  // both groups' transfers in the same step: concurrent
    EXPECT_EQ(grid_row(t.core), grid_row(t.dst_core)) << t.core << "->" << t.dst_core;
  }
  EXPECT_EQ(xfers, 4);  // 2 groups x 2 ranks x (2 - 1) steps
  EXPECT_NE(
      p.Dump().find("coll=" + std::to_string(coll) + " step=0 groups=2x2 op=prefill.L0.mlp_norm.all_gather"),
      std::string::npos);

  // Bytes moved per layer (the second one: its input is the first's grid output). Ring
  // all_gather over n ranks of a B-byte buffer moves (n - 1) x B per group.
  //   before (every gather over all 4 ranks to replicated, 3 x B each):
  //     attn_norm 8x64x2 = 1024 -> 3072; q 1024 -> 3072; k, v 8x32x2 = 512 -> 1536 each;
  //     o_proj input (heads) 1024 -> 3072; mlp_norm 1024 -> 3072; down input 8x128x2 = 2048
  //     -> 6144; total 3072 + 3072 + 1536 + 1536 + 3072 + 3072 + 6144 = 21504
  //   now (row-group gathers: 2 groups x 1 x per-group buffer):
  //     attn_norm 2 x 512 = 1024; q, k, v, o as before 3072 + 1536 + 1536 + 3072 = 9216;
  //     mlp_norm 2 x 512 = 1024; down input 2 x (4x128x2 = 1024) = 2048; total 13312
  //   the first layer has no attn_norm gather (replicated input): 13312 - 1024 = 12288.
  uint64_t moved[2] = {0, 0};
  int full_group[2] = {0, 0};
  for (const testing::TaskView& t : testing::TaskViews(p))
    if (t.kind == TaskKind::kTransfer) moved[p.ops[t.op].ref.layer] += t.bytes;
  for (const CollectiveInfo& c : p.collectives) full_group[p.ops[c.op].ref.layer] += c.groups == 1;
  EXPECT_EQ(moved[1], 13312u);
  EXPECT_EQ(moved[0], 12288u);
  // Over all 4 ranks only the attention's gathers remain: q, k, v to heads, heads to o_proj.
  EXPECT_EQ(full_group[0], 4);
  EXPECT_EQ(full_group[1], 4);
  EXPECT_NE(FindOp(p, "prefill", 1, "attn_norm.all_gather"), nullptr);
  EXPECT_NE(FindOp(p, "prefill", 1, "down_proj.all_gather"), nullptr);
}

TEST(LowerTest, Mn2dStageSendOfRowsAndColumnGather) {
  arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  // Pipeline: the first stage's grid output is gathered within grid rows only (grid_rows
  // covers the row split the send needs: rank (i, j) keeps rows 2(2i + j), +1 of the 4 it
  // holds) and sent as rows, 4 transfers of (t/4) x h x 2 B = 2 x 64 x 2 = 256 B. The second
  // stage norms its 2 rows per rank and gathers within grid rows for q/k/v (row split ->
  // grid_rows: each rank's rows are chunk j of its grid row's block).
  config::Mapping m = Map(4, "mn_2d", "ring", "linear", 2);
  m.set_grid_rows(2);
  Program p = Lower(chip, SmallModel(), Work(8, 0, 2), m);
  ExpectWellFormed(p, chip);
  EXPECT_EQ(FindOp(p, "prefill", 0, "stage_send")->ref.Label(), "split(rows)");
  ASSERT_NE(FindOp(p, "prefill", 0, "stage_send.all_gather"), nullptr);
  EXPECT_EQ(FindOp(p, "prefill", 0, "stage_send.all_gather")->ref.Label(),
            "ring (2 grid-row groups of 2 ranks)");
  int sends = 0;
  for (const testing::TaskView& t : testing::TaskViews(p))
    if (p.ops[t.op].ref.op == "stage_send") {
      ++sends;
      EXPECT_EQ(t.bytes, 256u);
    }
  EXPECT_EQ(sends, 4);
  EXPECT_EQ(FindOp(p, "prefill", 1, "attn_norm")->ref.Label(), "split(rows)");
  ASSERT_NE(FindOp(p, "prefill", 1, "q_proj.all_gather"), nullptr);
  EXPECT_EQ(FindOp(p, "prefill", 1, "q_proj.all_gather")->ref.Label(), "ring (2 grid-row groups of 2 ranks)");
  // Every collective of the second stage outside the attention's four is a grid-row one.
  int full = 0, rows = 0;
  for (const CollectiveInfo& c : p.collectives)
    if (p.ops[c.op].ref.layer == 1) (c.groups == 2 && c.ranks == 2 ? rows : full) += 1;
  EXPECT_EQ(full, 4);
  EXPECT_EQ(rows, 5);  // q/k/v input, o_proj output and down output to rows, gate/up input, down input

  // grid_rows -> replicated: o_proj megatron (partial -> all-reduced, replicated) added to the
  // grid_rows residual stays grid_rows; down_proj n_split then wants replicated, so the MLP
  // norm's grid_rows output is gathered within grid columns: 2 groups of 2 ranks, the whole
  // 8 x 64 x 2 = 1024 B tensor per group, each rank sending its row block 4 x 64 x 2 = 512 B.
  config::Mapping mix = Map(4, "mn_2d");
  mix.set_grid_rows(2);
  for (const auto& [op, part] :
       std::vector<std::pair<std::string, std::string>>{{"o", "megatron"}, {"gate_up", "megatron"}}) {
    auto* o = mix.add_overrides();
    o->set_op(op);
    o->set_partition(part);
  }
  Program q = Lower(chip, SmallModel(), Work(8, 0, 2), mix);
  ExpectWellFormed(q, chip);
  EXPECT_EQ(FindOp(q, "prefill", 1, "attn_norm")->ref.Label(), "grid_rows(2x2)");
  EXPECT_EQ(FindOp(q, "prefill", 1, "attn_residual")->ref.Label(), "grid_rows(2x2)");
  EXPECT_EQ(FindOp(q, "prefill", 1, "mlp_norm")->ref.Label(), "grid_rows(2x2)");
  const OpInfo* cg = FindOp(q, "prefill", 1, "gate_proj.all_gather");
  ASSERT_NE(cg, nullptr);
  EXPECT_EQ(cg->ref.Label(), "ring (2 grid-column groups of 2 ranks)");
  const std::vector<int> cores = RankCores(q, "q_proj");
  ASSERT_EQ(cores.size(), 4u);
  auto grid_col = [&](int core) {
    return static_cast<int>(std::find(cores.begin(), cores.end(), core) - cores.begin()) % 2;
  };
  int xfers = 0;
  for (const testing::TaskView& t : testing::TaskViews(q))
    if (t.kind == TaskKind::kTransfer && &q.ops[t.op] == cg) {
      ++xfers;
      EXPECT_EQ(t.bytes, 512u);
      EXPECT_EQ(grid_col(t.core), grid_col(t.dst_core));
      EXPECT_EQ(q.collectives[t.collective].groups, 2);
      EXPECT_EQ(q.collectives[t.collective].bytes, 1024u);
    }
  EXPECT_EQ(xfers, 4);
}

TEST(LowerTest, Mn2dKStepsRotatesKBlocksWithinGridColumns) {
  arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  config::Mapping m = Map(4, "mn_2d");
  m.set_grid_rows(2);
  m.set_mn_2d_weights("k_steps");
  Program p = Lower(chip, SmallModel(), Work(8, 0, 2), m);
  ExpectWellFormed(p, chip);
  const std::vector<int> cores = RankCores(p, "attn_norm");  // rank r's core (replicated norm: 4 tasks)
  ASSERT_EQ(cores.size(), 4u);
  auto rank = [&](int core) {
    return static_cast<int>(std::find(cores.begin(), cores.end(), core) - cores.begin());
  };
  // Per GEMM (k x n): one rotate collective of gc = 2 groups (grid columns) of gr = 2 ranks,
  // per group a buffer W[:, cols j] of k x n/2 x 2 B; each rank receives gr - 1 = 1 block
  // of (k/2) x (n/2) x 2 B from the other rank of its grid column, and computes twice with
  // k/2 (its own block, then the arriving one), rows t/2 = 4, columns n/2.
  struct G {
    const char* op;
    uint64_t k, n;
  };
  const G gemms[] = {{"q_proj", 64, 64},     {"k_proj", 64, 32},   {"v_proj", 64, 32},    {"o_proj", 64, 64},
                     {"gate_proj", 64, 128}, {"up_proj", 64, 128}, {"down_proj", 128, 64}};
  const std::string dump = p.Dump();
  for (const G& g : gemms) {
    SCOPED_TRACE(g.op);
    const OpInfo* op = FindOp(p, "prefill", 0, g.op);
    ASSERT_NE(op, nullptr);
    EXPECT_EQ(op->ref.Label(), "mn_2d(2x2, k_steps)");
    const uint32_t op_id = static_cast<uint32_t>(op - p.ops.data());
    int32_t coll = -1;
    for (size_t c = 0; c < p.collectives.size(); ++c)
      if (p.collectives[c].op == op_id) coll = static_cast<int32_t>(c);
    ASSERT_GE(coll, 0);
    EXPECT_EQ(p.collectives[coll].kind, CollectiveKind::kRotate);
    EXPECT_EQ(p.collectives[coll].groups, 2);
    EXPECT_EQ(p.collectives[coll].ranks, 2);
    EXPECT_EQ(p.collectives[coll].bytes, g.k * (g.n / 2) * 2);
    std::vector<int> received(4, 0), computes(4, 0);
    for (const testing::TaskView& t : testing::TaskViews(p)) {
      if (t.op != op_id) continue;
      if (t.kind == TaskKind::kTransfer) {
        EXPECT_EQ(t.collective, coll);
        EXPECT_EQ(t.bytes, (g.k / 2) * (g.n / 2) * 2);
        EXPECT_EQ(rank(t.core) % 2, rank(t.dst_core) % 2);  // within a grid column
        EXPECT_NE(rank(t.core) / 2, rank(t.dst_core) / 2);
        ++received[rank(t.dst_core)];
      }
      if (t.kind == TaskKind::kCompute) {
        EXPECT_EQ(t.m, 4u);
        EXPECT_EQ(t.k, g.k / 2);
        EXPECT_EQ(t.n, g.n / 2);
        ++computes[rank(t.core)];
      }
    }
    EXPECT_EQ(received, std::vector<int>(4, 1));
    EXPECT_EQ(computes, std::vector<int>(4, 2));
    EXPECT_NE(dump.find("coll=" + std::to_string(coll) + " step=0 groups=2x2 op=prefill.L0." + g.op + " "),
              std::string::npos);
  }
  // Weights per core: one layer holds q 64x64 + k 64x32 + v 64x32 + o 64x64 + gate 64x128 +
  // up 64x128 + down 128x64 = 4096 + 2048 + 2048 + 4096 + 8192 + 8192 + 8192 = 36864
  // elements = 73728 B; 2 layers 147456 B. k_steps: a quarter, 36864 B per core; replicated
  // mn_2d: k x n/2, half, 73728 B.
  EXPECT_EQ(PlanWeights(chip, SmallModel(), m, 2, "bf16").weight_bytes_per_core, 147456u / 4);
  config::Mapping plain = m;
  plain.set_mn_2d_weights("replicated");
  EXPECT_EQ(PlanWeights(chip, SmallModel(), plain, 2, "bf16").weight_bytes_per_core, 147456u / 2);
  plain.clear_mn_2d_weights();
  EXPECT_EQ(PlanWeights(chip, SmallModel(), plain, 2, "bf16").weight_bytes_per_core, 147456u / 2);
  config::Mapping replicated = plain;
  replicated.set_mn_2d_weights("replicated");
  EXPECT_TRUE(Lower(chip, SmallModel(), Work(8, 0, 2), plain).Dump() ==
              Lower(chip, SmallModel(), Work(8, 0, 2), replicated).Dump());

  // Streamed weights: each rank reads only its own block (k/2 x n/2 x 2 B) per GEMM, then
  // rotates it.
  m.set_weights("dram");
  Program d = Lower(chip, SmallModel(), Work(8, 0, 2), m);
  ExpectWellFormed(d, chip);
  EXPECT_EQ(d.weights_location, WeightsLocation::kDramStreamed);
  const OpInfo* gate = FindOp(d, "prefill", 0, "gate_proj");
  ASSERT_NE(gate, nullptr);
  int reads = 0;
  for (const testing::TaskView& t : testing::TaskViews(d))
    if (&d.ops[t.op] == gate && t.kind == TaskKind::kMemory && !t.write) {
      ++reads;
      EXPECT_EQ(t.bytes, 32u * 64u * 2u);
    }
  EXPECT_EQ(reads, 4);
}

// One rotating GEMM op's tasks per core, in order: its computes, the transfers each core
// sends and those it receives.
struct RotationTasks {
  std::vector<testing::TaskView> tasks;
  std::map<int, std::vector<const testing::TaskView*>> computes, sends, arrivals;
};
RotationTasks RotationOf(const Program& p, const OpInfo* op) {
  RotationTasks r;
  r.tasks = testing::TaskViews(p);
  for (const testing::TaskView& t : r.tasks) {
    if (&p.ops[t.op] != op) continue;
    if (t.kind == TaskKind::kCompute) r.computes[t.core].push_back(&t);
    if (t.kind == TaskKind::kTransfer) {
      r.sends[t.core].push_back(&t);
      r.arrivals[t.dst_core].push_back(&t);
    }
  }
  return r;
}
bool HasDep(const testing::TaskView* t, const testing::TaskView* dep) {
  return std::find(t->deps.begin(), t->deps.end(), dep->id) != t->deps.end();
}

// Two blocks in SRAM per rank: the block arriving at step s >= 1 overwrites the one that
// arrived at step s - 2 (the rank's own for s = 1), so the transfer into rank d waits for d's
// compute on that block and for d's send of it (step s - 1), besides the block it forwards
// (its source's arrival of step s - 1). Every core receives `steps` blocks of `bytes` and
// computes on its own block and each arrival. Returns the (core, step >= 1) pairs checked.
int ExpectTwoBlockBuffers(const RotationTasks& r, size_t steps, uint64_t bytes) {
  int checked = 0;
  for (const auto& [core, in] : r.arrivals) {
    const std::vector<const testing::TaskView*>& c = r.computes.at(core);
    EXPECT_EQ(in.size(), steps) << core;
    EXPECT_EQ(c.size(), steps + 1) << core;
    if (in.size() != steps || c.size() != steps + 1) continue;
    for (size_t s = 0; s < steps; ++s) {
      EXPECT_EQ(in[s]->coll_step, s);
      EXPECT_EQ(in[s]->bytes, bytes);
      EXPECT_TRUE(HasDep(c[s + 1], in[s]));
      if (s == 0) continue;
      EXPECT_TRUE(HasDep(in[s], c[s - 1])) << core << " step " << s;
      EXPECT_TRUE(HasDep(in[s], r.sends.at(core)[s - 1])) << core << " step " << s;
      EXPECT_TRUE(HasDep(in[s], r.arrivals.at(in[s]->core)[s - 1])) << core << " step " << s;
      ++checked;
    }
  }
  return checked;
}

TEST(LowerTest, Mn2dKStepsDoubleBuffersTheKBlocks) {
  // tp 8 as 4 x 2: gr - 1 = 3 rotate steps per GEMM, blocks of (k / 4) x (n / 2) x 2 B.
  arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  config::Mapping m = Map(8, "mn_2d");
  m.set_grid_rows(4);
  m.set_mn_2d_weights("k_steps");
  Program p = Lower(chip, SmallModel(), Work(8, 0, 1), m);
  ExpectWellFormed(p, chip);
  const OpInfo* gate = FindOp(p, "prefill", 0, "gate_proj");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->ref.Label(), "mn_2d(4x2, k_steps)");
  const RotationTasks r = RotationOf(p, gate);
  ASSERT_EQ(r.computes.size(), 8u);
  EXPECT_EQ(ExpectTwoBlockBuffers(r, 3, 16u * 64u * 2u), 8 * 2);
  for (const auto& [core, c] : r.computes)
    for (size_t a = 0; a < c.size(); ++a) {
      EXPECT_EQ(c[a]->k, 16u);  // k = 64 / 4 per block
      if (a > 0) {
        EXPECT_TRUE(HasDep(c[a], c[a - 1])) << core;  // it accumulates after the last
      }
    }
}

TEST(LowerTest, MSplitRotateDoubleBuffersTheShards) {
  // tp 4, m_split_rotate on a one-way ring: 3 rotate steps per GEMM; a shard is n / 4 = 32
  // columns of k = 64, 2 B each; each core computes its 2 rows on its own shard and 3 others.
  arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  config::Mapping m = Map(4, "m_split_rotate");
  m.set_collective("ring");
  Program p = Lower(chip, SmallModel(), Work(8, 0, 1), m);
  ExpectWellFormed(p, chip);
  const OpInfo* gate = FindOp(p, "prefill", 0, "gate_proj");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->ref.Label(), "m_split_rotate");
  const RotationTasks r = RotationOf(p, gate);
  ASSERT_EQ(r.computes.size(), 4u);
  EXPECT_EQ(ExpectTwoBlockBuffers(r, 3, 32u * 64u * 2u), 4 * 2);
}

TEST(LowerTest, Mn2dKStepsFallsBackWithoutEqualKBlocks) {
  arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  // tp 8 as 8 x 1: q/k/v/gate/up have k = hidden. hidden 6 < 8 and hidden 12 (not a multiple
  // of 8) cannot form 8 equal K-blocks: those GEMMs run as replicated mn_2d and say why;
  // o_proj (k = 2 heads x 4 = 8) and down_proj (k = intermediate 16) rotate blocks of 1 and 2.
  for (uint32_t hidden : {6u, 12u}) {
    config::Model model = SmallModel();
    model.set_hidden_size(hidden);
    model.set_num_attention_heads(2);
    model.set_num_key_value_heads(2);
    model.set_head_dim(4);
    model.set_intermediate_size(16);
    config::Mapping m = Map(8, "mn_2d");
    m.set_grid_rows(8);
    m.set_mn_2d_weights("k_steps");
    SCOPED_TRACE(hidden);
    Program p = Lower(chip, model, Work(8, 0, 1), m);
    ExpectWellFormed(p, chip);
    EXPECT_EQ(FindOp(p, "prefill", 0, "q_proj")->ref.Label(),
              hidden == 6 ? "mn_2d(k_steps)->mn_2d (k=6 < grid_rows=8)"
                          : "mn_2d(k_steps)->mn_2d (k=12 not divisible by grid_rows=8)");
    EXPECT_EQ(FindOp(p, "prefill", 0, "o_proj")->ref.Label(), "mn_2d(8x1, k_steps)");
    EXPECT_EQ(FindOp(p, "prefill", 0, "down_proj")->ref.Label(), "mn_2d(8x1, k_steps)");
    int rotates = 0;
    for (const CollectiveInfo& c : p.collectives) rotates += c.kind == CollectiveKind::kRotate;
    EXPECT_EQ(rotates, 2);
  }
  // grid_rows 1: every rank already holds 1/P (k x n/4), nothing to rotate: plain mn_2d.
  config::Mapping flat = Map(4, "mn_2d");
  flat.set_grid_rows(1);
  flat.set_mn_2d_weights("k_steps");
  Program f = Lower(chip, SmallModel(), Work(8, 0, 1), flat);
  EXPECT_EQ(FindOp(f, "prefill", 0, "q_proj")->ref.Label(), "mn_2d(1x4)");
  EXPECT_EQ(FindOp(f, "prefill", 0, "k_proj")->ref.Label(),
            "mn_2d->n_split (N units=2 not divisible by grid_cols=4)");
  flat.clear_mn_2d_weights();
  EXPECT_TRUE(f.Dump() == Lower(chip, SmallModel(), Work(8, 0, 1), flat).Dump());
}

TEST(LowerTest, Mn2dWeightsValueIsValidated) {
  arch::Chip chip = arch::Chip::Build(MeshChip(2, 2, uint64_t{1} << 30));
  config::Mapping m = Map(4, "mn_2d");
  m.set_mn_2d_weights("summa");
  std::vector<config::Diag> diags;
  ValidateMapping(m, chip, SmallModel(), Work(8, 0, 1), config::SourceMap(), &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "mapping.mn_2d_weights");
  EXPECT_EQ(diags[0].value, "summa");
  EXPECT_EQ(diags[0].rule, "must be replicated or k_steps");
  EXPECT_THROW(Lower(chip, SmallModel(), Work(8, 0, 1), m), config::ConfigError);
  for (const char* ok : {"", "replicated", "k_steps"}) {
    m.set_mn_2d_weights(ok);
    diags.clear();
    ValidateMapping(m, chip, SmallModel(), Work(8, 0, 1), config::SourceMap(), &diags);
    EXPECT_TRUE(diags.empty()) << ok;
  }
}

}  // namespace
}  // namespace tpsim::mapping
