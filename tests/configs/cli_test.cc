// End-to-end checks of the `tpsim` binary on config input: every shipped
// experiment validates, and every file of the broken corpus fails with its
// expected error line and exit status 2 (never a crash or a hang).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_test_util.h"

namespace {

namespace fs = std::filesystem;

using Outcome = tpsim::test::CommandOutcome;  // stdout and stderr together

Outcome RunTpsim(const std::string& args, const std::string& cwd = TPSIM_SOURCE_DIR) {
  return tpsim::test::RunCommand("cd '" + cwd + "' && timeout 60 '" TPSIM_BINARY_DIR "/bin/tpsim' " + args +
                                 " 2>&1");
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  for (std::string l; std::getline(is, l);) out.push_back(l);
  return out;
}

std::vector<fs::path> Files(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ext) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Cli, EveryShippedExperimentValidates) {
  auto files = Files(fs::path(TPSIM_SOURCE_DIR) / "configs/experiments", ".textproto");
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) {
    Outcome o = RunTpsim("describe " + f.string());
    EXPECT_EQ(o.status, 0) << f << "\n" << o.output;
    // None sets a field its run does not read.
    EXPECT_EQ(o.output.find("is ignored"), std::string::npos) << f << "\n" << o.output;
  }
  // describe names one, as tpsim run would.
  Outcome o =
      RunTpsim("describe " +
               (fs::path(TPSIM_SOURCE_DIR) / "configs/experiments/reference-qwen3-4b.textproto").string() +
               " --set mapping.seed=5");
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("tpsim: warning: mapping.seed is ignored: placement linear does not read it"),
            std::string::npos)
      << o.output;
}

TEST(Cli, EveryShippedChipValidatesInTheDefaultExperiment) {
  for (const auto& f : Files(fs::path(TPSIM_SOURCE_DIR) / "configs/chips", ".textproto")) {
    // Swap the chip in through an experiment that names it.
    fs::path exp = fs::temp_directory_path() / ("tpsim-chip-" + f.stem().string() + ".textproto");
    std::ofstream(exp) << "name: \"chip-check\"\nchip_file: \"" << f.string()
                       << "\"\nmodel_name: \"qwen3-0.6b\"\nworkload { batch: 1 seq_len: 16 num_layers: 1 }\n"
                          "mapping { tp: 1 pipeline_stages: 1 partition: \"k_split\" placement: \"linear\" "
                          "collective: \"ring\" }\n";
    Outcome o = RunTpsim("describe " + exp.string());
    EXPECT_EQ(o.status, 0) << f << "\n" << o.output;
    fs::remove(exp);
  }
}

// describe says where the memory plan keeps one core's weights and KV cache, and the fullest
// DRAM channel against its capacity. The reference: 50,462,720 bytes of weights a core (48.1
// MiB) streamed from its own channel, 2 x 276 x 2 x 128 x 2 = 282,624 bytes (276.0 KiB) of KV
// cache in SRAM; 50,462,720 / 4 GiB = 1.2%. With 40,000 decode steps the KV cache (40,256 x
// 1,024 bytes = 39.3 MiB) no longer fits SRAM and joins the weights in DRAM.
TEST(Cli, DescribeShowsWhereTheMemoryPlanKeepsWeightsAndKv) {
  const std::string exp = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/reference-qwen3-4b.textproto";
  Outcome o = RunTpsim("describe " + exp);
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(
      o.output.find("  memory per core       weights 48.1 MiB streamed from DRAM, KV cache 276.0 KiB for 276 "
                    "positions in SRAM (the stage with the most layers, 1)\n"
                    "  fullest DRAM channel  dram0: 48.1 MiB of 4.00 GiB (1.2%), used by 1 core\n"),
      std::string::npos)
      << o.output;
  Outcome kv = RunTpsim("describe " + exp + " --set workload.decode_steps=40000");
  ASSERT_EQ(kv.status, 0) << kv.output;
  EXPECT_NE(kv.output.find("KV cache 39.3 MiB for 40256 positions in DRAM"), std::string::npos) << kv.output;
  EXPECT_NE(kv.output.find("  fullest DRAM channel  dram0: 87.4 MiB of 4.00 GiB (2.1%), used by 1 core\n"),
            std::string::npos)
      << kv.output;
}

// A chip whose memories are of kind "hbm" has its off-chip memory called HBM (it said DRAM):
// mesh-4x4-hbm's channel hbm_west0 serves 4 cores x 52.5 MiB of weights = 210.0 MiB of its
// 16 GiB, 1.3%.
TEST(Cli, DescribeNamesHbmMemoriesHbm) {
  const std::string exp =
      std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto";
  Outcome o = RunTpsim("describe " + exp);
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("  memory per core       weights 52.5 MiB streamed from HBM, "), std::string::npos)
      << o.output;
  EXPECT_NE(
      o.output.find("  fullest HBM channel   hbm_west0: 210.0 MiB of 16.0 GiB (1.3%), used by 4 cores\n"),
      std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("DRAM"), std::string::npos) << o.output;
}

TEST(Cli, DescribeShowsTheMn2dGridAndWeightsOnlyWhenMn2dIsUsed) {
  const std::string exp = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/reference-qwen3-4b.textproto";
  Outcome plain = RunTpsim("describe " + exp);
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_EQ(plain.output.find("  mn_2d "), std::string::npos) << plain.output;
  Outcome grid = RunTpsim(
      "describe " + exp +
      " --set mapping.partition=mn_2d --set mapping.grid_rows=2 --set mapping.mn_2d_weights=k_steps");
  ASSERT_EQ(grid.status, 0) << grid.output;
  EXPECT_NE(grid.output.find("  mn_2d                 grid_rows 2, weights k_steps\n"), std::string::npos)
      << grid.output;
  Outcome dflt = RunTpsim("describe " + exp + " --set mapping.partition=mn_2d");
  EXPECT_NE(dflt.output.find("  mn_2d                 grid_rows auto (most square), weights replicated\n"),
            std::string::npos)
      << dflt.output;
}

