#include "sim/analytical/links.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "sim/schedule.h"

namespace tpsim::sim {

namespace {

Ps CeilPs(double bytes, double gbps) {
  const double ps = std::ceil(bytes * 1000.0 / gbps);
  if (!(ps < static_cast<double>(std::numeric_limits<Ps>::max()))) return std::numeric_limits<Ps>::max();
  return static_cast<Ps>(ps);
}

using arch::SatAdd;

// The links' calendars count in 1/1024 ps, so that flows too small to take a picosecond
// (a link at 1e12 GB/s) do not round one another up: ends are rounded up to the ps once.
// 64 bits of ticks hold 2^53 ps (2.5 hours): the calendars count from an origin that
// LinkReservation::Rebase moves up to the schedule's time once it is kRebasePs past it.
constexpr int kTickBits = 10;
constexpr Ps kMaxPs = std::numeric_limits<Ps>::max();
constexpr Ps kRebasePs = Ps{1} << 51;
// Narrow calendars keep every time below kNarrow ticks (a flow that would reach it makes them
// wide), so that no sum of a time and a hold passes 2^63.
constexpr Ps kNarrow = Ps{1} << 61;
using Wide = __int128;
constexpr Wide kWideLast = Wide{1} << 120;

}  // namespace

void FlowSet::Reserve(size_t flows, size_t kinds, size_t incidences) {
  kind_of_.reserve(flows);
  bytes_.reserve(kinds);
  inject_.reserve(kinds);
  res_end_.reserve(kinds);
  res_.reserve(incidences);
  hold_.reserve(incidences);
  lag_.reserve(incidences);
}

uint32_t FlowSet::AddKind(uint64_t bytes, Ps inject_ps, const int* resources, size_t count, Ps feed_ps) {
  bytes_.push_back(bytes);
  inject_.push_back(inject_ps);
  res_.insert(res_.end(), resources, resources + count);
  for (size_t h = 0; h < count; ++h) {
    hold_.push_back(HoldOf(bytes, resources[h]));
    lag_.push_back(LagOf(bytes, feed_ps, resources[h]));
  }
  res_end_.push_back(static_cast<uint32_t>(res_.size()));
  return static_cast<uint32_t>(bytes_.size() - 1);
}

Ps FlowSet::HoldOf(uint64_t bytes, int r) const {
  return CeilPs(static_cast<double>(bytes) * (1 << kTickBits), gbps_[r]);
}

Ps FlowSet::LagOf(uint64_t bytes, Ps feed_ps, int r) const {
  if (feed_ps <= 0) return 0;
  const Ps ser = CeilPs(static_cast<double>(bytes), gbps_[r]);
  return feed_ps > ser ? feed_ps - ser : 0;
}

LinkReservation::LinkReservation(const LinkModel& model, size_t num_tasks)
    : m_(model), flow_of_(num_tasks, -1) {
  for (uint32_t f = 0; f < model.task.size(); ++f) flow_of_[model.task[f]] = static_cast<int32_t>(f);
  Reset();
}

bool LinkModel::has_flows() const {
  if (!task.empty()) return true;
  for (int32_t k : kind_of_key)
    if (k >= 0) return true;
  return false;
}

LinkReservation::LinkReservation(const LinkModel& model, std::span<const uint32_t> key)
    : m_(model), key_(key) {
  for (uint32_t k : key)
    if (k >= model.kind_of_key.size())
      throw std::invalid_argument("LinkReservation: key " + std::to_string(k) + " of " +
                                  std::to_string(model.kind_of_key.size()));
  Reset();
}

bool LinkReservation::AnyFlowDelayed(std::span<const TaskTime> times, const TaskCosts& costs) const {
  auto delayed = [&](uint32_t i) { return times[i].end_ps - times[i].start_ps != costs.duration_of(i); };
  if (key_.empty()) {
    for (uint32_t i : m_.task)
      if (delayed(i)) return true;
    return false;
  }
  for (uint32_t i = 0; i < key_.size(); ++i)
    if (m_.kind_of_key[key_[i]] >= 0 && delayed(i)) return true;
  return false;
}

void LinkReservation::Reset() {
  busy_.assign(m_.flows.num_resources(), {});
  head_.assign(m_.flows.num_resources(), 0);
  max_wait_.assign(m_.flows.num_resources(), 0);
  origin_ = 0;
  wide_ = false;
  wide_busy_.clear();
}

void LinkReservation::Save(State* s) const {
  auto copy = [&](const auto& from, auto* to) {
    to->resize(from.size());
    for (size_t r = 0; r < from.size(); ++r)
      (*to)[r].assign(from[r].begin() + std::min<size_t>(head_[r], from[r].size()), from[r].end());
  };
  if (wide_) {
    copy(wide_busy_, &s->wide_busy);
  } else {
    copy(busy_, &s->busy);
  }
  s->max_wait = max_wait_;
  s->origin = origin_;
  s->wide = wide_;
}

void LinkReservation::Restore(const State& s) {
  wide_ = s.wide;
  if (wide_) {
    wide_busy_.resize(s.wide_busy.size());
    for (size_t r = 0; r < s.wide_busy.size(); ++r)
      wide_busy_[r].assign(s.wide_busy[r].begin(), s.wide_busy[r].end());
    for (auto& cal : busy_) cal.clear();
  } else {
    for (size_t r = 0; r < s.busy.size(); ++r) busy_[r].assign(s.busy[r].begin(), s.busy[r].end());
    wide_busy_.clear();
  }
  head_.assign(head_.size(), 0);
  max_wait_ = s.max_wait;
  origin_ = s.origin;
}

void LinkReservation::Rebase(Ps now) {
  // Narrow: every time is below kNarrow ticks after the origin, so over by `now` (at least
  // kRebasePs later): the calendars are emptied. Wide: shifted by whole ps, so that rounding up
  // to the ps is the same from either origin.
  static_assert(kRebasePs >= (kNarrow >> kTickBits));
  const Wide shift = Wide{now - origin_} << kTickBits;
  for (size_t r = 0; r < busy_.size(); ++r) {
    if (wide_) {
      auto& cal = wide_busy_[r];
      cal.erase(cal.begin(), cal.begin() + head_[r]);
      for (Span<Wide>& iv : cal) {
        if (iv.begin != kWideLast) iv.begin -= shift;
        if (iv.end != kWideLast) iv.end -= shift;
      }
    } else {
      busy_[r].clear();
    }
    head_[r] = 0;
  }
  origin_ = now;
}

void LinkReservation::Widen() {
  wide_busy_.assign(busy_.size(), {});
  for (size_t r = 0; r < busy_.size(); ++r) {
    for (const Span<Ps>& iv : busy_[r]) wide_busy_[r].push_back({Wide{iv.begin}, Wide{iv.end}});
    busy_[r].clear();
    busy_[r].shrink_to_fit();
  }
  wide_ = true;
}

template <class T>
T LinkReservation::Reserve(std::vector<Span<T>>& cal, int r, T arrive, T hold, T now, T last) {
  uint32_t& head = head_[r];
  // Intervals over by `now` can hold up no flow the schedule starts from now on.
  while (head < cal.size() && cal[head].end <= now) ++head;
  if (head > 64 && head * 2 > cal.size()) {
    cal.erase(cal.begin(), cal.begin() + head);
    head = 0;
  }
  // The earliest gap from `arrive` on that holds `hold` (no sum passes 2^63 narrow, kWideLast
  // wide).
  T begin = std::min(arrive, last);
  size_t at = head;
  while (at < cal.size() && cal[at].end <= begin) ++at;
  while (at < cal.size() && begin + hold > cal[at].begin) {
    begin = std::max(begin, cal[at].end);
    ++at;
  }
  const T end = std::min<T>(begin + hold, last);
  // Insert [begin, end) before position `at`, merged with the neighbours it touches.
  const bool left = at > head && cal[at - 1].end == begin;
  const bool right = at < cal.size() && cal[at].begin == end;
  if (left && right) {
    cal[at - 1].end = cal[at].end;
    cal.erase(cal.begin() + static_cast<std::ptrdiff_t>(at));
  } else if (left) {
    cal[at - 1].end = end;
  } else if (right) {
    cal[at].begin = begin;
  } else {
    cal.insert(cal.begin() + static_cast<std::ptrdiff_t>(at), Span<T>{begin, end});
  }
  const T wait = (begin - arrive) >> kTickBits;
  max_wait_[r] = std::max(max_wait_[r], wait < T{kMaxPs} ? static_cast<Ps>(wait) : kMaxPs);
  return end;
}

Ps LinkReservation::Finish(uint32_t task, Ps start, Ps duration, Ps now) {
  const int32_t kind = KindOf(task);
  if (kind < 0) return SatAdd(start, duration);
  return FinishKind(m_.flows, static_cast<uint32_t>(kind), start, duration, now);
}

Ps LinkReservation::FinishKind(const FlowSet& flows, uint32_t f, Ps start, Ps duration, Ps now) {
  return FinishRoute(flows, flows.kind_resources(f), flows.kind_holds(f), flows.kind_lags(f),
                     flows.kind_bytes(f), flows.kind_inject(f), start, duration, now);
}

Ps LinkReservation::FinishRoute(const FlowSet& flows, std::span<const int> route, std::span<const Ps> holds,
                                std::span<const Ps> lags, uint64_t bytes, Ps inject, Ps start, Ps duration,
                                Ps now) {
  const Ps alone_end = SatAdd(start, duration);
  if (bytes == 0) return alone_end;
  // end = max over h of done(h) + latency(h) + ... + latency(last): the suffix sums are
  // taken from the route's total latency as the hops go by.
  Ps total_latency = 0;
  for (int r : route) total_latency = SatAdd(total_latency, flows.hop_latency(r));
  Ps arrive = SatAdd(start, inject), before = 0, end = 0, max_lag = 0;
  for (Ps lag : lags) max_lag = std::max(max_lag, lag);
  if (now - origin_ >= kRebasePs) Rebase(now);
  // Narrow while this flow's times fit (arrive and holds below kNarrow ticks after origin_).
  if (!wide_) {
    bool fits = SatAdd(SatAdd(arrive, total_latency), max_lag) - origin_ < (kNarrow >> kTickBits);
    for (Ps hold : holds) fits = fits && hold < kNarrow;
    if (!fits) Widen();
  }
  auto to_ps = [&](auto ticks) -> Ps {  // rounded up to the ps, after origin_; past 2^63 ps the max
    const auto ps = (ticks >> kTickBits) + ((ticks & ((1 << kTickBits) - 1)) != 0);
    return ps >= decltype(ps){kMaxPs - origin_} ? kMaxPs : origin_ + static_cast<Ps>(ps);
  };
  for (size_t h = 0; h < route.size(); ++h) {
    const int r = route[h];
    const Ps at = SatAdd(arrive, lags[h]);
    Ps done;
    if (!wide_) {
      const Ps e = Reserve<Ps>(busy_[r], r, (at - origin_) << kTickBits, holds[h],
                               (now - origin_) << kTickBits, kMaxPs);
      done = to_ps(e);
      if (e >= kNarrow) Widen();  // the next reservation's sums must not pass 2^63
    } else {
      // A hold that saturated (a flow on one link for 2.5 hours or more) stays the largest.
      const Wide hold = holds[h] == kMaxPs ? kWideLast : Wide{holds[h]};
      done = to_ps(Reserve<Wide>(wide_busy_[r], r, Wide{at - origin_} << kTickBits, hold,
                                 Wide{now - origin_} << kTickBits, kWideLast));
    }
    end = std::max(end, SatAdd(done, total_latency - before));
    before = SatAdd(before, flows.hop_latency(r));
    arrive = SatAdd(arrive, flows.hop_latency(r));
  }
  return std::max(alone_end, end);
}

namespace {

// The reservation of `model`'s links for a schedule over `costs` (by key where the model is).
LinkReservation ReservationFor(const LinkModel& model, const TaskCosts& costs) {
  return model.by_key() ? LinkReservation(model, costs.key) : LinkReservation(model, costs.tasks());
}

// `d` over `costs` with the queues of `links` (Reset first): the queued schedule's makespan.
Ps RunQueued(LinkReservation& links, Dispatcher& d, const TaskCosts& costs, std::span<TaskTime> times) {
  links.Reset();
  d.set_finisher(
      [&](uint32_t i, Ps start, Ps now) { return links.Finish(i, start, costs.duration_of(i), now); });
  const Ps makespan = d.Run(costs, times);
  d.set_finisher(nullptr);
  return makespan;
}

}  // namespace

LinkedMakespans RunOnLinks(LinkReservation& links, Dispatcher& d, const TaskCosts& costs,
                           std::span<TaskTime> times, std::vector<TaskTime>* scratch,
                           const std::function<Ps(std::span<const TaskTime>)>& extra) {
  auto with_extra = [&](Ps m, std::span<TaskTime> t) { return extra ? SatAdd(m, extra(t)) : m; };
  // The unloaded makespan alone does not depend on the queued schedule: with a spare
  // core, a sibling times it meanwhile (declared before the future, which joins first).
  std::optional<Dispatcher> sibling;
  std::future<Ps> unloaded;
  if (!extra && UseSpareThread(costs.tasks())) {
    sibling.emplace(d.Sibling());
    sibling->keep_order(false);
    unloaded = std::async(std::launch::async, [&] { return sibling->Run(costs, {}); });
  }
  LinkedMakespans m;
  m.queued = m.unloaded = with_extra(RunQueued(links, d, costs, times), times);
  if (links.AnyFlowDelayed(times, costs)) {
    if (extra) {
      scratch->resize(times.size());
      m.unloaded = with_extra(d.Run(costs, *scratch), *scratch);
    } else {
      m.unloaded = unloaded.valid() ? unloaded.get() : d.Run(costs, {});  // the makespan alone: no times kept
    }
  }
  return m;
}

double ScheduleOnLinks(const LinkModel& model, Dispatcher& d, const TaskCosts& costs, EngineOutput* out,
                       const std::function<Ps(std::span<const TaskTime>)>& extra) {
  if (!model.has_flows()) {
    d.set_finisher(nullptr);
    const Ps m = d.Run(costs, out->tasks);
    out->makespan_ps = out->unloaded_makespan_ps = extra ? SatAdd(m, extra(out->tasks)) : m;
    return 0.0;
  }
  LinkReservation links = ReservationFor(model, costs);
  std::vector<TaskTime> scratch;
  const LinkedMakespans m = RunOnLinks(links, d, costs, out->tasks, &scratch, extra);
  out->makespan_ps = m.queued;
  out->unloaded_makespan_ps = m.unloaded;
  for (size_t l = 0; l < out->links.size() && l < links.max_wait().size(); ++l) {
    out->links[l].max_queue_ps = std::max(out->links[l].max_queue_ps, links.max_wait()[l]);
  }
  return ContentionIndicator(m.queued, m.unloaded);
}

Ps QueuedMakespan(const LinkModel& model, Dispatcher& d, const TaskCosts& costs) {
  if (!model.has_flows()) {
    d.set_finisher(nullptr);
    return d.Run(costs, {});
  }
  LinkReservation links = ReservationFor(model, costs);
  return RunQueued(links, d, costs, {});
}

double ContentionIndicator(Ps makespan, Ps unloaded) {
  return makespan > unloaded ? static_cast<double>(makespan - unloaded) / static_cast<double>(makespan) : 0.0;
}

}  // namespace tpsim::sim
