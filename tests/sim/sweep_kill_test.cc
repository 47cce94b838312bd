// A sweep killed mid-way (SIGKILL, SIGINT) loses no finished point, and a rerun completes
// it: the sweep runs in a child process (tpsim_sweep_driver).
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
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
#include "sim/sweep/expr.h"
#include "sim/sweep/runner.h"
#include "sim/sweep/slurm.h"
#include "sim/sweep/spec.h"
#include "sim/sweep/store.h"
#include "sim/sweep/sweep.h"
#include "tests/sim/spawn_test_util.h"
#include "tests/sim/sqlite_test_util.h"
#include "tests/sim/sweep_test_util.h"
#include "tests/sim/temp_dir_test.h"

namespace tpsim::sweep {
namespace {

namespace fs = std::filesystem;
using test::kKillSweep;
using test::Query;
using test::Scalar;
using test::WaitForRows;

void CheckComplete(const std::string& db) {
  EXPECT_EQ(Query(db, "PRAGMA integrity_check")[0][0], "ok");
  // Every row is whole: a status, a config, and metrics exactly when ok.
  EXPECT_EQ(
      Scalar(db, "SELECT COUNT(*) FROM points WHERE status IS NULL OR config IS NULL OR config_hash IS NULL"),
      0);
  EXPECT_EQ(Scalar(db,
                   "SELECT COUNT(*) FROM points WHERE status = 'ok' AND (total_ps IS NULL OR "
                   "core_utilization IS NULL OR spilled_bytes IS NULL)"),
            0);
}

void KillTest(const fs::path& dir, const std::string& sweep, int sig) {
  std::string db = (dir / "kill.sqlite").string();
  std::vector<std::string> cmd = {TPSIM_SWEEP_DRIVER, "sweep", sweep, "--db", db, "--jobs", "2"};
  pid_t pid = test::SpawnLogged(cmd, (dir / "log1.txt").string());
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitForRows(db, 10, pid)) << "the sweep finished before it could be killed";
  ::kill(pid, sig);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (sig == SIGKILL) {
    EXPECT_TRUE(WIFSIGNALED(status));
  } else {
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 130);  // stopped cleanly
  }
  int64_t kept = Scalar(db, "SELECT COUNT(*) FROM points");
  EXPECT_GE(kept, 10);
  EXPECT_LT(kept, 200);
  CheckComplete(db);

  pid = test::SpawnLogged(cmd, (dir / "log2.txt").string());
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  CheckComplete(db);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM points"), 200);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(DISTINCT point_index) FROM points"), 200);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM points WHERE status = 'ok'"), 200);
  std::ifstream log(dir / "log2.txt");
  std::stringstream ss;
  ss << log.rdbuf();
  EXPECT_NE(ss.str().find(std::to_string(kept) + " already stored"), std::string::npos) << ss.str();
}

TEST_F(SweepTest, SigkillLosesNoFinishedPointAndRerunCompletes) {
  KillTest(dir_, SweepFile(kKillSweep), SIGKILL);
}

TEST_F(SweepTest, SigintStopsCleanlyAndRerunCompletes) { KillTest(dir_, SweepFile(kKillSweep), SIGINT); }

}  // namespace
}  // namespace tpsim::sweep
