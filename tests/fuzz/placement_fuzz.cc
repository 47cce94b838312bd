// Placement files (placement = file): the input is the file, checked by the
// mapping's validation against the shipped wafer-8x8 chip with tp 4 x 2 stages.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "arch/chip.h"
#include "chip.pb.h"
#include "configs/files.h"
#include "mapping/mapping.h"
#include "model.pb.h"
#include "tests/fuzz/fuzz_util.h"
#include "workload.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpsim;
  static const std::string file = "/tmp/tpsim-fuzz-placement-" + std::to_string(::getpid()) + ".txt";
  static const arch::Chip* chip = [] {
    config::Chip c;
    config::SourceMap locs;
    config::ParseFile(config::ConfigDir() + "/chips/wafer-8x8.textproto", &c, &locs);
    return new arch::Chip(arch::Chip::Build(c, locs));
  }();
  static const config::Model* model = [] {
    auto* m = new config::Model;
    m->set_hidden_size(256);
    m->set_num_layers(2);
    m->set_num_attention_heads(4);
    m->set_num_key_value_heads(4);
    m->set_head_dim(64);
    m->set_intermediate_size(512);
    m->set_vocab_size(1000);
    return m;
  }();
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  config::Mapping m;
  m.set_tp(4);
  m.set_pipeline_stages(2);
  m.set_partition("k_split");
  m.set_placement("file");
  m.set_collective("ring");
  m.set_placement_file(file);
  config::Workload w;
  w.set_batch(1);
  w.set_seq_len(16);
  w.set_num_layers(2);
  fuzz::Expect([&] {
    config::SourceMap locs;
    (void)config::ReadInputFile(file, {}, "mapping.placement_file");
    std::vector<config::Diag> diags;
    mapping::ValidateMapping(m, *chip, *model, w, locs, &diags);
    for (const auto& d : diags) (void)d.str();
  });
  return 0;
}
