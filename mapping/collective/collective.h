#pragma once
// Collective algorithms: each lowers a collective over P ranks into steps of
// point-to-point transfers on byte ranges of a per-rank buffer.
//
// Semantics (what the functional executor and the tests rely on): every rank
// holds a buffer of `bytes`. Within one step all transfers read their source
// range first, then write: `reduce` transfers add into the destination range,
// others overwrite it. Steps run in order; a transfer of step s may start once
// the transfers of earlier steps touching its source rank's range have landed
// (engines use the explicit deps the lowering creates).
//
//   all_reduce:     every rank ends with the element-wise sum of all buffers
//   reduce_scatter: rank r ends with the sum of chunk r (about bytes/P, see ChunkRange)
//   all_gather:     rank r starts with valid chunk r only; every rank ends with all chunks
//   all_to_all:     rank r's chunk d goes to rank d's chunk r
//   rotate:         rank r's chunk r circulates so every rank sees every chunk
//                   (used by m_split_rotate; P-1 steps around the ring)
//
// all_to_all needs equal chunks (bytes a multiple of P * align); transfers then
// carry Xfer::dst_offset. Steps hold no empty transfers and no empty steps; P = 1
// or bytes = 0 give no steps.
//
// Algorithms are a registry (registry.cc; one .cc each, which documents its steps):
//   ring                2(P-1) steps for all_reduce, P-1 for reduce_scatter,
//                       all_gather and rotate
//   bidirectional_ring  as ring, each chunk's halves going opposite ways
//   mesh_2d             rows then columns of an R x C rank grid (see mesh_2d.cc)
//   halving_doubling    Rabenseifner, 2 log2 P steps for all_reduce
//   direct              everyone to everyone, 1 step (2 for all_reduce)
//   nvls                in-switch reduction (NVLink SHARP on NVSwitch): reduce into
//                       chunk owners through the switch, then multicast (see nvls.cc);
//                       all_reduce 2 steps, reduce_scatter and all_gather 1; its
//                       Schedule has in_switch set
// rotate is a ring rotation for every algorithm (bidirectional_ring: both ways);
// all_to_all is rounds of pairwise swaps except for direct (one step). An
// algorithm that cannot do a kind for a given P (e.g. halving_doubling with P not
// a power of two) falls back to ring and says so in Schedule::note.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mapping/program.h"

namespace tpsim::config {
class Chip;
}
namespace tpsim::arch {
class Chip;
}

