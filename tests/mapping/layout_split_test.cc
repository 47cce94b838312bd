// Split and ChunkRange, and the layouts and lowerings built on them: parts in order,
// covering [0, n) exactly once, the first n mod p parts one unit more than the others (so
// no part holds more than ceil(n / p)). Every expected range below is worked out by hand
// from that rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "mapping/collective/collective.h"
#include "mapping/layout.h"
#include "mapping/mapping.h"
#include "tests/cli_test_util.h"
#include "tests/mapping/lower_test_util.h"
#include "tests/mapping/mapping_test_util.h"

namespace tpsim::mapping {
namespace {

using testing::FindOp;
using testing::Map;
using testing::MeshChip;
using testing::SmallModel;
using testing::TaskViews;
using testing::Work;

void ExpectRange(Range r, uint64_t lo, uint64_t hi) {
  EXPECT_EQ(r.lo, lo);
  EXPECT_EQ(r.hi, hi);
}

TEST(LayoutSplit, TheFirstPartsTakeTheRemainder) {
  // 1023 = 16 x 63 + 15: parts 0..14 take 64 items, part 15 the last 63.
  for (int i = 0; i < 15; ++i) ExpectRange(Split(1023, 16, i), 64u * i, 64u * i + 64);
  ExpectRange(Split(1023, 16, 15), 960, 1023);
  // Fewer items than parts: one each, in order, the last part empty.
  for (int i = 0; i < 3; ++i) ExpectRange(Split(3, 4, i), i, i + 1);
  EXPECT_EQ(Split(3, 4, 3).size(), 0u);
}

TEST(LayoutSplit, PartsCoverInOrderAndDifferByAtMostOne) {
  for (uint64_t n = 0; n <= 70; ++n)
    for (int p = 1; p <= 17; ++p) {
      SCOPED_TRACE("n=" + std::to_string(n) + " p=" + std::to_string(p));
      const uint64_t lo = n / p, hi = (n + p - 1) / p;  // floor and ceil of n / p
      uint64_t at = 0;
      for (int i = 0; i < p; ++i) {
        const Range r = Split(n, p, i);
        EXPECT_EQ(r.lo, at);
        EXPECT_GE(r.size(), lo);
        EXPECT_LE(r.size(), hi);
        // The larger parts come first.
        if (i > 0) {
          EXPECT_LE(r.size(), Split(n, p, i - 1).size());
        }
        at = r.hi;
      }
      EXPECT_EQ(at, n);
    }
}

TEST(LayoutSplit, ChunksBalanceWholeElementsAndKeepTailBytesOnTheLast) {
  // 150 bytes of 4-byte elements over 4 chunks: 37 whole elements (148 bytes) and 2 bytes.
  // 37 = 4 x 9 + 1: 10, 9, 9, 9 elements = 40, 36, 36, 36 bytes, the last also the 2 bytes.
  const uint64_t want_off[] = {0, 40, 76, 112}, want_len[] = {40, 36, 36, 38};
  for (int c = 0; c < 4; ++c) {
    uint64_t off = 0, len = 0;
    ChunkRange(150, 4, c, 4, &off, &len);
    EXPECT_EQ(off, want_off[c]) << c;
    EXPECT_EQ(len, want_len[c]) << c;
  }
}

TEST(LayoutSplit, LayoutsUseTheBalancedParts) {
  // 63 rows over 4 ranks: 16, 16, 16, 15.
  const uint64_t rows_lo[] = {0, 16, 32, 48}, rows_hi[] = {16, 32, 48, 63};
  for (int r = 0; r < 4; ++r) ExpectRange(RowsOf(Layout::Rows(), 63, 4, r), rows_lo[r], rows_hi[r]);
  // 10 heads of 16 columns over 4 ranks: 3, 3, 2, 2 heads.
  const uint64_t cols_lo[] = {0, 48, 96, 128}, cols_hi[] = {48, 96, 128, 160};
  for (int r = 0; r < 4; ++r) ExpectRange(ColsOf(Layout::Cols(16), 160, 4, r), cols_lo[r], cols_hi[r]);
  // A 2 x 2 grid: 5 rows over the 2 grid rows (3, 2), 3 heads of 4 over the 2 columns (2, 1).
  const Layout grid = Layout::Grid(2, 2, 4);
  ExpectRange(RowsOf(grid, 5, 4, 1), 0, 3);
  ExpectRange(RowsOf(grid, 5, 4, 2), 3, 5);
  ExpectRange(ColsOf(grid, 12, 4, 2), 0, 8);
  ExpectRange(ColsOf(grid, 12, 4, 3), 8, 12);
}

// The GEMM computes of one prefill op, by rank (core c = rank c on the linear placement).
std::vector<uint64_t> RowsPerCore(const Program& p, const std::string& op_name, int cores) {
  const OpInfo* op = FindOp(p, "prefill", 0, op_name);
  EXPECT_NE(op, nullptr) << op_name;
  std::vector<uint64_t> rows(cores, 0);
  if (op == nullptr) return rows;
  const size_t id = static_cast<size_t>(op - p.ops.data());
  for (const testing::TaskView& t : TaskViews(p))
    if (t.kind == TaskKind::kCompute && t.op == id && t.flops > 0) rows[t.core.value()] = t.m;
  return rows;
}

TEST(LayoutSplit, RowSplitGemmsGiveEveryRankCeilOrFloorRows) {
  // m_split_rotate at tp 16 over 1023 tokens: X split along rows, ranks 0..14 compute 64
  // rows and rank 15 63 (1023 = 16 x 63 + 15), every rank within one 64-row tile.
  arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  const Program p = Lower(chip, SmallModel(), Work(1023, 0, 1), Map(16, "m_split_rotate"));
  std::vector<uint64_t> want(16, 64);
  want[15] = 63;
  EXPECT_EQ(RowsPerCore(p, "q_proj", 16), want);
  EXPECT_EQ(RowsPerCore(p, "down_proj", 16), want);
}

// The run of the reviewer's case: qwen3-0.6b, one layer, tp 16, m_split_rotate, at 1009
// and 1023 tokens. Neither divides by 16, so both convert layouts the same way (gathers of
// whole rows; 1024 takes all-to-alls instead, layout_convert.cc). 1009 = 16 x 63 + 1 gives
// ranks 64 and 63 rows, 1023 = 16 x 63 + 15 gives them 64 and 63 too: one row tile of the
// 64 x 64 arrays each, so 1023 takes as long as 1009 but for its 1.4% more rows (within 2%).
// The remainder all on the last rank gave it 78 rows at 1023, two row tiles (2164.855 us
// against 1377.054).
double RunTotalUs(const std::string& tpsim, uint32_t seq_len) {
  const test::CommandOutcome o = test::RunCommand(
      "timeout 120 '" + tpsim +
      "' run --model qwen3-0.6b --set workload.num_layers=1 --set workload.decode_steps=0 --set "
      "mapping.pipeline_stages=1 --set mapping.tp=16 --set mapping.partition=m_split_rotate --set "
      "workload.seq_len=" +
      std::to_string(seq_len) + " --quiet 2>&1");
  EXPECT_EQ(o.status, 0) << o.output;
  const size_t at = o.output.find("total ");
  EXPECT_NE(at, std::string::npos) << o.output;
  return at == std::string::npos ? 0 : std::strtod(o.output.c_str() + at + 6, nullptr);
}

TEST(LayoutSplit, NoRankTakesASecondRowTileForTheRemainder) {
  const std::string tpsim = TPSIM_BINARY_DIR "/bin/tpsim";
  ASSERT_TRUE(std::filesystem::exists(tpsim)) << tpsim << " is missing: build the tpsim target";
  const double fewer = RunTotalUs(tpsim, 1009), more = RunTotalUs(tpsim, 1023);
  ASSERT_GT(fewer, 0);
  EXPECT_LT(std::abs(more - fewer) / fewer, 0.02)
      << "1009 tokens: " << fewer << " us, 1023: " << more << " us";
}

}  // namespace
}  // namespace tpsim::mapping
