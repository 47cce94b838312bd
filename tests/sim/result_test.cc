// BuildResult / ResultToJson / ResultTable on small hand-built Programs timed
// by the analytical engine, on the 8x8 test mesh of analytical_test.cc
// (one hop 2000 ps, 160 B/ns links, GEMM 256x640x2560 = 307,200,000 ps).
#include "sim/result.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "sim/analytical/analytical.h"
#include "tests/arch/test_util.h"
#include "tests/mapping/program_test_util.h"
#include "tests/sim/test_mesh.h"

namespace tpsim::sim {
namespace {

using Program = mapping::testing::TestProgram;  // hand-built; a mapping::Program where one is needed
using Task = mapping::testing::TestTask;
using mapping::TaskKind;

using test::Mesh;
using test::MeshConfig;

Task MakeTask(const Program& p, TaskKind kind, int core, uint32_t op, std::vector<uint32_t> deps) {
  Task t;
  t.id = mapping::TaskId(static_cast<uint32_t>(p.tasks.size()));
  t.kind = kind;
  t.core = mapping::CoreId(core);
  t.op = mapping::OpId(op);
  t.deps = std::vector<mapping::TaskId>(deps.begin(), deps.end());
  return t;
}

void Gemm(Program& p, int core, uint32_t op, std::vector<uint32_t> deps) {
  Task t = MakeTask(p, TaskKind::kCompute, core, op, std::move(deps));
  t.m = 256;
  t.n = 640;
  t.k = 2560;
  t.flops = 2.0 * 256 * 640 * 2560;
  t.bytes = 1000;
  p.tasks.push_back(t);
}

void Send(Program& p, int src, int dst, uint64_t bytes, uint32_t op, std::vector<uint32_t> deps) {
  Task t = MakeTask(p, TaskKind::kTransfer, src, op, std::move(deps));
  t.dst_core = mapping::CoreId(dst);
  t.bytes = bytes;
  p.tasks.push_back(t);
}

void Read(Program& p, int core, uint64_t bytes, uint32_t op, std::vector<uint32_t> deps) {
  Task t = MakeTask(p, TaskKind::kMemory, core, op, std::move(deps));
  t.channel = 0;
  t.bytes = bytes;
  p.tasks.push_back(t);
}

// Prefill layer 0: a DRAM read on core 0 (1,050,000 ps), then GEMMs on cores 0 and
// 1 (307,200,000 ps each), then core 1 sends 160,000 B to core 0 (1,002,000 ps).
// Decode steps 0 and 1 of layer 0: one GEMM on core 0 each, after the previous.
//
//   t0 read   core0  op0  [0, 1,050,000]
//   t1 gemm   core0  op1  [1,050,000, 308,250,000]
//   t2 gemm   core1  op1  [1,050,000, 308,250,000]
//   t3 send   1->0   op2  [308,250,000, 309,252,000]
//   t4 gemm   core0  op3  [309,252,000, 616,452,000]     decode step 0
//   t5 gemm   core0  op4  [616,452,000, 923,652,000]     decode step 1
Program LayerProgram() {
  Program p;
  p.num_cores = 64;
  p.num_channels = 1;
  p.weights_location = mapping::WeightsLocation::kSram;
  p.kv_location = mapping::KvLocation::kDram;
  p.spilled_bytes = 123;
  p.ops = {
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "w_load", "k_split"}, 0, 80'000, 0},
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "q_proj", "k_split"},
                      4 * 256.0 * 640 * 2560, 2000, 7},
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "q_proj.allreduce", "k_split"}, 0,
                      160'000, 0},
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kDecode, 0, 0, "q_proj", "k_split"},
                      2 * 256.0 * 640 * 2560, 1000, 0},
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kDecode, 1, 0, "q_proj", "k_split"},
                      2 * 256.0 * 640 * 2560, 1000, 0},
  };
  Read(p, 0, 80'000, 0, {});
  Gemm(p, 0, 1, {0});
  Gemm(p, 1, 1, {0});
  Send(p, 1, 0, 160'000, 2, {2});
  Gemm(p, 0, 3, {1, 3});
  Gemm(p, 0, 4, {4});
  return p;
}

config::Result Build(const Program& p, bool with_tasks = true) {
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  return BuildResult(p, Mesh(), out, "unit", "analytical", with_tasks);
}

TEST(BuildResult, SummaryByHand) {
  config::Result r = Build(LayerProgram());
  const auto& s = r.summary();
  EXPECT_EQ(r.experiment(), "unit");
  EXPECT_EQ(r.engine(), "analytical");
  EXPECT_EQ(s.total_ps(), 923'652'000);
  EXPECT_EQ(s.prefill_ps(), 309'252'000);               // t0 start 0 .. t3 end
  EXPECT_EQ(s.decode_ps(), 923'652'000 - 309'252'000);  // t4 start .. t5 end
  EXPECT_EQ(s.decode_step_ps_mean(), 307'200'000);      // (307,200,000 + 307,200,000) / 2
  // Critical path backwards: t5 <- t4 <- t3 (latest dep; t1 ended earlier) <- t2 <- t0.
  EXPECT_EQ(s.compute_ps(), 3 * 307'200'000);
  EXPECT_EQ(s.communication_ps(), 1'002'000);
  EXPECT_EQ(s.memory_ps(), 1'050'000);
  EXPECT_EQ(s.compute_ps() + s.communication_ps() + s.memory_ps(), s.total_ps());
  // Busy compute: core 0 has 3 GEMMs, core 1 one; 62 idle cores.
  const double util = (3.0 * 307'200'000 + 307'200'000) / 923'652'000.0 / 64;
  EXPECT_DOUBLE_EQ(s.core_utilization(), util);
  EXPECT_GE(s.core_utilization(), 0.0);
  EXPECT_LE(s.core_utilization(), 1.0);
  // 4 GEMMs of 2*256*640*2560 flop over 923,652,000 ps (flop/ps = TFLOP/s).
  EXPECT_DOUBLE_EQ(s.achieved_tflops(), 4 * 2.0 * 256 * 640 * 2560 / 923'652'000.0);
  EXPECT_EQ(s.spilled_bytes(), 123u);
  EXPECT_EQ(s.weights_location(), "sram");
  EXPECT_EQ(s.kv_location(), "dram");
}

TEST(BuildResult, PerOpAndPerLayer) {
  config::Result r = Build(LayerProgram());
  ASSERT_EQ(r.ops_size(), 5);
  const auto& load = r.ops(0);
  EXPECT_EQ(load.op(), "w_load");
  EXPECT_EQ(load.memory_ps(), 1'050'000);
  EXPECT_EQ(load.total_ps(), 1'050'000);
  const auto& q = r.ops(1);
  EXPECT_EQ(q.phase(), "prefill");
  EXPECT_EQ(q.partition(), "k_split");
  EXPECT_EQ(q.compute_ps(), 307'200'000);  // slowest rank, not the sum over ranks
  EXPECT_EQ(q.communication_ps(), 0);
  EXPECT_EQ(q.start_ps(), 1'050'000);
  EXPECT_EQ(q.total_ps(), 307'200'000);
  EXPECT_EQ(q.spilled_bytes(), 7u);
  EXPECT_DOUBLE_EQ(q.flops(), 4 * 256.0 * 640 * 2560);
  const auto& ar = r.ops(2);
  EXPECT_EQ(ar.communication_ps(), 1'002'000);
  EXPECT_EQ(ar.start_ps(), 308'250'000);
  // Per-op totals of the prefill layer add up to its span (the ops are sequential).
  ASSERT_EQ(r.layers_size(), 2);
  EXPECT_EQ(r.layers(0).phase(), "prefill");
  EXPECT_EQ(r.layers(0).total_ps(), r.ops(0).total_ps() + r.ops(1).total_ps() + r.ops(2).total_ps());
  EXPECT_EQ(r.layers(0).total_ps(), r.summary().prefill_ps());
  // Decode layer 0: sum over its two steps.
  EXPECT_EQ(r.layers(1).phase(), "decode");
  EXPECT_EQ(r.layers(1).total_ps(), 2 * 307'200'000);
}

TEST(BuildResult, PrefetchDoesNotStretchDecode) {
  // Prefill: GEMM on core 0 [0, 307,200,000]. Decode step 0: a weight read on
  // core 1 issued with no deps [0, 1,052,000] (a prefetch: 1,050,000 at the channel
  // attached at r0c0 plus one 2,000 ps hop to core 1), then a GEMM on core 0
  // after both [307,200,000, 614,400,000]. Phases are delimited by ends:
  //   prefill = 307,200,000 - 0; decode = 614,400,000 - 307,200,000 = 307,200,000.
  Program p;
  p.num_cores = 64;
  p.num_channels = 1;
  p.ops = {
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "q_proj", "k_split"}, 0, 0, 0},
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kDecode, 0, 0, "q_proj", "k_split"}, 0, 0, 0},
  };
  Gemm(p, 0, 0, {});
  Read(p, 1, 80'000, 1, {});
  Gemm(p, 0, 1, {0, 1});
  config::Result r = Build(p);
  EXPECT_EQ(r.summary().total_ps(), 614'400'000);
  EXPECT_EQ(r.summary().prefill_ps(), 307'200'000);
  EXPECT_EQ(r.summary().decode_ps(), 307'200'000);
  EXPECT_EQ(r.summary().decode_step_ps_mean(), 307'200'000);
  ASSERT_EQ(r.layers_size(), 2);
  EXPECT_EQ(r.layers(0).total_ps(), 307'200'000);
  EXPECT_EQ(r.layers(1).total_ps(), 307'200'000);
  // The decode op's own span does include its prefetch: [0, 614,400,000].
  EXPECT_EQ(r.ops(1).total_ps(), 614'400'000);
  EXPECT_EQ(r.ops(1).memory_ps(), 1'052'000);
  // Critical path: GEMM t2 <- GEMM t0 (its deps end at 307,200,000 and 1,052,000).
  EXPECT_EQ(r.summary().compute_ps(), 614'400'000);
  EXPECT_EQ(r.summary().memory_ps(), 0);
}

