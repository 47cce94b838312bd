#include "traces/trace.h"

#include "configs/files.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mapping/cost.h"
#include "perfetto_trace.pb.h"

namespace tpsim::traces {
namespace {

using mapping::TaskKind;
using sim::Ps;

enum Group { kCompute = 0, kSend = 1, kRecv = 2, kDram = 3, kNumGroups = 4 };
const char* const kGroupNames[kNumGroups] = {"compute", "send", "recv", "dram"};

// A debug annotation. String values are views (`sv`) of strings that outlive the ArgList, or of
// the Arg's own `s` when composed (Str() picks).
struct Arg {
  enum Type { kInt, kUint, kDouble, kString, kBool } type = kInt;
  const char* name = "";
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  std::string_view sv;
  std::string s;
  bool owned = false;
  std::string_view Str() const { return owned ? std::string_view(s) : sv; }
};

// Arguments of one slice; Clear() keeps the Args (and their string capacity) for reuse.
class ArgList {
 public:
  void Clear() { n_ = 0; }
  size_t size() const { return n_; }
  const Arg& operator[](size_t k) const { return v_[k]; }
  const Arg* begin() const { return v_.data(); }
  const Arg* end() const { return v_.data() + n_; }
  Arg& Add(Arg::Type type, const char* name) {
    if (n_ == v_.size()) v_.emplace_back();
    Arg& a = v_[n_++];
    a.type = type;
    a.name = name;
    a.owned = false;
    return a;
  }
  void Int(const char* n, int64_t v) { Add(Arg::kInt, n).i = v; }
  void Uint(const char* n, uint64_t v) { Add(Arg::kUint, n).u = v; }
  void Double(const char* n, double v) { Add(Arg::kDouble, n).d = v; }
  void Bool(const char* n, bool v) { Add(Arg::kBool, n).i = v ? 1 : 0; }
  void Str(const char* n, std::string_view v) { Add(Arg::kString, n).sv = v; }
  // A composed string value: the returned buffer, cleared, becomes the value.
  std::string* OwnedStr(const char* n) {
    Arg& a = Add(Arg::kString, n);
    a.owned = true;
    a.s.clear();
    return &a.s;
  }

 private:
  std::vector<Arg> v_;
  size_t n_ = 0;
};

void AppendNum(uint64_t v, std::string* o) {
  char b[24];
  auto r = std::to_chars(b, b + sizeof b, v);
  o->append(b, r.ptr);
}

// Slices hold only what places them; names and annotations are made when written (Describe).
struct Slice {
  enum Type : uint8_t { kMeta, kTask, kRecv, kWait } type = kTask;
  Group group = kCompute;
  int core = 0;
  Ps start = 0, end = 0;
  int64_t task = -1;                   // kTask, kRecv: the task; kWait: the compute task waiting
  int64_t aux = -1;                    // kWait: the dependency it waited for, -1 when none
  uint64_t flow_out = 0, flow_in = 0;  // 0: none
  int track = -1;                      // index into Layout::tracks
};

struct Track {
  uint64_t uuid = 0, parent_uuid = 0;
  int pid = 0, tid = 0;
  std::string name;
};

struct Process {
  uint64_t uuid = 0;
  int pid = 0;
  std::string name;
};

struct Counter {
  uint64_t uuid = 0;
  std::string name;
  std::string unit;
  std::vector<std::pair<Ps, double>> points;  // (time, value from then on), ascending, deduplicated
};

struct Layout {
  std::vector<Process> processes;
  std::vector<Track> tracks;
  std::vector<Slice> slices;
  std::vector<Counter> counters;
  int meta_pid = 1;
  int run_track = -1;  // index into tracks
};

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

