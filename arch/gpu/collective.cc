#include "arch/gpu/collective.h"
#include "configs/files.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace tpsim::arch::gpu {

namespace {

// ---- NCCL's tuning constants -------------------------------------------------------------
// NVIDIA/nccl src/graph/tuning.cc at commit 5067397c2676d5aed50042fc39e5c8ee96eb0027
// (ncclTunerConstantsDefaults, single node: NVLINK hardware row, N1 columns).
// Rows: tree, ring, nvls. Columns: LL, LL128, Simple.
constexpr double kBaseLatUs[3][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}};  // baseLatencies
constexpr double kHopLatUs[3][3] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 25}};   // hwLatencies[NVLINK]
// ncclTopoTuneModel's protocol factors.
constexpr double kLLFactor = 0.5;               // ring LL: busBw * .5, capped at llMaxBw
constexpr double kLL128Factor = 0.92;           // ring LL128: busBw * 120/128
constexpr double kTreeFactor = 0.92;            // tree all_reduce: busBw * .92
constexpr double kTreeLLFactor = 1.0 / 3.8;     // tree LL
constexpr double kTreeLL128Factor = 7.0 / 9.0;  // tree LL128 on one node
// treeCorrectionFactor (tuning.cc), powers of two from 64 B, per protocol LL, LL128, Simple.
constexpr double kTreeCorrection[3][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};
// NVLS per-channel speeds NCCL's graph search tries (src/graph/search.cc, sm90/sm100SpeedArrayIntra).
constexpr double kSm90Speeds[] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
constexpr double kSm100Speeds[] = {90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};

// Per-architecture rows of tuning.cc (single node: llMaxBws by GPU arch, per-channel caps
// N1 column) and nvlsEfficiency; NVLS channels and largest chunk on one node from
// src/transport/nvls.cc (NVLS_NCHANNELS_SM90 16, NVLS_NCHANNELS_SM100_NVL 24, NVLS_CHUNKSIZE 128 KiB).
struct ArchTables {
  double ll_max_bw, per_ch_ring_ll128, per_ch_tree_ll128, per_ch_tree, nvls_eff;
  const double* speeds;
  size_t num_speeds;
  int nvls_channels;
  uint64_t nvls_chunk_bytes;
};
constexpr ArchTables kHopper = {141.0, 36.7,     36.7, 38.7, 0.85, kSm90Speeds, std::size(kSm90Speeds),
                                16,    128 << 10};
constexpr ArchTables kBlackwell = {
    2 * 141.0, 40.0, 55.6, 70.0, 0.74, kSm100Speeds, std::size(kSm100Speeds), 24, 128 << 10};

const ArchTables& TablesOf(const config::Gpu& g) {
  return g.compute_capability() >= 100 ? kBlackwell : kHopper;
}

int AlgoRow(Algo a) { return a == Algo::kTree ? 0 : a == Algo::kNvls ? 2 : 1; }
int ProtoCol(Proto p) { return p == Proto::kLL ? 0 : p == Proto::kLL128 ? 1 : 2; }

// Steps of a ring pass (tuning.cc nsteps) and the bus -> algorithm bandwidth ratio.
int RingSteps(CollOp op, int n) {
  switch (op) {
    case CollOp::kAllReduce:
      return 2 * (n - 1);
    case CollOp::kAllGather:
    case CollOp::kReduceScatter:
      return n - 1;
    default:
      return n;
  }
}

struct Pair {
  double algbw = 0;  // GB/s; 0: NCCL would not run this pair
  double lat = 0;    // us
};

