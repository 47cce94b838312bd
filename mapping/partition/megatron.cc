// megatron: n_split for QKV and gate/up, k_split for O and down, so each attention block
// and each MLP block ends in one all-reduce.
#include "mapping/partition/partitioner.h"

namespace tpsim::mapping {
namespace {
class Megatron : public Partitioner {
 public:
  const char* name() const override { return "megatron"; }
  const Partitioner* Choose(const GemmSpec& g, const GemmContext& ctx, std::string* label) const override {
    const Partitioner* p = Pick(g);
    std::string inner;
    p = p->Choose(g, ctx, &inner);
    *label = "megatron(" + inner + ")";
    return p;
  }
  Layout Input(const GemmSpec& g, const GemmContext& ctx) const override { return Pick(g)->Input(g, ctx); }
  Layout Emit(const GemmSpec& g, GemmContext& ctx) const override { return Pick(g)->Emit(g, ctx); }
  uint64_t ShardElems(const GemmSpec& g, int p, RankGrid grid) const override {
    return Pick(g)->ShardElems(g, p, grid);
  }

 private:
  static const Partitioner* Pick(const GemmSpec& g) {
    bool column = g.cls == llm::OpClass::kQkv || g.cls == llm::OpClass::kGateUp;
    return column ? &NSplitPartitioner() : &KSplitPartitioner();
  }
};

const Megatron kPartitioner;
const PartitionerRegistrar kRegistered(
    "megatron", "n_split for QKV and gate/up, k_split for O and down: one all-reduce per block",
    &kPartitioner);
}  // namespace
}  // namespace tpsim::mapping
