#pragma once
// The MoE block of a sparse layer (llm's router, experts and shared_experts ops), lowered
// with expert parallelism (mapping.moe). Tokens arrive split by rows over the TP group's P
// ranks (the norm before the block leaves them so). Per layer and phase:
//
//   router            rank r: [rows_r, H] x [H, E] GEMM, softmax over E (+ top-k renorm)
//   routing           tokens per expert (moe_routing.h), each expert's split over the source
//                     ranks in proportion to their rows
//   experts.dispatch  an uneven all_to_all within each replica (LowerAllToAllV; the algorithm
//                     mapping.moe.all_to_all, default direct, on the replica's rank grid):
//                     rank r sends the H-wide rows it routed to expert e to every rank of
//                     e's slot (tp_moe ranks: each needs whole rows for its N split)
//   experts           rank d, for each expert e of its slot that received n_e > 0 rows: its
//                     weight shard read from DRAM when weights stream (only such experts),
//                     gate+up GEMM [n_e, H] x [H, 2 Im / tp_moe], SiLU*mul, down GEMM
//                     [n_e, Im / tp_moe] x [Im / tp_moe, H] (partial sums when tp_moe > 1);
//                     on a GPU-node chip one grouped GEMM per rank for gate+up and one for
//                     down over its active experts (a fused MoE kernel: the total decides)
//   experts.combine   the reverse uneven all_to_all: each rank of a slot sends its (partial)
//                     outputs back to the rows' source rank
//   experts.sum       rank r: the top-k weighted sum (and the tp_moe partials) of its rows
//   shared_experts    rank r: gate+up, SiLU*mul, down on its own rows with whole weights
//                     (replicated on every rank), added to the routed output
//
// The slowest slot decides: combine transfers wait for the last expert GEMM of their
// sender.
//
// Functional data (LowerOptions::functional; the tasks are the same without it): the routing
// counts become tokens by ExpertTokens (moe_routing.h), so rank r's rows for expert e are the
// tokens of its row range that e takes (SplitBySource's count exactly). Each task carries a
// chain of FuncOps (FuncOp::next):
//   router            matmul x_r . Wr -> logits; norm_topk_prob: + a constant gate bias
//                     (0 where the routing sends the token to the expert, kFuncMaskedLogit
//                     elsewhere); softmax over E -> gate weights G
//   dispatch          pack: rank r's rows of each expert of d's slot into the buffer at the
//                     schedule's offset; unpack at d: into the expert's input X_e (rows by source
//                     rank, then token); a rank's own rows are copied by its first expert op
//   experts           per expert of the slot: X_e . Wg_e[:, cols], X_e . Wu_e[:, cols] (cols:
//                     the rank's Im / tp_moe block), SiLU*mul, . Wd_e[cols, :] -> Z_e (partial
//                     sums when tp_moe > 1); a GPU-node rank's grouped tasks chain every expert
//   combine           pack: Z_e's rows of each source into the buffer; no unpack (the sum reads
//                     the buffer where the rows landed)
//   experts.sum       y[i] += G[i, e] . Z_e row of token i, one accumulating 1 x 1 x H matmul per
//                     (token, expert, rank of the slot)
//   shared_experts    x_r . Wsg, x_r . Wsu, SiLU*mul, . Wsd, added to y
// The extra tensors are not announced to the memory plan (the timed tasks already count their
// bytes as transient SRAM).

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "mapping/collective/collective.h"
#include "mapping/lower_context.h"
#include "mapping/moe_routing.h"

namespace tpsim::mapping {

class LayoutConverter;

class MoePass {
 public:
  MoePass(LowerContext& cx, LayoutConverter& conv) : cx_(cx), conv_(conv) {}
  // The block of layer `layer` on xs (the MLP norm's output: one tensor, or with attention
  // replicas (mapping.attention_dp = D) D tensors of t / D rows, xs[a] split by rows over the
  // P / D ranks [a P / D, (a+1) P / D), already so); returns the output in the same tensors'
  // shapes and layouts (split by rows; replicated over a replica of one rank). Tokens are
  // numbered globally (replica a's row i is token a t / D + i) for the routing.
  std::vector<int32_t> Block(uint32_t layer, const std::vector<int32_t>& xs);

