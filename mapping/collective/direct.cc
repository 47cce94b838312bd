// direct: every rank talks to every other rank in one step.
//   reduce_scatter: rank r adds chunk d into rank d, for all d != r (1 step).
//   all_gather:     rank r writes chunk r into every other rank (1 step).
//   all_reduce:     the two above, 2 steps.
//   all_to_all:     rank r's chunk d lands in rank d's chunk r (1 step).
//   rotate:         a ring rotation (rotation is sequential by nature), with a note.
//
// Order within a step: destinations by distance, k = 1 .. P-1 outer, every rank r inner,
// d = (r + k) mod P (as LowerDirectV in all_to_all_v.cc orders the uneven all_to_all). A
// core's transfers queue first come first served for its outgoing link, in task order, so the
// order is its issue order: by distance, each of the P-1 rounds sends one flow into every rank
// (a permutation), and on a switch the P-1 flows into a rank arrive one per round, ending at
// (P-1) T (T = one chunk over one link). Destinations in index order would send every rank's
// first flow to rank 0 and its last to rank P-1 (P-2 for rank P-1 itself), so that P-1 flows
// would reach rank P-1's downlink at once at (P-2) T and end at (2P-3) T. The order changes no
// dependency: a transfer waits for the transfers of the earlier step into its source rank (and,
// reducing, for the destination's data), whatever their order within the step.

#include "mapping/collective/algorithm.h"

namespace tpsim::mapping::collective {

namespace {

// Every rank r sends chunk d to rank d (reduce) or its own chunk r to every d, by distance.
void DirectPass(const Args& a, bool reduce, size_t step, std::vector<CollectiveStep>* steps) {
  for (int k = 1; k < a.ranks; ++k) {
    for (int r = 0; r < a.ranks; ++r) {
      const int d = (r + k) % a.ranks;
      AddXfers(steps, step, r, d, {Chunk(a.bytes, a.ranks, reduce ? d : r, a.align)}, reduce);
    }
  }
}

Schedule LowerDirect(const Args& a) {
  Schedule s;
  s.algorithm = "direct";
  switch (a.kind) {
    case CollectiveKind::kAllReduce:
      DirectPass(a, true, 0, &s.steps);
      DirectPass(a, false, 1, &s.steps);
      break;
    case CollectiveKind::kReduceScatter:
      DirectPass(a, true, 0, &s.steps);
      break;
    case CollectiveKind::kAllGather:
      DirectPass(a, false, 0, &s.steps);
      break;
    case CollectiveKind::kAllToAll: {
      CheckEqualChunks(a);
      s.steps.resize(1);
      for (int k = 1; k < a.ranks; ++k) {
        for (int r = 0; r < a.ranks; ++r) s.steps[0].xfers.push_back(AllToAllXfer(a, r, (r + k) % a.ranks));
      }
      break;
    }
    case CollectiveKind::kRotate:
      return RingFallback(a, "direct: rotate is always a ring rotation");
    case CollectiveKind::kP2p:  // no algorithm lowers it (LowerCollective refuses)
      break;
  }
  return s;
}

const CollectiveRegistrar kRegistered("direct", "every rank to every other rank in one step", &LowerDirect);

}  // namespace
}  // namespace tpsim::mapping::collective
