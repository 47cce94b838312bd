#include "mapping/func_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>

namespace tpsim::mapping {

const char* ToString(FuncStepKind k) {
  switch (k) {
    case FuncStepKind::kMatmul:
      return "matmul";
    case FuncStepKind::kRmsNorm:
      return "rmsnorm";
    case FuncStepKind::kRope:
      return "rope";
    case FuncStepKind::kSoftmax:
      return "softmax";
    case FuncStepKind::kAdd:
      return "add";
    case FuncStepKind::kSiluMul:
      return "silu_mul";
    case FuncStepKind::kCopy:
      return "copy";
  }
  return "?";
}

const char* ToString(FuncStepOrigin o) {
  switch (o) {
    case FuncStepOrigin::kOp:
      return "op";
    case FuncStepOrigin::kPack:
      return "pack";
    case FuncStepOrigin::kStage:
      return "stage";
    case FuncStepOrigin::kApply:
      return "apply";
    case FuncStepOrigin::kUnpack:
      return "unpack";
  }
  return "?";
}

namespace {

[[noreturn]] void Fail(const std::string& what) { throw std::invalid_argument("func plan: " + what); }

uint32_t Narrow(uint64_t v, const char* what) {
  if (v > std::numeric_limits<uint32_t>::max()) Fail(std::string(what) + " too large");
  return static_cast<uint32_t>(v);
}

class Builder {
 public:
  explicit Builder(const Program& p) : p_(p), f_(p.func), packed_(f_.collectives.size(), false) {
    if (f_.batch == 0) Fail("batch 0");
    if (f_.dtype_bytes == 0) Fail("dtype_bytes is 0");
    for (size_t c = 0; c < f_.collectives.size(); ++c) buffer_owner_[f_.collectives[c].buffer] = c;
    plan_.arenas.push_back({kWeightsCore, 0});
    plan_.arenas.push_back({kStagingCore, 0});
  }

  FuncPlan Build() {
    for (const Task& t : p_.tasks()) {
      // A task's ops: t.func, then each op's `next` (strictly increasing, so no cycle).
      for (int64_t i = t.kind == TaskKind::kCompute ? t.func : -1; i >= 0;) {
        if (static_cast<size_t>(i) >= f_.ops.size()) Fail("task " + std::to_string(t.id) + ": bad func op");
        Compute(f_.ops[i], t.id);
        const int64_t next = f_.ops[i].next;
        if (next >= 0 && next <= i) Fail("task " + std::to_string(t.id) + ": func op chain goes backwards");
        i = next;
      }
      if (t.kind == TaskKind::kTransfer) Transfer(t);
    }
    Flush();
    for (const FuncOutput& fo : f_.outputs) {
      FuncPlanOutput out;
      out.phase = ToString(fo.phase);
      out.step = fo.step;
      out.rows = fo.rows;
      out.cols = fo.cols;
      if (!fo.part_row0.empty() && fo.part_row0.size() != fo.parts.size()) Fail("output part rows disagree");
      for (size_t i = 0; i < fo.parts.size(); ++i) {
        const auto& [core, s] = fo.parts[i];
        View(s, core);  // checks the slice against its tensor
        const uint32_t r0 = fo.part_row0.empty() ? s.r0 : fo.part_row0[i];
        if (uint64_t{r0} + (s.r1 - s.r0) > fo.rows || s.c1 > fo.cols) Fail("output part outside the output");
        out.parts.push_back({View(s, core), r0, s.c0});
      }
      plan_.outputs.push_back(std::move(out));
    }
    plan_.arenas[1].elems = staging_max_;
    for (size_t i = 0; i < plan_.steps.size(); ++i) CheckStep(plan_.steps[i], i);
    return std::move(plan_);
  }

 private:
  struct Slot {
    uint32_t arena;
    uint64_t offset;
  };
  struct Pending {
    int32_t coll;
    int64_t task;
    int dst;
    uint64_t dst_off, n, stage_off;
    bool reduce;
  };

