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

#include <algorithm>
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
#include "sim/run.h"
#include "sim/sampled_run.h"
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
  std::vector<Ps> pair_compute;                    // ReduceOps' per (op, core) sums
  CriticalPathSplit path;
};

// Each compute task's (op, core) pair as a dense index (ReduceOps sums compute per pair).
struct OpCores {
  std::vector<uint32_t> pair;        // per task: its pair (compute tasks only)
  std::vector<uint32_t> op_of_pair;  // per pair: its op
};
OpCores IndexOpCores(const mapping::Program& p);

// One step's op spans and compute (BuildResult's per-op definitions) from its tasks' times,
// into out->op_all, op_comm, op_mem and op_compute; `pairs`: IndexOpCores(p).
void ReduceOps(const mapping::Program& p, std::span<const TaskTime> t, StepTimes* out, const OpCores& pairs);

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

// The union of each core's task intervals over the whole run (BuildResult's busy_ps), fed in
// steps: intervals that start before every later step's can be merged for good.
class BusyUnion {
 public:
  explicit BusyUnion(int cores) : pending_(cores), cur_(cores, {0, kNone}), total_(cores, 0) {}
  void Add(int core, Ps s, Ps e) { pending_[core].emplace_back(s, e); }
  // Merges every pending interval that starts before `before` (nothing later starts before it).
  void Flush(Ps before) {
    if (sorted_.size() != pending_.size()) sorted_.assign(pending_.size(), 0);
    for (size_t c = 0; c < pending_.size(); ++c) {
      auto& v = pending_[c];
      if (v.empty()) continue;
      // What is left from the last Flush is sorted: sort the new intervals and merge.
      const auto mid = v.begin() + static_cast<std::ptrdiff_t>(sorted_[c]);
      if (!std::is_sorted(mid, v.end())) std::sort(mid, v.end());
      if (mid != v.begin() && mid != v.end() && *mid < *(mid - 1))
        std::inplace_merge(v.begin(), mid, v.end());
      size_t j = 0;
      for (; j < v.size() && v[j].first < before; ++j) Merge(c, v[j]);
      v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(j));
      sorted_[c] = v.size();
    }
  }
  Ps Total(size_t c) const {
    return total_[c] + (cur_[c].second == kNone ? 0 : cur_[c].second - cur_[c].first);
  }

 private:
  static constexpr Ps kNone = std::numeric_limits<Ps>::min();
  void Merge(size_t c, std::pair<Ps, Ps> iv) {
    auto& [cs, ce] = cur_[c];
    if (ce == kNone || iv.first > ce) {
      if (ce != kNone) total_[c] += ce - cs;
      cs = iv.first, ce = iv.second;
    } else {
      ce = std::max(ce, iv.second);
    }
  }
  std::vector<std::vector<std::pair<Ps, Ps>>> pending_;
  std::vector<size_t> sorted_;  // per core: pending_'s sorted prefix
  std::vector<std::pair<Ps, Ps>> cur_;
  std::vector<Ps> total_;
};

// Result.tasks of one composed step: the template's tasks with times `t` + `offset`, ids from
// `id0` on (BuildResult's rows).
void AddTaskTimings(const mapping::Program& step, std::span<const TaskTime> t, Ps offset, uint64_t id0,
                    config::Result* r);

// Adds one composed step (times absolute, reduced into `st`) to its decode layers' totals
// (BuildResult's layer rows: each layer's last end against the previous layer's, from the end
// of the step before, `*prev_end`, which becomes this step's). `decode_layer`: layer -> index
// of its decode row in r->layers. false when the step has a layer with no row.
bool AddLayerTotals(const mapping::Program& step, const StepTimes& st,
                    const std::map<uint32_t, int>& decode_layer, Ps* prev_end, config::Result* r);
// The decode rows of r->layers: layer -> index.
std::map<uint32_t, int> DecodeLayers(const config::Result& r);

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

// `steps` more steps' link and channel use, each the template's alone (`step_out`: bytes and
// busy time; the queues' maxima are not added).
void AddStepsUse(const EngineOutput& step_out, uint64_t steps, std::vector<LinkUsage>* links,
                 std::vector<ChannelUsage>* channels);
