#include "traces/plot.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "configs/files.h"

namespace tpsim::traces {
std::string PlotScriptPath() {
  const char* env = std::getenv("TPSIM_PLOT_SCRIPT");
  if (env != nullptr && *env != '\0') return env;
  return TPSIM_PLOT_SCRIPT;
}

std::optional<std::string> FindPlotPython(std::string* warning) {
  const std::string py = config::FindMatplotlibPython(warning);
  if (py.empty()) return std::nullopt;
  return py;
}

int PlotCommand(const std::vector<std::string>& args) {
  const std::string script = PlotScriptPath();
  struct stat st {};
  if (stat(script.c_str(), &st) != 0) {
    std::cerr << "tpsim plot: script " << script << " not found (set TPSIM_PLOT_SCRIPT)\n";
    return 2;
  }
  std::string warning;
  const std::optional<std::string> py = FindPlotPython(&warning);
  if (!warning.empty()) std::cerr << "tpsim plot: warning: " << warning << "\n";
  if (!py) {
    std::cerr << "tpsim plot: needs python3 with matplotlib: install it with "
                 "`apt-get install -y python3-matplotlib`\n";
    return 2;
  }
  std::vector<std::string> argv = {*py, script};
  argv.insert(argv.end(), args.begin(), args.end());
  // The script dies with tpsim (config::RunChildProcess): a SIGTERM to `tpsim plot` left it
  // running, reparented, and it wrote the picture after tpsim had exited 143.
  const int rc = config::RunChildProcess(argv);
  if (rc < 0) {
    std::cerr << "tpsim plot: " << *py << " " << script << " did not finish\n";
    return 1;
  }
  return rc;
}

}  // namespace tpsim::traces
