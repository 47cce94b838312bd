#pragma once
// Link reservations: the analytical engine's contention model for links (DRAM channels
// are queues in its schedule, sim/schedule.h). No Program, no chip: the engine describes
// its flows here, and ScheduleOnLinks runs the schedule with them.
//
// A flow is a transfer or a memory task whose data crosses links: `bytes` that cross
// the links of its route (or memory path) in order, each with a bandwidth and a hop
// latency. It enters its route `inject` ps after its task starts (0 for a transfer, the
// channel's latency for a memory task). A memory task's bytes come from its channel at the
// channel's rate (`feed`, its serialisation there): each hop h is entered `lag(h)` later,
// what the channel's serialisation exceeds hop h's, so that no link finishes before the
// channel has delivered the last byte (0 for a transfer, and for a hop no faster than the
// channel). Until 2026-12-06 the first hop's lag delayed every hop, so a later hop slower than
// the first started late: unloaded, such a read took more than arch::Chip::MemoryTime.
//
// Every link is a first-come-first-served queue of whole flows, as the TLM network's
// links are of packets (age order), and a link does not feel the links after it (the
// TLM routers buffer without limit on the shipped chips). Each link keeps a calendar of
// the intervals it is held. When the schedule starts a flow at time s, in start order, on
// each hop h of its route:
//
//     arrive(h) = s + inject + latency(0) + ... + latency(h - 1) + lag(h)
//     hold(h)   = bytes / gbps(h)               (in ticks of 1/1024 ps, rounded up)
//     begin(h)  = the first time >= arrive(h) at which h is free for hold(h): a gap
//                 before flows reserved earlier but arriving later is used
//     done(h)   = begin(h) + hold(h)            (h is then held over [begin, done))
//     end       = max over h of done(h), rounded up to the ps, + latency(h) + ... + latency(last)
//
// and never before s + its unloaded time (arch::Chip::TransferTime, MemoryTime), which
// both engines use and which this gives when every link is free. Intervals that end
// before the schedule's time are dropped from the calendars.
//
//   link a:  [ f1 ][ f2 ]           f1 and f2 leave one core by link a: f2 queues
//   link b:        [ f1' ][ f3 ]    behind f1; f3, from another core, arrives on b
//                                   while f1 is crossing it and waits for it there
//
// Because a flow's queueing is decided when it starts, from flows that started before
// it, the schedule is one pass (no iteration between flow times and the schedule), in
// integers, and a run shifted in time is timed the same; the cost is the route length
// per flow times the calendar entries it passes. What it leaves out, against the TLM
// engine: packets of flows that share a link interleave there (here one flow goes first,
// whole); a flow held up on one hop still arrives at the next hop on time (its bytes are
// spread over time there, not queued behind the hold-up). On the random family (`tpsim
// agree`) 499 totals of 500 are within 10% of the TLM engine's (README "TLM vs analytical").
//
// A flow that waits for its DRAM channel or its first link is started when it leaves that
// queue (sim/dispatch_loop.h), in the order of starts with every other flow. Before, it
// reserved its links when it joined the queue: a flow that started before it
// but was decided after it found the links taken (tpsim agree seed 108 #16: a 5 MiB transfer
// ended 223 us late, behind weight reads that started after it).
//
// Contention indicator: the share of the makespan that the queues on links added to the
// unqueued schedule's, (makespan - unloaded makespan) / makespan. 0 where no two flows
// share a link at once; near 1 where the run is dominated by shared links.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sim/engine.h"
#include "sim/schedule.h"

namespace tpsim::sim {

class FlowSet {
 public:
  // Per resource (link): its bandwidth and hop latency.
  FlowSet(std::vector<double> resource_gbps, std::vector<Ps> resource_latency_ps)
      : gbps_(std::move(resource_gbps)), latency_(std::move(resource_latency_ps)) {}

  // Room for `flows` flows of `kinds` kinds over `incidences` resources in all (the kinds'
  // routes; avoids growth slack).
  void Reserve(size_t flows, size_t kinds, size_t incidences);
  // A kind of flow: `bytes` over `resources` (ids into the tables, in route order),
  // entering the route `inject_ps` after its task starts, fed at `feed_ps` (a memory task's
  // channel serialisation; 0: a transfer); returns its index. Flows of one kind share its
  // record (a wafer's transfers are a few thousand kinds).
  uint32_t AddKind(uint64_t bytes, Ps inject_ps, const int* resources, size_t count, Ps feed_ps = 0);
  // A flow of kind `kind`; returns its index.
  uint32_t AddFlow(uint32_t kind) {
    kind_of_.push_back(kind);
    return static_cast<uint32_t>(kind_of_.size() - 1);
  }
  // A flow of a kind of its own.
  uint32_t Add(uint64_t bytes, Ps inject_ps, const int* resources, size_t count) {
    return AddFlow(AddKind(bytes, inject_ps, resources, count));
  }

