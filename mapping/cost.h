#pragma once
// The cost model: how long one task of a Program takes on a chip when it runs alone
// (nothing else on its links, its DRAM channel or its switch port). The analytical
// engine, the TLM core, the serving skeletons and the traces ask here, so "which unit
// runs this op" and "what a task costs alone" are decided once.
//
//   compute   OnMatrixUnit(op_kind) (GEMM, batched GEMM, MoE router):
//                 chip.GemmTime(batch, m, n, k, bytes)
//             every other op kind (norms, softmax, element-wise) on the vector unit:
//                 chip.VectorTime(vector_ops, bytes)
//   transfer  over links: chip.TransferTime(src, dst, bytes): hop latencies of the route
//             plus the bytes at its narrowest link; 0 when src == dst or bytes == 0.
//             Through the switch engine (Task::in_switch_gbps > 0): the hop latencies of
//             the route plus ceil(1000 * port_bytes / in_switch_gbps), port_bytes the bytes
//             its source core's switch port sends in the transfer's (collective, step)
//             (the task's own bytes when alone); 0 when bytes == 0.
//   memory    chip.MemoryTime(core, channel, bytes, write): the channel's latency and
//             bandwidth, plus the network path to a channel not stacked under the core
//             (cut-through behind the channel).
//
// On a GPU-node chip (chip.gpu present) a compute task is one kernel, timed by the GPU models:
//   GEMM-like  arch::CoreGemm({m, n, k, batch, bf16}): the GPU GEMM model (arch/gpu/gemm.h),
//              which streams the operands (weights, and for attention the KV cache) from HBM
//              under the math and adds the kernel's fixed cost gpu.kernel_overhead_us
//   the rest   memory-bound: gpu.kernel_overhead_us + bytes / (gpu.hbm_bandwidth_gbps x
//              gpu.hbm_efficiency), bytes the task's inputs and output (GpuVectorKernelTime)
//   collective arch::gpu::EstimateCollective(gpu, cores, {kind, ranks, bytes}) with NCCL's
//              algorithm and protocol choice: gpu_us (the device time, as inside a CUDA graph);
//              in eager mode time_us (nccl-tests' time per call, the host's issue included)
// and a Program in eager mode adds Program::kernel_launch_ps to each other kernel (KernelTime).
//
// The formulas of the chip's functions (cycles, tiles, rounding, saturation) are in
// arch/chip.h. What an engine adds when tasks overlap (links and channels shared,
// sim/analytical/links.h; packets and queues, sim/tlm) is not here.

#include <cstdint>

#include "arch/chip.h"
#include "llm/opgraph.h"
#include "mapping/program.h"

namespace tpsim::mapping {

using Ps = arch::Ps;

// The op kinds the matrix unit runs (GemmTime); every other kind runs on the vector unit.
constexpr bool OnMatrixUnit(llm::OpKind k) {
  return k == llm::OpKind::kGemm || k == llm::OpKind::kBatchedGemm || k == llm::OpKind::kRouter;
}

// A compute task of shape `s` on one core of `chip`.
Ps ComputeTime(const arch::Chip& chip, const ComputeShape& s);
Ps ComputeTime(const arch::Chip& chip, const Task& t);

// A non-GEMM kernel moving `bytes` (read and written) on a GPU-node chip: memory-bound at the
// HBM's achievable rate plus the kernel's fixed cost (see above). Requires chip.gpu.
Ps GpuVectorKernelTime(const arch::Chip& chip, uint64_t bytes);

// A compute task of shape `s` in Program `p`: ComputeTime plus p.kernel_launch_ps (the host's
// launch of the kernel in eager mode on a GPU-node chip; 0 otherwise); a collective kernel
// takes GpuCollectiveTime, eager when p.kernel_launch_ps > 0. What the engines charge.
Ps KernelTime(const arch::Chip& chip, const Program& p, const ComputeShape& s);

// The collective kernel of shape `s` (op_kind kCollective) on a GPU-node chip: NCCL's choice
// as arch::gpu::EstimateCollective predicts it; gpu_us, or time_us when `eager`. Throws
// std::invalid_argument on a chip without a gpu block or for a kind NCCL does not run.
Ps GpuCollectiveTime(const arch::Chip& chip, const ComputeShape& s, bool eager);

// A transfer of `bytes` from core `src` to core `dst` over the network links, alone.
inline Ps TransferTime(const arch::Chip& chip, int src, int dst, uint64_t bytes) {
  return chip.TransferTime(src, dst, bytes);
}

// A transfer of `bytes` through the switch engine at `in_switch_gbps` (bytes/ns), whose
// route's hops add `route_latency_ps`, when its source's switch port sends `port_bytes` in
// its (collective, step) (>= bytes). Saturates at INT64_MAX.
Ps InSwitchTime(Ps route_latency_ps, uint64_t bytes, uint64_t port_bytes, double in_switch_gbps);

// A memory task of `core` on `channel`, alone.
inline Ps MemoryTime(const arch::Chip& chip, int core, int channel, uint64_t bytes, bool write) {
  return chip.MemoryTime(core, channel, bytes, write);
}

// A memory task on `channel` stacked under its core (chip.MemoryPath empty) when `sharers`
// cores share the channel's bandwidth: chip.DramTime(channel, bytes x sharers), saturating;
// what chip.MemoryTime gives then.
Ps StackedMemoryTime(const arch::Chip& chip, int channel, uint64_t bytes, uint64_t sharers = 1);

// The time a memory access of `bytes` keeps `channel` busy: its serialisation,
// chip.DramTime less the channel's latency (0 when bytes == 0). Both engines' channel
// busy_ps; the TLM engine's channel serves its next request after it.
Ps ChannelBusyTime(const arch::Chip& chip, int channel, uint64_t bytes);

// Task `i` of `p` alone on `chip` (an in-switch transfer alone on its port: port_bytes =
// its bytes). Throws std::out_of_range for a core or channel the chip does not have.
Ps TaskTime(const arch::Chip& chip, const Program& p, size_t i);

// ceil(1000 * bytes / gbps) picoseconds (in double precision; 0 when bytes == 0 or gbps <=
// 0), saturating: the serialisation the analytical engine charges links and switch ports.
Ps SerialisationPs(uint64_t bytes, double gbps);

}  // namespace tpsim::mapping
