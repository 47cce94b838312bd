// The reproducers of issue 16 (bad input, files, resource bounds) run through the
// `tpsim` binary: each must end in exit 2 with a located one-line error, or exit 1
// with its reason, quickly; never a crash, a hang or a clobbered file.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/cli_test_util.h"

namespace {

namespace fs = std::filesystem;

using Outcome = tpsim::test::CommandOutcome;  // stdout and stderr together

Outcome Tpsim(const std::string& args, const std::string& cwd = TPSIM_SOURCE_DIR,
              const std::string& env = "") {
  return tpsim::test::RunCommand("cd '" + cwd + "' && " + env +
                                 " timeout 60 '" TPSIM_BINARY_DIR "/bin/tpsim' " + args + " 2>&1 </dev/null");
}

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

const std::string kSrc = TPSIM_SOURCE_DIR;
const std::string kRef = kSrc + "/configs/experiments/reference-qwen3-4b.textproto";
const std::string kServing = kSrc + "/configs/experiments/serving-fused.textproto";

// `text` with its "../" references made absolute, to be written in another folder.
std::string Relocated(std::string text) {
  for (size_t at = 0; (at = text.find("\"../", at)) != std::string::npos;) {
    text.insert(at + 1, kSrc + "/configs/experiments/");
    at += kSrc.size() + 24;
  }
  return text;
}

// A scratch folder per test, removed at the end.
class Hardening : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tpsim-harden-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string At(const std::string& name) const { return (dir_ / name).string(); }
  // `tpsim describe` of the file `file` here exits 2 and its output starts with `located`, the
  // error at file `at` here ("f.json") followed by its ":line:col: field: value: rule".
  void ExpectDescribeRefused(const std::string& file, const std::string& at, const std::string& located) {
    Outcome o = Tpsim("describe " + At(file));
    EXPECT_EQ(o.status, 2) << o.output;
    EXPECT_EQ(o.output.rfind(At(at) + located, 0), 0u) << o.output;
  }
  // Writes `exp` here: serving-fused with its synthetic requests replaced by the trace `trace`.
  void WriteTraceExperiment(const std::string& exp, const std::string& trace) {
    std::string text = Relocated(Read(kServing));
    const size_t a = text.find("    synthetic {"), b = text.find("  }\n}\n", a);
    text.replace(a, b - a, "    trace_file: \"" + trace + "\"\n");
    Write(At(exp), text);
  }
  fs::path dir_;
};

int Lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST_F(Hardening, LongTokenIsClippedNotACrash) {
  Write(At("u.textproto"), std::string(50000, 'A') + ": 1\n");
  Outcome o = Tpsim("describe " + At("u.textproto"));
  EXPECT_EQ(o.status, 2) << o.output.substr(0, 400);
  EXPECT_EQ(Lines(o.output), 1) << o.output.substr(0, 400);
  EXPECT_EQ(o.output.rfind(At("u.textproto") + ":1:1: ", 0), 0u) << o.output.substr(0, 400);
  EXPECT_LT(o.output.size(), 600u);
  EXPECT_NE(o.output.find("(50000 bytes)"), std::string::npos) << o.output;
}

TEST_F(Hardening, FifoAndDevicesAreRefusedNotRead) {
  ASSERT_EQ(::mkfifo(At("fifo.textproto").c_str(), 0600), 0);
  Outcome f = Tpsim("describe " + At("fifo.textproto"));
  EXPECT_EQ(f.status, 2) << f.output;
  EXPECT_NE(f.output.find("not a regular file"), std::string::npos) << f.output;
  Outcome z = Tpsim("describe /dev/zero");
  EXPECT_EQ(z.status, 2) << z.output;
  EXPECT_NE(z.output.find("not a regular file"), std::string::npos) << z.output;
  // A FIFO named by the experiment is refused at the reference.
  std::string fifo_exp = Relocated(Read(kRef));
  fifo_exp.replace(fifo_exp.find("chip_file: \""), 12, "chip_file: \"fifo.textproto\" #");
  Write(At("exp.textproto"), fifo_exp);
  Outcome r = Tpsim("describe " + At("exp.textproto"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("chip_file"), std::string::npos) << r.output;
  // The model from --model and the placement file too.
  Outcome m = Tpsim("describe " + kRef + " --model " + At("fifo.textproto"));
  EXPECT_EQ(m.status, 2) << m.output;
  Outcome p = Tpsim("describe " + kRef +
                    " --set mapping.placement=file --set mapping.placement_file=" + At("fifo.textproto"));
  EXPECT_EQ(p.status, 2) << p.output;
  EXPECT_NE(p.output.find("mapping.placement_file"), std::string::npos) << p.output;
}

TEST_F(Hardening, TextMustBeUtf8AndIsLocated) {
  Write(At("bad.textproto"), "name: \"ok\"\ndescription: \"caf\xe9\"\n");
  Outcome o = Tpsim("describe " + At("bad.textproto"));
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_EQ(o.output.rfind(At("bad.textproto") + ":2:", 0), 0u) << o.output;
  EXPECT_NE(o.output.find("not UTF-8"), std::string::npos) << o.output;
  // An escape that makes a non-UTF-8 string, and a --set value, are refused too.
  Outcome e = Tpsim("describe " + kRef + " --set 'name=\xff'");
  EXPECT_EQ(e.status, 2) << e.output;
  EXPECT_NE(e.output.find("--set name="), std::string::npos) << e.output;
  Outcome r = Tpsim("run " + kRef + " --quiet --set 'name=\xfe' --out " + At("r.json"));
  EXPECT_EQ(r.status, 2) << r.output;
}

TEST_F(Hardening, JsonErrorsHaveLineAndColumnAndSuggestions) {
  Write(At("e.json"),
        "{\n  \"name\": \"x\",\n  \"chip\": {\n    \"noc\": {\n      \"rowz\": 4\n    }\n  }\n}\n");
  Outcome o = Tpsim("describe " + At("e.json"));
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_EQ(o.output, At("e.json") + ":5:8: rowz: : unknown field of Noc, did you mean rows?\n");
  Write(At("t.json"), "{\n  \"workload\": {\"seq_len\": \"many\"}\n}\n");
  ExpectDescribeRefused("t.json", "t.json", ":2:27: workload.seq_len: many: expected an integer");
  Write(At("s.json"), "{\n  \"name\": \"x\",,\n}\n");
  Outcome s = Tpsim("describe " + At("s.json"));
  EXPECT_EQ(s.output.rfind(At("s.json") + ":2:15: ", 0), 0u) << s.output;
  EXPECT_EQ(Lines(s.output), 1) << s.output;
}

TEST_F(Hardening, UnknownFieldsSuggestTheNearestName) {
  Outcome o = Tpsim("describe " + kRef + " --set mapping.pipline_stages=2");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.output.find("did you mean pipeline_stages?"), std::string::npos) << o.output;
  Write(At("u.textproto"), "name: \"x\"\nworkload { seq_lne: 4 }\n");
  Outcome t = Tpsim("describe " + At("u.textproto"));
  EXPECT_EQ(t.output,
            At("u.textproto") + ":2:12: seq_lne: : unknown field of Workload, did you mean seq_len?\n");
}

TEST_F(Hardening, SetErrorsNameTheSetArgument) {
  Outcome o = Tpsim("describe " + kRef + " --set chip.noc.link_bandwidth_gbps=-1");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_EQ(o.output.rfind("<command line: --set chip.noc.link_bandwidth_gbps=-1>:1:1: ", 0), 0u) << o.output;
}

TEST_F(Hardening, IntegersAreRangeCheckedBeforeNarrowing) {
  Outcome g = Tpsim("describe " + kRef + " --set mapping.grid_rows=2147483648");
  EXPECT_EQ(g.status, 2) << g.output;
  EXPECT_NE(g.output.find("mapping.grid_rows: 2147483648: must be at most 2147483647"), std::string::npos)
      << g.output;
  Outcome b = Tpsim("serve " + kServing + " --set mapping.serving.context_bucket_tokens=4294967295");
  EXPECT_EQ(b.status, 2) << b.output;
  EXPECT_NE(b.output.find("mapping.serving.context_bucket_tokens"), std::string::npos) << b.output;
  Outcome c = Tpsim("serve " + kServing + " --set mapping.serving.context_bucket_tokens=2147483647");
  EXPECT_EQ(c.status, 2) << c.output;
  EXPECT_NE(c.output.find("must be at most 16777216 tokens"), std::string::npos) << c.output;
}

