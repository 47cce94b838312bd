#pragma once
// The sweep tests' fixture (sweep_test.cc, sweep_kill_test.cc): a temporary directory, sweep
// files over the reference experiment.
#include <string>

#include "tests/sim/temp_dir_test.h"

namespace tpsim::sweep {

inline const std::string kBase =
    std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/reference-qwen3-4b.textproto";

class SweepTest : public test::TempDirTest {
 protected:
  SweepTest() : TempDirTest("tpsim-sweep-test") {}
  std::string SweepFile(const std::string& body, const std::string& name = "s.textproto") {
    return Write(name, "base: \"" + kBase + "\"\n" + body);
  }
  std::string Db(const std::string& name = "r.sqlite") { return (dir_ / name).string(); }
};

}  // namespace tpsim::sweep
