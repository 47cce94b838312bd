#pragma once
// The interface every timing engine implements: time a Program on a Chip.
// Engines return when each task started and ended, plus network and memory
// statistics; BuildResult (sim/result.h) turns that into the Result schema, so
// both engines emit the same keys.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "arch/chip.h"
#include "mapping/program.h"

namespace tpsim::sim {

using Ps = int64_t;

struct TaskTime {
  Ps start_ps = 0;
  Ps end_ps = 0;
};

struct LinkUsage {
  uint64_t bytes = 0;
  Ps busy_ps = 0;       // time the link was serialising data
  Ps max_queue_ps = 0;  // longest wait of a packet/message for this link
};

struct ChannelUsage {
  uint64_t bytes = 0;
  Ps busy_ps = 0;
  Ps max_queue_ps = 0;
};

struct EngineOutput {
  std::vector<TaskTime> tasks;         // indexed by Task::id
  std::vector<LinkUsage> links;        // indexed by link id (arch::Chip::links())
  std::vector<ChannelUsage> channels;  // indexed by channel id
  Ps makespan_ps = 0;
};

// Thrown when a Program cannot progress (a transfer nobody receives, a cycle):
// what() lists the stuck tasks per core.
class StallError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;
  virtual EngineOutput Run(const mapping::Program& program, const arch::Chip& chip) = 0;
};

// Engines by name ("analytical", "tlm"); nullptr for an unknown name.
std::unique_ptr<Engine> MakeEngine(const std::string& name);
std::vector<std::string> EngineNames();
// The error for an unknown engine name at `where` (field: "engine" or "--engine").
config::Diag UnknownEngineDiag(const config::Location& where, const std::string& field,
                               const std::string& name);

}  // namespace tpsim::sim
