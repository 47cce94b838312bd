// The GPU device models (arch/gpu/): hand-computed GEMM tiles, waves and split-K, memory- and
// latency-bound GEMMs, the NCCL tuner's latencies and choices, one calibrated ring step, and
// the errors for what one node cannot do.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "arch/device.h"
#include "arch/gpu/collective.h"
#include "arch/gpu/gemm.h"
#include "test_util.h"

namespace tpsim::arch {
namespace {

using testing::LoadChip;
using testing::LoadChipConfig;

// A small GPU with round numbers: 4 SMs of 1 TFLOP/s (bf16 peak 4 TFLOP/s, efficiency 1),
// no operand bound, HBM so fast that memory never limits, no fixed overhead.
config::Gpu SmallGpu() {
  config::Gpu g;
  g.set_sms(4);
  g.set_bf16_tflops(4);
  g.set_fp16_tflops(4);
  g.set_tensor_efficiency(1);
  g.set_operand_flops_per_byte(0);
  g.set_kernel_overhead_us(0);
  g.set_hbm_bandwidth_gbps(1e12);
  g.set_hbm_efficiency(1);
  g.set_l2_bytes(1 << 30);
  return g;
}

TEST(GpuGemm, SplitKFillsTheSms) {
  // 256 x 256 x 1024: 256x128 tiles give 2 CTAs for 4 SMs; split-K 2 (K slices of 512, the
  // smallest allowed) gives 4 CTAs, one wave, each 512 k steps of 2 x 256 x 128 flops at
  // 1e12 FLOP/s: 512 x 65536 / 1e12 s = 33.554432 us. Split 3 would cut K below 512.
  GemmShape s{256, 256, 1024};
  GemmEstimate e = gpu::EstimateGemm(SmallGpu(), s);
  EXPECT_EQ(e.tile_m, 256u);
  EXPECT_EQ(e.tile_n, 128u);
  EXPECT_EQ(e.split_k, 2u);
  EXPECT_EQ(e.tiles, 2u);
  EXPECT_DOUBLE_EQ(e.waves, 1.0);
  EXPECT_NEAR(e.time_us, 33.554432, 1e-9);
  EXPECT_EQ(e.bound, Bound::kCompute);
  EXPECT_NEAR(e.tflops, 2.0 * 256 * 256 * 1024 / 33.554432e-6 / 1e12, 1e-9);
}

TEST(GpuGemm, OneTileWaveAndTheLastPartialWave) {
  // 256 x 640 x 256 (no split: K is below 2 x 512). Every tile shape does the same work per
  // SM except for the rounding of the last wave; with tm x tn tiles the time is
  // ceil(ceil(256/tm) ceil(640/tn) / 4) waves x 256 x 2 tm tn / 1e12:
  //   256x128: 5 tiles -> 2 waves x 16.777216 = 33.554432 us
  //   128x64:  20 tiles -> 5 waves x 4.194304 = 20.97152 us (the first of the fastest)
  GemmEstimate e = gpu::EstimateGemm(SmallGpu(), GemmShape{256, 640, 256});
  EXPECT_EQ(e.tile_m, 128u);
  EXPECT_EQ(e.tile_n, 64u);
  EXPECT_EQ(e.split_k, 1u);
  EXPECT_EQ(e.tiles, 20u);
  EXPECT_DOUBLE_EQ(e.waves, 5.0);
  EXPECT_NEAR(e.time_us, 20.97152, 1e-9);
  // One wave of one tile: 64 x 64 x 64 on a 64x64 tile is 64 k steps of 8192 flops.
  GemmEstimate one = gpu::EstimateGemm(SmallGpu(), GemmShape{64, 64, 64});
  EXPECT_EQ(one.tiles, 1u);
  EXPECT_DOUBLE_EQ(one.waves, 0.25);
  EXPECT_NEAR(one.time_us, 64 * 8192 / 1e12 * 1e6, 1e-12);
}

TEST(GpuGemm, OperandFeedPenalisesSmallTiles) {
  // With 16 flops per operand byte a 64x64 bf16 tile (2 x 64 x 64 flops over 2 x 128 bytes =
  // 32 flops/byte) is math-bound, but with 64 it waits for operands: per k step
  // (64 + 64) x 2 x 64 / 1e12 s instead of 8192 / 1e12 s, twice as long.
  config::Gpu g = SmallGpu();
  g.set_operand_flops_per_byte(64);
  GemmEstimate e = gpu::EstimateGemm(g, GemmShape{64, 64, 64});
  EXPECT_NEAR(e.time_us, 64 * (128 * 2 * 64) / 1e12 * 1e6, 1e-12);
}

TEST(GpuGemm, DecodeIsMemoryBoundOnH100) {
  // m = 1, n = k = 4096 bf16 with h100-sxm-8's constants (f = 989.4e12 / 132 x 0.82 FLOP/s per
  // SM, 70 flops per operand byte). Without split-K even a 64x64 tile's k loop is operand-fed:
  // 4096 x (64 + 64) x 2 x 70 / f = 11.94 us, longer than HBM's 11.52 us for the weight. Split 2
  // gives 64 column tiles x 2 = 128 CTAs in one wave, whose k loops (5.97 us at 64x64, 8.96 at
  // 128x64) fit under HBM, so HBM bounds: the 32 MiB weight does not fit half of the 50 MiB L2 but
  // one row of tiles reads every operand once, plus the fp32 partial sums written and read back:
  // 8192 + 33554432 + 8192 + 2 x 4 x 4096 x 2 bytes at hbm_bandwidth_gbps x hbm_efficiency, plus
  // the kernel's fixed overhead (16.541 us). Among the tiles that tie there, 128x64 comes first in
  // the model's order (m = 1 fills one row of any tile).
  const config::Chip cfg = LoadChipConfig("h100-sxm-8");
  const config::Gpu& g = cfg.gpu();
  GemmEstimate e = CoreGemm(LoadChip("h100-sxm-8"), GemmShape{1, 4096, 4096});
  const double bytes = 8192.0 + 33554432 + 8192 + 2 * 4 * 4096 * 2;
  const double expect =
      g.kernel_overhead_us() + bytes / (g.hbm_bandwidth_gbps() * 1e9 * g.hbm_efficiency()) * 1e6;
  EXPECT_NEAR(e.time_us, expect, 1e-9);
  EXPECT_NEAR(e.time_us, 16.5410, 1e-4);
  EXPECT_EQ(e.bound, Bound::kMemory);
  EXPECT_EQ(e.tile_m, 128u);
  EXPECT_EQ(e.tile_n, 64u);
  EXPECT_EQ(e.split_k, 2u);
  EXPECT_DOUBLE_EQ(e.waves, 128.0 / 132);
  // H200 streams the same bytes from faster HBM; the math is the same die's.
  GemmEstimate h200 = CoreGemm(LoadChip("h200-sxm-8"), GemmShape{1, 4096, 4096});
  EXPECT_LT(h200.time_us, e.time_us);
}

TEST(GpuGemm, AWaveNarrowerThanItsBlockReadsBOnce) {
  // h100-sxm-8, 255 x 128 x 65536 bf16: A (33,423,360 B) and B (16,777,216 B) do not fit half of
  // the L2, so operands are re-read per block of the wave. The fastest is 64x64 tiles (4 x 2 =
  // 8 tiles) with split-K 12 (96 CTAs, one wave of w = 8 tiles): the block is r = round(sqrt(8))
  // = 3 rows by c = ceil(8 / 3) = 3 columns, clamped to the grid's 2 columns, so r grows to
  // ceil(8 / 2) = 4 rows and the wave holds every tile: A and B are read once. Bytes: A + B +
  // C (2 x 255 x 128 = 65,280) + fp32 partial sums (2 x 4 x 255 x 128 x 12 = 3,133,440) =
  // 53,399,296 B at hbm_bandwidth_gbps x hbm_efficiency, plus the kernel's fixed overhead
  // (23.322 us). Before, r stayed 3 and B counted twice (ceil(4 / 3)): 28.884 us, slower than
  // 255 x 129 (23.737 us), whose wider grid had no such clamp.
  const config::Chip cfg = LoadChipConfig("h100-sxm-8");
  const config::Gpu& g = cfg.gpu();
  const GemmEstimate e = CoreGemm(LoadChip("h100-sxm-8"), GemmShape{255, 128, 65536});
  EXPECT_EQ(e.tile_m, 64u);
  EXPECT_EQ(e.tile_n, 64u);
  EXPECT_EQ(e.tiles, 8u);
  EXPECT_EQ(e.split_k, 12u);
  EXPECT_EQ(e.bound, Bound::kMemory);
  const double bytes = 33'423'360.0 + 16'777'216 + 65'280 + 3'133'440;
  EXPECT_NEAR(e.time_us,
              g.kernel_overhead_us() + bytes / (g.hbm_bandwidth_gbps() * 1e9 * g.hbm_efficiency()) * 1e6,
              1e-9);
  EXPECT_NEAR(e.time_us, 23.322, 5e-4);
  EXPECT_LE(e.time_us, CoreGemm(LoadChip("h100-sxm-8"), GemmShape{255, 129, 65536}).time_us);
}

TEST(GpuGemm, TinyGemmIsLatencyBound) {
  GemmEstimate e = CoreGemm(LoadChip("h100-sxm-8"), GemmShape{16, 128, 128});
  EXPECT_EQ(e.bound, Bound::kLatency);
  EXPECT_GT(e.overhead_us, std::max(e.compute_us, e.memory_us));
}

TEST(GpuGemm, LargeGemmIsComputeBoundAndFasterOnB200) {
  GemmEstimate h100 = CoreGemm(LoadChip("h100-sxm-8"), GemmShape{8192, 8192, 8192});
  GemmEstimate b200 = CoreGemm(LoadChip("b200-sxm-8"), GemmShape{8192, 8192, 8192});
  EXPECT_EQ(h100.bound, Bound::kCompute);
  EXPECT_EQ(b200.bound, Bound::kCompute);
  // Never above the achievable peak.
  const config::Chip cfg = LoadChipConfig("h100-sxm-8");
  EXPECT_LE(h100.tflops, cfg.gpu().bf16_tflops() * cfg.gpu().tensor_efficiency() + 1e-9);
  EXPECT_LT(b200.time_us, h100.time_us);
  // fp8 has twice the peak and half the operand bytes.
  GemmShape fp8{8192, 8192, 8192, 1, Dtype::kFp8};
  EXPECT_LT(CoreGemm(LoadChip("h100-sxm-8"), fp8).time_us, h100.time_us);
}

TEST(CoreGemm, SystolicCoreAnswersTheSameQuery) {
  Chip chip = LoadChip("wafer-8x8");
  GemmEstimate e = CoreGemm(chip, GemmShape{512, 512, 512});
  const uint64_t bytes = (512ull * 512 * 3) * 2;
  EXPECT_NEAR(e.time_us, chip.GemmTime(1, 512, 512, 512, bytes) * 1e-6, 1e-12);
  const auto& core = chip.config().core();
  EXPECT_EQ(e.tiles, (512 / core.systolic_rows()) * (512 / core.systolic_cols()));
  EXPECT_EQ(e.tile_m, core.systolic_rows());
  EXPECT_THROW(CoreGemm(chip, GemmShape{512, 512, 512, 1, Dtype::kFp8}), std::invalid_argument);
  EXPECT_THROW(CoreGemm(chip, GemmShape{0, 512, 512}), std::invalid_argument);
  config::Chip cfg = LoadChipConfig("h100-sxm-8");
  cfg.mutable_gpu()->set_fp8_tflops(0);
  EXPECT_THROW(CoreGemm(Chip::Build(cfg), GemmShape{64, 64, 64, 1, Dtype::kFp8}), std::invalid_argument);
}

// ---- collectives ---------------------------------------------------------------------------

// One link of 100 GB/s as NCCL counts it, every efficiency 1, no launch cost.
config::Gpu OneLinkGpu() {
  config::Gpu g;
  g.set_nvlink_links(1);
  g.set_nvlink_link_gbps(100);
  g.set_nccl_link_gbps(100);
  g.set_compute_capability(90);
  g.set_nccl_ring_channels(24);
  g.set_ring_allreduce_efficiency(1);
  g.set_ring_efficiency(1);
  g.set_nvls(false);
  g.set_collective_launch_us(0);
  return g;
}

TEST(GpuCollective, OneRingStep) {
  // all_gather over 2 ranks is one ring step. Simple: bus 100 GB/s, algbw = 100 x 2 / 1 =
  // 200 GB/s; latency = base 8.4 + 1 step x 3.4 us (tuning.cc, ring Simple on NVLink).
  // 1 MB: 11.8 + 1e6 / (200 x 1000) = 16.8 us.
  gpu::CollQuery q{gpu::CollOp::kAllGather, 2, 1000000, gpu::Algo::kRing, gpu::Proto::kSimple};
  gpu::CollEstimate e = gpu::EstimateCollective(OneLinkGpu(), 8, q);
  EXPECT_NEAR(e.latency_us, 11.8, 1e-12);
  EXPECT_NEAR(e.gpu_us, 16.8, 1e-12);
  EXPECT_NEAR(e.time_us, 16.8, 1e-12);  // no launch cost
  EXPECT_NEAR(e.algbw_gbps, 1e6 / 16.8e3, 1e-9);
  EXPECT_NEAR(e.busbw_gbps, e.algbw_gbps * 0.5, 1e-12);
  // The host's issue time and the device time combine in quadrature.
  config::Gpu g = OneLinkGpu();
  g.set_collective_launch_us(22.4);
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).time_us, std::sqrt(16.8 * 16.8 + 22.4 * 22.4), 1e-9);
  // The fitted ring efficiency scales the bus ceiling: 0.5 halves algbw to 100 GB/s.
  g.set_collective_launch_us(0);
  g.set_ring_efficiency(0.5);
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).gpu_us, 11.8 + 10.0, 1e-12);
}

