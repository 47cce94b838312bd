#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>

#include "validate/gpu_runner.h"
#include "validate/kernels.h"
#include "validate/reference.h"

namespace tpsim::validate {
namespace {

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void Check(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(e));
}
void Check(ncclResult_t e, const char* what) {
  if (e != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(e));
}

// One device's stream, cuBLAS handle and three scratch buffers.
struct Device {
  int id = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  bf16* buf[3] = {nullptr, nullptr, nullptr};
  uint64_t elems = 0;
  // Device arrays of `ptr_cap` pointers to buf[0], buf[1], buf[2] (grouped GEMMs' problems all
  // read and write the scratch buffers), made on first need (a warm-up call: outside the timing).
  void** ptrs[3] = {nullptr, nullptr, nullptr};
  size_t ptr_cap = 0;
  void EnsurePtrs(size_t n) {
    if (n <= ptr_cap) return;
    for (int i = 0; i < 3; ++i) {
      cudaFree(ptrs[i]);
      Check(cudaMalloc(&ptrs[i], n * sizeof(void*)), "cudaMalloc");
      std::vector<void*> host(n, buf[i]);
      Check(cudaMemcpy(ptrs[i], host.data(), n * sizeof(void*), cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    ptr_cap = n;
  }
  void Init(int dev, uint64_t n) {
    id = dev;
    Check(cudaSetDevice(dev), "cudaSetDevice");
    Check(cudaStreamCreate(&stream), "cudaStreamCreate");
    Check(cublasCreate(&blas), "cublasCreate");
    Check(cublasSetStream(blas, stream), "cublasSetStream");
    elems = std::max<uint64_t>(n, 1);
    for (int i = 0; i < 3; ++i) {
      Check(cudaMalloc(&buf[i], elems * sizeof(bf16)), "cudaMalloc");
      LaunchFill(buf[i], elems, 17 + i, 1.0f, stream);
    }
    Check(cudaStreamSynchronize(stream), "fill");
  }
  ~Device() {
    if (!stream) return;
    cudaSetDevice(id);
    for (auto* b : buf) cudaFree(b);
    for (auto* p : ptrs) cudaFree(p);
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
  }
};

uint64_t ElemsNeeded(const Launch& l) {
  switch (l.kind) {
    case LaunchKind::kGemm:
    case LaunchKind::kBatchedGemm:
      return l.batch * std::max({l.m * l.k, l.k * l.n, l.m * l.n});
    case LaunchKind::kGroupedGemm: {  // every problem on the same scratch buffers
      uint64_t most = 0;
      for (const GemmShape& g : l.groups) most = std::max({most, g.m * g.k, g.k * g.n, g.m * g.n});
      return most;
    }
    case LaunchKind::kAllGather:
    case LaunchKind::kReduceScatter:
      return l.count * static_cast<uint64_t>(std::max(1, l.nranks));
    case LaunchKind::kGroupSendRecv: {
      uint64_t sent = 0, received = 0;
      for (const PeerCount& pc : l.sends) sent += pc.count;
      for (const PeerCount& pc : l.recvs) received += pc.count;
      return std::max({l.count, sent, received});
    }
    default:
      return std::max(l.Elements(), l.count);
  }
}

// The experts of an MoE rank: cublasGemmGroupedBatchedEx, one group per problem (each its own
// m, n, k; row-major as Gemm: column-major C^T = W^T X^T), bf16 in and out, fp32 compute. Where
// cuBLAS lacks it (before 12.5) or refuses the types, a loop of cublasGemmEx (the same products).
cublasStatus_t GroupedGemm(Device& d, const Launch& l) {
  const int n = static_cast<int>(l.groups.size());
  if (n == 0) return CUBLAS_STATUS_SUCCESS;
#if defined(CUBLAS_VERSION) && CUBLAS_VERSION >= 120500
  d.EnsurePtrs(static_cast<size_t>(n));
  std::vector<cublasOperation_t> op(n, CUBLAS_OP_N);
  std::vector<int> cm(n), cn(n), ck(n), size(n, 1);
  std::vector<float> alpha(n, 1.0f), beta(n, 0.0f);
  for (int i = 0; i < n; ++i) {
    cm[i] = static_cast<int>(l.groups[i].n);
    cn[i] = static_cast<int>(l.groups[i].m);
    ck[i] = static_cast<int>(l.groups[i].k);
  }
  // A = W [k, n] row-major (lda n), B = X [m, k] (ldb k), C = Y [m, n] (ldc n).
  const cublasStatus_t st = cublasGemmGroupedBatchedEx(
      d.blas, op.data(), op.data(), cm.data(), cn.data(), ck.data(), alpha.data(), d.ptrs[1], CUDA_R_16BF,
      cm.data(), d.ptrs[0], CUDA_R_16BF, ck.data(), beta.data(), d.ptrs[2], CUDA_R_16BF, cm.data(), n,
      size.data(), CUBLAS_COMPUTE_32F);
  if (st != CUBLAS_STATUS_NOT_SUPPORTED) return st;
#endif
  for (const GemmShape& g : l.groups) {
    const cublasStatus_t st1 = Gemm(d.blas, d.buf[0], d.buf[1], d.buf[2], static_cast<int>(g.m),
                                    static_cast<int>(g.n), static_cast<int>(g.k), false);
    if (st1 != CUBLAS_STATUS_SUCCESS) return st1;
  }
  return CUBLAS_STATUS_SUCCESS;
}

void IssueCompute(Device& d, const Launch& l) {
  bf16 *a = d.buf[0], *b = d.buf[1], *y = d.buf[2];
  switch (l.kind) {
    case LaunchKind::kGemm:
      Check(Gemm(d.blas, a, b, y, static_cast<int>(l.m), static_cast<int>(l.n), static_cast<int>(l.k),
                 l.transpose_b),
            "cublasGemmEx");
      break;
    case LaunchKind::kBatchedGemm:
      Check(GemmBatched(d.blas, a, b, y, static_cast<int>(l.batch), static_cast<int>(l.m),
                        static_cast<int>(l.n), static_cast<int>(l.k)),
            "cublasGemmStridedBatchedEx");
      break;
    case LaunchKind::kGroupedGemm:
      Check(GroupedGemm(d, l), "cublasGemmGroupedBatchedEx");
      break;
    case LaunchKind::kRmsNorm:
      LaunchRmsNorm(a, y, l.rows, l.cols, l.group, d.stream);
      break;
    case LaunchKind::kRope:
      LaunchRope(a, y, l.rows, l.cols, l.group, 0, d.stream);
      break;
    case LaunchKind::kSoftmax:
      LaunchSoftmax(a, y, l.rows, l.cols, 0.088f, 0, 0, d.stream);
      break;
    case LaunchKind::kSiluMul:
      LaunchSiluMul(a, b, y, l.Elements(), d.stream);
      break;
    case LaunchKind::kAdd:
      LaunchAdd(a, b, y, l.Elements(), d.stream);
      break;
    case LaunchKind::kCopy:
      LaunchCopy(a, y, l.Elements(), d.stream);
      break;
    default:
      break;
  }
}

// One NCCL call of a participant, on its communicator rank (rank_of: a GPU's rank).
void IssueNccl(Device& d, const Launch& l, ncclComm_t comm, int my, int n, int peer,
               const std::function<int(int)>& rank_of) {
  bf16 *a = d.buf[0], *y = d.buf[2];
  switch (l.kind) {
    case LaunchKind::kAllReduce:
      Check(ncclAllReduce(a, a, l.count, ncclBfloat16, ncclSum, comm, d.stream), "ncclAllReduce");
      break;
    case LaunchKind::kAllGather:
      Check(ncclAllGather(a, y, l.count, ncclBfloat16, comm, d.stream), "ncclAllGather");
      break;
    case LaunchKind::kReduceScatter:
      Check(ncclReduceScatter(a, y, l.count, ncclBfloat16, ncclSum, comm, d.stream), "ncclReduceScatter");
      break;
    case LaunchKind::kSend:
      Check(ncclSend(a, l.count, ncclBfloat16, peer, comm, d.stream), "ncclSend");
      break;
    case LaunchKind::kRecv:
      Check(ncclRecv(y, l.count, ncclBfloat16, peer, comm, d.stream), "ncclRecv");
      break;
    case LaunchKind::kGroupSendRecv: {
      if (!l.sends.empty() || !l.recvs.empty()) {  // an uneven all_to_all: the exact blocks
        uint64_t off = 0;                          // blocks side by side in the scratch buffers (ElemsNeeded)
        for (const PeerCount& pc : l.sends) {
          Check(ncclSend(a + off, pc.count, ncclBfloat16, rank_of(pc.peer), comm, d.stream), "ncclSend");
          off += pc.count;
        }
        off = 0;
        for (const PeerCount& pc : l.recvs) {
          Check(ncclRecv(y + off, pc.count, ncclBfloat16, rank_of(pc.peer), comm, d.stream), "ncclRecv");
          off += pc.count;
        }
        break;
      }
      // A ring rotation of this GPU's bytes in n-1 pieces (rotate / all_to_all volume).
      uint64_t piece = n > 1 ? (l.count + n - 2) / (n - 1) : 0;
      for (int s = 0; s + 1 < n && piece; ++s) {
        Check(ncclSend(a, piece, ncclBfloat16, (my + 1) % n, comm, d.stream), "ncclSend");
        Check(ncclRecv(y, piece, ncclBfloat16, (my + n - 1) % n, comm, d.stream), "ncclRecv");
      }
      break;
    }
    default:
      break;
  }
}

// Times `issue` (which enqueues on the given streams): warmup, then the median of reps,
// each bracketed by events on every stream (the slowest stream counts).
int64_t TimePs(const std::vector<Device*>& devs, const std::function<void()>& issue, const GpuRunOptions& o) {
  for (int i = 0; i < o.warmup; ++i) issue();
  for (Device* d : devs) {
    Check(cudaSetDevice(d->id), "cudaSetDevice");
    Check(cudaStreamSynchronize(d->stream), "warm-up");
  }
  std::vector<cudaEvent_t> ev0(devs.size()), ev1(devs.size());
  for (size_t i = 0; i < devs.size(); ++i) {
    Check(cudaSetDevice(devs[i]->id), "cudaSetDevice");
    Check(cudaEventCreate(&ev0[i]), "cudaEventCreate");
    Check(cudaEventCreate(&ev1[i]), "cudaEventCreate");
  }
  std::vector<double> ms;
  for (int r = 0; r < std::max(1, o.reps); ++r) {
    for (size_t i = 0; i < devs.size(); ++i) {
      Check(cudaSetDevice(devs[i]->id), "cudaSetDevice");
      Check(cudaEventRecord(ev0[i], devs[i]->stream), "cudaEventRecord");
    }
    issue();
    for (size_t i = 0; i < devs.size(); ++i) {
      Check(cudaSetDevice(devs[i]->id), "cudaSetDevice");
      Check(cudaEventRecord(ev1[i], devs[i]->stream), "cudaEventRecord");
    }
    double worst = 0;
    for (size_t i = 0; i < devs.size(); ++i) {
      Check(cudaEventSynchronize(ev1[i]), "cudaEventSynchronize");
      float t = 0;
      Check(cudaEventElapsedTime(&t, ev0[i], ev1[i]), "cudaEventElapsedTime");
      worst = std::max(worst, double{t});
    }
    ms.push_back(worst);
  }
  for (size_t i = 0; i < devs.size(); ++i) {
    cudaEventDestroy(ev0[i]);
    cudaEventDestroy(ev1[i]);
  }
  return static_cast<int64_t>(std::llround(Median(ms) * 1e9));  // ms -> ps
}

// A gate kernel (LaunchGate) and its two flags in mapped host memory: open, and timed out.
// Run() queues the gate on a drained stream, the run behind it, then opens the gate.
class Gate {
 public:
  // How long a gate holds a stream at most: far more than queuing a layer's or a GEMM sample's
  // few hundred launches takes the host.
  static constexpr uint64_t kTimeoutNs = 1000000000;
  Gate() {
    void* p = nullptr;
    Check(cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
    flags_ = static_cast<int*>(p);
  }
  ~Gate() { cudaFreeHost(flags_); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  // Queues `enqueue`'s launches on s behind the gate, opens it and waits for s to drain.
  // Returns whether the gate opened on its timeout (the host queued too slowly).
  bool Run(cudaStream_t s, const std::function<void()>& enqueue, const char* what) {
    Close(s);
    enqueue();
    Open();
    Check(cudaStreamSynchronize(s), what);
    return flag(1) != 0;
  }

 private:
  void Close(cudaStream_t s) {  // the stream has drained: nothing reads the flags now
    flag(0) = 0;
    flag(1) = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    void* dev = nullptr;
    Check(cudaHostGetDevicePointer(&dev, flags_, 0), "cudaHostGetDevicePointer");
    LaunchGate(static_cast<volatile int*>(dev), static_cast<int*>(dev) + 1, kTimeoutNs, s);
    Check(cudaGetLastError(), "gate");
  }
  void Open() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    flag(0) = 1;
  }
  volatile int& flag(int i) { return static_cast<volatile int*>(flags_)[i]; }
  int* flags_ = nullptr;
};

// Times launches 0..n-1 of `issue` (each enqueues on d's stream) queued back to back behind a
// gate, with an event between launches: `warmup` unqueued runs of all, then per launch the
// median over `reps` queued runs of the time between the events around it. Sets *late when the
// gate opened on its timeout (the host queued too slowly: host gaps may be counted in).
std::vector<int64_t> TimeQueuedPs(Device& d, size_t n, const std::function<void(size_t)>& issue,
                                  const GpuRunOptions& o, Gate& gate, bool* late) {
  Check(cudaSetDevice(d.id), "cudaSetDevice");
  for (int w = 0; w < o.warmup; ++w)
    for (size_t i = 0; i < n; ++i) issue(i);
  Check(cudaStreamSynchronize(d.stream), "warm-up");
  std::vector<cudaEvent_t> ev(n + 1);
  for (auto& e : ev) Check(cudaEventCreate(&e), "cudaEventCreate");
  std::vector<std::vector<double>> ms(n);
  for (int r = 0; r < std::max(1, o.reps); ++r) {
    const bool timed_out = gate.Run(
        d.stream,
        [&] {
          Check(cudaEventRecord(ev[0], d.stream), "cudaEventRecord");
          for (size_t i = 0; i < n; ++i) {
            issue(i);
            Check(cudaEventRecord(ev[i + 1], d.stream), "cudaEventRecord");
          }
        },
        "queued run");
    *late = *late || timed_out;
    for (size_t i = 0; i < n; ++i) {
      float t = 0;
      Check(cudaEventElapsedTime(&t, ev[i], ev[i + 1]), "cudaEventElapsedTime");
      ms[i].push_back(t);
    }
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::vector<int64_t> ps(n);
  for (size_t i = 0; i < n; ++i) ps[i] = static_cast<int64_t>(std::llround(Median(ms[i]) * 1e9));
  return ps;
}

struct Comms {
  std::map<std::vector<int>, std::vector<ncclComm_t>> by_set;
  const std::vector<ncclComm_t>& Get(const std::vector<int>& devs) {
    auto it = by_set.find(devs);
    if (it != by_set.end()) return it->second;
    std::vector<ncclComm_t> c(devs.size());
    Check(ncclCommInitAll(c.data(), static_cast<int>(devs.size()), devs.data()), "ncclCommInitAll");
    return by_set.emplace(devs, std::move(c)).first->second;
  }
  ~Comms() {
    for (auto& [k, v] : by_set)
      for (auto c : v) ncclCommDestroy(c);
  }
};

struct Slot {
  size_t g, o, l;
};

}  // namespace

std::string Versions() {
  int rt = 0, drv = 0, nccl = 0, blas_major = 0, blas_minor = 0, blas_patch = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  ncclGetVersion(&nccl);
  cublasGetProperty(MAJOR_VERSION, &blas_major);
  cublasGetProperty(MINOR_VERSION, &blas_minor);
  cublasGetProperty(PATCH_LEVEL, &blas_patch);
  return "CUDA runtime " + std::to_string(rt) + ", driver " + std::to_string(drv) + ", cuBLAS " +
         std::to_string(blas_major) + "." + std::to_string(blas_minor) + "." + std::to_string(blas_patch) +
         ", NCCL " + std::to_string(nccl);
}

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

std::string DeviceName(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return "?";
  return p.name;
}

GpuRunOutput RunOnGpus(const LaunchPlan& plan, const GpuRunOptions& opts) {
  GpuRunOutput out;
  out.devices = DeviceCount();
  if (out.devices == 0) throw std::runtime_error("no CUDA device found");
  out.times = EmptyTimes(plan);
  bool own = true;  // every plan GPU has its own device
  for (const auto& g : plan.gpus) own = own && g.gpu < out.devices;
  auto dev_of = [&](size_t g) { return own ? plan.gpus[g].gpu : static_cast<int>(g % out.devices); };
  if (!own)
    out.notes.push_back("the plan uses " + std::to_string(plan.gpus.size()) + " GPUs, this machine has " +
                        std::to_string(out.devices) +
                        ": every rank's compute ran on the GPUs there are, one rank "
                        "after another; NCCL calls were NOT run and are marked unmeasured");
  std::map<int, uint64_t> need;
  for (size_t g = 0; g < plan.gpus.size(); ++g)
    for (const auto& o : plan.gpus[g].ops)
      for (const auto& l : o.launches) need[dev_of(g)] = std::max(need[dev_of(g)], ElemsNeeded(l));
  std::map<int, std::unique_ptr<Device>> devs;
  for (const auto& [d, n] : need) {
    devs[d] = std::make_unique<Device>();
    devs[d]->Init(d, n);
  }
  // Compute launches: each GPU's in plan order, queued (the default), or each alone.
  Gate gate;
  bool late = false;
  for (size_t g = 0; g < plan.gpus.size(); ++g) {
    Device& d = *devs[dev_of(g)];
    Check(cudaSetDevice(d.id), "cudaSetDevice");
    std::vector<std::pair<size_t, size_t>> at;  // (op, launch) of each compute launch
    for (size_t o = 0; o < plan.gpus[g].ops.size(); ++o)
      for (size_t l = 0; l < plan.gpus[g].ops[o].launches.size(); ++l)
        if (!IsCollective(plan.gpus[g].ops[o].launches[l].kind)) at.push_back({o, l});
    auto launch = [&](size_t i) { return &plan.gpus[g].ops[at[i].first].launches[at[i].second]; };
    if (opts.timing == Timing::kQueued) {
      const std::vector<int64_t> ps = TimeQueuedPs(
          d, at.size(), [&](size_t i) { IssueCompute(d, *launch(i)); }, opts, gate, &late);
      for (size_t i = 0; i < at.size(); ++i) out.times[g][at[i].first][at[i].second] = ps[i];
    } else {
      for (size_t i = 0; i < at.size(); ++i)
        out.times[g][at[i].first][at[i].second] = TimePs(
            {&d}, [&] { IssueCompute(d, *launch(i)); }, opts);
    }
  }
  if (late)
    out.notes.push_back(
        "a queued run's gate opened on its 1 s timeout: the host queued slower than the "
        "GPU ran, so some launch times include the host's gaps");
  if (!own) return out;
  // NCCL calls: participants grouped by collective (send/recv pairs by task).
  std::map<std::pair<int32_t, int64_t>, std::vector<Slot>> groups;
  for (size_t g = 0; g < plan.gpus.size(); ++g)
    for (size_t o = 0; o < plan.gpus[g].ops.size(); ++o)
      for (size_t l = 0; l < plan.gpus[g].ops[o].launches.size(); ++l) {
        const Launch& ln = plan.gpus[g].ops[o].launches[l];
        if (!IsCollective(ln.kind)) continue;
        bool p2p = ln.kind == LaunchKind::kSend || ln.kind == LaunchKind::kRecv;
        // Key: the collective, and the send/recv pair's task or the sub-group (one call each).
        const int64_t sub = p2p ? int64_t{ln.task} : ln.coll_group >= 0 ? -2 - int64_t{ln.coll_group} : -1;
        groups[{ln.collective, sub}].push_back({g, o, l});
      }
  Comms comms;
  for (const auto& entry : groups) {
    const auto& key = entry.first;
    const std::vector<Slot>& slots = entry.second;
    std::vector<int> set;
    for (const Slot& s : slots) set.push_back(dev_of(s.g));
    std::sort(set.begin(), set.end());
    set.erase(std::unique(set.begin(), set.end()), set.end());
    if (set.size() != slots.size()) {
      out.notes.push_back("collective " + std::to_string(key.first) +
                          ": participants share a device; not run");
      continue;
    }
    const auto& cs = comms.Get(set);
    auto rank_of = [&](int dev) {
      return static_cast<int>(std::find(set.begin(), set.end(), dev) - set.begin());
    };
    std::vector<Device*> ds;
    for (int dv : set) ds.push_back(devs[dv].get());
    auto issue = [&] {
      Check(ncclGroupStart(), "ncclGroupStart");
      for (const Slot& s : slots) {
        const Launch& ln = plan.gpus[s.g].ops[s.o].launches[s.l];
        int me = rank_of(dev_of(s.g));
        int peer = ln.peer >= 0 ? rank_of(ln.peer) : -1;
        IssueNccl(*devs[dev_of(s.g)], ln, cs[me], me, static_cast<int>(set.size()), peer, rank_of);
      }
      Check(ncclGroupEnd(), "ncclGroupEnd");
    };
    int64_t ps = TimePs(ds, issue, opts);
    for (const Slot& s : slots) out.times[s.g][s.o][s.l] = ps;
  }
  // The whole plan end to end: every GPU's launches in order; an NCCL call is issued once all
  // its participants have reached it.
  std::vector<Device*> all;
  for (auto& [d, p] : devs) all.push_back(p.get());
  auto whole = [&] {
    std::vector<std::pair<size_t, size_t>> pos(plan.gpus.size(), {0, 0});
    auto advance = [&](size_t g) {
      auto& [o, l] = pos[g];
      while (o < plan.gpus[g].ops.size() && l >= plan.gpus[g].ops[o].launches.size()) ++o, l = 0;
    };
    auto head = [&](size_t g) -> const Launch* {
      advance(g);
      auto [o, l] = pos[g];
      return o < plan.gpus[g].ops.size() ? &plan.gpus[g].ops[o].launches[l] : nullptr;
    };
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t g = 0; g < plan.gpus.size(); ++g) {
        Device& d = *devs[dev_of(g)];
        Check(cudaSetDevice(d.id), "cudaSetDevice");
        while (const Launch* ln = head(g)) {
          if (IsCollective(ln->kind)) break;
          IssueCompute(d, *ln);
          ++pos[g].second;
          progress = true;
        }
      }
      for (const auto& entry : groups) {
        const std::vector<Slot>& slots = entry.second;
        bool ready = true;
        for (const Slot& s : slots) {
          const Launch* h = head(s.g);
          ready = ready && h == &plan.gpus[s.g].ops[s.o].launches[s.l];
        }
        if (!ready) continue;
        std::vector<int> set;
        for (const Slot& s : slots) set.push_back(dev_of(s.g));
        std::sort(set.begin(), set.end());
        const auto& cs = comms.Get(set);
        auto rank_of = [&](int dev) {
          return static_cast<int>(std::find(set.begin(), set.end(), dev) - set.begin());
        };
        Check(ncclGroupStart(), "ncclGroupStart");
        for (const Slot& s : slots) {
          const Launch& ln = plan.gpus[s.g].ops[s.o].launches[s.l];
          int me = rank_of(dev_of(s.g));
          IssueNccl(*devs[dev_of(s.g)], ln, cs[me], me, static_cast<int>(set.size()),
                    ln.peer >= 0 ? rank_of(ln.peer) : -1, rank_of);
        }
        Check(ncclGroupEnd(), "ncclGroupEnd");
        for (const Slot& s : slots) ++pos[s.g].second;
        progress = true;
      }
    }
    for (size_t g = 0; g < plan.gpus.size(); ++g)
      if (head(g)) throw std::runtime_error("whole run: GPU " + std::to_string(plan.gpus[g].gpu) + " stuck");
  };
  out.whole_ps = TimePs(all, whole, opts);
  return out;
}

std::vector<std::string> SelfCheck(std::string* report) {
  std::vector<std::string> fails;
  Check(cudaSetDevice(0), "cudaSetDevice");
  Device d;
  const uint64_t rows = 64, cols = 256, n = rows * cols;
  d.Init(0, n);
  std::vector<bf16> hx(n), hb(n), hy(n);
  std::vector<float> fx(n), fb(n), ref(n), got(n);
  Check(cudaMemcpy(hx.data(), d.buf[0], n * 2, cudaMemcpyDeviceToHost), "copy");
  Check(cudaMemcpy(hb.data(), d.buf[1], n * 2, cudaMemcpyDeviceToHost), "copy");
  for (uint64_t i = 0; i < n; ++i) fx[i] = __bfloat162float(hx[i]), fb[i] = __bfloat162float(hb[i]);
  auto run = [&](const char* name, double tol, const std::function<void()>& gpu,
                 const std::function<void()>& host) {
    gpu();
    Check(cudaStreamSynchronize(d.stream), name);
    Check(cudaMemcpy(hy.data(), d.buf[2], n * 2, cudaMemcpyDeviceToHost), "copy");
    host();
    double err = 0;
    for (uint64_t i = 0; i < n; ++i) err = std::max(err, std::fabs(double{__bfloat162float(hy[i])} - ref[i]));
    *report += std::string(name) + ": max abs error " + std::to_string(err) + " (tolerance " +
               std::to_string(tol) + ")\n";
    if (!(err <= tol))
      fails.push_back(std::string(name) + ": max abs error " + std::to_string(err) + " > " +
                      std::to_string(tol));
  };
  // bf16 keeps 8 significant bits: 2^-8 relative per rounding.
  run(
      "rmsnorm", 0.05, [&] { LaunchRmsNorm(d.buf[0], d.buf[2], rows, cols, 128, d.stream); },
      [&] { RmsNormRef(fx.data(), ref.data(), rows, cols, 128); });
  run(
      "rope", 0.02, [&] { LaunchRope(d.buf[0], d.buf[2], rows, cols, 128, 5, d.stream); },
      [&] { RopeRef(fx.data(), ref.data(), rows, cols, 128, 5); });
  run(
      "softmax", 0.01, [&] { LaunchSoftmax(d.buf[0], d.buf[2], rows, cols, 0.5f, 100, 16, d.stream); },
      [&] { SoftmaxRef(fx.data(), ref.data(), rows, cols, 0.5f, 100, 16); });
  // The same n elements as 8 rows of 2048: rows wider than a warp's 1024 take a block per row.
  run(
      "rmsnorm (2048 wide)", 0.05, [&] { LaunchRmsNorm(d.buf[0], d.buf[2], 8, 2048, 2048, d.stream); },
      [&] { RmsNormRef(fx.data(), ref.data(), 8, 2048, 2048); });
  run(
      "softmax (2048 wide)", 0.01,
      [&] { LaunchSoftmax(d.buf[0], d.buf[2], 8, 2048, 0.5f, 1500, 4, d.stream); },
      [&] { SoftmaxRef(fx.data(), ref.data(), 8, 2048, 0.5f, 1500, 4); });
  run(
      "silu_mul", 0.02, [&] { LaunchSiluMul(d.buf[0], d.buf[1], d.buf[2], n, d.stream); },
      [&] { SiluMulRef(fx.data(), fb.data(), ref.data(), n); });
  // GEMM: Y[64,256] = X[64,64] . W[64,256] from the same buffers (X = first 64x64 of buf0).
  const int m = 64, k = 64, nn = 256;
  run(
      "cublasGemmEx", 0.25,
      [&] { Check(Gemm(d.blas, d.buf[0], d.buf[1], d.buf[2], m, nn, k, false), "gemm"); },
      [&] {
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < nn; ++j) {
            double s = 0;
            for (int q = 0; q < k; ++q) s += double{fx[i * k + q]} * fb[q * nn + j];
            ref[i * nn + j] = static_cast<float>(s);
          }
      });
  return fails;
}

std::vector<CollectivePoint> MeasureCollectives(const std::vector<uint64_t>& sizes, int ranks,
                                                const GpuRunOptions& opts) {
  std::vector<CollectivePoint> pts;
  const int n = std::min(ranks, DeviceCount());
  const char* kinds[] = {"all_reduce", "all_gather", "reduce_scatter"};
  uint64_t max_bytes = 0;
  for (uint64_t b : sizes) max_bytes = std::max(max_bytes, b);
  std::vector<std::unique_ptr<Device>> devs;
  std::vector<int> ids;
  Comms comms;
  if (n >= 2) {
    for (int i = 0; i < n; ++i) {
      devs.push_back(std::make_unique<Device>());
      devs.back()->Init(i, max_bytes / sizeof(bf16) + 1);
      ids.push_back(i);
    }
  }
  for (const char* kind : kinds)
    for (uint64_t bytes : sizes) {
      CollectivePoint p;
      p.kind = kind;
      p.bytes = bytes;
      p.nranks = n;
      if (n >= 2) {
        const auto& cs = comms.Get(ids);
        std::vector<Device*> ds;
        for (auto& d : devs) ds.push_back(d.get());
        Launch l;
        l.kind = p.kind == "all_reduce"   ? LaunchKind::kAllReduce
                 : p.kind == "all_gather" ? LaunchKind::kAllGather
                                          : LaunchKind::kReduceScatter;
        l.count = p.kind == "all_reduce" ? bytes / sizeof(bf16) : bytes / sizeof(bf16) / n;
        l.nranks = n;
        int64_t ps = TimePs(
            ds,
            [&] {
              Check(ncclGroupStart(), "ncclGroupStart");
              for (int r = 0; r < n; ++r) IssueNccl(*devs[r], l, cs[r], r, n, -1, [](int g) { return g; });
              Check(ncclGroupEnd(), "ncclGroupEnd");
            },
            opts);
        p.seconds = static_cast<double>(ps) * 1e-12;
        p.measured = true;
      }
      pts.push_back(p);
    }
  return pts;
}

std::vector<double> MeasureGemms(const std::vector<GemmShapeRow>& shapes, const GpuRunOptions& opts) {
  uint64_t elems = 1;
  for (const auto& s : shapes) elems = std::max({elems, s.m * s.k, s.k * s.n, s.m * s.n});
  Check(cudaSetDevice(0), "cudaSetDevice");
  Device d;
  d.Init(0, elems);
  std::vector<Device*> ds = {&d};
  cudaDeviceProp prop{};
  Check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const uint64_t l2 = static_cast<uint64_t>(std::max(prop.l2CacheSize, 1));
  Gate gate;
  std::vector<double> seconds;
  for (const auto& s : shapes) {
    if (s.dtype != "bf16") throw std::runtime_error("tpsim-validate --gemms times bf16 only, not " + s.dtype);
    auto gemm = [&](const bf16* w) {
      Check(Gemm(d.blas, d.buf[0], w, d.buf[2], static_cast<int>(s.m), static_cast<int>(s.n),
                 static_cast<int>(s.k), false),
            "cublasGemmEx");
    };
    if (opts.timing == Timing::kAlone) {
      seconds.push_back(static_cast<double>(TimePs(
                            ds, [&] { gemm(d.buf[1]); }, opts)) *
                        1e-12);
      continue;
    }
    // Queued: `reps` GEMMs back to back behind the gate, timed as one; the median of 5 such runs,
    // per GEMM. Cold weights: copies of buf[1] read in turn, so that between two reads of one
    // copy the others read at least twice the L2.
    const uint64_t wbytes = s.k * s.n * sizeof(bf16);
    const uint64_t copies =
        opts.warm_l2 ? 1 : std::min<uint64_t>(512, std::max<uint64_t>(2, 2 * l2 / wbytes + 2));
    std::vector<bf16*> w(copies, d.buf[1]);
    for (uint64_t c = 1; c < copies; ++c) {
      Check(cudaMalloc(&w[c], wbytes), "cudaMalloc");
      Check(cudaMemcpyAsync(w[c], d.buf[1], wbytes, cudaMemcpyDeviceToDevice, d.stream), "cudaMemcpyAsync");
    }
    const int per = std::max(1, opts.reps);
    uint64_t next = 0;
    for (int i = 0; i < std::max(1, opts.warmup) * per; ++i) gemm(w[next++ % copies]);
    Check(cudaStreamSynchronize(d.stream), "warm-up");
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    Check(cudaEventCreate(&e0), "cudaEventCreate");
    Check(cudaEventCreate(&e1), "cudaEventCreate");
    std::vector<double> ms;
    bool late = false;
    for (int r = 0; r < 5; ++r) {
      const bool timed_out = gate.Run(
          d.stream,
          [&] {
            Check(cudaEventRecord(e0, d.stream), "cudaEventRecord");
            for (int i = 0; i < per; ++i) gemm(w[next++ % copies]);
            Check(cudaEventRecord(e1, d.stream), "cudaEventRecord");
          },
          "queued GEMMs");
      late = late || timed_out;
      float t = 0;
      Check(cudaEventElapsedTime(&t, e0, e1), "cudaEventElapsedTime");
      ms.push_back(t / per);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    for (uint64_t c = 1; c < copies; ++c) cudaFree(w[c]);
    if (late)
      throw std::runtime_error("queued GEMMs: the gate opened on its timeout (the host queued too slowly)");
    seconds.push_back(Median(ms) * 1e-3);
  }
  return seconds;
}

}  // namespace tpsim::validate