// One (algorithm, protocol) pair. `ring_bus` is the ring's Simple bus ceiling (NCCL's
// B for the tuner, B_eff for the prediction); `ring_hop_us` the ring's per-step latency per
// protocol (NCCL's for the tuner, RingStepUs for the prediction); `nvls_algbw` the NVLS algbw
// (tuner or fitted), computed by the caller.
Pair PairModel(const config::Gpu& g, CollOp op, int n, uint64_t bytes, Algo a, Proto p, double ring_bus,
               const double* ring_hop_us, double nvls_algbw) {
  const ArchTables& t = TablesOf(g);
  const double ch = g.nccl_ring_channels();
  const int row = AlgoRow(a), col = ProtoCol(p);
  Pair r;
  switch (a) {
    case Algo::kRing: {
      double bus = ring_bus;
      if (p == Proto::kLL) bus = std::min(t.ll_max_bw, ring_bus * kLLFactor);
      if (p == Proto::kLL128) bus = std::min(ring_bus * kLL128Factor, ch * t.per_ch_ring_ll128);
      const int steps = RingSteps(op, n);
      r.algbw = bus * n / steps;
      r.lat = kBaseLatUs[row][col] + steps * ring_hop_us[col];
      break;
    }
    case Algo::kTree: {
      const double b = static_cast<double>(g.nvlink_links()) * g.nccl_link_gbps();
      double bus = std::min(b * kTreeFactor, ch * t.per_ch_tree);
      if (p == Proto::kLL) bus = std::min(bus * kTreeLLFactor, t.ll_max_bw);
      if (p == Proto::kLL128) bus = std::min(bus * kTreeLL128Factor, ch * t.per_ch_tree_ll128);
      r.algbw = bus * 0.5;
      const int log_size =
          bytes >= 64 ? static_cast<int>(std::floor(std::log2(static_cast<double>(bytes >> 6)))) : -1;
      if (log_size >= 0 && log_size < 23) r.algbw *= kTreeCorrection[col][log_size];
      r.lat = kBaseLatUs[row][col] + 2.0 * (n - 1) * kHopLatUs[row][col];
      break;
    }
    case Algo::kNvls:
      r.algbw = nvls_algbw;
      r.lat = kBaseLatUs[row][col] + kHopLatUs[row][col];
      break;
    case Algo::kP2p: {
      r.algbw = op == CollOp::kAllToAll ? ring_bus * n / (n - 1) : ring_bus;
      r.lat = kBaseLatUs[1][2] + ring_hop_us[2];
      break;
    }
    case Algo::kAuto:
      break;
  }
  return r;
}

// NCCL's NVLS bandwidth for all_reduce: n heads, each at the largest search speed that
// n heads fit into the GPU's NVLink bandwidth (see collective.h).
double TunerNvlsAlgbw(const config::Gpu& g, int n) {
  const ArchTables& t = TablesOf(g);
  const double b = static_cast<double>(g.nvlink_links()) * g.nccl_link_gbps();
  double speed = 0;
  for (size_t i = 0; i < t.num_speeds && speed == 0; ++i) {
    if (n * t.speeds[i] <= b) speed = t.speeds[i];
  }
  const double bus = n * speed * t.nvls_eff * (n - 1) / n * 2;
  return bus * n / (2.0 * (n - 1));
}

// NCCL's NVLS chunk for an all_reduce of `bytes` over n ranks on one node (src/enqueue.cc,
// calcCollChunking): 128 KiB, 64 KiB below 64 x ops x 128 KiB, 32 KiB below 8 x ops x 64 KiB,
// 16 KiB below 2 x ops x 32 KiB, ops = NVLS channels x n heads.
uint64_t NvlsChunkBytes(const ArchTables& t, int n, uint64_t bytes) {
  const uint64_t ops = static_cast<uint64_t>(t.nvls_channels) * static_cast<uint64_t>(n);
  uint64_t c = t.nvls_chunk_bytes;
  if (bytes < 64 * ops * c && c > (64u << 10)) c = 64u << 10;
  if (bytes < 8 * ops * c && c > (32u << 10)) c = 32u << 10;
  if (bytes < 2 * ops * c && c > (16u << 10)) c = 16u << 10;
  return c;
}

// The predicted NVLS algbw (collective.h): the fitted link rate, in series with the rate the
// NVLS channels reach with one chunk each in flight for nvls_chunk_rtt_us.
double FittedNvlsAlgbw(const config::Gpu& g, int n, uint64_t bytes) {
  const ArchTables& t = TablesOf(g);
  const double link = g.nvlink_links() * g.nvlink_link_gbps() * t.nvls_eff * g.nvls_efficiency() *
                      (1.0 - g.nvls_rank_loss() / n);
  if (!(g.nvls_chunk_rtt_us() > 0)) return link;
  // bytes per us = MB/s; / 1000 -> GB/s.
  const double chunk_gbps =
      t.nvls_channels * static_cast<double>(NvlsChunkBytes(t, n, bytes)) / g.nvls_chunk_rtt_us() / 1000.0;
  return 1.0 / (1.0 / link + 1.0 / chunk_gbps);
}

