#include "sim/analytical/analytical.h"
#include "sim/engine.h"
#include "sim/tlm/tlm_engine.h"

namespace tpsim::sim {

namespace {
struct EngineEntry {
  const char* name;
  std::unique_ptr<Engine> (*make)();
};
// The registry of timing engines, by name.
constexpr EngineEntry kEngines[] = {
    {"analytical", &MakeAnalyticalEngine},
    {"tlm", &MakeTlmEngine},
};
}  // namespace

std::unique_ptr<Engine> MakeEngine(const std::string& name) {
  for (const auto& e : kEngines) {
    if (name == e.name) return e.make();
  }
  return nullptr;
}

config::Diag UnknownEngineDiag(const config::Location& where, const std::string& field,
                               const std::string& name) {
  std::string valid;
  for (const auto& e : kEngines) valid += (valid.empty() ? "" : ", ") + std::string(e.name);
  return config::Diag{where, field, name, "unknown engine (valid: " + valid + ")"};
}

std::vector<std::string> EngineNames() {
  std::vector<std::string> names;
  for (const auto& e : kEngines) names.emplace_back(e.name);
  return names;
}

}  // namespace tpsim::sim
