#pragma once
// Composing a run's Result from reused decode steps (sim/step_reuse.h, sim/step_period.h,
// sim/step_rolling.h), with BuildResult's definitions (sim/result.h): each step's op spans and
// compute, op rows (one per op and step, or summed), layer totals, cores' busy union and
// compute, task records, the run-wide summary, links and channels, the sampled view.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "arch/chip.h"
#include "mapping/program.h"
#include "result.pb.h"
#include "sim/engine.h"
#include "sim/result.h"
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
  std::vector<uint64_t> op_spilled;                // OpInfo::spilled_bytes at this step's context
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
  std::vector<uint32_t> collective;  // a GPU's collective kernels, in id order
};
OpCores IndexOpCores(const mapping::Program& p);

// One step's op spans and compute (BuildResult's per-op definitions) from its tasks' times,
// into out->op_all, op_comm, op_mem and op_compute; `pairs`: IndexOpCores(p).
void ReduceOps(const mapping::Program& p, std::span<const TaskTime> t, StepTimes* out, const OpCores& pairs);

// The Result's op rows of reused steps: one row per op and step, or (`sum`) one row per op
// summing the steps from `first_summed` on (config::OpResult::steps), so that the Result does
// not grow; the steps before keep a row each.
class OpRows {
 public:
  OpRows(const mapping::Program& step, bool sum, uint32_t first_summed)
      : step_(step), sum_(sum), first_summed_(first_summed), rows_(sum ? step.ops.size() : 0) {}
  // Decode step k, whose times are `t` relative to `offset` (op_flops and op_bytes at its
  // context); `energy_pj`: its ops' dynamic energy (sim/step_energy.h), empty without an energy
  // model. Steps come in order.
  void Add(uint32_t k, const StepTimes& t, Ps offset, config::Result* r,
           std::span<const double> energy_pj = {});
  // The summed rows, after the last step.
  void Finish(config::Result* r) const;

 private:
  const mapping::Program& step_;
  bool sum_, energy_ = false;
  uint32_t first_summed_;
  uint64_t summed_ = 0;  // steps summed so far
  std::vector<OpRowValues> rows_;
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
      if (mid != v.begin() && mid != v.end() && *mid < *(mid - 1)) {
        merged_.resize(v.size());
        std::merge(v.begin(), mid, mid, v.end(), merged_.begin());
        v.swap(merged_);
      }
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
  std::vector<size_t> sorted_;             // per core: pending_'s sorted prefix
  std::vector<std::pair<Ps, Ps>> merged_;  // Flush's room for a merge
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
// One composed step's tasks (times `t`) into each core's busy union and compute time, in the
// order `order` (task ids, each task on a core once; empty: id order; an order by start makes
// BusyUnion::Flush's sort a check).
void AddStepCores(const mapping::Program& step, std::span<const TaskTime> t, BusyUnion* busy,
                  std::vector<Ps>* core_compute, std::span<const uint32_t> order = {});
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
// Per-task lists as one CSR list (task i's entries at flat[begin[i] .. begin[i + 1])), each
// list sorted first.
template <class T>
void FlattenSorted(std::vector<std::vector<T>>& lists, std::vector<T>* flat, std::vector<uint32_t>* begin) {
  begin->assign(1, 0);
  for (std::vector<T>& v : lists) {
    std::sort(v.begin(), v.end());
    flat->insert(flat->end(), v.begin(), v.end());
    begin->push_back(static_cast<uint32_t>(flat->size()));
  }
}
bool DepsOnStepsBefore(const mapping::Program& head, const std::vector<size_t>& begin, size_t n, uint32_t ref,
                       uint32_t last, StepDeps* deps, uint32_t* steps_back, std::string* why);

}  // namespace tpsim::sim
