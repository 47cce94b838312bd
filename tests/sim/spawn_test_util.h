#pragma once
// Sweeps in a child process, for the tests that kill them (sweep_kill_test.cc through the
// sweep driver, sweep_cli_test.cc through the real `tpsim`).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/sim/sqlite_test_util.h"

namespace tpsim::test {

// 20 x 10 = 200 analytical points of the reference job (2 decode steps each): long enough
// to be killed mid-way, short enough for a unit test.
inline const char* const kKillSweep = R"(
axis { field: "workload.decode_steps" values: "2" }
axis { field: "chip.noc.link_bandwidth_gbps" values: ["32", "48", "64", "80", "96", "112", "128", "144", "160",
  "176", "192", "208", "224", "240", "256", "272", "288", "304", "320", "336"] }
axis { field: "workload.seq_len" values: ["64", "96", "128", "160", "192", "224", "256", "288", "320", "352"] }
)";

// Starts `argv[0] argv[1] ...` with stdout and stderr to `log`; returns its pid.
inline pid_t SpawnLogged(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (!std::freopen(log.c_str(), "w", stderr)) ::_exit(126);
    ::dup2(2, 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits (up to 60 s) until the store has at least `rows` rows; false when the child
// exited first.
inline bool WaitForRows(const std::string& db, int64_t rows, pid_t pid) {
  for (int i = 0; i < 1200; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return false;
    if (StoredPoints(db) >= rows) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

}  // namespace tpsim::test
