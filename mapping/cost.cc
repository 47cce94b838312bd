#include "mapping/cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tpsim::mapping {

namespace {

Ps SatAdd(Ps a, Ps b) {
  Ps r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<Ps>::max() : r;
}

}  // namespace

Ps SerialisationPs(uint64_t bytes, double gbps) {
  if (bytes == 0 || gbps <= 0) return 0;
  const double ps = std::ceil(static_cast<double>(bytes) * 1000.0 / gbps);
  // Saturate: converting a double past int64's range is undefined behaviour.
  if (!(ps < static_cast<double>(std::numeric_limits<Ps>::max()))) return std::numeric_limits<Ps>::max();
  return static_cast<Ps>(ps);
}

Ps ComputeTime(const arch::Chip& chip, const ComputeShape& s) {
  return OnMatrixUnit(s.op_kind) ? chip.GemmTime(s.batch, s.m, s.n, s.k, s.bytes)
                                 : chip.VectorTime(s.vector_ops, s.bytes);
}

Ps ComputeTime(const arch::Chip& chip, const Task& t) {
  return OnMatrixUnit(t.op_kind) ? chip.GemmTime(t.batch, t.m, t.n, t.k, t.bytes)
                                 : chip.VectorTime(t.vector_ops, t.bytes);
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
      return ComputeTime(chip, p.shape(i));
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