  const FuncTensor& Tensor(int32_t t) const {
    if (t < 0 || static_cast<size_t>(t) >= f_.tensors.size()) Fail("bad tensor id " + std::to_string(t));
    return f_.tensors[t];
  }

  uint32_t ArenaOf(int core) {
    auto it = arena_of_.find(core);
    if (it != arena_of_.end()) return it->second;
    plan_.arenas.push_back({core, 0});
    uint32_t a = static_cast<uint32_t>(plan_.arenas.size() - 1);
    arena_of_[core] = a;
    return a;
  }

  // The whole tensor t as core `core` holds it (weights: the shared copy), allocated and
  // initialised on first use as mapping's executor does.
  Slot Get(int32_t t, int core) {
    const FuncTensor& ft = Tensor(t);
    const bool weight = ft.kind == FuncTensorKind::kWeight;
    const std::pair<int32_t, int> key{t, weight ? kWeightsCore : core};
    auto it = slots_.find(key);
    if (it != slots_.end()) return it->second;
    const uint32_t arena = weight ? 0 : ArenaOf(core);
    Slot s{arena, plan_.arenas[arena].elems};
    plan_.arenas[arena].elems += uint64_t{ft.rows} * ft.cols;
    FuncInit init{arena, s.offset, 0, ft.cols, ft.seed, 1.f};
    if (weight) init.rows = ft.rows, init.scale = FuncWeightScale(ft.rows);
    if (ft.kind == FuncTensorKind::kInput) {
      init.rows = ft.rows;
      // A replica's share: the whole input's rows of sequences [seq0, ...) (rows / seqs each).
      if (ft.seqs) init.first = uint64_t{ft.seq0} * (ft.rows / ft.seqs) * ft.cols;
    }
    if (ft.kind == FuncTensorKind::kConst) {
      if (ft.seed >= f_.consts.size() || f_.consts[ft.seed].size() != uint64_t{ft.rows} * ft.cols)
        Fail("const tensor " + std::to_string(t) + " without its values");
      init.rows = ft.rows;
      init.values = f_.consts[ft.seed];
    }
    if (ft.kind == FuncTensorKind::kCache) {
      // Batch B: sequence q's block of rows / B rows starts with its own random prefix
      // (FuncSequenceSeed; sequence 0 keeps the tensor's seed).
      const uint32_t per = ft.rows / Seqs(ft);
      init.rows = std::min(ft.init_rows, per);
      for (uint32_t q = 0; init.rows && init.cols && q < Seqs(ft); ++q) {
        FuncInit seq = init;
        seq.offset = s.offset + uint64_t{q} * per * ft.cols;
        seq.seed = FuncSequenceSeed(ft.seed, ft.seq0 + q);
        plan_.inits.push_back(seq);
      }
      init.rows = 0;
    }
    if (init.rows && init.cols) plan_.inits.push_back(init);
    slots_.emplace(key, s);
    return s;
  }

  // Sequences tensor ft holds (an attention replica's share, or the whole batch).
  uint32_t Seqs(const FuncTensor& ft) const { return ft.seqs ? ft.seqs : f_.batch; }

  void CheckSlice(const FuncSlice& s) const {
    const FuncTensor& ft = Tensor(s.tensor);
    if (s.r0 > s.r1 || s.c0 > s.c1 || s.r1 > ft.rows || s.c1 > ft.cols) Fail("slice out of range");
  }

  FuncView View(const FuncSlice& s, int core) {
    CheckSlice(s);
    const FuncTensor& ft = Tensor(s.tensor);
    Slot sl = Get(s.tensor, core);
    return {sl.arena, sl.offset + uint64_t{s.r0} * ft.cols + s.c0, s.r1 - s.r0, s.c1 - s.c0, ft.cols, 1};
  }

  // Elements [off, off + n) of core's copy of (flat) tensor t, as one row.
  FuncView Range(int32_t t, int core, uint64_t off, uint64_t n) {
    const FuncTensor& ft = Tensor(t);
    if (off + n > uint64_t{ft.rows} * ft.cols) Fail("transfer past buffer");
    Slot sl = Get(t, core);
    uint32_t cols = Narrow(n, "transfer");
    return {sl.arena, sl.offset + off, 1, cols, cols, 1};
  }

