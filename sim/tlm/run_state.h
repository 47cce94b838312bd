#pragma once
// State shared by the modules of one TLM run: the tasks, the chip, task times and the
// dependency counters. Plain C++ (SystemC only for the time: NowPs); owned by the engine's Run
// or RunSteps.
//
// A run is a Program, or a head Program and decode steps made from a template (StepSource,
// sim/step_source.h; TlmEngine::RunSteps): then a step's tasks exist in one of a ring of
// slots from when one of their deps ends until the step has ended and been handed out, and
// the critical path is carried forward task by task (sim::CriticalPath's rule: each task's
// split is its enabler's plus its own part), since no Program holds the whole run's times.

#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <systemc>
#include <utility>
#include <vector>

#include "arch/chip.h"
#include "mapping/program.h"
#include "sim/engine.h"
#include "sim/schedule.h"
#include "sim/step_source.h"

namespace tpsim::sim::tlm_model {

class Core;

// A task of the run: its id in a Program; streamed, the head's id or (decode step << 32 | task
// of the template), which order as the unrolled Program's ids.
using TaskRef = uint64_t;

struct RunState {
  RunState(const mapping::Program& p, const arch::Chip& c);
  // Streamed steps; `stream_why` says why the source cannot be streamed (then nothing runs).
  RunState(const StepSource& s, const arch::Chip& c);

  const mapping::Program& program;  // the Program, or the head
  const arch::Chip& chip;
  const StepSource* source = nullptr;
  std::vector<Core*> cores;

  // A task's Program (the head's or the template's) and its index there.
  bool InStep(TaskRef t) const { return (t >> 32) != 0; }
  const mapping::Program& ProgramOf(TaskRef t) const { return InStep(t) ? *source->step : program; }
  static uint32_t IndexOf(TaskRef t) { return static_cast<uint32_t>(t); }
  // Per-task fields that every step shares are kept per record (the head's tasks, then the
  // template's); times and counters per slot.
  size_t Record(TaskRef t) const { return InStep(t) ? head_tasks_ + IndexOf(t) : t; }
  size_t SlotOf(TaskRef t) const {
    return InStep(t) ? head_tasks_ + ((t >> 32) & slot_mask_) * step_tasks_ + IndexOf(t) : t;
  }
  mapping::TaskKind kind(TaskRef t) const { return ProgramOf(t).kind(IndexOf(t)); }
  int core(TaskRef t) const { return ProgramOf(t).core(IndexOf(t)); }
  // Its bytes (a KV read's at its step's context).
  uint64_t bytes(TaskRef t) const {
    return InStep(t) && source->context[IndexOf(t)] ? step_bytes_[SlotOf(t) - head_tasks_]
                                                    : ProgramOf(t).bytes(IndexOf(t));
  }
  // A compute task's duration (mapping::KernelTime at its step's context).
  Ps ComputeTime(TaskRef t) const;
  bool via_net(TaskRef t) const { return mem_via_net[Record(t)]; }
  TaskTime& time(TaskRef t) { return times[SlotOf(t)]; }
  // The records, for the modules' per-task tables: record r's Program and index there.
  size_t records() const { return mem_via_net.size(); }
  std::pair<const mapping::Program*, uint32_t> RecordAt(size_t r) const {
    return r < head_tasks_ ? std::pair{&program, static_cast<uint32_t>(r)}
                           : std::pair{source->step, static_cast<uint32_t>(r - head_tasks_)};
  }
  // The unrolled Program's id of a task.
  uint64_t UnrolledId(TaskRef t) const;

  std::vector<TaskTime> times;  // per slot
  std::vector<uint32_t> unmet;  // deps not yet completed (out-of-range deps never are)
  std::vector<uint8_t> done;
  // A compute task whose end would pass the 64-bit picosecond clock: the simulation stops
  // there (sc_stop) with that task's end at the clock's maximum, and the run pipeline
  // reports it (sim::TimeOverflowError) instead of the engine spinning on wrapped times.
  int64_t overflow_task = -1;
  // Streamed: the task whose end passed the clock (the first).
  std::optional<StepOverflow> stream_overflow;
  // Records `task` as ending past the clock and stops the simulation (first one only).
  void StopOnOverflow(TaskRef task);
  // Memory tasks whose data crosses network links (arch::Chip::MemoryPath not
  // empty), per record: the network carries them, behind their channel's service.
  std::vector<uint8_t> mem_via_net;
  uint64_t completed = 0, total = 0;
  // Cores that decide in the next delta cycle (Core::StartNext notified and not run yet).
  int deciding = 0;
  // The run stops (sc_stop: a time past the clock, or a streamed run that cannot go on).
  bool stopping() const { return overflow_task >= 0 || !stream_why.empty(); }
  // Engine::set_progress's, told (completed, tasks) every kProgressTasks tasks; may be null.
  const std::function<void(uint64_t, uint64_t)>* progress = nullptr;
  static constexpr size_t kProgressTasks = 4096;

  // `task` is handed to its core at the current time (its start until it gets its queue:
  // Started, Served; a transfer that queues for nothing keeps it).
  void Issued(TaskRef task, Ps now_ps);
  // Memory task or transfer `task` gets its queue, its channel (Dram) or the first link or
  // switch port of its route (Network), at `start_ps`: its start (sim/schedule.h's, as the
  // analytical engine's: the service start, not the issue).
  void Served(TaskRef task, Ps start_ps);
  // Compute task `task` starts on its core now.
  void Started(TaskRef task, Ps now_ps);
  // Marks `task` done at `now_ps` and hands each task it unblocks to its core.
  void Complete(TaskRef task, Ps now_ps);
  // Hands the tasks without deps to their cores (at time 0).
  void Kickoff();
  // After the simulation: the tasks not done, per core (the stall report).
  std::string Stuck() const;

