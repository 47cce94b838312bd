#pragma once
// Internal to mapping/collective: the algorithm registry and the building blocks
// every algorithm is made of (ring passes over a group of ranks, pairwise
// exchange rounds). Not part of the public interface.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "configs/registry.h"
#include "mapping/collective/collective.h"

namespace tpsim::mapping::collective {

struct Args {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int ranks = 0;       // >= 2 (LowerCollective handles 1)
  uint64_t bytes = 0;  // > 0
  uint64_t align = 1;  // >= 1
  RankGrid grid;
};

using LowerFn = Schedule (*)(const Args&);

// The registry of collective algorithms by name (mapping.collective). Adding an algorithm is
// one new file in this folder defining a LowerFn and its registrar (direct.cc is a small
// example):
//
//   const CollectiveRegistrar kRegistered("tree", "one line on the pattern", &LowerTree);
struct CollectiveAlgorithmKind {
  using Value = LowerFn;
  static constexpr std::string_view kName = "collective";
};
using CollectiveRegistry = Registry<CollectiveAlgorithmKind>;
using CollectiveRegistrar = Registrar<CollectiveAlgorithmKind>;

// The registry of uneven all_to_all algorithms by name (mapping.moe.all_to_all; LowerAllToAllV).
// A VLowerFn gets a square matrix of P >= 2 ranks and a grid of rows * cols = P (0 x 0 only
// when the caller gave none) and returns the schedule with `layout` filled; the dispatcher
// (all_to_all_v.cc) drops empty steps. a2a_pairwise.cc is a small example.
struct AllToAllVArgs {
  const std::vector<std::vector<uint64_t>>* bytes = nullptr;
  int ranks = 0;
  RankGrid grid;
};
using VLowerFn = Schedule (*)(const AllToAllVArgs&, AllToAllVLayout*);
struct AllToAllVAlgorithmKind {
  using Value = VLowerFn;
  static constexpr std::string_view kName = "all_to_all";
};
using AllToAllVRegistry = Registry<AllToAllVAlgorithmKind>;
using AllToAllVRegistrar = Registrar<AllToAllVAlgorithmKind>;

// Offsets of the blocks packed by destination (send) or by source (receive) from `base`, in
// rank order: send[r][d] = base + sum of bytes[r][x < d]; recv[r][d] = base + sum of
// bytes[x < r][d]. Returns the largest row (send) or column (receive) sum.
uint64_t PackBySendOrder(const std::vector<std::vector<uint64_t>>& bytes, uint64_t base,
                         std::vector<std::vector<uint64_t>>* send);
uint64_t PackByRecvOrder(const std::vector<std::vector<uint64_t>>& bytes, uint64_t base,
                         std::vector<std::vector<uint64_t>>* recv);
// One transfer of `bytes` from src's buffer at `offset` to dst's at `dst_offset` in step
// `step` (growing steps); none when bytes is 0.
void AddBlock(std::vector<CollectiveStep>* steps, size_t step, int src, int dst, uint64_t offset,
              uint64_t bytes, uint64_t dst_offset);

// The ring algorithm (ring.cc), which other algorithms fall back to (RingFallback).
Schedule LowerRing(const Args& a);

// A set of byte ranges of the buffer (one rank's share in a pass).
struct Range {
  uint64_t offset = 0, bytes = 0;
};
using Segment = std::vector<Range>;

Range Chunk(uint64_t bytes, int p, int c, uint64_t align);
// Chunk c of p inside `r` (the same balanced rule as ChunkRange).
Range SubChunk(Range r, int p, int c, uint64_t align);
// Chunks [first, last) of p as one contiguous range.
Range ChunkSpan(uint64_t bytes, int p, int first, int last, uint64_t align);

// Appends one transfer per non-empty range of `seg` to step `step` (growing steps).
void AddXfers(std::vector<CollectiveStep>* steps, size_t step, int src, int dst, const Segment& seg,
              bool reduce);

// Ring passes over `group` (member m sends to member m+1 mod n), starting at step
// `first`; they return the number of steps used (n - 1). seg[m] is member m's share.
//   reduce-scatter: step s, member m adds seg[(m-s-1) mod n] into member m+1;
//                   member m ends with the sum over the group of seg[m].
//   all-gather:     member m starts with seg[m] valid; step s, member m writes
//                   seg[(m-s) mod n] (the share it received last) into member m+1.
//                   This is also the rotation pattern of CollectiveKind::kRotate.
size_t RingReduceScatter(const std::vector<int>& group, const std::vector<Segment>& seg, size_t first,
                         std::vector<CollectiveStep>* steps);
size_t RingAllGather(const std::vector<int>& group, const std::vector<Segment>& seg, size_t first,
                     std::vector<CollectiveStep>* steps);

// all_to_all as rounds of pairwise swaps (each pair swaps within one step, so the
// read-then-write rule keeps it in place): `partner(round, r)` returns r's partner
// in that round, or -1 when r sits out. Throws std::invalid_argument when the
// chunks are unequal (bytes not a multiple of ranks * align).
using PartnerFn = int (*)(int rounds_total, int ranks, int round, int r);
void PairwiseAllToAll(const Args& a, int rounds, PartnerFn partner, std::vector<CollectiveStep>* steps);
// The round-robin (circle method) pairing: P-1 rounds for even P, P for odd P.
void RoundRobinAllToAll(const Args& a, std::vector<CollectiveStep>* steps);
void CheckEqualChunks(const Args& a);
// Rank r's chunk d into rank d's chunk r.
Xfer AllToAllXfer(const Args& a, int r, int d);

// The ring schedule with `note` explaining why it replaced `a`'s algorithm.
Schedule RingFallback(const Args& a, const std::string& note);

std::vector<int> Iota(int n);

}  // namespace tpsim::mapping::collective