TEST_F(Hardening, MoeModelsAreServedAndTheirMappingIsChecked) {
  // Issue 17: serve takes an MoE model (each iteration lowers its own Program); a bad
  // mapping.moe is a located error.
  Outcome o = Tpsim("serve " + kServing +
                    " --model qwen3-30b-a3b --set workload.requests.synthetic.num_requests=3 "
                    "--set mapping.moe.ep=4");
  EXPECT_EQ(o.status, 0) << o.output;
  Outcome b = Tpsim("serve " + kServing + " --model qwen3-30b-a3b --set mapping.moe.ep=3");
  EXPECT_EQ(b.status, 2) << b.output;
  EXPECT_NE(
      b.output.find("<command line: --set mapping.moe.ep=3>:1:1: mapping.moe.ep: 3: must divide num_experts"),
      std::string::npos)
      << b.output;
}

TEST_F(Hardening, PlacementFileIsRelativeToTheExperiment) {
  std::string text = Relocated(Read(kRef));
  Write(At("exp.textproto"), text);
  fs::copy_file(kSrc + "/tests/regression/reversed-placement.txt", At("cores.txt"));
  // Runs from another folder: the file is found next to the experiment.
  std::string exp = At("exp.textproto");
  Outcome o = Tpsim("describe " + exp +
                    " --set mapping.placement=file --set mapping.placement_file=" + At("cores.txt"));
  EXPECT_EQ(o.status, 0) << o.output;
  std::string with_file = text;
  with_file.replace(with_file.find("mapping {") + 9, 0, "\n  placement_file: \"cores.txt\"");
  Write(At("exp2.textproto"), with_file);
  Outcome r = Tpsim("describe " + At("exp2.textproto") + " --set mapping.placement=file", "/");
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(Hardening, PlacementFileErrorsAreLocatedInTheFile) {
  // tests/regression/reversed-placement.txt: the reference's 16 stages x 4 ranks, four ids a
  // line. Each error names the file's line and column of the id; before, every one was
  // reported at the mapping field ("rank 1: core 0 is already used", no stage, no line).
  const std::string good = Read(kSrc + "/tests/regression/reversed-placement.txt");
  auto run = [&](const std::string& text) {
    Write(At("cores.txt"), text);
    return Tpsim("describe " + kRef +
                 " --set mapping.placement=file --set mapping.placement_file=" + At("cores.txt"));
  };
  EXPECT_EQ(run(good).status, 0);
  std::string dup = good;  // line 2 "11 10 3 2": its third id becomes stage 1's first (11)
  dup.replace(dup.find("11 10 3 2"), 9, "11 10 11 2");
  Outcome d = run(dup);
  EXPECT_EQ(d.status, 2) << d.output;
  EXPECT_NE(d.output.find(At("cores.txt") + ":2:7: mapping.placement_file: 11: stage 1: core 11 (rank 2) is "
                                            "already used by an earlier rank"),
            std::string::npos)
      << d.output;
  std::string off = good;  // core 0 moved out of stage 0's region (cores 0, 1, 8, 9) into line 3
  off.replace(off.find("13 12 5 4"), 9, "13 12 5 0");
  Outcome o = run(off);
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(
      o.output.find(At("cores.txt") + ":3:9: mapping.placement_file: 0: stage 2: core 0 (rank 3) is not in "
                                      "the 2x2 region"),
      std::string::npos)
      << o.output;
  Outcome b = run("9 8 1 0\n11 x 3 2\n");
  EXPECT_EQ(b.status, 2) << b.output;
  EXPECT_NE(b.output.find(At("cores.txt") +
                          ":2:4: mapping.placement_file: x: must hold whitespace-separated core ids"),
            std::string::npos)
      << b.output;
  // An id of 23 digits is off the chip (it was "must hold ... (integers)"); a byte order mark before
  // the first id is skipped (it was refused, invisibly, as part of that id).
  Outcome big = run("9 8 1 99999999999999999999999\n");
  EXPECT_EQ(big.status, 2) << big.output;
  EXPECT_NE(
      big.output.find(At("cores.txt") + ":1:7: mapping.placement_file: 99999999999999999999999: core id is "
                                        "not on the chip (0 to 63)"),
      std::string::npos)
      << big.output;
  EXPECT_EQ(run("\xEF\xBB\xBF" + good).status, 0);
  // One id per rank of every stage: 64, not the 4 of one stage, nor more.
  Outcome s4 = run("9 8 1 0\n");
  EXPECT_EQ(s4.status, 2) << s4.output;
  EXPECT_NE(s4.output.find(
                "has 4 core ids; placement = file needs one per rank of every stage, 16 stages x 4 ranks "
                "(tp) = 64, in stage order"),
            std::string::npos)
      << s4.output;
  Outcome s68 = run(good + "9 8 1 0\n");
  EXPECT_EQ(s68.status, 2) << s68.output;
  EXPECT_NE(s68.output.find("has 68 core ids"), std::string::npos) << s68.output;
  // Digits only, as --tp is read ("+7" was taken as 7).
  std::string plus = good;
  plus.replace(plus.find("11 10 3 2"), 9, "11 10 +3 2");
  Outcome p = run(plus);
  EXPECT_EQ(p.status, 2) << p.output;
  EXPECT_NE(
      p.output.find(At("cores.txt") + ":2:7: mapping.placement_file: +3: must hold whitespace-separated "
                                      "core ids"),
      std::string::npos)
      << p.output;
}

TEST_F(Hardening, RoutingTraceIsRelativeToTheExperimentAndItsErrorsAreLocated) {
  // mapping.moe.routing_file, like placement_file, is relative to the file that names it.
  std::string text = Relocated(Read(kSrc + "/configs/experiments/moe-qwen3-30b-a3b.textproto"));
  const std::string balanced = "routing: \"balanced\"";
  text.replace(text.find(balanced), balanced.size(), "routing: \"trace\" routing_file: \"routing.csv\"");
  Write(At("exp.textproto"), text);
  std::string trace = "layer";
  for (int e = 0; e < 128; ++e) trace += ",e" + std::to_string(e);
  trace += "\n";
  for (int l = 0; l < 4; ++l) {
    trace += std::to_string(l);
    for (int e = 0; e < 128; ++e) trace += "," + std::to_string(e < 8 ? 100 : 1);
    trace += "\n";
  }
  Write(At("routing.csv"), trace);
  const std::string sets = " --set workload.num_layers=4 --set workload.decode_steps=1 --quiet";
  Outcome o = Tpsim("run " + At("exp.textproto") + sets, "/");
  EXPECT_EQ(o.status, 0) << o.output;
  // Layer 4 missing once 8 layers are simulated; a short line at its line and column.
  Outcome m = Tpsim("run " + At("exp.textproto") + " --set workload.num_layers=8 --quiet", "/");
  EXPECT_EQ(m.status, 2) << m.output;
  EXPECT_NE(m.output.find("has no line for layer 4"), std::string::npos) << m.output;
  Write(At("routing.csv"), trace + "4,-1\n");
  Outcome b = Tpsim("run " + At("exp.textproto") + sets, "/");
  EXPECT_EQ(b.status, 2) << b.output;
  EXPECT_NE(b.output.find(At("routing.csv") + ":6:1: mapping.moe.routing_file"), std::string::npos)
      << b.output;
  // A line for a layer the model (48 layers) does not have was never read, exit 0.
  std::string beyond = trace + "99";
  for (int e = 0; e < 128; ++e) beyond += ",1";
  Write(At("routing.csv"), beyond + "\n");
  Outcome x = Tpsim("run " + At("exp.textproto") + sets, "/");
  EXPECT_EQ(x.status, 2) << x.output;
  EXPECT_NE(
      x.output.find(At("routing.csv") +
                    ":6:1: mapping.moe.routing_file: layer 99: the model has 48 layers (0..47): a line for "
                    "another is never read"),
      std::string::npos)
      << x.output;
}

TEST_F(Hardening, ReferencedNonConfigFileIsNotEchoed) {
  Write(At("secret.txt"), "hunter2 is the password\n");
  std::string text = Relocated(Read(kRef));
  text.replace(text.find("chip_file: \""), 12, "chip_file: \"secret.txt\" #");
  Write(At("exp.textproto"), text);
  Outcome o = Tpsim("describe " + At("exp.textproto"));
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_EQ(o.output.find("hunter2"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("chip_file: secret.txt: is not a Chip config"), std::string::npos) << o.output;
  Outcome m = Tpsim("describe " + kRef + " --model " + At("secret.txt"));
  EXPECT_EQ(m.status, 2) << m.output;
  EXPECT_EQ(m.output.find("hunter2"), std::string::npos) << m.output;
}

TEST_F(Hardening, OneLineJsonConfigsKeepTheirLocatedErrors) {
  // A JSON config on one line has every field on its first token's line. A bad value there
  // is the config's error at its column; before, it was taken for "not a config at all"
  // (the HuggingFace config below printed "is not a model config or a HuggingFace config.json").
  std::string hf = Read(std::string(TPSIM_SOURCE_DIR) + "/configs/models/qwen3-0.6b.json");
  std::replace(hf.begin(), hf.end(), '\n', ' ');
  hf.replace(hf.find("\"hidden_size\": 1024"), 19, "\"hidden_size\": -5");
  Write(At("one-line.json"), hf);
  const size_t col = hf.find("\"hidden_size\"") + 1;
  Outcome m = Tpsim("describe " + kRef + " --model " + At("one-line.json"));
  EXPECT_EQ(m.status, 2) << m.output;
  EXPECT_NE(m.output.find(At("one-line.json") + ":1:" + std::to_string(col) + ": hidden_size: -5: must be"),
            std::string::npos)
      << m.output;
  // A file that is no config stays refused at the reference, unquoted.
  Write(At("list.json"), "[1, 2, 3]");
  Outcome l = Tpsim("describe " + kRef + " --model " + At("list.json"));
  EXPECT_EQ(l.status, 2) << l.output;
  EXPECT_NE(l.output.find("is not a model config or a HuggingFace config.json"), std::string::npos)
      << l.output;
}

TEST_F(Hardening, ContextsPastASlidingWindowAreRefused) {
  // Qwen3-4B with sliding-window attention from layer 30 on, window 300 tokens. tpsim times
  // full attention in every layer: exact up to 300 tokens of context, refused past them
  // (before, the window was ignored and a longer run printed full attention's times).
  std::string hf = Read(kSrc + "/configs/models/qwen3-4b.json");
  hf.replace(hf.find("\"use_sliding_window\": false"), 27, "\"use_sliding_window\": true");
  hf.replace(hf.find("\"sliding_window\": null"), 22, "\"sliding_window\": 300");
  hf.replace(hf.find("\"max_window_layers\": 36"), 23, "\"max_window_layers\": 30");
  Write(At("sw.json"), hf);
  // The reference's 256 prompt tokens and 20 decode steps fit; 45 steps do not.
  Outcome fits = Tpsim("run " + kRef + " --model " + At("sw.json") + " --quiet");
  EXPECT_EQ(fits.status, 0) << fits.output;
  Outcome d = Tpsim("describe " + kRef + " --model " + At("sw.json"));
  EXPECT_NE(d.output.find("sliding window        300 tokens"), std::string::npos) << d.output;
  EXPECT_NE(d.output.find("positions             40960 (max_position_embeddings"), std::string::npos)
      << d.output;
  Outcome run = Tpsim("run " + kRef + " --model " + At("sw.json") + " --set workload.decode_steps=45");
  EXPECT_EQ(run.status, 2) << run.output;
  // Said at the --set that made the context too long (it named the file's unchanged seq_len).
  EXPECT_EQ(
      run.output,
      "<command line: --set workload.decode_steps=45>:1:1: workload.decode_steps: 45: cached_prefix + "
      "seq_len + decode_steps (301) exceeds the model's sliding_window (300): its sliding layers attend "
      "to the last 300 tokens only, and tpsim times full attention in every layer\n");
  // A served request whose last iteration attends to more than 300 tokens.
  Outcome serve = Tpsim("serve " + kServing + " --model " + At("sw.json") +
                        " --set workload.requests.synthetic.num_requests=5");
  EXPECT_EQ(serve.status, 2) << serve.output;
  EXPECT_NE(serve.output.find(":13:3: workload.requests: request 0: 406 prompt + 171 output tokens: its last "
                              "iteration's context (576) exceeds the model's sliding_window (300)"),
            std::string::npos)
      << serve.output;
}

// Contexts past 2^32 - 1 positions (a model without max_position_embeddings): refused. They
// were counted in 32 bits, so decode steps past it wrapped to a context of a few tokens and
// cost nothing (4 steps printed less attention than 2).
TEST_F(Hardening, ContextsPast32BitsAreRefused) {
  Outcome run = Tpsim("run " + kRef +
                      " --set model.max_position_embeddings=0 --set workload.cached_prefix=2147483647 --set "
                      "workload.seq_len=2147483647 --set workload.decode_steps=4");
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_EQ(run.output,
            "<command line: --set workload.seq_len=2147483647>:1:1: workload.seq_len: 2147483647: "
            "cached_prefix + seq_len + decode_steps "
            "(4294967298) exceeds 4294967295 positions, the longest context tpsim times\n");
}

// describe's totals over the chip's cores are computed in double: a sram_bytes near 2^63 printed
// a wrapped total (16777216.0 TiB for 64 cores of 8388608.0 TiB).
TEST_F(Hardening, DescribeTotalsDoNotWrap) {
  Outcome d = Tpsim("describe " + kRef + " --set chip.core.sram_bytes=9223372036854775807");
  EXPECT_EQ(d.status, 0) << d.output;
  EXPECT_NE(d.output.find("SRAM                  536870912.0 TiB (8388608.0 TiB per core)"),
            std::string::npos)
      << d.output;
}

// A sweep over the reference experiment with `body` after its base line.
std::string SweepFile(const std::string& body) { return "base: \"" + kRef + "\"\n" + body; }

TEST_F(Hardening, DeepRequireExpressionsAreLocatedErrors) {
  Write(At("p.textproto"), SweepFile("axis { field: \"mapping.tp\" values: [\"4\"] }\nrequire: \"" +
                                     std::string(5000, '(') + "1" + std::string(5000, ')') + "\"\n"));
  Outcome p = Tpsim("sweep " + At("p.textproto") + " --db " + At("p.sqlite"));
  EXPECT_EQ(p.status, 2) << p.output.substr(0, 500);
  EXPECT_NE(p.output.find(At("p.textproto") + ":3:"), std::string::npos) << p.output.substr(0, 500);
  EXPECT_NE(p.output.find("nested more than 100 levels"), std::string::npos) << p.output.substr(0, 500);
  Write(At("u.textproto"), SweepFile("axis { field: \"mapping.tp\" values: [\"4\"] }\nrequire: \"" +
                                     std::string(100000, '-') + "1\"\n"));
  Outcome u = Tpsim("sweep " + At("u.textproto") + " --db " + At("u.sqlite"));
  EXPECT_EQ(u.status, 2) << u.output.substr(0, 500);
  Write(At("c.textproto"), SweepFile("axis { field: \"mapping.tp\" values: [\"4\"] }\nrequire: \"1" + [] {
          std::string s;
          for (int i = 0; i < 3000; ++i) s += "+1";
          return s;
        }() + " > 0\"\n"));
  Outcome c = Tpsim("sweep " + At("c.textproto") + " --db " + At("c.sqlite"));
  EXPECT_EQ(c.status, 2) << c.output.substr(0, 500);
  EXPECT_NE(c.output.find("more than 1000 operands"), std::string::npos) << c.output.substr(0, 500);
}

// Planning is lazy: a sweep of 8^12 points runs its first points at once (planning them
// all took more than 1 GB and a minute before), and --limit continues where it stopped.
TEST_F(Hardening, HugeSweepRunsItsFirstPointsLazily) {
  std::string axes;
  const char* fields[] = {"chip.clock_mhz",
                          "chip.core.matrix_utilization",
                          "chip.core.vector_lanes",
                          "chip.core.sram_bandwidth_gbps",
                          "chip.noc.link_bandwidth_gbps",
                          "chip.noc.router_latency_cycles",
                          "chip.noc.link_latency_ns",
                          "workload.seq_len",
                          "workload.batch",
                          "workload.decode_steps",
                          "mapping.seed",
                          "chip.core.systolic_arrays"};
  for (const char* f : fields)
    axes += std::string("axis { field: \"") + f +
            "\" values: [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\"] }\n";
  Write(At("big.textproto"), SweepFile(axes));
  Outcome o = Tpsim("sweep " + At("big.textproto") + " --db " + At("big.sqlite") + " --jobs 1 --limit 3");
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find(": 3 points; ran 3"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("stopped after --limit 3 points"), std::string::npos) << o.output;
  auto count = [&](const std::string& sql) {
    sqlite3* db = nullptr;
    sqlite3_open(At("big.sqlite").c_str(), &db);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
    int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
  };
  EXPECT_EQ(count("SELECT COUNT(*) FROM points"), 3);
  EXPECT_EQ(count("SELECT MAX(point_index) FROM points"), 2);
  // Again: the three stored points are skipped, the next two run (indices 3 and 4).
  Outcome again = Tpsim("sweep " + At("big.textproto") + " --db " + At("big.sqlite") + " --jobs 1 --limit 2");
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find(": 5 points; ran 2"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("3 already stored"), std::string::npos) << again.output;
  EXPECT_EQ(count("SELECT COUNT(*) FROM points"), 5);
  EXPECT_EQ(count("SELECT MAX(point_index) FROM points"), 4);
  // A shard of the same sweep (a Slurm array task) takes its own indices.
  Outcome shard = Tpsim("sweep " + At("big.textproto") + " --db " + At("shard.sqlite") +
                        " --jobs 1 --limit 2 --shard 5/1000");
  EXPECT_EQ(shard.status, 0) << shard.output;
  EXPECT_NE(shard.output.find(": 2 points in shard 5/1000; ran 2"), std::string::npos) << shard.output;
}

// The pre-lowering estimate (mapping/estimate.h) refuses, located and at once, what would
// have ended in std::bad_alloc. --max-memory is fixed here so the outcome does not depend
// on the machine's memory. (Without --no-reuse the 40,000 steps are timed step by step from a
// few lowered ones, sim/step_rolling.h, in constant memory: README "Long generations".)
TEST_F(Hardening, ProgramsBeyondMaxMemoryAreRefusedBeforeLowering) {
  Outcome steps =
      Tpsim("run " + kRef + " --set workload.decode_steps=40000 --max-memory 16G --quiet --no-reuse");
  EXPECT_EQ(steps.status, 2) << steps.output;
  EXPECT_EQ(Lines(steps.output), 1) << steps.output;
  EXPECT_EQ(steps.output.rfind(
                "<command line: --set workload.decode_steps=40000>:1:1: workload.decode_steps: 40000: "
                "the Program would take about ",
                0),
            0u)
      << steps.output;
  EXPECT_NE(steps.output.find("more than --max-memory 17.2 GB"), std::string::npos) << steps.output;
  // It says what lowers every step where reuse would not: --no-reuse, --dump-program, or --trace
  // without --trace-steps (which it points to).
  EXPECT_NE(steps.output.find("or raise --max-memory (every decode step is lowered: --no-reuse)"),
            std::string::npos)
      << steps.output;
  for (const auto& [flag, note] : std::vector<std::pair<std::string, std::string>>{
           {"--trace " + At("t.json"),
            "--trace without --trace-steps traces every step; --trace-steps first,last,every:N traces a few"},
           {"--dump-program " + At("p.txt"), "--dump-program writes the whole Program"}}) {
    Outcome o = Tpsim("run " + kRef + " --set workload.decode_steps=40000 --max-memory 16G --quiet " + flag);
    EXPECT_EQ(o.status, 2) << o.output;
    EXPECT_NE(o.output.find("(every decode step is lowered: " + note + ")"), std::string::npos) << o.output;
  }

  // An HF config.json with 1e6 layers: located at num_hidden_layers in that file. (Its weights
  // would not fit the chip's DRAM either, which validation refuses first at
  // chip.memory[0].capacity_bytes, tests/sim/estimate_test.cc DramCapacity; capacity 0 leaves
  // that unchecked, so that the guard is what refuses it here.)
  std::string hf = Read(kSrc + "/configs/models/qwen3-4b.json");
  hf.replace(hf.find("\"num_hidden_layers\": 36"), 23, "\"num_hidden_layers\": 1000000");
  Write(At("big.json"), hf);
  Outcome layers = Tpsim("run " + kRef + " --model " + At("big.json") +
                         " --set workload.num_layers=0 --set mapping.pipeline_stages=1 "
                         "--set chip.memory[0].capacity_bytes=0 --max-memory 16G --quiet");
  EXPECT_EQ(layers.status, 2) << layers.output;
  EXPECT_EQ(layers.output.rfind(At("big.json") + ":18:", 0), 0u) << layers.output;
  EXPECT_NE(layers.output.find("model.num_layers: 1000000: "), std::string::npos) << layers.output;

  // TP 64 in one stage of the 1024-core wafer: 289 MB peak RSS measured, 691 MB estimated; a
  // limit of 100 MB refuses it at mapping.tp.
  Outcome tp = Tpsim(
      "run configs/experiments/wafer-32x32-qwen3-32b.textproto --set mapping.tp=64 "
      "--set mapping.pipeline_stages=1 --max-memory 100M --quiet");
  EXPECT_EQ(tp.status, 2) << tp.output;
  EXPECT_EQ(tp.output.rfind("<command line: --set mapping.tp=64>:1:1: mapping.tp: 64: ", 0), 0u) << tp.output;

  // TP 1024 in one stage with the direct collective: each transfer of an all-reduce's second
  // step waits on the 1023 into its source, a billion deps a collective. The estimate counted
  // tasks only (8.47e+06, under 3 GB): the run took 17 GB and 61 s before the schedule stopped
  // at "more than 2^32 - 1 units of dependents" (exit 1). Now refused at once, the deps named.
  Outcome direct = Tpsim(
      "run configs/experiments/wafer-32x32-qwen3-32b.textproto --set mapping.tp=1024 "
      "--set mapping.pipeline_stages=1 --set mapping.collective=direct --set workload.num_layers=1 "
      "--max-memory 16G --quiet");
  EXPECT_EQ(direct.status, 2) << direct.output;
  EXPECT_EQ(direct.output.rfind("<command line: --set mapping.tp=1024>:1:1: mapping.tp: 1024: ", 0), 0u)
      << direct.output;
  EXPECT_NE(direct.output.find("others (mapping.collective direct)"), std::string::npos) << direct.output;

  // A bad size is a usage error; 0 turns the guard off.
  Outcome bad = Tpsim("run " + kRef + " --max-memory lots");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--max-memory expects a size"), std::string::npos) << bad.output;
  EXPECT_EQ(Tpsim("run " + kRef + " --set workload.decode_steps=2 --max-memory 0 --quiet").status, 0);

  // In a sweep the point is stored as invalid with the same message, not run.
  Write(At("s.textproto"),
        SweepFile("axis { field: \"workload.decode_steps\" values: [\"2\", \"40000\"] }\n"));
  Outcome sw = Tpsim("sweep " + At("s.textproto") + " --db " + At("s.sqlite") + " --jobs 1 --max-memory 1G");
  EXPECT_EQ(sw.status, 0) << sw.output;
  EXPECT_NE(sw.output.find("ran 2 (1 ok, 1 failed)"), std::string::npos) << sw.output;
}

// Synthetic requests whose records would not fit: refused before any is drawn (beyond
// 10,000,000, e.g. 2^31, the count itself is refused: ServedArrivalsMustBeRepresentable).
TEST_F(Hardening, SyntheticRequestsBeyondMaxMemoryAreRefused) {
  Outcome o =
      Tpsim("serve " + kServing + " --set workload.requests.synthetic.num_requests=9000000 --max-memory 1G");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_EQ(o.output.rfind(
                "<command line: --set workload.requests.synthetic.num_requests=9000000>:1:1: "
                "workload.requests.synthetic.num_requests: 9000000: serving them takes about 4.67 GB (64 MB "
                "for the process and 512 MB per million requests)",
                0),
            0u)
      << o.output;
  Outcome bad = Tpsim("serve " + kServing + " --max-memory 12X");
  EXPECT_EQ(bad.status, 2) << bad.output;
}

// A trace's rows are counted against --max-memory as synthetic requests are, before they are
// read (2,000,000 rows were served at 662 MB under --max-memory 100M); max_requests caps them.
TEST_F(Hardening, TraceRowsBeyondMaxMemoryAreRefused) {
  {
    std::ofstream csv(At("big.csv"));
    csv << "arrival_s,prompt_tokens,output_tokens\n";
    for (int i = 0; i < 1000000; ++i) csv << i << ",16,1\n";
    csv << "\n  \n";  // blank lines are no requests
  }
  Write(At("big.textproto"), "name: \"big\"\nchip_file: \"" + std::string(TPSIM_SOURCE_DIR) +
                                 "/configs/chips/wafer-8x8.textproto\"\nmodel_name: \"qwen3-0.6b\"\n"
                                 "workload { dtype: \"bf16\" requests { trace_file: \"big.csv\" } }\n"
                                 "mapping { tp: 4 pipeline_stages: 4 partition: \"megatron\" placement: "
                                 "\"ring\" collective: \"ring\" "
                                 "serving { mode: \"fused\" layers_simulated: 4 } }\n");
  Outcome o = Tpsim("serve " + At("big.textproto") + " --max-memory 500M");
  EXPECT_EQ(o.status, 2) << o.output;
  // 1,000,000 x 512 B + 64 MB.
  EXPECT_NE(o.output.find("big.textproto:4:37: workload.requests.trace_file: "), std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("big.csv: its 1000000 or more requests take about 576 MB to serve (64 MB for the "
                          "process and 512 MB per million requests), more than --max-memory 524 MB"),
            std::string::npos)
      << o.output;
  Outcome capped =
      Tpsim("serve " + At("big.textproto") + " --max-memory 500M --set workload.requests.max_requests=3");
  EXPECT_EQ(capped.status, 0) << capped.output;
  EXPECT_NE(capped.output.find("requests: 3 ("), std::string::npos) << capped.output;
}

// A model that does not fit the memory channels is refused at validation (exit 2 at the chip
// file's capacity_bytes), by `run` and `serve` alike; it used to run and print times.
TEST_F(Hardening, ModelsBeyondTheMemoryChannelsAreRefused) {
  Outcome one = Tpsim(
      "run configs/experiments/default.textproto --set mapping.tp=1 --set "
      "mapping.pipeline_stages=1 --quiet");
  EXPECT_EQ(one.status, 2) << one.output;
  EXPECT_EQ(Lines(one.output), 1) << one.output;
  EXPECT_EQ(
      one.output.rfind("configs/chips/wafer-8x8.textproto:43:3: chip.memory[0].capacity_bytes: 4294967296: "
                       "memory channel dram0, used by 1 core of the mapping, would hold 7.35 GB",
                       0),
      0u)
      << one.output;
  // serving-fused: Qwen3-4B's 36 layers in 16 stages, at most 3 a stage, megatron over 4 ranks:
  // 3 x 100,925,440 / 4 x 2 bytes = 151,388,160 bytes a core; the KV cache is admitted to what
  // is left (not counted).
  const std::string two = " --set workload.requests.synthetic.num_requests=2";
  Outcome fits = Tpsim("serve " + kServing + " --set chip.memory[0].capacity_bytes=151388160" + two);
  EXPECT_EQ(fits.status, 0) << fits.output;
  Outcome over = Tpsim("serve " + kServing + " --set chip.memory[0].capacity_bytes=151388159" + two);
  EXPECT_EQ(over.status, 2) << over.output;
  EXPECT_NE(
      over.output.find("chip.memory[0].capacity_bytes: 151388159: memory channel dram0, used by 1 core of "
                       "the mapping, would hold 151 MB (weights: 151 MB)"),
      std::string::npos)
      << over.output;
}

// `tpsim serve` stops with the cause (exit 1) where an iteration or the stream passes the 2^63 ps
// clock. Before: the analytical engine's saturated iteration times were summed until a request's
// times went backwards ("request 2 has times that cannot be represented"), and on the TLM engine
// the stopped iteration's makespan, scaled to the model's layers, wrapped ("negative iteration cost").
TEST_F(Hardening, ServingPastTheClockStopsWithTheCause) {
  const std::string few = " --set workload.requests.synthetic.num_requests=";
  struct Case {
    std::string args, what;
  };
  for (const Case& c : std::vector<Case>{
           {"--set chip.noc.link_bandwidth_gbps=1e-9" + few + "3",
            "tpsim serve: a transfer of 0.51968 MB from core 0 to core 8 (task 72, op o_proj.all_reduce)"},
           {"--engine tlm --set chip.memory[0].bandwidth_gbps=1e-9" + few + "3",
            "tpsim serve: a DRAM read of 1.31072 MB on channel 0 (task 12, op k_proj)"},
           // Each iteration 3.407 days (the model's memory plan, LowerOptions::plan_layers: its KV
           // cache is read from DRAM too): the 18th passes the clock.
           {"--set chip.memory[0].bandwidth_gbps=1e-5" + few + "20",
            "tpsim serve: iteration 18 of the fused group starts at 103.3 days and takes 3.407 days: the "
            "stream "
            "runs past the 106.7 days"},
           // One layer of 36 simulated, on the plan of the stage's 36: 9.031 days, 325 for the model.
           {"--set mapping.pipeline_stages=1 --set mapping.serving.layers_simulated=1 --set "
            "chip.memory[0].bandwidth_gbps=1e-7" +
                few + "2",
            "tpsim serve: an iteration of 1 sequence takes 9.031 days for its 1 simulated layers: over the "
            "model's "
            "36 layers longer than the 106.7 days"}}) {
    Outcome o = Tpsim("serve " + kServing + " " + c.args);
    EXPECT_EQ(o.status, 1) << c.args << "\n" << o.output;
    EXPECT_NE(o.output.find(c.what), std::string::npos) << c.args << "\n" << o.output;
    EXPECT_NE(o.output.find("106.7 days (2^63 ps)"), std::string::npos) << c.args << "\n" << o.output;
  }
}

// `tpsim collectives` and `gemm` locate an error of a field their --set changed at the --set, as
// `tpsim run` does; they named the chip file's line of the field (wafer-8x8.textproto:32:3, where
// the file says 160).
TEST_F(Hardening, MicrobenchmarkSetErrorsPointAtTheSet) {
  for (const char* set : {"noc.link_bandwidth_gbps=0", "chip.noc.link_bandwidth_gbps=0"}) {
    const Outcome o =
        Tpsim(std::string("collectives wafer-8x8 --op all_reduce --ranks 4 --sizes 1K --set ") + set);
    EXPECT_EQ(o.status, 2) << o.output;
    EXPECT_EQ(o.output.rfind(std::string("<command line: --set ") + set +
                                 ">:1:1: chip.noc.link_bandwidth_gbps: 0: must be positive",
                             0),
              0u)
        << o.output;
  }
}

// `tpsim gemm` and `tpsim collectives` stop with the cause where the time passes the 2^63 ps
// clock, instead of printing the saturated 9223372036854.78 us (systolic core, tpsim's own
// collective lowering) or a GPU model's time past the clock as a result. A GEMM's time follows
// from the shape and the chip alone: exit 2 at the --shapes row (it was exit 1, unlocated).
TEST_F(Hardening, MicrobenchmarksPastTheClockStopWithTheCause) {
  Write(At("big.csv"), "m,n,k\n99999999999,99999999,9999999\n");
  for (const char* chip : {"wafer-8x8", "h100-sxm-8"}) {
    Outcome g = Tpsim(std::string("gemm ") + chip + " --shapes " + At("big.csv"));
    EXPECT_EQ(g.status, 2) << g.output;
    EXPECT_NE(g.output.find("tpsim gemm: " + At("big.csv") +
                            ":2: a GEMM of m=99999999999 n=99999999 k=9999999 on one " +
                            (std::string(chip) == "h100-sxm-8" ? "GPU" : "core") + " of " + chip +
                            " takes longer than the 106.7 days (2^63 ps) tpsim can represent"),
              std::string::npos)
        << g.output;
    EXPECT_EQ(g.output.find("9223372036854"), std::string::npos) << g.output;
  }
  // Certain before lowering (a chunk of 2^38 bytes at 1e-6 GB/s alone takes 3181 days): exit 2, as
  // `tpsim run` refuses such a chip (it was found at the transfer after lowering, exit 1). Where only
  // the transfers' sum passes the clock, the transfer says it (RunCli.CollectivesPastTheLinkCalendars...).
  Outcome c = Tpsim(
      "collectives wafer-8x8 --op all_reduce --ranks 4 --sizes 1T --set noc.link_bandwidth_gbps=0.000001");
  EXPECT_EQ(c.status, 2) << c.output;
  EXPECT_NE(
      c.output.find("tpsim collectives: all_reduce of 1099511627776 bytes over 4 ranks: a rank's chunk over "
                    "the fastest link (1e-06 GB/s) would take at least 3181 days, longer than the 106.7 days "
                    "(2^63 ps) tpsim can represent: check chip.noc.link_bandwidth_gbps"),
      std::string::npos)
      << c.output;
  EXPECT_EQ(c.output.find("9223372036854"), std::string::npos) << c.output;
}

// A truncated result JSON given to `tpsim compare`: exit 2, one line (the parser's message
// spans lines: its text and a caret).
TEST_F(Hardening, CompareNamesABrokenResultOnOneLine) {
  Write(At("trunc.json"), "{\"summary\": {\"total_ps\": \"12");
  Outcome o = Tpsim("compare " + At("trunc.json") + " " + At("trunc.json"));
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_EQ(Lines(o.output), 1) << o.output;
  EXPECT_EQ(o.output.rfind("tpsim compare: " + At("trunc.json") + ": not a result JSON (", 0), 0u)
      << o.output;
  // `{}` parses as an empty Result: it compared nothing and printed zeros, exit 0.
  Write(At("empty.json"), "{}");
  Outcome e = Tpsim("compare " + At("empty.json") + " " + At("empty.json"));
  EXPECT_EQ(e.status, 2) << e.output;
  EXPECT_NE(e.output.find(At("empty.json") + ": not a tpsim result (no engine, summary or ops"),
            std::string::npos)
      << e.output;
  // A negative time: compared as "unmeasured" (an op) or printed as the measured total, exit 0.
  Write(At("neg.json"),
        "{\"engine\": \"gpu\", \"summary\": {\"total_ps\": 5}, \"ops\": [{\"op\": \"q_proj\", "
        "\"compute_ps\": 10}, {\"op\": \"k_proj\", \"compute_ps\": -100}]}");
  Outcome n = Tpsim("compare " + At("neg.json") + " " + At("neg.json"));
  EXPECT_EQ(n.status, 2) << n.output;
  EXPECT_NE(n.output.find(At("neg.json") + ": ops[1].compute_ps: -100: a time in picoseconds, must be >= 0"),
            std::string::npos)
      << n.output;
}

// Where the config alone makes the 2^63 ps clock overflow certain, validation refuses it
// (exit 2 at the field) instead of running into TimeOverflowError (issue 16 item 2).
TEST_F(Hardening, CertainClockOverflowIsRefusedAtValidation) {
  const std::string one =
      " --set workload.num_layers=1 --set mapping.pipeline_stages=1 --set workload.decode_steps=0 "
      "--set workload.seq_len=64";
  for (const char* engine : {"analytical", "tlm"}) {
    Outcome u =
        Tpsim("run " + kRef + " --engine " + engine + one + " --set chip.core.matrix_utilization=1e-12");
    EXPECT_EQ(u.status, 2) << u.output;
    EXPECT_EQ(u.output.rfind("<command line: --set chip.core.matrix_utilization=1e-12>:1:1: "
                             "chip.core.matrix_utilization: 1e-12: the weight GEMMs",
                             0),
              0u)
        << u.output;
    // On the mapping's 4 cores (TP 4 x 1 stage), 4 x 64 x 64 x 2 x 500 MHz x 1e-12 = 16.384 FLOP/s:
    // 1.29191e10 FLOP take 9126 days (on the chip's 64 cores it said 570.4).
    EXPECT_NE(
        u.output.find("(1.29191e+10 FLOP at 16.384 FLOP/s on the mapping's 4 cores) would take at least "
                      "9126 days"),
        std::string::npos)
        << u.output;
  }
  // 91.26 days: refused by the check's margin, which the message says (on all 64 cores the bound
  // was 5.7 days and the run started).
  Outcome margin = Tpsim("run " + kRef + one + " --set chip.core.matrix_utilization=1e-10 --quiet");
  EXPECT_EQ(margin.status, 2) << margin.output;
  EXPECT_NE(
      margin.output.find("would take at least 91.26 days, more than half of the 106.7 days (2^63 ps) tpsim "
                         "can represent (this check before the run keeps that margin"),
      std::string::npos)
      << margin.output;
  // A GPU node's kernels are timed from its gpu block: the bound uses its fastest tensor rate
  // (fp8, 1978.9 TFLOP/s x 8 GPUs) x tensor_efficiency and names that field. Before, it used the
  // core block's stand-in peak, which the GPU kernels never read, and let this run start.
  Outcome g = Tpsim(
      "run configs/experiments/moe-qwen3-30b-a3b-h200.textproto --set chip.gpu.tensor_efficiency=1e-12");
  EXPECT_EQ(g.status, 2) << g.output;
  EXPECT_NE(g.output.find("chip.gpu.tensor_efficiency: 1e-12: the weight GEMMs (2.81808e+12 FLOP at 15831.2 "
                          "FLOP/s on all cores) would take at least 2060 days"),
            std::string::npos)
      << g.output;
  Outcome bw = Tpsim("run " + kRef + one + " --set chip.memory[0].bandwidth_gbps=1e-9");
  EXPECT_EQ(bw.status, 2) << bw.output;
  EXPECT_NE(bw.output.find("chip.memory[0].bandwidth_gbps: 1e-09: reading the streamed weights"),
            std::string::npos)
      << bw.output;
  // An absurd efficiency is named, not the sane bandwidth beside it (it blamed bandwidth_gbps: 60).
  Outcome eff = Tpsim("run " + kRef + one + " --set chip.memory[0].efficiency=1e-300");
  EXPECT_EQ(eff.status, 2) << eff.output;
  EXPECT_NE(eff.output.find("chip.memory[0].efficiency: 1e-300: reading the streamed weights"),
            std::string::npos)
      << eff.output;
  // Where the weights fit SRAM the streamed-weights bound does not apply; the run stops at the
  // first DRAM task, whose channel alone would hold it past the clock: a config error at the
  // memory's field, on both engines (it was exit 1, unlocated: "a DRAM read ... ends later than").
  for (const char* engine : {"analytical", "tlm"}) {
    Outcome dram = Tpsim(
        "run configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto --set chip.memory[0].efficiency=1e-300 "
        "--quiet --engine " +
        std::string(engine));
    EXPECT_EQ(dram.status, 2) << dram.output;
    EXPECT_EQ(
        dram.output.rfind("<command line: --set chip.memory[0].efficiency=1e-300>:1:1: "
                          "chip.memory[0].efficiency: 1e-300: a DRAM read of 1.04858 MB on channel 0 (task ",
                          0),
        0u)
        << dram.output;
    // 1,048,576 bytes at 8.192e-298 GB/s (819.2 GB/s x 1e-300): 1.28e294 s, 1.481e+289 days.
    EXPECT_NE(
        dram.output.find("would take 1.481e+289 days at the channel's 8.192e-298 GB/s effective, longer "
                         "than the 106.7 days (2^63 ps) tpsim can represent"),
        std::string::npos)
        << dram.output;
  }
  // A compute task bound by an absurd SRAM bandwidth passes the clock at run time (exit 1); the
  // fields to check include the SRAM bandwidth (they named the clock and utilization only).
  Outcome sram = Tpsim("run " + kRef + one + " --set chip.core.sram_bandwidth_gbps=1e-9 --quiet");
  EXPECT_EQ(sram.status, 1) << sram.output;
  EXPECT_NE(sram.output.find("chip.core.sram_bandwidth_gbps"), std::string::npos) << sram.output;
  // One task whose SRAM bytes alone pass the clock: a config error at the field (exit 1 before).
  // 655,360 bytes at 1e-15 GB/s (1e-6 B/s): 6.55e11 s, 7.585e+06 days.
  Outcome sram_alone = Tpsim("run " + kRef + one + " --set chip.core.sram_bandwidth_gbps=1e-15 --quiet");
  EXPECT_EQ(sram_alone.status, 2) << sram_alone.output;
  EXPECT_NE(
      sram_alone.output.find(
          "chip.core.sram_bandwidth_gbps: 1e-15: a compute task on core 0 (task 0, op attn_norm) touching "
          "0.65536 MB of SRAM would take 7.585e+06 days at 1e-15 GB/s, longer than the 106.7 days"),
      std::string::npos)
      << sram_alone.output;
  Outcome slow = Tpsim("run " + kRef + " --set chip.noc.link_bandwidth_gbps=1e-10 --quiet");
  EXPECT_EQ(slow.status, 2) << slow.output;
  EXPECT_NE(slow.output.find("chip.noc.link_bandwidth_gbps: 1e-10: the transfers between the TP ranks"),
            std::string::npos)
      << slow.output;
  // On a wafer of one-core dies every link is die-to-die: that field is named, at its value (it
  // named link_bandwidth_gbps: 160, which no link had).
  Outcome d2d = Tpsim("run " + kRef +
                      " --set chip.noc.topology=wafer --set chip.noc.die_rows=1 --set chip.noc.die_cols=1 "
                      "--set chip.noc.d2d_bandwidth_gbps=1e-10 --set chip.noc.d2d_latency_ns=5 --quiet");
  EXPECT_EQ(d2d.status, 2) << d2d.output;
  EXPECT_NE(d2d.output.find("chip.noc.d2d_bandwidth_gbps: 1e-10: the transfers between the TP ranks"),
            std::string::npos)
      << d2d.output;
  // Not certain from the config alone: run, then stopped by the engine's check (exit 1).
  Outcome link = Tpsim("run " + kRef + " --set chip.noc.link_bandwidth_gbps=1e-9 --quiet");
  EXPECT_EQ(link.status, 1) << link.output;
  EXPECT_NE(link.output.find("106.7 days"), std::string::npos) << link.output;
}

TEST_F(Hardening, EmptySweepDimensionIsLocated) {
  Write(At("e.textproto"), SweepFile("axis { field: \"mapping.tp\" }\n"));
  Outcome o = Tpsim("sweep " + At("e.textproto") + " --db " + At("e.sqlite"));
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_EQ(o.output.rfind(At("e.textproto") + ":2:1: axis[0].values", 0), 0u) << o.output;
}

TEST_F(Hardening, DbOfAnotherApplicationIsRefusedUntouched) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(At("other.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE points (x INTEGER, y INTEGER); INSERT INTO points VALUES (1, 2);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const std::string before = Read(At("other.sqlite"));
  Write(At("s.textproto"), SweepFile("axis { field: \"mapping.tp\" values: [\"4\"] }\n"));
  Outcome o = Tpsim("sweep " + At("s.textproto") + " --db " + At("other.sqlite"));
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_NE(o.output.find("is not a tpsim sweep store"), std::string::npos) << o.output;
  EXPECT_EQ(Read(At("other.sqlite")), before);
  // Nor a file that is no database at all (here: the sweep file itself is refused first).
  Outcome s = Tpsim("sweep " + At("s.textproto") + " --db " + At("s.textproto"));
  EXPECT_EQ(s.status, 2) << s.output;
  Outcome c =
      Tpsim("sweep " + At("s.textproto") + " --db " + At("ok.sqlite") + " --csv " + At("s.textproto"));
  EXPECT_EQ(c.status, 2) << c.output;
  EXPECT_NE(c.output.find("--csv"), std::string::npos) << c.output;
  EXPECT_EQ(Read(At("s.textproto")).rfind("base:", 0), 0u);
}

TEST_F(Hardening, StaleSweepTempFoldersAreRemoved) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);  // a pid that no longer runs
  fs::create_directories(dir_ / "tmp" / ("tpsim-sweep-" + std::to_string(pid)) / "x");
  fs::create_directories(dir_ / "tmp" / ("tpsim-sweep-" + std::to_string(::getpid())));  // alive: kept
  Write(At("s.textproto"), SweepFile("axis { field: \"mapping.tp\" values: [\"4\"] }\n"));
  Outcome o =
      Tpsim("sweep " + At("s.textproto") + " --db " + At("s.sqlite"), kSrc, "TMPDIR='" + At("tmp") + "'");
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_FALSE(fs::exists(dir_ / "tmp" / ("tpsim-sweep-" + std::to_string(pid))));
  EXPECT_TRUE(fs::exists(dir_ / "tmp" / ("tpsim-sweep-" + std::to_string(::getpid()))));
}

TEST_F(Hardening, ServedArrivalsMustBeRepresentable) {
  Outcome o = Tpsim("serve " + kServing + " --set workload.requests.synthetic.rate_per_s=1e-300");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("workload.requests.synthetic.rate_per_s: 1e-300:"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("goodput"), std::string::npos) << o.output;
  Outcome n = Tpsim("serve " + kServing + " --set workload.requests.synthetic.num_requests=2147483647");
  EXPECT_EQ(n.status, 2) << n.output;
  EXPECT_NE(n.output.find("must be at most 10000000"), std::string::npos) << n.output;
  Outcome t = Tpsim("serve " + kServing + " --set workload.requests.time_scale=1e300");
  EXPECT_EQ(t.status, 2) << t.output;
}

// A trace row of 0 output tokens is served as 1 (the prefill's token) and said in a caveat; it was
// silent, and the throughput counted tokens the trace never asked for.
TEST_F(Hardening, ZeroOutputRequestsAreServedAsOneAndSaid) {
  Write(At("z.csv"), "arrival_s,prompt_tokens,output_tokens\n0,100,0\n1,100,0\n2,100,3\n");
  WriteTraceExperiment("z.textproto", "z.csv");
  Outcome o = Tpsim("serve " + At("z.textproto") + " --requests-csv " + At("z.out.csv"));
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("caveat: 2 requests of the trace ask for 0 output tokens: each is served as 1"),
            std::string::npos)
      << o.output;
}

