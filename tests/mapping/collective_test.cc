// Collective algorithms: a reference executor applies each schedule to float
// buffers (read-then-write within a step) and checks the result of every
// algorithm x kind x P; step counts and bytes are pinned against closed forms.

#include "mapping/collective/collective.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tests/cli_test_util.h"

namespace tpsim::mapping {
namespace {

constexpr uint64_t kF = sizeof(float);
using Buffers = std::vector<std::vector<float>>;

// Applies `s` to `bufs`; fails the test on a malformed transfer or on two
// transfers of one step writing overlapping ranges of one rank in different modes.
void Execute(const Schedule& s, Buffers* bufs) {
  const int p = static_cast<int>(bufs->size());
  const uint64_t bytes = (*bufs)[0].size() * kF;
  for (size_t st = 0; st < s.steps.size(); ++st) {
    const auto& xs = s.steps[st].xfers;
    ASSERT_FALSE(xs.empty()) << "empty step " << st;
    std::vector<std::vector<float>> payload;
    for (const Xfer& x : xs) {
      ASSERT_TRUE(x.src >= 0 && x.src < p && x.dst >= 0 && x.dst < p && x.src != x.dst);
      ASSERT_GT(x.bytes, 0u);
      ASSERT_EQ(x.offset % kF, 0u);
      ASSERT_EQ(x.DstOffset() % kF, 0u);
      ASSERT_EQ(x.bytes % kF, 0u);
      ASSERT_LE(x.offset + x.bytes, bytes);
      ASSERT_LE(x.DstOffset() + x.bytes, bytes);
      const float* src = (*bufs)[x.src].data() + x.offset / kF;
      payload.emplace_back(src, src + x.bytes / kF);
    }
    for (size_t i = 0; i < xs.size(); ++i) {
      for (size_t j = i + 1; j < xs.size(); ++j) {
        const Xfer &a = xs[i], &b = xs[j];
        const bool overlap = a.dst == b.dst && a.DstOffset() < b.DstOffset() + b.bytes &&
                             b.DstOffset() < a.DstOffset() + a.bytes;
        ASSERT_FALSE(overlap && !(a.reduce && b.reduce)) << "step " << st << ": conflicting writes";
      }
    }
    for (size_t i = 0; i < xs.size(); ++i) {
      float* dst = (*bufs)[xs[i].dst].data() + xs[i].DstOffset() / kF;
      for (size_t e = 0; e < payload[i].size(); ++e)
        dst[e] = xs[i].reduce ? dst[e] + payload[i][e] : payload[i][e];
    }
  }
}

Buffers Random(int p, uint64_t elems, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Buffers b(p, std::vector<float>(elems));
  for (auto& v : b)
    for (auto& x : v) x = u(rng);
  return b;
}

struct Span {
  uint64_t first, count;  // in elements
};
Span ElemChunk(uint64_t elems, int p, int c) {
  uint64_t off, len;
  ChunkRange(elems * kF, p, c, kF, &off, &len);
  return {off / kF, len / kF};
}

const CollectiveKind kKinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                                 CollectiveKind::kAllGather, CollectiveKind::kAllToAll,
                                 CollectiveKind::kRotate};

// Runs one collective on random data and checks the kind's postcondition.
void CheckResult(const std::string& algo, CollectiveKind kind, int p, uint64_t elems, RankGrid grid = {}) {
  SCOPED_TRACE(algo + " " + ToString(kind) + " P=" + std::to_string(p) + " elems=" + std::to_string(elems));
  const Schedule s = LowerCollective(algo, kind, p, elems * kF, kF, grid);
  const Buffers in = Random(p, elems, 1000 * p + elems);
  Buffers buf = in;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kRotate) {
    // Only chunk r of rank r is valid; anything else read would poison the result.
    for (int r = 0; r < p; ++r) {
      const Span own = ElemChunk(elems, p, r);
      for (uint64_t e = 0; e < elems; ++e) {
        if (e < own.first || e >= own.first + own.count) buf[r][e] = nan;
      }
    }
  }
  Execute(s, &buf);
  if (testing::Test::HasFatalFailure()) return;
  for (int r = 0; r < p; ++r) {
    for (uint64_t e = 0; e < elems; ++e) {
      float sum = 0;
      for (int q = 0; q < p; ++q) sum += in[q][e];
      const int owner = [&] {
        for (int c = 0; c < p; ++c) {
          const Span sp = ElemChunk(elems, p, c);
          if (e >= sp.first && e < sp.first + sp.count) return c;
        }
        return -1;
      }();
      switch (kind) {
        case CollectiveKind::kAllReduce:
          ASSERT_NEAR(buf[r][e], sum, 1e-4) << "rank " << r << " elem " << e;
          break;
        case CollectiveKind::kReduceScatter:
          if (owner == r) {
            ASSERT_NEAR(buf[r][e], sum, 1e-4) << "rank " << r << " elem " << e;
          }
          break;
        case CollectiveKind::kAllGather:
        case CollectiveKind::kRotate:
          ASSERT_EQ(buf[r][e], in[owner][e]) << "rank " << r << " elem " << e;
          break;
        case CollectiveKind::kAllToAll: {
          // rank r's chunk `owner` came from rank `owner`'s chunk r (equal chunks).
          const uint64_t within = e - ElemChunk(elems, p, owner).first;
          ASSERT_EQ(buf[r][e], in[owner][ElemChunk(elems, p, r).first + within])
              << "rank " << r << " elem " << e;
          break;
        }
        case CollectiveKind::kP2p:
          FAIL() << "p2p is not lowered by a collective algorithm";
      }
    }
  }
}

