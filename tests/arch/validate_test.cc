// ValidateChip: one Diag per violated rule, with field path, value and location;
// Chip::Build refuses bad configs with all of them.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>

#include "arch/chip.h"
#include "tests/arch/test_util.h"

namespace tpsim::arch {
namespace {

std::vector<config::Diag> Check(const config::Chip& cfg) {
  std::vector<config::Diag> diags;
  ValidateChip(cfg, config::SourceMap("chip.textproto"), "chip", &diags);
  return diags;
}

struct Case {
  const char* base;
  std::function<void(config::Chip*)> edit;
  const char* field;
  const char* value;
  const char* rule;  // substring of the rule
};

class ValidateRule : public ::testing::TestWithParam<Case> {};

TEST_P(ValidateRule, EmitsTheDiag) {
  const Case& c = GetParam();
  config::Chip cfg = testing::LoadChipConfig(c.base);
  ASSERT_TRUE(Check(cfg).empty());
  c.edit(&cfg);
  auto diags = Check(cfg);
  ASSERT_EQ(diags.size(), 1u) << (diags.empty() ? "no diag" : config::ConfigError(diags).what());
  EXPECT_EQ(diags[0].field, c.field);
  EXPECT_EQ(diags[0].value, c.value);
  EXPECT_NE(diags[0].rule.find(c.rule), std::string::npos) << diags[0].rule;
  try {
    Chip::Build(cfg);
    ADD_FAILURE() << "Build accepted a bad config";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.diags().size(), 1u);
  }
}

const Case kCases[] = {
    {"wafer-8x8", [](auto* c) { c->set_clock_mhz(0); }, "chip.clock_mhz", "0", "must be positive"},
    {"wafer-8x8", [](auto* c) { c->set_clock_mhz(NAN); }, "chip.clock_mhz", "nan", "must be positive"},
    {"wafer-8x8", [](auto* c) { c->set_clock_mhz(1e9); }, "chip.clock_mhz", "1e+09", "[1, 1000000]"},
    {"wafer-8x8", [](auto* c) { c->mutable_core()->set_systolic_rows(0); }, "chip.core.systolic_rows", "0",
     "must be positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_core()->set_systolic_cols(0); }, "chip.core.systolic_cols", "0",
     "must be positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_core()->set_matrix_utilization(1.5); },
     "chip.core.matrix_utilization", "1.5", "(0, 1]"},
    {"wafer-8x8", [](auto* c) { c->mutable_core()->set_matrix_utilization(0); },
     "chip.core.matrix_utilization", "0", "(0, 1]"},
    {"wafer-8x8", [](auto* c) { c->mutable_core()->set_mac_dtype("fp8"); }, "chip.core.mac_dtype", "fp8",
     "only bf16"},
    {"wafer-8x8", [](auto* c) { c->mutable_core()->set_vector_lanes(0); }, "chip.core.vector_lanes", "0",
     "must be positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_core()->set_sram_bytes(0); }, "chip.core.sram_bytes", "0",
     "must be positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_core()->set_sram_bandwidth_gbps(-1); },
     "chip.core.sram_bandwidth_gbps", "-1", "zero or positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_noc()->set_topology("hypercube"); }, "chip.noc.topology",
     "hypercube", "unknown topology (valid: edges, mesh, ring, switch, torus, wafer)"},
    {"wafer-8x8", [](auto* c) { c->mutable_noc()->set_topology(""); }, "chip.noc.topology", "",
     "must name a topology (valid: edges, mesh"},
    {"wafer-8x8", [](auto* c) { c->mutable_noc()->set_rows(0); }, "chip.noc.rows", "0", "must be positive"},
    {"torus-8x8", [](auto* c) { c->mutable_noc()->set_cols(0); }, "chip.noc.cols", "0", "must be positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_noc()->set_rows(100000); }, "chip.noc.rows", "100000",
     "must be at most 4096 cores"},
    {"wafer-8x8", [](auto* c) { c->mutable_noc()->set_link_bandwidth_gbps(0); },
     "chip.noc.link_bandwidth_gbps", "0", "must be positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_noc()->set_link_latency_ns(-2); }, "chip.noc.link_latency_ns",
     "-2", "zero or positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_memory(0)->set_latency_ns(1e12); }, "chip.memory[0].latency_ns",
     "1e+12", "at most 1e9 ns"},
    {"ring-16", [](auto* c) { c->mutable_noc()->set_nodes(1); }, "chip.noc.nodes", "1", "at least 2"},
    {"h100-sxm-8", [](auto* c) { c->mutable_noc()->set_nodes(0); }, "chip.noc.nodes", "0", "at least 2"},
    {"h100-sxm-8", [](auto* c) { c->mutable_noc()->set_switch_latency_ns(-1); }, "chip.noc.switch_latency_ns",
     "-1", "zero or positive"},
    {"wafer-32x32", [](auto* c) { c->mutable_noc()->set_rows(30); }, "chip.noc.rows", "30",
     "multiple of die_rows (4)"},
    {"wafer-32x32", [](auto* c) { c->mutable_noc()->set_die_cols(0); }, "chip.noc.die_cols", "0",
     "must be positive"},
    {"wafer-32x32", [](auto* c) { c->mutable_noc()->set_d2d_bandwidth_gbps(0); },
     "chip.noc.d2d_bandwidth_gbps", "0", "must be positive"},
    {"wafer-8x8", [](auto* c) { c->clear_memory(); }, "chip.memory", "", "at least one memory"},
    {"mesh-4x4-hbm", [](auto* c) { c->mutable_memory(1)->set_name("hbm_west"); }, "chip.memory[1].name",
     "hbm_west", "unique"},
    {"wafer-8x8", [](auto* c) { c->mutable_memory(0)->set_kind("sram"); }, "chip.memory[0].kind", "sram",
     "dram or hbm"},
    {"wafer-8x8", [](auto* c) { c->mutable_memory(0)->set_bandwidth_gbps(0); },
     "chip.memory[0].bandwidth_gbps", "0", "must be positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_memory(0)->set_efficiency(0); }, "chip.memory[0].efficiency", "0",
     "(0, 1]"},
    {"wafer-8x8", [](auto* c) { c->mutable_memory(0)->set_efficiency(1.01); }, "chip.memory[0].efficiency",
     "1.01", "(0, 1]"},
    {"wafer-8x8", [](auto* c) { c->mutable_memory(0)->set_per_core(false); }, "chip.memory[0].attach", "",
     "at least one node"},
    {"wafer-8x8", [](auto* c) { c->mutable_memory(0)->add_attach("r0c0"); }, "chip.memory[0].attach", "r0c0",
     "must be empty when per_core"},
    {"mesh-4x4-hbm", [](auto* c) { c->mutable_memory(0)->set_attach(1, "r4c0"); }, "chip.memory[0].attach[1]",
     "r4c0", "names no node of the chip (nodes are r0c0..r3c3)"},
    {"h100-sxm-8",
     [](auto* c) {
       c->mutable_noc()->set_topology("mesh"), c->mutable_noc()->set_rows(2), c->mutable_noc()->set_cols(4);
       c->clear_gpu();
     },
     "chip.collectives.in_switch_reduction", "true", "needs noc.topology switch"},
    {"h100-sxm-8",
     [](auto* c) {
       c->mutable_noc()->set_topology("mesh"), c->mutable_noc()->set_rows(2), c->mutable_noc()->set_cols(4);
       c->clear_collectives();
     },
     "chip.gpu", "", "needs noc.topology switch"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_sms(0); }, "chip.gpu.sms", "0", "must be positive"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_sms(4097); }, "chip.gpu.sms", "4097",
     "must be at most 4096 (an H100 SXM has 132)"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_bf16_tflops(-1); }, "chip.gpu.bf16_tflops", "-1",
     "must be positive"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_tensor_efficiency(1.5); },
     "chip.gpu.tensor_efficiency", "1.5", "(0, 1]"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_hbm_efficiency(0); }, "chip.gpu.hbm_efficiency", "0",
     "(0, 1]"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_kernel_overhead_us(-2); },
     "chip.gpu.kernel_overhead_us", "-2", "zero or positive"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_kernel_launch_us(-1); }, "chip.gpu.kernel_launch_us",
     "-1", "zero or positive"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_kernel_launch_us(2e6); }, "chip.gpu.kernel_launch_us",
     "2e+06", "at most 1000000"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_l2_bytes(0); }, "chip.gpu.l2_bytes", "0",
     "must be positive"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_compute_capability(80); },
     "chip.gpu.compute_capability", "80", "Hopper (90) and Blackwell (100)"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_ring_efficiency(0); }, "chip.gpu.ring_efficiency", "0",
     "(0, 1]"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_nvls_rank_loss(1); }, "chip.gpu.nvls_rank_loss", "1",
     "[0, 1)"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_ring_channel_memory_gbps(-1); },
     "chip.gpu.ring_channel_memory_gbps", "-1", "must be zero or positive"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_collective_launch_us(2e6); },
     "chip.gpu.collective_launch_us", "2e+06", "at most 1000000"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_collective_kernel_us(-3); },
     "chip.gpu.collective_kernel_us", "-3", "must be zero or positive"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_nvls_chunk_rtt_us(-1); }, "chip.gpu.nvls_chunk_rtt_us",
     "-1", "must be zero or positive"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_collective_launch_per_gpu_us(2e6); },
     "chip.gpu.collective_launch_per_gpu_us", "2e+06", "at most 1000000"},
    {"h100-sxm-8", [](auto* c) { c->mutable_gpu()->set_collective_launch_exponent(0.5); },
     "chip.gpu.collective_launch_exponent", "0.5", "must be 0 (= 2) or in [1, 64]"},
    {"h100-sxm-8", [](auto* c) { c->mutable_collectives()->set_in_switch_bandwidth_gbps(0); },
     "chip.collectives.in_switch_bandwidth_gbps", "0", "must be positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_energy()->set_hop_pj_per_byte(-1); },
     "chip.energy.hop_pj_per_byte", "-1", "must be zero or positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_energy()->set_core_static_w(NAN); }, "chip.energy.core_static_w",
     "nan", "must be zero or positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_energy()->set_mac_bf16_pj(0); }, "chip.energy.mac_bf16_pj", "0",
     "must be positive"},
    {"wafer-8x8", [](auto* c) { c->mutable_energy()->set_dram_pj_per_byte(0); },
     "chip.energy.dram_pj_per_byte", "0", "the chip has a memory of kind dram (memory[0], dram)"},
    {"h200-sxm-8", [](auto* c) { c->mutable_energy()->set_hbm_pj_per_byte(0); },
     "chip.energy.hbm_pj_per_byte", "0", "the chip has a memory of kind hbm"},
};