TEST(BuildResult, LayersOfAPhaseAddUpToIt) {
  // Prefill layers 0 and 1 one after the other on core 0, then on core 1 after a
  // one-hop transfer of 160,000 B (1,002,000 ps):
  //   layer 0: GEMM [0, 307,200,000]                      -> 307,200,000
  //   layer 1: send [307,200,000, 308,202,000], GEMM on core 1 until 615,402,000
  //            -> 615,402,000 - 307,200,000 = 308,202,000
  Program p;
  p.num_cores = 64;
  p.num_channels = 1;
  p.ops = {
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "q_proj", "k_split"}, 0, 0, 0},
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 1, "stage_send", "k_split"}, 0, 0, 0},
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 1, "q_proj", "k_split"}, 0, 0, 0},
  };
  Gemm(p, 0, 0, {});
  Send(p, 0, 1, 160'000, 1, {0});
  Gemm(p, 1, 2, {1});
  config::Result r = Build(p);
  ASSERT_EQ(r.layers_size(), 2);
  EXPECT_EQ(r.layers(0).total_ps(), 307'200'000);
  EXPECT_EQ(r.layers(1).total_ps(), 308'202'000);
  EXPECT_EQ(r.layers(0).total_ps() + r.layers(1).total_ps(), r.summary().prefill_ps());
  EXPECT_EQ(r.summary().decode_ps(), 0);
  EXPECT_EQ(r.summary().compute_ps() + r.summary().communication_ps(), r.summary().total_ps());
}

