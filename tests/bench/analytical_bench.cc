// Layer evaluations per second of the analytical engine on a Program shaped like
// reference-qwen3-4b: 36 Qwen3-4B layers (hidden 2560, 32 heads, 8 KV heads,
// head dim 128, FFN 9728) as 16 pipeline stages x TP=4 on the tests' 8x8 mesh
// (tests/sim/test_mesh.h), each stage on a 2x2 block in ring order, Megatron split
// (QKV / gate-up by columns, O / down by rows, one ring all-reduce after each),
// prefill of `prompt` tokens.
// The Program is built by hand here so the benchmark times the engine only.
//
//   analytical_bench --benchmark_counters_tabular=true
// prints layers/s (layer evaluations per second) per prompt length.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "sim/analytical/analytical.h"
#include "sim/result.h"
#include "tests/mapping/program_test_util.h"
#include "tests/sim/test_mesh.h"

namespace tpsim::sim {
namespace {

using mapping::Program;
using Task = mapping::testing::TestTask;
using mapping::TaskKind;

constexpr int kLayers = 36, kStages = 16, kTp = 4;
constexpr uint64_t kHidden = 2560, kHeads = 32, kKvHeads = 8, kHeadDim = 128, kFfn = 9728;

class Builder {
 public:
  explicit Builder(uint64_t prompt) : s_(prompt) {
    p_.num_cores = 64;
    p_.weights_location = mapping::WeightsLocation::kSram;
    p_.kv_location = mapping::KvLocation::kSram;
    std::vector<int32_t> last(kTp, -1);  // per rank, the last task of the previous layer
    for (int layer = 0; layer < kLayers; ++layer) {
      const int stage = layer * kStages / kLayers;
      const int r0 = 2 * (stage / 4), c0 = 2 * (stage % 4);
      int ring[kTp] = {r0 * 8 + c0, r0 * 8 + c0 + 1, (r0 + 1) * 8 + c0 + 1, (r0 + 1) * 8 + c0};
      if (layer > 0 && stage != (layer - 1) * kStages / kLayers) {
        const uint32_t op = Op(layer, "stage_send");
        for (int r = 0; r < kTp; ++r)
          last[r] = Send(prev_ring_[r], ring[r], s_ * kHidden * 2 / kTp, op, -1, 0, last[r]);
      }
      Vector(layer, "attn_norm", ring, s_ * kHidden, last);
      Gemm(layer, "qkv_proj", ring, 1, s_, (kHeads + 2 * kKvHeads) * kHeadDim / kTp, kHidden, last);
      Vector(layer, "qk_norm", ring, s_ * (kHeads + kKvHeads) * kHeadDim / kTp, last);
      Vector(layer, "rope", ring, s_ * (kHeads + kKvHeads) * kHeadDim / kTp, last);
      Gemm(layer, "qk", ring, kHeads / kTp, s_, s_, kHeadDim, last);
      Vector(layer, "softmax", ring, kHeads / kTp * s_ * s_ * 4, last);
      Gemm(layer, "pv", ring, kHeads / kTp, s_, kHeadDim, s_, last);
      Gemm(layer, "o_proj", ring, 1, s_, kHidden, kHeads * kHeadDim / kTp, last);
      AllReduce(layer, "o_proj.allreduce", ring, s_ * kHidden * 2, last);
      Vector(layer, "residual", ring, s_ * kHidden, last);
      Vector(layer, "mlp_norm", ring, s_ * kHidden, last);
      Gemm(layer, "gate_up_proj", ring, 1, s_, 2 * kFfn / kTp, kHidden, last);
      Vector(layer, "silu_mul", ring, s_ * kFfn / kTp * 2, last);
      Gemm(layer, "down_proj", ring, 1, s_, kHidden, kFfn / kTp, last);
      AllReduce(layer, "down_proj.allreduce", ring, s_ * kHidden * 2, last);
      Vector(layer, "residual2", ring, s_ * kHidden, last);
      for (int r = 0; r < kTp; ++r) prev_ring_[r] = ring[r];
    }
  }
  Program Take() const { return p_.Build(); }

