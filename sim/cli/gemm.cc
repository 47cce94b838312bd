// tpsim gemm CHIP --m M --n N --k K | --shapes FILE: GEMM times on one core of a chip.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "configs/files.h"
#include "sim/cli/args.h"
#include "sim/cli/gpu_commands.h"
#include "sim/engine.h"
#include "sim/microbench.h"

namespace tpsim::cli {

const char* const kGemmUsage =
    R"(usage: tpsim gemm CHIP --m M --n N --k K [--dtype bf16] [--csv out.csv] [--set FIELD=VALUE]...
       tpsim gemm CHIP --shapes shapes.csv [--dtype bf16] [--csv out.csv] [--set FIELD=VALUE]...

Time of C[m,n] = A[m,k] x B[k,n] on one core of CHIP: one kernel on one GPU of a GPU node
(the GPU GEMM model of arch/gpu/gemm.h: CTA tiles, waves over the SMs, HBM streaming
under the math, L2 reuse, split-K), or one systolic core of other chips (Chip::GemmTime).
Prints and writes (--csv) m,n,k,dtype,time_us,tflops,bound,tiles,waves: bound is compute,
memory or latency (the kernel's fixed overhead dominates); tiles the output tiles (CTA tiles
on a GPU, R x C systolic tiles otherwise); waves = CTAs / SMs (GPU) or tiles / arrays.

  CHIP             a shipped chip (h100-sxm-8, h200-sxm-8, b200-sxm-8, wafer-8x8, ...) or a path
  --m, --n, --k    one shape (positive integers)
  --shapes FILE    many shapes: a CSV with columns m,n,k and optionally dtype (other columns
                   are ignored, so a GEMM CSV written by --csv or tpsim-validate works)
  --dtype D        bf16 (default), fp16 or fp8 (GPU nodes; systolic cores model bf16 only);
                   with --shapes, for rows without a dtype
  --csv FILE       also write the rows as CSV
  --set F=V        override a chip field first, e.g. --set gpu.tensor_efficiency=0.8
)";

namespace {

uint64_t Dim(const std::string& flag, const std::string& v) {
  if (v.empty() || v.size() > 12 || v.find_first_not_of("0123456789") != std::string::npos ||
      std::stoull(v) == 0) {
    throw UsageError(flag + " '" + v + "' is not a positive whole number (at most 12 digits)");
  }
  return std::stoull(v);
}

}  // namespace

int GemmCommand(const std::vector<std::string>& args) {
  std::string chip_arg, m, n, k, dtype = "bf16", shapes_path, csv;
  std::vector<sim::Override> sets;
  std::vector<validate::GemmShapeRow> shapes;
  try {
    OnceFlags once;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      std::string v;
      if (a == "-h" || a == "--help") {
        std::cout << kGemmUsage;
        return 0;
      }
      if (once.At(args, &i, "--m", &m) || once.At(args, &i, "--n", &n) || once.At(args, &i, "--k", &k) ||
          once.At(args, &i, "--shapes", &shapes_path) || once.At(args, &i, "--csv", &csv)) {
        continue;
      }
      if (once.At(args, &i, "--dtype", &dtype)) continue;
      if (FlagAt(args, &i, "--set", &v)) {
        sets.push_back(sim::ParseOverride(v));
        continue;
      }
      if (a.size() > 1 && a[0] == '-') throw UsageError("unknown option " + a);
      if (!chip_arg.empty()) throw UsageError("more than one CHIP: " + chip_arg + ", " + a);
      chip_arg = a;
    }
    if (chip_arg.empty()) throw UsageError("needs a CHIP");
    const bool one = !m.empty() || !n.empty() || !k.empty();
    if (one && !shapes_path.empty()) throw UsageError("give either --m/--n/--k or --shapes, not both");
    if (!one && shapes_path.empty()) throw UsageError("needs --m, --n and --k, or --shapes");
    if (one) {
      if (m.empty() || n.empty() || k.empty()) throw UsageError("needs all of --m, --n and --k");
      shapes.push_back({Dim("--m", m), Dim("--n", n), Dim("--k", k), dtype});
    } else {
      shapes = validate::ReadShapesCsv(validate::ReadTextFile(shapes_path, "--shapes"), shapes_path);
      for (auto& s : shapes) {
        if (s.dtype.empty()) s.dtype = dtype;  // rows without a dtype take --dtype
      }
      if (shapes.empty()) throw UsageError(shapes_path + ": no shapes");
    }
  } catch (const std::invalid_argument& e) {
    std::cerr << "tpsim gemm: " << e.what() << "\n\n" << kGemmUsage;
    return 2;
  } catch (const std::runtime_error& e) {  // unreadable or malformed --shapes file
    if (dynamic_cast<const config::ConfigError*>(&e)) throw;
    std::cerr << "tpsim gemm: " << e.what() << "\n";
    return 2;
  }
  std::vector<validate::GemmRow> rows;
  try {
    // The chip file (where CHIP is a path) and the shapes file are inputs: --csv may not name one.
    config::CheckOutputs(
        {{"--csv", csv}},
        {std::filesystem::is_regular_file(chip_arg) ? chip_arg : std::string(), shapes_path});
    const arch::Chip chip = sim::LoadChipArg(chip_arg, sets);
    for (const std::string& w : sim::UnreadChipSets("gemm", chip.config().has_gpu(), sets))
      std::cerr << "tpsim gemm: warning: " << w << "\n";
    for (const auto& s : shapes) {
      // A row of --shapes (an unknown dtype, one the chip lacks) is named at its line.
      auto at_row = [&](const std::exception& e) {
        return std::invalid_argument(
            s.line == 0 ? e.what() : shapes_path + ":" + std::to_string(s.line) + ": " + e.what());
      };
      try {
        rows.push_back(sim::PredictGemm(chip, s.m, s.n, s.k, s.dtype));
      } catch (const std::invalid_argument& e) {
        throw at_row(e);
      } catch (const sim::TimeOverflowError& e) {
        // Past the clock from the shape and the chip's fields alone: bad input, as `tpsim run`
        // refuses a run certain to pass it (exit 2; it was exit 1).
        throw at_row(e);
      }
    }
    std::cout << "# tpsim gemm on one " << (chip.config().has_gpu() ? "GPU" : "core") << " of "
              << chip.config().name() << " ("
              << (chip.config().has_gpu() ? "GPU GEMM model, arch/gpu/gemm.h"
                                          : "systolic core, Chip::GemmTime")
              << ")\n";
  } catch (const std::invalid_argument& e) {
    std::cerr << "tpsim gemm: " << e.what() << "\n";
    return 2;
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "#%9s %8s %8s %6s %12s %9s %8s %9s %8s\n", "m", "n", "k", "dtype", "time_us",
                "tflops", "bound", "tiles", "waves");
  std::cout << buf;
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "%10llu %8llu %8llu %6s %12s %9s %8s %9llu %8s\n",
                  static_cast<unsigned long long>(r.m), static_cast<unsigned long long>(r.n),
                  static_cast<unsigned long long>(r.k), r.dtype.c_str(), Fixed(r.time_us, 3).c_str(),
                  Fixed(r.tflops, 1).c_str(), r.bound.c_str(), static_cast<unsigned long long>(r.tiles),
                  Fixed(r.waves, 2).c_str());
    std::cout << buf;
  }
  if (!csv.empty()) {
    std::string text = std::string(validate::kGemmCsvHeader) + "\n";
    for (const auto& r : rows) text += validate::GemmCsvLine(r) + "\n";
    if (!WriteCsv("gemm", csv, text)) return 1;
  }
  return 0;
}

}  // namespace tpsim::cli