TEST(GpuCollective, RingLocalMemoryCapDependsOnRanks) {
  // ring_channel_memory_gbps 10 on 24 channels: 240 GB/s of loads and stores. A ring all_reduce
  // moves (3n - 2) / (n - 1) of them per bus byte: 4 at 2 ranks -> bus cap 60 GB/s (below the
  // link's 100), 10/3 at 4 ranks -> 72 GB/s.
  config::Gpu g = OneLinkGpu();
  g.set_ring_channel_memory_gbps(10);
  gpu::CollQuery q{gpu::CollOp::kAllReduce, 2, 1000000, gpu::Algo::kRing, gpu::Proto::kSimple};
  // 2 ranks: 2 steps, algbw = 60 x 2 / 2 = 60 GB/s; latency 8.4 + 2 x 3.4 = 15.2 us.
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).gpu_us, 15.2 + 1e6 / 60e3, 1e-9);
  // 4 ranks: 6 steps, algbw = 72 x 4 / 6 = 48 GB/s; latency 8.4 + 6 x 3.4 = 28.8 us.
  q.ranks = 4;
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).gpu_us, 28.8 + 1e6 / 48e3, 1e-9);
  // 20 GB/s per channel: the caps (120 and 144 GB/s) are above the link, nothing changes.
  g.set_ring_channel_memory_gbps(20);
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).gpu_us, 28.8 + 1e6 / (100.0 * 4 / 6 * 1e3), 1e-9);
  // all_gather moves (3n - 1) / (n - 1) per bus byte: 5 at 2 ranks -> cap 240 / 5 = 48 GB/s,
  // algbw 48 x 2 / 1 = 96 GB/s: 11.8 + 1e6 / 96e3 = 22.2166... us (OneRingStep: 16.8 uncapped).
  g.set_ring_channel_memory_gbps(10);
  gpu::CollQuery ag{gpu::CollOp::kAllGather, 2, 1000000, gpu::Algo::kRing, gpu::Proto::kSimple};
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, ag).gpu_us, 11.8 + 1e6 / 96e3, 1e-9);
  // At 8 ranks 23 / 7 per bus byte -> cap 240 x 7 / 23 = 73.04 GB/s: the same channels give an
  // 8-rank ring a higher bus ceiling than a 2-rank one. algbw 73.04... x 8 / 7 = 1920 / 23 GB/s;
  // latency 8.4 + 7 x 3.4 = 32.2 us.
  ag.ranks = 8;
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, ag).gpu_us, 32.2 + 1e6 / (1920.0 / 23 * 1e3), 1e-9);
  // reduce_scatter counts the same 3n - 1 (send, n - 2 recvReduceSend, recvReduceCopy).
  gpu::CollQuery rs = ag;
  rs.op = gpu::CollOp::kReduceScatter;
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, rs).gpu_us, 32.2 + 1e6 / (1920.0 / 23 * 1e3), 1e-9);
  // Not for all_to_all (p2p): 8.4 + 3.4 + 1e6 / (100 x 8 / 7 x 1e3).
  gpu::CollQuery a2a{gpu::CollOp::kAllToAll, 8, 1000000};
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, a2a).gpu_us, 11.8 + 1e6 / (100.0 * 8 / 7 * 1e3), 1e-9);
  // NCCL's choice does not see it (the tuner's constants as they are).
  EXPECT_EQ(gpu::TunerTimeUs(g, gpu::CollOp::kAllReduce, 2, 1000000, gpu::Algo::kRing, gpu::Proto::kSimple),
            gpu::TunerTimeUs(OneLinkGpu(), gpu::CollOp::kAllReduce, 2, 1000000, gpu::Algo::kRing,
                             gpu::Proto::kSimple));
}

