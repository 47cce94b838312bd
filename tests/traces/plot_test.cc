// Renders each plot headless from a small hand-made result and checks the PNG: signature,
// the 1000 x 800 size the script promises, and that it is not blank.
#include "traces/plot.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tpsim::traces {
namespace {

// A 2x2 mesh result in the Result JSON form (snake_case names, int64 as numbers; core 0
// and other defaults omitted as proto3 JSON does; one int64 written as a string).
const char* const kResult = R"({
  "experiment": "tiny",
  "title": "tiny-model on tiny-chip: TP 2 x 1 stage",
  "engine": "analytical",
  "config": "name: \"tiny\"\nchip {\n  name: \"mesh-2x2\"\n  noc {\n    topology: \"mesh\"\n    rows: 2\n    cols: 2\n  }\n}\n",
  "links": [
    {"name": "r0c0->r0c1", "bytes": 1600, "utilization": 0.9},
    {"name": "r0c1->r0c0", "utilization": 0.1},
    {"name": "r0c0->r1c0", "utilization": 0.5},
    {"name": "r1c0->r0c0"},
    {"name": "r0c1->r1c1", "utilization": 0.3},
    {"name": "r1c1->r0c1", "utilization": 0.7},
    {"name": "r1c0->r1c1", "utilization": 0.2},
    {"name": "r1c1->r1c0", "utilization": 1.0}
  ],
  "cores": [
    {"utilization": 0.8},
    {"core": 1, "utilization": 0.4},
    {"core": 2, "utilization": 0.2},
    {"core": 3, "utilization": 0.95}
  ],
  "tasks": [
    {"start_ps": 0, "end_ps": 10500, "kind": "compute", "op": "q_proj", "dst_core": -1},
    {"id": 1, "start_ps": 0, "end_ps": 10500, "core": 1, "kind": "compute", "op": "q_proj", "dst_core": -1},
    {"id": 2, "start_ps": 10500, "end_ps": 22500, "kind": "transfer", "op": "q_proj.allreduce", "dst_core": 1},
    {"id": 3, "start_ps": "0", "end_ps": "50000", "core": 2, "kind": "memory", "op": "weights", "dst_core": -1},
    {"id": 4, "start_ps": 22500, "end_ps": 30250, "core": 1, "kind": "compute", "op": "o_proj", "dst_core": -1}
  ]
})";

// kResult with an energy summary and per-op energy (q_proj twice: 0.006 J in all).
void WriteEnergyResult(const std::string& path) {
  nlohmann::json r = nlohmann::json::parse(kResult);
  r["summary"] = {{"energy_modelled", true},   {"energy_j", 0.01},
                  {"compute_energy_j", 0.004}, {"sram_energy_j", 0.002},
                  {"network_energy_j", 0.001}, {"memory_energy_j", 0.002},
                  {"static_energy_j", 0.001},  {"energy_per_token_j", 0.0025},
                  {"average_power_w", 120.5}};
  r["ops"] = {{{"op", "q_proj"}, {"energy_j", 0.005}},
              {{"op", "o_proj"}, {"energy_j", 0.003}},
              {{"op", "q_proj"}, {"energy_j", 0.001}}};
  std::ofstream(path) << r.dump();
}

// Runs `sql` on the SQLite database `path` (created when missing).
void ExecSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

// A search store (tpsim search --db) of one-replica runs: (10 ms, 3 mJ) of 1 replica,
// (20 ms, 1 mJ) of 4 and (30 ms, 2 mJ) of 2, whose static energy is 40% and 50% of their
// energy. With their replicas sharing the chip's static energy they give 1 x (1 - 0.4 x 3/4) =
// 0.7 mJ and 2 x (1 - 0.5 x 1/2) = 1.5 mJ: the last is off the front. One invalid point.
void WriteFrontStore(const std::string& path) {
  const std::string sql =
      "CREATE TABLE points (config_hash TEXT, point_index INTEGER, status TEXT, \"mapping.tp\", "
      "\"mapping.pipeline_stages\", \"search.replicas\", total_ps INTEGER, energy_per_token_j REAL, "
      "energy_j REAL, static_energy_j REAL);"
      "INSERT INTO points VALUES ('a', 0, 'ok', 16, 4, 1, 10000000000, 0.003, 0.3, 0.2);"
      "INSERT INTO points VALUES ('b', 1, 'ok', 4, 4, 4, 20000000000, 0.001, 0.1, 0.04);"
      "INSERT INTO points VALUES ('c', 2, 'ok', 8, 4, 2, 30000000000, 0.002, 0.2, 0.1);"
      "INSERT INTO points VALUES ('d', 3, 'invalid', 3, 1, 1, NULL, NULL, NULL, NULL);";
  ExecSql(path, sql);
}

// The CSVs of `tpsim serve --requests-csv R.csv --kv-csv K.csv` for a small disaggregated
// run (one rejected request, one with a single output token: no TPOT).
void WriteServingCsvs(const std::string& requests, const std::string& kv) {
  std::ofstream(requests)
      << "id,arrival_ms,prompt_tokens,output_tokens,first_token_ms,finish_ms,ttft_ms,mean_tpot_ms,"
         "latency_ms,preemptions,status\n"
         "0,0.000,406,171,340.506,13529.784,340.506,77.584,13529.784,0,ok\n"
         "1,318.149,524,85,1031.388,7062.971,713.239,71.805,6744.822,0,ok\n"
         "2,400.000,90000,4,,,,,,0,rejected\n"
         "3,500.000,100,1,900.000,900.000,400.000,0.000,400.000,1,ok\n"
         "4,800.000,300,20,1500.000,3000.000,700.000,78.947,2200.000,0,ok\n";
  std::ofstream(kv) << "group,time_ms,kv_blocks_used,kv_blocks_capacity,running,waiting,"
                       "iteration_tokens\n"
                       "prefill,340.506,26,100,0,0,406\n"
                       "prefill,737.903,33,100,1,0,512\n"
                       "prefill,1031.388,40,100,0,0,12\n"
                       "decode,400.000,27,120,1,0,1\n"
                       "decode,480.000,27,120,1,0,1\n"
                       "decode,1100.000,61,120,2,0,2\n"
                       "decode,13529.784,12,120,0,0,1\n";
}

class PlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    python_ = FindPlotPython();
    if (!python_) GTEST_SKIP() << "no python3 with matplotlib (apt-get install -y python3-matplotlib)";
    dir_ = std::filesystem::temp_directory_path() / ("tpsim_plot_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(Path("result.json")) << kResult;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // PNG checks: signature, IHDR size, and more than `min_colours` distinct colours.
  void ExpectPicture(const std::string& png, int min_colours, uint32_t width = 1000) {
    std::ifstream f(png, std::ios::binary);
    ASSERT_TRUE(f) << png << " not written";
    std::string head(24, '\0');
    f.read(head.data(), 24);
    ASSERT_EQ(head.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    ASSERT_EQ(head.substr(12, 4), "IHDR");
    auto be32 = [&](int at) {
      return (static_cast<uint32_t>(static_cast<unsigned char>(head[at])) << 24) |
             (static_cast<uint32_t>(static_cast<unsigned char>(head[at + 1])) << 16) |
             (static_cast<uint32_t>(static_cast<unsigned char>(head[at + 2])) << 8) |
             static_cast<uint32_t>(static_cast<unsigned char>(head[at + 3]));
    };
    EXPECT_EQ(be32(16), width);  // 10 in x 100 dpi unless said otherwise
    EXPECT_EQ(be32(20), 800u);   // 8 in x 100 dpi
    const std::string cmd =
        *python_ +
        " -c \"import sys, numpy as np, matplotlib.image as m; a = m.imread(sys.argv[1]); "
        "print(len(np.unique(a.reshape(-1, a.shape[2]), axis=0)))\" " +
        png;
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    int colours = 0;
    EXPECT_EQ(std::fscanf(p, "%d", &colours), 1);
    EXPECT_EQ(pclose(p), 0);
    EXPECT_GT(colours, min_colours) << png << " looks blank";
  }

  // PlotCommand with its stderr (and the script's) captured into *err.
  int RunPlot(const std::vector<std::string>& args, std::string* err) {
    const std::string log = Path("stderr.txt");
    std::fflush(stderr);
    const int saved = dup(STDERR_FILENO);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    ::close(fd);
    const int rc = PlotCommand(args);
    std::fflush(stderr);
    dup2(saved, STDERR_FILENO);
    ::close(saved);
    *err = ReadFile(log);
    return rc;
  }

  static std::string ReadFile(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  static nlohmann::json ReadJson(const std::string& p) { return nlohmann::json::parse(ReadFile(p)); }

  std::optional<std::string> python_;
  std::filesystem::path dir_;
};

TEST_F(PlotTest, HeatmapRenders) {
  ASSERT_EQ(PlotCommand({"heatmap", Path("result.json"), "--out", Path("links.png")}), 0);
  // Link and core colour maps over 8 links and 4 cores, plus text: well over 20 colours.
  ExpectPicture(Path("links.png"), 20);
}

// The energy breakdown: a stacked bar of the summary's parts and the ops' energy; a result
// without an energy model is refused with exit 2.
TEST_F(PlotTest, EnergyRendersAndRefusesAResultWithoutEnergy) {
  WriteEnergyResult(Path("e.json"));
  std::string err;
  ASSERT_EQ(RunPlot({"energy", Path("e.json"), Path("e.json"), "--dump-series", Path("e_dump.json"), "--out",
                     Path("energy.png")},
                    &err),
            0)
      << err;
  ExpectPicture(Path("energy.png"), 5);
  const nlohmann::json d = ReadJson(Path("e_dump.json"));
  ASSERT_EQ(d["results"].size(), 2u);
  EXPECT_DOUBLE_EQ(d["results"][0]["parts_j"]["compute"].get<double>(), 0.004);
  EXPECT_DOUBLE_EQ(d["results"][0]["ops_j"]["q_proj"].get<double>(), 0.006);  // summed over its two rows
  EXPECT_EQ(RunPlot({"energy", Path("result.json"), "--out", Path("bad.png")}, &err), 2);
  EXPECT_NE(err.find("no energy in this result"), std::string::npos) << err;
}

TEST_F(PlotTest, TimelineRenders) {
  ASSERT_EQ(PlotCommand({"timeline", Path("result.json"), "--out", Path("gantt.png")}), 0);
  ExpectPicture(Path("gantt.png"), 3);
}

// An empty --out (a script's unset variable) is refused: matplotlib wrote ".png" in the
// working directory and the command exited 0.
TEST_F(PlotTest, EmptyOutIsRefused) {
  std::string err;
  EXPECT_EQ(RunPlot({"timeline", Path("result.json"), "--out", ""}, &err), 2);
  EXPECT_NE(err.find("--out needs a value, got an empty one"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(".png"));
  // Every option's empty value (a script's unset variable): --cores "" and --window "" drew every
  // core over the whole run, as if not given; an empty input names itself.
  for (const char* flag : {"--cores", "--window"}) {
    EXPECT_EQ(RunPlot({"timeline", Path("result.json"), flag, "", "--out", Path("t.png")}, &err), 2) << flag;
    EXPECT_NE(err.find(std::string(flag) + " needs a value, got an empty one"), std::string::npos) << err;
  }
  EXPECT_EQ(RunPlot({"timeline", "", "--out", Path("t.png")}, &err), 2);
  EXPECT_NE(err.find("tpsim plot: RESULT.json is empty (a script's unset variable?)"), std::string::npos)
      << err;
  EXPECT_FALSE(std::filesystem::exists(Path("t.png")));
}

// A TPSIM_PYTHON that cannot import matplotlib (here: no such file) was passed over silently for
// python3: the command says so, and draws with the one it found.
TEST_F(PlotTest, AnUnusableTpsimPythonIsNamed) {
  ASSERT_EQ(::setenv("TPSIM_PYTHON", "/nonexistent/python3", 1), 0);
  std::string warning;
  const std::optional<std::string> py = FindPlotPython(&warning);
  std::string err;
  const int rc = RunPlot({"timeline", Path("result.json"), "--out", Path("t.png")}, &err);
  ::unsetenv("TPSIM_PYTHON");
  ASSERT_TRUE(py);
  EXPECT_EQ(warning,
            "TPSIM_PYTHON=/nonexistent/python3 cannot import matplotlib (or does not run); using " + *py);
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(err.find("tpsim plot: warning: " + warning), std::string::npos) << err;
  warning.clear();
  EXPECT_EQ(FindPlotPython(&warning), py);
  EXPECT_EQ(warning, "");  // unset: no word
}

TEST_F(PlotTest, SweepRendersAndNamesAMissingColumn) {
  std::string sql = "CREATE TABLE points (tp INTEGER, placement TEXT, total_ps INTEGER);";
  for (int tp : {1, 2, 4, 8}) {
    for (const char* pl : {"linear", "snake"}) {
      sql += "INSERT INTO points VALUES (" + std::to_string(tp) + ", '" + pl + "', " +
             std::to_string(1000000 / tp + (pl[0] == 'l' ? 5000 : 0)) + ");";
    }
  }
  ASSERT_NO_FATAL_FAILURE(ExecSql(Path("sweep.sqlite"), sql));
  ASSERT_EQ(PlotCommand({"sweep", Path("sweep.sqlite"), "--x", "tp", "--y", "total_ps", "--group",
                         "placement", "--out", Path("sweep.png")}),
            0);
  ExpectPicture(Path("sweep.png"), 3);
  EXPECT_EQ(
      PlotCommand({"sweep", Path("sweep.sqlite"), "--x", "tp", "--y", "makespan", "--out", Path("bad.png")}),
      2);
  EXPECT_FALSE(std::filesystem::exists(Path("bad.png")));
}

// Two placements of one run side by side: one colour scale (the busiest link of either), the
// chosen metric, TP groups from tasks[] and memory controllers from the config's memory blocks.
TEST_F(PlotTest, HeatmapSideBySideSharesOneScale) {
  std::ofstream(Path("b.json")) << R"({"experiment": "tiny-ring", "title": "m on c: TP 2 x 1 stage",
    "config": "chip {\n  noc {\n    rows: 2\n    cols: 2\n  }\n  memory {\n    name: \"hbm\"\n    attach: \"r0c1\"\n  }\n}\n",
    "links": [{"name": "r0c0->r0c1", "bytes": 3200, "utilization": 0.25, "max_queue_ps": 7000},
              {"name": "r1c1->r1c0", "bytes": 800, "utilization": 2.0, "max_queue_ps": "1000"}],
    "dram": [{"name": "hbm0", "bytes": 4096, "utilization": 0.5, "max_queue_ps": 0}],
    "cores": [{"utilization": 0.5}, {"core": 1}, {"core": 2}, {"core": 3}]})";
  std::string err;
  ASSERT_EQ(RunPlot({"heatmap", Path("result.json"), Path("b.json"), "--dump-series", Path("h.json"), "--out",
                     Path("two.png")},
                    &err),
            0)
      << err;
  ExpectPicture(Path("two.png"), 20, 1600);  // 1 + 7.5 x 2 in wide
  nlohmann::json d = ReadJson(Path("h.json"));
  EXPECT_EQ(d["metric"], "utilization");
  EXPECT_DOUBLE_EQ(d["vmax"].get<double>(), 2.0);  // b.json's busiest link, shared by both panels
  ASSERT_EQ(d["panels"].size(), 2u);
  EXPECT_EQ(d["panels"][0]["busiest"], "r1c1->r1c0");  // 1.0 in result.json
  EXPECT_DOUBLE_EQ(d["panels"][0]["links"]["r0c0->r0c1"].get<double>(), 0.9);
  EXPECT_EQ(d["panels"][0]["groups"], nlohmann::json::parse("[[0, 1]]"));  // cores computing layer 0
  EXPECT_EQ(d["panels"][1]["groups"], nlohmann::json::array());            // no tasks[]: no outline
  EXPECT_DOUBLE_EQ(d["panels"][1]["memory"]["mc_hbm0"].get<double>(), 0.5);
  EXPECT_EQ(d["panels"][1]["title"], "m on c: TP 2 x 1 stage");  // what ran, under each panel's name
  EXPECT_EQ(d["panels"][0]["title"], "tiny-model on tiny-chip: TP 2 x 1 stage");
  // --metric queue with --vmax in a unit: links by max_queue_ps, the scale as given.
  ASSERT_EQ(RunPlot({"heatmap", Path("b.json"), "--metric", "queue", "--vmax", "5ns", "--dump-series",
                     Path("q.json"), "--out", Path("q.png")},
                    &err),
            0)
      << err;
  ExpectPicture(Path("q.png"), 20);
  d = ReadJson(Path("q.json"));
  EXPECT_EQ(d["field"], "max_queue_ps");
  EXPECT_DOUBLE_EQ(d["vmax"].get<double>(), 5000.0);
  EXPECT_EQ(d["unit"], "ns");
  EXPECT_DOUBLE_EQ(d["panels"][0]["links"]["r1c1->r1c0"].get<double>(), 1000.0);
  EXPECT_EQ(d["panels"][0]["busiest"], "r0c0->r0c1");
  EXPECT_EQ(RunPlot({"heatmap", Path("b.json"), "--metric", "queue", "--vmax", "5", "--out", Path("bad.png")},
                    &err),
            2);
  EXPECT_NE(err.find("a time needs a unit"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(Path("bad.png")));
}

// A 64-core timeline made readable: a window, a core subset, one row per group.
TEST_F(PlotTest, TimelineCoresWindowAndGroups) {
  std::string err;
  ASSERT_EQ(RunPlot({"timeline", Path("result.json"), "--cores", "1-2", "--window", "5ns:25ns",
                     "--dump-series", Path("t.json"), "--out", Path("w.png")},
                    &err),
            0)
      << err;
  ExpectPicture(Path("w.png"), 3);
  nlohmann::json d = ReadJson(Path("t.json"));
  EXPECT_EQ(d["window_us"], nlohmann::json::parse("[0.005, 0.025]"));
  ASSERT_EQ(d["rows"].size(), 2u);
  EXPECT_EQ(d["rows"][0]["label"], "core 1");
  // core 1: q_proj 0..10.5 ns clipped to 5..10.5, o_proj 22.5..30.25 clipped to 22.5..25 (us).
  ASSERT_EQ(d["rows"][0]["bars"]["compute"].size(), 2u);
  EXPECT_NEAR(d["rows"][0]["bars"]["compute"][0][0].get<double>(), 0.005, 1e-12);
  EXPECT_NEAR(d["rows"][0]["bars"]["compute"][0][1].get<double>(), 0.0055, 1e-12);
  EXPECT_NEAR(d["rows"][0]["bars"]["compute"][1][1].get<double>(), 0.0025, 1e-12);
  EXPECT_EQ(d["rows"][1]["label"], "core 2");
  EXPECT_NEAR(d["rows"][1]["bars"]["memory"][0][1].get<double>(), 0.020, 1e-12);
  // --group stage: cores 0 and 1 compute layer 0; core 2 only reads memory and stays alone.
  ASSERT_EQ(RunPlot({"timeline", Path("result.json"), "--group", "stage", "--dump-series", Path("g.json"),
                     "--out", Path("g.png")},
                    &err),
            0)
      << err;
  ExpectPicture(Path("g.png"), 3);
  d = ReadJson(Path("g.json"));
  EXPECT_EQ(d["title"],
            "tiny: tasks per pipeline stage (shade: share of its cores busy)\n"
            "tiny-model on tiny-chip: TP 2 x 1 stage");
  ASSERT_EQ(d["rows"].size(), 2u);
  EXPECT_EQ(d["rows"][0]["cores"], nlohmann::json::parse("[0, 1]"));
  EXPECT_EQ(d["rows"][1]["cores"], nlohmann::json::parse("[2]"));
  // Both cores compute 0..10.5 ns (shade 1), then only core 1 (shade 0.5) from 22.5 ns.
  EXPECT_EQ(d["rows"][0]["bars"]["compute"][0][2], 1.0);
  EXPECT_EQ(d["rows"][0]["bars"]["compute"][1][2], 0.5);
  // --group tp: the transfer 0 -> 1 joins them (the same groups here).
  ASSERT_EQ(RunPlot({"timeline", Path("result.json"), "--group", "tp", "--dump-series", Path("p.json"),
                     "--out", Path("p.png")},
                    &err),
            0)
      << err;
  EXPECT_EQ(ReadJson(Path("p.json"))["rows"][0]["cores"], nlohmann::json::parse("[0, 1]"));
  EXPECT_EQ(RunPlot({"timeline", Path("result.json"), "--cores", "9-12", "--out", Path("bad.png")}, &err), 2);
  EXPECT_NE(err.find("no task runs on these cores (cores with tasks: 0-2)"), std::string::npos) << err;
  // Ranges are not expanded: 0-9999999999 took 24 GB and failed (0-99999999: 38 s and 12 GB).
  ASSERT_EQ(RunPlot({"timeline", Path("result.json"), "--cores", "1-1,0-9999999999,5", "--dump-series",
                     Path("c.json"), "--out", Path("c.png")},
                    &err),
            0)
      << err;
  EXPECT_NE(err.find("no task on core(s) 3-9999999999\n"), std::string::npos) << err;
  EXPECT_EQ(ReadJson(Path("c.json"))["rows"].size(), 3u);
  EXPECT_EQ(RunPlot({"timeline", Path("result.json"), "--window", "30:10", "--out", Path("bad.png")}, &err),
            2);
  EXPECT_FALSE(std::filesystem::exists(Path("bad.png")));
}

// Search stores (tpsim search --db): latency against energy per token with each store's
// front. Of (10 ms, 3 mJ), (20 ms, 1 mJ), (30 ms, 2 mJ) the last is off the front; a store
// without energy is refused.
TEST_F(PlotTest, FrontDrawsEachStoresParetoFront) {
  WriteFrontStore(Path("front.sqlite"));
  std::string err;
  ASSERT_EQ(RunPlot({"front", Path("front.sqlite") + ":32 MiB", "--dump-series", Path("f.json"), "--out",
                     Path("front.png")},
                    &err),
            0)
      << err;
  ExpectPicture(Path("front.png"), 3);
  const nlohmann::json d = ReadJson(Path("f.json"));
  ASSERT_EQ(d["stores"].size(), 1u);
  EXPECT_EQ(d["stores"][0]["label"], "32 MiB");
  EXPECT_EQ(d["stores"][0]["points"], 3);
  ASSERT_EQ(d["stores"][0]["front"].size(), 2u);
  EXPECT_EQ(d["stores"][0]["front"][0][0], "16x4x1");
  EXPECT_DOUBLE_EQ(d["stores"][0]["front"][0][2].get<double>(), 3.0);  // one replica: as stored
  EXPECT_EQ(d["stores"][0]["front"][1][0], "4x4x4");
  EXPECT_DOUBLE_EQ(d["stores"][0]["front"][1][1].get<double>(), 20.0);
  EXPECT_NEAR(d["stores"][0]["front"][1][2].get<double>(), 0.7, 1e-12);
  EXPECT_EQ(RunPlot({"front", Path("missing.sqlite"), "--out", Path("bad.png")}, &err), 2);
}

// A store written before static_energy_j was kept cannot give the energy per token of
// several replicas sharing the chip: such a row is refused, a one-replica row is drawn.
TEST_F(PlotTest, FrontRefusesReplicasWithoutStaticEnergy) {
  const std::string create =
      "CREATE TABLE points (config_hash TEXT, point_index INTEGER, status TEXT, \"mapping.tp\", "
      "\"mapping.pipeline_stages\", \"search.replicas\", total_ps INTEGER, energy_per_token_j REAL, "
      "energy_j REAL);";
  ExecSql(Path("old.sqlite"),
          create +
              "INSERT INTO points VALUES ('a', 0, 'ok', 16, 4, 1, 10000000000, 0.003, 0.3);"
              "INSERT INTO points VALUES ('b', 1, 'ok', 4, 4, 4, 20000000000, 0.001, 0.1);");
  std::string err;
  EXPECT_EQ(RunPlot({"front", Path("old.sqlite"), "--out", Path("bad.png")}, &err), 2);
  EXPECT_NE(
      err.find("row 1: no static_energy_j: the store was written before it was kept (2026-12-06), so the "
               "energy per token of 4 replicas sharing the chip cannot be derived"),
      std::string::npos)
      << err;
  EXPECT_FALSE(std::filesystem::exists(Path("bad.png")));
  ExecSql(Path("one.sqlite"),
          create + "INSERT INTO points VALUES ('a', 0, 'ok', 16, 4, 1, 10000000000, 0.003, 0.3);");
  EXPECT_EQ(RunPlot({"front", Path("one.sqlite"), "--out", Path("one.png")}, &err), 0) << err;
}

// A search store of a request stream (tpsim search serving-fused --db): its points fill the
// serving columns, and a served stream reports no energy. The refusal said the chip had no
// energy block (serving-fused's chip has one); it names the request stream now. A run store
// without energy still names the chip.
TEST_F(PlotTest, FrontNamesWhyAStoreHasNoEnergy) {
  ExecSql(Path("served.sqlite"),
          "CREATE TABLE points (config_hash TEXT, point_index INTEGER, status TEXT, \"mapping.tp\", "
          "\"mapping.pipeline_stages\", \"search.replicas\", total_ps INTEGER, energy_per_token_j REAL, "
          "latency_p99_ms REAL);"
          "INSERT INTO points VALUES ('a', 0, 'ok', 4, 8, 1, NULL, NULL, 812.5);");
  std::string err;
  EXPECT_EQ(RunPlot({"front", Path("served.sqlite"), "--out", Path("bad.png")}, &err), 2);
  EXPECT_NE(err.find("row 0: no energy per token: the store's points serve a request stream "
                     "(workload.requests), and a served stream reports no energy"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("energy block"), std::string::npos) << err;
  ExecSql(Path("dark.sqlite"),
          "CREATE TABLE points (config_hash TEXT, point_index INTEGER, status TEXT, \"mapping.tp\", "
          "\"mapping.pipeline_stages\", \"search.replicas\", total_ps INTEGER, energy_per_token_j REAL, "
          "latency_p99_ms REAL);"
          "INSERT INTO points VALUES ('a', 0, 'ok', 4, 8, 1, 10000000000, NULL, NULL);");
  EXPECT_EQ(RunPlot({"front", Path("dark.sqlite"), "--out", Path("bad.png")}, &err), 2);
  EXPECT_NE(err.find("row 0: no energy per token (the chip has no energy block, or an fp32 workload meets no "
                     "mac_fp32_pj)"),
            std::string::npos)
      << err;
  EXPECT_FALSE(std::filesystem::exists(Path("bad.png")));
}

// `plot sweep --help`: --facet's panels share the x axis, and y only with --sharey or --ratio
// (plt.subplots sharey); it said they share both axes.
TEST_F(PlotTest, FacetHelpSaysWhichAxesPanelsShare) {
  const std::string help = Path("help.txt");
  const std::string cmd = *python_ + " " + PlotScriptPath() + " sweep --help > " + help;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::string text;  // argparse wraps the help: whitespace runs read as one space
  for (char c : ReadFile(help)) {
    const bool space = c == ' ' || c == '\n';
    if (!space || (!text.empty() && text.back() != ' ')) text += space ? ' ' : c;
  }
  EXPECT_NE(
      text.find("one panel per value of FIELD (panels share the x axis; the y axis only with --sharey or "
                "--ratio"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("share both axes"), std::string::npos) << text;
}

// A K-vs-M store with three swept fields: prefill_ps = seq x 64e6 / bw for k_split (the
// all-reduce over the links dominates) and seq x 5e5 for m_split_rotate, so k_split / m_split_rotate
// is exactly 2 at 64 GB/s and 0.5 at 256 GB/s. Plus one invalid point (NULL metrics).
void WriteKvsMStore(const std::string& path) {
  std::string sql =
      "CREATE TABLE points (config_hash TEXT PRIMARY KEY, point_index INTEGER, status TEXT, engine TEXT, "
      "\"mapping.partition\", \"workload.seq_len\", \"chip.noc.link_bandwidth_gbps\", prefill_ps INTEGER, "
      "spilled_bytes INTEGER, core_utilization REAL, wall_ms REAL, error TEXT, config TEXT);";
  int i = 0;
  for (const char* part : {"k_split", "m_split_rotate"}) {
    for (int seq : {128, 512, 2048}) {
      for (int bw : {64, 256}) {
        const long long ps = part[0] == 'k' ? seq * 64000000LL / bw : seq * 500000LL;
        sql += "INSERT INTO points VALUES ('h" + std::to_string(i) + "', " + std::to_string(i) + ", 'ok', " +
               "'analytical', '" + part + "', " + std::to_string(seq) + ", " + std::to_string(bw) + ", " +
               std::to_string(ps) + ", " + std::to_string(seq * 4096) + ", 0.5, 1.0, NULL, '');";
        ++i;
      }
    }
  }
  sql +=
      "INSERT INTO points VALUES ('bad', 99, 'invalid', 'analytical', 'mn_2d', 128, 64, NULL, NULL, NULL, "
      "1.0, 'mapping.tp: 3: not a divisor', '');";
  ExecSql(path, sql);
}

TEST_F(PlotTest, SweepFacetAndColorDrawEverySeries) {
  WriteKvsMStore(Path("kvm.sqlite"));
  std::string err;
  ASSERT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--color",
                     "mapping.partition", "--facet", "chip.noc.link_bandwidth_gbps", "--dump-series",
                     Path("s.json"), "--out", Path("facet.png")},
                    &err),
            0)
      << err;
  ExpectPicture(Path("facet.png"), 3);
  EXPECT_NE(err.find("left out 1 invalid point(s)"), std::string::npos) << err;
  const nlohmann::json d = ReadJson(Path("s.json"));
  EXPECT_EQ(d["points"], 12);
  ASSERT_EQ(d["panels"].size(), 2u);
  for (int p = 0; p < 2; ++p) {
    const int bw = p == 0 ? 64 : 256;
    EXPECT_EQ(d["panels"][p]["facet"], std::to_string(bw));
    ASSERT_EQ(d["panels"][p]["series"].size(), 2u);
    const auto& k = d["panels"][p]["series"][0];
    const auto& m = d["panels"][p]["series"][1];
    EXPECT_EQ(k["color"], "k_split");
    EXPECT_EQ(m["color"], "m_split_rotate");
    EXPECT_EQ(k["x"], nlohmann::json({128, 512, 2048}));
    for (int j = 0; j < 3; ++j) {
      const long long seq = 128LL << (2 * j);
      EXPECT_EQ(k["y"][j].get<long long>(), seq * 64000000LL / bw);
      EXPECT_EQ(m["y"][j].get<long long>(), seq * 500000LL);
    }
  }
  // Units from the names: prefill_ps up to 2048 x 1e6 ps = 2.048 ms -> ms; seq_len in tokens.
  EXPECT_EQ(d["ylabel"], "prefill (ms)");
  EXPECT_DOUBLE_EQ(d["y_factor"].get<double>(), 1e-9);
  EXPECT_EQ(d["xlabel"], "workload.seq_len (tokens)");
  EXPECT_EQ(d["logx"], 2);  // 128 .. 2048 spans 16x, all powers of 2
}

TEST_F(PlotTest, SweepUndrawnFieldWithSeveralValuesIsAnError) {
  WriteKvsMStore(Path("kvm.sqlite"));
  std::string err;
  EXPECT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--color",
                     "mapping.partition", "--out", Path("saw.png")},
                    &err),
            2);
  EXPECT_FALSE(std::filesystem::exists(Path("saw.png")));
  EXPECT_NE(err.find("swept field chip.noc.link_bandwidth_gbps has 2 values (64, 256) but is not drawn"),
            std::string::npos)
      << err;
  // Holding it with --where is the other way out; --where uses the require syntax.
  ASSERT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--color",
                     "mapping.partition", "--where",
                     "chip.noc.link_bandwidth_gbps == 256 && (workload.seq_len >= 512 || "
                     "mapping.partition == \"m_split_rotate\")",
                     "--dump-series", Path("w.json"), "--out", Path("where.png")},
                    &err),
            0)
      << err;
  ExpectPicture(Path("where.png"), 3);
  const nlohmann::json d = ReadJson(Path("w.json"));
  EXPECT_EQ(d["points"], 5);
  EXPECT_EQ(d["fixed"]["chip.noc.link_bandwidth_gbps"], 256);
  EXPECT_EQ(d["panels"][0]["series"][0]["x"], nlohmann::json({512, 2048}));
  EXPECT_EQ(d["panels"][0]["series"][1]["x"], nlohmann::json({128, 512, 2048}));
  // A bad expression names the column; an unknown column lists the real ones.
  EXPECT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--where",
                     "workload.seq_len >", "--out", Path("bad.png")},
                    &err),
            2);
  EXPECT_NE(err.find("col 19: expected a value"), std::string::npos) << err;
  EXPECT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--where",
                     "seq_len == 1", "--out", Path("bad.png")},
                    &err),
            2);
  EXPECT_NE(err.find("no column 'seq_len'"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(Path("bad.png")));
}