TEST(Collective, EveryAlgorithmKindAndRankCountComputesTheRightResult) {
  for (const std::string& algo : CollectiveNames()) {
    for (CollectiveKind kind : kKinds) {
      for (int p : {2, 3, 4, 5, 8, 16}) {
        // all_to_all needs equal chunks; the others also get a size with a remainder.
        std::vector<uint64_t> sizes = {static_cast<uint64_t>(p) * 6};
        if (kind != CollectiveKind::kAllToAll) sizes.push_back(static_cast<uint64_t>(p) * 5 + 3);
        for (uint64_t elems : sizes) CheckResult(algo, kind, p, elems);
      }
    }
  }
}

TEST(Collective, Mesh2dOnExplicitGrids) {
  for (RankGrid g : {RankGrid{2, 2}, RankGrid{2, 4}, RankGrid{4, 2}, RankGrid{4, 4}, RankGrid{1, 4}}) {
    for (CollectiveKind kind : kKinds) {
      CheckResult("mesh_2d", kind, g.rows * g.cols, 64, g);
      CheckResult("mesh_2d", kind, g.rows * g.cols, 16 * g.rows * g.cols, g);
      if (kind != CollectiveKind::kAllToAll) CheckResult("mesh_2d", kind, g.rows * g.cols, 77, g);
    }
  }
}

