#include "sim/tlm/tlm_engine.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <systemc>
#include <vector>

#include "sim/tlm/core.h"
#include "sim/tlm/dram.h"
#include "sim/tlm/network.h"
#include "sim/tlm/run_state.h"

// libsystemc's own main() needs this symbol to link; every tpsim executable
// has its own main(), so it is never called.
int sc_main(int, char*[]) { return 1; }

namespace tpsim::sim {

namespace {

using mapping::Task;
using mapping::TaskKind;
using tlm_model::Core;
using tlm_model::RunState;

// Hands the tasks without deps to their cores at time 0.
class Kickoff : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Kickoff);
  Kickoff(sc_core::sc_module_name name, RunState* st) : sc_module(name), st_(st) { SC_METHOD(Go); }

 private:
  void Go() {
    for (size_t i = 0; i < st_->unmet.size(); ++i) {
      if (st_->unmet[i] == 0) st_->cores[st_->program.core(i)]->Ready(static_cast<uint32_t>(i));
    }
  }
  RunState* st_;
};

const char* KindName(TaskKind k) {
  switch (k) {
    case TaskKind::kCompute:
      return "compute";
    case TaskKind::kTransfer:
      return "transfer";
    case TaskKind::kMemory:
      return "memory";
  }
  return "?";
}

void Validate(const mapping::Program& p, const arch::Chip& chip) {
  const int cores = chip.num_cores();
  const int channels = static_cast<int>(chip.channels().size());
  // The Program was verified when it was built (mapping::Verify); it must fit the chip.
  mapping::VerifyFits(p, cores, channels);
}

std::string StallReport(const RunState& st) {
  constexpr int kPerCore = 8;
  const mapping::Program::TaskRange tasks = st.program.tasks();
  std::map<int, std::vector<uint32_t>> stuck;  // by core, ids ascending
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!st.done[i]) stuck[tasks[i].core].push_back(static_cast<uint32_t>(i));
  }
  std::ostringstream os;
  os << "tlm: simulation stalled at " << tlm_model::NowPs() << " ps with " << (tasks.size() - st.completed)
     << " of " << tasks.size() << " tasks not done";
  for (const auto& [core, ids] : stuck) {
    os << "\n  core " << core << ":";
    for (size_t k = 0; k < ids.size() && k < kPerCore; ++k) {
      const Task& t = tasks[ids[k]];
      os << "\n    task " << t.id << " " << KindName(t.kind) << " op " << t.op;
      if (t.op < st.program.ops.size()) os << " (" << st.program.ops[t.op].ref.op << ")";
      os << " waits on";
      for (uint32_t d : st.program.deps(ids[k])) {
        if (d >= tasks.size()) {
          os << " " << d << " (no such task)";
        } else if (!st.done[d]) {
          os << " " << d;
        }
      }
    }
    if (ids.size() > kPerCore) os << "\n    ... and " << ids.size() - kPerCore << " more";
  }
  return os.str();
}

class TlmEngine : public Engine {
 public:
  explicit TlmEngine(uint64_t packet_bytes) : packet_bytes_(packet_bytes) {}
  using Engine::Run;
  std::string name() const override { return "tlm"; }
  // Nothing to prepare: every run builds its modules from the Program.
  EngineOutput Run(const mapping::Program& program, const arch::Chip& chip, const PreparedProgram*) override;

 private:
  uint64_t packet_bytes_;
};

EngineOutput TlmEngine::Run(const mapping::Program& program, const arch::Chip& chip, const PreparedProgram*) {
  Validate(program, chip);
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  // A fresh simulation context for every run (as DRAMSys's test fixture does).
  sc_core::sc_get_curr_simcontext()->reset();
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);

  RunState st(program, chip);
  if (progress_) st.progress = &progress_;
  EngineOutput out;
  std::string stall;
  {
    std::vector<std::unique_ptr<Core>> cores;
    for (int c = 0; c < chip.num_cores(); ++c) {
      cores.push_back(std::make_unique<Core>(("core" + std::to_string(c)).c_str(), c, &st));
      st.cores.push_back(cores.back().get());
    }
    tlm_model::Network net("network", &st, packet_bytes_);
    tlm_model::Dram dram("dram", &st);
    net.set_dram(&dram);
    for (auto& core : cores) {
      core->net_socket.bind(net.socket);
      core->mem_socket.bind(dram.socket);
    }
    Kickoff kickoff("kickoff", &st);
    sc_core::sc_start();

    out.tasks = st.times;
    out.links = net.usage();
    out.channels = dram.usage();
    for (const TaskTime& t : out.tasks) out.makespan_ps = std::max(out.makespan_ps, t.end_ps);
    if (st.completed != program.num_tasks() && st.overflow_task < 0) stall = StallReport(st);
  }
  if (!stall.empty()) throw StallError(stall);
  return out;
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