// --hline: a number, or a swept field held at one value (the SLO of a serving sweep), in the
// store's unit of the --y metric; anything else is exit 2.
TEST_F(PlotTest, SweepHorizontalLines) {
  WriteKvsMStore(Path("kvm.sqlite"));
  std::string err;
  ASSERT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--color",
                     "mapping.partition", "--facet", "chip.noc.link_bandwidth_gbps", "--hline", "1500:budget",
                     "--dump-series", Path("h.json"), "--out", Path("h.png")},
                    &err),
            0)
      << err;
  ExpectPicture(Path("h.png"), 3);
  const nlohmann::json d = ReadJson(Path("h.json"));
  ASSERT_EQ(d["hlines"].size(), 1u);
  EXPECT_EQ(d["hlines"][0]["y"], 1500.0);
  EXPECT_EQ(d["hlines"][0]["label"], "budget");
  EXPECT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--color",
                     "mapping.partition", "--facet", "chip.noc.link_bandwidth_gbps", "--hline", "slo",
                     "--out", Path("bad.png")},
                    &err),
            2);
  EXPECT_NE(err.find("neither a number nor a swept field held at one value"), std::string::npos) << err;
}

TEST_F(PlotTest, SweepRatioOfTwoColorSeries) {
  WriteKvsMStore(Path("kvm.sqlite"));
  std::string err;
  ASSERT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--color",
                     "mapping.partition", "--facet", "chip.noc.link_bandwidth_gbps", "--ratio",
                     "k_split/m_split_rotate", "--dump-series", Path("r.json"), "--out", Path("ratio.png")},
                    &err),
            0)
      << err;
  ExpectPicture(Path("ratio.png"), 3);
  const nlohmann::json d = ReadJson(Path("r.json"));
  ASSERT_EQ(d["panels"].size(), 2u);
  for (int p = 0; p < 2; ++p) {
    ASSERT_EQ(d["panels"][p]["series"].size(), 1u);
    const auto& s = d["panels"][p]["series"][0];
    EXPECT_EQ(s["label"], "k_split / m_split_rotate");
    EXPECT_EQ(s["y"], nlohmann::json::array({p == 0 ? 2.0 : 0.5, p == 0 ? 2.0 : 0.5, p == 0 ? 2.0 : 0.5}));
  }
  EXPECT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--color",
                     "mapping.partition", "--facet", "chip.noc.link_bandwidth_gbps", "--ratio",
                     "k_split/mn_2d", "--out", Path("bad.png")},
                    &err),
            2);
  EXPECT_NE(err.find("'mn_2d' is not a value of --color mapping.partition (values: k_split, m_split_rotate)"),
            std::string::npos)
      << err;
  EXPECT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--ratio",
                     "k_split/m_split_rotate", "--out", Path("bad.png")},
                    &err),
            2);
  // A column that is no metric: its value (a whole config) was the error message.
  EXPECT_EQ(
      RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "config", "--color",
               "mapping.partition", "--facet", "chip.noc.link_bandwidth_gbps", "--out", Path("bad.png")},
              &err),
      2);
  EXPECT_NE(
      err.find(
          "--y config: not a metric of the points (metrics: prefill_ps, spilled_bytes, core_utilization)"),
      std::string::npos)
      << err;
  // A value against itself drew a line of ones.
  EXPECT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--color",
                     "mapping.partition", "--facet", "chip.noc.link_bandwidth_gbps", "--ratio",
                     "k_split/k_split", "--out", Path("bad.png")},
                    &err),
            2);
  EXPECT_NE(err.find("--ratio k_split/k_split: A and B are the same value (every ratio would be 1)"),
            std::string::npos)
      << err;
  EXPECT_FALSE(std::filesystem::exists(Path("bad.png")));
}