// A context rounded up to mapping.serving.context_bucket_tokens is timed no further than a
// sequence can reach (here the model's 1,000 positions): a bucket of 4,096 then times as one of
// 1,000 (TPOT p50 was 481.8 ms against 129.0 ms unrounded; it timed contexts the model never reaches).
TEST_F(Hardening, ContextBucketsStopAtTheLongestContext) {
  auto serve = [&](int bucket) {
    Outcome o =
        Tpsim("serve " + kServing +
              " --set workload.requests.synthetic.num_requests=30 --set model.max_position_embeddings=1000 "
              "--set mapping.serving.context_bucket_tokens=" +
              std::to_string(bucket));
    EXPECT_EQ(o.status, 0) << o.output;
    const size_t from = o.output.find("\nTTFT");
    return o.output.substr(from, o.output.find("caveat: contexts") - from);
  };
  EXPECT_EQ(serve(4096), serve(1000));
}

TEST_F(Hardening, TraceSpanningMonthsIsRefusedAtItsLine) {
  Write(At("t.csv"), "arrival_s,prompt_tokens,output_tokens\n0,16,4\n1e8,16,4\n");
  WriteTraceExperiment("exp.textproto", "t.csv");
  Outcome o = Tpsim("serve " + At("exp.textproto"));
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_EQ(o.output.rfind(At("t.csv") + ":3:1: workload.requests.trace_file", 0), 0u) << o.output;
}

