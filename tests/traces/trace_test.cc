// Writes traces of a hand-made Program on a 2x2 mesh and decodes them back: the Perfetto
// protobuf with tpsim's own subset of Perfetto's schema, the JSON variant with nlohmann.
#include "traces/trace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "arch/chip.h"
#include "perfetto_trace.pb.h"
#include "tests/mapping/program_test_util.h"
#include "tests/traces/trace_test_util.h"

namespace tpsim::traces {
namespace {

namespace pf = tpsim::perfetto;
using mapping::TaskKind;

// 2x2 mesh, 500 MHz (cycle 2000 ps), 160 GB/s links, 1-cycle routers, no wire latency:
// every hop costs 2000 ps. One DRAM channel per core, 100 GB/s.
arch::Chip TestChip() {
  config::Chip c;
  c.set_name("mesh-2x2");
  c.set_clock_mhz(500);
  auto* core = c.mutable_core();
  core->set_systolic_rows(4);
  core->set_systolic_cols(4);
  core->set_systolic_arrays(1);
  core->set_mac_dtype("bf16");
  core->set_matrix_utilization(1.0);
  core->set_vector_lanes(4);
  core->set_sram_bytes(1 << 20);
  auto* noc = c.mutable_noc();
  noc->set_topology("mesh");
  noc->set_rows(2);
  noc->set_cols(2);
  noc->set_link_bandwidth_gbps(160);
  noc->set_router_latency_cycles(1);
  noc->set_link_latency_ns(0);
  auto* m = c.add_memory();
  m->set_name("dram");
  m->set_kind("dram");
  m->set_per_core(true);
  m->set_bandwidth_gbps(100);
  m->set_efficiency(1.0);
  m->set_latency_ns(0);
  m->set_capacity_bytes(1ull << 30);
  return arch::Chip::Build(c);
}

const char* const kConfig = "name: \"tiny\"\nchip { name: \"mesh-2x2\" }\n# \"quoted\" \\ text\n";

struct Fixture {
  arch::Chip chip = TestChip();
  mapping::testing::TestProgram prog;  // hand-built; a mapping::Program where one is needed
  sim::EngineOutput out;
};

mapping::testing::TestTask Compute(uint32_t id, int core, uint32_t op, std::vector<uint32_t> deps) {
  mapping::testing::TestTask t;
  t.id = mapping::TaskId(id);
  t.kind = TaskKind::kCompute;
  t.core = mapping::CoreId(core);
  t.op = mapping::OpId(op);
  t.op_kind = llm::OpKind::kGemm;
  t.m = 16;
  t.n = 32;
  t.k = 64;
  t.flops = 2.0 * 16 * 32 * 64;
  t.bytes = 1000;
  t.deps = std::vector<mapping::TaskId>(deps.begin(), deps.end());
  return t;
}

mapping::testing::TestTask Transfer(uint32_t id, int src, int dst, uint64_t bytes,
                                    std::vector<uint32_t> deps) {
  mapping::testing::TestTask t;
  t.id = mapping::TaskId(id);
  t.kind = TaskKind::kTransfer;
  t.core = mapping::CoreId(src);
  t.dst_core = mapping::CoreId(dst);
  t.bytes = bytes;
  t.op = mapping::OpId(1);
  t.collective = 0;
  t.deps = std::vector<mapping::TaskId>(deps.begin(), deps.end());
  return t;
}

// Tasks (times in ps):
//   0 compute q_proj L0     core 0  [0, 10500]
//   1 compute q_proj L0     core 1  [0, 10500]
//   2 send 1600 B 0 -> 1            [10500, 22500]   1 hop:  2000 + 1600 / 0.16
//   3 send  800 B 0 -> 3            [10500, 17500]   2 hops, overlaps task 2 on core 0
//   4 dram read 5000 B      core 2  [0, 50000]       5000 / 0.1
//   5 compute o_proj L1     core 1  [22500, 30250]   waits for task 2 from 10500
//   6 norm L1 (vector)      core 2  [50000, 50700]   under 1 ns: an instant
Fixture MakeFixture() {
  Fixture f;
  f.prog.num_cores = 4;
  f.prog.num_channels = static_cast<int>(f.chip.channels().size());
  auto op = [](uint32_t layer, std::string name) {
    mapping::OpInfo o;
    o.ref.phase = mapping::Phase::kPrefill;
    o.ref.layer = layer;
    o.ref.op = std::move(name);
    o.ref.partition = "k_split";
    return o;
  };
  f.prog.ops = {op(0, "q_proj"), op(0, "q_proj.allreduce"), op(1, "o_proj"), op(1, "weights"),
                op(1, "post_norm")};
  f.prog.collectives.push_back(
      {mapping::CollectiveKind::kAllReduce, mapping::AlgorithmOf("ring"), 1600, 2, mapping::OpId(1)});
  f.prog.tasks.push_back(Compute(0, 0, 0, {}));
  f.prog.tasks.push_back(Compute(1, 1, 0, {}));
  f.prog.tasks.push_back(Transfer(2, 0, 1, 1600, {0}));
  f.prog.tasks.push_back(Transfer(3, 0, 3, 800, {0}));
  mapping::testing::TestTask mem;
  mem.id = mapping::TaskId(4);
  mem.kind = TaskKind::kMemory;
  mem.core = mapping::CoreId(2);
  mem.channel = f.chip.ChannelOf(2);
  mem.bytes = 5000;
  mem.op = mapping::OpId(3);
  f.prog.tasks.push_back(mem);
  f.prog.tasks.push_back(Compute(5, 1, 2, {1, 2}));
  mapping::testing::TestTask norm = Compute(6, 2, 4, {4});
  norm.op_kind = llm::OpKind::kNorm;
  norm.vector_ops = 100;
  f.prog.tasks.push_back(norm);
  f.out.tasks = {{0, 10500}, {0, 10500},     {10500, 22500}, {10500, 17500},
                 {0, 50000}, {22500, 30250}, {50000, 50700}};
  f.out.makespan_ps = 50700;
  return f;
}

std::string TmpPath(const std::string& name) { return test::TmpPath("tpsim_trace_test", name); }
using test::ReadFile;

// ---- Decoded protobuf trace ----------------------------------------------------------
struct DSlice {
  std::string name, category, track_name;
  int64_t parent = -1;  // enclosing slice on the same track
  int pid = 0;
  int64_t ts = 0, dur = 0;
  bool instant = false;
  std::map<std::string, pf::DebugAnnotation> args;
  std::vector<uint64_t> flow_out, flow_in;
};

struct Decoded {
  std::map<uint64_t, pf::TrackDescriptor> tracks;
  std::map<int, std::string> process_names;  // pid -> name
  std::vector<DSlice> slices;
  std::map<std::string, std::vector<std::pair<int64_t, double>>> counters;  // track name -> points
};

Decoded Decode(const std::string& bytes) {
  pf::Trace trace;
  EXPECT_TRUE(trace.ParseFromString(bytes));
  Decoded d;
  std::map<uint64_t, std::vector<size_t>> open;  // track -> stack of slice indices
  // Interned strings of the (single) packet sequence, by iid.
  std::map<uint64_t, std::string> cats, names, arg_names;
  bool first = true;
  auto intern = [](auto& table, uint64_t iid, const std::string& name, const char* what) {
    EXPECT_GT(iid, 0u) << what;
    EXPECT_TRUE(table.emplace(iid, name).second) << what << " iid " << iid << " interned twice";
  };
  auto resolve = [](const auto& table, uint64_t iid, const char* what) -> std::string {
    auto it = table.find(iid);
    EXPECT_NE(it, table.end()) << what << " iid " << iid << " used before it was interned";
    return it == table.end() ? "" : it->second;
  };
  for (const pf::TracePacket& p : trace.packet()) {
    EXPECT_EQ(p.trusted_packet_sequence_id(), 1u);
    // The first packet clears the sequence's incremental state; no later one does.
    EXPECT_EQ((p.sequence_flags() & 1u) != 0, first);
    first = false;
    if (p.has_interned_data()) {
      EXPECT_NE(p.sequence_flags() & 2u, 0u) << "interned data without SEQ_NEEDS_INCREMENTAL_STATE";
      for (const pf::EventCategory& c : p.interned_data().event_categories())
        intern(cats, c.iid(), c.name(), "category");
      for (const pf::EventName& n : p.interned_data().event_names()) intern(names, n.iid(), n.name(), "name");
      for (const pf::DebugAnnotationName& n : p.interned_data().debug_annotation_names())
        intern(arg_names, n.iid(), n.name(), "annotation name");
    }
    if (p.has_track_descriptor()) {
      const pf::TrackDescriptor& td = p.track_descriptor();
      EXPECT_EQ(d.tracks.count(td.uuid()), 0u) << "duplicate track uuid " << td.uuid();
      d.tracks[td.uuid()] = td;
      if (td.has_process()) d.process_names[td.process().pid()] = td.process().process_name();
      continue;
    }
    if (!p.has_track_event()) continue;
    const pf::TrackEvent& e = p.track_event();
    EXPECT_EQ(d.tracks.count(e.track_uuid()), 1u) << "event before its track descriptor";
    const pf::TrackDescriptor& td = d.tracks[e.track_uuid()];
    const int64_t ts = static_cast<int64_t>(p.timestamp());
    if (e.type() == pf::TrackEvent::TYPE_COUNTER) {
      d.counters[td.name()].emplace_back(ts, e.double_counter_value());
      continue;
    }
    if (e.type() == pf::TrackEvent::TYPE_SLICE_END) {
      auto& st = open[e.track_uuid()];
      EXPECT_FALSE(st.empty()) << "end without begin on " << td.thread().thread_name();
      if (st.empty()) continue;
      d.slices[st.back()].dur = ts - d.slices[st.back()].ts;
      st.pop_back();
      continue;
    }
    DSlice s;
    const bool uses_iids = e.has_name_iid() || e.category_iids_size() > 0;
    if (uses_iids) {
      EXPECT_NE(p.sequence_flags() & 2u, 0u) << "iids without SEQ_NEEDS_INCREMENTAL_STATE";
    }
    EXPECT_NE(e.has_name_iid(), e.has_name()) << "exactly one of name_iid and name";
    s.name = e.has_name_iid() ? resolve(names, e.name_iid(), "name") : e.name();
    EXPECT_EQ(e.category_iids_size() + e.categories_size(), 1);
    s.category = e.category_iids_size() ? resolve(cats, e.category_iids(0), "category")
                 : e.categories_size()  ? e.categories(0)
                                        : "";
    s.track_name = td.thread().thread_name();
    s.pid = td.thread().pid();
    s.ts = ts;
    s.instant = e.type() == pf::TrackEvent::TYPE_INSTANT;
    for (const pf::DebugAnnotation& a : e.debug_annotations()) {
      EXPECT_NE(a.has_name_iid(), a.has_name()) << "exactly one of name_iid and name";
      const std::string n = a.has_name_iid() ? resolve(arg_names, a.name_iid(), "annotation name") : a.name();
      EXPECT_EQ(s.args.count(n), 0u) << "annotation " << n << " twice on " << s.name;
      s.args[n] = a;
    }
    s.flow_out.assign(e.flow_ids().begin(), e.flow_ids().end());
    s.flow_in.assign(e.terminating_flow_ids().begin(), e.terminating_flow_ids().end());
    d.slices.push_back(s);
    auto& st = open[e.track_uuid()];
    if (!st.empty()) d.slices.back().parent = static_cast<int64_t>(st.back());
    if (e.type() == pf::TrackEvent::TYPE_SLICE_BEGIN) {
      st.push_back(d.slices.size() - 1);
    } else {
      EXPECT_EQ(e.type(), pf::TrackEvent::TYPE_INSTANT);
    }
  }
  for (const auto& [uuid, st] : open) EXPECT_TRUE(st.empty()) << "unclosed slice on track " << uuid;
  // Slices on one track nest: a child ends no later than its parent.
  for (const DSlice& s : d.slices) {
    if (s.parent < 0) continue;
    const DSlice& p = d.slices[s.parent];
    EXPECT_LE(s.ts + s.dur, p.ts + p.dur) << s.name << " overlaps " << p.name << " on " << s.track_name;
  }
  return d;
}

struct Expect {
  uint32_t task;
  std::string category, track, process;
  int64_t start_ps, end_ps;
};

// The expected placement of every task: track names "core c (node)" for compute and
// "core c send|dram [#n]" lanes; processes by layer range.
const std::vector<Expect>& Expected() {
  static const std::vector<Expect> e = {
      {0, "compute", "core 0 (r0c0)", "stage 0: layer 0", 0, 10500},
      {1, "compute", "core 1 (r0c1)", "stage 1: layers 0-1", 0, 10500},
      // Lanes fill in (start, longest first) order: task 2 takes the first send lane.
      {2, "send", "core 0 send", "stage 0: layer 0", 10500, 22500},
      {3, "send", "core 0 send #2", "stage 0: layer 0", 10500, 17500},
      {4, "memory", "core 2 dram", "stage 2: layer 1", 0, 50000},
      {5, "compute", "core 1 (r0c1)", "stage 1: layers 0-1", 22500, 30250},
      {6, "compute", "core 2 (r1c0)", "stage 2: layer 1", 50000, 50700},
  };
  return e;
}

TEST(Trace, EveryTaskOnceWithTrackTimeAndDuration) {
  Fixture f = MakeFixture();
  const std::string path = TmpPath("a.pftrace");
  WriteTrace(path, f.prog, f.chip, f.out, kConfig);
  Decoded d = Decode(ReadFile(path));

  std::map<uint64_t, const DSlice*> by_task;
  for (const DSlice& s : d.slices) {
    if (s.category != "compute" && s.category != "send" && s.category != "memory") continue;
    ASSERT_TRUE(s.args.count("task")) << s.name;
    const uint64_t id = s.args.at("task").uint_value();
    EXPECT_EQ(by_task.count(id), 0u) << "task " << id << " appears twice";
    by_task[id] = &s;
  }
  ASSERT_EQ(by_task.size(), f.prog.tasks.size());
  for (const Expect& e : Expected()) {
    SCOPED_TRACE("task " + std::to_string(e.task));
    const DSlice& s = *by_task.at(e.task);
    EXPECT_EQ(s.category, e.category);
    EXPECT_EQ(s.track_name, e.track);
    EXPECT_EQ(d.process_names.at(s.pid), e.process);
    EXPECT_EQ(s.ts, e.start_ps / 1000);  // ns, floor
    EXPECT_EQ(s.dur, e.end_ps / 1000 - e.start_ps / 1000);
    EXPECT_EQ(s.args.at("start_ps").int_value(), e.start_ps);
    EXPECT_EQ(s.args.at("end_ps").int_value(), e.end_ps);
  }
  // 50000..50700 ps is 50..50 ns: an instant.
  EXPECT_TRUE(by_task.at(6)->instant);
  EXPECT_FALSE(by_task.at(5)->instant);
  // Names by op and layer; shapes and FLOPs as annotations.
  EXPECT_EQ(by_task.at(0)->name, "q_proj L0");
  EXPECT_EQ(by_task.at(2)->name, "send q_proj.allreduce L0");
  EXPECT_EQ(by_task.at(4)->name, "dram rd weights L1");
  EXPECT_EQ(by_task.at(0)->args.at("shape").string_value(), "1x[16,64]x[64,32]");
  EXPECT_EQ(by_task.at(0)->args.at("flops").double_value(), 2.0 * 16 * 32 * 64);
  EXPECT_EQ(by_task.at(2)->args.at("bytes").uint_value(), 1600u);
  EXPECT_EQ(by_task.at(2)->args.at("collective").string_value(), "all_reduce/ring");
  EXPECT_EQ(by_task.at(4)->args.at("channel").string_value(), "dram2");
  // Core 3 has no work but still has its track, in the idle process.
  bool idle_track = false;
  for (const auto& [uuid, td] : d.tracks) {
    if (td.thread().thread_name() == "core 3 (r1c1)")
      idle_track = d.process_names[td.thread().pid()] == "idle cores";
  }
  EXPECT_TRUE(idle_track);
  std::filesystem::remove(path);
}

// A GPU node's collective runs as a kernel (a compute task of op kind kCollective,
// mapping/layout_convert.h): its slice is in category "collective", not "compute".
TEST(Trace, CollectiveKernelsHaveTheirOwnCategory) {
  Fixture f = MakeFixture();
  f.prog.tasks[1].op_kind = llm::OpKind::kCollective;
  const std::string path = TmpPath("coll.pftrace");
  WriteTrace(path, f.prog, f.chip, f.out, kConfig);
  std::map<uint64_t, std::string> category;
  for (const DSlice& s : Decode(ReadFile(path)).slices)
    if (s.args.count("task") && s.category != "wait" && s.category != "recv")
      category[s.args.at("task").uint_value()] = s.category;
  EXPECT_EQ(category.at(0), "compute");
  EXPECT_EQ(category.at(1), "collective");
  EXPECT_EQ(category.at(2), "send");
  std::filesystem::remove(path);
}

TEST(Trace, FlowsFromEachSendToItsReceive) {
  Fixture f = MakeFixture();
  const std::string path = TmpPath("b.pftrace");
  WriteTrace(path, f.prog, f.chip, f.out, kConfig);
  Decoded d = Decode(ReadFile(path));
  std::map<uint64_t, const DSlice*> out_by_flow, in_by_flow;
  for (const DSlice& s : d.slices) {
    for (uint64_t id : s.flow_out) out_by_flow[id] = &s;
    for (uint64_t id : s.flow_in) in_by_flow[id] = &s;
  }
  // Flow id = transfer task id + 1; one per transfer, both ends present.
  ASSERT_EQ(out_by_flow.size(), 2u);
  ASSERT_EQ(in_by_flow.size(), 2u);
  for (uint64_t t : {2, 3}) {
    ASSERT_TRUE(out_by_flow.count(t + 1));
    ASSERT_TRUE(in_by_flow.count(t + 1));
    EXPECT_EQ(out_by_flow[t + 1]->args.at("task").uint_value(), t);
    EXPECT_EQ(in_by_flow[t + 1]->category, "recv");
    EXPECT_EQ(in_by_flow[t + 1]->args.at("task").uint_value(), t);
  }
  // Receive: [start + unloaded route latency, end] on the destination's recv lane.
  // Task 2: 1 hop, 10500 + 2000 = 12500 ps -> 12 ns, ends 22 ns.
  EXPECT_EQ(in_by_flow[3]->track_name, "core 1 recv");
  EXPECT_EQ(in_by_flow[3]->ts, 12);
  EXPECT_EQ(in_by_flow[3]->dur, 22 - 12);
  // Task 3: 2 hops, 10500 + 4000 = 14500 ps -> 14 ns, ends 17 ns.
  EXPECT_EQ(in_by_flow[4]->track_name, "core 3 recv");
  EXPECT_EQ(in_by_flow[4]->ts, 14);
  EXPECT_EQ(in_by_flow[4]->dur, 17 - 14);
  std::filesystem::remove(path);
}

TEST(Trace, WaitsConfigAndCounters) {
  Fixture f = MakeFixture();
  const std::string path = TmpPath("c.pftrace");
  WriteTrace(path, f.prog, f.chip, f.out, kConfig);
  Decoded d = Decode(ReadFile(path));

  // Config: one metadata slice over the whole run.
  int metas = 0;
  for (const DSlice& s : d.slices) {
    if (s.category != "meta") continue;
    ++metas;
    EXPECT_EQ(s.args.at("config").string_value(), kConfig);
    EXPECT_EQ(s.ts, 0);
    EXPECT_EQ(s.dur, 50);  // 50700 ps
    EXPECT_EQ(d.process_names.at(s.pid), "tpsim");
  }
  EXPECT_EQ(metas, 1);

  // Waits: core 1 idles 10500..22500 before task 5, held back by transfer 2; core 2 idles
  // 0..50000 before task 6 (dram read 4). Core 0 never waits.
  std::vector<const DSlice*> waits;
  for (const DSlice& s : d.slices) {
    if (s.category == "wait") waits.push_back(&s);
  }
  ASSERT_EQ(waits.size(), 2u);
  std::map<std::string, const DSlice*> wait_by_track;
  for (const DSlice* w : waits) wait_by_track[w->track_name] = w;
  const DSlice* w1 = wait_by_track.at("core 1 (r0c1)");
  EXPECT_EQ(w1->ts, 10);
  EXPECT_EQ(w1->dur, 22 - 10);
  EXPECT_EQ(w1->args.at("waiting_for_task").uint_value(), 2u);
  EXPECT_EQ(w1->args.at("before_task").uint_value(), 5u);
  const DSlice* w2 = wait_by_track.at("core 2 (r1c0)");
  EXPECT_EQ(w2->ts, 0);
  EXPECT_EQ(w2->dur, 50);
  EXPECT_EQ(w2->args.at("waiting_for_task").uint_value(), 4u);

  // Link r0c0->r0c1 carries tasks 2 and 3 (XY route of 0 -> 3 starts east):
  //   rate2 = 1600 / 12000 B/ps, rate3 = 800 / 7000 B/ps, link 160 GB/s = 0.16 B/ps
  //   [10500, 17500): (rate2 + rate3) / 0.16;  [17500, 22500): rate2 / 0.16;  then 0.
  const double r2 = 1600.0 / 12000, r3 = 800.0 / 7000;
  const auto& east = d.counters.at("link r0c0->r0c1 util");
  ASSERT_EQ(east.size(), 3u);
  EXPECT_EQ(east[0].first, 10);
  EXPECT_NEAR(east[0].second, (r2 + r3) / 0.16, 1e-9);
  EXPECT_EQ(east[1].first, 17);
  EXPECT_NEAR(east[1].second, r2 / 0.16, 1e-9);
  EXPECT_EQ(east[2].first, 22);
  EXPECT_EQ(east[2].second, 0.0);
  // r0c1->r1c1 carries task 3 only.
  const auto& south = d.counters.at("link r0c1->r1c1 util");
  ASSERT_EQ(south.size(), 2u);
  EXPECT_NEAR(south[0].second, r3 / 0.16, 1e-9);
  // Only links with traffic get a track: the two above.
  int link_tracks = 0;
  for (const auto& [name, pts] : d.counters) link_tracks += name.rfind("link ", 0) == 0;
  EXPECT_EQ(link_tracks, 2);
  // DRAM channel of core 2: 5000 B over 50000 ps = 0.1 B/ps = 100 GB/s, then 0.
  const auto& dram = d.counters.at("dram dram2 GB/s");
  ASSERT_EQ(dram.size(), 2u);
  EXPECT_EQ(dram[0].first, 0);
  EXPECT_NEAR(dram[0].second, 100.0, 1e-9);
  EXPECT_EQ(dram[1].first, 50);
  EXPECT_EQ(dram[1].second, 0.0);
  std::filesystem::remove(path);
}

// Perfetto's field numbers, checked on the raw bytes (independent of our .proto):
// Trace.packet = 1, TracePacket.track_descriptor = 60, TrackEvent flow_ids = 47 and
// terminating_flow_ids = 48 (fixed64, unpacked); interned strings: TracePacket.interned_data
// = 12 holding InternedData.event_names = 2 / event_categories = 1 / debug_annotation_names = 3,
// each {iid = 1, name = 2}; a slice names its EventName with TrackEvent.name_iid = 10.
TEST(Trace, WireTagsMatchPerfettoSchema) {
  Fixture f = MakeFixture();
  const std::string path = TmpPath("d.pftrace");
  WriteTrace(path, f.prog, f.chip, f.out, kConfig);
  const std::string b = ReadFile(path);
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(static_cast<unsigned char>(b[0]), 0x0a);  // field 1, length-delimited
  auto has = [&](std::initializer_list<unsigned char> tag) {
    return b.find(std::string(tag.begin(), tag.end())) != std::string::npos;
  };
  EXPECT_TRUE(has({0xe2, 0x03}));                          // (60 << 3) | 2
  EXPECT_TRUE(has({0xf9, 0x02, 3, 0, 0, 0, 0, 0, 0, 0}));  // (47 << 3) | 1, flow id 3
  EXPECT_TRUE(has({0x81, 0x03, 3, 0, 0, 0, 0, 0, 0, 0}));  // (48 << 3) | 1, terminating flow id 3
  EXPECT_TRUE(has({0x62}));                                // (12 << 3) | 2, interned_data
  // InternedData.event_names (2 << 3 | 2) { iid (1 << 3 | 0) = 1, name (2 << 3 | 2) = "tpsim run" },
  // event_categories (1 << 3 | 2) { 1, "meta" }, debug_annotation_names (3 << 3 | 2) { 1, "config" }:
  // the metadata slice is the first slice begun; then the task names, e.g. "q_proj L0".
  EXPECT_TRUE(has({0x12, 13, 0x08, 1, 0x12, 9, 't', 'p', 's', 'i', 'm', ' ', 'r', 'u', 'n'}));
  EXPECT_TRUE(has({0x0a, 8, 0x08, 1, 0x12, 4, 'm', 'e', 't', 'a'}));
  EXPECT_TRUE(has({0x1a, 10, 0x08, 1, 0x12, 6, 'c', 'o', 'n', 'f', 'i', 'g'}));
  EXPECT_TRUE(has({0x12, 9, 'q', '_', 'p', 'r', 'o', 'j', ' ', 'L', '0'}));
  // TrackEvent.category_iids = 3 (varint 1) and name_iid = 10 (varint 1).
  EXPECT_TRUE(has({0x18, 1}));
  EXPECT_TRUE(has({0x50, 1}));
  std::filesystem::remove(path);
}

TEST(Trace, SameInputSameBytes) {
  Fixture f = MakeFixture();
  const std::string a = TmpPath("e1.pftrace"), b = TmpPath("e2.pftrace");
  WriteTrace(a, f.prog, f.chip, f.out, kConfig);
  WriteTrace(b, f.prog, f.chip, f.out, kConfig);
  EXPECT_EQ(ReadFile(a), ReadFile(b));
  const std::string ja = TmpPath("e1.json"), jb = TmpPath("e2.json");
  WriteTrace(ja, f.prog, f.chip, f.out, kConfig);
  WriteTrace(jb, f.prog, f.chip, f.out, kConfig);
  EXPECT_EQ(ReadFile(ja), ReadFile(jb));
  for (const auto& p : {a, b, ja, jb}) std::filesystem::remove(p);
}

TEST(Trace, JsonHasTheSameSlices) {
  Fixture f = MakeFixture();
  const std::string path = TmpPath("f.json");
  WriteTrace(path, f.prog, f.chip, f.out, kConfig);
  const nlohmann::json j = nlohmann::json::parse(ReadFile(path));
  EXPECT_EQ(j.at("metadata").at("tpsim_config").get<std::string>(), kConfig);
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<int, std::string> process_names;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") {
      thread_names[{e.at("pid").get<int>(), e.at("tid").get<int>()}] = e.at("args").at("name");
    }
    if (e.at("ph") == "M" && e.at("name") == "process_name")
      process_names[e.at("pid")] = e.at("args").at("name");
  }
  std::map<uint64_t, nlohmann::json> by_task;
  std::set<uint64_t> flow_s, flow_f;
  int metas = 0;
  for (const auto& e : j.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "s") flow_s.insert(e.at("id").get<uint64_t>());
    if (ph == "f") flow_f.insert(e.at("id").get<uint64_t>());
    if (ph != "X") continue;
    const std::string cat = e.at("cat");
    if (cat == "meta") {
      ++metas;
      EXPECT_EQ(e.at("args").at("config").get<std::string>(), kConfig);
    }
    if (cat != "compute" && cat != "send" && cat != "memory") continue;
    const uint64_t id = e.at("args").at("task");
    EXPECT_EQ(by_task.count(id), 0u);
    by_task[id] = e;
  }
  EXPECT_EQ(metas, 1);
  ASSERT_EQ(by_task.size(), f.prog.tasks.size());
  for (const Expect& x : Expected()) {
    SCOPED_TRACE("task " + std::to_string(x.task));
    const nlohmann::json& e = by_task.at(x.task);
    EXPECT_EQ(e.at("cat"), x.category);
    EXPECT_EQ(thread_names.at({e.at("pid").get<int>(), e.at("tid").get<int>()}), x.track);
    EXPECT_EQ(process_names.at(e.at("pid").get<int>()), x.process);
    // Microseconds with 6 decimals: exact picoseconds.
    EXPECT_EQ(std::llround(e.at("ts").get<double>() * 1e6), x.start_ps);
    EXPECT_EQ(std::llround(e.at("dur").get<double>() * 1e6), x.end_ps - x.start_ps);
  }
  EXPECT_EQ(flow_s, (std::set<uint64_t>{3, 4}));
  EXPECT_EQ(flow_f, (std::set<uint64_t>{3, 4}));
  std::filesystem::remove(path);
}