TEST_F(PlotTest, SweepLogAxesUnitsAndHelp) {
  WriteKvsMStore(Path("kvm.sqlite"));
  std::string err;
  ASSERT_EQ(
      RunPlot({"sweep", Path("kvm.sqlite"), "--x", "chip.noc.link_bandwidth_gbps", "--y", "spilled_bytes",
               "--color", "workload.seq_len", "--where", "mapping.partition == \"k_split\"", "--logx",
               "--logy", "--dump-series", Path("l.json"), "--out", Path("log.png")},
              &err),
      0)
      << err;
  ExpectPicture(Path("log.png"), 3);
  const nlohmann::json d = ReadJson(Path("l.json"));
  EXPECT_EQ(d["logx"], 2);  // 64 and 256: powers of 2
  EXPECT_EQ(d["logy"], true);
  EXPECT_EQ(d["xlabel"], "chip.noc.link_bandwidth_gbps (GB/s)");
  EXPECT_EQ(d["ylabel"], "spilled (MiB)");  // up to 2048 x 4096 B = 8 MiB
  EXPECT_DOUBLE_EQ(d["y_factor"].get<double>(), 1.0 / (1 << 20));
  // Every option is described by --help (argparse prints it and exits 0).
  const std::string help = Path("help.txt");
  const std::string cmd = *python_ + " " + PlotScriptPath() + " sweep --help > " + help;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string text = ReadFile(help);
  for (const char* opt :
       {"--x FIELD", "--y METRIC", "--color FIELD", "--facet FIELD", "--where EXPR", "--logx", "--logy",
        "--ratio A/B", "--sharey", "--table", "--dump-series FILE", "--out PNG"}) {
    EXPECT_NE(text.find(opt), std::string::npos) << opt;
  }
  // --logy over a metric with a zero: exit 2.
  EXPECT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--color",
                     "mapping.partition", "--facet", "chip.noc.link_bandwidth_gbps", "--where",
                     "prefill_ps - prefill_ps < 0", "--out", Path("bad.png")},
                    &err),
            2);
  EXPECT_NE(err.find("no point of 13 left to draw"), std::string::npos) << err;
}

