// Sweeps: point expansion (cartesian x zip, filters), hashing, the SQLite store,
// resume, failures, shards, merge, CSV, and killing a running sweep.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "sim/experiment.h"
#include "sim/sweep/expr.h"
#include "sim/sweep/runner.h"
#include "sim/sweep/slurm.h"
#include "sim/sweep/spec.h"
#include "sim/sweep/store.h"
#include "sim/sweep/sweep.h"
#include "tests/sim/sqlite_test_util.h"
#include "tests/sim/sweep_test_util.h"
#include "tests/sim/temp_dir_test.h"

namespace tpsim::sweep {
namespace {

namespace fs = std::filesystem;
using test::Query;
using test::Scalar;

// A runner that records the points it ran and fakes their metrics.
struct Fake {
  std::mutex mu;
  std::vector<uint64_t> ran;
  std::function<PointOutcome(const Point&)> outcome = [](const Point& p) {
    return PointOutcome{"ok", {static_cast<double>(p.index + 1), 1, 2, 3, 4, 5, 0.5, 0}, ""};
  };
  PointRunner Runner() {
    return [this](const sim::Experiment&, const Point& p) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ran.push_back(p.index);
      }
      return outcome(p);
    };
  }
};

SweepOptions Opts(const std::string& db, int jobs = 2) {
  static std::ostringstream sink;
  SweepOptions o;
  o.db = db;
  o.jobs = jobs;
  o.log = &sink;
  o.handle_signals = false;
  return o;
}

// Rows of `sql` as strings ("NULL" for NULL).

// ---- expansion ----------------------------------------------------------------

