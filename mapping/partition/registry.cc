// The partitioner registry's list of names and the default Partitioner::Choose.
#include "mapping/mapping.h"
#include "mapping/partition/partitioner.h"

namespace tpsim::mapping {

const Partitioner* Partitioner::Choose(const GemmSpec&, const GemmContext&, std::string* label) const {
  *label = name();
  return this;
}

std::vector<std::string> PartitionerNames() { return PartitionerRegistry::Get().Names(); }

}  // namespace tpsim::mapping
