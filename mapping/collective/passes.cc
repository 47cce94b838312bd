#include <stdexcept>

#include "mapping/collective/algorithm.h"

namespace tpsim::mapping::collective {

Range Chunk(uint64_t bytes, int p, int c, uint64_t align) {
  Range r;
  ChunkRange(bytes, p, c, align, &r.offset, &r.bytes);
  return r;
}

Range SubChunk(Range r, int p, int c, uint64_t align) {
  Range sub = Chunk(r.bytes, p, c, align);
  sub.offset += r.offset;
  return sub;
}

Range ChunkSpan(uint64_t bytes, int p, int first, int last, uint64_t align) {
  const Range a = Chunk(bytes, p, first, align);
  const Range b = Chunk(bytes, p, last - 1, align);
  return {a.offset, b.offset + b.bytes - a.offset};
}

void AddXfers(std::vector<CollectiveStep>* steps, size_t step, int src, int dst, const Segment& seg,
              bool reduce) {
  if (steps->size() <= step) steps->resize(step + 1);
  for (const Range& r : seg) {
    if (r.bytes == 0) continue;
    Xfer x;
    x.src = src;
    x.dst = dst;
    x.offset = r.offset;
    x.bytes = r.bytes;
    x.reduce = reduce;
    (*steps)[step].xfers.push_back(x);
  }
}

size_t RingReduceScatter(const std::vector<int>& group, const std::vector<Segment>& seg, size_t first,
                         std::vector<CollectiveStep>* steps) {
  const int n = static_cast<int>(group.size());
  for (int s = 0; s + 1 < n; ++s) {
    for (int m = 0; m < n; ++m) {
      const int share = ((m - s - 1) % n + n) % n;
      AddXfers(steps, first + s, group[m], group[(m + 1) % n], seg[share], true);
    }
  }
  return n > 0 ? n - 1 : 0;
}

size_t RingAllGather(const std::vector<int>& group, const std::vector<Segment>& seg, size_t first,
                     std::vector<CollectiveStep>* steps) {
  const int n = static_cast<int>(group.size());
  for (int s = 0; s + 1 < n; ++s) {
    for (int m = 0; m < n; ++m) {
      const int share = ((m - s) % n + n) % n;
      AddXfers(steps, first + s, group[m], group[(m + 1) % n], seg[share], false);
    }
  }
  return n > 0 ? n - 1 : 0;
}

void CheckEqualChunks(const Args& a) {
  if (a.bytes % (static_cast<uint64_t>(a.ranks) * a.align) != 0) {
    throw std::invalid_argument("all_to_all of " + std::to_string(a.bytes) + " bytes over " +
                                std::to_string(a.ranks) + " ranks: bytes must be a multiple of ranks * " +
                                std::to_string(a.align) + " (element size) so every chunk has the same size");
  }
}

Xfer AllToAllXfer(const Args& a, int r, int d) {
  const Range src = Chunk(a.bytes, a.ranks, d, a.align);
  Xfer x;
  x.src = r;
  x.dst = d;
  x.offset = src.offset;
  x.bytes = src.bytes;
  x.dst_offset = Chunk(a.bytes, a.ranks, r, a.align).offset;
  return x;
}

void PairwiseAllToAll(const Args& a, int rounds, PartnerFn partner, std::vector<CollectiveStep>* steps) {
  CheckEqualChunks(a);
  const size_t first = steps->size();
  steps->resize(first + rounds);
  for (int t = 0; t < rounds; ++t) {
    for (int r = 0; r < a.ranks; ++r) {
      const int d = partner(rounds, a.ranks, t, r);
      if (d >= 0 && d != r) (*steps)[first + t].xfers.push_back(AllToAllXfer(a, r, d));
    }
  }
}

namespace {

// Circle method over an odd number m of players: in round t, i and j meet when
// (i + j) = t (mod m); the one with 2i = t (mod m) sits out, or meets player m
// when the real count is even.
int RoundRobinPartner(int /*rounds*/, int ranks, int round, int r) {
  const int m = ranks % 2 == 1 ? ranks : ranks - 1;
  if (r == m) return static_cast<int>(static_cast<int64_t>(round) * ((m + 1) / 2) % m);  // 2i = round

  const int j = ((round - r) % m + m) % m;
  if (j != r) return j;
  return ranks % 2 == 1 ? -1 : m;
}

}  // namespace

void RoundRobinAllToAll(const Args& a, std::vector<CollectiveStep>* steps) {
  PairwiseAllToAll(a, a.ranks % 2 == 1 ? a.ranks : a.ranks - 1, &RoundRobinPartner, steps);
}

Schedule RingFallback(const Args& a, const std::string& note) {
  Schedule s = LowerRing(a);
  s.note = note;
  return s;
}

std::vector<int> Iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace tpsim::mapping::collective
