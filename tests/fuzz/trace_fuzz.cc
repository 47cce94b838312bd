// Request traces: CSV (with the Azure layout) or JSONL by the first byte, and a
// time scale from the second.
#include "sim/serving/requests.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpsim;
  if (size < 2) return 0;
  const double scales[] = {1, 0, 1e-3, 1e6, 1e-12, 7.5};
  fuzz::Expect([&] {
    auto reqs = serving::ParseTrace(fuzz::Text(data + 2, size - 2), (data[0] & 1) ? "t.jsonl" : "t.csv", "",
                                    "workload.requests.trace_file", scales[data[1] % 6]);
    for (const auto& r : reqs) {
      if (r.arrival_ps < 0 || r.arrival_ps > serving::kMaxArrivalPs || r.output_tokens < 1) __builtin_trap();
    }
  });
  return 0;
}
