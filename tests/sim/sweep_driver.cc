// `tpsim sweep` alone, for the kill tests: `tpsim_sweep_driver [sweep] ARGS...`.
#include <string>
#include <vector>

#include "sim/sweep/sweep.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "sweep") args.erase(args.begin());
  return tpsim::sweep::SweepCommand(args);
}
