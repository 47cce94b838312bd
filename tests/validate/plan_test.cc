// Launch plans of a Qwen3-4B layer (prefill, S = 128, batch 1) on h200-sxm-8 at TP 1, 2, 4, 8
// with Megatron pairing, checked against the Program and against shapes computed by hand.
// Qwen3-4B: hidden 2560, 32 query heads, 8 KV heads, head_dim 128, intermediate 9728.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "arch/chip.h"
#include "configs/load.h"
#include "llm/model.h"
#include "mapping/mapping.h"
#include "validate/lowering.h"

namespace tpsim::validate {
namespace {

struct Lowered {
  mapping::Program prog;
  LaunchPlan plan;
};

Lowered LowerQwen(int tp, uint32_t decode_steps = 0, const std::string& collective = "ring",
                  uint32_t seq_len = 128, const std::string& partition = "megatron", int grid_rows = 0) {
  const std::string dir = std::string(TPSIM_SOURCE_DIR) + "/configs/";
  config::Chip cfg;
  config::ParseFile(dir + "chips/h200-sxm-8.textproto", &cfg, nullptr);
  arch::Chip chip = arch::Chip::Build(cfg);
  config::SourceMap locs;
  config::Model model = llm::LoadModelFile(dir + "models/qwen3-4b.json", &locs);
  config::Workload wl;
  wl.set_batch(1);
  wl.set_seq_len(seq_len);
  wl.set_num_layers(1);
  wl.set_decode_steps(decode_steps);
  wl.set_dtype("bf16");
  config::Mapping m;
  m.set_tp(tp);
  m.set_partition(partition);
  m.set_grid_rows(grid_rows);
  m.set_placement("linear");
  m.set_collective(collective);
  Lowered l;
  l.prog = mapping::Lower(chip, model, wl, m, {.functional = true});
  l.plan = PlanLaunches(l.prog, 2);
  return l;
}

const Launch* Find(const GpuPlan& g, const std::string& op, LaunchKind kind) {
  for (const auto& o : g.ops)
    if (o.ref.op == op)
      for (const auto& l : o.launches)
        if (l.kind == kind) return &l;
  return nullptr;
}

class PlanTp : public ::testing::TestWithParam<int> {};

TEST_P(PlanTp, KernelsMatchProgramTasksPerGpu) {
  const int tp = GetParam();
  Lowered l = LowerQwen(tp);
  ASSERT_EQ(l.plan.gpus.size(), static_cast<size_t>(tp));
  std::map<int, size_t> compute;
  for (const auto& t : l.prog.tasks()) compute[t.core] += t.kind == mapping::TaskKind::kCompute;
  for (const GpuPlan& g : l.plan.gpus) {
    EXPECT_EQ(g.NumKernels(), compute[g.gpu]) << "GPU " << g.gpu;
    for (const OpPlan& o : g.ops)
      for (const Launch& ln : o.launches) {
        const mapping::Task& t = l.prog.task(ln.task);
        EXPECT_EQ(t.op, o.op);
        if (IsCollective(ln.kind)) continue;
        EXPECT_EQ(t.core, g.gpu);
        if (ln.kind == LaunchKind::kGemm || ln.kind == LaunchKind::kBatchedGemm) {
          EXPECT_EQ(ln.m, t.m);
          EXPECT_EQ(ln.n, t.n);
          EXPECT_EQ(ln.k, t.k);
          EXPECT_EQ(ln.batch, t.batch);
        } else {
          EXPECT_EQ(ln.Elements(), t.m * t.n);
        }
      }
  }
}

TEST_P(PlanTp, ShapesByHand) {
  const int tp = GetParam();
  Lowered l = LowerQwen(tp);
  for (const GpuPlan& g : l.plan.gpus) {
    const Launch* q = Find(g, "q_proj", LaunchKind::kGemm);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->m, 128u);
    EXPECT_EQ(q->n, 32u * 128 / tp);  // column-parallel: heads split
    EXPECT_EQ(q->k, 2560u);
    const Launch* o = Find(g, "o_proj", LaunchKind::kGemm);
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->n, 2560u);
    EXPECT_EQ(o->k, 32u * 128 / tp);  // row-parallel
    const Launch* down = Find(g, "down_proj", LaunchKind::kGemm);
    ASSERT_NE(down, nullptr);
    EXPECT_EQ(down->k, 9728u / tp);
    const Launch* qk = Find(g, "attn_qk", LaunchKind::kBatchedGemm);
    ASSERT_NE(qk, nullptr);
    EXPECT_EQ(qk->batch, 32u / tp);  // heads per GPU x batch 1
    EXPECT_EQ(qk->m, 128u);          // S
    EXPECT_EQ(qk->n, 128u);          // cached 0 + S
    EXPECT_EQ(qk->k, 128u);          // head_dim
    const Launch* sm = Find(g, "softmax", LaunchKind::kSoftmax);
    ASSERT_NE(sm, nullptr);
    EXPECT_EQ(sm->Elements(), 32u / tp * 128 * 128);
  }
}

