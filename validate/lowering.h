#pragma once
// Program -> per-GPU launch plan for the GPU harness (plain C++, no CUDA).
//
// The Program's chip is a GPU node (noc.topology "switch", one core per GPU), so every
// core that runs a task is one GPU, and a Program rank is the GPU of its core. Per GPU the
// plan lists, in task order and grouped by op (Program::ops[task.op].ref), what
// tpsim-validate launches:
//   weight GEMM           -> cublasGemmEx               (m, n, k; bf16 in, fp32 accumulate)
//   attention QK^T / PV   -> cublasGemmStridedBatchedEx (batch, m, n, k)
//   norms, RoPE, softmax, SiLU*mul, residual add, KV-cache write
//                         -> the harness's own kernels (validate/kernels.h), with rows x cols
// A collective (the transfer tasks sharing one Task::collective) becomes ONE NCCL call per
// participating GPU, placed where that GPU's first transfer of the collective sits:
//   all_reduce     -> ncclAllReduce      count = bytes / elem           (in place)
//   all_gather     -> ncclAllGather      sendcount = bytes / ranks / elem
//   reduce_scatter -> ncclReduceScatter  recvcount = bytes / ranks / elem
//   p2p (pipeline stage hand-off)        -> ncclSend / ncclRecv of each transfer's bytes
//   rotate                               -> one ncclGroupStart..End of the send/recvs this
//                                           GPU takes part in (their bytes summed)
//   all_to_all (MoE dispatch / combine)  -> one ncclGroupStart..End per GPU of an ncclSend to
//                                           each peer it sends to and an ncclRecv from each peer
//                                           it receives from, with the Program's per-peer counts
//                                           (Launch::sends, Launch::recvs: an uneven all_to_all)
// An MoE rank's expert GEMMs (a compute task whose functional ops are several matmuls, or a
// GEMM task with batch > 1 in a Program without functional data) become one grouped GEMM:
//   experts gate+up / down, shared gate+up -> cublasGemmGroupedBatchedEx (one problem per
//                                           matmul, Launch::groups; CUDA 12.5+, else a loop of
//                                           cublasGemmEx, validate/gpu_runner.cu)
// The token gather (copying a rank's own rows into the experts' inputs) and the weighted
// combine (one multiply-add per token, expert and value) are the element-wise kernels of their
// tasks (copy into the GEMM's input is not launched; the sum is an add kernel of rows x cols).
// where `bytes` is CollectiveInfo::bytes (the full tensor each rank holds) and `elem` the
// workload's dtype size. Memory (DRAM) tasks launch nothing on a GPU: HBM traffic is part of
// the kernels that touch it; they are counted per GPU.
// A sub-group collective (CollectiveInfo::groups > 1, e.g. mn_2d's grid-row gathers) is one
// such call per group, among that group's GPUs (`ranks` = CollectiveInfo::ranks, the group's
// `bytes`); Launch::coll_group says which group a GPU's call belongs to.

#include <cstdint>
#include <string>
#include <vector>

#include "mapping/program.h"

