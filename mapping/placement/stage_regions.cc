// StageRegions: every stage gets an h x w rectangle (h * w = tp). The grid is cut
// into floor(R/h) x floor(C/w) such rectangles from the top-left corner; stages take
// them in a snake over block rows (left to right, then right to left), so stage s
// and s+1 always share an edge. Among the shapes that give at least `stages`
// rectangles, the most square one wins (smallest max(h,w)/min(h,w)), then the wider
// (h <= w), i.e. bands of rows.
//   8x8, 16 stages of 4: 2x2 blocks      8x8, 2 stages of 32: 4x8 bands
//      0  1  2  3                           0
//      7  6  5  4                           1
//      8  9 10 11
//     15 14 13 12

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "mapping/placement/placer.h"

namespace tpsim::mapping {

std::vector<Region> StageRegions(const arch::Chip& chip, int stages, int tp) {
  const int R = chip.grid_rows(), C = chip.grid_cols();
  const std::string what = std::to_string(stages) + " stages of " + std::to_string(tp) + " cores on the " +
                           std::to_string(R) + "x" + std::to_string(C) + " core grid";
  if (stages < 1 || tp < 1) throw std::invalid_argument(what + ": stages and tp must be at least 1");
  if (static_cast<int64_t>(stages) * tp > static_cast<int64_t>(R) * C) {
    throw std::invalid_argument(what + ": needs " + std::to_string(static_cast<int64_t>(stages) * tp) +
                                " cores, the chip has " + std::to_string(static_cast<int64_t>(R) * C));
  }
  int best_h = 0, best_w = 0;
  std::string tried;
  for (int h = 1; h <= tp; ++h) {
    if (tp % h != 0) continue;
    const int w = tp / h;
    const int64_t fit = h <= R && w <= C ? static_cast<int64_t>(R / h) * (C / w) : 0;
    tried += (tried.empty() ? "" : ", ") + std::to_string(h) + "x" + std::to_string(w) + " fits " +
             std::to_string(fit);
    if (fit < stages) continue;
    // Squarer: max/min smaller, i.e. max(h,w)*min(bh,bw) < max(bh,bw)*min(h,w); ties keep the first (h <= w).
    const auto better = [&] {
      if (best_h == 0) return true;
      const int64_t a = std::max(h, w) * static_cast<int64_t>(std::min(best_h, best_w));
      const int64_t b = std::max(best_h, best_w) * static_cast<int64_t>(std::min(h, w));
      return a < b || (a == b && best_h > best_w && h <= w);
    };
    if (better()) best_h = h, best_w = w;
  }
  if (best_h == 0) {
    throw StageRegionError(what + ": no rectangle of " + std::to_string(tp) + " cores tiles the grid " +
                           std::to_string(stages) + " times (" + tried + ")");
  }
  const int per_row = C / best_w;
  std::vector<Region> regions;
  for (int s = 0; s < stages; ++s) {
    const int br = s / per_row, k = s % per_row;
    const int bc = br % 2 == 0 ? k : per_row - 1 - k;
    regions.push_back({br * best_h, bc * best_w, best_h, best_w});
  }
  return regions;
}

}  // namespace tpsim::mapping
