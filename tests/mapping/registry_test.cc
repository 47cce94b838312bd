// The partitioner, placement and collective registries: exactly the implementations in
// mapping/partition/, mapping/placement/ and mapping/collective/ (so a file the build dropped
// shows up here), each with a one-line description, partitioners under their own name(),
// and unknown names answered with the sorted list.
#include <gtest/gtest.h>

#include <stdexcept>

#include "mapping/collective/algorithm.h"
#include "mapping/mapping.h"
#include "mapping/partition/partitioner.h"
#include "mapping/placement/placer.h"
#include "tests/mapping/mapping_test_util.h"

namespace tpsim::mapping {
namespace {

template <class Kind>
void ExpectOneLineDescriptions() {
  for (const auto& [name, e] : Registry<Kind>::Get().entries()) {
    EXPECT_FALSE(e.description.empty()) << Kind::kName << " " << name;
    EXPECT_EQ(e.description.find('\n'), std::string::npos) << Kind::kName << " " << name;
  }
}

TEST(MappingRegistries, PartitionersAreRegisteredUnderTheirOwnName) {
  EXPECT_EQ(PartitionerNames(),
            (std::vector<std::string>{"k_split", "m_split_rotate", "megatron", "mn_2d", "n_split"}));
  for (const auto& [name, e] : PartitionerRegistry::Get().entries()) {
    ASSERT_NE(e.value, nullptr) << name;
    EXPECT_EQ(e.value->name(), name);
    EXPECT_EQ(FindPartitioner(name), e.value);
  }
  EXPECT_EQ(FindPartitioner("diagonal"), nullptr);
  EXPECT_EQ(&KSplitPartitioner(), FindPartitioner("k_split"));
  EXPECT_EQ(&NSplitPartitioner(), FindPartitioner("n_split"));
  ExpectOneLineDescriptions<PartitionerKind>();
}

TEST(MappingRegistries, PlacementsAreRegisteredAndUnknownOnesListedSorted) {
  EXPECT_EQ(PlacementNames(), (std::vector<std::string>{"block", "file", "hilbert", "linear",
                                                        "linear_interleave", "random", "ring", "snake"}));
  ExpectOneLineDescriptions<placement::PlacementKind>();
  PlacementRequest req;
  req.name = "spiral";
  req.ranks = 4;
  try {
    Place(req, arch::Chip::Build(testing::MeshChip(2, 2, 1 << 20)));
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "unknown placement 'spiral' (valid: block, file, hilbert, linear, linear_interleave, "
                 "random, ring, snake)");
  }
}

TEST(MappingRegistries, CollectivesAreRegisteredAndUnknownOnesListedSorted) {
  EXPECT_EQ(CollectiveNames(), (std::vector<std::string>{"bidirectional_ring", "direct", "halving_doubling",
                                                         "mesh_2d", "nvls", "ring"}));
  ExpectOneLineDescriptions<collective::CollectiveAlgorithmKind>();
  try {
    LowerCollective("tree", CollectiveKind::kAllReduce, 4, 1024, 4);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "unknown collective algorithm 'tree' (valid: bidirectional_ring, direct, halving_doubling, "
                 "mesh_2d, nvls, ring)");
  }
}

TEST(MappingRegistries, EveryKindLinkedHereIsInTheIndex) {
  const auto& all = RegistryBase::All();
  for (const char* kind : {"collective", "partitioner", "placement", "topology"}) {
    ASSERT_TRUE(all.count(kind)) << kind;
    EXPECT_FALSE(all.at(kind)->List().empty()) << kind;
  }
}

}  // namespace
}  // namespace tpsim::mapping