TEST(Collective, ChunksAreAlignedAndCoverTheBufferExactly) {
  // 37 elements of 4 bytes over 4 ranks: 37 = 4 x 9 + 1, so the first chunk takes 10
  // elements (40 bytes) and the others 9 (36 bytes).
  const uint64_t want_off[] = {0, 40, 76, 112}, want_len[] = {40, 36, 36, 36};
  for (int c = 0; c < 4; ++c) {
    uint64_t off, len;
    ChunkRange(148, 4, c, 4, &off, &len);
    EXPECT_EQ(off, want_off[c]);
    EXPECT_EQ(len, want_len[c]);
  }
  // Fewer elements than ranks: 3 elements over 4 ranks, one each in chunks 0..2, the last empty.
  uint64_t off, len;
  for (int c = 0; c < 3; ++c) {
    ChunkRange(12, 4, c, 4, &off, &len);
    EXPECT_EQ(off, 4u * c);
    EXPECT_EQ(len, 4u);
  }
  ChunkRange(12, 4, 3, 4, &off, &len);
  EXPECT_EQ(off, 12u);
  EXPECT_EQ(len, 0u);
  // Out-of-range chunk or rank count: empty, no crash.
  ChunkRange(12, 0, 0, 4, &off, &len);
  EXPECT_EQ(len, 0u);
  ChunkRange(12, 4, 4, 4, &off, &len);
  EXPECT_EQ(len, 0u);
  // Every algorithm still computes the right result when most chunks are empty.
  for (const std::string& algo : CollectiveNames()) CheckResult(algo, CollectiveKind::kAllReduce, 8, 3);
}

std::vector<uint64_t> SentPerRank(const Schedule& s, int p) {
  std::vector<uint64_t> sent(p, 0);
  for (const auto& st : s.steps)
    for (const auto& x : st.xfers) sent[x.src] += x.bytes;
  return sent;
}

TEST(Collective, RingAllReduceClosedForm) {
  // P = 8, 8 KiB: 2(P-1) = 14 steps; every step each rank sends one chunk of
  // 8192/8 = 1024 bytes to rank+1; 2*7/8 * 8192 = 14336 bytes per rank in all.
  const Schedule s = LowerCollective("ring", CollectiveKind::kAllReduce, 8, 8192, 2);
  EXPECT_EQ(s.algorithm, "ring");
  EXPECT_TRUE(s.note.empty());
  ASSERT_EQ(s.steps.size(), 14u);
  for (const auto& st : s.steps) {
    ASSERT_EQ(st.xfers.size(), 8u);
    for (const auto& x : st.xfers) {
      EXPECT_EQ(x.bytes, 1024u);
      EXPECT_EQ(x.dst, (x.src + 1) % 8);
    }
  }
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(s.steps[i].xfers[0].reduce);
  for (int i = 7; i < 14; ++i) EXPECT_FALSE(s.steps[i].xfers[0].reduce);
  for (uint64_t b : SentPerRank(s, 8)) EXPECT_EQ(b, 14336u);
  // P = 5, 1000 bytes of 2-byte elements: 1000/2/5 = 100 elements, all chunks 200 bytes;
  // per rank 2*4/5 * 1000 = 1600.
  for (uint64_t b : SentPerRank(LowerCollective("ring", CollectiveKind::kAllReduce, 5, 1000, 2), 5))
    EXPECT_EQ(b, 1600u);
}

TEST(Collective, ReduceScatterAndAllGatherClosedForms) {
  // ring: P-1 = 3 steps, one chunk of 4096/4 = 1024 per rank per step.
  for (CollectiveKind k :
       {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather, CollectiveKind::kRotate}) {
    const Schedule s = LowerCollective("ring", k, 4, 4096, 4);
    ASSERT_EQ(s.steps.size(), 3u);
    for (const auto& st : s.steps) {
      ASSERT_EQ(st.xfers.size(), 4u);
      for (const auto& x : st.xfers) EXPECT_EQ(x.bytes, 1024u);
    }
  }
}

TEST(Collective, RotatePassesTheLastReceivedChunkToTheNextRank) {
  // P = 4, 64 bytes: chunks of 16. Step s, rank r sends chunk (r - s) mod 4 to r+1.
  const Schedule s = LowerCollective("ring", CollectiveKind::kRotate, 4, 64, 4);
  ASSERT_EQ(s.steps.size(), 3u);
  for (int st = 0; st < 3; ++st) {
    for (const auto& x : s.steps[st].xfers) {
      EXPECT_EQ(x.dst, (x.src + 1) % 4);
      EXPECT_EQ(x.offset, static_cast<uint64_t>(((x.src - st) % 4 + 4) % 4) * 16);
      EXPECT_FALSE(x.reduce);
    }
  }
  // Every other algorithm except bidirectional_ring rotates on the ring and says so.
  for (const std::string algo : {"mesh_2d", "halving_doubling", "direct"}) {
    const Schedule o = LowerCollective(algo, CollectiveKind::kRotate, 4, 64, 4);
    EXPECT_EQ(o.algorithm, "ring") << algo;
    EXPECT_FALSE(o.note.empty()) << algo;
    EXPECT_EQ(o.steps.size(), 3u) << algo;
  }
}