// The CSVs of a small disaggregated run of `tpsim serve` (WriteServingCsvs).
TEST_F(PlotTest, ServingRenders) {
  WriteServingCsvs(Path("req.csv"), Path("kv.csv"));
  ASSERT_EQ(PlotCommand({"serving", Path("req.csv"), Path("kv.csv"), "--out", Path("serving.png")}), 0);
  ExpectPicture(Path("serving.png"), 3);
  // Swapped files: the requests CSV lacks the KV columns and vice versa.
  EXPECT_EQ(PlotCommand({"serving", Path("kv.csv"), Path("req.csv"), "--out", Path("bad.png")}), 2);
  std::ofstream(Path("none_ok.csv")) << "id,output_tokens,ttft_ms,mean_tpot_ms,status\n0,4,,,rejected\n";
  EXPECT_EQ(PlotCommand({"serving", Path("none_ok.csv"), Path("kv.csv"), "--out", Path("bad.png")}), 2);
  EXPECT_EQ(PlotCommand({"serving", Path("req.csv"), "--out", Path("bad.png")}), 2);
  EXPECT_FALSE(std::filesystem::exists(Path("bad.png")));
}

TEST_F(PlotTest, BadInputExitsTwo) {
  EXPECT_EQ(PlotCommand({"heatmap", Path("missing.json"), "--out", Path("x.png")}), 2);
  std::ofstream(Path("garbage.json")) << "{ not json";
  EXPECT_EQ(PlotCommand({"timeline", Path("garbage.json"), "--out", Path("x.png")}), 2);
  std::ofstream(Path("notasks.json")) << R"({"links": [], "cores": []})";
  EXPECT_EQ(PlotCommand({"timeline", Path("notasks.json"), "--out", Path("x.png")}), 2);
  EXPECT_EQ(PlotCommand({"heatmap", Path("notasks.json"), "--out", Path("x.png")}), 2);
  std::ofstream(Path("badlink.json")) << R"({"links": [{"name": "r0c0", "utilization": 1}]})";
  EXPECT_EQ(PlotCommand({"heatmap", Path("badlink.json"), "--out", Path("x.png")}), 2);
  EXPECT_EQ(PlotCommand({"nonsense"}), 2);
  EXPECT_EQ(PlotCommand({}), 2);
  // A device (never ends: reading it grew memory until the process was killed) or a FIFO
  // (blocks): refused before reading, in every command that reads a file.
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0600), 0);
  for (const std::string& dev : {std::string("/dev/zero"), Path("fifo")}) {
    EXPECT_EQ(PlotCommand({"heatmap", dev, "--out", Path("x.png")}), 2) << dev;
    EXPECT_EQ(PlotCommand({"timeline", dev, "--out", Path("x.png")}), 2) << dev;
    EXPECT_EQ(PlotCommand({"energy", dev, "--out", Path("x.png")}), 2) << dev;
    EXPECT_EQ(PlotCommand({"sweep", dev, "--x", "a", "--y", "b", "--out", Path("x.png")}), 2) << dev;
    EXPECT_EQ(PlotCommand({"front", dev, "--out", Path("x.png")}), 2) << dev;
    EXPECT_EQ(PlotCommand({"serving", dev, dev, "--out", Path("x.png")}), 2) << dev;
  }
  EXPECT_FALSE(std::filesystem::exists(Path("x.png")));
}

