#pragma once
// One decode step lowered alone, timed at any context (sim/step_reuse.h has the argument).
//
// The template is the Program of one decode step with no deps on the step before
// (mapping::LowerOptions::skip_prefill). Its attention tasks (scores, softmax, PV) take the
// shapes mapping::AttentionSpanShapes gives at a context; every other task is the same at
// every context. Time(k) schedules decode step k alone with the analytical engine's rule
// (sim::Dispatcher) and the attention durations at step k's context, and reduces the
// schedule to what sim::BuildResult reads of it (sim/result.h): op spans and compute, layer
// increments, core compute and busy time, channel queues, the critical path's split.

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "arch/chip.h"
#include "mapping/program.h"
#include "result.pb.h"
#include "sim/analytical/links.h"
#include "sim/engine.h"
#include "sim/schedule.h"

namespace tpsim::sim {

// First start and last end of a set of tasks (BuildResult's Span).
struct OpSpan {
  Ps first = std::numeric_limits<Ps>::max();
  Ps last = std::numeric_limits<Ps>::min();
  void Add(Ps start, Ps end) {
    first = std::min(first, start);
    last = std::max(last, end);
  }
  bool empty() const { return last == std::numeric_limits<Ps>::min(); }
  Ps length() const { return empty() ? 0 : last - first; }
};

// One step's schedule, relative to the step's start, reduced.
struct StepTimes {
  bool ok = false;
  Ps makespan = 0;
  std::vector<TaskTime> times;  // per task of the template
  std::vector<OpSpan> op_all, op_comm, op_mem;
  std::vector<Ps> op_compute;
  std::vector<double> op_flops;                    // OpInfo::flops at this step's context
  std::vector<uint64_t> op_bytes;                  // OpInfo::bytes at this step's context
  std::vector<std::pair<uint32_t, Ps>> layer_inc;  // (layer, what it adds to the layer's total)
  std::vector<Ps> core_compute, core_busy;         // per core of the chip
  std::vector<Ps> channel_queue;                   // per channel: longest wait for the channel
  std::vector<double> compute_flops;               // per compute task, in id order
  std::vector<Ps> link_wait;                       // per link: the longest a flow waited there
  Ps unloaded = 0;                                 // the makespan without queues on links
  CriticalPathSplit path;
};

// One step's op spans and compute (BuildResult's per-op definitions) from its tasks' times,
// into out->op_all, op_comm, op_mem and op_compute.
void ReduceOps(const mapping::Program& p, std::span<const TaskTime> t, StepTimes* out);

// The Result's op rows of reused steps: one row per op and step, or (`sum`) one row per op
// summing every reused step (config::OpResult::steps), so that the Result does not grow.
class OpRows {
 public:
  OpRows(const mapping::Program& step, bool sum) : step_(step), sum_(sum), rows_(sum ? step.ops.size() : 0) {}
  // A step whose times are `t` relative to `offset` (op_flops and op_bytes at its context);
  // `energy_pj`: its ops' dynamic energy (sim/step_energy.h), empty without an energy model.
  void Add(const StepTimes& t, Ps offset, config::Result* r, std::span<const double> energy_pj = {});
  void Finish(uint64_t steps, config::Result* r) const;

