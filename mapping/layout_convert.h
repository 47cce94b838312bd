#pragma once
// The layout converter: brings a tensor from the layout it is in to the one its next
// reader needs by inserting collectives (mapping/layout.h draws the layouts):
//
//   partial   -> rows / whole-head cols   reduce_scatter
//   partial   -> anything else            all_reduce (-> replicated)
//   rows     <-> cols (equal blocks)      all_to_all
//   grid      -> grid_rows                all_gather within each grid row
//   grid_rows -> replicated               all_gather within each grid column
//   anything  -> replicated               all_gather
//
// Each collective is one op named "<producer>.<kind>" and one Program collective whose
// lowered steps become transfer tasks between the stage's cores. On a GPU-node chip (without
// functional data) it is one NCCL kernel per rank instead (NcclCollective).

#include <cstdint>
#include <string>
#include <vector>

#include "mapping/lower_context.h"

namespace tpsim::mapping {

class LayoutConverter {
 public:
  explicit LayoutConverter(LowerContext& cx) : cx_(cx) {}

  // Converts tensor t so that it satisfies `want` (nothing when it already does); `base`
  // names the collective's op.
  void Convert(int32_t t, const Layout& want, const std::string& base);
  // A partial sum before an element-wise op: reduce-scattered to rows when the next op
  // wants rows, else all-reduced.
  void ResolvePartial(int32_t t, const Layout& next_want, const std::string& base);
  // Lowers one collective run by the rank groups `groups` (equal sizes n; algorithm `algo`,
  // a buffer of `bytes` per rank) and records its CollectiveInfo (members: the groups'
  // cores) for op `op`; returns its index and sets *sched to its lowered steps (kept here;
  // layers repeat their collectives, each distinct one is lowered once). The whole TP
  // group uses the stage region's grid; a sub-group is one line of the TP grid (1 x n).
  int32_t AddCollective(CollectiveKind kind, const std::string& algo,
                        const std::vector<std::vector<int>>& groups, uint64_t bytes, uint64_t align_bytes,
                        OpId op, const Schedule** sched);

 private:
  struct Piece {
    FuncSlice region;
    uint64_t offset;
  };
  using Pieces = std::vector<std::vector<Piece>>;
  void Collective(CollectiveKind kind, int32_t t, const Pieces& pack, const Pieces& unpack, uint64_t elems,
                  uint64_t align_elems, const std::string& base, const Layout& result);
  // The same collective run at once by disjoint groups of ranks (groups[g][i]: group g's
  // i-th rank; all groups the same size), each group on its own buffer of `elems`
  // elements; pack/unpack offsets are within the group's buffer. `what` names the groups
  // in the op label ("grid-row"). One CollectiveInfo with groups = groups.size().
  void GroupCollective(CollectiveKind kind, int32_t t, const std::vector<std::vector<int>>& groups,
                       const std::string& what, const Pieces& pack, const Pieces& unpack, uint64_t elems,
                       uint64_t align_elems, const std::string& base, const Layout& result);
  // mn_2d sub-group gathers: grid -> grid_rows within each grid row, grid_rows ->
  // replicated within each grid column. False (nothing emitted) when the blocks are unequal.
  // On a GPU-node chip (without functional data): the collective as one NCCL kernel per rank
  // (a compute task of kind kCollective that the cost model times with
  // arch::gpu::EstimateCollective) instead of its lowered transfers.
  void NcclCollective(CollectiveKind kind, int32_t t, const std::vector<std::vector<int>>& groups,
                      uint64_t bytes, const std::string& base, const Layout& result);
  bool GatherGridRow(int32_t t, const std::string& base);
  void GatherGridColumn(int32_t t, const std::string& base);
  std::vector<Piece> Blocks(int32_t t, const Layout& l, int r) const;  // rank r's block and its offset

  LowerContext& cx_;
};

}  // namespace tpsim::mapping
