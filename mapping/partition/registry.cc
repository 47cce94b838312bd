#include <algorithm>

#include "mapping/mapping.h"
#include "mapping/partition/partitioner.h"

namespace tpsim::mapping {

namespace {
const std::vector<const Partitioner*>& All() {
  static const std::vector<const Partitioner*> all = {&KSplitPartitioner(), &NSplitPartitioner(),
                                                      &MSplitRotatePartitioner(), &Mn2dPartitioner(),
                                                      &MegatronPartitioner()};
  return all;
}
}  // namespace

const Partitioner* Partitioner::Choose(const GemmSpec&, const GemmContext&, std::string* label) const {
  *label = name();
  return this;
}

const Partitioner* FindPartitioner(const std::string& name) {
  for (const Partitioner* p : All())
    if (name == p->name()) return p;
  return nullptr;
}

std::vector<std::string> PartitionerNames() {
  std::vector<std::string> names;
  for (const Partitioner* p : All()) names.push_back(p->name());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tpsim::mapping