TEST(BuildResult, LinksDramCoresAndTasks) {
  config::Result r = Build(LayerProgram(), /*with_tasks=*/true);
  ASSERT_EQ(r.links_size(), 1);
  EXPECT_EQ(r.links(0).name(), "r0c1->r0c0");
  EXPECT_EQ(r.links(0).bytes(), 160'000u);
  EXPECT_EQ(r.links(0).busy_ps(), 1'000'000);
  EXPECT_DOUBLE_EQ(r.links(0).utilization(), 1'000'000 / 923'652'000.0);
  ASSERT_EQ(r.dram_size(), 1);
  EXPECT_EQ(r.dram(0).name(), "dram0");
  EXPECT_EQ(r.dram(0).busy_ps(), 1'000'000);
  ASSERT_EQ(r.cores_size(), 64);
  EXPECT_EQ(r.cores(0).compute_ps(), 3 * 307'200'000);
  // Core 0 runs t0 (read), t1, t4, t5: the union [0, 308,250,000] + [309,252,000, 923,652,000].
  EXPECT_EQ(r.cores(0).busy_ps(), 308'250'000 + 614'400'000);
  // Core 1 runs t2 and sends t3: [1,050,000, 309,252,000].
  EXPECT_EQ(r.cores(1).busy_ps(), 308'202'000);
  for (const auto& c : r.cores()) {
    EXPECT_GE(c.utilization(), 0.0);
    EXPECT_LE(c.utilization(), 1.0);
  }
  ASSERT_EQ(r.tasks_size(), 6);
  EXPECT_EQ(r.tasks(5).end_ps(), 923'652'000);
  EXPECT_EQ(r.tasks(3).kind(), "transfer");
  EXPECT_EQ(r.tasks(3).core(), 1u);
  EXPECT_EQ(r.tasks(3).dst_core(), 0);
  EXPECT_EQ(r.tasks(3).op(), "q_proj.allreduce");
  EXPECT_EQ(r.tasks(3).phase(), "prefill");
  EXPECT_EQ(r.tasks(5).kind(), "compute");
  EXPECT_EQ(r.tasks(5).dst_core(), -1);
  EXPECT_EQ(r.tasks(5).phase(), "decode");
  EXPECT_EQ(Build(LayerProgram(), /*with_tasks=*/false).tasks_size(), 0);
}

// On a GPU node a collective kernel runs on its GPU but is communication: the critical path
// and the op rows count it so, and so do the cores' compute time and the core utilization
// (they counted it as compute: TP 8 x 1 stage of Qwen3-4B on h200-sxm-8 printed a core
// utilization of 1.0 with 35% of the time in all-reduces).
TEST(BuildResult, GpuCollectiveKernelsAreNotCoreCompute) {
  const arch::Chip h200 = arch::testing::LoadChip("h200-sxm-8");
  Program p;
  p.num_cores = h200.num_cores();
  p.num_channels = static_cast<int>(h200.channels().size());
  p.ops = {
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "o_proj", "megatron"}, 0, 0, 0},
      mapping::OpInfo{mapping::OpRef{mapping::Phase::kPrefill, 0, 0, "o_proj.all_reduce", "nccl"}, 0, 0, 0}};
  Gemm(p, 0, 0, {});
  Task c = MakeTask(p, TaskKind::kCompute, 0, 1, {0});
  c.op_kind = llm::OpKind::kCollective;
  c.m = static_cast<uint64_t>(mapping::CollectiveKind::kAllReduce);
  c.n = 8;
  c.bytes = 1 << 20;
  p.tasks.push_back(c);
  const EngineOutput out = AnalyticalEngine().Run(p, h200);
  const config::Result r = BuildResult(p, h200, out, "unit", "analytical", false);
  const Ps gemm = out.tasks[0].end_ps - out.tasks[0].start_ps,
           kernel = out.tasks[1].end_ps - out.tasks[1].start_ps;
  ASSERT_GT(gemm, 0);
  ASSERT_GT(kernel, 0);
  EXPECT_EQ(r.cores(0).compute_ps(), gemm);
  EXPECT_EQ(r.cores(0).busy_ps(), gemm + kernel);
  EXPECT_DOUBLE_EQ(r.cores(0).utilization(), static_cast<double>(gemm) / (gemm + kernel));
  EXPECT_DOUBLE_EQ(r.summary().core_utilization(),
                   static_cast<double>(gemm) / (gemm + kernel) / h200.num_cores());
  EXPECT_EQ(r.summary().communication_ps(), kernel);
  EXPECT_EQ(r.summary().compute_ps(), gemm);
}