// Six DRAM reads on core 3 over the same [0, 8000] ps: four lanes side by side (the cap),
// the other two nested inside the first lanes, every slice still once and well nested.
TEST(Trace, ManyConcurrentSlicesStayOnFewTracks) {
  Fixture f = MakeFixture();
  for (int i = 0; i < 6; ++i) {
    mapping::testing::TestTask m;
    m.id = mapping::TaskId(static_cast<uint32_t>(f.prog.tasks.size()));
    m.kind = TaskKind::kMemory;
    m.core = mapping::CoreId(3);
    m.channel = f.chip.ChannelOf(3);
    m.bytes = 100;
    m.op = mapping::OpId(3);
    f.prog.tasks.push_back(m);
    f.out.tasks.push_back({0, 8000});
  }
  const std::string path = TmpPath("h.pftrace");
  WriteTrace(path, f.prog, f.chip, f.out, kConfig);
  Decoded d = Decode(ReadFile(path));
  std::set<std::string> lanes;
  int nested = 0;
  std::set<uint64_t> tasks;
  for (const DSlice& s : d.slices) {
    if (s.category != "memory" || s.track_name.rfind("core 3 ", 0) != 0) continue;
    lanes.insert(s.track_name);
    tasks.insert(s.args.at("task").uint_value());
    nested += s.parent >= 0;
    EXPECT_EQ(s.ts, 0);
    EXPECT_EQ(s.dur, 8);
  }
  EXPECT_EQ(lanes,
            (std::set<std::string>{"core 3 dram", "core 3 dram #2", "core 3 dram #3", "core 3 dram #4"}));
  EXPECT_EQ(tasks.size(), 6u);
  EXPECT_EQ(nested, 2);
  std::filesystem::remove(path);
}

