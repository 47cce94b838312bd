// HuggingFace config.json import, then the model's validation.
#include "llm/model.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpsim;
  fuzz::Expect([&] {
    config::SourceMap locs("config.json");
    config::Model m = llm::ImportHuggingFaceText(fuzz::Text(data, size), "config.json", &locs);
    std::vector<config::Diag> diags;
    config::CheckIntegerRanges(m, locs, "model", &diags);
    llm::ValidateModel(m, locs, "model", &diags);
  });
  return 0;
}
