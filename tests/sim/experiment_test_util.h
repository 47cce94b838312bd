#pragma once
// Experiments the decode-step tests run (step_reuse_test.cc, step_streamed_test.cc): a shipped
// one with overrides, and one of `tpsim agree`'s random family.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "configs/load.h"
#include "llm/model.h"
#include "sim/agree/agree.h"
#include "sim/experiment.h"
#include "sim/run.h"

namespace tpsim::sim {

// configs/experiments/`file` with `sets` and `steps` decode steps.
inline Experiment Load(const std::string& file, uint32_t steps, std::vector<Override> sets = {}) {
  sets.push_back(Override{"workload.decode_steps", std::to_string(steps)});
  return LoadExperiment(std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/" + file, sets);
}

// Experiment i of `tpsim agree --seed seed`'s family with `steps` decode steps.
inline Experiment Agreed(uint32_t seed, uint32_t i, uint32_t steps,
                         agree::Family family = agree::Family::kDense) {
  const agree::Drawn d = agree::RandomExperiment(seed, i, family);
  Experiment e;
  e.path = d.cfg.name();
  e.cfg = d.cfg;
  *e.cfg.mutable_model() =
      llm::ImportHuggingFace(llm::CatalogPath(d.cfg.model_name(), config::Location{}, "model_name"));
  e.cfg.mutable_workload()->set_decode_steps(steps);
  return e;
}

// A small model on the reference chip (hidden 256, one KV head of 64, 2 layers on 2 stages, TP
// 1, weights in SRAM): its KV cache of 32,768 + 256 tokens stays in SRAM, so every decode step
// is the same tasks and each is timed alone (sim/step_reuse.h).
inline Experiment Small(uint32_t steps) {
  return LoadExperiment(std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/reference-qwen3-4b.textproto",
                        {{"mapping.tp", "1"},
                         {"mapping.weights", "sram"},
                         {"model.hidden_size", "256"},
                         {"model.intermediate_size", "512"},
                         {"model.num_attention_heads", "4"},
                         {"model.num_key_value_heads", "1"},
                         {"model.head_dim", "64"},
                         {"workload.num_layers", "2"},
                         {"mapping.pipeline_stages", "2"},
                         {"workload.decode_steps", std::to_string(steps)}},
                        "qwen3-0.6b");
}

// The reference experiment's variants the decode-step tests run: each partitioner family, a
// bidirectional ring, snake placement, batch 3, TP 16 x 4 stages and a cached prefix.
inline std::vector<std::vector<Override>> ReferenceVariants() {
  return {
      {{"mapping.partition", "n_split"}},
      {{"mapping.partition", "megatron"}, {"mapping.collective", "bidirectional_ring"}},
      {{"mapping.partition", "mn_2d"}, {"mapping.placement", "snake"}},
      {{"mapping.partition", "m_split_rotate"}},
      {{"workload.batch", "3"}},
      {{"mapping.tp", "16"}, {"mapping.pipeline_stages", "4"}},
      {{"workload.cached_prefix", "512"}},
  };
}

// The steps a trace samples (RunOptions::observe_steps `steps`) of `e` run with `opts` and reuse
// forced, against every step lowered: the observers see the same Program and times.
inline void ExpectSampledSame(const Experiment& e, RunOptions opts, std::vector<uint32_t> steps) {
  struct Seen {
    size_t tasks = 0;
    std::vector<TaskTime> times;
    Ps makespan = 0;
  };
  auto observe = [&](RunOptions::Reuse reuse, Seen* seen) {
    RunOptions o = opts;
    o.reuse = reuse;
    o.observe_steps = steps;
    o.observers.push_back([seen](const RunView& v) {
      seen->tasks = v.program.num_tasks();
      seen->times = v.timing.tasks;
      seen->makespan = v.timing.makespan_ps;
    });
    return RunExperiment(e, o);
  };
  Seen a, b;
  const RunOutput r = observe(RunOptions::Reuse::kForce, &a);
  EXPECT_TRUE(r.reused) << r.reuse;
  observe(RunOptions::Reuse::kOff, &b);
  ASSERT_GT(a.tasks, 0u);
  EXPECT_EQ(a.tasks, b.tasks);
  EXPECT_EQ(a.makespan, b.makespan);
  ASSERT_EQ(a.times.size(), b.times.size());
  for (size_t i = 0; i < a.times.size(); ++i) {
    ASSERT_EQ(a.times[i].start_ps, b.times[i].start_ps) << i;
    ASSERT_EQ(a.times[i].end_ps, b.times[i].end_ps) << i;
  }
}

}  // namespace tpsim::sim
