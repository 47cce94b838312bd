#include "sim/analytical/links.h"

#include <algorithm>
#include <bit>
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

// Sorts `keys` ascending: LSD radix sort by bytes, skipping the bytes all keys share.
void RadixSort(std::vector<uint64_t>* keys, std::vector<uint64_t>* scratch) {
  uint64_t all_or = 0, all_and = ~uint64_t{0};
  for (uint64_t k : *keys) {
    all_or |= k;
    all_and &= k;
  }
  const uint64_t varies = all_or ^ all_and;
  scratch->resize(keys->size());
  for (int shift = 0; shift < 64; shift += 8) {
    if (((varies >> shift) & 0xff) == 0) continue;
    uint32_t count[257] = {};
    for (uint64_t k : *keys) ++count[((k >> shift) & 0xff) + 1];
    for (int d = 0; d < 256; ++d) count[d + 1] += count[d];
    for (uint64_t k : *keys) (*scratch)[count[(k >> shift) & 0xff]++] = k;
    keys->swap(*scratch);
  }
}

}  // namespace

void FlowSet::Reserve(size_t flows, size_t incidences) {
  bytes_.reserve(flows);
  latency_.reserve(flows);
  res_end_.reserve(flows);
  res_.reserve(incidences);
}

uint32_t FlowSet::Add(uint64_t bytes, Ps latency_ps, const int* resources, size_t count) {
  bytes_.push_back(bytes);
  latency_.push_back(latency_ps);
  res_.insert(res_.end(), resources, resources + count);
  res_end_.push_back(static_cast<uint32_t>(res_.size()));
  return static_cast<uint32_t>(bytes_.size() - 1);
}

WindowedSharing::WindowedSharing(const FlowSet& flows) : flows_(flows) {
  const size_t n = flows.size();
  const size_t nr = flows.num_resources();
  begin_.assign(nr + 1, 0);
  for (uint32_t f = 0; f < n; ++f) {
    if (flows.bytes(f) == 0) continue;
    for (int r : flows.resources(f)) ++begin_[r + 1];
  }
  uint32_t busiest = 0;
  for (size_t r = 0; r < nr; ++r) {
    busiest = std::max(busiest, begin_[r + 1]);
    begin_[r + 1] += begin_[r];
  }
  const uint32_t positions = begin_[nr];
  by_flow_.resize(positions);
  by_slot_.resize(positions);
  {
    std::vector<uint32_t> fill(begin_.begin(), begin_.end() - 1);
    for (uint32_t f = 0; f < n; ++f) {
      if (flows.bytes(f) == 0) continue;
      const uint32_t first = flows.first_incidence(f);
      const auto res = flows.resources(f);
      for (uint32_t k = 0; k < res.size(); ++k) {
        const uint32_t at = fill[res[k]]++;
        by_flow_[at] = f;
        by_slot_[at] = first + k;
      }
    }
  }
  last_start_.assign(n, 0);
  last_end_.assign(n, 0);
  win_.resize(busiest);
  rate_.resize(busiest);
  w_start_.resize(busiest);
  other_.assign(flows.num_incidences(), 0.0);
  swept_.assign(nr, 0);
}