// Names from the index and the field (the default would print the Case's bytes,
// pointers included, which differ between runs and break ctest's filters).
INSTANTIATE_TEST_SUITE_P(Rules, ValidateRule, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = std::to_string(info.index) + "_";
                           for (const char* p = info.param.field; *p; ++p) {
                             name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
                           }
                           return name;
                         });

config::Chip EdgesChip() {
  config::Chip cfg = testing::LoadChipConfig("wafer-8x8");
  auto* noc = cfg.mutable_noc();
  noc->Clear();
  noc->set_topology("edges");
  noc->set_link_bandwidth_gbps(100);
  for (const char* n : {"a", "b", "c"}) noc->add_core_names(n);
  for (auto [x, y] : {std::pair{"a", "b"}, std::pair{"b", "c"}}) {
    auto* e = noc->add_edges();
    e->set_a(x);
    e->set_b(y);
  }
  return cfg;
}

TEST(ValidateEdges, GoodOneBuilds) {
  EXPECT_TRUE(Check(EdgesChip()).empty());
  EXPECT_EQ(Chip::Build(EdgesChip()).Diameter(), 2);
}

TEST(ValidateEdges, UnknownEndpoint) {
  config::Chip cfg = EdgesChip();
  cfg.mutable_noc()->mutable_edges(1)->set_b("d");
  auto diags = Check(cfg);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "chip.noc.edges[1].b");
  EXPECT_EQ(diags[0].value, "d");
  EXPECT_EQ(diags[0].rule, "names no node of the chip (nodes are a, b, c)");
}