// The ring's per-step latency per protocol (LL, LL128, Simple) for the prediction: the fitted
// gpu.ring_*_step_us where set, else NCCL's tuner value.
std::array<double, 3> RingStepUs(const config::Gpu& g) {
  return {kHopLatUs[1][0], g.ring_ll128_step_us() > 0 ? g.ring_ll128_step_us() : kHopLatUs[1][1],
          g.ring_simple_step_us() > 0 ? g.ring_simple_step_us() : kHopLatUs[1][2]};
}

// The ring's bus ceiling set by the memory traffic of NCCL's channels (collective.h), counted per
// rank and chunk from NCCL's runRing primitives:
//  all_reduce (src/device/all_reduce.h): send (1 load, 1 remote store), n - 2 recvReduceSend
//    (2 loads, 1 remote store), recvReduceCopySend (2 loads, 1 store, 1 remote store), n - 2
//    recvCopySend (1 load, 1 store, 1 remote store), recv (1 load, 1 store): 6n - 4 loads and
//    stores for 2n - 2 on the bus;
//  all_gather (all_gather.h, out of place): copySend (1 load, 1 store, 1 remote store), n - 2
//    recvCopySend (the same 3), recv (1 load, 1 store): 3n - 1 for n - 1 on the bus;
//  reduce_scatter (reduce_scatter.h): send (1 load, 1 remote store), n - 2 recvReduceSend (2 loads,
//    1 remote store), recvReduceCopy (2 loads, 1 store): 3n - 1 for n - 1 on the bus.
// Infinite when off or for the other ops.
double RingMemoryBusCap(const config::Gpu& g, CollOp op, int n) {
  if (!(g.ring_channel_memory_gbps() > 0)) return HUGE_VAL;
  double traffic_per_bus_byte = 0;
  if (op == CollOp::kAllReduce) traffic_per_bus_byte = (3.0 * n - 2) / (n - 1);
  if (op == CollOp::kAllGather || op == CollOp::kReduceScatter)
    traffic_per_bus_byte = (3.0 * n - 1) / (n - 1);
  if (traffic_per_bus_byte == 0) return HUGE_VAL;
  return g.nccl_ring_channels() * g.ring_channel_memory_gbps() / traffic_per_bus_byte;
}

double Time(const Pair& p, uint64_t bytes) { return p.lat + static_cast<double>(bytes) / (1000.0 * p.algbw); }

// The algorithms and protocols an op may use here, in NCCL's enumeration order.
std::vector<Algo> Algorithms(const config::Gpu& g, CollOp op) {
  switch (op) {
    case CollOp::kAllReduce:
      return g.nvls() ? std::vector<Algo>{Algo::kTree, Algo::kRing, Algo::kNvls}
                      : std::vector<Algo>{Algo::kTree, Algo::kRing};
    case CollOp::kAllGather:
    case CollOp::kReduceScatter:
    case CollOp::kBroadcast:
      return {Algo::kRing};
    case CollOp::kAllToAll:
    case CollOp::kSendRecv:
      return {Algo::kP2p};
  }
  return {};
}

std::vector<Proto> Protocols(Algo a) {
  if (a == Algo::kNvls || a == Algo::kP2p) return {Proto::kSimple};
  return {Proto::kLL, Proto::kLL128, Proto::kSimple};
}

}  // namespace

bool ParseCollOp(std::string_view s, CollOp* op) {
  static const std::pair<const char*, CollOp> kNames[] = {
      {"all_reduce", CollOp::kAllReduce},         {"all_gather", CollOp::kAllGather},
      {"reduce_scatter", CollOp::kReduceScatter}, {"broadcast", CollOp::kBroadcast},
      {"all_to_all", CollOp::kAllToAll},          {"send_recv", CollOp::kSendRecv}};
  for (const auto& [name, v] : kNames) {
    if (s == name) {
      *op = v;
      return true;
    }
  }
  return false;
}

bool ParseAlgo(std::string_view s, Algo* a) {
  if (s == "auto")
    *a = Algo::kAuto;
  else if (s == "ring")
    *a = Algo::kRing;
  else if (s == "tree")
    *a = Algo::kTree;
  else if (s == "nvls")
    *a = Algo::kNvls;
  else if (s == "p2p")
    *a = Algo::kP2p;
  else
    return false;
  return true;
}