void WindowedSharing::Sweep(size_t r, std::span<const TaskTime> times, std::span<const uint32_t> task) {
  const uint32_t b = begin_[r], e = begin_[r + 1];
  // The windows of r's flows, gathered once (indexed by position - b).
  for (uint32_t at = b; at < e; ++at) win_[at - b] = times[task[by_flow_[at]]];
  auto active = [&](uint32_t at) { return win_[at - b].end_ps > win_[at - b].start_ps; };
  uint32_t num_active = 0;
  Ps first = std::numeric_limits<Ps>::max(), last = 0;
  for (uint32_t at = b; at < e; ++at) {
    other_[by_slot_[at]] = 0;
    if (!active(at)) continue;
    ++num_active;
    const TaskTime& w = win_[at - b];
    first = std::min(first, w.start_ps);
    last = std::max(last, w.end_ps);
    rate_[at - b] =
        static_cast<double>(flows_.bytes(by_flow_[at])) / static_cast<double>(w.end_ps - w.start_ps);
  }
  if (num_active < 2) return;
  // W(t) = bytes delivered on r by t (each flow at a constant rate over its window),
  // visited in the order of (time, position): W is continuous, so the order at equal
  // times changes nothing but the rounding, which this fixed order keeps the same.
  double w = 0, slope = 0;  // bytes, bytes per ps
  Ps t = first;
  auto visit = [&](Ps at_t, uint32_t at, bool is_end) {
    w += slope * static_cast<double>(at_t - t);
    t = at_t;
    if (!is_end) {
      w_start_[at - b] = w;
      slope += rate_[at - b];
    } else {
      other_[by_slot_[at]] = w - w_start_[at - b] - static_cast<double>(flows_.bytes(by_flow_[at]));
      slope -= rate_[at - b];
    }
  };
  // Events as one integer each, (time - first, position - b, is_end), where they fit
  // in 64 bits (always, short of saturated times): integers sort several times faster.
  const int position_bits = std::bit_width(e - b - 1) + 1;
  if (std::bit_width(static_cast<uint64_t>(last - first)) + position_bits <= 64) {
    keys_.clear();
    for (uint32_t at = b; at < e; ++at) {
      if (!active(at)) continue;
      const uint64_t p = uint64_t{at - b} << 1;
      keys_.push_back(static_cast<uint64_t>(win_[at - b].start_ps - first) << position_bits | p);
      keys_.push_back(static_cast<uint64_t>(win_[at - b].end_ps - first) << position_bits | p | 1);
    }
    RadixSort(&keys_, &scratch_);
    const uint64_t position_mask = (uint64_t{1} << position_bits) - 1;
    for (uint64_t k : keys_) {
      visit(first + static_cast<Ps>(k >> position_bits), b + static_cast<uint32_t>((k & position_mask) >> 1),
            k & 1);
    }
    return;
  }
  struct Event {
    Ps t;
    uint32_t at;
    bool is_end;
  };
  std::vector<Event> events;
  for (uint32_t at = b; at < e; ++at) {
    if (!active(at)) continue;
    events.push_back({win_[at - b].start_ps, at, false});
    events.push_back({win_[at - b].end_ps, at, true});
  }
  std::sort(events.begin(), events.end(), [](const Event& x, const Event& y) {
    if (x.t != y.t) return x.t < y.t;
    return x.at < y.at;
  });
  for (const Event& ev : events) visit(ev.t, ev.at, ev.is_end);
}

bool WindowedSharing::Step(std::span<const TaskTime> times, std::span<const uint32_t> task,
                           std::span<const Ps> alone, std::span<Ps> duration) {
  const size_t n = flows_.size();
  const size_t nr = flows_.num_resources();
  for (size_t r = 0; r < nr; ++r) {
    const uint32_t b = begin_[r], e = begin_[r + 1];
    if (e == b) continue;
    // Every window moved by the same delta (or none moved): the overlaps stay.
    bool moved = !swept_[r];
    const Ps delta = times[task[by_flow_[b]]].start_ps - last_start_[by_flow_[b]];
    for (uint32_t at = b; at < e && !moved; ++at) {
      const uint32_t f = by_flow_[at];
      const TaskTime& w = times[task[f]];
      moved = w.start_ps - last_start_[f] != delta || w.end_ps - last_end_[f] != delta;
    }
    if (!moved) continue;
    Sweep(r, times, task);
    swept_[r] = 1;
  }
  for (uint32_t f = 0; f < n; ++f) {
    last_start_[f] = times[task[f]].start_ps;
    last_end_[f] = times[task[f]].end_ps;
  }
  bool changed = false;
  for (uint32_t f = 0; f < n; ++f) {
    const double b = static_cast<double>(flows_.bytes(f));
    Ps ser = 0;
    bool shared = false;
    const auto res = flows_.resources(f);
    const uint32_t first = flows_.first_incidence(f);
    for (uint32_t k = 0; k < res.size(); ++k) {
      double o = other_[first + k];  // 0 for flows without bytes (in no resource's list)
      // Below half a byte (or rounding noise) nothing overlapped.
      if (!(o > std::max(0.5, 1e-9 * b))) o = 0;
      shared = shared || o > 0;
      ser = std::max(ser, CeilPs(b + o, flows_.gbps(res[k])));
    }
    const Ps time = shared ? std::max(alone[f], SatAdd(flows_.latency(f), ser)) : alone[f];
    Ps& d = duration[task[f]];
    const Ps delta = time > d ? time - d : d - time;
    changed = changed || static_cast<double>(delta) > 1e-3 * static_cast<double>(std::max<Ps>(d, 1000));
    d = time;
  }
  return changed;
}

double SettleSharing(const LinkModel& model, const std::function<Ps()>& schedule, std::vector<Ps>* duration,
                     EngineOutput* out) {
  const size_t n = model.task.size();
  WindowedSharing sharing(model.flows);
  const Ps unloaded = out->makespan_ps;
  for (int round = 0; round < kMaxSharingRounds && n > 0; ++round) {
    const bool moved = sharing.Step(out->tasks, model.task, model.alone, *duration);
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
