#include "sim/tlm/core.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <tuple>

#include "mapping/cost.h"

namespace tpsim::sim::tlm_model {

using mapping::Task;
using mapping::TaskKind;

RunState::RunState(const mapping::Program& p, const arch::Chip& c)
    : program(p), chip(c), times(p.num_tasks()), unmet(p.num_tasks(), 0), done(p.num_tasks(), 0) {
  const size_t n = p.num_tasks();
  first_dependent.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    unmet[i] = static_cast<uint32_t>(p.deps(i).size());
    for (uint32_t d : p.deps(i)) {
      if (d < n) ++first_dependent[d + 1];
    }
  }
  for (size_t i = 0; i < n; ++i) first_dependent[i + 1] += first_dependent[i];
  mem_via_net.assign(n, 0);
  std::map<std::tuple<int, int, bool>, bool> via;  // (core, channel, write) -> has a path
  for (size_t i = 0; i < n; ++i) {
    if (p.kind(i) != TaskKind::kMemory) continue;
    const mapping::MemoryDetail& m = p.memory(i);
    const mapping::Task t{
        .kind = TaskKind::kMemory, .core = p.core(i), .channel = m.channel, .write = m.write};
    auto [it, inserted] = via.try_emplace({t.core, t.channel, t.write}, false);
    if (inserted) it->second = !c.MemoryPath(t.core, t.channel, t.write).empty();
    mem_via_net[i] = it->second;
  }
  dependents.resize(first_dependent[n]);
  std::vector<uint32_t> fill(first_dependent.begin(), first_dependent.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t d : p.deps(i)) {
      if (d < n) dependents[fill[d]++] = static_cast<uint32_t>(i);
    }
  }
}

void RunState::StopOnOverflow(uint32_t task) {
  times[task].end_ps = std::numeric_limits<Ps>::max();
  if (overflow_task >= 0) return;  // already stopping on an earlier one
  overflow_task = task;
  // sc_stop reports "Simulation stopped by user." as an info of type /OSCI/SystemC on stdout.
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  sc_core::sc_stop();
}

void RunState::Complete(uint32_t task, Ps now_ps) {
  if (now_ps < 0) {  // the kernel's unsigned clock went past 2^63 ps (a DRAM or network delay)
    StopOnOverflow(task);
    return;
  }
  done[task] = 1;
  times[task].end_ps = now_ps;
  ++completed;
  if (progress && completed % kProgressTasks == 0) (*progress)(completed, times.size());
  for (uint32_t k = first_dependent[task]; k < first_dependent[task + 1]; ++k) {
    uint32_t j = dependents[k];
    if (--unmet[j] == 0) cores[program.core(j)]->Ready(j);
  }
}

Ps NowPs() { return static_cast<Ps>(sc_core::sc_time_stamp().value()); }

Core::Core(sc_core::sc_module_name name, int id, RunState* state)
    : sc_module(name),
      net_socket("net"),
      mem_socket("mem"),
      id_(id),
      st_(state),
      peq_(this, &Core::OnResponse) {
  net_socket.register_nb_transport_bw(this, &Core::nb_transport_bw);
  mem_socket.register_nb_transport_bw(this, &Core::nb_transport_bw);
  SC_METHOD(StartNext);
  sensitive << start_ev_;
  dont_initialize();
  SC_METHOD(ComputeDone);
  sensitive << done_ev_;
  dont_initialize();
}

void Core::Ready(uint32_t task) {
  // The record's fields, not Program::task (which decodes every field: a hot path).
  const mapping::Program& p = st_->program;
  const TaskKind kind = p.kind(task);
  st_->times[task].start_ps = NowPs();
  if (kind == TaskKind::kCompute) {
    ready_.push(task);
    // Decide in the next delta so every task made ready at this time competes by id.
    if (running_ < 0) start_ev_.notify(sc_core::SC_ZERO_TIME);
    return;
  }
  tlm::tlm_generic_payload* gp = Acquire();
  gp->set_address(task);
  const bool memory = kind == TaskKind::kMemory;
  const uint64_t bytes = p.bytes(task);
  gp->set_command(memory && !p.memory(task).write ? tlm::TLM_READ_COMMAND : tlm::TLM_WRITE_COMMAND);
  gp->set_data_ptr(nullptr);
  gp->set_data_length(static_cast<unsigned int>(std::min<uint64_t>(bytes, 0xffffffffu)));
  gp->set_streaming_width(gp->get_data_length());
  gp->set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  tlm::tlm_phase phase = tlm::BEGIN_REQ;
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  const bool via_net = kind == TaskKind::kTransfer || st_->mem_via_net[task];
  tlm::tlm_sync_enum status = via_net ? net_socket->nb_transport_fw(*gp, phase, delay)
                                      : mem_socket->nb_transport_fw(*gp, phase, delay);
  if (status != tlm::TLM_ACCEPTED && phase == tlm::BEGIN_RESP) peq_.notify(*gp, phase, delay);
}

void Core::StartNext() {
  if (running_ >= 0 || ready_.empty()) return;
  uint32_t task = ready_.top();
  ready_.pop();
  running_ = task;
  st_->times[task].start_ps = NowPs();
  const Ps dur = mapping::KernelTime(st_->chip, st_->program, st_->program.shape(task));
  if (NowPs() < 0 || dur >= std::numeric_limits<Ps>::max() - NowPs()) {
    st_->StopOnOverflow(task);
    return;
  }
  done_ev_.notify(sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(dur)));
}

void Core::ComputeDone() {
  uint32_t task = static_cast<uint32_t>(running_);
  running_ = -1;
  st_->Complete(task, NowPs());
  StartNext();
}

tlm::tlm_sync_enum Core::nb_transport_bw(tlm::tlm_generic_payload& gp, tlm::tlm_phase& phase,
                                         sc_core::sc_time& delay) {
  if (phase == tlm::BEGIN_RESP) {
    peq_.notify(gp, phase, delay);
    return tlm::TLM_COMPLETED;
  }
  return tlm::TLM_ACCEPTED;
}

void Core::OnResponse(tlm::tlm_generic_payload& gp, const tlm::tlm_phase&) {
  uint32_t task = static_cast<uint32_t>(gp.get_address());
  free_.push_back(&gp);
  st_->Complete(task, NowPs());
}

tlm::tlm_generic_payload* Core::Acquire() {
  if (free_.empty()) {
    pool_.push_back(std::make_unique<tlm::tlm_generic_payload>());
    return pool_.back().get();
  }
  tlm::tlm_generic_payload* gp = free_.back();
  free_.pop_back();
  return gp;
}

}  // namespace tpsim::sim::tlm_model