TEST_F(Hardening, OutputsNeverOverwriteInputs) {
  const std::string text = Relocated(Read(kRef));
  Write(At("x.textproto"), text);
  Outcome o = Tpsim("run " + At("x.textproto") + " --quiet --out " + At("x.textproto"));
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("--out"), std::string::npos) << o.output;
  EXPECT_EQ(Read(At("x.textproto")), text);
  Outcome t = Tpsim("run " + At("x.textproto") + " --quiet --trace " + kSrc +
                    "/configs/chips/../chips/wafer-8x8.textproto");
  EXPECT_EQ(t.status, 2) << t.output;
  // Every file the run reads, not only the configs: a MoE routing trace and a placement file
  // (run --out, sweep --csv), the experiment (search --out), a chip or shapes file
  // (collectives / gemm --csv). Each was overwritten, exit 0.
  std::string moe = Relocated(Read(kSrc + "/configs/experiments/moe-qwen3-30b-a3b.textproto"));
  moe.replace(moe.find("routing: \"balanced\""), 19, "routing: \"trace\" routing_file: \"routing.csv\"");
  Write(At("moe.textproto"), moe);
  std::string trace = "layer";
  for (int e = 0; e < 128; ++e) trace += ",e" + std::to_string(e);
  for (int l = 0; l < 48; ++l) {
    trace += "\n" + std::to_string(l);
    for (int e = 0; e < 128; ++e) trace += ",1";
  }
  Write(At("routing.csv"), trace + "\n");
  Write(At("cores.txt"), "0\n");
  Write(At("shapes.csv"), "m,n,k\n64,64,64\n");
  Write(At("sp.textproto"),
        "base: \"" + At("moe.textproto") + "\"\naxis { field: \"mapping.tp\" values: [\"4\"] }\n");
  const std::string place = " --set mapping.placement=file --set mapping.placement_file=" + At("cores.txt");
  for (const auto& [args, flag, input] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"run " + At("moe.textproto") + " --quiet --out " + At("routing.csv"), "--out", "routing.csv"},
           {"run " + At("x.textproto") + place + " --quiet --out " + At("cores.txt"), "--out", "cores.txt"},
           {"sweep " + At("sp.textproto") + " --db " + At("sp.sqlite") + " --csv " + At("routing.csv"),
            "--csv", "routing.csv"},
           {"search " + At("x.textproto") +
                " --tp 4 --stages 16 --partitions k_split --placements linear "
                "--collectives ring --spans stage --confirm 0 --jobs 1 --out " +
                At("x.textproto"),
            "--out", "x.textproto"},
           {"collectives " + kSrc +
                "/configs/chips/../chips/wafer-8x8.textproto --op all_reduce --ranks 4 "
                "--sizes 1K --csv " +
                kSrc + "/configs/chips/wafer-8x8.textproto",
            "--csv", "wafer-8x8.textproto"},
           {"gemm wafer-8x8 --shapes " + At("shapes.csv") + " --csv " + At("shapes.csv"), "--csv",
            "shapes.csv"}}) {
    const std::string before = Read(At(input));
    Outcome w = Tpsim(args);
    EXPECT_EQ(w.status, 2) << args << "\n" << w.output;
    EXPECT_NE(w.output.find(flag + ": "), std::string::npos) << w.output;
    EXPECT_NE(w.output.find("names an input of this run"), std::string::npos) << w.output;
    if (input != "wafer-8x8.textproto") {
      EXPECT_EQ(Read(At(input)), before) << args;
    }
  }
  // Two outputs of one run naming one file: one was lost.
  Outcome two = Tpsim("run " + kRef + " --quiet --out " + At("same.json") + " --trace " + At("same.json"));
  EXPECT_EQ(two.status, 2) << two.output;
  EXPECT_NE(two.output.find("--trace: " + At("same.json") + ": names the same file as --out"),
            std::string::npos)
      << two.output;
  EXPECT_FALSE(fs::exists(At("same.json")));
  Outcome serve2 =
      Tpsim("serve " + kServing + " --requests-csv " + At("same.csv") + " --kv-csv " + At("same.csv"));
  EXPECT_EQ(serve2.status, 2) << serve2.output;
  EXPECT_NE(serve2.output.find("names the same file as --requests-csv"), std::string::npos) << serve2.output;
  // tpsim-validate (built where the CUDA toolkit is): its experiment is an input too, and
  // --predicted is written under --dry-run (it needs no GPU; it was skipped, silently).
  if (!fs::exists(TPSIM_BINARY_DIR "/bin/tpsim-validate")) return;
  const std::string gpu = Relocated(Read(kSrc + "/validate/experiments/qwen3-4b-h200.textproto"));
  Write(At("g.textproto"), gpu);
  const std::string validate = "cd '" + At("") +
                               "' && timeout 60 '" TPSIM_BINARY_DIR "/bin/tpsim-validate' " +
                               At("g.textproto") + " --dry-run --no-numerics ";
  Outcome v =
      tpsim::test::RunCommand(validate + "--predicted-program " + At("g.textproto") + " 2>&1 </dev/null");
  EXPECT_EQ(v.status, 2) << v.output;
  EXPECT_NE(v.output.find("--predicted-program: "), std::string::npos) << v.output;
  EXPECT_EQ(Read(At("g.textproto")), gpu);
  Outcome p = tpsim::test::RunCommand(validate + "--predicted " + At("p.json") + " 2>&1 </dev/null");
  EXPECT_EQ(p.status, 0) << p.output;
  EXPECT_EQ(Read(At("p.json")).rfind("{", 0), 0u) << p.output;
}

