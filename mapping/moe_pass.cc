#include "mapping/moe_pass.h"

#include <algorithm>
#include <stdexcept>

#include "mapping/collective/collective.h"
#include "mapping/functional.h"
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

int32_t MoePass::FuncOnly(FuncTensorKind kind, uint64_t rows, uint64_t cols, uint64_t seed) {
  FuncTensor ft;
  ft.kind = kind;
  ft.rows = static_cast<uint32_t>(rows);
  ft.cols = static_cast<uint32_t>(cols);
  ft.seed = seed;
  cx_.tensors.push_back(ft);
  TState st;
  st.ready.resize(cx_.p);
  cx_.ts.push_back(std::move(st));
  return static_cast<int32_t>(cx_.tensors.size() - 1);
}

void MoePass::Attach(std::vector<FuncOp> ops, int32_t none_tensor) {
  if (!cx_.func) return;
  std::vector<FuncOp>& fo = cx_.prog.func.ops;
  const size_t first = fo.size() - 1;  // the placeholder Compute just stored
  if (ops.empty()) {                   // nothing to compute: copy zero rows of none_tensor
    FuncOp none;
    none.kind = FuncKind::kCopy;
    none.a = none.out = {none_tensor, 0, 0, 0, 0};
    if (none_tensor < 0) throw std::logic_error("mapping: an MoE task without functional data");
    ops.push_back(none);
  }
  const int core = fo[first].core;
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].core = core;
    ops[i].next = i + 1 < ops.size() ? static_cast<int32_t>(first + i + 1) : -1;
  }
  fo[first] = ops[0];
  fo.insert(fo.end(), ops.begin() + 1, ops.end());
}

void MoePass::GroupedExperts(int r, const std::vector<uint64_t>& rows, uint32_t first, uint32_t count,
                             uint64_t im, std::vector<TaskId>* done,
                             const std::vector<std::array<std::vector<FuncOp>, 3>>* ops) {
  const uint64_t h = cx_.model.hidden_size(), d = cx_.d;
  uint64_t active = 0, total = 0;
  for (uint32_t e = first; e < first + count; ++e)
    if (rows[e] > 0) ++active, total += rows[e];
  if (active == 0) return;
  // The functional ops of stage k (gate+up, SiLU*mul, down) of every active expert, in order.
  auto chain = [&](int k) {
    std::vector<FuncOp> all;
    for (uint32_t e = first; ops && e < first + count; ++e)
      all.insert(all.end(), (*ops)[e][k].begin(), (*ops)[e][k].end());
    return all;
  };
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
  Attach(chain(0));
  const TaskId act = VectorTask(r, llm::OpKind::kElementwise, total, im, kSiluMulOps * total * im,
                                3 * total * im * d, {gate_up});
  Attach(chain(1));
  done->push_back(grouped(im, h, {act}));
  Attach(chain(2));
}

namespace {

FuncOp MatmulOp(FuncSlice a, FuncSlice b, FuncSlice out, bool accumulate = false) {
  FuncOp f;
  f.kind = FuncKind::kMatmul;
  f.a = a, f.b = b, f.out = out;
  f.accumulate = accumulate;
  return f;
}
FuncOp VectorOp(FuncKind kind, FuncSlice a, FuncSlice b, FuncSlice out) {
  FuncOp f;
  f.kind = kind;
  f.a = a, f.b = b, f.out = out;
  return f;
}
FuncSlice Rows1(int32_t t, uint64_t r0, uint64_t r1, uint64_t cols) { return Sl(t, {r0, r1}, {0, cols}); }

// Runs of consecutive ids: (first id, count).
std::vector<std::pair<uint32_t, uint32_t>> Runs(const std::vector<uint32_t>& ids) {
  std::vector<std::pair<uint32_t, uint32_t>> runs;
  for (uint32_t i : ids) {
    if (!runs.empty() && runs.back().first + runs.back().second == i)
      ++runs.back().second;
    else
      runs.push_back({i, 1});
  }
  return runs;
}

}  // namespace

