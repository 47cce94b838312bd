#include "sim/energy.h"

#include <unordered_map>

#include "mapping/cost.h"

namespace tpsim::sim {

namespace {

using mapping::TaskKind;

}  // namespace

TaskEnergyModel::TaskEnergyModel(const arch::Chip& chip, const std::string& dtype)
    : chip_(chip), e_(chip.config().energy()), gpu_(chip.config().has_gpu()) {
  mac_pj_ = dtype == "fp32" ? e_.mac_fp32_pj() : e_.mac_bf16_pj();
  d2d_pj_ = e_.d2d_hop_pj_per_byte() > 0 ? e_.d2d_hop_pj_per_byte() : e_.hop_pj_per_byte();
}

EnergyParts TaskEnergyModel::Task(const mapping::Program& p, size_t i) {
  EnergyParts out;
  switch (p.kind(i)) {
    case TaskKind::kCompute:
      Compute(p.shape(i), p.core(i), &out);
      break;
    case TaskKind::kTransfer: {
      const mapping::TransferShape& t = p.transfer(i);
      const int src = p.core(i);
      if (t.bytes == 0 || src == t.dst_core) break;
      const double b = static_cast<double>(t.bytes);
      out.network_pj = b * RoutePj(src, t.dst_core);
      Local(b, false, &out);
      Local(b, true, &out);
      break;
    }
    case TaskKind::kMemory: {
      const mapping::MemoryDetail& m = p.memory(i);
      return MemoryAs(p.core(i), m.channel, m.bytes, m.write);
    }
  }
  return out;
}

EnergyParts TaskEnergyModel::MemoryAs(int core, int channel, uint64_t bytes, bool write) {
  EnergyParts out;
  if (bytes == 0) return out;
  const double b = static_cast<double>(bytes);
  out.memory_pj = b * ChannelPj(channel);
  out.network_pj = b * MemoryPathPj(core, channel, write);
  if (!gpu_) out.sram_pj = b * (write ? e_.sram_read_pj_per_byte() : e_.sram_write_pj_per_byte());
  return out;
}

EnergyParts TaskEnergyModel::ComputeAs(const mapping::ComputeShape& s, int core) {
  EnergyParts out;
  Compute(s, core, &out);
  return out;
}

void TaskEnergyModel::Compute(const mapping::ComputeShape& s, int core, EnergyParts* out) {
  const double bytes = static_cast<double>(s.bytes);
  if (s.op_kind == llm::OpKind::kCollective) {
    const int ranks = static_cast<int>(s.n);
    if (ranks < 2 || s.bytes == 0) return;
    const double n = ranks;
    const auto kind = static_cast<mapping::CollectiveKind>(s.m);
    const double f = kind == mapping::CollectiveKind::kAllReduce ? 2 * (n - 1) / n
                     : kind == mapping::CollectiveKind::kReduceScatter ||
                             kind == mapping::CollectiveKind::kAllGather ||
                             kind == mapping::CollectiveKind::kAllToAll
                         ? (n - 1) / n
                         : 1.0;
    const double wire = bytes * f;
    const int next = chip_.num_cores() > 1 ? (core + 1) % chip_.num_cores() : core;
    out->network_pj = wire * RoutePj(core, next);
    Local(wire, false, out);
    Local(wire, true, out);
    return;
  }
  if (mapping::OnMatrixUnit(s.op_kind)) {
    out->compute_pj = s.flops / 2 * mac_pj_;
    if (gpu_) {
      out->memory_pj = bytes * e_.hbm_pj_per_byte();
      return;
    }
    const double m = static_cast<double>(s.m), n = static_cast<double>(s.n), k = static_cast<double>(s.k);
    const double all = m * k + m * n + k * n;
    const double write = all > 0 ? bytes * (m * n) / all : 0;
    out->sram_pj = (bytes - write) * e_.sram_read_pj_per_byte() + write * e_.sram_write_pj_per_byte();
    return;
  }
  out->compute_pj = s.vector_ops * e_.vector_op_pj();
  if (gpu_) {
    out->memory_pj = bytes * e_.hbm_pj_per_byte();
    return;
  }
  out->sram_pj = bytes / 2 * (e_.sram_read_pj_per_byte() + e_.sram_write_pj_per_byte());
}

void TaskEnergyModel::Local(double bytes, bool write, EnergyParts* out) const {
  if (gpu_) {
    out->memory_pj += bytes * e_.hbm_pj_per_byte();
  } else {
    out->sram_pj += bytes * (write ? e_.sram_write_pj_per_byte() : e_.sram_read_pj_per_byte());
  }
}

double TaskEnergyModel::PathPj(const std::vector<int>& links) const {
  double pj = 0;
  for (int l : links) pj += chip_.links()[l].die_to_die ? d2d_pj_ : e_.hop_pj_per_byte();
  return pj;
}

double TaskEnergyModel::RoutePj(int src, int dst) {
  if (src == dst) return 0;
  const uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(src)) << 32 | static_cast<uint32_t>(dst);
  auto it = routes_.find(key);
  if (it != routes_.end()) return it->second;
  const double pj = PathPj(chip_.Route(src, dst));
  routes_.emplace(key, pj);
  return pj;
}

