// Placements and stage regions on small meshes, with core lists worked out by hand.

#include "mapping/placement/placement.h"

#include "mapping/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpsim::mapping {
namespace {

arch::Chip MakeChip(const std::string& topology, int rows, int cols) {
  config::Chip c;
  c.set_name("test_" + topology);
  c.set_clock_mhz(500);
  auto* k = c.mutable_core();
  k->set_systolic_rows(16);
  k->set_systolic_cols(16);
  k->set_mac_dtype("bf16");
  k->set_matrix_utilization(0.8);
  k->set_vector_lanes(16);
  k->set_sram_bytes(1 << 20);
  auto* n = c.mutable_noc();
  n->set_topology(topology);
  if (topology == "ring") {
    n->set_nodes(cols);
    n->set_bidirectional(true);
  } else {
    n->set_rows(rows);
    n->set_cols(cols);
  }
  n->set_link_bandwidth_gbps(160);
  n->set_router_latency_cycles(1);
  auto* m = c.add_memory();
  m->set_name("dram");
  m->set_kind("dram");
  m->set_per_core(true);
  m->set_bandwidth_gbps(100);
  m->set_efficiency(0.9);
  m->set_latency_ns(50);
  m->set_capacity_bytes(1ull << 30);
  return arch::Chip::Build(c);
}

const arch::Chip& Mesh8x8() {
  static const arch::Chip chip = MakeChip("mesh", 8, 8);
  return chip;
}

std::vector<int> PlaceOn(const arch::Chip& chip, const std::string& name, int ranks, Region region,
                         uint64_t seed = 0, std::vector<int> file = {}) {
  PlacementRequest req;
  req.name = name;
  req.ranks = ranks;
  req.region = region;
  req.seed = seed;
  req.file_cores = std::move(file);
  return Place(req, chip);
}

// The 4x4 region at row 2, column 4 of the 8x8 mesh holds cores (2+i)*8 + 4+j:
//   20 21 22 23
//   28 29 30 31
//   36 37 38 39
//   44 45 46 47
constexpr Region k4x4{2, 4, 4, 4};

TEST(Placement, ExactCoreListsOnA4x4Region) {
  const arch::Chip& chip = Mesh8x8();
  EXPECT_EQ(PlaceOn(chip, "linear", 16, k4x4),
            (std::vector<int>{20, 21, 22, 23, 28, 29, 30, 31, 36, 37, 38, 39, 44, 45, 46, 47}));
  // Halves A = first 8 row-major cores, B = last 8; rank 2i on A[i], 2i+1 on B[i].
  EXPECT_EQ(PlaceOn(chip, "linear_interleave", 16, k4x4),
            (std::vector<int>{20, 36, 21, 37, 22, 38, 23, 39, 28, 44, 29, 45, 30, 46, 31, 47}));
  EXPECT_EQ(PlaceOn(chip, "snake", 16, k4x4),
            (std::vector<int>{20, 21, 22, 23, 31, 30, 29, 28, 36, 37, 38, 39, 47, 46, 45, 44}));
  // Down column 0, then rows 3, 2, 1, 0 snaking over columns 1..3.
  EXPECT_EQ(PlaceOn(chip, "ring", 16, k4x4),
            (std::vector<int>{20, 28, 36, 44, 45, 46, 47, 39, 38, 37, 29, 30, 31, 23, 22, 21}));
  // 2x2 blocks, blocks row-major, row-major inside a block.
  EXPECT_EQ(PlaceOn(chip, "block", 16, k4x4),
            (std::vector<int>{20, 21, 28, 29, 22, 23, 30, 31, 36, 37, 44, 45, 38, 39, 46, 47}));
  // Fewer ranks than cells: the first cells of the order.
  EXPECT_EQ(PlaceOn(chip, "linear", 5, k4x4), (std::vector<int>{20, 21, 22, 23, 28}));
  // 5 ranks: A = 20 21 22 (ceil(5/2) = 3), B = 23 28.
  EXPECT_EQ(PlaceOn(chip, "linear_interleave", 5, k4x4), (std::vector<int>{20, 23, 21, 28, 22}));
  // 0x0 region: the whole chip.
  EXPECT_EQ(PlaceOn(chip, "linear", 3, {}), (std::vector<int>{0, 1, 2}));
}

bool GridNeighbours(const arch::Chip& chip, int a, int b) {
  const int ra = a / chip.grid_cols(), ca = a % chip.grid_cols();
  const int rb = b / chip.grid_cols(), cb = b % chip.grid_cols();
  return std::abs(ra - rb) + std::abs(ca - cb) == 1;
}

TEST(Placement, RingIsAHamiltonianCycleWhenOneExists) {
  const arch::Chip& chip = Mesh8x8();
  for (Region r : {Region{0, 0, 2, 2}, Region{1, 1, 2, 3}, Region{0, 0, 3, 4}, Region{0, 3, 4, 3},
                   Region{2, 4, 4, 4}, Region{0, 0, 6, 5}, Region{0, 0, 8, 8}, Region{1, 0, 5, 8}}) {
    SCOPED_TRACE(std::to_string(r.rows) + "x" + std::to_string(r.cols));
    const int n = r.rows * r.cols;
    const std::vector<int> cores = PlaceOn(chip, "ring", n, r);
    ASSERT_EQ(static_cast<int>(cores.size()), n);
    EXPECT_EQ(std::set<int>(cores.begin(), cores.end()).size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(chip.Hops(cores[i], cores[(i + 1) % n]), 1) << "ranks " << i << " and " << (i + 1) % n;
      EXPECT_TRUE(GridNeighbours(chip, cores[i], cores[(i + 1) % n]));
    }
  }
  // 8 ranks in the 4x4 region: the cycle of its first 2 rows (8 / 4 columns), closed.
  const std::vector<int> eight = PlaceOn(chip, "ring", 8, k4x4);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(chip.Hops(eight[i], eight[(i + 1) % 8]), 1);
  for (int c : eight) EXPECT_LT(c, 32);  // rows 2 and 3 only
}

TEST(Placement, RingWithoutACycleIsAnOpenPath) {
  const arch::Chip& chip = Mesh8x8();
  // 3x3 (odd x odd): the snake 0 1 2 / 5 4 3 / 6 7 8; consecutive ranks adjacent, the ends 2 rows apart.
  const std::vector<int> odd = PlaceOn(chip, "ring", 9, {0, 0, 3, 3});
  EXPECT_EQ(odd, (std::vector<int>{0, 1, 2, 10, 9, 8, 16, 17, 18}));
  for (int i = 0; i + 1 < 9; ++i) EXPECT_EQ(chip.Hops(odd[i], odd[i + 1]), 1);
  EXPECT_EQ(chip.Hops(odd[8], odd[0]), 4);  // (2,2) -> (0,0)
  // 1x8 row of the mesh: a line, 7 hops back.
  const std::vector<int> row = PlaceOn(chip, "ring", 8, {3, 0, 1, 8});
  EXPECT_EQ(row, (std::vector<int>{24, 25, 26, 27, 28, 29, 30, 31}));
  EXPECT_EQ(chip.Hops(row[7], row[0]), 7);
  // On a bidirectional ring chip the same linear order closes through the wrap-around link.
  const arch::Chip ring = MakeChip("ring", 1, 8);
  ASSERT_EQ(ring.grid_rows(), 1);
  ASSERT_EQ(ring.grid_cols(), 8);
  const std::vector<int> rc = PlaceOn(ring, "ring", 8, {});
  for (int i = 0; i < 8; ++i) EXPECT_EQ(ring.Hops(rc[i], rc[(i + 1) % 8]), 1);
  // 6 ranks in the 4x4 region: no 6-cell sub-rectangle of 4 columns or 4 rows; the
  // first 6 cells of the cycle, an open path.
  const std::vector<int> six = PlaceOn(chip, "ring", 6, k4x4);
  EXPECT_EQ(six, (std::vector<int>{20, 28, 36, 44, 45, 46}));
}

TEST(Placement, RandomIsASeededPermutation) {
  const arch::Chip& chip = Mesh8x8();
  const std::vector<int> a = PlaceOn(chip, "random", 16, k4x4, 7);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, PlaceOn(chip, "linear", 16, k4x4));
  EXPECT_EQ(a, PlaceOn(chip, "random", 16, k4x4, 7));
  EXPECT_NE(a, PlaceOn(chip, "random", 16, k4x4, 8));
  // Fewer ranks: distinct cores of the region.
  const std::vector<int> some = PlaceOn(chip, "random", 64, {}, 3);
  EXPECT_EQ(std::set<int>(some.begin(), some.end()).size(), 64u);
}

