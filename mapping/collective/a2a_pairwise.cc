// pairwise (uneven all_to_all): P - 1 steps; in step k (1..P-1) rank r sends its block for
// partner(r, k) and receives the block of the rank whose partner it is:
//   P a power of two:  partner = r XOR k (each pair swaps: both directions of one pair)
//   any other P:       partner = (r + k) mod P (a shift: r sends to r + k, receives from r - k)
// so every rank sends one block and receives one per step. Steps are synchronous: a rank's
// step-k transfer waits for what it received in earlier steps (the lowering's deps). Buffer:
// send blocks by destination in [0, S), received blocks by source from S (S: the largest row
// sum), so a later step never overwrites a block still to be sent.
//
//   4 ranks, XOR:   step 1: 0<->1 2<->3   step 2: 0<->2 1<->3   step 3: 0<->3 1<->2

#include "mapping/collective/algorithm.h"

namespace tpsim::mapping::collective {
namespace {

Schedule LowerPairwiseV(const AllToAllVArgs& a, AllToAllVLayout* layout) {
  const std::vector<std::vector<uint64_t>>& b = *a.bytes;
  const int p = a.ranks;
  const uint64_t send = PackBySendOrder(b, 0, &layout->send_offset);
  layout->buffer_bytes = send + PackByRecvOrder(b, send, &layout->recv_offset);
  const bool xor_pairs = (p & (p - 1)) == 0;
  Schedule s;
  s.algorithm = "pairwise";
  s.steps.resize(static_cast<size_t>(p - 1));
  for (int k = 1; k < p; ++k)
    for (int r = 0; r < p; ++r) {
      const int d = xor_pairs ? r ^ k : (r + k) % p;
      AddBlock(&s.steps, static_cast<size_t>(k - 1), r, d, layout->send_offset[r][d], b[r][d],
               layout->recv_offset[r][d]);
    }
  return s;
}

const AllToAllVRegistrar kRegistered("pairwise",
                                     "P - 1 steps of pairwise exchange (partner r XOR k, or r + k mod P)",
                                     &LowerPairwiseV);

}  // namespace
}  // namespace tpsim::mapping::collective
