// In-switch reduction (nvls): the selection rule, the schedule's closed form, and
// the lowering making the choice visible (CollectiveInfo, op labels, Task flags).
#include <gtest/gtest.h>

#include <string>

#include "configs/load.h"
#include "mapping/collective/collective.h"
#include "mapping/mapping.h"
#include "mapping_test_util.h"
#include "tests/arch/test_util.h"
#include "tests/mapping/program_test_util.h"

namespace tpsim::mapping {
namespace {

using testing::Map;
using testing::SmallModel;
using testing::SwitchChip;
using testing::Work;

constexpr auto kAr = CollectiveKind::kAllReduce;

TEST(Nvls, SelectionRule) {
  const InSwitchReduction sw{true, 1 << 20, 4, 480};
  // Empty means ring, whatever the chip offers.
  EXPECT_EQ(ChooseCollective("", kAr, 8, 1 << 30, sw), "ring");
  // Bytes: at and above in_switch_min_bytes nvls, one byte below ring.
  EXPECT_EQ(ChooseCollective("auto", kAr, 8, 1 << 20, sw), "nvls");
  EXPECT_EQ(ChooseCollective("auto", kAr, 8, (1 << 20) - 1, sw), "ring");
  // Ranks: 4 = in_switch_min_ranks is nvls, 3 is ring.
  EXPECT_EQ(ChooseCollective("auto", kAr, 4, 1 << 30, sw), "nvls");
  EXPECT_EQ(ChooseCollective("auto", kAr, 3, 1 << 30, sw), "ring");
  // Only all_reduce is chosen automatically.
  for (CollectiveKind k : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,
                           CollectiveKind::kAllToAll, CollectiveKind::kRotate})
    EXPECT_EQ(ChooseCollective("auto", k, 8, 1 << 30, sw), "ring") << ToString(k);
  // A chip without it: ring.
  InSwitchReduction none = sw;
  none.available = false;
  EXPECT_EQ(ChooseCollective("auto", kAr, 8, 1 << 30, none), "ring");
  // Forcing: any name is returned as it is.
  EXPECT_EQ(ChooseCollective("nvls", kAr, 2, 8, none), "nvls");
  EXPECT_EQ(ChooseCollective("direct", kAr, 8, 1 << 30, sw), "direct");
}

TEST(Nvls, WhatChipsOffer) {
  for (const char* name : {"h100-sxm-8", "h200-sxm-8"}) {
    const InSwitchReduction sw = InSwitchReductionOf(arch::testing::LoadChipConfig(name));
    EXPECT_TRUE(sw.available) << name;
    EXPECT_EQ(sw.min_bytes, 1048576u) << name;
    EXPECT_EQ(sw.min_ranks, 4u) << name;
    EXPECT_GT(sw.bandwidth_gbps, 0) << name;
  }
  // Non-switch chip with the flag set anyway (ValidateChip rejects it; the rule
  // must not rely on that), and a switch chip with the flag off.
  config::Chip mesh = testing::MeshChip(2, 4, 1 << 20);
  mesh.mutable_collectives()->set_in_switch_reduction(true);
  mesh.mutable_collectives()->set_in_switch_bandwidth_gbps(480);
  EXPECT_FALSE(InSwitchReductionOf(mesh).available);
  EXPECT_FALSE(InSwitchReductionOf(SwitchChip(8, 0, false)).available);
  EXPECT_FALSE(InSwitchReductionOf(arch::testing::LoadChipConfig("mesh-4x4-hbm")).available);
}

TEST(Nvls, ScheduleClosedForm) {
  // all_reduce of 8 KiB over 8 ranks: chunk 1024 B. Step 0: every rank adds chunk
  // d into owner d (7 x 8 = 56 reduce transfers); step 1: owner r copies chunk r to
  // the 7 others (56 transfers). Each rank sends 2 x 7 x 1024 = 14,336 B.
  Schedule s = LowerCollective("nvls", kAr, 8, 8192, 2);
  EXPECT_EQ(s.algorithm, "nvls");
  EXPECT_TRUE(s.in_switch);
  EXPECT_TRUE(s.note.empty());
  ASSERT_EQ(s.steps.size(), 2u);
  for (size_t st = 0; st < 2; ++st) {
    ASSERT_EQ(s.steps[st].xfers.size(), 56u);
    for (const Xfer& x : s.steps[st].xfers) {
      EXPECT_EQ(x.bytes, 1024u);
      EXPECT_EQ(x.reduce, st == 0);
      EXPECT_EQ(x.offset, 1024u * static_cast<uint64_t>(st == 0 ? x.dst : x.src));
    }
  }
  EXPECT_EQ(LowerCollective("nvls", CollectiveKind::kReduceScatter, 8, 8192, 2).steps.size(), 1u);
  EXPECT_EQ(LowerCollective("nvls", CollectiveKind::kAllGather, 8, 8192, 2).steps.size(), 1u);
  // No in-switch form: ring with a note, not marked in_switch.
  Schedule rot = LowerCollective("nvls", CollectiveKind::kRotate, 8, 8192, 2);
  EXPECT_EQ(rot.algorithm, "ring");
  EXPECT_FALSE(rot.in_switch);
  EXPECT_NE(rot.note.find("nvls"), std::string::npos);
  EXPECT_FALSE(LowerCollective("nvls", CollectiveKind::kAllToAll, 8, 8192, 2).in_switch);
}

TEST(Nvls, LoweringShowsTheChoice) {
  // SmallModel, prefill S = 8, bf16: a block all_reduce carries 8 x 64 x 2 = 1024 B;
  // decode (1 token) 128 B. With in_switch_min_bytes 1024 auto picks nvls for the
  // prefill all-reduces over tp 8 and ring for decode.
  const arch::Chip chip = arch::Chip::Build(SwitchChip(8, 1024));
  Program p = Lower(chip, SmallModel(), Work(8, 1, 1), Map(8, "megatron", "auto"));
  int nvls = 0, ring = 0;
  for (size_t c = 0; c < p.collectives.size(); ++c) {
    const CollectiveInfo& ci = p.collectives[c];
    if (ci.kind != CollectiveKind::kAllReduce) continue;
    const std::string want = ci.bytes >= 1024 ? "nvls" : "ring";
    EXPECT_EQ(mapping::ToString(ci.algorithm), want) << ci.bytes;
    EXPECT_EQ(p.ops[ci.op].ref.partition, want);
    (want == "nvls" ? nvls : ring)++;
    for (const testing::TaskView& t : testing::TaskViews(p)) {
      if (t.collective != static_cast<int32_t>(c)) continue;
      EXPECT_EQ(t.in_switch_gbps, want == "nvls" ? 480.0 : 0.0);
    }
  }
  EXPECT_EQ(nvls, 2);  // attention and MLP block of the prefill layer
  EXPECT_EQ(ring, 2);  // the decode step's two
  // tp 2 < in_switch_min_ranks: ring everywhere; empty collective: ring.
  for (const auto& [tp, coll] : {std::pair{2, "auto"}, std::pair{8, ""}}) {
    Program q = Lower(chip, SmallModel(), Work(8, 1, 1), Map(tp, "megatron", coll));
    for (const auto& ci : q.collectives) EXPECT_NE(mapping::ToString(ci.algorithm), "nvls") << tp << coll;
  }
  // On a mesh auto is ring, and nvls is rejected by the mapping validation.
  const arch::Chip mesh = arch::Chip::Build(testing::MeshChip(2, 4, uint64_t{1} << 30));
  Program m = Lower(mesh, SmallModel(), Work(8, 1, 1), Map(8, "megatron", "auto"));
  for (const auto& ci : m.collectives) EXPECT_NE(mapping::ToString(ci.algorithm), "nvls");
  EXPECT_THROW(Lower(mesh, SmallModel(), Work(8, 1, 1), Map(8, "megatron", "nvls")), config::ConfigError);
}

TEST(Nvls, CollectiveProgramRejectsNvlsWithoutASwitch) {
  const arch::Chip mesh = arch::Chip::Build(testing::MeshChip(2, 4, uint64_t{1} << 30));
  EXPECT_THROW(CollectiveProgram(mesh, "nvls", kAr, 8, 1 << 20, 2), std::invalid_argument);
  EXPECT_THROW(CollectiveProgram(mesh, "ring", kAr, 9, 1 << 20, 2), std::invalid_argument);
  Program p = CollectiveProgram(mesh, "auto", kAr, 8, 1 << 20, 2);
  EXPECT_EQ(mapping::ToString(p.collectives[0].algorithm), "ring");
  EXPECT_EQ(p.num_tasks(), 14u * 8u);  // 2 (P-1) steps of P transfers
}

}  // namespace
}  // namespace tpsim::mapping