  size_t size() const { return kind_of_.size(); }
  size_t num_resources() const { return gbps_.size(); }
  double gbps(int r) const { return gbps_[r]; }
  Ps hop_latency(int r) const { return latency_[r]; }
  uint32_t kind(uint32_t f) const { return kind_of_[f]; }
  size_t kinds() const { return bytes_.size(); }
  // Of kind k:
  uint64_t kind_bytes(uint32_t k) const { return bytes_[k]; }
  Ps kind_inject(uint32_t k) const { return inject_[k]; }
  std::span<const int> kind_resources(uint32_t k) const {
    const uint32_t b = k == 0 ? 0 : res_end_[k - 1];
    return {res_.data() + b, res_end_[k] - b};
  }
  // Per resource of kind k's route: how long the kind's bytes hold it, in ticks of 1/1024 ps.
  std::span<const Ps> kind_holds(uint32_t k) const {
    const uint32_t b = k == 0 ? 0 : res_end_[k - 1];
    return {hold_.data() + b, res_end_[k] - b};
  }
  // Per resource of kind k's route: how long after the others its head enters it (lag(h)
  // above), in ps.
  std::span<const Ps> kind_lags(uint32_t k) const {
    const uint32_t b = k == 0 ? 0 : res_end_[k - 1];
    return {lag_.data() + b, res_end_[k] - b};
  }
  // How long `bytes` hold resource r, in ticks (as a kind's holds).
  Ps HoldOf(uint64_t bytes, int r) const;
  // Resource r's lag for `bytes` fed at `feed_ps` (as a kind's lags).
  Ps LagOf(uint64_t bytes, Ps feed_ps, int r) const;
  // Of flow f:
  uint64_t bytes(uint32_t f) const { return kind_bytes(kind_of_[f]); }
  Ps inject(uint32_t f) const { return kind_inject(kind_of_[f]); }
  std::span<const int> resources(uint32_t f) const { return kind_resources(kind_of_[f]); }

 private:
  std::vector<double> gbps_;
  std::vector<Ps> latency_;
  std::vector<uint32_t> kind_of_;  // per flow
  // Per kind:
  std::vector<uint64_t> bytes_;
  std::vector<Ps> inject_;
  std::vector<uint32_t> res_end_;  // CSR: kind k's resources res_[res_end_[k-1], res_end_[k])
  std::vector<int> res_;
  std::vector<Ps> hold_;  // parallel to res_
  std::vector<Ps> lag_;   // parallel to res_
};

// The flows of one Program on one chip, as the analytical engine builds them:
// resources are the chip's links.
struct LinkModel {
  FlowSet flows;
  std::vector<uint32_t> task;  // per flow: its task id
  // Or, with no flows (`task` empty), flows by the tasks' cost keys (TaskCosts::key, the
  // analytical engine's): task i is a flow of kind kind_of_key[key[i]] (-1: not a flow), and
  // nothing is stored per task or per flow (the wafer's 1.5 million transfers: 18 MB).
  std::vector<int32_t> kind_of_key;
  bool by_key() const { return task.empty() && !kind_of_key.empty(); }
  // Some task is a flow (by key: some key is a flow's, and every key is some task's).
  bool has_flows() const;
};

// The queues of the links over one schedule (see above). Reset, then Finish each task in
// the order the schedule starts them.
class LinkReservation {
 public:
  LinkReservation(const LinkModel& model, size_t num_tasks);
  // A model by key, with each task's key (TaskCosts::key; one per task).
  LinkReservation(const LinkModel& model, std::span<const uint32_t> key);
  void Reset();
  // Task i's kind of flow, -1 when it is not a flow.
  int32_t KindOf(uint32_t task) const {
    if (!key_.empty()) return m_.kind_of_key[key_[task]];
    const int32_t f = task < flow_of_.size() ? flow_of_[task] : -1;
    return f < 0 ? -1 : static_cast<int32_t>(m_.flows.kind(static_cast<uint32_t>(f)));
  }
  // Whether some flow ended later in `times` than its unloaded `costs`.
  bool AnyFlowDelayed(std::span<const TaskTime> times, const TaskCosts& costs) const;
  // The end of task `task` started at `start` whose unloaded time is `duration`: start +
  // duration for a task that is not a flow; else the formula above, reserving its links.
  // `now`: the schedule's time, no later than any start it asks for from then on.
  Ps Finish(uint32_t task, Ps start, Ps duration, Ps now);
  // The same for a flow of kind `kind` of `flows` (whose resources are this model's links):
  // the decode steps that sim/step_rolling.h times without lowering them.
  Ps FinishKind(const FlowSet& flows, uint32_t kind, Ps start, Ps duration, Ps now);
  // The same for `bytes` over `route` (resources of `flows`) held `holds` (FlowSet::HoldOf),
  // entering it `inject` after `start`, each hop `lags` later (FlowSet::LagOf): a flow whose
  // bytes are a decode step's own (a KV read over links, sim/step_rolling.h).
  Ps FinishRoute(const FlowSet& flows, std::span<const int> route, std::span<const Ps> holds,
                 std::span<const Ps> lags, uint64_t bytes, Ps inject, Ps start, Ps duration, Ps now);
  // Per link: the longest a flow waited there since Reset (begin - arrive).
  const std::vector<Ps>& max_wait() const { return max_wait_; }
  const LinkModel& model() const { return m_; }