TEST_F(Hardening, WriteErrorsExitOne) {
  Outcome o = Tpsim("run " + kRef + " --quiet --out /dev/full");
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_NE(o.output.find("cannot write /dev/full"), std::string::npos) << o.output;
  Outcome d = Tpsim("run " + kRef + " --quiet --out " + At("no/such/dir/r.json"));
  EXPECT_EQ(d.status, 1) << d.output;
  // A successful write replaces the file whole and leaves no temporary file.
  Write(At("r.json"), "old");
  Outcome ok = Tpsim("run " + kRef + " --quiet --out " + At("r.json"));
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_EQ(Read(At("r.json")).rfind("{", 0), 0u);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  // Small outputs too: an ofstream's failed flush at its close went unnoticed, so these
  // printed that they wrote /dev/full and exited 0.
  for (const std::string& args :
       {std::string("agree --seed 1 --only 0 --emit /dev/full"),
        std::string("agree --seed 1 --count 1 --csv /dev/full"),
        "search " + kRef +
            " --tp 4 --stages 16 --partitions k_split --placements linear --collectives ring "
            "--confirm 0 --out /dev/full"}) {
    Outcome w = Tpsim(args);
    EXPECT_EQ(w.status, 1) << args << "\n" << w.output;
    EXPECT_NE(w.output.find("cannot write /dev/full: No space left on device"), std::string::npos)
        << w.output;
  }
  // tpsim-validate is built where the CUDA toolkit is (not in the fuzz/ASan tree).
  if (!fs::exists(TPSIM_BINARY_DIR "/bin/tpsim-validate")) return;
  Outcome v = tpsim::test::RunCommand("cd '" TPSIM_SOURCE_DIR "' && timeout 60 '" TPSIM_BINARY_DIR
                                      "/bin/tpsim-validate' validate/experiments/qwen3-4b-h200.textproto "
                                      "--collectives --dry-run --csv /dev/full 2>&1 </dev/null");
  EXPECT_EQ(v.status, 1) << v.output;
  EXPECT_NE(v.output.find("cannot write /dev/full: No space left on device"), std::string::npos) << v.output;
}

