// The uneven all_to_all (collective.h, LowerAllToAllV): MoE token dispatch and combine. The
// checks every algorithm shares, the registered algorithm by name, the "auto" rule, and direct:
//   direct  one step: every non-empty block r -> d (r != d) at once. Send and receive blocks
//           share one region of the buffer (send: by destination, receive: by source), which
//           one step may do since every transfer of a step reads before any writes.

#include <algorithm>
#include <stdexcept>

#include "arch/chip.h"
#include "mapping/collective/algorithm.h"

namespace tpsim::mapping {
namespace collective {

uint64_t PackBySendOrder(const std::vector<std::vector<uint64_t>>& bytes, uint64_t base,
                         std::vector<std::vector<uint64_t>>* send) {
  const size_t p = bytes.size();
  send->assign(p, std::vector<uint64_t>(p, base));
  uint64_t most = 0;
  for (size_t r = 0; r < p; ++r) {
    uint64_t at = base;
    for (size_t d = 0; d < p; ++d) (*send)[r][d] = at, at += bytes[r][d];
    most = std::max(most, at - base);
  }
  return most;
}

uint64_t PackByRecvOrder(const std::vector<std::vector<uint64_t>>& bytes, uint64_t base,
                         std::vector<std::vector<uint64_t>>* recv) {
  const size_t p = bytes.size();
  recv->assign(p, std::vector<uint64_t>(p, base));
  uint64_t most = 0;
  for (size_t d = 0; d < p; ++d) {
    uint64_t at = base;
    for (size_t r = 0; r < p; ++r) (*recv)[r][d] = at, at += bytes[r][d];
    most = std::max(most, at - base);
  }
  return most;
}

void AddBlock(std::vector<CollectiveStep>* steps, size_t step, int src, int dst, uint64_t offset,
              uint64_t bytes, uint64_t dst_offset) {
  if (bytes == 0) return;
  if (steps->size() <= step) steps->resize(step + 1);
  Xfer x;
  x.src = src, x.dst = dst;
  x.offset = offset;
  x.bytes = bytes;
  x.dst_offset = dst_offset;
  (*steps)[step].xfers.push_back(x);
}

namespace {

Schedule LowerDirectV(const AllToAllVArgs& a, AllToAllVLayout* layout) {
  const std::vector<std::vector<uint64_t>>& b = *a.bytes;
  const uint64_t send = PackBySendOrder(b, 0, &layout->send_offset);
  const uint64_t recv = PackByRecvOrder(b, 0, &layout->recv_offset);
  layout->buffer_bytes = std::max(send, recv);
  Schedule s;
  s.algorithm = "direct";
  // Destination-major within the step, by distance k = d - r mod P (the order the engines saw
  // before this registry: unchanged task ids).
  for (int k = 1; k < a.ranks; ++k)
    for (int r = 0; r < a.ranks; ++r) {
      const int d = (r + k) % a.ranks;
      AddBlock(&s.steps, 0, r, d, layout->send_offset[r][d], b[r][d], layout->recv_offset[r][d]);
    }
  return s;
}

const AllToAllVRegistrar kRegistered("direct", "every non-empty block at once, one step", &LowerDirectV);

}  // namespace
}  // namespace collective

Schedule LowerAllToAllV(const std::string& algorithm, const std::vector<std::vector<uint64_t>>& bytes,
                        AllToAllVLayout* layout, RankGrid grid) {
  const int p = static_cast<int>(bytes.size());
  for (const std::vector<uint64_t>& row : bytes)
    if (static_cast<int>(row.size()) != p)
      throw std::invalid_argument("all_to_all_v: the byte matrix must be square");
  const collective::VLowerFn* lower = collective::AllToAllVRegistry::Get().Find(algorithm);
  if (lower == nullptr)
    throw std::invalid_argument("unknown all_to_all algorithm '" + algorithm +
                                "' (valid: " + collective::AllToAllVRegistry::Get().NamesText() + ")");
  if ((grid.rows != 0 || grid.cols != 0) &&
      (grid.rows < 1 || grid.cols < 1 || static_cast<int64_t>(grid.rows) * grid.cols != p))
    throw std::invalid_argument("all_to_all_v grid " + std::to_string(grid.rows) + "x" +
                                std::to_string(grid.cols) + " does not have " + std::to_string(p) + " ranks");
  AllToAllVLayout own;
  if (layout == nullptr) layout = &own;
  Schedule s;
  if (p < 2) {
    s.algorithm = algorithm;
    collective::PackBySendOrder(bytes, 0, &layout->send_offset);
    collective::PackByRecvOrder(bytes, 0, &layout->recv_offset);
    layout->buffer_bytes = p == 1 ? bytes[0][0] : 0;
    return s;
  }
  s = (*lower)(collective::AllToAllVArgs{&bytes, p, grid}, layout);
  std::erase_if(s.steps, [](const CollectiveStep& st) { return st.xfers.empty(); });
  return s;
}

std::vector<std::string> AllToAllVNames() { return collective::AllToAllVRegistry::Get().Names(); }

uint64_t AllToAllVLinkBytes(const arch::Chip& chip, const Schedule& s, const std::vector<int>& cores) {
  uint64_t total = 0;
  std::vector<uint64_t> load(chip.links().size(), 0);
  for (const CollectiveStep& st : s.steps) {
    std::fill(load.begin(), load.end(), 0);
    for (const Xfer& x : st.xfers)
      for (int l : chip.Route(cores[x.src], cores[x.dst])) load[l] += x.bytes;
    total += *std::max_element(load.begin(), load.end());
  }
  return total;
}

}  // namespace tpsim::mapping