// One composed step's tasks (times `t`) into each core's busy union and compute time.
void AddStepCores(const mapping::Program& step, std::span<const TaskTime> t, BusyUnion* busy,
                  std::vector<Ps>* core_compute);
// The run at RunOptions::observe_steps (SampleSteps) of a run composed from a head Program,
// whose segments begin at `begin` with times `head`, and later steps whose times `observed`
// holds (those observed past the head); `links`, `channels` and `makespan` are the run's.
SampledRun SampleComposed(const Experiment& e, const arch::Chip& chip,
                          const std::vector<uint32_t>& observe_steps, std::span<const TaskTime> head,
                          const std::vector<size_t>& begin,
                          const std::map<uint32_t, std::vector<TaskTime>>& observed,
                          std::vector<LinkUsage> links, std::vector<ChannelUsage> channels, Ps makespan);
// Each decode step's deps on the steps before it, as (steps back, task of that step), from
// `head` (segments beginning at `begin`, SegmentBegins) with `n` tasks a step: those of step
// `ref`, checked to be the same in steps 3 .. `last`. *steps_back: the most steps back. false
// with *why when a step differs.
using StepDeps = std::vector<std::vector<std::pair<uint32_t, uint32_t>>>;
bool DepsOnStepsBefore(const mapping::Program& head, const std::vector<size_t>& begin, size_t n, uint32_t ref,
                       uint32_t last, StepDeps* deps, uint32_t* steps_back, std::string* why);

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
  // The tasks that follow the context: attention's compute tasks and, where the KV cache is
  // read from DRAM each step, the memory tasks that read it (their bytes: the context times
  // a fixed number of bytes per token).
  const std::vector<uint32_t>& context_tasks() const { return ctx_tasks_; }
  // Some memory task follows the context (its bytes, duration and channel time change step by
  // step: only sim/step_rolling.h times such steps).
  bool context_memory() const { return context_memory_; }
  // Memory task i's bytes in decode step k.
  uint64_t MemoryBytesIn(size_t i, uint32_t k) const { return MemoryBytesAt(i, ContextOf(k)); }
  // How long memory task i holds its channel in decode step k (mapping::ChannelBusyTime).
  Ps BusyAt(size_t i, uint32_t k) const;
  // DurationAt and (memory tasks) BusyAt of every context task in decode step k, written
  // into `duration` and `busy` (one entry per task; the others are left as they are), each
  // computed once per distinct shape (a step's attention tasks share a few).
  void CostsAt(uint32_t k, std::span<Ps> duration, std::span<Ps> busy) const;
  bool IsContext(size_t i) const { return ctx_[i] != Ctx::kNone; }
  // Compute task i's shape in decode step k.
  mapping::ComputeShape ShapeIn(size_t i, uint32_t k) const { return ShapeAt(i, ContextOf(k)); }
  // Task i's duration (mapping::KernelTime, or a memory task's MemoryTime) in decode step k.
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
  enum class Ctx : uint8_t { kNone, kScores, kSoftmax, kPv, kKvRead };
  mapping::ComputeShape ShapeAt(size_t task, uint64_t ctx) const;
  uint64_t MemoryBytesAt(size_t task, uint64_t ctx) const;
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
  std::vector<uint32_t> ctx_tasks_;     // tasks whose shape follows the context
  std::vector<uint64_t> kv_per_token_;  // per task: a KV read's bytes per token (kKvRead)
  OpCores pairs_;                       // ReduceOps' (op, core) pairs
  bool context_memory_ = false;
  std::unique_ptr<LinkModel> links_;          // the step's flows over links (links.h)
  std::unique_ptr<LinkReservation> reserve_;  // their queues, reset before each schedule
  std::vector<TaskTime> unqueued_;            // the schedule without queues, when it differs
  std::unique_ptr<Dispatcher> dispatcher_;
  StepTimes t_;
  uint64_t schedules_ = 0;
};

}  // namespace tpsim::sim
