#pragma once
// The layer pass: one dense decoder layer (norm, QKV, per-head norm, RoPE, KV write and
// attention by heads, O, residual, norm, gate/up, SiLU*mul, down, residual), op names from
// llm's op graph by role (RoleNames). Weight GEMMs go to the GemmEmitter, attention to the
// AttentionEmitter, layout changes to the LayoutConverter; norms and element-wise ops
// follow the layout their input arrives in.

#include <cstdint>

#include <vector>

#include "mapping/gemm_emitter.h"
#include "mapping/lower_context.h"

namespace tpsim::mapping {

class AttentionEmitter;
class LayoutConverter;

class LayerPass {
 public:
  LayerPass(LowerContext& cx, LayoutConverter& conv, GemmEmitter& gemm, AttentionEmitter& attn)
      : cx_(cx), conv_(conv), gemm_(gemm), attn_(attn), gemms_(LayerGemms(cx.model)) {}
  // Lowers layer `layer` on input x (cx.t rows); the output is left in a layout that
  // satisfies `next_want` cheaply (the next layer's QKV input, or replicated). Returns it.
  int32_t Layer(uint32_t layer, int32_t x, const Layout& next_want);
  // The layout the layer's first GEMM wants its input in.
  Layout WantedInput() const;

 private:
  int32_t RowNorm(llm::OpRole role, int32_t x, const Layout& next_want);
  int32_t HeadOp(llm::OpRole role, const char* suffix, FuncKind fk, double ops, int32_t x, uint64_t heads,
                 uint32_t pos0);
  int32_t Add(llm::OpRole role, int32_t a, int32_t res, const Layout& next_want, llm::OpRole producer);
  // The new op `role`: y = a (op) b element-wise over t x cols, a and b already in
  // layout `l`; one vector task per rank on its block. Returns y (layout l).
  int32_t Elementwise2(llm::OpRole role, const Layout& l, int32_t a, int32_t b, uint64_t cols, FuncKind fk,
                       double ops_per_elem);
  void Convert(int32_t t, const Layout& want, llm::OpRole role);
  // The column block of a fused GEMM's output `fused` that GEMM lg alone would have made: a
  // new tensor in lg's n_split layout, ready when the fused GEMM is.
  int32_t Part(int32_t fused, const LayerGemm& lg);

  LowerContext& cx_;
  LayoutConverter& conv_;
  GemmEmitter& gemm_;
  AttentionEmitter& attn_;
  const std::vector<LayerGemm> gemms_;  // q, k, v, o, gate, up, down
};

}  // namespace tpsim::mapping
