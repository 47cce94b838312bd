#pragma once
// Data semantics of a Program, read only by the functional executors (mapping/functional.h,
// validate/func_plan.h); the timing engines ignore them. Lowering builds them only when
// asked (LowerOptions::functional); otherwise FuncData is empty.
//
// Every logical tensor is a row-major [rows, cols] float matrix; each core keeps its own
// copy of activations, caches and collective buffers (weights are shared, read-only).
// Batch B (FuncData::batch) > 1: B independent sequences of equal length. An activation's
// rows are sequence-major (sequence s owns rows [s*T/B, (s+1)*T/B) of its T rows; decode: one
// row per sequence); a KV cache is [B * lmax, kv_cols], sequence s owning rows
// [s*lmax, (s+1)*lmax). Row-wise ops (GEMMs, norms, element-wise) need nothing more;
// attention, RoPE and the KV write keep each sequence to its own rows (see FuncKind).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mapping/program_types.h"

namespace tpsim::mapping {

enum class FuncTensorKind : uint8_t {
  kActivation,  // zero-initialised per core
  kWeight,      // deterministic random from `seed`, identical everywhere
  kInput,       // a phase's layer-0 input, random from `seed`, on every core
  kCache,       // KV cache: rows [0, init_rows) random from `seed` on every core; batch B > 1:
                //   rows [0, init_rows) of sequence s's block of rows / B rows, random from
                //   FuncSequenceSeed(seed, s) (mapping/functional.h), counted from the block
  kBuffer,      // a collective's per-core buffer
  kConst,       // fixed values FuncData::consts[seed] (row-major [rows, cols]) on every core that
                //   reads it: the MoE routing's gate bias (mapping/moe_pass.h)
};
struct FuncTensor {
  FuncTensorKind kind = FuncTensorKind::kActivation;
  uint32_t rows = 0, cols = 0;
  uint64_t seed = 0;
  uint32_t init_rows = 0;
  // An attention replica's tensor (mapping.attention_dp): it holds sequences [seq0, seq0 + seqs)
  // of the batch (seqs 0: all FuncData::batch, seq0 0). kInput: its values are the whole
  // input's rows of those sequences; kCache: sequence q's block is seeded as sequence seq0 + q;
  // attention reading it splits rows into seqs sequences.
  uint32_t seq0 = 0, seqs = 0;
};
// Rows [r0, r1) x columns [c0, c1) of a tensor.
struct FuncSlice {
  int32_t tensor = -1;
  uint32_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
};
// The FuncOp fields each kind reads besides a, b and out (T: tokens_per_sequence):
enum class FuncKind : uint8_t {
  kMatmul,    // out (+)= a . b   (b^T when transpose_b)
  kRmsNorm,   // out = rmsnorm(a) over each row of the slice (the slice spans whole rows)
  kHeadNorm,  // out = rmsnorm(a) per group of head_dim columns
  kRope,      // out = rope(a), groups of head_dim columns, position = position_offset + row
              //   (T > 0: position_offset + row % T)
  kCopy,      // out = a (T > 0: a's rows in blocks of T, one per sequence; out is block 0's
              //   destination and block s lands s * block_stride rows further: the batched KV write)
  kScores,    // out[h*t + i, j] = q[i, head h] . kcache[j, head h / kv_group], heads
              //   [head_begin, head_end), j < ltot = b.r1; batch B > 1: kcache rows of query row
              //   i's sequence (i / (q.rows / B)), i.e. kcache[(i / (q.rows / B)) * (kcache.rows / B) + j]
  kSoftmax,   // rows of a (scores) scaled by 1/sqrt(head_dim), causal: row r sees
              //   j <= position_offset + r % T (a chunk's tokens in mixed-iteration mode)
  kPv,        // out[i, head h] = sum_j a[h*t + i, j] * vcache[j, head h / kv_group], heads
              //   [head_begin, head_end); batch B > 1: vcache rows of row i's sequence, as for kScores
  kAdd,       // out = a + b
  kSiluMul,   // out = silu(a) * b
};
struct FuncOp {
  FuncKind kind = FuncKind::kCopy;
  int core = 0;
  FuncSlice a, b, out;
  bool transpose_b = false, accumulate = false;
  uint32_t head_dim = 0;                  // kHeadNorm, kRope, kScores, kSoftmax, kPv
  uint32_t position_offset = 0;           // kRope, kSoftmax: the position of token 0 (cached tokens)
  uint32_t tokens_per_sequence = 0;       // kRope, kSoftmax, kCopy (0 for kRope / kCopy: one sequence)
  uint32_t kv_group = 0;                  // kScores, kPv: query heads per KV head
  uint32_t head_begin = 0, head_end = 0;  // kScores, kPv: the query heads [begin, end)
  uint32_t block_stride = 0;              // kCopy: rows between the destinations of two blocks
  // The next op of the same task (-1: none; else a larger index): one task may stand for several
  // ops, e.g. an MoE rank's fused gate+up GEMM is one matmul per expert and projection, and its
  // weighted sum one accumulating matmul per (token, expert) (mapping/moe_pass.h).
  int32_t next = -1;
};
// Copy between a tensor region and a collective buffer (row-major region at element
// `offset`, or the region transposed when `transpose`).
struct FuncCopy {
  int core = 0;
  FuncSlice region;
  uint64_t offset = 0;
  bool transpose = false;
};
// Per collective: pack before its first transfer, unpack after its last.
struct FuncCollective {
  int32_t buffer = -1;  // tensor id ([1, elements] or [rows, cols])
  int64_t first_task = -1, last_task = -1;
  std::vector<FuncCopy> pack, unpack;
};
struct FuncOutput {
  Phase phase = Phase::kPrefill;
  uint32_t step = 0;
  uint32_t rows = 0, cols = 0;
  std::vector<std::pair<int, FuncSlice>> parts;  // (core, region of the output it holds)
  // Where part i's first row lands in the output (attention replicas' tensors hold a share of
  // the rows); empty: at the slice's own rows.
  std::vector<uint32_t> part_row0;
};
struct FuncData {
  uint32_t dtype_bytes = 2;
  uint32_t head_dim = 0;
  uint32_t batch = 1;  // independent sequences (see "Batch B" above)
  std::vector<FuncTensor> tensors;
  std::vector<FuncOp> ops;
  std::vector<FuncCollective> collectives;  // parallel to Program::collectives
  std::vector<FuncOutput> outputs;          // prefill, then each decode step
  std::vector<std::vector<float>> consts;   // the values of kConst tensors (by FuncTensor::seed)
};

}  // namespace tpsim::mapping
