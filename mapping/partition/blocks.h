#pragma once
// Building blocks partitioners emit their shards with, over any GemmContext:
//
//   EmitShard     one rank's plain shard, its weight block streamed when weights stream
//   EmitRotation  X split along rows; W column shards rotate round the ring (m_split_rotate)
//   EmitKSteps    SUMMA K-steps on the grid: W's K-blocks rotate within grid columns (mn_2d)
//   GridLines     the TP grid's rows or columns as rank groups
//
// Rotation, step by step (P = 4, two shard buffers per rank):
//
//   rank:     0     1     2     3
//   own:     W0    W1    W2    W3     compute on the own shard
//   step 0:  W3    W0    W1    W2     each receives its left neighbour's, computes on it
//   step 1:  W2    W3    W0    W1     (an arrival overwrites the buffer of two steps ago:
//   step 2:  W1    W2    W3    W0      it waits until that block was computed on and sent)
//
// The two buffers are the shard computed on and the one arriving; with weights resident the
// own shard stays with the weights and the buffers hold arrivals only (one at P = 2).

#include <cstdint>
#include <vector>

#include "mapping/partition/partitioner.h"

namespace tpsim::mapping {

// Rank r computes Y[rows, cols] (+)= X[rows, ks] . W[ks, cols].
void EmitShard(GemmContext& ctx, const GemmSpec& g, int rank, Range rows, Range ks, Range cols);

// X split along rows; W column shards rotate around the ring (CollectiveKind::kRotate),
// each rank computing on every shard as it arrives. Y ends split along rows.
void EmitRotation(GemmContext& ctx, const GemmSpec& g);

// mn_2d K-steps (SUMMA) on the gr x gc grid, k a multiple of gr: rank (i, j) holds
// W[k-block i, cols j]; within each grid column the K-blocks rotate around the column's
// ring (CollectiveKind::kRotate, one collective of gc groups of gr ranks), and rank (i, j)
// computes Y[rows i, cols j] (+)= X[rows i, k-block s] . W[k-block s, cols j] on its own
// block, then on each block as it arrives (the first compute writes, the others add).
//
//   grid column j:  (0,j) -> (1,j) -> ... -> (gr-1,j) -> (0,j)   gr-1 steps
void EmitKSteps(GemmContext& ctx, const GemmSpec& g);

// The grid lines of p ranks with gc columns as rank groups: grid rows (ranks i gc .. i gc +
// gc - 1) or grid columns (ranks j, gc + j, ...); grid rows with gc = p: one group of all.
std::vector<std::vector<int>> GridLines(int p, int gc, bool columns);

}  // namespace tpsim::mapping
