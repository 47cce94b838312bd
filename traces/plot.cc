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

std::optional<std::string> FindPlotPython() {
  // $TPSIM_PYTHON first, as `tpsim compare --plot` takes it.
  std::vector<std::string> cands;
  if (const char* env = std::getenv("TPSIM_PYTHON"); env != nullptr && *env != '\0') cands.emplace_back(env);
  cands.emplace_back("python3");
  cands.emplace_back("/usr/bin/python3");
  for (const std::string& py : cands) {
    if (config::RunChildProcess({py, "-c", "import matplotlib"}, config::kChildDevNull,
                                config::kChildDevNull) == 0)
      return py;
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
