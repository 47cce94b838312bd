// `tpsim collectives`, `tpsim gemm` and `tpsim compare` on the GPU CSV formats, through the
// real binary: fixed CSV columns, argument errors (exit 2 with a sentence), every shipped
// chip answering, and the size-list parser.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cli/gpu_commands.h"
#include "sim/microbench.h"

#include "tests/cli_test_util.h"

namespace {

namespace fs = std::filesystem;

int RunTpsim(const std::string& args, std::string* output = nullptr) {
  tpsim::test::CommandOutcome o = tpsim::test::RunCommand(
      "cd '" TPSIM_SOURCE_DIR "' && timeout 120 '" TPSIM_BINARY_DIR "/bin/tpsim' " + args + " 2>&1");
  if (output) *output = std::move(o.output);
  return o.status;
}

std::vector<std::string> Lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> v;
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

class GpuCli : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("tpsim-gpu-cli-" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string P(const std::string& name) const { return (dir_ / name).string(); }
};

TEST(ParseSizes, StepsByFactorsOfTwo) {
  const auto s = tpsim::cli::ParseSizes("8K:1G");
  ASSERT_EQ(s.size(), 18u);
  EXPECT_EQ(s.front(), 8192u);
  EXPECT_EQ(s.back(), uint64_t{1} << 30);
  EXPECT_EQ(s[1], 16384u);
  EXPECT_EQ(tpsim::cli::ParseSizes("64M"), std::vector<uint64_t>{64u << 20});
  EXPECT_EQ(tpsim::cli::ParseSizes("1KiB:16KB:4"), (std::vector<uint64_t>{1024, 4096, 16384}));
  EXPECT_EQ(tpsim::cli::ParseSizes("1000:5000"), (std::vector<uint64_t>{1000, 2000, 4000}));
  EXPECT_EQ(tpsim::cli::ParseSizes("1:1T").size(), 41u);  // 2^0 .. 2^40
  for (const char* bad : {"", "8K:", "1G:8K", "0", "8X", "-8K", "8K:1G:1", "8K:1G:x", "2T", "1:2:3:4"}) {
    EXPECT_THROW(tpsim::cli::ParseSizes(bad), std::invalid_argument) << bad;
  }
}

TEST_F(GpuCli, CollectivesCsvColumnsAndRows) {
  std::string out;
  ASSERT_EQ(
      RunTpsim("collectives h100-sxm-8 --op all_reduce --ranks 8 --sizes 8K:1G --csv " + P("c.csv"), &out), 0)
      << out;
  auto lines = Lines(P("c.csv"));
  ASSERT_EQ(lines.size(), 19u);
  EXPECT_EQ(lines[0], "op,ranks,size_bytes,time_us,algbw_gbps,busbw_gbps,algorithm,protocol");
  EXPECT_EQ(lines[1].rfind("all_reduce,8,8192,", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find(",ring,ll"), std::string::npos) << lines[1];        // NCCL's tuner: LL at 8 KiB
  EXPECT_NE(lines[18].find(",nvls,simple"), std::string::npos) << lines[18];  // NVLS at 1 GiB, 8 GPUs
  EXPECT_NE(out.find("# Avg bus bandwidth"), std::string::npos);
  // Forced algorithm and protocol are honoured and reported.
  ASSERT_EQ(
      RunTpsim("collectives h100-sxm-8 --op all_reduce --ranks 4 --sizes 1M --algo ring --proto ll128", &out),
      0);
  EXPECT_NE(out.find("ring               ll128"), std::string::npos) << out;
}

TEST_F(GpuCli, EveryShippedChipAnswersBothCommands) {
  for (const char* chip : {"h100-sxm-8", "h200-sxm-8", "b200-sxm-8", "wafer-8x8", "mesh-4x4-hbm", "torus-8x8",
                           "ring-16", "wafer-32x32"}) {
    std::string out;
    EXPECT_EQ(
        RunTpsim(std::string("collectives ") + chip + " --op all_gather --ranks 4 --sizes 64K:1M", &out), 0)
        << chip << "\n"
        << out;
    EXPECT_EQ(RunTpsim(std::string("gemm ") + chip + " --m 128 --n 4096 --k 4096 --csv " + P("g.csv"), &out),
              0)
        << chip << "\n"
        << out;
    auto lines = Lines(P("g.csv"));
    ASSERT_EQ(lines.size(), 2u) << chip;
    EXPECT_EQ(lines[0], "m,n,k,dtype,time_us,tflops,bound,tiles,waves");
    EXPECT_EQ(lines[1].rfind("128,4096,4096,bf16,", 0), 0u) << lines[1];
  }
}

// `describe` of a GPU node prints what its kernels are timed from, the gpu block: GPUs of SMs and
// bf16_tflops x tensor_efficiency. It printed the core block's clock and systolic peak (1830 MHz,
// 7915.4 TFLOP/s), unchanged by any gpu override.
TEST_F(GpuCli, DescribeNamesTheGpuBlocksPeak) {
  std::string out;
  ASSERT_EQ(
      RunTpsim("describe configs/experiments/moe-qwen3-30b-a3b-h200.textproto --set chip.gpu.bf16_tflops=100",
               &out),
      0)
      << out;
  EXPECT_NE(out.find("  cores                 8 GPUs of 132 SMs\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  peak                  800.0 TFLOP/s bf16 (656.0 achievable, gpu block)\n"),
            std::string::npos)
      << out;
  // The L2 from the gpu block (a cache; it printed "SRAM 400.0 MiB (50.0 MiB per core)" from
  // core.sram_bytes, which no GPU model reads).
  ASSERT_EQ(
      RunTpsim(
          "describe configs/experiments/moe-qwen3-30b-a3b-h200.textproto --set chip.gpu.l2_bytes=1048576",
          &out),
      0)
      << out;
  EXPECT_NE(out.find("  L2 cache              1.00 MiB per GPU (chip.gpu.l2_bytes)\n"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("SRAM"), std::string::npos) << out;
}

// --algo that the lowering replaced (halving_doubling over 7 ranks ran ring) was said only by the
// algorithm column: a warning names it, once for the sweep of sizes.
TEST_F(GpuCli, AnAlgorithmTheLoweringReplacedIsWarned) {
  std::string out;
  // `--set name=x` names the chip in the output: not warned as ignored (it was, and then shown).
  ASSERT_EQ(RunTpsim("collectives h100-sxm-8 --op all_reduce --ranks 8 --sizes 1M --set name=x", &out), 0);
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
  EXPECT_NE(out.find("over 8 ranks of x ("), std::string::npos) << out;
  ASSERT_EQ(
      RunTpsim("collectives ring-16 --op all_reduce --ranks 7 --sizes 1M:4M --algo halving_doubling", &out),
      0)
      << out;
  const std::string warning =
      "tpsim collectives: warning: --algo halving_doubling ran as ring: halving_doubling needs a "
      "power-of-two "
      "rank count, got 7: used ring";
  EXPECT_NE(out.find(warning), std::string::npos) << out;
  EXPECT_EQ(out.find(warning, out.find(warning) + 1), std::string::npos) << out;
  ASSERT_EQ(
      RunTpsim("collectives ring-16 --op all_reduce --ranks 8 --sizes 1M --algo halving_doubling", &out), 0);
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
}

TEST_F(GpuCli, GemmShapesFile) {
  {
    std::ofstream f(P("shapes.csv"));
    f << "# two shapes\nm,n,k,dtype\n1,4096,4096,bf16\n4096,4096,4096,fp8\n";
  }
  std::string out;
  ASSERT_EQ(RunTpsim("gemm h100-sxm-8 --shapes " + P("shapes.csv") + " --csv " + P("g.csv"), &out), 0) << out;
  auto lines = Lines(P("g.csv"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].rfind("1,4096,4096,bf16,", 0), 0u);
  EXPECT_NE(lines[1].find(",memory,"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[2].rfind("4096,4096,4096,fp8,", 0), 0u);
  EXPECT_NE(lines[2].find(",compute,"), std::string::npos) << lines[2];
  // A written GEMM CSV is itself a shapes file.
  EXPECT_EQ(RunTpsim("gemm b200-sxm-8 --shapes " + P("g.csv"), &out), 0) << out;
  // A row's dtype the model refuses is named at its line (it said only "unknown dtype 'fp4'").
  {
    std::ofstream f(P("fp4.csv"));
    f << "m,n,k,dtype\n1,64,64,bf16\n1,64,64,fp4\n";
  }
  EXPECT_EQ(RunTpsim("gemm h100-sxm-8 --shapes " + P("fp4.csv"), &out), 2) << out;
  EXPECT_NE(out.find("tpsim gemm: " + P("fp4.csv") + ":3: unknown dtype 'fp4' (valid: bf16, fp16, fp8)"),
            std::string::npos)
      << out;
  // A dimension past --m's 12 digits (it was taken from a file), and a NUL byte shown, not cut at.
  {
    std::ofstream f(P("big-dim.csv"));
    f << "m,n,k\n1099511627776,2,3\n1,2,3" << '\0' << "\n";
  }
  EXPECT_EQ(RunTpsim("gemm h100-sxm-8 --shapes " + P("big-dim.csv"), &out), 2) << out;
  EXPECT_NE(out.find(P("big-dim.csv") + ":2: m: '1099511627776' is above 999999999999, the largest GEMM "
                                        "dimension tpsim takes (as --m, --n, --k)"),
            std::string::npos)
      << out;
  {
    std::ofstream f(P("nul.csv"));
    f << "m,n,k\n1,2,3" << '\0' << "\n";
  }
  EXPECT_EQ(RunTpsim("gemm h100-sxm-8 --shapes " + P("nul.csv"), &out), 2) << out;
  EXPECT_NE(out.find(P("nul.csv") + ":2: k: '3\\x00' is not a positive integer"), std::string::npos) << out;
  // A row past the clock too (it was exit 1 without the file or line).
  {
    std::ofstream f(P("huge.csv"));
    f << "m,n,k\n1,64,64\n4294967296,4294967296,1\n";
  }
  EXPECT_EQ(RunTpsim("gemm h100-sxm-8 --shapes " + P("huge.csv"), &out), 2) << out;
  EXPECT_NE(out.find("tpsim gemm: " + P("huge.csv") +
                     ":3: a GEMM of m=4294967296 n=4294967296 k=1 on one GPU of h100-sxm-8 takes longer"),
            std::string::npos)
      << out;
}

TEST_F(GpuCli, BadArgumentsExitTwoWithASentence) {
  struct Case {
    std::string args, says;
  };
  const std::vector<Case> cases = {
      {"collectives h100-sxm-8 --ranks 8 --sizes 8K:1G", "needs --op"},
      {"collectives h100-sxm-8 --op all_reduce --sizes 8K:1G", "needs --ranks"},
      {"collectives h100-sxm-8 --op all_reduce --ranks 8", "needs --sizes"},
      {"collectives h100-sxm-8 --op all_reduce --ranks 16 --sizes 1M", "network between nodes"},
      {"collectives h100-sxm-8 --op all_reduce --ranks x --sizes 1M", "not a whole number"},
      {"collectives h100-sxm-8 --op all_reduce --ranks 8 --sizes 1G:8K", "MIN is above MAX"},
      {"collectives h100-sxm-8 --op all_redux --ranks 8 --sizes 1M", "unknown op 'all_redux'"},
      {"collectives h100-sxm-8 --op all_gather --ranks 8 --sizes 1M --algo tree",
       "not available for all_gather"},
      {"collectives h100-sxm-8 --op all_reduce --ranks 8 --sizes 1M --proto ll256", "unknown protocol"},
      {"collectives wafer-8x8 --op all_reduce --ranks 8 --sizes 1M --proto ll", "has no NCCL protocols"},
      {"collectives wafer-8x8 --op broadcast --ranks 8 --sizes 1M", "not modelled on wafer-8x8"},
      {"collectives nosuchchip --op all_reduce --ranks 8 --sizes 1M", "unknown chip 'nosuchchip' (shipped:"},
      // Refused before lowering, not run to 11 GB (direct over 1024 ranks: 2.1 million transfers,
      // 1.09e9 deps; 13.6 GB estimated).
      {"collectives wafer-32x32 --op all_reduce --ranks 1024 --sizes 1M --algo direct --max-memory 1G",
       "--ranks 1024: a direct all_reduce over them would take about 2.1e+06 transfers and 1.09e+09 deps, "
       "13.6 "
       "GB, more than --max-memory 1.07 GB"},
      {"collectives wafer-8x8 --op all_reduce --ranks 8 --sizes 1M --max-memory lots",
       "--max-memory expects a size"},
      {"collectives h100-sxm-8 --op all_reduce --ranks 8 --sizes 1M --frobnicate",
       "unknown option --frobnicate"},
      {"gemm h100-sxm-8 --m 1 --n 4096", "needs all of --m, --n and --k"},
      {"gemm h100-sxm-8 --m 0 --n 4096 --k 4096", "not a positive whole number"},
      {"gemm h100-sxm-8 --m 1 --n 4096 --k 4096 --dtype fp4", "unknown dtype 'fp4'"},
      {"gemm wafer-8x8 --m 1 --n 4096 --k 4096 --dtype fp8", "models bf16 only"},
      {"gemm h100-sxm-8", "needs --m, --n and --k, or --shapes"},
      {"gemm h100-sxm-8 --shapes /nonexistent/shapes.csv",
       "--shapes: /nonexistent/shapes.csv: file not found"},
      // A device or FIFO never ends or blocks: refused before reading.
      {"gemm h100-sxm-8 --shapes /dev/zero", "/dev/zero: is not a regular file"},
      {"compare --chip h100-sxm-8 /dev/zero", "/dev/zero: is not a regular file"},
      {"compare /dev/zero /dev/zero", "/dev/zero: is not a regular file"},
      {"compare --chip h100-sxm-8", "needs at least one MEASURED.csv"},
      // Less than a 2-byte element a rank: some chunks were empty (2 bytes timed faster than 1).
      {"collectives wafer-8x8 --op all_gather --ranks 8 --sizes 1:64:2",
       "all_gather of 1 bytes over 8 ranks: less than one 2-byte element a rank (the buffer is cut into a "
       "chunk per rank); give at least 16 bytes"},
      // A result JSON among the CSVs was read as CSV: "...json:2: 2 fields, the header (line 1) has 1".
      {"compare validate/results/h200-2026-12-04/qwen3-4b-tp2.measured.json "
       "validate/results/public/nccl-tests-h100-8gpu-auto.csv",
       "qwen3-4b-tp2.measured.json is JSON, not CSV: this comparison reads the CSV files of"},
      {"compare --chip h100-sxm-8 validate/results/h200-2026-12-04/qwen3-4b-tp2.measured.json",
       "qwen3-4b-tp2.measured.json is JSON, not CSV"},
      // Past the clock from the shape or size and the chip's fields alone: bad input (it was exit 1).
      {"gemm h100-sxm-8 --m 8 --n 8 --k 8 --set gpu.tensor_efficiency=1e-300",
       "a GEMM of m=8 n=8 k=8 on one GPU of h100-sxm-8 takes longer than the 106.7 days"},
      {"collectives h100-sxm-8 --op all_reduce --ranks 8 --sizes 1M --set gpu.nccl_link_gbps=1e-300",
       "one all_reduce of 1048576 bytes over 8 ranks of h100-sxm-8 takes longer than the 106.7 days"},
      // nvls forced where no NVLS speed fits the link said "protocol simple is not available for
      // all_reduce with nvls (available: simple)".
      {"collectives h200-sxm-8 --op all_reduce --ranks 8 --sizes 1M --set gpu.nccl_link_gbps=1 --algo nvls "
       "--proto simple",
       "algorithm nvls has no bandwidth for all_reduce over 8 ranks: NCCL's tuner finds no NVLS speed at "
       "which 8 heads fit the GPU's NVLink bandwidth (gpu.nvlink_links x gpu.nccl_link_gbps = 18 GB/s)"},
      // A flag of one value given twice kept the last, silently (--csv a --csv b wrote b only).
      {"collectives h100-sxm-8 --op all_reduce --ranks 8 --ranks=4 --sizes 1M",
       "--ranks given twice ('8' and '4'): give it once"},
      {"gemm h100-sxm-8 --m 8 --m 16 --n 8 --k 8", "--m given twice ('8' and '16')"},
      {"compare --chip h100-sxm-8 --chip b200-sxm-8 validate/results/public/nccl-tests-h100-8gpu-auto.csv",
       "--chip given twice ('h100-sxm-8' and 'b200-sxm-8')"},
      {"compare a.json b.json --plot x.png --plot=y.png", "--plot given twice ('x.png' and 'y.png')"},
      {"agree --seed 1 --count 1 --seed=2", "--seed given twice ('1' and '2')"},
      // The rank count's rule before the memory guard's (it said to raise --max-memory), and a size
      // of too many digits is too large, not "not a number".
      {"collectives wafer-32x32 --op all_reduce --ranks 999999 --sizes 1M --algo direct",
       "--ranks 999999 outside [2, 1024] (the cores of wafer-32x32)"},
      {"collectives wafer-8x8 --op all_reduce --ranks 8 --sizes 9223372036854775807",
       "size '9223372036854775807' is above 1 TiB"},
      // A gpu block that a --set made is at that --set (it was at the chip file's 1:1).
      {"collectives torus-8x8 --op all_reduce --ranks 8 --sizes 1M --set gpu.sms=1",
       "<command line: --set gpu.sms=1>:1:1: chip.gpu.bf16_tflops: 0: must be positive"},
      // The next option taken as a flag's value (a picture named --summary).
      {"compare a.json b.json --plot --summary", "--plot needs a value, got the option '--summary'"},
      {"compare --chip --summary m.csv", "--chip needs a value, got the option '--summary'"},
  };
  for (const auto& c : cases) {
    std::string out;
    EXPECT_EQ(RunTpsim(c.args, &out), 2) << c.args << "\n" << out;
    EXPECT_NE(out.find(c.says), std::string::npos) << c.args << "\n" << out;
    EXPECT_EQ(out.find("terminate called"), std::string::npos) << c.args;
  }
  // A bad --set is a located config error, exit 2.
  std::string out;
  EXPECT_EQ(RunTpsim("gemm h100-sxm-8 --m 1 --n 1 --k 1 --set gpu.tensor_efficiency=2", &out), 2) << out;
  EXPECT_NE(out.find("chip.gpu.tensor_efficiency: 2: must be in (0, 1]"), std::string::npos) << out;
  EXPECT_EQ(RunTpsim("collectives --help", &out), 0);
  EXPECT_NE(out.find("--sizes SPEC"), std::string::npos);
  EXPECT_EQ(RunTpsim("gemm --help", &out), 0);
  EXPECT_NE(out.find("--shapes FILE"), std::string::npos);
}

// A --set the command's model does not read printed the same table without a word (collectives,
// gemm, compare --chip)
// (`--set noc.link_bandwidth_gbps=1e-300` on h200-sxm-8); it is warned, the table unchanged.
TEST_F(GpuCli, SetsTheModelDoesNotReadAreWarned) {
  std::string plain, with;
  ASSERT_EQ(RunTpsim("collectives h200-sxm-8 --op all_reduce --ranks 8 --sizes 1M", &plain), 0) << plain;
  ASSERT_EQ(
      RunTpsim(
          "collectives h200-sxm-8 --op all_reduce --ranks 8 --sizes 1M --set noc.link_bandwidth_gbps=1e-300 "
          "--set noc.nodes=8",
          &with),
      0)
      << with;
  const std::string warning =
      "tpsim collectives: warning: --set noc.link_bandwidth_gbps is ignored: a GPU node's collectives are "
      "the NCCL-like model of chip.gpu over its GPUs (noc.nodes)\n";
  EXPECT_EQ(with, warning + plain);
  // The function on --set paths (their values do not matter).
  auto unread = [](const char* command, bool gpu, const std::vector<std::string>& paths) {
    std::vector<tpsim::sim::Override> sets;
    for (const std::string& p : paths) sets.push_back({p, "1"});
    return tpsim::sim::UnreadChipSets(command, gpu, sets);
  };
  EXPECT_EQ(
      unread("collectives", true, {"gpu.ring_efficiency", "noc.nodes", "chip.core.sram_bytes", "noc.rows"}),
      (std::vector<std::string>{"--set chip.core.sram_bytes is ignored: a GPU node's collectives are the "
                                "NCCL-like model of chip.gpu over its GPUs (noc.nodes)",
                                "--set noc.rows is ignored: a GPU node's collectives are the "
                                "NCCL-like model of chip.gpu over its GPUs (noc.nodes)"}));
  EXPECT_EQ(unread("gemm", true, {"gpu.l2_bytes", "core.sram_bytes"}),
            (std::vector<std::string>{
                "--set core.sram_bytes is ignored: a GPU's GEMMs are the model of chip.gpu"}));
  EXPECT_EQ(
      unread("gemm", false, {"core.sram_bytes", "clock_mhz", "noc.link_bandwidth_gbps"}),
      (std::vector<std::string>{"--set noc.link_bandwidth_gbps is ignored: a GEMM on one core reads the core "
                                "and its clock (core, clock_mhz)"}));
  EXPECT_TRUE(unread("collectives", false, {"noc.link_bandwidth_gbps", "core.sram_bytes"}).empty());
  // compare --chip: what neither model reads.
  std::string cmp;
  ASSERT_EQ(
      RunTpsim(
          "compare --chip h100-sxm-8 validate/results/public/nccl-tests-h100-8gpu-auto.csv --summary --set "
          "noc.link_bandwidth_gbps=1 --set gpu.ring_efficiency=0.9 --set noc.nodes=8",
          &cmp),
      0)
      << cmp;
  EXPECT_EQ(
      cmp.rfind("tpsim compare: warning: --set noc.link_bandwidth_gbps is ignored: neither the GEMM nor the "
                "collective model of the chip reads it\n# predicted on h100-sxm-8",
                0),
      0u)
      << cmp;
}

TEST_F(GpuCli, CompareTwoFilesAndWithChip) {
  std::string out;
  ASSERT_EQ(
      RunTpsim("collectives h100-sxm-8 --op reduce_scatter --ranks 4 --sizes 1M:4M --csv " + P("pred.csv")),
      0);
  {
    std::ofstream f(P("meas.csv"));
    // Twice the predicted time at 1 MiB, the same at 2 MiB: errors -50 % and 0 %; MAPE 25 %.
    auto lines = Lines(P("pred.csv"));
    f << "# made up for the test\n" << lines[0] << "\n";
    std::istringstream r1(lines[1]), r2(lines[2]);
    std::vector<std::string> a, b;
    for (std::string x; std::getline(r1, x, ',');) a.push_back(x);
    for (std::string x; std::getline(r2, x, ',');) b.push_back(x);
    f << a[0] << "," << a[1] << "," << a[2] << "," << std::stod(a[3]) * 2 << ",,,auto,auto\n";
    f << b[0] << "," << b[1] << "," << b[2] << "," << b[3] << ",,,auto,auto\n";
  }
  ASSERT_EQ(RunTpsim("compare " + P("pred.csv") + " " + P("meas.csv"), &out), 0) << out;
  EXPECT_NE(out.find("reduce_scatter, 4 ranks, algorithm auto, protocol auto: 2 sizes, MAPE 25.00 %"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("file MAPE: 25.00 % over 2 rows"), std::string::npos) << out;
  // --chip predicts the measured rows itself: the same numbers.
  ASSERT_EQ(RunTpsim("compare --chip h100-sxm-8 " + P("meas.csv") + " --summary", &out), 0) << out;
  EXPECT_NE(out.find("MAPE 25.00 %"), std::string::npos) << out;
  // The shipped calibration files all compare.
  ASSERT_EQ(RunTpsim("compare --chip h100-sxm-8 validate/results/public/nccl-tests-h100-4gpu.csv "
                     "validate/results/public/vidur-h100-gemm.csv --summary",
                     &out),
            0)
      << out;
  EXPECT_NE(out.find("all_gather, 4 ranks"), std::string::npos);
  EXPECT_NE(out.find("n=4096 k=4096 fp16"), std::string::npos);
  // A file none of whose rows the model predicts (1 rank: outside one node's 2..8 GPUs) has no
  // MAPE (before: "file MAPE: 0.00 % over 0 rows"), and is no comparison: exit 2 after the report.
  {
    std::ofstream f(P("one-rank.csv"));
    f << "op,ranks,size_bytes,time_us\nall_reduce,1,1024,5\n";
  }
  ASSERT_EQ(RunTpsim("compare --chip h100-sxm-8 " + P("one-rank.csv"), &out), 2) << out;
  EXPECT_NE(out.find("file MAPE: n/a (no row compared); 1 rows not compared"), std::string::npos) << out;
  EXPECT_EQ(out.find("0.00 %"), std::string::npos) << out;
}

}  // namespace
