#pragma once
// Running one experiment end to end: build the chip, lower to a Program, time it
// with an engine, and shape the Result.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mapping/program.h"
#include "result.pb.h"
#include "sim/experiment.h"

namespace tpsim::sim {

class Engine;
struct EngineOutput;
struct StepOverflow;  // sim/step_source.h
struct PreparedProgram;

// What a finished run hands its observers: the Program, the chip, the engine's times and the
// Result (config text, title). The run pipeline knows nothing of what observers do with it;
// the command line attaches the trace writer (tpsim run --trace) as one.
struct RunView {
  const mapping::Program& program;
  const arch::Chip& chip;
  const EngineOutput& timing;
  const config::Result& result;
};
using RunObserver = std::function<void(const RunView&)>;

// ---- Resource and time guards (issue 16), run before lowering.

// The memory a run may take unless --max-memory says otherwise: 80% of the machine's
// memory (MemTotal in /proc/meminfo, or the cgroup's memory.max when that is lower);
// 16 GB when neither can be read. Read once per process.
uint64_t DefaultMaxMemory();
// "8G", "512M", "1.5GB", "64KiB", "1000000": bytes (K, M, G, T are powers of 1024, with
// or without a trailing B or iB); nullopt for anything else, a value past 2^64, a positive size
// under one byte, and a fraction of a byte given in bytes ("1.5").
std::optional<uint64_t> ParseByteSize(const std::string& text);
// A memory limit as refusals print it: "--max-memory 20.2 GB (80% of this machine's memory)".
std::string MemoryLimitText(const std::string& flag, uint64_t max_bytes);

// Refuses an experiment whose Program would take more than `max_bytes` (0: no limit) by
// mapping::EstimateProgram: config::ConfigError at the field that drives the size most
// (workload.decode_steps, the layers, or mapping.tp), with the estimate and the limit.
// `limit_flag` names where the limit came from in the message ("--max-memory").
// `materialised_steps`: the decode steps the run lowers when fewer than the workload's
// (decode-step reuse lowers a few; the message still names workload.decode_steps).
// `task_records`: the Result keeps a record of every task's times (`--tasks`), counted at
// mapping::ProgramEstimate::kTaskRecordBytes each. `note`: appended to the refusal's rule.
void CheckResources(const Experiment& e, const arch::Chip& chip, uint64_t max_bytes,
                    const std::string& limit_flag = "--max-memory",
                    std::optional<uint32_t> materialised_steps = std::nullopt, bool task_records = false,
                    const std::string& note = "");

// Refuses (config::ConfigError, located) an experiment whose times certainly pass the
// 2^63 ps clock, from lower bounds alone: the weight GEMMs' FLOPs at the whole chip's
// achievable peak (chip.core.matrix_utilization, chip.clock_mhz), the streamed weights
// at the whole DRAM bandwidth (chip.memory[].bandwidth_gbps), and one activation chunk
// per layer and pass over the fastest link (chip.noc.link_bandwidth_gbps). Runs that
// pass may still overflow; the engines then throw TimeOverflowError.
void CheckTimeBounds(const Experiment& e, const arch::Chip& chip);

// Times saturate at the clock's maximum instead of wrapping (SatAdd); a saturated end means
// the run cannot be represented. Throws TimeOverflowError naming the first task (in id order)
// that ended there, its payload and the fields its time depends on; returns when `timing`'s
// makespan is below the clock's maximum.
// `tlm_hint`: how to time on the TLM engine a flow too long for the analytical link calendars
// (where the caller has no --engine, as `tpsim collectives`, it names a command that has one).
inline constexpr const char* kTlmEngineHint = "--engine tlm";
void CheckRepresentable(const mapping::Program& program, const arch::Chip& chip, const EngineOutput& timing,
                        const std::string& tlm_hint = kTlmEngineHint);
// The same error for a run made from steps (sim/step_source.h StepOverflow): the task in `head`
// (step 0) or in the template `step`, named by its decode step and its index there.
[[noreturn]] void ThrowStepOverflow(const StepOverflow& o, const mapping::Program& head,
                                    const mapping::Program& step, const arch::Chip& chip);

// On a GPU node, the chip.noc link fields a --set or a sweep axis gave (GivenByCommandOrSweep)
// that `program` reads nothing of, as "FIELD is ignored: why": the TP group's collectives
// are NCCL kernels, so only transfers (pipeline-stage hand-overs, m_split_rotate's rotations)
// cross the links, and a Program without one times none of them. Empty on other chips.
std::vector<std::string> UnreadLinkFields(const Experiment& e, const mapping::Program& program);
// Warnings about mapping.collective in `program`: an algorithm the lowering replaced (halving_doubling
// over 7 ranks runs as ring), once per reason; on a GPU node, a value no collective reads.
std::vector<std::string> CollectiveFallbacks(const Experiment& e, const mapping::Program& program);

struct RunOptions {
  std::string engine;            // empty: the experiment's engine, else "analytical"
  bool keep_task_times = false;  // fill Result.tasks
  // Called as the run enters each stage ("lowering", "timing (tlm engine)", ...), for a
  // progress line; may be empty.
  std::function<void(const char*)> on_stage;
  // Called now and then within a long stage with how far it is: `done` of `total` `what`
  // ("decode steps" timed with reuse, "passes" lowered, "tasks" simulated by the TLM engine),
  // from the thread that does the work; may be empty.
  std::function<void(uint64_t done, uint64_t total, const char* what)> on_count;
  // Refuse before lowering when the Program's estimate exceeds this (0: no limit).
  uint64_t max_memory_bytes = DefaultMaxMemory();
  // Called in order once the Result is built, before RunExperiment returns.
  std::vector<RunObserver> observers;
  // Decode-step reuse (sim/step_reuse.h): kAuto tries it from kAutoReuseSteps decode steps
  // on when the engine lists its schedule and no observer needs the whole Program; kForce
  // tries it from kHeadSteps + 2 steps on; kOff lowers every step. Where its self-checks
  // fail the run lowers every step (RunOutput::reuse says why).
  enum class Reuse { kAuto, kOff, kForce };
  Reuse reuse = Reuse::kAuto;
  // What turned reuse off or needs the whole Program (a flag: "--no-reuse", "--dump-program
  // ..."), said where the memory guard refuses a run that reuse would have made small.
  std::string unrolled_by;
  // The decode steps the observers see (tpsim run --trace-steps), increasing: they get a
  // Program of the prefill and these steps, each task timed as in the whole run; empty: the
  // whole Program. With it, decode-step reuse applies despite observers.
  std::vector<uint32_t> observe_steps;
  // Past this many decode steps the op rows of steps sim::kFirstSummedStep on are summed into
  // one row per op (config::OpResult::steps), reused or unrolled; sim::kRowSteps by default.
  uint32_t row_steps = 256;
  // With decode-step reuse, every step is timed one after the other from the steps before
  // it (sim/step_rolling.h), not first as a periodic schedule (sim/step_period.h) or as
  // separate steps (sim/step_reuse.h): the same Result; for tests and comparisons.
  bool step_by_step = false;
  // Step by step, steps whose order repeats are replayed in that order and checked against
  // the engine's rules instead of run through its event loop (sim/step_stream.h): the same
  // Result; false runs every step through the event loop (for tests and comparisons).
  bool step_replay = true;
  // Where given, what the replay did (the schedule with queues on links).
  struct ReplayStats {
    bool step_by_step = false;  // the steps were timed step by step (else the rest is 0)
    uint64_t replayed = 0, rollbacks = 0;
  };
  ReplayStats* replay_stats = nullptr;
};

// "first,last,every:N,K,...": decode steps 1, `decode_steps`, every N-th (N, 2N, ...) and K,
// sorted and unique; std::invalid_argument naming the bad item otherwise.
std::vector<uint32_t> ParseObserveSteps(const std::string& text, uint32_t decode_steps);

// Decode steps from which RunOptions::Reuse::kAuto reuses steps: below, lowering every step
// takes well under a second (tests/bench/longgen_bench.sh).
inline constexpr uint32_t kAutoReuseSteps = 64;

struct RunOutput {
  config::Result result;
  // The Program timed: the whole workload's, or with decode-step reuse the prefill and the
  // first kHeadSteps decode steps (sim/step_reuse.h).
  mapping::Program program;
  bool reused = false;  // decode steps were timed from one lowered step
  std::string reuse;    // what reuse did (which way, and why not the ways before it), or why
                        // it did not apply ("" when not tried)
};

// Validates, lowers and times `e`. Throws config::ConfigError for bad input and
// sim::StallError when the Program cannot progress.
RunOutput RunExperiment(const Experiment& e, const RunOptions& opts);

// Lowered Programs kept for runs whose lowering inputs are equal (a sweep's points
// that differ only in chip timing).
//
// mapping::Lower reads the chip only through its core grid (num_cores, grid,
// CoreAt), ChannelOf, core.sram_bytes, noc.topology and the collectives settings:
// never a bandwidth, latency, clock, compute-unit or energy field. The key is the model,
// the workload, the mapping and the chip config with exactly the fields of
// TimingOnlyFields() cleared, serialised deterministically; equal keys lower to
// identical Programs (tests/sim/program_cache_test.cc changes each listed field
// and compares the Program dumps). Experiments with placement "file" are never
// cached (the file could change between runs). At most `capacity` Programs are
// kept, least recently used evicted first. Thread-safe: a sweep's workers share
// one cache, and a caller asking for a Program that another is lowering waits for it.
class ProgramCache {
 public:
  explicit ProgramCache(size_t capacity = 4) : capacity_(capacity) {}

