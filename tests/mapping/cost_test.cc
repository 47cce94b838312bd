// The cost model (mapping/cost.h) against hand-computed durations on a small hand-written
// chip: a 1x3 mesh at 1000 MHz (cycle 1000 ps); 4x4 systolic array at 0.5 utilisation, 8
// vector lanes, SRAM port 100 GB/s; 10 GB/s links, 2-cycle routers and 1 ns wires (one hop
// = 2 x 1000 + 1000 = 3000 ps); one DRAM channel at r0c0 (core 0): 20 GB/s x 0.5
// efficiency = 10 GB/s, 100 ns latency.
#include "mapping/cost.h"

#include <gtest/gtest.h>

#include <limits>

#include "arch/chip.h"
#include "chip.pb.h"
#include "tests/mapping/program_test_util.h"

namespace tpsim::mapping {
namespace {

const arch::Chip& SmallChip() {
  static const arch::Chip chip = [] {
    config::Chip c;
    c.set_name("cost-test-1x3");
    c.set_clock_mhz(1000);
    auto* core = c.mutable_core();
    core->set_systolic_rows(4);
    core->set_systolic_cols(4);
    core->set_systolic_arrays(1);
    core->set_mac_dtype("bf16");
    core->set_matrix_utilization(0.5);
    core->set_vector_lanes(8);
    core->set_sram_bytes(1 << 20);
    core->set_sram_bandwidth_gbps(100);
    auto* noc = c.mutable_noc();
    noc->set_topology("mesh");
    noc->set_rows(1);
    noc->set_cols(3);
    noc->set_link_bandwidth_gbps(10);
    noc->set_router_latency_cycles(2);
    noc->set_link_latency_ns(1);
    auto* mem = c.add_memory();
    mem->set_name("dram");
    mem->set_kind("dram");
    mem->add_attach("r0c0");
    mem->set_bandwidth_gbps(20);
    mem->set_efficiency(0.5);
    mem->set_latency_ns(100);
    mem->set_capacity_bytes(1ull << 30);
    return arch::Chip::Build(c);
  }();
  return chip;
}

ComputeShape Gemm(llm::OpKind kind, uint64_t m, uint64_t n, uint64_t k, uint64_t bytes) {
  return {.op_kind = kind, .batch = 1, .m = m, .n = n, .k = k, .bytes = bytes};
}

TEST(CostModel, GemmOnTheMatrixUnit) {
  const arch::Chip& chip = SmallChip();
  // [8,16] x [16,8]: ceil(8/4) x ceil(8/4) = 4 tiles of (16 + 4 + 4) cycles at 0.5
  // utilisation: 4 x 24 x 1000 / 0.5 = 192000 ps; its 1000 SRAM bytes take 10000 ps.
  EXPECT_EQ(ComputeTime(chip, Gemm(llm::OpKind::kGemm, 8, 8, 16, 1000)), 192000);
  // The MoE router and batched GEMMs run there too; a batch of 3 is 12 tiles.
  EXPECT_EQ(ComputeTime(chip, Gemm(llm::OpKind::kRouter, 8, 8, 16, 1000)), 192000);
  ComputeShape batched = Gemm(llm::OpKind::kBatchedGemm, 8, 8, 16, 1000);
  batched.batch = 3;
  EXPECT_EQ(ComputeTime(chip, batched), 576000);
  // SRAM-bound: 10^6 bytes at 100 GB/s = 10^7 ps > 192000 ps of compute.
  EXPECT_EQ(ComputeTime(chip, Gemm(llm::OpKind::kGemm, 8, 8, 16, 1000000)), 10000000);
  EXPECT_TRUE(OnMatrixUnit(llm::OpKind::kGemm));
  EXPECT_TRUE(OnMatrixUnit(llm::OpKind::kBatchedGemm));
  EXPECT_TRUE(OnMatrixUnit(llm::OpKind::kRouter));
}

TEST(CostModel, VectorOpOnTheVectorUnit) {
  const arch::Chip& chip = SmallChip();
  // 100 lane-operations on 8 lanes: ceil(100 / 8) = 13 cycles = 13000 ps (its GEMM-like
  // m, n, k are ignored: a softmax is vector work).
  ComputeShape softmax{.op_kind = llm::OpKind::kSoftmax, .m = 64, .n = 64, .k = 64, .vector_ops = 100};
  EXPECT_FALSE(OnMatrixUnit(softmax.op_kind));
  EXPECT_EQ(ComputeTime(chip, softmax), 13000);
  // 2000 SRAM bytes at 100 GB/s: 20000 ps, the bound.
  softmax.bytes = 2000;
  EXPECT_EQ(ComputeTime(chip, softmax), 20000);
  // The Task overload agrees.
  Task t;
  t.op_kind = softmax.op_kind;
  t.vector_ops = softmax.vector_ops;
  t.bytes = softmax.bytes;
  EXPECT_EQ(ComputeTime(chip, t), 20000);
}

TEST(CostModel, TransferOverLinksAndThroughTheSwitch) {
  const arch::Chip& chip = SmallChip();
  // Core 0 -> core 2: two hops (6000 ps) + 1000 bytes at 10 GB/s (100000 ps).
  EXPECT_EQ(TransferTime(chip, 0, 2, 1000), 106000);
  EXPECT_EQ(TransferTime(chip, 2, 2, 1000), 0);
  EXPECT_EQ(TransferTime(chip, 0, 2, 0), 0);
  // Through a switch engine at 50 GB/s, its port sending 3000 bytes in the step: 6000 ps of
  // hops + 3000 x 1000 / 50 = 60000 ps.
  EXPECT_EQ(InSwitchTime(6000, 1000, 3000, 50), 66000);
  EXPECT_EQ(InSwitchTime(6000, 0, 3000, 50), 0);
  EXPECT_EQ(SerialisationPs(1001, 10), 100100);
  EXPECT_EQ(SerialisationPs(1, 3), 334);  // 333.3 ps rounds up
  EXPECT_EQ(SerialisationPs(0, 10), 0);
}

TEST(CostModel, MemoryStackedAndAcrossTheNetwork) {
  const arch::Chip& chip = SmallChip();
  // Core 0 holds the channel: 100 ns + 5000 bytes at 10 GB/s = 100000 + 500000 ps.
  EXPECT_EQ(MemoryTime(chip, 0, 0, 5000, false), 600000);
  EXPECT_EQ(StackedMemoryTime(chip, 0, 5000), 600000);
  // Two cores share the channel: 10000 bytes' worth.
  EXPECT_EQ(StackedMemoryTime(chip, 0, 5000, 2), 1100000);
  // Core 2 reads across two hops: + 6000 ps of hop latency; the path (10 GB/s) is no
  // narrower than the channel, so cut-through adds no serialisation.
  EXPECT_EQ(MemoryTime(chip, 2, 0, 5000, false), 606000);
  EXPECT_EQ(MemoryTime(chip, 2, 0, 5000, true), 606000);
  // The channel is busy for the serialisation only: 500000 ps of the 600000.
  EXPECT_EQ(ChannelBusyTime(chip, 0, 5000), 500000);
  EXPECT_EQ(ChannelBusyTime(chip, 0, 0), 0);
}

TEST(CostModel, TaskTimeOfEveryKind) {
  const arch::Chip& chip = SmallChip();
  testing::TestProgram tp;
  tp.num_cores = 3;
  tp.num_channels = 1;
  tp.ops.resize(1);
  Task gemm;
  gemm.op_kind = llm::OpKind::kGemm;
  gemm.m = 8, gemm.n = 8, gemm.k = 16, gemm.bytes = 1000;
  tp.Add(gemm);
  Task xfer;
  xfer.kind = TaskKind::kTransfer;
  xfer.core = mapping::CoreId(0), xfer.dst_core = mapping::CoreId(2), xfer.bytes = 1000;
  tp.Add(xfer);
  Task in_switch = xfer;
  in_switch.in_switch_gbps = 50;  // alone on its port: 6000 + 1000 x 1000 / 50 = 26000 ps
  tp.Add(in_switch);
  Task local = xfer;
  local.dst_core = mapping::CoreId(0);
  tp.Add(local);
  Task mem;
  mem.kind = TaskKind::kMemory;
  mem.core = mapping::CoreId(2), mem.channel = 0, mem.bytes = 5000;
  tp.Add(mem);
  const Program p = tp.Build();
  EXPECT_EQ(TaskTime(chip, p, 0), 192000);
  EXPECT_EQ(TaskTime(chip, p, 1), 106000);
  EXPECT_EQ(TaskTime(chip, p, 2), 26000);
  EXPECT_EQ(TaskTime(chip, p, 3), 0);
  EXPECT_EQ(TaskTime(chip, p, 4), 606000);
}

}  // namespace
}  // namespace tpsim::mapping