 private:
  struct Row {
    Ps start = 0, compute = 0, comm = 0, mem = 0, total = 0;
    double flops = 0, energy_pj = 0;
    uint64_t bytes = 0;
  };
  const mapping::Program& step_;
  bool sum_, started_ = false, energy_ = false;
  std::vector<Row> rows_;
};

// The run-wide parts of a Result composed from reused steps (BuildResult's definitions).
struct RunTotals {
  Ps total = 0, prefill_end = 0;
  uint32_t decode_steps = 0;
  CriticalPathSplit path;
  std::vector<Ps> core_compute, core_busy;
  double flops = 0;
  uint64_t spilled_bytes = 0;
  std::vector<LinkUsage> links;
  std::vector<ChannelUsage> channels;
};
// Sets r's summary (but prefill, locations, contention), links, DRAM channels and cores.
void FinishResult(const arch::Chip& chip, const RunTotals& t, config::Result* r);

class StepTemplate {
 public:
  // `step`: decode step `first` lowered alone; `d` the dtype's bytes, `hd` the head dim.
  StepTemplate(const mapping::Program& step, const arch::Chip& chip, uint64_t d, uint64_t hd);
  ~StepTemplate();
  // Finds the attention tasks by comparing the template (decode step `first`) with `last`
  // (decode step `steps` alone) and checks that `last` is the template at its context.
  bool Classify(const mapping::Program& last, uint32_t first, uint32_t steps, std::string* why);
  // Tasks [a0, a1) of `a` are decode step k of the template at its context: the same tasks,
  // deps inside the step, ops (flops and bytes from the shapes) and collectives.
  bool MatchStep(const mapping::Program& a, size_t a0, size_t a1, uint32_t k, std::string* why) const;
  // Checks `head` (the prefill and decode steps 1 .. first - 1) against the template and the
  // gate between its last two steps (sim/step_reuse.h); false with *why on a mismatch.
  bool MatchHead(const mapping::Program& head, std::string* why);
  uint64_t ContextOf(uint32_t k) const { return ctx_first_ + k - first_; }
  const std::vector<uint32_t>& context_tasks() const { return ctx_tasks_; }
  bool IsContext(size_t i) const { return ctx_[i] != Ctx::kNone; }
  // Compute task i's shape in decode step k.
  mapping::ComputeShape ShapeIn(size_t i, uint32_t k) const { return ShapeAt(i, ContextOf(k)); }
  // Task i's duration (mapping::KernelTime) in decode step k.
  Ps DurationAt(size_t i, uint32_t k) const;
  // Ops' flops and bytes and the compute tasks' flops (in id order) in decode step k.
  void WorkAt(uint32_t k, std::vector<double>* op_flops, std::vector<uint64_t>* op_bytes,
              std::vector<double>* compute_flops) const;
  // The analytical engine's times of the template: its durations, checked against the rule.
  bool Calibrate(const EngineOutput& out, std::string* why);
  // Decode step k (k >= first) alone; ok false with *why when a check fails. The reference
  // stays valid until the next call.
  const StepTimes& Time(uint32_t k, std::string* why);
  uint64_t spilled_per_step() const { return p_.spilled_bytes; }
  const mapping::Program& program() const { return p_; }
  uint64_t schedules() const { return schedules_; }  // distinct schedules computed

 private:
  enum class Ctx : uint8_t { kNone, kScores, kSoftmax, kPv };
  mapping::ComputeShape ShapeAt(size_t task, uint64_t ctx) const;
  bool SameStep(const mapping::Program& a, size_t a0, size_t a1, uint64_t ctx, std::string* why) const;
  bool Reduce(std::string* why);

  const mapping::Program& p_;
  const arch::Chip& chip_;
  uint64_t d_, hd_;
  uint32_t first_ = 0;
  uint64_t ctx_first_ = 0;             // the template's context
  std::vector<Ctx> ctx_;               // per task
  std::vector<uint64_t> other_bytes_;  // per op: OpInfo::bytes not from compute tasks
  std::vector<Ps> base_, dur_, busy_, last_key_;
  std::vector<int32_t> first_link_;
  std::vector<uint32_t> ctx_tasks_;           // tasks whose shape follows the context
  std::unique_ptr<LinkModel> links_;          // the step's flows over links (links.h)
  std::unique_ptr<LinkReservation> reserve_;  // their queues, reset before each schedule
  std::vector<TaskTime> unqueued_;            // the schedule without queues, when it differs
  std::unique_ptr<Dispatcher> dispatcher_;
  StepTimes t_;
  uint64_t schedules_ = 0;
};

}  // namespace tpsim::sim