  void Emit(FuncStep s) { plan_.steps.push_back(std::move(s)); }

  FuncStep Step(FuncStepKind k, FuncStepOrigin o, int64_t task, int core) {
    FuncStep s;
    s.kind = k;
    s.origin = o;
    s.task = task;
    s.core = core;
    return s;
  }

  void Copy(const FuncCopy& c, int32_t buffer, bool to_buffer, int32_t coll, int64_t task) {
    FuncView region = View(c.region, c.core);
    const FuncTensor& bt = Tensor(buffer);
    const uint64_t n = region.Elements();
    if (c.offset + n > uint64_t{bt.rows} * bt.cols) Fail("copy past buffer");
    Slot b = Get(buffer, c.core);
    FuncView flat{b.arena, b.offset + c.offset, region.rows, region.cols, region.cols, 1};
    if (c.transpose) flat.ld = 1, flat.cs = region.rows;
    FuncStep s =
        Step(FuncStepKind::kCopy, to_buffer ? FuncStepOrigin::kPack : FuncStepOrigin::kUnpack, task, c.core);
    s.collective = coll;
    s.a = to_buffer ? region : flat;
    s.out = to_buffer ? flat : region;
    Emit(s);
  }

  void EnsurePacked(size_t c, int64_t task) {
    if (packed_[c]) return;
    packed_[c] = true;
    const FuncCollective& fc = f_.collectives[c];
    for (const FuncCopy& cp : fc.pack) Copy(cp, fc.buffer, true, static_cast<int32_t>(c), task);
  }
  void EnsurePackedBuffer(int32_t tensor, int64_t task) {
    auto it = buffer_owner_.find(tensor);
    if (it != buffer_owner_.end()) EnsurePacked(it->second, task);
  }

  void Flush() {
    for (const Pending& pd : pending_) {
      const int32_t buffer = f_.collectives[pd.coll].buffer;
      FuncView dst = Range(buffer, pd.dst, pd.dst_off, pd.n);
      FuncView staged{1, pd.stage_off, 1, dst.cols, dst.cols, 1};
      FuncStep s =
          Step(pd.reduce ? FuncStepKind::kAdd : FuncStepKind::kCopy, FuncStepOrigin::kApply, pd.task, pd.dst);
      s.collective = pd.coll;
      s.a = pd.reduce ? dst : staged;
      if (pd.reduce) s.b = staged;
      s.out = dst;
      Emit(s);
    }
    pending_.clear();
    staging_used_ = 0;
  }

  void Transfer(const Task& t) {
    if (t.collective < 0 || static_cast<size_t>(t.collective) >= f_.collectives.size())
      Fail("transfer task " + std::to_string(t.id) + " without a collective");
    const FuncCollective& fc = f_.collectives[t.collective];
    const std::pair<int, int> key{t.collective, t.coll_step};
    if (!pending_.empty() && pending_key_ != key) Flush();
    pending_key_ = key;
    EnsurePacked(static_cast<size_t>(t.collective), t.id);
    const uint64_t e = f_.dtype_bytes, n = t.bytes / e;
    FuncView src = Range(fc.buffer, t.core, t.offset / e, n);
    Range(fc.buffer, t.dst_core, t.dst_offset / e, n);  // checks the destination range
    FuncStep s = Step(FuncStepKind::kCopy, FuncStepOrigin::kStage, t.id, kStagingCore);
    s.collective = t.collective;
    s.a = src;
    s.out = {1, staging_used_, 1, src.cols, src.cols, 1};
    Emit(s);
    pending_.push_back({t.collective, t.id, t.dst_core, t.dst_offset / e, n, staging_used_, t.reduce});
    staging_used_ += n;
    staging_max_ = std::max(staging_max_, staging_used_);
    if (static_cast<int64_t>(t.id) == fc.last_task) {
      Flush();
      for (const FuncCopy& c : fc.unpack) Copy(c, fc.buffer, false, t.collective, t.id);
    }
  }

