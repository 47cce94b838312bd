// LowerCollective(): the checks every algorithm shares, then the registered algorithm by
// name; and the helpers of collective.h that belong to no one algorithm.

#include <algorithm>
#include <stdexcept>

#include "configs/files.h"
#include "mapping/collective/algorithm.h"

namespace tpsim::mapping {
namespace {

constexpr int kMaxRanks = 1024;  // ring all_reduce at 1024 ranks is already 2M transfers

}  // namespace

void ChunkRange(uint64_t bytes, int p, int c, uint64_t align, uint64_t* offset, uint64_t* len) {
  if (align == 0) align = 1;
  if (p < 1 || c < 0 || c >= p) {
    *offset = 0;
    *len = 0;
    return;
  }
  // Balanced: the first units % p chunks take one unit more, so chunks differ by at most
  // one unit (a remainder all on the last chunk made its rank the straggler of every
  // collective and split). Bytes past the last whole unit stay on the last chunk.
  const uint64_t units = bytes / align, n = static_cast<uint64_t>(p), i = static_cast<uint64_t>(c);
  const uint64_t base = units / n, extra = units % n;
  *offset = (i * base + std::min(i, extra)) * align;
  *len = (base + (i < extra ? 1 : 0)) * align;
  if (c == p - 1) *len = bytes - *offset;
}

namespace {
// Every algorithm a CollectiveInfo may name (AlgorithmId): the registered ones, the uneven
// all_to_all's and "nccl", sorted; built on first use, after static initialisation has
// registered them all.
const std::vector<std::string>& AlgorithmTable() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t = collective::CollectiveRegistry::Get().Names();
    for (const std::string& n : collective::AllToAllVRegistry::Get().Names()) t.push_back(n);
    t.push_back("nccl");
    std::sort(t.begin(), t.end());
    t.erase(std::unique(t.begin(), t.end()), t.end());
    if (t.size() > 256)
      throw std::logic_error("more than 256 collective algorithms for an 8-bit AlgorithmId");
    return t;
  }();
  return table;
}
}  // namespace

const std::string& ToString(AlgorithmId a) {
  const std::vector<std::string>& t = AlgorithmTable();
  const size_t i = static_cast<size_t>(a);
  static const std::string kUnknown = "?";
  return i < t.size() ? t[i] : kUnknown;
}

std::optional<AlgorithmId> ParseAlgorithm(std::string_view name) {
  const std::vector<std::string>& t = AlgorithmTable();
  const auto it = std::lower_bound(t.begin(), t.end(), name);
  if (it == t.end() || *it != name) return std::nullopt;
  return static_cast<AlgorithmId>(it - t.begin());
}

AlgorithmId AlgorithmOf(std::string_view name) {
  if (const std::optional<AlgorithmId> a = ParseAlgorithm(name)) return *a;
  throw std::invalid_argument("unknown collective algorithm '" + std::string(name) +
                              "' (known: " + config::JoinNames(AlgorithmTable()) + ")");
}

std::vector<std::string> CollectiveNames() { return collective::CollectiveRegistry::Get().Names(); }

Schedule LowerCollective(const std::string& algorithm, CollectiveKind kind, int ranks, uint64_t bytes,
                         uint64_t align, RankGrid grid) {
  const collective::LowerFn* lower = collective::CollectiveRegistry::Get().Find(algorithm);
  if (lower == nullptr) {
    throw std::invalid_argument("unknown collective algorithm '" + algorithm +
                                "' (valid: " + collective::CollectiveRegistry::Get().NamesText() + ")");
  }
  if (kind == CollectiveKind::kP2p)
    throw std::invalid_argument("p2p is not a collective an algorithm lowers");
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
  Schedule s = (*lower)(args);
  std::erase_if(s.steps, [](const CollectiveStep& st) { return st.xfers.empty(); });
  return s;
}

}  // namespace tpsim::mapping
