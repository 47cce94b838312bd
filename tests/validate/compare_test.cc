// tpsim compare on hand-made result JSONs, and its plot rendered headless.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "validate/collective_sweep.h"
#include "validate/compare.h"

namespace tpsim::validate {
namespace {

std::string TempPath(const std::string& name) { return TPSIM_BINARY_DIR "/tpsim_validate_" + name; }

std::string Write(const std::string& name, const std::string& text) {
  std::string p = TempPath(name);
  std::ofstream(p) << text;
  return p;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// An op whose kernel time is `kernel_ps`, split as compute 1/2, communication 1/4, memory 1/4
// (an odd remainder in compute), and whose span (total_ps) adds `waiting_ps` of waiting.
std::string Op(const std::string& phase, int layer, const std::string& op, long long kernel_ps, bool measured,
               long long waiting_ps = 0) {
  const long long comm = kernel_ps / 4, mem = kernel_ps / 4, comp = kernel_ps - comm - mem;
  std::ostringstream os;
  os << R"({"phase": ")" << phase << R"(", "layer": )" << layer << R"(, "op": ")" << op
     << R"(", "compute_ps": )" << comp << R"(, "communication_ps": )" << comm << R"(, "memory_ps": )" << mem
     << R"(, "total_ps": )" << kernel_ps + waiting_ps << R"(, "measured": )" << (measured ? "true" : "false")
     << "}";
  return os.str();
}

std::string ResultJson(const std::string& engine, long long total, const std::vector<std::string>& ops) {
  std::string s = R"({"experiment": "hand", "engine": ")" + engine + R"(", "summary": {"total_ps": )" +
                  std::to_string(total) + R"(}, "ops": [)";
  for (size_t i = 0; i < ops.size(); ++i) s += (i ? ", " : "") + ops[i];
  return s + "]}\n";
}

// Two all_reduce rows over 8 ranks: 8 KiB measured at 40 us (predicted 30, ring forced 60,
// nvls forced 20) and 1 MiB unmeasured (predicted 50, ring 50, no nvls time).
std::vector<CollectiveSweepRow> HandSweep() {
  CollectiveSweepRow a;
  a.kind = "all_reduce";
  a.ranks = 8;
  a.bytes = 8192;
  a.measured = true;
  a.time_us = 40;
  a.algbw_gbps = 8192 / 40e-6 / 1e9;        // 0.2048
  a.busbw_gbps = a.algbw_gbps * 2 * 7 / 8;  // 0.3584
  a.predicted_algorithm = "nvls";
  a.predicted_us = 30;
  a.predicted_algbw_gbps = 8192 / 30e-6 / 1e9;
  a.predicted_busbw_gbps = a.predicted_algbw_gbps * 2 * 7 / 8;
  a.predicted_ring_us = 60;
  a.predicted_nvls_us = 20;
  CollectiveSweepRow b = a;
  b.bytes = 1 << 20;
  b.measured = false;
  b.time_us = b.algbw_gbps = b.busbw_gbps = 0;
  b.predicted_algorithm = "ring";
  b.predicted_us = 50;
  b.predicted_algbw_gbps = (1 << 20) / 50e-6 / 1e9;
  b.predicted_busbw_gbps = b.predicted_algbw_gbps * 2 * 7 / 8;
  b.predicted_ring_us = 50;
  b.predicted_nvls_us.reset();
  return {a, b};
}

TEST(CollectiveSweep, UnmeasuredColumnsPrintADash) {
  const auto rows = HandSweep();
  EXPECT_EQ(
      CollectiveSweepLine(rows[0]),
      "all_reduce          8         8192        40.00       0.20       0.36  nvls        30.00       0.27"
      "       0.48        60.00        20.00\n");
  EXPECT_EQ(
      CollectiveSweepLine(rows[1]),
      "all_reduce          8      1048576            -          -          -  ring        50.00      20.97"
      "      36.70        50.00            -\n");
  // busbw error of the measured row: (0.4779 - 0.3584) / 0.3584 = +33.3 % (= 40 / 30 - 1).
  EXPECT_EQ(CollectiveSweepSummary(rows),
            "all_reduce, 8 ranks: 2 sizes, 1 measured, busbw MAPE 33.33 %, worst +33.3 % at 8192 B\n");
  CollectiveSweepRow c = rows[1];
  c.ranks = 4;
  EXPECT_EQ(CollectiveSweepSummary({c}), "all_reduce, 4 ranks: 1 sizes, none measured (predictions only)\n");
}

TEST(CollectiveSweep, JsonRoundTripAndErrors) {
  const auto rows = HandSweep();
  const std::string text = CollectiveSweepJson(rows);
  ASSERT_TRUE(IsCollectiveSweepJson(text));
  const auto back = ParseCollectiveSweepJson(text, "s.json");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(CollectiveSweepLine(back[0]), CollectiveSweepLine(rows[0]));
  EXPECT_EQ(CollectiveSweepLine(back[1]), CollectiveSweepLine(rows[1]));
  EXPECT_FALSE(back[1].predicted_nvls_us.has_value());
  EXPECT_FALSE(IsCollectiveSweepJson(R"({"ops": []})"));
  EXPECT_FALSE(IsCollectiveSweepJson("not json"));
  try {
    ParseCollectiveSweepJson(R"([{"kind": "all_reduce", "ranks": 8, "bytes": 8192, "measured": 1}])",
                             "s.json");
    FAIL() << "accepted a non-boolean measured";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "s.json: rows[0].measured: not true or false");
  }
}