TEST_P(PlanTp, OneNcclCallPerCollectivePerRankWithProgramBytes) {
  const int tp = GetParam();
  Lowered l = LowerQwen(tp);
  std::map<int32_t, int> calls;
  size_t nccl = 0;
  for (const GpuPlan& g : l.plan.gpus) {
    std::map<int32_t, int> mine;
    for (const OpPlan& o : g.ops)
      for (const Launch& ln : o.launches) {
        if (!IsCollective(ln.kind)) continue;
        ++nccl;
        ASSERT_GE(ln.collective, 0);
        const mapping::CollectiveInfo& ci = l.prog.collectives[ln.collective];
        EXPECT_EQ(ln.bytes, ci.bytes);
        EXPECT_EQ(ln.nranks, tp);
        EXPECT_STREQ(ToString(ln.kind), mapping::ToString(ci.kind));
        ++mine[ln.collective];
        ++calls[ln.collective];
      }
    for (const auto& [c, n] : mine) EXPECT_EQ(n, 1) << "collective " << c << " on GPU " << g.gpu;
  }
  EXPECT_EQ(calls.size(), l.prog.collectives.size());
  for (const auto& [c, n] : calls) EXPECT_EQ(n, tp);
  if (tp == 1) {
    EXPECT_EQ(nccl, 0u);
  } else {
    // Megatron: one all-reduce after o_proj and one after down_proj, each of the full
    // activation [128, 2560] in bf16 = 128 * 2560 * 2 = 655360 bytes.
    ASSERT_EQ(l.prog.collectives.size(), 2u);
    for (const auto& ci : l.prog.collectives) {
      EXPECT_EQ(ci.kind, mapping::CollectiveKind::kAllReduce);
      EXPECT_EQ(ci.bytes, 655360u);
    }
    const Launch* ar = Find(l.plan.gpus[0], "o_proj.all_reduce", LaunchKind::kAllReduce);
    ASSERT_NE(ar, nullptr);
    EXPECT_EQ(ar->count, 327680u);  // 655360 / 2
  }
}

INSTANTIATE_TEST_SUITE_P(Qwen3_4B, PlanTp, ::testing::Values(1, 2, 4, 8));