TEST(GpuCollective, KernelFixedCostAndHostOverlap) {
  // collective_kernel_us 3.2 on OneRingStep's all_gather (2 ranks, Simple, 1 MB): latency
  // 11.8 + 3.2 = 15.0 us, gpu_us 15.0 + 5.0 = 20.0 us (the bytes' 5 us unchanged).
  config::Gpu g = OneLinkGpu();
  g.set_collective_kernel_us(3.2);
  gpu::CollQuery q{gpu::CollOp::kAllGather, 2, 1000000, gpu::Algo::kRing, gpu::Proto::kSimple};
  gpu::CollEstimate e = gpu::EstimateCollective(g, 8, q);
  EXPECT_NEAR(e.latency_us, 15.0, 1e-12);
  EXPECT_NEAR(e.gpu_us, 20.0, 1e-12);
  EXPECT_NEAR(e.time_us, 20.0, 1e-12);  // no launch cost: a CUDA graph's time
  // Host issue 15 us: exponent 0 means 2, sqrt(20^2 + 15^2) = 25; exponent 1 adds them, 35;
  // exponent 64 is the larger within 20 x (1 + 0.75^64 / 64) - 20 < 1e-8.
  g.set_collective_launch_us(15);
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).time_us, 25.0, 1e-9);
  g.set_collective_launch_exponent(2);
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).time_us, 25.0, 1e-9);
  g.set_collective_launch_exponent(1);
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).time_us, 35.0, 1e-9);
  g.set_collective_launch_exponent(64);
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).time_us, 20.0, 1e-8);
  // p = 4: (20^4 + 15^4)^(1/4) = (160000 + 50625)^(1/4) = 210625^(1/4) = 21.422861...
  g.set_collective_launch_exponent(4);
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).time_us, 21.422861, 1e-6);
  // Large times do not overflow the powers: 1 GB at exponent 64 is its device time.
  q.bytes = 1000000000;
  g.set_collective_launch_exponent(64);
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).time_us, 15.0 + 1e9 / 200e3, 1e-6);
  // NCCL's choice does not see the kernel cost (the tuner's constants as they are).
  EXPECT_EQ(
      gpu::TunerTimeUs(g, gpu::CollOp::kAllGather, 2, 8192, gpu::Algo::kRing, gpu::Proto::kLL),
      gpu::TunerTimeUs(OneLinkGpu(), gpu::CollOp::kAllGather, 2, 8192, gpu::Algo::kRing, gpu::Proto::kLL));
}