TEST(Cli, BrokenCorpusGivesExpectedErrorsAndExitTwo) {
  fs::path dir = fs::path(TPSIM_SOURCE_DIR) / "tests/configs";
  auto files = Files(dir / "broken", ".textproto");
  ASSERT_GE(files.size(), 20u);
  for (const auto& f : files) {
    std::ifstream in(f);
    std::string args;
    std::vector<std::string> expects;
    for (std::string l; std::getline(in, l);) {
      if (l.rfind("# args: ", 0) == 0) args = l.substr(8);
      if (l.rfind("# expect: ", 0) == 0) expects.push_back(l.substr(10));
    }
    ASSERT_FALSE(expects.empty()) << f << " has no '# expect:' line";
    std::string rel = "broken/" + f.filename().string();
    Outcome o = RunTpsim("describe " + rel + " " + args, dir.string());
    EXPECT_EQ(o.status, 2) << rel << "\n" << o.output;
    auto lines = Lines(o.output);
    for (const auto& want : expects) {
      // "prefix | substring": a line must start with the prefix and contain the substring.
      std::string prefix = want, sub;
      if (size_t bar = want.find(" | "); bar != std::string::npos) {
        prefix = want.substr(0, bar);
        sub = want.substr(bar + 3);
      }
      bool found = std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
        return l.rfind(prefix, 0) == 0 && l.find(sub) != std::string::npos;
      });
      EXPECT_TRUE(found) << rel << ": no line '" << want << "' in:\n" << o.output;
    }
    for (const auto& l : lines) {
      EXPECT_EQ(l.find("terminate called"), std::string::npos) << rel;
      EXPECT_EQ(l.find("Assertion"), std::string::npos) << rel;
    }
  }
}

// Each of `wants` in `text`, in that order.
void ExpectInOrder(const std::string& text, std::initializer_list<const char*> wants) {
  size_t at = 0;
  for (const char* want : wants) {
    size_t found = text.find(want, at);
    ASSERT_NE(found, std::string::npos) << "no '" << want << "' after offset " << at << " in:\n" << text;
    at = found;
  }
}

TEST(Cli, ListPrintsEveryRegisteredImplementationByKind) {
  Outcome all = RunTpsim("list");
  ASSERT_EQ(all.status, 0) << all.output;
  // Kinds sorted, names sorted within each kind, one line per implementation.
  ExpectInOrder(all.output, {"all_to_all\n", "  direct ", "  hierarchical ", "  pairwise ", "\ncollective\n",
                             "  bidirectional_ring ", "  ring ", "\nengine\n", "  analytical ", "  tlm ",
                             "\npartitioner\n", "  k_split ", "  n_split ", "\nplacement\n", "  block ",
                             "  snake ", "\ntopology\n", "  edges ", "  wafer "});
  Outcome one = RunTpsim("list placement");
  ASSERT_EQ(one.status, 0) << one.output;
  EXPECT_EQ(one.output.rfind("placement\n  block ", 0), 0u) << one.output;
  EXPECT_EQ(one.output.find("topology"), std::string::npos) << one.output;
  Outcome bad = RunTpsim("list hypercube");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(
      bad.output.find("unknown kind 'hypercube' (valid: all_to_all, architecture, chip, collective, engine, "
                      "experiment, model, partitioner, placement, topology)"),
      std::string::npos)
      << bad.output;
}

// `tpsim help CMD` prints CMD's help, as `tpsim CMD --help` does (it printed the general help).
TEST(Cli, HelpWithACommandIsThatCommandsHelp) {
  for (const char* cmd : {"run", "serve", "sweep", "search"}) {
    const Outcome a = RunTpsim(std::string("help ") + cmd), b = RunTpsim(std::string(cmd) + " --help");
    EXPECT_EQ(a.status, 0) << cmd;
    EXPECT_EQ(a.output, b.output) << cmd;
  }
  EXPECT_NE(RunTpsim("help").output.find("commands:"), std::string::npos);
}

// A TPSIM_CONFIG_DIR without chips/ lists no shipped config, and says why on stderr (it printed
// an empty list, exit 0, without a word).
TEST(Cli, ListWarnsOfAConfigDirWithoutChips) {
  const Outcome o =
      tpsim::test::RunCommand("TPSIM_CONFIG_DIR=/nonexistent-tpsim-configs timeout 60 '" TPSIM_BINARY_DIR
                              "/bin/tpsim' list experiment 2>&1");
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(
      o.output.find("tpsim list: warning: TPSIM_CONFIG_DIR=/nonexistent-tpsim-configs has no chips/ folder"),
      std::string::npos)
      << o.output;
  EXPECT_EQ(RunTpsim("list experiment").output.find("warning"), std::string::npos);
}

// A shipped name where TPSIM_CONFIG_DIR points to no shipped configs said "(none)" or an empty
// list: the errors say where they looked.
TEST(Cli, ShippedNamesSayWhereTheConfigDirHasNone) {
  struct Case {
    const char* args;
    const char* says;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"run reference-qwen3-4b",
            "EXPERIMENT: reference-qwen3-4b: no such file, nor a shipped experiment (none "
            "in TPSIM_CONFIG_DIR=/nonexistent-tpsim-configs: no experiments/ folder of "
            ".textproto files; tpsim list experiment)"},
           {"collectives h100-sxm-8 --op all_reduce --ranks 8 --sizes 1M",
            "unknown chip 'h100-sxm-8' (shipped: none in TPSIM_CONFIG_DIR=/nonexistent-tpsim-configs: no "
            "chips/ "
            "folder of .textproto files;"},
           {"run " TPSIM_SOURCE_DIR "/configs/experiments/reference-qwen3-4b.textproto --model qwen3-8b",
            "--model: qwen3-8b: unknown model; the catalog has: none in "
            "TPSIM_CONFIG_DIR=/nonexistent-tpsim-configs: "
            "no models/ folder of .json files"},
       }) {
    const Outcome o = tpsim::test::RunCommand(
        "TPSIM_CONFIG_DIR=/nonexistent-tpsim-configs timeout 60 '" TPSIM_BINARY_DIR "/bin/tpsim' " +
        std::string(c.args) + " 2>&1");
    EXPECT_EQ(o.status, 2) << c.args << ": " << o.output;
    EXPECT_NE(o.output.find(c.says), std::string::npos) << c.args << ": " << o.output;
  }
}

