// `tpsim run` end to end: results are byte-identical run to run for both engines,
// the two engines agree on the reference experiment, and the output files
// (--out, --dump-program, --trace) are written.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_test_util.h"

namespace {

namespace fs = std::filesystem;

int RunTpsim(const std::string& args, std::string* output = nullptr) {
  tpsim::test::CommandOutcome o = tpsim::test::RunCommand(
      "cd '" TPSIM_SOURCE_DIR "' && timeout 120 '" TPSIM_BINARY_DIR "/bin/tpsim' " + args + " 2>&1");
  if (output) *output = std::move(o.output);
  return o.status;
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

const std::string kRef = "configs/experiments/reference-qwen3-4b.textproto";

class RunCli : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("tpsim-run-cli-" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string P(const std::string& name) const { return (dir_ / name).string(); }
};

TEST_F(RunCli, ResultsAreByteIdenticalRunToRun) {
  for (const char* engine : {"analytical", "tlm"}) {
    std::string a = P(std::string(engine) + "-a.json"), b = P(std::string(engine) + "-b.json");
    std::string out;
    ASSERT_EQ(RunTpsim("run " + kRef + " --engine " + engine + " --quiet --out " + a, &out), 0) << out;
    ASSERT_EQ(RunTpsim("run " + kRef + " --engine " + engine + " --quiet --out " + b, &out), 0) << out;
    std::string ja = Slurp(a);
    EXPECT_GT(ja.size(), 1000u);
    EXPECT_EQ(ja, Slurp(b)) << engine;
  }
}

TEST_F(RunCli, EnginesAgreeOnTheReferenceExperimentWithinTwoPercent) {
  // reference-qwen3-4b has little link contention (TP=4 groups on 2x2 blocks,
  // one stage active at a time), so the TLM engine must stay close to the
  // closed form.
  std::string out;
  ASSERT_EQ(RunTpsim("run " + kRef + " --engine analytical --quiet --out " + P("a.json"), &out), 0) << out;
  ASSERT_EQ(RunTpsim("run " + kRef + " --engine tlm --quiet --out " + P("t.json"), &out), 0) << out;
  auto a = nlohmann::json::parse(Slurp(P("a.json")));
  auto t = nlohmann::json::parse(Slurp(P("t.json")));
  double ta = a["summary"]["total_ps"].get<double>(), tt = t["summary"]["total_ps"].get<double>();
  EXPECT_NEAR(tt / ta, 1.0, 0.02);
  EXPECT_EQ(a["engine"], "analytical");
  EXPECT_EQ(t["engine"], "tlm");
  // Same keys in both: the schema is shared.
  for (auto& [k, v] : a["summary"].items()) EXPECT_TRUE(t["summary"].contains(k)) << k;
  EXPECT_FALSE(t["links"].empty());
  EXPECT_FALSE(t["dram"].empty());
  // Breakdown shares add up to the total.
  for (auto* r : {&a, &t}) {
    auto& s = (*r)["summary"];
    EXPECT_EQ(
        s["compute_ps"].get<int64_t>() + s["communication_ps"].get<int64_t>() + s["memory_ps"].get<int64_t>(),
        s["total_ps"].get<int64_t>());
  }
}

TEST_F(RunCli, EnginesAgreeOnTheShippedMoeExperimentsWithinTenPercent) {
  // Issue 17: the analytical and TLM engines time MoE layers (dispatch / combine all_to_alls,
  // per-expert GEMMs, streamed expert weights) within 10% of each other, balanced and skewed,
  // and with the two-step hierarchical all_to_all (mapping.moe.all_to_all).
  for (const std::string& exp : {std::string("configs/experiments/moe-qwen3-30b-a3b.textproto"),
                                 std::string("configs/experiments/moe-qwen3-30b-a3b.textproto "
                                             "--set mapping.moe.routing=zipf --set mapping.moe.zipf_s=1.2"),
                                 std::string("configs/experiments/moe-qwen3-30b-a3b-h200.textproto"),
                                 std::string("configs/experiments/moe-qwen3-235b-a22b.textproto "
                                             "--set workload.num_layers=16"),
                                 std::string("configs/experiments/moe-mixtral-8x7b.textproto"),
                                 std::string("configs/experiments/moe-qwen3-30b-a3b.textproto "
                                             "--set mapping.moe.all_to_all=hierarchical"),
                                 // Attention TP 4 x 4 replicas (mapping.attention_dp) with EP 16, and
                                 // the expert slots spread (mapping.moe.group_order) under skew.
                                 std::string("configs/experiments/moe-qwen3-30b-a3b-dp.textproto"),
                                 std::string("configs/experiments/moe-qwen3-30b-a3b-dp.textproto "
                                             "--set mapping.moe.ep=4 --set mapping.moe.tp=4 "
                                             "--set mapping.moe.routing=zipf --set mapping.moe.zipf_s=1.2 "
                                             "--set mapping.moe.group_order=ep_inner")}) {
    std::string out;
    ASSERT_EQ(RunTpsim("run " + exp + " --engine analytical --quiet --out " + P("a.json"), &out), 0) << out;
    ASSERT_EQ(RunTpsim("run " + exp + " --engine tlm --quiet --out " + P("t.json"), &out), 0) << out;
    const double ta = nlohmann::json::parse(Slurp(P("a.json")))["summary"]["total_ps"].get<double>();
    const double tt = nlohmann::json::parse(Slurp(P("t.json")))["summary"]["total_ps"].get<double>();
    EXPECT_NEAR(tt / ta, 1.0, 0.10) << exp;
  }
}

TEST_F(RunCli, CriticalPathAddsUpToTheTotalAndFollowsTheTlmEngine) {
  // The split counts each task on the path from its enabler's end (sim::PathPart), so waits for
  // a transfer's first link or a channel past a request that ended later belong to the task:
  // compute + communication + memory is the total on both engines, and the analytical engine's
  // shares are the TLM engine's within 2 points. Counted from each task's start, they were not:
  // the first case's analytical communication was 45.4% (TLM 74.8%), the second's memory 26.9%
  // (TLM 33.5%), and their parts added up to 70.6% and 93.5% of the total.
  for (const std::string& exp :
       {kRef + " --set chip.noc.link_bandwidth_gbps=10 --set mapping.partition=m_split_rotate "
               "--set workload.seq_len=64 --set workload.decode_steps=2",
        std::string("configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto --set workload.batch=64")}) {
    double share[2][3];
    for (int e = 0; e < 2; ++e) {
      std::string out;
      ASSERT_EQ(
          RunTpsim("run " + exp + " --engine " + (e ? "tlm" : "analytical") + " --quiet --out " + P("r.json"),
                   &out),
          0)
          << out;
      const auto s = nlohmann::json::parse(Slurp(P("r.json")))["summary"];
      const int64_t part[3] = {s["compute_ps"].get<int64_t>(), s["communication_ps"].get<int64_t>(),
                               s["memory_ps"].get<int64_t>()};
      const int64_t total = s["total_ps"].get<int64_t>();
      EXPECT_EQ(part[0] + part[1] + part[2], total) << exp << (e ? " tlm" : " analytical");
      for (int k = 0; k < 3; ++k) share[e][k] = static_cast<double>(part[k]) / static_cast<double>(total);
    }
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(share[0][k], share[1][k], 0.02) << exp << " kind " << k;
  }
}

TEST_F(RunCli, OutputFilesAreWritten) {
  std::string out;
  ASSERT_EQ(
      RunTpsim(
          "run " + kRef +
              " --set workload.num_layers=2 --set mapping.pipeline_stages=2 --set workload.decode_steps=1"
              " --quiet --tasks --out " +
              P("r.json") + " --dump-program " + P("p.txt") + " --trace " + P("t.pftrace"),
          &out),
      0)
      << out;
  auto r = nlohmann::json::parse(Slurp(P("r.json")));
  std::string program = Slurp(P("p.txt"));
  // A header line, then one line per task.
  size_t task_lines = std::count(program.begin(), program.end(), '\n') - 1;
  EXPECT_EQ(program.rfind("program: ", 0), 0u);
  EXPECT_EQ(r["tasks"].size(), task_lines) << "one task timing per dumped task";
  EXPECT_GT(fs::file_size(P("t.pftrace")), 1000u);
  EXPECT_NE(r["config"].get<std::string>().find("reference-qwen3-4b"), std::string::npos);
}

TEST_F(RunCli, PartitionFallbacksAreStatedOnce) {
  std::string out;
  ASSERT_EQ(RunTpsim("run " + kRef + " --set mapping.partition=m_split_rotate --quiet", &out), 0) << out;
  const std::string warning = "tpsim: warning: partition fallback: m_split_rotate->k_split (M=1 < tp=4)";
  size_t at = out.find(warning);
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_EQ(out.find(warning, at + 1), std::string::npos) << "stated once, not per op";
  ASSERT_EQ(RunTpsim("run " + kRef + " --quiet", &out), 0) << out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << "k_split needs no fallback:\n" << out;
}

// A mapping field that another field leaves unread is named as ignored (the same run was printed,
// silently); the shipped reference says nothing.
TEST_F(RunCli, UnreadMappingFieldsAreNamedAsIgnored) {
  std::string out;
  ASSERT_EQ(RunTpsim("run " + kRef + " --set mapping.seed=5 --set mapping.grid_rows=2 --quiet", &out), 0)
      << out;
  EXPECT_NE(out.find("tpsim: warning: mapping.seed is ignored: placement linear does not read it (placement "
                     "random does)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("tpsim: warning: mapping.grid_rows is ignored: no op class is mapped to mn_2d "
                     "(mapping.partition k_split, no mn_2d override)"),
            std::string::npos)
      << out;
  ASSERT_EQ(RunTpsim("run " + kRef + " --set mapping.seed=5 --set mapping.placement=random --quiet", &out), 0)
      << out;
  EXPECT_EQ(out.find("is ignored"), std::string::npos) << out;
  // A request stream beside the fixed batch is served by tpsim serve, not run.
  ASSERT_EQ(RunTpsim("run " + kRef + " --set workload.requests.synthetic.num_requests=5 --quiet", &out), 0)
      << out;
  EXPECT_NE(out.find("tpsim: warning: workload.requests is ignored: tpsim run times the fixed batch "
                     "(workload.batch 1 x seq_len 256); tpsim serve serves the request stream"),
            std::string::npos)
      << out;
}

// A flag of one value given twice kept the last, silently (`--out a --out b` wrote b only): it is
// a usage error; --set adds up.
TEST_F(RunCli, AOneValueFlagGivenTwiceIsRefused) {
  std::string out;
  EXPECT_EQ(RunTpsim("run " + kRef + " --quiet --engine tlm --engine analytical", &out), 2) << out;
  EXPECT_NE(out.find("--engine given twice ('tlm' and 'analytical'): give it once"), std::string::npos)
      << out;
  EXPECT_EQ(RunTpsim("describe " + kRef + " --model qwen3-0.6b --model=qwen3-8b", &out), 2) << out;
  EXPECT_NE(out.find("--model given twice ('qwen3-0.6b' and 'qwen3-8b')"), std::string::npos) << out;
  EXPECT_EQ(
      RunTpsim("run " + kRef + " --quiet --set workload.decode_steps=1 --set workload.seq_len=16", &out), 0)
      << out;
  // One field given twice by --set kept the last, silently: it still does (a script's base line
  // and its overrides), said.
  EXPECT_EQ(
      RunTpsim("run " + kRef + " --quiet --set workload.decode_steps=5 --set workload.decode_steps=6", &out),
      0)
      << out;
  EXPECT_NE(
      out.find("tpsim: warning: --set workload.decode_steps is given 2 times ('5', then '6'): the last is "
               "used"),
      std::string::npos)
      << out;
}

// A flag's value that is the next option was taken as the value (`--out --quiet` wrote a file
// named --quiet and the run was not quiet; `agree --csv --jobs 2` wrote --jobs): exit 2.
TEST_F(RunCli, AnOptionGivenAsAFlagsValueIsRefused) {
  struct Case {
    std::string args, says;
  };
  const std::vector<Case> cases = {
      {"run " + kRef + " --out --quiet",
       "--out needs a value, got the option '--quiet' (a file of that name is "
       "./--quiet)"},
      {"agree --count 1 --csv --jobs 2", "--csv needs a value, got the option '--jobs'"},
      {"serve " + kRef + " --requests-csv --quiet",
       "--requests-csv: : needs a value, got the option '--quiet'"},
      {"sweep configs/sweeps/reference-qwen3-4b-noc.textproto --db --jobs",
       "--db needs a value, got the option '--jobs'"},
      {"search " + kRef + " --db --top 3", "--db needs a value, got the option '--top'"},
      {"collectives h100-sxm-8 --op all_reduce --ranks 8 --sizes 1M --csv --algo", "--csv needs a value"},
  };
  for (const Case& c : cases) {
    std::string out;
    EXPECT_EQ(RunTpsim(c.args, &out), 2) << c.args << "\n" << out;
    EXPECT_NE(out.find(c.says), std::string::npos) << c.args << "\n" << out;
  }
  EXPECT_FALSE(fs::exists(fs::path(TPSIM_SOURCE_DIR) / "--quiet"));
  EXPECT_FALSE(fs::exists(fs::path(TPSIM_SOURCE_DIR) / "--jobs"));
}

// A trace name that says neither format (`t.json.gz`, `t.txt`) was written as protobuf, silently:
// exit 2 before the run, in run and serve; a device is taken as it is.
TEST_F(RunCli, ATraceNameThatSaysNoFormatIsRefused) {
  std::string out;
  for (const std::string& cmd : {"run " + kRef + " --set workload.decode_steps=1 --quiet",
                                 std::string("serve configs/experiments/serving-fused.textproto --set "
                                             "workload.requests.synthetic.num_requests=3")}) {
    EXPECT_EQ(RunTpsim(cmd + " --trace " + P("t.json.gz"), &out), 2) << out;
    EXPECT_NE(out.find("<command line>:1:1: --trace: " + P("t.json.gz") +
                       ": a trace's name says its format: FILE.json (Chrome JSON) or FILE.pftrace"),
              std::string::npos)
        << out;
    EXPECT_FALSE(fs::exists(P("t.json.gz")));
  }
  EXPECT_EQ(RunTpsim("run " + kRef + " --set workload.decode_steps=1 --quiet --trace /dev/null", &out), 0)
      << out;
  EXPECT_EQ(
      RunTpsim("run " + kRef + " --set workload.decode_steps=1 --quiet --trace " + P("t.perfetto-trace"),
               &out),
      0)
      << out;
}

// The decode steps --trace-steps keeps for the trace were not counted by the memory guard: every
// one of 3,000 steps passed a 1 GB --max-memory and peaked at 3.75 GB (a 9.1 GB trace).
TEST_F(RunCli, TracedStepsCountAgainstMaxMemory) {
  const std::string run =
      "run configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto --quiet --max-memory 1G ";
  std::string out;
  EXPECT_EQ(
      RunTpsim(run + "--set workload.decode_steps=3000 --trace " + P("t.json") + " --trace-steps every:1",
               &out),
      2)
      << out;
  EXPECT_NE(
      out.find("more than --max-memory 1.07 GB: lower workload.decode_steps, the layers or mapping.tp, or "
               "raise --max-memory (--trace-steps keeps 3000 decode steps whole for the trace)"),
      std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(P("t.json")));
  EXPECT_EQ(
      RunTpsim(run + "--set workload.decode_steps=300 --trace " + P("t.json") + " --trace-steps every:100",
               &out),
      0)
      << out;
}

// --trace-steps past the run said "is not first, last, every:N" for every:N of many digits and
// "no decode step selected" without the spec or the step count.
TEST_F(RunCli, TraceStepsPastTheRunNameTheSpecAndTheSteps) {
  std::string out;
  const std::string run = "run " + kRef + " --quiet --trace " + P("t.json") + " --trace-steps ";
  EXPECT_EQ(RunTpsim(run + "every:99999999999999999999", &out), 2) << out;
  EXPECT_NE(
      out.find("--trace-steps: 'every:99999999999999999999': 99999999999999999999 is past the 20 decode "
               "steps (workload.decode_steps)"),
      std::string::npos)
      << out;
  // Alone or beside an item that selects steps (every:1000,first dropped it without a word).
  for (const char* spec : {"every:1000", "every:1000,first", "last,every:25"}) {
    EXPECT_EQ(RunTpsim(run + spec, &out), 2) << out;
    const std::string item =
        std::string(spec).find("every:1000") != std::string::npos ? "every:1000" : "every:25";
    EXPECT_NE(
        out.find("--trace-steps: '" + item + "' selects no decode step of the 20 (workload.decode_steps)"),
        std::string::npos)
        << spec << "\n"
        << out;
  }
}

// A failed write to standard output (a full disk) exited 0 with the table lost: exit 1, said.
TEST_F(RunCli, AFailedWriteToStandardOutputExitsOne) {
  for (const std::string& args : {std::string("list"), "run " + kRef + " --set workload.decode_steps=1"}) {
    const tpsim::test::CommandOutcome o = tpsim::test::RunCommand(
        "cd '" TPSIM_SOURCE_DIR "' && '" TPSIM_BINARY_DIR "/bin/tpsim' " + args + " 2>&1 >/dev/full");
    EXPECT_EQ(o.status, 1) << args << "\n" << o.output;
    EXPECT_NE(o.output.find("tpsim: error: writing standard output failed"), std::string::npos) << o.output;
  }
}

// A chip, model or sweep file given as the experiment is named as what it is (it said
// "clock_mhz: : unknown field of Experiment"); another file keeps the parser's error.
TEST_F(RunCli, AChipModelOrSweepFileGivenAsTheExperimentIsNamed) {
  std::string out;
  EXPECT_EQ(RunTpsim("run configs/chips/wafer-8x8.textproto", &out), 2) << out;
  EXPECT_NE(
      out.find("<command line>:1:1: EXPERIMENT: configs/chips/wafer-8x8.textproto: is a chip config, not an "
               "experiment: an experiment names it with chip_file"),
      std::string::npos)
      << out;
  EXPECT_EQ(RunTpsim("describe configs/sweeps/serving-rate.textproto", &out), 2) << out;
  EXPECT_NE(out.find("is a sweep, not an experiment: run it with tpsim sweep"), std::string::npos) << out;
  EXPECT_EQ(RunTpsim("run configs/models/qwen3-4b.json", &out), 2) << out;
  EXPECT_NE(out.find("is a model config, not an experiment"), std::string::npos) << out;
  EXPECT_EQ(RunTpsim("run README.md", &out), 2) << out;
  EXPECT_EQ(out.find("not an experiment"), std::string::npos) << out;
}

// The TLM engine's network ports and router buffers are named as ignored on the analytical
// engine (--set chip.noc.port_bandwidth_gbps=1e-300 printed the same run, silently); the TLM
// engine reads them.
TEST_F(RunCli, TlmOnlyNocFieldsAreNamedAsIgnoredOnTheAnalyticalEngine) {
  std::string out;
  const std::string one =
      " --set workload.decode_steps=1 --set workload.num_layers=1 --set mapping.pipeline_stages=1 --quiet";
  ASSERT_EQ(RunTpsim("run " + kRef + one +
                         " --set chip.noc.port_bandwidth_gbps=1e-300 --set chip.noc.router_buffer_packets=4",
                     &out),
            0)
      << out;
  EXPECT_NE(out.find("tpsim: warning: chip.noc.port_bandwidth_gbps is ignored: engine analytical does not "
                     "model the cores' network ports (engine tlm does)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("tpsim: warning: chip.noc.router_buffer_packets is ignored: engine analytical does not "
                     "model router buffers (engine tlm does)"),
            std::string::npos)
      << out;
  ASSERT_EQ(RunTpsim("run " + kRef + one + " --engine tlm --set chip.noc.router_buffer_packets=4", &out), 0)
      << out;
  EXPECT_EQ(out.find("is ignored"), std::string::npos) << out;
}

// On a GPU node the kernels are timed from chip.gpu: a --set of the core block, a memory's rate,
// the in-switch model or the clock printed the same run, silently (and a memory's rate refused
// runs it never timed); a link field where the Program has no transfer, the same.
// An algorithm the lowering replaced is warned once per reason: halving_doubling over 7 ranks ran as
// ring, which only --ops's column said (the title said halving_doubling). The shipped experiments
// (MoE all-to-alls follow mapping.moe.all_to_all) warn nothing.
TEST_F(RunCli, ACollectiveTheLoweringReplacedIsWarned) {
  const std::string seven =
      "run " + kRef +
      " --quiet --set model.num_attention_heads=42 --set model.num_key_value_heads=42 --set "
      "model.head_dim=64 "
      "--set mapping.pipeline_stages=1 --set mapping.tp=7 --set workload.num_layers=1 --set "
      "workload.decode_steps=1";
  std::string out;
  ASSERT_EQ(RunTpsim(seven + " --set mapping.collective=halving_doubling", &out), 0) << out;
  const std::string w =
      "tpsim: warning: mapping.collective halving_doubling ran as ring (halving_doubling needs a "
      "power-of-two "
      "rank count, got 7: used ring) on some collectives\n";
  EXPECT_NE(out.find(w), std::string::npos) << out;
  EXPECT_EQ(out.find(w), out.rfind(w)) << out;  // once
  ASSERT_EQ(RunTpsim(seven + " --set mapping.collective=ring", &out), 0) << out;
  EXPECT_EQ(out.find("mapping.collective"), std::string::npos) << out;
  for (const char* e : {"moe-qwen3-30b-a3b", "moe-qwen3-30b-a3b-dp", "reference-qwen3-4b"}) {
    ASSERT_EQ(RunTpsim("run configs/experiments/" + std::string(e) +
                           ".textproto --quiet --set workload.num_layers=16 --set workload.decode_steps=1",
                       &out),
              0)
        << out;
    EXPECT_EQ(out.find("mapping.collective"), std::string::npos) << e << "\n" << out;
  }
}

TEST_F(RunCli, GpuNodeFieldsNoKernelReadsAreNamedAsIgnored) {
  const std::string h200 =
      "run configs/experiments/moe-qwen3-30b-a3b-h200.textproto --quiet --set "
      "workload.num_layers=1 --set workload.decode_steps=1";
  std::string base, out;
  ASSERT_EQ(RunTpsim(h200, &base), 0) << base;
  EXPECT_EQ(base.find("is ignored"), std::string::npos) << base;  // the shipped file's blocks: nothing said
  ASSERT_EQ(
      RunTpsim(h200 + " --set chip.core.matrix_utilization=1e-6 --set chip.memory[0].bandwidth_gbps=1e-9 "
                      "--set chip.collectives.in_switch_bandwidth_gbps=1e-3 --set chip.clock_mhz=1 "
                      "--set chip.noc.link_bandwidth_gbps=1e-12 --set chip.energy.dram_pj_per_byte=5",
               &out),
      0)
      << out;
  EXPECT_EQ(out.substr(out.rfind("total ")), base.substr(base.rfind("total ")));  // the same run
  for (const char* w :
       {"chip.core.matrix_utilization is ignored: a GPU node's kernels are timed from chip.gpu",
        "chip.memory[0].bandwidth_gbps is ignored: a GPU node's HBM is timed inside its kernels",
        "chip.collectives.in_switch_bandwidth_gbps is ignored: a GPU node's collectives are NCCL kernels",
        "chip.clock_mhz is ignored: on a GPU node it times only noc.router_latency_cycles, which is 0 here",
        "chip.noc.link_bandwidth_gbps is ignored: this run's Program has no transfer",
        "chip.energy.dram_pj_per_byte is ignored: a GPU node's memory traffic is charged at "
        "energy.hbm_pj_per_byte"})
    EXPECT_NE(out.find(std::string("tpsim: warning: ") + w), std::string::npos) << w << "\n" << out;
  // A collective algorithm other than ring or nvls is read nowhere on a GPU node whose collectives
  // are all NCCL kernels (mesh_2d gave ring's numbers and the title said mesh_2d, silently).
  ASSERT_EQ(RunTpsim(h200 + " --set mapping.collective=mesh_2d", &out), 0) << out;
  EXPECT_NE(
      out.find("tpsim: warning: mapping.collective mesh_2d is ignored: a GPU node's collectives are NCCL "
               "kernels, whose algorithm only ring or nvls forces"),
      std::string::npos)
      << out;
  ASSERT_EQ(RunTpsim(h200 + " --set mapping.collective=ring", &out), 0) << out;
  EXPECT_EQ(out.find("mapping.collective"), std::string::npos) << out;
  // nvls forced on a GPU node without NVLink SHARP: refused at validation (it stopped at the first
  // collective, "algorithm nvls is not available", exit 1).
  EXPECT_EQ(RunTpsim(h200 + " --set mapping.collective=nvls --set chip.gpu.nvls=false", &out), 2) << out;
  EXPECT_NE(out.find("mapping.collective: nvls: needs chip.gpu.nvls true on a GPU node (NVLink SHARP)"),
            std::string::npos)
      << out;
  // Two stages hand their activations over the links: the link fields are read, nothing said.
  ASSERT_EQ(
      RunTpsim(h200 + " --set mapping.tp=4 --set mapping.pipeline_stages=2 --set mapping.moe.ep=4 --set "
                      "workload.num_layers=2 --set chip.noc.link_latency_ns=1000",
               &out),
      0)
      << out;
  EXPECT_EQ(out.find("is ignored"), std::string::npos) << out;
}

// A mapping.moe block on a model without experts is named as ignored (it was silent, an invalid
// capacity_factor included); on a MoE model nothing is said.
TEST_F(RunCli, MoeMappingOnADenseModelIsNamedAsIgnored) {
  std::string out;
  ASSERT_EQ(RunTpsim("run " + kRef + " --set mapping.moe.capacity_factor=-1 --quiet", &out), 0) << out;
  EXPECT_NE(out.find("tpsim: warning: mapping.moe is ignored: qwen3-4b has no experts"), std::string::npos)
      << out;
  ASSERT_EQ(RunTpsim("run configs/experiments/moe-qwen3-30b-a3b.textproto --model qwen3-4b --quiet", &out), 0)
      << out;
  EXPECT_NE(out.find("mapping.moe is ignored: qwen3-4b has no experts"), std::string::npos) << out;
  ASSERT_EQ(RunTpsim("run configs/experiments/moe-qwen3-30b-a3b.textproto --quiet", &out), 0) << out;
  EXPECT_EQ(out.find("mapping.moe is ignored"), std::string::npos) << out;
  EXPECT_EQ(out.find("workload.dtype fp32"), std::string::npos) << out;
  // An fp32 workload's GEMMs take bf16's time (the matrix unit's only modelled rate): said.
  ASSERT_EQ(RunTpsim("run " + kRef +
                         " --set workload.dtype=fp32 --set workload.num_layers=2 --set "
                         "mapping.pipeline_stages=2 --quiet",
                     &out),
            0)
      << out;
  EXPECT_NE(out.find("tpsim: warning: workload.dtype fp32: GEMMs are timed at the matrix unit's bf16 rate"),
            std::string::npos)
      << out;
}

TEST_F(RunCli, BadEngineAndUnwritableOutput) {
  std::string out;
  EXPECT_EQ(RunTpsim("run " + kRef + " --engine spice", &out), 2);
  EXPECT_NE(out.find("unknown engine"), std::string::npos) << out;
  EXPECT_EQ(RunTpsim("run " + kRef + " --quiet --out /nonexistent-dir/r.json", &out), 1);
  EXPECT_NE(out.find("cannot write"), std::string::npos) << out;
}

TEST_F(RunCli, OutputsNameTheRunThatWasMade) {
  // --model and --set show in the name (result, trace) and a title says what ran.
  std::string out;
  ASSERT_EQ(RunTpsim("run " + kRef +
                         " --model qwen3-8b --set mapping.tp=2 --set workload.num_layers=2 --set "
                         "mapping.pipeline_stages=2 --set workload.decode_steps=1 --out " +
                         P("r.json") + " --trace " + P("t.json"),
                     &out),
            0)
      << out;
  const std::string name =
      "reference-qwen3-4b [model=qwen3-8b, tp=2, num_layers=2, pipeline_stages=2, decode_steps=1]";
  const std::string title =
      "qwen3-8b on wafer-8x8: TP 2 x 2 stages, k_split, linear placement, ring collective, analytical engine";
  auto r = nlohmann::json::parse(Slurp(P("r.json")));
  EXPECT_EQ(r["experiment"], name);
  EXPECT_EQ(r["title"], title);
  EXPECT_NE(r["config"].get<std::string>().find("name: \"" + name + "\""), std::string::npos);
  auto t = nlohmann::json::parse(Slurp(P("t.json")));
  EXPECT_NE(t["metadata"]["tpsim_config"].get<std::string>().find(name), std::string::npos);
  // Default output: the name, the title, the layer table and the summary; no op table.
  EXPECT_EQ(out.rfind(name + " (analytical engine)\n" + title + "\n\n", 0), 0u) << out;
  EXPECT_NE(out.find("\nsummary\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("compute_us"), std::string::npos) << out;
  ASSERT_EQ(
      RunTpsim("run " + kRef + " --set workload.num_layers=1 --set mapping.pipeline_stages=1 --ops", &out),
      0);
  EXPECT_NE(out.find("compute_us"), std::string::npos) << out;
  EXPECT_NE(out.find("q_proj.reduce_scatter"), std::string::npos) << out;
  // --set name=... names it outright; no override: the file's name.
  ASSERT_EQ(
      RunTpsim("run " + kRef + " --set name=mine --set mapping.tp=2 --quiet --out " + P("n.json"), &out), 0);
  EXPECT_EQ(nlohmann::json::parse(Slurp(P("n.json")))["experiment"], "mine");
  ASSERT_EQ(RunTpsim("run " + kRef + " --quiet --out " + P("m.json"), &out), 0);
  EXPECT_EQ(nlohmann::json::parse(Slurp(P("m.json")))["experiment"], "reference-qwen3-4b");
}

TEST_F(RunCli, ContradictoryReuseOptionsAreUsageErrors) {
  // Each pair asks for two things at once: a usage error (exit 2) that names both, not one
  // of them silently dropped.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--reuse --no-reuse", "--reuse and --no-reuse contradict each other"},
      {"--no-reuse --reuse", "--reuse and --no-reuse contradict each other"},
      {"--no-reuse --step-by-step", "--step-by-step times reused decode steps; --no-reuse lowers every step"},
      {"--step-by-step --dump-program " + P("p.txt"),
       "--step-by-step times reused decode steps; --dump-program needs every step lowered"},
  };
  for (const auto& [flags, message] : cases) {
    std::string out;
    EXPECT_EQ(RunTpsim("run " + kRef + " --set workload.decode_steps=20 --quiet " + flags, &out), 2) << flags;
    EXPECT_NE(out.find(message), std::string::npos) << flags << ":\n" << out;
  }
}

TEST_F(RunCli, ReuseStatsCountReplayedTasks) {
  // TPSIM_REUSE_STATS: one stderr line with what the replay of steps timed step by step did;
  // the reference's 120 steps (112 timed step by step, 3,580 tasks each) are mostly replayed.
  setenv("TPSIM_REUSE_STATS", "1", 1);
  std::string out;
  const int status =
      RunTpsim("run " + kRef + " --set workload.decode_steps=120 --quiet --step-by-step", &out);
  unsetenv("TPSIM_REUSE_STATS");
  ASSERT_EQ(status, 0) << out;
  const std::string key = "tpsim: step by step: ";
  const size_t at = out.find(key);
  ASSERT_NE(at, std::string::npos) << out;
  const uint64_t replayed = std::stoull(out.substr(at + key.size()));
  EXPECT_GT(replayed, 112u * 3580 / 2) << out;
  EXPECT_LE(replayed, 112u * 3580) << out;
  EXPECT_NE(out.find(" tasks replayed, 0 rollbacks to the event loop"), std::string::npos) << out;
  EXPECT_NE(
      out.find("tpsim: decode steps timed from one lowered step: step by step (RunOptions::step_by_step)\n"),
      std::string::npos)
      << out;
}

TEST_F(RunCli, ReuseStatsNameTheWayAndWhyNotTheOthers) {
  // Without --step-by-step the reference's 100 steps are a periodic schedule (its steps
  // overlap: weights are read ahead): stderr says so and why they are not separate steps, and
  // prints no replay line (no step was timed step by step).
  setenv("TPSIM_REUSE_STATS", "1", 1);
  std::string out;
  const int status = RunTpsim("run " + kRef + " --set workload.decode_steps=100 --quiet", &out);
  unsetenv("TPSIM_REUSE_STATS");
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("tpsim: decode steps timed from one lowered step: a periodic schedule (a decode step's "
                     "first tasks do not wait for every end of the step before)\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("tpsim: step by step:"), std::string::npos) << out;
}

TEST_F(RunCli, TimesPastTheClockAreAnErrorNamingTheCause) {
  // 1e-9 GB/s links: a transfer of the reference layer takes longer than 2^63 ps. Before,
  // the saturated maximum was printed as the result with exit 0.
  std::string out;
  EXPECT_EQ(RunTpsim("run " + kRef + " --set chip.noc.link_bandwidth_gbps=1e-9 --quiet", &out), 1) << out;
  EXPECT_NE(out.find("a transfer of"), std::string::npos) << out;
  EXPECT_NE(out.find("106.7 days"), std::string::npos) << out;
  EXPECT_NE(out.find("chip.noc.link_bandwidth_gbps"), std::string::npos) << out;
  EXPECT_EQ(out.find("9223372036854"), std::string::npos) << "no saturated time printed as a result:\n"
                                                          << out;
}

TEST_F(RunCli, TlmTimesPastTheClockStopWithTheCause) {
  // The TLM engine's network and DRAM saturate their times at the 2^63 ps clock and stop the
  // run on the task that passes it. Before, a time past it wrapped SystemC's clock and these
  // runs never ended (mesh-4x4-hbm: links and the HBM over them; the reference: per-core DRAM;
  // finite router buffers).
  const std::string mesh =
      " configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto --engine tlm --quiet --set ";
  const std::string ref = " " + kRef + " --engine tlm --quiet --set ";
  for (const auto& [args, what] : std::vector<std::pair<std::string, std::string>>{
           {mesh + "chip.noc.link_bandwidth_gbps=1e-9", "a transfer of"},
           {mesh + "chip.memory[0].bandwidth_gbps=1e-9", "a DRAM read of"},
           // (efficiency=1e-300, one read alone past the clock, is a config error at that field
           // since 2026-12-08: Hardening.CertainClockOverflowIsRefusedAtValidation.)
           // The first task past the clock is a read of the HBM over the links since the TLM
           // engine takes same-time ties by id (it was a transfer: task 90, then task 108).
           {mesh + "chip.noc.router_buffer_packets=4 --set chip.noc.link_bandwidth_gbps=1e-9",
            "a DRAM read of"},
           {ref + "chip.noc.router_buffer_packets=4 --set chip.noc.link_bandwidth_gbps=1e-9",
            "a transfer of"}}) {
    std::string out;
    EXPECT_EQ(RunTpsim("run" + args, &out), 1) << args << "\n" << out;
    EXPECT_NE(out.find(what), std::string::npos) << args << "\n" << out;
    EXPECT_NE(out.find("106.7 days"), std::string::npos) << args << "\n" << out;
  }
}

// Streamed weights and a KV cache off chip are named by the chip's memory kind: mesh-4x4-hbm's
// memories are all HBM (it said "weights in dram", where `tpsim describe` said HBM); the
// reference's are DRAM.
TEST_F(RunCli, OffChipLocationsNameTheMemoryKind) {
  const std::string small =
      " --set workload.num_layers=1 --set mapping.pipeline_stages=1 --set "
      "workload.decode_steps=0 --set mapping.weights=dram --set chip.core.sram_bytes=131072";
  std::string out;
  ASSERT_EQ(RunTpsim("run configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto" + small, &out), 0) << out;
  EXPECT_NE(out.find("  weights in hbm (streamed each use), KV cache in hbm\n"), std::string::npos) << out;
  ASSERT_EQ(RunTpsim("run " + kRef + small, &out), 0) << out;
  EXPECT_NE(out.find("  weights in dram (streamed each use), KV cache in dram\n"), std::string::npos) << out;
}

TEST_F(RunCli, MemoryReadsOverLinksPastTheClockNameTheLinks) {
  // mesh-4x4-hbm's HBM is reached over the mesh (arch::Chip::MemoryPath): with 1e-9 GB/s links
  // a weight read (2 MiB of SRAM: the weights stream) passes the clock because of the links,
  // and the message names them as well as the channel. Before, it named the channel's
  // bandwidth only (the HBM's 819 GB/s). A stacked channel (the reference's) has no links to
  // name.
  std::string out;
  EXPECT_EQ(RunTpsim("run configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto --quiet --set "
                     "workload.num_layers=2 --set mapping.pipeline_stages=1 --set workload.decode_steps=2 "
                     "--set workload.seq_len=128 --set chip.core.sram_bytes=2097152 --set "
                     "chip.noc.link_bandwidth_gbps=1e-9",
                     &out),
            1)
      << out;
  EXPECT_NE(out.find("a DRAM read of"), std::string::npos) << out;
  EXPECT_NE(
      out.find("check chip.memory[].bandwidth_gbps and efficiency, and chip.noc.link_bandwidth_gbps (and "
               "port_bandwidth_gbps on the TLM engine): core "),
      std::string::npos)
      << out;
  EXPECT_NE(out.find(" reaches the channel over links"), std::string::npos) << out;
  EXPECT_EQ(RunTpsim("run " + kRef + " --quiet --set chip.memory[0].bandwidth_gbps=1e-7", &out), 1) << out;
  EXPECT_NE(out.find("a DRAM read of"), std::string::npos) << out;
  EXPECT_EQ(out.find("over links"), std::string::npos) << out;
}

TEST_F(RunCli, GpuKernelsPastTheClockNameTheGpuFields) {
  // On a GPU node a kernel's time comes from chip.gpu (arch/gpu), not the core's clock and
  // units: the message names those (before, "a compute task on core 0 ... check
  // chip.clock_mhz, chip.core.matrix_utilization").
  // operand_flops_per_byte: a GEMM's main loop takes (tm + tn) x bytes x this / peak a k step
  // (arch/gpu/gemm.cc), so at 1e18 the first GEMM passes the clock; the message did not name it.
  for (const std::string field : {"chip.gpu.hbm_bandwidth_gbps=1e-9", "chip.gpu.bf16_tflops=1e-300",
                                  "chip.gpu.operand_flops_per_byte=1e18"}) {
    std::string out;
    EXPECT_EQ(
        RunTpsim("run configs/experiments/moe-qwen3-30b-a3b-h200.textproto --quiet --set " + field, &out), 1)
        << field << "\n"
        << out;
    EXPECT_NE(out.find("a kernel on GPU 0 (task 8, op qkv_proj)"), std::string::npos) << field << "\n" << out;
    EXPECT_NE(out.find("check chip.gpu.bf16_tflops (fp16_tflops, fp8_tflops), tensor_efficiency, "
                       "operand_flops_per_byte, hbm_bandwidth_gbps and hbm_efficiency"),
              std::string::npos)
        << field << "\n"
        << out;
  }
  // A collective kernel names NCCL's fields (it named the GEMM model's).
  std::string out;
  EXPECT_EQ(RunTpsim("run moe-mixtral-8x7b --set chip.gpu.nccl_link_gbps=1e-30 --set workload.decode_steps=1 "
                     "--quiet",
                     &out),
            1)
      << out;
  EXPECT_NE(out.find("a collective kernel on GPU 0 (task 80, op o_proj.reduce_scatter)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("check chip.gpu.nccl_link_gbps, nvlink_links, nvlink_link_gbps"), std::string::npos)
      << out;
}

TEST_F(RunCli, CollectivesPastTheLinkCalendarsNameACommandWithTheTlmEngine) {
  // An all-reduce of 2 MiB over 8 ranks of wafer-8x8 sends 262,144 B chunks: at 1e-9 GB/s one
  // holds a link 262,144 / 1e-9 ns = 72.8 hours, past the analytical link calendars' 2.5. The
  // error advised "--engine tlm", which `tpsim collectives` refuses (it has no --engine).
  std::string out;
  EXPECT_EQ(
      RunTpsim(
          "collectives wafer-8x8 --op all_reduce --ranks 8 --sizes 2M --set noc.link_bandwidth_gbps=1e-9",
          &out),
      1)
      << out;
  EXPECT_NE(out.find("holds a link for 72.8 hours"), std::string::npos) << out;
  EXPECT_NE(
      out.find("the TLM engine times it (tpsim run --engine tlm on an experiment with this collective)"),
      std::string::npos)
      << out;
  EXPECT_EQ(out.find("(--engine tlm)"), std::string::npos) << out;
}

TEST_F(RunCli, ProgressLineOnATerminalOnly) {
  // 800 decode steps, every one lowered, take more than a second: on a terminal (script(1)
  // gives one) stderr shows the stage and the time; into a pipe nothing, so redirected output
  // stays the same.
  const std::string args = kRef + " --set workload.decode_steps=800 --no-reuse --quiet";
  std::string out;
  ASSERT_EQ(RunTpsim("run " + args, &out), 0) << out;
  EXPECT_EQ(out.find("tpsim run:"), std::string::npos) << out;
  const std::string cmd = "cd '" TPSIM_SOURCE_DIR "' && script -qec \"'" TPSIM_BINARY_DIR "/bin/tpsim' run " +
                          args + "\" /dev/null 2>&1";
  const tpsim::test::CommandOutcome run = tpsim::test::RunCommand(cmd);
  const std::string& tty = run.output;
  ASSERT_EQ(run.status, 0) << tty;
  EXPECT_NE(tty.find("\r\033[Ktpsim run: "), std::string::npos) << tty;
  EXPECT_NE(tty.find(" s\r\033[K"), std::string::npos) << "the line is erased at the end:\n" << tty;
  EXPECT_NE(tty.find("total "), std::string::npos) << tty;
  // tpsim collectives too (a direct all-reduce of 1G over 1024 ranks of wafer-32x32 ran 148 s
  // without a word); this one takes about 2 s.
  const std::string coll = "collectives wafer-32x32 --op all_reduce --ranks 384 --algo direct --sizes 1M";
  ASSERT_EQ(RunTpsim(coll, &out), 0) << out;
  EXPECT_EQ(out.find("tpsim collectives: timing"), std::string::npos) << out;
  const tpsim::test::CommandOutcome c =
      tpsim::test::RunCommand("cd '" TPSIM_SOURCE_DIR "' && script -qec \"'" TPSIM_BINARY_DIR "/bin/tpsim' " +
                              coll + "\" /dev/null 2>&1");
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_NE(c.output.find("\r\033[Ktpsim collectives: timing "), std::string::npos) << c.output;
  EXPECT_NE(c.output.find(", 0 of 1 sizes"), std::string::npos) << c.output;
}

}  // namespace

namespace {

// Counts on the command line are whole numbers: std::stoul took "-1" as 2^64 - 1 (`--top -1`
// listed every candidate, `agree --count -1` drew 4,294,967,295 experiments) and "2x" as 2.
// A value repeated in a search list is searched once (each candidate was searched and counted
// on the front once per repeat: `--tp 4,4 --stages 16,16 --partitions megatron,megatron
// --collectives ring,ring` gave 32 candidates, 32 points on the front, all one mapping), and a
// search with no feasible candidate says why (it said only "no feasible candidate").
TEST_F(RunCli, SearchListsAreSetsAndNoFeasibleCandidateSaysWhy) {
  std::string out;
  ASSERT_EQ(RunTpsim("search " + kRef +
                         " --tp 4,4 --stages 16,16 --tp 4 --partitions megatron,megatron --placements ring "
                         "--collectives ring,ring --spans stage --confirm 0",
                     &out),
            0)
      << out;
  EXPECT_NE(out.find("  1 candidates: 1 simulated"), std::string::npos) << out;
  EXPECT_NE(out.find("Pareto front (total latency, tokens/s per chip, energy per token), 1 points"),
            std::string::npos)
      << out;
  ASSERT_EQ(RunTpsim("search " + kRef +
                         " --tp 3 --stages 8,16 --partitions megatron --placements ring --collectives ring "
                         "--spans stage --confirm 0",
                     &out),
            1)
      << out;
  EXPECT_NE(out.find("no feasible candidate\n  2 candidates: "), std::string::npos) << out;
  EXPECT_NE(out.find("mapping.tp: 3: attention splits by heads: num_attention_heads (32) must divide by tp"),
            std::string::npos)
      << out;
  // Served requests of one output token have no TPOT (NaN, as the store's NULL): not ranked,
  // and named as the reason (they were 0 ms, the best).
  ASSERT_EQ(
      RunTpsim(
          "search configs/experiments/serving-fused.textproto --set "
          "workload.requests.synthetic.num_requests=5 --set workload.requests.synthetic.output_tokens.min=1 "
          "--set workload.requests.synthetic.output_tokens.max=1 --objective tpot --tp 4 --stages 1 "
          "--partitions megatron --placements linear --collectives ring --confirm 0",
          &out),
      1)
      << out;
  EXPECT_NE(out.find("no feasible candidate\n  2 candidates: its tpot has no value"), std::string::npos)
      << out;
  // The expert axes on a dense model are refused (--ep 4 searched the whole dense space).
  ASSERT_EQ(RunTpsim("search " + kRef + " --ep 4", &out), 2) << out;
  EXPECT_NE(out.find("--ep is an axis of mixture-of-experts models; qwen3-4b has no experts"),
            std::string::npos)
      << out;
}

TEST_F(RunCli, CountsAreWholeNumbers) {
  for (const std::string& args :
       {"search " + kRef + " --top -1", "search " + kRef + " --confirm 2x", "search " + kRef + " --budget -1",
        "search " + kRef + " --shard -1/4", std::string("agree --seed -1"), std::string("agree --only -3")}) {
    std::string out;
    EXPECT_EQ(RunTpsim(args, &out), 2) << args << "\n" << out;
    EXPECT_NE(out.find("bad value '"), std::string::npos) << args << "\n" << out;
    // With the rule the value broke.
    EXPECT_NE(out.find("' is not a whole number in 0 .. "), std::string::npos) << args << "\n" << out;
  }
  // Counts with a narrower range than their reading say that range.
  for (const auto& [args, rule] :
       {std::pair{"search " + kRef + " --jobs 2x", "--jobs must be 1 .. 256, got '2x'"},
        {"agree --jobs 1x", "--jobs must be 1 .. 256, got '1x'"},
        {"search " + kRef + " --array-size 100001", "--array-size must be 1 .. 100000, got '100001'"},
        {"agree --count -1", "--count must be 1 .. 1000000, got '-1'"}}) {
    std::string out;
    EXPECT_EQ(RunTpsim(args, &out), 2) << args << "\n" << out;
    EXPECT_NE(out.find(rule), std::string::npos) << args << "\n" << out;
  }
}

// A search whose plainest mapping (TP 1, one stage: how `tpsim search` checks the chip, model
// and workload) would not fit the chip's memory channels still runs: each candidate is checked,
// and the one that does not fit (Qwen3-4B's 36 layers on one wafer-8x8 core, 7.35 GB in a 4
// GiB channel) is stored as invalid, never proposed.
TEST_F(RunCli, SearchChecksEachCandidateAgainstTheMemoryChannels) {
  std::string out;
  ASSERT_EQ(
      RunTpsim("search configs/experiments/default.textproto --tp 1,4 --stages 1,4 --partitions n_split "
               "--placements linear --collectives ring --spans stage --confirm 0 --jobs 1 "
               "--set workload.decode_steps=0 --set workload.seq_len=16",
               &out),
      0)
      << out;
  EXPECT_NE(out.find("3 ok, 1 invalid, 0 errors; 3 feasible"), std::string::npos) << out;
  EXPECT_NE(out.find("best (latency): tp 4 x 4 stages"), std::string::npos) << out;
}

// Command-line edges: an empty EXPERIMENT (a script's unset variable) ran the default experiment,
// exit 0; serve refused --flag=VALUE, which every other command takes; agree --only ignored the
// whole draw's flags (--csv wrote nothing, exit 0).
TEST_F(RunCli, EmptyWordsEqualsFormsAndFlagsOfTheWholeDraw) {
  std::string out;
  for (const char* cmd : {"run '' --quiet", "describe ''", "list ''"}) {
    EXPECT_EQ(RunTpsim(cmd, &out), 2) << cmd << "\n" << out;
    EXPECT_NE(out.find("is empty (a script's unset variable?)"), std::string::npos) << cmd << "\n" << out;
  }
  ASSERT_EQ(RunTpsim("serve configs/experiments/serving-fused.textproto --engine=analytical "
                     "--set=workload.requests.synthetic.num_requests=3 --slo-ttft-ms=5000 --metrics-json=" +
                         P("m.json"),
                     &out),
            0)
      << out;
  EXPECT_NE(out.find("goodput (TTFT <= 5000.000 ms)"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(P("m.json")));
  EXPECT_EQ(RunTpsim("serve configs/experiments/serving-fused.textproto --engine=", &out), 2) << out;
  EXPECT_EQ(RunTpsim("agree --only 0 --csv " + P("a.csv"), &out), 2) << out;
  EXPECT_NE(out.find("--csv is for the whole draw; --only runs one experiment"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(P("a.csv")));
}

// A layer's tensor past 2^61 bytes is refused at the field that makes it: the layer graph's
// 64-bit products wrapped (32,768 heads of 1 dimension over a 65,536-token prompt at batch
// 65,536 printed fewer FLOPs than 16,384 heads, and `run` printed wrapped spilled bytes).
TEST_F(RunCli, TensorsPast64BitsAreRefused) {
  std::string out;
  const std::string big =
      " --set workload.num_layers=1 --set mapping.pipeline_stages=1 --set workload.seq_len=65536 "
      "--set workload.batch=65536 --set model.max_position_embeddings=0 --set model.head_dim=1 "
      "--set model.num_attention_heads=32768";
  EXPECT_EQ(RunTpsim("describe " + kRef + big, &out), 2) << out;
  EXPECT_NE(
      out.find("workload.seq_len: 65536: a layer's attention scores (batch x heads x prompt x context) would "
               "take 1.84467e+19 bytes, past 2^61"),
      std::string::npos)
      << out;
  EXPECT_EQ(RunTpsim("describe " + kRef +
                         " --set model.hidden_size=1048576 --set model.num_attention_heads=4194304 "
                         "--set model.num_key_value_heads=4 --set model.head_dim=4194304",
                     &out),
            2)
      << out;
  EXPECT_NE(out.find("model.hidden_size: 1048576: a layer's weights"), std::string::npos) << out;
}

// Energy per token is a sum of per-task floats: a ring and a bidirectional ring moving the same
// bytes differed in the last bits (3e-16 relative), and the slower one stayed on the front beside
// the faster (4 points here, each ring one dominated at every printed digit). Compared to 12
// significant digits, only the two bidirectional rings remain.
TEST_F(RunCli, SearchFrontIgnoresEnergyRoundingNoise) {
  std::string out;
  ASSERT_EQ(
      RunTpsim(
          "search configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto --tp 8 --stages 1 --partitions "
          "n_split,megatron --placements snake --collectives ring,bidirectional_ring --spans stage --set "
          "workload.decode_steps=4 --jobs 1 --confirm 0 --top 0",
          &out),
      0)
      << out;
  EXPECT_NE(out.find("energy per token), 2 points;"), std::string::npos) << out;
  EXPECT_EQ(out.find(" ring                      -"), std::string::npos) << out;
}

// `tpsim search --slurm --dry-run`: the job array's script (each task one shard of the
// candidates with the space passed on, no TLM confirmation, its own store), the merge and the
// rerun; usage errors exit 2. tests/slurm/run_slurm_test.sh submits one to a real cluster.
TEST_F(RunCli, SearchSlurmDryRunWritesTheJobArray) {
  std::string out;
  ASSERT_EQ(RunTpsim("search " + kRef +
                         " --tp 1,2 --collectives auto,ring --set workload.num_layers=1 --slurm --dry-run "
                         "--array-size 3 --db " +
                         P("s.sqlite"),
                     &out),
            0)
      << out;
  for (const std::string& want :
       {std::string("#SBATCH --array=0-2"), std::string("' search '"), std::string("'--tp' '1,2'"),
        std::string("'--collectives' 'auto,ring'"), std::string("'--set' 'workload.num_layers=1'"),
        std::string("'--confirm' '0'"), std::string("--shard \"${SLURM_ARRAY_TASK_ID}/3\""),
        std::string("sweep merge '" + P("s.sqlite") + "'"), std::string("then print the front")})
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  EXPECT_TRUE(fs::exists(P("s.slurm/sweep.sbatch")));
  // More array tasks than the space's 1400 candidates: one candidate per task (before, 100000
  // tasks, 98600 of them empty, past Slurm's default MaxArraySize).
  ASSERT_EQ(RunTpsim("search " + kRef +
                         " --tp 1,2 --collectives auto,ring --set workload.num_layers=1 --slurm --dry-run "
                         "--array-size 100000 --db " +
                         P("u.sqlite"),
                     &out),
            0)
      << out;
  EXPECT_NE(out.find("--array-size 100000 is more than the search's 1400 candidates: 1400 array tasks"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("#SBATCH --array=0-1399\n"), std::string::npos) << out;
  // A shipped experiment by name: the job runs the file found (it ran `search '<cwd>/NAME'`,
  // which every task and the rerun refused: file not found).
  ASSERT_EQ(
      RunTpsim("search reference-qwen3-4b --tp 1 --collectives ring --set workload.num_layers=1 --slurm "
               "--dry-run --db " +
                   P("n.sqlite"),
               &out),
      0)
      << out;
  EXPECT_NE(out.find("' search '" TPSIM_SOURCE_DIR "/" + kRef + "'"), std::string::npos) << out;
  EXPECT_EQ(RunTpsim("search " + kRef + " --slurm --dry-run", &out), 2);
  EXPECT_NE(out.find("--slurm needs --db"), std::string::npos) << out;
  EXPECT_EQ(RunTpsim("search " + kRef + " --array-size 2 --db " + P("t.sqlite"), &out), 2);
  EXPECT_NE(out.find("--array-size needs --slurm"), std::string::npos) << out;
}

}  // namespace

namespace {

// `tpsim agree --family moe` draws MoE experiments (experiment 24 of seed 15: Qwen3-30B-A3B
// with ep 8, as the README's agree_sample_moe lists it); the dense family is the default.
TEST_F(RunCli, AgreeFamilyMoeDrawsExpertParallelExperiments) {
  std::string out;
  ASSERT_EQ(RunTpsim("agree --family moe --seed 15 --only 24", &out), 0) << out;
  EXPECT_NE(out.find("/qwen3-30b-a3b/"), std::string::npos) << out;
  EXPECT_NE(out.find("/ep8"), std::string::npos) << out;
  ASSERT_EQ(RunTpsim("agree --seed 15 --only 24", &out), 0) << out;
  EXPECT_EQ(out.find("/ep"), std::string::npos) << out;
  EXPECT_EQ(RunTpsim("agree --family sparse", &out), 2);
  EXPECT_NE(out.find("--family is dense or moe"), std::string::npos) << out;
}

}  // namespace

// A run whose decode steps are reused and that passes the 2^63 ps clock in a decode step stops
// there (exit 1, TimeOverflowError naming the task as the unrolled run names it), on both
// engines; before, it fell back to lowering every step, which the memory guard refused (exit 2:
// 1 GB over the 500 MB given). At 1 MHz and 1e-5 GB/s of DRAM the 89th decode step's weight
// read passes the clock; `--no-reuse` (without the limit) names the same task 319800.
TEST(RunCliOverflow, ReusedStepsPastTheClockNameTheTask) {
  const std::string args = "run " + kRef +
                           " --set chip.clock_mhz=1 --set chip.memory[0].bandwidth_gbps=1e-5 "
                           "--set workload.decode_steps=400 --max-memory 500M --quiet --engine ";
  for (const char* engine : {"analytical", "tlm"}) {
    std::string out;
    EXPECT_EQ(RunTpsim(args + engine, &out), 1) << engine << ": " << out;
    EXPECT_NE(
        out.find("tpsim: error: a DRAM read of 12.4518 MB on channel 6 (task 319800, decode step 89, op "
                 "up_proj), started at 106.7 days, ends later than the 106.7 days (2^63 ps)"),
        std::string::npos)
        << engine << ": " << out;
  }
}

namespace {

// ---- command-line hardening (signals, defaults, flag pairs, output paths) ----

// `tpsim ARGS...` started in the background with stdout and stderr to `log`, in the source
// folder, the shipped configs found there; its pid.
pid_t SpawnTpsim(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<std::string> all = {TPSIM_BINARY_DIR "/bin/tpsim"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::chdir(TPSIM_SOURCE_DIR) != 0 || !std::freopen(log.c_str(), "w", stderr)) ::_exit(126);
    ::dup2(2, 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Whether process `pid` still runs (a zombie, ended but not yet reaped by its new parent, does not).
bool Running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z' &&
         line[paren + 2] != 'X';
}

// `tpsim plot` and `tpsim compare --plot` run a Python script; a SIGTERM to tpsim ends it too.
// Before, the script (reparented to PID 1) ran on and wrote the picture after tpsim had exited
// 143. The interpreter is a stand-in ($TPSIM_PYTHON): it passes the matplotlib probe, says its
// pid, waits 5 seconds and "draws".
TEST_F(RunCli, PlotScriptsDieWithTpsim) {
  const std::string fake = P("python3"), pidfile = P("py.pid"), drawn = P("drawn");
  {
    std::ofstream f(fake);
    f << "#!/bin/sh\n"
         "if [ \"$1\" = \"-c\" ]; then exit 0; fi\n"
         "echo $$ > '"
      << pidfile << ".tmp' && mv '" << pidfile << ".tmp' '" << pidfile
      << "'\n"
         "sleep 5\n"
         "echo drawn > '"
      << drawn << "'\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  std::string out;
  ASSERT_EQ(RunTpsim("run " + kRef +
                         " --set workload.num_layers=2 --set mapping.pipeline_stages=2 --set "
                         "workload.decode_steps=1 --quiet --out " +
                         P("r.json"),
                     &out),
            0)
      << out;
  ASSERT_EQ(::setenv("TPSIM_PYTHON", fake.c_str(), 1), 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"plot", "heatmap", P("r.json"), "--out", P("h.png")},
        std::vector<std::string>{"compare", P("r.json"), P("r.json"), "--plot", P("c.png")}}) {
    fs::remove(pidfile);
    fs::remove(drawn);
    const pid_t tpsim = SpawnTpsim(args, P("log.txt"));
    ASSERT_GT(tpsim, 0);
    pid_t py = 0;
    int status = 0;
    bool ended = false;
    for (int i = 0; i < 3000 && py <= 0 && !ended; ++i) {
      std::ifstream(pidfile) >> py;
      if (py > 0) break;
      ended = ::waitpid(tpsim, &status, WNOHANG) == tpsim;
      ::usleep(10000);
    }
    if (py <= 0) {
      ADD_FAILURE() << args[0] << ": the script did not start: " << Slurp(P("log.txt"));
      if (!ended) ::kill(tpsim, SIGKILL), ::waitpid(tpsim, &status, 0);
      continue;
    }
    ASSERT_EQ(::kill(tpsim, SIGTERM), 0);
    ASSERT_EQ(::waitpid(tpsim, &status, 0), tpsim);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << args[0] << " status " << status;
    // The script waits 5 s before it draws; the death signal comes at once.
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {
      gone = !Running(py);
      if (!gone) ::usleep(10000);
    }
    EXPECT_TRUE(gone) << args[0] << ": the script runs on after tpsim was killed";
    EXPECT_FALSE(fs::exists(drawn)) << args[0];
    if (!gone) ::kill(py, SIGKILL);
  }
  ::unsetenv("TPSIM_PYTHON");
}

// A SIGTERM or SIGINT while an output is being written removes its temporary file
// (.NAME.tpsim-tmp-XXXXXX beside it) and still ends the process by that signal. Before, the
// partial file (tens of MB for a trace) stayed, hidden.
TEST_F(RunCli, AKilledWriteLeavesNoTemporaryFile) {
  for (const int sig : {SIGTERM, SIGINT}) {
    const fs::path sub = dir_ / ("sig" + std::to_string(sig));
    fs::create_directories(sub);
    const pid_t pid = SpawnTpsim(
        {"run", kRef, "--set", "workload.decode_steps=60", "--quiet", "--trace", (sub / "t.json").string()},
        P("log.txt"));
    ASSERT_GT(pid, 0);
    bool seen = false, exited = false;
    int status = 0;
    for (int i = 0; i < 120000 && !seen && !exited; ++i) {
      for (const auto& entry : fs::directory_iterator(sub))
        seen = seen || entry.path().filename().string().find(".tpsim-tmp-") != std::string::npos;
      if (!seen) {
        exited = ::waitpid(pid, &status, WNOHANG) == pid;
        ::usleep(500);
      }
    }
    ASSERT_TRUE(seen) << "the run ended before its trace was being written: " << Slurp(P("log.txt"));
    ASSERT_EQ(::kill(pid, sig), 0);
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    // Killed by the signal as before (128 + sig to a shell), unless the write had just ended.
    EXPECT_TRUE((WIFSIGNALED(status) && WTERMSIG(status) == sig) ||
                (WIFEXITED(status) && WEXITSTATUS(status) == 0))
        << status;
    std::vector<std::string> left;
    for (const auto& entry : fs::directory_iterator(sub))
      if (entry.path().filename() != "t.json") left.push_back(entry.path().filename().string());
    EXPECT_TRUE(left.empty()) << left.front();
  }
}

// Empty mapping.partition, placement and collective are named as what runs (megatron, linear,
// ring) in the title and by describe, and the memory estimate counts megatron's collectives for
// them, as lowering uses; an unnamed experiment takes its file's stem. Before, the title read
// `TP 4 x 2 stages, ,  placement,  collective`, the first line ` (analytical engine)`, the
// experiment '', and the estimate counted k_split's 8 collectives a layer (3384 tasks here
// against megatron's 2808).
TEST_F(RunCli, DefaultMappingFieldsAreNamedAndAnUnnamedExperimentTakesItsStem) {
  {
    std::ofstream f(P("min.textproto"));
    f << "chip_file: \"" TPSIM_SOURCE_DIR
         "/configs/chips/wafer-8x8.textproto\"\n"
         "model_name: \"qwen3-4b\"\n"
         "workload { batch: 1 seq_len: 128 decode_steps: 2 num_layers: 2 }\n"
         "mapping { tp: 4 pipeline_stages: 2 }\n";
  }
  std::string out;
  ASSERT_EQ(RunTpsim("run " + P("min.textproto") + " --out " + P("r.json"), &out), 0) << out;
  const std::string title =
      "qwen3-4b on wafer-8x8: TP 4 x 2 stages, megatron, linear placement, ring collective, analytical "
      "engine";
  EXPECT_EQ(out.rfind("min (analytical engine)\n" + title + "\n", 0), 0u) << out;
  const auto r = nlohmann::json::parse(Slurp(P("r.json")));
  EXPECT_EQ(r["experiment"], "min");
  EXPECT_EQ(r["title"], title);
  // The same run as with the defaults spelled out.
  ASSERT_EQ(RunTpsim("run " + P("min.textproto") +
                         " --set mapping.partition=megatron --set mapping.placement=linear --set "
                         "mapping.collective=ring --out " +
                         P("s.json"),
                     &out),
            0)
      << out;
  const auto s = nlohmann::json::parse(Slurp(P("s.json")));
  EXPECT_EQ(r["summary"], s["summary"]);
  EXPECT_EQ(s["title"], title);
  ASSERT_EQ(RunTpsim("describe " + P("min.textproto"), &out), 0) << out;
  EXPECT_NE(out.find("experiment  min\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  partition             megatron (default)\n"
                     "  placement             linear (default)\n"
                     "  collective            ring (default)\n"),
            std::string::npos)
      << out;
  ASSERT_EQ(RunTpsim("describe " + P("min.textproto") + " --set mapping.partition=k_split", &out), 0) << out;
  EXPECT_NE(out.find("  partition             k_split\n"), std::string::npos) << out;
  // The estimate (in the --max-memory refusal) counts the same tasks either way.
  std::string unset, megatron;
  EXPECT_EQ(RunTpsim("run " + P("min.textproto") + " --quiet --max-memory 1", &unset), 2) << unset;
  EXPECT_EQ(RunTpsim("run " + P("min.textproto") + " --quiet --max-memory 1 --set mapping.partition=megatron",
                     &megatron),
            2)
      << megatron;
  // 2 layers x 460 in the prefill, 2 decode steps x 2 layers x 208 and 3 hand-overs of 4 x 4
  // (2808 before 2026-12-07, when a decode step counted the prefill's spills: 460 a layer).
  EXPECT_NE(unset.find("about 1800 tasks"), std::string::npos) << unset;
  EXPECT_EQ(unset, megatron);
}

// --tasks without --out (the records went nowhere, and counted against --max-memory) and --ops
// with --quiet (the op table was dropped silently) are usage errors.
TEST_F(RunCli, TasksNeedOutAndOpsContradictsQuiet) {
  std::string out;
  EXPECT_EQ(RunTpsim("run " + kRef + " --tasks", &out), 2) << out;
  EXPECT_NE(out.find("tpsim run: --tasks needs --out"), std::string::npos) << out;
  EXPECT_EQ(RunTpsim("run " + kRef + " --ops --quiet", &out), 2) << out;
  EXPECT_NE(out.find("tpsim run: --ops prints the table per op; --quiet prints only the summary line"),
            std::string::npos)
      << out;
  // --tasks with --out runs.
  ASSERT_EQ(RunTpsim("run " + kRef +
                         " --set workload.num_layers=2 --set mapping.pipeline_stages=2 --set "
                         "workload.decode_steps=1 --quiet --tasks --out " +
                         P("r.json"),
                     &out),
            0)
      << out;
}

// `tpsim serve ""` (a script's unset variable) is refused as run and describe refuse it; it
// ran the next word's experiment.
TEST_F(RunCli, ServeRefusesAnEmptyExperiment) {
  std::string out;
  EXPECT_EQ(RunTpsim("serve '' configs/experiments/serving-fused.textproto", &out), 2) << out;
  EXPECT_NE(out.find("EXPERIMENT: : is empty (a script's unset variable?)"), std::string::npos) << out;
  EXPECT_EQ(out.find("goodput"), std::string::npos) << out;
  EXPECT_EQ(RunTpsim("serve ''", &out), 2) << out;
  EXPECT_NE(out.find("is empty (a script's unset variable?)"), std::string::npos) << out;
}

// --trace x.JSON is a Chrome JSON trace, as x.json is (it was a binary Perfetto trace).
TEST_F(RunCli, TraceExtensionIsReadInAnyCase) {
  std::string out;
  ASSERT_EQ(RunTpsim("run " + kRef +
                         " --set workload.num_layers=2 --set mapping.pipeline_stages=2 --set "
                         "workload.decode_steps=1 --quiet --trace " +
                         P("t.JSON") + " --out " + P("r.json"),
                     &out),
            0)
      << out;
  const std::string trace = Slurp(P("t.JSON"));
  ASSERT_FALSE(trace.empty());
  EXPECT_EQ(trace[0], '{');
  bool object = false;
  EXPECT_NO_THROW(object = nlohmann::json::parse(trace).is_object());
  EXPECT_TRUE(object);
}

// An output path that cannot be written (a missing folder, a directory) is exit 1 before the
// run: no other output is written, and the outputs are neither created nor truncated. Before,
// it was found after the whole run, which had written the outputs before it.
TEST_F(RunCli, UnwritableOutputsAreFoundBeforeTheRun) {
  const std::string small =
      " --set workload.num_layers=2 --set mapping.pipeline_stages=2 --set workload.decode_steps=1 --quiet";
  std::ofstream(P("old.json")) << "old";
  fs::create_directories(P("adir"));
  std::string out;
  for (const std::string& bad : {" --out " + P("nodir/r.json"), " --out " + P("adir"),
                                 " --out " + P("r.json") + " --trace " + P("nodir/t.json")}) {
    EXPECT_EQ(RunTpsim("run " + kRef + small + " --dump-program " + P("p.txt") + bad, &out), 1) << bad;
    EXPECT_NE(out.find("tpsim: error: cannot write "), std::string::npos) << out;
    EXPECT_EQ(out.find("total "), std::string::npos) << bad << ": it ran\n" << out;
    EXPECT_FALSE(fs::exists(P("p.txt"))) << bad;
    EXPECT_FALSE(fs::exists(P("r.json"))) << bad;
  }
  EXPECT_EQ(
      RunTpsim("run " + kRef + small + " --out " + P("old.json") + " --trace " + P("nodir/t.json"), &out), 1);
  EXPECT_EQ(Slurp(P("old.json")), "old");
  const std::string serve =
      "serve configs/experiments/serving-fused.textproto "
      "--set workload.requests.synthetic.num_requests=3 --metrics-json " +
      P("m.json");
  for (const std::string flag : {"--requests-csv", "--kv-csv", "--trace"}) {
    EXPECT_EQ(RunTpsim(serve + " " + flag + " " + P("nodir/x.json"), &out), 1) << flag << "\n" << out;
    EXPECT_NE(out.find("tpsim serve: cannot write " + P("nodir/x.json")), std::string::npos) << out;
    EXPECT_EQ(out.find("goodput"), std::string::npos) << flag << ": it ran\n" << out;
    EXPECT_FALSE(fs::exists(P("m.json"))) << flag;
  }
  EXPECT_EQ(RunTpsim(serve + " --requests-csv " + P("adir"), &out), 1) << out;
  EXPECT_NE(out.find("is a directory"), std::string::npos) << out;
  // Devices are written in place and not probed.
  EXPECT_EQ(RunTpsim("run " + kRef + small + " --out /dev/null", &out), 0) << out;
}

}  // namespace
