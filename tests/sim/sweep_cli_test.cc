// End to end: the real `tpsim` binary running sweeps. A TLM point (in a child
// process) and an analytical point into one store; a TLM point past its time
// limit; SIGKILL of the real binary mid-sweep, then resume: every point exactly once;
// SIGKILL of a TLM sweep leaves no orphaned child simulation behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/sim/spawn_test_util.h"
#include "tests/sim/sqlite_test_util.h"
#include "tests/sim/temp_dir_test.h"

namespace tpsim::sweep {
namespace {

namespace fs = std::filesystem;
using test::kKillSweep;
using test::Query;
using test::Scalar;
using test::WaitForRows;

const std::string kTpsim = std::string(TPSIM_BINARY_DIR) + "/bin/tpsim";
const std::string kBase = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/reference-qwen3-4b.textproto";

// One small point of the reference job: 1 layer, 1 stage, TP=4, prompt 64, 1 decode step.
const char* kSmallPoint = R"(
axis { field: "workload.num_layers" values: "1" }
axis { field: "mapping.pipeline_stages" values: "1" }
axis { field: "workload.decode_steps" values: "1" }
axis { field: "workload.seq_len" values: "64" }
)";

// Starts `tpsim ARGS...` with stdout and stderr to `log`.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {kTpsim};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::SpawnLogged(argv, log);
}

// Runs `tpsim ARGS...` to completion; returns its exit status (-1: killed).
int RunTpsim(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = Spawn(args, log);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Pids of live processes whose command line contains `needle`.
std::vector<int> ProcessesMentioning(const std::string& needle) {
  std::vector<int> pids;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator("/proc", ec)) {
    const std::string name = d.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = ReadFile(d.path() / "cmdline");
    for (char& c : cmd) {
      if (c == '\0') c = ' ';
    }
    std::string stat = ReadFile(d.path() / "stat");
    size_t paren = stat.rfind(')');
    bool zombie = paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
    if (!zombie && cmd.find(needle) != std::string::npos) pids.push_back(std::stoi(name));
  }
  return pids;
}

class SweepCliTest : public test::TempDirTest {
 protected:
  SweepCliTest() : TempDirTest("tpsim-sweep-cli") {}
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kTpsim)) << kTpsim << " not built";
    TempDirTest::SetUp();
  }

  std::string SweepFile(const std::string& name, const std::string& body) {
    std::string p = (dir_ / name).string();
    std::ofstream(p) << "base: \"" << kBase << "\"\n" << body;
    return p;
  }
};

TEST_F(SweepCliTest, TlmPointInAChildAndAnAnalyticalPointShareOneStore) {
  const std::string db = Path("mixed.sqlite");
  std::string tlm = SweepFile("tlm.textproto", std::string(kSmallPoint) + "engine: \"tlm\"\n");
  std::string ana = SweepFile("ana.textproto", std::string(kSmallPoint) + "engine: \"analytical\"\n");
  ASSERT_EQ(RunTpsim({"sweep", tlm, "--db", db, "--jobs", "1"}, Path("tlm.log")), 0)
      << ReadFile(Path("tlm.log"));
  ASSERT_EQ(RunTpsim({"sweep", ana, "--db", db, "--jobs", "1", "--csv", Path("out.csv")}, Path("ana.log")), 0)
      << ReadFile(Path("ana.log"));

  auto rows = Query(db,
                    "SELECT engine, status, \"workload.seq_len\", \"workload.num_layers\", total_ps, "
                    "prefill_ps, error, config_hash FROM points ORDER BY engine");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0], "analytical");
  EXPECT_EQ(rows[1][0], "tlm");
  for (const auto& r : rows) {
    EXPECT_EQ(r[1], "ok") << r[0] << ": " << r[6];
    EXPECT_EQ(r[2], "64");
    EXPECT_EQ(r[3], "1");
    EXPECT_GT(std::stoll(r[4]), 0) << r[0];
    EXPECT_GT(std::stoll(r[5]), 0) << r[0];
    EXPECT_LE(std::stoll(r[5]), std::stoll(r[4])) << r[0] << ": prefill within total";
  }
  // The engine is part of the resolved config, so the two points have distinct identities.
  EXPECT_NE(rows[0][7], rows[1][7]);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM points WHERE config LIKE '%engine: \"tlm\"%'"), 1);
  // The CSV export: a header and both rows.
  std::istringstream csv(ReadFile(Path("out.csv")));
  std::string line;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 3);

  // Running both again runs nothing.
  ASSERT_EQ(RunTpsim({"sweep", tlm, "--db", db}, Path("again.log")), 0);
  EXPECT_NE(ReadFile(Path("again.log")).find("ran 0 (0 ok, 0 failed), 1 already stored"), std::string::npos)
      << ReadFile(Path("again.log"));
  EXPECT_EQ(test::StoredPoints(db), 2);
}