TEST(Cli, ListPrintsTheShippedChipsExperimentsAndModels) {
  Outcome all = RunTpsim("list");
  ASSERT_EQ(all.status, 0) << all.output;
  // Between the registries' kinds, sorted; each shipped file once, with its description (a
  // model: its architecture, parameters and layers), names padded to the kind's longest.
  ExpectInOrder(
      all.output,
      {"all_to_all\n", "\nchip\n", "  h200-sxm-8           8x H200 SXM, NVLink 4 / NVSwitch\n",
       "\ncollective\n", "\nexperiment\n",
       "  reference-qwen3-4b      Qwen3-4B, 16 layers as 16 stages x TP=4 on wafer-8x8, prompt 256 + 20 "
       "decode steps\n",
       "\nmodel\n",
       "  mixtral-8x7b         mixtral, 46.703 B parameters (12.880 B active, 8 experts, top 2), 32 "
       "layers\n",
       "  qwen2.5-7b           qwen2, 7.615 B parameters, 28 layers\n", "\npartitioner\n"});
  // The architectures a config.json may name, with what they import as.
  Outcome archs = RunTpsim("list architecture");
  ASSERT_EQ(archs.status, 0) << archs.output;
  ExpectInOrder(
      archs.output,
      {"architecture\n",
       "  GemmaForCausalLM     gemma, dense; omitted: num_key_value_heads 16, head_dim 256, "
       "max_position_embeddings 8192, tie_word_embeddings true\n",
       "  LlamaForCausalLM     llama, dense; omitted: num_key_value_heads = heads, head_dim = hidden / "
       "heads, max_position_embeddings 2048, tie_word_embeddings false\n",
       "  Qwen3ForCausalLM     qwen3, dense, Q/K norms; omitted: num_key_value_heads 32, head_dim 128, "
       "max_position_embeddings 32768, tie_word_embeddings false\n"});
  EXPECT_EQ(std::count(archs.output.begin(), archs.output.end(), '\n'), 10)
      << archs.output;  // 9 architectures
  Outcome chips = RunTpsim("list chip");
  ASSERT_EQ(chips.status, 0) << chips.output;
  EXPECT_EQ(std::count(chips.output.begin(), chips.output.end(), '\n'), 9) << chips.output;  // 8 chips
}

TEST(Cli, AShippedExperimentRunsByName) {
  // Where no such file is, a name is the shipped experiment's (as chips are for collectives).
  Outcome byname = RunTpsim("run reference-qwen3-4b --quiet", "/tmp");
  Outcome bypath = RunTpsim("run configs/experiments/reference-qwen3-4b.textproto --quiet");
  ASSERT_EQ(byname.status, 0) << byname.output;
  EXPECT_EQ(byname.output, bypath.output);
  Outcome typo = RunTpsim("run referense-qwen3-4b");
  EXPECT_EQ(typo.status, 2);
  EXPECT_EQ(
      typo.output.rfind("<command line>:1:1: EXPERIMENT: referense-qwen3-4b: no such file, nor a shipped "
                        "experiment (default, ",
                        0),
      0u)
      << typo.output;
  EXPECT_NE(typo.output.find("; tpsim list experiment), did you mean reference-qwen3-4b?"), std::string::npos)
      << typo.output;
  // A path is a path: no fallback.
  Outcome path = RunTpsim("run ./reference-qwen3-4b");
  EXPECT_EQ(path.status, 2);
  EXPECT_NE(path.output.find("file not found"), std::string::npos) << path.output;
}

TEST(Cli, HelpAndUsageErrors) {
  Outcome help = RunTpsim("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("describe"), std::string::npos);
  EXPECT_NE(help.output.find("run"), std::string::npos);
  EXPECT_EQ(RunTpsim("describe --help").status, 0);
  EXPECT_EQ(RunTpsim("run --help").status, 0);
  Outcome unknown = RunTpsim("frobnicate");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.output.find("unknown command"), std::string::npos);
  // An empty value is no value (it read as the flag not given: no --out written).
  for (const char* empty : {"run --out ''", "run --out=", "gemm h100-sxm-8 --m 1 --n 1 --k 1 --csv ''",
                            "serve serving-fused --requests-csv ''",
                            "sweep configs/sweeps/readme-seq-partition.textproto --db ''",
                            "agree --count 1 --csv ''", "search reference-qwen3-4b --out ''",
                            "compare a.json b.json --plot ''", "compare --chip h100-sxm-8 --plot '' x.csv"}) {
    Outcome o = RunTpsim(empty);
    EXPECT_EQ(o.status, 2) << empty << ": " << o.output;
    EXPECT_NE(o.output.find("needs a value"), std::string::npos) << empty << ": " << o.output;
  }
  // --step-by-step picks among the analytical engine's ways; the TLM engine has one.
  Outcome sbs = RunTpsim("run reference-qwen3-4b --engine tlm --step-by-step");
  EXPECT_EQ(sbs.status, 2) << sbs.output;
  EXPECT_NE(sbs.output.find("the tlm engine always makes each step"), std::string::npos) << sbs.output;
  Outcome near = RunTpsim("colectives");  // a near miss is named
  EXPECT_EQ(near.status, 2);
  EXPECT_NE(near.output.find("see tpsim --help), did you mean collectives?"), std::string::npos)
      << near.output;
  EXPECT_EQ(RunTpsim("describe --bogus").status, 2);
  EXPECT_EQ(RunTpsim("describe --set mapping.tp").status, 2);
  Outcome missing = RunTpsim("describe no/such/file.textproto");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.output.find("no/such/file.textproto"), std::string::npos);
}

// tpsim agree: an unknown option last on the line "needed a value"; an output that cannot be
// written was found after the whole draw (30 experiments here, 1,000 in the README's draws).
TEST(Cli, AgreeNamesUnknownOptionsAndChecksItsOutputsFirst) {
  const Outcome bogus = RunTpsim("agree --count 1 --bogus");
  EXPECT_EQ(bogus.status, 2);
  EXPECT_EQ(bogus.output.rfind("tpsim agree: unknown option --bogus\n", 0), 0u) << bogus.output;
  const Outcome word = RunTpsim("agree x");
  EXPECT_EQ(word.status, 2);
  EXPECT_EQ(word.output.rfind("tpsim agree: unexpected argument x\n", 0), 0u) << word.output;
  for (const char* args :
       {"agree --count 30 --csv no/such/dir/a.csv", "agree --only 0 --emit no/such/dir/e.textproto"}) {
    const Outcome o = RunTpsim(args);
    EXPECT_EQ(o.status, 1) << args;
    EXPECT_EQ(o.output.rfind("tpsim agree: cannot write no/such/dir/", 0), 0u) << args << ": " << o.output;
    EXPECT_EQ(o.output.find("experiment"), std::string::npos) << args << ": " << o.output;  // none ran
  }
}

