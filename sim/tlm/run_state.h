#pragma once
// State shared by the modules of one TLM run: the Program, the chip, task
// times and the dependency counters. Plain C++; owned by the engine's Run.

#include <cstdint>
#include <functional>
#include <vector>

#include "arch/chip.h"
#include "mapping/program.h"
#include "sim/engine.h"

namespace tpsim::sim::tlm_model {

class Core;

struct RunState {
  RunState(const mapping::Program& p, const arch::Chip& c);

  const mapping::Program& program;
  const arch::Chip& chip;
  std::vector<TaskTime> times;
  std::vector<uint32_t> unmet;  // deps not yet completed (out-of-range deps never are)
  std::vector<uint8_t> done;
  std::vector<uint32_t> first_dependent;  // CSR over tasks: dependents[first_dependent[i] ..
  std::vector<uint32_t> dependents;       //                             first_dependent[i + 1])
  std::vector<Core*> cores;
  // A compute task whose end would pass the 64-bit picosecond clock: the simulation stops
  // there (sc_stop) with that task's end at the clock's maximum, and the run pipeline
  // reports it (sim::TimeOverflowError) instead of the engine spinning on wrapped times.
  int64_t overflow_task = -1;
  // Records `task` as ending past the clock and stops the simulation (first one only).
  void StopOnOverflow(uint32_t task);
  // Memory tasks whose data crosses network links (arch::Chip::MemoryPath not
  // empty): the network carries them, behind their channel's service.
  std::vector<uint8_t> mem_via_net;
  size_t completed = 0;
  // Engine::set_progress's, told (completed, tasks) every kProgressTasks tasks; may be null.
  const std::function<void(uint64_t, uint64_t)>* progress = nullptr;
  static constexpr size_t kProgressTasks = 4096;

  // Marks `task` done at `now_ps` and hands each task it unblocks to its core.
  void Complete(uint32_t task, Ps now_ps);
};

// Current SystemC time in picoseconds (the resolution is 1 ps).
Ps NowPs();

}  // namespace tpsim::sim::tlm_model
