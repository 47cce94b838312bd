#pragma once
// Experiments the decode-step tests run (step_reuse_test.cc, step_streamed_test.cc): a shipped
// one with overrides, and one of `tpsim agree`'s random family.

#include <cstdint>
#include <string>
#include <vector>

#include "configs/load.h"
#include "llm/model.h"
#include "sim/agree/agree.h"
#include "sim/experiment.h"

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

}  // namespace tpsim::sim
