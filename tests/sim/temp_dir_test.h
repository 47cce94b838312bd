#pragma once
// A GoogleTest fixture with a fresh scratch directory per test,
// <tmp>/<prefix>-<pid>-<test name>, removed afterwards.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

namespace tpsim::test {

class TempDirTest : public ::testing::Test {
 protected:
  explicit TempDirTest(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + "-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // dir/name, as a string.
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  // Writes `text` to dir/name and returns its path.
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = Path(name);
    std::ofstream(p) << text;
    return p;
  }

  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

}  // namespace tpsim::test
