#pragma once
// Attention of one layer, split by heads (GQA-aware: rank r takes the query heads of its
// column block and reads the KV heads they use): the KV write of the new tokens' K and V,
// then per span of rows QK^T (attn_qk), softmax and PV (attn_pv). One span covers the whole
// batch (Lower: B sequences of t / B tokens after `cached`); in a mixed iteration
// (LowerIteration) each chunk is a span of its own tokens attending to its own context.

#include <cstdint>

#include "mapping/lower_context.h"

namespace tpsim::mapping {

class AttentionEmitter {
 public:
  explicit AttentionEmitter(LowerContext& cx) : cx_(cx) {}
  // q, k, v: [t, heads * head_dim] in the heads layout; writes k, v into layer's caches and
  // returns attn [t, nq * head_dim] (heads layout).
  int32_t Emit(uint32_t layer, int32_t q, int32_t k, int32_t v);

 private:
  // Rows [row0, row0 + seqs * s) of q: `seqs` sequences of s new tokens after `cached`,
  // each attending to ctx = cached + s rows of its cache.
  struct Span {
    uint64_t row0, s, seqs, cached, ctx;
  };
  void KvWrite(int32_t k, int32_t v, int32_t kc, int32_t vc);
  void Attend(const Span& sp, int32_t q, int32_t kc, int32_t vc, int32_t attn);
  // One attention task (scores or PV, of AttentionSpanShapes) on rank r; when the KV cache is
  // in DRAM it first reads the `kv_bytes` of K or V it needs.
  void AttnTask(int r, int32_t cache, const ComputeShape& sh, FuncOp f, std::vector<TaskId> deps,
                uint64_t kv_bytes);

  LowerContext& cx_;
};

}  // namespace tpsim::mapping
