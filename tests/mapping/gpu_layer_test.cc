// The layer level on a GPU-node chip (issue 14, item 6): the cost model times a compute task
// as one kernel of the GPU models, the GPU memory plan emits no memory task, and eager mode
// adds the host's launch cost to every kernel. Hand-computed numbers with h100-sxm-8's
// constants (configs/chips/h100-sxm-8.textproto).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "arch/device.h"
#include "arch/gpu/collective.h"
#include "chip.pb.h"
#include "mapping/cost.h"
#include "mapping/mapping.h"
#include "mapping_test_util.h"
#include "tests/arch/test_util.h"

namespace tpsim::mapping {
namespace {

const arch::Chip& H100() {
  static const arch::Chip chip = arch::testing::LoadChip("h100-sxm-8");
  return chip;
}

TEST(GpuLayer, GemmTaskIsOneCoreGemmKernel) {
  // The m = 1 QKV-sized GEMM of the README's `tpsim gemm` table: 22.276 us on h100-sxm-8,
  // weights streamed from HBM and the kernel's fixed cost included: kernel_overhead_us 5 +
  // (8192 + 6144 x 4096 x 2 + 12288) B / (3350 GB/s x 0.87) = 5 + 17.276 us.
  const ComputeShape s{.op_kind = llm::OpKind::kGemm, .batch = 1, .m = 1, .n = 6144, .k = 4096, .bytes = 1};
  const arch::GemmEstimate g = arch::CoreGemm(H100(), {.m = 1, .n = 6144, .k = 4096});
  EXPECT_EQ(ComputeTime(H100(), s), static_cast<Ps>(std::ceil(g.time_us * 1e6)));
  EXPECT_NEAR(static_cast<double>(ComputeTime(H100(), s)) * 1e-6, 22.276, 0.0005);
  // An attention GEMM (batched over heads) is one CoreGemm call with its batch.
  const ComputeShape qk{.op_kind = llm::OpKind::kBatchedGemm, .batch = 4, .m = 1, .n = 512, .k = 128};
  const arch::GemmEstimate a = arch::CoreGemm(H100(), {.m = 1, .n = 512, .k = 128, .batch = 4});
  EXPECT_EQ(ComputeTime(H100(), qk), static_cast<Ps>(std::ceil(a.time_us * 1e6)));
}

TEST(GpuLayer, NormKernelIsMemoryBound) {
  // RMSNorm of one 4096-wide bf16 row: reads and writes 2 x 4096 x 2 = 16384 B.
  // kernel_overhead_us 5 + 16384 B / (3350 GB/s x 0.87 = 2914.5 B/ns) = 5.6215 ns:
  // 5005621.5 ps, rounded up: 5005622 ps. The systolic vector-unit rule is not used.
  const ComputeShape s{
      .op_kind = llm::OpKind::kNorm, .batch = 1, .m = 1, .n = 4096, .vector_ops = 4096 * 4.0, .bytes = 16384};
  EXPECT_EQ(ComputeTime(H100(), s), 5005622);
  EXPECT_EQ(GpuVectorKernelTime(H100(), 16384), 5005622);
}

TEST(GpuLayer, GpuPlanEmitsNoMemoryTasks) {
  const config::Model model = testing::SmallModel();
  const Program p = Lower(H100(), model, testing::Work(16, 2, 2), testing::Map(2, "megatron"));
  EXPECT_EQ(p.weights_location, WeightsLocation::kHbm);
  EXPECT_EQ(p.kv_location, KvLocation::kHbm);
  EXPECT_EQ(p.spilled_bytes, 0u);
  size_t memory = 0, compute = 0;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    memory += p.kind(i) == TaskKind::kMemory;
    compute += p.kind(i) == TaskKind::kCompute;
  }
  EXPECT_EQ(memory, 0u);
  EXPECT_GT(compute, 0u);
  // Even mapping.weights "dram" (a scratchpad setting) leaves a GPU's weights in HBM.
  config::Mapping dram = testing::Map(2, "megatron");
  dram.set_weights("dram");
  const Program q = Lower(H100(), model, testing::Work(16, 0, 1), dram);
  for (size_t i = 0; i < q.num_tasks(); ++i) EXPECT_NE(q.kind(i), TaskKind::kMemory);
}

TEST(GpuLayer, EagerAddsOneLaunchPerKernel) {
  const config::Model model = testing::SmallModel();
  config::Mapping graphs = testing::Map(2, "megatron"), eager = graphs;
  eager.set_enforce_eager(true);
  const Program g = Lower(H100(), model, testing::Work(16, 1, 2), graphs);
  const Program e = Lower(H100(), model, testing::Work(16, 1, 2), eager);
  EXPECT_EQ(g.kernel_launch_ps, 0);
  EXPECT_EQ(e.kernel_launch_ps, 6700000);  // gpu.kernel_launch_us 6.7
  ASSERT_EQ(g.num_tasks(), e.num_tasks());
  // Every kernel but the collectives pays the launch; a collective kernel takes nccl-tests'
  // time per call (host issue included) instead of its device time.
  int64_t kernels = 0, diff = 0, collectives = 0;
  for (size_t i = 0; i < g.num_tasks(); ++i) {
    if (g.kind(i) != TaskKind::kCompute) continue;
    const ComputeShape& s = g.shape(i);
    if (s.op_kind == llm::OpKind::kCollective) {
      ++collectives;
      const arch::gpu::CollEstimate c = arch::gpu::EstimateCollective(
          H100().config().gpu(), 8,
          {.op = arch::gpu::CollOp::kAllReduce, .ranks = static_cast<int>(s.n), .bytes = s.bytes});
      EXPECT_EQ(TaskTime(H100(), e, i), static_cast<Ps>(std::ceil(c.time_us * 1e6)));
      continue;
    }
    ++kernels;
    diff += TaskTime(H100(), e, i) - TaskTime(H100(), g, i);
  }
  EXPECT_GT(kernels, 0);
  EXPECT_GT(collectives, 0);
  EXPECT_EQ(diff, kernels * 6700000);
}

TEST(GpuLayer, FusedQkvAndGateUpAreSingleGemms) {
  // SmallModel: hidden 64, 4 query heads and 2 KV heads of 16, intermediate 128; TP 2 megatron.
  // QKV: n = (4 + 2 + 2) x 16 = 128, 64 columns per rank; gate+up: n = 2 x 128, 128 per rank.
  const Program p =
      Lower(H100(), testing::SmallModel(), testing::Work(16, 0, 1), testing::Map(2, "megatron"));
  int qkv = 0, gate_up = 0;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    const std::string& op = p.ops[p.op(i)].ref.op;
    EXPECT_NE(op, "q_proj");
    EXPECT_NE(op, "k_proj");
    EXPECT_NE(op, "v_proj");
    EXPECT_NE(op, "gate_proj");
    EXPECT_NE(op, "up_proj");
    if (p.kind(i) != TaskKind::kCompute) continue;
    const ComputeShape& s = p.shape(i);
    if (op == "qkv_proj") {
      ++qkv;
      EXPECT_EQ(s.m, 16u);
      EXPECT_EQ(s.n, 64u);
      EXPECT_EQ(s.k, 64u);
    }
    if (op == "gate_up_proj") {
      ++gate_up;
      EXPECT_EQ(s.m, 16u);
      EXPECT_EQ(s.n, 128u);
      EXPECT_EQ(s.k, 64u);
    }
  }
  EXPECT_EQ(qkv, 2);  // one GEMM per rank
  EXPECT_EQ(gate_up, 2);
}

