// mesh: rows x cols cores, each linked both ways to its four neighbours.
//
//   r0c0 -- r0c1 -- r0c2
//    |       |       |
//   r1c0 -- r1c1 -- r1c2
//
// Routing: dimension order, along the row first (X), then along the column (Y).
// Bisection: min of the vertical and horizontal middle cuts.
#include "arch/topology/grid.h"

namespace tpsim::arch {
namespace {

class Mesh : public GridTopology {
 public:
  Mesh() : GridTopology(/*wrap=*/false) {}
};

const TopologyRegistrar kRegistered("mesh",
                                    "rows x cols cores, each wired to its four neighbours; XY routing",
                                    std::make_unique<Mesh>());

}  // namespace
}  // namespace tpsim::arch
