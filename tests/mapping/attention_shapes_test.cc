// The attention shapes lowering emits are the ones AttentionSpanShapes states (the serving
// skeletons time chunks with that function instead of lowering them).
#include <gtest/gtest.h>

#include <string>

#include "mapping/cost.h"
#include "mapping/mapping.h"
#include "tests/mapping/mapping_test_util.h"

namespace tpsim::mapping {
namespace {

using testing::Map;
using testing::MeshChip;
using testing::SmallModel;
using testing::Work;

void ExpectShape(const ComputeShape& got, const ComputeShape& want) {
  EXPECT_EQ(got.op_kind, want.op_kind);
  EXPECT_EQ(got.batch, want.batch);
  EXPECT_EQ(got.m, want.m);
  EXPECT_EQ(got.n, want.n);
  EXPECT_EQ(got.k, want.k);
  EXPECT_EQ(got.flops, want.flops);
  EXPECT_EQ(got.vector_ops, want.vector_ops);
  EXPECT_EQ(got.bytes, want.bytes);
}

// By hand: 2 query heads, 8 tokens attending to 8 rows, head_dim 16, bf16.
//   scores  2 x [8, 16] . [16, 8]: flops 2*2*8*8*16 = 4096, bytes 2*(8*16 + 8*16 + 8*8)*2 = 1280
//   softmax 2*8*8 = 128 elements: 5 ops each = 640, bytes 2*128*2 = 512 (read + write)
//   pv      2 x [8, 8] . [8, 16]: flops 4096, bytes 2*(8*8 + 16*8 + 8*16)*2 = 1280
TEST(AttentionShapes, HandComputed) {
  const AttentionShapes s = AttentionSpanShapes(2, 8, 8, 16, 2);
  ExpectShape(s.scores, {.op_kind = llm::OpKind::kBatchedGemm,
                         .batch = 2,
                         .m = 8,
                         .n = 8,
                         .k = 16,
                         .flops = 4096,
                         .bytes = 1280});
  ExpectShape(s.softmax,
              {.op_kind = llm::OpKind::kSoftmax, .m = 16, .n = 8, .vector_ops = 640, .bytes = 512});
  ExpectShape(s.pv, {.op_kind = llm::OpKind::kBatchedGemm,
                     .batch = 2,
                     .m = 8,
                     .n = 16,
                     .k = 8,
                     .flops = 4096,
                     .bytes = 1280});
}

// GQA: 4 query heads over 2 KV heads (group 2), decode, stacked 2 per GEMM, by hand:
//   scores  2 x [2, 16] . [16, 8]: flops 2*2*2*8*16 = 1024, bytes 2*(2*16 + 8*16 + 2*8)*2 = 704
//           (per head it would be 4 x [1, 16] . [16, 8]: 4*(16 + 128 + 8)*2 = 1216 bytes, K read
//           once per query head)
//   softmax 4*1*8 = 32 elements: 160 ops, bytes 2*32*2 = 128 (the same stacked or not)
//   pv      2 x [2, 8] . [8, 16]: flops 1024, bytes 2*(2*8 + 16*8 + 2*16)*2 = 704
TEST(AttentionShapes, StackedHandComputed) {
  const AttentionShapes s = AttentionSpanShapes(4, 1, 8, 16, 2, 2);
  ExpectShape(s.scores, {.op_kind = llm::OpKind::kBatchedGemm,
                         .batch = 2,
                         .m = 2,
                         .n = 8,
                         .k = 16,
                         .flops = 1024,
                         .bytes = 704});
  ExpectShape(s.softmax, {.op_kind = llm::OpKind::kSoftmax, .m = 4, .n = 8, .vector_ops = 160, .bytes = 128});
  ExpectShape(s.pv, {.op_kind = llm::OpKind::kBatchedGemm,
                     .batch = 2,
                     .m = 2,
                     .n = 16,
                     .k = 8,
                     .flops = 1024,
                     .bytes = 704});
  EXPECT_EQ(AttentionSpanShapes(4, 1, 8, 16, 2, 2).scores.bytes, 704u);
  EXPECT_EQ(AttentionSpanShapes(4, 1, 8, 16, 2, 1).scores.bytes, 1216u);
}

// The stack: the largest run length that splits [h0, h1) into runs sharing one KV head.
TEST(AttentionShapes, StackedHeads) {
  EXPECT_EQ(StackedHeads(0, 4, 2), 2u);    // two KV heads' pairs
  EXPECT_EQ(StackedHeads(0, 2, 4), 2u);    // half of KV head 0's group
  EXPECT_EQ(StackedHeads(12, 14, 4), 2u);  // heads 12, 13: KV head 3
  EXPECT_EQ(StackedHeads(3, 5, 4), 1u);    // heads 3 and 4 use KV heads 0 and 1
  EXPECT_EQ(StackedHeads(0, 3, 7), 1u);    // 3 heads do not split into runs of 7
  EXPECT_EQ(StackedHeads(8, 16, 8), 8u);   // one whole group
  EXPECT_EQ(StackedHeads(0, 4, 1), 1u);    // no GQA
}

// Every attention task of a lowered Program (the small model: 4 query heads over 2 KV heads;
// prefill 8 tokens, then a decode step attending to 9 rows) has the stated shape: at TP 2 a
// rank's 2 query heads share one KV head and are stacked; at TP 4 a rank has one head. With
// functional data the shapes stay one GEMM per query head.
TEST(AttentionShapes, LoweringEmitsThem) {
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  for (const bool functional : {false, true}) {
    for (const int tp : {2, 4}) {
      for (uint32_t batch : {1u, 2u}) {
        config::Workload wl = Work(8, 1, 1);
        wl.set_batch(batch);
        const Program p = Lower(chip, SmallModel(), wl, Map(tp, "megatron"), {.functional = functional});
        const uint64_t heads = 4 / tp, stack = functional ? 1 : heads;
        size_t seen = 0;
        for (size_t i = 0; i < p.num_tasks(); ++i) {
          if (p.kind(i) != TaskKind::kCompute) continue;
          const Task t = p.task(i);
          const std::string& op = p.ops[t.op].ref.op;
          if (op != "attn_qk" && op != "softmax" && op != "attn_pv") continue;
          const bool decode = p.ops[t.op].ref.phase == Phase::kDecode;
          const AttentionShapes want =
              AttentionSpanShapes(heads * batch, decode ? 1 : 8, decode ? 9 : 8, 16, 2, stack);
          SCOPED_TRACE(op + (decode ? " decode" : " prefill") + " batch " + std::to_string(batch) + " tp " +
                       std::to_string(tp) + (functional ? " functional" : ""));
          ExpectShape(p.shape(i), op == "attn_qk" ? want.scores : op == "softmax" ? want.softmax : want.pv);
          ++seen;
        }
        EXPECT_EQ(seen, 2u * 3 * tp);  // 2 phases x 3 ops x tp ranks
      }
    }
  }
}

// On a systolic core the stack is timed once per KV head (TP 2: a rank's 2 query heads share
// KV head r). Decode step scores, by hand on MeshChip's one 4 x 4 array at 1 GHz (no SRAM
// bandwidth limit): [2, 16] . [16, 9] is ceil(2/4) x ceil(9/4) = 3 tiles of 16 + 4 + 4 = 24
// cycles: 72 ns; one GEMM per query head would be 2 x 3 tiles, 144 ns.
TEST(AttentionShapes, StackedDecodeOnASystolicCore) {
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  const Program p = Lower(chip, SmallModel(), Work(8, 1, 1), Map(2, "megatron"));
  size_t seen = 0;
  for (size_t i = 0; i < p.num_tasks(); ++i) {
    if (p.kind(i) != TaskKind::kCompute) continue;
    const Task t = p.task(i);
    if (p.ops[t.op].ref.op != "attn_qk" || p.ops[t.op].ref.phase != Phase::kDecode) continue;
    EXPECT_EQ(ComputeTime(chip, p.shape(i)), 72000);
    ++seen;
  }
  EXPECT_EQ(seen, 2u);  // 1 layer x 2 ranks
}

}  // namespace
}  // namespace tpsim::mapping
