#include "traces/trace_layout.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "mapping/cost.h"

namespace tpsim::traces::internal {

using mapping::TaskKind;

void Check(const mapping::Program& p, const arch::Chip& chip, const sim::EngineOutput& out) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("trace: " + what); };
  if (out.tasks.size() != p.num_tasks()) {
    bad("engine output has " + std::to_string(out.tasks.size()) + " task times for " +
        std::to_string(p.num_tasks()) + " tasks");
  }
  const int cores = chip.num_cores();
  const int channels = static_cast<int>(chip.channels().size());
  // The Program was verified when it was built (mapping::Verify); it must fit the chip.
  mapping::VerifyFits(p, cores, channels);
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    const std::string id = "task " + std::to_string(i);
    const sim::TaskTime& tt = out.tasks[i];
    if (tt.start_ps < 0 || tt.end_ps < tt.start_ps) {
      bad(id + ": times [" + std::to_string(tt.start_ps) + ", " + std::to_string(tt.end_ps) + "] invalid");
    }
  }
}

std::string NodeName(const arch::Chip& chip, int core) {
  const std::string& n = chip.node(core).name;
  return n.empty() ? "c" + std::to_string(core) : n;
}

// Stage of each core: cores sharing the [first, last] layer range of their compute and memory
// tasks. Returns per-core process index into `layout->processes`.
std::vector<int> AssignStages(const mapping::Program& p, int cores, Layout* layout) {
  std::vector<std::pair<int64_t, int64_t>> range(cores, {-1, -1});
  for (const mapping::Task& t : p.tasks()) {
    if (t.kind == TaskKind::kTransfer) continue;
    const int64_t layer = p.ops[t.op].ref.layer;
    auto& r = range[t.core];
    if (r.first < 0) {
      r = {layer, layer};
    } else {
      r.first = std::min(r.first, layer);
      r.second = std::max(r.second, layer);
    }
  }
  std::map<std::pair<int64_t, int64_t>, int> stage;  // ordered: stage numbers follow first layer
  for (const auto& r : range) {
    if (r.first >= 0) stage.emplace(r, 0);
  }
  int next = 0;
  for (auto& [r, idx] : stage) {
    idx = static_cast<int>(layout->processes.size());
    std::string name =
        "stage " + std::to_string(next++) + ": layer" +
        (r.first == r.second ? " " + std::to_string(r.first)
                             : "s " + std::to_string(r.first) + "-" + std::to_string(r.second));
    layout->processes.push_back({0, 0, name});
  }
  int idle = -1;
  std::vector<int> proc(cores);
  for (int c = 0; c < cores; ++c) {
    if (range[c].first >= 0) {
      proc[c] = stage.at(range[c]);
    } else {
      if (idle < 0) {
        idle = static_cast<int>(layout->processes.size());
        layout->processes.push_back({0, 0, "idle cores"});
      }
      proc[c] = idle;
    }
  }
  return proc;
}

namespace {

// Segment of each task: 0 the prefill, k decode step k; -1 other phases.
std::vector<int64_t> Segments(const mapping::Program& p) {
  std::vector<int64_t> seg(p.num_tasks(), -1);
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    const mapping::OpRef& ref = p.ops[p.op(i)].ref;
    if (ref.phase == mapping::Phase::kPrefill) seg[i] = 0;
    if (ref.phase == mapping::Phase::kDecode) seg[i] = int64_t{ref.step} + 1;
  }
  return seg;
}

}  // namespace