TEST(GpuCollective, LL128Latency) {
  // ring LL128 all_reduce over 8 ranks, predicted with h100-sxm-8's ring_ll128_step_us 1.2:
  // 14.0 + 2 x 7 x 1.2 = 30.8 us; LL (NCCL's 0.6 us step): 6.6 + 14 x 0.6 = 15.0; the prediction
  // adds collective_kernel_us, 5.25 us: 36.05 and 20.25.
  const config::Gpu g = LoadChipConfig("h100-sxm-8").gpu();
  gpu::CollQuery q{gpu::CollOp::kAllReduce, 8, 1 << 20, gpu::Algo::kRing, gpu::Proto::kLL128};
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).latency_us, 36.05, 1e-9);
  q.proto = gpu::Proto::kLL;
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).latency_us, 20.25, 1e-9);
  // NCCL's tuner keeps its 1.9 us step: ring LL128 at 8 ranks, 40.6 us + bytes / algbw with
  // bus min(370.8 x 0.92, 24 x 36.7) = 341.136 GB/s, algbw 341.136 x 8 / 14.
  EXPECT_NEAR(gpu::TunerTimeUs(g, gpu::CollOp::kAllReduce, 8, 1 << 20, gpu::Algo::kRing, gpu::Proto::kLL128),
              40.6 + 1048576 / (370.8 * 0.92 * 8 / 14 * 1000), 1e-9);
  // The tuner's time for ring LL at 8 KiB: bus min(141, 370.8 / 2) = 141 GB/s,
  // algbw 141 x 8 / 14; 15.0 + 8192 / (80.571428... x 1000).
  EXPECT_NEAR(gpu::TunerTimeUs(g, gpu::CollOp::kAllReduce, 8, 8192, gpu::Algo::kRing, gpu::Proto::kLL),
              15.0 + 8192 / (141.0 * 8 / 14 * 1000), 1e-9);
}

