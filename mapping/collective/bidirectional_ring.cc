// bidirectional_ring: every chunk r is cut in two halves (ChunkRange(len, 2, .)); the
// first halves run the ring passes clockwise (r -> r+1), the second halves counter-
// clockwise (r -> r-1), in the same steps. Same step count as ring, half the bytes
// per transfer in each direction. rotate rotates the halves both ways the same way.
// all_to_all is the ring's pairwise exchange.

#include "mapping/collective/algorithm.h"

namespace tpsim::mapping::collective {

namespace {

Schedule LowerBidirectionalRing(const Args& a) {
  Schedule s;
  s.algorithm = "bidirectional_ring";
  const int p = a.ranks;
  if (a.kind == CollectiveKind::kAllToAll) {
    RoundRobinAllToAll(a, &s.steps);
    return s;
  }
  std::vector<int> cw = Iota(p), ccw(p);
  for (int m = 0; m < p; ++m) ccw[m] = (p - m) % p;
  std::vector<Segment> cw_seg(p), ccw_seg(p);
  for (int r = 0; r < p; ++r) {
    const Range chunk = Chunk(a.bytes, p, r, a.align);
    cw_seg[r] = {SubChunk(chunk, 2, 0, a.align)};
  }
  for (int m = 0; m < p; ++m) ccw_seg[m] = {SubChunk(Chunk(a.bytes, p, ccw[m], a.align), 2, 1, a.align)};

  auto pass = [&](bool reduce, size_t first) {
    if (reduce) {
      RingReduceScatter(cw, cw_seg, first, &s.steps);
      return RingReduceScatter(ccw, ccw_seg, first, &s.steps);
    }
    RingAllGather(cw, cw_seg, first, &s.steps);
    return RingAllGather(ccw, ccw_seg, first, &s.steps);
  };
  switch (a.kind) {
    case CollectiveKind::kAllReduce:
      pass(false, pass(true, 0));
      break;
    case CollectiveKind::kReduceScatter:
      pass(true, 0);
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kRotate:
      pass(false, 0);
      break;
    case CollectiveKind::kAllToAll:
      break;
    case CollectiveKind::kP2p:  // no algorithm lowers it (LowerCollective refuses)
      break;
  }
  return s;
}

const CollectiveRegistrar kRegistered("bidirectional_ring",
                                      "ring passes both ways round at once, half of each chunk each way",
                                      &LowerBidirectionalRing);

}  // namespace
}  // namespace tpsim::mapping::collective
