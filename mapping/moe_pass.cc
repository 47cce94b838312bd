#include "mapping/moe_pass.h"

#include <algorithm>
#include <stdexcept>

#include "mapping/collective/collective.h"
#include "mapping/layout_convert.h"
#include "mapping/memory_plan.h"

namespace tpsim::mapping {

using llm::OpRole;

const Routing& MoePass::RoutingOf() {
  if (routing_ready_) return routing_;
  const config::MoeMapping& mm = cx_.m.moe();
  if (!ParseRoutingKind(mm.routing(), &routing_.kind))
    throw std::invalid_argument("mapping: unknown moe routing " + mm.routing());
  routing_.zipf_s = mm.zipf_s();
  routing_.capacity_factor = mm.capacity_factor();
  routing_.seed = mm.seed();
  if (routing_.kind == RoutingKind::kTrace) {
    trace_ = std::make_unique<RoutingTrace>(
        ReadRoutingTrace(mm.routing_file(), cx_.model.num_experts(), config::Location{"<mapping>", 1, 1}));
    routing_.trace = trace_.get();
  }
  routing_ready_ = true;
  return routing_;
}

void MoePass::WeightRead(int r, uint64_t bytes, std::vector<TaskId>* deps) {
  if (cx_.mem->WeightsResident() || bytes == 0) return;
  deps->push_back(cx_.Memory(r, bytes, false, cx_.mem->WeightReadDeps(r)));
}

TaskId MoePass::Gemm(int r, uint64_t m, uint64_t k, uint64_t n, std::vector<TaskId> deps, FuncSlice a) {
  Task t;
  t.op_kind = llm::OpKind::kGemm;
  t.m = m, t.n = n, t.k = k;
  t.flops = 2.0 * m * n * k;
  t.bytes = (m * k + m * n + k * n) * cx_.d;
  // Its input and output stay in SRAM beside it; a streamed weight shard too.
  const uint64_t transient = (m * k + m * n + (cx_.mem->WeightsResident() ? 0 : k * n)) * cx_.d;
  FuncOp f;
  f.a = a;
  return cx_.Compute(r, t, f, std::move(deps), transient);
}

TaskId MoePass::VectorTask(int r, llm::OpKind kind, uint64_t rows, uint64_t cols, double ops, uint64_t bytes,
                           std::vector<TaskId> deps, FuncSlice a) {
  Task t;
  t.op_kind = kind;
  t.m = rows, t.n = cols;
  t.vector_ops = ops;
  t.bytes = bytes;
  FuncOp f;
  f.a = a;
  return cx_.Compute(r, t, f, std::move(deps), bytes);
}

std::vector<std::vector<TaskId>> MoePass::AllToAllV(const std::string& name,
                                                    const std::vector<std::vector<uint64_t>>& bytes,
                                                    const std::vector<std::vector<TaskId>>& deps) {
  const MoeGroups g = MoeGroupsOf(cx_.m, cx_.model, cx_.p);
  const int span = g.Span(), replicas = g.Replicas();
  std::vector<std::vector<TaskId>> in(cx_.p);
  if (span == 1) return in;  // every rank holds all the experts its rows need
  cx_.NewOp(name, "direct");
  if (replicas > 1) cx_.prog.ops[cx_.cur_op].ref.note = std::to_string(replicas) + " expert replicas";
  uint64_t most = 0;
  std::vector<Schedule> scheds;
  for (int rep = 0; rep < replicas; ++rep) {
    std::vector<std::vector<uint64_t>> local(span, std::vector<uint64_t>(span, 0));
    for (int i = 0; i < span; ++i) {
      uint64_t row = 0;
      for (int j = 0; j < span; ++j) row += local[i][j] = bytes[rep * span + i][rep * span + j];
      most = std::max(most, row);
    }
    scheds.push_back(LowerAllToAllV("direct", local));
  }
  CollectiveInfo ci;
  ci.kind = CollectiveKind::kAllToAll;
  ci.algorithm = AlgorithmOf("direct");
  ci.bytes = most;
  ci.ranks = span;
  ci.groups = replicas;
  ci.op = cx_.cur_op;
  for (int r = 0; r < replicas * span; ++r) ci.members.push_back(cx_.cores[r]);
  cx_.prog.collectives.push_back(ci);
  const int32_t coll = static_cast<int32_t>(cx_.prog.collectives.size() - 1);
  for (int rep = 0; rep < replicas; ++rep)
    for (size_t s = 0; s < scheds[rep].steps.size(); ++s)
      for (Xfer x : scheds[rep].steps[s].xfers) {
        x.src += rep * span, x.dst += rep * span;
        const int dst = x.dst;
        in[dst].push_back(cx_.AddTask(XferTask(x, scheds[rep], cx_.sw, coll, s, cx_.cores), deps[x.src]));
      }
  return in;
}

void MoePass::GroupedExperts(int r, const std::vector<uint64_t>& rows, uint32_t first, uint32_t count,
                             uint64_t im, std::vector<TaskId>* done) {
  const uint64_t h = cx_.model.hidden_size(), d = cx_.d;
  uint64_t active = 0, total = 0;
  for (uint32_t e = first; e < first + count; ++e)
    if (rows[e] > 0) ++active, total += rows[e];
  if (active == 0) return;
  // One kernel's grid spreads every active expert's tiles over the SMs, so the total decides,
  // not the busiest expert: batch = active experts of ceil(rows / active) rows each (llm's
  // experts op has the same shape); FLOPs and bytes are the experts' own.
  auto grouped = [&](uint64_t k, uint64_t n, std::vector<TaskId> after) {
    Task t;
    t.op_kind = llm::OpKind::kGemm;
    t.batch = active, t.m = (total + active - 1) / active, t.n = n, t.k = k;
    t.flops = 2.0 * total * n * k;
    t.bytes = (total * k + total * n + active * k * n) * d;
    return cx_.Compute(r, t, FuncOp{}, std::move(after), t.bytes);
  };
  const TaskId gate_up = grouped(h, 2 * im, *done);
  const TaskId act = VectorTask(r, llm::OpKind::kElementwise, total, im, kSiluMulOps * total * im,
                                3 * total * im * d, {gate_up});
  done->push_back(grouped(im, h, {act}));
}

int32_t MoePass::Block(uint32_t layer, int32_t x) {
  const int p = cx_.p;
  const MoeGroups g = MoeGroupsOf(cx_.m, cx_.model, p);
  const uint64_t h = cx_.model.hidden_size(), e_count = cx_.model.num_experts(),
                 topk = cx_.model.num_experts_per_token(), im = cx_.model.moe_intermediate_size() / g.tp,
                 is = cx_.model.shared_expert_intermediate_size(), d = cx_.d;
  if (p > 1 && !cx_.Satisfies(x, Layout::Rows()))
    conv_.Convert(x, Layout::Rows(), cx_.names[OpRole::kRouter]);
  const Layout rows_l = p == 1 ? Layout::Replicated() : Layout::Rows();
  std::vector<Range> rows(p);
  std::vector<uint64_t> tokens(p);
  for (int r = 0; r < p; ++r) rows[r] = RowsOf(rows_l, cx_.t, p, r), tokens[r] = rows[r].size();
  if (p == 1) tokens[0] = cx_.t;

  // Router: each rank routes its own rows.
  cx_.NewOp(cx_.names[OpRole::kRouter], "rows");
  std::vector<std::vector<TaskId>> routed(p);
  const double softmax_ops = 5.0 * e_count + (cx_.model.norm_topk_prob() ? 2.0 * topk : 0);
  for (int r = 0; r < p; ++r) {
    routed[r] = cx_.Ready(x, r);
    if (tokens[r] == 0) continue;
    const FuncSlice xs = Sl(x, rows[r], {0, h});
    std::vector<TaskId> deps = cx_.Ready(x, r);
    WeightRead(r, h * e_count * d, &deps);
    const TaskId gemm = Gemm(r, tokens[r], h, e_count, deps, xs);
    routed[r] = {VectorTask(r, llm::OpKind::kSoftmax, tokens[r], e_count, softmax_ops * tokens[r],
                            2 * tokens[r] * e_count * d, {gemm})};
  }

  // Routing, then each source rank's rows per expert.
  const ExpertLoad load =
      RouteTokens(RoutingOf(), static_cast<uint32_t>(e_count), static_cast<uint32_t>(topk), cx_.t, layer);
  const std::vector<std::vector<uint64_t>> by_src = SplitBySource(load.tokens, tokens);
  // Rows of expert e that replica rep's experts receive.
  std::vector<std::vector<uint64_t>> at(g.Replicas(), std::vector<uint64_t>(e_count, 0));
  for (int r = 0; r < p; ++r)
    for (uint64_t e = 0; e < e_count; ++e) at[g.Replica(r)][e] += by_src[r][e];
  // Bytes rank r sends to rank d (same replica): its rows for d's slot's experts.
  std::vector<std::vector<uint64_t>> bytes(p, std::vector<uint64_t>(p, 0));
  for (int r = 0; r < p; ++r)
    for (int dd = 0; dd < p; ++dd) {
      if (g.Replica(dd) != g.Replica(r)) continue;
      const uint32_t first = static_cast<uint32_t>(g.Slot(dd)) * g.ExpertsPerSlot();
      for (uint32_t e = first; e < first + g.ExpertsPerSlot(); ++e) bytes[r][dd] += by_src[r][e] * h * d;
    }
  const std::string& ex_name = cx_.names[OpRole::kExperts];
  const std::vector<std::vector<TaskId>> arrived = AllToAllV(ex_name + ".dispatch", bytes, routed);

  // Experts: each rank runs its slot's experts that received rows.
  cx_.NewOp(ex_name, "ep " + std::to_string(g.ep) + " x tp " + std::to_string(g.tp));
  std::vector<std::vector<TaskId>> done(p);
  for (int r = 0; r < p; ++r) {
    std::vector<TaskId> in = arrived[r];
    Append(&in, routed[r]);
    done[r] = in;
    const uint32_t first = static_cast<uint32_t>(g.Slot(r)) * g.ExpertsPerSlot();
    if (cx_.chip.config().has_gpu()) {
      GroupedExperts(r, at[g.Replica(r)], first, g.ExpertsPerSlot(), im, &done[r]);
      continue;
    }
    for (uint32_t e = first; e < first + g.ExpertsPerSlot(); ++e) {
      const uint64_t n = at[g.Replica(r)][e];
      if (n == 0) continue;  // no rows: its weights are not read either
      std::vector<TaskId> deps = in;
      WeightRead(r, 3 * h * im * d, &deps);
      const TaskId gate_up = Gemm(r, n, h, 2 * im, deps);
      const TaskId act =
          VectorTask(r, llm::OpKind::kElementwise, n, im, kSiluMulOps * n * im, 3 * n * im * d, {gate_up});
      done[r].push_back(Gemm(r, n, im, h, {act}));
    }
  }

  // Combine: the reverse all_to_all, then the weighted sum at the rows' source.
  std::vector<std::vector<uint64_t>> back(p, std::vector<uint64_t>(p, 0));
  for (int r = 0; r < p; ++r)
    for (int dd = 0; dd < p; ++dd) back[dd][r] = bytes[r][dd];
  const std::vector<std::vector<TaskId>> returned = AllToAllV(ex_name + ".combine", back, done);
  cx_.NewOp(ex_name + ".sum", ToString(rows_l));
  const int32_t y = cx_.NewTensor(FuncTensorKind::kActivation, cx_.t, h);
  cx_.ts[y].layout = rows_l;
  for (int r = 0; r < p; ++r) {
    if (tokens[r] == 0) continue;
    std::vector<TaskId> deps = returned[r];
    Append(&deps, done[r]);
    // Each row: its top-k expert outputs (tp_moe partials each), scaled by their gate weights
    // and summed (a multiply-add per value).
    const uint64_t parts = topk * static_cast<uint64_t>(g.tp);
    cx_.ts[y].ready[r].push_back(VectorTask(r, llm::OpKind::kElementwise, tokens[r], h,
                                            2.0 * topk * tokens[r] * h, (parts + 1) * tokens[r] * h * d,
                                            deps));
  }

  if (is > 0) {
    // Shared experts on each rank's own rows, whole weights on every rank, added to y.
    cx_.NewOp(cx_.names[OpRole::kSharedExperts], ToString(rows_l));
    for (int r = 0; r < p; ++r) {
      if (tokens[r] == 0) continue;
      const uint64_t n = tokens[r];
      std::vector<TaskId> deps = cx_.Ready(x, r);
      WeightRead(r, 3 * h * is * d, &deps);
      const TaskId gate_up = Gemm(r, n, h, 2 * is, deps, Sl(x, rows[r], {0, h}));
      const TaskId act =
          VectorTask(r, llm::OpKind::kElementwise, n, is, kSiluMulOps * n * is, 3 * n * is * d, {gate_up});
      const TaskId down = Gemm(r, n, is, h, {act});
      std::vector<TaskId> add_deps = cx_.Ready(y, r);
      add_deps.push_back(down);
      cx_.ts[y].ready[r] = {
          VectorTask(r, llm::OpKind::kElementwise, n, h, kAddOps * n * h, 3 * n * h * d, add_deps)};
    }
  }
  cx_.mem->Dead(x);
  return y;
}

}  // namespace tpsim::mapping