TEST(Plan, DumpNamesGpusKernelsAndCollectives) {
  Lowered l = LowerQwen(2);
  std::string d = l.plan.Dump(l.prog);
  EXPECT_NE(d.find("GPU 0:"), std::string::npos);
  EXPECT_NE(d.find("GPU 1:"), std::string::npos);
  EXPECT_NE(d.find("cublasGemmEx" + std::string(28 - 12 + 1, ' ') + "m=128 n=2048 k=2560 bf16->fp32"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("ncclAllReduce" + std::string(28 - 13 + 1, ' ') + "bytes=655360 count=327680 ranks=2"),
            std::string::npos)
      << d;
}

TEST(Plan, NvlsAllReduceIsOneNcclAllReducePerRank) {
  // S = 256: each block all-reduce carries 256 * 2560 * 2 = 1,310,720 B >= 1 MiB
  // (h200-sxm-8's in_switch_min_bytes), so auto picks nvls at TP 8; NCCL still gets
  // one ncclAllReduce of the whole buffer per GPU (it picks NVLS itself).
  Lowered l = LowerQwen(8, 0, "auto", 256);
  ASSERT_EQ(l.prog.collectives.size(), 2u);
  for (const auto& ci : l.prog.collectives) EXPECT_EQ(mapping::ToString(ci.algorithm), "nvls");
  for (const GpuPlan& g : l.plan.gpus) {
    ASSERT_EQ(g.NumCollectives(), 2u) << "GPU " << g.gpu;
    for (const OpPlan& o : g.ops)
      for (const Launch& ln : o.launches) {
        if (!IsCollective(ln.kind)) continue;
        EXPECT_EQ(ln.kind, LaunchKind::kAllReduce);
        EXPECT_EQ(ln.bytes, 1310720u);
        EXPECT_EQ(ln.count, 655360u);
        EXPECT_EQ(ln.nranks, 8);
      }
  }
  EXPECT_NE(l.plan.Dump(l.prog).find("ranks=8 (collective 0, nvls)"), std::string::npos)
      << l.plan.Dump(l.prog);
  // S = 128 (655,360 B < 1 MiB): ring, still one ncclAllReduce.
  Lowered small = LowerQwen(8, 0, "auto", 128);
  for (const auto& ci : small.prog.collectives) EXPECT_EQ(mapping::ToString(ci.algorithm), "ring");
  EXPECT_EQ(small.plan.gpus[0].NumCollectives(), 2u);
}

TEST(Plan, Mn2dRowGroupGatherIsOneNcclAllGatherPerGridRow) {
  // mn_2d at TP 4 on a 2x2 grid (GPUs 0, 1 = grid row 0; 2, 3 = grid row 1): the gather before
  // the MLP norm is one Program collective of 2 groups of 2 ranks; each GPU calls
  // ncclAllGather among its grid row only, on the group's buffer: row block 64 x 2560 x 2 B =
  // 327,680 B, sendcount 327,680 / 2 ranks / 2 B = 81,920.
  Lowered l = LowerQwen(4, 0, "ring", 128, "mn_2d", 2);
  int32_t coll = -1;
  for (size_t c = 0; c < l.prog.collectives.size(); ++c)
    if (l.prog.ops[l.prog.collectives[c].op].ref.op == "mlp_norm.all_gather") coll = static_cast<int32_t>(c);
  ASSERT_GE(coll, 0);
  EXPECT_EQ(l.prog.collectives[coll].groups, 2);
  EXPECT_TRUE(l.plan.notes.empty());
  for (const GpuPlan& g : l.plan.gpus) {
    const Launch* ag = Find(g, "mlp_norm.all_gather", LaunchKind::kAllGather);
    ASSERT_NE(ag, nullptr) << "GPU " << g.gpu;
    EXPECT_EQ(ag->nranks, 2);
    EXPECT_EQ(ag->bytes, 327680u);
    EXPECT_EQ(ag->count, 81920u);
    EXPECT_EQ(ag->coll_group, g.gpu / 2);
  }
  // Collectives over the whole group (the attention's gathers) stay one call among 4 GPUs.
  const Launch* q = Find(l.plan.gpus[3], "q_proj.all_gather", LaunchKind::kAllGather);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->nranks, 4);
  EXPECT_EQ(q->coll_group, -1);
  EXPECT_NE(l.plan.Dump(l.prog).find("bytes=327680 count=81920 ranks=2 (collective " + std::to_string(coll) +
                                     ", ring) group 1"),
            std::string::npos);
}