TEST_F(PlotTest, ScriptOverrideAndMissingScript) {
  ASSERT_EQ(setenv("TPSIM_PLOT_SCRIPT", Path("nowhere.py").c_str(), 1), 0);
  EXPECT_EQ(PlotScriptPath(), Path("nowhere.py"));
  EXPECT_EQ(PlotCommand({"heatmap", Path("result.json"), "--out", Path("links.png")}), 2);
  unsetenv("TPSIM_PLOT_SCRIPT");
  EXPECT_EQ(PlotScriptPath(), std::string(TPSIM_SOURCE_DIR) + "/traces/plot/tpsim_plot.py");
}

TEST_F(PlotTest, SameInputSameBytes) {
  ASSERT_EQ(PlotCommand({"heatmap", Path("result.json"), "--out", Path("a.png")}), 0);
  ASSERT_EQ(PlotCommand({"heatmap", Path("result.json"), "--out", Path("b.png")}), 0);
  auto read = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(read(Path("a.png")), read(Path("b.png")));
}

// The inputs of EveryCommand in dir, beside the fixture's result.json.
void WriteEveryInput(const std::filesystem::path& dir) {
  WriteEnergyResult((dir / "e.json").string());
  WriteKvsMStore((dir / "kvm.sqlite").string());
  WriteFrontStore((dir / "front.sqlite").string());
  WriteServingCsvs((dir / "req.csv").string(), (dir / "kv.csv").string());
}

