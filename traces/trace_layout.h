#pragma once
// A run's trace laid out: processes (one per node), tracks (a core's compute, sends,
// receives, DRAM), slices placed on them and counters, built from a timed Program
// (BuildLayout); names and annotations are made when written (traces/trace.cc). Internal
// to traces/.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "arch/chip.h"
#include "mapping/program.h"
#include "sim/engine.h"

namespace tpsim::traces::internal {

using sim::Ps;

enum Group { kCompute = 0, kSend = 1, kRecv = 2, kDram = 3, kNumGroups = 4 };
const char* const kGroupNames[kNumGroups] = {"compute", "send", "recv", "dram"};

// Slices hold only what places them; names and annotations are made when written (Describe).
struct Slice {
  enum Type : uint8_t { kMeta, kTask, kRecv, kWait } type = kTask;
  Group group = kCompute;
  int core = 0;
  Ps start = 0, end = 0;
  int64_t task = -1;                   // kTask, kRecv: the task; kWait: the compute task waiting
  int64_t aux = -1;                    // kWait: the dependency it waited for, -1 when none
  uint64_t flow_out = 0, flow_in = 0;  // 0: none
  int track = -1;                      // index into Layout::tracks
};

struct Track {
  uint64_t uuid = 0, parent_uuid = 0;
  int pid = 0, tid = 0;
  std::string name;
};

struct Process {
  uint64_t uuid = 0;
  int pid = 0;
  std::string name;
};

struct Counter {
  uint64_t uuid = 0;
  std::string name;
  std::string unit;
  std::vector<std::pair<Ps, double>> points;  // (time, value from then on), ascending, deduplicated
};

struct Layout {
  std::vector<Process> processes;
  std::vector<Track> tracks;
  std::vector<Slice> slices;
  std::vector<Counter> counters;
  int meta_pid = 1;
  int run_track = -1;  // index into tracks
};

// Throws std::invalid_argument when the engine output does not fit the Program and chip.
void Check(const mapping::Program& p, const arch::Chip& chip, const sim::EngineOutput& out);
// A node's display name.
std::string NodeName(const arch::Chip& chip, int core);
Layout BuildLayout(const mapping::Program& p, const arch::Chip& chip, const sim::EngineOutput& out);

}  // namespace tpsim::traces::internal
