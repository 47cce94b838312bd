#include "traces/plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <iostream>

extern char** environ;

namespace tpsim::traces {
namespace {

// Runs argv[0] (PATH lookup) and returns its exit status; -1 when it cannot start or dies
// of a signal. With `quiet`, its stdout and stderr go to /dev/null.
int Spawn(const std::vector<std::string>& argv, bool quiet) {
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (quiet) {
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string PlotScriptPath() {
  const char* env = std::getenv("TPSIM_PLOT_SCRIPT");
  if (env != nullptr && *env != '\0') return env;
  return TPSIM_PLOT_SCRIPT;
}

std::optional<std::string> FindPlotPython() {
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    if (Spawn({py, "-c", "import matplotlib"}, /*quiet=*/true) == 0) return std::string(py);
  }
  return std::nullopt;
}

int PlotCommand(const std::vector<std::string>& args) {
  const std::string script = PlotScriptPath();
  struct stat st {};
  if (stat(script.c_str(), &st) != 0) {
    std::cerr << "tpsim plot: script " << script << " not found (set TPSIM_PLOT_SCRIPT)\n";
    return 2;
  }
  const std::optional<std::string> py = FindPlotPython();
  if (!py) {
    std::cerr << "tpsim plot: needs python3 with matplotlib: install it with "
                 "`apt-get install -y python3-matplotlib`\n";
    return 2;
  }
  std::vector<std::string> argv = {*py, script};
  argv.insert(argv.end(), args.begin(), args.end());
  const int rc = Spawn(argv, /*quiet=*/false);
  if (rc < 0) {
    std::cerr << "tpsim plot: " << *py << " " << script << " did not finish\n";
    return 1;
  }
  return rc;
}

}  // namespace tpsim::traces
