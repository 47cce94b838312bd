#include "mapping/functional.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "llm/opgraph.h"
#include "mapping/func_plan.h"
#include "mapping/moe_routing.h"

namespace tpsim::mapping {

uint64_t FuncSeed(uint32_t index, int role) { return 1000003ull * (index + 1) + 7919ull * (role + 1); }

float FuncRand(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E5Full;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

uint64_t FuncSequenceSeed(uint64_t seed, uint32_t sequence) { return seed + sequence; }

float FuncWeightScale(uint32_t rows) { return 1.0f / std::sqrt(static_cast<float>(std::max(1u, rows))); }

namespace {

void Fill(Matrix* m, uint64_t seed, uint32_t rows, float scale) {
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < m->cols; ++c) m->at(r, c) = scale * FuncRand(seed, uint64_t{r} * m->cols + c);
}

Matrix Make(uint32_t rows, uint32_t cols) {
  return {rows, cols, std::vector<float>(uint64_t{rows} * cols, 0.f)};
}

// ---- The reference's kernels: one sequence at a time, whole matrices or slices of them ----

void Matmul(const Matrix& a, FuncSlice sa, const Matrix& b, FuncSlice sb, bool tb, bool acc, Matrix& o,
            FuncSlice so) {
  uint32_t rows = sa.r1 - sa.r0, inner = sa.c1 - sa.c0;
  uint32_t cols = tb ? sb.r1 - sb.r0 : sb.c1 - sb.c0;
  uint32_t binner = tb ? sb.c1 - sb.c0 : sb.r1 - sb.r0;
  if (binner != inner || so.r1 - so.r0 != rows || so.c1 - so.c0 != cols)
    throw std::invalid_argument("functional: matmul shapes disagree");
  for (uint32_t i = 0; i < rows; ++i)
    for (uint32_t j = 0; j < cols; ++j) {
      double s = 0;
      for (uint32_t k = 0; k < inner; ++k)
        s += double{a.at(sa.r0 + i, sa.c0 + k)} *
             (tb ? b.at(sb.r0 + j, sb.c0 + k) : b.at(sb.r0 + k, sb.c0 + j));
      float& y = o.at(so.r0 + i, so.c0 + j);
      y = static_cast<float>(acc ? y + s : s);
    }
}

void GroupNorm(const Matrix& a, FuncSlice sa, Matrix& o, FuncSlice so, uint32_t group) {
  for (uint32_t i = 0; i < sa.r1 - sa.r0; ++i)
    for (uint32_t g0 = 0; g0 < sa.c1 - sa.c0; g0 += group) {
      double ss = 0;
      for (uint32_t c = 0; c < group; ++c)
        ss += double{a.at(sa.r0 + i, sa.c0 + g0 + c)} * a.at(sa.r0 + i, sa.c0 + g0 + c);
      double inv = 1.0 / std::sqrt(ss / group + kFuncNormEps);
      for (uint32_t c = 0; c < group; ++c)
        o.at(so.r0 + i, so.c0 + g0 + c) = static_cast<float>(a.at(sa.r0 + i, sa.c0 + g0 + c) * inv);
    }
}

// Position of row r: pos0 + r.
void Rope(const Matrix& a, FuncSlice sa, Matrix& o, FuncSlice so, uint32_t hd, uint32_t pos0) {
  uint32_t half = hd / 2;
  for (uint32_t i = 0; i < sa.r1 - sa.r0; ++i) {
    double pos = pos0 + sa.r0 + i;
    for (uint32_t g0 = 0; g0 < sa.c1 - sa.c0; g0 += hd)
      for (uint32_t c = 0; c < half; ++c) {
        double ang = pos * std::pow(kFuncRopeTheta, -2.0 * c / hd);
        double x0 = a.at(sa.r0 + i, sa.c0 + g0 + c), x1 = a.at(sa.r0 + i, sa.c0 + g0 + c + half);
        o.at(so.r0 + i, so.c0 + g0 + c) = static_cast<float>(x0 * std::cos(ang) - x1 * std::sin(ang));
        o.at(so.r0 + i, so.c0 + g0 + c + half) = static_cast<float>(x0 * std::sin(ang) + x1 * std::cos(ang));
      }
  }
}

void Scores(const Matrix& q, FuncSlice sq, const Matrix& kc, uint32_t ltot, Matrix& o, const FuncOp& f) {
  uint32_t hd = f.head_dim, group = f.kv_group, t = sq.r1 - sq.r0;
  for (uint32_t h = f.head_begin; h < f.head_end; ++h)
    for (uint32_t i = 0; i < t; ++i)
      for (uint32_t j = 0; j < ltot; ++j) {
        double s = 0;
        for (uint32_t d = 0; d < hd; ++d)
          s += double{q.at(sq.r0 + i, h * hd + d)} * kc.at(j, (h / group) * hd + d);
        o.at(h * t + i, j) = static_cast<float>(s);
      }
}

void Softmax(const Matrix& a, FuncSlice sa, Matrix& o, FuncSlice so, uint32_t hd, uint32_t cached,
             uint32_t t) {
  double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (uint32_t i = 0; i < sa.r1 - sa.r0; ++i) {
    uint32_t row = sa.r0 + i, limit = std::min(sa.c1 - sa.c0, cached + row % t + 1);
    double mx = -1e300, sum = 0;
    for (uint32_t j = 0; j < limit; ++j) mx = std::max(mx, a.at(row, sa.c0 + j) * scale);
    for (uint32_t j = 0; j < limit; ++j) sum += std::exp(a.at(row, sa.c0 + j) * scale - mx);
    for (uint32_t j = 0; j < sa.c1 - sa.c0; ++j)
      o.at(so.r0 + i, so.c0 + j) =
          j < limit ? static_cast<float>(std::exp(a.at(row, sa.c0 + j) * scale - mx) / sum) : 0.f;
  }
}

void Pv(const Matrix& p, const Matrix& vc, uint32_t ltot, Matrix& o, FuncSlice so, const FuncOp& f) {
  uint32_t hd = f.head_dim, group = f.kv_group, t = so.r1 - so.r0;
  for (uint32_t h = f.head_begin; h < f.head_end; ++h)
    for (uint32_t i = 0; i < t; ++i)
      for (uint32_t d = 0; d < hd; ++d) {
        double s = 0;
        for (uint32_t j = 0; j < ltot; ++j) s += double{p.at(h * t + i, j)} * vc.at(j, (h / group) * hd + d);
        o.at(so.r0 + i, h * hd + d) = static_cast<float>(s);
      }
}

void Binary(FuncKind k, const Matrix& a, FuncSlice sa, const Matrix& b, FuncSlice sb, Matrix& o,
            FuncSlice so) {
  for (uint32_t i = 0; i < so.r1 - so.r0; ++i)
    for (uint32_t j = 0; j < so.c1 - so.c0; ++j) {
      float x = a.at(sa.r0 + i, sa.c0 + j), y = b.at(sb.r0 + i, sb.c0 + j);
      o.at(so.r0 + i, so.c0 + j) = k == FuncKind::kAdd ? x + y : x / (1.f + std::exp(-x)) * y;
    }
}

// The unpartitioned MoE block of layer l on its normed input hn ([T, H], all rows of the
// phase): router softmax, each expert on the tokens ExpertTokens gives it (mapping/moe_routing.h,
// from RouteTokens' counts after the capacity cap), weighted by the token's router
// probability (renormalised over the experts the token reached when norm_topk_prob), summed,
// plus the shared experts on every token.
template <typename Ffn, typename Gemm>
Matrix MoeReference(const config::Model& model, const Routing& routing, uint32_t l, const Matrix& hn, Ffn ffn,
                    Gemm gemm) {
  const uint32_t t = hn.rows, h = hn.cols, e_count = model.num_experts();
  Matrix logits = gemm(l, hn, kFuncRouterRole, e_count), probs = Make(t, e_count);
  for (uint32_t i = 0; i < t; ++i) {
    double mx = -1e300, sum = 0;
    for (uint32_t e = 0; e < e_count; ++e) mx = std::max(mx, double{logits.at(i, e)});
    for (uint32_t e = 0; e < e_count; ++e) sum += std::exp(logits.at(i, e) - mx);
    for (uint32_t e = 0; e < e_count; ++e)
      probs.at(i, e) = static_cast<float>(std::exp(logits.at(i, e) - mx) / sum);
  }
  const ExpertLoad load = RouteTokens(routing, e_count, model.num_experts_per_token(), t, l);
  const std::vector<std::vector<uint32_t>> takes = ExpertTokens(load.tokens, t);
  std::vector<double> reached(t, 0.0);  // sum of the probabilities of the experts a token reached
  for (uint32_t e = 0; e < e_count; ++e)
    for (uint32_t i : takes[e]) reached[i] += probs.at(i, e);
  Matrix y = Make(t, h);
  for (uint32_t e = 0; e < e_count; ++e) {
    if (takes[e].empty()) continue;
    Matrix in = Make(static_cast<uint32_t>(takes[e].size()), h);
    for (size_t j = 0; j < takes[e].size(); ++j)
      std::copy_n(hn.v.begin() + uint64_t{takes[e][j]} * h, h, in.v.begin() + j * h);
    const Matrix out = ffn(l, in, kFuncExpertRole + 3 * static_cast<int>(e), model.moe_intermediate_size());
    for (size_t j = 0; j < takes[e].size(); ++j) {
      const uint32_t i = takes[e][j];
      const double g = model.norm_topk_prob() ? probs.at(i, e) / reached[i] : probs.at(i, e);
      for (uint32_t c = 0; c < h; ++c)
        y.at(i, c) = static_cast<float>(y.at(i, c) + g * out.at(static_cast<uint32_t>(j), c));
    }
  }
  if (model.shared_expert_intermediate_size() > 0) {
    const Matrix sh = ffn(l, hn, kFuncSharedRole, model.shared_expert_intermediate_size());
    for (uint64_t j = 0; j < y.v.size(); ++j) y.v[j] += sh.v[j];
  }
  return y;
}

}  // namespace

std::vector<Matrix> RunFunctional(const Program& p) {
  if (p.func.batch == 0) throw std::invalid_argument("functional: batch 0");
  if (p.func.outputs.empty() && !p.empty())
    throw std::invalid_argument(
        "functional: the Program has no functional side tables (lower it with LowerOptions::functional)");
  return RunFuncPlanCpu(BuildFuncPlan(p), {});
}

Routing ReferenceRouting(const config::MoeMapping& moe, uint32_t experts,
                         std::unique_ptr<RoutingTrace>* trace) {
  Routing r;
  if (!ParseRoutingKind(moe.routing(), &r.kind))
    throw std::invalid_argument("functional: unknown moe routing " + moe.routing());
  r.zipf_s = moe.zipf_s();
  r.capacity_factor = moe.capacity_factor();
  r.seed = moe.seed();
  if (r.kind == RoutingKind::kTrace) {
    *trace = std::make_unique<RoutingTrace>(
        ReadRoutingTrace(moe.routing_file(), experts, config::Location{"<mapping>", 1, 1}));
    r.trace = trace->get();
  }
  return r;
}

std::vector<Matrix> RunReference(const config::Model& model, const config::Workload& wl,
                                 const config::MoeMapping& moe) {
  const uint32_t batch = std::max(1u, wl.batch());
  const uint32_t h = model.hidden_size(), hd = model.head_dim(), nq = model.num_attention_heads();
  const uint32_t nkv = model.num_key_value_heads() ? model.num_key_value_heads() : nq;
  const uint32_t inter = model.intermediate_size();
  const uint32_t layers = wl.num_layers() ? wl.num_layers() : model.num_layers();
  const uint32_t lmax = wl.cached_prefix() + wl.seq_len() + wl.decode_steps();
  auto weight = [&](uint32_t l, int role, uint32_t k, uint32_t n) {
    Matrix w = Make(k, n);
    Fill(&w, FuncSeed(l, role), k, FuncWeightScale(k));
    return w;
  };
  auto all = [](const Matrix& m) { return FuncSlice{0, 0, m.rows, 0, m.cols}; };
  auto gemm = [&](uint32_t l, const Matrix& in, int role, uint32_t n) {
    Matrix w = weight(l, role, in.cols, n), y = Make(in.rows, n);
    Matmul(in, all(in), w, all(w), false, false, y, all(y));
    return y;
  };
  // silu(in . gate) * (in . up) . down, the weights of roles role, role + 1, role + 2.
  auto ffn = [&](uint32_t l, const Matrix& in, int role, uint32_t width) {
    Matrix g = gemm(l, in, role, width), u = gemm(l, in, role + 1, width), act = Make(in.rows, width);
    Binary(FuncKind::kSiluMul, g, all(g), u, all(u), act, all(act));
    return gemm(l, act, role + 2, h);
  };
  std::unique_ptr<RoutingTrace> trace;
  Routing routing;
  if (model.num_experts() > 0) routing = ReferenceRouting(moe, model.num_experts(), &trace);
  // Sequence s of a batch: its own caches, whose prefix is random from
  // FuncSequenceSeed(seed, s), and rows (s * t + i) of the phase's input stream. Sequences
  // never see each other in attention; the MLP (and the MoE block's routing) is row-wise
  // over all batch * t rows of the phase.
  const uint32_t kv_cols = nkv * hd;
  std::vector<std::vector<Matrix>> kcs(batch), vcs(batch);  // [sequence][layer]
  for (uint32_t sq = 0; sq < batch; ++sq)
    for (uint32_t l = 0; l < layers; ++l)
      for (auto [caches, role] : {std::pair{&kcs, 100}, std::pair{&vcs, 101}}) {
        Matrix c = Make(lmax, kv_cols);
        for (uint32_t r = 0; r < wl.cached_prefix(); ++r)
          for (uint32_t j = 0; j < kv_cols; ++j)
            c.at(r, j) = FuncRand(FuncSequenceSeed(FuncSeed(l, role), sq), uint64_t{r} * kv_cols + j);
        (*caches)[sq].push_back(std::move(c));
      }
  std::vector<Matrix> outs;
  for (uint32_t step = 0; step <= wl.decode_steps(); ++step) {
    const uint32_t t = step == 0 ? wl.seq_len() : 1;
    const uint32_t cached = step == 0 ? wl.cached_prefix() : wl.cached_prefix() + wl.seq_len() + step - 1;
    const uint32_t ltot = cached + t;
    Matrix x = Make(batch * t, h);
    Fill(&x, FuncSeed(step, 200), batch * t, 1.f);
    for (uint32_t l = 0; l < layers; ++l) {
      Matrix h1 = Make(batch * t, h);
      for (uint32_t sq = 0; sq < batch; ++sq) {
        Matrix xs = Make(t, h);
        std::copy(x.v.begin() + uint64_t{sq} * t * h, x.v.begin() + uint64_t{sq + 1} * t * h, xs.v.begin());
        Matrix xn = Make(t, h);
        GroupNorm(xs, all(xs), xn, all(xn), h);
        Matrix q = gemm(l, xn, 0, nq * hd), k = gemm(l, xn, 1, nkv * hd), v = gemm(l, xn, 2, nkv * hd);
        if (model.qk_norm()) {
          GroupNorm(q, all(q), q, all(q), hd);
          GroupNorm(k, all(k), k, all(k), hd);
        }
        Rope(q, all(q), q, all(q), hd, cached);
        Rope(k, all(k), k, all(k), hd, cached);
        Matrix &kc = kcs[sq][l], &vc = vcs[sq][l];
        for (uint32_t i = 0; i < t; ++i)
          for (uint32_t c = 0; c < nkv * hd; ++c)
            kc.at(cached + i, c) = k.at(i, c), vc.at(cached + i, c) = v.at(i, c);
        FuncOp f;
        f.head_dim = hd, f.kv_group = nq / nkv, f.head_begin = 0, f.head_end = nq;
        Matrix s = Make(nq * t, ltot), p = Make(nq * t, ltot), attn = Make(t, nq * hd);
        Scores(q, all(q), kc, ltot, s, f);
        Softmax(s, all(s), p, all(p), hd, cached, t);
        Pv(p, vc, ltot, attn, all(attn), f);
        Matrix o = gemm(l, attn, 3, h), r1 = Make(t, h);
        Binary(FuncKind::kAdd, o, all(o), xs, all(xs), r1, all(r1));
        std::copy(r1.v.begin(), r1.v.end(), h1.v.begin() + uint64_t{sq} * t * h);
      }
      Matrix hn = Make(batch * t, h);
      GroupNorm(h1, all(h1), hn, all(hn), h);
      Matrix dn =
          llm::IsMoeLayer(model, l) ? MoeReference(model, routing, l, hn, ffn, gemm) : ffn(l, hn, 4, inter);
      Binary(FuncKind::kAdd, dn, all(dn), h1, all(h1), x, all(x));
    }
    outs.push_back(std::move(x));
  }
  return outs;
}

double MaxRelativeError(const std::vector<Matrix>& a, const std::vector<Matrix>& b) {
  if (a.size() != b.size()) return 1e300;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].v.size() != b[i].v.size()) return 1e300;
    double mx = 1e-30, diff = 0;
    for (size_t j = 0; j < b[i].v.size(); ++j) {
      mx = std::max(mx, std::fabs(double{b[i].v[j]}));
      diff = std::max(diff, std::fabs(double{a[i].v[j]} - b[i].v[j]));
    }
    worst = std::max(worst, diff / mx);
  }
  return worst;
}

}  // namespace tpsim::mapping