// One invocation of each plot command on the inputs WriteEveryInput wrote into dir, drawing
// to dir/COMMAND.EXT.
std::vector<std::vector<std::string>> EveryCommand(const std::filesystem::path& dir, const std::string& ext) {
  auto at = [&](const std::string& name) { return (dir / name).string(); };
  return {{"heatmap", at("result.json"), "--out", at("heatmap." + ext)},
          {"timeline", at("result.json"), "--out", at("timeline." + ext)},
          {"sweep", at("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--color",
           "mapping.partition", "--facet", "chip.noc.link_bandwidth_gbps", "--out", at("sweep." + ext)},
          {"energy", at("e.json"), "--out", at("energy." + ext)},
          {"front", at("front.sqlite"), "--out", at("front." + ext)},
          {"serving", at("req.csv"), at("kv.csv"), "--out", at("serving." + ext)}};
}

// The names in dir that a write left behind (its temporary files: .NAME.tpsim-tmp-XXXXXX).
std::vector<std::string> TempFiles(const std::filesystem::path& dir) {
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().find("tpsim-tmp") != std::string::npos)
      left.push_back(e.path().string());
  }
  return left;
}

// --out's extension picks the format. Every command draws .svg (the SVG writer refused the
// PNG's Software metadata key: exit 2 and a partial file) and .pdf (one save serves them
// all), and two runs give the same bytes: no date in either (a PDF carried its /CreationDate,
// so a second later the bytes differed). Other extensions are refused before anything is drawn.
TEST_F(PlotTest, SvgOfEveryCommandAndPdfAreTheSameBytesEachRun) {
  WriteEveryInput(dir_);
  std::string err;
  for (const auto& args : EveryCommand(dir_, "svg")) {
    EXPECT_EQ(RunPlot(args, &err), 0) << args[0] << ": " << err;
    const std::string svg = ReadFile(args.back());
    EXPECT_NE(svg.find("<svg"), std::string::npos) << args.back();
    EXPECT_EQ(svg.find("<dc:date>"), std::string::npos) << args.back();
  }
  ASSERT_EQ(RunPlot({"heatmap", Path("result.json"), "--out", Path("heatmap.pdf")}, &err), 0) << err;
  const std::string pdf = ReadFile(Path("heatmap.pdf"));
  EXPECT_EQ(pdf.substr(0, 5), "%PDF-");
  EXPECT_EQ(pdf.find("/CreationDate"), std::string::npos);
  ::sleep(1);  // a date stamped in would differ
  for (const std::string ext : {"svg", "pdf", "PDF"}) {
    EXPECT_EQ(RunPlot({"heatmap", Path("result.json"), "--out", Path("again." + ext)}, &err), 0) << err;
    EXPECT_TRUE(ReadFile(Path("again." + ext)) == ReadFile(Path("heatmap." + (ext == "PDF" ? "pdf" : ext))))
        << ext << ": not the same bytes";
  }
  EXPECT_EQ(RunPlot({"heatmap", Path("result.json"), "--out", Path("h.jpg")}, &err), 2);
  const std::string want = ": .jpg is not a picture format tpsim plot writes; name a .png, .svg or .pdf file";
  EXPECT_NE(err.find("--out " + Path("h.jpg") + want), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(Path("h.jpg")));
  // Without an extension: PNG, at PATH.png as matplotlib named it.
  ASSERT_EQ(RunPlot({"heatmap", Path("result.json"), "--out", Path("plain")}, &err), 0) << err;
  ExpectPicture(Path("plain.png"), 20);
  EXPECT_EQ(TempFiles(dir_), std::vector<std::string>{});
}

