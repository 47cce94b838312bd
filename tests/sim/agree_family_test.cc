#include "sim/agree/family.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "llm/model.h"
#include "sim/engine.h"
#include "sim/result.h"

namespace tpsim::sim::agree {
namespace {

// The families name their models (a model added to the catalog must not change what a seed
// draws): each is in the catalog and of its family's kind, and no catalog model is in both.
TEST(FamilyModels, AreInTheCatalogAndOfTheirKind) {
  for (Family family : {Family::kDense, Family::kMoe}) {
    ASSERT_FALSE(FamilyModels(family).empty());
    for (const std::string& name : FamilyModels(family)) {
      const config::Model m = llm::ImportHuggingFace(llm::CatalogPath(name, {}, "model"));
      EXPECT_EQ(m.num_experts() > 0, family == Family::kMoe) << name;
    }
  }
  // Drawing still works: the first dense experiment of seed 15 uses one of the dense models.
  const Case c = Draw(15, 0);
  const auto& dense = FamilyModels(Family::kDense);
  EXPECT_NE(std::find(dense.begin(), dense.end(), c.drawn.cfg.model_name()), dense.end());
}

// `--router-buffers B` times the TLM side on the drawn chip with B packets of buffer at each
// router input: the total it prints is the TLM engine's on that chip, not the default network's
// (seed 9301 #73, bidirectional_ring at TP 16 on a 64-core mesh: 1749.120 us against 2043.596 us
// without buffers and 1728.267 us analytical, README "TLM vs analytical"). B below 2 (1 is
// refused on rings and tori) or past 65536 is a usage error.
TEST(AgreeRouterBuffers, TimesTheTlmSideOnTheBufferedChip) {
  const Case k = Draw(9301, 73);
  config::Chip c = k.drawn.cfg.chip();
  c.mutable_noc()->set_router_buffer_packets(8);
  const arch::Chip buffered = arch::Chip::Build(c);
  auto total_us = [&](const arch::Chip& chip) {
    const EngineOutput out = MakeEngine("tlm")->Run(k.program, chip);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", BuildSummary(k.program, chip, out).total_ps() / 1e6);
    return std::string(buf);
  };
  const std::string with = total_us(buffered), without = total_us(k.chip);
  EXPECT_NE(with, without);
  testing::internal::CaptureStdout();
  ASSERT_EQ(AgreeCommand({"--seed", "9301", "--only", "73", "--router-buffers", "8"}), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("tlm: chip.noc.router_buffer_packets = 8\n"), std::string::npos) << out;
  EXPECT_NE(out.find("us     " + with + " us"), std::string::npos) << with << "\n" << out;
  EXPECT_EQ(out.find(without), std::string::npos) << without << "\n" << out;
  for (const char* b : {"0", "1", "65537"}) {
    testing::internal::CaptureStderr();
    EXPECT_EQ(AgreeCommand({"--only", "0", "--router-buffers", b}), 2) << b;
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("--router-buffers is 2 .. 65536 packets, got '" + std::string(b) + "'"),
              std::string::npos)
        << err;
  }
}

}  // namespace
}  // namespace tpsim::sim::agree
