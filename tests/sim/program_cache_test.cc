// sim::ProgramCache and the summary-only sweep path: the timing-only chip fields
// leave the lowered Program unchanged (so a cache keyed without them is exact),
// a cached sweep stores the same metrics as an uncached one, the analytical plan
// reused on another chip times like a fresh run, and the LRU keeps its bound.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mapping/mapping.h"
#include "sim/analytical/analytical.h"
#include "sim/experiment.h"
#include "sim/result.h"
#include "sim/run.h"
#include "sim/sweep/runner.h"
#include "sim/sweep/spec.h"
#include "tests/sim/temp_dir_test.h"

namespace tpsim::sim {
namespace {

namespace fs = std::filesystem;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

std::string Src(const std::string& rel) { return std::string(TPSIM_SOURCE_DIR) + "/" + rel; }

class ProgramCacheTest : public test::TempDirTest {
 protected:
  ProgramCacheTest() : TempDirTest("tpsim-program-cache-test") {}
  // Qwen3-4B on `chip_file` (absolute): `layers` layers as `stages` stages of TP `tp`,
  // a 64-token prompt then 2 decode steps.
  Experiment Exp(const std::string& chip_file, int tp, int stages, int layers, const std::string& name) {
    std::string text =
        "name: \"" + name + "\"\nchip_file: \"" + chip_file + "\"\nmodel_file: \"" +
        Src("configs/models/qwen3-4b.json") +
        "\"\nworkload { batch: 1 seq_len: 64 decode_steps: 2 num_layers: " + std::to_string(layers) +
        " dtype: \"bf16\" }\nmapping { tp: " + std::to_string(tp) +
        " pipeline_stages: " + std::to_string(stages) +
        " partition: \"k_split\" placement: \"linear\" collective: \"ring\" }\n";
    return LoadExperiment(Write(name + ".textproto", text), {});
  }
};

// Everything Lower produced that an executor reads: the dump (tasks, deps, ops) and
// the functional side tables' sizes.
std::string Fingerprint(const mapping::Program& p) {
  return p.Dump() + "func tensors=" + std::to_string(p.func.tensors.size()) +
         " ops=" + std::to_string(p.func.ops.size()) +
         " collectives=" + std::to_string(p.func.collectives.size()) +
         " outputs=" + std::to_string(p.func.outputs.size()) + "\n";
}

// Changes the field at `path` (a ProgramCache::TimingOnlyFields entry, "chip." stripped;
// "[]" = every element) to another valid value. Returns false when `chip` has no such
// field to change (an empty repeated field).
bool Perturb(Message* m, const std::string& path) {
  const size_t dot = path.find('.');
  std::string head = path.substr(0, dot);
  const bool each = head.size() > 2 && head.ends_with("[]");
  if (each) head.resize(head.size() - 2);
  const FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(head);
  if (f == nullptr) ADD_FAILURE() << "no field " << head << " in " << m->GetDescriptor()->full_name();
  if (f == nullptr) return false;
  const auto* refl = m->GetReflection();
  if (dot != std::string::npos) {
    const std::string rest = path.substr(dot + 1);
    if (!f->is_repeated()) {  // a message the chip leaves out (energy) is not added
      return refl->HasField(*m, f) && Perturb(refl->MutableMessage(m, f), rest);
    }
    bool changed = false;
    for (int i = 0; i < refl->FieldSize(*m, f); ++i)
      changed |= Perturb(refl->MutableRepeatedMessage(m, f, i), rest);
    return changed;
  }
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      const double v = refl->GetDouble(*m, f);
      refl->SetDouble(m, f, v > 0 ? v * 0.5 : 1.0);  // keeps fractions (utilisation, efficiency) in (0, 1]
      return true;
    }
    case FieldDescriptor::CPPTYPE_UINT32:
      refl->SetUInt32(m, f, refl->GetUInt32(*m, f) + 1);
      return true;
    case FieldDescriptor::CPPTYPE_BOOL:
      refl->SetBool(m, f, !refl->GetBool(*m, f));
      return true;
    case FieldDescriptor::CPPTYPE_STRING: {  // the DRAM device's names: the other valid one
      const std::string v = refl->GetString(*m, f);
      if (path == "preset") refl->SetString(m, f, v == "hbm3-6400" ? "stacked-dram-60" : "hbm3-6400");
      if (path == "command_bus") refl->SetString(m, f, v == "split" ? "shared" : "split");
      if (path != "preset" && path != "command_bus") ADD_FAILURE() << path << ": no other value known";
      return path == "preset" || path == "command_bus";
    }
    default:
      ADD_FAILURE() << path << ": unexpected type";
      return false;
  }
}