// The series the busbw plot receives: tpsim's choice as the line, ring and nvls forced as
// busbw scaled by predicted_us / forced time, measured dots only where measured.
TEST(CollectiveSweep, PlotDataSeries) {
  const auto rows = HandSweep();
  const nlohmann::json d = nlohmann::json::parse(CollectiveSweepPlotData(rows, "t"));
  EXPECT_EQ(d["kind"], "collective");
  ASSERT_EQ(d["tables"].size(), 1u);
  const auto& t = d["tables"][0];
  EXPECT_EQ(t["name"], "all_reduce, 8 ranks");
  EXPECT_EQ(t["x"], nlohmann::json({8192, 1 << 20}));
  EXPECT_EQ(t["measured_x"], nlohmann::json({8192}));
  EXPECT_DOUBLE_EQ(t["measured_rate"][0].get<double>(), 0.3584);
  EXPECT_DOUBLE_EQ(t["predicted_rate"][1].get<double>(), rows[1].predicted_busbw_gbps);
  ASSERT_EQ(t["extra"].size(), 2u);
  EXPECT_EQ(t["extra"][0]["label"], "predicted, ring forced");
  // ring at 8 KiB: 30 / 60 of the choice's busbw; at 1 MiB the choice is ring.
  EXPECT_DOUBLE_EQ(t["extra"][0]["rate"][0].get<double>(), rows[0].predicted_busbw_gbps * 0.5);
  EXPECT_DOUBLE_EQ(t["extra"][0]["rate"][1].get<double>(), rows[1].predicted_busbw_gbps);
  EXPECT_EQ(t["extra"][1]["x"], nlohmann::json({8192}));  // nvls only where predicted
  EXPECT_DOUBLE_EQ(t["extra"][1]["rate"][0].get<double>(), rows[0].predicted_busbw_gbps * 1.5);
}

// predicted: a 1 us, b 3 us, c 2 us; measured: a 1.25 us, b 2 us, c 2 us.
// errors: a (1 - 1.25) / 1.25 = -20 %, b (3 - 2) / 2 = +50 %, c 0 %.
// MAPE = (20 + 50 + 0) / 3 = 23.333... %; worst op b.
Comparison HandComparison() {
  config::Result p = LoadResultJson(Write(
      "pred.json", ResultJson("analytical", 6000000,
                              {Op("prefill", 0, "a", 1000000, false), Op("prefill", 0, "b", 3000000, false),
                               Op("prefill", 0, "c", 2000000, false)})));
  config::Result m = LoadResultJson(Write(
      "meas.json", ResultJson("gpu", 5000000,
                              {Op("prefill", 0, "a", 1250000, true), Op("prefill", 0, "b", 2000000, true),
                               Op("prefill", 0, "c", 2000000, true)})));
  return CompareResults(p, m);
}

TEST(Compare, MapeAndWorstOpByHand) {
  Comparison c = HandComparison();
  ASSERT_EQ(c.rows.size(), 3u);
  EXPECT_DOUBLE_EQ(c.rows[0].error_pct, -20.0);
  EXPECT_DOUBLE_EQ(c.rows[1].error_pct, 50.0);
  EXPECT_DOUBLE_EQ(c.rows[2].error_pct, 0.0);
  EXPECT_NEAR(c.mape_pct, 70.0 / 3, 1e-12);
  ASSERT_EQ(c.worst, 1);
  EXPECT_EQ(c.rows[1].label, "prefill L0 b");
  EXPECT_DOUBLE_EQ(c.predicted_total_us, 6.0);
  EXPECT_DOUBLE_EQ(c.measured_total_us, 5.0);
  std::string table = ComparisonTable(c);
  EXPECT_NE(table.find("MAPE: 23.33 %"), std::string::npos) << table;
  EXPECT_NE(table.find("worst op: prefill L0 b (50.0 %)"), std::string::npos) << table;
  // (6 - 5) / 5 = +20 %: every op with predicted time was measured, so the totals compare.
  EXPECT_EQ(c.unmeasured_with_time, 0u);
  EXPECT_NE(table.find("total: predicted 6.000 us, measured 5.000 us (20.0 %)"), std::string::npos) << table;
}