TEST(Placement, FileIsCheckedAndReturnedAsGiven) {
  const arch::Chip& chip = Mesh8x8();
  EXPECT_EQ(PlaceOn(chip, "file", 4, k4x4, 0, {47, 20, 31, 36}), (std::vector<int>{47, 20, 31, 36}));
  auto message = [&](std::vector<int> file, int ranks) -> std::string {
    try {
      PlaceOn(chip, "file", ranks, k4x4, 0, std::move(file));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no throw";
  };
  EXPECT_NE(message({20, 21, 22}, 4).find("3 core ids for 4 ranks"), std::string::npos);
  EXPECT_EQ(message({20, 21, 21, 22}, 4), "core 21 (rank 2) is already used by an earlier rank");
  // The region's cores are named (k4x4: rows 2-5, columns 4-7 of the 8x8 mesh, core 8 row + col).
  EXPECT_EQ(
      message({20, 21, 0, 22}, 4),
      "core 0 (rank 2) is not in the 4x4 region at (2, 4): cores 20, 21, 22, 23, 28, 29, 30, 31, 36, 37, "
      "38, 39, 44, 45, 46, 47");
  EXPECT_NE(message({20, 21, -5, 22}, 4).find("core -5 (rank 2) is not in"), std::string::npos);
  // The rank that fails travels with the error (validation locates it in the file).
  try {
    PlaceOn(chip, "file", 4, k4x4, 0, {20, 21, 22, 0});
    ADD_FAILURE() << "no throw";
  } catch (const PlacementFileError& e) {
    EXPECT_EQ(e.rank, 3);
  }
}

TEST(Placement, BadRequestsAreRejectedWithAPlainMessage) {
  const arch::Chip& chip = Mesh8x8();
  try {
    PlaceOn(chip, "spiral", 4, k4x4);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("spiral"), std::string::npos);
    for (const std::string& n : PlacementNames()) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
  EXPECT_EQ(PlacementNames().size(), 8u);  // block file hilbert linear linear_interleave random ring snake
  EXPECT_THROW(PlaceOn(chip, "linear", 17, k4x4), std::invalid_argument);
  EXPECT_THROW(PlaceOn(chip, "linear", 0, k4x4), std::invalid_argument);
  EXPECT_THROW(PlaceOn(chip, "linear", 4, {6, 6, 4, 4}), std::invalid_argument);  // runs off the grid
  EXPECT_THROW(PlaceOn(chip, "linear", 4, {-1, 0, 2, 2}), std::invalid_argument);
  EXPECT_THROW(PlaceOn(chip, "snake", 4, {0, 0, 0, 4}), std::invalid_argument);
}

std::string Text(const Region& r) {
  return "(" + std::to_string(r.row0) + "," + std::to_string(r.col0) + " " + std::to_string(r.rows) + "x" +
         std::to_string(r.cols) + ")";
}
std::string Text(const std::vector<Region>& rs) {
  std::string out;
  for (const Region& r : rs) out += Text(r);
  return out;
}

// Disjoint, inside the grid, tp cores each, consecutive stages sharing an edge.
void CheckTiling(const arch::Chip& chip, const std::vector<Region>& rs, int tp) {
  std::set<int> used;
  for (size_t s = 0; s < rs.size(); ++s) {
    const Region& r = rs[s];
    EXPECT_EQ(r.rows * r.cols, tp);
    for (int i = 0; i < r.rows; ++i)
      for (int j = 0; j < r.cols; ++j) {
        const int core = chip.CoreAt(r.row0 + i, r.col0 + j);
        EXPECT_GE(core, 0);
        EXPECT_TRUE(used.insert(core).second) << "core " << core << " in two stages";
      }
    if (s + 1 < rs.size()) {
      const Region& n = rs[s + 1];
      const bool side = (r.col0 + r.cols == n.col0 || n.col0 + n.cols == r.col0) &&
                        r.row0 < n.row0 + n.rows && n.row0 < r.row0 + r.rows;
      const bool stacked = (r.row0 + r.rows == n.row0 || n.row0 + n.rows == r.row0) &&
                           r.col0 < n.col0 + n.cols && n.col0 < r.col0 + r.cols;
      EXPECT_TRUE(side || stacked) << "stages " << s << " and " << s + 1 << " do not touch";
    }
  }
}

TEST(Placement, HilbertVisitsA4x4RegionAsOneWalkOfNeighbours) {
  const arch::Chip& chip = Mesh8x8();
  const std::vector<int> h = PlaceOn(chip, "hilbert", 16, k4x4);
  std::vector<int> sorted = h;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, PlaceOn(chip, "linear", 16, k4x4));  // a permutation of the region
  EXPECT_EQ(h.front(), 20);                              // starts at the region's corner
  for (size_t i = 0; i + 1 < h.size(); ++i) EXPECT_TRUE(GridNeighbours(chip, h[i], h[i + 1])) << i;
  // The curve's first quadrant is the region's top-left 2x2 block.
  EXPECT_EQ(std::set<int>(h.begin(), h.begin() + 4), (std::set<int>{20, 21, 28, 29}));
}