double TaskEnergyModel::MemoryPathPj(int core, int channel, bool write) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(core)) << 32) |
                       (static_cast<uint64_t>(static_cast<uint32_t>(channel)) << 1) | (write ? 1 : 0);
  auto it = paths_.find(key);
  if (it != paths_.end()) return it->second;
  const double pj = PathPj(chip_.MemoryPath(core, channel, write));
  paths_.emplace(key, pj);
  return pj;
}

double TaskEnergyModel::ChannelPj(int channel) const {
  const auto& kind = chip_.config().memory(chip_.channels().at(channel).memory).kind();
  return kind == "hbm" ? e_.hbm_pj_per_byte() : e_.dram_pj_per_byte();
}

EnergyInputs EnergyInputsOf(const config::Workload& w) {
  EnergyInputs in;
  in.dtype = w.dtype().empty() ? "bf16" : w.dtype();
  in.prompt_tokens = static_cast<uint64_t>(w.batch()) * w.seq_len();
  in.generated_tokens = static_cast<uint64_t>(w.batch()) * w.decode_steps();
  return in;
}

bool EnergyModelled(const arch::Chip& chip, const std::string& dtype) {
  if (!chip.config().has_energy()) return false;
  return dtype == "fp32" ? chip.config().energy().mac_fp32_pj() > 0
                         : chip.config().energy().mac_bf16_pj() > 0;
}

EnergyParts TaskEnergy(const mapping::Program& program, size_t task, const arch::Chip& chip,
                       const std::string& dtype) {
  if (!chip.config().has_energy()) return {};
  return TaskEnergyModel(chip, dtype).Task(program, task);
}

ProgramEnergy ComputeEnergy(const mapping::Program& program, const arch::Chip& chip,
                            const std::string& dtype) {
  ProgramEnergy r;
  r.modelled = EnergyModelled(chip, dtype);
  if (!r.modelled) return r;
  r.static_w = StaticPowerW(chip);
  r.ops.assign(program.ops.size(), EnergyParts{});
  TaskEnergyModel acc(chip, dtype);
  for (size_t i = 0; i < program.num_tasks(); ++i) {
    const EnergyParts e = acc.Task(program, i);
    const uint32_t op = program.op(i);
    if (op < r.ops.size()) r.ops[op] += e;
    r.total += e;
  }
  return r;
}

EnergySums SumEnergy(const mapping::Program& program, const ProgramEnergy& pe) {
  EnergySums r;
  r.modelled = pe.modelled;
  if (!pe.modelled) return r;
  r.total = pe.total;
  r.static_w = pe.static_w;
  for (size_t o = 0; o < program.ops.size() && o < pe.ops.size(); ++o) {
    const mapping::Phase ph = program.ops[o].ref.phase;
    if (ph == mapping::Phase::kPrefill) r.prefill += pe.ops[o];
    if (ph == mapping::Phase::kDecode) r.decode += pe.ops[o];
  }
  return r;
}

double StaticPowerW(const arch::Chip& chip) {
  if (!chip.config().has_energy()) return 0;
  const config::Energy& e = chip.config().energy();
  return chip.num_cores() * e.core_static_w() +
         static_cast<double>(chip.channels().size()) * e.memory_static_w();
}

}  // namespace tpsim::sim