TEST(Collective, BidirectionalRingClosedForm) {
  // P = 4, 4096 bytes: 2(P-1) = 6 steps; each step every rank sends 4096/4/2 = 512 bytes
  // to r+1 and 512 to r-1. Per rank 6 * 1024 = 6144 = 2*3/4 * 4096, as for ring.
  const Schedule s = LowerCollective("bidirectional_ring", CollectiveKind::kAllReduce, 4, 4096, 4);
  ASSERT_EQ(s.steps.size(), 6u);
  for (const auto& st : s.steps) {
    ASSERT_EQ(st.xfers.size(), 8u);
    int cw = 0, ccw = 0;
    for (const auto& x : st.xfers) {
      EXPECT_EQ(x.bytes, 512u);
      cw += x.dst == (x.src + 1) % 4;
      ccw += x.dst == (x.src + 3) % 4;
    }
    EXPECT_EQ(cw, 4);
    EXPECT_EQ(ccw, 4);
  }
  for (uint64_t b : SentPerRank(s, 4)) EXPECT_EQ(b, 6144u);
  // Rotation: 3 steps, both directions.
  EXPECT_EQ(LowerCollective("bidirectional_ring", CollectiveKind::kRotate, 4, 4096, 4).steps.size(), 3u);
}

TEST(Collective, HalvingDoublingClosedForm) {
  // P = 8, B = 8192: log2 8 = 3 halving steps sending B/2, B/4, B/8 = 4096, 2048, 1024
  // per rank, then 3 doubling steps sending 1024, 2048, 4096. Partners r^4, r^2, r^1, then r^1, r^2, r^4.
  const Schedule s = LowerCollective("halving_doubling", CollectiveKind::kAllReduce, 8, 8192, 4);
  EXPECT_EQ(s.algorithm, "halving_doubling");
  ASSERT_EQ(s.steps.size(), 6u);
  const uint64_t want_bytes[] = {4096, 2048, 1024, 1024, 2048, 4096};
  const int want_dist[] = {4, 2, 1, 1, 2, 4};
  for (int t = 0; t < 6; ++t) {
    ASSERT_EQ(s.steps[t].xfers.size(), 8u);
    for (const auto& x : s.steps[t].xfers) {
      EXPECT_EQ(x.bytes, want_bytes[t]);
      EXPECT_EQ(x.dst, x.src ^ want_dist[t]);
      EXPECT_EQ(x.reduce, t < 3);
    }
  }
  // 2 * (4096 + 2048 + 1024) = 14336 = 2*7/8 * 8192.
  for (uint64_t b : SentPerRank(s, 8)) EXPECT_EQ(b, 14336u);
  // Not a power of two: ring, with a note naming the reason.
  const Schedule f = LowerCollective("halving_doubling", CollectiveKind::kAllReduce, 6, 6000, 4);
  EXPECT_EQ(f.algorithm, "ring");
  EXPECT_NE(f.note.find("power-of-two"), std::string::npos) << f.note;
  EXPECT_EQ(f.steps.size(), 10u);  // 2 * (6 - 1)
}