TEST(PlaceStages, ChipSpanTakesStagesFromOneOrder) {
  const arch::Chip chip = MakeChip("mesh", 4, 4);
  config::Mapping m;
  m.set_placement("snake");
  m.set_span("chip");
  // Snake over the whole 4x4 chip: 0 1 2 3 7 6 5 4 8 9 ...
  // stage_major: stage s takes positions 4s .. 4s+3.
  StagePlacement p = PlaceStages(chip, m, 2, 4, PlacementFile{});
  EXPECT_EQ(p.cores[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p.cores[1], (std::vector<int>{7, 6, 5, 4}));
  // tp_major: rank r of stage s takes position 2r + s.
  m.set_span_order("tp_major");
  p = PlaceStages(chip, m, 2, 4, PlacementFile{});
  EXPECT_EQ(p.cores[0], (std::vector<int>{0, 2, 7, 5}));
  EXPECT_EQ(p.cores[1], (std::vector<int>{1, 3, 6, 4}));
  // The default (span = stage): each stage in its own region (StageRegions); disjoint.
  m.clear_span();
  m.clear_span_order();
  p = PlaceStages(chip, m, 2, 4, PlacementFile{});
  std::set<int> all(p.cores[0].begin(), p.cores[0].end());
  all.insert(p.cores[1].begin(), p.cores[1].end());
  EXPECT_EQ(all.size(), 8u);
}

TEST(StageRegions, EightByEightMesh) {
  const arch::Chip& chip = Mesh8x8();
  // 16 stages of 4: 2x2 blocks, 4 per block row, snaking.
  const auto s16 = StageRegions(chip, 16, 4);
  EXPECT_EQ(Text(s16),
            "(0,0 2x2)(0,2 2x2)(0,4 2x2)(0,6 2x2)(2,6 2x2)(2,4 2x2)(2,2 2x2)(2,0 2x2)"
            "(4,0 2x2)(4,2 2x2)(4,4 2x2)(4,6 2x2)(6,6 2x2)(6,4 2x2)(6,2 2x2)(6,0 2x2)");
  CheckTiling(chip, s16, 4);
  EXPECT_EQ(Text(StageRegions(chip, 4, 16)), "(0,0 4x4)(0,4 4x4)(4,4 4x4)(4,0 4x4)");
  EXPECT_EQ(Text(StageRegions(chip, 1, 64)), "(0,0 8x8)");
  // 32 cores: 4x8 and 8x4 are equally square; the wider (bands of rows) wins.
  EXPECT_EQ(Text(StageRegions(chip, 2, 32)), "(0,0 4x8)(4,0 4x8)");
  // 8 cores: 2x4 bands of two rows, two per band.
  const auto s8 = StageRegions(chip, 8, 8);
  EXPECT_EQ(Text(s8), "(0,0 2x4)(0,4 2x4)(2,4 2x4)(2,0 2x4)(4,0 2x4)(4,4 2x4)(6,4 2x4)(6,0 2x4)");
  CheckTiling(chip, s8, 8);
  CheckTiling(chip, StageRegions(chip, 64, 1), 1);
  // Fewer stages than fit: the first ones of the snake. 3 stages of 6: 2x3 blocks, 2 per row.
  EXPECT_EQ(Text(StageRegions(chip, 3, 6)), "(0,0 2x3)(0,3 2x3)(2,3 2x3)");
  // A ring chip is a 1x16 grid: strips.
  EXPECT_EQ(Text(StageRegions(MakeChip("ring", 1, 16), 4, 4)), "(0,0 1x4)(0,4 1x4)(0,8 1x4)(0,12 1x4)");
}

TEST(StageRegions, ImpossibleRequestsSayWhy) {
  const arch::Chip& chip = Mesh8x8();
  auto message = [&](int stages, int tp) -> std::string {
    try {
      StageRegions(chip, stages, tp);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no throw";
  };
  EXPECT_NE(message(17, 4).find("needs 68 cores, the chip has 64"), std::string::npos) << message(17, 4);
  EXPECT_NE(message(0, 4).find("at least 1"), std::string::npos);
  EXPECT_NE(message(4, 0).find("at least 1"), std::string::npos);
  // 12 x 5 = 60 cores fit in count, but 1x5 and 5x1 rectangles fit only 8 times each.
  EXPECT_NE(message(12, 5).find("1x5 fits 8, 5x1 fits 8"), std::string::npos) << message(12, 5);
  // 7 x 9 = 63: 1x9 and 9x1 do not fit at all, 3x3 fits 2 * 2 = 4 times.
  EXPECT_NE(message(7, 9).find("3x3 fits 4"), std::string::npos) << message(7, 9);
}

}  // namespace
}  // namespace tpsim::mapping
