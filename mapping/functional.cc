#include "mapping/functional.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <unordered_map>

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

// A KV cache of `batch` sequences (blocks of rows / batch rows): rows [0, init) of block s
// hold rand(FuncSequenceSeed(seed, s), r * cols + col), r counted from the block's start.
void FillCache(Matrix* m, uint64_t seed, uint32_t batch, uint32_t init) {
  const uint32_t per = m->rows / std::max(1u, batch);
  for (uint32_t s = 0; s < std::max(1u, batch); ++s)
    for (uint32_t r = 0; r < std::min(init, per); ++r)
      for (uint32_t c = 0; c < m->cols; ++c)
        m->at(s * per + r, c) = FuncRand(FuncSequenceSeed(seed, s), uint64_t{r} * m->cols + c);
}

Matrix Make(uint32_t rows, uint32_t cols) {
  return {rows, cols, std::vector<float>(uint64_t{rows} * cols, 0.f)};
}

constexpr float kEps = 1e-6f;
constexpr double kTheta = 10000.0;

void Check(const Matrix& m, const FuncSlice& s) {
  if (s.r0 > s.r1 || s.c0 > s.c1 || s.r1 > m.rows || s.c1 > m.cols)
    throw std::invalid_argument("functional: slice out of range");
}

// ---- Kernels on (matrix, slice) views ----------------------------------------------------

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
      double inv = 1.0 / std::sqrt(ss / group + kEps);
      for (uint32_t c = 0; c < group; ++c)
        o.at(so.r0 + i, so.c0 + g0 + c) = static_cast<float>(a.at(sa.r0 + i, sa.c0 + g0 + c) * inv);
    }
}

// Position of row r: pos0 + r, or pos0 + r % wrap (wrap > 0: tokens per sequence of a batch).
void Rope(const Matrix& a, FuncSlice sa, Matrix& o, FuncSlice so, uint32_t hd, uint32_t pos0,
          uint32_t wrap = 0) {
  uint32_t half = hd / 2;
  for (uint32_t i = 0; i < sa.r1 - sa.r0; ++i) {
    double pos = pos0 + (wrap ? (sa.r0 + i) % wrap : sa.r0 + i);
    for (uint32_t g0 = 0; g0 < sa.c1 - sa.c0; g0 += hd)
      for (uint32_t c = 0; c < half; ++c) {
        double ang = pos * std::pow(kTheta, -2.0 * c / hd);
        double x0 = a.at(sa.r0 + i, sa.c0 + g0 + c), x1 = a.at(sa.r0 + i, sa.c0 + g0 + c + half);
        o.at(so.r0 + i, so.c0 + g0 + c) = static_cast<float>(x0 * std::cos(ang) - x1 * std::sin(ang));
        o.at(so.r0 + i, so.c0 + g0 + c + half) = static_cast<float>(x0 * std::sin(ang) + x1 * std::cos(ang));
      }
  }
}

// Batch B > 1: query row r belongs to sequence r / (q.rows / B), whose cache rows start at
// that sequence's block of kc.rows / B rows.
struct SeqMap {
  uint32_t tokens = 0, cache_rows = 0;  // per sequence; tokens 0: batch 1
  uint32_t Base(uint32_t row) const { return tokens ? row / tokens * cache_rows : 0; }
};
SeqMap Seqs(uint32_t batch, const Matrix& act, const Matrix& cache) {
  if (batch <= 1) return {};
  if (act.rows % batch || cache.rows % batch)
    throw std::invalid_argument("functional: rows do not divide into the batch's sequences");
  return {act.rows / batch, cache.rows / batch};
}