TEST(GpuLayer, CollectiveIsOneNcclKernelPerRank) {
  // o_proj's all-reduce of the [16, 64] bf16 activation over 2 GPUs: 2048 B, one kernel per
  // rank timed by EstimateCollective's device time (CUDA graphs), no transfer task.
  const Program p =
      Lower(H100(), testing::SmallModel(), testing::Work(16, 0, 1), testing::Map(2, "megatron"));
  const arch::gpu::CollEstimate c = arch::gpu::EstimateCollective(
      H100().config().gpu(), 8, {.op = arch::gpu::CollOp::kAllReduce, .ranks = 2, .bytes = 2048});
  int kernels = 0;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    EXPECT_NE(p.kind(i), TaskKind::kTransfer);
    if (p.ops[p.op(i)].ref.op != "o_proj.all_reduce") continue;
    ASSERT_EQ(p.kind(i), TaskKind::kCompute);
    EXPECT_EQ(p.shape(i).op_kind, llm::OpKind::kCollective);
    EXPECT_EQ(p.shape(i).bytes, 2048u);
    EXPECT_EQ(TaskTime(H100(), p, i), static_cast<Ps>(std::ceil(c.gpu_us * 1e6)));
    ++kernels;
  }
  EXPECT_EQ(kernels, 2);
}

// mapping.collective "ring" forces NCCL's ring where NCCL has one, not on the all-to-all that a
// k_split layout entering a second pipeline stage converts with (NCCL runs all-to-all as p2p
// sends and receives). Lowering threw "algorithm ring is not available for all_to_all" (exit 1
// from a mapping `describe` accepted).
TEST(GpuLayer, RingForcedLeavesAllToAllToP2p) {
  const Program p = Lower(H100(), testing::SmallModel(), testing::Work(16, 0, 2),
                          testing::Map(2, "k_split", "ring", "linear", 2));
  int all_to_all = 0, forced_ring = 0;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    if (p.kind(i) != TaskKind::kCompute || p.shape(i).op_kind != llm::OpKind::kCollective) continue;
    const auto kind = static_cast<CollectiveKind>(p.shape(i).m);
    const auto algo = static_cast<arch::gpu::Algo>(p.shape(i).k);
    if (kind == CollectiveKind::kAllToAll) {
      ++all_to_all;
      EXPECT_EQ(algo, arch::gpu::Algo::kAuto) << p.ops[p.op(i)].ref.op;
    } else {
      forced_ring += algo == arch::gpu::Algo::kRing;
    }
  }
  EXPECT_GT(all_to_all, 0);
  EXPECT_GT(forced_ring, 0);
}

TEST(GpuLayer, NonGpuChipsKeepTheSystolicRules) {
  // A chip without a gpu block: the Program has no launch cost and the SRAM plan.
  const arch::Chip wafer = arch::testing::LoadChip("wafer-8x8");
  config::Mapping eager = testing::Map(2, "megatron");
  eager.set_enforce_eager(true);
  const Program p = Lower(wafer, testing::SmallModel(), testing::Work(16, 0, 1), eager);
  EXPECT_EQ(p.kernel_launch_ps, 0);
  EXPECT_EQ(p.weights_location, WeightsLocation::kSram);
}

}  // namespace
}  // namespace tpsim::mapping