 private:
  uint32_t Op(int layer, const char* name) {
    p_.ops.push_back(mapping::OpInfo{
        mapping::OpRef{mapping::Phase::kPrefill, 0, static_cast<uint32_t>(layer), name, "megatron"}});
    return static_cast<uint32_t>(p_.ops.size() - 1);
  }
  Task& New(TaskKind kind, int core, uint32_t op, int32_t dep) {
    Task& t = p_.tasks.emplace_back();
    t.id = mapping::TaskId(static_cast<uint32_t>(p_.tasks.size() - 1));
    t.kind = kind;
    t.core = mapping::CoreId(core);
    t.op = mapping::OpId(op);
    if (dep >= 0) t.deps.push_back(mapping::TaskId(static_cast<uint32_t>(dep)));
    return t;
  }
  int32_t Send(int src, int dst, uint64_t bytes, uint32_t op, int32_t coll, uint16_t step, int32_t dep) {
    Task& t = New(TaskKind::kTransfer, src, op, dep);
    t.dst_core = mapping::CoreId(dst);
    t.bytes = bytes;
    t.collective = coll;
    t.coll_step = step;
    return static_cast<int32_t>(t.id);
  }
  void Vector(int layer, const char* name, const int* ring, uint64_t elements, std::vector<int32_t>& last) {
    const uint32_t op = Op(layer, name);
    for (int r = 0; r < kTp; ++r) {
      Task& t = New(TaskKind::kCompute, ring[r], op, last[r]);
      t.op_kind = llm::OpKind::kElementwise;
      t.vector_ops = static_cast<double>(elements);
      t.bytes = elements * 4;
      last[r] = static_cast<int32_t>(t.id);
    }
  }
  void Gemm(int layer, const char* name, const int* ring, uint64_t batch, uint64_t m, uint64_t n, uint64_t k,
            std::vector<int32_t>& last) {
    const uint32_t op = Op(layer, name);
    for (int r = 0; r < kTp; ++r) {
      Task& t = New(TaskKind::kCompute, ring[r], op, last[r]);
      t.op_kind = batch > 1 ? llm::OpKind::kBatchedGemm : llm::OpKind::kGemm;
      t.batch = batch;
      t.m = m;
      t.n = n;
      t.k = k;
      t.flops = 2.0 * batch * m * n * k;
      t.bytes = 2 * batch * (m * k + k * n + m * n);
      last[r] = static_cast<int32_t>(t.id);
    }
  }
  void AllReduce(int layer, const char* name, const int* ring, uint64_t bytes, std::vector<int32_t>& last) {
    const uint32_t op = Op(layer, name);
    const auto coll = static_cast<int32_t>(p_.collectives.size());
    p_.collectives.push_back(mapping::CollectiveInfo{
        mapping::CollectiveKind::kAllReduce, mapping::AlgorithmOf("ring"), bytes, kTp, mapping::OpId(op)});
    for (uint16_t step = 0; step < 2 * (kTp - 1); ++step) {
      std::vector<int32_t> next(kTp);
      for (int r = 0; r < kTp; ++r) {
        next[(r + 1) % kTp] = Send(ring[r], ring[(r + 1) % kTp], bytes / kTp, op, coll, step, last[r]);
      }
      last = next;
    }
  }

  uint64_t s_;
  mapping::testing::TestProgram p_;
  int prev_ring_[kTp] = {0, 0, 0, 0};
};

void BM_AnalyticalPrefill(benchmark::State& state) {
  const arch::Chip& chip = test::Mesh();
  const Program program = Builder(static_cast<uint64_t>(state.range(0))).Take();
  AnalyticalEngine engine;
  for (auto _ : state) {
    EngineOutput out = engine.Run(program, chip);
    benchmark::DoNotOptimize(out.makespan_ps);
  }
  state.counters["tasks"] = static_cast<double>(program.num_tasks());
  state.counters["layers/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kLayers, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AnalyticalPrefill)->Arg(256)->Arg(2048)->Unit(benchmark::kMicrosecond);

void BM_AnalyticalPrefillWithResult(benchmark::State& state) {
  const arch::Chip& chip = test::Mesh();
  const Program program = Builder(static_cast<uint64_t>(state.range(0))).Take();
  AnalyticalEngine engine;
  for (auto _ : state) {
    config::Result r = BuildResult(program, chip, engine.Run(program, chip), "bench", "analytical");
    benchmark::DoNotOptimize(r.summary().total_ps());
  }
  state.counters["layers/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kLayers, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AnalyticalPrefillWithResult)->Arg(256)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tpsim::sim

BENCHMARK_MAIN();