TEST(Collective, DirectClosedForm) {
  // P = 4, 4096 bytes: step 0 every rank adds chunk d (1024 bytes) into every d != r,
  // step 1 every rank writes its chunk into the others: 12 transfers per step.
  const Schedule s = LowerCollective("direct", CollectiveKind::kAllReduce, 4, 4096, 4);
  ASSERT_EQ(s.steps.size(), 2u);
  for (int t = 0; t < 2; ++t) {
    ASSERT_EQ(s.steps[t].xfers.size(), 12u);
    for (const auto& x : s.steps[t].xfers) {
      EXPECT_EQ(x.bytes, 1024u);
      EXPECT_EQ(x.reduce, t == 0);
      EXPECT_EQ(x.offset, (t == 0 ? x.dst : x.src) * 1024u);
    }
  }
  for (uint64_t b : SentPerRank(s, 4)) EXPECT_EQ(b, 6144u);  // 2*3/4 * 4096
  const Schedule a2a = LowerCollective("direct", CollectiveKind::kAllToAll, 4, 4096, 4);
  ASSERT_EQ(a2a.steps.size(), 1u);
  for (const auto& x : a2a.steps[0].xfers) {
    EXPECT_EQ(x.offset, x.dst * 1024u);
    EXPECT_EQ(x.DstOffset(), x.src * 1024u);
  }
}

// direct issues its transfers by distance: within a step, P-1 rounds k = 1 .. P-1 of P
// transfers, transfer r of round k going r -> (r + k) mod P. A core's transfers take its
// outgoing link first come first served in this order, so each round sends exactly one flow
// into every rank; the old order (destinations 0 .. P-1 for every source) sent every rank's
// first flow to rank 0 and its last to rank P-1.
TEST(Collective, DirectIssuesDestinationsByDistance) {
  for (const CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                                    CollectiveKind::kAllGather, CollectiveKind::kAllToAll}) {
    for (const int p : {2, 3, 5, 8}) {
      SCOPED_TRACE(std::string(ToString(kind)) + " P=" + std::to_string(p));
      const Schedule s = LowerCollective("direct", kind, p, uint64_t{1024} * p, 4);
      ASSERT_EQ(s.steps.size(), kind == CollectiveKind::kAllReduce ? 2u : 1u);
      for (const CollectiveStep& st : s.steps) {
        ASSERT_EQ(st.xfers.size(), static_cast<size_t>(p * (p - 1)));
        for (int k = 1; k < p; ++k) {
          for (int r = 0; r < p; ++r) {
            const Xfer& x = st.xfers[static_cast<size_t>((k - 1) * p + r)];
            EXPECT_EQ(x.src, r) << "round " << k;
            EXPECT_EQ(x.dst, (r + k) % p) << "round " << k;
          }
        }
      }
    }
  }
}