  void SameShape(const FuncView& a, const FuncView& out, const char* what) const {
    if (a.rows != out.rows || a.cols != out.cols) Fail(std::string(what) + ": shapes disagree");
  }

  // Batch B > 1: row R of an activation with `act_rows` rows belongs to sequence R / (act_rows /
  // B), whose KV rows start at that sequence's block of cache_rows / B rows. Calls
  // run(i0, i1, base) for each run [i0, i1) of the slice's rows [r0, r1) (counted from r0)
  // that lies in one sequence, with that sequence's first cache row.
  template <typename Run>
  void BySequence(uint32_t r0, uint32_t r1, uint32_t act_rows, uint32_t cache_rows, uint32_t batch,
                  Run run) const {
    if (batch <= 1) return run(0, r1 - r0, uint64_t{0});
    if (act_rows % batch || cache_rows % batch) Fail("rows do not divide into the batch's sequences");
    const uint32_t tokens = act_rows / batch, per = cache_rows / batch;
    for (uint32_t r = r0; r < r1;) {
      const uint32_t end = std::min(r1, (r / tokens + 1) * tokens);
      run(r - r0, end - r0, uint64_t{r / tokens} * per);
      r = end;
    }
  }

  // QK^T (scores) or PV (pv) of heads [head_begin, head_end) as batched matmuls, one per run of
  // query heads that share a KV head (and, batch B > 1, per sequence within the rows).
  void Attention(const FuncOp& f, int64_t task) {
    const bool scores = f.kind == FuncKind::kScores;
    const uint32_t hd = f.head_dim, group = f.kv_group;
    if (hd == 0 || group == 0 || f.head_begin > f.head_end) Fail("attention op with head_dim or group 0");
    CheckSlice(f.a);
    CheckSlice(f.out);
    const FuncTensor &at = Tensor(f.a.tensor), &ct = Tensor(f.b.tensor), &ot = Tensor(f.out.tensor);
    const uint32_t t = scores ? f.a.r1 - f.a.r0 : f.out.r1 - f.out.r0;
    const uint32_t ltot = f.b.r1;
    const uint32_t kv_heads_needed = f.head_end > f.head_begin ? (f.head_end - 1) / group + 1 : 0;
    if (ltot > ct.rows / Seqs(ct) || uint64_t{kv_heads_needed} * hd > ct.cols)
      Fail("attention: KV cache too small");
    const uint64_t q_cols = uint64_t{f.head_end} * hd, rows_needed = uint64_t{f.head_end} * t;
    if (scores && (q_cols > at.cols || rows_needed > ot.rows || ltot > ot.cols))
      Fail("scores: q or output too small");
    if (!scores && (rows_needed > at.rows || ltot > at.cols || q_cols > ot.cols))
      Fail("pv: probabilities or output too small");
    const Slot a = Get(f.a.tensor, f.core), c = Get(f.b.tensor, f.core), o = Get(f.out.tensor, f.core);
    const FuncSlice& rows = scores ? f.a : f.out;  // the slice whose rows are query tokens
    const uint32_t act_rows = scores ? at.rows : ot.rows;
    BySequence(rows.r0, rows.r1, act_rows, ct.rows, Seqs(ct), [&](uint32_t i0, uint32_t i1, uint64_t base) {
      const uint32_t n = i1 - i0;
      for (uint32_t h0 = f.head_begin; h0 < f.head_end;) {
        const uint32_t g = h0 / group, h1 = std::min(f.head_end, (g + 1) * group);
        FuncStep s = Step(FuncStepKind::kMatmul, FuncStepOrigin::kOp, task, f.core);
        s.tensor = f.out.tensor;
        s.tensor_base = o.offset;
        s.batch = h1 - h0;
        s.b = {c.arena, c.offset + base * ct.cols + uint64_t{g} * hd, ltot, hd, ct.cols, 1};
        if (scores) {  // out[h*t + i, j] = q[r0 + i, h*hd : +hd] . kc[base + j, g*hd : +hd]
          s.a = {a.arena, a.offset + uint64_t{f.a.r0 + i0} * at.cols + uint64_t{h0} * hd, n, hd, at.cols, 1};
          s.stride_a = hd;
          s.transpose_b = true;
          s.out = {o.arena, o.offset + (uint64_t{h0} * t + i0) * ot.cols, n, ltot, ot.cols, 1};
          s.stride_out = uint64_t{t} * ot.cols;
        } else {  // out[r0 + i, h*hd + d] = sum_j p[h*t + i, j] vc[base + j, g*hd + d]
          s.a = {a.arena, a.offset + (uint64_t{h0} * t + i0) * at.cols, n, ltot, at.cols, 1};
          s.stride_a = uint64_t{t} * at.cols;
          s.out = {o.arena, o.offset + uint64_t{f.out.r0 + i0} * ot.cols + uint64_t{h0} * hd, n, hd, ot.cols,
                   1};
          s.stride_out = hd;
        }
        Emit(s);
        h0 = h1;
      }
    });
  }