// A sweep over the request rate of a serving experiment: each point runs as `tpsim serve`
// (in a child process on either engine) and stores exactly what
// `tpsim serve --metrics-json` prints for that point; the run columns stay NULL.
TEST_F(SweepCliTest, ServingPointsStoreWhatServePrints) {
  const std::string serving = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto";
  const std::string body = "base: \"" + serving + R"("
axis { field: "workload.requests.synthetic.rate_per_s" values: ["1", "8"] }
zip {
  axis { field: "workload.requests.synthetic.num_requests" values: ["6"] }
  axis { field: "workload.requests.slo_ttft_ms" values: ["1500"] }
  axis { field: "workload.requests.slo_tpot_ms" values: ["400"] }
}
)";
  const std::string sweep = Path("rate.textproto");
  std::ofstream(sweep) << body;
  std::ofstream(Path("rate-tlm.textproto")) << body << "engine: \"tlm\"\n";
  const std::string db = Path("rate.sqlite");
  ASSERT_EQ(RunTpsim({"sweep", sweep, "--db", db, "--jobs", "1"}, Path("a.log")), 0)
      << ReadFile(Path("a.log"));
  ASSERT_EQ(RunTpsim({"sweep", Path("rate-tlm.textproto"), "--db", db, "--jobs", "1"}, Path("t.log")), 0)
      << ReadFile(Path("t.log"));
  auto rows =
      Query(db,
            "SELECT engine, status, \"workload.requests.synthetic.rate_per_s\", total_ps, ttft_p99_ms, "
            "tpot_p50_ms, goodput_per_s, requests_per_s, completed, config, error FROM points "
            "ORDER BY engine, point_index");
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& r : rows) {
    ASSERT_EQ(r[1], "ok") << r[0] << " rate " << r[2] << ": " << r[10];
    EXPECT_EQ(r[3], "NULL") << "a serving point has no run metrics";
    EXPECT_EQ(r[8], "6");
    EXPECT_LE(std::stod(r[6]), std::stod(r[7])) << "goodput within throughput";
    // The point's resolved config, served directly, prints the same metrics.
    std::ofstream(Path("point.textproto")) << r[9];
    ASSERT_EQ(RunTpsim({"serve", Path("point.textproto"), "--metrics-json", Path("m.json")}, Path("s.log")),
              0)
        << ReadFile(Path("s.log"));
    const std::string m = ReadFile(Path("m.json"));
    auto field = [&](const std::string& k) {
      size_t at = m.find("\"" + k + "\": ");
      return at == std::string::npos ? -1.0 : std::stod(m.substr(at + k.size() + 4));
    };
    // Equal up to the 15 significant digits the query renders REAL values with.
    auto same = [&](const std::string& stored, const std::string& k) {
      EXPECT_NEAR(std::stod(stored), field(k), 1e-13 * std::abs(field(k)) + 1e-300)
          << r[0] << " rate " << r[2] << " " << k;
    };
    same(r[4], "ttft_p99_ms");
    same(r[5], "tpot_p50_ms");
    same(r[6], "goodput_per_s");
  }
  // A higher rate queues more: TTFT p99 grows from 1 to 8 requests per second.
  EXPECT_LT(std::stod(rows[0][4]), std::stod(rows[1][4]));
}

