#include "traces/trace.h"

#include "configs/files.h"
#include "configs/load.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
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
#include "traces/trace_encode.h"
#include "traces/trace_layout.h"

namespace tpsim::traces {
namespace {

using namespace internal;  // NOLINT(google-build-using-namespace): traces/' own helpers
using mapping::TaskKind;

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
    } else {  // a task, or a transfer's receive: the send's annotations but its own times
      const mapping::OpRef& ref = p_.ops[t.op].ref;
      args->Uint("task", static_cast<uint64_t>(s.task));
      args->Str("phase", mapping::ToString(ref.phase));
      // Decode steps count from 1, as --trace-steps and the run's messages count them (OpRef
      // numbers them from 0); prefill is 0.
      args->Uint("step", ref.phase == mapping::Phase::kDecode ? uint64_t{ref.step} + 1 : ref.step);
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

}  // namespace

void CheckTraceName(const std::string& path) {
  if (path.empty() || config::HasExtension(path, ".json") || config::HasExtension(path, ".pftrace") ||
      config::HasExtension(path, ".perfetto-trace"))
    return;
  std::error_code ec;
  const auto kind = std::filesystem::status(path, ec).type();
  if (!ec && kind != std::filesystem::file_type::regular && kind != std::filesystem::file_type::not_found &&
      kind != std::filesystem::file_type::directory)
    return;  // /dev/null, a FIFO: no name to read a format from
  throw config::ConfigError(config::Diag{
      config::kCommandLine, "--trace", config::Clip(path),
      "a trace's name says its format: FILE.json (Chrome JSON) or FILE.pftrace (Perfetto protobuf; "
      "FILE.perfetto-trace too); another name was written as protobuf"});
}

void WriteTrace(const std::string& path, const mapping::Program& program, const arch::Chip& chip,
                const sim::EngineOutput& out, const std::string& resolved_config_text) {
  Check(program, chip, out);
  const Layout layout = BuildLayout(program, chip, out);
  const Describer desc(program, chip, out, resolved_config_text);
  config::OutputFile f(path);  // written whole, then renamed over `path`
  Sink sink(&f);
  // .json in any case, as `tpsim plot --out` reads extensions (x.JSON was written as a pftrace).
  if (config::HasExtension(path, ".json")) {
    Json(layout, desc, resolved_config_text, &sink);
  } else {
    Proto(layout, desc, &sink);
  }
  f.Commit();
}

}  // namespace tpsim::traces