// A receive is annotated as its send (task, phase, step, layer, op, partition, src, dst,
// bytes, offset, reduce, collective, coll_step), but for its own start_ps and end_ps.
TEST(Trace, ReceivesCarryTheirSendsAnnotations) {
  Fixture f = MakeFixture();
  const std::string path = TmpPath("recv.pftrace");
  WriteTrace(path, f.prog, f.chip, f.out, kConfig);
  Decoded d = Decode(ReadFile(path));
  std::filesystem::remove(path);
  std::map<uint64_t, const DSlice*> send, recv;
  for (const DSlice& s : d.slices) {
    if (s.category == "send") send[s.args.at("task").uint_value()] = &s;
    if (s.category == "recv") recv[s.args.at("task").uint_value()] = &s;
  }
  ASSERT_EQ(recv.size(), 2u);
  for (const auto& [task, r] : recv) {
    SCOPED_TRACE("task " + std::to_string(task));
    const DSlice& s = *send.at(task);
    std::set<std::string> names;
    for (const auto& [n, a] : s.args) names.insert(n);
    for (const auto& [n, a] : r->args) names.insert(n);
    for (const std::string& n : names) {
      if (n == "start_ps" || n == "end_ps") continue;
      ASSERT_TRUE(s.args.count(n) && r->args.count(n)) << n;
      EXPECT_EQ(r->args.at(n).SerializeAsString(), s.args.at(n).SerializeAsString()) << n;
    }
  }
  // Task 2: q_proj.allreduce L0 of the prefill, 1600 B from core 0 to core 1, received over
  // [10500 + 2000, 22500] ps (1 hop).
  const DSlice& r2 = *recv.at(2);
  EXPECT_EQ(r2.args.at("phase").string_value(), "prefill");
  EXPECT_EQ(r2.args.at("step").uint_value(), 0u);
  EXPECT_EQ(r2.args.at("layer").uint_value(), 0u);
  EXPECT_EQ(r2.args.at("op").string_value(), "q_proj.allreduce");
  EXPECT_EQ(r2.args.at("partition").string_value(), "k_split");
  EXPECT_EQ(r2.args.at("src").int_value(), 0);
  EXPECT_EQ(r2.args.at("dst").int_value(), 1);
  EXPECT_EQ(r2.args.at("bytes").uint_value(), 1600u);
  EXPECT_EQ(r2.args.at("collective").string_value(), "all_reduce/ring");
  EXPECT_EQ(r2.args.at("start_ps").int_value(), 12500);
  EXPECT_EQ(r2.args.at("end_ps").int_value(), 22500);
  std::filesystem::remove(path);
}