// Requests of one output token have no TPOT: null in --metrics-json, NULL in the store (in
// process and through a TLM child's JSON), "-" in serve's table. They were 0 ms, which a TPOT
// search or plot took for the best.
TEST_F(SweepCliTest, ServingMetricsWithoutSamplesAreNull) {
  const std::string serving = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto";
  const std::string one = R"(
axis { field: "workload.requests.synthetic.num_requests" values: ["5"] }
zip {
  axis { field: "workload.requests.synthetic.output_tokens.min" values: ["1"] }
  axis { field: "workload.requests.synthetic.output_tokens.max" values: ["1"] }
}
)";
  std::ofstream(Path("one.textproto")) << "base: \"" << serving << "\"\n" << one;
  std::ofstream(Path("one-tlm.textproto")) << "base: \"" << serving << "\"\n" << one << "engine: \"tlm\"\n";
  const std::string db = Path("one.sqlite");
  ASSERT_EQ(RunTpsim({"sweep", Path("one.textproto"), "--db", db, "--jobs", "1"}, Path("a.log")), 0)
      << ReadFile(Path("a.log"));
  ASSERT_EQ(RunTpsim({"sweep", Path("one-tlm.textproto"), "--db", db, "--jobs", "1"}, Path("t.log")), 0)
      << ReadFile(Path("t.log"));
  auto rows =
      Query(db, "SELECT engine, status, tpot_p50_ms, tpot_p99_ms, ttft_p99_ms, completed FROM points");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_EQ(r[1], "ok") << r[0];
    EXPECT_EQ(r[2], "NULL") << r[0];
    EXPECT_EQ(r[3], "NULL") << r[0];
    EXPECT_NE(r[4], "NULL") << r[0];
    EXPECT_EQ(r[5], "5") << r[0];
  }
  ASSERT_EQ(RunTpsim({"serve", serving, "--set", "workload.requests.synthetic.num_requests=5", "--set",
                      "workload.requests.synthetic.output_tokens.min=1", "--set",
                      "workload.requests.synthetic.output_tokens.max=1", "--metrics-json", Path("m.json")},
                     Path("s.log")),
            0)
      << ReadFile(Path("s.log"));
  const std::string m = ReadFile(Path("m.json"));
  EXPECT_NE(m.find("\"tpot_p50_ms\": null"), std::string::npos) << m;
  EXPECT_NE(m.find("\"tpot_p99_ms\": null"), std::string::npos) << m;
  EXPECT_EQ(m.find("\"ttft_p99_ms\": null"), std::string::npos) << m;
}

// A serving point whose synthetic requests `tpsim serve --max-memory` refuses is stored as
// invalid with serve's diagnostic, without running, on either engine (the analytical one ran it
// in process with no check, the TLM child got no --max-memory). Serving takes about 64 MB
// before its first request (mapping::ProgramEstimate::kBaseBytes), above 50M.
TEST_F(SweepCliTest, ServingPointOverMaxMemoryIsStoredInvalidWithoutRunning) {
  const std::string serving = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto";
  const std::string body =
      "base: \"" + serving +
      "\"\naxis { field: \"workload.requests.synthetic.num_requests\" values: [\"6\"] }\n";
  std::ofstream(Path("m.textproto")) << body;
  std::ofstream(Path("m-tlm.textproto")) << body << "engine: \"tlm\"\n";
  const std::string db = Path("m.sqlite");
  for (const char* sweep : {"m.textproto", "m-tlm.textproto"}) {
    ASSERT_EQ(
        RunTpsim({"sweep", Path(sweep), "--db", db, "--jobs", "1", "--max-memory", "50M"}, Path("m.log")), 0)
        << ReadFile(Path("m.log"));
  }
  auto rows = Query(db, "SELECT engine, status, error, completed FROM points ORDER BY engine");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_EQ(r[1], "invalid") << r[0] << ": " << r[2];
    EXPECT_NE(r[2].find("workload.requests.synthetic.num_requests: 6: serving them takes about 64 MB"),
              std::string::npos)
        << r[0] << ": " << r[2];
    EXPECT_NE(r[2].find("more than --max-memory 52.4 MB"), std::string::npos) << r[0] << ": " << r[2];
    EXPECT_EQ(r[3], "NULL") << r[0];
  }
  // Within the limit it runs.
  ASSERT_EQ(RunTpsim({"sweep", Path("m.textproto"), "--db", Path("ok.sqlite"), "--max-memory", "100M"},
                     Path("ok.log")),
            0)
      << ReadFile(Path("ok.log"));
  EXPECT_EQ(Scalar(Path("ok.sqlite"), "SELECT completed FROM points WHERE status = 'ok'"), 6);
}

