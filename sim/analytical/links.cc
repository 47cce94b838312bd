#include "sim/analytical/links.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

namespace tpsim::sim {

namespace {

Ps CeilPs(double bytes, double gbps) {
  const double ps = std::ceil(bytes * 1000.0 / gbps);
  if (!(ps < static_cast<double>(std::numeric_limits<Ps>::max()))) return std::numeric_limits<Ps>::max();
  return static_cast<Ps>(ps);
}

Ps SatAdd(Ps a, Ps b) {
  Ps r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<Ps>::max() : r;
}

// Flows by resource (CSR over resources), built from the flows' resource lists.
struct ByResource {
  std::vector<uint32_t> end;  // per resource
  std::vector<uint32_t> flow;
  std::vector<uint32_t> slot;  // parallel to flow: the incidence's index in the flow's list
};

}  // namespace

uint32_t FlowSet::Add(uint64_t bytes, Ps latency_ps, const int* resources, size_t count) {
  bytes_.push_back(bytes);
  latency_.push_back(latency_ps);
  res_.insert(res_.end(), resources, resources + count);
  res_end_.push_back(static_cast<uint32_t>(res_.size()));
  return static_cast<uint32_t>(bytes_.size() - 1);
}

void FlowSet::Windowed(const std::vector<Ps>& start, const std::vector<Ps>& end, const std::vector<Ps>& alone,
                       std::vector<Ps>* time) const {
  const size_t n = bytes_.size();
  const size_t nr = gbps_.size();
  // Inverted index, only over flows that spread bytes over a window.
  std::vector<uint32_t> count(nr + 1, 0);
  auto active = [&](size_t f) { return bytes_[f] > 0 && end[f] > start[f]; };
  for (size_t f = 0; f < n; ++f) {
    if (!active(f)) continue;
    for (uint32_t k = f == 0 ? 0 : res_end_[f - 1]; k < res_end_[f]; ++k) ++count[res_[k] + 1];
  }
  for (size_t r = 0; r < nr; ++r) count[r + 1] += count[r];
  std::vector<uint32_t> by_flow(count[nr]), by_slot(count[nr]);
  {
    std::vector<uint32_t> fill(count.begin(), count.end() - 1);
    for (size_t f = 0; f < n; ++f) {
      if (!active(f)) continue;
      for (uint32_t k = f == 0 ? 0 : res_end_[f - 1]; k < res_end_[f]; ++k) {
        const uint32_t at = fill[res_[k]]++;
        by_flow[at] = static_cast<uint32_t>(f);
        by_slot[at] = k;
      }
    }
  }
  // Per incidence (flow, resource): other bytes in the flow's window.
  std::vector<double> other(res_.size(), 0.0);
  struct Event {
    Ps t;
    uint32_t at;  // index into by_flow / by_slot
    bool is_end;
  };
  std::vector<Event> events;
  std::vector<double> w_start(res_.size(), 0.0);
  for (size_t r = 0; r < nr; ++r) {
    const uint32_t b = count[r], e = count[r + 1];
    if (e - b < 2) continue;
    events.clear();
    for (uint32_t at = b; at < e; ++at) {
      const uint32_t f = by_flow[at];
      events.push_back({start[f], at, false});
      events.push_back({end[f], at, true});
    }
    std::sort(events.begin(), events.end(), [](const Event& x, const Event& y) {
      if (x.t != y.t) return x.t < y.t;
      return x.at < y.at;  // W is continuous: the order at equal times changes nothing
    });
    // W(t) = bytes delivered on r by t (each flow at a constant rate over its window).
    double w = 0, slope = 0;  // bytes, bytes per ps
    Ps t = events.front().t;
    for (const Event& ev : events) {
      w += slope * static_cast<double>(ev.t - t);
      t = ev.t;
      const uint32_t f = by_flow[ev.at];
      const double rate = static_cast<double>(bytes_[f]) / static_cast<double>(end[f] - start[f]);
      if (!ev.is_end) {
        w_start[by_slot[ev.at]] = w;
        slope += rate;
      } else {
        other[by_slot[ev.at]] = w - w_start[by_slot[ev.at]] - static_cast<double>(bytes_[f]);
        slope -= rate;
      }
    }
  }
  time->assign(n, 0);
  for (size_t f = 0; f < n; ++f) {
    const double b = static_cast<double>(bytes_[f]);
    Ps ser = 0;
    bool shared = false;
    for (uint32_t k = f == 0 ? 0 : res_end_[f - 1]; k < res_end_[f]; ++k) {
      double o = other[k];
      // Below half a byte (or rounding noise) nothing overlapped.
      if (!(o > std::max(0.5, 1e-9 * b))) o = 0;
      shared = shared || o > 0;
      ser = std::max(ser, CeilPs(b + o, gbps_[res_[k]]));
    }
    (*time)[f] = shared ? std::max(alone[f], SatAdd(latency_[f], ser)) : alone[f];
  }
}

double SettleSharing(const LinkModel& model, const std::function<Ps()>& schedule, std::vector<Ps>* duration,
                     EngineOutput* out) {
  const size_t n = model.task.size();
  std::vector<Ps> start(n), end(n), time;
  const Ps unloaded = out->makespan_ps;
  for (int round = 0; round < kMaxSharingRounds && n > 0; ++round) {
    for (size_t f = 0; f < n; ++f) {
      start[f] = out->tasks[model.task[f]].start_ps;
      end[f] = out->tasks[model.task[f]].end_ps;
    }
    model.flows.Windowed(start, end, model.alone, &time);
    bool moved = false;
    for (size_t f = 0; f < n; ++f) {
      Ps& d = (*duration)[model.task[f]];
      const Ps delta = time[f] > d ? time[f] - d : d - time[f];
      moved = moved || static_cast<double>(delta) > 1e-3 * static_cast<double>(std::max<Ps>(d, 1000));
      d = time[f];
    }
    if (!moved) break;
    const Ps before = out->makespan_ps;
    out->makespan_ps = schedule();
    // Settled when the makespan moves by less than 0.1% (flows off the critical path
    // may keep trading places without changing it).
    const Ps change = out->makespan_ps > before ? out->makespan_ps - before : before - out->makespan_ps;
    if (round > 0 && static_cast<double>(change) <= 1e-3 * static_cast<double>(out->makespan_ps)) break;
  }
  const size_t num_links = out->links.size();
  for (size_t f = 0; f < n; ++f) {
    const Ps extra = (*duration)[model.task[f]] - model.alone[f];
    if (extra <= 0) continue;
    for (int r : model.flows.resources(static_cast<uint32_t>(f))) {
      Ps& q = static_cast<size_t>(r) < num_links ? out->links[r].max_queue_ps
                                                 : out->channels[r - num_links].max_queue_ps;
      q = std::max(q, extra);
    }
  }
  // The indicator: the share of the makespan that sharing added.
  return out->makespan_ps > 0 && out->makespan_ps > unloaded
             ? static_cast<double>(out->makespan_ps - unloaded) / static_cast<double>(out->makespan_ps)
             : 0.0;
}

}  // namespace tpsim::sim