std::vector<int32_t> MoePass::Block(uint32_t layer, const std::vector<int32_t>& xs) {
  const int p = cx_.p;
  // Attention replicas (mapping.attention_dp): xs[a] holds rows [a tr, (a+1) tr) of the
  // tokens, split by rows over its pr ranks (global ranks [a pr, (a+1) pr)).
  const int nd = static_cast<int>(xs.size()), pr = p / nd;
  const uint64_t tr = cx_.t / static_cast<uint64_t>(nd);
  const MoeGroups g = MoeGroupsOf(cx_.m, cx_.model, p);
  const uint64_t h = cx_.model.hidden_size(), e_count = cx_.model.num_experts(),
                 topk = cx_.model.num_experts_per_token(), im = cx_.model.moe_intermediate_size() / g.tp,
                 is = cx_.model.shared_expert_intermediate_size(), d = cx_.d;
  const bool fn = cx_.func;
  if (nd == 1 && p > 1 && !cx_.Satisfies(xs[0], Layout::Rows()))
    conv_.Convert(xs[0], Layout::Rows(), cx_.names[OpRole::kRouter]);  // replicas: the caller's
  const Layout rows_l = pr == 1 ? Layout::Replicated() : Layout::Rows();
  std::vector<Range> rows(p);  // global token ids
  std::vector<uint64_t> tokens(p);
  for (int r = 0; r < p; ++r) {
    const Range lr = RowsOf(rows_l, tr, pr, r % pr);
    const uint64_t base = static_cast<uint64_t>(r / pr) * tr;
    rows[r] = {lr.lo + base, lr.hi + base}, tokens[r] = rows[r].size();
  }
  // Rank r's input and output tensors, and global token i's row in them.
  const auto xin = [&](int r) { return xs[r / pr]; };
  const auto lrow = [&](int r, uint64_t i) { return i - static_cast<uint64_t>(r / pr) * tr; };
  const auto xrows = [&](int r) { return Range{lrow(r, rows[r].lo), lrow(r, rows[r].hi)}; };
  const auto ready_x = [&](int r) { return cx_.Ready(xin(r), r % pr); };

  // Routing, then each source rank's rows per expert (and, functional, the tokens themselves).
  const ExpertLoad load =
      RouteTokens(RoutingOf(), static_cast<uint32_t>(e_count), static_cast<uint32_t>(topk), cx_.t, layer);
  std::vector<std::vector<uint32_t>> takes;                    // functional: tokens per expert
  std::vector<std::vector<std::vector<uint32_t>>> src_tokens;  // [rank][expert] of those
  if (fn) {
    takes = ExpertTokens(load.tokens, cx_.t);
    src_tokens.assign(p, std::vector<std::vector<uint32_t>>(e_count));
    for (uint64_t e = 0; e < e_count; ++e)
      for (uint32_t i : takes[e])
        for (int r = 0; r < p; ++r)
          if (i >= rows[r].lo && i < rows[r].hi) src_tokens[r][e].push_back(i);
  }

  // Router: each rank routes its own rows.
  cx_.NewOp(cx_.names[OpRole::kRouter], "rows");
  int32_t router_w = -1, logits = -1, gates = -1, bias = -1;
  if (fn) {
    router_w = FuncOnly(FuncTensorKind::kWeight, h, e_count, FuncSeed(layer, kFuncRouterRole));
    logits = FuncOnly(FuncTensorKind::kActivation, cx_.t, e_count);
    gates = FuncOnly(FuncTensorKind::kActivation, cx_.t, e_count);
    if (cx_.model.norm_topk_prob()) {
      std::vector<float> b(cx_.t * e_count, kFuncMaskedLogit);
      for (uint64_t e = 0; e < e_count; ++e)
        for (uint32_t i : takes[e]) b[i * e_count + e] = 0.f;
      cx_.prog.func.consts.push_back(std::move(b));
      bias = FuncOnly(FuncTensorKind::kConst, cx_.t, e_count, cx_.prog.func.consts.size() - 1);
    }
  }
  std::vector<std::vector<TaskId>> routed(p);
  const double softmax_ops = 5.0 * e_count + (cx_.model.norm_topk_prob() ? 2.0 * topk : 0);
  for (int r = 0; r < p; ++r) {
    routed[r] = ready_x(r);
    if (tokens[r] == 0) continue;
    const FuncSlice xsl = Sl(xin(r), xrows(r), {0, h});
    std::vector<TaskId> deps = ready_x(r);
    WeightRead(r, h * e_count * d, &deps);
    const TaskId gemm = Gemm(r, tokens[r], h, e_count, deps, xsl);
    const FuncSlice ls = Sl(logits, rows[r], {0, e_count}), gs = Sl(gates, rows[r], {0, e_count});
    Attach({MatmulOp(xsl, Sl(router_w, {0, h}, {0, e_count}), ls)});
    routed[r] = {VectorTask(r, llm::OpKind::kSoftmax, tokens[r], e_count, softmax_ops * tokens[r],
                            2 * tokens[r] * e_count * d, {gemm})};
    if (fn) {
      // Softmax over the E columns: head_dim 1 (scale 1), every column visible (E - 1 "cached").
      FuncOp sm = VectorOp(FuncKind::kSoftmax, ls, {}, gs);
      sm.head_dim = 1, sm.position_offset = static_cast<uint32_t>(e_count - 1), sm.tokens_per_sequence = 1;
      std::vector<FuncOp> ops;
      if (bias >= 0) ops.push_back(VectorOp(FuncKind::kAdd, ls, Sl(bias, rows[r], {0, e_count}), ls));
      ops.push_back(sm);
      Attach(std::move(ops));
    }
  }

  const std::vector<std::vector<uint64_t>> by_src = SplitBySource(load.tokens, tokens);
  if (fn)
    for (int r = 0; r < p; ++r)
      for (uint64_t e = 0; e < e_count; ++e)
        if (src_tokens[r][e].size() != by_src[r][e])
          throw std::logic_error("mapping: MoE functional tokens disagree with SplitBySource");
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
  std::vector<std::vector<uint64_t>> back(p, std::vector<uint64_t>(p, 0));
  for (int r = 0; r < p; ++r)
    for (int dd = 0; dd < p; ++dd) back[dd][r] = bytes[r][dd];
  const auto slot_first = [&](int r) { return static_cast<uint32_t>(g.Slot(r)) * g.ExpertsPerSlot(); };
  const auto slot_rank = [&](int rep, uint32_t e, int j) {  // rank j of expert e's slot in replica rep
    return g.Rank(rep, g.SlotOf(e), j);
  };

  // Functional: per (replica, expert) the input X, gate, up, act and output Z tensors (each
  // rank of the slot its own copy), and where source r's rows start in them.
  struct ExpertData {
    int32_t in = -1, gate = -1, up = -1, act = -1, out = -1;
    std::vector<uint64_t> base;  // by global source rank
  };
  std::vector<std::vector<ExpertData>> xd;
  std::vector<std::array<int32_t, 3>> ew;  // expert e's gate, up, down weights
  const AllToAllPlan dispatch = PlanAllToAllV(bytes), combine = PlanAllToAllV(back);
  const auto elems = [&](const AllToAllPlan& a) { return std::max<uint64_t>(1, a.buffer_bytes / d); };
  FuncCollective dispatch_fc, combine_fc;
  const std::vector<std::vector<std::pair<uint64_t, uint64_t>>>&dispatch_off = dispatch.off,
                                                    &combine_off = combine.off;
  if (fn) {
    const uint64_t im_full = cx_.model.moe_intermediate_size();
    for (uint64_t e = 0; e < e_count; ++e) {
      const int role = kFuncExpertRole + 3 * static_cast<int>(e);
      ew.push_back({FuncOnly(FuncTensorKind::kWeight, h, im_full, FuncSeed(layer, role)),
                    FuncOnly(FuncTensorKind::kWeight, h, im_full, FuncSeed(layer, role + 1)),
                    FuncOnly(FuncTensorKind::kWeight, im_full, h, FuncSeed(layer, role + 2))});
    }
    xd.assign(g.Replicas(), std::vector<ExpertData>(e_count));
    for (int rep = 0; rep < g.Replicas(); ++rep)
      for (uint64_t e = 0; e < e_count; ++e) {
        ExpertData& xe = xd[rep][e];
        const uint64_t n = at[rep][e];
        xe.base.assign(p, 0);
        uint64_t b = 0;
        for (int r = rep * g.Span(); r < (rep + 1) * g.Span(); ++r) xe.base[r] = b, b += by_src[r][e];
        if (n == 0) continue;
        xe.in = FuncOnly(FuncTensorKind::kActivation, n, h);
        xe.gate = FuncOnly(FuncTensorKind::kActivation, n, im);
        xe.up = FuncOnly(FuncTensorKind::kActivation, n, im);
        xe.act = FuncOnly(FuncTensorKind::kActivation, n, im);
        xe.out = FuncOnly(FuncTensorKind::kActivation, n, h);
      }
    dispatch_fc.buffer = FuncOnly(FuncTensorKind::kBuffer, 1, elems(dispatch));
    combine_fc.buffer = FuncOnly(FuncTensorKind::kBuffer, 1, elems(combine));
    for (int r = 0; r < p; ++r)
      for (int dd = 0; dd < p; ++dd) {
        if (dd == r || g.Replica(dd) != g.Replica(r) || bytes[r][dd] == 0) continue;
        const int rep = g.Replica(r);
        // Dispatch r -> dd: r's tokens of each expert of dd's slot, in expert then token order.
        uint64_t at_row = 0;
        for (uint32_t e = slot_first(dd); e < slot_first(dd) + g.ExpertsPerSlot(); ++e) {
          for (auto [i0, n] : Runs(src_tokens[r][e])) {
            dispatch_fc.pack.push_back({cx_.cores[r], Rows1(xin(r), lrow(r, i0), lrow(r, i0) + n, h),
                                        dispatch_off[r][dd].first / d + at_row * h, false});
            at_row += n;
          }
        }
        uint64_t rec_row = 0;
        for (uint32_t e = slot_first(dd); e < slot_first(dd) + g.ExpertsPerSlot(); ++e) {
          const uint64_t n = by_src[r][e];
          if (n == 0) continue;
          const ExpertData& xe = xd[rep][e];
          dispatch_fc.unpack.push_back({cx_.cores[dd], Rows1(xe.in, xe.base[r], xe.base[r] + n, h),
                                        dispatch_off[r][dd].second / d + rec_row * h, false});
          // Combine dd -> r: the same rows of Z_e back, in the same order.
          combine_fc.pack.push_back({cx_.cores[dd], Rows1(xe.out, xe.base[r], xe.base[r] + n, h),
                                     combine_off[dd][r].first / d + rec_row * h, false});
          rec_row += n;
        }
      }
  }
  const std::string& ex_name = cx_.names[OpRole::kExperts];
  const std::vector<std::vector<TaskId>> arrived =
      AllToAllV(ex_name + ".dispatch", dispatch, routed, &dispatch_fc);

  // Experts: each rank runs its slot's experts that received rows.
  cx_.NewOp(ex_name,
            "ep " + std::to_string(g.ep) + " x tp " + std::to_string(g.tp) + (g.ep_inner ? " ep_inner" : ""));
  std::vector<std::vector<TaskId>> done(p);
  for (int r = 0; r < p; ++r) {
    std::vector<TaskId> in = arrived[r];
    Append(&in, routed[r]);
    done[r] = in;
    const uint32_t first = slot_first(r);
    const int rep = g.Replica(r), j = g.J(r);
    // Functional: expert e's ops on rank r (its own rows first, then gate, up; act; down).
    std::vector<std::array<std::vector<FuncOp>, 3>> ops(fn ? e_count : 0);
    for (uint32_t e = first; fn && e < first + g.ExpertsPerSlot(); ++e) {
      const ExpertData& xe = xd[rep][e];
      const uint64_t n = at[rep][e];
      if (n == 0) continue;
      uint64_t k = 0;
      for (auto [i0, cnt] : Runs(src_tokens[r][e])) {
        FuncOp c = VectorOp(FuncKind::kCopy, Rows1(xin(r), lrow(r, i0), lrow(r, i0) + cnt, h), {},
                            Rows1(xe.in, xe.base[r] + k, xe.base[r] + k + cnt, h));
        ops[e][0].push_back(c);
        k += cnt;
      }
      const Range cols{j * im, (j + 1) * im};
      ops[e][0].push_back(
          MatmulOp(Rows1(xe.in, 0, n, h), Sl(ew[e][0], {0, h}, cols), Rows1(xe.gate, 0, n, im)));
      ops[e][0].push_back(
          MatmulOp(Rows1(xe.in, 0, n, h), Sl(ew[e][1], {0, h}, cols), Rows1(xe.up, 0, n, im)));
      ops[e][1].push_back(VectorOp(FuncKind::kSiluMul, Rows1(xe.gate, 0, n, im), Rows1(xe.up, 0, n, im),
                                   Rows1(xe.act, 0, n, im)));
      ops[e][2].push_back(
          MatmulOp(Rows1(xe.act, 0, n, im), Sl(ew[e][2], cols, {0, h}), Rows1(xe.out, 0, n, h)));
    }
    if (cx_.chip.config().has_gpu()) {
      GroupedExperts(r, at[rep], first, g.ExpertsPerSlot(), im, &done[r], fn ? &ops : nullptr);
      continue;
    }
    // The combine from r waits on its experts' down GEMMs, which wait on everything in `in`
    // (with every duration above 0, each ends later than all of it: the same ready times and
    // enablers). Where none of its experts got rows, r sends nothing back, and keeps `in`.
    std::vector<TaskId> downs;
    for (uint32_t e = first; e < first + g.ExpertsPerSlot(); ++e) {
      const uint64_t n = at[rep][e];
      if (n == 0) continue;  // no rows: its weights are not read either
      std::vector<TaskId> deps = in;
      WeightRead(r, 3 * h * im * d, &deps);
      const TaskId gate_up = Gemm(r, n, h, 2 * im, deps);
      if (fn) Attach(ops[e][0]);
      const TaskId act =
          VectorTask(r, llm::OpKind::kElementwise, n, im, kSiluMulOps * n * im, 3 * n * im * d, {gate_up});
      if (fn) Attach(ops[e][1]);
      downs.push_back(Gemm(r, n, im, h, {act}));
      if (fn) Attach(ops[e][2]);
    }
    if (!downs.empty()) done[r] = std::move(downs);
  }

  // Combine: the reverse all_to_all, then the weighted sum at the rows' source.
  const int32_t combine_buf = combine_fc.buffer;
  const std::vector<std::vector<TaskId>> returned =
      AllToAllV(ex_name + ".combine", combine, done, &combine_fc);
  cx_.NewOp(ex_name + ".sum", ToString(rows_l));
  std::vector<int32_t> ys(nd);  // per attention replica, in its ranks
  for (int a = 0; a < nd; ++a) {
    ys[a] = cx_.NewTensor(FuncTensorKind::kActivation, tr, h);
    cx_.ts[ys[a]].layout = rows_l;
    cx_.ts[ys[a]].ready.resize(pr);
    if (nd > 1) cx_.ts[ys[a]].replica = a;
  }
  const auto yout = [&](int r) { return ys[r / pr]; };
  const auto yrows = [&](int r) { return Sl(yout(r), xrows(r), {0, h}); };
  for (int r = 0; r < p; ++r) {
    if (tokens[r] == 0) continue;
    const int32_t y = yout(r);
    std::vector<TaskId> deps = returned[r];
    Append(&deps, done[r]);
    // Each row: its top-k expert outputs (tp_moe partials each), scaled by their gate weights
    // and summed: a multiply-add per value of every partial (the functional ops below), so the
    // work grows with moe.tp as the bytes do (it was top-k's alone: 8x too little at moe.tp 16).
    const uint64_t parts = topk * static_cast<uint64_t>(g.tp);
    cx_.ts[y].ready[r % pr].push_back(VectorTask(r, llm::OpKind::kElementwise, tokens[r], h,
                                                 2.0 * parts * tokens[r] * h, (parts + 1) * tokens[r] * h * d,
                                                 deps));
    if (!fn) continue;
    // y[i] += G[i, e] . (row of Z_e for token i), for every rank of e's slot (partial sums).
    std::vector<FuncOp> ops;
    const int rep = g.Replica(r);
    for (uint64_t e = 0; e < e_count; ++e) {
      if (src_tokens[r][e].empty()) continue;
      const ExpertData& xe = xd[rep][e];
      // Where e's rows sit in the block its slot returns to r (experts of the slot before e first).
      uint64_t before = 0;
      for (uint64_t q = static_cast<uint64_t>(g.SlotOf(static_cast<uint32_t>(e))) * g.ExpertsPerSlot(); q < e;
           ++q)
        before += by_src[r][q];
      for (int jj = 0; jj < g.tp; ++jj) {
        const int holder = slot_rank(rep, static_cast<uint32_t>(e), jj);
        for (size_t k = 0; k < src_tokens[r][e].size(); ++k) {
          const uint32_t i = src_tokens[r][e][k];
          FuncSlice zrow = Rows1(xe.out, xe.base[r] + k, xe.base[r] + k + 1, h);
          if (holder != r) {
            const uint64_t off = combine_off[holder][r].second / d + (before + k) * h;
            zrow = Sl(combine_buf, {0, 1}, {off, off + h});
          }
          ops.push_back(MatmulOp(Sl(gates, {i, i + 1}, {e, e + 1}), zrow,
                                 Rows1(y, lrow(r, i), lrow(r, i) + 1, h), true));
        }
      }
    }
    Attach(std::move(ops), y);
  }

  if (is > 0) {
    // Shared experts on each rank's own rows, whole weights on every rank, added to y.
    cx_.NewOp(cx_.names[OpRole::kSharedExperts], ToString(rows_l));
    int32_t sw[3] = {-1, -1, -1}, sg = -1, su = -1, sa = -1, sd = -1;
    if (fn) {
      sw[0] = FuncOnly(FuncTensorKind::kWeight, h, is, FuncSeed(layer, kFuncSharedRole));
      sw[1] = FuncOnly(FuncTensorKind::kWeight, h, is, FuncSeed(layer, kFuncSharedRole + 1));
      sw[2] = FuncOnly(FuncTensorKind::kWeight, is, h, FuncSeed(layer, kFuncSharedRole + 2));
      sg = FuncOnly(FuncTensorKind::kActivation, cx_.t, is);
      su = FuncOnly(FuncTensorKind::kActivation, cx_.t, is);
      sa = FuncOnly(FuncTensorKind::kActivation, cx_.t, is);
      sd = FuncOnly(FuncTensorKind::kActivation, cx_.t, h);
    }
    for (int r = 0; r < p; ++r) {
      if (tokens[r] == 0) continue;
      const uint64_t n = tokens[r];
      const FuncSlice xsl = Sl(xin(r), xrows(r), {0, h});
      std::vector<TaskId> deps = ready_x(r);
      WeightRead(r, 3 * h * is * d, &deps);
      const TaskId gate_up = Gemm(r, n, h, 2 * is, deps, xsl);
      Attach({MatmulOp(xsl, Sl(sw[0], {0, h}, {0, is}), Sl(sg, rows[r], {0, is})),
              MatmulOp(xsl, Sl(sw[1], {0, h}, {0, is}), Sl(su, rows[r], {0, is}))});
      const TaskId act =
          VectorTask(r, llm::OpKind::kElementwise, n, is, kSiluMulOps * n * is, 3 * n * is * d, {gate_up});
      Attach({VectorOp(FuncKind::kSiluMul, Sl(sg, rows[r], {0, is}), Sl(su, rows[r], {0, is}),
                       Sl(sa, rows[r], {0, is}))});
      const TaskId down = Gemm(r, n, is, h, {act});
      Attach({MatmulOp(Sl(sa, rows[r], {0, is}), Sl(sw[2], {0, is}, {0, h}), Sl(sd, rows[r], {0, h}))});
      std::vector<TaskId> add_deps = cx_.Ready(yout(r), r % pr);
      add_deps.push_back(down);
      cx_.ts[yout(r)].ready[r % pr] = {
          VectorTask(r, llm::OpKind::kElementwise, n, h, kAddOps * n * h, 3 * n * h * d, add_deps)};
      Attach({VectorOp(FuncKind::kAdd, yrows(r), Sl(sd, rows[r], {0, h}), yrows(r))});
    }
  }
  for (int32_t x : xs) cx_.mem->Dead(x);
  return ys;
}

}  // namespace tpsim::mapping