void TaskSlices(const mapping::Program& p, const arch::Chip& chip, const sim::EngineOutput& out,
                std::vector<Slice>* slices) {
  std::vector<std::vector<uint32_t>> compute_by_core(chip.num_cores());
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    const mapping::Task& t = p.task(i);
    const sim::TaskTime& tt = out.tasks[i];
    Slice s;
    s.type = Slice::kTask;
    s.task = static_cast<int64_t>(i);
    s.start = tt.start_ps;
    s.end = tt.end_ps;
    s.core = t.core;
    switch (t.kind) {
      case TaskKind::kCompute:
        s.group = kCompute;
        compute_by_core[t.core].push_back(static_cast<uint32_t>(i));
        break;
      case TaskKind::kTransfer: {
        s.group = kSend;
        s.flow_out = static_cast<uint64_t>(i) + 1;
        Ps latency = 0;
        for (int l : chip.Route(t.core, t.dst_core)) latency += chip.links()[l].latency_ps;
        Slice r = s;
        r.type = Slice::kRecv;
        r.group = kRecv;
        r.core = t.dst_core;
        r.start = std::min(tt.end_ps, tt.start_ps + latency);
        r.flow_out = 0;
        r.flow_in = s.flow_out;
        slices->push_back(r);
        break;
      }
      case TaskKind::kMemory:
        s.group = kDram;
        break;
    }
    slices->push_back(s);
  }

  // Waits: gaps on a core's compute lane before a compute task. A Program of a few decode
  // steps (sim/sampled_run.h, tpsim run --trace-steps) lacks the tasks of the steps between
  // them, and its first task of a step after skipped ones depends on the last lowered step's
  // output: a gap there spans the skipped steps' work and blames a task that ended long before.
  // Such a gap is a wait of the whole run only when no skipped step lies between the compute
  // task before it and the task after (a core runs one step's compute after the previous
  // step's), and the task's deps are the whole run's: all in its own step, or the step before
  // lowered too. Other gaps get no wait slice.
  const std::vector<int64_t> seg = Segments(p);
  std::vector<uint32_t> skipped_before(1, 0);  // skipped_before[s]: segments below s not lowered
  {
    std::vector<bool> lowered;
    for (int64_t s : seg) {
      if (s < 0) continue;
      if (lowered.size() <= static_cast<size_t>(s)) lowered.resize(static_cast<size_t>(s) + 1, false);
      lowered[static_cast<size_t>(s)] = true;
    }
    for (size_t s = 0; s < lowered.size(); ++s) skipped_before.push_back(skipped_before.back() + !lowered[s]);
  }
  // Whether segments [a, b) were all lowered (a >= 0, a <= b <= the last lowered one + 1).
  auto all_lowered = [&](int64_t a, int64_t b) { return skipped_before[b] == skipped_before[a]; };
  for (int c = 0; c < chip.num_cores(); ++c) {
    std::vector<uint32_t>& ids = compute_by_core[c];
    std::stable_sort(ids.begin(), ids.end(),
                     [&](uint32_t a, uint32_t b) { return out.tasks[a].start_ps < out.tasks[b].start_ps; });
    Ps busy_until = 0;
    int64_t prev_seg = -1;  // segment of the compute task before, -1 when none
    bool first = true;
    for (uint32_t id : ids) {
      const sim::TaskTime& tt = out.tasks[id];
      const int64_t s = seg[id];
      bool whole_run = true;
      if (s > 0) {
        // Segments the gap or the deps may reach into: from the one after the task before
        // (from the prefill when none) up to s, and s - 1 itself when a dep is in another step.
        int64_t from = first ? 0 : prev_seg < 0 ? s : std::min(prev_seg + 1, s);
        for (uint32_t d : p.deps(id)) {
          if (d < seg.size() && seg[d] != s) from = std::min(from, s - 1);
        }
        whole_run = all_lowered(from, s);
      }
      prev_seg = s;
      first = false;
      if (tt.start_ps > busy_until && whole_run) {
        Slice w;
        w.type = Slice::kWait;
        w.group = kCompute;
        w.core = c;
        w.start = busy_until;
        w.end = tt.start_ps;
        w.task = id;
        // The dependency that finished last, when it finished after the lane went idle.
        for (uint32_t d : p.deps(id)) {
          if (d < out.tasks.size() && out.tasks[d].end_ps > busy_until &&
              (w.aux < 0 || out.tasks[d].end_ps > out.tasks[w.aux].end_ps)) {
            w.aux = d;
          }
        }
        slices->push_back(w);
      }
      busy_until = std::max(busy_until, tt.end_ps);
    }
  }
}

namespace {

// Piecewise-constant sum of rates over intervals; intervals of zero length are skipped.
std::vector<std::pair<Ps, double>> RateSeries(std::vector<std::tuple<Ps, Ps, double>> iv, double scale) {
  std::vector<std::tuple<Ps, int, double>> ev;  // (time, +1/-1, rate)
  for (const auto& [s, e, r] : iv) {
    if (e <= s) continue;
    ev.emplace_back(s, +1, r);
    ev.emplace_back(e, -1, r);
  }
  std::sort(ev.begin(), ev.end());
  std::vector<std::pair<Ps, double>> pts;
  double sum = 0;
  int active = 0;
  for (size_t i = 0; i < ev.size();) {
    const Ps t = std::get<0>(ev[i]);
    for (; i < ev.size() && std::get<0>(ev[i]) == t; ++i) {
      active += std::get<1>(ev[i]);
      sum += std::get<1>(ev[i]) * std::get<2>(ev[i]);
    }
    if (active == 0) sum = 0;
    pts.emplace_back(t, sum * scale);
  }
  return pts;
}

}  // namespace