TEST(BuildResult, MismatchedOutputThrows) {
  Program p = LayerProgram();
  EngineOutput out = AnalyticalEngine().Run(p, Mesh());
  out.tasks.pop_back();
  EXPECT_THROW(BuildResult(p, Mesh(), out, "x", "analytical"), std::invalid_argument);
  p.tasks[0].op = mapping::OpId(99);
  EXPECT_THROW(BuildResult(p, Mesh(), AnalyticalEngine().Run(p, Mesh()), "x", "analytical"),
               std::invalid_argument);
}

TEST(ResultToJson, SnakeCaseNamesAndInt64Numbers) {
  config::Result r = Build(LayerProgram(), true);
  const std::string text = ResultToJson(r);
  const auto j = nlohmann::json::parse(text);
  ASSERT_TRUE(j.contains("summary"));
  ASSERT_TRUE(j["summary"]["total_ps"].is_number_integer());
  EXPECT_EQ(j["summary"]["total_ps"].get<int64_t>(), 923'652'000);
  EXPECT_TRUE(j["summary"]["decode_step_ps_mean"].is_number_integer());
  EXPECT_TRUE(j["summary"]["spilled_bytes"].is_number_unsigned());
  EXPECT_TRUE(j["summary"]["core_utilization"].is_number_float());
  EXPECT_EQ(j["ops"][1]["compute_ps"].get<int64_t>(), 307'200'000);
  EXPECT_EQ(j["tasks"][5]["end_ps"].get<int64_t>(), 923'652'000);
  EXPECT_EQ(j["links"][0]["name"], "r0c1->r0c0");
  EXPECT_EQ(text.find("totalPs"), std::string::npos);
  EXPECT_EQ(text.find("\"923652000\""), std::string::npos);  // never a quoted integer
  // Fields in declaration order, defaults included.
  EXPECT_LT(text.find("\"experiment\""), text.find("\"engine\""));
  EXPECT_LT(text.find("\"engine\""), text.find("\"summary\""));
  EXPECT_LT(text.find("\"summary\""), text.find("\"ops\""));
  EXPECT_TRUE(j.contains("config"));
  EXPECT_EQ(j["ops"][0]["measured"], false);
}

