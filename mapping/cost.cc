#include "mapping/cost.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "arch/device.h"
#include "arch/gpu/collective.h"
#include "chip.pb.h"

namespace tpsim::mapping {

namespace {

using arch::SatAdd;

}  // namespace

Ps SerialisationPs(uint64_t bytes, double gbps) {
  if (bytes == 0 || gbps <= 0) return 0;
  const double ps = std::ceil(static_cast<double>(bytes) * 1000.0 / gbps);
  // Saturate: converting a double past int64's range is undefined behaviour.
  if (!(ps < static_cast<double>(std::numeric_limits<Ps>::max()))) return std::numeric_limits<Ps>::max();
  return static_cast<Ps>(ps);
}

namespace {

Ps UsToPs(double us) {
  const double ps = std::ceil(us * 1e6);
  if (!(ps < static_cast<double>(std::numeric_limits<Ps>::max()))) return std::numeric_limits<Ps>::max();
  return ps > 0 ? static_cast<Ps>(ps) : 0;
}

// One kernel on a GPU-node chip (see cost.h). Tasks carry no dtype: their kernels are bf16
// (the GPU GEMM model's dtype for 2-byte and fp32 workloads alike).
Ps GpuKernelTime(const arch::Chip& chip, llm::OpKind kind, uint64_t batch, uint64_t m, uint64_t n, uint64_t k,
                 uint64_t bytes) {
  if (kind == llm::OpKind::kCollective) {
    return GpuCollectiveTime(chip, {.op_kind = kind, .batch = batch, .m = m, .n = n, .k = k, .bytes = bytes},
                             false);
  }
  if (!OnMatrixUnit(kind)) return GpuVectorKernelTime(chip, bytes);
  if (m == 0 || n == 0 || k == 0 || batch == 0) return 0;
  return UsToPs(
      arch::CoreGemm(chip, {.m = m, .n = n, .k = k, .batch = batch, .dtype = arch::Dtype::kBf16}).time_us);
}

}  // namespace

Ps GpuVectorKernelTime(const arch::Chip& chip, uint64_t bytes) {
  const config::Gpu& g = chip.config().gpu();
  // gpu.hbm_bandwidth_gbps is GB/s = bytes/ns; 1e-3 us per ns.
  return UsToPs(g.kernel_overhead_us() +
                static_cast<double>(bytes) / (g.hbm_bandwidth_gbps() * g.hbm_efficiency()) * 1e-3);
}

Ps ComputeTime(const arch::Chip& chip, const ComputeShape& s) {
  if (chip.config().has_gpu()) return GpuKernelTime(chip, s.op_kind, s.batch, s.m, s.n, s.k, s.bytes);
  return OnMatrixUnit(s.op_kind) ? chip.GemmTime(s.batch, s.m, s.n, s.k, s.bytes)
                                 : chip.VectorTime(s.vector_ops, s.bytes);
}

Ps ComputeTime(const arch::Chip& chip, const Task& t) {
  if (chip.config().has_gpu()) return GpuKernelTime(chip, t.op_kind, t.batch, t.m, t.n, t.k, t.bytes);
  return OnMatrixUnit(t.op_kind) ? chip.GemmTime(t.batch, t.m, t.n, t.k, t.bytes)
                                 : chip.VectorTime(t.vector_ops, t.bytes);
}

Ps KernelTime(const arch::Chip& chip, const Program& p, const ComputeShape& s) {
  if (s.op_kind == llm::OpKind::kCollective) return GpuCollectiveTime(chip, s, p.kernel_launch_ps > 0);
  return SatAdd(ComputeTime(chip, s), p.kernel_launch_ps);
}

Ps GpuCollectiveTime(const arch::Chip& chip, const ComputeShape& s, bool eager) {
  if (!chip.config().has_gpu())
    throw std::invalid_argument("a collective kernel needs a GPU-node chip (chip.gpu)");
  namespace gpu = arch::gpu;
  gpu::CollQuery q;
  switch (static_cast<CollectiveKind>(s.m)) {
    case CollectiveKind::kAllReduce:
      q.op = gpu::CollOp::kAllReduce;
      break;
    case CollectiveKind::kAllGather:
      q.op = gpu::CollOp::kAllGather;
      break;
    case CollectiveKind::kReduceScatter:
      q.op = gpu::CollOp::kReduceScatter;
      break;
    case CollectiveKind::kAllToAll:
      q.op = gpu::CollOp::kAllToAll;
      break;
    default:
      throw std::invalid_argument("collective kernel: NCCL runs no " +
                                  std::string(ToString(static_cast<CollectiveKind>(s.m))));
  }
  q.ranks = static_cast<int>(s.n);
  q.algo = static_cast<gpu::Algo>(s.k);  // kAuto (0) unless mapping.collective forced one
  q.bytes = s.bytes;
  if (q.ranks < 2 || s.bytes == 0) return 0;
  const gpu::CollEstimate e = gpu::EstimateCollective(chip.config().gpu(), chip.num_cores(), q);
  return UsToPs(eager ? e.time_us : e.gpu_us);
}

Ps InSwitchTime(Ps route_latency_ps, uint64_t bytes, uint64_t port_bytes, double in_switch_gbps) {
  return bytes == 0 ? 0 : SatAdd(route_latency_ps, SerialisationPs(port_bytes, in_switch_gbps));
}

Ps StackedMemoryTime(const arch::Chip& chip, int channel, uint64_t bytes, uint64_t sharers) {
  uint64_t shared = 0;
  if (__builtin_mul_overflow(bytes, sharers, &shared)) shared = std::numeric_limits<uint64_t>::max();
  return chip.DramTime(channel, shared);
}

Ps ChannelBusyTime(const arch::Chip& chip, int channel, uint64_t bytes) {
  const Ps total = chip.DramTime(channel, bytes);
  return bytes == 0 ? 0 : std::max<Ps>(0, total - chip.channels()[channel].latency_ps);
}

Ps TaskTime(const arch::Chip& chip, const Program& p, size_t i) {
  switch (p.kind(i)) {
    case TaskKind::kCompute:
      return KernelTime(chip, p, p.shape(i));
    case TaskKind::kTransfer: {
      const TransferShape& t = p.transfer(i);
      const int src = p.core(i);
      if (src == t.dst_core) return 0;
      if (t.in_switch_gbps <= 0) return TransferTime(chip, src, t.dst_core, t.bytes);
      Ps latency = 0;
      for (int l : chip.Route(src, t.dst_core)) latency = SatAdd(latency, chip.links()[l].latency_ps);
      return InSwitchTime(latency, t.bytes, t.bytes, t.in_switch_gbps);
    }
    case TaskKind::kMemory: {
      const MemoryDetail& m = p.memory(i);
      return MemoryTime(chip, p.core(i), m.channel, m.bytes, m.write);
    }
  }
  return 0;
}

}  // namespace tpsim::mapping
