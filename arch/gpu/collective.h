#pragma once
// NCCL-like collective model for one NVSwitch node of GPUs (2 to 8 ranks, one per GPU).
//
// Two layers, as on a real node:
//  1. The choice. With --algo/--proto auto the (algorithm, protocol) pair is the one
//     NCCL's own tuning model predicts fastest (NVIDIA/nccl src/graph/tuning.cc at
//     5067397c, ncclTopoTuneModel / ncclTopoGetAlgoTime): per pair a latency
//     base + steps x hop and a bus-bandwidth ceiling, time = latency + bytes / algbw.
//     tuning.cc's constants are used as they are (nccl_tables in collective.cc cites each).
//  2. The prediction for that pair: the same structure with the bus ceilings scaled by
//     efficiencies fitted to H100 nccl-tests measurements (config::Gpu ring_*_efficiency,
//     nvls_*; validate/results/public/), and the host cost of issuing the call.
//
//   algorithm  ops                     bus ceiling (tuner)                      latency
//   ring       all ops but a2a/sendrecv B = links x nccl_link_gbps (Simple),      base + steps x hop
//                                      LL min(llMax, B/2), LL128 min(0.92 B, ch x 36.7)
//   tree       all_reduce              min(0.92 B, ch x perChTree), LL /3.8, LL128 x7/9   base + 2(n-1) hop
//   nvls       all_reduce (gpu.nvls)   n heads x speed x nvlsEff x (n-1)/n x 2   25 us (NVLS hw latency)
//   p2p        all_to_all, send_recv   ring Simple ceiling                       ring Simple base + 1 hop
//
// algbw = busBw x ratio: ring and nvls n / steps (steps: all_reduce 2(n-1), all_gather /
// reduce_scatter n-1, broadcast n), tree 0.5, p2p n/(n-1) (all_to_all) or 1 (send_recv).
// NVLS's per-head speed is the largest of NCCL's sm90/sm100 speed arrays (src/graph/search.cc)
// with n x speed <= B: an approximation of NCCL's graph search that reproduces the tuner's
// logged choice on H100 (ring at 2 and 4 GPUs, NVLS at 6; nccl-tests-h100-allreduce-algo.csv).
//
// Prediction for the chosen pair:
//   ring:  B_eff = B x ring_allreduce_efficiency (all_reduce) or x ring_efficiency (others),
//          capped at channels x ring_channel_memory_gbps / t: each channel (one CTA) moves its
//          chunks through local and remote loads and stores, t of them per bus byte (counted
//          from NCCL's runRing primitives, collective.cc): all_reduce t = (3n - 2) / (n - 1)
//          (4 at 2 ranks, 3.3 at 4, 3.1 at 8), all_gather / reduce_scatter t = (3n - 1) / (n - 1)
//          (5 at 2 ranks, 3.7 at 4, 3.3 at 8). So the ceiling depends on the rank count: on
//          H100 the cap binds for all_reduce at 2 ranks (fitted there) and for all_gather /
//          reduce_scatter at 2 and 3 ranks (unmeasured), not at 4 or more, where the link
//          ceiling B x ring_efficiency is lower; then NCCL's protocol factors on B_eff.
//          latency = NCCL's base + steps x step, step = gpu.ring_ll128_step_us (LL128) or
//          gpu.ring_simple_step_us (Simple) where set (fitted to 4- and 8-GPU H100 rings, where
//          the tuner's 1.9 / 3.4 us put 8 ranks 13..30 % too slow at 4..32 MiB), NCCL's hop
//          latency otherwise (LL: 0.6 us).
//   tree:  the tuner's numbers (one H100 measurement agrees within 3%; not fitted).
//   nvls:  algbw = 1 / (1 / A + 1 / C), A = links x nvlink_link_gbps x nvlsEff(arch) x nvls_efficiency
//          x (1 - nvls_rank_loss / n), C = NVLS channels x chunk / nvls_chunk_rtt_us: NCCL runs
//          16 NVLS channels on Hopper (24 on Blackwell) and shrinks their chunk from 128 KiB to
//          64 / 32 / 16 KiB for smaller buffers (src/enqueue.cc, calcCollChunking; at 8 ranks
//          below 1 GiB / 64 MiB / 8 MiB), so small and mid sizes run below the link rate; C is
//          infinite when nvls_chunk_rtt_us is 0. Latency: the tuner's 25 us.
//   p2p:   ring Simple with B_eff (ring_efficiency) and the Simple step; not calibrated.
//   gpu_us  = collective_kernel_us + latency + bytes / (1000 x algbw)   (bytes in B, GB/s -> us)
//             collective_kernel_us: the kernel's own fixed device cost, which NCCL's base
//             latencies leave out (5.25 us on H100, fitted to nccl-tests-h100-4gpu-graph.csv,
//             nccl-tests under CUDA graphs; not seen by the choice above)
//   time_us = (gpu_us^p + launch^p)^(1/p), p = collective_launch_exponent
//             (back-to-back calls: host issue and device time overlap in part; p = 2 when 0),
//             launch = collective_launch_us + ranks x collective_launch_per_gpu_us: the calling
//             process launches one kernel per GPU it drives (nccl-tests -g N drives all ranks).
//             H100: 13 + 2.9 us per GPU (24.6 us at 4 GPUs, 36.2 at 8), p = 5, fitted to the
//             small-size floors of nccl-tests-h100-4gpu.csv and nccl-tests-h100-8gpu-ring.csv
//             (two hosts: a per-GPU host cost and a slower 8-GPU host are not told apart)
// Sizes are what nccl-tests calls size: the whole buffer (all_gather: the receive buffer,
// reduce_scatter: the send buffer, all_to_all: one rank's send buffer, send_recv: one message).
// busbw = algbw x factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
// broadcast, send_recv 1 (nccl-tests doc/PERFORMANCE.md).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chip.pb.h"

