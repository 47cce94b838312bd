#include "mapping/layout.h"

#include "mapping/collective/collective.h"

namespace tpsim::mapping {

std::string ToString(const Layout& l) {
  switch (l.kind) {
    case LayoutKind::kReplicated:
      return "replicated";
    case LayoutKind::kRows:
      return "split(rows)";
    case LayoutKind::kCols:
      return "split(cols)";
    case LayoutKind::kPartial:
      return "partial";
    case LayoutKind::kGrid:
      return "grid(" + std::to_string(l.gr) + "x" + std::to_string(l.gc) + ")";
    case LayoutKind::kGridRows:
      return "grid_rows(" + std::to_string(l.gr) + "x" + std::to_string(l.gc) + ")";
  }
  return "?";
}

Range Split(uint64_t n, int parts, int idx) {
  uint64_t off = 0, len = 0;
  ChunkRange(n, parts, idx, 1, &off, &len);
  return {off, off + len};
}

bool DisjointCols(uint64_t cols, uint32_t unit, int p) { return cols / unit >= static_cast<uint64_t>(p); }

static Range UnitCols(uint64_t cols, uint32_t unit, int p, int r) {
  uint64_t units = cols / unit;
  if (units >= static_cast<uint64_t>(p)) {
    Range u = Split(units, p, r);
    return {u.lo * unit, u.hi * unit};
  }
  uint64_t u = units == 0 ? 0 : static_cast<uint64_t>(r) * units / p;
  return {u * unit, (u + 1) * unit};
}

Range RowsOf(const Layout& l, uint64_t rows, int p, int r) {
  switch (l.kind) {
    case LayoutKind::kRows:
      return Split(rows, p, r);
    case LayoutKind::kGrid:
    case LayoutKind::kGridRows:
      return Split(rows, l.gr, r / l.gc);
    default:
      return {0, rows};
  }
}

Range ColsOf(const Layout& l, uint64_t cols, int p, int r) {
  switch (l.kind) {
    case LayoutKind::kCols:
      return UnitCols(cols, l.unit, p, r);
    case LayoutKind::kGrid:
      return UnitCols(cols, l.unit, l.gc, r % l.gc);
    default:
      return {0, cols};
  }
}

}  // namespace tpsim::mapping