// (a) Every timing-only field, changed alone, leaves the cache key and the lowered
// Program as they were, on chips that between them have every such field: stacked
// DRAM on a mesh (wafer-8x8), edge HBM (mesh-4x4-hbm), a switch (h100-sxm-8), dies
// with die-to-die links (wafer-32x32) and an explicit edge list (written here).
TEST_F(ProgramCacheTest, TimingOnlyFieldsLeaveTheProgramUnchanged) {
  const std::string edges_text = R"(name: "edges-4"
clock_mhz: 1000
core { systolic_rows: 32 systolic_cols: 32 systolic_arrays: 1 mac_dtype: "bf16" matrix_utilization: 0.8
       vector_lanes: 32 sram_bytes: 33554432 sram_bandwidth_gbps: 256 }
noc { topology: "edges" core_names: ["c0", "c1", "c2", "c3"] link_bandwidth_gbps: 100 link_latency_ns: 1
      edges { a: "c0" b: "c1" bandwidth_gbps: 50 latency_ns: 2 }
      edges { a: "c1" b: "c2" }
      edges { a: "c2" b: "c3" bandwidth_gbps: 80 }
      edges { a: "c3" b: "c0" latency_ns: 3 } }
memory { name: "dram" kind: "dram" per_core: true bandwidth_gbps: 60 efficiency: 0.7 latency_ns: 50
         capacity_bytes: 4294967296 }
)";
  const std::string edges_chip = Write("edges-4.textproto", edges_text);
  // The same chip with its efficiency taken from a DRAM device model (arch/dram_device.h):
  // there `efficiency` must stay unset, so it is not perturbed.
  std::string device_text = edges_text;
  device_text.replace(device_text.find("efficiency: 0.7"), 15,
                      "device { preset: \"stacked-dram-60\" command_bus: \"shared\" queue_depth: 32 }");
  const std::string device_chip = Write("edges-4-device.textproto", device_text);
  struct Case {
    std::string chip;
    int tp, stages, layers;
    std::string skip = "";  // a field not to perturb on this chip
  };
  const std::vector<Case> cases = {
      {Src("configs/chips/wafer-8x8.textproto"), 4, 2, 2},
      {Src("configs/chips/mesh-4x4-hbm.textproto"), 4, 2, 2},
      {Src("configs/chips/h100-sxm-8.textproto"), 8, 1, 1},
      {Src("configs/chips/wafer-32x32.textproto"), 4, 1, 1},
      {edges_chip, 4, 1, 1},
      {device_chip, 4, 1, 1, "chip.memory[].efficiency"},
  };
  std::set<std::string> exercised;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.chip);
    const Experiment base = Exp(c.chip, c.tp, c.stages, c.layers, "base");
    const arch::Chip base_chip = ValidateExperiment(base);
    const std::string want =
        Fingerprint(mapping::Lower(base_chip, base.cfg.model(), base.cfg.workload(), base.cfg.mapping()));
    const std::string base_key = ProgramCache::Key(base.cfg);
    ASSERT_FALSE(base_key.empty());
    for (const std::string& field : ProgramCache::TimingOnlyFields()) {
      SCOPED_TRACE(field);
      ASSERT_TRUE(field.starts_with("chip."));
      Experiment e = base;
      if (field == c.skip || !Perturb(e.cfg.mutable_chip(), field.substr(5))) continue;
      ASSERT_NE(e.cfg.chip().SerializeAsString(), base.cfg.chip().SerializeAsString());
      exercised.insert(field);
      EXPECT_EQ(ProgramCache::Key(e.cfg), base_key);
      const arch::Chip chip = ValidateExperiment(e);
      EXPECT_EQ(Fingerprint(mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping())), want);
    }
  }
  EXPECT_EQ(exercised.size(), ProgramCache::TimingOnlyFields().size());
}

