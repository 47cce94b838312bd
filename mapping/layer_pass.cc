#include "mapping/layer_pass.h"

#include <algorithm>
#include <optional>
#include <string>

#include "mapping/attention.h"
#include "mapping/functional.h"
#include "mapping/gemm_emitter.h"
#include "mapping/layout_convert.h"
#include "mapping/memory_plan.h"

namespace tpsim::mapping {

using llm::OpRole;

namespace {
// Weight roles, for FuncTensor seeds (shared with the functional reference).
enum WeightRole : int { kWq, kWk, kWv, kWo, kWgate, kWup, kWdown };
// The fused GEMMs' op names (GemmEmitter::Fused).
const std::string kQkvName = "qkv_proj", kGateUpName = "gate_up_proj";
}  // namespace

void LayerPass::Convert(int32_t t, const Layout& want, OpRole role) {
  conv_.Convert(t, want, cx_.names[role]);
}

Layout LayerPass::WantedInput() const { return gemm_.WantedInput(gemms_[0]); }

int32_t LayerPass::RowNorm(llm::OpRole role, int32_t x, const Layout& next_want) {
  Layout l = cx_.ts[x].layout;
  // A row norm needs whole rows. Feeding mn_2d, a grid gathers within grid rows only (ranks
  // of one grid row then compute the same rows), so the residual is grid_rows too; a row
  // split stays (fewer rows per rank: the next GEMM's input gathers within grid rows);
  // any other layout without whole rows becomes replicated.
  if (l.kind == LayoutKind::kGrid && next_want.kind == LayoutKind::kGridRows) {
    Convert(x, next_want, role);
    l = cx_.ts[x].layout;
  }
  if (l.kind != LayoutKind::kReplicated && l.kind != LayoutKind::kRows && l.kind != LayoutKind::kGridRows) {
    Convert(x, Layout::Replicated(), role);
    l = cx_.ts[x].layout;
  }
  if (l.kind == LayoutKind::kReplicated && cx_.p > 1 &&
      (next_want.kind == LayoutKind::kRows || next_want.kind == LayoutKind::kGridRows))
    l = next_want.kind == LayoutKind::kRows ? Layout::Rows() : next_want;
  cx_.NewOp(cx_.names[role], ToString(l));
  uint64_t h = cx_.model.hidden_size();
  int32_t y = cx_.NewTensor(FuncTensorKind::kActivation, cx_.t, h);
  for (int r = 0; r < cx_.p; ++r) {
    Range rows = RowsOf(l, cx_.t, cx_.p, r);
    if (rows.size() == 0) continue;
    cx_.Vector(r, llm::OpKind::kNorm, FuncKind::kRmsNorm, kNormOps, Sl(x, rows, {0, h}), {},
               Sl(y, rows, {0, h}), cx_.Ready(x, r));
  }
  cx_.ts[y].layout = l;
  return y;
}

// Per-head op (qk_norm, rope) on a [t, heads*head_dim] tensor: in its layout when rows or
// heads, else on each rank's heads.
int32_t LayerPass::HeadOp(llm::OpRole role, const char* suffix, FuncKind fk, double ops, int32_t x,
                          uint64_t heads, uint32_t pos0) {
  uint32_t hd = cx_.model.head_dim();
  Layout heads_l = Layout::Cols(hd);
  Layout l = cx_.ts[x].layout;
  if (l.kind != LayoutKind::kRows && !(l == heads_l)) {
    Convert(x, heads_l, role);
    l = cx_.ts[x].layout;
    if (l.kind == LayoutKind::kReplicated) l = heads_l;
  }
  cx_.NewOp(cx_.names[role] + suffix, ToString(l));
  int32_t y = cx_.NewTensor(FuncTensorKind::kActivation, cx_.t, heads * hd);
  for (int r = 0; r < cx_.p; ++r) {
    Range rows = RowsOf(l, cx_.t, cx_.p, r), cols = ColsOf(l, heads * hd, cx_.p, r);
    if (rows.size() == 0 || cols.size() == 0) continue;
    cx_.Vector(r, fk == FuncKind::kRope ? llm::OpKind::kRope : llm::OpKind::kNorm, fk, ops, Sl(x, rows, cols),
               {}, Sl(y, rows, cols), cx_.Ready(x, r), hd, pos0);
    // Batch B > 1: rows are B sequences of cx_.t / B tokens, each starting at position pos0.
    const uint64_t b = std::max<uint32_t>(1, cx_.wl.batch());
    if (cx_.func && fk == FuncKind::kRope && b > 1)
      cx_.prog.func.ops.back().tokens_per_sequence = static_cast<uint32_t>(cx_.t / b);
  }
  cx_.ts[y].layout = cx_.p == 1 ? Layout::Replicated() : l;
  cx_.mem->Dead(x);
  return y;
}

int32_t LayerPass::Add(llm::OpRole role, int32_t a, int32_t res, const Layout& next_want,
                       llm::OpRole producer) {
  conv_.ResolvePartial(a, next_want, cx_.names[producer]);
  Layout la = cx_.ts[a].layout, lr = cx_.ts[res].layout, l;
  if (la == lr || lr.kind == LayoutKind::kReplicated) {
    l = la;
  } else if (la.kind == LayoutKind::kReplicated) {
    l = lr;
  } else if (IsGridKind(la) || IsGridKind(lr)) {
    // mn_2d: add in the narrower layout when the other operand holds all of it (o_proj's
    // grid + a grid_rows residual: no collective); else bring `a` to the residual's.
    if (cx_.Satisfies(res, la)) {
      l = la;
    } else if (cx_.Satisfies(a, lr)) {
      l = lr;
    } else {
      Convert(a, lr, role);
      l = lr;
    }
  } else {
    Convert(a, Layout::Replicated(), role);
    l = lr;
  }
  if (cx_.p == 1) l = Layout::Replicated();
  return Elementwise2(role, l, a, res, cx_.model.hidden_size(), FuncKind::kAdd, kAddOps);
}

int32_t LayerPass::Elementwise2(llm::OpRole role, const Layout& l, int32_t a, int32_t b, uint64_t cols,
                                FuncKind fk, double ops_per_elem) {
  cx_.NewOp(cx_.names[role], ToString(l));
  int32_t y = cx_.NewTensor(FuncTensorKind::kActivation, cx_.t, cols);
  for (int r = 0; r < cx_.p; ++r) {
    Range rr = RowsOf(l, cx_.t, cx_.p, r), cr = ColsOf(l, cols, cx_.p, r);
    if (rr.size() == 0 || cr.size() == 0) continue;
    std::vector<uint32_t> deps = cx_.Ready(a, r);
    Append(&deps, cx_.Ready(b, r));
    cx_.Vector(r, llm::OpKind::kElementwise, fk, ops_per_elem, Sl(a, rr, cr), Sl(b, rr, cr), Sl(y, rr, cr),
               deps);
  }
  cx_.ts[y].layout = l;
  cx_.mem->Dead(a), cx_.mem->Dead(b);  // residual adds and SiLU*mul are their inputs' last readers
  return y;
}

int32_t LayerPass::Part(int32_t fused, const LayerGemm& lg) {
  const int32_t y = cx_.NewTensor(FuncTensorKind::kActivation, cx_.t, lg.n);
  cx_.ts[y].layout = cx_.p == 1 ? Layout::Replicated() : Layout::Cols(lg.n_unit);
  cx_.ts[y].ready = cx_.ts[fused].ready;
  return y;
}

int32_t LayerPass::Layer(uint32_t layer, int32_t x, const Layout& next_want) {
  cx_.layer = layer;
  const uint64_t hd = cx_.model.head_dim(), nq = cx_.model.num_attention_heads();
  const uint64_t nkv = cx_.NumKvHeads();
  const uint64_t inter = cx_.model.intermediate_size();
  const uint32_t hdu = static_cast<uint32_t>(hd);
  const LayerGemm &gq = gemms_[0], &gk = gemms_[1], &gv = gemms_[2], &go = gemms_[3], &gg = gemms_[4],
                  &gu = gemms_[5], &gd = gemms_[6];
  auto weight = [&](int role, const LayerGemm& g) {
    return cx_.NewTensor(FuncTensorKind::kWeight, g.k, g.n, FuncSeed(layer, role));
  };

  // Attention block.
  const Layout want_qkv = gemm_.WantedInput(gq);
  const int32_t xn = RowNorm(OpRole::kAttnNorm, x, want_qkv);
  int32_t q, k, v;
  if (const std::optional<LayerGemm> qkv = gemm_.Fused({&gq, &gk, &gv})) {
    // One GEMM (GPU-node chips): q, k and v are its column blocks, each rank's in its heads.
    const int32_t y = gemm_.Gemm(*qkv, xn, weight(kWq, *qkv), &kQkvName);
    q = Part(y, gq), k = Part(y, gk), v = Part(y, gv);
    cx_.mem->Dead(y);
  } else {
    q = gemm_.Gemm(gq, xn, weight(kWq, gq));
    k = gemm_.Gemm(gk, xn, weight(kWk, gk));
    v = gemm_.Gemm(gv, xn, weight(kWv, gv));
  }
  cx_.mem->Dead(xn);
  const Layout heads = Layout::Cols(hdu);
  for (int32_t* tp : {&q, &k})
    if (cx_.ts[*tp].layout.kind == LayoutKind::kPartial || cx_.ts[*tp].layout.kind == LayoutKind::kGrid)
      Convert(*tp, heads, tp == &q ? OpRole::kQProj : OpRole::kKProj);
  if (cx_.model.qk_norm()) {
    q = HeadOp(OpRole::kQNorm, "", FuncKind::kHeadNorm, kNormOps, q, nq, 0);
    k = HeadOp(OpRole::kKNorm, "", FuncKind::kHeadNorm, kNormOps, k, nkv, 0);
  }
  q = HeadOp(OpRole::kRope, ".q", FuncKind::kRope, kRopeOps, q, nq, static_cast<uint32_t>(cx_.cached));
  k = HeadOp(OpRole::kRope, ".k", FuncKind::kRope, kRopeOps, k, nkv, static_cast<uint32_t>(cx_.cached));
  Convert(q, heads, OpRole::kQProj);
  Convert(k, heads, OpRole::kKProj);
  Convert(v, heads, OpRole::kVProj);
  const int32_t attn = attn_.Emit(layer, q, k, v);

  const Layout want_mlp = gemm_.WantedInput(gg);
  const int32_t o = gemm_.Gemm(go, attn, weight(kWo, go));
  cx_.mem->Dead(attn);
  const int32_t h1 = Add(OpRole::kAttnResidual, o, x, want_mlp, OpRole::kOProj);

  // MLP block.
  const int32_t hn = RowNorm(OpRole::kMlpNorm, h1, want_mlp);
  int32_t gate, up;
  if (const std::optional<LayerGemm> gate_up = gemm_.Fused({&gg, &gu})) {
    const int32_t y = gemm_.Gemm(*gate_up, hn, weight(kWgate, *gate_up), &kGateUpName);
    gate = Part(y, gg), up = Part(y, gu);
    cx_.mem->Dead(y);
  } else {
    gate = gemm_.Gemm(gg, hn, weight(kWgate, gg));
    up = gemm_.Gemm(gu, hn, weight(kWup, gu));
  }
  cx_.mem->Dead(hn);
  const Layout want_down = gemm_.WantedInput(gd);
  for (int32_t t : {gate, up})
    if (cx_.ts[t].layout.kind == LayoutKind::kPartial) {
      const bool cols = want_down.kind == LayoutKind::kCols;
      Convert(t,
              cols                                  ? want_down
              : want_down.kind == LayoutKind::kRows ? Layout::Rows()
                                                    : Layout::Replicated(),
              t == gate ? OpRole::kGateProj : OpRole::kUpProj);
    }
  if (!(cx_.ts[gate].layout == cx_.ts[up].layout)) {
    Convert(gate, Layout::Replicated(), OpRole::kGateProj);
    Convert(up, Layout::Replicated(), OpRole::kUpProj);
  }
  const Layout la = cx_.p == 1 ? Layout::Replicated() : cx_.ts[gate].layout;
  const int32_t act = Elementwise2(OpRole::kSiluMul, la, gate, up, inter, FuncKind::kSiluMul, kSiluMulOps);
  const int32_t down = gemm_.Gemm(gd, act, weight(kWdown, gd));
  cx_.mem->Dead(act);
  return Add(OpRole::kMlpResidual, down, h1, next_want, OpRole::kDownProj);
}

}  // namespace tpsim::mapping
