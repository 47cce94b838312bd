#include "mapping/layout_convert.h"

#include <algorithm>
#include <functional>
#include <span>
#include <stdexcept>

#include "arch/gpu/collective.h"
#include "chip.pb.h"
#include "mapping/memory_plan.h"
#include "mapping/partition/blocks.h"

namespace tpsim::mapping {

std::vector<LayoutConverter::Piece> LayoutConverter::Blocks(int32_t t, const Layout& l, int r) const {
  const FuncTensor& ft = cx_.tensors[t];
  Range rows = RowsOf(l, ft.rows, cx_.p, r), cols = ColsOf(l, ft.cols, cx_.p, r);
  uint64_t off = 0;
  switch (l.kind) {
    case LayoutKind::kRows:
      off = rows.lo * ft.cols;
      break;
    case LayoutKind::kCols:
      off = uint64_t{ft.rows} * cols.lo;
      break;
    case LayoutKind::kGrid:
      off = static_cast<uint64_t>(r) * rows.size() * cols.size();
      break;
    default:
      break;
  }
  return {{Sl(t, rows, cols), off}};
}

void LayoutConverter::Collective(CollectiveKind kind, int32_t t, const Pieces& pack, const Pieces& unpack,
                                 uint64_t elems, uint64_t align_elems, const std::string& base,
                                 const Layout& result) {
  GroupCollective(kind, t, GridLines(cx_.p, cx_.p, false), "", pack, unpack, elems, align_elems, base,
                  result);
}

int32_t LayoutConverter::AddCollective(CollectiveKind kind, const std::string& algo,
                                       const std::vector<std::vector<int>>& groups, uint64_t bytes,
                                       uint64_t align_bytes, OpId op, const Schedule** sched) {
  const int n = static_cast<int>(groups[0].size());
  const bool sub = groups.size() > 1 || n != cx_.p;
  // Layers repeat their collectives: each distinct one is lowered once.
  const RankGrid grid = sub ? RankGrid{1, n} : cx_.coll_grid;
  auto [it, inserted] = cx_.schedules.try_emplace(
      std::make_tuple(algo, static_cast<int>(kind), n, bytes, align_bytes, grid.rows, grid.cols));
  if (inserted) it->second = LowerCollective(algo, kind, n, bytes, align_bytes, grid);
  *sched = &it->second;
  CollectiveInfo ci;
  ci.kind = kind;
  ci.algorithm = AlgorithmOf((*sched)->algorithm);
  ci.bytes = bytes;
  ci.ranks = n;
  ci.groups = static_cast<int>(groups.size());
  ci.op = op;
  ci.members.reserve(groups.size() * n);
  for (const std::vector<int>& g : groups)
    for (int r : g) ci.members.push_back(cx_.cores[r]);
  cx_.prog.collectives.push_back(ci);
  return static_cast<int32_t>(cx_.prog.collectives.size() - 1);
}

void LayoutConverter::GroupCollective(CollectiveKind kind, int32_t t,
                                      const std::vector<std::vector<int>>& groups, const std::string& what,
                                      const Pieces& pack, const Pieces& unpack, uint64_t elems,
                                      uint64_t align_elems, const std::string& base, const Layout& result) {
  std::string kname = ToString(kind);
  const int n = static_cast<int>(groups[0].size());
  if (cx_.chip.config().has_gpu() && !cx_.func && n > 1 && kind != CollectiveKind::kRotate &&
      kind != CollectiveKind::kP2p) {
    NcclCollective(kind, t, groups, elems * cx_.d, base, result);
    return;
  }
  const bool sub = groups.size() > 1 || n != cx_.p;
  const std::string algo = ChooseCollective(cx_.algo, kind, n, elems * cx_.d, cx_.sw);
  cx_.NewOp(base + "." + kname, algo);
  const Schedule* lowered = nullptr;  // (mesh_2d's note says when a sub-group's grid is a single row)
  const int32_t coll =
      AddCollective(kind, algo, groups, elems * cx_.d, align_elems * cx_.d, cx_.cur_op, &lowered);
  const Schedule& sched = *lowered;
  std::string label = sched.note;
  if (sub) {
    label = std::to_string(groups.size()) + " " + what + " groups of " + std::to_string(n) + " ranks" +
            (label.empty() ? "" : "; " + label);
  }
  if (!label.empty()) {
    cx_.prog.ops[cx_.cur_op].ref.partition = sched.algorithm;
    cx_.prog.ops[cx_.cur_op].ref.note = label;
  }
  FuncCollective fc;
  // One buffer tensor: every core keeps its own copy, so each group's ranks use theirs.
  fc.buffer = cx_.NewTensor(FuncTensorKind::kBuffer, 1, elems);
  for (int r = 0; cx_.func && r < cx_.p; ++r) {
    for (const Piece& pc : pack[r]) fc.pack.push_back({cx_.cores[r], pc.region, pc.offset, false});
    for (const Piece& pc : unpack[r]) fc.unpack.push_back({cx_.cores[r], pc.region, pc.offset, false});
  }
  for (int r = 0; r < cx_.p; ++r) cx_.mem->Reload(t, r, nullptr);
  // The shapes of this schedule's transfers on these cores: interned by the first
  // collective that runs it there, taken as they are by every repeat.
  auto [cached, fresh] = cx_.transfer_shapes.try_emplace({lowered, cx_.prog.collectives[coll].members});
  std::vector<uint32_t>& shapes = cached->second;
  const double in_switch_gbps = sched.in_switch ? cx_.sw.bandwidth_gbps : 0;
  if (fresh) {
    std::vector<TransferShape> xs;
    for (const CollectiveStep& step : sched.steps)
      for (const std::vector<int>& g : groups)
        for (const Xfer& x : step.xfers)
          xs.push_back({x.bytes, x.offset, x.DstOffset(), in_switch_gbps, cx_.cores[g[x.dst]], x.reduce});
    cx_.builder.InternTransfers(xs, &shapes);
  }
  size_t next_shape = 0;
  const std::vector<std::vector<TaskId>>& ready = cx_.ts[t].ready;
  // Per rank: the transfers into it in the last step that had any, in this step, in all.
  std::vector<std::vector<TaskId>> last_in(cx_.p), now(cx_.p), all_in(cx_.p);
  std::vector<TaskId> deps;
  for (size_t s = 0; s < sched.steps.size(); ++s) {
    // Step s of every group before step s + 1 of any: the groups' transfers interleave.
    for (const std::vector<int>& g : groups)
      for (const Xfer& x : sched.steps[s].xfers) {
        const int src = g[x.src], dst = g[x.dst];
        const std::vector<TaskId>& after = last_in[src].empty() ? ready[src] : last_in[src];
        // A step's transfers into a rank come in id order: without a reduce, the deps are most
        // often increasing already, and are then taken as they are (what SortUnique leaves).
        std::span<const TaskId> use(after);
        if (x.reduce ||
            std::adjacent_find(after.begin(), after.end(), std::greater_equal<TaskId>()) != after.end()) {
          deps.assign(after.begin(), after.end());
          if (x.reduce) Append(&deps, ready[dst]);
          cx_.SortUnique(&deps);
          use = deps;
        }
        const TaskId id = cx_.builder.AddTransfer(
            CoreId(cx_.cores[src]), cx_.cur_op, static_cast<uint16_t>(s), shapes.at(next_shape++), coll, use);
        if (fc.first_task < 0) fc.first_task = id;
        fc.last_task = id;
        now[dst].push_back(id);
        all_in[dst].push_back(id);
      }
    for (int r = 0; r < cx_.p; ++r)
      if (!now[r].empty()) {
        last_in[r].swap(now[r]);
        now[r].clear();
      }
  }
  if (cx_.func) cx_.prog.func.collectives.push_back(std::move(fc));
  for (int r = 0; r < cx_.p; ++r) Append(&cx_.ts[t].ready[r], all_in[r]);
  cx_.ts[t].layout = result;
}

void LayoutConverter::NcclCollective(CollectiveKind kind, int32_t t,
                                     const std::vector<std::vector<int>>& groups, uint64_t bytes,
                                     const std::string& base, const Layout& result) {
  namespace gpu = arch::gpu;
  const int n = static_cast<int>(groups[0].size());
  // mapping.collective "ring" / "nvls" force NCCL's algorithm (nvls: all_reduce only, as
  // NCCL_ALGO=NVLS; ring: not all_to_all, which NCCL runs as p2p sends and receives, as
  // moe_all_to_all.cc does); anything else lets NCCL's tuner choose.
  gpu::Algo algo = gpu::Algo::kAuto;
  if (cx_.algo == "ring" && kind != CollectiveKind::kAllToAll) algo = gpu::Algo::kRing;
  if (cx_.algo == "nvls" && kind == CollectiveKind::kAllReduce) algo = gpu::Algo::kNvls;
  Task tk;
  tk.op_kind = llm::OpKind::kCollective;
  tk.m = static_cast<uint64_t>(kind), tk.n = static_cast<uint64_t>(n), tk.k = static_cast<uint64_t>(algo);
  tk.bytes = bytes;
  // The op's label: what NCCL would run (its tuner's choice of algorithm and protocol).
  std::string note;
  try {
    const gpu::CollEstimate e =
        gpu::EstimateCollective(cx_.chip.config().gpu(), cx_.chip.num_cores(),
                                {.op = kind == CollectiveKind::kAllReduce       ? gpu::CollOp::kAllReduce
                                       : kind == CollectiveKind::kAllGather     ? gpu::CollOp::kAllGather
                                       : kind == CollectiveKind::kReduceScatter ? gpu::CollOp::kReduceScatter
                                                                                : gpu::CollOp::kAllToAll,
                                 .ranks = n,
                                 .bytes = bytes,
                                 .algo = algo});
    note = std::string(gpu::ToString(e.algo)) + "/" + gpu::ToString(e.proto);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("mapping: ") + ToString(kind) + " over " + std::to_string(n) +
                                " GPUs of " + cx_.chip.config().name() + ": " + e.what());
  }
  cx_.NewOp(base + "." + ToString(kind), "nccl");
  cx_.prog.ops[cx_.cur_op].ref.note = note;
  CollectiveInfo ci;
  ci.kind = kind;
  ci.algorithm = AlgorithmOf("nccl");
  ci.bytes = bytes;
  ci.ranks = n;
  ci.groups = static_cast<int>(groups.size());
  ci.op = cx_.cur_op;
  for (const std::vector<int>& g : groups)
    for (int r : g) ci.members.push_back(cx_.cores[r]);
  cx_.prog.collectives.push_back(std::move(ci));
  // One kernel per rank; every rank's kernel starts once all ranks of its group are ready
  // (NCCL's kernels wait for each other), so a group's kernels run together.
  std::vector<TaskId> out(cx_.p, TaskId(UINT32_MAX));
  for (const std::vector<int>& g : groups) {
    std::vector<TaskId> deps;
    for (int r : g) Append(&deps, cx_.Ready(t, r));
    for (int r : g) out[r] = cx_.Compute(r, tk, FuncOp{}, deps, 0);
  }
  for (int r = 0; r < cx_.p; ++r)
    if (out[r] != UINT32_MAX) cx_.ts[t].ready[r].push_back(out[r]);
  cx_.ts[t].layout = result;
}