TEST(GpuCollective, FittedRingStepLatency) {
  // ring_simple_step_us 5 on OneRingStep's all_gather (2 ranks, 1 step): 8.4 + 1 x 5 = 13.4 us,
  // 13.4 + 5 = 18.4 us for 1 MB; at 8 ranks 7 steps: 8.4 + 35 = 43.4 us + 1e6 / (100 x 8 / 7 x 1e3).
  config::Gpu g = OneLinkGpu();
  g.set_ring_simple_step_us(5);
  gpu::CollQuery q{gpu::CollOp::kAllGather, 2, 1000000, gpu::Algo::kRing, gpu::Proto::kSimple};
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).latency_us, 13.4, 1e-12);
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).gpu_us, 18.4, 1e-12);
  q.ranks = 8;
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).gpu_us, 43.4 + 1e6 / (100.0 * 8 / 7 * 1e3), 1e-9);
  // LL128 over 8 ranks with ring_ll128_step_us 0.5: 14.0 + 7 x 0.5 = 17.5 us.
  g.set_ring_ll128_step_us(0.5);
  q.proto = gpu::Proto::kLL128;
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).latency_us, 17.5, 1e-12);
  // The choice keeps NCCL's steps: the tuner's Simple all_gather at 2 ranks is 8.4 + 3.4 + 5.
  EXPECT_NEAR(gpu::TunerTimeUs(g, gpu::CollOp::kAllGather, 2, 1000000, gpu::Algo::kRing, gpu::Proto::kSimple),
              16.8, 1e-12);
}