// Every index the scores / pv kernels touch lies inside the matrices.
void CheckAttention(const FuncOp& f, const Matrix& a, const Matrix& cache, const Matrix& o, SeqMap seq) {
  const bool scores = f.kind == FuncKind::kScores;
  const uint32_t t = scores ? f.a.r1 - f.a.r0 : f.out.r1 - f.out.r0, ltot = f.b.r1;
  const uint64_t kv_cols = f.head_end > f.head_begin && f.kv_group
                               ? (uint64_t{(f.head_end - 1) / f.kv_group} + 1) * f.head_dim
                               : 0;
  const uint64_t heads = uint64_t{f.head_end} * t, q_cols = uint64_t{f.head_end} * f.head_dim;
  bool ok = f.kv_group > 0 && f.head_begin <= f.head_end &&
            ltot <= (seq.tokens ? seq.cache_rows : cache.rows) && kv_cols <= cache.cols;
  if (scores) ok = ok && q_cols <= a.cols && heads <= o.rows && ltot <= o.cols;
  if (!scores) ok = ok && heads <= a.rows && ltot <= a.cols && q_cols <= o.cols;
  if (!ok) throw std::invalid_argument("functional: attention shapes disagree");
}

void Scores(const Matrix& q, FuncSlice sq, const Matrix& kc, uint32_t ltot, Matrix& o, const FuncOp& f,
            SeqMap seq = {}) {
  uint32_t hd = f.head_dim, group = f.kv_group, t = sq.r1 - sq.r0;
  for (uint32_t h = f.head_begin; h < f.head_end; ++h)
    for (uint32_t i = 0; i < t; ++i)
      for (uint32_t j = 0; j < ltot; ++j) {
        double s = 0;
        uint32_t row = seq.Base(sq.r0 + i) + j;
        for (uint32_t d = 0; d < hd; ++d)
          s += double{q.at(sq.r0 + i, h * hd + d)} * kc.at(row, (h / group) * hd + d);
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

void Pv(const Matrix& p, const Matrix& vc, uint32_t ltot, Matrix& o, FuncSlice so, const FuncOp& f,
        SeqMap seq = {}) {
  uint32_t hd = f.head_dim, group = f.kv_group, t = so.r1 - so.r0;
  for (uint32_t h = f.head_begin; h < f.head_end; ++h)
    for (uint32_t i = 0; i < t; ++i)
      for (uint32_t d = 0; d < hd; ++d) {
        double s = 0;
        uint32_t base = seq.Base(so.r0 + i);
        for (uint32_t j = 0; j < ltot; ++j)
          s += double{p.at(h * t + i, j)} * vc.at(base + j, (h / group) * hd + d);
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

class Executor {
 public:
  explicit Executor(const Program& p) : p_(p), packed_(p.func.collectives.size(), false) {
    for (size_t c = 0; c < p.func.collectives.size(); ++c) buffer_owner_[p.func.collectives[c].buffer] = c;
  }

  // Packs a collective's buffers the first time anything touches them.
  void EnsurePacked(size_t c) {
    if (packed_[c]) return;
    packed_[c] = true;
    for (const FuncCopy& cp : p_.func.collectives[c].pack) Copy(cp, p_.func.collectives[c].buffer, true);
  }
  void EnsurePackedBuffer(int32_t tensor) {
    auto it = buffer_owner_.find(tensor);
    if (it != buffer_owner_.end()) EnsurePacked(it->second);
  }

  Matrix& Get(int32_t t, int core) {
    if (t < 0 || static_cast<size_t>(t) >= p_.func.tensors.size())
      throw std::invalid_argument("functional: bad tensor id");
    const FuncTensor& ft = p_.func.tensors[t];
    uint64_t key = ft.kind == FuncTensorKind::kWeight ? uint64_t(t) << 20
                                                      : (uint64_t(t) << 20) | static_cast<uint32_t>(core + 1);
    auto it = store_.find(key);
    if (it != store_.end()) return it->second;
    Matrix m = Make(ft.rows, ft.cols);
    if (ft.kind == FuncTensorKind::kWeight) Fill(&m, ft.seed, ft.rows, FuncWeightScale(ft.rows));
    if (ft.kind == FuncTensorKind::kInput) Fill(&m, ft.seed, ft.rows, 1.f);
    if (ft.kind == FuncTensorKind::kCache) FillCache(&m, ft.seed, p_.func.batch, ft.init_rows);
    return store_.emplace(key, std::move(m)).first->second;
  }

  void Copy(const FuncCopy& c, int32_t buffer, bool to_buffer) {
    Matrix& t = Get(c.region.tensor, c.core);
    Matrix& b = Get(buffer, c.core);
    Check(t, c.region);
    uint64_t idx = c.offset;
    uint32_t rows = c.region.r1 - c.region.r0, cols = c.region.c1 - c.region.c0;
    if (c.offset + uint64_t{rows} * cols > b.v.size())
      throw std::invalid_argument("functional: copy past buffer");
    if (!c.transpose) {
      for (uint32_t i = 0; i < rows; ++i)
        for (uint32_t j = 0; j < cols; ++j, ++idx) {
          float& x = t.at(c.region.r0 + i, c.region.c0 + j);
          if (to_buffer)
            b.v[idx] = x;
          else
            x = b.v[idx];
        }
    } else {
      for (uint32_t j = 0; j < cols; ++j)
        for (uint32_t i = 0; i < rows; ++i, ++idx) {
          float& x = t.at(c.region.r0 + i, c.region.c0 + j);
          if (to_buffer)
            b.v[idx] = x;
          else
            x = b.v[idx];
        }
    }
  }

  void Flush() {
    for (const Pending& pd : pending_) {
      Matrix& b = Get(pd.buffer, pd.dst);
      for (size_t i = 0; i < pd.data.size(); ++i)
        b.v[pd.offset + i] = pd.reduce ? b.v[pd.offset + i] + pd.data[i] : pd.data[i];
    }
    pending_.clear();
  }

  void Transfer(const Task& t) {
    if (t.collective < 0 || static_cast<size_t>(t.collective) >= p_.func.collectives.size())
      throw std::invalid_argument("functional: transfer without a collective");
    const FuncCollective& fc = p_.func.collectives[t.collective];
    if (!pending_.empty() && (pending_key_ != std::make_pair(t.collective, int(t.coll_step)))) Flush();
    pending_key_ = {t.collective, t.coll_step};
    EnsurePacked(static_cast<size_t>(t.collective));
    uint64_t e = p_.func.dtype_bytes;
    Matrix& src = Get(fc.buffer, t.core);
    uint64_t off = t.offset / e, n = t.bytes / e;
    if (off + n > src.v.size()) throw std::invalid_argument("functional: transfer past buffer");
    uint64_t dst_off = t.dst_offset / e;
    if (dst_off + n > src.v.size()) throw std::invalid_argument("functional: transfer past buffer");
    pending_.push_back(
        {fc.buffer, t.dst_core, dst_off, t.reduce, {src.v.begin() + off, src.v.begin() + off + n}});
    if (static_cast<int64_t>(t.id) == fc.last_task) {
      Flush();
      for (const FuncCopy& c : fc.unpack) Copy(c, fc.buffer, false);
    }
  }

  void Compute(const FuncOp& f) {
    Flush();
    EnsurePackedBuffer(f.a.tensor);
    EnsurePackedBuffer(f.b.tensor);
    Matrix& a = Get(f.a.tensor, f.core);
    Matrix& o = Get(f.out.tensor, f.core);
    Check(a, f.a);
    Check(o, f.out);
    switch (f.kind) {
      case FuncKind::kMatmul: {
        Matrix& b = Get(f.b.tensor, f.core);
        Check(b, f.b);
        Matmul(a, f.a, b, f.b, f.transpose_b, f.accumulate, o, f.out);
        break;
      }
      case FuncKind::kRmsNorm:
        GroupNorm(a, f.a, o, f.out, f.a.c1 - f.a.c0);
        break;
      case FuncKind::kHeadNorm:
        GroupNorm(a, f.a, o, f.out, f.head_dim);
        break;
      case FuncKind::kRope:
        Rope(a, f.a, o, f.out, f.head_dim, f.position_offset, f.tokens_per_sequence);
        break;
      case FuncKind::kCopy: {
        // a's rows in blocks of tokens_per_sequence (one per sequence); block s lands
        // block_stride * s rows further.
        const uint32_t rows = f.a.r1 - f.a.r0,
                       block = f.tokens_per_sequence ? f.tokens_per_sequence : std::max(1u, rows);
        const uint64_t blocks = rows / block;
        if (rows % block || f.out.r1 - f.out.r0 != (rows ? block : 0) ||
            f.out.c1 - f.out.c0 != f.a.c1 - f.a.c0 ||
            (blocks && f.out.r1 + (blocks - 1) * f.block_stride > o.rows))
          throw std::invalid_argument("functional: copy shapes disagree");
        for (uint32_t i = 0; i < rows; ++i)
          for (uint32_t j = 0; j < f.a.c1 - f.a.c0; ++j)
            o.at(f.out.r0 + i / block * f.block_stride + i % block, f.out.c0 + j) =
                a.at(f.a.r0 + i, f.a.c0 + j);
        break;
      }
      case FuncKind::kScores: {
        const Matrix& kc = Get(f.b.tensor, f.core);
        const SeqMap seq = Seqs(p_.func.batch, a, kc);
        CheckAttention(f, a, kc, o, seq);
        Scores(a, f.a, kc, f.b.r1, o, f, seq);
        break;
      }
      case FuncKind::kSoftmax:
        Softmax(a, f.a, o, f.out, f.head_dim, f.position_offset, f.tokens_per_sequence);
        break;
      case FuncKind::kPv: {
        const Matrix& vc = Get(f.b.tensor, f.core);
        const SeqMap seq = Seqs(p_.func.batch, o, vc);
        CheckAttention(f, a, vc, o, seq);
        Pv(a, vc, f.b.r1, o, f.out, f, seq);
        break;
      }
      case FuncKind::kAdd:
      case FuncKind::kSiluMul:
        Binary(f.kind, a, f.a, Get(f.b.tensor, f.core), f.b, o, f.out);
        break;
    }
  }

  std::vector<Matrix> Run() {
    std::vector<Matrix> outs;
    size_t next_out = 0;
    for (const Task& t : p_.tasks()) {
      if (t.kind == TaskKind::kCompute && t.func >= 0) Compute(p_.func.ops.at(t.func));
      if (t.kind == TaskKind::kTransfer) Transfer(t);
    }
    Flush();
    for (; next_out < p_.func.outputs.size(); ++next_out) {
      const FuncOutput& fo = p_.func.outputs[next_out];
      Matrix m = Make(fo.rows, fo.cols);
      for (const auto& [core, s] : fo.parts) {
        Matrix& src = Get(s.tensor, core);
        for (uint32_t i = s.r0; i < s.r1; ++i)
          for (uint32_t j = s.c0; j < s.c1; ++j) m.at(i, j) = src.at(i, j);
      }
      outs.push_back(std::move(m));
    }
    return outs;
  }

 private:
  struct Pending {
    int32_t buffer;
    int dst;
    uint64_t offset;
    bool reduce;
    std::vector<float> data;
  };
  const Program& p_;
  std::unordered_map<uint64_t, Matrix> store_;
  std::vector<Pending> pending_;
  std::pair<int, int> pending_key_{-1, -1};
  std::vector<bool> packed_;
  std::map<int32_t, size_t> buffer_owner_;
};

}  // namespace

std::vector<Matrix> RunFunctional(const Program& p) {
  if (p.func.batch == 0) throw std::invalid_argument("functional: batch 0");
  if (p.func.outputs.empty() && !p.empty())
    throw std::invalid_argument(
        "functional: the Program has no functional side tables (lower it with LowerOptions::functional)");
  return Executor(p).Run();
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
