// The collective registry: public entry points and the name -> algorithm table.
// Adding an algorithm is one new .cc plus one line here (an explicit table rather
// than static self-registration, which a static library silently drops).

#include <stdexcept>

#include "mapping/collective/algorithm.h"

namespace tpsim::mapping {
namespace {

constexpr collective::Algorithm kAlgorithms[] = {
    {"ring", &collective::LowerRing},      {"bidirectional_ring", &collective::LowerBidirectionalRing},
    {"mesh_2d", &collective::LowerMesh2d}, {"halving_doubling", &collective::LowerHalvingDoubling},
    {"direct", &collective::LowerDirect},  {"nvls", &collective::LowerNvls},
};

constexpr int kMaxRanks = 1024;  // ring all_reduce at 1024 ranks is already 2M transfers

std::string JoinNames() {
  std::string out;
  for (const auto& a : kAlgorithms) out += (out.empty() ? "" : ", ") + std::string(a.name);
  return out;
}

}  // namespace

const char* ToString(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kRotate:
      return "rotate";
  }
  return "unknown";
}

void ChunkRange(uint64_t bytes, int p, int c, uint64_t align, uint64_t* offset, uint64_t* len) {
  if (align == 0) align = 1;
  if (p < 1 || c < 0 || c >= p) {
    *offset = 0;
    *len = 0;
    return;
  }
  const uint64_t base = bytes / align / static_cast<uint64_t>(p) * align;
  *offset = base * static_cast<uint64_t>(c);
  *len = c == p - 1 ? bytes - *offset : base;
}

std::vector<std::string> CollectiveNames() {
  std::vector<std::string> names;
  for (const auto& a : kAlgorithms) names.emplace_back(a.name);
  return names;
}

Schedule LowerCollective(const std::string& algorithm, CollectiveKind kind, int ranks, uint64_t bytes,
                         uint64_t align, RankGrid grid) {
  const collective::Algorithm* found = nullptr;
  for (const auto& a : kAlgorithms) {
    if (algorithm == a.name) found = &a;
  }
  if (found == nullptr) {
    throw std::invalid_argument("unknown collective algorithm '" + algorithm + "' (valid: " + JoinNames() +
                                ")");
  }
  if (ranks < 1 || ranks > kMaxRanks) {
    throw std::invalid_argument("collective over " + std::to_string(ranks) + " ranks: ranks must be in [1, " +
                                std::to_string(kMaxRanks) + "]");
  }
  if (ranks == 1 || bytes == 0) {
    Schedule s;
    s.algorithm = algorithm;
    return s;
  }
  collective::Args args{kind, ranks, bytes, align == 0 ? 1 : align, grid};
  Schedule s = found->lower(args);
  std::erase_if(s.steps, [](const CollectiveStep& st) { return st.xfers.empty(); });
  return s;
}

}  // namespace tpsim::mapping