TEST(GpuCollective, HostIssueGrowsWithTheGpusDriven) {
  // launch = collective_launch_us + ranks x collective_launch_per_gpu_us; exponent 1 adds it to
  // OneRingStep's device time. 10 + 2 x 2.5 = 15 us at 2 ranks: 16.8 + 15 = 31.8 us.
  config::Gpu g = OneLinkGpu();
  g.set_collective_launch_us(10);
  g.set_collective_launch_per_gpu_us(2.5);
  g.set_collective_launch_exponent(1);
  gpu::CollQuery q{gpu::CollOp::kAllGather, 2, 1000000, gpu::Algo::kRing, gpu::Proto::kSimple};
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).time_us, 31.8, 1e-12);
  // 8 ranks: 10 + 8 x 2.5 = 30 us on device 32.2 + 1e6 / (800 / 7 x 1e3) = 40.95 us.
  q.ranks = 8;
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).time_us, 30 + 32.2 + 1e6 / (800.0 / 7 * 1e3), 1e-9);
  EXPECT_NEAR(gpu::EstimateCollective(g, 8, q).gpu_us, 32.2 + 1e6 / (800.0 / 7 * 1e3), 1e-9);  // unchanged
}

TEST(GpuCollective, NvlsChunkLimitsSmallBuffers) {
  // NVLS forced over 8 ranks of OneLinkGpu with nvls, nvls_efficiency 1, no rank loss:
  // link rate A = 1 x 100 x 0.85 (Hopper nvlsEfficiency) = 85 GB/s; latency the tuner's 25 us.
  // nvls_chunk_rtt_us 1: 16 channels x chunk / 1 us. NCCL's chunk at 8 ranks (ops = 16 x 8 = 128):
  //   1 GiB: 128 KiB (not below 64 x 128 x 128 KiB = 1 GiB) -> C = 16 x 131072 / 1000 = 2097.152 GB/s
  //   2 MiB: 16 KiB (below 2 x 128 x 32 KiB = 8 MiB)      -> C = 16 x 16384 / 1000 = 262.144 GB/s
  //   8 MiB: 32 KiB (below 8 x 128 x 64 KiB = 64 MiB)     -> C = 524.288 GB/s
  // algbw = 1 / (1/A + 1/C).
  config::Gpu g = OneLinkGpu();
  g.set_nvls(true);
  g.set_nvls_efficiency(1);
  g.set_nvls_rank_loss(0);
  g.set_nvls_chunk_rtt_us(1);
  auto nvls_us = [&](uint64_t bytes) {
    return gpu::EstimateCollective(g, 8, {gpu::CollOp::kAllReduce, 8, bytes, gpu::Algo::kNvls}).gpu_us;
  };
  auto expect = [](uint64_t bytes, double c) { return 25 + bytes / (1000 / (1 / 85.0 + 1 / c)); };
  EXPECT_NEAR(nvls_us(1u << 30), expect(1u << 30, 2097.152), 1e-6);
  EXPECT_NEAR(nvls_us(512u << 20), expect(512u << 20, 1048.576), 1e-6);  // 64 KiB
  EXPECT_NEAR(nvls_us(8u << 20), expect(8u << 20, 524.288), 1e-9);
  EXPECT_NEAR(nvls_us(2u << 20), expect(2u << 20, 262.144), 1e-9);
  // At 4 ranks (ops 64) 512 MiB is not below 64 x 64 x 128 KiB = 512 MiB: 128 KiB.
  EXPECT_NEAR(
      gpu::EstimateCollective(g, 8, {gpu::CollOp::kAllReduce, 4, 512u << 20, gpu::Algo::kNvls}).gpu_us,
      expect(512u << 20, 2097.152), 1e-6);
  // 0 = no chunk limit: A alone.
  g.set_nvls_chunk_rtt_us(0);
  EXPECT_NEAR(nvls_us(2u << 20), 25 + (2u << 20) / 85e3, 1e-9);
}

