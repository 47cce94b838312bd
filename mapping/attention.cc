#include "mapping/attention.h"

#include <algorithm>
#include <numeric>

#include "chip.pb.h"
#include "mapping/memory_plan.h"

namespace tpsim::mapping {

using llm::OpRole;

int32_t AttentionEmitter::Emit(uint32_t layer, int32_t q, int32_t k, int32_t v) {
  const uint64_t hd = cx_.model.head_dim(), nq = cx_.model.num_attention_heads();
  const int32_t kc = cx_.kcache[layer], vc = cx_.vcache[layer];
  KvWrite(k, v, kc, vc);
  cx_.mem->Dead(k), cx_.mem->Dead(v);                              // now in the caches
  for (int r = 0; r < cx_.p; ++r) cx_.mem->Reload(q, r, nullptr);  // attention reads q from SRAM
  const int32_t attn = cx_.NewTensor(FuncTensorKind::kActivation, cx_.t, nq * hd);
  cx_.ts[attn].layout = cx_.p == 1 ? Layout::Replicated() : Layout::Cols(static_cast<uint32_t>(hd));
  if (cx_.chunks.empty()) {
    const uint64_t b = cx_.batch, s = cx_.t / b;  // the current attention replica's sequences
    Attend({0, s, b, cx_.cached, cx_.cached + s}, q, kc, vc, attn);
  } else {
    uint64_t row0 = 0;
    for (const llm::SeqChunk& ch : cx_.chunks) {
      Attend({row0, ch.new_tokens, 1, ch.cached, uint64_t{ch.cached} + ch.new_tokens}, q, kc, vc, attn);
      row0 += ch.new_tokens;
    }
  }
  cx_.mem->Dead(q);
  return attn;
}

void AttentionEmitter::KvWrite(int32_t k, int32_t v, int32_t kc, int32_t vc) {
  const uint64_t hd = cx_.model.head_dim(), t = cx_.t, cached = cx_.cached;
  const Layout heads = Layout::Cols(static_cast<uint32_t>(hd));
  cx_.NewOp(cx_.names[OpRole::kKvWrite], "heads");
  for (int r = 0; r < cx_.p; ++r) cx_.ts[kc].ready[r].clear(), cx_.ts[vc].ready[r].clear();
  // Batch B > 1 (data semantics only; the task stays one copy of t rows): sequence i's
  // t / B rows land at rows [i * lmax + cached, ...) of the caches.
  const uint64_t bs = cx_.batch;
  for (int r = 0; r < cx_.p; ++r) {
    const Range kv = ColsOf(heads, cx_.NumKvHeads() * hd, cx_.p, r);
    const Range rows{cached, cached + t};
    auto seq_rows = [&](int32_t cache) {
      if (!cx_.func || bs == 1) return;
      FuncOp& f = cx_.prog.func.ops.back();
      f.out = Sl(cache, {cached, cached + t / bs}, kv);
      f.tokens_per_sequence = static_cast<uint32_t>(t / bs), f.block_stride = static_cast<uint32_t>(cx_.lmax);
    };
    cx_.Vector(r, llm::OpKind::kKvWrite, FuncKind::kCopy, kCopyOps, Sl(k, {0, t}, kv), {}, Sl(kc, rows, kv),
               cx_.Ready(k, r));
    seq_rows(kc);
    cx_.Vector(r, llm::OpKind::kKvWrite, FuncKind::kCopy, kCopyOps, Sl(v, {0, t}, kv), {}, Sl(vc, rows, kv),
               cx_.Ready(v, r));
    seq_rows(vc);
    if (!cx_.mem->KvResident()) {
      std::vector<TaskId> deps = cx_.Ready(kc, r);
      Append(&deps, cx_.Ready(vc, r));
      const TaskId w = cx_.Memory(r, 2 * t * kv.size() * cx_.d, true, deps);
      cx_.ts[kc].ready[r].push_back(w), cx_.ts[vc].ready[r].push_back(w);
    }
  }
}

namespace {

// batch x [m, k] . [k, n], reading both operands and writing the result once at d bytes each.
ComputeShape BatchedGemm(uint64_t batch, uint64_t m, uint64_t n, uint64_t k, uint64_t d) {
  return ComputeShape{.op_kind = llm::OpKind::kBatchedGemm,
                      .batch = batch,
                      .m = m,
                      .n = n,
                      .k = k,
                      .flops = 2.0 * batch * m * n * k,
                      .bytes = batch * (m * k + n * k + m * n) * d};
}

}  // namespace

AttentionShapes AttentionSpanShapes(uint64_t batch, uint64_t s, uint64_t ctx, uint64_t hd, uint64_t d,
                                    uint64_t stack) {
  // scores: batch / stack x [stack s, hd] . [hd, ctx]; PV: batch / stack x [stack s, ctx] .
  // [ctx, hd]. Softmax reads the scores and writes the probabilities, batch x s rows of ctx.
  const uint64_t elems = batch * s * ctx, g = std::max<uint64_t>(1, stack);
  return {BatchedGemm(batch / g, g * s, ctx, hd, d),
          ComputeShape{.op_kind = llm::OpKind::kSoftmax,
                       .m = batch * s,
                       .n = ctx,
                       .vector_ops = kSoftmaxOps * static_cast<double>(elems),
                       .bytes = 2 * elems * d},
          BatchedGemm(batch / g, g * s, hd, ctx, d)};
}

uint64_t StackedHeads(uint64_t h0, uint64_t h1, uint64_t group) {
  const uint64_t g = std::gcd(std::gcd(h1 - h0, group), h0);
  return g ? g : 1;
}

void AttentionEmitter::AttnTask(int r, int32_t cache, const ComputeShape& sh, FuncOp f,
                                std::vector<TaskId> deps, uint64_t kv_bytes) {
  const bool kv_dram = !cx_.mem->KvResident();
  if (kv_dram) deps.push_back(cx_.Memory(r, kv_bytes, false, cx_.Ready(cache, r)));
  Task t;
  t.op_kind = sh.op_kind;
  t.batch = sh.batch, t.m = sh.m, t.n = sh.n, t.k = sh.k;
  t.flops = sh.flops;
  t.bytes = sh.bytes;
  const uint64_t transient = t.batch * (t.m * t.k + t.m * t.n) * cx_.d + (kv_dram ? kv_bytes : 0);
  cx_.ts[f.out.tensor].ready[r].push_back(cx_.Compute(r, t, f, std::move(deps), transient));
}

void AttentionEmitter::Attend(const Span& sp, int32_t q, int32_t kc, int32_t vc, int32_t attn) {
  const uint64_t hd = cx_.model.head_dim(), nq = cx_.model.num_attention_heads(), nkv = cx_.NumKvHeads();
  const uint32_t hdu = static_cast<uint32_t>(hd), group = static_cast<uint32_t>(nq / nkv);
  const Layout heads = Layout::Cols(hdu);
  const uint64_t rows = sp.seqs * sp.s, lt = sp.ctx;
  const Range qrows{sp.row0, sp.row0 + rows};
  // Scores and probabilities are the attention tasks' own data (their `transient`), not
  // buffers held between ops.
  const int32_t scores = cx_.NewTensor(FuncTensorKind::kActivation, nq * rows, lt);
  const int32_t probs = cx_.NewTensor(FuncTensorKind::kActivation, nq * rows, lt);
  cx_.mem->Dead(scores), cx_.mem->Dead(probs);
  auto head_range = [&](int r, uint64_t* h0, uint64_t* h1) {
    const Range qh = ColsOf(heads, nq * hd, cx_.p, r);
    *h0 = qh.lo / hd, *h1 = qh.hi / hd;
    return qh;
  };
  // K or V bytes rank r reads: its KV heads' columns of every context row of every sequence.
  auto kv_bytes = [&](int r) { return sp.seqs * lt * ColsOf(heads, nkv * hd, cx_.p, r).size() * cx_.d; };
  // A rank's query heads that share a KV head are stacked into M (GQA), on every chip. With
  // functional data (tpsim-validate's launches, the functional executor) the shape stays one
  // GEMM per query head, as the data are laid out.
  auto shapes = [&](uint64_t h0, uint64_t h1) {
    const uint64_t stack = cx_.func ? 1 : StackedHeads(h0, h1, group);
    return AttentionSpanShapes((h1 - h0) * sp.seqs, sp.s, lt, hd, cx_.d, stack);
  };
  auto heads_op = [&](FuncOp* f, uint64_t h0, uint64_t h1) {
    f->head_dim = hdu, f->kv_group = group, f->head_begin = static_cast<uint32_t>(h0),
    f->head_end = static_cast<uint32_t>(h1);
  };
  cx_.NewOp(cx_.names[OpRole::kAttnQk], "heads");
  for (int r = 0; r < cx_.p; ++r) {
    uint64_t h0, h1;
    const Range qh = head_range(r, &h0, &h1);
    FuncOp f;
    f.kind = FuncKind::kScores;
    f.a = Sl(q, qrows, qh);
    f.b = Sl(kc, {0, lt}, {0, nkv * hd});
    f.out = Sl(scores, {h0 * rows, h1 * rows}, {0, lt});
    heads_op(&f, h0, h1);
    std::vector<TaskId> deps = cx_.Ready(q, r);
    Append(&deps, cx_.Ready(kc, r));
    AttnTask(r, kc, shapes(h0, h1).scores, f, deps, kv_bytes(r));
  }
  cx_.NewOp(cx_.names[OpRole::kSoftmax], "heads");
  for (int r = 0; r < cx_.p; ++r) {
    uint64_t h0, h1;
    head_range(r, &h0, &h1);
    const Range srows{h0 * rows, h1 * rows};
    cx_.Vector(r, llm::OpKind::kSoftmax, FuncKind::kSoftmax, kSoftmaxOps, Sl(scores, srows, {0, lt}), {},
               Sl(probs, srows, {0, lt}), cx_.Ready(scores, r), hdu, static_cast<uint32_t>(sp.cached));
    if (cx_.func) cx_.prog.func.ops.back().tokens_per_sequence = static_cast<uint32_t>(sp.s);
  }
  cx_.NewOp(cx_.names[OpRole::kAttnPv], "heads");
  for (int r = 0; r < cx_.p; ++r) {
    uint64_t h0, h1;
    const Range qh = head_range(r, &h0, &h1);
    FuncOp f;
    f.kind = FuncKind::kPv;
    f.a = Sl(probs, {h0 * rows, h1 * rows}, {0, lt});
    f.b = Sl(vc, {0, lt}, {0, nkv * hd});
    f.out = Sl(attn, qrows, qh);
    heads_op(&f, h0, h1);
    std::vector<TaskId> deps = cx_.Ready(probs, r);
    Append(&deps, cx_.Ready(vc, r));
    AttnTask(r, vc, shapes(h0, h1).pv, f, deps, kv_bytes(r));
  }
}

}  // namespace tpsim::mapping
