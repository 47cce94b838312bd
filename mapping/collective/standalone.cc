// CollectiveProgram: one collective alone in a Program, for collective sweeps and
// engine tests. Deps follow the lowering (mapping/layout_convert.cc): a transfer waits for
// the transfers of the latest earlier step that wrote into its source rank.

#include <stdexcept>

#include "arch/chip.h"
#include "mapping/collective/collective.h"

namespace tpsim::mapping {

Task XferTask(const Xfer& x, const Schedule& s, const InSwitchReduction& sw, int32_t collective, size_t step,
              const std::vector<int>& cores) {
  Task t;
  t.kind = TaskKind::kTransfer;
  t.core = CoreId(cores.empty() ? x.src : cores[x.src]);
  t.dst_core = CoreId(cores.empty() ? x.dst : cores[x.dst]);
  t.bytes = x.bytes;
  t.offset = x.offset;
  t.dst_offset = x.DstOffset();
  t.reduce = x.reduce;
  if (s.in_switch) t.in_switch_gbps = sw.bandwidth_gbps;
  t.collective = collective;
  t.coll_step = static_cast<uint16_t>(step);
  return t;
}

Program CollectiveProgram(const arch::Chip& chip, const std::string& requested, CollectiveKind kind,
                          int ranks, uint64_t bytes, uint64_t align) {
  if (ranks > chip.num_cores()) {
    throw std::invalid_argument("collective over " + std::to_string(ranks) + " ranks on a chip of " +
                                std::to_string(chip.num_cores()) + " cores");
  }
  const InSwitchReduction sw = InSwitchReductionOf(chip.config());
  const std::string algo = ChooseCollective(requested, kind, ranks, bytes, sw);
  if (algo == "nvls" && !sw.available) {
    throw std::invalid_argument("collective nvls: chip " + chip.config().name() +
                                " has no in-switch reduction (noc.topology switch and "
                                "collectives.in_switch_reduction)");
  }
  Schedule s = LowerCollective(algo, kind, ranks, bytes, align);
  ProgramBuilder b(chip.num_cores(), static_cast<int>(chip.channels().size()));
  Program& p = b.program();
  OpInfo op;
  op.ref.phase = Phase::kPrefill;
  op.ref.op = ToString(kind);
  op.ref.partition = s.algorithm;
  op.ref.note = s.note;
  p.ops.push_back(op);
  CollectiveInfo ci;
  ci.kind = kind;
  ci.algorithm = AlgorithmOf(s.algorithm);
  ci.bytes = bytes;
  ci.ranks = ranks;
  for (int r = 0; r < ranks; ++r) ci.members.push_back(r);
  p.collectives.push_back(ci);
  std::vector<std::vector<TaskId>> last(ranks);
  for (size_t st = 0; st < s.steps.size(); ++st) {
    std::vector<std::vector<TaskId>> now(ranks);
    for (const Xfer& x : s.steps[st].xfers) {
      now[x.dst].push_back(b.Add(XferTask(x, s, sw, 0, st), last[x.src]));
    }
    for (int r = 0; r < ranks; ++r)
      if (!now[r].empty()) last[r] = std::move(now[r]);
  }
  return b.Build();
}

}  // namespace tpsim::mapping