// A Program of the prefill and decode steps 1 and 5 (tpsim run --trace-steps first,5: steps 2
// to 4 were not lowered, and step 5 depends on step 1's output), times as in the whole run:
//   0 compute prefill L0   core 0  [     0,  10000]
//   1 compute step 1 L0    core 1  [ 12000,  20000]  deps 0
//   2 compute step 1 L0    core 0  [ 20000,  30000]  deps 0, 1
//   3 compute step 5 L0    core 0  [100000, 110000]  deps 2
//   4 compute step 5 L0    core 1  [100000, 115000]  deps 2
//   5 compute step 5 L0    core 0  [115000, 120000]  deps 3, 4
//   6 compute step 5 L0    core 0  [125000, 130000]  deps 5, 2
// Whole-run waits: core 1 idles [0, 12000] before task 1 (its first task; the prefill's
// task 0 ended at 10000, inside the gap); core 0 [10000, 20000] before task 2 (task 1 ends
// at 20000). Core 0's [30000, 100000] and core 1's [20000, 100000] span steps 2 to 4, whose
// compute the whole run did there: no wait. Core 0's [110000, 115000] before task 5 is within
// step 5 and its deps are step 5's: a wait for task 4. Task 6 depends on step 1's task 2,
// where the whole run had step 4's: its gap [120000, 125000] may be the whole run's, but
// which dependency it waited for is not known: no wait.
// With steps 1 to 5 all lowered (relabelling step 5 as step 2), every gap is a wait; core 1's
// before task 4 waits for task 2 (ends at 30000, inside [20000, 100000]).
TEST(Trace, SampledStepsGetOnlyTheWholeRunsWaits) {
  auto make = [](uint32_t later_step) {
    Fixture f = MakeFixture();
    auto op = [](mapping::Phase phase, uint32_t step, std::string name) {
      mapping::OpInfo o;
      o.ref.phase = phase;
      o.ref.step = step;
      o.ref.op = std::move(name);
      o.ref.partition = "k_split";
      return o;
    };
    f.prog.ops = {op(mapping::Phase::kPrefill, 0, "attn_norm"), op(mapping::Phase::kDecode, 0, "attn_norm"),
                  op(mapping::Phase::kDecode, later_step - 1, "attn_norm")};
    f.prog.collectives.clear();
    f.prog.tasks = {Compute(0, 0, 0, {}),    Compute(1, 1, 1, {0}), Compute(2, 0, 1, {0, 1}),
                    Compute(3, 0, 2, {2}),   Compute(4, 1, 2, {2}), Compute(5, 0, 2, {3, 4}),
                    Compute(6, 0, 2, {5, 2})};
    f.out.tasks = {{0, 10000},       {12000, 20000},   {20000, 30000},  {100000, 110000},
                   {100000, 115000}, {115000, 120000}, {125000, 130000}};
    f.out.makespan_ps = 130000;
    return f;
  };
  // (before_task, start_ps, end_ps, waiting_for_task or -1) of every wait in the JSON trace.
  auto waits = [](const Fixture& f, const std::string& name) {
    const std::string path = TmpPath(name);
    WriteTrace(path, f.prog, f.chip, f.out, kConfig);
    const nlohmann::json j = nlohmann::json::parse(ReadFile(path));
    std::set<std::tuple<uint64_t, int64_t, int64_t, int64_t>> w;
    for (const auto& e : j.at("traceEvents")) {
      if (e.at("ph") != "X" || e.at("cat") != "wait") continue;
      const auto& a = e.at("args");
      w.emplace(a.at("before_task").get<uint64_t>(), a.at("start_ps").get<int64_t>(),
                a.at("end_ps").get<int64_t>(),
                a.contains("waiting_for_task") ? a.at("waiting_for_task").get<int64_t>() : -1);
    }
    std::filesystem::remove(path);
    return w;
  };
  using W = std::set<std::tuple<uint64_t, int64_t, int64_t, int64_t>>;
  EXPECT_EQ(waits(make(5), "sampled.json"),
            (W{{1, 0, 12000, 0}, {2, 10000, 20000, 1}, {5, 110000, 115000, 4}}));
  EXPECT_EQ(waits(make(2), "every.json"), (W{{1, 0, 12000, 0},
                                             {2, 10000, 20000, 1},
                                             {3, 30000, 100000, -1},
                                             {4, 20000, 100000, 2},
                                             {5, 110000, 115000, 4},
                                             {6, 120000, 125000, -1}}));
}

