// tpsim collectives CHIP --op OP --ranks N --sizes MIN:MAX [...]: an nccl-tests-style sweep.
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "configs/files.h"
#include "mapping/estimate.h"
#include "sim/cli/args.h"
#include "sim/cli/gpu_commands.h"
#include "sim/cli/progress_line.h"
#include "sim/engine.h"
#include "sim/microbench.h"
#include "sim/run.h"

namespace tpsim::cli {

const char* const kCollectivesUsage =
    R"(usage: tpsim collectives CHIP --op OP --ranks N --sizes MIN:MAX [--algo A] [--proto P]
                         [--csv out.csv] [--set FIELD=VALUE]... [--max-memory SIZE]

One collective over a sweep of sizes, printed as nccl-tests prints it: time per call, algbw
= size / time, busbw = algbw x factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter,
all_to_all (n-1)/n; broadcast, send_recv 1), and the algorithm and protocol used.

  CHIP             a shipped chip (h100-sxm-8, h200-sxm-8, b200-sxm-8, wafer-8x8, ...) or a
                   path to a chip file. GPU nodes (a `gpu` block) use the NCCL-like model of
                   arch/gpu/collective.h; other chips lower the collective over cores
                   0..N-1 (mapping/collective) and time it with the analytical engine.
  --op OP          all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send_recv
                   (chips without a gpu block: the first three and all_to_all)
  --ranks N        ranks taking part: 2..8 on a GPU node (one NVSwitch domain; more would
                   cross the network between nodes, which is not modelled), 2..cores otherwise
  --sizes SPEC     total buffer sizes as nccl-tests counts them (all_gather: the receive
                   buffer, reduce_scatter: the send buffer, all_to_all: one rank's send
                   buffer, send_recv: one message): MIN:MAX steps by factors of 2, e.g.
                   8K:1G; MIN:MAX:F by factors of F; or one size, e.g. 64M. K, M, G, T are
                   binary (KiB ... TiB)
  --algo A         auto (default: NCCL's tuner picks), ring, tree, nvls, p2p on a GPU node;
                   auto or a mapping collective (ring, bidirectional_ring, mesh_2d,
                   halving_doubling, direct, nvls) on other chips
  --proto P        auto (default), ll, ll128, simple (GPU nodes only)
  --csv FILE       also write op,ranks,size_bytes,time_us,algbw_gbps,busbw_gbps,algorithm,protocol
  --set F=V        override a chip field first, e.g. --set gpu.collective_launch_us=10
  --max-memory SIZE  refuse (exit 2, before lowering) a collective estimated to need more
                   (8G, 512M; 0: no limit; default 80% of this machine's memory): direct
                   over 1024 ranks holds 2 million transfers and 10^9 deps (11 GB)
)";

namespace {

uint64_t ParseSizeToken(const std::string& t) {
  size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  if (i == 0) throw std::invalid_argument("size '" + t + "' is not a number with an optional K, M, G or T");
  // More digits than 1 TiB has (it said "not a number" for 9223372036854775807).
  if (i > 15) throw std::invalid_argument("size '" + t + "' is above 1 TiB");
  uint64_t v = std::stoull(t.substr(0, i));
  std::string suffix = t.substr(i);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (!suffix.empty() && (suffix[0] == 'K' || suffix[0] == 'M' || suffix[0] == 'G' || suffix[0] == 'T')) {
    shift = suffix[0] == 'K' ? 10 : suffix[0] == 'M' ? 20 : suffix[0] == 'G' ? 30 : 40;
    suffix = suffix.substr(1);
  }
  if (!suffix.empty() && suffix != "B" && suffix != "IB") {
    throw std::invalid_argument("size '" + t +
                                "': unknown suffix (use K, M, G, T, optionally followed by B)");
  }
  if (v == 0) throw std::invalid_argument("size '" + t + "' is zero");
  if (v > (uint64_t{1} << 40) >> shift) throw std::invalid_argument("size '" + t + "' is above 1 TiB");
  return v << shift;
}

}  // namespace

bool WriteCsv(const std::string& command, const std::string& path, const std::string& text) {
  try {
    config::WriteOutputFile(path, text);
  } catch (const std::runtime_error& e) {
    std::cerr << "tpsim " << command << ": " << e.what() << "\n";
    return false;
  }
  std::cout << "# wrote " << path << "\n";
  return true;
}

std::vector<uint64_t> ParseSizes(const std::string& spec) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t c = spec.find(':', start);
    parts.push_back(spec.substr(start, c == std::string::npos ? std::string::npos : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  if (parts.size() > 3)
    throw std::invalid_argument("--sizes '" + spec + "': expected SIZE, MIN:MAX or MIN:MAX:FACTOR");
  const uint64_t lo = ParseSizeToken(parts[0]);
  if (parts.size() == 1) return {lo};
  const uint64_t hi = ParseSizeToken(parts[1]);
  uint64_t factor = 2;
  if (parts.size() == 3) {
    const std::string& f = parts[2];
    if (f.empty() || f.size() > 6 || f.find_first_not_of("0123456789") != std::string::npos ||
        std::stoull(f) < 2) {
      throw std::invalid_argument("--sizes '" + spec + "': the factor must be an integer from 2 to 999999");
    }
    factor = std::stoull(f);
  }
  if (lo > hi) throw std::invalid_argument("--sizes '" + spec + "': MIN is above MAX");
  std::vector<uint64_t> out;
  for (uint64_t s = lo; s <= hi; s *= factor) {
    out.push_back(s);
    if (out.size() > 64) throw std::invalid_argument("--sizes '" + spec + "': more than 64 sizes");
    if (s > hi / factor) break;
  }
  return out;
}

int CollectivesCommand(const std::vector<std::string>& args) {
  std::string chip_arg, op, ranks_text, sizes_text, algo = "auto", proto = "auto", csv;
  std::vector<sim::Override> sets;
  std::vector<uint64_t> sizes;
  int ranks = 0;
  uint64_t max_memory = sim::DefaultMaxMemory();
  try {
    OnceFlags once;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      std::string v;
      if (a == "-h" || a == "--help") {
        std::cout << kCollectivesUsage;
        return 0;
      }
      if (once.At(args, &i, "--op", &op) || once.At(args, &i, "--ranks", &ranks_text) ||
          once.At(args, &i, "--sizes", &sizes_text) || once.At(args, &i, "--algo", &algo) ||
          once.At(args, &i, "--proto", &proto) || once.At(args, &i, "--csv", &csv)) {
        continue;
      }
      if (FlagAt(args, &i, "--set", &v)) {
        sets.push_back(sim::ParseOverride(v));
        continue;
      }
      if (once.At(args, &i, "--max-memory", &v)) {
        max_memory = MaxMemoryValue(v);
        continue;
      }
      if (a.size() > 1 && a[0] == '-') throw UsageError("unknown option " + a);
      if (!chip_arg.empty()) throw UsageError("more than one CHIP: " + chip_arg + ", " + a);
      chip_arg = a;
    }
    if (chip_arg.empty()) throw UsageError("needs a CHIP");
    if (op.empty()) throw UsageError("needs --op");
    if (ranks_text.empty()) throw UsageError("needs --ranks");
    if (sizes_text.empty()) throw UsageError("needs --sizes");
    if (ranks_text.find_first_not_of("0123456789") != std::string::npos) {
      throw UsageError("--ranks '" + ranks_text + "' is not a whole number");
    }
    // Six digits at most (a rank count past the chip's cores is refused below, naming them).
    if (ranks_text.size() > 6) throw UsageError("--ranks '" + ranks_text + "' is too large (at most 999999)");
    ranks = std::stoi(ranks_text);
    sizes = ParseSizes(sizes_text);
  } catch (const std::invalid_argument& e) {
    std::cerr << "tpsim collectives: " << e.what() << "\n\n" << kCollectivesUsage;
    return 2;
  }
  std::vector<validate::CollectiveRow> rows;
  std::string chip_name;
  try {
    // The chip file (where CHIP is a path) and the shapes file are inputs: --csv may not name one.
    config::CheckOutputs({{"--csv", csv}},
                         {std::filesystem::is_regular_file(chip_arg) ? chip_arg : std::string()});
    const arch::Chip chip = sim::LoadChipArg(chip_arg, sets);
    chip_name = chip.config().name();
    for (const std::string& w : sim::UnreadChipSets("collectives", chip.config().has_gpu(), sets))
      std::cerr << "tpsim collectives: warning: " << w << "\n";
    // The rank count's rule before the memory guard's (999999 ranks of wafer-32x32 were told to raise
    // --max-memory).
    if (!chip.config().has_gpu() && ranks > chip.num_cores())
      throw UsageError("--ranks " + std::to_string(ranks) + " outside [2, " +
                       std::to_string(chip.num_cores()) + "] (the cores of " + chip_name + ")");
    // A lowered collective's size, before lowering it (direct's all-reduce over 1024 ranks holds
    // 2 million transfers and 10^9 deps: 11 GB).
    double transfers = 0, deps = 0;
    const double bytes =
        chip.config().has_gpu() ? 0 : mapping::CollectivePeakBytes(algo, ranks, &transfers, &deps);
    if (max_memory > 0 && bytes > static_cast<double>(max_memory)) {
      char what[160];
      std::snprintf(what, sizeof what, "about %.3g transfers and %.3g deps", transfers, deps);
      throw UsageError("--ranks " + std::to_string(ranks) + ": a " + mapping::CountedAlgorithm(algo) + " " +
                       op + " over them would take " + what + ", " + mapping::FormatBytes(bytes) +
                       ", more than " + sim::MemoryLimitText("--max-memory", max_memory) +
                       ": fewer ranks, another --algo, or a higher --max-memory (0: no limit)");
    }
    bool warned = false;
    // Past a second, on a terminal: how long, and how many sizes are timed (a direct all-reduce of
    // 1G over 1024 ranks ran 148 s without a word).
    ProgressLine progress("tpsim collectives");
    progress.Stage("timing");
    for (size_t done = 0; done < sizes.size(); ++done) {
      const uint64_t s = sizes[done];
      progress.Count(done, sizes.size(), "sizes");
      try {
        rows.push_back(sim::PredictCollective(chip, op, ranks, s, algo, proto));
        // The lowering ran another algorithm than --algo asked for (halving_doubling over 7 ranks ran
        // ring, silently but for the algorithm column): said once.
        const validate::CollectiveRow& r = rows.back();
        if (!chip.config().has_gpu() && algo != "auto" && r.algorithm != algo && !warned) {
          warned = true;
          std::cerr << "tpsim collectives: warning: --algo " << algo << " ran as " << r.algorithm << ": "
                    << (r.fallback.empty() ? "the lowering has no " + algo + " for " + op : r.fallback)
                    << "\n";
        }
      } catch (const sim::TimeOverflowError& e) {
        // The GPU-node model's time past the clock follows from the size and the chip's fields
        // alone: bad input, as `tpsim run` refuses a run certain to pass it (exit 2; it was exit 1).
        // The analytical engine's on other chips stays a failure of that engine (exit 1: the TLM
        // engine may time it).
        if (!chip.config().has_gpu()) throw;
        throw UsageError(e.what());
      }
    }
    std::cout << "# tpsim collectives: " << op << " over " << ranks << " ranks of " << chip_name << " ("
              << (chip.config().has_gpu() ? "GPU node: NCCL-like model, arch/gpu/collective.h"
                                          : "tpsim's collective lowering, analytical engine")
              << ")\n";
  } catch (const std::invalid_argument& e) {
    std::cerr << "tpsim collectives: " << e.what() << "\n";
    return 2;
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "#%13s %12s %10s %10s  %-18s %s\n", "size", "time", "algbw", "busbw",
                "algorithm", "protocol");
  std::cout << buf;
  std::snprintf(buf, sizeof buf, "#%13s %12s %10s %10s\n", "(B)", "(us)", "(GB/s)", "(GB/s)");
  std::cout << buf;
  double sum_bus = 0;
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "%14llu %12s %10s %10s  %-18s %s\n",
                  static_cast<unsigned long long>(r.size_bytes), Fixed(r.time_us, 2).c_str(),
                  Fixed(r.algbw_gbps, 2).c_str(), Fixed(r.busbw_gbps, 2).c_str(), r.algorithm.c_str(),
                  r.protocol.c_str());
    std::cout << buf;
    sum_bus += r.busbw_gbps;
  }
  std::cout << "# Avg bus bandwidth    : " << Fixed(rows.empty() ? 0 : sum_bus / rows.size(), 3) << "\n";
  if (!csv.empty()) {
    std::string text = std::string(validate::kCollectiveCsvHeader) + "\n";
    for (const auto& r : rows) text += validate::CollectiveCsvLine(r) + "\n";
    if (!WriteCsv("collectives", csv, text)) return 1;
  }
  return 0;
}

}  // namespace tpsim::cli