TEST_F(SweepTest, CartesianTimesZipCountsAndOrder) {
  SweepSpec s = LoadSweep(SweepFile(R"(
axis { field: "chip.noc.link_bandwidth_gbps" values: ["64", "128", "256"] }
axis { field: "mapping.partition" values: ["k_split", "n_split"] }
zip {
  axis { field: "workload.seq_len" values: ["128", "256", "512", "1024"] }
  axis { field: "workload.batch" values: ["8", "4", "2", "1"] }
}
)"));
  // 3 bandwidths x 2 partitions x 4 zipped (seq_len, batch) pairs.
  ASSERT_EQ(PointCount(s), 3u * 2u * 4u);
  ASSERT_EQ(s.fields, (std::vector<std::string>{"chip.noc.link_bandwidth_gbps", "mapping.partition",
                                                "workload.seq_len", "workload.batch"}));
  auto values = [&](uint64_t i) {
    std::vector<std::string> v;
    for (const auto& o : PointAt(s, i).sets) v.push_back(o.value);
    return v;
  };
  EXPECT_EQ(values(0), (std::vector<std::string>{"64", "k_split", "128", "8"}));
  // The last dimension (the zip) varies fastest, its axes together.
  EXPECT_EQ(values(1), (std::vector<std::string>{"64", "k_split", "256", "4"}));
  // Index 4 = 0*8 + 1*4 + 0: the partition advances.
  EXPECT_EQ(values(4), (std::vector<std::string>{"64", "n_split", "128", "8"}));
  // Index 8*2 + 4*1 + 3 = 23: the last point.
  EXPECT_EQ(values(23), (std::vector<std::string>{"256", "n_split", "1024", "1"}));
  sim::Experiment e = MakeExperiment(s, PointAt(s, 23));
  EXPECT_EQ(e.cfg.chip().noc().link_bandwidth_gbps(), 256.0);
  EXPECT_EQ(e.cfg.workload().seq_len(), 1024u);
  EXPECT_EQ(e.cfg.workload().batch(), 1u);
  EXPECT_EQ(e.cfg.engine(), "analytical");
}

TEST_F(SweepTest, NoAxesIsOnePoint) {
  SweepSpec s = LoadSweep(SweepFile(""));
  EXPECT_EQ(PointCount(s), 1u);
  EXPECT_TRUE(PointAt(s, 0).sets.empty());
}

TEST_F(SweepTest, FilterKeepsExactlyTheMatchingPoints) {
  SweepSpec s = LoadSweep(SweepFile(R"(
axis { field: "mapping.tp" values: ["2", "3", "4", "8"] }
axis { field: "mapping.pipeline_stages" values: ["8", "16"] }
require: "mapping.tp * mapping.pipeline_stages <= 64"
require: "model.num_attention_heads % mapping.tp == 0"
)"));
  ASSERT_EQ(PointCount(s), 8u);
  std::vector<std::pair<uint32_t, uint32_t>> kept;
  for (uint64_t i = 0; i < PointCount(s); ++i) {
    sim::Experiment e = MakeExperiment(s, PointAt(s, i));
    if (PassesFilter(s, e)) kept.emplace_back(e.cfg.mapping().tp(), e.cfg.mapping().pipeline_stages());
  }
  // Qwen3-4B has 32 heads: tp 3 does not divide them. Products: 2x8=16, 2x16=32,
  // 4x8=32, 4x16=64, 8x8=64 pass; 8x16=128 does not.
  std::vector<std::pair<uint32_t, uint32_t>> want = {{2, 8}, {2, 16}, {4, 8}, {4, 16}, {8, 8}};
  EXPECT_EQ(kept, want);
}

TEST(SweepExpr, PrecedenceStringsAndErrors) {
  config::Experiment m;
  m.mutable_mapping()->set_tp(4);
  m.mutable_mapping()->set_partition("mn_2d");
  auto holds = [&](const std::string& s) { return Expr::Parse(s).Holds(m); };
  EXPECT_TRUE(holds("1 + 2 * 3 == 7"));
  EXPECT_TRUE(holds("(1 + 2) * 3 == 9"));
  EXPECT_TRUE(holds("-mapping.tp < 0 && !(mapping.tp > 4)"));
  EXPECT_TRUE(holds("mapping.partition == \"mn_2d\" || 1 / 0"));
  EXPECT_FALSE(holds("mapping.partition != \"mn_2d\""));
  EXPECT_FALSE(holds("1 / 0"));           // NaN is false
  EXPECT_FALSE(holds("mapping.tp % 0"));  // NaN is false
  EXPECT_TRUE(holds("10 % 4 == 2 && 7 >= 7 && 6 <= 5 == 0"));
  EXPECT_THROW(Expr::Parse("1 +"), std::invalid_argument);
  EXPECT_THROW(Expr::Parse("(1"), std::invalid_argument);
  // Bounded nesting and size: a located error, never a stack overflow (issue 16).
  auto message = [](const std::string& text) {
    try {
      Expr::Parse(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  EXPECT_EQ(message(std::string(5000, '(') + "1" + std::string(5000, ')')),
            "col 101: nested more than 100 levels deep (parentheses, - and !)");
  EXPECT_EQ(message(std::string(100000, '-') + "1"),
            "col 101: nested more than 100 levels deep (parentheses, - and !)");
  EXPECT_EQ(message(std::string(100000, '!') + "1"),
            "col 101: nested more than 100 levels deep (parentheses, - and !)");
  EXPECT_EQ(message(std::string(99, '(') + "1" + std::string(99, ')')), "parsed");
  std::string chain = "1";
  for (int i = 0; i < 600; ++i) chain += "+1";
  EXPECT_NE(message(chain).find("more than 1000 operands and operators"), std::string::npos);
  EXPECT_THROW(Expr::Parse("1 2"), std::invalid_argument);
  // Literals are decimal doubles: 1e999 was inf (1e999 - 1e999 a NaN that filtered every point
  // without a word) and 0x10 was 16.
  EXPECT_EQ(message("1e999 - 1e999 == 0"), "col 1: number 1e999 is out of the range of a double");
  EXPECT_EQ(message("mapping.tp > 2.5E+400"), "col 14: number 2.5E+400 is out of the range of a double");
  EXPECT_NE(message("0x10 == 16"), "parsed");
  EXPECT_TRUE(holds(".5 * 8 == mapping.tp && 1e3 == 1000"));
  EXPECT_THROW(holds("mapping.nope == 1"), std::invalid_argument);
  EXPECT_THROW(holds("mapping.partition < 3"), std::invalid_argument);
  EXPECT_EQ(Expr::Parse("mapping.tp * model.hidden_size > 0").Fields(),
            (std::vector<std::string>{"mapping.tp", "model.hidden_size"}));
}

// LoadSweep's errors on `path`, one per line, or "no error".
std::string LoadErrors(const std::string& path) {
  try {
    LoadSweep(path);
  } catch (const config::ConfigError& e) {
    std::string all;
    for (const auto& d : e.diags()) all += d.str() + "\n";
    return all;
  }
  return "no error";
}

TEST_F(SweepTest, BadSweepFilesAreConfigErrorsWithLocations) {
  auto rules = [&](const std::string& body) { return LoadErrors(SweepFile(body)); };
  std::string zip = rules(
      "zip {\n axis { field: \"workload.seq_len\" values: [\"1\", \"2\"] }\n"
      " axis { field: \"workload.batch\" values: [\"1\"] }\n}\n");
  EXPECT_NE(zip.find("same number of values"), std::string::npos) << zip;
  EXPECT_NE(zip.find("s.textproto:4:"), std::string::npos)
      << zip;  // the second axis, line 4 (base is line 1)
  EXPECT_NE(rules("axis { field: \"mapping.nope\" values: \"1\" }").find("unknown field"), std::string::npos);
  EXPECT_NE(rules("axis { field: \"mapping.tp\" values: [\"4\", \"four\"] }").find("integer"),
            std::string::npos);
  EXPECT_NE(
      rules("axis { field: \"mapping.tp\" values: \"4\" }\naxis { field: \"mapping.tp\" values: \"8\" }")
          .find("swept twice"),
      std::string::npos);
  EXPECT_NE(rules("require: \"mapping.tp <\"").find("require[0]"), std::string::npos);
  EXPECT_NE(rules("require: \"mapping.tpp > 1\"").find("unknown field"), std::string::npos);
  EXPECT_NE(rules("engine: \"warp\"").find("unknown engine"), std::string::npos);
  // The value as written (it was -1.000000).
  EXPECT_NE(rules("time_limit_s: -1").find("time_limit_s: -1: must be a non-negative"), std::string::npos);
  EXPECT_NE(rules("bogus: 1").find("bogus"), std::string::npos);
}

// ---- hashing --------------------------------------------------------------------

TEST(SweepHash, Fnv1a64KnownValues) {
  // FNV-1a 64: offset basis for "", and the published value for "a".
  EXPECT_EQ(HashText(""), "cbf29ce484222325");
  EXPECT_EQ(HashText("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(HashText("foobar"), "85944171f73967e8");
}

TEST_F(SweepTest, ConfigHashIsStableAndDistinguishesPoints) {
  std::string f = SweepFile("axis { field: \"workload.seq_len\" values: [\"128\", \"256\"] }\n");
  SweepSpec a = LoadSweep(f), b = LoadSweep(f);
  std::string h0 = ConfigHash(MakeExperiment(a, PointAt(a, 0)));
  EXPECT_EQ(h0, ConfigHash(MakeExperiment(b, PointAt(b, 0))));  // a separate load
  EXPECT_EQ(h0, HashText(sim::ResolvedText(MakeExperiment(a, PointAt(a, 0)))));
  EXPECT_NE(h0, ConfigHash(MakeExperiment(a, PointAt(a, 1))));
  EXPECT_EQ(h0.size(), 16u);
}

// ---- running, the store, resume -------------------------------------------------

const char* kSmall = R"(
axis { field: "chip.noc.link_bandwidth_gbps" values: ["64", "128", "256"] }
axis { field: "workload.seq_len" values: ["128", "256", "512", "1024"] }
)";

TEST_F(SweepTest, RunStoresEveryPointAndResumeRunsNothing) {
  SweepSpec s = LoadSweep(SweepFile(kSmall));
  Fake fake;
  SweepStats st = RunSweep(s, Opts(Db()), fake.Runner());
  EXPECT_EQ(st.points, 12u);
  EXPECT_EQ(st.ran, 12u);
  EXPECT_EQ(st.ok, 12u);
  EXPECT_EQ(fake.ran.size(), 12u);
  EXPECT_EQ(Scalar(Db(), "SELECT COUNT(*) FROM points WHERE status = 'ok'"), 12);
  EXPECT_EQ(Scalar(Db(), "SELECT COUNT(DISTINCT point_index) FROM points"), 12);
  // Swept fields are columns named by their path, numbers stored as numbers.
  auto row =
      Query(Db(),
            "SELECT \"chip.noc.link_bandwidth_gbps\", typeof(\"workload.seq_len\"), \"workload.seq_len\", "
            "total_ps, engine FROM points WHERE point_index = 5");
  ASSERT_EQ(row.size(), 1u);
  // Index 5 = 1*4 + 1: 128 GB/s, seq_len 256; the fake's total_ps is index + 1.
  EXPECT_EQ(row[0], (std::vector<std::string>{"128", "integer", "256", "6", "analytical"}));

  Fake again;
  SweepStats st2 = RunSweep(s, Opts(Db()), again.Runner());
  EXPECT_TRUE(again.ran.empty());
  EXPECT_EQ(st2.skipped, 12u);
  EXPECT_EQ(st2.ran, 0u);
  EXPECT_EQ(Scalar(Db(), "SELECT COUNT(*) FROM points"), 12);
}

TEST_F(SweepTest, FailingPointIsRecordedAndTheRestRun) {
  SweepSpec s = LoadSweep(SweepFile(kSmall));
  Fake fake;
  fake.outcome = [](const Point& p) {
    if (p.index == 3) return PointOutcome{"invalid", {}, "x.y:1:1: mapping.tp: 3: bad"};
    if (p.index == 7) throw std::runtime_error("boom");
    if (p.index == 9) return PointOutcome{"timeout", {}, "too slow"};
    return PointOutcome{"ok", {1, 1, 1, 1, 1, 1, 0.5, 0}, ""};
  };
  SweepStats st = RunSweep(s, Opts(Db()), fake.Runner());
  EXPECT_EQ(st.ok, 9u);
  EXPECT_EQ(st.failed, 3u);
  auto rows = Query(Db(),
                    "SELECT point_index, status, error, total_ps FROM points WHERE status != 'ok' "
                    "ORDER BY point_index");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"3", "invalid", "x.y:1:1: mapping.tp: 3: bad", "NULL"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"7", "error", "boom", "NULL"}));
  EXPECT_EQ(rows[2], (std::vector<std::string>{"9", "timeout", "too slow", "NULL"}));

  // A rerun retries only the timed-out point; --retry-failed also the others.
  Fake again;
  RunSweep(s, Opts(Db()), again.Runner());
  EXPECT_EQ(again.ran, (std::vector<uint64_t>{9}));
  EXPECT_EQ(Scalar(Db(), "SELECT COUNT(*) FROM points WHERE status = 'ok'"), 10);
  Fake retry;
  SweepOptions o = Opts(Db(), 1);
  o.retry_failed = true;
  RunSweep(s, o, retry.Runner());
  EXPECT_EQ(retry.ran, (std::vector<uint64_t>{3, 7}));
  EXPECT_EQ(Scalar(Db(), "SELECT COUNT(*) FROM points WHERE status = 'ok'"), 12);
  EXPECT_EQ(Scalar(Db(), "SELECT COUNT(*) FROM points"), 12);
}

TEST_F(SweepTest, FilteredPointsAreNotRunOrStored) {
  SweepSpec s = LoadSweep(SweepFile(std::string(kSmall) + "require: \"workload.seq_len >= 512\"\n"));
  Fake fake;
  SweepStats st = RunSweep(s, Opts(Db()), fake.Runner());
  EXPECT_EQ(st.filtered, 6u);  // 3 bandwidths x {128, 256}
  EXPECT_EQ(st.ran, 6u);
  EXPECT_EQ(Scalar(Db(), "SELECT MIN(\"workload.seq_len\") FROM points"), 512);
}

// A require that is not a number at a point (a division by zero) filters it, and the sweep says
// so naming the require; one that compares a string with a number is refused when the sweep is
// loaded, at the require (it was an invalid row per point, without the require's location).
TEST_F(SweepTest, RequiresThatCannotBeComputedAreNamed) {
  SweepSpec s = LoadSweep(SweepFile(std::string(kSmall) + "require: \"1 / (workload.seq_len - 256) > 0\"\n"));
  Fake fake;
  SweepStats st = RunSweep(s, Opts(Db()), fake.Runner());
  EXPECT_EQ(st.filtered, 6u);  // 3 bandwidths x {128 (negative), 256 (1/0)}
  ASSERT_EQ(st.undefined.size(), 1u);
  EXPECT_EQ(st.undefined.begin()->second, 3u);  // the three points at 256
  EXPECT_NE(st.undefined.begin()->first.find("s.textproto:5:1: require[0]"), std::string::npos)
      << st.undefined.begin()->first;
  EXPECT_NE(
      st.undefined.begin()->first.find("require[0] \"1 / (workload.seq_len - 256) > 0\" divides by zero"),
      std::string::npos)
      << st.undefined.begin()->first;
  try {
    LoadSweep(SweepFile(std::string(kSmall) + "require: \"mapping.partition > 3\"\n", "t.textproto"));
    FAIL() << "a string compared with a number was accepted";
  } catch (const config::ConfigError& e) {
    const std::string d = e.diags().at(0).str();
    EXPECT_NE(d.find("t.textproto:5:1: require[0]: mapping.partition > 3: operator > needs numbers"),
              std::string::npos)
        << d;
  }
}

// One field under two spellings of its index was two axes ([0] and [00]): the store's columns
// named values the points did not run. An engine axis ran every point on the sweep's engine.
TEST_F(SweepTest, AFieldSweptUnderTwoSpellingsOrTheEngineIsRefused) {
  auto rules = [&](const std::string& body) { return LoadErrors(SweepFile(body)); };
  const std::string twice = rules(
      "axis { field: \"chip.memory[0].latency_ns\" values: [\"1\", \"2\"] }\n"
      "axis { field: \"chip.memory[00].latency_ns\" values: [\"3\", \"4\"] }\n");
  EXPECT_NE(twice.find("chip.memory[00].latency_ns: 3: not a field path"), std::string::npos) << twice;
  // A base that is a chip file is named as one at the base (it said "base: : unknown field").
  try {
    LoadSweep(Write("c.textproto",
                    "base: \"" + std::string(TPSIM_SOURCE_DIR) + "/configs/chips/wafer-8x8.textproto\"\n"));
    ADD_FAILURE() << "a chip file as the base was accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(e.diags().at(0).str().find("c.textproto:1:1: base: "), std::string::npos)
        << e.diags().at(0).str();
    EXPECT_NE(e.diags().at(0).rule.find("is a chip config, not an experiment"), std::string::npos);
  }
  const std::string engine = rules("axis { field: \"engine\" values: [\"tlm\", \"analytical\"] }\n");
  EXPECT_NE(engine.find("s.textproto:2:"), std::string::npos) << engine;
  EXPECT_NE(engine.find("engine: tlm: the engine is not swept: it is the sweep's engine field"),
            std::string::npos)
      << engine;
}

// A child's config errors named the temporary copy of the point it read, deleted with it.
TEST(SweepRunner, ChildErrorsAreLocatedInTheSweepsFiles) {
  config::SourceMap locs("base.textproto");
  locs.Set("workload.requests.synthetic.rate_per_s", config::Location{"<sweep point 3: x=-1>", 1, 1});
  locs.Set("mapping.tp", config::Location{"base.textproto", 12, 3});
  const std::string text =
      "/tmp/d/point-3-1.textproto:62:7: workload.requests.synthetic.rate_per_s: -1: must be > 0\n"
      "/tmp/d/point-3-1.textproto:40:3: mapping.tp: 3: must divide\n"
      "tpsim: something else /tmp/d/point-3-1.textproto";
  EXPECT_EQ(RelocateChildDiags(text, "/tmp/d/point-3-1.textproto", locs),
            "<sweep point 3: x=-1>:1:1: workload.requests.synthetic.rate_per_s: -1: must be > 0\n"
            "base.textproto:12:3: mapping.tp: 3: must divide\n"
            "tpsim: something else /tmp/d/point-3-1.textproto");
}

TEST_F(SweepTest, StopMidwayKeepsFinishedPointsAndResumeCompletes) {
  SweepSpec s = LoadSweep(SweepFile(kSmall));
  Fake fake;
  std::atomic<int> calls{0};
  fake.outcome = [&](const Point&) {
    if (++calls == 5) RequestStop();
    return PointOutcome{"ok", {1, 1, 1, 1, 1, 1, 0.5, 0}, ""};
  };
  SweepStats st = RunSweep(s, Opts(Db(), 1), fake.Runner());
  EXPECT_TRUE(st.interrupted);
  EXPECT_EQ(st.ran, 5u);  // the point in flight finishes and is stored
  EXPECT_EQ(Scalar(Db(), "SELECT COUNT(*) FROM points"), 5);
  Fake rest;
  SweepStats st2 = RunSweep(s, Opts(Db()), rest.Runner());
  EXPECT_FALSE(st2.interrupted);
  EXPECT_EQ(rest.ran.size(), 7u);
  EXPECT_EQ(Scalar(Db(), "SELECT COUNT(DISTINCT point_index) FROM points"), 12);
}

// Editing a file a point reads (here a placement file) gives its points a new identity: they
// run again, and only they. Points that read no such file (placement "linear") keep the
// identity stores have always used, HashText of their resolved text, and do not rerun.
TEST_F(SweepTest, EditingAReferencedFileRerunsOnlyThePointsThatReadIt) {
  const std::string placement = Write("p.txt", "0 1 2 3\n");
  SweepSpec s = LoadSweep(SweepFile(R"(
axis { field: "mapping.placement" values: ["linear", "file"] }
axis { field: "mapping.placement_file" values: [")" +
                                    placement + R"("] }
axis { field: "workload.seq_len" values: ["128", "256"] }
)"));
  Fake first;
  EXPECT_EQ(RunSweep(s, Opts(Db()), first.Runner()).ran, 4u);
  for (uint64_t i : {0, 1}) {  // linear: the resolved text's hash, as before
    EXPECT_EQ(Query(Db(), "SELECT config_hash FROM points WHERE point_index = " + std::to_string(i))[0][0],
              ConfigHash(MakeExperiment(s, PointAt(s, i))))
        << i;
  }
  Fake unchanged;
  EXPECT_EQ(RunSweep(s, Opts(Db()), unchanged.Runner()).skipped, 4u);
  EXPECT_TRUE(unchanged.ran.empty());

  Write("p.txt", "3 2 1 0\n");
  Fake edited;
  SweepStats st = RunSweep(s, Opts(Db(), 1), edited.Runner());
  EXPECT_EQ(edited.ran, (std::vector<uint64_t>{2, 3}));  // the two "file" points
  EXPECT_EQ(st.skipped, 2u);
  Fake again;
  RunSweep(s, Opts(Db()), again.Runner());
  EXPECT_TRUE(again.ran.empty());
}

// A stored point found at another index of an edited sweep takes its new index: a value added
// at the front of an axis moved every stored point one index on (they kept the old ones, so two
// rows shared an index). Two indices of one config keep the first.
TEST_F(SweepTest, StoredPointsTakeTheirIndexInTheEditedSweep) {
  const std::string db = Db();
  SweepSpec before = LoadSweep(SweepFile(R"(
axis { field: "workload.seq_len" values: ["128", "256", "128"] }
axis { field: "workload.decode_steps" values: ["1", "2"] }
)"));
  Fake fake;
  SweepStats st = RunSweep(before, Opts(db), fake.Runner());
  EXPECT_EQ(st.ran, 4u);
  EXPECT_EQ(st.duplicates, 2u);
  SweepSpec after = LoadSweep(SweepFile(R"(
axis { field: "workload.seq_len" values: ["64", "128", "256", "128"] }
axis { field: "workload.decode_steps" values: ["1", "2"] }
)"));
  Fake added;
  st = RunSweep(after, Opts(db, 1), added.Runner());
  EXPECT_EQ(added.ran, (std::vector<uint64_t>{0, 1}));  // seq_len 64
  EXPECT_EQ(st.skipped, 4u);
  auto rows = Query(db,
                    "SELECT point_index, \"workload.seq_len\", \"workload.decode_steps\" FROM points "
                    "ORDER BY point_index");
  ASSERT_EQ(rows.size(), 6u);
  const std::vector<std::vector<std::string>> want = {{"0", "64", "1"},  {"1", "64", "2"},
                                                      {"2", "128", "1"}, {"3", "128", "2"},
                                                      {"4", "256", "1"}, {"5", "256", "2"}};
  EXPECT_EQ(rows, want);
  // Back to the first file: the first index of each config again.
  Fake none;
  RunSweep(before, Opts(db), none.Runner());
  EXPECT_TRUE(none.ran.empty());
  EXPECT_EQ(Query(db, "SELECT point_index FROM points WHERE \"workload.seq_len\" = 256 ORDER BY 1"),
            (std::vector<std::vector<std::string>>{{"2"}, {"3"}}));
  EXPECT_EQ(Query(db, "SELECT point_index FROM points WHERE \"workload.seq_len\" = 128 ORDER BY 1"),
            (std::vector<std::vector<std::string>>{{"0"}, {"1"}}));
}

// An axis added to a sweep: the points stored by the sweep before it (which ran with the base's
// value, decode_steps 20 in the reference experiment) are reused, and their rows take the new
// axis's value; they kept NULL in its column, which plots and --where then dropped.
TEST_F(SweepTest, ReusedPointsTakeTheValueOfAnAddedAxis) {
  const std::string db = Db();
  SweepSpec before = LoadSweep(SweepFile(R"(
axis { field: "workload.seq_len" values: ["128", "256"] }
)"));
  Fake fake;
  EXPECT_EQ(RunSweep(before, Opts(db), fake.Runner()).ran, 2u);
  SweepSpec after = LoadSweep(SweepFile(R"(
axis { field: "workload.seq_len" values: ["128", "256"] }
axis { field: "workload.decode_steps" values: ["20", "4"] }
)"));
  Fake added;
  SweepStats st = RunSweep(after, Opts(db, 1), added.Runner());
  // Index = 2 x seq_len's + decode_steps': the decode_steps 4 points (1, 3) run, 0 and 2 are
  // the stored ones.
  EXPECT_EQ(added.ran, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(st.skipped, 2u);
  const std::vector<std::vector<std::string>> want = {
      {"0", "128", "20"}, {"1", "128", "4"}, {"2", "256", "20"}, {"3", "256", "4"}};
  const std::string rows =
      "SELECT point_index, \"workload.seq_len\", \"workload.decode_steps\" FROM points ORDER BY point_index";
  EXPECT_EQ(Query(db, rows), want);
  // A rerun finds nothing to fill or move, and the stored rows stay as they are.
  Fake again;
  EXPECT_EQ(RunSweep(after, Opts(db), again.Runner()).skipped, 4u);
  EXPECT_TRUE(again.ran.empty());
  EXPECT_EQ(Query(db, rows), want);
}

// A --csv that cannot be written is a usage error before any point runs (it was found after the
// whole sweep had run, exit 1).
TEST_F(SweepTest, UnwritableCsvIsRefusedBeforeAnyPointRuns) {
  const std::string sweep = SweepFile(R"(
axis { field: "workload.num_layers" values: "1" }
axis { field: "mapping.pipeline_stages" values: "1" }
axis { field: "workload.decode_steps" values: "1" }
axis { field: "workload.seq_len" values: "64" }
)");
  testing::internal::CaptureStderr();
  EXPECT_EQ(SweepCommand({sweep, "--db", Db(), "--csv", Path("no/such/dir/out.csv")}), 2);
  fs::create_directories(Path("a-dir.csv"));
  EXPECT_EQ(SweepCommand({sweep, "--db", Db(), "--csv", Path("a-dir.csv")}), 2);
  const std::string errs = testing::internal::GetCapturedStderr();
  EXPECT_NE(errs.find("--csv: cannot write " + Path("no/such/dir/out.csv")), std::string::npos) << errs;
  EXPECT_NE(errs.find("is a directory"), std::string::npos) << errs;
  EXPECT_FALSE(fs::exists(Db())) << "the store was opened: the sweep ran";
  // A writable one is still written, and the probe leaves nothing behind.
  testing::internal::CaptureStderr();
  EXPECT_EQ(SweepCommand({sweep, "--db", Db(), "--csv", Path("out.csv")}), 0);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(Scalar(Db(), "SELECT COUNT(*) FROM points WHERE status = 'ok'"), 1);
  size_t files = 0;
  for (const auto& f : fs::directory_iterator(dir_))
    files += f.path().filename().string().find("tpsim-tmp") != std::string::npos;
  EXPECT_EQ(files, 0u);
  EXPECT_TRUE(fs::exists(Path("out.csv")));
}

// A sweep of more points than 64 bits index is refused at the axis where the product passes
// 2^64 - 1 (before: its count saturated, it ran a prefix and printed 18446744073709551615 points).
TEST_F(SweepTest, InProcessServingPointsTakeServesMemoryCheck) {
  // tpsim search runs serving candidates in its own process (InProcessRunner): 100,000
  // synthetic requests at 512 B each and the 64 MB base (115.2 MB) are refused under a 50 MB
  // --max-memory with serve's own message, without being served; before, they were run.
  const sim::Experiment e =
      sim::LoadExperiment(std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto",
                          {{"workload.requests.synthetic.num_requests", "100000"}});
  const PointOutcome out = InProcessRunner("analytical", 50ull << 20)(e, Point{});
  EXPECT_EQ(out.status, "invalid") << out.error;
  EXPECT_NE(out.error.find("workload.requests.synthetic.num_requests: 100000: serving them takes about"),
            std::string::npos)
      << out.error;
  EXPECT_NE(out.error.find("more than --max-memory"), std::string::npos) << out.error;
}

TEST_F(SweepTest, MorePointsThanSixtyFourBitsIndexIsRefused) {
  // 7 axes of 1000 values: 10^18 points fit after six, 10^21 do not.
  std::string values;
  for (int v = 1; v <= 1000; ++v) values += (v > 1 ? ",\"" : "\"") + std::to_string(v) + "\"";
  std::string axes;
  for (const char* f : {"chip.clock_mhz", "workload.seq_len", "workload.batch", "mapping.seed",
                        "workload.decode_steps", "chip.noc.link_latency_ns", "chip.core.sram_bandwidth_gbps"})
    axes += std::string("axis { field: \"") + f + "\" values: [" + values + "] }\n";
  try {
    LoadSweep(SweepFile(axes));
    FAIL() << "10^21 points accepted";
  } catch (const config::ConfigError& e) {
    ASSERT_EQ(e.diags().size(), 1u);
    EXPECT_EQ(e.diags()[0].field, "axis[6]");
    EXPECT_EQ(e.diags()[0].value, "1000 values");
    EXPECT_NE(e.diags()[0].rule.find("more than 18446744073709551615 points"), std::string::npos);
  }
}

// Planning is lazy: a sweep of 8^12 = 68719476736 points visits only the points it runs;
// with a filter it visits the filtered ones on the way; --limit resumes after them.
TEST_F(SweepTest, HugeSweepPlansLazilyAndLimitResumes) {
  std::string axes;
  for (const char* f : {"chip.clock_mhz", "chip.core.vector_lanes", "chip.core.sram_bandwidth_gbps",
                        "chip.noc.link_bandwidth_gbps", "chip.noc.router_latency_cycles",
                        "chip.noc.link_latency_ns", "workload.seq_len", "workload.batch", "mapping.seed",
                        "chip.core.systolic_arrays", "chip.core.systolic_rows", "workload.decode_steps"})
    axes += std::string("axis { field: \"") + f +
            "\" values: [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\"] }\n";
  SweepSpec s = LoadSweep(SweepFile(axes + "require: \"workload.decode_steps >= 7\"\n"));
  ASSERT_EQ(PointCount(s), 68719476736u);
  Fake fake;
  SweepOptions o = Opts(Db(), 1);
  o.limit = 4;
  SweepStats st = RunSweep(s, o, fake.Runner());
  // decode_steps is the fastest axis: of indices 0..7 only 6 and 7 pass, then 14 and 15.
  EXPECT_EQ(fake.ran, (std::vector<uint64_t>{6, 7, 14, 15}));
  EXPECT_EQ(st.points, 16u);
  EXPECT_EQ(st.filtered, 12u);
  EXPECT_EQ(st.ran, 4u);
  EXPECT_TRUE(st.limited);
  EXPECT_FALSE(st.interrupted);
  Fake more;
  o.limit = 2;
  SweepStats st2 = RunSweep(s, o, more.Runner());
  EXPECT_EQ(more.ran, (std::vector<uint64_t>{22, 23}));
  EXPECT_EQ(st2.skipped, 4u);
  EXPECT_EQ(Scalar(Db(), "SELECT COUNT(*) FROM points"), 6);
  // Shard 3 of 5 of the same sweep: indices 3, 8, 13, 18, 23, ... of which 23 and 38 pass first.
  Fake sharded;
  SweepOptions so = Opts(Db("shard.sqlite"), 2);
  so.shard = 3;
  so.shards = 5;
  so.limit = 2;
  RunSweep(s, so, sharded.Runner());
  std::sort(sharded.ran.begin(), sharded.ran.end());
  EXPECT_EQ(sharded.ran, (std::vector<uint64_t>{23, 38}));
}

TEST_F(SweepTest, ShardsAreDisjointAndCoverEveryPoint) {
  SweepSpec s = LoadSweep(SweepFile(kSmall));
  std::multiset<uint64_t> all;
  for (uint32_t i = 0; i < 5; ++i) {
    Fake fake;
    SweepOptions o = Opts(Db("shard-" + std::to_string(i) + ".sqlite"));
    o.shard = i;
    o.shards = 5;
    RunSweep(s, o, fake.Runner());
    for (uint64_t idx : fake.ran) {
      EXPECT_EQ(idx % 5, i);
      all.insert(idx);
    }
  }
  ASSERT_EQ(all.size(), 12u);
  for (uint64_t i = 0; i < 12; ++i) EXPECT_EQ(all.count(i), 1u) << i;
}

TEST_F(SweepTest, MergeKeepsDuplicatesOnce) {
  SweepSpec s = LoadSweep(SweepFile(kSmall));
  // Shards 0/2 and 1/2, plus a full run that duplicates both.
  for (uint32_t i = 0; i < 2; ++i) {
    Fake fake;
    SweepOptions o = Opts(Db("part-" + std::to_string(i) + ".sqlite"));
    o.shard = i;
    o.shards = 2;
    RunSweep(s, o, fake.Runner());
  }
  Fake full;
  full.outcome = [](const Point& p) {
    return PointOutcome{p.index == 2 ? "crashed" : "ok", {7, 7, 7, 7, 7, 7, 0.5, 0}, ""};
  };
  RunSweep(s, Opts(Db("full.sqlite")), full.Runner());
  // full.sqlite first: its crashed point 2 gives way to part-0's finished one.
  MergeStats m = Merge(Db("out.sqlite"), {Db("full.sqlite"), Db("part-0.sqlite"), Db("part-1.sqlite")});
  EXPECT_EQ(m.inputs, 3);
  EXPECT_EQ(m.rows_read, 24);
  EXPECT_EQ(m.rows_added, 13);  // 12 from full, then point 2 replaced
  EXPECT_EQ(Scalar(Db("out.sqlite"), "SELECT COUNT(*) FROM points"), 12);
  EXPECT_EQ(Scalar(Db("out.sqlite"), "SELECT COUNT(DISTINCT config_hash) FROM points"), 12);
  EXPECT_EQ(Scalar(Db("out.sqlite"), "SELECT total_ps FROM points WHERE point_index = 2"), 3);  // index + 1
  EXPECT_EQ(Scalar(Db("out.sqlite"), "SELECT COUNT(*) FROM points WHERE status != 'ok'"), 0);
  // Merging again changes nothing.
  EXPECT_EQ(Merge(Db("out.sqlite"), {Db("part-0.sqlite")}).rows_added, 0);
  EXPECT_THROW(Merge(Db("out.sqlite"), {Db("missing.sqlite")}), StoreError);
}

TEST_F(SweepTest, IdentityIgnoresNameButNotAxes) {
  SweepSpec a = LoadSweep(SweepFile(kSmall, "a.textproto"));
  SweepSpec renamed =
      LoadSweep(SweepFile(std::string("name: \"other\"\ndescription: \"x\"\n") + kSmall, "b.textproto"));
  EXPECT_EQ(SweepIdentity(a), SweepIdentity(renamed));
  SweepSpec more = LoadSweep(SweepFile(R"(
axis { field: "chip.noc.link_bandwidth_gbps" values: ["64", "128", "256", "512"] }
axis { field: "workload.seq_len" values: ["32", "64", "128"] }
)",
                                       "c.textproto"));
  EXPECT_NE(SweepIdentity(a), SweepIdentity(more));
  SweepSpec tlm = LoadSweep(SweepFile(std::string("engine: \"tlm\"\n") + kSmall, "d.textproto"));
  EXPECT_NE(SweepIdentity(a), SweepIdentity(tlm));
}

TEST_F(SweepTest, MergeRefusesStoresOfDifferentSweepsUnlessForced) {
  Fake f1, f2;
  RunSweep(LoadSweep(SweepFile(kSmall, "a.textproto")), Opts(Db("a.sqlite")), f1.Runner());
  RunSweep(LoadSweep(SweepFile(std::string("engine: \"tlm\"\n") + kSmall, "b.textproto")),
           Opts(Db("b.sqlite")), f2.Runner());
  EXPECT_EQ(Scalar(Db("a.sqlite"), "SELECT COUNT(*) FROM sweeps"), 1);
  try {
    Merge(Db("out.sqlite"), {Db("a.sqlite"), Db("b.sqlite")});
    FAIL() << "merged two sweeps";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("different sweeps"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(Db("out.sqlite")));  // refused before anything was written
  // Into an OUT that already holds the other sweep: refused too.
  Merge(Db("out.sqlite"), {Db("a.sqlite")});
  EXPECT_THROW(Merge(Db("out.sqlite"), {Db("b.sqlite")}), StoreError);
  MergeStats m = Merge(Db("out.sqlite"), {Db("b.sqlite")}, /*force=*/true);
  EXPECT_EQ(m.rows_read, 12);
  EXPECT_EQ(Scalar(Db("out.sqlite"), "SELECT COUNT(*) FROM sweeps"), 2);
  // A store without the table (an older tpsim) cannot be told apart: refused unless forced.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(Db("a.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE sweeps", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  EXPECT_THROW(Merge(Db("new.sqlite"), {Db("a.sqlite")}), StoreError);
  EXPECT_EQ(Merge(Db("new.sqlite"), {Db("a.sqlite")}, true).rows_added, 12);
}

// A FIFO given as a store made SQLite wait forever; a device or a text file is no store. Each
// is refused at once, naming the file, forced or not.
TEST_F(SweepTest, MergeRefusesWhatIsNoStore) {
  ASSERT_EQ(::mkfifo(Db("fifo").c_str(), 0600), 0);
  std::ofstream(Db("text.sqlite")) << "hello\n";
  auto says = [&](const std::string& in, bool force, const std::string& want) {
    try {
      Merge(Db("out.sqlite"), {in}, force);
      ADD_FAILURE() << "merged " << in;
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  for (bool force : {false, true}) {
    says(Db("fifo"), force, Db("fifo") + ": is not a regular file (a FIFO, device or socket)");
    says("/dev/zero", force, "/dev/zero: is not a regular file");
  }
  says(Db("text.sqlite"), false, Db("text.sqlite") + ": not a tpsim sweep store (");
  EXPECT_FALSE(fs::exists(Db("out.sqlite")));
}

// `tpsim sweep merge` checks the stores it names at the command line (exit 2, naming OUT or IN):
// an empty OUT merged into no file and printed "added to " (exit 0); a missing IN, a directory
// (said to be "a FIFO, device or socket") and an OUT that is no store ("prepare: file is not a
// database", naming no file) were exit 1.
TEST_F(SweepTest, MergeCommandChecksItsStoresAtTheCommandLine) {
  SweepSpec s = LoadSweep(SweepFile(kSmall));
  Fake fake;
  RunSweep(s, Opts(Db("a.sqlite")), fake.Runner());
  std::ofstream(Db("text.sqlite")) << "hello\n";
  fs::create_directory(Db("sub"));
  struct Case {
    std::vector<std::string> args;
    int rc;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{"merge", "", Db("a.sqlite")},
            2,
            "<command line>:1:1: OUT: '': is empty (a script's unset variable?)"},
           {{"merge", Db("o.sqlite"), ""}, 2, "<command line>:1:1: IN: '': is empty"},
           {{"merge", Db("o.sqlite"), Db("none.sqlite")}, 2, "IN: " + Db("none.sqlite") + ": file not found"},
           {{"merge", Db("o.sqlite"), Db("sub")},
            2,
            "IN: " + Db("sub") + ": is a directory: a store is a SQLite file"},
           {{"merge", Db("sub"), Db("a.sqlite")},
            2,
            "OUT: " + Db("sub") + ": cannot create the SQLite store there: is a directory"},
           {{"merge", Db("text.sqlite"), Db("a.sqlite")},
            1,
            Db("text.sqlite") + " is not a tpsim sweep store ("},
       }) {
    testing::internal::CaptureStderr();
    testing::internal::CaptureStdout();
    const int rc = SweepCommand(c.args);
    const std::string err = testing::internal::GetCapturedStderr();
    const std::string out = testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, c.rc) << c.args[1] << " " << c.args[2] << ": " << err << out;
    EXPECT_NE(err.find(c.says), std::string::npos) << err;
    EXPECT_EQ(out, "");
  }
  EXPECT_FALSE(fs::exists(Db("o.sqlite")));
  // A store that a sweep or search is still writing: the rows so far were merged, exit 0.
  {
    Store writing(Db("a.sqlite"), {"workload.seq_len"});
    testing::internal::CaptureStderr();
    EXPECT_EQ(SweepCommand({"merge", Db("o.sqlite"), Db("a.sqlite")}), 2);
    EXPECT_NE(testing::internal::GetCapturedStderr().find(
                  "IN: " + Db("a.sqlite") +
                  ": another tpsim sweep or search is writing this store: merge it when that has ended"),
              std::string::npos);
  }
  EXPECT_FALSE(fs::exists(Db("o.sqlite")));
  // A damaged store (its pages overwritten) failed half-way, naming no file, and left the OUT it
  // had made: checked whole first, named, and no OUT left.
  fs::copy_file(Db("a.sqlite"), Db("bad.sqlite"));
  {
    std::fstream f(Db("bad.sqlite"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);
    const std::string junk(8192, '\xde');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  testing::internal::CaptureStderr();
  EXPECT_EQ(SweepCommand({"merge", "--force", Db("o.sqlite"), Db("a.sqlite"), Db("bad.sqlite")}), 1);
  const std::string damaged = testing::internal::GetCapturedStderr();
  EXPECT_NE(damaged.find(Db("bad.sqlite") + ": "), std::string::npos) << damaged;
  EXPECT_FALSE(fs::exists(Db("o.sqlite")));
  testing::internal::CaptureStdout();
  EXPECT_EQ(SweepCommand({"merge", Db("o.sqlite"), Db("a.sqlite")}), 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(),
            "merged 1 stores: 12 rows read, 12 added to " + Db("o.sqlite") + "\n");
}

// A search's candidates and a sweep's points in one store (--db given to both) left each other's
// columns NULL, and `tpsim plot sweep` / `plot front` on it then failed (`swept field mapping.tp
// has 2 values (4, None)`). Each command refuses the other's store at --db (exit 2); its own,
// a new file, a store of an older tpsim without writers, and a file that is no store pass.
TEST_F(SweepTest, SearchAndSweepRefuseEachOthersStore) {
  { Store sweep_store(Db("sweep.sqlite"), {"workload.seq_len"}, "id-sweep", "seq-partition"); }
  { Store search_store(Db("search.sqlite"), {"mapping.tp"}, "id-search", "search reference-qwen3-4b"); }
  { Store old(Db("old.sqlite"), {"mapping.tp"}); }
  auto refused = [](const std::string& path, bool search) -> std::string {
    try {
      CheckStoreWriter("--db", path, search);
    } catch (const config::ConfigError& e) {
      return e.diags().front().str();
    }
    return "";
  };
  EXPECT_EQ(
      refused(Db("sweep.sqlite"), true),
      "<command line>:1:1: --db: " + Db("sweep.sqlite") +
          ": holds the points of a sweep (seq-partition): tpsim search and tpsim sweep each need a store "
          "of their own (plots read every row); name another file");
  EXPECT_NE(
      refused(Db("search.sqlite"), false).find("holds the points of a search (search reference-qwen3-4b)"),
      std::string::npos);
  EXPECT_EQ(refused(Db("sweep.sqlite"), false), "");
  EXPECT_EQ(refused(Db("search.sqlite"), true), "");
  for (bool search : {false, true}) {
    EXPECT_EQ(refused(Db("old.sqlite"), search), "");
    EXPECT_EQ(refused(Db("new.sqlite"), search), "");
    EXPECT_EQ(refused(Write("text.sqlite", "hello\n"), search), "");
  }
  // At the command line, before the sweep runs: nothing is added.
  testing::internal::CaptureStderr();
  EXPECT_EQ(SweepCommand({SweepFile(kSmall), "--db", Db("search.sqlite")}), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("--db: " + Db("search.sqlite") + ": holds the points of a search"), std::string::npos)
      << err;
  EXPECT_EQ(SweepsOf(Db("search.sqlite")).size(), 1u);
}

// Two sweeps on one store each ran every point (394 and 394 of 400 when one started 2 s after
// the other): one writer at a time, the second refused while the first lives.
TEST_F(SweepTest, OneWriterAtATime) {
  {
    Store first(Db(), {"workload.seq_len"});
    try {
      Store second(Db(), {"workload.seq_len"});
      ADD_FAILURE() << "a second writer was let in";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find("another tpsim sweep or search is writing this store"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(Store again(Db(), {"workload.seq_len"}));  // released with the first
}

TEST_F(SweepTest, CsvExportHasHeaderAndOneLinePerPoint) {
  SweepSpec s = LoadSweep(SweepFile(kSmall));
  Fake fake;
  RunSweep(s, Opts(Db()), fake.Runner());
  std::string csv = Write("x.csv", "");
  ExportCsv(Db(), csv);
  std::ifstream in(csv);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(
      header.rfind("config_hash,point_index,status,engine,chip.noc.link_bandwidth_gbps,workload.seq_len,", 0),
      0u)
      << header;
  EXPECT_EQ(header.find("config"), header.find("config_hash"));  // no config column
  int lines = 0;
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, 12);
}

TEST(SweepSlurm, ScriptRunsOneShardPerArrayTask) {
  SlurmJob job;
  job.exe = "/opt/tpsim/bin/tpsim";
  job.sweep = "/data/my sweep.textproto";
  job.dir = "/data/out.slurm";
  job.array_size = 4;
  job.partition = "debug";
  std::string s = SbatchScript(job);
  EXPECT_NE(s.find("#SBATCH --array=0-3\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --partition=debug\n"), std::string::npos) << s;
  EXPECT_NE(
      s.find(
          "exec '/opt/tpsim/bin/tpsim' sweep '/data/my sweep.textproto' --shard \"${SLURM_ARRAY_TASK_ID}/4\" "
          "--db '/data/out.slurm'/shard-\"${SLURM_ARRAY_TASK_ID}\".sqlite"),
      std::string::npos)
      << s;
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

// A sweep's name went into #SBATCH --job-name as written: a newline in it put a line of its own
// into the script, run by every task; a store folder with a blank split the --output line.
TEST(SweepSlurm, NamesAndFoldersCannotBreakTheScript) {
  SlurmJob job;
  job.exe = "/opt/tpsim/bin/tpsim";
  job.sweep = "/data/s.textproto";
  job.dir = "/data/out.slurm";
  job.job_name = "tpsim-x\nrm -rf ~ #";
  const std::string s = SbatchScript(job);
  EXPECT_NE(s.find("#SBATCH --job-name=tpsim-x_rm_-rf____\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("\nrm -rf"), std::string::npos) << s;
  EXPECT_EQ(CheckSlurmStore("/data/out.sqlite"), "");
  EXPECT_EQ(CheckSlurmStore("/data/o u.sqlite")
                .rfind("--db: the Slurm job's folder /data/o u.slurm holds a blank", 0),
            0u)
      << CheckSlurmStore("/data/o u.sqlite");
  EXPECT_NE(CheckSlurmStore("/data/o\"u.sqlite"), "");
}

TEST(SweepSlurm, ScriptCarriesLimitsAndNamesTheMergeTarget) {
  SlurmJob job;
  job.exe = "/opt/tpsim/bin/tpsim";
  job.sweep = "/data/s.textproto";
  job.dir = "/data/res.slurm";
  job.db = "res.sqlite";
  job.time = "1-02:00:00";
  job.mem = "8G";
  job.account = "arch_lab";
  EXPECT_EQ(CheckSlurmJob(job), "");
  std::string s = SbatchScript(job);
  EXPECT_NE(s.find("#SBATCH --time=1-02:00:00\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --mem=8G\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --account=arch_lab\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("OUT.sqlite"), std::string::npos) << s;
  EXPECT_EQ(MergeCommand(job),
            "'/opt/tpsim/bin/tpsim' sweep merge 'res.sqlite' '/data/res.slurm'/shard-*.sqlite");
  EXPECT_NE(s.find("#   " + MergeCommand(job) + "\n"), std::string::npos) << s;
  for (const char* t : {"30", "30:00", "2:00:00", "1-2", "1-2:30", "1-2:30:00"}) {
    job.time = t;
    EXPECT_EQ(CheckSlurmJob(job), "") << t;
  }
  for (const char* t : {"1:2:3:4", "2h", "1-", ":30", "1-2:x"}) {
    job.time = t;
    EXPECT_NE(CheckSlurmJob(job).find("--time"), std::string::npos) << t;
  }
  job.time = "";
  job.mem = "8 G";
  EXPECT_NE(CheckSlurmJob(job).find("--mem"), std::string::npos);
  job.mem = "";
  job.partition = "debug\n#SBATCH --exclusive";  // no lines smuggled into the script
  EXPECT_NE(CheckSlurmJob(job).find("--partition"), std::string::npos);
  job.partition = "a,b";
  job.account = "x y";
  EXPECT_NE(CheckSlurmJob(job).find("--account"), std::string::npos);
}

TEST_F(SweepTest, SlurmDryRunWritesTheScriptWithoutSubmitting) {
  std::string sweep = SweepFile(kSmall);
  std::string db = Db("dry.sqlite");
  // No sbatch reachable: a dry run must not need it.
  const char* old_path = std::getenv("PATH");
  std::string saved = old_path ? old_path : "";
  ::setenv("PATH", "/nonexistent", 1);
  testing::internal::CaptureStdout();
  int rc = SweepCommand({sweep, "--slurm", "--dry-run", "--db", db, "--time", "10:00", "--array-size", "3"});
  std::string out = testing::internal::GetCapturedStdout();
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(rc, 0) << out;
  std::string script = Db("dry.slurm") + "/sweep.sbatch";
  ASSERT_TRUE(fs::exists(script));
  EXPECT_NE(out.find("#SBATCH --array=0-2"), std::string::npos) << out;
  EXPECT_NE(out.find("#SBATCH --time=10:00"), std::string::npos) << out;
  EXPECT_NE(out.find("not submitted"), std::string::npos) << out;
  EXPECT_NE(out.find("sweep merge '" + db + "'"), std::string::npos) << out;
  // More tasks than the sweep's 12 points: 12, one point each (not 100000 empty shards).
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  rc = SweepCommand({sweep, "--slurm", "--dry-run", "--db", db, "--array-size", "100000"});
  out = testing::internal::GetCapturedStdout();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 0) << out << err;
  EXPECT_NE(out.find("#SBATCH --array=0-11\n"), std::string::npos) << out;
  EXPECT_NE(out.find("--shard \"${SLURM_ARRAY_TASK_ID}/12\""), std::string::npos) << out;
  EXPECT_NE(err.find("--array-size 100000 is more than the sweep's 12 points: 12 array tasks"),
            std::string::npos)
      << err;
  EXPECT_EQ(SweepCommand({sweep, "--dry-run"}), 2);                             // needs --slurm
  EXPECT_EQ(SweepCommand({sweep, "--slurm", "--dry-run", "--time", "2h"}), 2);  // a bad limit
  EXPECT_EQ(SweepCommand({"merge", "--bogus", "a", "b"}), 2);
  // The tasks run with --max-memory and --retry-failed (they were left out of their command, exit
  // 0); --limit, --csv and --shard, which a shard cannot honour, are refused.
  testing::internal::CaptureStdout();
  rc = SweepCommand({sweep, "--slurm", "--dry-run", "--db", db, "--max-memory", "1G", "--retry-failed"});
  out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("' '--max-memory' '1G' '--retry-failed' --shard "), std::string::npos) << out;
  testing::internal::CaptureStderr();
  for (const char* flag : {"--limit", "--csv", "--shard"}) {
    const std::string value = std::string(flag) == "--csv"     ? Db("x.csv")
                              : std::string(flag) == "--shard" ? "0/2"
                                                               : "3";
    EXPECT_EQ(SweepCommand({sweep, "--slurm", "--dry-run", "--db", db, flag, value}), 2) << flag;
  }
  const std::string errs = testing::internal::GetCapturedStderr();
  EXPECT_NE(errs.find("--limit is not passed to a Slurm array's tasks"), std::string::npos) << errs;
  EXPECT_NE(errs.find("--csv with --slurm"), std::string::npos) << errs;
  EXPECT_NE(errs.find("--shard with --slurm"), std::string::npos) << errs;
}

TEST(SweepCli, UsageErrorsExitTwo) {
  EXPECT_EQ(SweepCommand({"--help"}), 0);
  EXPECT_EQ(SweepCommand({}), 2);
  EXPECT_EQ(SweepCommand({"x.textproto", "--shard", "4/4"}), 2);
  EXPECT_EQ(SweepCommand({"x.textproto", "--jobs", "0"}), 2);
  // As search and agree take it (2147483647 was accepted: a thread a point, up to the sweep's size).
  testing::internal::CaptureStderr();
  EXPECT_EQ(SweepCommand({"x.textproto", "--jobs", "257"}), 2);
  const std::string jobs = testing::internal::GetCapturedStderr();
  EXPECT_EQ(jobs.rfind("tpsim sweep: --jobs must be 1 .. 256, got '257'\n", 0), 0u) << jobs;
  // A value past the type's top states the range it broke (it said ">= 1", which it was).
  for (const auto& [flag, value, says] :
       {std::tuple{"--shard", "0/4294967296",
                   "--shard N expects an integer from 1 to 4294967295, got '4294967296'"},
        std::tuple{"--limit", "99999999999999999999",
                   "--limit expects an integer from 1 to 18446744073709551615, got '99999999999999999999'"},
        std::tuple{"--jobs", "x", "--jobs must be 1 .. 256, got 'x'"},
        // As search takes it (a sweep took any int).
        std::tuple{"--array-size", "100001", "--array-size must be 1 .. 100000, got '100001'"}}) {
    testing::internal::CaptureStderr();
    EXPECT_EQ(SweepCommand({"x.textproto", flag, value}), 2);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(err.rfind(std::string("tpsim sweep: ") + says + "\n", 0), 0u) << err;
  }
  EXPECT_EQ(SweepCommand({"merge", "out.sqlite"}), 2);
  // OUT among the inputs (SQLite's "database is locked", exit 1, before).
  EXPECT_EQ(SweepCommand({"merge", "m.sqlite", "a.sqlite", "./m.sqlite"}), 2);
  EXPECT_EQ(SweepCommand({"/nonexistent/sweep.textproto"}), 2);  // a config error
}

// ---- the real engine and the kill tests --------------------------------------------

TEST_F(SweepTest, RealPointsAndAnInvalidOneThroughTheAnalyticalEngine) {
  // seq_len 0 fails validation: stored as invalid with its diagnostic.
  SweepSpec s =
      LoadSweep(SweepFile("axis { field: \"workload.seq_len\" values: [\"0\", \"128\", \"256\"] }\n"));
  SweepStats st = RunSweep(s, Opts(Db()), InProcessRunner("analytical"));
  EXPECT_EQ(st.ok, 2u);
  EXPECT_EQ(st.failed, 1u);
  auto bad = Query(Db(), "SELECT status, error FROM points WHERE point_index = 0");
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0][0], "invalid");
  EXPECT_NE(bad[0][1].find("workload.seq_len"), std::string::npos) << bad[0][1];
  // A longer prompt takes longer to prefill.
  EXPECT_LT(Scalar(Db(), "SELECT prefill_ps FROM points WHERE point_index = 1"),
            Scalar(Db(), "SELECT prefill_ps FROM points WHERE point_index = 2"));
  EXPECT_GT(Scalar(Db(), "SELECT prefill_ps FROM points WHERE point_index = 1"), 0);
  // The contention indicator is a share in [0, 1): stored as a REAL, not cut to an integer.
  EXPECT_EQ(Query(Db(), "SELECT typeof(contention) FROM points WHERE point_index = 1")[0][0], "real");
  const double c = std::stod(Query(Db(), "SELECT contention FROM points WHERE point_index = 1")[0][0]);
  EXPECT_GE(c, 0.0);
  EXPECT_LT(c, 1.0);
}

// A swept element the base lacks is located at the sweep point, as `run --set` locates it: they
// pointed at the chip file's memory block and at the base's mapping line, which hold no such value.
TEST_F(SweepTest, ErrorsAboutASweptElementAreAtThePoint) {
  int n = 0;
  for (const auto& [axis, says] :
       {std::pair{"axis { field: \"chip.memory[0].attach[0]\" values: [\"r0c0\"] }\n",
                  "<sweep point 0: chip.memory[0].attach[0]=r0c0>:1:1: chip.memory[0].attach: r0c0: must be "
                  "empty when per_core is true"},
        std::pair{
            "axis { field: \"mapping.overrides[0].op\" values: [\"down\"] }\n",
            "<sweep point 0: mapping.overrides[0].op=down>:1:1: mapping.overrides[0].partition: : unknown "
            "partitioner"}}) {
    const std::string db = Db() + std::to_string(n++);
    SweepStats st = RunSweep(LoadSweep(SweepFile(axis)), Opts(db, 1), InProcessRunner("analytical"));
    EXPECT_EQ(st.failed, 1u);
    const auto bad = Query(db, "SELECT status, error FROM points WHERE point_index = 0");
    ASSERT_EQ(bad.size(), 1u);
    EXPECT_EQ(bad[0][0], "invalid");
    EXPECT_EQ(bad[0][1].rfind(says, 0), 0u) << bad[0][1];
  }
}

}  // namespace
}  // namespace tpsim::sweep
