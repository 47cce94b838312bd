#pragma once
// `tpsim collectives` and `tpsim gemm`: one collective over a size sweep, or GEMM shapes,
// on any shipped chip (sim/microbench.h says how each kind of chip answers). Both print a
// table and write the fixed CSV formats of validate/gpu_csv.h with --csv.
// Exit status: 0 ok, 1 an output file could not be written, 2 bad arguments or config.

#include <cstdint>
#include <string>
#include <vector>

namespace tpsim::cli {

extern const char* const kCollectivesUsage;
extern const char* const kGemmUsage;

int CollectivesCommand(const std::vector<std::string>& args);
int GemmCommand(const std::vector<std::string>& args);

// "8K:1G" -> 8192, 16384, ..., 1073741824 (factors of 2); "1M" -> {1048576}; "4096:65536:4"
// -> factors of 4. Sizes: an integer with an optional binary suffix K, M, G or T (KiB ... TiB;
// "B" / "iB" may follow). Throws std::invalid_argument with a sentence for a malformed list,
// MIN > MAX, a zero size, a factor below 2, sizes above 1 TiB, or more than 64 sizes.
std::vector<uint64_t> ParseSizes(const std::string& spec);

// Writes --csv's `text` to `path` through a temporary file renamed into place
// (config::WriteOutputFile) and prints "# wrote PATH"; on failure prints "tpsim COMMAND:
// cannot write PATH: reason" and returns false (exit 1).
bool WriteCsv(const std::string& command, const std::string& path, const std::string& text);

}  // namespace tpsim::cli
