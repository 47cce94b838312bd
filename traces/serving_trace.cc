// tpsim serve's trace: iterations per group and counters, Perfetto or Chrome JSON.
#include <algorithm>
#include <string>
#include <vector>

#include "configs/files.h"
#include "perfetto_trace.pb.h"
#include "traces/trace.h"
#include "traces/trace_encode.h"

namespace tpsim::traces {
namespace {

using namespace internal;  // NOLINT(google-build-using-namespace): traces/' own helpers

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
  if (config::HasExtension(path, ".json")) {  // x.JSON too, as `tpsim run --trace` reads it
    ServingJson(iterations, groups, group_of, counters, config_text, run_end, &sink);
  } else {
    ServingProto(iterations, groups, group_of, counters, config_text, run_end, &sink);
  }
  f.Commit();
}

}  // namespace tpsim::traces