namespace tpsim::mapping {

struct Xfer {
  int src = 0, dst = 0;  // ranks
  uint64_t offset = 0;   // byte range in the buffer
  uint64_t bytes = 0;
  bool reduce = false;  // add into dst instead of overwrite
  // Where the range lands in the destination buffer when that differs from
  // `offset` (only all_to_all: rank r's chunk d lands in rank d's chunk r).
  std::optional<uint64_t> dst_offset;
  uint64_t DstOffset() const { return dst_offset.value_or(offset); }
};

struct CollectiveStep {
  std::vector<Xfer> xfers;
};

struct Schedule {
  std::string algorithm;  // the one actually used
  std::string note;       // fallback explanation, empty when none
  std::vector<CollectiveStep> steps;
  // The transfers go through the switch's reduction / multicast engine, not over
  // the links (only nvls); the lowering marks their Tasks (Task::in_switch_gbps).
  bool in_switch = false;
};

// The grid the ranks form, for mesh_2d (rows x cols = P); 0 x 0 = choose.
struct RankGrid {
  int rows = 0, cols = 0;
};

// Chunk c of P over `bytes`, in order, covering it exactly once: whole elements of
// `align` bytes, the first (elements mod P) chunks one element more than the others
// (37 elements over 4: 10, 9, 9, 9); bytes past the last whole element go to the last chunk.
void ChunkRange(uint64_t bytes, int p, int c, uint64_t align, uint64_t* offset, uint64_t* len);

// Lowers one collective. Throws std::invalid_argument for an unknown algorithm
// name (message lists the valid ones), ranks outside [1, 1024], a mesh_2d grid
// whose rows * cols is not `ranks`, or an all_to_all with unequal chunks.
// align 0 counts as 1.
Schedule LowerCollective(const std::string& algorithm, CollectiveKind kind, int ranks, uint64_t bytes,
                         uint64_t align, RankGrid grid = {});

// An uneven all_to_all (all_to_all_v: MoE token dispatch and combine): rank r sends
// bytes[r][d] to rank d; diagonal blocks stay local (no transfer). Algorithms are a registry of
// their own (mapping.moe.all_to_all; one .cc each in this folder, which documents its steps):
//   direct        one step, every non-empty block r -> d at once
//   pairwise      P - 1 steps; step k pairs r with r XOR k (P a power of two: each pair swaps)
//                 or sends r -> (r + k) mod P (any other P): one block out and one in per step
//   hierarchical  two steps over an R x C rank grid (rank = row * C + col): within rows, rank
//                 (i, j) sends (i, j') everything bound for column j' (its blocks for rows
//                 other than i as one aggregated transfer, the block for (i, j') itself
//                 straight to its place); then within columns, each rank forwards what it holds
//                 for (i'', j') and sends its own block for (i'', j') (see a2a_hierarchical.cc)
// Empty steps and transfers are dropped. Where the blocks sit in each rank's buffer is the
// algorithm's (AllToAllVLayout): every send block is packed before the first transfer and every
// received block is in place after the last. Throws std::invalid_argument for an unknown
// algorithm, a matrix that is not square, or a grid whose rows * cols is not P.
//
//   2 ranks, bytes {{0, 4}, {6, 0}}, direct:  step 0: 0 -> 1 [0, 4) -> [0, 4); 1 -> 0 [0, 6) -> [0, 6)
struct AllToAllVLayout {
  std::vector<std::vector<uint64_t>> send_offset;  // [r][d]: block r -> d in r's buffer
  std::vector<std::vector<uint64_t>> recv_offset;  // [r][d]: block r -> d in d's buffer
  uint64_t buffer_bytes = 0;                       // each rank's buffer (>= every block's end)
};
Schedule LowerAllToAllV(const std::string& algorithm, const std::vector<std::vector<uint64_t>>& bytes,
                        AllToAllVLayout* layout = nullptr, RankGrid grid = {});

// The uneven all_to_all algorithms (sorted), without "auto".
std::vector<std::string> AllToAllVNames();

// A simple cost formula for an uneven all_to_all on `chip`, rank r on core cores[r]: the sum
// over its steps of the most bytes any one link carries in the step (routes from the topology;
// every link weighted alike). mapping.moe.all_to_all "auto" takes the registered algorithm with
// the least (ties: the first by name, so direct). It reads no bandwidth or latency, so a
// program lowered once serves every value of the timing-only fields (sim/run.h, ProgramCache).
// Meshes route dimension-ordered (a direct block already goes row then column), so direct's one
// step carries at most what the others' steps carry in sum: auto picked direct on every shipped
// chip tried (README, "All-to-all algorithms").
uint64_t AllToAllVLinkBytes(const arch::Chip& chip, const Schedule& s, const std::vector<int>& cores);

// Algorithm names LowerCollective accepts (the registry, sorted), without "auto".
std::vector<std::string> CollectiveNames();

// What a chip offers for in-switch reduction (NVLS), from its config.
struct InSwitchReduction {
  bool available = false;     // noc.topology "switch" and collectives.in_switch_reduction
  uint64_t min_bytes = 0;     // collectives.in_switch_min_bytes
  uint32_t min_ranks = 0;     // collectives.in_switch_min_ranks
  double bandwidth_gbps = 0;  // collectives.in_switch_bandwidth_gbps (see nvls.cc for its meaning)
};
InSwitchReduction InSwitchReductionOf(const config::Chip& chip);

// The selection rule: the algorithm one collective uses. `requested` is
// mapping.collective: empty -> "ring"; "auto" -> "nvls" when sw.available, kind is
// all_reduce, ranks >= sw.min_ranks and bytes >= sw.min_bytes, else "ring"; any
// other name is returned as it is (forcing it). Never returns "auto".
std::string ChooseCollective(const std::string& requested, CollectiveKind kind, int ranks, uint64_t bytes,
                             const InSwitchReduction& sw);

// The transfer task of `x`, step `step` of a collective lowered as `s` (index
// `collective` into Program::collectives): cores from `cores[rank]` (rank itself
// when `cores` is empty), payload, byte ranges, reduce flag, and the in-switch
// bandwidth when `s` runs in the switch. id, op and deps are the caller's.
Task XferTask(const Xfer& x, const Schedule& s, const InSwitchReduction& sw, int32_t collective, size_t step,
              const std::vector<int>& cores = {});

// One collective alone as a Program over cores 0..ranks-1 of `chip` (one op, one
// CollectiveInfo; the algorithm chosen by ChooseCollective against the chip, nvls
// transfers marked with the chip's in-switch bandwidth; deps as the lowering makes
// them). For collective sweeps (tpsim-validate --collectives) and engine tests.
// Throws std::invalid_argument as LowerCollective does, for ranks above the chip's
// cores, and for nvls on a chip without in-switch reduction.
Program CollectiveProgram(const arch::Chip& chip, const std::string& requested, CollectiveKind kind,
                          int ranks, uint64_t bytes, uint64_t align);

}  // namespace tpsim::mapping
