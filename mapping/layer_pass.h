#pragma once
// The layer pass: walks llm's op graph of one decoder layer (llm::BuildLayer) and dispatches
// each op on its role. Weight GEMMs go to the GemmEmitter (a run of GEMMs reading the same
// input is one group: q/k/v, gate/up; fused into one GEMM where the emitter allows), the
// attention ops (kv_write, attn_qk, softmax, attn_pv) to the AttentionEmitter, layout
// changes to the LayoutConverter; norms and element-wise ops follow the layout their input
// arrives in. The layouts ops are lowered into come from the graph's edges: a norm's output
// goes to the layout its consuming GEMM wants, a residual's to the next norm's. A role the
// pass has no rule for is refused with its name. The MoE block (router, experts,
// shared_experts) goes to the MoePass; the norm before it leaves its rows split over the ranks.
//
// Graph conventions the pass relies on (llm/opgraph.h): the layer's input feeds the ops
// without inputs (attn_norm) and is the residual operand of an add with one input
// (attn_residual); rope has two outputs (q then k); the last op is the layer's output.

#include <cstdint>

#include <array>
#include <functional>
#include <span>
#include <vector>

#include "llm/opgraph.h"
#include "mapping/gemm_emitter.h"
#include "mapping/lower_context.h"
#include "mapping/moe_pass.h"

namespace tpsim::mapping {

class AttentionEmitter;
class LayoutConverter;

class LayerPass {
 public:
  LayerPass(LowerContext& cx, LayoutConverter& conv, GemmEmitter& gemm, AttentionEmitter& attn);
  // Lowers layer `layer` on input x (cx.t rows); the output is left in a layout that
  // satisfies `next_want` cheaply (the next layer's QKV input, or replicated). Returns it.
  int32_t Layer(uint32_t layer, int32_t x, const Layout& next_want);
  // The same with attention replicas (mapping.attention_dp = D > 1): xs[k] is replica k's
  // input (t / D rows over its tp ranks). Each op is lowered for every replica in turn (in
  // shared op rows), use(k) switching the context to replica k; the MoE block runs once over
  // the whole stage (use(-1)). Returns the replicas' outputs.
  std::vector<int32_t> Layers(uint32_t layer, const std::vector<int32_t>& xs, const Layout& next_want,
                              const std::function<void(int)>& use);
  // The layout the layer's first GEMM wants its input in.
  Layout WantedInput() const;

 private:
  // One walk over a layer's graph: the tensors each op produced (rope: q and k).
  struct Walk {
    const llm::LayerGraph& g;
    uint32_t layer;
    int32_t x;  // the layer's input
    const Layout& next_want;
    std::vector<std::array<int32_t, 2>> out;
  };
  // Lowers op i (and the ops it groups with); returns the index of the next op to lower.
  size_t Dispatch(Walk& w, size_t i);
  size_t GemmGroup(Walk& w, size_t i);
  size_t Attention(Walk& w, size_t i);
  size_t Moe(Walk& w, size_t i);
  // The MoE block of replica walks w (each input made rows of its replica), over the stage.
  size_t MoeReplicas(std::vector<Walk>& w, size_t i, const std::function<void(int)>& use);
  // The ops from router on that form the MoE block: [i, end).
  size_t MoeEnd(const Walk& w, size_t i) const;
  // Input j of op i (the layer's input where the op has none).
  int32_t In(const Walk& w, size_t i, size_t j) const;
  // The ops that read op i's output, in graph order.
  std::vector<size_t> Consumers(const llm::LayerGraph& g, size_t i) const;
  // The layout op i's output should be left in: what its consuming GEMM group wants (a norm),
  // what the next norm's GEMM wants (a residual), or `next_want` (the layer's last op).
  Layout WantAfter(const Walk& w, size_t i) const;
  const llm::LayerGraph& Graph(uint32_t layer) const;

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
  MoePass moe_;
  // The layer's graph: dense, and (an MoE model) sparse. The structure and the weight shapes
  // do not depend on the phase, so one graph serves prefill, decode and mixed iterations.
  llm::LayerGraph dense_, sparse_;
};

}  // namespace tpsim::mapping
