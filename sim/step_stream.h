#pragma once
// The analytical engine's schedule over a head Program and decode steps made from a template
// as they are needed (sim/step_rolling.h has the argument).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mapping/program.h"
#include "sim/analytical/analytical.h"
#include "sim/analytical/links.h"
#include "sim/engine.h"
#include "sim/schedule.h"
#include "sim/step_source.h"

namespace tpsim::sim {

// The template's tasks as the schedule reads them: per task its queue, resource, kind of
// flow and the kind it counts to on the critical path (together: they are read together),
// its durations and busy times (those of the tasks that follow the context are a step's own:
// StepStream::Durations), deps on the steps before (CSR) and the dependents there (CSR),
// in-step dependents (CSR).
// A decode step's own flow (StepShape::step_flows): its bytes, when it enters its route after
// its start, how long it holds each link and how much later than the first it enters each
// (FlowSet::HoldOf, LagOf).
struct StepFlow {
  uint64_t bytes = 0;
  Ps inject = 0;
  std::vector<Ps> holds, lags;  // per hop (FlowSet::HoldOf, LagOf)
};

struct StepShape {
  struct Task {
    Queue queue;
    uint8_t path_kind;
    bool compute;
    bool context;  // its duration and busy time are each step's own (StepStream::Durations)
    int32_t resource;
    int32_t flow_kind;  // its kind of flow, -1 for none
    int32_t step_flow;  // its index in step_flows, -1 for none
  };
  const mapping::Program* p = nullptr;
  std::vector<Task> task;
  // The flows whose bytes are each step's own (KV reads over links: their kind's route, with
  // a step's bytes, inject and holds, StepFlow).
  std::vector<uint32_t> step_flows;
  std::vector<Ps> duration, busy;
  const FlowSet* flows = nullptr;  // the template's flows (its LinkModel's)
  std::vector<uint32_t> ext_begin, ext_dep_begin, dep_begin;
  std::vector<std::pair<uint32_t, uint32_t>> ext, ext_dep;  // (steps back / on, task of that step)
  std::vector<uint32_t> dependents;                         // in-step, in id order
  // Where the head's steps are another template's (a memory plan that changes later, sim/
  // step_reuse.cc): per task, its index in the head's steps, -1 for none; empty: the same.
  std::vector<int32_t> head_rel;
};

// The analytical engine's schedule (sim::Dispatcher::Run, the same event loop and rules) of
// the unrolled Program of B (the prefill and decode steps 1 .. HB) followed by decode steps
// HB + 1 .. N, each the template's tasks, without materialising it: a step's tasks exist from
// when a task they wait on ends until the step is taken (Take) and the L steps after it have
// started every task. Ids order as the unrolled Program's. `links`: the reservations of links
// (null: the schedule without queues on links, the contention indicator's); `path`: each
// task's critical-path split, carried forward. Once the starts of a step's period repeat, the
// later periods are replayed in that order and checked against the event loop's rules
// instead of run through it (step_stream.cc): the same times.
class StepStream {
 public:
  // Sets a decode step's durations and busy times (sim::TaskCosts) of the tasks that follow the
  // context, over the template's (StepShape::duration, busy; the others are never written).
  // And the step's own flows (StepShape::step_flows), one each.
  using Durations = std::function<void(uint32_t, std::vector<Ps>*, std::vector<Ps>*, std::vector<StepFlow>*)>;
  // B's dependents (CSR, in id order): its own tasks, then the decode steps' after it (the
  // template's deps on the steps before). The same for every schedule over one B, so the
  // schedules with and without queues on links share one (wafer-32x32-qwen3-32b has a head of
  // 10,817,472 tasks).
  struct HeadDependents {
    std::vector<uint32_t> begin;
    std::vector<uint64_t> of;
  };
  static std::shared_ptr<const HeadDependents> DependentsOf(const StepShape& shape, const mapping::Program& B,
                                                            const std::vector<size_t>& bB, uint32_t L,
                                                            uint32_t N);
  // The ring of rooms for the steps in flight: kFixed holds L + 4 rounded up to a power of two
  // (a schedule whose steps another thread composes: it waits for a room, set_wait_for_take;
  // L + 8 was no faster on the reference at 32,768 steps and held 0.6 GB more on
  // wafer-32x32-qwen3-32b);
  // kGrowing starts with one room and doubles where a step starts while every room is still
  // needed (a schedule whose steps are taken as they end, on one thread): it holds what the
  // steps in flight need. A room's arrays are made when a step first takes it.
  enum class Ring { kFixed, kGrowing };
  StepStream(const StepShape& shape, const mapping::Program& B, const LinkedProgram& qb,
             const std::vector<size_t>& bB, uint32_t L, uint32_t N, int cores, size_t channels, size_t links,
             LinkReservation* reservation, bool path, Durations durations,
             std::shared_ptr<const HeadDependents> dependents, Ring ring = Ring::kFixed);
  // Runs until every task of segments 0 .. seg (0: the prefill, k: decode step k) has ended;
  // false with *why when the schedule cannot go on as the unrolled one.
  bool RunUntil(uint32_t seg, std::string* why);
  // Decode step k > HB, after RunUntil(k): its tasks' times; Take(k) frees its room.
  std::span<const TaskTime> times(uint32_t k) const { return slot(k).times; }
  // When memory task i of decode step k became ready: its latest-ending dep's end (every task
  // of a decode step waits on something; the replay keeps it for memory tasks only).
  Ps ready(uint32_t k, uint32_t i) const { return slot(k).waiting[i].best_end; }
  // Task i's busy time in decode step k (its own where it follows the context).
  Ps busy(uint32_t k, uint32_t i) const { return BusyOf(slot(k), i); }
  // Take may come from another thread (the step's composition) than the schedule's: then
  // `wait` is how the schedule waits for a step to be taken before it reuses its room (false:
  // give up).
  void Take(uint32_t k) { taken_.store(k, std::memory_order_release); }
  uint32_t taken() const { return taken_.load(std::memory_order_acquire); }
  void set_wait_for_take(std::function<bool(uint32_t)> wait) { wait_for_take_ = std::move(wait); }
  // No task of a step after k starts earlier than this (the event time, and the starts so far).
  Ps Horizon(uint32_t k) const {
    Ps h = replay_ ? verified_.time : now_;
    for (const Slot& sl : slots_)
      if (sl.step > k && sl.started) h = std::min(h, sl.first_start);
    return h;
  }
  // B's tasks' times, after RunUntil(HB), until DropHeadTimes.
  std::span<const TaskTime> head_times() const { return b_times_; }
  // The caller reads head_times no more: they go, with B's critical-path splits, once B has
  // ended and every task of the L steps after it has started (no later task waits on B's; on
  // wafer-32x32-qwen3-32b, 10,817,472 tasks x 40 B for the queued schedule, x 16 B for the
  // other).
  void DropHeadTimes() { drop_head_times_ = true; }
  Ps total() const { return total_; }
  const CriticalPathSplit& path() const { return last_; }
  bool delayed() const { return delayed_; }  // some flow ended later than alone
  // Where RunUntil stopped because a task's end passed the 2^63 ps clock.
  const std::optional<StepOverflow>& overflow() const { return overflow_; }
  // The replay (step_stream.cc): on by default; tasks it started that stayed, and how often
  // it went back to the event loop.
  void set_replay(bool on) { replay_allowed_ = on; }
  // Decode steps before `from` lack the tasks `masked` marks (a memory plan that changes at
  // `from`): those count as started and ended at the start of time, never ready, and the others
  // do not wait on them. Before the first RunUntil. The replay learns the periods of the steps
  // before `from` and after it apart (a period that mixes them repeats no list: the starts of
  // the steps that lack tasks are fewer); one learned before `from` and replayed after it finds
  // a task whose dep it never starts, and goes back to the event loop.
  void set_masked(uint32_t from, std::vector<uint8_t> masked);
  uint64_t replayed() const { return replayed_; }
  uint64_t rollbacks() const { return rollbacks_; }

