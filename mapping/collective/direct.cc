// direct: every rank talks to every other rank in one step.
//   reduce_scatter: rank r adds chunk d into rank d, for all d != r (1 step).
//   all_gather:     rank r writes chunk r into every other rank (1 step).
//   all_reduce:     the two above, 2 steps.
//   all_to_all:     rank r's chunk d lands in rank d's chunk r (1 step).
//   rotate:         a ring rotation (rotation is sequential by nature), with a note.

#include "mapping/collective/algorithm.h"

namespace tpsim::mapping::collective {

namespace {

void DirectPass(const Args& a, bool reduce, size_t step, std::vector<CollectiveStep>* steps) {
  for (int r = 0; r < a.ranks; ++r) {
    for (int d = 0; d < a.ranks; ++d) {
      if (d == r) continue;
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
      for (int r = 0; r < a.ranks; ++r) {
        for (int d = 0; d < a.ranks; ++d) {
          if (d != r) s.steps[0].xfers.push_back(AllToAllXfer(a, r, d));
        }
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