// Like with like: an op's kernel time (compute + communication + memory), not its span, which
// adds the time it waited for its inputs (a GPU's measured op has no such waiting).
TEST(Compare, KernelTimeNotSpan) {
  config::Result p = LoadResultJson(
      Write("predw.json", ResultJson("analytical", 0, {Op("prefill", 0, "a", 2000000, false, 7000000)})));
  config::Result m =
      LoadResultJson(Write("measw.json", ResultJson("gpu", 0, {Op("prefill", 0, "a", 2500000, true)})));
  Comparison c = CompareResults(p, m);
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(c.rows[0].predicted_us, 2.0);  // not 9 us
  EXPECT_DOUBLE_EQ(c.rows[0].error_pct, -20.0);
  EXPECT_NE(ComparisonTable(c).find("kernel time"), std::string::npos);
}

TEST(Compare, RepeatsMatchByOccurrenceAndUnmeasuredAreSkipped) {
  // decode L0 x twice: predicted 1, 2 us; measured 2, 4 us -> -50 % each. "y" unmeasured on
  // the GPU; "z" only predicted.
  config::Result p = LoadResultJson(
      Write("pred2.json",
            ResultJson("analytical", 0,
                       {Op("decode", 0, "x", 1000000, false), Op("decode", 0, "x", 2000000, false),
                        Op("decode", 0, "y", 1000000, false), Op("decode", 0, "z", 1000000, false)})));
  config::Result m = LoadResultJson(Write(
      "meas2.json", ResultJson("gpu", 0,
                               {Op("decode", 0, "x", 2000000, true), Op("decode", 0, "x", 4000000, true),
                                Op("decode", 0, "y", 5000000, false)})));
  Comparison c = CompareResults(p, m);
  ASSERT_EQ(c.rows.size(), 3u);
  EXPECT_EQ(c.rows[1].label, "decode L0 x #2");
  EXPECT_DOUBLE_EQ(c.rows[1].error_pct, -50.0);
  EXPECT_FALSE(c.rows[2].compared);
  EXPECT_EQ(c.compared, 2u);
  EXPECT_EQ(c.unmeasured, 1u);
  EXPECT_EQ(c.only_predicted, 1u);
  EXPECT_DOUBLE_EQ(c.mape_pct, 50.0);
  // "y" has 1 us predicted and is unmeasured: the measured total lacks it, so no total error.
  EXPECT_EQ(c.unmeasured_with_time, 1u);
  const std::string table = ComparisonTable(c);
  EXPECT_NE(table.find("(not compared: the measured total lacks 1 unmeasured ops the prediction times)"),
            std::string::npos)
      << table;
  // The same file as "measured" by a simulator (engine not gpu) compares every op.
  config::Result sim = m;
  sim.set_engine("analytical");
  EXPECT_EQ(CompareResults(p, sim).compared, 3u);
}

TEST(Compare, CommandExitCodes) {
  std::string p = Write("pred3.json", ResultJson("analytical", 1, {Op("prefill", 0, "a", 1000000, false)}));
  EXPECT_EQ(CompareCommand({p, p}), 0);
  EXPECT_EQ(CompareCommand({p}), 2);
  EXPECT_EQ(CompareCommand({p, TempPath("does-not-exist.json")}), 2);
  EXPECT_EQ(CompareCommand({p, Write("bad.json", "{\"ops\": [ {\"nope\": 1} ]}")}), 2);
  EXPECT_EQ(CompareCommand({p, Write("trunc.json", "{\"ops\": [")}), 2);
  EXPECT_EQ(CompareCommand({p, p, "--frobnicate"}), 2);
  EXPECT_EQ(CompareCommand({p, p, "--plot"}), 2);
}

