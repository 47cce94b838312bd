// The MoE dispatch's hierarchical all_to_all (mapping/collective/a2a_hierarchical.cc) timed by
// hand on both engines, beside AnalyticalEngine.UnevenAllToAllOnTwoByTwoBlockByHand and
// TlmEngine.UnevenAllToAllOnTwoByTwoBlockMatchesClosedForm (direct). The 8x8 test mesh: 160 GB/s
// links (160 bytes/ns), one hop 2000 ps.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mapping/collective/collective.h"
#include "sim/analytical/analytical.h"
#include "sim/tlm/tlm_engine.h"
#include "tests/mapping/program_test_util.h"
#include "tests/sim/test_mesh.h"

namespace tpsim::sim {
namespace {

using Program = mapping::testing::TestProgram;
using test::Core;
using test::Mesh;

// Ranks 0..3 on r0c0, r0c1, r1c0, r1c1 (a 2x2 rank grid); only the diagonal pairs send, each of
// which direct would send 2 hops: 0->3 160,000 B, 1->2 320,000, 2->1 480,000, 3->0 640,000.
const std::vector<std::vector<uint64_t>> kDiagonal = {
    {0, 0, 0, 160'000}, {0, 0, 320'000, 0}, {0, 480'000, 0, 0}, {640'000, 0, 0, 0}};
const std::vector<int> kCores = {Core(0, 0), Core(0, 1), Core(1, 0), Core(1, 1)};

// The transfers of `s` with the lowering's deps (mapping/moe_pass.cc: a step's transfer from r
// waits for everything r received in the earlier steps); rank of each task's sender in *src.
Program AllToAllVProgram(const mapping::Schedule& s, std::vector<int>* src) {
  Program p;
  p.num_cores = 64;
  p.num_channels = 1;
  p.ops.push_back(mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "op", "a2a"}, 0, 0, 0});
  p.collectives.push_back(mapping::CollectiveInfo{
      mapping::CollectiveKind::kAllToAll, mapping::AlgorithmOf(s.algorithm), 640'000, 4, mapping::OpId(0)});
  std::vector<std::vector<mapping::TaskId>> got(4);
  for (size_t k = 0; k < s.steps.size(); ++k) {
    std::vector<std::vector<mapping::TaskId>> now(4);
    for (const mapping::Xfer& x : s.steps[k].xfers) {
      mapping::testing::TestTask t;
      t.id = mapping::TaskId(static_cast<uint32_t>(p.tasks.size()));
      t.kind = mapping::TaskKind::kTransfer;
      t.core = mapping::CoreId(kCores[x.src]);
      t.dst_core = mapping::CoreId(kCores[x.dst]);
      t.bytes = x.bytes;
      t.collective = 0;
      t.coll_step = static_cast<uint16_t>(k);
      t.deps = got[x.src];
      now[x.dst].push_back(t.id);
      p.tasks.push_back(std::move(t));
      src->push_back(x.src);
    }
    for (int r = 0; r < 4; ++r) got[r].insert(got[r].end(), now[r].begin(), now[r].end());
  }
  return p;
}

// Step 1 (rows) takes each block to the sender's row-mate in the destination's column, step 2
// (columns) on to the destination, each after the forwarder received its step-1 block. Every
// transfer is alone on its link: 1 hop (2000 ps) + bytes / 160 B/ns.
//   step 1: 0->1 1,002,000   1->0 2,002,000   2->3 3,002,000   3->2 4,002,000
//   step 2: 1->3 1,002,000 + 1,002,000 = 2,004,000     0->2 2,002,000 + 2,002,000 = 4,004,000
//           3->1 3,002,000 + 3,002,000 = 6,004,000     2->0 4,002,000 + 4,002,000 = 8,004,000
// Direct sends the same blocks 2 hops each on distinct links (cut-through): the last ends at
// 4000 + 640,000 / 0.16 = 4,004,000. On a mesh the second step's store-and-forward costs what
// aggregation would save, and neither engine charges per message.
const int64_t kEnds[2][4] = {{1'002'000, 2'002'000, 3'002'000, 4'002'000},   // step 1, by sender
                             {4'004'000, 2'004'000, 8'004'000, 6'004'000}};  // step 2

void ExpectHandTimes(const EngineOutput& out, const Program& p, const std::vector<int>& src) {
  ASSERT_EQ(p.tasks.size(), 8u);
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    EXPECT_EQ(Mesh().Hops(p.tasks[i].core, p.tasks[i].dst_core), 1) << i;
    EXPECT_EQ(out.tasks[i].end_ps, kEnds[p.tasks[i].coll_step][src[i]]) << i;
  }
  EXPECT_EQ(out.makespan_ps, 8'004'000);
}

TEST(AnalyticalEngine, HierarchicalAllToAllVOnTwoByTwoBlockByHand) {
  const mapping::Schedule s = mapping::LowerAllToAllV("hierarchical", kDiagonal, nullptr, {2, 2});
  ASSERT_EQ(s.steps.size(), 2u);
  std::vector<int> src;
  const Program p = AllToAllVProgram(s, &src);
  ExpectHandTimes(AnalyticalEngine().Run(p, Mesh()), p, src);
  std::vector<int> dsrc;
  const Program d = AllToAllVProgram(mapping::LowerAllToAllV("direct", kDiagonal), &dsrc);
  EXPECT_EQ(AnalyticalEngine().Run(d, Mesh()).makespan_ps, 4'004'000);
  // mapping.moe.all_to_all auto's cost formula (per step, the most bytes on one link; every link
  // carries one block here): hierarchical 640,000 in each of its 2 steps, direct and pairwise
  // (whose only non-empty step is r XOR 3, the diagonal) 640,000 in one.
  EXPECT_EQ(mapping::AllToAllVLinkBytes(Mesh(), s, kCores), 1'280'000u);
  EXPECT_EQ(mapping::AllToAllVLinkBytes(Mesh(), mapping::LowerAllToAllV("direct", kDiagonal), kCores),
            640'000u);
  EXPECT_EQ(mapping::AllToAllVLinkBytes(Mesh(), mapping::LowerAllToAllV("pairwise", kDiagonal), kCores),
            640'000u);
}

TEST(TlmEngine, HierarchicalAllToAllVOnTwoByTwoBlockMatchesClosedForm) {
  const mapping::Schedule s = mapping::LowerAllToAllV("hierarchical", kDiagonal, nullptr, {2, 2});
  std::vector<int> src;
  const Program p = AllToAllVProgram(s, &src);
  ExpectHandTimes(MakeTlmEngine()->Run(p, Mesh()), p, src);
}

}  // namespace
}  // namespace tpsim::sim
