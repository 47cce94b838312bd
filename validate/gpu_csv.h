#pragma once
// The CSV formats of GPU-node microbenchmarks, shared by what predicts them
// (`tpsim collectives`, `tpsim gemm`), what measures them (`tpsim-validate --collectives
// / --gemms`) and what compares them (`tpsim compare`). Column names and order are fixed:
//
//   collectives: op,ranks,size_bytes,time_us,algbw_gbps,busbw_gbps,algorithm,protocol
//   GEMMs:       m,n,k,dtype,time_us,tflops,bound,tiles,waves
//
// Readers skip blank lines and lines starting with '#' (a file's provenance header), except
// the collectives directive `# timing: device` (the file's times are device times, see
// CollectiveRow::device_time; the default is nccl-tests' eager time per call), take
// the first other line as the header and find columns by name, so a file may add columns
// or reorder them; measured files leave columns they cannot know empty (bound, tiles,
// waves of a GEMM; algorithm / protocol "auto" when NCCL chose). Sizes are nccl-tests'
// (the whole buffer: all_gather's receive buffer, reduce_scatter's send buffer).

#include <cstdint>
#include <string>
#include <vector>

namespace tpsim::validate {

constexpr const char* kCollectiveCsvHeader =
    "op,ranks,size_bytes,time_us,algbw_gbps,busbw_gbps,algorithm,protocol";
constexpr const char* kGemmCsvHeader = "m,n,k,dtype,time_us,tflops,bound,tiles,waves";

struct CollectiveRow {
  std::string op;  // all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send_recv
  int ranks = 0;
  uint64_t size_bytes = 0;
  double time_us = 0, algbw_gbps = 0, busbw_gbps = 0;
  std::string algorithm = "auto", protocol = "auto";
  // Not CSV columns. Measured: the file says `# timing: device` (time_us is device time, a
  // CUDA graph's time per call or a kernel's duration, with no host issue cost). Predicted: the
  // model's device time (arch::gpu::CollEstimate::gpu_us; 0 when not known).
  bool device_time = false;
  double gpu_us = 0;
  int line = 0;  // the row's 1-based line in the file it was read from; 0 when not read from one
  // Predicted on a chip without a gpu block: why the lowering ran another algorithm than the one
  // asked for (halving_doubling over 7 ranks: ring), "" when it did not.
  std::string fallback{};
};

struct GemmRow {
  uint64_t m = 0, n = 0, k = 0;
  std::string dtype = "bf16";
  double time_us = 0, tflops = 0;
  std::string bound;   // empty when not known (measured)
  uint64_t tiles = 0;  // 0 with `has_tiles` false when not known
  double waves = 0;
  bool has_tiles = false;
  int line = 0;  // the row's 1-based line in the file it was read from; 0 when not read from one
};

// One CSV line (no newline) in the fixed column order; numbers with 3 decimals.
std::string CollectiveCsvLine(const CollectiveRow& r);
std::string GemmCsvLine(const GemmRow& r);

// A row's key as messages name it: "all_reduce 8 ranks 8192 B", "m=1 n=6144 k=4096 bf16".
std::string CollectiveKeyText(const CollectiveRow& r);
std::string GemmKeyText(const GemmRow& r);

enum class CsvKind { kCollective, kGemm };

// Which format `text` holds (its header has size_bytes / m,n,k). Throws
// std::runtime_error naming `name` when it is neither or has no header.
CsvKind DetectCsvKind(const std::string& text, const std::string& name);

// Parse a whole file's text. Throws std::runtime_error "name:line: problem" for a missing
// required column, a malformed number, a negative or zero size / rank / dimension, a row
// with more or fewer fields than the header (a lost or extra comma shifts every column
// after it), or a duplicate row: the same (op, ranks, size_bytes, algorithm, protocol) or
// (m, n, k, dtype) as an earlier row, whose line the message names (both would enter a
// comparison's MAPE). Required: collectives op, ranks, size_bytes, time_us (algorithm and
// protocol default to auto); GEMMs m, n, k, time_us (dtype defaults to bf16).
std::vector<CollectiveRow> ReadCollectiveCsv(const std::string& text, const std::string& name);
std::vector<GemmRow> ReadGemmCsv(const std::string& text, const std::string& name);

// `tpsim gemm --shapes`: columns m,n,k and optionally dtype (others ignored), so a GEMM
// CSV (measured or predicted) is also a shapes file. dtype is empty for rows that have
// none (the caller's default applies). Same errors as above, except that a repeated shape
// is allowed (it is timed again).
struct GemmShapeRow {
  uint64_t m = 0, n = 0, k = 0;
  std::string dtype;
  int line = 0;  // in its file (0: not from a file)
};
std::vector<GemmShapeRow> ReadShapesCsv(const std::string& text, const std::string& name);

// Reads a regular UTF-8 file of at most 64 MiB into a string (config::ReadInputFile): a
// missing, unreadable or oversized file, a FIFO or a device throws config::ConfigError.
// `field`: how an error names the file's source (the flag that gave it; "input" for a
// positional file).
std::string ReadTextFile(const std::string& path, const std::string& field = "input");

}  // namespace tpsim::validate
