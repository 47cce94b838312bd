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
#include "sim/schedule.h"
#include "sim/step_compose.h"

namespace tpsim::sim {

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
  // Where the memory plan changes at decode step `from` (this template's `first`): `before`
  // (Classify done, the steps before `from`) is this template less some of its memory tasks
  // that follow the context (spills that start at `from`), the others the same tasks in the same
  // order at before's context, with the same deps among them. Sets *masked (per task of this
  // template: not in the steps before `from`) and *b_of_a (per task of `before`: its task here).
  bool Without(const StepTemplate& before, std::vector<uint8_t>* masked, std::vector<uint32_t>* b_of_a,
               std::string* why) const;
  // Checks `head` (the prefill and decode steps 1 .. first - 1) against the template and the
  // gate between its last two steps (sim/step_reuse.h); false with *why on a mismatch.
  bool MatchHead(const mapping::Program& head, std::string* why);
  // (Modulo 2^64: the contexts of steps before `first` too.)
  uint64_t ContextOf(uint32_t k) const { return ctx_first_ + uint64_t{k} - first_; }
  // The tasks that follow the context: attention's compute tasks and the memory tasks whose
  // bytes follow it (MemoryBytesAt): where the KV cache is read from DRAM each step, the
  // reads of it (the context times a fixed number of bytes per token), and where attention's
  // own data outgrows the SRAM left beside the resident weights and KV cache, the spill of
  // what does not fit (written and read back: that data, affine in the context, less the SRAM
  // left, mapping::SramTimeline::BeforeCompute).
  const std::vector<uint32_t>& context_tasks() const { return ctx_tasks_; }
  // Some memory task follows the context (its bytes, duration and channel time change step by
  // step, and where the DRAM is reached over links its flow's bytes: only sim/step_rolling.h
  // times such steps).
  bool context_memory() const { return context_memory_; }
  // Memory task i's bytes in decode step k.
  uint64_t MemoryBytesIn(size_t i, uint32_t k) const { return MemoryBytesAt(i, ContextOf(k)); }
  // Every context task's duration in decode step k (DurationAt; a KV read's MemoryTime), and a
  // KV read's channel time (mapping::ChannelBusyTime), written into `duration` and `busy` (one
  // entry per task; the others are left as they are), each computed once per distinct shape
  // (a step's attention tasks share a few).
  // `skip` (empty, or one flag per task): tasks left as they are.
  void CostsAt(uint32_t k, std::span<Ps> duration, std::span<Ps> busy,
               std::span<const uint8_t> skip = {}) const;
  bool IsContext(size_t i) const { return ctx_[i] != Ctx::kNone; }
  // Compute task i's shape in decode step k.
  mapping::ComputeShape ShapeIn(size_t i, uint32_t k) const { return ShapeAt(i, ContextOf(k)); }
  // Attention task i's duration (mapping::KernelTime) in decode step k.
  Ps DurationAt(size_t i, uint32_t k) const;
  // Ops' flops and bytes and the compute tasks' flops (in id order) in decode step k.
  // Into t->op_flops, op_bytes, op_spilled and compute_flops.
  void WorkAt(uint32_t k, StepTimes* t) const;
  // The analytical engine's times of the template: its durations, checked against the rule.
  bool Calibrate(const EngineOutput& out, std::string* why);
  // Decode step k (k >= first) alone; ok false with *why when a check fails. The reference
  // stays valid until the next call.
  const StepTimes& Time(uint32_t k, std::string* why);
  // The bytes spilled in decode steps k0 .. k1 (Program::spilled_bytes of each step at its
  // context; attention's spills grow with it).
  uint64_t SpilledOver(uint32_t k0, uint32_t k1) const;
  const mapping::Program& program() const { return p_; }
  uint64_t schedules() const { return schedules_; }  // distinct schedules computed

 private:
  enum class Ctx : uint8_t { kNone, kScores, kSoftmax, kPv, kMemory };
  mapping::ComputeShape ShapeAt(size_t task, uint64_t ctx) const;
  uint64_t MemoryBytesAt(size_t task, uint64_t ctx) const;
  uint64_t OpSpilledAt(size_t op, uint64_t ctx) const;
  bool SameStep(const mapping::Program& a, size_t a0, size_t a1, uint64_t ctx, std::string* why) const;
  bool Reduce(std::string* why);
  void PrepareWork();  // work_, once ctx_tasks_ is known

  const mapping::Program& p_;
  const arch::Chip& chip_;
  uint64_t d_, hd_;
  uint32_t first_ = 0;
  uint64_t ctx_first_ = 0;             // the template's context
  std::vector<Ctx> ctx_;               // per task
  std::vector<uint64_t> other_bytes_;  // per op: OpInfo::bytes not from compute tasks
  std::vector<Ps> base_, dur_, busy_, last_key_;
  std::vector<int32_t> first_link_;
  std::vector<uint32_t> ctx_tasks_;  // tasks whose shape follows the context
  // Per memory task whose bytes follow the context (kMemory): bytes per token and the bytes at
  // context 0 (negative for a spill: the SRAM left), and per op its spilled bytes per token.
  std::vector<int64_t> per_token_, at_zero_, op_spill_per_token_;
  int64_t spill_per_token_ = 0;  // the step's (Program::spilled_bytes)
  OpCores pairs_;                // ReduceOps' (op, core) pairs
  // WorkAt's parts that do not follow the context: the ops' flops (of the ops with no context
  // task; 0 for the others) and bytes (but the context tasks'), the compute tasks' flops (the
  // template's), and the compute tasks of the ops with a context task (id, index in
  // compute_flops), in id order.
  struct Work {
    std::vector<double> op_flops, compute_flops;
    std::vector<uint64_t> op_bytes, op_spilled;
    std::vector<std::pair<uint32_t, uint32_t>> tasks;
  } work_;
  bool context_memory_ = false;
  std::unique_ptr<LinkModel> links_;          // the step's flows over links (links.h)
  std::unique_ptr<LinkReservation> reserve_;  // their queues, reset before each schedule
  std::vector<TaskTime> unqueued_;            // the schedule without queues, when it differs
  std::unique_ptr<Dispatcher> dispatcher_;
  StepTimes t_;
  uint64_t schedules_ = 0;
};

}  // namespace tpsim::sim