bool LayoutConverter::GatherGridRow(int32_t t, const std::string& base) {
  const Layout have = cx_.ts[t].layout;
  const FuncTensor& ft = cx_.tensors[t];
  const bool rows_split = have.kind == LayoutKind::kRows;
  const int gr = rows_split ? cx_.grid.rows : have.gr, gc = rows_split ? cx_.grid.cols : have.gc;
  if (rows_split ? ft.rows % cx_.p != 0
                 : ft.rows % gr != 0 || ft.cols % have.unit != 0 || (ft.cols / have.unit) % gc != 0)
    return false;
  // Group i = grid row i (ranks i*gc .. i*gc + gc-1); its buffer is row block i, the
  // group's rank j contributing chunk j: its grid block (column block j), or from a row
  // split its rows (row sub-block j, contiguous).
  const uint64_t blk = uint64_t{ft.rows / gr} * ft.cols / gc;
  auto block = [&](int r) { return Sl(t, RowsOf(have, ft.rows, cx_.p, r), ColsOf(have, ft.cols, cx_.p, r)); };
  std::vector<std::vector<Piece>> pack(cx_.p), unpack(cx_.p);
  for (int r = 0; cx_.func && r < cx_.p; ++r) {
    const int i = r / gc, j = r % gc;
    pack[r].push_back({block(r), j * blk});
    for (int b = 0; b < gc; ++b) unpack[r].push_back({block(i * gc + b), b * blk});
  }
  GroupCollective(CollectiveKind::kAllGather, t, GridLines(cx_.p, gc, false), "grid-row", pack, unpack,
                  gc * blk, blk, base, Layout::GridRows(gr, gc));
  return true;
}

