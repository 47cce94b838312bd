// torus: a mesh whose rows and columns wrap around (r0c<cols-1> -- r0c0).
// A dimension of size 1 or 2 gets no extra wraparound wire (it would be a
// self-loop or duplicate the existing one).
//
// Routing: dimension order (columns, then rows), each dimension the shorter way
// round; on a tie (distance size/2) the positive direction.
// Bisection: min of the vertical and horizontal middle cuts; each cuts two
// links per row (or column) in one direction, the middle one and the wraparound.
#include "arch/topology/grid.h"

namespace tpsim::arch {
namespace {

class Torus : public GridTopology {
 public:
  Torus() : GridTopology(/*wrap=*/true) {}
};

const TopologyRegistrar kRegistered(
    "torus", "a mesh whose rows and columns wrap around; shorter-way dimension-order routing",
    std::make_unique<Torus>());

}  // namespace
}  // namespace tpsim::arch
