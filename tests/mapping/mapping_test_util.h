#pragma once
// Chips and models built in code for the mapping tests.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "arch/chip.h"
#include "chip.pb.h"
#include "mapping.pb.h"
#include "model.pb.h"
#include "workload.pb.h"

namespace tpsim::mapping::testing {

// A file `prefix`_PID.csv in the temp directory holding `text`, removed when the test process
// exits (each test runs in a process of its own: a file per test was left behind). Keep one in a
// function-local static.
class ProcessTempFile {
 public:
  ProcessTempFile(const std::string& prefix, const std::string& text)
      : path_((std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()) + ".csv"))
                  .string()) {
    std::ofstream(path_) << text;
  }
  ~ProcessTempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  ProcessTempFile(const ProcessTempFile&) = delete;
  ProcessTempFile& operator=(const ProcessTempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A rows x cols mesh with a DRAM channel stacked under every core.
inline config::Chip MeshChip(int rows, int cols, uint64_t sram_bytes) {
  config::Chip c;
  c.set_name("test-mesh");
  c.set_clock_mhz(1000);
  auto* core = c.mutable_core();
  core->set_systolic_rows(4);
  core->set_systolic_cols(4);
  core->set_systolic_arrays(1);
  core->set_mac_dtype("bf16");
  core->set_matrix_utilization(1.0);
  core->set_vector_lanes(4);
  core->set_sram_bytes(sram_bytes);
  auto* noc = c.mutable_noc();
  noc->set_topology("mesh");
  noc->set_rows(rows);
  noc->set_cols(cols);
  noc->set_link_bandwidth_gbps(100);
  noc->set_router_latency_cycles(1);
  auto* mem = c.add_memory();
  mem->set_name("dram");
  mem->set_kind("dram");
  mem->set_per_core(true);
  mem->set_bandwidth_gbps(10);
  mem->set_efficiency(1.0);
  mem->set_latency_ns(10);
  mem->set_capacity_bytes(uint64_t{1} << 30);
  return c;
}

// `n` cores behind one switch (a GPU node) with in-switch reduction from
// `min_bytes` and 4 ranks at 480 GB/s; per-core DRAM as MeshChip.
inline config::Chip SwitchChip(int n, uint64_t min_bytes, bool in_switch = true) {
  config::Chip c = MeshChip(1, n, uint64_t{1} << 30);
  c.set_name("test-switch");
  auto* noc = c.mutable_noc();
  noc->Clear();
  noc->set_topology("switch");
  noc->set_nodes(n);
  noc->set_link_bandwidth_gbps(100);
  noc->set_link_latency_ns(1);
  noc->set_switch_latency_ns(1);
  auto* k = c.mutable_collectives();
  k->set_in_switch_reduction(in_switch);
  k->set_in_switch_min_bytes(min_bytes);
  k->set_in_switch_min_ranks(4);
  k->set_in_switch_bandwidth_gbps(480);
  return c;
}

// hidden 64, 4 heads, 2 KV heads, head_dim 16, intermediate 128, qk_norm.
inline config::Model SmallModel() {
  config::Model m;
  m.set_name("small");
  m.set_architecture("qwen3");
  m.set_hidden_size(64);
  m.set_num_layers(2);
  m.set_num_attention_heads(4);
  m.set_num_key_value_heads(2);
  m.set_head_dim(16);
  m.set_intermediate_size(128);
  m.set_vocab_size(256);
  m.set_qk_norm(true);
  m.set_max_position_embeddings(1024);
  return m;
}

inline config::Workload Work(uint32_t seq, uint32_t decode, uint32_t layers, uint32_t cached = 0) {
  config::Workload w;
  w.set_batch(1);
  w.set_seq_len(seq);
  w.set_decode_steps(decode);
  w.set_num_layers(layers);
  w.set_cached_prefix(cached);
  w.set_dtype("bf16");
  return w;
}

inline config::Mapping Map(int tp, const std::string& partition, const std::string& collective = "ring",
                           const std::string& placement = "linear", int stages = 1) {
  config::Mapping m;
  m.set_tp(tp);
  m.set_pipeline_stages(stages);
  m.set_partition(partition);
  m.set_collective(collective);
  m.set_placement(placement);
  m.set_weights("auto");
  return m;
}

// SmallModel's MoE twin: hidden 64, 8 experts of intermediate 32, top-2, renormalised.
inline config::Model MoeModel() {
  config::Model m = SmallModel();
  m.set_architecture("qwen3_moe");
  m.set_num_experts(8);
  m.set_num_experts_per_token(2);
  m.set_moe_intermediate_size(32);
  m.set_norm_topk_prob(true);
  return m;
}

// Megatron attention over `tp` ranks, experts over `ep` slots of `etp` ranks.
inline config::Mapping MoeMap(int tp, int ep, int etp) {
  config::Mapping m = Map(tp, "megatron");
  m.mutable_moe()->set_ep(ep);
  m.mutable_moe()->set_tp(etp);
  return m;
}

}  // namespace tpsim::mapping::testing