// SIGTERM while an analytical serving point runs (20,000 requests: minutes) stops the sweep at
// once, exit 130, nothing stored; before, the point ran to its end first.
TEST_F(SweepCliTest, SigtermStopsAServingPointInFlight) {
  const std::string serving = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto";
  std::ofstream(Path("long.textproto"))
      << "base: \"" << serving
      << "\"\naxis { field: \"workload.requests.synthetic.num_requests\" values: [\"20000\"] }\n";
  const std::string db = Path("long.sqlite");
  pid_t pid = Spawn({"sweep", Path("long.textproto"), "--db", db, "--jobs", "1"}, Path("long.log"));
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the point is running
  ::kill(pid, SIGTERM);
  const auto sent = std::chrono::steady_clock::now();
  int status = 0;
  bool exited = false;
  while (!(exited = ::waitpid(pid, &status, WNOHANG) == pid) &&
         std::chrono::steady_clock::now() - sent < std::chrono::seconds(3))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ASSERT_TRUE(exited) << "the sweep still ran 3 s after SIGTERM: " << ReadFile(Path("long.log"));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << ReadFile(Path("long.log"));
  EXPECT_EQ(test::StoredPoints(db), 0);
  EXPECT_TRUE(ProcessesMentioning("tpsim-sweep-" + std::to_string(pid) + "/point-").empty());
}

// A request trace named relative to the experiment (here, and by an axis) is stored absolute in
// the point's config, so the TLM child (which reads a temporary copy of the point) finds it, and
// the stored config reruns from another folder. Each trace's contents are part of its points'
// identity: editing one reruns its point only.
TEST_F(SweepCliTest, TraceFileServingPointsResolveTheTraceAndRerunWhenItChanges) {
  std::string exp = ReadFile(std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto");
  const std::string chip = "chip_file: \"../chips/wafer-8x8.textproto\"";
  ASSERT_NE(exp.find(chip), std::string::npos);
  exp.replace(exp.find(chip), chip.size(),
              "chip_file: \"" + std::string(TPSIM_SOURCE_DIR) + "/configs/chips/wafer-8x8.textproto\"");
  const size_t a = exp.find("    synthetic {"), b = exp.find("  }\n}\n", a);
  ASSERT_NE(b, std::string::npos);
  exp.replace(a, b - a, "    trace_file: \"t.csv\"\n");
  fs::create_directories(Path("in"));
  std::ofstream(Path("in/exp.textproto")) << exp;
  std::ofstream(Path("in/t.csv")) << "arrival_s,prompt_tokens,output_tokens\n0,16,3\n0.01,32,2\n";
  std::ofstream(Path("in/u.csv")) << "arrival_s,prompt_tokens,output_tokens\n0,16,2\n";
  // The base's own trace_file (t.csv), then one an axis names (u.csv).
  const std::string axes =
      "base: \"exp.textproto\"\n"
      "axis { field: \"workload.requests.trace_file\" values: [\"t.csv\", \"u.csv\"] }\n";
  std::ofstream(Path("in/tr.textproto")) << axes;
  std::ofstream(Path("in/tr-tlm.textproto")) << axes << "engine: \"tlm\"\ntime_limit_s: 120\n";
  const std::string db = Path("tr.sqlite");
  for (const char* sweep : {"in/tr.textproto", "in/tr-tlm.textproto"}) {
    ASSERT_EQ(RunTpsim({"sweep", Path(sweep), "--db", db, "--jobs", "2"}, Path("tr.log")), 0)
        << ReadFile(Path("tr.log"));
  }
  auto rows =
      Query(db, "SELECT engine, status, error, completed, config FROM points ORDER BY engine, point_index");
  ASSERT_EQ(rows.size(), 4u);
  const char* traces[] = {"t.csv", "u.csv", "t.csv", "u.csv"};
  const char* completed[] = {"2", "1", "2", "1"};
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    EXPECT_EQ(r[1], "ok") << r[0] << ": " << r[2];
    EXPECT_EQ(r[3], completed[i]) << r[0];
    EXPECT_NE(r[4].find("trace_file: \"" + Path(std::string("in/") + traces[i]) + "\""), std::string::npos)
        << r[0] << ": " << r[4];
  }
  // The stored config, from another folder.
  fs::create_directories(Path("elsewhere"));
  std::ofstream(Path("elsewhere/point.textproto")) << rows[0][4];
  EXPECT_EQ(RunTpsim({"serve", Path("elsewhere/point.textproto")}, Path("s.log")), 0)
      << ReadFile(Path("s.log"));

  // Unchanged traces: nothing reruns. One more request in u.csv: its point reruns.
  ASSERT_EQ(RunTpsim({"sweep", Path("in/tr.textproto"), "--db", db}, Path("again.log")), 0);
  EXPECT_NE(ReadFile(Path("again.log")).find("ran 0 (0 ok, 0 failed), 2 already stored"), std::string::npos)
      << ReadFile(Path("again.log"));
  std::ofstream(Path("in/u.csv")) << "arrival_s,prompt_tokens,output_tokens\n0,16,2\n0.01,16,2\n";
  ASSERT_EQ(RunTpsim({"sweep", Path("in/tr.textproto"), "--db", db}, Path("edit.log")), 0);
  EXPECT_NE(ReadFile(Path("edit.log")).find("ran 1 (1 ok, 0 failed), 1 already stored"), std::string::npos)
      << ReadFile(Path("edit.log"));
  // The new row of u.csv's point; the row of its old contents stays, as rows of removed axis values do.
  EXPECT_EQ(
      Scalar(db,
             "SELECT COUNT(*) FROM points WHERE engine = 'analytical' AND config LIKE '%/in/u.csv%' AND "
             "completed = 2 AND point_index = 1"),
      1);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM points"), 5);
}