 private:
  // A task not started yet: its deps not ended, and the latest-ending one so far (the first
  // to end at that time: ends come in (end, id) order), with its end; kept together, as they
  // are read together.
  struct Waiting {
    uint64_t best;
    Ps best_end;
    uint32_t unmet;
  };
  struct Slot {
    uint32_t step = 0;  // 0: none
    uint32_t started = 0, ended = 0;
    Ps first_start = 0;  // of the tasks started
    std::vector<TaskTime> times;
    std::vector<CriticalPathSplit> split;
    std::vector<Waiting> waiting;
    std::vector<Ps> duration, busy;  // of the tasks that follow the context, by ctx_of_
    std::vector<StepFlow> flows;     // per StepShape::step_flows
    std::vector<uint8_t> begun;      // per task: started
  };
  // The last task started on a core or channel (the critical path's queue predecessor).
  struct Last {
    bool any = false;
    Ps start = 0, end = 0;
    uint64_t id = 0;
    CriticalPathSplit split;
  };
  const Slot& slot(uint32_t k) const { return slots_[k & slot_mask_]; }
  Slot& slot(uint32_t k) { return slots_[k & slot_mask_]; }
  // A task's handle: B's task id, or (step << 32 | task of the template) for a later step's,
  // which orders as the unrolled Program's ids do (every step after B is at least 9 << 32).
  static uint32_t StepOf(uint64_t h) { return static_cast<uint32_t>(h >> 32); }
  static uint32_t RelOf(uint64_t h) { return static_cast<uint32_t>(h); }
  static uint64_t Id(uint32_t k, uint32_t rel) { return uint64_t{k} << 32 | rel; }
  bool Ensure(uint32_t k, std::string* why);
  // Ring::kGrowing: twice the rooms, each step's room at its step's place in the new ring.
  void Grow();
  // Task g starts at `at` (the event time now_), decided at `now` (its ready time in a queue,
  // else `at`); the event loop adds its end to its events.
  // `replayed`: by the replay, which passes the task's latest-ending dep (else in its room).
  bool Start(uint64_t g, Ps at, Ps now, std::string* why, const Waiting* replayed = nullptr);
  template <bool in_b>
  bool StartT(uint64_t g, Ps at, Ps now, std::string* why, const Waiting* replayed);
  // A decode step's task's duration and busy time.
  Ps DurationOf(const Slot& sl, uint32_t i) const {
    return s_.task[i].context ? sl.duration[ctx_of_[i]] : s_.duration[i];
  }
  Ps BusyOf(const Slot& sl, uint32_t i) const {
    return s_.task[i].context ? sl.busy[ctx_of_[i]] : s_.busy[i];
  }
  void Ended(uint64_t g);
  // Task g, started at `at`, as overflow() names it.
  StepOverflow OverflowAt(uint64_t g, Ps at) const;

