// The registry mechanism (configs/registry.h) on a kind of its own: entries sorted whatever
// the registration order, lookups, the kinds index, and a duplicate name aborting.
#include "configs/registry.h"

#include <gtest/gtest.h>

namespace tpsim {
namespace {

int Three() { return 3; }
int One() { return 1; }
int Two() { return 2; }

struct TestKind {
  using Value = int (*)();
  static constexpr std::string_view kName = "test kind";
};

// Registered in the order zeta, alpha, mid: the listings must come out sorted.
const Registrar<TestKind> kZeta("zeta", "the last", &Three);
const Registrar<TestKind> kAlpha("alpha", "the first", &One);
const Registrar<TestKind> kMid("mid", "in between", &Two);

TEST(Registry, NamesAreSortedWhateverTheRegistrationOrder) {
  const auto& r = Registry<TestKind>::Get();
  EXPECT_EQ(r.Names(), (std::vector<std::string>{"alpha", "mid", "zeta"}));
  EXPECT_EQ(r.NamesText(), "alpha, mid, zeta");
  std::vector<std::string> listed;
  for (const auto& [name, e] : r.entries()) listed.push_back(e.name + ": " + e.description);
  EXPECT_EQ(listed, (std::vector<std::string>{"alpha: the first", "mid: in between", "zeta: the last"}));
}

TEST(Registry, FindReturnsTheRegisteredValueOrNull) {
  const auto& r = Registry<TestKind>::Get();
  ASSERT_NE(r.Find("mid"), nullptr);
  EXPECT_EQ((*r.Find("mid"))(), 2);
  EXPECT_EQ((*r.Find("zeta"))(), 3);
  EXPECT_EQ(r.Find("Mid"), nullptr);  // names are exact
  EXPECT_EQ(r.Find(""), nullptr);
}

TEST(Registry, TheKindsIndexListsThisKind) {
  const auto& all = RegistryBase::All();
  auto it = all.find("test kind");
  ASSERT_NE(it, all.end());
  EXPECT_EQ(it->second, &Registry<TestKind>::Get());
  EXPECT_EQ(it->second->kind(), "test kind");
  auto list = it->second->List();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].name, "alpha");
  EXPECT_EQ(list[2].description, "the last");
}

TEST(RegistryDeathTest, ANameRegisteredTwiceAborts) {
  EXPECT_DEATH(Registry<TestKind>::Get().Add("mid", "again", &One),
               "two test kind implementations registered as 'mid' \\(in between; again\\)");
}

}  // namespace
}  // namespace tpsim