TEST(ValidateEdges, Disconnected) {
  config::Chip cfg = EdgesChip();
  cfg.mutable_noc()->add_router_names("island");
  auto diags = Check(cfg);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "chip.noc.edges");
  EXPECT_NE(diags[0].rule.find("must be connected (island cannot be reached from a)"), std::string::npos);
}

// A second edge between one pair, either way round: describe counted both (links, bisection) and
// routing took the first, so the order of the same wires changed the times.
TEST(ValidateEdges, APairJoinedTwiceIsRefusedOnce) {
  config::Chip cfg = EdgesChip();
  for (int copies = 0; copies < 3; ++copies) {
    auto* e = cfg.mutable_noc()->add_edges();
    e->set_a("c");
    e->set_b("b");
  }
  auto diags = Check(cfg);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "chip.noc.edges[2]");
  EXPECT_EQ(diags[0].value, "c - b");
  EXPECT_EQ(
      diags[0].rule,
      "joins the nodes noc.edges[1] joins: give each pair of nodes one edge (it carries both directions)");
}

TEST(ValidateEdges, DuplicateNameSelfLoopAndNoCores) {
  config::Chip cfg = EdgesChip();
  cfg.mutable_noc()->add_router_names("a");
  cfg.mutable_noc()->mutable_edges(0)->set_b("a");
  auto diags = Check(cfg);
  ASSERT_EQ(diags.size(), 2u);
  EXPECT_EQ(diags[0].field, "chip.noc.router_names[0]");
  EXPECT_EQ(diags[1].field, "chip.noc.edges[0].b");
  cfg.mutable_noc()->clear_core_names();
  EXPECT_EQ(Check(cfg)[0].field, "chip.noc.core_names");
}