  // The replay (step_stream.cc). A period: the tasks started at times from decode step k's
  // first task's start to step k + 1's, as (step - k, task of the template) in start order.
  struct Entry {
    int32_t off;
    uint32_t rel;
    bool operator==(const Entry&) const = default;
  };
  // A compute task whose deps have all started, not started itself: ready at r.
  struct Known {
    uint64_t g;
    Ps r;
    uint64_t best;  // its latest-ending dep
  };
  // The last decision of a channel or first link: ties order as the event loop's (ready
  // time, then links before channels, then id).
  struct Key {
    Ps now = std::numeric_limits<Ps>::min();
    uint8_t cls = 0;
    uint64_t g = 0;
    auto operator<=>(const Key&) const = default;
  };
  // The last reservation of links: the event loop reserves at a flow's start, in start order,
  // ties in the order the flows were decided (sim/dispatch_loop.h).
  struct Booking {
    Ps at = std::numeric_limits<Ps>::min();
    Key decided;
    auto operator<=>(const Booking&) const = default;
  };
  // A state to go back to: every start up to `time` made, none after (the queued tasks
  // decided by then that start later are decided again: Rollback).
  struct Cut {
    Ps time = 0;
    size_t undo = 0;        // undo_'s size then
    uint32_t complete = 0;  // every task of steps up to it started
    LinkReservation::State links;
    std::vector<Ps> channel_free, link_free;
    std::vector<Last> core_last, channel_last;
    std::vector<Key> channel_key, link_key;
    Booking finish_key;
    Ps total = 0;
    uint64_t total_id = 0;
    CriticalPathSplit last;
    bool delayed = false;
  };
  void Log(uint64_t g, Ps now);
  bool EnterReplay(uint32_t base, uint32_t cursor, std::string* why);
  bool ReplayOne(uint32_t k, uint32_t i, bool* ok, std::string* why);
  bool DepsOf(uint32_t k, uint32_t i, Ps* r, uint64_t* best) const;
  void SaveCut(Cut* c, Ps time, uint32_t complete);
  bool Rollback(std::string* why);
  bool Rebuild(uint32_t k, std::string* why);
  bool Replay(uint32_t seg, std::string* why);
  void Ready(uint64_t g) { q_.Ready(g); }
  const CriticalPathSplit& SplitOf(uint64_t g) const {
    return g < NB_ ? b_split_[g] : slot(StepOf(g)).split[RelOf(g)];
  }