  // Streamed: why the run cannot go on as the unrolled Program's (empty: it can), the
  // critical path's split and the makespan.
  std::string stream_why;
  // Streamed: what a StepSource callback threw. The callbacks run inside SystemC processes,
  // where an exception would come out as the kernel's report ("uncaught exception ... In
  // process"); one thrown there stops the run (stream_why) and RunSteps rethrows it.
  std::exception_ptr source_threw;
  CriticalPathSplit path() const { return last_.split; }
  Ps makespan() const { return last_.task == kNone ? 0 : last_.end; }

 private:
  static constexpr TaskRef kNone = std::numeric_limits<TaskRef>::max();
  static constexpr Ps kPending = std::numeric_limits<Ps>::max();  // an Ended's end, not ended yet
  // A task (its end and critical-path split) that may enable another.
  struct Ended {
    TaskRef task = kNone;
    Ps end = 0;
    CriticalPathSplit split;
  };
  // A streamed memory task's neighbours on its channel (in sim::CriticalPath's queue order):
  // the request before it, with its end once it ended (kPending before), and the one after it.
  struct MemoryPath {
    Ended prev;
    TaskRef next = kNone;
  };
  // The last task started on a channel or a core (by time, then id: sim::
  // CriticalPath's queue order), and whether it ended.
  struct QueueLast {
    TaskRef task = kNone;
    Ps start = 0;
    bool ended = false;
    Ended at;
  };
  void Fail(const std::string& why);
  // Runs a StepSource callback (returns its answer); what it throws goes to source_threw and
  // stops the run (false).
  template <class F>
  bool Guarded(const F& call) {
    try {
      return call();
    } catch (...) {
      if (!source_threw) source_threw = std::current_exception();
      Fail("a step source callback threw");
      return false;
    }
  }
  // *best becomes e where e ends later, or as late with a lower id (sim::CriticalPath's rule).
  static void Prefer(Ended* best, const Ended& e);
  void Unblock(const Ended& e, TaskRef j);
  bool Ensure(uint32_t k);
  void Grow();  // doubles the ring of slots
  static constexpr size_t kMaxSlots = 1024;
  // Decode step k lacks task i of the template (StepSource::masked).
  bool Lacks(uint64_t k, uint32_t i) const { return k < masked_from_ && source->masked[i]; }
  uint32_t masked_from_ = 0;  // 0: no step lacks a task
  uint32_t back_ = 0;         // the most steps back a task waits
  // Per task of the template: its index in a step that lacks the masked ones (kNoIndex for
  // those), and per task of such a step its task of the template.
  static constexpr uint32_t kNoIndex = 0xffffffffu;
  std::vector<uint32_t> short_index_, template_of_short_;
  void HandOut();
  void StreamComplete(TaskRef task, Ps now_ps);
  Ps Horizon(uint32_t k) const;

  // Streamed (the Program's run has one head, no steps):
  size_t head_tasks_ = 0, step_tasks_ = 0;
  uint64_t slot_mask_ = 0;
  std::vector<uint32_t> first_dependent;  // the head's dependents (CSR, in id order)
  std::vector<uint32_t> dependents;
  std::vector<uint32_t> step_dep_begin_, step_dependents_;  // the template's, in the step
  std::vector<uint32_t> step_unmet_;                        // the template's deps, per task
  std::vector<uint8_t> path_kind_;                          // per record (sim::PathKind)
  std::vector<Ps> duration_;                                // per record: compute tasks' KernelTime
  std::vector<Ps> step_duration_;                           // per task of a slot (no head): a context task's
  std::vector<uint64_t> step_bytes_;
  // Per slot: a task's enabler so far, the latest-ending (then lowest-id) of its deps ended and,
  // for a compute task, of its core's task before it (sim::CriticalPath's candidates).
  std::vector<Ended> enabler_;
  // Per memory task of a slot (memory_of_ numbers them per record: the head's, then the
  // template's), its MemoryPath; a channel's task before it joins its enabler when it ends.
  std::vector<MemoryPath> memory_;
  std::vector<uint32_t> memory_of_;
  size_t head_memory_ = 0, step_memory_ = 0;
  size_t MemorySlotOf(TaskRef t) const {
    return InStep(t) ? head_memory_ + ((t >> 32) & slot_mask_) * step_memory_ + memory_of_[Record(t)]
                     : memory_of_[t];
  }
  struct Slot {
    uint32_t step = 0;  // 0: free
    uint32_t ended = 0;
    bool issued = false;
    Ps first_issue = 0;
  };
  std::vector<Slot> slots_;
  std::vector<Ps> at_duration_;  // StepSource::at's room
  std::vector<uint64_t> at_bytes_;
  uint64_t head_ended_ = 0;
  bool head_out_ = false;
  uint32_t next_out_ = 0;  // the next step to hand out
  std::vector<QueueLast> core_last_, channel_last_;
  // Per channel: requests that ended before the one before them on their channel, that one
  // not ended yet, with their end (sim::CriticalPath takes that one only if it ends no later).
  std::vector<std::vector<std::pair<TaskRef, Ps>>> channel_early_;
  std::vector<std::vector<TaskRef>> channel_now_;  // per channel: the requests started at its last time
  Ended last_;                                     // the last task to end (the lowest id on ties)
};

// Current SystemC time in picoseconds (the resolution is 1 ps). Inline, from the context
// (sc_time_stamp() is a library call, and the modules ask for the time millions of times).
inline Ps NowPs() { return static_cast<Ps>(sc_core::sc_get_curr_simcontext()->time_stamp().value()); }

}  // namespace tpsim::sim::tlm_model
