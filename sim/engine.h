#pragma once
// The interface every timing engine implements: time a Program on a Chip.
// Engines return when each task started and ended, plus network and memory
// statistics; BuildResult (sim/result.h) turns that into the Result schema, so
// both engines emit the same keys.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "arch/chip.h"
#include "configs/registry.h"
#include "mapping/program.h"

namespace tpsim::sim {

using arch::Ps;  // picoseconds (arch/chip.h)

struct StepSource;
struct StepsOutput;

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
  // Analytical engine only (0 elsewhere): the contention indicator of
  // sim/analytical/links.h, high where the TLM engine is expected to differ.
  double contention = 0;
  // Analytical engine only: the makespan without queues on links (the indicator's base).
  Ps unloaded_makespan_ps = 0;
};

// Thrown when a Program cannot progress (a transfer nobody receives, a cycle):
// what() lists the stuck tasks per core.
class StallError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown when a run's times cannot be represented: a time past the 64-bit picosecond
// clock (about 106.7 days). what() names the first task whose time ran past it and the
// chip fields its time depends on.
class TimeOverflowError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // Where one task alone runs past the clock because of one chip field (a DRAM channel's rate
  // of 1e-300 GB/s): that field (chip.memory[0].efficiency) and its value, for the run to
  // report a config error located at it (exit 2); empty where the run's length is the cause.
  TimeOverflowError(const std::string& what, std::string field, std::string value)
      : std::runtime_error(what), field_(std::move(field)), value_(std::move(value)) {}
  const std::string& field() const { return field_; }
  const std::string& value() const { return value_; }

 private:
  std::string field_, value_;
};
// How those messages name the clock's limit, and a time in days ("%.3g days").
inline constexpr const char* kClockLimit = "the 106.7 days (2^63 ps) tpsim can represent";
std::string DaysText(double seconds);

// What an engine works out about a Program that no chip timing field changes (the analytical
// engine's AnalyticalPlan): valid for that Program on every chip of the same layout (core grid,
// topology, channels). Engines define their own subclass.
struct PreparedProgram {
  virtual ~PreparedProgram() = default;
};

// An engine is used as a prepare/run pair: Prepare once per Program and chip layout, then Run on
// each chip (sim::ProgramCache keeps the prepared part beside the Program, so a sweep over
// timing fields prepares once). Callers never ask an engine for its name to pick a fast path.
class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;
  // The chip-layout-only work on `program`; nullptr for an engine that has none (the default).
  // Throws what Run would for a Program it cannot time.
  virtual std::shared_ptr<const PreparedProgram> Prepare(const mapping::Program& program,
                                                         const arch::Chip& chip) const;
  // Times `program` on `chip`. `prepared` is what Prepare returned for this Program on a chip of
  // the same layout, or nullptr (the engine then does that work itself).
  virtual EngineOutput Run(const mapping::Program& program, const arch::Chip& chip,
                           const PreparedProgram* prepared) = 0;
  EngineOutput Run(const mapping::Program& program, const arch::Chip& chip) {
    return Run(program, chip, nullptr);
  }
  // Run(program, chip).makespan_ps, for callers that read nothing else (tpsim serve's
  // iterations): an engine may leave out what only the rest of the output needs (the
  // analytical engine keeps no task times and skips the unloaded schedule).
  virtual Ps Makespan(const mapping::Program& program, const arch::Chip& chip) {
    return Run(program, chip).makespan_ps;
  }
  // True when the engine's times are the schedule of sim/schedule.h (sim::Dispatcher, as the
  // analytical engine of sim/analytical/analytical.h times Programs). Then tools that replay
  // that schedule without lowering every Program (the serving skeletons,
  // sim/serving/skeleton.h) may stand in for it; for any other engine they must not.
  virtual bool ListSchedule() const { return false; }
  // Where Run reports now and then how many of the Program's tasks are done (done, total), from
  // the thread that runs; empty: nowhere. Engines that report read it (the TLM engine).
  void set_progress(std::function<void(uint64_t, uint64_t)> f) { progress_ = std::move(f); }
  // Times a run handed over step by step (sim/step_source.h) without holding it as one
  // Program: the same times as Run on the unrolled Program. false with *why where the engine
  // cannot stream it as the unrolled Program runs (the caller then lowers every step); the
  // default, for engines that do not stream. An exception thrown by one of `source`'s callbacks
  // stops the run and leaves RunSteps as itself.
  virtual bool RunSteps(const StepSource& source, const arch::Chip& chip, StepsOutput* out, std::string* why);

 protected:
  std::function<void(uint64_t, uint64_t)> progress_;
};

// Whether one run may use a second thread for parts of its work that do not depend on each
// other (the analytical engine's unloaded schedule, the Result's energy and critical path):
// on Programs of 200,000 tasks or more, on a machine of two cores or more, when turned on.
// Off by default: `tpsim run` times one Program and turns it on; sweeps, searches and serving
// keep their cores for their own workers. The output is the same either way.
void SetSpareThread(bool on);
bool UseSpareThread(size_t tasks);

// The registry of engines by name (engine, --engine). Adding an engine is one new file
// defining the Engine and its registrar, in sim/analytical/ (engines without SystemC: linked
// into every binary, tpsim-validate included) or sim/tlm/ (engines on the SystemC kernel:
// linked into tpsim only):
//
//   const EngineRegistrar kRegistered("roofline", "one line on the model",
//                                     [] { return std::unique_ptr<Engine>(new Roofline); });
//
// The registered name must equal the engine's name() (tests/sim/registry_test.cc).
using EngineFactory = std::unique_ptr<Engine> (*)();
struct EngineKind {
  using Value = EngineFactory;
  static constexpr std::string_view kName = "engine";
};
using EngineRegistry = Registry<EngineKind>;
using EngineRegistrar = Registrar<EngineKind>;

// Engines by name; nullptr for an unknown name (or one not linked into this binary).
std::unique_ptr<Engine> MakeEngine(const std::string& name);
std::vector<std::string> EngineNames();  // sorted
// The error for an unknown engine name at `where` (field: "engine" or "--engine").
config::Diag UnknownEngineDiag(const config::Location& where, const std::string& field,
                               const std::string& name);

}  // namespace tpsim::sim
