// The energy model (sim/energy.h) by hand on the 8x8 test mesh (tests/sim/test_mesh.h) with an
// energy block of round numbers: one GEMM, one transfer, one DRAM read, static power x time,
// the same dynamic energy from both engines, and a chip without an energy block.
#include "sim/energy.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/analytical/analytical.h"
#include "sim/result.h"
#include "sim/tlm/tlm_engine.h"
#include "tests/arch/test_util.h"
#include "tests/mapping/program_test_util.h"
#include "tests/sim/test_mesh.h"

namespace tpsim::sim {
namespace {

using mapping::TaskKind;
using Program = mapping::testing::TestProgram;
using test::Core;

// pJ per MAC, per lane-op, per SRAM byte read / written, per hop byte, per DRAM byte; W.
config::Chip EnergyConfig() {
  config::Chip c = test::MeshConfig();
  auto* e = c.mutable_energy();
  e->set_mac_bf16_pj(0.5);
  e->set_mac_fp32_pj(2);
  e->set_vector_op_pj(0.25);
  e->set_sram_read_pj_per_byte(1);
  e->set_sram_write_pj_per_byte(2);
  e->set_hop_pj_per_byte(3);
  e->set_dram_pj_per_byte(10);
  e->set_core_static_w(0.5);
  e->set_memory_static_w(2);
  e->set_core_tdp_w(4);
  return c;
}

const arch::Chip& EnergyMesh() {
  static const arch::Chip chip = arch::Chip::Build(EnergyConfig());
  return chip;
}

Program OneOp() {
  Program p;
  p.num_cores = 64;
  p.num_channels = 1;
  p.ops = {mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "op", "k_split"}, 0, 0, 0}};
  return p;
}

// A bf16 GEMM of 256 x 2560 by 2560 x 640 on core 0: bytes = 2 (mk + mn + kn) = 4,915,200.
mapping::Task Gemm() {
  mapping::Task t;
  t.kind = TaskKind::kCompute;
  t.core = mapping::CoreId(0);
  t.m = 256;
  t.n = 640;
  t.k = 2560;
  t.flops = 2.0 * 256 * 640 * 2560;
  t.bytes = 2 * (256 * 2560 + 256 * 640 + 2560 * 640);
  return t;
}

