// Edge-list topologies: the input is the noc { ... } body of a chip whose other
// sections are fixed; a chip that validates is built (routes, diameter).
#include "arch/chip.h"
#include "chip.pb.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpsim;
  const std::string text =
      "name: \"edges\"\nclock_mhz: 1000\n"
      "core { systolic_rows: 32 systolic_cols: 32 systolic_arrays: 1 mac_dtype: \"bf16\" matrix_utilization: "
      "0.8\n"
      "       vector_lanes: 32 sram_bytes: 33554432 sram_bandwidth_gbps: 256 }\n"
      "memory { name: \"dram\" kind: \"dram\" per_core: true bandwidth_gbps: 60 efficiency: 0.7 latency_ns: "
      "50\n"
      "         capacity_bytes: 4294967296 }\n"
      "noc { topology: \"edges\" link_bandwidth_gbps: 100 link_latency_ns: 1\n" +
      fuzz::Text(data, size) + "\n}\n";
  fuzz::Expect([&] {
    config::Chip c;
    config::SourceMap locs("chip.textproto");
    config::ParseMessage(text, "chip.textproto", &c, &locs);
    std::vector<config::Diag> diags;
    config::CheckIntegerRanges(c, locs, "", &diags);
    if (!diags.empty()) return;
    arch::ValidateChip(c, locs, "", &diags);
    if (!diags.empty()) return;
    arch::Chip chip = arch::Chip::Build(c, locs);
    (void)chip.Diameter();
  });
  return 0;
}