// direct over 8 ranks of a switch chip, timed by `tpsim collectives` (the collective alone,
// cores 0..7, analytical engine). By hand: a chunk is 8 MiB / 8 = 1 MiB, and one chunk over a
// 160 GB/s link takes T = 1048576 B / 160 B/ns = 6553.6 ns. A route is gpu r -> switch (2 ns:
// one router cycle at 500 MHz) then switch -> gpu d (2 ns + 100 ns switch latency), 104 ns in
// all. Round k (1 .. 7) is the k-th flow out of every core, so it takes the core's uplink at
// (k-1) T, when round k-1's flow has left it; it meets round k-1's flow into the same rank on
// that rank's downlink, which left it at (k-1) T + 2 ns, so it never queues there and ends at
// k T + 104 ns. The last round ends at 7 T + 104 = 45875.2 + 104 = 45979.2 ns = 45.979 us, for
// reduce_scatter, all_gather and all_to_all alike (all_to_all's 8 MiB is one rank's buffer,
// chunks of 1 MiB again). all_reduce runs the all_gather pattern after every rank's last
// reduce_scatter input has landed, at 7 T + 104 ns for every rank: 2 x 45979.2 = 91958.4 ns.
// (The old order gave 13 T + 104 = 85300.8 ns: every core's flow to rank 7 was its 7th, so
// rank 7's downlink got all 7 flows from 6 T on, one after another; all_reduce 131.280 us.)
// A ring takes 7 (T + 104 ns) = 46603.2 ns for reduce_scatter: direct is now the faster.
TEST(Collective, DirectOnASwitchTakesEachDownlinkOnceARound) {
  namespace fs = std::filesystem;
  const std::string tpsim = TPSIM_BINARY_DIR "/bin/tpsim";
  ASSERT_TRUE(fs::exists(tpsim)) << tpsim << " is missing: build the tpsim target";
  const fs::path dir = fs::temp_directory_path() / ("tpsim-direct-switch-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path chip = dir / "switch8.textproto";
  std::ofstream(chip) << R"(name: "switch8"
clock_mhz: 500
core { systolic_rows: 64 systolic_cols: 64 systolic_arrays: 1 mac_dtype: "bf16"
       matrix_utilization: 0.7 vector_lanes: 64 sram_bytes: 33554432 sram_bandwidth_gbps: 256 }
noc { topology: "switch" nodes: 8 switch_latency_ns: 100 link_bandwidth_gbps: 160
      router_latency_cycles: 1 link_latency_ns: 0 }
memory { name: "dram" kind: "dram" per_core: true bandwidth_gbps: 60 efficiency: 0.7
         latency_ns: 50 capacity_bytes: 4294967296 })";
  const std::pair<const char*, const char*> want[] = {{"reduce_scatter", "45.979"},
                                                      {"all_gather", "45.979"},
                                                      {"all_to_all", "45.979"},
                                                      {"all_reduce", "91.958"}};
  for (const auto& [op, us] : want) {
    const fs::path csv = dir / (std::string(op) + ".csv");
    const test::CommandOutcome o =
        test::RunCommand("timeout 120 '" + tpsim + "' collectives '" + chip.string() + "' --op " + op +
                         " --ranks 8 --sizes 8M --algo direct --csv '" + csv.string() + "' 2>&1");
    ASSERT_EQ(o.status, 0) << o.output;
    std::ifstream in(csv);
    std::string header, row;
    std::getline(in, header);
    std::getline(in, row);
    // op,ranks,size_bytes,time_us,...
    EXPECT_EQ(row.rfind(std::string(op) + ",8,8388608," + us + ",", 0), 0u) << row;
  }
  fs::remove_all(dir);
}

TEST(Collective, Mesh2dClosedForm) {
  // 2 x 4 grid, B = 8192: row reduce-scatter 3 steps of B/4 = 2048, column all-reduce of
  // the 2048-byte chunk over 2 ranks: 2 steps of 1024, row all-gather 3 steps of 2048.
  // Per rank 6 * 2048 + 2 * 1024 = 14336 = 2*7/8 * 8192.
  const Schedule s = LowerCollective("mesh_2d", CollectiveKind::kAllReduce, 8, 8192, 4, {2, 4});
  EXPECT_EQ(s.algorithm, "mesh_2d");
  ASSERT_EQ(s.steps.size(), 8u);
  const uint64_t want[] = {2048, 2048, 2048, 1024, 1024, 2048, 2048, 2048};
  for (int t = 0; t < 8; ++t) {
    ASSERT_EQ(s.steps[t].xfers.size(), 8u);
    for (const auto& x : s.steps[t].xfers) {
      EXPECT_EQ(x.bytes, want[t]);
      const bool same_row = x.src / 4 == x.dst / 4;
      EXPECT_EQ(same_row, t < 3 || t >= 5) << "step " << t;
    }
  }
  for (uint64_t b : SentPerRank(s, 8)) EXPECT_EQ(b, 14336u);
  // 0 x 0 picks the most square grid: 16 -> 4x4: 3 + 2*3 + 3 = 12 steps; 8 -> 2x4 as above;
  // 7 (prime) -> 1x7, the ring's 12 steps, with a note.
  EXPECT_EQ(LowerCollective("mesh_2d", CollectiveKind::kAllReduce, 16, 16384, 4).steps.size(), 12u);
  EXPECT_EQ(LowerCollective("mesh_2d", CollectiveKind::kAllReduce, 8, 8192, 4).steps.size(), 8u);
  const Schedule prime = LowerCollective("mesh_2d", CollectiveKind::kAllReduce, 7, 7000, 4);
  EXPECT_EQ(prime.steps.size(), 12u);
  EXPECT_FALSE(prime.note.empty());
  // reduce_scatter on 2x4: 3 + 1 steps.
  EXPECT_EQ(LowerCollective("mesh_2d", CollectiveKind::kReduceScatter, 8, 8192, 4, {2, 4}).steps.size(), 4u);
}