TEST_F(SweepCliTest, TlmPointPastItsTimeLimitIsRecordedAsTimeout) {
  // The full reference job under TLM takes far longer than 1 ms.
  const std::string db = Path("limit.sqlite");
  std::string s = SweepFile("limit.textproto", "engine: \"tlm\"\ntime_limit_s: 0.001\n");
  ASSERT_EQ(RunTpsim({"sweep", s, "--db", db}, Path("limit.log")), 0) << ReadFile(Path("limit.log"));
  auto rows = Query(db, "SELECT status, error, total_ps FROM points");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], "timeout");
  EXPECT_NE(rows[0][1].find("time limit"), std::string::npos) << rows[0][1];
  EXPECT_EQ(rows[0][2], "NULL");
  EXPECT_EQ(ReadFile(Path("limit.log")).find("time_limit_s is ignored"), std::string::npos);
  // An analytical point runs without a limit: the limit is said to be ignored
  // (it was accepted silently, and the point ran to its end).
  std::string a = SweepFile("limit-a.textproto", std::string(kSmallPoint) + "time_limit_s: 0.001\n");
  ASSERT_EQ(RunTpsim({"sweep", a, "--db", Path("limit-a.sqlite")}, Path("limit-a.log")), 0)
      << ReadFile(Path("limit-a.log"));
  EXPECT_NE(
      ReadFile(Path("limit-a.log"))
          .find("tpsim: warning: time_limit_s is ignored: engine analytical runs its points without a time "
                "limit (it bounds engine tlm's points)"),
      std::string::npos)
      << ReadFile(Path("limit-a.log"));
  EXPECT_EQ(Scalar(Path("limit-a.sqlite"), "SELECT COUNT(*) FROM points WHERE status = 'ok'"), 1);
}

