// nvls: in-switch reduction, what NCCL's NVLS algorithm does on NVSwitch systems
// (NVLink SHARP: the switch adds the GPUs' data with multimem.ld_reduce and
// replicates results with multimem.st). Rank r owns chunk r of the buffer.
//
//   step 0 (reduce in the switch)          step 1 (multicast from the switch)
//
//   gpu0  gpu1 ... gpuP-1                  gpu0  gpu1 ... gpuP-1
//     \     |      /   every rank's          ^     ^      ^    owner r's reduced
//      v    v     v    chunk r, summed       |     |      |    chunk r copied to
//      [  switch: + ]  by the switch,       [  switch: copy ]  every other rank
//            |         lands in owner r            ^
//            v                                     |
//         gpu r                                  gpu r
//
//   all_reduce:     step 0 then step 1 (2 steps)
//   reduce_scatter: step 0 (1 step)
//   all_gather:     step 1 (1 step; rank r starts with chunk r)
//   all_to_all, rotate: ring, with a note (NCCL has no NVLS form of either)
//
// In the Program each arrow pair is a core -> core Task (src rank -> owner with
// reduce in step 0, owner -> rank in step 1, the data pattern of `direct`), so the
// functional executor computes the sum unchanged. Schedule::in_switch marks them:
// the lowering sets Task::in_switch_gbps to the chip's
// collectives.in_switch_bandwidth_gbps, and both timing engines then time them
// through the switch engine instead of the links (mapping/program.h states the
// rule): a GPU's in-switch transfers of one step share its port at that rate, so an
// all_reduce of B bytes over P ranks costs each GPU 2 (P-1)/P x B / bandwidth plus
// two GPU -> switch -> GPU latencies. The bandwidth is therefore the bus bandwidth
// nccl-tests reports (busbw = algbw x 2 (P-1)/P for all_reduce, (P-1)/P for the
// others) and is calibrated against it.

#include "chip.pb.h"
#include "mapping/collective/algorithm.h"

namespace tpsim::mapping {
namespace collective {
namespace {

// Every rank r sends chunk d to rank d (reduce) or its own chunk r to every d.
void SwitchPass(const Args& a, bool reduce, size_t step, std::vector<CollectiveStep>* steps) {
  for (int r = 0; r < a.ranks; ++r) {
    for (int d = 0; d < a.ranks; ++d) {
      if (d == r) continue;
      AddXfers(steps, step, r, d, {Chunk(a.bytes, a.ranks, reduce ? d : r, a.align)}, reduce);
    }
  }
}

Schedule LowerNvls(const Args& a) {
  Schedule s;
  s.algorithm = "nvls";
  s.in_switch = true;
  switch (a.kind) {
    case CollectiveKind::kAllReduce:
      SwitchPass(a, true, 0, &s.steps);
      SwitchPass(a, false, 1, &s.steps);
      break;
    case CollectiveKind::kReduceScatter:
      SwitchPass(a, true, 0, &s.steps);
      break;
    case CollectiveKind::kAllGather:
      SwitchPass(a, false, 0, &s.steps);
      break;
    case CollectiveKind::kAllToAll:
      return RingFallback(a, "nvls: all_to_all has no in-switch form");
    case CollectiveKind::kRotate:
      return RingFallback(a, "nvls: rotate is always a ring rotation");
    case CollectiveKind::kP2p:  // no algorithm lowers it (LowerCollective refuses)
      break;
  }
  return s;
}

const CollectiveRegistrar kRegistered(
    "nvls", "in-switch reduction (NVLink SHARP): reduce in the switch, multicast back", &LowerNvls);

}  // namespace
}  // namespace collective

InSwitchReduction InSwitchReductionOf(const config::Chip& chip) {
  InSwitchReduction sw;
  const auto& c = chip.collectives();
  sw.available =
      chip.noc().topology() == "switch" && c.in_switch_reduction() && c.in_switch_bandwidth_gbps() > 0;
  sw.min_bytes = c.in_switch_min_bytes();
  sw.min_ranks = c.in_switch_min_ranks();
  sw.bandwidth_gbps = c.in_switch_bandwidth_gbps();
  return sw;
}

std::string ChooseCollective(const std::string& requested, CollectiveKind kind, int ranks, uint64_t bytes,
                             const InSwitchReduction& sw) {
  if (requested.empty()) return "ring";
  if (requested != "auto") return requested;
  const bool nvls = sw.available && kind == CollectiveKind::kAllReduce && ranks >= 2 &&
                    static_cast<uint64_t>(ranks) >= sw.min_ranks && bytes >= sw.min_bytes;
  return nvls ? "nvls" : "ring";
}

}  // namespace tpsim::mapping
