// halving_doubling (Rabenseifner), P a power of two; any other P falls back to ring.
//   reduce_scatter (recursive halving): log2 P steps; at step t rank r pairs with
//     r ^ (P >> (t+1)); both hold the same span of chunks, the rank whose bit is 0
//     keeps the lower half and adds the upper half into its partner (and vice versa).
//     Rank r ends with chunk r.
//   all_gather (recursive doubling): log2 P steps; at step t rank r writes its span
//     (2^t chunks) into r ^ 2^t.
//   all_reduce: both, 2 log2 P steps.
//   all_to_all: P-1 pairwise swaps, round t (1..P-1) pairs r with r ^ t.
//   rotate: a ring rotation, with a note.

#include "mapping/collective/algorithm.h"

namespace tpsim::mapping::collective {

namespace {

size_t Halving(const Args& a, size_t first, std::vector<CollectiveStep>* steps) {
  const int p = a.ranks;
  size_t t = 0;
  for (int dist = p / 2; dist >= 1; dist /= 2, ++t) {
    for (int r = 0; r < p; ++r) {
      const int lo = r & ~(2 * dist - 1), mid = lo + dist, hi = lo + 2 * dist;
      const bool upper = (r & dist) != 0;
      const Range give =
          upper ? ChunkSpan(a.bytes, p, lo, mid, a.align) : ChunkSpan(a.bytes, p, mid, hi, a.align);
      AddXfers(steps, first + t, r, r ^ dist, {give}, true);
    }
  }
  return t;
}

size_t Doubling(const Args& a, size_t first, std::vector<CollectiveStep>* steps) {
  const int p = a.ranks;
  size_t t = 0;
  for (int dist = 1; dist < p; dist *= 2, ++t) {
    for (int r = 0; r < p; ++r) {
      const int lo = r & ~(dist - 1);
      AddXfers(steps, first + t, r, r ^ dist, {ChunkSpan(a.bytes, p, lo, lo + dist, a.align)}, false);
    }
  }
  return t;
}

int XorPartner(int /*rounds*/, int /*ranks*/, int round, int r) { return r ^ (round + 1); }

Schedule LowerHalvingDoubling(const Args& a) {
  const int p = a.ranks;
  if ((p & (p - 1)) != 0) {
    return RingFallback(
        a, "halving_doubling needs a power-of-two rank count, got " + std::to_string(p) + ": used ring");
  }
  if (a.kind == CollectiveKind::kRotate) {
    return RingFallback(a, "halving_doubling: rotate is always a ring rotation");
  }
  Schedule s;
  s.algorithm = "halving_doubling";
  switch (a.kind) {
    case CollectiveKind::kAllReduce:
      Doubling(a, Halving(a, 0, &s.steps), &s.steps);
      break;
    case CollectiveKind::kReduceScatter:
      Halving(a, 0, &s.steps);
      break;
    case CollectiveKind::kAllGather:
      Doubling(a, 0, &s.steps);
      break;
    case CollectiveKind::kAllToAll:
      PairwiseAllToAll(a, p - 1, &XorPartner, &s.steps);
      break;
    case CollectiveKind::kRotate:
      break;
    case CollectiveKind::kP2p:  // no algorithm lowers it (LowerCollective refuses)
      break;
  }
  return s;
}

const CollectiveRegistrar kRegistered(
    "halving_doubling", "recursive halving and doubling (Rabenseifner); P a power of two, else ring",
    &LowerHalvingDoubling);

}  // namespace
}  // namespace tpsim::mapping::collective
