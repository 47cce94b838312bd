#include "sim/tlm/tlm_engine.h"

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <systemc>
#include <vector>

#include "sim/step_source.h"
#include "sim/tlm/core.h"
#include "sim/tlm/dram.h"
#include "sim/tlm/ends.h"
#include "sim/tlm/network.h"
#include "sim/tlm/run_state.h"

// libsystemc's own main() needs this symbol to link; every tpsim executable
// has its own main(), so it is never called.
int sc_main(int, char*[]) { return 1; }

namespace tpsim::sim {

namespace {

using tlm_model::Core;
using tlm_model::RunState;

// Hands the tasks without deps to their cores at time 0.
class Kickoff : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Kickoff);
  Kickoff(sc_core::sc_module_name name, RunState* st) : sc_module(name), st_(st) { SC_METHOD(Go); }

 private:
  void Go() { st_->Kickoff(); }
  RunState* st_;
};

void Validate(const mapping::Program& p, const arch::Chip& chip) {
  const int cores = chip.num_cores();
  const int channels = static_cast<int>(chip.channels().size());
  // The Program was verified when it was built (mapping::Verify); it must fit the chip.
  mapping::VerifyFits(p, cores, channels);
}

// The modules of one run over `st`, simulated to the end; the links' and channels' use into
// `out`; the stall report when tasks are left (empty when none is, or the run stopped).
std::string Simulate(RunState& st, const arch::Chip& chip, uint64_t packet_bytes, EngineOutput* out) {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  // A fresh simulation context for every run (as DRAMSys's test fixture does).
  sc_core::sc_get_curr_simcontext()->reset();
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  tlm_model::Ends ends("ends", &st);
  std::vector<std::unique_ptr<Core>> cores;
  for (int c = 0; c < chip.num_cores(); ++c) {
    cores.push_back(std::make_unique<Core>(("core" + std::to_string(c)).c_str(), c, &st, &ends));
    st.cores.push_back(cores.back().get());
  }
  tlm_model::Network net("network", &st, packet_bytes);
  tlm_model::Dram dram("dram", &st);
  net.set_dram(&dram);
  net.set_ends(&ends);
  ends.set_neighbours(&net, &dram);
  dram.set_network(&net);
  for (auto& core : cores) {
    core->net_socket.bind(net.socket);
    core->mem_socket.bind(dram.socket);
  }
  Kickoff kickoff("kickoff", &st);
  sc_core::sc_start();
  out->links = net.usage();
  out->channels = dram.usage();
  if (st.completed != st.total && st.overflow_task < 0 && st.stream_why.empty()) return st.Stuck();
  return "";
}

class TlmEngine : public Engine {
 public:
  explicit TlmEngine(uint64_t packet_bytes) : packet_bytes_(packet_bytes) {}
  using Engine::Run;
  std::string name() const override { return "tlm"; }
  // Nothing to prepare: every run builds its modules from the Program.
  EngineOutput Run(const mapping::Program& program, const arch::Chip& chip, const PreparedProgram*) override;
  bool RunSteps(const StepSource& source, const arch::Chip& chip, StepsOutput* out,
                std::string* why) override;

 private:
  uint64_t packet_bytes_;
};

EngineOutput TlmEngine::Run(const mapping::Program& program, const arch::Chip& chip, const PreparedProgram*) {
  Validate(program, chip);
  RunState st(program, chip);
  if (progress_) st.progress = &progress_;
  EngineOutput out;
  const std::string stall = Simulate(st, chip, packet_bytes_, &out);
  if (!stall.empty()) throw StallError(stall);
  out.tasks = std::move(st.times);
  for (const TaskTime& t : out.tasks) out.makespan_ps = std::max(out.makespan_ps, t.end_ps);
  return out;
}

bool TlmEngine::RunSteps(const StepSource& source, const arch::Chip& chip, StepsOutput* out,
                         std::string* why) {
  Validate(*source.head, chip);
  Validate(*source.step, chip);
  RunState st(source, chip);
  if (!st.stream_why.empty()) {
    *why = st.stream_why;
    return false;
  }
  if (progress_) st.progress = &progress_;
  EngineOutput use;
  const std::string stall = Simulate(st, chip, packet_bytes_, &use);
  if (st.source_threw) std::rethrow_exception(st.source_threw);
  if (!stall.empty()) throw StallError(stall);
  if (!st.stream_why.empty()) {
    *why = st.stream_why;
    out->overflow = st.stream_overflow;
    return false;
  }
  out->links = std::move(use.links);
  out->channels = std::move(use.channels);
  out->makespan_ps = st.makespan();
  out->path = st.path();
  return true;
}

}  // namespace

std::unique_ptr<Engine> MakeTlmEngine() { return std::make_unique<TlmEngine>(kTlmDefaultPacketBytes); }

namespace {
const EngineRegistrar kRegistered("tlm",
                                  "SystemC TLM-2.0: packets through routers and links, contention, DRAM",
                                  &MakeTlmEngine);
}  // namespace

std::unique_ptr<Engine> MakeTlmEngineWithPacketBytes(uint64_t packet_bytes) {
  if (packet_bytes == 0) throw std::invalid_argument("tlm: packet_bytes must be > 0");
  return std::make_unique<TlmEngine>(packet_bytes);
}

}  // namespace tpsim::sim