TEST(Plan, DecodeStepsKeepOneCallPerCollective) {
  Lowered l = LowerQwen(4, 2);
  size_t nccl = 0;
  for (const GpuPlan& g : l.plan.gpus) nccl += g.NumCollectives();
  EXPECT_EQ(nccl, l.prog.collectives.size() * 4);
}

TEST(Plan, BadDtypeIsAnErrorNotACrash) {
  // Bad op or collective indices cannot reach PlanLaunches: the builder verifies every
  // Program (mapping::Verify).
  EXPECT_THROW(PlanLaunches(mapping::Program{}, 0), std::invalid_argument);
}

// An MoE layer on h200-sxm-8 (issue 17): hidden 64, 8 experts of intermediate 32, top-2,
// balanced routing, 16 prefill tokens over attention TP 8 (GPU g holds tokens 2g, 2g + 1). 32
// assignments: 4 per expert, and ExpertTokens (from each expert's phase, 0, 10, 4, 14, 8, 2, 12,
// 6) gives tokens 0, 1, 2, 3 mod 4 experts {3, 6}, {1, 4}, {2, 7} and {0, 5}: an even GPU's two
// tokens go to experts 3, 6, 1, 4, an odd GPU's to 2, 7, 0, 5, one row each.
Lowered LowerMoe(int ep, int etp, int tp = 8, int dp = 1) {
  const std::string dir = std::string(TPSIM_SOURCE_DIR) + "/configs/";
  config::Chip cfg;
  config::ParseFile(dir + "chips/h200-sxm-8.textproto", &cfg, nullptr);
  arch::Chip chip = arch::Chip::Build(cfg);
  config::Model model;
  model.set_name("small-moe");
  model.set_architecture("qwen3_moe");
  model.set_hidden_size(64);
  model.set_num_layers(1);
  model.set_num_attention_heads(8);
  model.set_num_key_value_heads(8);
  model.set_head_dim(8);
  model.set_intermediate_size(128);
  model.set_vocab_size(256);
  model.set_max_position_embeddings(1024);
  model.set_num_experts(8);
  model.set_num_experts_per_token(2);
  model.set_moe_intermediate_size(32);
  model.set_norm_topk_prob(true);
  config::Workload wl;
  wl.set_batch(static_cast<uint32_t>(dp));
  wl.set_seq_len(16 / dp);
  wl.set_num_layers(1);
  wl.set_dtype("bf16");
  config::Mapping m;
  m.set_tp(tp);
  m.set_attention_dp(dp);
  m.set_partition("megatron");
  m.set_placement("linear");
  m.mutable_moe()->set_ep(ep);
  m.mutable_moe()->set_tp(etp);
  Lowered l;
  l.prog = mapping::Lower(chip, model, wl, m, {.functional = true});
  l.plan = PlanLaunches(l.prog, 2);
  return l;
}