// Numbers on the command line are read whole and in range, before any experiment runs.
TEST(Cli, NumericFlagsAreReadWholeAndInRange) {
  struct Case {
    const char* args;
    const char* says;
  };
  for (const Case& c : std::initializer_list<Case>{
           // A NaN or negative share skipped the bounds check (exit 0); "0.95x" read as 0.95; a share
           // above 1 failed every run (exit 1).
           {"agree --count 1 --bounds nan,0.2", "bad value 'nan,0.2' for --bounds"},
           {"agree --count 1 --bounds -0.5,0.2", "F is a share of the totals in 0 .. 1"},
           {"agree --count 1 --bounds 2,0.25", "F is a share of the totals in 0 .. 1"},
           {"agree --count 1 --bounds 0.95,-1", "D a distance from 1 >= 0"},
           {"agree --count 1 --bounds 0.95x,0.25", "bad value '0.95x,0.25' for --bounds"},
           {"agree --count 1 --bounds 0.95,0.25,7", "bad value '0.95,0.25,7' for --bounds"},
           // Past the range: the range's own message, not "bad value".
           {"agree --jobs 1000", "--jobs must be 1 .. 256"},
           {"agree --count 4294967297", "--count must be 1 .. 1000000"},
           {"search reference-qwen3-4b --jobs 300", "--jobs must be 1 .. 256"},
           // "5abc" read as 5 ms.
           {"search serving-fused --slo-ttft-ms 5abc", "bad value '5abc' for --slo-ttft-ms"},
           {"search serving-fused --slo-tpot-ms 1e999", "bad value '1e999' for --slo-tpot-ms"},
           {"serve serving-fused --slo-ttft-ms 5abc", "--slo-ttft-ms: 5abc: must be a finite number > 0"},
           // Seven digits said "is not a whole number" and "the factor must be an integer >= 2".
           {"collectives wafer-8x8 --op all_reduce --ranks 1234567 --sizes 1K",
            "--ranks '1234567' is too large"},
           {"collectives wafer-8x8 --op all_reduce --ranks 4 --sizes 8K:1G:1000000",
            "the factor must be an integer from 2 to 999999"},
       }) {
    Outcome o = RunTpsim(c.args);
    EXPECT_EQ(o.status, 2) << c.args << ": " << o.output;
    EXPECT_NE(o.output.find(c.says), std::string::npos) << c.args << ": " << o.output;
  }
}

// The search front counts its rows, not its candidates: linear and snake give TP 2 the same
// cores, so their two candidates tie on one row (the header said "2 points" over one row).
TEST(Cli, SearchFrontCountsRowsAndNamesTiedCandidates) {
  const Outcome o = RunTpsim(
      "search configs/experiments/reference-qwen3-4b.textproto --set workload.num_layers=2 --set "
      "workload.decode_steps=2 --set workload.seq_len=16 --tp 2 --stages 1 --partitions n_split --placements "
      "linear,snake --collectives ring --spans stage --confirm 0");
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("energy per token), 1 points (2 candidates); candidates with equal metrics"),
            std::string::npos)
      << o.output;
}

TEST(Cli, SetOverridesReachTheResolvedExperiment) {
  Outcome o = RunTpsim(
      "describe configs/experiments/reference-qwen3-4b.textproto --set mapping.tp=2 --set "
      "mapping.pipeline_stages=8");
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("tp 2 x 8 pipeline stages = 16 cores"), std::string::npos) << o.output;
}

TEST(Cli, SetThatAppendsAnElementLocatesItsErrorsAtTheSet) {
  // mesh-4x4-hbm has two memories: [2] appends a third, whose missing fields are errors at the
  // --set that made it. Before, they pointed at the chip file's first memory block (32:1).
  const Outcome o = RunTpsim(
      "describe configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto --set chip.memory[2].capacity_bytes=0");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_EQ(
      o.output.rfind("<command line: --set chip.memory[2].capacity_bytes=0>:1:1: chip.memory[2].name: : "
                     "must not be empty",
                     0),
      0u)
      << o.output;
  EXPECT_EQ(o.output.find("mesh-4x4-hbm.textproto:32"), std::string::npos) << o.output;
  // A repeated field the file does not have at all (wafer-8x8's memory has no attach list).
  const Outcome a =
      RunTpsim("describe configs/experiments/default.textproto --set chip.memory[0].attach[0]=r0c0");
  EXPECT_EQ(a.status, 2) << a.output;
  EXPECT_EQ(
      a.output.rfind("<command line: --set chip.memory[0].attach[0]=r0c0>:1:1: chip.memory[0].attach: r0c0: "
                     "must be empty when per_core is true",
                     0),
      0u)
      << a.output;
  // An index past the end names itself and the one that appends.
  const Outcome far =
      RunTpsim("describe configs/experiments/default.textproto --set chip.memory[1000000].efficiency=1");
  EXPECT_EQ(far.status, 2) << far.output;
  EXPECT_EQ(
      far.output,
      "<command line: --set chip.memory[1000000].efficiency=1>:1:1: chip.memory: 1: index [1000000] out of "
      "range (1 elements; use [1] to append)\n")
      << far.output;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string ReplaceOnce(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

// The figures describe prints after the label that starts a line with `label` ("" if none).
std::string FiguresAfter(const std::string& out, const std::string& label) {
  const size_t at = out.find("\n" + label);
  if (at == std::string::npos) return "";
  size_t from = at + 1 + label.size();
  while (from < out.size() && out[from] == ' ') ++from;
  return out.substr(from, out.find('\n', from) - from);
}

// The network line gives the links' own bandwidths: an edges chip whose edges give theirs, with
// noc.link_bandwidth_gbps unset, printed "0.0 GB/s per direction". A 4-core ring c0-c1-c2-c3-c0
// of two 100 GB/s and two 400 GB/s edges is 8 links of 100 to 400 GB/s; with every edge at the
// noc default of 250, 250.0 GB/s. Controller links (per_core memory: 4 channels, 8 links) are
// counted apart.
TEST(Cli, DescribeGivesAnEdgesChipsPerEdgeBandwidths) {
  const fs::path dir = fs::temp_directory_path() / "tpsim-cli-edges";
  fs::create_directories(dir);
  auto write = [&](const std::string& file, const std::string& noc_bw, const std::string& bw_a,
                   const std::string& bw_b) {
    std::ofstream(dir / file)
        << "name: \"edges-bw\"\nmodel_name: \"qwen3-0.6b\"\n"
           "chip { name: \"ring4\" clock_mhz: 1000\n"
           "  core { systolic_rows: 32 systolic_cols: 32 matrix_utilization: 1 vector_lanes: 64 "
           "sram_bytes: 67108864 }\n"
           "  memory { name: \"d\" kind: \"dram\" per_core: true bandwidth_gbps: 100 efficiency: 1 "
           "latency_ns: 50 capacity_bytes: 4294967296 }\n"
           "  noc { topology: \"edges\" "
        << noc_bw
        << " core_names: [\"c0\", \"c1\", \"c2\", \"c3\"]\n"
           "    edges { a: \"c0\" b: \"c1\" "
        << bw_a << " }\n    edges { a: \"c1\" b: \"c2\" " << bw_a << " }\n    edges { a: \"c2\" b: \"c3\" "
        << bw_b << " }\n    edges { a: \"c3\" b: \"c0\" " << bw_b
        << " } } }\n"
           "workload { batch: 1 seq_len: 16 num_layers: 1 }\n"
           "mapping { tp: 1 pipeline_stages: 1 partition: \"k_split\" placement: \"linear\" "
           "collective: \"ring\" }\n";
  };
  write("per-edge.textproto", "", "bandwidth_gbps: 100", "bandwidth_gbps: 400");
  write("default.textproto", "link_bandwidth_gbps: 250", "", "");
  const Outcome per_edge = RunTpsim("describe " + (dir / "per-edge.textproto").string());
  ASSERT_EQ(per_edge.status, 0) << per_edge.output;
  EXPECT_EQ(FiguresAfter(per_edge.output, "  network"),
            "8 links, 100.0 to 400.0 GB/s per direction (+ 8 controller links)")
      << per_edge.output;
  const Outcome dflt = RunTpsim("describe " + (dir / "default.textproto").string());
  ASSERT_EQ(dflt.status, 0) << dflt.output;
  EXPECT_EQ(FiguresAfter(dflt.output, "  network"),
            "8 links, 250.0 GB/s per direction (+ 8 controller links)")
      << dflt.output;
  fs::remove_all(dir);
}

// Extreme rates keep significant digits (1e30 GB/s printed 31 digits of float noise, 1e-30 GB/s
// "0.0"); no decode step shows no decode layer; counts of one are singular; its decode row lines
// up with the prefill row.
TEST(Cli, DescribeShowsExtremeRatesAndCountsAsTheyAre) {
  const std::string ref = "describe reference-qwen3-4b";
  Outcome o = RunTpsim(ref + " --set chip.noc.link_bandwidth_gbps=1e30");
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_EQ(FiguresAfter(o.output, "  network"),
            "224 links, 1e+30 GB/s per direction (+ 128 controller links)");
  EXPECT_EQ(FiguresAfter(o.output, "  bisection bandwidth"), "8e+30 GB/s");
  o = RunTpsim(ref + " --set chip.noc.link_bandwidth_gbps=1e-30 --set chip.core.matrix_utilization=1e-300");
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_EQ(FiguresAfter(o.output, "  network"),
            "224 links, 1e-30 GB/s per direction (+ 128 controller links)");
  EXPECT_EQ(FiguresAfter(o.output, "  peak"), "262.1 TFLOP/s bf16 (2.62144e-298 achievable)");
  o = RunTpsim(ref + " --set workload.decode_steps=0 --set workload.seq_len=1");
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("workload    batch 1, prompt 1 token, 0 decode steps, bf16\n"), std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("decode layer"), std::string::npos) << o.output;
  o = RunTpsim(ref + " --set workload.decode_steps=1");
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find(", 1 decode step, bf16\n"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("\n  decode layer (L=257)  0.206 GFLOP"), std::string::npos) << o.output;
  o = RunTpsim(ref + " --set workload.seq_len=1");
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("\n  decode layer (L=2)    0."), std::string::npos) << o.output;
}