TEST(GpuCollective, ChoiceAtAFewSizesOnH100) {
  // NCCL's tuner on 8 x H100 (B = 18 x 20.6 = 370.8 GB/s), all_reduce over 8 ranks:
  //   ring LL:   15.0 + S / 80.571 (us, S in kB)          ring Simple: 56.0 + S / 211.886
  //   NVLS:      25 + S / 272  (8 heads of 40 GB/s: 8 x 40 x 0.85 x 7/8 x 2 = 476 busBw)
  //   8 KiB: LL 15.10 < NVLS 25.03; 1 MiB: LL 28.01 < NVLS 28.86; 2 MiB: NVLS 32.71 < LL 41.03.
  const config::Gpu g = LoadChipConfig("h100-sxm-8").gpu();
  auto pick = [&](gpu::CollOp op, int ranks, uint64_t bytes) {
    gpu::CollEstimate e = gpu::EstimateCollective(g, 8, gpu::CollQuery{op, ranks, bytes});
    return std::string(gpu::ToString(e.algo)) + "/" + gpu::ToString(e.proto);
  };
  EXPECT_EQ(pick(gpu::CollOp::kAllReduce, 8, 8192), "ring/ll");
  EXPECT_EQ(pick(gpu::CollOp::kAllReduce, 8, 1 << 20), "ring/ll");
  EXPECT_EQ(pick(gpu::CollOp::kAllReduce, 8, 2 << 20), "nvls/simple");
  EXPECT_EQ(pick(gpu::CollOp::kAllReduce, 8, 1 << 30), "nvls/simple");
  EXPECT_NEAR(gpu::TunerTimeUs(g, gpu::CollOp::kAllReduce, 8, 2 << 20, gpu::Algo::kNvls, gpu::Proto::kSimple),
              25 + 2097152 / 272000.0, 1e-9);
  // 4 ranks: 4 heads of 60 GB/s give NVLS algbw 204 < ring Simple 247.2, so ring at 1 GiB
  // (what NCCL logged on H100 at 4 GPUs, nccl-tests-h100-allreduce-algo.csv's source).
  EXPECT_EQ(pick(gpu::CollOp::kAllReduce, 4, 1 << 30), "ring/simple");
  // all_gather has only ring here: Simple (18.6 + S / 494.4) beats LL128 (19.7 + S / 454.8) at 64 MiB.
  EXPECT_EQ(pick(gpu::CollOp::kAllGather, 4, 64 << 20), "ring/simple");
  EXPECT_EQ(pick(gpu::CollOp::kAllToAll, 8, 64 << 20), "p2p/simple");
}