TEST(Collective, AllToAllRoundCounts) {
  // Round-robin pairing: P-1 rounds for even P (everyone busy), P rounds for odd P (one idle).
  const Schedule even = LowerCollective("ring", CollectiveKind::kAllToAll, 4, 4096, 4);
  ASSERT_EQ(even.steps.size(), 3u);
  for (const auto& st : even.steps) EXPECT_EQ(st.xfers.size(), 4u);
  const Schedule odd = LowerCollective("ring", CollectiveKind::kAllToAll, 5, 5 * 1024, 4);
  ASSERT_EQ(odd.steps.size(), 5u);
  for (const auto& st : odd.steps) EXPECT_EQ(st.xfers.size(), 4u);
  EXPECT_EQ(LowerCollective("halving_doubling", CollectiveKind::kAllToAll, 8, 8192, 4).steps.size(), 7u);
  EXPECT_EQ(LowerCollective("direct", CollectiveKind::kAllToAll, 8, 8192, 4).steps.size(), 1u);
}

TEST(Collective, BadInputIsRejectedWithAPlainMessage) {
  try {
    LowerCollective("tree", CollectiveKind::kAllReduce, 4, 1024, 4);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tree"), std::string::npos);
    for (const std::string& n : CollectiveNames()) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
  EXPECT_EQ(CollectiveNames().size(), 6u);
  EXPECT_THROW(LowerCollective("ring", CollectiveKind::kAllReduce, 0, 1024, 4), std::invalid_argument);
  EXPECT_THROW(LowerCollective("ring", CollectiveKind::kAllReduce, -3, 1024, 4), std::invalid_argument);
  EXPECT_THROW(LowerCollective("direct", CollectiveKind::kAllReduce, 1025, 1 << 20, 4),
               std::invalid_argument);
  EXPECT_THROW(LowerCollective("mesh_2d", CollectiveKind::kAllReduce, 8, 1024, 4, {3, 3}),
               std::invalid_argument);
  EXPECT_THROW(LowerCollective("mesh_2d", CollectiveKind::kAllReduce, 8, 1024, 4, {0, 8}),
               std::invalid_argument);
  EXPECT_THROW(LowerCollective("ring", CollectiveKind::kAllToAll, 4, 1000 + 4, 4), std::invalid_argument);
  // One rank or no bytes: nothing to move.
  EXPECT_TRUE(LowerCollective("ring", CollectiveKind::kAllReduce, 1, 1024, 4).steps.empty());
  EXPECT_TRUE(LowerCollective("direct", CollectiveKind::kAllGather, 4, 0, 4).steps.empty());
  // align 0 is treated as 1.
  EXPECT_EQ(LowerCollective("ring", CollectiveKind::kAllReduce, 4, 4096, 0).steps.size(), 6u);
}

// kP2p labels pipeline hand-overs in a Program; no algorithm lowers it.
TEST(Collective, P2pIsNoAlgorithmsKind) {
  EXPECT_THROW(LowerCollective("ring", CollectiveKind::kP2p, 4, 1024, 2), std::invalid_argument);
}

}  // namespace
}  // namespace tpsim::mapping
