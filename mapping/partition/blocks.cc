// Shared emission blocks of the partitioners (see blocks.h).
#include "mapping/partition/blocks.h"

#include <algorithm>
#include <functional>

namespace tpsim::mapping {
namespace {

FuncSlice Sl(int32_t t, Range rows, Range cols) {
  return {t, static_cast<uint32_t>(rows.lo), static_cast<uint32_t>(rows.hi), static_cast<uint32_t>(cols.lo),
          static_cast<uint32_t>(cols.hi)};
}

void Append(std::vector<TaskId>* a, const std::vector<TaskId>& b) { a->insert(a->end(), b.begin(), b.end()); }

// compute(rank, units of the arrival, deps): the compute on an arrived block.
using RotateCompute = std::function<TaskId(int, Range, std::vector<TaskId>)>;

// The steps of rotation c run by `groups` of ranks at once (step s of every group before
// step s + 1 of any). Each transfer waits for the block it forwards; with two block
// buffers per rank, the block arriving at step s >= 1 also waits until its destination
// has computed on, and forwarded, the block it overwrites. Every arrival is computed on:
// compute(rank, the arrival's units of `unit_bytes`, {transfer}). computes[r] starts with
// rank r's computes on its own block; last_in[r] is what its own block waits for; the first
// step's block into rank r's arriving buffer also waits for free[r] (GemmContext::BufferFree,
// taken before the op's first compute).
void RotateSteps(GemmContext& ctx, const CollectiveRun& c, const std::vector<std::vector<int>>& groups,
                 uint64_t unit_bytes, std::vector<std::vector<TaskId>> last_in,
                 const std::vector<std::vector<TaskId>>& free,
                 std::vector<std::vector<std::vector<TaskId>>>* computes, FuncCollective* fc,
                 const RotateCompute& compute) {
  const int p = ctx.P();
  const Schedule& sched = *c.schedule;
  std::vector<std::vector<TaskId>> sent(p);  // each rank's sends of the previous step
  for (size_t s = 0; s < sched.steps.size(); ++s) {
    std::vector<std::vector<TaskId>> now(p), sending(p);
    for (const std::vector<int>& grp : groups)
      for (Xfer x : sched.steps[s].xfers) {
        x.src = grp[x.src], x.dst = grp[x.dst];
        std::vector<TaskId> deps = last_in[x.src];
        // Arrival s + 1 overwrites arrival s - 1's buffer, which the destination must have
        // computed on and forwarded (its sends of step s - 1).
        std::vector<std::vector<TaskId>>& at = (*computes)[x.dst];
        if (s >= 1 && at.size() > s - 1) Append(&deps, at[s - 1]);
        if (s >= 1) Append(&deps, sent[x.dst]);
        if (s == 0) Append(&deps, free[x.dst]);
        TaskId id = ctx.EmitTransfer(c, s, x, std::move(deps));
        if (fc->first_task < 0) fc->first_task = id;
        fc->last_task = id;
        now[x.dst].push_back(id);
        sending[x.src].push_back(id);
        if (at.size() < s + 2) at.resize(s + 2);
        const Range units{x.offset / unit_bytes, (x.offset + x.bytes + unit_bytes - 1) / unit_bytes};
        if (units.size() > 0) {
          const TaskId cid = compute(x.dst, units, {id});
          (*computes)[x.dst][s + 1].push_back(cid);
        }
      }
    for (int r = 0; r < p; ++r)
      if (!now[r].empty()) last_in[r] = std::move(now[r]);
    sent = std::move(sending);
  }
}

}  // namespace

std::vector<std::vector<int>> GridLines(int p, int gc, bool columns) {
  std::vector<std::vector<int>> g(columns ? gc : p / gc);
  for (int r = 0; r < p; ++r) g[columns ? r % gc : r / gc].push_back(r);
  return g;
}

void EmitShard(GemmContext& ctx, const GemmSpec& g, int rank, Range rows, Range ks, Range cols) {
  GemmContext::WeightBlock w = ctx.FetchWeights(rank, ks.size() * cols.size() * ctx.DtypeBytes());
  ShardGemm s;
  s.rows = rows, s.ks = ks, s.cols = cols;
  s.b = Sl(g.w, ks, cols);
  s.buffer_bytes = w.sram_bytes;
  ctx.EmitGemm(g, rank, s, std::move(w.deps));
}

void EmitRotation(GemmContext& ctx, const GemmSpec& g) {
  const int p = ctx.P();
  const uint64_t col_bytes = g.k * ctx.DtypeBytes();
  const std::vector<std::vector<int>> ring = GridLines(p, p, false);
  const CollectiveRun c = ctx.AddCollective(CollectiveKind::kRotate, ring, g.n * col_bytes, col_bytes, g.op);
  FuncCollective fc;
  fc.buffer = ctx.NewBuffer(g.n, g.k);  // W^T: shard = whole rows
  // The SRAM a rank's computes hold for shards besides its resident weights, sized by the
  // widest shard (Split's first): a rank receives the next shard while it computes on and
  // forwards the current one, so at most two at once. Resident weights hold the own shard,
  // so the P - 1 arrivals need min(P - 1, 2) buffers: none at P = 1, one at P = 2 (a single
  // arrival). Streamed weights read the own shard into a buffer too, which arrival 2 reuses
  // (RotateSteps): min(P, 2). Set from rank 0's read, before its first compute.
  const uint64_t shard_bytes = Split(g.n, p, 0).size() * col_bytes;
  uint64_t buffers = 0;
  auto compute = [&](int r, Range cols, std::vector<TaskId> deps) {
    ShardGemm s;
    s.rows = Split(g.t, p, r), s.ks = {0, g.k}, s.cols = cols;
    s.b = Sl(fc.buffer, cols, {0, g.k});
    s.transpose_b = true;
    s.buffer_bytes = buffers;
    return ctx.EmitGemm(g, r, s, std::move(deps));
  };
  // computes[r][a]: rank r's computes on arrival a (a = 0: its own shard; a = s + 1: step s).
  std::vector<std::vector<std::vector<TaskId>>> computes(p, std::vector<std::vector<TaskId>>(1));
  std::vector<std::vector<TaskId>> shard_ready(p), free(p);
  for (int r = 0; r < p; ++r) free[r] = ctx.BufferFree(r);
  for (int r = 0; r < p; ++r) {
    Range cols = Split(g.n, p, r);
    if (ctx.Functional()) fc.pack.push_back({ctx.Core(r), Sl(g.w, {0, g.k}, cols), cols.lo * g.k, true});
    GemmContext::WeightBlock w = ctx.FetchWeights(r, cols.size() * col_bytes);
    if (r == 0) buffers = static_cast<uint64_t>(std::min(w.sram_bytes > 0 ? p : p - 1, 2)) * shard_bytes;
    shard_ready[r] = std::move(w.deps);
    computes[r][0].push_back(compute(r, cols, shard_ready[r]));
  }
  RotateSteps(ctx, c, ring, col_bytes, shard_ready, free, &computes, &fc, compute);
  if (ctx.Functional()) ctx.AddFuncCollective(std::move(fc));
}

void EmitKSteps(GemmContext& ctx, const GemmSpec& g) {
  const int p = ctx.P(), gr = ctx.Grid().rows, gc = ctx.Grid().cols;
  const Layout out = Layout::Grid(gr, gc, g.n_unit);
  const uint64_t kb = g.k / gr, nc = ColsOf(out, g.n, p, 0).size();  // Choose: k % gr == 0, equal columns
  const uint64_t row_bytes = nc * ctx.DtypeBytes(), block_bytes = kb * row_bytes;
  // Group j = grid column j (ranks j, gc + j, ...); its buffer is W[:, cols j] as [k, nc],
  // member i's chunk being its K-block i (rows i kb .. (i+1) kb - 1).
  const std::vector<std::vector<int>> groups = GridLines(p, gc, true);
  const CollectiveRun c =
      ctx.AddCollective(CollectiveKind::kRotate, groups, g.k * row_bytes, row_bytes, g.op);
  FuncCollective fc;
  fc.buffer = ctx.NewBuffer(g.k, nc);  // per core: its grid column's W[:, cols j]
  // computes[r][a]: rank r's computes on arrival a (a = 0: its own block; a = s + 1: step s).
  std::vector<std::vector<std::vector<TaskId>>> computes(p, std::vector<std::vector<TaskId>>(1));
  std::vector<int64_t> prev(p, -1);  // the compute each next one accumulates after
  auto compute = [&](int r, Range ks, std::vector<TaskId> deps) {
    ShardGemm s;
    s.rows = RowsOf(out, g.t, p, r), s.ks = ks, s.cols = ColsOf(out, g.n, p, r);
    s.b = Sl(fc.buffer, ks, {0, nc});
    s.accumulate = prev[r] >= 0;
    if (prev[r] >= 0) deps.push_back(TaskId(static_cast<uint32_t>(prev[r])));
    // The two K-blocks in SRAM (the one computed on, the one arriving); streamed weights
    // are read into the first.
    s.buffer_bytes = 2 * block_bytes;
    const TaskId id = ctx.EmitGemm(g, r, s, std::move(deps));
    prev[r] = id;
    return id;
  };
  std::vector<std::vector<TaskId>> last_in(p), free(p);
  for (int r = 0; r < p; ++r) free[r] = ctx.BufferFree(r);
  for (int r = 0; r < p; ++r) {
    const int i = r / gc;
    const Range ks{i * kb, (i + 1) * kb}, cols = ColsOf(out, g.n, p, r);
    if (ctx.Functional()) fc.pack.push_back({ctx.Core(r), Sl(g.w, ks, cols), ks.lo * nc, false});
    last_in[r] = ctx.FetchWeights(r, block_bytes).deps;
    computes[r][0].push_back(compute(r, ks, last_in[r]));
  }
  // Two K-block buffers per rank; the grid columns' steps interleave.
  RotateSteps(ctx, c, groups, row_bytes, last_in, free, &computes, &fc, compute);
  if (ctx.Functional()) ctx.AddFuncCollective(std::move(fc));
}

}  // namespace tpsim::mapping