// Fields Lower does read, and the lowering inputs besides the chip, are in the key.
TEST_F(ProgramCacheTest, LoweringInputsChangeTheKey) {
  const Experiment base = Exp(Src("configs/chips/wafer-8x8.textproto"), 4, 2, 2, "base");
  const std::string key = ProgramCache::Key(base.cfg);
  auto changed = [&](auto mutate) {
    Experiment e = base;
    mutate(&e.cfg);
    return ProgramCache::Key(e.cfg) != key;
  };
  EXPECT_TRUE(
      changed([](config::Experiment* c) { c->mutable_chip()->mutable_core()->set_sram_bytes(1 << 20); }));
  EXPECT_TRUE(changed([](config::Experiment* c) { c->mutable_chip()->mutable_noc()->set_rows(4); }));
  EXPECT_TRUE(
      changed([](config::Experiment* c) { c->mutable_chip()->mutable_memory(0)->set_per_core(false); }));
  EXPECT_TRUE(changed([](config::Experiment* c) {
    c->mutable_chip()->mutable_collectives()->set_in_switch_reduction(true);
  }));
  EXPECT_TRUE(changed([](config::Experiment* c) { c->mutable_workload()->set_seq_len(128); }));
  EXPECT_TRUE(changed([](config::Experiment* c) { c->mutable_mapping()->set_partition("megatron"); }));
  EXPECT_TRUE(changed([](config::Experiment* c) { c->mutable_mapping()->set_mn_2d_weights("k_steps"); }));
  EXPECT_TRUE(changed([](config::Experiment* c) { c->mutable_model()->set_intermediate_size(1024); }));
  EXPECT_FALSE(changed([](config::Experiment* c) { c->set_name("other"); }));
  EXPECT_FALSE(changed([](config::Experiment* c) { c->set_engine("tlm"); }));
  // A placement file could change between runs: never cached.
  Experiment f = base;
  f.cfg.mutable_mapping()->set_placement("file");
  EXPECT_EQ(ProgramCache::Key(f.cfg), "");
}

// The cache returns the Program it lowered for an equal key, evicts the least
// recently used beyond its capacity, and lowers uncacheable experiments every time.
TEST_F(ProgramCacheTest, LruOfBoundedSize) {
  const std::string chip = Src("configs/chips/wafer-8x8.textproto");
  const Experiment a = Exp(chip, 4, 1, 1, "a"), b = Exp(chip, 2, 1, 1, "b"), c = Exp(chip, 1, 1, 1, "c");
  Experiment a_fast = a;
  a_fast.cfg.mutable_chip()->mutable_noc()->set_link_bandwidth_gbps(512);
  const arch::Chip chip_a = ValidateExperiment(a), chip_b = ValidateExperiment(b),
                   chip_c = ValidateExperiment(c);
  const arch::Chip chip_fast = ValidateExperiment(a_fast);
  ProgramCache cache(2);
  auto pa = cache.Get(a, chip_a);
  EXPECT_EQ(cache.Get(a_fast, chip_fast), pa);  // timing only: the same entry
  auto pb = cache.Get(b, chip_b);
  EXPECT_NE(pb, pa);
  EXPECT_EQ(cache.Get(a, chip_a), pa);  // a is now the most recent; b the least
  cache.Get(c, chip_c);                 // evicts b
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.hits(), 2u);
  EXPECT_EQ(cache.misses(), 3u);
  EXPECT_NE(cache.Get(b, chip_b), pb);  // lowered again
  EXPECT_EQ(cache.misses(), 4u);
  EXPECT_EQ(Fingerprint(cache.Get(b, chip_b)->program), Fingerprint(pb->program));
  ProgramCache none(0);
  none.Get(a, chip_a);
  none.Get(a, chip_a);
  EXPECT_EQ(none.hits(), 0u);
  EXPECT_EQ(none.size(), 0u);
}

