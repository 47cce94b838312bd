#include "mapping/functional.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "mapping/func_plan.h"

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

}  // namespace

std::vector<Matrix> RunFunctional(const Program& p) {
  if (p.func.batch == 0) throw std::invalid_argument("functional: batch 0");
  if (p.func.outputs.empty() && !p.empty())
    throw std::invalid_argument(
        "functional: the Program has no functional side tables (lower it with LowerOptions::functional)");
  return RunFuncPlanCpu(BuildFuncPlan(p), {});
}

std::vector<Matrix> RunReference(const config::Model& model, const config::Workload& wl) {
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
  // Sequence s of a batch: its own caches, whose prefix is random from
  // FuncSequenceSeed(seed, s), and rows (s * t + i) of the phase's input stream. Sequences
  // never see each other.
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
    Matrix all_x = Make(batch * t, h);
    Fill(&all_x, FuncSeed(step, 200), batch * t, 1.f);
    for (uint32_t sq = 0; sq < batch; ++sq) {
      std::vector<Matrix>&kc = kcs[sq], &vc = vcs[sq];
      Matrix x = Make(t, h);
      std::copy(all_x.v.begin() + uint64_t{sq} * t * h, all_x.v.begin() + uint64_t{sq + 1} * t * h,
                x.v.begin());
      for (uint32_t l = 0; l < layers; ++l) {
        auto gemm = [&](const Matrix& in, int role, uint32_t n) {
          Matrix w = weight(l, role, in.cols, n), y = Make(in.rows, n);
          Matmul(in, all(in), w, all(w), false, false, y, all(y));
          return y;
        };
        Matrix xn = Make(t, h);
        GroupNorm(x, all(x), xn, all(xn), h);
        Matrix q = gemm(xn, 0, nq * hd), k = gemm(xn, 1, nkv * hd), v = gemm(xn, 2, nkv * hd);
        if (model.qk_norm()) {
          GroupNorm(q, all(q), q, all(q), hd);
          GroupNorm(k, all(k), k, all(k), hd);
        }
        Rope(q, all(q), q, all(q), hd, cached);
        Rope(k, all(k), k, all(k), hd, cached);
        for (uint32_t i = 0; i < t; ++i)
          for (uint32_t c = 0; c < nkv * hd; ++c)
            kc[l].at(cached + i, c) = k.at(i, c), vc[l].at(cached + i, c) = v.at(i, c);
        FuncOp f;
        f.head_dim = hd, f.kv_group = nq / nkv, f.head_begin = 0, f.head_end = nq;
        Matrix s = Make(nq * t, ltot), p = Make(nq * t, ltot), attn = Make(t, nq * hd);
        Scores(q, all(q), kc[l], ltot, s, f);
        Softmax(s, all(s), p, all(p), hd, cached, t);
        Pv(p, vc[l], ltot, attn, all(attn), f);
        Matrix o = gemm(attn, 3, h), h1 = Make(t, h);
        Binary(FuncKind::kAdd, o, all(o), x, all(x), h1, all(h1));
        Matrix hn = Make(t, h);
        GroupNorm(h1, all(h1), hn, all(hn), h);
        Matrix g = gemm(hn, 4, inter), u = gemm(hn, 5, inter), act = Make(t, inter);
        Binary(FuncKind::kSiluMul, g, all(g), u, all(u), act, all(act));
        Matrix dn = gemm(act, 6, h);
        Binary(FuncKind::kAdd, dn, all(dn), h1, all(h1), x, all(x));
      }
      std::copy(x.v.begin(), x.v.end(), all_x.v.begin() + uint64_t{sq} * t * h);
    }
    outs.push_back(std::move(all_x));
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