  const StepShape& s_;
  const mapping::Program& B_;
  const LinkedProgram& qb_;
  const std::vector<size_t>& bB_;
  const uint64_t NB_, n_;
  const uint32_t HB_, L_, N_;
  LinkReservation* links_;
  const bool path_;
  Durations durations_;
  // B's dependents (HeadDependents), and its tasks' Waiting: released once B has ended.
  std::shared_ptr<const HeadDependents> b_deps_;
  std::vector<TaskTime> b_times_;
  std::vector<CriticalPathSplit> b_split_;
  std::vector<Waiting> b_waiting_;
  std::vector<Waiting> step_waiting_;  // a decode step's tasks before any dep ended
  std::vector<uint32_t> seg_ended_;    // B's segments: tasks ended
  bool drop_head_times_ = false;       // DropHeadTimes
  std::vector<Slot> slots_;
  uint32_t slot_mask_ = 0;  // slots_.size() - 1 (a power of two)
  const Ring ring_;
  // The tasks that follow the context, and per task its index among them: a room keeps their
  // durations and busy times only (Durations writes a whole step's into step_duration_ and
  // step_busy_; on wafer-32x32-qwen3-32b, 16 rooms of 0.92 million tasks held 236 MB of copies).
  std::vector<uint32_t> ctx_tasks_, ctx_of_;
  std::vector<Ps> step_duration_, step_busy_;
  std::atomic<uint32_t> taken_{0};
  std::function<bool(uint32_t)> wait_for_take_;
  uint32_t started_upto_ = 0;  // every task of steps <= started_upto_ has started
  // The event loop's state (Dispatcher::Run's queues, sim/dispatch_loop.h).
  Ps now_ = 0;
  DispatchQueues<uint64_t> q_;
  std::vector<Last> core_last_, channel_last_;
  Ps total_ = std::numeric_limits<Ps>::min();
  uint64_t total_id_ = 0;
  CriticalPathSplit last_;
  bool delayed_ = false;
  std::optional<StepOverflow> overflow_;

  // The replay's state (step_stream.cc).
  bool replay_allowed_ = true, record_ = false, replay_ = false, enter_ = false;
  uint64_t b_ended_ = 0;
  std::vector<std::pair<uint64_t, Ps>> log_;  // the event loop's starts since the last period
  uint32_t log_base_ = 0;                     // their period's step (0: a partial period)
  std::vector<Entry> pattern_, period_;
  uint32_t same_ = 0;  // periods in a row with pattern_
  std::vector<uint32_t> seen_;
  uint32_t seen_stamp_ = 0;
  bool statics_ok_ = false, topological_ = false;        // pattern_'s statics computed; its deps start first
  std::vector<uint32_t> ready_begin_;                    // per position: CSR into ready_at_
  std::vector<std::pair<uint32_t, uint32_t>> ready_at_;  // (position, periods ahead)
  int32_t min_off_ = 0;                                  // the least step offset of the period
  std::vector<uint32_t> ext_only_;                       // template tasks with deps on earlier steps only
  uint32_t base_ = 0, cursor_ = 0;
  Ps last_start_ = 0;                      // the event time of the last start replayed
  bool strict_ = false, pending_ = false;  // after a cut: the next start is later; tentative_ waits
  Cut verified_, tentative_;
  uint32_t need_ = 2;        // periods in a row that the event loop runs before a replay
  uint64_t entered_at_ = 0;  // replayed_ when the replay began
  std::vector<Key> channel_key_, link_key_;
  Booking finish_key_;
  std::vector<Ps> channel_free_, link_free_;
  std::vector<std::vector<Known>> known_;  // per core: known_size_ of them, the rest room
  std::vector<uint32_t> known_size_;
  void PushKnown(int32_t core, const Known& x) {
    std::vector<Known>& kn = known_[core];
    uint32_t& size = known_size_[core];
    if (size == kn.size()) kn.resize(2 * kn.size());
    kn[size++] = x;
  }
  std::vector<uint64_t> undo_;  // started since verified_
  std::vector<Key> requeue_;    // Rollback: the queued tasks ready, not started (ready time, class, id)
  uint32_t masked_from_ = 0;    // set_masked
  std::vector<uint8_t> masked_;
  uint32_t masked_count_ = 0;
  std::vector<Waiting> masked_waiting_;  // step_waiting_ of a masked step
  uint32_t complete_ = 0;                // every task of steps up to it started, verified
  uint64_t replayed_ = 0, rollbacks_ = 0;
};

}  // namespace tpsim::sim