// A wafer's die size that does not divide its grid is said at the field a --set gave (it was at
// the chip file's rows line for --set chip.noc.die_rows=64).
TEST(Cli, ADieSizeGivenOnTheCommandLineIsBlamed) {
  Outcome o = RunTpsim("describe wafer-32x32-qwen3-32b --set chip.noc.die_rows=64");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_EQ(o.output.rfind(
                "<command line: --set chip.noc.die_rows=64>:1:1: chip.noc.die_rows: 64: must divide rows "
                "(32)\n",
                0),
            0u)
      << o.output;
  o = RunTpsim("describe wafer-32x32-qwen3-32b --set chip.noc.cols=30");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(
      o.output.find("<command line: --set chip.noc.cols=30>:1:1: chip.noc.cols: 30: must be a multiple of "
                    "die_cols (4)\n"),
      std::string::npos)
      << o.output;
}

// A node with more channels than cores nearest it leaves the rest idle (a core uses one
// channel): describe names them and their bandwidth. A 1 x 4 mesh with h0..h3 at r0c0 and h4 at
// r0c3: cores 0, 1 take h0, h1 and cores 2, 3 share h4, so h2 and h3 (2 x 100 GB/s) carry nothing.
TEST(Cli, DescribeNamesIdleMemoryChannels) {
  const fs::path dir = fs::temp_directory_path() / "tpsim-cli-idle-channels";
  fs::create_directories(dir);
  auto write = [&](const std::string& file, const std::string& attach) {
    std::ofstream(dir / file)
        << "name: \"idle\"\nmodel_name: \"qwen3-0.6b\"\n"
           "chip { name: \"mesh1x4\" clock_mhz: 1000\n"
           "  core { systolic_rows: 32 systolic_cols: 32 matrix_utilization: 1 vector_lanes: 64 "
           "sram_bytes: 67108864 }\n"
           "  memory { name: \"h\" kind: \"hbm\" attach: ["
        << attach
        << "] bandwidth_gbps: 100 efficiency: 1 latency_ns: 50 capacity_bytes: 4294967296 }\n"
           "  noc { topology: \"mesh\" rows: 1 cols: 4 link_bandwidth_gbps: 100 } }\n"
           "workload { batch: 1 seq_len: 16 num_layers: 1 }\n"
           "mapping { tp: 1 pipeline_stages: 1 partition: \"k_split\" placement: \"linear\" "
           "collective: \"ring\" }\n";
  };
  write("idle.textproto", "\"r0c0\", \"r0c0\", \"r0c0\", \"r0c0\", \"r0c3\"");
  write("used.textproto", "\"r0c0\", \"r0c0\", \"r0c3\"");
  const Outcome idle = RunTpsim("describe " + (dir / "idle.textproto").string());
  ASSERT_EQ(idle.status, 0) << idle.output;
  EXPECT_EQ(FiguresAfter(idle.output, "  HBM bandwidth"),
            "500.0 GB/s effective over 5 channels (2 idle, 200.0 GB/s: no core uses them; a core uses one "
            "channel of the attach node nearest it)")
      << idle.output;
  const Outcome used = RunTpsim("describe " + (dir / "used.textproto").string());
  ASSERT_EQ(used.status, 0) << used.output;
  EXPECT_EQ(FiguresAfter(used.output, "  HBM bandwidth"), "300.0 GB/s effective over 3 channels")
      << used.output;
  fs::remove_all(dir);
}