// An axis over a field the points do not read ran its whole sweep silently: the sweep names it
// with the points it ran that set it (and nothing when every field is read).
TEST_F(SweepCliTest, AnAxisNothingReadsIsNamed) {
  std::string s =
      SweepFile("seed.textproto",
                std::string(kSmallPoint) + "axis { field: \"mapping.seed\" values: [\"1\", \"2\"] }\n");
  ASSERT_EQ(RunTpsim({"sweep", s, "--db", Path("seed.sqlite"), "--jobs", "1"}, Path("seed.log")), 0)
      << ReadFile(Path("seed.log"));
  EXPECT_NE(
      ReadFile(Path("seed.log"))
          .find("tpsim: warning: in 2 points: mapping.seed is ignored: placement linear does not read it "
                "(placement random does)\n"),
      std::string::npos)
      << ReadFile(Path("seed.log"));
  std::string r =
      SweepFile("random.textproto", std::string(kSmallPoint) +
                                        "axis { field: \"mapping.seed\" values: [\"1\", \"2\"] }\n"
                                        "axis { field: \"mapping.placement\" values: \"random\" }\n");
  ASSERT_EQ(RunTpsim({"sweep", r, "--db", Path("random.sqlite"), "--jobs", "1"}, Path("random.log")), 0)
      << ReadFile(Path("random.log"));
  EXPECT_EQ(ReadFile(Path("random.log")).find("warning"), std::string::npos) << ReadFile(Path("random.log"));
  // The sweep's name is shown clipped and escaped ("x\ny" was printed on two lines).
  std::string named = SweepFile("named.textproto", "name: \"x\\ny\"\n" + std::string(kSmallPoint));
  ASSERT_EQ(RunTpsim({"sweep", named, "--db", Path("named.sqlite"), "--jobs", "1"}, Path("named.log")), 0)
      << ReadFile(Path("named.log"));
  EXPECT_NE(ReadFile(Path("named.log")).find("sweep x\\ny: 1 points;"), std::string::npos)
      << ReadFile(Path("named.log"));
}

TEST_F(SweepCliTest, SigkillMidSweepThenResumeRunsEveryPointExactlyOnce) {
  const std::string db = Path("kill.sqlite");
  std::string s = SweepFile("kill.textproto", kKillSweep);
  std::vector<std::string> cmd = {"sweep", s, "--db", db, "--jobs", "2"};
  pid_t pid = Spawn(cmd, Path("log1.txt"));
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitForRows(db, 10, pid))
      << "the sweep finished before it could be killed: " << ReadFile(Path("log1.txt"));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  const int64_t kept = test::StoredPoints(db);
  EXPECT_GE(kept, 10);
  EXPECT_LT(kept, 200);
  EXPECT_EQ(Query(db, "PRAGMA integrity_check")[0][0], "ok");

  ASSERT_EQ(RunTpsim(cmd, Path("log2.txt")), 0) << ReadFile(Path("log2.txt"));
  EXPECT_NE(ReadFile(Path("log2.txt")).find("ran " + std::to_string(200 - kept) + " "), std::string::npos)
      << ReadFile(Path("log2.txt"));
  EXPECT_NE(ReadFile(Path("log2.txt")).find(std::to_string(kept) + " already stored"), std::string::npos)
      << ReadFile(Path("log2.txt"));
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM points"), 200);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(DISTINCT point_index) FROM points"), 200);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(DISTINCT config_hash) FROM points"), 200);
  EXPECT_EQ(Scalar(db, "SELECT MIN(point_index) FROM points"), 0);
  EXPECT_EQ(Scalar(db, "SELECT MAX(point_index) FROM points"), 199);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM points WHERE status = 'ok' AND total_ps > 0"), 200);
}

TEST_F(SweepCliTest, SigkillOfATlmSweepLeavesNoChildSimulationRunning) {
  // Full reference-job TLM points: each runs long enough to be in flight when killed.
  const std::string db = Path("tlmkill.sqlite");
  std::string s =
      SweepFile("tlmkill.textproto",
                "axis { field: \"workload.seq_len\" values: [\"256\", \"512\", \"1024\", \"2048\"] "
                "}\nengine: \"tlm\"\n");
  pid_t pid = Spawn({"sweep", s, "--db", db, "--jobs", "2"}, Path("tlmkill.log"));
  ASSERT_GT(pid, 0);
  const std::string needle = "tpsim-sweep-" + std::to_string(pid) + "/point-";
  bool seen = false;
  for (int i = 0; i < 600 && !seen; ++i) {
    seen = !ProcessesMentioning(needle).empty();
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(seen) << "no child simulation seen: " << ReadFile(Path("tlmkill.log"));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::vector<int> left;
  for (int i = 0; i < 100; ++i) {
    left = ProcessesMentioning(needle);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int p : left) ::kill(p, SIGKILL);
  EXPECT_TRUE(left.empty()) << left.size() << " child simulations outlived the killed sweep";
}

}  // namespace
}  // namespace tpsim::sweep