  // Rows [i0, i1) of a view.
  static FuncView Rows(FuncView v, uint32_t i0, uint32_t i1) {
    v.offset += uint64_t{i0} * v.ld;
    v.rows = i1 - i0;
    return v;
  }

  // RoPE with tokens_per_sequence T > 0: row r's position is position_offset + r % T, so one
  // step per run of rows within one sequence.
  void Rope(const FuncOp& f, FuncStep s) {
    s.kind = FuncStepKind::kRope;
    s.group = f.head_dim;
    if (s.group < 2 || s.group % 2 || s.a.cols % s.group) Fail("rope head_dim does not divide the row");
    SameShape(s.a, s.out, "rope");
    const uint32_t T = f.tokens_per_sequence;
    for (uint32_t r = f.a.r0; r < f.a.r1;) {
      const uint32_t end = T ? std::min(f.a.r1, (r / T + 1) * T) : f.a.r1;
      FuncStep run = s;
      run.a = Rows(s.a, r - f.a.r0, end - f.a.r0);
      run.out = Rows(s.out, r - f.a.r0, end - f.a.r0);
      run.pos0 = f.position_offset + (T ? r % T : r);
      Emit(run);
      r = end;
    }
  }

  // The KV write: a's rows in blocks of tokens_per_sequence (one per sequence; 0: one block),
  // block q landing q * block_stride rows below out's first row.
  void BlockCopy(const FuncOp& f, FuncStep s) {
    const uint32_t rows = s.a.rows,
                   block = f.tokens_per_sequence ? f.tokens_per_sequence : std::max(1u, rows);
    const uint32_t blocks = rows / block;
    const FuncTensor& ot = Tensor(f.out.tensor);
    if (rows % block || s.out.rows != (rows ? block : 0) || s.out.cols != s.a.cols ||
        (blocks && f.out.r1 + uint64_t{blocks - 1} * f.block_stride > ot.rows))
      Fail("copy: shapes disagree");
    for (uint32_t q = 0; q < blocks; ++q) {
      FuncStep run = s;
      run.a = Rows(s.a, q * block, (q + 1) * block);
      run.out.offset += uint64_t{q} * f.block_stride * s.out.ld;
      Emit(run);
    }
  }