// Two results of different experiments were compared op by op without a word (reference-qwen3-4b
// against mesh-4x4-hbm-qwen3-0.6b: a MAPE of 1011.84 %); what differs is named, and the command
// warns (exit 0). Results without a config (hand-made, older files) say nothing.
TEST(Compare, ResultsOfDifferentExperimentsAreNamed) {
  config::Result a, b;
  a.set_config(
      "model { name: \"qwen3-4b\" } chip { name: \"wafer-8x8\" } workload { batch: 1 seq_len: 256 "
      "decode_steps: 20 num_layers: 16 dtype: \"bf16\" } mapping { tp: 4 pipeline_stages: 16 }");
  b = a;
  EXPECT_EQ(ExperimentsDiffer(a, b), "");
  b.set_config(
      "model { name: \"qwen3-0.6b\" } chip { name: \"wafer-8x8\" } workload { batch: 1 seq_len: 256 "
      "decode_steps: 20 dtype: \"bf16\" } mapping { tp: 4 pipeline_stages: 4 }");
  EXPECT_EQ(
      ExperimentsDiffer(a, b),
      "model qwen3-4b vs qwen3-0.6b, workload batch 1 x seq_len 256 + 20 decode steps, 16 layers, bf16 vs "
      "batch 1 x seq_len 256 + 20 decode steps, all layers, bf16, mapping TP 4 x 16 stages vs TP 4 x 4 "
      "stages");
  config::Result none = b;
  none.clear_config();
  EXPECT_EQ(ExperimentsDiffer(a, none), "");
  // The command: a warning on stderr, the table as before.
  nlohmann::json ja =
      nlohmann::json::parse(ResultJson("analytical", 1, {Op("prefill", 0, "a", 1000000, false)}));
  ja["config"] = a.config();
  nlohmann::json jb = ja;
  jb["config"] = b.config();
  const std::string pa = Write("exp_a.json", ja.dump()), pb = Write("exp_b.json", jb.dump());
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  EXPECT_EQ(CompareCommand({pa, pb}), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "tpsim compare: warning: " + pa + " and " + pb + " are results of different experiments (" +
                     ExperimentsDiffer(a, b) + "): their ops are compared by name, not like with like\n");
  EXPECT_NE(out.find("MAPE"), std::string::npos) << out;
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  EXPECT_EQ(CompareCommand({pa, pa}), 0);
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// A result without ops compares nothing: it printed "no op was compared" and exited 0 as if a
// comparison had been made. Now exit 2 naming the file and the field, either side.
TEST(Compare, ResultWithoutOpsExitsTwoNamingTheFile) {
  const std::string p =
      Write("pred4.json", ResultJson("analytical", 2000000, {Op("prefill", 0, "a", 1000000, false)}));
  const std::string noops =
      Write("noops.json", R"({"experiment": "hand", "engine": "gpu", "summary": {"total_ps": 1000000}})"
                          "\n");
  const std::string empty = Write("emptyops.json", ResultJson("gpu", 1000000, {}));
  using Case = std::tuple<std::string, std::string, std::string>;  // predicted, measured, named
  for (const auto& [pred, meas, named] :
       {Case{p, noops, noops}, Case{p, empty, empty}, Case{noops, p, noops}}) {
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    const int rc = CompareCommand({pred, meas});
    const std::string out = testing::internal::GetCapturedStdout();
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(err.find(named + ": no ops (field `ops` missing or empty)"), std::string::npos) << err;
    EXPECT_EQ(out, "");
  }
}

// A measured result with ops but no summary still compares its ops; its total is not measured
// (it printed "measured 0.000 us"), and no total error is computed.
TEST(Compare, ResultWithoutSummaryHasNoTotal) {
  const std::string p =
      Write("pred5.json", ResultJson("analytical", 2000000, {Op("prefill", 0, "a", 1000000, false)}));
  const std::string m = Write("nosummary.json", R"({"experiment": "hand", "engine": "gpu", "ops": [)" +
                                                    Op("prefill", 0, "a", 800000, true) + "]}\n");
  const Comparison c = CompareResults(LoadResultJson(p), LoadResultJson(m));
  EXPECT_EQ(c.compared, 1u);
  EXPECT_DOUBLE_EQ(c.rows[0].error_pct, 25.0);  // (1 - 0.8) / 0.8
  EXPECT_TRUE(c.predicted_total_known);
  EXPECT_FALSE(c.measured_total_known);
  const std::string table = ComparisonTable(c);
  EXPECT_NE(table.find("total: predicted 2.000 us, not measured (the measured file has no "
                       "summary)\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("0.000 us"), std::string::npos) << table;
  // The other way round: the predicted side has no total.
  const std::string t2 = ComparisonTable(CompareResults(LoadResultJson(m), LoadResultJson(p)));
  EXPECT_NE(t2.find("total: not predicted (the predicted file has no summary), measured "
                    "2.000 us\n"),
            std::string::npos)
      << t2;
  testing::internal::CaptureStdout();
  EXPECT_EQ(CompareCommand({p, m}), 0);
  testing::internal::GetCapturedStdout();
}

// The command's exit status and stderr (stdout dropped).
int RunCompare(const std::vector<std::string>& args, std::string* err, std::string* out = nullptr) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int rc = CompareCommand(args);
  const std::string o = testing::internal::GetCapturedStdout();
  if (out) *out = o;
  *err = testing::internal::GetCapturedStderr();
  return rc;
}

// The error LoadResultJson throws for a file of `text`, or "no error".
std::string LoadError(const std::string& name, const std::string& text) {
  try {
    LoadResultJson(Write(name, text));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

// One op per line, so that errors' lines can be counted: line 1 the summary, line 2 + i ops[i].
std::string Lines(const std::string& summary, const std::vector<std::string>& ops,
                  const std::string& engine = "analytical") {
  std::string s = R"({"engine": ")" + engine + R"(", "summary": )" + summary + R"(, "ops": [)" + "\n";
  for (size_t i = 0; i < ops.size(); ++i) s += ops[i] + (i + 1 < ops.size() ? ",\n" : "\n");
  return s + "]}\n";
}

// A key given twice in one object kept its last value, silently ("total_ps": <real>, "total_ps":
// 5000000 printed a measured 5.000 us, 567971.1 % off; "ops": [], "ops": [...] read the second).
// Refused at the second key's line and column with the first's line; compute_ps and computePs
// are one field to protobuf, so they are one key here too.
TEST(Compare, KeysGivenTwiceAreRefusedWhereWritten) {
  const std::string op = Op("prefill", 0, "a", 1000000, false);
  const std::string p = Write("dup_ok.json", Lines(R"({"total_ps": 1})", {op}));
  const std::string twice =
      Write("dup_total.json", Lines("{\"total_ps\": 1,\n \"total_ps\": 5000000}", {op}));
  std::string err;
  EXPECT_EQ(RunCompare({p, twice}, &err), 2);
  EXPECT_EQ(err, "tpsim compare: " + twice +
                     ":2:3: summary.total_ps: : given twice in one object (first on line 1): a JSON parser "
                     "keeps the last, silently; give it once\n");
  const std::string ops_twice = Write(
      "dup_ops.json", std::string(R"({"engine": "gpu", "ops": [],)") + "\n" + R"("ops": [)" + op + "]}\n");
  EXPECT_EQ(RunCompare({p, ops_twice}, &err), 2);
  EXPECT_NE(err.find(ops_twice + ":2:2: ops: : given twice in one object (first on line 1)"),
            std::string::npos)
      << err;
  std::string camel = op;
  camel.insert(camel.size() - 1, R"(, "computePs": 5)");
  EXPECT_NE(LoadError("dup_camel.json", Lines(R"({"total_ps": 1})", {op, camel}))
                .find(":3:" + std::to_string(camel.find("computePs") + 1) +
                      ": ops[1].compute_ps: : given twice in one object (first on line 3)"),
            std::string::npos);
}

// A null element of ops was skipped, a null compute_ps and an absent one read as 0 ("worst op:
// prefill L0 k_proj (786.2 %)"). tpsim writes every field, 0 included, and null only for a number
// that is not finite: null values (but a double's) and elements, and absent fields compare reads
// are refused at the op.
TEST(Compare, NullAndMissingFieldsAreRefusedAtTheOp) {
  const std::string op = Op("prefill", 0, "a", 1000000, true), s = R"({"total_ps": 1})";
  EXPECT_EQ(LoadError("null_el.json", Lines(s, {op, "null"})),
            TempPath("null_el.json") +
                ":3:1: ops[1]: null: a list's element cannot be null (it would be skipped, not read)");
  std::string null_compute = op;
  null_compute.replace(null_compute.find("\"compute_ps\": 500000"), 20, "\"compute_ps\": null");
  EXPECT_EQ(LoadError("null_ps.json", Lines(s, {null_compute})),
            TempPath("null_ps.json") + ":2:" + std::to_string(null_compute.find("null") + 1) +
                ": ops[0].compute_ps: null: not a value of this field (int64): tpsim writes every field's "
                "value, 0 included");
  std::string no_compute = op;
  no_compute.erase(no_compute.find("\"compute_ps\": 500000, "), 22);
  EXPECT_EQ(LoadError("no_ps.json", Lines(s, {op, no_compute})),
            TempPath("no_ps.json") +
                ":3:1: ops[1].compute_ps: : missing: compare matches ops by phase, layer and op and compares "
                "compute_ps + communication_ps + memory_ps; tpsim writes every field, 0 included (an absent "
                "one is not read as 0)");
  EXPECT_NE(LoadError("no_total.json", Lines("{}", {op})).find(":1:27: summary.total_ps: : missing"),
            std::string::npos);
  // `measured` is read of a GPU result only.
  std::string no_measured = op;
  no_measured.erase(no_measured.find(", \"measured\": true"), 18);
  EXPECT_EQ(LoadError("no_meas.json", Lines(s, {no_measured})), "no error");
  EXPECT_NE(
      LoadError("no_meas_gpu.json", Lines(s, {no_measured}, "gpu")).find(":2:1: ops[0].measured: : missing"),
      std::string::npos);
  // A double tpsim could not write as a number (NaN) is null in its file: still read.
  std::string flops_null = op;
  flops_null.insert(flops_null.size() - 1, R"(, "flops": null)");
  EXPECT_EQ(LoadError("flops_null.json", Lines(s, {flops_null})), "no error");
  // The command: exit 2 with the message.
  std::string err;
  const std::string p = Write("null_p.json", Lines(s, {op}));
  EXPECT_EQ(RunCompare({p, TempPath("no_ps.json")}, &err), 2);
  EXPECT_NE(err.find("ops[1].compute_ps: : missing"), std::string::npos) << err;
}

// An unknown phase ("bogus") and an empty op name were matched and compared as any other.
TEST(Compare, PhaseAndOpNameAreChecked) {
  const std::string s = R"({"total_ps": 1})";
  const std::string bogus = Op("bogus", 0, "a", 1000000, false);
  EXPECT_EQ(
      LoadError("phase.json", Lines(s, {Op("decode", 0, "a", 1, false), bogus})),
      TempPath("phase.json") +
          ":3:3: ops[1].phase: \"bogus\": not a phase tpsim writes (prefill, decode, mixed, kv_transfer)");
  const std::string unnamed = Op("prefill", 3, "", 1000000, false);
  EXPECT_EQ(LoadError("noname.json", Lines(s, {unnamed})),
            TempPath("noname.json") + ":2:" + std::to_string(unnamed.find("\"op\"") + 2) +
                ": ops[0].op: \"\": empty: an op is named (ops are matched by phase, layer and op)");
  for (const std::string phase : {"prefill", "decode", "mixed", "kv_transfer"})
    EXPECT_EQ(LoadError("phase_ok.json", Lines(s, {Op(phase, 0, "a", 4, false)})), "no error") << phase;
}

// compute_ps and memory_ps at 2^63-1 each summed past int64 and printed 18446744073709.551 us.
TEST(Compare, KernelTimeBeyondTheClockIsRefused) {
  const std::string max = "9223372036854775807";
  const std::string op = R"({"phase": "prefill", "layer": 0, "op": "a", "compute_ps": )" + max +
                         R"(, "communication_ps": 0, "memory_ps": )" + max + "}";
  EXPECT_EQ(LoadError("sum.json", Lines(R"({"total_ps": 1})", {op})),
            TempPath("sum.json") + ":2:1: ops[0].compute_ps + communication_ps + memory_ps: " + max +
                " + 0 + " + max +
                ": the op's kernel time, beyond 2^63-1 ps (about 106 days), the longest time tpsim's clock "
                "holds");
  // One of them at 2^63-1 is a time the clock holds.
  const std::string one = R"({"phase": "prefill", "layer": 0, "op": "a", "compute_ps": )" + max +
                          R"(, "communication_ps": 0, "memory_ps": 0})";
  EXPECT_EQ(LoadError("sum_ok.json", Lines(R"({"total_ps": 1})", {one})), "no error");
}

// A config that is not text format printed protobuf's own "[libprotobuf ERROR ...
// text_format.cc:337] ..." on stderr, then compared (exit 0). Now one plain warning at the key;
// the comparison does not need the config (exit 0).
TEST(Compare, UnreadableConfigIsOneWarningWithoutProtobufsLog) {
  nlohmann::json j =
      nlohmann::json::parse(ResultJson("analytical", 1, {Op("prefill", 0, "a", 1000000, false)}));
  j["config"] = "model { name: \"qwen3-4b\" } %%% garbage";
  const std::string bad = Write("cfgbad.json", j.dump());
  j["config"] = "model { name: \"qwen3-4b\" }";
  const std::string good = Write("cfggood.json", j.dump());
  std::string err;
  EXPECT_EQ(RunCompare({good, bad}, &err), 0);
  EXPECT_EQ(err.find("libprotobuf"), std::string::npos) << err;
  EXPECT_EQ(err,
            "tpsim compare: warning: " + bad + ":1:" + std::to_string(j.dump().find("\"config\"") + 2) +
                ": config: model { name: \"qwen3-4b\" } %%% garbage: cannot be read as an experiment (line "
                "1 column 28: Expected identifier, got: %): whether the two results ran the same experiment "
                "is not checked\n");
}

// Two results with ops of which none compared (unmatched, or all unmeasured) exited 0 with "MAPE:
// n/a", where results without ops exit 2: exit 2 saying why, after the table.
TEST(Compare, NothingComparedExitsTwo) {
  const std::string p =
      Write("none_p.json", ResultJson("analytical", 1, {Op("prefill", 0, "a", 1000000, false)}));
  const std::string other =
      Write("none_other.json", ResultJson("gpu", 1, {Op("prefill", 0, "b", 1000000, true)}));
  const std::string unmeasured =
      Write("none_unmeasured.json", ResultJson("gpu", 1, {Op("prefill", 0, "a", 1000000, false)}));
  std::string err, out;
  EXPECT_EQ(RunCompare({p, other}, &err, &out), 2);
  EXPECT_EQ(err,
            "tpsim compare: " + p + " and " + other +
                ": no op was compared (no op of one is in the other: they match by phase, layer and op)\n");
  EXPECT_NE(out.find("MAPE: n/a"), std::string::npos) << out;
  EXPECT_EQ(RunCompare({p, unmeasured}, &err), 2);
  EXPECT_EQ(err, "tpsim compare: " + p + " and " + unmeasured +
                     ": no op was compared (1 ops matched, each unmeasured or measured as 0)\n");
}

// Any argument ending in .csv switched to the CSV comparison, --plot's value too: `a.json b.json
// --plot x.csv` printed the CSV usage. The files decide; the picture's name is then refused as such.
TEST(Compare, FlagValuesDoNotChooseTheForm) {
  const std::string p =
      Write("route.json", ResultJson("analytical", 1, {Op("prefill", 0, "a", 1000000, false)}));
  std::string err;
  EXPECT_EQ(RunCompare({p, p, "--plot", TempPath("x.csv")}, &err), 2);
  EXPECT_EQ(err, "tpsim compare: --plot " + TempPath("x.csv") +
                     ": .csv: not a picture format; name a .png, .svg or .pdf file\n");
}

// ---- PNG checks: signature, size from IHDR, and pixels (zlib + PNG filters undone).
struct Png {
  uint32_t width = 0, height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
};

uint32_t Be32(const std::string& s, size_t i) {
  return (uint32_t(uint8_t(s[i])) << 24) | (uint32_t(uint8_t(s[i + 1])) << 16) |
         (uint32_t(uint8_t(s[i + 2])) << 8) | uint32_t(uint8_t(s[i + 3]));
}

bool DecodePng(const std::string& path, Png* png, std::string* why) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string sig = "\x89PNG\r\n\x1a\n";
  if (s.size() < 33 || s.compare(0, 8, sig) != 0 || s.compare(12, 4, "IHDR") != 0)
    return *why = "no PNG signature", false;
  png->width = Be32(s, 16), png->height = Be32(s, 20);
  int depth = uint8_t(s[24]), color = uint8_t(s[25]), interlace = uint8_t(s[28]);
  png->channels = color == 6 ? 4 : color == 2 ? 3 : 0;
  if (depth != 8 || png->channels == 0 || interlace != 0) return *why = "unexpected PNG format", false;
  std::string idat;
  for (size_t i = 8; i + 8 <= s.size();) {
    uint32_t len = Be32(s, i);
    std::string type = s.substr(i + 4, 4);
    if (type == "IDAT") idat += s.substr(i + 8, len);
    i += 12 + len;
  }
  const size_t stride = size_t{png->width} * png->channels;
  std::vector<uint8_t> raw((stride + 1) * png->height);
  uLongf n = raw.size();
  if (uncompress(raw.data(), &n, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK ||
      n != raw.size())
    return *why = "IDAT does not inflate to height x (1 + stride)", false;
  png->pixels.assign(stride * png->height, 0);
  const int bpp = png->channels;
  for (uint32_t y = 0; y < png->height; ++y) {
    uint8_t f = raw[y * (stride + 1)];
    const uint8_t* src = &raw[y * (stride + 1) + 1];
    uint8_t* cur = &png->pixels[y * stride];
    const uint8_t* up = y ? &png->pixels[(y - 1) * stride] : nullptr;
    for (size_t x = 0; x < stride; ++x) {
      int a = x >= size_t(bpp) ? cur[x - bpp] : 0, b = up ? up[x] : 0,
          c = (up && x >= size_t(bpp)) ? up[x - bpp] : 0;
      int pred = 0;
      switch (f) {
        case 0:
          pred = 0;
          break;
        case 1:
          pred = a;
          break;
        case 2:
          pred = b;
          break;
        case 3:
          pred = (a + b) / 2;
          break;
        case 4: {
          int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          pred = (pa <= pb && pa <= pc) ? a : pb <= pc ? b : c;
          break;
        }
        default:
          return *why = "bad filter type", false;
      }
      cur[x] = static_cast<uint8_t>(src[x] + pred);
    }
  }
  return true;
}

TEST(ComparePlot, RendersHeadlessPngOfExpectedSizeThatIsNotBlank) {
  ASSERT_FALSE(FindPlotPython().empty())
      << "needs python3 with matplotlib (apt-get install -y python3-matplotlib)";
  setenv("TPSIM_PLOT_SCRIPT", (std::string(TPSIM_SOURCE_DIR) + "/validate/plot_compare.py").c_str(), 1);
  const std::string png_path = TempPath("plot.png");
  std::remove(png_path.c_str());
  std::string err;
  ASSERT_TRUE(PlotComparison(HandComparison(), png_path, &err)) << err;
  Png png;
  std::string why;
  ASSERT_TRUE(DecodePng(png_path, &png, &why)) << why;
  // plot_compare.py: 14 x 6 inches at 100 dpi.
  EXPECT_EQ(png.width, 1400u);
  EXPECT_EQ(png.height, 600u);
  size_t ink = 0;
  const size_t n = size_t{png.width} * png.height;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = &png.pixels[i * png.channels];
    ink += (p[0] < 200 || p[1] < 200 || p[2] < 200);
  }
  // Axes, labels, points and bars: well over 1 % of the pixels are not near-white.
  EXPECT_GT(ink, n / 100) << ink << " of " << n;
  EXPECT_LT(ink, n / 2) << "mostly dark: not a plot";
  std::ifstream left(png_path + ".data.json");
  EXPECT_FALSE(left.good()) << "temporary data file left behind";
}

TEST(ComparePlot, CollectiveSweepBusbwOverSize) {
  ASSERT_FALSE(FindPlotPython().empty())
      << "needs python3 with matplotlib (apt-get install -y python3-matplotlib)";
  setenv("TPSIM_PLOT_SCRIPT", (std::string(TPSIM_SOURCE_DIR) + "/validate/plot_compare.py").c_str(), 1);
  const std::string sweep = Write("sweep.json", CollectiveSweepJson(HandSweep()));
  const std::string png_path = TempPath("busbw.png");
  std::remove(png_path.c_str());
  testing::internal::CaptureStdout();
  EXPECT_EQ(CompareCommand({sweep, "--plot", png_path}), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("      1048576            -          -          -  ring"), std::string::npos) << out;
  EXPECT_NE(out.find("busbw MAPE 33.33 %"), std::string::npos) << out;
  Png png;
  std::string why;
  ASSERT_TRUE(DecodePng(png_path, &png, &why)) << why;
  // plot_gpu.py, one panel: 4 x 3.8 inches at 100 dpi.
  EXPECT_EQ(png.width, 400u);
  EXPECT_EQ(png.height, 380u);
  // A broken sweep file: exit 2.
  const std::string bad =
      Write("badsweep.json", R"([{"kind": "all_reduce", "bytes": 1, "predicted_us": 1}])");
  testing::internal::CaptureStderr();
  EXPECT_EQ(CompareCommand({bad}), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("rows[0]: no field ranks"), std::string::npos) << err;
}

// --plot names a picture: another extension, or a name that is an input, is exit 2 before any
// work (`--plot out.json` drew, then printed the script's traceback, exit 1; `--plot PRED.json`
// would have replaced the input). A picture that cannot be written is exit 1 with one line
// naming the flag and the file (`--plot-dir nodir` named the script's temporary data file,
// `nodir/x.png.data.json`); .svg and .pdf are drawn, the same bytes each run.
TEST(ComparePlot, BadNamesExitTwoAndWriteErrorsSayOneLine) {
  ASSERT_FALSE(FindPlotPython().empty())
      << "needs python3 with matplotlib (apt-get install -y python3-matplotlib)";
  setenv("TPSIM_PLOT_SCRIPT", (std::string(TPSIM_SOURCE_DIR) + "/validate/plot_compare.py").c_str(), 1);
  const std::string p =
      Write("plotpred.json", ResultJson("analytical", 1, {Op("prefill", 0, "a", 1000000, false)}));
  const std::string before = ReadAll(p);
  auto run = [](const std::vector<std::string>& args, std::string* err) {
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    const int rc = CompareCommand(args);
    testing::internal::GetCapturedStdout();
    *err = testing::internal::GetCapturedStderr();
    return rc;
  };
  std::string err;
  EXPECT_EQ(run({p, p, "--plot", TempPath("out.json")}, &err), 2);
  EXPECT_EQ(err, "tpsim compare: --plot " + TempPath("out.json") +
                     ": .json: not a picture format; name a .png, .svg or .pdf file\n");
  EXPECT_EQ(run({p, p, "--plot", p}, &err), 2);
  EXPECT_EQ(ReadAll(p), before);
  const std::string png_named = Write("plotpred.png", before);
  EXPECT_EQ(run({png_named, p, "--plot", png_named}, &err), 2);
  EXPECT_NE(err.find("--plot: " + png_named + ": names an input of this run"), std::string::npos) << err;
  EXPECT_EQ(ReadAll(png_named), before);
  EXPECT_EQ(run({p, p, "--plot", TempPath("nodir/x.png")}, &err), 1);
  EXPECT_EQ(err, "tpsim compare: --plot: cannot write " + TempPath("nodir/x.png") +
                     ": cannot create a temporary file in " + TempPath("nodir") +
                     " (No such file or directory)\n");
  for (const std::string ext : {"svg", "pdf"}) {
    const std::string a = TempPath("plot_a." + ext), b = TempPath("plot_b." + ext);
    ASSERT_EQ(run({p, p, "--plot", a}, &err), 0) << err;
    ASSERT_EQ(run({p, p, "--plot", b}, &err), 0) << err;
    EXPECT_TRUE(ReadAll(a) == ReadAll(b)) << ext;
  }
  // The sweep form goes through the same checks.
  const std::string sweep = Write("plotsweep.json", CollectiveSweepJson(HandSweep()));
  EXPECT_EQ(run({sweep, "--plot", TempPath("busbw.jpg")}, &err), 2);
  EXPECT_EQ(run({sweep, "--plot", TempPath("nodir/busbw.png")}, &err), 1);
  EXPECT_EQ(err, "tpsim compare: --plot: cannot write " + TempPath("nodir/busbw.png") +
                     ": cannot create a temporary file in " + TempPath("nodir") +
                     " (No such file or directory)\n");
}

}  // namespace
}  // namespace tpsim::validate