TEST(Plan, MoeExpertsAreGroupedGemmsAndAllToAllsExactSendRecvs) {
  for (auto [ep, etp] : {std::pair{8, 1}, {4, 2}}) {
    SCOPED_TRACE("ep " + std::to_string(ep) + " x moe tp " + std::to_string(etp));
    const Lowered l = LowerMoe(ep, etp);
    ASSERT_EQ(l.plan.gpus.size(), 8u);
    const uint64_t im = 32 / etp, per_slot = 8 / ep;  // Im per rank, experts per GPU
    for (const GpuPlan& g : l.plan.gpus) {
      // Experts: every expert of the GPU's slot got 4 rows. gate+up: one grouped GEMM of a
      // gate and an up problem per expert, [4, 64] x [64, Im / tp]; down: [4, Im / tp] x
      // [Im / tp, 64] per expert (one expert: a plain cublasGemmEx).
      const Launch* gu = Find(g, "experts", LaunchKind::kGroupedGemm);
      ASSERT_NE(gu, nullptr) << g.gpu;
      EXPECT_EQ(gu->groups, std::vector<GemmShape>(2 * per_slot, GemmShape{4, im, 64}));
      EXPECT_EQ(gu->batch, 2 * per_slot);
      int downs = 0;
      for (const auto& o : g.ops)
        if (o.ref.op == "experts")
          for (const Launch& ln : o.launches) {
            if (ln.kind == LaunchKind::kGemm) {
              EXPECT_EQ(per_slot, 1u);
              EXPECT_EQ(ln.m, 4u);
              EXPECT_EQ(ln.n, 64u);
              EXPECT_EQ(ln.k, im);
              ++downs;
            }
            if (ln.kind == LaunchKind::kGroupedGemm && ln.groups[0].n == 64) {
              EXPECT_EQ(ln.groups, std::vector<GemmShape>(per_slot, GemmShape{4, 64, im}));
              ++downs;
            }
          }
      EXPECT_EQ(downs, 1) << g.gpu;
      // Dispatch, one row (64 elements) per expert a GPU's tokens take. EP 8 (expert e on GPU
      // e): an even GPU sends to GPUs 1, 3, 4, 6, an odd one to 0, 2, 5, 7, itself left out
      // (GPUs 0 to 3 send 4 rows, 4 to 7 keep one and send 3); GPU g's expert takes its rows from
      // the even GPUs when g is 1, 3, 4 or 6, else from the odd ones. EP 4 x TP 2 (slot s:
      // experts 2s, 2s + 1 on GPUs 2s, 2s + 1): each slot holds one of a GPU's four experts, so
      // every GPU sends one row to and receives one from every other GPU.
      const Launch* disp = Find(g, "experts.dispatch", LaunchKind::kGroupSendRecv);
      ASSERT_NE(disp, nullptr) << g.gpu;
      const bool even = g.gpu % 2 == 0, from_even = g.gpu == 1 || g.gpu == 3 || g.gpu == 4 || g.gpu == 6;
      std::vector<PeerCount> sends, recvs;
      for (int q = 0; q < 8; ++q) {
        if (q == g.gpu) continue;
        const bool to_q = (q == 1 || q == 3 || q == 4 || q == 6) == even;
        if (ep == 4 || to_q) sends.push_back({q, 64});
        if (ep == 4 || (q % 2 == 0) == from_even) recvs.push_back({q, 64});
      }
      EXPECT_EQ(disp->sends, sends) << g.gpu;
      EXPECT_EQ(disp->recvs, recvs) << g.gpu;
      EXPECT_EQ(disp->bytes, ep == 4 ? 7u * 64 * 2 : (g.gpu < 4 ? 4u : 3u) * 64 * 2);
      EXPECT_EQ(disp->nranks, 8);
      // Combine: the reverse (each rank of a slot returns its partial sums).
      const Launch* comb = Find(g, "experts.combine", LaunchKind::kGroupSendRecv);
      ASSERT_NE(comb, nullptr) << g.gpu;
      EXPECT_EQ(comb->sends, recvs) << g.gpu;
      EXPECT_EQ(comb->recvs, sends) << g.gpu;
    }
    // Each GPU's sends to a peer are that peer's receives from it, and the Program's bytes.
    uint64_t planned = 0, program = 0;
    for (const GpuPlan& g : l.plan.gpus)
      for (const auto& o : g.ops)
        for (const Launch& ln : o.launches) {
          if (ln.kind != LaunchKind::kGroupSendRecv) continue;
          for (const PeerCount& pc : ln.sends) planned += pc.count * 2;
          for (const PeerCount& pc : ln.sends) {
            const Launch* back = Find(l.plan.gpus[pc.peer], o.ref.op, LaunchKind::kGroupSendRecv);
            ASSERT_NE(back, nullptr);
            EXPECT_NE(std::find(back->recvs.begin(), back->recvs.end(), PeerCount{g.gpu, pc.count}),
                      back->recvs.end());
          }
        }
    for (const mapping::Task& t : l.prog.tasks())
      if (t.kind == mapping::TaskKind::kTransfer &&
          l.prog.collectives[t.collective].kind == mapping::CollectiveKind::kAllToAll)
        program += t.bytes;
    EXPECT_EQ(planned, program);
    // Dispatch + combine: EP 8, 4 x 4 + 4 x 3 = 28 rows; EP 4 x TP 2, 8 GPUs x 7 peers.
    EXPECT_EQ(program, ep == 8 ? 2u * 28 * 64 * 2 : 2u * 8 * 7 * 64 * 2);
    const std::string dump = l.plan.Dump(l.prog);
    EXPECT_NE(dump.find("cublasGemmGroupedBatchedEx"), std::string::npos);
    EXPECT_NE(dump.find("ncclSend(64 to GPU 0)"), std::string::npos) << dump;
  }
}