// Workers share one cache: callers asking at once for the same key get one Program,
// lowered once.
TEST_F(ProgramCacheTest, ConcurrentCallersLowerOnce) {
  const std::string chip_file = Src("configs/chips/wafer-8x8.textproto");
  const Experiment a = Exp(chip_file, 4, 2, 2, "a");
  const arch::Chip chip = ValidateExperiment(a);
  ProgramCache cache(4);
  std::vector<std::shared_ptr<const ProgramCache::Entry>> got(4);
  std::vector<std::thread> threads;
  const std::unique_ptr<Engine> engine = MakeEngine("analytical");
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] { got[t] = cache.Get(a, chip, engine.get()); });
  }
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, got[0]);
  ASSERT_NE(dynamic_cast<const AnalyticalPlan*>(got[0]->prepared.get()), nullptr);
  EXPECT_EQ(got[0]->prepared_by, "analytical");
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.hits(), 3u);
}

// RunSummary (cached, plan reused across chips) gives field for field the summary
// RunExperiment gives, point after point, including when the cache hits.
TEST_F(ProgramCacheTest, RunSummaryMatchesRunExperiment) {
  const std::string chip = Src("configs/chips/mesh-4x4-hbm.textproto");
  ProgramCache cache(4);
  for (double bw : {64.0, 160.0, 16.0}) {
    for (double hbm : {400.0, 50.0}) {
      Experiment e = Exp(chip, 4, 2, 2, "p");
      e.cfg.mutable_chip()->mutable_noc()->set_link_bandwidth_gbps(bw);
      e.cfg.mutable_chip()->mutable_memory(0)->set_bandwidth_gbps(hbm);
      const config::Summary want = RunExperiment(e, {}).result.summary();
      const config::Summary got = RunSummary(e, "analytical", &cache);
      EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString()) << bw << " " << hbm;
      EXPECT_EQ(RunSummary(e, "analytical", nullptr).SerializeAsString(), want.SerializeAsString());
    }
  }
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.hits(), 5u);
}

// A plan made on one chip, reused on a chip with other timing fields, gives what a
// fresh AnalyticalEngine::Run on that chip gives; a plan for another layout is refused.
TEST_F(ProgramCacheTest, PlanReusedOnAnotherChipTimesLikeAFreshRun) {
  const Experiment slow = Exp(Src("configs/chips/wafer-8x8.textproto"), 4, 2, 2, "slow");
  Experiment fast = slow;
  fast.cfg.mutable_chip()->mutable_noc()->set_link_bandwidth_gbps(37);
  fast.cfg.mutable_chip()->mutable_memory(0)->set_latency_ns(7);
  fast.cfg.mutable_chip()->set_clock_mhz(1234);
  const arch::Chip chip_slow = ValidateExperiment(slow), chip_fast = ValidateExperiment(fast);
  const mapping::Program p =
      mapping::Lower(chip_slow, slow.cfg.model(), slow.cfg.workload(), slow.cfg.mapping());
  const auto plan = PlanAnalytical(p, chip_slow);
  const EngineOutput want = AnalyticalEngine().Run(p, chip_fast);
  const EngineOutput got = RunAnalytical(p, *plan, chip_fast);
  ASSERT_EQ(got.tasks.size(), want.tasks.size());
  for (size_t i = 0; i < want.tasks.size(); ++i) {
    ASSERT_EQ(got.tasks[i].start_ps, want.tasks[i].start_ps) << i;
    ASSERT_EQ(got.tasks[i].end_ps, want.tasks[i].end_ps) << i;
  }
  EXPECT_EQ(got.makespan_ps, want.makespan_ps);
  EXPECT_NE(want.makespan_ps, AnalyticalEngine().Run(p, chip_slow).makespan_ps);  // the chips do differ
  const config::Result full = BuildResult(p, chip_fast, want, "x", "analytical");
  EXPECT_EQ(ResultToJson(full), ResultToJson(BuildResult(p, chip_fast, got, "x", "analytical")));
  EXPECT_EQ(BuildSummary(p, chip_fast, got).SerializeAsString(), full.summary().SerializeAsString());

  const Experiment other = Exp(Src("configs/chips/mesh-4x4-hbm.textproto"), 4, 2, 2, "other");
  EXPECT_THROW(RunAnalytical(p, *plan, ValidateExperiment(other)), std::invalid_argument);
}