Layout BuildLayout(const mapping::Program& p, const arch::Chip& chip, const sim::EngineOutput& out) {
  Layout L;
  const int cores = chip.num_cores();
  L.processes.push_back({0, 0, "tpsim"});
  std::vector<int> proc = AssignStages(p, cores, &L);
  uint64_t next_uuid = 1;
  for (size_t i = 0; i < L.processes.size(); ++i) {
    L.processes[i].uuid = next_uuid++;
    L.processes[i].pid = static_cast<int>(i) + 1;
  }
  L.meta_pid = L.processes[0].pid;

  int next_tid = 100;
  L.run_track = 0;
  L.tracks.push_back({next_uuid++, L.processes[0].uuid, L.meta_pid, next_tid++, "run"});

  // The metadata slice.
  Slice meta;
  meta.type = Slice::kMeta;
  meta.end = out.makespan_ps;
  meta.track = L.run_track;
  L.slices.push_back(meta);
  TaskSlices(p, chip, out, &L.slices);

  // Lanes: per core and group, in (start, longest first) order. A slice goes on the first lane
  // that is free at its start; failing that on a new lane while there are fewer than
  // kMaxLanes; failing that nested inside the innermost open slice of the shallowest lane
  // whose innermost open slice contains it; failing all, on a new lane.
  constexpr size_t kMaxLanes = 4;
  std::vector<std::vector<size_t>> by_core_group(static_cast<size_t>(cores) * kNumGroups);
  for (size_t i = 1; i < L.slices.size(); ++i) {
    by_core_group[static_cast<size_t>(L.slices[i].core) * kNumGroups + L.slices[i].group].push_back(i);
  }
  for (int c = 0; c < cores; ++c) {
    const Process& pr = L.processes[proc[c]];
    const std::string core_name = "core " + std::to_string(c) + " (" + NodeName(chip, c) + ")";
    for (int g = 0; g < kNumGroups; ++g) {
      std::vector<size_t>& ids = by_core_group[static_cast<size_t>(c) * kNumGroups + g];
      std::stable_sort(ids.begin(), ids.end(), [&](size_t a, size_t b) {
        const Slice& x = L.slices[a];
        const Slice& y = L.slices[b];
        return x.start != y.start ? x.start < y.start : x.end > y.end;
      });
      std::vector<std::vector<Ps>> open;  // per lane: ends of its open (nested) slices
      std::vector<int> lane_track;
      auto add_lane = [&]() {
        std::string name = g == kCompute ? core_name : "core " + std::to_string(c) + " " + kGroupNames[g];
        if (!open.empty())
          name = "core " + std::to_string(c) + " " + kGroupNames[g] + " #" + std::to_string(open.size() + 1);
        open.emplace_back();
        lane_track.push_back(static_cast<int>(L.tracks.size()));
        L.tracks.push_back({next_uuid++, pr.uuid, pr.pid, next_tid++, name});
        return open.size() - 1;
      };
      if (g == kCompute) add_lane();  // every core gets its main track, busy or not
      for (size_t id : ids) {
        Slice& s = L.slices[id];
        for (auto& st : open) {
          while (!st.empty() && st.back() <= s.start) st.pop_back();
        }
        size_t lane = open.size();
        for (size_t k = 0; k < open.size() && lane == open.size(); ++k) {
          if (open[k].empty()) lane = k;
        }
        if (lane == open.size() && open.size() >= kMaxLanes) {
          for (size_t k = 0; k < open.size(); ++k) {  // the shallowest lane that contains it
            if (open[k].back() >= s.end && (lane == open.size() || open[k].size() < open[lane].size()))
              lane = k;
          }
        }
        if (lane == open.size()) lane = add_lane();
        open[lane].push_back(s.end);
        s.track = lane_track[lane];
      }
    }
  }

  // Counters.
  std::map<int, std::vector<std::tuple<Ps, Ps, double>>> link_iv, chan_iv;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    const mapping::Task& t = p.task(i);
    const sim::TaskTime& tt = out.tasks[i];
    if (tt.end_ps <= tt.start_ps || t.bytes == 0) continue;
    const double rate = static_cast<double>(t.bytes) / static_cast<double>(tt.end_ps - tt.start_ps);  // B/ps
    if (t.kind == TaskKind::kTransfer) {
      for (int l : chip.Route(t.core, t.dst_core)) link_iv[l].emplace_back(tt.start_ps, tt.end_ps, rate);
    } else if (t.kind == TaskKind::kMemory) {
      chan_iv[t.channel].emplace_back(tt.start_ps, tt.end_ps, rate);
      // Memory data that crosses network links (channels not stacked under the core).
      for (int l : chip.MemoryPath(t.core, t.channel, t.write))
        link_iv[l].emplace_back(tt.start_ps, tt.end_ps, rate);
    }
  }
  for (auto& [l, iv] : link_iv) {
    const double bw = chip.links()[l].bandwidth_gbps;  // bytes/ns
    Counter c{next_uuid++, "link " + chip.links()[l].name() + " util", "utilization",
              RateSeries(std::move(iv), bw > 0 ? 1000.0 / bw : 0.0)};
    L.counters.push_back(std::move(c));
  }
  for (auto& [ch, iv] : chan_iv) {
    Counter c{next_uuid++, "dram " + chip.channels()[ch].name + " GB/s", "GB/s",
              RateSeries(std::move(iv), 1000.0)};
    L.counters.push_back(std::move(c));
  }
  return L;
}

}  // namespace tpsim::traces::internal