TEST(Energy, OneGemmByHand) {
  Program p = OneOp();
  p.Add(Gemm());
  const EnergyParts e = TaskEnergy(p, 0, EnergyMesh(), "bf16");
  // 256 x 640 x 2560 = 419,430,400 MACs x 0.5 pJ.
  EXPECT_DOUBLE_EQ(e.compute_pj, 209'715'200.0);
  // Output 256 x 640 x 2 B = 327,680 B written x 2 pJ; operands 4,587,520 B read x 1 pJ.
  EXPECT_DOUBLE_EQ(e.sram_pj, 327'680.0 * 2 + 4'587'520.0 * 1);
  EXPECT_EQ(e.network_pj, 0);
  EXPECT_EQ(e.memory_pj, 0);
  // fp32 MACs at 2 pJ (the bytes are the task's; only the MAC figure changes).
  EXPECT_DOUBLE_EQ(TaskEnergy(p, 0, EnergyMesh(), "fp32").compute_pj, 419'430'400.0 * 2);
}

TEST(Energy, VectorOpByHand) {
  Program p = OneOp();
  mapping::Task t;
  t.kind = TaskKind::kCompute;
  t.op_kind = llm::OpKind::kElementwise;
  t.core = mapping::CoreId(3);
  t.vector_ops = 1000;
  t.bytes = 4000;
  p.Add(t);
  const EnergyParts e = TaskEnergy(p, 0, EnergyMesh(), "bf16");
  EXPECT_DOUBLE_EQ(e.compute_pj, 250.0);                 // 1000 lane-ops x 0.25 pJ
  EXPECT_DOUBLE_EQ(e.sram_pj, 2000.0 * 1 + 2000.0 * 2);  // half read, half written
}

TEST(Energy, OneTransferIsBytesTimesHopsTimesPj) {
  Program p = OneOp();
  mapping::Task t;
  t.kind = TaskKind::kTransfer;
  t.core = mapping::CoreId(Core(0, 0));
  t.dst_core = mapping::CoreId(Core(2, 3));
  t.bytes = 1000;
  p.Add(t);
  ASSERT_EQ(EnergyMesh().Hops(Core(0, 0), Core(2, 3)), 5);  // XY: 3 east, 2 south
  const EnergyParts e = TaskEnergy(p, 0, EnergyMesh(), "bf16");
  EXPECT_DOUBLE_EQ(e.network_pj, 1000.0 * 5 * 3);
  EXPECT_DOUBLE_EQ(e.sram_pj, 1000.0 * 1 + 1000.0 * 2);  // read at r0c0, written at r2c3
  EXPECT_EQ(e.compute_pj, 0);
}

TEST(Energy, OneDramReadByHand) {
  Program p = OneOp();
  mapping::Task t;
  t.kind = TaskKind::kMemory;
  t.core = mapping::CoreId(Core(1, 2));
  t.channel = 0;  // attached at r0c0: 3 hops to r1c2
  t.bytes = 4096;
  p.Add(t);
  ASSERT_EQ(EnergyMesh().MemoryPath(Core(1, 2), 0, false).size(), 3u);
  const EnergyParts e = TaskEnergy(p, 0, EnergyMesh(), "bf16");
  EXPECT_DOUBLE_EQ(e.memory_pj, 4096.0 * 10);
  EXPECT_DOUBLE_EQ(e.network_pj, 4096.0 * 3 * 3);
  EXPECT_DOUBLE_EQ(e.sram_pj, 4096.0 * 2);  // lands in core r1c2's SRAM
  // Stacked under the attach core: no hops.
  p.tasks[0].core = mapping::CoreId(0);
  EXPECT_EQ(TaskEnergy(p, 0, EnergyMesh(), "bf16").network_pj, 0);
}

// The three tasks in one Program: summary energy = the hand-computed dynamic energy + static
// power (64 cores x 0.5 W + 1 channel x 2 W = 34 W) x the engine's makespan.
Program ThreeTasks() {
  Program p = OneOp();
  p.Add(Gemm());
  mapping::Task s;
  s.kind = TaskKind::kTransfer;
  s.core = mapping::CoreId(Core(0, 0));
  s.dst_core = mapping::CoreId(Core(2, 3));
  s.bytes = 1000;
  p.Add(s, {0});
  mapping::Task r;
  r.kind = TaskKind::kMemory;
  r.core = mapping::CoreId(Core(1, 2));
  r.channel = 0;
  r.bytes = 4096;
  p.Add(r);
  return p;
}

constexpr double kDynamicPj = 209'715'200.0 + 327'680.0 * 2 + 4'587'520.0  // GEMM
                              + 1000.0 * 5 * 3 + 3000.0                    // transfer
                              + 4096.0 * 10 + 4096.0 * 9 + 4096.0 * 2;     // DRAM read

TEST(Energy, StaticIsPowerTimesMakespanAndSummaryAddsUp) {
  const Program p = ThreeTasks();
  EnergyInputs in;
  in.prompt_tokens = 4;
  in.generated_tokens = 0;
  const EngineOutput out = AnalyticalEngine().Run(p, EnergyMesh());
  const config::Summary s = BuildSummary(p, EnergyMesh(), out, in);
  ASSERT_TRUE(s.energy_modelled());
  EXPECT_DOUBLE_EQ(StaticPowerW(EnergyMesh()), 34.0);
  const double seconds = static_cast<double>(s.total_ps()) * 1e-12;
  EXPECT_DOUBLE_EQ(s.static_energy_j(), 34.0 * seconds);
  EXPECT_NEAR(s.energy_j(), kDynamicPj * 1e-12 + 34.0 * seconds, 1e-15);
  EXPECT_NEAR(s.compute_energy_j(), 209'715'200.0e-12, 1e-18);
  EXPECT_NEAR(s.network_energy_j(), (15'000.0 + 4096.0 * 9) * 1e-12, 1e-18);
  EXPECT_NEAR(s.memory_energy_j(), 40'960.0e-12, 1e-18);
  EXPECT_NEAR(s.energy_per_token_j(), s.energy_j() / 4, 1e-18);
  EXPECT_EQ(s.decode_energy_per_token_j(), 0);  // no generated tokens
  EXPECT_NEAR(s.average_power_w(), s.energy_j() / seconds, 1e-9);
  EXPECT_DOUBLE_EQ(s.tdp_w(), 64 * 4.0);
  // Everything is prefill: its energy is all of it.
  EXPECT_NEAR(s.prefill_energy_j(), s.energy_j(), 1e-15);
  // The per-op and per-layer figures carry the dynamic part; BuildResult's summary is BuildSummary's.
  const config::Result r = BuildResult(p, EnergyMesh(), out, "x", "analytical", false, in);
  EXPECT_NEAR(r.ops(0).energy_j(), kDynamicPj * 1e-12, 1e-18);
  EXPECT_NEAR(r.layers(0).energy_j(), kDynamicPj * 1e-12, 1e-18);
  EXPECT_EQ(r.summary().SerializeAsString(), s.SerializeAsString());
  EXPECT_NE(ResultTable(r).find("average power"), std::string::npos);
}

TEST(Energy, BothEnginesReportTheSameDynamicEnergy) {
  const Program p = ThreeTasks();
  const config::Summary a = BuildSummary(p, EnergyMesh(), AnalyticalEngine().Run(p, EnergyMesh()));
  const config::Summary t = BuildSummary(p, EnergyMesh(), MakeTlmEngine()->Run(p, EnergyMesh()));
  EXPECT_EQ(a.energy_j() - a.static_energy_j(), t.energy_j() - t.static_energy_j());
  EXPECT_EQ(a.compute_energy_j(), t.compute_energy_j());
  EXPECT_EQ(a.network_energy_j(), t.network_energy_j());
  // Static energy follows each engine's own makespan.
  EXPECT_DOUBLE_EQ(t.static_energy_j(), 34.0 * static_cast<double>(t.total_ps()) * 1e-12);
}

// A hop across a die boundary of wafer-32x32 (4x4-core dies) costs its d2d figure (10.4 pJ/B),
// a hop inside a die the NoC figure (0.103 pJ/B); both ends pay SRAM (0.194 pJ/B each way).
TEST(Energy, DieToDieHopsOnTheShippedWafer) {
  const arch::Chip wafer = arch::testing::LoadChip("wafer-32x32");
  const config::Energy& e = wafer.config().energy();
  ASSERT_DOUBLE_EQ(e.d2d_hop_pj_per_byte(), 10.4);
  ASSERT_DOUBLE_EQ(e.hop_pj_per_byte(), 0.103);
  Program p;
  p.num_cores = wafer.num_cores();
  p.num_channels = static_cast<int>(wafer.channels().size());
  p.ops = OneOp().ops;
  auto send = [&](int src, int dst) {
    mapping::Task t;
    t.kind = TaskKind::kTransfer;
    t.core = mapping::CoreId(src);
    t.dst_core = mapping::CoreId(dst);
    t.bytes = 100;
    p.Add(t);
  };
  send(2, 3);  // r0c2 -> r0c3: inside die 0
  send(3, 4);  // r0c3 -> r0c4: crosses into die 1
  send(0, 5);  // r0c0 -> r0c5: 4 hops inside, 1 across
  EXPECT_NEAR(TaskEnergy(p, 0, wafer, "bf16").network_pj, 100 * 0.103, 1e-9);
  EXPECT_NEAR(TaskEnergy(p, 1, wafer, "bf16").network_pj, 100 * 10.4, 1e-9);
  EXPECT_NEAR(TaskEnergy(p, 2, wafer, "bf16").network_pj, 100 * (4 * 0.103 + 10.4), 1e-9);
  EXPECT_NEAR(TaskEnergy(p, 1, wafer, "bf16").sram_pj, 100 * 0.194 * 2, 1e-9);
}

// On a GPU node (h200-sxm-8): a GEMM's bytes are HBM traffic (31.2 pJ/B), and an all_reduce
// kernel over 8 GPUs moves NCCL's bus bytes, 2 x 7/8 of its buffer, over GPU -> switch -> GPU
// (2 NVLink hops at 10.4 pJ/B), read from and written to HBM.
TEST(Energy, GpuNodeKernelsByHand) {
  const arch::Chip h200 = arch::testing::LoadChip("h200-sxm-8");
  ASSERT_EQ(h200.Hops(0, 1), 2);
  Program p;
  p.num_cores = h200.num_cores();
  p.num_channels = static_cast<int>(h200.channels().size());
  p.ops = OneOp().ops;
  p.Add(Gemm());
  mapping::Task c;
  c.kind = TaskKind::kCompute;
  c.op_kind = llm::OpKind::kCollective;
  c.core = mapping::CoreId(0);
  c.m = static_cast<uint64_t>(mapping::CollectiveKind::kAllReduce);
  c.n = 8;
  c.bytes = 1 << 20;
  p.Add(c);
  const EnergyParts g = TaskEnergy(p, 0, h200, "bf16");
  EXPECT_NEAR(g.compute_pj, 419'430'400.0 * 0.116, 1e-3);
  EXPECT_NEAR(g.memory_pj, 4'915'200.0 * 31.2, 1e-3);
  EXPECT_EQ(g.sram_pj, 0);
  const EnergyParts a = TaskEnergy(p, 1, h200, "bf16");
  const double wire = (1 << 20) * 2.0 * 7 / 8;
  EXPECT_NEAR(a.network_pj, wire * 2 * 10.4, 1e-3);
  EXPECT_NEAR(a.memory_pj, wire * 31.2 * 2, 1e-3);
  EXPECT_EQ(a.compute_pj, 0);
}

TEST(Energy, ChipWithoutEnergyBlockReportsNone) {
  const Program p = ThreeTasks();
  const config::Result r =
      BuildResult(p, test::Mesh(), AnalyticalEngine().Run(p, test::Mesh()), "x", "analytical", false);
  EXPECT_FALSE(r.summary().energy_modelled());
  EXPECT_EQ(r.summary().energy_j(), 0);
  EXPECT_EQ(r.ops(0).energy_j(), 0);
  EXPECT_NE(ResultTable(r).find("energy not modelled"), std::string::npos);
  // An fp32 workload on a chip without mac_fp32_pj: not modelled either.
  config::Chip c = EnergyConfig();
  c.mutable_energy()->set_mac_fp32_pj(0);
  EXPECT_FALSE(EnergyModelled(arch::Chip::Build(c), "fp32"));
  EXPECT_TRUE(EnergyModelled(arch::Chip::Build(c), "bf16"));
}

}  // namespace
}  // namespace tpsim::sim
