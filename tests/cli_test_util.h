#pragma once
// Runs a shell command for end-to-end tests of the `tpsim` binary and returns its exit
// status and its output (stdout, plus stderr when the command redirects it with 2>&1).

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tpsim::test {

struct CommandOutcome {
  int status = -1;     // exit status; 128 + signal when killed; -1 when it could not start
  std::string output;  // what the command wrote to the pipe
};

inline CommandOutcome RunCommand(const std::string& cmd) {
  CommandOutcome o;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) o.output.append(buf.data(), n);
  const int st = pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return o;
}

}  // namespace tpsim::test