// mesh-4x4-hbm-qwen3-0.6b with mn_2d: the prefill's mn_2d shards (7 layers x 15.0 MiB a core)
// and the decode steps' n_split ones (7 x 7.5 MiB) are 157.5 MiB together. At 64 MiB of SRAM
// the plan keeps the decode steps' 52.5 MiB and streams the prefill's 105.0 MiB; describe says
// so (until 2026-12-06 all 157.5 MiB streamed). At 192 MiB both stay.
TEST(Cli, DescribeNamesTheLayoutThePlanStreams) {
  const std::string e =
      "configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto --set mapping.partition=mn_2d --set "
      "chip.core.sram_bytes=";
  const Outcome one = RunTpsim("describe " + e + "67108864");
  ASSERT_EQ(one.status, 0) << one.output;
  EXPECT_NE(one.output.find("memory per core       weights 52.5 MiB in SRAM (the decode steps' layout; the "
                            "prefill's 105.0 MiB streamed from HBM), KV cache 3.61 MiB"),
            std::string::npos)
      << one.output;
  const Outcome both = RunTpsim("describe " + e + "201326592");
  ASSERT_EQ(both.status, 0) << both.output;
  EXPECT_NE(both.output.find("memory per core       weights 157.5 MiB in SRAM, KV cache 3.61 MiB"),
            std::string::npos)
      << both.output;
}

// A Qwen3-MoE model with a dense layer (mlp_only_layers [0], decoder_sparse_step 2) has its dense
// and MoE layers shown apart, with their counts: describe showed layer 0 alone, the dense one, as
// the "prefill layer". Each row's figures are those of a model whose layers are all of its kind:
// the shipped qwen3-30b-a3b (all MoE) and a dense Qwen3 of its dimensions (intermediate 6144).
TEST(Cli, DescribeShowsDenseAndMoeLayersApart) {
  const std::string exp = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/moe-qwen3-30b-a3b.textproto";
  const std::string moe_json = ReadFile(fs::path(TPSIM_SOURCE_DIR) / "configs/models/qwen3-30b-a3b.json");
  const fs::path dir = fs::temp_directory_path() / "tpsim-cli-dense-moe";
  fs::create_directories(dir);
  std::ofstream(dir / "mlp0.json") << ReplaceOnce(moe_json, "\"mlp_only_layers\": []",
                                                  "\"mlp_only_layers\": [0]");
  std::ofstream(dir / "step2.json") << ReplaceOnce(moe_json, "\"decoder_sparse_step\": 1",
                                                   "\"decoder_sparse_step\": 2");
  std::string dense = ReplaceOnce(moe_json, "Qwen3MoeForCausalLM", "Qwen3ForCausalLM");
  dense = ReplaceOnce(dense, "\"model_type\": \"qwen3_moe\"", "\"model_type\": \"qwen3\"");
  std::ofstream(dir / "dense.json") << dense;

  const Outcome all_moe = RunTpsim("describe " + exp);
  const Outcome all_dense = RunTpsim("describe " + exp + " --model " + (dir / "dense.json").string());
  const Outcome mlp0 = RunTpsim("describe " + exp + " --model " + (dir / "mlp0.json").string());
  const Outcome step2 = RunTpsim("describe " + exp + " --model " + (dir / "step2.json").string());
  for (const Outcome* o : {&all_moe, &all_dense, &mlp0, &step2}) ASSERT_EQ(o->status, 0) << o->output;
  // One kind: one row each, as before.
  const std::string moe_prefill = FiguresAfter(all_moe.output, "  prefill layer         ");
  const std::string dense_prefill = FiguresAfter(all_dense.output, "  prefill layer         ");
  ASSERT_NE(moe_prefill, "") << all_moe.output;
  ASSERT_NE(dense_prefill, "") << all_dense.output;
  ASSERT_NE(moe_prefill, dense_prefill);
  // seq_len 512, no cached prefix: decode at L = 513.
  const std::string moe_decode = FiguresAfter(all_moe.output, "  decode layer (L=513)");
  const std::string dense_decode = FiguresAfter(all_dense.output, "  decode layer (L=513)");
  ASSERT_NE(moe_decode, "") << all_moe.output;
  EXPECT_EQ(mlp0.output.find("  prefill layer         "), std::string::npos) << mlp0.output;
  // mlp_only_layers [0]: layer 0 dense, 47 MoE.
  EXPECT_EQ(FiguresAfter(mlp0.output, "  prefill layer (47 MoE layers)"), moe_prefill) << mlp0.output;
  EXPECT_EQ(FiguresAfter(mlp0.output, "  prefill layer (1 dense layer)"), dense_prefill) << mlp0.output;
  EXPECT_EQ(FiguresAfter(mlp0.output, "  decode layer (L=513, 47 MoE layers)"), moe_decode) << mlp0.output;
  EXPECT_EQ(FiguresAfter(mlp0.output, "  decode layer (L=513, 1 dense layer)"), dense_decode) << mlp0.output;
  // decoder_sparse_step 2: layer l is MoE when (l + 1) % 2 == 0, 24 of 48.
  EXPECT_EQ(FiguresAfter(step2.output, "  prefill layer (24 MoE layers)"), moe_prefill) << step2.output;
  EXPECT_EQ(FiguresAfter(step2.output, "  prefill layer (24 dense layers)"), dense_prefill) << step2.output;
  EXPECT_EQ(FiguresAfter(step2.output, "  decode layer (L=513, 24 dense layers)"), dense_decode)
      << step2.output;
}

