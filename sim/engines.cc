// The engine registry's entry points. The engines register themselves (EngineRegistrar in
// sim/analytical/analytical.cc, sim/tlm/tlm_engine.cc).
#include "sim/engine.h"

#include <cmath>
#include <cstdio>

#include <atomic>
#include <thread>

#include "configs/files.h"

namespace tpsim::sim {

namespace {
std::atomic<bool> spare_thread{false};
// Below this many tasks a second thread costs more than the work it takes over.
constexpr size_t kSpareThreadTasks = 200000;
}  // namespace

void SetSpareThread(bool on) { spare_thread = on; }

std::string DaysText(double seconds) {
  // Four significant digits, cut rather than rounded: a time just before the 2^63 ps clock
  // (106.75 days) reads 106.7, never more than the limit kClockLimit names.
  double days = seconds / 86400;
  if (days > 0 && std::isfinite(days)) {
    const double scale = std::pow(10.0, 3 - std::floor(std::log10(days)));
    days = std::floor(days * scale * (1 + 1e-12)) / scale;  // (1 + 1e-12): 2.711 stays 2.711
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g days", days);
  return buf;
}

bool UseSpareThread(size_t tasks) {
  return spare_thread && tasks >= kSpareThreadTasks && std::thread::hardware_concurrency() > 1;
}

std::shared_ptr<const PreparedProgram> Engine::Prepare(const mapping::Program&, const arch::Chip&) const {
  return nullptr;
}

bool Engine::RunSteps(const StepSource&, const arch::Chip&, StepsOutput*, std::string* why) {
  if (why) *why = "the " + name() + " engine does not time steps handed over one by one";
  return false;
}

std::unique_ptr<Engine> MakeEngine(const std::string& name) {
  const EngineFactory* make = EngineRegistry::Get().Find(name);
  return make ? (*make)() : nullptr;
}

config::Diag UnknownEngineDiag(const config::Location& where, const std::string& field,
                               const std::string& name) {
  return config::Diag{where, field, name,
                      "unknown engine (valid: " + EngineRegistry::Get().NamesText() + ")" +
                          config::DidYouMean(name, EngineNames())};
}

std::vector<std::string> EngineNames() { return EngineRegistry::Get().Names(); }

}  // namespace tpsim::sim