TEST(Trace, BadInputThrowsWithoutWriting) {
  Fixture f = MakeFixture();
  const std::string path = TmpPath("g.pftrace");
  sim::EngineOutput short_out = f.out;
  short_out.tasks.pop_back();
  EXPECT_THROW(WriteTrace(path, f.prog, f.chip, short_out, kConfig), std::invalid_argument);
  mapping::testing::TestProgram bad = f.prog;
  bad.tasks[2].dst_core = mapping::CoreId(4);  // 2x2 mesh: cores 0..3
  EXPECT_THROW(WriteTrace(path, bad, f.chip, f.out, kConfig), std::invalid_argument);
  bad = f.prog;
  bad.tasks[4].channel = 9;
  EXPECT_THROW(WriteTrace(path, bad, f.chip, f.out, kConfig), std::invalid_argument);
  bad = f.prog;
  bad.tasks[0].op = mapping::OpId(99);
  EXPECT_THROW(WriteTrace(path, bad, f.chip, f.out, kConfig), std::invalid_argument);
  sim::EngineOutput backwards = f.out;
  backwards.tasks[0] = {500, 100};
  EXPECT_THROW(WriteTrace(path, f.prog, f.chip, backwards, kConfig), std::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_THROW(WriteTrace("/nonexistent-dir/x.pftrace", f.prog, f.chip, f.out, kConfig), std::runtime_error);
}

}  // namespace
}  // namespace tpsim::traces
