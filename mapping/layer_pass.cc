#include "mapping/layer_pass.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>

#include "mapping/attention.h"
#include "mapping/functional.h"
#include "mapping/gemm_emitter.h"
#include "mapping/layout_convert.h"
#include "mapping/memory_plan.h"

namespace tpsim::mapping {

using llm::OpRole;

namespace {
// A weight's seed for FuncTensor (shared with the functional reference): its GEMM's place in
// the dense layer (q, k, v, o, gate, up, down); a fused GEMM takes its first part's.
int WeightSeed(OpRole role) {
  switch (role) {
    case OpRole::kQProj:
      return 0;
    case OpRole::kKProj:
      return 1;
    case OpRole::kVProj:
      return 2;
    case OpRole::kOProj:
      return 3;
    case OpRole::kGateProj:
      return 4;
    case OpRole::kUpProj:
      return 5;
    case OpRole::kDownProj:
      return 6;
    default:
      throw std::logic_error(std::string("mapping: no weight seed for op role ") + llm::ToString(role));
  }
}
bool IsHeadOp(OpRole role) {
  return role == OpRole::kQNorm || role == OpRole::kKNorm || role == OpRole::kRope;
}
// The fused GEMMs' op names (GemmEmitter::Fused), by their first part.
const std::string kQkvName = "qkv_proj", kGateUpName = "gate_up_proj";
}  // namespace

LayerPass::LayerPass(LowerContext& cx, LayoutConverter& conv, GemmEmitter& gemm, AttentionEmitter& attn)
    : cx_(cx), conv_(conv), gemm_(gemm), attn_(attn), moe_(cx, conv) {
  config::Model dense = cx.model;
  dense.set_num_experts(0);
  dense_ = llm::BuildLayer(dense, llm::Phase{});
  if (cx.model.num_experts() > 0) {
    config::Model every_layer_sparse = cx.model;
    every_layer_sparse.clear_mlp_only_layers();
    every_layer_sparse.set_decoder_sparse_step(1);
    sparse_ = llm::BuildLayer(every_layer_sparse, llm::Phase{});
  }
}

const llm::LayerGraph& LayerPass::Graph(uint32_t layer) const {
  return llm::IsMoeLayer(cx_.model, layer) ? sparse_ : dense_;
}

void LayerPass::Convert(int32_t t, const Layout& want, OpRole role) {
  conv_.Convert(t, want, cx_.names[role]);
}

Layout LayerPass::WantedInput() const {
  const Layout want = Layout::Replicated();
  const Walk w{dense_, 0, -1, want, {}};
  return WantAfter(w, 0);
}

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
    const uint64_t b = cx_.batch;  // the current attention replica's sequences
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
    std::vector<TaskId> deps = cx_.Ready(a, r);
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

int32_t LayerPass::In(const Walk& w, size_t i, size_t j) const {
  const llm::Op& op = w.g.ops[i];
  if (j >= op.inputs.size()) return w.x;
  const int32_t t = w.out[static_cast<size_t>(op.inputs[j])][0];
  if (t < 0) throw std::logic_error(std::string("mapping: ") + op.name + " reads an op not lowered yet");
  return t;
}

std::vector<size_t> LayerPass::Consumers(const llm::LayerGraph& g, size_t i) const {
  std::vector<size_t> c;
  for (size_t j = i + 1; j < g.ops.size(); ++j)
    for (int in : g.ops[j].inputs)
      if (in == static_cast<int>(i)) {
        c.push_back(j);
        break;
      }
  return c;
}

Layout LayerPass::WantAfter(const Walk& w, size_t i) const {
  const std::vector<size_t> cons = Consumers(w.g, i);
  if (cons.empty()) return w.next_want;
  for (size_t c : cons) {
    const llm::Op& op = w.g.ops[c];
    if (IsWeightGemm(op.role)) return gemm_.WantedInput(GemmOf(op, cx_.model));
    if (op.role == OpRole::kRouter) return cx_.p > 1 ? Layout::Rows() : Layout::Replicated();
  }
  for (size_t c : cons)
    if (w.g.ops[c].kind == llm::OpKind::kNorm && !IsHeadOp(w.g.ops[c].role)) return WantAfter(w, c);
  return Layout::Replicated();
}

int32_t LayerPass::Layer(uint32_t layer, int32_t x, const Layout& next_want) {
  cx_.layer = layer;
  const llm::LayerGraph& g = Graph(layer);
  Walk w{g, layer, x, next_want, std::vector<std::array<int32_t, 2>>(g.ops.size(), {-1, -1})};
  for (size_t i = 0; i < g.ops.size();) i = Dispatch(w, i);
  return w.out.back()[0];
}

size_t LayerPass::Dispatch(Walk& w, size_t i) {
  const llm::Op& op = w.g.ops[i];
  const OpRole role = op.role;
  switch (role) {
    case OpRole::kAttnNorm:
    case OpRole::kMlpNorm:
      w.out[i][0] = RowNorm(role, In(w, i, 0), WantAfter(w, i));
      return i + 1;
    case OpRole::kQNorm:
    case OpRole::kKNorm: {
      const uint64_t heads = role == OpRole::kQNorm ? cx_.model.num_attention_heads() : cx_.NumKvHeads();
      w.out[i][0] = HeadOp(role, "", FuncKind::kHeadNorm, kNormOps, In(w, i, 0), heads, 0);
      return i + 1;
    }
    case OpRole::kRope: {
      // q then k, each at the positions after the cached tokens.
      const uint32_t pos0 = static_cast<uint32_t>(cx_.cached);
      w.out[i][0] =
          HeadOp(role, ".q", FuncKind::kRope, kRopeOps, In(w, i, 0), cx_.model.num_attention_heads(), pos0);
      w.out[i][1] = HeadOp(role, ".k", FuncKind::kRope, kRopeOps, In(w, i, 1), cx_.NumKvHeads(), pos0);
      return i + 1;
    }
    case OpRole::kKvWrite:
      return Attention(w, i);
    case OpRole::kRouter:
      return Moe(w, i);
    case OpRole::kAttnResidual:
    case OpRole::kMlpResidual: {
      // a + residual: the residual stream is the second input, or the layer's input.
      const int32_t a = In(w, i, 0), res = op.inputs.size() > 1 ? In(w, i, 1) : w.x;
      w.out[i][0] = Add(role, a, res, WantAfter(w, i), w.g.ops[static_cast<size_t>(op.inputs[0])].role);
      return i + 1;
    }
    case OpRole::kSiluMul: {
      const int32_t gate = In(w, i, 0), up = In(w, i, 1);
      const Layout la = cx_.p == 1 ? Layout::Replicated() : cx_.ts[gate].layout;
      const uint64_t cols = w.g.ops[static_cast<size_t>(op.inputs[0])].n;
      w.out[i][0] = Elementwise2(role, la, gate, up, cols, FuncKind::kSiluMul, kSiluMulOps);
      return i + 1;
    }
    default:
      if (IsWeightGemm(role)) return GemmGroup(w, i);
      throw std::invalid_argument(std::string("mapping: op ") + op.name + " (role " + llm::ToString(role) +
                                  ") is not lowered yet");
  }
}

size_t LayerPass::GemmGroup(Walk& w, size_t i) {
  const llm::LayerGraph& g = w.g;
  size_t end = i + 1;
  while (end < g.ops.size() && IsWeightGemm(g.ops[end].role) && g.ops[end].inputs == g.ops[i].inputs) ++end;
  std::vector<LayerGemm> parts;
  for (size_t j = i; j < end; ++j) parts.push_back(GemmOf(g.ops[j], cx_.model));
  const int32_t x = In(w, i, 0);
  auto weight = [&](const LayerGemm& lg) {
    return cx_.NewTensor(FuncTensorKind::kWeight, lg.k, lg.n, FuncSeed(w.layer, WeightSeed(lg.role)));
  };
  std::vector<const LayerGemm*> ptrs;
  for (const LayerGemm& lg : parts) ptrs.push_back(&lg);
  if (const std::optional<LayerGemm> fused = gemm_.Fused(ptrs)) {
    // One GEMM (GPU-node chips): the parts are its column blocks, each rank's in its heads.
    const std::string& name = parts[0].role == OpRole::kQProj ? kQkvName : kGateUpName;
    const int32_t y = gemm_.Gemm(*fused, x, weight(*fused), &name);
    for (size_t j = i; j < end; ++j) w.out[j][0] = Part(y, parts[j - i]);
    cx_.mem->Dead(y);
  } else {
    for (size_t j = i; j < end; ++j) w.out[j][0] = gemm_.Gemm(parts[j - i], x, weight(parts[j - i]));
  }
  cx_.mem->Dead(x);

  // Outputs bound for per-head ops (q, k) leave partial sums and grids for the heads layout.
  const Layout heads = Layout::Cols(static_cast<uint32_t>(cx_.model.head_dim()));
  for (size_t j = i; j < end; ++j) {
    const std::vector<size_t> cons = Consumers(g, j);
    const LayoutKind kind = cx_.ts[w.out[j][0]].layout.kind;
    if (!cons.empty() && IsHeadOp(g.ops[cons[0]].role) &&
        (kind == LayoutKind::kPartial || kind == LayoutKind::kGrid))
      Convert(w.out[j][0], heads, g.ops[j].role);
  }
  // Outputs bound for an element-wise product (gate, up into SiLU*mul) meet in one layout:
  // partial sums resolve toward what the product's consumer GEMM wants.
  std::vector<size_t> eltwise;
  for (size_t j = i; j < end; ++j) {
    const std::vector<size_t> cons = Consumers(g, j);
    if (cons.size() == 1 && g.ops[cons[0]].kind == llm::OpKind::kElementwise) eltwise.push_back(j);
  }
  if (eltwise.size() > 1) {
    const Layout want_next = WantAfter(w, Consumers(g, eltwise[0])[0]);
    for (size_t j : eltwise)
      if (cx_.ts[w.out[j][0]].layout.kind == LayoutKind::kPartial)
        Convert(w.out[j][0],
                want_next.kind == LayoutKind::kCols   ? want_next
                : want_next.kind == LayoutKind::kRows ? Layout::Rows()
                                                      : Layout::Replicated(),
                g.ops[j].role);
    bool same = true;
    for (size_t j : eltwise) same = same && cx_.ts[w.out[j][0]].layout == cx_.ts[w.out[eltwise[0]][0]].layout;
    if (!same)
      for (size_t j : eltwise) Convert(w.out[j][0], Layout::Replicated(), g.ops[j].role);
  }
  return end;
}

size_t LayerPass::Attention(Walk& w, size_t i) {
  // kv_write, attn_qk, softmax, attn_pv: one AttentionEmitter call.
  static constexpr OpRole kOrder[] = {OpRole::kKvWrite, OpRole::kAttnQk, OpRole::kSoftmax, OpRole::kAttnPv};
  for (size_t j = 0; j < std::size(kOrder); ++j)
    if (i + j >= w.g.ops.size() || w.g.ops[i + j].role != kOrder[j])
      throw std::logic_error(
          "mapping: the attention ops of the layer graph are not kv_write, attn_qk, "
          "softmax, attn_pv in order");
  // kv_write reads rope (q and k) and v.
  const llm::Op& kvw = w.g.ops[i];
  if (kvw.inputs.size() != 2 || w.g.ops[static_cast<size_t>(kvw.inputs[0])].role != OpRole::kRope)
    throw std::logic_error("mapping: kv_write does not read rope and v");
  int32_t q = w.out[static_cast<size_t>(kvw.inputs[0])][0], k = w.out[static_cast<size_t>(kvw.inputs[0])][1];
  int32_t v = In(w, i, 1);
  // The conversions are named after the projections that made q, k and v.
  const Layout heads = Layout::Cols(static_cast<uint32_t>(cx_.model.head_dim()));
  Convert(q, heads, OpRole::kQProj);
  Convert(k, heads, OpRole::kKProj);
  Convert(v, heads, OpRole::kVProj);
  const int32_t attn = attn_.Emit(w.layer, q, k, v);
  w.out[i + 3][0] = attn;
  return i + std::size(kOrder);
}

size_t LayerPass::MoeEnd(const Walk& w, size_t i) const {
  // router, experts (reading the norm and the router), shared_experts (the norm and experts):
  // one MoePass block; each op's output is the block's.
  size_t end = i + 1;
  while (end < w.g.ops.size() &&
         (w.g.ops[end].role == OpRole::kExperts || w.g.ops[end].role == OpRole::kSharedExperts))
    ++end;
  if (end == i + 1) throw std::logic_error("mapping: the layer graph's router has no experts after it");
  return end;
}

size_t LayerPass::Moe(Walk& w, size_t i) {
  const size_t end = MoeEnd(w, i);
  const int32_t y = moe_.Block(w.layer, {In(w, i, 0)})[0];
  for (size_t j = i; j < end; ++j) w.out[j][0] = y;
  return end;
}

size_t LayerPass::MoeReplicas(std::vector<Walk>& w, size_t i, const std::function<void(int)>& use) {
  const size_t end = MoeEnd(w[0], i);
  std::vector<int32_t> in(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    use(static_cast<int>(k));
    cx_.ShareOps(k == 0 ? LowerContext::OpShare::kRecord : LowerContext::OpShare::kReplay);
    in[k] = In(w[k], i, 0);
    if (cx_.p > 1 && !cx_.Satisfies(in[k], Layout::Rows())) Convert(in[k], Layout::Rows(), OpRole::kRouter);
    for (int r = 0; r < cx_.p; ++r) cx_.mem->Reload(in[k], r, nullptr);  // the block reads it from SRAM
  }
  cx_.ShareOps(LowerContext::OpShare::kOff);
  use(-1);
  const std::vector<int32_t> ys = moe_.Block(w[0].layer, in);
  for (size_t k = 0; k < w.size(); ++k)
    for (size_t j = i; j < end; ++j) w[k].out[j][0] = ys[k];
  return end;
}

std::vector<int32_t> LayerPass::Layers(uint32_t layer, const std::vector<int32_t>& xs,
                                       const Layout& next_want, const std::function<void(int)>& use) {
  cx_.layer = layer;
  const llm::LayerGraph& g = Graph(layer);
  std::vector<Walk> w;
  for (int32_t x : xs)
    w.push_back(Walk{g, layer, x, next_want, std::vector<std::array<int32_t, 2>>(g.ops.size(), {-1, -1})});
  for (size_t i = 0; i < g.ops.size();) {
    if (g.ops[i].role == OpRole::kRouter) {
      i = MoeReplicas(w, i, use);
      continue;
    }
    size_t next = i;
    for (size_t k = 0; k < w.size(); ++k) {
      use(static_cast<int>(k));
      cx_.ShareOps(k == 0 ? LowerContext::OpShare::kRecord : LowerContext::OpShare::kReplay);
      next = Dispatch(w[k], i);
    }
    cx_.ShareOps(LowerContext::OpShare::kOff);
    i = next;
  }
  std::vector<int32_t> out;
  for (const Walk& wk : w) out.push_back(wk.out.back()[0]);
  return out;
}

}  // namespace tpsim::mapping
