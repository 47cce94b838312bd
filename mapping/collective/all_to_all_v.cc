// The uneven all_to_all (collective.h, LowerAllToAllV): MoE token dispatch and combine.
//   direct    one step: every non-empty block r -> d (r != d) at once
//   otherwise pairwise exchange: P - 1 steps, step k sends r -> (r + k) mod P, so each rank
//             sends one block and receives one per step (Schedule::note says so)

#include <stdexcept>

#include "mapping/collective/algorithm.h"

namespace tpsim::mapping {

Schedule LowerAllToAllV(const std::string& algorithm, const std::vector<std::vector<uint64_t>>& bytes) {
  const int p = static_cast<int>(bytes.size());
  for (const std::vector<uint64_t>& row : bytes)
    if (static_cast<int>(row.size()) != p)
      throw std::invalid_argument("all_to_all_v: the byte matrix must be square");
  if (collective::CollectiveRegistry::Get().Find(algorithm) == nullptr)
    throw std::invalid_argument("unknown collective algorithm '" + algorithm +
                                "' (valid: " + collective::CollectiveRegistry::Get().NamesText() + ")");
  Schedule s;
  s.algorithm = algorithm;
  const bool direct = algorithm == "direct";
  if (!direct && p > 1) s.note = algorithm + ": uneven all_to_all as pairwise exchange";
  // Offsets: sender's blocks by destination, receiver's by source.
  std::vector<std::vector<uint64_t>> send_off(p, std::vector<uint64_t>(p, 0)), recv_off = send_off;
  for (int r = 0; r < p; ++r)
    for (int d = 1; d < p; ++d) send_off[r][d] = send_off[r][d - 1] + bytes[r][d - 1];
  for (int d = 0; d < p; ++d)
    for (int r = 1; r < p; ++r) recv_off[r][d] = recv_off[r - 1][d] + bytes[r - 1][d];
  s.steps.resize(direct ? 1 : std::max(0, p - 1));
  for (int k = 1; k < p; ++k)
    for (int r = 0; r < p; ++r) {
      const int d = (r + k) % p;
      if (bytes[r][d] == 0) continue;
      Xfer x;
      x.src = r, x.dst = d;
      x.offset = send_off[r][d];
      x.bytes = bytes[r][d];
      x.dst_offset = recv_off[r][d];
      s.steps[direct ? 0 : static_cast<size_t>(k - 1)].xfers.push_back(x);
    }
  std::erase_if(s.steps, [](const CollectiveStep& st) { return st.xfers.empty(); });
  return s;
}

}  // namespace tpsim::mapping
