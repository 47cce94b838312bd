// The attention shapes lowering emits are the ones AttentionSpanShapes states (the serving
// skeletons time chunks with that function instead of lowering them).
#include <gtest/gtest.h>

#include <string>

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

// Every attention task of a lowered Program (TP 2 of the small model: 2 of its 4 query heads per
// rank; prefill 8 tokens, then a decode step attending to 9 rows) has the stated shape.
TEST(AttentionShapes, LoweringEmitsThem) {
  const arch::Chip chip = arch::Chip::Build(MeshChip(4, 4, uint64_t{1} << 30));
  for (uint32_t batch : {1u, 2u}) {
    config::Workload wl = Work(8, 1, 1);
    wl.set_batch(batch);
    const Program p = Lower(chip, SmallModel(), wl, Map(2, "megatron"));
    size_t seen = 0;
    for (size_t i = 0; i < p.num_tasks(); ++i) {
      if (p.kind(i) != TaskKind::kCompute) continue;
      const Task t = p.task(i);
      const std::string& op = p.ops[t.op].ref.op;
      if (op != "attn_qk" && op != "softmax" && op != "attn_pv") continue;
      const bool decode = p.ops[t.op].ref.phase == Phase::kDecode;
      const AttentionShapes want = AttentionSpanShapes(2 * batch, decode ? 1 : 8, decode ? 9 : 8, 16, 2);
      SCOPED_TRACE(op + (decode ? " decode" : " prefill") + " batch " + std::to_string(batch));
      ExpectShape(p.shape(i), op == "attn_qk" ? want.scores : op == "softmax" ? want.softmax : want.pv);
      ++seen;
    }
    EXPECT_EQ(seen, 2u * 3 * 2);  // 2 phases x 3 ops x 2 ranks
  }
}

}  // namespace
}  // namespace tpsim::mapping