// An output that names an input (by another path, through a link) or another output of the
// command: exit 2 naming the flag, before anything is read or written; the input keeps its
// bytes. Before, --dump-series over the result replaced it with the drawn series, and over a
// sweep store turned the database into JSON text, exit 0.
TEST_F(PlotTest, AnOutputNamingAnInputOrAnotherOutputIsRefused) {
  WriteEveryInput(dir_);
  const auto commands = EveryCommand(dir_, "png");
  const std::string store = ReadFile(Path("kvm.sqlite"));
  const std::string front = ReadFile(Path("front.sqlite"));
  const std::string kv = ReadFile(Path("kv.csv"));
  std::filesystem::create_symlink(Path("result.json"), Path("link.json"));
  const std::string dir_name = dir_.filename().string();
  std::string err;
  for (const auto& [in, dump] : std::vector<std::pair<std::string, std::string>>{
           {Path("result.json"), Path("result.json")},
           {Path("result.json"), (dir_ / "." / "result.json").string()},
           {Path("result.json"), (dir_ / ".." / dir_name / "result.json").string()},
           {Path("result.json"), Path("link.json")},
           {Path("link.json"), Path("result.json")}}) {
    EXPECT_EQ(RunPlot({"heatmap", in, "--out", Path("h.png"), "--dump-series", dump}, &err), 2) << dump;
    EXPECT_NE(err.find("tpsim plot: --dump-series " + dump + ": names an input of this command (" + in +
                       "); write the output elsewhere"),
              std::string::npos)
        << err;
  }
  EXPECT_EQ(ReadFile(Path("result.json")), kResult);
  EXPECT_EQ(RunPlot({"sweep", Path("kvm.sqlite"), "--x", "workload.seq_len", "--y", "prefill_ps", "--color",
                     "mapping.partition", "--facet", "chip.noc.link_bandwidth_gbps", "--dump-series",
                     Path("kvm.sqlite"), "--out", Path("s.png")},
                    &err),
            2);
  EXPECT_NE(err.find("--dump-series " + Path("kvm.sqlite") + ": names an input"), std::string::npos) << err;
  EXPECT_TRUE(ReadFile(Path("kvm.sqlite")) == store) << "the sweep store was changed";
  EXPECT_EQ(RunPlot({"front", Path("front.sqlite") + ":SRAM 16 MiB", "--dump-series", Path("front.sqlite"),
                     "--out", Path("f.png")},
                    &err),
            2);
  EXPECT_TRUE(ReadFile(Path("front.sqlite")) == front) << "the search store was changed";
  // --out too, whatever its extension; without one it names PATH.png.
  EXPECT_EQ(RunPlot({"serving", Path("req.csv"), Path("kv.csv"), "--out", Path("kv.csv")}, &err), 2);
  EXPECT_NE(err.find("--out " + Path("kv.csv") + ": names an input of this command (" + Path("kv.csv") + ")"),
            std::string::npos)
      << err;
  EXPECT_EQ(ReadFile(Path("kv.csv")), kv);
  std::filesystem::copy_file(Path("result.json"), Path("r.png"));
  EXPECT_EQ(RunPlot({"timeline", Path("r.png"), "--out", Path("r")}, &err), 2);
  EXPECT_NE(err.find("--out " + Path("r.png") + ": names an input"), std::string::npos) << err;
  EXPECT_EQ(ReadFile(Path("r.png")), kResult);
  // Two outputs naming one file: the series would have been overwritten by the picture.
  for (const auto& args : commands) {
    if (args[0] == "serving") continue;     // no --dump-series
    std::vector<std::string> twice = args;  // the same file by another path
    twice.insert(twice.end(), {"--dump-series", "./" + std::filesystem::relative(args.back()).string()});
    EXPECT_EQ(RunPlot(twice, &err), 2) << args[0];
    EXPECT_NE(err.find("names the same file as --out; give each output its own file"), std::string::npos)
        << args[0] << ": " << err;
    EXPECT_FALSE(std::filesystem::exists(args.back())) << args.back();
  }
}

// Holds RLIMIT_FSIZE at `bytes` (soft limit) while it lives: a larger write fails with EFBIG
// (python ignores SIGXFSZ).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit l = saved_;
    l.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &l);
  }
  ~FileSizeLimit() { setrlimit(RLIMIT_FSIZE, &saved_); }

 private:
  rlimit saved_{};
};

// A file that cannot be written is exit 1 with one line naming it and the reason, as in
// tpsim's other commands (it was exit 2, the code of bad input), and leaves no partial file:
// the picture and the series are written beside the target and renamed over it.
TEST_F(PlotTest, AFailedWriteExitsOneAndLeavesNoPartialFile) {
  std::string err;
  EXPECT_EQ(RunPlot({"heatmap", Path("result.json"), "--out", Path("nodir/h.png")}, &err), 1);
  EXPECT_EQ(err, "tpsim plot: cannot write " + Path("nodir/h.png") + ": cannot create a temporary file in " +
                     Path("nodir") + " (No such file or directory)\n");
  EXPECT_EQ(RunPlot({"timeline", Path("result.json"), "--dump-series", Path("nodir/t.json"), "--out",
                     Path("t.png")},
                    &err),
            1);
  EXPECT_EQ(err, "tpsim plot: cannot write " + Path("nodir/t.json") + ": cannot create a temporary file in " +
                     Path("nodir") + " (No such file or directory)\n");
  EXPECT_EQ(RunPlot({"heatmap", Path("result.json"), "--out", dir_.string()}, &err), 1);
  EXPECT_EQ(err, "tpsim plot: cannot write " + dir_.string() + ": is a directory\n");
  if (std::filesystem::exists("/dev/full")) {  // a device is written in place
    EXPECT_EQ(RunPlot({"heatmap", Path("result.json"), "--out", "/dev/full"}, &err), 1);
    EXPECT_EQ(err, "tpsim plot: cannot write /dev/full: No space left on device\n");
  }
  // A write that fails half-way (the picture is larger than the file size limit) keeps the
  // file that was there and leaves no temporary file.
  std::ofstream(Path("old.png")) << "old";
  std::ofstream(Path("old.json")) << "old";
  {
    const FileSizeLimit limit(16 << 10);
    EXPECT_EQ(RunPlot({"heatmap", Path("result.json"), "--out", Path("old.png")}, &err), 1);
  }
  EXPECT_EQ(err, "tpsim plot: cannot write " + Path("old.png") + ": File too large\n");
  EXPECT_TRUE(ReadFile(Path("old.png")) == "old") << "old.png was replaced";
  {
    const FileSizeLimit limit(256);
    EXPECT_EQ(
        RunPlot({"heatmap", Path("result.json"), "--dump-series", Path("old.json"), "--out", Path("new.png")},
                &err),
        1);
  }
  EXPECT_EQ(err, "tpsim plot: cannot write " + Path("old.json") + ": File too large\n");
  EXPECT_TRUE(ReadFile(Path("old.json")) == "old") << "old.json was replaced";
  EXPECT_EQ(TempFiles(dir_), std::vector<std::string>{});
}

}  // namespace
}  // namespace tpsim::traces