bool ParseProto(std::string_view s, Proto* p) {
  if (s == "auto")
    *p = Proto::kAuto;
  else if (s == "ll")
    *p = Proto::kLL;
  else if (s == "ll128")
    *p = Proto::kLL128;
  else if (s == "simple")
    *p = Proto::kSimple;
  else
    return false;
  return true;
}

const char* ToString(CollOp op) {
  switch (op) {
    case CollOp::kAllReduce:
      return "all_reduce";
    case CollOp::kAllGather:
      return "all_gather";
    case CollOp::kReduceScatter:
      return "reduce_scatter";
    case CollOp::kBroadcast:
      return "broadcast";
    case CollOp::kAllToAll:
      return "all_to_all";
    case CollOp::kSendRecv:
      return "send_recv";
  }
  return "?";
}

const char* ToString(Algo a) {
  switch (a) {
    case Algo::kAuto:
      return "auto";
    case Algo::kRing:
      return "ring";
    case Algo::kTree:
      return "tree";
    case Algo::kNvls:
      return "nvls";
    case Algo::kP2p:
      return "p2p";
  }
  return "?";
}

const char* ToString(Proto p) {
  switch (p) {
    case Proto::kAuto:
      return "auto";
    case Proto::kLL:
      return "ll";
    case Proto::kLL128:
      return "ll128";
    case Proto::kSimple:
      return "simple";
  }
  return "?";
}