namespace tpsim::validate {

enum class LaunchKind : uint8_t {
  kGemm,         // cublasGemmEx
  kBatchedGemm,  // cublasGemmStridedBatchedEx
  kRmsNorm,      // RMSNorm over each row of `cols` values (groups of `group` for per-head norms)
  kRope,         // rotary embedding over groups of `group` (head_dim) columns
  kSoftmax,      // row softmax over `cols` values, causal, scaled
  kSiluMul,      // silu(a) * b
  kAdd,          // a + b (residual)
  kCopy,         // KV-cache write
  kGroupedGemm,  // cublasGemmGroupedBatchedEx (MoE experts; Launch::groups)
  kAllReduce,    // NCCL collectives ...
  kAllGather,
  kReduceScatter,
  kSend,
  kRecv,
  kGroupSendRecv,  // a grouped set of ncclSend/ncclRecv (rotate, all_to_all)
};

const char* ToString(LaunchKind k);
// The library call or kernel name tpsim-validate uses for `k`.
const char* ApiName(LaunchKind k);
bool IsCollective(LaunchKind k);

// One problem of a grouped GEMM: row-major [m, k] x [k, n].
struct GemmShape {
  uint64_t m = 0, n = 0, k = 0;
  bool operator==(const GemmShape&) const = default;
};
// One peer of a grouped send/recv: the other GPU and the element count.
struct PeerCount {
  int peer = -1;
  uint64_t count = 0;
  bool operator==(const PeerCount&) const = default;
};

struct Launch {
  LaunchKind kind = LaunchKind::kGemm;
  uint32_t task = 0;  // first Program task it stands for
  // compute
  uint64_t batch = 1, m = 0, n = 0, k = 0;  // GEMMs
  bool transpose_b = false;                 // GEMM with W^T (m_split_rotate shards)
  uint64_t rows = 0, cols = 0;              // element-wise kernels: elements = rows * cols
  uint32_t group = 0;                       // per-head norm / RoPE: head_dim
  double flops = 0;
  // collectives
  int32_t collective = -1;  // index into Program::collectives
  uint64_t bytes = 0;       // bytes this GPU's call moves as NCCL counts them (see above)
  uint64_t count = 0;       // NCCL element count argument
  int peer = -1;            // send/recv: the other GPU
  int nranks = 0;           // GPUs in the collective (in this GPU's group: see coll_group)
  int coll_group = -1;      // sub-group collectives (CollectiveInfo::groups > 1): this GPU's
                            // group, numbered by smallest core; one NCCL call per group
  bool padded = false;      // bytes did not divide evenly by ranks x elem; count rounded up
  // kGroupedGemm: the problems, in the order of the task's matmuls (flops: their sum)
  std::vector<GemmShape> groups{};
  // kGroupSendRecv of an all_to_all: per peer GPU (ascending), the elements this GPU sends to it
  // and receives from it (sums: bytes / elem); empty for rotate (bytes summed, ring pieces)
  std::vector<PeerCount> sends{}, recvs{};
  uint64_t Elements() const { return rows * cols; }
};

struct OpPlan {
  uint32_t op = 0;  // index into Program::ops
  mapping::OpRef ref;
  std::vector<Launch> launches;
};

struct GpuPlan {
  int gpu = 0;                // the core id (GPU index in the node)
  std::vector<OpPlan> ops;    // in order of each op's first task on this GPU
  uint64_t memory_tasks = 0;  // DRAM tasks not launched
  size_t NumLaunches() const;
  size_t NumKernels() const;      // compute launches
  size_t NumCollectives() const;  // NCCL calls (a grouped send/recv counts once)
};

struct LaunchPlan {
  uint32_t dtype_bytes = 2;
  std::vector<GpuPlan> gpus;  // GPUs that run at least one task, by core id
  std::vector<std::string> notes;
  // The exact kernels, shapes and collectives per GPU (what --dry-run prints).
  std::string Dump(const mapping::Program& p) const;
};

// Lowers `p` for GPUs. `dtype_bytes` is the element size (bf16: 2). Throws
// std::invalid_argument when a task refers to an op or collective that does not exist.
LaunchPlan PlanLaunches(const mapping::Program& p, uint32_t dtype_bytes);

// nccl-tests' definitions: algbw = bytes / time; busbw = algbw x 2(n-1)/n for all_reduce,
// x (n-1)/n for all_gather and reduce_scatter (bytes = the full tensor: the all-gather's
// receive buffer, the reduce-scatter's send buffer), x 1 otherwise. GB/s = 1e9 bytes/s.
double AlgBandwidthGbps(uint64_t bytes, double seconds);
double BusBandwidthGbps(const std::string& kind, uint64_t bytes, double seconds, int nranks);
double BusFactor(const std::string& kind, int nranks);

}  // namespace tpsim::validate
