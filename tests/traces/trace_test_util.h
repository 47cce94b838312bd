#pragma once
// Files for the trace tests: a temporary path of this process, and a file's bytes.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tpsim::traces::test {

// <tmp>/<prefix>_<pid>_<name>: one test process's own file.
inline std::string TmpPath(const std::string& prefix, const std::string& name) {
  return (std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace tpsim::traces::test