TEST(GpuCollective, BlackwellUsesItsOwnTables) {
  // b200: ring LL bus = min(2 x 141, 18 x 40.1 / 2) = 282 GB/s; all_reduce 2 ranks: algbw
  // 282 x 2 / 2, latency 6.6 + 2 x 0.6.
  const config::Gpu g = LoadChipConfig("b200-sxm-8").gpu();
  EXPECT_NEAR(gpu::TunerTimeUs(g, gpu::CollOp::kAllReduce, 2, 1 << 20, gpu::Algo::kRing, gpu::Proto::kLL),
              7.8 + 1048576 / 282000.0, 1e-9);
}

TEST(GpuCollective, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(gpu::BusBwFactor(gpu::CollOp::kAllReduce, 8), 14.0 / 8);
  EXPECT_DOUBLE_EQ(gpu::BusBwFactor(gpu::CollOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(gpu::BusBwFactor(gpu::CollOp::kReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(gpu::BusBwFactor(gpu::CollOp::kAllToAll, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(gpu::BusBwFactor(gpu::CollOp::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(gpu::BusBwFactor(gpu::CollOp::kSendRecv, 2), 1.0);
}

TEST(GpuCollective, WhatOneNodeCannotDo) {
  const config::Gpu g = LoadChipConfig("h100-sxm-8").gpu();
  auto msg = [&](gpu::CollQuery q, int gpus = 8) {
    try {
      gpu::EstimateCollective(g, gpus, q);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg({gpu::CollOp::kAllReduce, 16, 1024}).find("network between nodes"), std::string::npos);
  EXPECT_NE(msg({gpu::CollOp::kAllReduce, 1, 1024}).find("outside [2, 8]"), std::string::npos);
  EXPECT_NE(msg({gpu::CollOp::kAllReduce, 8, 1024}, 4).find("outside [2, 4]"), std::string::npos);
  EXPECT_NE(msg({gpu::CollOp::kAllReduce, 8, 0}).find("size 0"), std::string::npos);
  EXPECT_NE(msg({gpu::CollOp::kAllGather, 8, 1024, gpu::Algo::kTree}).find("not available for all_gather"),
            std::string::npos);
  EXPECT_NE(msg({gpu::CollOp::kAllReduce, 8, 1024, gpu::Algo::kNvls, gpu::Proto::kLL}).find("protocol ll"),
            std::string::npos);
  config::Gpu no_nvls = g;
  no_nvls.set_nvls(false);
  try {
    gpu::EstimateCollective(no_nvls, 8, {gpu::CollOp::kAllReduce, 8, 1024, gpu::Algo::kNvls});
    FAIL() << "nvls without gpu.nvls";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpu.nvls is false"), std::string::npos);
  }
}

}  // namespace
}  // namespace tpsim::arch