// (b) A sweep through the cached in-process runner stores, point for point, the
// metrics of the same sweep run through RunExperiment without any cache.
TEST_F(ProgramCacheTest, CachedSweepStoresTheMetricsOfAnUncachedOne) {
  const std::string base =
      Write("base.textproto", "chip_file: \"" + Src("configs/chips/wafer-8x8.textproto") +
                                  "\"\nmodel_file: \"" + Src("configs/models/qwen3-4b.json") +
                                  "\"\nworkload { batch: 1 seq_len: 64 decode_steps: 2 "
                                  "num_layers: 4 dtype: \"bf16\" }\nmapping { tp: 4 "
                                  "pipeline_stages: 4 partition: \"k_split\" placement: "
                                  "\"linear\" collective: \"ring\" }\n");
  const std::string sweep_file = Write("s.textproto", "name: \"s\"\nbase: \"" + base + R"("
axis { field: "workload.seq_len" values: ["64", "192"] }
axis { field: "mapping.partition" values: ["k_split", "megatron"] }
axis { field: "chip.memory[0].bandwidth_gbps" values: ["20", "60"] }
axis { field: "chip.noc.link_bandwidth_gbps" values: ["16", "160"] }
)");
  const sweep::SweepSpec spec = sweep::LoadSweep(sweep_file);
  sweep::SweepOptions opts;
  opts.jobs = 2;
  opts.handle_signals = false;
  std::ostringstream log;
  opts.log = &log;
  opts.db = (dir_ / "cached.sqlite").string();
  sweep::RunSweep(spec, opts, sweep::InProcessRunner("analytical"));
  opts.db = (dir_ / "uncached.sqlite").string();
  sweep::PointRunner uncached = [](const Experiment& e, const sweep::Point&) {
    const config::Summary s = RunExperiment(e, {}).result.summary();
    return sweep::PointOutcome{
        "ok",
        {static_cast<double>(s.total_ps()), static_cast<double>(s.prefill_ps()),
         static_cast<double>(s.decode_step_ps_mean()), static_cast<double>(s.compute_ps()),
         static_cast<double>(s.communication_ps()), static_cast<double>(s.memory_ps()), s.core_utilization(),
         static_cast<double>(s.spilled_bytes())},
        ""};
  };
  sweep::RunSweep(spec, opts, uncached);
  auto rows = [&](const std::string& db_name) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2((dir_ / db_name).c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    const char* sql =
        "SELECT config_hash, status, total_ps, prefill_ps, decode_step_ps_mean, compute_ps, "
        "communication_ps, "
        "memory_ps, quote(core_utilization), spilled_bytes FROM points ORDER BY config_hash";
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    std::string out;
    while (st && sqlite3_step(st) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const unsigned char* t = sqlite3_column_text(st, i);
        out += (t ? reinterpret_cast<const char*>(t) : "NULL") +
               std::string(i + 1 < sqlite3_column_count(st) ? "|" : "\n");
      }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  };
  const std::string cached = rows("cached.sqlite");
  EXPECT_EQ(std::count(cached.begin(), cached.end(), '\n'), 16);
  EXPECT_EQ(cached.find("NULL"), std::string::npos) << cached;
  EXPECT_EQ(cached, rows("uncached.sqlite"));
}

}  // namespace
}  // namespace tpsim::sim
