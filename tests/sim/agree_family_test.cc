#include "sim/agree/family.h"

#include <gtest/gtest.h>

#include <string>

#include "llm/model.h"

namespace tpsim::sim::agree {
namespace {

// The families name their models (a model added to the catalog must not change what a seed
// draws): each is in the catalog and of its family's kind, and no catalog model is in both.
TEST(FamilyModels, AreInTheCatalogAndOfTheirKind) {
  for (Family family : {Family::kDense, Family::kMoe}) {
    ASSERT_FALSE(FamilyModels(family).empty());
    for (const std::string& name : FamilyModels(family)) {
      const config::Model m = llm::ImportHuggingFace(llm::CatalogPath(name, {}, "model"));
      EXPECT_EQ(m.num_experts() > 0, family == Family::kMoe) << name;
    }
  }
  // Drawing still works: the first dense experiment of seed 15 uses one of the dense models.
  const Case c = Draw(15, 0);
  const auto& dense = FamilyModels(Family::kDense);
  EXPECT_NE(std::find(dense.begin(), dense.end(), c.drawn.cfg.model_name()), dense.end());
}

}  // namespace
}  // namespace tpsim::sim::agree