  // Field paths (as `--set` takes them; "[]" = every element) that Lower never reads.
  static const std::vector<std::string>& TimingOnlyFields();
  // The cache key of `cfg`; empty when it is not cacheable.
  static std::string Key(const config::Experiment& cfg);

  struct Entry {
    mapping::Program program;
    // What `prepared_by` (an engine name) prepared for `program` (Engine::Prepare: the
    // chip-layout-only work, valid for every chip of the same key); null when none was asked
    // for or the engine has none.
    std::string prepared_by;
    std::shared_ptr<const PreparedProgram> prepared;
  };
  // The Program of `e` on `chip` (the chip built from e), prepared by `engine` when given:
  // cached, or made and cached. Throws what mapping::Lower or Engine::Prepare throw
  // (nothing is cached then).
  std::shared_ptr<const Entry> Get(const Experiment& e, const arch::Chip& chip,
                                   const Engine* engine = nullptr);

  uint64_t hits() const;
  uint64_t misses() const;
  size_t size() const;  // Programs held (and being lowered)

 private:
  struct Slot {
    std::string key;
    std::shared_ptr<const Entry> entry;  // null while being lowered
  };
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::list<Slot> lru_;  // most recent first
  uint64_t hits_ = 0, misses_ = 0;
};

// What a sweep keeps of a point: Result::summary exactly as RunExperiment(e,
// {engine}) computes it, without the rest of the Result. Lowers through `cache`
// when it is not null. Throws like RunExperiment (CheckResources with `max_memory_bytes`).
config::Summary RunSummary(const Experiment& e, const std::string& engine, ProgramCache* cache,
                           uint64_t max_memory_bytes = DefaultMaxMemory());

}  // namespace tpsim::sim
