#pragma once
// Layouts of a [rows, cols] activation over the P ranks of a TP group.
//
//   replicated  every rank holds the whole tensor
//   rows        rank r holds rows Split(rows, P, r) (all columns)
//   cols        rank r holds columns Split(cols / unit, P, r) * unit; when there are fewer
//               units than ranks (KV heads < TP), ranks share units (r * units / P)
//   partial     every rank holds a full-size partial sum; the tensor is their sum
//   grid        P = gr x gc; rank r = (r / gc, r % gc) holds rows Split(rows, gr, i) x
//               columns Split(cols / unit, gc, j) * unit
//   grid_rows   rows split over gr, replicated over gc (the input mn_2d needs)

#include <cstdint>
#include <string>

namespace tpsim::mapping {

enum class LayoutKind : uint8_t { kReplicated, kRows, kCols, kPartial, kGrid, kGridRows };

struct Layout {
  LayoutKind kind = LayoutKind::kReplicated;
  uint32_t unit = 1;   // column granularity (head_dim for attention tensors)
  int gr = 1, gc = 1;  // grid shape (grid, grid_rows)
  bool operator==(const Layout& o) const {
    return kind == o.kind && (kind != LayoutKind::kCols || unit == o.unit) &&
           ((kind != LayoutKind::kGrid && kind != LayoutKind::kGridRows) ||
            (gr == o.gr && gc == o.gc && (kind == LayoutKind::kGridRows || unit == o.unit)));
  }
  static Layout Replicated() { return {}; }
  static Layout Rows() { return {LayoutKind::kRows, 1, 1, 1}; }
  static Layout Cols(uint32_t unit) { return {LayoutKind::kCols, unit, 1, 1}; }
  static Layout Partial() { return {LayoutKind::kPartial, 1, 1, 1}; }
  static Layout Grid(int gr, int gc, uint32_t unit) { return {LayoutKind::kGrid, unit, gr, gc}; }
  static Layout GridRows(int gr, int gc) { return {LayoutKind::kGridRows, 1, gr, gc}; }
};

std::string ToString(const Layout& l);

struct Range {
  uint64_t lo = 0, hi = 0;
  uint64_t size() const { return hi - lo; }
};

// Part `idx` of `n` items over `parts` (the same rule as collective chunks: ChunkRange):
// in order, the first n mod parts parts one item more than the others (1023 over 16: 15
// parts of 64, then one of 63), so no part holds more than ceil(n / parts).
Range Split(uint64_t n, int parts, int idx);

// The rows and columns rank r holds of a [rows, cols] tensor in layout l over p ranks
// (replicated/partial: everything).
Range RowsOf(const Layout& l, uint64_t rows, int p, int r);
Range ColsOf(const Layout& l, uint64_t cols, int p, int r);

// Whether the column split gives every rank a distinct block (no shared units).
bool DisjointCols(uint64_t cols, uint32_t unit, int p);

}  // namespace tpsim::mapping