// A type error inside a JSON file that an experiment names was reported as "is not a Chip
// config (chipj.json:1:1 does not start one)": list elements went unchecked and protobuf's
// own error has no location. Now it is the element's file:line:col, field, value and rule.
TEST_F(Hardening, JsonTypeErrorsInReferencedFilesAreLocated) {
  const std::string chip =
      "{\n  \"name\": \"c\",\n  \"noc\": {\"rows\": 2, \"cols\": 2},\n"
      "  \"memory\": [{\"name\": \"m\", \"attach\": [\"r0c0\", 5], \"efficiency\": EFF}]\n}\n";
  auto with = [](std::string s, const std::string& from, const std::string& to) {
    return s.replace(s.find(from), from.size(), to);
  };
  Write(At("chipj.json"), with(chip, "EFF", "0.9"));
  Write(At("ej.textproto"), "name: \"e\"\nchip_file: \"chipj.json\"\n");
  Outcome a = Tpsim("describe " + At("ej.textproto"));
  EXPECT_EQ(a.status, 2) << a.output;
  EXPECT_EQ(a.output, At("chipj.json") + ":4:47: memory[0].attach[1]: 5: expected a string\n");

  Write(At("chipj.json"), with(with(chip, "EFF", "1e999"), ", 5]", "]"));
  ExpectDescribeRefused("ej.textproto", "chipj.json",
                        ":4:62: memory[0].efficiency: 1e999: number out of range");

  Write(At("mj.json"), "{\n  \"name\": \"m\",\n  \"mlp_only_layers\": [1, \"a\"]\n}\n");
  Write(At("em.textproto"), "name: \"e\"\nchip_file: \"" + kSrc +
                                "/configs/chips/mesh-4x4-hbm.textproto\"\nmodel_file: \"mj.json\"\n");
  ExpectDescribeRefused("em.textproto", "mj.json", ":3:26: mlp_only_layers[1]: a: expected an integer");

  // As the experiment itself: the element, not <parse> at 1:1.
  Write(At("x.json"), "{\n  \"chip\": {\n    \"memory\": [{\"attach\": [true]}]\n  }\n}\n");
  ExpectDescribeRefused("x.json", "x.json", ":3:28: chip.memory[0].attach[0]: true: expected a string");
  // Two members of a oneof: at the second one, naming the first.
  Write(At("o.json"), "{\n  \"model_name\": \"qwen3-4b\",\n  \"model\": {\"name\": \"m\"}\n}\n");
  ExpectDescribeRefused("o.json", "o.json", ":3:4: model: model_name: only one of them may be given");
}

