// The engine registry with every engine linked (tpsim_sim): both engines under their own
// name(), one-line descriptions, and the unknown-engine error listing them sorted.
#include <gtest/gtest.h>

#include "sim/engine.h"

namespace tpsim::sim {
namespace {

TEST(EngineRegistry, BothEnginesAreRegisteredUnderTheirOwnName) {
  EXPECT_EQ(EngineNames(), (std::vector<std::string>{"analytical", "tlm"}));
  for (const auto& [name, e] : EngineRegistry::Get().entries()) {
    std::unique_ptr<Engine> engine = MakeEngine(name);
    ASSERT_NE(engine, nullptr) << name;
    EXPECT_EQ(engine->name(), name);
    EXPECT_FALSE(e.description.empty()) << name;
    EXPECT_EQ(e.description.find('\n'), std::string::npos) << name;
  }
  EXPECT_EQ(MakeEngine("spice"), nullptr);
}

TEST(EngineRegistry, UnknownEngineListsTheValidOnes) {
  config::Diag d = UnknownEngineDiag(config::Location{"x.textproto", 4, 1}, "engine", "spice");
  EXPECT_EQ(d.str(), "x.textproto:4:1: engine: spice: unknown engine (valid: analytical, tlm)");
  // A near miss is named (config::DidYouMean), for run, sweep and serve alike.
  EXPECT_EQ(UnknownEngineDiag(config::kCommandLine, "--engine", "analytic").str(),
            "<command line>:1:1: --engine: analytic: unknown engine (valid: analytical, tlm), did you mean "
            "analytical?");
}

}  // namespace
}  // namespace tpsim::sim
