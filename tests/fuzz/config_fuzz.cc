// Config loader and validators: the first byte picks the message type and the
// format (text format or JSON), the rest is the file.
#include <google/protobuf/message.h>

#include <memory>

#include "arch/chip.h"
#include "chip.pb.h"
#include "configs/load.h"
#include "experiment.pb.h"
#include "llm/model.h"
#include "mapping.pb.h"
#include "model.pb.h"
#include "serving.pb.h"
#include "sweep.pb.h"
#include "tests/fuzz/fuzz_util.h"
#include "workload.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpsim;
  if (size < 1) return 0;
  const uint8_t pick = data[0];
  const std::string text = fuzz::Text(data + 1, size - 1);
  const std::string name = (pick & 1) ? "f.json" : "f.textproto";
  std::unique_ptr<google::protobuf::Message> msg;
  switch ((pick >> 1) % 8) {
    case 0:
      msg = std::make_unique<config::Experiment>();
      break;
    case 1:
      msg = std::make_unique<config::Chip>();
      break;
    case 2:
      msg = std::make_unique<config::Model>();
      break;
    case 3:
      msg = std::make_unique<config::Workload>();
      break;
    case 4:
      msg = std::make_unique<config::Mapping>();
      break;
    case 5:
      msg = std::make_unique<config::Sweep>();
      break;
    case 6:
      msg = std::make_unique<config::RequestSource>();
      break;
    default:
      msg = std::make_unique<config::Serving>();
      break;
  }
  fuzz::Expect([&] {
    config::SourceMap locs(name);
    config::ParseMessage(text, name, msg.get(), &locs);
    std::vector<config::Diag> diags;
    config::CheckIntegerRanges(*msg, locs, "", &diags);
    if (!diags.empty()) return;
    if (auto* c = dynamic_cast<config::Chip*>(msg.get())) {
      arch::ValidateChip(*c, locs, "", &diags);
    } else if (auto* m = dynamic_cast<config::Model*>(msg.get())) {
      llm::ValidateModel(*m, locs, "", &diags);
    } else if (auto* e = dynamic_cast<config::Experiment*>(msg.get())) {
      if (e->has_chip()) arch::ValidateChip(e->chip(), locs, "chip", &diags);
      if (e->has_model()) llm::ValidateModel(e->model(), locs, "model", &diags);
    }
    for (const auto& d : diags) (void)d.str();
  });
  return 0;
}