void LayoutConverter::GatherGridColumn(int32_t t, const std::string& base) {
  const Layout have = cx_.ts[t].layout;
  const FuncTensor& ft = cx_.tensors[t];
  const int gc = have.gc;
  // Group j = grid column j (ranks j, gc + j, ...); its buffer is the whole tensor, the
  // group's rank i contributing row block i (row-major, so chunk i at rows.lo * cols).
  std::vector<std::vector<Piece>> pack(cx_.p), unpack(cx_.p);
  for (int r = 0; cx_.func && r < cx_.p; ++r) {
    const Range rows = RowsOf(have, ft.rows, cx_.p, r);
    pack[r] = {{Sl(t, rows, {0, ft.cols}), rows.lo * ft.cols}};
    for (int i = 0; i < have.gr; ++i) {
      const Range ri = RowsOf(have, ft.rows, cx_.p, i * gc);
      unpack[r].push_back({Sl(t, ri, {0, ft.cols}), ri.lo * ft.cols});
    }
  }
  GroupCollective(CollectiveKind::kAllGather, t, GridLines(cx_.p, gc, true), "grid-column", pack, unpack,
                  uint64_t{ft.rows} * ft.cols, ft.cols, base, Layout::Replicated());
}

void LayoutConverter::Convert(int32_t t, const Layout& want, const std::string& base) {
  Layout have = cx_.ts[t].layout;
  if (cx_.p == 1 || cx_.Satisfies(t, want)) return;
  const FuncTensor& ft = cx_.tensors[t];
  uint64_t elems = uint64_t{ft.rows} * ft.cols;
  std::vector<std::vector<Piece>> pack(cx_.p), unpack(cx_.p);
  Piece whole{Sl(t, {0, ft.rows}, {0, ft.cols}), 0};
  if (have.kind == LayoutKind::kPartial) {
    bool cols_ok = want.kind == LayoutKind::kCols && DisjointCols(ft.cols, want.unit, cx_.p);
    if (want.kind == LayoutKind::kRows || cols_ok) {
      for (int r = 0; cx_.func && r < cx_.p; ++r) {
        for (int b = 0; b < cx_.p; ++b) pack[r].push_back(Blocks(t, want, b)[0]);
        unpack[r] = Blocks(t, want, r);
      }
      uint64_t align = want.kind == LayoutKind::kRows ? ft.cols : uint64_t{ft.rows} * want.unit;
      Collective(CollectiveKind::kReduceScatter, t, pack, unpack, elems, align, base, want);
      return;
    }
    for (int r = 0; cx_.func && r < cx_.p; ++r) pack[r] = {whole}, unpack[r] = {whole};
    Collective(CollectiveKind::kAllReduce, t, pack, unpack, elems, 1, base, Layout::Replicated());
    return;
  }
  // rows <-> whole-head columns with equal blocks: all_to_all; block (r, d) goes from rank r's
  // chunk d to rank d's chunk r.
  bool rows_to_cols = have.kind == LayoutKind::kRows && want.kind == LayoutKind::kCols;
  bool cols_to_rows = have.kind == LayoutKind::kCols && want.kind == LayoutKind::kRows;
  if (rows_to_cols || cols_to_rows) {
    uint32_t unit = rows_to_cols ? want.unit : have.unit;
    uint64_t units = ft.cols / unit;
    if (ft.rows % cx_.p == 0 && ft.cols % unit == 0 && units % cx_.p == 0) {
      Layout rl = Layout::Rows(), cl = Layout::Cols(unit);
      uint64_t blk = (ft.rows / cx_.p) * (ft.cols / cx_.p);
      auto block = [&](int src, int dst) {
        int row_owner = rows_to_cols ? src : dst, col_owner = rows_to_cols ? dst : src;
        return Sl(t, RowsOf(rl, ft.rows, cx_.p, row_owner), ColsOf(cl, ft.cols, cx_.p, col_owner));
      };
      for (int r = 0; cx_.func && r < cx_.p; ++r)
        for (int d = 0; d < cx_.p; ++d) {
          pack[r].push_back({block(r, d), d * blk});
          unpack[d].push_back({block(r, d), r * blk});
        }
      // Each rank's buffer: its P blocks.
      Collective(CollectiveKind::kAllToAll, t, pack, unpack, cx_.p * blk, blk, base, rows_to_cols ? cl : rl);
      return;
    }
  }
  // mn_2d layouts: within a grid row when whole rows are all `want` needs, else within a
  // grid column (grid_rows -> replicated); a grid that needs more gathers over everyone.
  const bool to_grid_rows =
      (have.kind == LayoutKind::kGrid && cx_.Covers(Layout::GridRows(have.gr, have.gc), t, want)) ||
      (have.kind == LayoutKind::kRows && want.kind == LayoutKind::kGridRows);
  if (to_grid_rows && GatherGridRow(t, base)) return;
  if (have.kind == LayoutKind::kGridRows) {
    GatherGridColumn(t, base);
    return;
  }
  if (have.kind == LayoutKind::kCols && !DisjointCols(ft.cols, have.unit, cx_.p)) {
    // Shared heads: gather from disjoint column blocks inside them.
    if (!cx_.Satisfies(t, Layout::Cols(1)))
      throw std::logic_error("mapping: cannot gather " + ToString(have) + " of " + std::to_string(ft.cols) +
                             " columns");
    have = Layout::Cols(1);
  }
  uint64_t align = 1;
  if (have.kind == LayoutKind::kRows) align = ft.cols;
  if (have.kind == LayoutKind::kCols) align = uint64_t{ft.rows} * have.unit;
  for (int r = 0; cx_.func && r < cx_.p; ++r) {
    pack[r] = Blocks(t, have, r);
    for (int b = 0; b < cx_.p; ++b) unpack[r].push_back(Blocks(t, have, b)[0]);
  }
  if (have.kind == LayoutKind::kGrid) {
    FuncSlice s = Blocks(t, have, 0)[0].region;
    align = uint64_t{s.r1 - s.r0} * (s.c1 - s.c0);
  }
  Collective(CollectiveKind::kAllGather, t, pack, unpack, elems, align, base, Layout::Replicated());
}

void LayoutConverter::ResolvePartial(int32_t t, const Layout& next_want, const std::string& base) {
  if (cx_.ts[t].layout.kind == LayoutKind::kPartial)
    Convert(t, next_want.kind == LayoutKind::kRows ? Layout::Rows() : Layout::Replicated(), base);
  if (cx_.ts[t].layout.kind == LayoutKind::kGrid || cx_.ts[t].layout.kind == LayoutKind::kCols) {
    // Stays split: the element-wise op follows it.
  }
}

}  // namespace tpsim::mapping