namespace tpsim::arch::gpu {

enum class CollOp { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll, kSendRecv };
enum class Algo { kAuto, kRing, kTree, kNvls, kP2p };
enum class Proto { kAuto, kLL, kLL128, kSimple };

// Names as on the command line: all_reduce, all_gather, reduce_scatter, broadcast,
// all_to_all, send_recv; auto, ring, tree, nvls, p2p; auto, ll, ll128, simple.
bool ParseCollOp(std::string_view s, CollOp* op);
bool ParseAlgo(std::string_view s, Algo* a);
bool ParseProto(std::string_view s, Proto* p);
const char* ToString(CollOp op);
const char* ToString(Algo a);
const char* ToString(Proto p);
std::vector<std::string> CollOpNames();

// nccl-tests' bus bandwidth factor (busbw = algbw x factor).
double BusBwFactor(CollOp op, int ranks);

struct CollQuery {
  CollOp op = CollOp::kAllReduce;
  int ranks = 8;
  uint64_t bytes = 0;
  Algo algo = Algo::kAuto;
  Proto proto = Proto::kAuto;
};

struct CollEstimate {
  double time_us = 0;     // nccl-tests' time per call
  double gpu_us = 0;      // device time alone (latency + bytes / algbw), as with CUDA graphs
  double latency_us = 0;  // the pair's latency plus collective_kernel_us (part of gpu_us)
  double algbw_gbps = 0;  // bytes / time_us
  double busbw_gbps = 0;  // algbw x BusBwFactor
  Algo algo = Algo::kRing;
  Proto proto = Proto::kSimple;
  double tuner_us = 0;  // NCCL's own model time for the chosen pair (what auto minimised)
};

// The largest rank count one node models (one NVSwitch domain of 8 GPUs).
constexpr int kMaxNodeRanks = 8;

// Throws std::invalid_argument with a sentence for: ranks outside [2, min(8, gpus)]
// (`gpus` = the chip's GPUs; above 8 NCCL goes over the network between nodes, which this
// model does not have), bytes == 0, and a forced algorithm or protocol the op does not
// have here (tree and nvls: all_reduce only; nvls needs gpu.nvls and the Simple protocol;
// all_to_all and send_recv: p2p with Simple only).
CollEstimate EstimateCollective(const config::Gpu& gpu, int gpus, const CollQuery& q);

// NCCL's tuner time for one pair (-1 when NCCL would not run that pair), for tests and
// `tpsim collectives --help`'s explanation of the choice.
double TunerTimeUs(const config::Gpu& gpu, CollOp op, int ranks, uint64_t bytes, Algo a, Proto p);

}  // namespace tpsim::arch::gpu