std::vector<std::string> CollOpNames() {
  return {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv"};
}

double BusBwFactor(CollOp op, int ranks) {
  const double n = ranks;
  switch (op) {
    case CollOp::kAllReduce:
      return 2 * (n - 1) / n;
    case CollOp::kAllGather:
    case CollOp::kReduceScatter:
    case CollOp::kAllToAll:
      return (n - 1) / n;
    case CollOp::kBroadcast:
    case CollOp::kSendRecv:
      return 1;
  }
  return 1;
}

double TunerTimeUs(const config::Gpu& g, CollOp op, int ranks, uint64_t bytes, Algo a, Proto p) {
  const auto algos = Algorithms(g, op);
  const auto protos = Protocols(a);
  if (std::find(algos.begin(), algos.end(), a) == algos.end()) return -1;
  if (std::find(protos.begin(), protos.end(), p) == protos.end()) return -1;
  const double b = static_cast<double>(g.nvlink_links()) * g.nccl_link_gbps();
  const Pair pair =
      PairModel(g, op, ranks, bytes, a, p, b, kHopLatUs[1], a == Algo::kNvls ? TunerNvlsAlgbw(g, ranks) : 0);
  if (!(pair.algbw > 0)) return -1;
  return Time(pair, bytes);
}

CollEstimate EstimateCollective(const config::Gpu& g, int gpus, const CollQuery& q) {
  const int max_ranks = std::min(kMaxNodeRanks, gpus);
  if (q.ranks < 2 || q.ranks > max_ranks) {
    std::string why =
        q.ranks > kMaxNodeRanks
            ? "; above 8 GPUs NCCL crosses the network between nodes, which this model does not have"
            : "";
    throw std::invalid_argument("ranks " + std::to_string(q.ranks) + " outside [2, " +
                                std::to_string(max_ranks) + "] (the GPUs of one node)" + why);
  }
  if (q.bytes == 0) throw std::invalid_argument("size 0: a collective needs at least one byte");
  const auto algos = Algorithms(g, q.op);
  std::vector<std::string> algo_names;
  for (Algo a : algos) algo_names.push_back(ToString(a));
  if (q.algo != Algo::kAuto && std::find(algos.begin(), algos.end(), q.algo) == algos.end()) {
    std::string extra =
        q.algo == Algo::kNvls && q.op == CollOp::kAllReduce ? " (gpu.nvls is false on this chip)" : "";
    throw std::invalid_argument(std::string("algorithm ") + ToString(q.algo) + " is not available for " +
                                ToString(q.op) + extra + " (available: " + config::JoinNames(algo_names) +
                                ")");
  }
  // The choice: NCCL's tuner over the allowed pairs (the first on ties, NCCL's order).
  Algo best_a = Algo::kAuto;
  Proto best_p = Proto::kAuto;
  double best_t = -1;
  for (Algo a : algos) {
    if (q.algo != Algo::kAuto && a != q.algo) continue;
    for (Proto p : Protocols(a)) {
      if (q.proto != Proto::kAuto && p != q.proto) continue;
      const double t = TunerTimeUs(g, q.op, q.ranks, q.bytes, a, p);
      if (t < 0) continue;
      if (best_t < 0 || t < best_t) best_t = t, best_a = a, best_p = p;
    }
  }
  if (best_t < 0) {
    std::vector<std::string> protos;
    bool listed = q.proto == Proto::kAuto;
    for (Proto p : Protocols(q.algo == Algo::kAuto ? algos.front() : q.algo)) {
      protos.push_back(ToString(p));
      listed = listed || p == q.proto;
    }
    // The protocol is there but the pair has no bandwidth: NVLS where no search speed fits the
    // heads into the link (it said "protocol simple is not available ... (available: simple)").
    if (listed) {
      char bw[64];
      std::snprintf(bw, sizeof bw, "%.6g", static_cast<double>(g.nvlink_links()) * g.nccl_link_gbps());
      throw std::invalid_argument(std::string("algorithm ") + ToString(q.algo) + " has no bandwidth for " +
                                  ToString(q.op) + " over " + std::to_string(q.ranks) +
                                  " ranks: NCCL's tuner finds no NVLS speed at which " +
                                  std::to_string(q.ranks) +
                                  " heads fit the GPU's NVLink bandwidth (gpu.nvlink_links x "
                                  "gpu.nccl_link_gbps = " +
                                  bw + " GB/s), so NCCL would not run it: use ring or a faster link");
    }
    throw std::invalid_argument(std::string("protocol ") + ToString(q.proto) + " is not available for " +
                                ToString(q.op) +
                                (q.algo == Algo::kAuto ? "" : std::string(" with ") + ToString(q.algo)) +
                                " (available: " + config::JoinNames(protos) + ")");
  }
  // The prediction for the chosen pair.
  const double b = static_cast<double>(g.nvlink_links()) * g.nccl_link_gbps();
  const double eff = q.op == CollOp::kAllReduce ? g.ring_allreduce_efficiency() : g.ring_efficiency();
  const double ring_bus =
      best_a == Algo::kRing ? std::min(b * eff, RingMemoryBusCap(g, q.op, q.ranks)) : b * eff;
  const std::array<double, 3> ring_step = RingStepUs(g);
  const Pair pair = best_a == Algo::kTree
                        ? PairModel(g, q.op, q.ranks, q.bytes, best_a, best_p, b, kHopLatUs[1], 0)
                        : PairModel(g, q.op, q.ranks, q.bytes, best_a, best_p, ring_bus, ring_step.data(),
                                    best_a == Algo::kNvls ? FittedNvlsAlgbw(g, q.ranks, q.bytes) : 0);
  CollEstimate e;
  e.algo = best_a;
  e.proto = best_p;
  e.tuner_us = best_t;
  // The kernel's own fixed device cost (gpu.collective_kernel_us) on top of the pair's latency;
  // the choice above stays NCCL's (its tuner does not know this constant).
  e.latency_us = pair.lat + g.collective_kernel_us();
  e.gpu_us = e.latency_us + static_cast<double>(q.bytes) / (1000.0 * pair.algbw);
  // Host issue: one kernel per GPU the issuing process drives (nccl-tests -g N: all ranks).
  const double launch = g.collective_launch_us() + q.ranks * g.collective_launch_per_gpu_us();
  const double p = g.collective_launch_exponent() > 0 ? g.collective_launch_exponent() : 2.0;
  // (gpu^p + launch^p)^(1/p), scaled by the larger term so that no power overflows.
  const double big = std::max(e.gpu_us, launch);
  e.time_us = launch > 0 ? big * std::pow(std::pow(e.gpu_us / big, p) + std::pow(launch / big, p), 1.0 / p)
                         : e.gpu_us;
  e.algbw_gbps = static_cast<double>(q.bytes) / (e.time_us * 1000.0);
  e.busbw_gbps = e.algbw_gbps * BusBwFactor(q.op, q.ranks);
  return e;
}

}  // namespace tpsim::arch::gpu