  void Compute(const FuncOp& f, int64_t task) {
    Flush();
    EnsurePackedBuffer(f.a.tensor, task);
    EnsurePackedBuffer(f.b.tensor, task);
    if (f.kind == FuncKind::kScores || f.kind == FuncKind::kPv) return Attention(f, task);
    FuncView a = View(f.a, f.core), out = View(f.out, f.core);
    FuncStep s = Step(FuncStepKind::kCopy, FuncStepOrigin::kOp, task, f.core);
    s.tensor = f.out.tensor;
    s.tensor_base = Get(f.out.tensor, f.core).offset;
    s.a = a;
    s.out = out;
    switch (f.kind) {
      case FuncKind::kMatmul: {
        s.kind = FuncStepKind::kMatmul;
        s.b = View(f.b, f.core);
        s.transpose_b = f.transpose_b;
        s.accumulate = f.accumulate;
        const uint32_t inner = f.transpose_b ? s.b.cols : s.b.rows,
                       cols = f.transpose_b ? s.b.rows : s.b.cols;
        if (inner != a.cols || out.rows != a.rows || out.cols != cols) Fail("matmul shapes disagree");
        break;
      }
      case FuncKind::kRmsNorm:
      case FuncKind::kHeadNorm:
        s.kind = FuncStepKind::kRmsNorm;
        s.group = f.kind == FuncKind::kRmsNorm ? a.cols : f.head_dim;
        if (s.group == 0 || a.cols % s.group) Fail("norm group does not divide the row");
        SameShape(a, out, "rmsnorm");
        break;
      case FuncKind::kRope:
        return Rope(f, s);
      case FuncKind::kSoftmax:
        s.kind = FuncStepKind::kSoftmax;
        s.scale = 1.0 / std::sqrt(static_cast<double>(f.head_dim));
        s.pos0 = f.position_offset;
        s.tokens = f.tokens_per_sequence;
        s.row0 = f.a.r0;
        if (f.tokens_per_sequence == 0) Fail("softmax with 0 tokens");
        SameShape(a, out, "softmax");
        break;
      case FuncKind::kCopy:
        return BlockCopy(f, s);
      case FuncKind::kAdd:
      case FuncKind::kSiluMul:
        s.kind = f.kind == FuncKind::kAdd ? FuncStepKind::kAdd : FuncStepKind::kSiluMul;
        s.b = View(f.b, f.core);
        SameShape(a, out, ToString(s.kind));
        SameShape(s.b, out, ToString(s.kind));
        break;
      default:
        Fail("unknown func op kind");
    }
    Emit(s);
  }

  // Every element a step can touch lies inside its arena (so no backend reads out of bounds).
  void CheckView(const FuncView& v, uint64_t stride, uint32_t batch, size_t step) const {
    if (!v.rows || !v.cols) return;
    if (v.arena >= plan_.arenas.size()) Fail("step " + std::to_string(step) + ": bad arena");
    uint64_t last =
        v.offset + uint64_t{v.rows - 1} * v.ld + uint64_t{v.cols - 1} * v.cs + uint64_t{batch - 1} * stride;
    if (last >= plan_.arenas[v.arena].elems) Fail("step " + std::to_string(step) + ": view past its arena");
  }
  void CheckStep(const FuncStep& s, size_t i) const {
    if (s.batch == 0) Fail("step " + std::to_string(i) + ": batch 0");
    CheckView(s.a, s.stride_a, s.batch, i);
    CheckView(s.out, s.stride_out, s.batch, i);
    if (s.kind == FuncStepKind::kMatmul || s.kind == FuncStepKind::kAdd || s.kind == FuncStepKind::kSiluMul)
      CheckView(s.b, s.stride_b, s.batch, i);
  }

