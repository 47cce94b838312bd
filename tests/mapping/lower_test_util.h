#pragma once
// Helpers of the lowering tests (lower_test.cc, lower_mn2d_test.cc).
#include <gtest/gtest.h>

#include <string>

#include "arch/chip.h"
#include "llm/model.h"
#include "mapping/mapping.h"
#include "tests/mapping/program_test_util.h"

namespace tpsim::mapping::testing {

inline config::Model Qwen4b() {
  return llm::ImportHuggingFace(TPSIM_SOURCE_DIR "/configs/models/qwen3-4b.json");
}

// Every dep precedes its task; transfers go between two cores; memory tasks use the core's channel.
inline void ExpectWellFormed(const Program& p, const arch::Chip& chip) {
  for (const TaskView& t : TaskViews(p)) {
    for (uint32_t d : t.deps) ASSERT_LT(d, t.id);
    ASSERT_LT(t.op, p.ops.size());
    if (t.kind == TaskKind::kTransfer) {
      EXPECT_NE(t.core, t.dst_core);
      EXPECT_GT(t.bytes, 0u);
      ASSERT_GE(t.collective, 0);
    }
    if (t.kind == TaskKind::kMemory) {
      EXPECT_EQ(t.channel, chip.ChannelOf(t.core));
    }
  }
  uint64_t spilled = 0;
  for (const OpInfo& o : p.ops) spilled += o.spilled_bytes;
  EXPECT_EQ(spilled, p.spilled_bytes);
}

inline const OpInfo* FindOp(const Program& p, const std::string& phase, uint32_t layer,
                            const std::string& name) {
  for (const OpInfo& o : p.ops)
    if (ToString(o.ref.phase) == phase && o.ref.layer == layer && o.ref.op == name) return &o;
  return nullptr;
}

}  // namespace tpsim::mapping::testing