 private:
  template <class T>
  struct Span {
    T begin, end;
  };
  using Wide = __int128;

 public:
  // The queues' state, to go back to (sim::StepStream's replay, when a replayed step turns out
  // not to be the engine's): Save copies what is not over yet, into `*s`'s room.
  struct State {
    std::vector<std::vector<Span<Ps>>> busy;
    std::vector<std::vector<Span<Wide>>> wide_busy;
    std::vector<Ps> max_wait;
    Ps origin = 0;
    bool wide = false;
  };
  void Save(State* s) const;
  void Restore(const State& s);

 private:
  // Holds link r (its calendar `cal`) for `hold` from the first time at or after `arrive` it
  // is free that long; returns the end (at most `last`). In ticks of 1/1024 ps after origin_
  // (links.cc): 64-bit while every time fits (narrow), 128-bit from the first that does not.
  template <class T>
  T Reserve(std::vector<Span<T>>& cal, int r, T arrive, T hold, T now, T last);
  // Moves origin_ to `now` once the schedule is far from it: the calendars count from there,
  // so that 64 bits of ticks (2^53 ps, 2.5 hours) hold runs of any length whose flows enter
  // links within about an hour of the schedule's time.
  void Rebase(Ps now);
  // The calendars in 128 bits from now on (a flow enters its links hours ahead, or holds one
  // for hours): the same times, a little slower.
  void Widen();

  const LinkModel& m_;
  std::vector<int32_t> flow_of_;   // per task: its flow, -1 for none (a model by flows)
  std::span<const uint32_t> key_;  // per task: its key (a model by key)
  // Per link: the intervals it is held, in time order, from head_[r] on (earlier ones are
  // over by the schedule's time).
  std::vector<std::vector<Span<Ps>>> busy_;
  std::vector<std::vector<Span<Wide>>> wide_busy_;  // the calendars once wide_
  bool wide_ = false;
  std::vector<uint32_t> head_;
  Ps origin_ = 0;  // ps, the calendars' time 0
  std::vector<Ps> max_wait_;
};

// The indicator (above) from the two makespans.
double ContentionIndicator(Ps makespan, Ps unloaded);

// The makespans of one schedule with and without queues on links.
struct LinkedMakespans {
  Ps queued = 0, unloaded = 0;
};

// Runs `d` over `costs` (Dispatcher::Run) with the queues of `links` (Reset
// first) into `times`, and again without them, for the unloaded makespan, when a flow
// ended later than alone (else the two schedules are the same). Each makespan gets
// `extra(its times)` added when given (the Program is the head of a longer run); only then
// does the second schedule keep its times (in `*scratch`).
LinkedMakespans RunOnLinks(LinkReservation& links, Dispatcher& d, const TaskCosts& costs,
                           std::span<TaskTime> times, std::vector<TaskTime>* scratch,
                           const std::function<Ps(std::span<const TaskTime>)>& extra = {});

// RunOnLinks over fresh queues: writes out->tasks, out->makespan_ps, out->unloaded_makespan_ps
// and every link's max_queue_ps (the longest wait there); returns the contention indicator.
double ScheduleOnLinks(const LinkModel& model, Dispatcher& d, const TaskCosts& costs, EngineOutput* out,
                       const std::function<Ps(std::span<const TaskTime>)>& extra = {});

// ScheduleOnLinks's makespan alone: the queued schedule, no times kept, no unloaded schedule,
// no output (AnalyticalEngine::Makespan).
Ps QueuedMakespan(const LinkModel& model, Dispatcher& d, const TaskCosts& costs);

// `tpsim run` warns when the indicator exceeds this. Set on `tpsim agree` (README "TLM vs
// analytical"): of 530 random experiments (seed 2025 x 500, seed 15 x 30) one differs from the
// TLM engine by more than 10% (0.881, indicator 0.52), and 18 are above 0.5. A weak signal on
// larger draws (seeds 8103-8105 x 1000, MoE seed 8106 x 1000): 1 of the 98 runs above 0.5 and
// 8 of the 3,902 at or below it differ by more than 10%.
inline constexpr double kContentionWarning = 0.5;

}  // namespace tpsim::sim