// A JSON key given twice was accepted, the last value winning; textproto refuses it.
TEST_F(Hardening, DuplicateJsonKeysAreRefused) {
  Write(At("d.json"), "{\n  \"name\": \"d\",\n  \"workload\": {\"batch\": 0,\n    \"batch\": 1}\n}\n");
  ExpectDescribeRefused("d.json", "d.json",
                        ":4:6: workload.batch: : specified more than once (first on line 3)");
  Write(At("t.json"), "{\n  \"name\": \"d\",\n  \"name\": \"e\"\n}\n");
  ExpectDescribeRefused("t.json", "t.json", ":3:4: name: : specified more than once (first on line 2)");
}

// A sweep whose base file is missing was reported at "<command line>:1:1: EXPERIMENT".
TEST_F(Hardening, SweepBaseErrorsAreAtTheBaseField) {
  Write(At("sw.textproto"),
        "name: \"s\"\nbase: \"nonexistent.textproto\"\naxis { field: \"workload.batch\" values: [\"1\"] }\n");
  Outcome s = Tpsim("sweep " + At("sw.textproto") + " --db " + At("s.sqlite"));
  EXPECT_EQ(s.status, 2) << s.output;
  EXPECT_EQ(s.output.rfind(At("sw.textproto") + ":2:1: base: ", 0), 0u) << s.output;
  EXPECT_EQ(s.output.find("<command line>"), std::string::npos) << s.output;
  fs::create_directories(At("adir.textproto"));
  Write(At("sw.textproto"),
        "name: \"s\"\nbase: \"adir.textproto\"\naxis { field: \"workload.batch\" values: [\"1\"] }\n");
  Outcome d = Tpsim("sweep " + At("sw.textproto") + " --db " + At("s.sqlite"));
  EXPECT_EQ(d.status, 2) << d.output;
  EXPECT_EQ(d.output.rfind(At("sw.textproto") + ":2:1: base: ", 0), 0u) << d.output;
}

}  // namespace
