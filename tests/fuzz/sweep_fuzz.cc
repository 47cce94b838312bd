// Sweep specs and `require` expressions: the first byte chooses between a sweep
// file (parsed, its points expanded) and an expression (parsed, evaluated against
// the shipped default experiment's resolved config).
#include "experiment.pb.h"
#include "sim/sweep/expr.h"
#include "sweep.pb.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpsim;
  if (size < 1) return 0;
  const std::string text = fuzz::Text(data + 1, size - 1);
  if (data[0] & 1) {
    fuzz::Expect([&] {
      config::Sweep s;
      config::SourceMap locs("s.textproto");
      config::ParseMessage(text, (data[0] & 2) ? "s.json" : "s.textproto", &s, &locs);
      for (const auto& r : s.require()) {
        try {
          sweep::Expr::Parse(r);
        } catch (const std::invalid_argument&) {
        }
      }
    });
    return 0;
  }
  static const config::Experiment* exp = [] {
    auto* e = new config::Experiment;
    e->set_name("fuzz");
    e->mutable_mapping()->set_tp(4);
    e->mutable_mapping()->set_partition("k_split");
    e->mutable_workload()->set_seq_len(128);
    e->mutable_chip()->add_memory()->set_latency_ns(50);
    return e;
  }();
  fuzz::Expect(
      [&] {
        sweep::Expr e = sweep::Expr::Parse(text);
        (void)e.Fields();
        try {
          (void)e.Holds(*exp);
        } catch (const std::invalid_argument&) {
        }
      },
      /*invalid_ok=*/true);
  return 0;
}
