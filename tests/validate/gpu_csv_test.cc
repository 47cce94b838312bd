// The GPU microbenchmark CSV formats (validate/gpu_csv.h), the rows tpsim-validate writes from
// its measurements (validate/microbench_plan.h) and the CSV comparison (validate/compare_gpu.h),
// all on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>

#include "validate/compare_gpu.h"
#include "validate/gpu_csv.h"
#include "validate/microbench_plan.h"

namespace tpsim::validate {
namespace {

TEST(GpuCsv, CollectiveRoundTrip) {
  CollectiveRow r{"all_gather", 4, 1 << 20, 25.83, 40.6, 30.45, "ring", "ll"};
  const std::string text =
      "# source\n" + std::string(kCollectiveCsvHeader) + "\n" + CollectiveCsvLine(r) + "\n";
  EXPECT_EQ(CollectiveCsvLine(r), "all_gather,4,1048576,25.830,40.600,30.450,ring,ll");
  EXPECT_EQ(DetectCsvKind(text, "x.csv"), CsvKind::kCollective);
  auto rows = ReadCollectiveCsv(text, "x.csv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].op, "all_gather");
  EXPECT_EQ(rows[0].ranks, 4);
  EXPECT_EQ(rows[0].size_bytes, 1u << 20);
  EXPECT_DOUBLE_EQ(rows[0].time_us, 25.83);
  EXPECT_EQ(rows[0].protocol, "ll");
}

TEST(GpuCsv, ColumnsByNameAndDefaults) {
  // Reordered columns, no algorithm / protocol: they default to auto.
  auto rows = ReadCollectiveCsv("size_bytes,op,time_us,ranks\n8192,all_reduce,23.75,4\n", "x.csv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].algorithm, "auto");
  EXPECT_EQ(rows[0].ranks, 4);
  // A measured GEMM row leaves bound, tiles and waves empty.
  auto g = ReadGemmCsv(std::string(kGemmCsvHeader) + "\n1,4096,4096,fp16,16.000,2.097,,,\n", "g.csv");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_FALSE(g[0].has_tiles);
  EXPECT_EQ(g[0].dtype, "fp16");
  EXPECT_EQ(GemmCsvLine(g[0]), "1,4096,4096,fp16,16.000,2.097,,,");
  auto shapes = ReadShapesCsv("m,n,k\n64,128,256\n", "s.csv");
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes[0].dtype, "");  // the caller's default applies
}

TEST(GpuCsv, ErrorsNameTheFileAndLine) {
  auto msg = [](auto fn) {
    try {
      fn();
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string h = std::string(kCollectiveCsvHeader) + "\n";
  EXPECT_EQ(msg([&] { ReadCollectiveCsv(h + "all_reduce,4,8192,abc,,,auto,auto\n", "f.csv"); }),
            "f.csv:2: time_us: 'abc' is not a number");
  EXPECT_EQ(msg([&] { ReadCollectiveCsv("# c\n" + h + "all_reduce,0,8192,1,,,auto,auto\n", "f.csv"); }),
            "f.csv:3: ranks: '0' is not a positive integer");
  EXPECT_EQ(msg([&] { ReadCollectiveCsv(h + "all_reduce,4,8192,-1,,,auto,auto\n", "f.csv"); }),
            "f.csv:2: time_us: -1 must be positive");
  EXPECT_EQ(msg([&] { ReadCollectiveCsv(h + "all_reduce,4\n", "f.csv"); }),
            "f.csv:2: has 2 fields, column size_bytes is field 3");
  EXPECT_EQ(msg([&] { ReadGemmCsv("m,n,time_us\n1,2,3\n", "g.csv"); }), "g.csv: header has no column k");
  EXPECT_EQ(msg([&] { DetectCsvKind("# only a comment\n", "e.csv"); }),
            "e.csv: no header line (and no rows)");
  EXPECT_NE(msg([&] { DetectCsvKind("a,b\n1,2\n", "e.csv"); }).find("neither a collectives CSV"),
            std::string::npos);
}

TEST(MicrobenchPlan, MeasuredRowsUseNcclTestsDefinitions) {
  // 64 MiB all_reduce over 8 GPUs in 300 us: algbw = 67108864 / 300e-6 / 1e9 = 223.696 GB/s,
  // busbw = algbw x 2 x 7 / 8.
  CollectiveRow r = MeasuredCollectiveRow("all_reduce", 8, 64 << 20, 300e-6);
  EXPECT_NEAR(r.time_us, 300, 1e-9);
  EXPECT_NEAR(r.algbw_gbps, 67108864 / 300e-6 / 1e9, 1e-9);
  EXPECT_NEAR(r.busbw_gbps, r.algbw_gbps * 14 / 8, 1e-9);
  EXPECT_EQ(r.algorithm, "auto");
  CollectiveRow g = MeasuredCollectiveRow("all_gather", 4, 1 << 20, 1e-4);
  EXPECT_NEAR(g.busbw_gbps, g.algbw_gbps * 3 / 4, 1e-12);
  GemmRow m = MeasuredGemmRow(4096, 4096, 4096, "bf16", 200e-6);
  EXPECT_NEAR(m.tflops, 2.0 * 4096 * 4096 * 4096 / 200e-6 / 1e12, 1e-9);
  EXPECT_EQ(GemmCsvLine(m), "4096,4096,4096,bf16,200.000,687.195,,,");
}

TEST(MicrobenchPlan, SweepsAndShapes) {
  EXPECT_EQ(SweepRanks(1), std::vector<int>{});
  EXPECT_EQ(SweepRanks(4), (std::vector<int>{2, 4}));
  EXPECT_EQ(SweepRanks(8), (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(SweepRanks(16), (std::vector<int>{2, 4, 8}));
  const auto sizes = SweepSizes();
  ASSERT_EQ(sizes.size(), 18u);
  EXPECT_EQ(sizes.front(), 8192u);
  EXPECT_EQ(sizes.back(), 1u << 30);
  const auto shapes = DefaultGemmShapes();
  std::set<std::pair<uint64_t, uint64_t>> nk;
  std::set<uint64_t> ms;
  for (const auto& s : shapes) {
    EXPECT_GE(s.n, 1024u);
    EXPECT_LE(s.n, 28672u);
    EXPECT_GE(s.k, 1024u);
    EXPECT_LE(s.k, 28672u);
    EXPECT_EQ(s.dtype, "bf16");
    nk.insert({s.n, s.k});
    ms.insert(s.m);
  }
  EXPECT_EQ(ms.size(), 14u);  // 1 .. 8192
  EXPECT_EQ(*ms.rbegin(), 8192u);
  EXPECT_EQ(shapes.size(), nk.size() * 14);
  // Llama-3.1-8B's fused QKV at TP 1 ((32 + 16) x 128, 4096) and Llama-3.1-70B's down at TP 1.
  EXPECT_TRUE(nk.count({6144, 4096}));
  EXPECT_TRUE(nk.count({8192, 28672}));
  EXPECT_FALSE(nk.count({57344, 8192}));  // 70B's gate+up at TP 1 is above 28672
  const std::string text =
      CollectiveCsvText({"on nothing"}, {MeasuredCollectiveRow("all_reduce", 2, 8192, 1e-5)});
  EXPECT_EQ(text.substr(0, 13), "# on nothing\n");
  EXPECT_EQ(ReadCollectiveCsv(text, "t").size(), 1u);
}

GemmRow G(uint64_t m, uint64_t n, uint64_t k, double us) {
  GemmRow g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.time_us = us;
  return g;
}

TEST(CompareGpu, MapePerTableByHand) {
  // Two GEMM shapes: errors +10 % and -30 % on the first, +20 % on the second.
  std::vector<GemmRow> meas = {G(1, 64, 64, 10), G(2, 64, 64, 10), G(1, 128, 64, 10)};
  std::vector<GemmRow> pred = {G(1, 64, 64, 11), G(2, 64, 64, 7), G(1, 128, 64, 12)};
  GpuFileComparison c = CompareGemms("m.csv", meas, pred);
  ASSERT_EQ(c.tables.size(), 2u);
  EXPECT_EQ(c.tables[0].name, "n=64 k=64 bf16");
  EXPECT_NEAR(c.tables[0].mape_pct, 20.0, 1e-9);
  EXPECT_EQ(c.tables[0].worst, 1);
  EXPECT_NEAR(c.tables[1].mape_pct, 20.0, 1e-9);
  EXPECT_NEAR(c.mape_pct, 20.0, 1e-9);
  EXPECT_EQ(c.compared, 3u);
  // A measured row without a prediction is listed, not compared.
  meas.push_back(G(4, 64, 64, 10));
  c = CompareGemms("m.csv", meas, pred);
  EXPECT_EQ(c.compared, 3u);
  ASSERT_EQ(c.not_predicted.size(), 1u);
  // Duplicate keys are errors (compare files with one algorithm each).
  std::vector<CollectiveRow> dup = {{"all_reduce", 4, 8192, 1, 0, 0, "ring", "auto"},
                                    {"all_reduce", 4, 8192, 1, 0, 0, "nvls", "auto"}};
  EXPECT_THROW(CompareCollectives("d.csv", dup, {dup[0]}), std::runtime_error);
}

TEST(CompareGpu, DeviceTimeFilesUseTheModelsDeviceTime) {
  // `# timing: device`: the measured 10 us is held against the predicted gpu_us (12, +20 %),
  // not time_us (30); the table says so. Without the line: time_us (+200 %).
  GpuPredictor p;
  p.collective = [](const CollectiveRow& m) {
    CollectiveRow r = m;
    r.time_us = 30;
    r.gpu_us = 12;
    r.busbw_gbps = 4;
    return r;
  };
  const std::string rows = std::string(kCollectiveCsvHeader) + "\nall_reduce,4,8192,10,,,auto,auto\n";
  auto read = ReadCollectiveCsv("# source\n#  timing: device\n" + rows, "d.csv");
  ASSERT_EQ(read.size(), 1u);
  EXPECT_TRUE(read[0].device_time);
  GpuFileComparison c = PredictAndCompare("d.csv", "# timing: device\n" + rows, p);
  ASSERT_EQ(c.tables.size(), 1u);
  EXPECT_EQ(c.tables[0].name, "all_reduce, 4 ranks, algorithm auto, protocol auto, device time");
  EXPECT_NEAR(c.tables[0].rows[0].predicted_us, 12.0, 1e-12);
  EXPECT_NEAR(c.tables[0].rows[0].error_pct, 20.0, 1e-9);
  EXPECT_NEAR(c.tables[0].rows[0].predicted_rate, 10.0, 1e-9);  // busbw at 12 us instead of 30
  c = PredictAndCompare("h.csv", "# timing: host\n" + rows, p);
  EXPECT_FALSE(ReadCollectiveCsv(rows, "h.csv")[0].device_time);
  EXPECT_NEAR(c.tables[0].rows[0].error_pct, 200.0, 1e-9);
}

TEST(CompareGpu, PredictorRowsFollowTheMeasuredOnes) {
  GpuPredictor p;
  p.collective = [](const CollectiveRow& m) {
    if (m.ranks > 8) throw std::invalid_argument("ranks above 8");
    CollectiveRow r = m;
    r.time_us = m.time_us * 1.5;
    r.algorithm = "ring";
    r.protocol = "simple";
    return r;
  };
  const std::string text = std::string(kCollectiveCsvHeader) +
                           "\nall_reduce,8,8192,10,,,auto,auto\nall_reduce,16,8192,10,,,auto,auto\n";
  GpuFileComparison c = PredictAndCompare("m.csv", text, p);
  ASSERT_EQ(c.tables.size(), 1u);
  EXPECT_NEAR(c.tables[0].rows[0].error_pct, 50.0, 1e-9);
  EXPECT_EQ(c.tables[0].rows[0].predicted_as, "ring/simple");
  ASSERT_EQ(c.not_predicted.size(), 1u);
  EXPECT_NE(c.not_predicted[0].find("ranks above 8"), std::string::npos);
  const std::string report = GpuComparisonText(c, false);
  EXPECT_NE(report.find("all_reduce, 8 ranks, algorithm auto, protocol auto: 1 sizes, MAPE 50.00 %"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("not compared: all_reduce 16 ranks 8192 B: ranks above 8"), std::string::npos)
      << report;
}

}  // namespace
}  // namespace tpsim::validate