  // Waits: gaps on a core's compute lane before a compute task.
  for (int c = 0; c < chip.num_cores(); ++c) {
    std::vector<uint32_t>& ids = compute_by_core[c];
    std::stable_sort(ids.begin(), ids.end(),
                     [&](uint32_t a, uint32_t b) { return out.tasks[a].start_ps < out.tasks[b].start_ps; });
    Ps busy_until = 0;
    for (uint32_t id : ids) {
      const sim::TaskTime& tt = out.tasks[id];
      if (tt.start_ps > busy_until) {
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

// Names, categories and annotations of slices, made as they are written.
class Describer {
 public:
  Describer(const mapping::Program& p, const arch::Chip& chip, const sim::EngineOutput& out,
            const std::string& config)
      : p_(p), chip_(chip), out_(out), config_(config) {}

  const char* Category(const Slice& s) const {
    switch (s.type) {
      case Slice::kMeta:
        return "meta";
      case Slice::kRecv:
        return "recv";
      case Slice::kWait:
        return "wait";
      case Slice::kTask:
        break;
    }
    switch (p_.task(s.task).kind) {
      case TaskKind::kCompute:  // a GPU node's NCCL kernel is a compute task of op kind kCollective
        return p_.shape(s.task).op_kind == llm::OpKind::kCollective ? "collective" : "compute";
      case TaskKind::kTransfer:
        return "send";
      case TaskKind::kMemory:
        return "memory";
    }
    return "";
  }

  std::string Name(const Slice& s) const {
    if (s.type == Slice::kMeta) return "tpsim run";
    const mapping::Task& t = p_.task(s.task);
    std::string label = Label(t);
    switch (s.type) {
      case Slice::kRecv:
        return "recv " + label;
      case Slice::kWait:
        return "wait " + label;
      default:
        break;
    }
    if (t.kind == TaskKind::kTransfer) return "send " + label;
    if (t.kind == TaskKind::kMemory) return (t.write ? "dram wr " : "dram rd ") + label;
    return label;
  }

  // Event-name intern key: names depend only on (NameKind, op). kMeta has its own key.
  enum NameKind { kPlain, kSendName, kDramRd, kDramWr, kRecvName, kWaitName, kNumNameKinds };
  // Returns NameKind * ops + op, or -1 for the metadata slice.
  int64_t NameKey(const Slice& s) const {
    if (s.type == Slice::kMeta) return -1;
    const mapping::Task& t = p_.task(s.task);
    int k = kPlain;
    if (s.type == Slice::kRecv) {
      k = kRecvName;
    } else if (s.type == Slice::kWait) {
      k = kWaitName;
    } else if (t.kind == TaskKind::kTransfer) {
      k = kSendName;
    } else if (t.kind == TaskKind::kMemory) {
      k = t.write ? kDramWr : kDramRd;
    }
    return static_cast<int64_t>(k) * static_cast<int64_t>(p_.ops.size()) + t.op;
  }
  size_t NumNameKeys() const { return kNumNameKinds * p_.ops.size(); }

  void Args(const Slice& s, ArgList* args) const {
    args->Clear();
    if (s.type == Slice::kMeta) {
      args->Str("config", config_);
      args->Uint("tasks", p_.num_tasks());
      args->Int("makespan_ps", out_.makespan_ps);
      args->Uint("cores", static_cast<uint64_t>(chip_.num_cores()));
      return;
    }
    const mapping::Task& t = p_.task(s.task);
    if (s.type == Slice::kWait) {
      args->Uint("before_task", static_cast<uint64_t>(s.task));
      if (s.aux >= 0) {
        const mapping::Task& dt = p_.task(s.aux);
        const char* kind = dt.kind == TaskKind::kCompute    ? "compute "
                           : dt.kind == TaskKind::kTransfer ? "transfer "
                                                            : "memory ";
        args->Uint("waiting_for_task", static_cast<uint64_t>(s.aux));
        std::string* v = args->OwnedStr("waiting_for");
        *v += kind;
        AppendLabel(dt, v);
      }
    } else if (s.type == Slice::kRecv) {
      args->Uint("task", static_cast<uint64_t>(s.task));
      args->Int("src", t.core);
      args->Int("dst", t.dst_core);
      args->Uint("bytes", t.bytes);
    } else {
      const mapping::OpRef& ref = p_.ops[t.op].ref;
      args->Uint("task", static_cast<uint64_t>(s.task));
      args->Str("phase", mapping::ToString(ref.phase));
      args->Uint("step", ref.step);
      args->Uint("layer", ref.layer);
      args->Str("op", ref.op);
      if (ref.note.empty()) {
        args->Str("partition", ref.partition);
      } else {
        *args->OwnedStr("partition") = ref.Label();
      }
      switch (t.kind) {
        case TaskKind::kCompute:
          args->Str("op_kind", llm::ToString(t.op_kind));
          if (mapping::OnMatrixUnit(t.op_kind)) {
            std::string* v = args->OwnedStr("shape");
            AppendNum(t.batch, v);
            *v += "x[";
            AppendNum(t.m, v);
            *v += ',';
            AppendNum(t.k, v);
            *v += "]x[";
            AppendNum(t.k, v);
            *v += ',';
            AppendNum(t.n, v);
            *v += ']';
          } else {
            args->Double("vector_ops", t.vector_ops);
          }
          args->Double("flops", t.flops);
          args->Uint("bytes", t.bytes);
          break;
        case TaskKind::kTransfer:
          args->Int("src", t.core);
          args->Int("dst", t.dst_core);
          args->Uint("bytes", t.bytes);
          args->Uint("offset", t.offset);
          args->Bool("reduce", t.reduce);
          if (t.collective >= 0 && static_cast<size_t>(t.collective) < p_.collectives.size()) {
            const mapping::CollectiveInfo& c = p_.collectives[t.collective];
            std::string* v = args->OwnedStr("collective");
            *v += mapping::ToString(c.kind);
            *v += '/';
            *v += mapping::ToString(c.algorithm);
            args->Uint("coll_step", t.coll_step);
          }
          break;
        case TaskKind::kMemory:
          args->Str("channel", chip_.channels()[t.channel].name);
          args->Bool("write", t.write);
          args->Uint("bytes", t.bytes);
          break;
      }
    }
    args->Int("start_ps", s.start);
    args->Int("end_ps", s.end);
  }

 private:
  void AppendLabel(const mapping::Task& t, std::string* o) const {
    const mapping::OpRef& ref = p_.ops[t.op].ref;
    *o += ref.op;
    *o += " L";
    AppendNum(ref.layer, o);
  }

  std::string Label(const mapping::Task& t) const {
    const mapping::OpRef& ref = p_.ops[t.op].ref;
    return ref.op + " L" + std::to_string(ref.layer);
  }

  const mapping::Program& p_;
  const arch::Chip& chip_;
  const sim::EngineOutput& out_;
  const std::string& config_;
};

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

// Buffered output to the trace file.
class Sink {
 public:
  explicit Sink(config::OutputFile* f) : f_(f) {}
  std::string* buf() { return &buf_; }
  void MaybeFlush() {
    if (buf_.size() >= (4u << 20)) Flush();
  }
  void Flush() {
    f_->Write(buf_);
    buf_.clear();
  }

 private:
  config::OutputFile* f_;
  std::string buf_;
};

// ---- Perfetto protobuf ------------------------------------------------------------------

int64_t Ns(Ps ps) { return ps / 1000; }

// Appends `pkt` as one Trace.packet (field 1, length-delimited), serialised in place.
// No map fields, so the bytes are deterministic.
void AppendPacket(const perfetto::TracePacket& pkt, std::string* buf) {
  const size_t n = pkt.ByteSizeLong();
  uint8_t head[11];
  size_t h = 0;
  head[h++] = 0x0a;
  for (uint64_t v = n;; v >>= 7) {
    if (v < 0x80) {
      head[h++] = static_cast<uint8_t>(v);
      break;
    }
    head[h++] = static_cast<uint8_t>((v & 0x7f) | 0x80);
  }
  const size_t off = buf->size();
  buf->resize(off + h + n);
  uint8_t* dst = reinterpret_cast<uint8_t*>(buf->data()) + off;
  std::copy(head, head + h, dst);
  pkt.SerializeWithCachedSizesToArray(dst + h);
}

// The value half of a debug annotation (its name is set by the caller, plain or interned).
void SetArgValue(const Arg& a, perfetto::DebugAnnotation* d) {
  switch (a.type) {
    case Arg::kInt:
      d->set_int_value(a.i);
      break;
    case Arg::kUint:
      d->set_uint_value(a.u);
      break;
    case Arg::kDouble:
      d->set_double_value(a.d);
      break;
    case Arg::kString: {
      const std::string_view v = a.Str();
      d->set_string_value(v.data(), v.size());
      break;
    }
    case Arg::kBool:
      d->set_bool_value(a.i != 0);
      break;
  }
}

void FillArgs(const ArgList& args, perfetto::TrackEvent* ev) {
  for (const Arg& a : args) {
    perfetto::DebugAnnotation* d = ev->add_debug_annotations();
    d->set_name(a.name);
    SetArgValue(a, d);
  }
}

// Perfetto string interning on one packet sequence: iids are handed out from 1 in order of
// first use (so deterministic); a string's first use adds it to the packet's interned_data.
class Interner {
 public:
  explicit Interner(size_t name_keys) : name_by_key_(name_keys, 0) {}

  // Event names, cached by the Describer's NameKey (-1: the metadata slice).
  template <typename MakeName>
  uint64_t EventName(int64_t key, perfetto::TracePacket* pkt, MakeName&& make) {
    uint64_t& slot = key < 0 ? meta_name_ : name_by_key_[static_cast<size_t>(key)];
    if (slot == 0) {
      std::string name = make();
      auto [it, added] = names_.try_emplace(std::move(name), names_.size() + 1);
      if (added) {
        auto* e = pkt->mutable_interned_data()->add_event_names();
        e->set_iid(it->second);
        e->set_name(it->first);
      }
      slot = it->second;
    }
    return slot;
  }
  uint64_t Category(const char* c, perfetto::TracePacket* pkt) {
    return Lookup(c, &cats_, pkt, [](perfetto::InternedData* d, uint64_t iid, std::string_view n) {
      auto* e = d->add_event_categories();
      e->set_iid(iid);
      e->set_name(n.data(), n.size());
    });
  }
  uint64_t ArgName(const char* a, perfetto::TracePacket* pkt) {
    return Lookup(a, &args_, pkt, [](perfetto::InternedData* d, uint64_t iid, std::string_view n) {
      auto* e = d->add_debug_annotation_names();
      e->set_iid(iid);
      e->set_name(n.data(), n.size());
    });
  }

 private:
  // Strings known by pointer (literals), deduplicated by content on a pointer's first use.
  struct Table {
    std::unordered_map<const char*, uint64_t> by_ptr;
    std::unordered_map<std::string_view, uint64_t> by_text;
  };
  template <typename Add>
  uint64_t Lookup(const char* s, Table* t, perfetto::TracePacket* pkt, Add&& add) {
    auto p = t->by_ptr.find(s);
    if (p != t->by_ptr.end()) return p->second;
    auto [it, added] = t->by_text.try_emplace(std::string_view(s), t->by_text.size() + 1);
    if (added) add(pkt->mutable_interned_data(), it->second, it->first);
    t->by_ptr.emplace(s, it->second);
    return it->second;
  }

  std::vector<uint64_t> name_by_key_;
  uint64_t meta_name_ = 0;
  std::unordered_map<std::string, uint64_t> names_;
  Table cats_, args_;
};

void FillInternedArgs(const ArgList& args, Interner* in, perfetto::TracePacket* pkt,
                      perfetto::TrackEvent* ev) {
  for (const Arg& a : args) {
    perfetto::DebugAnnotation* d = ev->add_debug_annotations();
    d->set_name_iid(in->ArgName(a.name, pkt));
    SetArgValue(a, d);
  }
}

// One timeline event with its sort key precomputed: (ts, order, track, nest_end, nest_start,
// index) ascending. order: 0 end, 1 instant / counter, 2 begin. Begins of nested slices on one
// track come outermost first: nest_end = -end, nest_start = start (0, 0 for other events).
struct Event {
  int64_t ts = 0;
  uint64_t order_track = 0;  // order << 56 | track uuid
  int64_t nest_end = 0, nest_start = 0;
  uint64_t index = 0;  // slice index, or counter index * 2^32 + point index for counters
  bool counter = false;
  int order() const { return static_cast<int>(order_track >> 56); }
  uint64_t track() const { return order_track & ((uint64_t{1} << 56) - 1); }
  bool operator<(const Event& o) const {
    if (ts != o.ts) return ts < o.ts;
    if (order_track != o.order_track) return order_track < o.order_track;
    if (nest_end != o.nest_end) return nest_end < o.nest_end;
    if (nest_start != o.nest_start) return nest_start < o.nest_start;
    return index < o.index;
  }
};

constexpr uint32_t kSeqIncrementalStateCleared = 1;
constexpr uint32_t kSeqNeedsIncrementalState = 2;

void Proto(const Layout& L, const Describer& desc, Sink* sink) {
  std::string& buf = *sink->buf();
  ArgList args;
  perfetto::TracePacket pkt;
  constexpr uint32_t kSeq = 1;
  bool first = true;
  auto start = [&]() {
    pkt.Clear();
    pkt.set_trusted_packet_sequence_id(kSeq);
    if (first) pkt.set_sequence_flags(kSeqIncrementalStateCleared);
    first = false;
  };
  for (const Process& pr : L.processes) {
    start();
    auto* td = pkt.mutable_track_descriptor();
    td->set_uuid(pr.uuid);
    td->mutable_process()->set_pid(pr.pid);
    td->mutable_process()->set_process_name(pr.name);
    AppendPacket(pkt, &buf);
  }
  for (const Track& t : L.tracks) {
    start();
    auto* td = pkt.mutable_track_descriptor();
    td->set_uuid(t.uuid);
    td->set_parent_uuid(t.parent_uuid);
    td->mutable_thread()->set_pid(t.pid);
    td->mutable_thread()->set_tid(t.tid);
    td->mutable_thread()->set_thread_name(t.name);
    AppendPacket(pkt, &buf);
  }
  for (const Counter& c : L.counters) {
    start();
    auto* td = pkt.mutable_track_descriptor();
    td->set_uuid(c.uuid);
    td->set_parent_uuid(L.processes[0].uuid);
    td->set_name(c.name);
    td->mutable_counter()->set_unit_name(c.unit);
    AppendPacket(pkt, &buf);
  }
  sink->MaybeFlush();

  std::vector<std::vector<std::pair<int64_t, double>>> cpts(L.counters.size());
  size_t num_points = 0;
  for (size_t c = 0; c < L.counters.size(); ++c) {
    for (const auto& [t, v] : L.counters[c].points) {  // last value within one ns wins
      if (!cpts[c].empty() && cpts[c].back().first == Ns(t)) {
        cpts[c].back().second = v;
      } else {
        cpts[c].emplace_back(Ns(t), v);
      }
    }
    num_points += cpts[c].size();
  }
  std::vector<Event> ev;
  ev.reserve(L.slices.size() * 2 + num_points);
  auto key = [](int order, uint64_t track) { return static_cast<uint64_t>(order) << 56 | track; };
  for (size_t i = 0; i < L.slices.size(); ++i) {
    const Slice& s = L.slices[i];
    const uint64_t track = L.tracks[s.track].uuid;
    if (Ns(s.end) == Ns(s.start)) {
      ev.push_back({Ns(s.start), key(1, track), 0, 0, i, false});
    } else {
      ev.push_back({Ns(s.start), key(2, track), -s.end, s.start, i, false});
      ev.push_back({Ns(s.end), key(0, track), 0, 0, i, false});
    }
  }
  for (size_t c = 0; c < L.counters.size(); ++c) {
    for (size_t k = 0; k < cpts[c].size(); ++k) {
      ev.push_back({cpts[c][k].first, key(1, L.counters[c].uuid), 0, 0, (c << 32) | k, true});
    }
  }
  // At one time: ends, then instants and counters, then begins; on one track, begins of
  // nested slices outermost first.
  std::sort(ev.begin(), ev.end());
  Interner intern(desc.NumNameKeys());
  for (const Event& e : ev) {
    start();
    pkt.set_timestamp(static_cast<uint64_t>(e.ts));
    perfetto::TrackEvent* te = pkt.mutable_track_event();
    te->set_track_uuid(e.track());
    if (e.counter) {
      te->set_type(perfetto::TrackEvent::TYPE_COUNTER);
      te->set_double_counter_value(cpts[e.index >> 32][e.index & 0xffffffffu].second);
    } else if (e.order() == 0) {
      te->set_type(perfetto::TrackEvent::TYPE_SLICE_END);
    } else {
      const Slice& s = L.slices[e.index];
      te->set_type(e.order() == 1 ? perfetto::TrackEvent::TYPE_INSTANT
                                  : perfetto::TrackEvent::TYPE_SLICE_BEGIN);
      pkt.set_sequence_flags(pkt.sequence_flags() | kSeqNeedsIncrementalState);
      te->add_category_iids(intern.Category(desc.Category(s), &pkt));
      te->set_name_iid(intern.EventName(desc.NameKey(s), &pkt, [&] { return desc.Name(s); }));
      if (s.flow_out) te->add_flow_ids(s.flow_out);
      if (s.flow_in) te->add_terminating_flow_ids(s.flow_in);
      desc.Args(s, &args);
      FillInternedArgs(args, &intern, &pkt, te);
    }
    AppendPacket(pkt, &buf);
    sink->MaybeFlush();
  }
  sink->Flush();
}

// ---- Chrome JSON ------------------------------------------------------------------------

void JsonString(std::string_view s, std::string* o) {
  o->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *o += "\\\"";
        break;
      case '\\':
        *o += "\\\\";
        break;
      case '\n':
        *o += "\\n";
        break;
      case '\r':
        *o += "\\r";
        break;
      case '\t':
        *o += "\\t";
        break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          *o += b;
        } else {
          o->push_back(static_cast<char>(c));
        }
    }
  }
  o->push_back('"');
}

void JsonDouble(double v, std::string* o) {
  if (!std::isfinite(v)) {
    *o += "null";
    return;
  }
  char b[32];
  auto r = std::to_chars(b, b + sizeof b, v);
  o->append(b, r.ptr);
}

// Microseconds with 6 decimals: exact picoseconds.
void JsonUs(Ps ps, std::string* o) {
  char b[40];
  std::snprintf(b, sizeof b, "%lld.%06lld", static_cast<long long>(ps / 1000000),
                static_cast<long long>(ps % 1000000));
  *o += b;
}

// One Chrome-trace counter sample: {"ph":"C","name":...,"pid":pid,"tid":0,"ts":us,"args":{unit:value}}.
void JsonCounterEvent(const std::string& name, const std::string& unit, int64_t pid, Ps t, double v,
                      std::string* o) {
  *o += "{\"ph\":\"C\",\"name\":";
  JsonString(name, o);
  *o += ",\"pid\":" + std::to_string(pid) + ",\"tid\":0,\"ts\":";
  JsonUs(t, o);
  *o += ",\"args\":{";
  JsonString(unit, o);
  *o += ":";
  JsonDouble(v, o);
  *o += "}}";
}

void Json(const Layout& L, const Describer& desc, const std::string& config_text, Sink* sink) {
  std::string& o = *sink->buf();
  ArgList args;
  o += "{\"displayTimeUnit\":\"ns\",\"metadata\":{\"tpsim_config\":";
  JsonString(config_text, &o);
  o += "},\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&]() {
    if (!first) o += ",\n";
    first = false;
  };
  for (const Process& pr : L.processes) {
    sep();
    o += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(pr.pid) +
         ",\"tid\":0,\"args\":{\"name\":";
    JsonString(pr.name, &o);
    o += "}}";
    sep();
    o += "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + std::to_string(pr.pid) +
         ",\"tid\":0,\"args\":{\"sort_index\":" + std::to_string(pr.pid) + "}}";
  }
  for (const Track& t : L.tracks) {
    const std::string ids = "\"pid\":" + std::to_string(t.pid) + ",\"tid\":" + std::to_string(t.tid);
    sep();
    o += "{\"ph\":\"M\",\"name\":\"thread_name\"," + ids + ",\"args\":{\"name\":";
    JsonString(t.name, &o);
    o += "}}";
    sep();
    o += "{\"ph\":\"M\",\"name\":\"thread_sort_index\"," + ids +
         ",\"args\":{\"sort_index\":" + std::to_string(t.tid) + "}}";
  }
  std::vector<size_t> order(L.slices.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Slice& x = L.slices[a];
    const Slice& y = L.slices[b];
    return std::make_tuple(x.start, L.tracks[x.track].tid, -x.end) <
           std::make_tuple(y.start, L.tracks[y.track].tid, -y.end);
  });
  for (size_t i : order) {
    const Slice& s = L.slices[i];
    const Track& t = L.tracks[s.track];
    const std::string ids = "\"pid\":" + std::to_string(t.pid) + ",\"tid\":" + std::to_string(t.tid);
    sep();
    o += "{\"ph\":\"X\",\"cat\":";
    JsonString(desc.Category(s), &o);
    o += ",\"name\":";
    JsonString(desc.Name(s), &o);
    o += "," + ids + ",\"ts\":";
    JsonUs(s.start, &o);
    o += ",\"dur\":";
    JsonUs(s.end - s.start, &o);
    o += ",\"args\":{";
    desc.Args(s, &args);
    for (size_t k = 0; k < args.size(); ++k) {
      const Arg& a = args[k];
      if (k) o += ",";
      JsonString(a.name, &o);
      o += ":";
      switch (a.type) {
        case Arg::kInt:
          o += std::to_string(a.i);
          break;
        case Arg::kUint:
          o += std::to_string(a.u);
          break;
        case Arg::kDouble:
          JsonDouble(a.d, &o);
          break;
        case Arg::kString:
          JsonString(a.Str(), &o);
          break;
        case Arg::kBool:
          o += a.i ? "true" : "false";
          break;
      }
    }
    o += "}}";
    if (s.flow_out) {
      sep();
      o += "{\"ph\":\"s\",\"cat\":\"flow\",\"name\":\"transfer\",\"id\":" + std::to_string(s.flow_out) + "," +
           ids + ",\"ts\":";
      JsonUs(s.start, &o);
      o += "}";
    }
    if (s.flow_in) {
      sep();
      o += "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"flow\",\"name\":\"transfer\",\"id\":" +
           std::to_string(s.flow_in) + "," + ids + ",\"ts\":";
      JsonUs(s.start, &o);
      o += "}";
    }
    sink->MaybeFlush();
  }
  for (const Counter& c : L.counters) {
    for (const auto& [t, v] : c.points) {
      sep();
      JsonCounterEvent(c.name, c.unit, L.meta_pid, t, v, &o);
      sink->MaybeFlush();
    }
  }
  o += "\n]}\n";
  sink->Flush();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void WriteTrace(const std::string& path, const mapping::Program& program, const arch::Chip& chip,
                const sim::EngineOutput& out, const std::string& resolved_config_text) {
  Check(program, chip, out);
  const Layout layout = BuildLayout(program, chip, out);
  const Describer desc(program, chip, out, resolved_config_text);
  config::OutputFile f(path);  // written whole, then renamed over `path`
  Sink sink(&f);
  if (EndsWith(path, ".json")) {
    Json(layout, desc, resolved_config_text, &sink);
  } else {
    Proto(layout, desc, &sink);
  }
  f.Commit();
}

namespace {

std::string IterationName(const ServingIteration& it) {
  return "prefill " + std::to_string(it.prefill_tokens) + " + decode " + std::to_string(it.decode_tokens);
}

void IterationArgs(const ServingIteration& it, ArgList* args) {
  args->Clear();
  args->Uint("prefill_tokens", it.prefill_tokens);
  args->Uint("decode_tokens", it.decode_tokens);
  args->Uint("sequences", it.sequences);
  args->Uint("running", it.running);
  args->Uint("waiting", it.waiting);
  args->Uint("kv_blocks", it.kv_blocks);
  args->Int("start_ps", it.start_ps);
  args->Int("end_ps", it.end_ps);
}

void ServingProto(const std::vector<ServingIteration>& its, const std::vector<std::string>& groups,
                  const std::vector<size_t>& group_of, const std::vector<CounterTrack>& counters,
                  const std::string& config_text, Ps run_end, Sink* sink) {
  std::string& buf = *sink->buf();
  perfetto::TracePacket pkt;
  bool first = true;
  auto start = [&]() {
    pkt.Clear();
    pkt.set_trusted_packet_sequence_id(1);
    if (first) pkt.set_sequence_flags(1);  // SEQ_INCREMENTAL_STATE_CLEARED
    first = false;
  };
  // uuids: 1 process, 2 run track, 3.. group tracks, then counters.
  const uint64_t kProc = 1, kRun = 2, kGroup0 = 3, kCounter0 = kGroup0 + groups.size();
  start();
  pkt.mutable_track_descriptor()->set_uuid(kProc);
  pkt.mutable_track_descriptor()->mutable_process()->set_pid(1);
  pkt.mutable_track_descriptor()->mutable_process()->set_process_name("tpsim serve");
  AppendPacket(pkt, &buf);
  for (size_t g = 0; g <= groups.size(); ++g) {
    start();
    auto* td = pkt.mutable_track_descriptor();
    td->set_uuid(g == 0 ? kRun : kGroup0 + g - 1);
    td->set_parent_uuid(kProc);
    td->mutable_thread()->set_pid(1);
    td->mutable_thread()->set_tid(static_cast<int32_t>(g + 1));
    td->mutable_thread()->set_thread_name(g == 0 ? "run" : "iterations " + groups[g - 1]);
    AppendPacket(pkt, &buf);
  }
  for (size_t c = 0; c < counters.size(); ++c) {
    start();
    auto* td = pkt.mutable_track_descriptor();
    td->set_uuid(kCounter0 + c);
    td->set_parent_uuid(kProc);
    td->set_name(counters[c].name);
    td->mutable_counter()->set_unit_name(counters[c].unit);
    AppendPacket(pkt, &buf);
  }
  // Events: (ts, order 0 end / 1 instant+counter / 2 begin, track, index). index: iteration,
  // or SIZE_MAX for the run slice, or counter * 2^32 + point.
  struct Ev {
    int64_t ts;
    int order;
    uint64_t track;
    size_t index;
    bool counter;
  };
  std::vector<Ev> ev;
  constexpr size_t kRunSlice = ~size_t{0};
  if (Ns(run_end) > 0) {
    ev.push_back({0, 2, kRun, kRunSlice, false});
    ev.push_back({Ns(run_end), 0, kRun, kRunSlice, false});
  } else {
    ev.push_back({0, 1, kRun, kRunSlice, false});
  }
  for (size_t i = 0; i < its.size(); ++i) {
    const uint64_t track = kGroup0 + group_of[i];
    if (Ns(its[i].end_ps) == Ns(its[i].start_ps)) {
      ev.push_back({Ns(its[i].start_ps), 1, track, i, false});
    } else {
      ev.push_back({Ns(its[i].start_ps), 2, track, i, false});
      ev.push_back({Ns(its[i].end_ps), 0, track, i, false});
    }
  }
  std::vector<std::vector<std::pair<int64_t, double>>> cpts(counters.size());
  for (size_t c = 0; c < counters.size(); ++c) {
    for (const auto& [t, v] : counters[c].points) {
      if (!cpts[c].empty() && cpts[c].back().first == Ns(t)) {
        cpts[c].back().second = v;
      } else {
        cpts[c].emplace_back(Ns(t), v);
      }
    }
    for (size_t k = 0; k < cpts[c].size(); ++k)
      ev.push_back({cpts[c][k].first, 1, kCounter0 + c, (c << 32) | k, true});
  }
  std::sort(ev.begin(), ev.end(), [](const Ev& a, const Ev& b) {
    return std::tie(a.ts, a.order, a.track, a.index) < std::tie(b.ts, b.order, b.track, b.index);
  });
  ArgList args;
  for (const Ev& e : ev) {
    start();
    pkt.set_timestamp(static_cast<uint64_t>(e.ts));
    perfetto::TrackEvent* te = pkt.mutable_track_event();
    te->set_track_uuid(e.track);
    if (e.counter) {
      te->set_type(perfetto::TrackEvent::TYPE_COUNTER);
      te->set_double_counter_value(cpts[e.index >> 32][e.index & 0xffffffffu].second);
    } else if (e.order == 0) {
      te->set_type(perfetto::TrackEvent::TYPE_SLICE_END);
    } else {
      te->set_type(e.order == 1 ? perfetto::TrackEvent::TYPE_INSTANT
                                : perfetto::TrackEvent::TYPE_SLICE_BEGIN);
      if (e.index == kRunSlice) {
        te->add_categories("meta");
        te->set_name("tpsim serve");
        args.Clear();
        args.Str("config", config_text);
      } else {
        te->add_categories("iteration");
        te->set_name(IterationName(its[e.index]));
        IterationArgs(its[e.index], &args);
      }
      FillArgs(args, te);
    }
    AppendPacket(pkt, &buf);
    sink->MaybeFlush();
  }
  sink->Flush();
}

void JsonArgs(const ArgList& args, std::string* o) {
  *o += "{";
  for (size_t k = 0; k < args.size(); ++k) {
    const Arg& a = args[k];
    if (k) *o += ",";
    JsonString(a.name, o);
    *o += ":";
    switch (a.type) {
      case Arg::kInt:
        *o += std::to_string(a.i);
        break;
      case Arg::kUint:
        *o += std::to_string(a.u);
        break;
      case Arg::kDouble:
        JsonDouble(a.d, o);
        break;
      case Arg::kString:
        JsonString(a.Str(), o);
        break;
      case Arg::kBool:
        *o += a.i ? "true" : "false";
        break;
    }
  }
  *o += "}";
}

void ServingJson(const std::vector<ServingIteration>& its, const std::vector<std::string>& groups,
                 const std::vector<size_t>& group_of, const std::vector<CounterTrack>& counters,
                 const std::string& config_text, Ps run_end, Sink* sink) {
  std::string& o = *sink->buf();
  o += "{\"displayTimeUnit\":\"ns\",\"metadata\":{\"tpsim_config\":";
  JsonString(config_text, &o);
  o += "},\"traceEvents\":[\n";
  o += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"tpsim serve\"}}";
  for (size_t g = 0; g <= groups.size(); ++g) {
    o += ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":" + std::to_string(g + 1) +
         ",\"args\":{\"name\":";
    JsonString(g == 0 ? "run" : "iterations " + groups[g - 1], &o);
    o += "}}";
  }
  ArgList args;
  args.Str("config", config_text);
  o += ",\n{\"ph\":\"X\",\"cat\":\"meta\",\"name\":\"tpsim serve\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":";
  JsonUs(run_end, &o);
  o += ",\"args\":";
  JsonArgs(args, &o);
  o += "}";
  for (size_t i = 0; i < its.size(); ++i) {
    o += ",\n{\"ph\":\"X\",\"cat\":\"iteration\",\"name\":";
    JsonString(IterationName(its[i]), &o);
    o += ",\"pid\":1,\"tid\":" + std::to_string(group_of[i] + 2) + ",\"ts\":";
    JsonUs(its[i].start_ps, &o);
    o += ",\"dur\":";
    JsonUs(its[i].end_ps - its[i].start_ps, &o);
    o += ",\"args\":";
    IterationArgs(its[i], &args);
    JsonArgs(args, &o);
    o += "}";
    sink->MaybeFlush();
  }
  for (const CounterTrack& c : counters) {
    for (const auto& [t, v] : c.points) {
      o += ",\n";
      JsonCounterEvent(c.name, c.unit, 1, t, v, &o);
      sink->MaybeFlush();
    }
  }
  o += "\n]}\n";
  sink->Flush();
}

}  // namespace

void WriteServingTrace(const std::string& path, const std::vector<ServingIteration>& iterations,
                       const std::vector<CounterTrack>& counters, const std::string& config_text) {
  std::vector<std::string> groups;
  std::vector<size_t> group_of;
  Ps run_end = 0;
  for (size_t i = 0; i < iterations.size(); ++i) {
    const ServingIteration& it = iterations[i];
    if (it.start_ps < 0 || it.end_ps < it.start_ps)
      throw std::invalid_argument("serving trace: iteration " + std::to_string(i) + " has times [" +
                                  std::to_string(it.start_ps) + ", " + std::to_string(it.end_ps) + "]");
    auto g = std::find(groups.begin(), groups.end(), it.group);
    group_of.push_back(static_cast<size_t>(g - groups.begin()));
    if (g == groups.end()) groups.push_back(it.group);
    run_end = std::max(run_end, it.end_ps);
  }
  for (const CounterTrack& c : counters) {
    for (size_t k = 0; k < c.points.size(); ++k) {
      if (c.points[k].first < 0 || (k > 0 && c.points[k].first < c.points[k - 1].first))
        throw std::invalid_argument("serving trace: counter " + c.name + " point " + std::to_string(k) +
                                    " out of order");
      run_end = std::max(run_end, c.points[k].first);
    }
  }
  config::OutputFile f(path);  // written whole, then renamed over `path`
  Sink sink(&f);
  if (EndsWith(path, ".json")) {
    ServingJson(iterations, groups, group_of, counters, config_text, run_end, &sink);
  } else {
    ServingProto(iterations, groups, group_of, counters, config_text, run_end, &sink);
  }
  f.Commit();
}

}  // namespace tpsim::traces
