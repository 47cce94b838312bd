// ring: rank r sends to rank r+1 (mod P). Buffer cut into P chunks (ChunkRange).
//   reduce_scatter: P-1 steps; step s, rank r adds chunk (r-s-1) mod P into rank r+1.
//   all_gather / rotate: P-1 steps; step s, rank r writes chunk (r-s) mod P into rank r+1.
//   all_reduce: reduce_scatter then all_gather, 2(P-1) steps of bytes/P per rank.
//   all_to_all: round-robin pairwise swaps (P-1 rounds for even P, P for odd), since
//               relaying through neighbours would need scratch space in the buffer.

#include "mapping/collective/algorithm.h"

namespace tpsim::mapping::collective {

Schedule LowerRing(const Args& a) {
  Schedule s;
  s.algorithm = "ring";
  const std::vector<int> group = Iota(a.ranks);
  std::vector<Segment> seg(a.ranks);
  for (int r = 0; r < a.ranks; ++r) seg[r] = {Chunk(a.bytes, a.ranks, r, a.align)};
  switch (a.kind) {
    case CollectiveKind::kAllReduce: {
      const size_t n = RingReduceScatter(group, seg, 0, &s.steps);
      RingAllGather(group, seg, n, &s.steps);
      break;
    }
    case CollectiveKind::kReduceScatter:
      RingReduceScatter(group, seg, 0, &s.steps);
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kRotate:
      RingAllGather(group, seg, 0, &s.steps);
      break;
    case CollectiveKind::kAllToAll:
      RoundRobinAllToAll(a, &s.steps);
      break;
    case CollectiveKind::kP2p:  // no algorithm lowers it (LowerCollective refuses)
      break;
  }
  return s;
}

namespace {
const CollectiveRegistrar kRegistered("ring", "ring passes: rank r sends to r+1; P-1 steps per pass",
                                      &LowerRing);
}  // namespace

}  // namespace tpsim::mapping::collective