// A served workload (requests) has no one batch or prompt: describe said "batch 0, prompt 0
// tokens, 0 decode steps" and a 0.000 GFLOP prefill layer. It says where the requests come from
// (serving-fused.textproto: 200 synthetic requests, poisson at 2 per s, seed 1, prompts
// lognormal mu 6.2 sigma 0.5 in [16, 4096], outputs mu 4.8 sigma 0.5 in [4, 1024]).
TEST(Cli, DescribeOfAServedWorkloadSaysWhereItsRequestsComeFrom) {
  const std::string exp = std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto";
  const Outcome o = RunTpsim("describe " + exp);
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("\nworkload    served (tpsim serve), bf16\n"
                          "  requests              200 synthetic, poisson arrivals at 2.00 per s, seed 1\n"
                          "  prompt tokens         lognormal, exp(N(6.20, 0.50)) from 16 to 4096\n"
                          "  output tokens         lognormal, exp(N(4.80, 0.50)) from 4 to 1024\n"
                          "\nmapping     "),
            std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("batch 0"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("prefill layer"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("decode layer"), std::string::npos) << o.output;
  // A trace: its file (resolved against the experiment's folder), how many of its requests, and
  // the arrivals' scale.
  const fs::path dir = fs::temp_directory_path() / "tpsim-cli-served";
  fs::create_directories(dir);
  std::string text = ReadFile(exp);
  text = ReplaceOnce(text, "\"../chips/", "\"" + std::string(TPSIM_SOURCE_DIR) + "/configs/chips/");
  const size_t a = text.find("    synthetic {"), b = text.find("\n  }\n}\nmapping");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  text.replace(a, b - a, "    trace_file: \"t.csv\"\n    max_requests: 50\n    time_scale: 0.5");
  std::ofstream(dir / "trace.textproto") << text;
  std::ofstream(dir / "t.csv") << "arrival_s,prompt_tokens,output_tokens\n0,16,4\n";
  const Outcome t = RunTpsim("describe " + (dir / "trace.textproto").string());
  ASSERT_EQ(t.status, 0) << t.output;
  EXPECT_NE(t.output.find("\nworkload    served (tpsim serve), bf16\n"
                          "  requests              the first 50 of the trace " +
                          (dir / "t.csv").string() + ", arrivals x 0.500\n"),
            std::string::npos)
      << t.output;
}

// A catalog entry that imports but fails the model's checks is listed with the reason, as a
// malformed one is: it was listed with impossible figures (top 9 of 4 experts). The key
// num_experts_per_tok is at line 3, column 20 of bad-top.json.
TEST(Cli, ListNotesCatalogEntriesThatFailTheModelChecks) {
  const fs::path dir = fs::temp_directory_path() / "tpsim-cli-list-bad";
  fs::create_directories(dir / "models");
  fs::create_directories(dir / "chips");
  std::ofstream(dir / "models/bad-top.json")
      << "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"hidden_size\": 64, \"intermediate_size\": 128,\n"
         " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": "
         "1000,\n"
         " \"num_experts\": 4, \"num_experts_per_tok\": 9, \"moe_intermediate_size\": 32}\n";
  const Outcome o = tpsim::test::RunCommand("TPSIM_CONFIG_DIR='" + dir.string() +
                                            "' timeout 60 '" TPSIM_BINARY_DIR "/bin/tpsim' list model 2>&1");
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(
      o.output.find("  bad-top              (does not import: " + (dir / "models/bad-top.json").string() +
                    ":3:20: num_experts_per_token: 9: must be at most num_experts (4))\n"),
      std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("B parameters"), std::string::npos) << o.output;
}

TEST(Cli, ModelFlagImportsACatalogEntryOrConfigJson) {
  Outcome by_name =
      RunTpsim("describe configs/experiments/reference-qwen3-4b.textproto --model llama-3.2-1b");
  EXPECT_EQ(by_name.status, 0) << by_name.output;
  EXPECT_NE(by_name.output.find("llama"), std::string::npos);
  Outcome bad = RunTpsim("describe configs/experiments/reference-qwen3-4b.textproto --model no-such-model");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("qwen3-4b"), std::string::npos) << "the error lists valid names:\n" << bad.output;
}

// A config.json whose num_key_value_heads is null has it said, under the heads, with what it was
// taken as: num_attention_heads, 32 for qwen3-4b (as transformers 4 reads a null), where an absent
// key takes Qwen3Config's 32 for another reason. describe showed "2560 / 32 / 32" either way, as
// if the file wrote 32. In qwen3-4b.json num_attention_heads is on line 17, num_key_value_heads on
// line 19 (column 3).
TEST(Cli, DescribeSaysANullOrAbsentKvHeadCount) {
  const std::string json = ReadFile(fs::path(TPSIM_SOURCE_DIR) / "configs/models/qwen3-4b.json");
  const fs::path dir = fs::temp_directory_path() / "tpsim-cli-kv-null";
  fs::create_directories(dir);
  const std::string null_kv =
      ReplaceOnce(json, "\"num_key_value_heads\": 8", "\"num_key_value_heads\": null");
  std::ofstream(dir / "kvnull.json") << null_kv;
  std::ofstream(dir / "kvabsent.json") << ReplaceOnce(json, "  \"num_key_value_heads\": 8,\n", "");
  std::ofstream(dir / "kvnull0.json")
      << ReplaceOnce(null_kv, "\"num_attention_heads\": 32", "\"num_attention_heads\": 0");
  const std::string exp = "describe reference-qwen3-4b --model ";
  const Outcome null = RunTpsim(exp + (dir / "kvnull.json").string());
  ASSERT_EQ(null.status, 0) << null.output;
  EXPECT_NE(
      null.output.find("  hidden / heads / kv   2560 / 32 / 32 (head_dim 128)\n"
                       "  num_key_value_heads   null, so num_attention_heads (32) as transformers 4 reads "
                       "a null\n  positions"),
      std::string::npos)
      << null.output;
  const Outcome absent = RunTpsim(exp + (dir / "kvabsent.json").string());
  ASSERT_EQ(absent.status, 0) << absent.output;
  EXPECT_NE(
      absent.output.find("  hidden / heads / kv   2560 / 32 / 32 (head_dim 128)\n"
                         "  num_key_value_heads   absent, so qwen3's default (32) as transformers has it\n"),
      std::string::npos)
      << absent.output;
  // Written values (the shipped file), and a null replaced by --set, have no such line.
  for (const std::string& args :
       {exp + "qwen3-4b", exp + (dir / "kvnull.json").string() + " --set model.num_key_value_heads=8"}) {
    const Outcome o = RunTpsim(args);
    ASSERT_EQ(o.status, 0) << args << "\n" << o.output;
    EXPECT_NE(o.output.find("  hidden / heads / kv   2560 / 32 / 8 (head_dim 128)\n  positions"),
              std::string::npos)
        << args << "\n"
        << o.output;
  }
  // An error about it says so too (it said "num_key_value_heads: 0").
  const Outcome zero = RunTpsim(exp + (dir / "kvnull0.json").string());
  EXPECT_EQ(zero.status, 2) << zero.output;
  EXPECT_NE(zero.output.find((dir / "kvnull0.json").string() +
                             ":19:3: model.num_key_value_heads: null, so num_attention_heads (0) as "
                             "transformers 4 reads a null: must be positive\n"),
            std::string::npos)
      << zero.output;
}