TEST(ValidateEdges, EdgeBandwidthDefaultsNeedANocBandwidth) {
  config::Chip cfg = EdgesChip();
  cfg.mutable_noc()->set_link_bandwidth_gbps(0);
  auto diags = Check(cfg);
  ASSERT_EQ(diags.size(), 2u);
  EXPECT_EQ(diags[0].field, "chip.noc.edges[0].bandwidth_gbps");
  cfg.mutable_noc()->mutable_edges(0)->set_bandwidth_gbps(10);
  cfg.mutable_noc()->mutable_edges(1)->set_bandwidth_gbps(10);
  EXPECT_TRUE(Check(cfg).empty());
}

TEST(ValidateEdges, NocLinkBandwidthIsCheckedLikeOtherTopologies) {
  // Every edge gives its own bandwidth, so the noc default is unused; set, it must still be
  // positive and at most 1e30 as on mesh, ring, switch and wafer (CheckLinkDefaults). Before,
  // it was checked only when an edge defaulted to it: nan, -5 and 1e308 built, and describe
  // printed them (bisection inf GB/s for 1e308). 0 stays "unset".
  const std::vector<std::tuple<double, const char*, const char*>> cases = {
      {NAN, "nan", "must be positive"},
      {-5, "-5", "must be positive"},
      {1e308, "1e+308", "must be at most 1e30"},
      {-INFINITY, "-inf", "must be positive"}};
  for (const auto& [v, text, rule] : cases) {
    SCOPED_TRACE(text);
    config::Chip cfg = EdgesChip();
    for (auto& e : *cfg.mutable_noc()->mutable_edges()) e.set_bandwidth_gbps(10);
    cfg.mutable_noc()->set_link_bandwidth_gbps(v);
    auto diags = Check(cfg);
    ASSERT_EQ(diags.size(), 1u);
    EXPECT_EQ(diags[0].field, "chip.noc.link_bandwidth_gbps");
    EXPECT_EQ(diags[0].value, text);
    EXPECT_EQ(diags[0].rule, rule);
    // An edge that defaults to it adds no second diag: the noc value is the one to fix.
    cfg.mutable_noc()->mutable_edges(0)->set_bandwidth_gbps(0);
    EXPECT_EQ(Check(cfg).size(), 1u);
    EXPECT_THROW(Chip::Build(cfg), config::ConfigError);
  }
  config::Chip unset = EdgesChip();
  for (auto& e : *unset.mutable_noc()->mutable_edges()) e.set_bandwidth_gbps(10);
  unset.mutable_noc()->set_link_bandwidth_gbps(0);
  EXPECT_TRUE(Check(unset).empty());
  // Located in a chip file of its own.
  const std::string text =
      "clock_mhz: 1000\n"
      "core { systolic_rows: 4 systolic_cols: 4 matrix_utilization: 1 vector_lanes: 1 sram_bytes: 1 }\n"
      "noc { topology: \"edges\" core_names: [\"a\", \"b\"]\n"
      "      link_bandwidth_gbps: 1e308 edges { a: \"a\" b: \"b\" bandwidth_gbps: 10 } }\n"
      "memory { name: \"m\" kind: \"dram\" per_core: true bandwidth_gbps: 1 efficiency: 1 }\n";
  config::Chip located;
  config::SourceMap locs("x.textproto");
  config::ParseMessage(text, "x.textproto", &located, &locs);
  try {
    Chip::Build(located, locs);
    FAIL() << "accepted";
  } catch (const config::ConfigError& e) {
    ASSERT_EQ(e.diags().size(), 1u) << e.what();
    EXPECT_EQ(e.diags()[0].str(),
              "x.textproto:4:7: chip.noc.link_bandwidth_gbps: 1e+308: must be at most 1e30");
  }
}