  const Program& p_;
  const FuncData& f_;
  FuncPlan plan_;
  std::map<std::pair<int32_t, int>, Slot> slots_;
  std::map<int, uint32_t> arena_of_;
  std::vector<bool> packed_;
  std::map<int32_t, size_t> buffer_owner_;
  std::vector<Pending> pending_;
  std::pair<int, int> pending_key_{-1, -1};
  uint64_t staging_used_ = 0, staging_max_ = 0;
};

}  // namespace

FuncPlan BuildFuncPlan(const Program& p) { return Builder(p).Build(); }

uint64_t FuncPlan::TotalElems() const {
  uint64_t n = 0;
  for (const auto& a : arenas) n += a.elems;
  return n;
}

double FuncPlan::MatmulFlops() const {
  double f = 0;
  for (const auto& s : steps)
    if (s.kind == FuncStepKind::kMatmul) f += 2.0 * s.batch * s.out.rows * s.out.cols * s.a.cols;
  return f;
}

std::string FuncPlan::Summary() const {
  std::ostringstream os;
  std::map<std::string, size_t> kinds;
  for (const auto& s : steps) ++kinds[std::string(ToString(s.origin)) + " " + ToString(s.kind)];
  os << arenas.size() << " arenas (weights, staging, " << arenas.size() - 2
     << (arenas.size() == 3 ? " core), " : " cores), ") << TotalElems() * 4 / (1 << 20) << " MiB as fp32; "
     << steps.size() << " steps:";
  for (const auto& [k, n] : kinds) os << " " << k << " x" << n << ";";
  os << " " << MatmulFlops() / 1e9 << " GFLOP of matmul";
  return os.str();
}

std::string FuncPlan::Describe(size_t i, const Program& p) const {
  if (i >= steps.size()) return "step " + std::to_string(i) + " (none)";
  const FuncStep& s = steps[i];
  std::ostringstream os;
  os << "step " << i << ": " << ToString(s.origin) << " " << ToString(s.kind);
  if (s.kind == FuncStepKind::kMatmul)
    os << " " << s.batch << "x[" << s.out.rows << "x" << s.out.cols << "x" << s.a.cols << "]";
  else
    os << " " << s.out.rows << "x" << s.out.cols;
  if (s.core >= 0) os << " on core " << s.core;
  if (s.task >= 0 && static_cast<size_t>(s.task) < p.num_tasks()) {
    const auto& t = p.task(s.task);
    os << " (task " << s.task;
    if (t.op < p.ops.size()) {
      const auto& r = p.ops[t.op].ref;
      os << ", " << ToString(r.phase) << (r.phase == Phase::kDecode ? " step " + std::to_string(r.step) : "")
         << " layer " << r.layer << " " << r.op;
    }
    os << ")";
  }
  return os.str();
}

namespace {
void FillInit(const FuncInit& in, bool round_bf16, float* out) {
  const uint64_t n = uint64_t{in.rows} * in.cols;
  for (uint64_t i = 0; i < n; ++i) {
    const float x = in.values.empty() ? in.scale * FuncRand(in.seed, in.first + i) : in.values[i];
    out[i] = round_bf16 ? RoundBf16(x) : x;
  }
}
}  // namespace

std::vector<float> InitValues(const FuncInit& in, bool round_bf16) {
  std::vector<float> v(uint64_t{in.rows} * in.cols);
  FillInit(in, round_bf16, v.data());
  return v;
}

std::vector<std::vector<float>> InitialArenas(const FuncPlan& plan, bool round_bf16) {
  std::vector<std::vector<float>> a;
  a.reserve(plan.arenas.size());
  for (const auto& ar : plan.arenas) a.emplace_back(ar.elems, 0.f);
  for (const FuncInit& in : plan.inits) {
    if (in.arena >= a.size() || in.offset + uint64_t{in.rows} * in.cols > a[in.arena].size())
      throw std::invalid_argument("func plan: init past its arena");
    FillInit(in, round_bf16, a[in.arena].data() + in.offset);  // in place: no temporary per init
  }
  return a;
}

std::vector<Matrix> GatherOutputs(const FuncPlan& plan, const std::vector<std::vector<float>>& arenas) {
  std::vector<Matrix> outs;
  for (const FuncPlanOutput& fo : plan.outputs) {
    Matrix m{fo.rows, fo.cols, std::vector<float>(uint64_t{fo.rows} * fo.cols, 0.f)};
    for (const auto& part : fo.parts) {
      const FuncView& v = part.view;
      for (uint32_t i = 0; i < v.rows; ++i)
        for (uint32_t j = 0; j < v.cols; ++j)
          m.at(part.r0 + i, part.c0 + j) = arenas[v.arena][v.offset + i * v.ld + j * v.cs];
    }
    outs.push_back(std::move(m));
  }
  return outs;
}

std::vector<float> ReadView(const std::vector<float>& arena, const FuncView& v, uint32_t batch,
                            uint64_t stride) {
  std::vector<float> out;
  out.reserve(v.Elements() * batch);
  for (uint32_t b = 0; b < batch; ++b)
    for (uint32_t i = 0; i < v.rows; ++i)
      for (uint32_t j = 0; j < v.cols; ++j) out.push_back(arena[v.offset + b * stride + i * v.ld + j * v.cs]);
  return out;
}

}  // namespace tpsim::mapping