// workload.requests.format names a trace file's layout: a synthetic stream with one is refused at
// the field (it was accepted and ignored), by describe and serve alike; a trace keeps it.
TEST(Cli, ASyntheticStreamRefusesAFormat) {
  const fs::path dir = fs::temp_directory_path() / "tpsim-cli-synthetic-format";
  fs::create_directories(dir);
  std::string text = ReadFile(fs::path(TPSIM_SOURCE_DIR) / "configs/experiments/serving-fused.textproto");
  text = ReplaceOnce(text, "\"../chips/", "\"" + std::string(TPSIM_SOURCE_DIR) + "/configs/chips/");
  text = ReplaceOnce(text, "  requests {\n", "  requests {\n    format: \"jsonl\"\n");
  // The line of `format`: one past that of `requests {`, at column 5.
  const size_t at = text.find("    format: \"jsonl\"");
  ASSERT_NE(at, std::string::npos);
  const std::string line = std::to_string(std::count(text.begin(), text.begin() + at, '\n') + 1);
  std::ofstream(dir / "synth.textproto") << text;
  const std::string want = (dir / "synth.textproto").string() + ":" + line +
                           ":5: workload.requests.format: jsonl: format names a trace file's layout (csv or "
                           "jsonl); a synthetic stream reads no file (remove it)\n";
  for (const char* cmd : {"describe ", "serve "}) {
    const Outcome o = RunTpsim(cmd + (dir / "synth.textproto").string());
    EXPECT_EQ(o.status, 2) << cmd << o.output;
    EXPECT_NE(o.output.find(want), std::string::npos) << cmd << o.output;
  }
  // A trace file with a format is described with it.
  const size_t a = text.find("    synthetic {"), b = text.find("\n  }\n}\nmapping");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  text.replace(a, b - a, "    trace_file: \"t.jsonl\"");
  text = ReplaceOnce(text, "format: \"jsonl\"", "format: \"csv\"");
  std::ofstream(dir / "trace.textproto") << text;
  std::ofstream(dir / "t.jsonl") << "arrival_s,prompt_tokens,output_tokens\n0,16,4\n";
  const Outcome t = RunTpsim("describe " + (dir / "trace.textproto").string());
  EXPECT_EQ(t.status, 0) << t.output;
  EXPECT_NE(t.output.find("the trace " + (dir / "t.jsonl").string() + " (csv)\n"), std::string::npos)
      << t.output;
}

// A --db where no store can be created is refused at --db, with the cause (exit 2), before the
// search: the store said "cannot open X: unable to open database file" (a FIFO: "disk I/O
// error"), exit 1. Nothing is made.
TEST(Cli, SearchAndSweepRefuseADbTheyCannotCreateAtTheFlag) {
  const fs::path dir = fs::temp_directory_path() / "tpsim-cli-search-db";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "afile") << "not a folder\n";
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  const std::string create = ": cannot create the SQLite store there: ";
  struct Case {
    fs::path db;
    std::string rule;
  };
  for (const Case& c : std::initializer_list<Case>{
           {dir / "no/such/x.sqlite", create + "cannot create a temporary file in " +
                                          (dir / "no/such").string() + " (No such file or directory)"},
           {dir / "afile/x.sqlite",
            create + "cannot create a temporary file in " + (dir / "afile").string() + " (Not a directory)"},
           {dir, create + "is a directory"},
           {dir / "fifo",
            ": is not a regular file (a FIFO, device or socket): the store is a SQLite file"}}) {
    // sweep --db alike (config::CheckStorePath): it said SQLite's words, exit 1, too.
    for (const std::string command : {"search reference-qwen3-4b --tp 2 --stages 1 --confirm 0",
                                      "sweep configs/sweeps/readme-seq-partition.textproto"}) {
      const Outcome o = RunTpsim(command + " --db " + c.db.string());
      EXPECT_EQ(o.status, 2) << command << " " << c.db << "\n" << o.output;
      EXPECT_EQ(o.output, "<command line>:1:1: --db: " + c.db.string() + c.rule + "\n")
          << command << " " << c.db;
    }
  }
  EXPECT_FALSE(fs::exists(dir / "no"));
  std::vector<fs::path> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<fs::path>{dir / "afile", dir / "fifo"}));
}

// search takes "--flag=VALUE" as tpsim run does, --set=FIELD=VALUE too (it took the next word as
// its value and was then an unknown option): the same front either way. A one-dash word is an
// unknown option, as run says (it was taken for the experiment).
TEST(Cli, SearchTakesFlagEqualsValue) {
  const std::string space =
      " --tp 2 --stages 1 --partitions n_split --placements linear --collectives ring --spans stage";
  const Outcome spaced = RunTpsim(
      "search reference-qwen3-4b --set workload.num_layers=2 --set workload.decode_steps=2 --set "
      "workload.seq_len=16 --confirm 0" +
      space);
  const Outcome joined = RunTpsim(
      "search reference-qwen3-4b --set=workload.num_layers=2 --set=workload.decode_steps=2 "
      "--set=workload.seq_len=16 --confirm=0" +
      space);
  ASSERT_EQ(spaced.status, 0) << spaced.output;
  EXPECT_EQ(joined.status, 0) << joined.output;
  // From the header on (the progress line before it on stderr has the wall time).
  const auto front = [](const std::string& out) {
    return out.substr(std::min(out.size(), out.find("\ntpsim search ")));
  };
  EXPECT_NE(front(spaced.output).find("Pareto front"), std::string::npos) << spaced.output;
  EXPECT_EQ(front(joined.output), front(spaced.output));
  const Outcome dash = RunTpsim("search -q reference-qwen3-4b");
  EXPECT_EQ(dash.status, 2) << dash.output;
  EXPECT_EQ(dash.output.rfind("tpsim search: unknown option -q\n", 0), 0u) << dash.output;
}

// serve: --help=X is an unknown option, as tpsim run has it (it printed the usage, exit 0), and an
// unknown --flag=VALUE is named with its value (it was "--jobs: : unknown option").
TEST(Cli, ServeFlagsWithEqualsAreReadAsRunReadsThem) {
  const Outcome help = RunTpsim("serve serving-fused --help=x");
  EXPECT_EQ(help.status, 2) << help.output;
  EXPECT_EQ(help.output, "<command line>:1:1: --help: x: unknown option (tpsim serve --help lists them)\n");
  const Outcome jobs = RunTpsim("serve serving-fused --jobs=4");
  EXPECT_EQ(jobs.status, 2) << jobs.output;
  EXPECT_EQ(jobs.output, "<command line>:1:1: --jobs: 4: unknown option (tpsim serve --help lists them)\n");
}

}  // namespace