TEST(Validate, CollectsEveryDiagAndLocatesThem) {
  const std::string text =
      "clock_mhz: 0\n"
      "core { systolic_rows: 0 systolic_cols: 4 matrix_utilization: 1 vector_lanes: 1 sram_bytes: 1 }\n"
      "noc {\n"
      "  topology: \"mesh\"\n"
      "  rows: 0\n"
      "  cols: 2\n"
      "  link_bandwidth_gbps: 10\n"
      "}\n"
      "memory { name: \"m\" kind: \"hbm\" attach: \"r0c0\" bandwidth_gbps: 1 efficiency: 1 }\n";
  config::Chip cfg;
  config::SourceMap locs("x.textproto");
  config::ParseMessage(text, "x.textproto", &cfg, &locs);
  try {
    Chip::Build(cfg, locs);
    FAIL() << "accepted";
  } catch (const config::ConfigError& e) {
    // The attach name cannot be checked while the grid itself is invalid.
    ASSERT_EQ(e.diags().size(), 3u) << e.what();
    EXPECT_EQ(e.diags()[0].str(), "x.textproto:1:1: chip.clock_mhz: 0: must be positive");
    EXPECT_EQ(e.diags()[1].field, "chip.core.systolic_rows");
    EXPECT_EQ(e.diags()[1].where.line, 2);
    EXPECT_EQ(e.diags()[2].str(), "x.textproto:5:3: chip.noc.rows: 0: must be positive for topology mesh");
  }
  // Merged under "chip" (as an experiment would), the same locations are found.
  config::SourceMap merged("exp.textproto");
  merged.Merge("chip", locs, config::Location{"exp.textproto", 3, 1});
  std::vector<config::Diag> diags;
  ValidateChip(cfg, merged, "chip", &diags);
  ASSERT_EQ(diags.size(), 3u);
  EXPECT_EQ(diags[2].where.line, 5);
}

// Attach entries are looked up among the network's node names (a set), not compared with
// every node in turn; the diag of an entry naming no node is unchanged. (The speed itself:
// `tpsim describe` of a 4096-node ring with a million attach entries took 31.5 s of CPU before,
// 0.45 s after; not timed here.)
TEST(Validate, AttachEntriesNameNodesOfTheChip) {
  config::Chip cfg = testing::LoadChipConfig("ring-16");
  cfg.mutable_noc()->set_nodes(4096);
  config::Memory* m = cfg.mutable_memory(0);
  m->set_per_core(false);
  for (int i = 0; i < 10'000; ++i) m->add_attach("n4095");  // the last node
  m->add_attach("n4096");
  const std::vector<config::Diag> diags = Check(cfg);
  ASSERT_EQ(diags.size(), 1u) << config::ConfigError(diags).what();
  EXPECT_EQ(diags[0].field, "chip.memory[0].attach[10000]");
  EXPECT_EQ(diags[0].value, "n4096");
  EXPECT_EQ(diags[0].rule, "names no node of the chip (nodes are n0..n4095)");
}

// No input crashes or hangs: extreme values in every numeric noc/core field
// either build or throw ConfigError.
TEST(Validate, ExtremeValuesNeverCrash) {
  const double values[] = {0, -1, 1, 2, 3, 1e-300, 1e300, NAN, INFINITY, 4096, 4097, 65536};
  const std::vector<std::function<void(config::Chip*, double)>> edits = {
      [](auto* c, double v) { c->set_clock_mhz(v); },
      [](auto* c, double v) { c->mutable_core()->set_matrix_utilization(v); },
      [](auto* c, double v) { c->mutable_core()->set_sram_bandwidth_gbps(v); },
      [](auto* c, double v) { c->mutable_noc()->set_rows(v >= 0 && v < 1e6 ? v : 7); },
      [](auto* c, double v) { c->mutable_noc()->set_cols(v >= 0 && v < 1e6 ? v : 7); },
      [](auto* c, double v) { c->mutable_noc()->set_nodes(v >= 0 && v < 1e6 ? v : 7); },
      [](auto* c, double v) { c->mutable_noc()->set_link_bandwidth_gbps(v); },
      [](auto* c, double v) { c->mutable_noc()->set_link_latency_ns(v); },
      [](auto* c, double v) { c->mutable_memory(0)->set_bandwidth_gbps(v); },
      [](auto* c, double v) { c->mutable_memory(0)->set_latency_ns(v); },
  };
  for (const char* base : {"wafer-8x8", "ring-16", "h100-sxm-8"}) {
    for (size_t e = 0; e < edits.size(); ++e) {
      for (double v : values) {
        config::Chip cfg = testing::LoadChipConfig(base);
        edits[e](&cfg, v);
        try {
          Chip chip = Chip::Build(cfg);
          (void)chip.TransferTime(0, chip.num_cores() - 1, ~0ull);
          (void)chip.GemmTime(~0ull, ~0ull, ~0ull, ~0ull, ~0ull);
          (void)chip.VectorTime(1e300, ~0ull);
          (void)chip.DramTime(0, ~0ull);
        } catch (const config::ConfigError&) {
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpsim::arch