 private:
  // Reads the routing settings (and a trace) on first use.
  const Routing& RoutingOf();
  // The uneven all_to_all over each replica of bytes[r][d] (global ranks r and d of the same
  // replica): mapping.moe.all_to_all (auto: the least AllToAllVLinkBytes) on the replica's rank
  // grid (the rows and columns its cores occupy when they fill a rectangle), each replica's
  // schedule in global ranks, and where block r -> d sits in r's and d's buffers.
  struct AllToAllPlan {
    std::string algorithm;
    std::vector<Schedule> scheds;                                 // per replica (global ranks)
    std::vector<std::vector<std::pair<uint64_t, uint64_t>>> off;  // [r][d]: (sender's, receiver's)
    uint64_t buffer_bytes = 0, most = 0;                          // each rank's buffer; largest row
    std::vector<std::vector<uint64_t>> bytes;                     // [r][d]: block r -> d (global ranks)
  };
  AllToAllPlan PlanAllToAllV(const std::vector<std::vector<uint64_t>>& bytes) const;
  // One algorithm's plan: replica rep's local rank k is global rank rep * span + perm[rep][k]
  // on `grid` for hierarchical when perm[rep] is not empty, rank order otherwise.
  AllToAllPlan LowerPlan(const std::string& algorithm, const std::vector<std::vector<uint64_t>>& bytes,
                         const std::vector<std::vector<int>>& perm, RankGrid grid) const;
  // Its transfers: a step's transfer from r waits for deps[r] and what r received in earlier
  // steps. Returns, per rank, the transfers into it. Functional lowering: `fc` (its buffer and
  // copies, at plan.off's offsets) becomes the collective's FuncCollective. On a GPU-node chip
  // without functional data: NCCL kernels instead (NcclAllToAllV).
  std::vector<std::vector<TaskId>> AllToAllV(const std::string& name, const AllToAllPlan& plan,
                                             const std::vector<std::vector<TaskId>>& deps,
                                             FuncCollective* fc = nullptr);
  // The uneven all_to_all on a GPU node as NCCL runs it (a grouped ncclSend/ncclRecv per GPU,
  // as tpsim-validate launches it): one collective kernel per rank that sends or receives
  // across GPUs, after its own deps[r] and those of the peers it exchanges with (a send and its
  // receive need both kernels); timed as NCCL's all_to_all (p2p) of an even send buffer whose
  // off-GPU bytes are the rank's larger of sent and received (arch/gpu/collective.h). Returns,
  // per rank, its kernel (none where it exchanges nothing).
  std::vector<std::vector<TaskId>> NcclAllToAllV(const AllToAllPlan& plan,
                                                 const std::vector<std::vector<TaskId>>& deps);
  // Functional lowering only: a tensor the memory plan does not see.
  int32_t FuncOnly(FuncTensorKind kind, uint64_t rows, uint64_t cols, uint64_t seed = 0);
  // Functional lowering only: the compute task just added stands for `ops` (its FuncOp, a
  // placeholder, becomes ops[0]; the rest are chained after it). Empty `ops`: a copy of zero
  // rows of `none_tensor` (a task with nothing to compute, e.g. a sum whose tokens all dropped).
  void Attach(std::vector<FuncOp> ops, int32_t none_tensor = -1);
  // A compute task on rank r in the current op.
  TaskId Gemm(int r, uint64_t m, uint64_t k, uint64_t n, std::vector<TaskId> deps, FuncSlice a = {});
  TaskId VectorTask(int r, llm::OpKind kind, uint64_t rows, uint64_t cols, double ops, uint64_t bytes,
                    std::vector<TaskId> deps, FuncSlice a = {});
  // A GPU-node chip's experts on rank r: one grouped GEMM for gate+up over the experts
  // [first, first + count) that got rows (as vLLM's fused MoE kernel), SiLU*mul, one for down
  // (HBM weights: no weight reads), after the tasks in *done; appends the last to *done.
  // ops[e] (functional lowering): expert e's gate+up, SiLU*mul and down FuncOps, chained into
  // the three tasks.
  void GroupedExperts(int r, const std::vector<uint64_t>& rows, uint32_t first, uint32_t count, uint64_t im,
                      std::vector<TaskId>* done, const std::vector<std::array<std::vector<FuncOp>, 3>>* ops);
  // The DRAM read of `bytes` of weights on rank r when weights stream (none when resident).
  void WeightRead(int r, uint64_t bytes, std::vector<TaskId>* deps);

  LowerContext& cx_;
  LayoutConverter& conv_;
  bool routing_ready_ = false;
  Routing routing_;
  std::unique_ptr<RoutingTrace> trace_;
};

}  // namespace tpsim::mapping
