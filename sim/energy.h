#pragma once
// Energy of a Program on a chip (chip.energy, configs/schema/chip.proto). One place for the
// accounting; BuildResult and BuildSummary (sim/result.h) call it, so both engines report
// the same dynamic energy (it depends on the Program and the chip, not on timing) and a
// static energy of the chip's static power times their own makespan.
//
// Dynamic energy per task, in picojoules (e = chip.energy):
//   compute, matrix unit (mapping::OnMatrixUnit)
//       MACs x mac            MACs = flops / 2; mac = e.mac_bf16_pj (e.mac_fp32_pj for an fp32
//                             workload)
//     + SRAM                  the task's bytes, split as a GEMM touches them: the output
//                             m x n written, the operands m x k and k x n read:
//                             write = bytes x mn / (mk + mn + kn), read = bytes - write
//   compute, vector unit      vector_ops x e.vector_op_pj + SRAM: half the bytes read, half
//                             written (an element-wise op reads and writes the same size)
//   compute, GPU-node chip    the same MACs and vector ops; the bytes are HBM traffic (the
//   (chip.gpu present)        GPU models stream every kernel's inputs and output from HBM,
//                             mapping/cost.h): bytes x e.hbm_pj_per_byte, no SRAM term
//   collective kernel         (GPU-node chip, op_kind kCollective; m = kind, n = ranks):
//                             wire = bytes x f, f = 2 (n-1)/n for all_reduce, (n-1)/n for
//                             reduce_scatter, all_gather, all_to_all, 1 otherwise (NCCL's bus
//                             bytes per rank); wire x (the route to the next GPU: one hop per
//                             link, through the switch) + wire read and written in HBM
//   transfer                  bytes x sum over the links of its route (arch::Chip::Route) of
//                             e.hop_pj_per_byte (e.d2d_hop_pj_per_byte on die-to-die links)
//                             + bytes read at the source and written at the destination
//                             (SRAM; HBM on a GPU-node chip); 0 when source == destination
//   memory                    bytes x the channel's kind (e.dram_pj_per_byte, e.hbm_pj_per_byte)
//                             + the hops of arch::Chip::MemoryPath + the bytes written to
//                             SRAM (a read) or read from it (a write); GPU-node chips: no SRAM
// Static power = cores x e.core_static_w + channels x e.memory_static_w; static energy =
// static power x makespan.
// Left out: control, instruction and clock-tree energy beyond what the per-event figures
// include, register files and operand delivery inside the matrix unit, the reduction
// arithmetic of reducing transfers, DRAM refresh and activations beyond the per-byte figure.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "arch/chip.h"
#include "mapping/program.h"
#include "workload.pb.h"

namespace tpsim::sim {

// Dynamic energy by event, in picojoules.
struct EnergyParts {
  double compute_pj = 0;  // MACs and vector lane-operations
  double sram_pj = 0;
  double network_pj = 0;
  double memory_pj = 0;  // DRAM / HBM
  double total_pj() const { return compute_pj + sram_pj + network_pj + memory_pj; }
  EnergyParts& operator+=(const EnergyParts& o) {
    compute_pj += o.compute_pj;
    sram_pj += o.sram_pj;
    network_pj += o.network_pj;
    memory_pj += o.memory_pj;
    return *this;
  }
};

// What the accounting needs beyond the Program and the chip.
struct EnergyInputs {
  std::string dtype = "bf16";     // workload.dtype: "bf16" (or "") or "fp32"
  uint64_t prompt_tokens = 0;     // workload.batch x workload.seq_len (0: unknown)
  uint64_t generated_tokens = 0;  // workload.batch x workload.decode_steps
};

// From a fixed-batch workload: its dtype, batch x seq_len prompt tokens and batch x
// decode_steps generated tokens.
EnergyInputs EnergyInputsOf(const config::Workload& w);

struct ProgramEnergy {
  bool modelled = false;         // the chip has an energy block (and a MAC figure for dtype)
  std::vector<EnergyParts> ops;  // per Program::ops entry
  EnergyParts total;             // sum of ops
  double static_w = 0;           // the chip's static power
};

// False when the chip has no energy block, or the workload is fp32 and the chip has no
// mac_fp32_pj.
bool EnergyModelled(const arch::Chip& chip, const std::string& dtype);

// Per-task dynamic energy (see above) on a chip with an energy block, remembering the
// per-byte energy of routes and memory paths (a Program repeats the same few).
class TaskEnergyModel {
 public:
  TaskEnergyModel(const arch::Chip& chip, const std::string& dtype);
  EnergyParts Task(const mapping::Program& p, size_t i);
  // A compute task of shape `s` on `core` (a decode step's attention at another context:
  // sim/step_energy.h); Task(p, i) of a compute task is ComputeAs(p.shape(i), p.core(i)).
  EnergyParts ComputeAs(const mapping::ComputeShape& s, int core);
  // A memory task of `core` moving `bytes` on `channel` (a KV read at another context);
  // Task(p, i) of a memory task is MemoryAs(p.core(i), its channel, bytes and direction).
  EnergyParts MemoryAs(int core, int channel, uint64_t bytes, bool write);

 private:
  void Compute(const mapping::ComputeShape& s, int core, EnergyParts* out);
  // Reading (write false) or writing `bytes` where a core keeps its data: SRAM, or HBM on a
  // GPU-node chip.
  void Local(double bytes, bool write, EnergyParts* out) const;
  double PathPj(const std::vector<int>& links) const;
  double RoutePj(int src, int dst);
  double MemoryPathPj(int core, int channel, bool write);
  double ChannelPj(int channel) const;

  const arch::Chip& chip_;
  const config::Energy& e_;
  const bool gpu_;
  double mac_pj_ = 0, d2d_pj_ = 0;
  std::unordered_map<uint64_t, double> routes_;  // (src, dst) -> pJ per byte
  std::unordered_map<uint64_t, double> paths_;   // (core, channel, write) -> pJ per byte
};

// One task's dynamic energy (see above); zero parts when the chip has no energy block.
EnergyParts TaskEnergy(const mapping::Program& program, size_t task, const arch::Chip& chip,
                       const std::string& dtype);

// Every task's energy, summed per op; modelled false (and nothing summed) when
// EnergyModelled is false.
ProgramEnergy ComputeEnergy(const mapping::Program& program, const arch::Chip& chip,
                            const std::string& dtype);

// What a Result's summary needs of a Program's energy (sim/result.h): the sums over its ops
// in Program::ops order (ops[o] added as EnergyParts), all and by phase.
struct EnergySums {
  bool modelled = false;
  EnergyParts total;  // ProgramEnergy::total (summed task by task)
  EnergyParts prefill, decode;
  double static_w = 0;
};
EnergySums SumEnergy(const mapping::Program& program, const ProgramEnergy& pe);

// cores x core_static_w + channels x memory_static_w, in watts (0 without an energy block).
double StaticPowerW(const arch::Chip& chip);

}  // namespace tpsim::sim