TEST(ResultToJson, LargeInt64Exact) {
  config::Result r;
  r.mutable_summary()->set_total_ps(9'007'199'254'740'993);  // 2^53 + 1: not a double
  r.mutable_summary()->set_spilled_bytes(18'446'744'073'709'551'615ull);
  const auto j = nlohmann::json::parse(ResultToJson(r));
  EXPECT_EQ(j["summary"]["total_ps"].get<int64_t>(), 9'007'199'254'740'993);
  EXPECT_EQ(j["summary"]["spilled_bytes"].get<uint64_t>(), 18'446'744'073'709'551'615ull);
}

TEST(ResultToJson, DeterministicAcrossRuns) {
  const std::string a = ResultToJson(Build(LayerProgram(), true));
  const std::string b = ResultToJson(Build(LayerProgram(), true));
  EXPECT_EQ(a, b);
  EXPECT_EQ(ResultTable(Build(LayerProgram())), ResultTable(Build(LayerProgram())));
}

// ResultToJson writes the JSON without building it as an object first; the layout is
// nlohmann's dump(2) of the same object, which parsing the text and dumping it again shows
// (empty lists and messages, nested messages, a string that is not UTF-8 included).
// WriteResultJson hands the same bytes over in pieces: a Result past 1 MiB of JSON comes in
// more than one.
TEST(ResultToJson, LaidOutAsTheParsedObjectDumpsAndWrittenInPieces) {
  config::Result r = Build(LayerProgram(), true);
  r.set_title(std::string("bad \xff byte, \"quoted\", tab\t"));
  r.clear_layers();      // an empty list: "[]"
  config::Result small;  // every message field default: "{}" where a message has no field set
  for (const config::Result& x : {r, small}) {
    const std::string text = ResultToJson(x);
    ASSERT_EQ(text.back(), '\n');
    EXPECT_EQ(text, nlohmann::ordered_json::parse(text, nullptr, true, true)
                            .dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
                        "\n");
  }
  EXPECT_NE(ResultToJson(r).find("\"layers\": []"), std::string::npos);
  // Past 1 MiB: the same tasks many times over.
  const config::Result one = r;
  for (int i = 0; i < 2000; ++i) r.mutable_tasks()->MergeFrom(one.tasks());
  ASSERT_GT(ResultToJson(r).size(), 2u << 20);
  std::string pieces;
  int count = 0;
  WriteResultJson(r, [&](std::string_view piece) {
    pieces += piece;
    ++count;
  });
  const std::string whole = ResultToJson(r);
  EXPECT_GT(count, 1);
  EXPECT_TRUE(pieces == whole);
  EXPECT_TRUE(whole == nlohmann::ordered_json::parse(whole, nullptr, true, true)
                               .dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
                           "\n");
}

TEST(ResultTable, ShowsOpsLayersAndSummary) {
  const std::string t = ResultTable(Build(LayerProgram()));
  EXPECT_NE(t.find("q_proj.allreduce"), std::string::npos) << t;
  EXPECT_NE(t.find("307.200"), std::string::npos) << t;  // q_proj compute in µs
  EXPECT_NE(t.find("923.652"), std::string::npos) << t;  // total in µs
  EXPECT_NE(t.find("summary"), std::string::npos) << t;
  // Decode q_proj of layer 0 is one row summed over its 2 steps: 614.400 µs.
  EXPECT_NE(t.find("614.400"), std::string::npos) << t;
}

}  // namespace
}  // namespace tpsim::sim
