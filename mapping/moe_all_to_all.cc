// The MoE block's uneven all_to_alls (dispatch and combine): per replica of the experts, the
// algorithm mapping.moe.all_to_all lowered on the replica's rank grid, then its transfers
// (moe_pass.h).
#include <algorithm>
#include <stdexcept>

#include "arch/gpu/collective.h"
#include "chip.pb.h"
#include "mapping/collective/collective.h"
#include "mapping/moe_pass.h"

namespace tpsim::mapping {

MoePass::AllToAllPlan MoePass::LowerPlan(const std::string& algorithm,
                                         const std::vector<std::vector<uint64_t>>& bytes,
                                         const std::vector<std::vector<int>>& perm, RankGrid grid) const {
  const MoeGroups g = MoeGroupsOf(cx_.m, cx_.model, cx_.p);
  const int span = g.Span(), replicas = g.Replicas(), p = cx_.p;
  AllToAllPlan plan;
  plan.algorithm = algorithm;
  plan.bytes = bytes;
  plan.off.assign(p, std::vector<std::pair<uint64_t, uint64_t>>(p));
  for (int rep = 0; rep < replicas; ++rep) {
    // Local rank k stands for global rank at[k] (the grid order for hierarchical; direct and
    // pairwise keep rank order).
    std::vector<int> at(span);
    const bool grid_order = algorithm == "hierarchical" && !perm[rep].empty();
    for (int k = 0; k < span; ++k) at[k] = rep * span + (grid_order ? perm[rep][k] : k);
    std::vector<std::vector<uint64_t>> local(span, std::vector<uint64_t>(span, 0));
    for (int i = 0; i < span; ++i) {
      uint64_t row = 0;
      for (int j = 0; j < span; ++j) row += local[i][j] = bytes[at[i]][at[j]];
      plan.most = std::max(plan.most, row);
    }
    AllToAllVLayout layout;
    Schedule sched = LowerAllToAllV(algorithm, local, &layout, grid_order ? grid : RankGrid{});
    for (CollectiveStep& st : sched.steps)
      for (Xfer& x : st.xfers) x.src = at[x.src], x.dst = at[x.dst];
    plan.scheds.push_back(std::move(sched));
    plan.buffer_bytes = std::max(plan.buffer_bytes, layout.buffer_bytes);
    for (int i = 0; i < span; ++i)
      for (int j = 0; j < span; ++j)
        plan.off[at[i]][at[j]] = {layout.send_offset[i][j], layout.recv_offset[i][j]};
  }
  return plan;
}

MoePass::AllToAllPlan MoePass::PlanAllToAllV(const std::vector<std::vector<uint64_t>>& bytes) const {
  const MoeGroups g = MoeGroupsOf(cx_.m, cx_.model, cx_.p);
  const int span = g.Span(), replicas = g.Replicas(), p = cx_.p;
  AllToAllPlan plan;
  plan.bytes = bytes;
  plan.off.assign(p, std::vector<std::pair<uint64_t, uint64_t>>(p));
  if (span == 1) return plan;
  // hierarchical needs the ranks of a replica as a grid of physical rows and columns: where
  // their cores fill an R x C rectangle of the chip's grid (any placement order), local rank
  // k = i * C + j is the core of the i-th row and j-th column (the grid of the first replica;
  // a replica of another shape, or one that fills no rectangle, keeps rank order on the most
  // square grid).
  std::vector<std::vector<int>> perm(replicas);
  RankGrid grid;
  for (int rep = 0; rep < replicas; ++rep) {
    std::vector<int> rows, cols;
    for (int k = 0; k < span; ++k) {
      const arch::Node& n = cx_.chip.node(cx_.cores[rep * span + k]);
      rows.push_back(n.row), cols.push_back(n.col);
    }
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    const int nr = static_cast<int>(rows.size()), nc = static_cast<int>(cols.size());
    std::vector<int> order(span, -1);
    bool rect = rows.front() >= 0 && cols.front() >= 0 && nr * nc == span;
    for (int k = 0; rect && k < span; ++k) {
      const arch::Node& n = cx_.chip.node(cx_.cores[rep * span + k]);
      const int at = static_cast<int>(std::lower_bound(rows.begin(), rows.end(), n.row) - rows.begin()) * nc +
                     static_cast<int>(std::lower_bound(cols.begin(), cols.end(), n.col) - cols.begin());
      rect = order[at] < 0;
      order[at] = k;
    }
    if (rep == 0 && rect) grid = {nr, nc};
    if (rect && grid.rows == nr && grid.cols == nc) perm[rep] = order;
  }
  const std::string& requested = cx_.m.moe().all_to_all();
  if (requested != "auto") return LowerPlan(requested.empty() ? "direct" : requested, bytes, perm, grid);
  // auto: the least AllToAllVLinkBytes (the busiest replica's); ties keep the first by name.
  uint64_t best = 0;
  for (const std::string& a : AllToAllVNames()) {
    AllToAllPlan cand = LowerPlan(a, bytes, perm, grid);
    uint64_t t = 0;
    for (const Schedule& sc : cand.scheds) t = std::max(t, AllToAllVLinkBytes(cx_.chip, sc, cx_.cores));
    if (plan.scheds.empty() || t < best) best = t, plan = std::move(cand);
  }
  return plan;
}

std::vector<std::vector<TaskId>> MoePass::AllToAllV(const std::string& name, const AllToAllPlan& plan,
                                                    const std::vector<std::vector<TaskId>>& deps,
                                                    FuncCollective* fc) {
  const MoeGroups g = MoeGroupsOf(cx_.m, cx_.model, cx_.p);
  const int span = g.Span(), replicas = g.Replicas();
  std::vector<std::vector<TaskId>> in(cx_.p);
  if (span == 1) return in;  // every rank holds all the experts its rows need
  const bool nccl = cx_.chip.config().has_gpu() && !cx_.func;
  cx_.NewOp(name, nccl ? "nccl" : plan.algorithm);
  std::string note = replicas > 1 ? std::to_string(replicas) + " expert replicas" : "";
  if (!nccl && !plan.scheds[0].note.empty()) note += (note.empty() ? "" : "; ") + plan.scheds[0].note;
  if (!note.empty()) cx_.prog.ops[cx_.cur_op].ref.note = note;
  CollectiveInfo ci;
  ci.kind = CollectiveKind::kAllToAll;
  ci.algorithm = AlgorithmOf(nccl ? "nccl" : plan.algorithm);
  ci.bytes = plan.most;
  ci.ranks = span;
  ci.groups = replicas;
  ci.op = cx_.cur_op;
  for (int r = 0; r < replicas * span; ++r) ci.members.push_back(cx_.cores[r]);
  cx_.prog.collectives.push_back(ci);
  if (nccl) return NcclAllToAllV(plan, deps);
  const int32_t coll = static_cast<int32_t>(cx_.prog.collectives.size() - 1);
  // A step's transfer from r waits for r's data (deps[r]) and, after the first step, for what
  // r received in the earlier steps (it may forward it; pairwise steps are synchronous).
  for (int rep = 0; rep < replicas; ++rep) {
    std::vector<std::vector<TaskId>> got(cx_.p);
    for (size_t s = 0; s < plan.scheds[rep].steps.size(); ++s) {
      std::vector<std::vector<TaskId>> now(cx_.p);
      for (const Xfer& x : plan.scheds[rep].steps[s].xfers) {  // global ranks (PlanAllToAllV)
        std::vector<TaskId> after = deps[x.src];
        Append(&after, got[x.src]);
        const TaskId id =
            cx_.AddTask(XferTask(x, plan.scheds[rep], cx_.sw, coll, s, cx_.cores), std::move(after));
        in[x.dst].push_back(id);
        now[x.dst].push_back(id);
        if (fc) {
          if (fc->first_task < 0) fc->first_task = id;
          fc->last_task = id;
        }
      }
      for (int r = 0; r < cx_.p; ++r) Append(&got[r], now[r]);
    }
  }
  if (cx_.func) {
    if (!fc) throw std::logic_error("mapping: an MoE all_to_all without functional data");
    cx_.prog.func.collectives.push_back(std::move(*fc));
  }
  return in;
}

std::vector<std::vector<TaskId>> MoePass::NcclAllToAllV(const AllToAllPlan& plan,
                                                        const std::vector<std::vector<TaskId>>& deps) {
  namespace gpu = arch::gpu;
  const MoeGroups g = MoeGroupsOf(cx_.m, cx_.model, cx_.p);
  const int span = g.Span();
  const uint64_t n = static_cast<uint64_t>(span);
  std::vector<std::vector<TaskId>> in(cx_.p);
  std::string note;
  double slowest = -1;
  for (int r = 0; r < cx_.p; ++r) {
    const int rep = g.Replica(r);
    uint64_t sent = 0, got = 0;
    std::vector<TaskId> after = deps[r];
    for (int q = rep * span; q < (rep + 1) * span; ++q) {
      if (q == r) continue;
      sent += plan.bytes[r][q], got += plan.bytes[q][r];
      if (plan.bytes[r][q] > 0 || plan.bytes[q][r] > 0) Append(&after, deps[q]);
    }
    const uint64_t wire = std::max(sent, got);
    if (wire == 0) continue;  // it exchanges nothing: NCCL launches nothing for it
    // nccl-tests' all_to_all size is one rank's send buffer, of which (n - 1) / n leaves it.
    const uint64_t buffer = (wire / (n - 1)) * n + ((wire % (n - 1)) * n + n - 2) / (n - 1);
    Task tk;
    tk.op_kind = llm::OpKind::kCollective;
    tk.m = static_cast<uint64_t>(CollectiveKind::kAllToAll);
    tk.n = n;
    tk.k = static_cast<uint64_t>(gpu::Algo::kAuto);
    tk.bytes = buffer;
    try {
      const gpu::CollEstimate e = gpu::EstimateCollective(
          cx_.chip.config().gpu(), cx_.chip.num_cores(),
          {.op = gpu::CollOp::kAllToAll, .ranks = span, .bytes = buffer, .algo = gpu::Algo::kAuto});
      if (e.time_us > slowest)
        slowest = e.time_us, note = std::string(gpu::ToString(e.algo)) + "/" + gpu::ToString(e.proto);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("mapping: " + cx_.prog.ops[cx_.cur_op].ref.op + " (all_to_all over " +
                                  std::to_string(span) + " GPUs of " + cx_.chip.config().name() +
                                  "): " + e.what());
    }
    cx_.SortUnique(&after);
    in[r].push_back(cx_.Compute(r, tk, FuncOp{}, std::move(after), 0));
  }
  std::string& op_note = cx_.prog.ops[cx_.cur_op].ref.note;
  if (!note.empty()) op_note = note + (op_note.empty() ? "" : "; " + op_note);
  return in;
}

}  // namespace tpsim::mapping