TEST(Plan, AttentionReplicasCollectivesStayInsideTheirReplicas) {
  // Attention TP 2 x 4 replicas (mapping.attention_dp) with EP 8 over the 8 GPUs: attention's
  // collectives are NCCL calls among a replica's 2 GPUs (2k, 2k + 1), the dispatch and the
  // combine among all 8.
  const Lowered l = LowerMoe(8, 1, 2, 4);
  ASSERT_EQ(l.plan.gpus.size(), 8u);
  int inside = 0;
  for (const mapping::CollectiveInfo& c : l.prog.collectives) {
    if (c.kind == mapping::CollectiveKind::kAllToAll) {
      EXPECT_EQ(c.ranks, 8);
      continue;
    }
    ASSERT_EQ(c.members.size(), 2u);
    EXPECT_EQ(c.members[0] / 2, c.members[1] / 2);
    ++inside;
  }
  EXPECT_GT(inside, 0);
  for (const GpuPlan& g : l.plan.gpus) {
    EXPECT_NE(Find(g, "experts.dispatch", LaunchKind::kGroupSendRecv), nullptr) << g.gpu;
    for (const auto& o : g.ops)
      for (const Launch& ln : o.launches)
        if (ln.kind == LaunchKind::kAllReduce || ln.kind == LaunchKind::kReduceScatter ||
            ln.kind == LaunchKind::kAllGather) {
          EXPECT_EQ(ln.nranks, 2) << g.gpu << " " << o.ref.op;
        }
  }
}

TEST(Bandwidth, NcclTestsDefinitions) {
  // 1 GiB in 10 ms: algbw = 1073741824 / 0.01 / 1e9 = 107.3741824 GB/s.
  EXPECT_DOUBLE_EQ(AlgBandwidthGbps(1073741824, 0.01), 107.3741824);
  // all_reduce on 8: x 2*7/8 = 1.75 -> 187.9048192
  EXPECT_DOUBLE_EQ(BusBandwidthGbps("all_reduce", 1073741824, 0.01, 8), 107.3741824 * 1.75);
  // all_gather / reduce_scatter on 8: x 7/8 = 0.875 -> 93.9524096
  EXPECT_DOUBLE_EQ(BusBandwidthGbps("all_gather", 1073741824, 0.01, 8), 107.3741824 * 0.875);
  EXPECT_DOUBLE_EQ(BusBandwidthGbps("reduce_scatter", 1073741824, 0.01, 8), 107.3741824 * 0.875);
  // 2 ranks: all_reduce x 1, all_gather x 0.5
  EXPECT_DOUBLE_EQ(BusFactor("all_reduce", 2), 1.0);
  EXPECT_DOUBLE_EQ(BusFactor("all_gather", 2), 0.5);
  EXPECT_DOUBLE_EQ(BusFactor("p2p", 2), 1.0);
  EXPECT_EQ(AlgBandwidthGbps(100, 0), 0.0);
  EXPECT_EQ(BusFactor("all_reduce", 0), 0.0);
}

}  // namespace
}  // namespace tpsim::validate
