// m_split_rotate lowered whole (the partitioner alone: partition_test.cc).
#include <gtest/gtest.h>

#include <string>

#include "mapping/mapping.h"
#include "tests/mapping/lower_test_util.h"
#include "tests/mapping/mapping_test_util.h"

namespace tpsim::mapping {
namespace {

using testing::Map;
using testing::MeshChip;
using testing::SmallModel;
using testing::Work;

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// At tp 1 nothing rotates: the one rank computes every GEMM whole, so the Program is the
// plain GEMMs' (n_split's, task for task, the same SRAM and spills) but for the label. Two
// rotation buffers of the whole W each made it spill where the plain GEMMs fit. SmallModel
// at 16 tokens, bf16: the widest plain GEMM holds X, Y and (streamed) W of 64 x 128 (16 KiB).
TEST(MSplitRotate, AtTp1LowersThePlainGemms) {
  for (const char* weights : {"auto", "dram"})
    for (uint64_t sram : {uint64_t{48} << 10, uint64_t{1} << 20}) {
      SCOPED_TRACE(std::string(weights) + " sram " + std::to_string(sram));
      arch::Chip chip = arch::Chip::Build(MeshChip(1, 1, sram));
      config::Mapping rot = Map(1, "m_split_rotate"), plain = Map(1, "n_split");
      rot.set_weights(weights), plain.set_weights(weights);
      const Program p = Lower(chip, SmallModel(), Work(16, 2, 2), rot);
      const Program q = Lower(chip, SmallModel(), Work(16, 2, 2), plain);
      EXPECT_TRUE(p.collectives.empty());
      EXPECT_EQ(p.spilled_bytes, q.spilled_bytes);
      EXPECT_TRUE(Replace(p.Dump(), "[m_split_rotate]", "[n_split]") == q.Dump());
    }
}

}  // namespace
}  // namespace tpsim::mapping
