#include "sim/tlm/core.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <tuple>

#include "mapping/cost.h"
#include "sim/tlm/ends.h"

namespace tpsim::sim::tlm_model {

using mapping::Task;
using mapping::TaskKind;

Core::Core(sc_core::sc_module_name name, int id, RunState* state, Ends* ends)
    : sc_module(name), net_socket("net"), mem_socket("mem"), id_(id), st_(state), ends_(ends) {
  net_socket.register_nb_transport_bw(this, &Core::nb_transport_bw);
  mem_socket.register_nb_transport_bw(this, &Core::nb_transport_bw);
  SC_METHOD(StartNext);
  sensitive << start_ev_;
  dont_initialize();
}

void Core::Ready(TaskRef task) {
  // The record's fields, not Program::task (which decodes every field: a hot path).
  const TaskKind kind = st_->kind(task);
  st_->Issued(task, NowPs());
  if (kind == TaskKind::kCompute) {
    ready_.push(task);
    // Decide in the next delta so every task made ready at this time competes by id.
    if (running_ == kIdle) Decide();
    return;
  }
  tlm::tlm_generic_payload* gp = Acquire();
  gp->set_address(task);
  const bool memory = kind == TaskKind::kMemory;
  const uint64_t bytes = st_->bytes(task);
  const bool write = memory && st_->ProgramOf(task).memory(RunState::IndexOf(task)).write;
  gp->set_command(memory && !write ? tlm::TLM_READ_COMMAND : tlm::TLM_WRITE_COMMAND);
  gp->set_data_ptr(nullptr);
  gp->set_data_length(static_cast<unsigned int>(std::min<uint64_t>(bytes, 0xffffffffu)));
  gp->set_streaming_width(gp->get_data_length());
  gp->set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  tlm::tlm_phase phase = tlm::BEGIN_REQ;
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  const bool via_net = kind == TaskKind::kTransfer || st_->via_net(task);
  tlm::tlm_sync_enum status = via_net ? net_socket->nb_transport_fw(*gp, phase, delay)
                                      : mem_socket->nb_transport_fw(*gp, phase, delay);
  if (status != tlm::TLM_ACCEPTED && phase == tlm::BEGIN_RESP) nb_transport_bw(*gp, phase, delay);
}

void Core::Decide() {
  if (deciding_) return;
  deciding_ = true;
  ++st_->deciding;
  start_ev_.notify(sc_core::SC_ZERO_TIME);
}

void Core::StartNext() {
  deciding_ = false;
  --st_->deciding;
  if (running_ != kIdle || ready_.empty()) return;
  const TaskRef task = ready_.top();
  ready_.pop();
  running_ = task;
  st_->Started(task, NowPs());
  const Ps dur = st_->ComputeTime(task);
  if (NowPs() < 0 || dur >= std::numeric_limits<Ps>::max() - NowPs()) {
    st_->StopOnOverflow(task);
    return;
  }
  ends_->Compute(task, id_, dur);
}

void Core::ComputeDone(TaskRef task) {
  running_ = kIdle;
  st_->Complete(task, NowPs());
  // Decide in the next delta too: a task of this core that another task ending now makes
  // ready (later in this delta) may have a lower id than those ready so far.
  if (!ready_.empty()) Decide();
}

tlm::tlm_sync_enum Core::nb_transport_bw(tlm::tlm_generic_payload& gp, tlm::tlm_phase& phase,
                                         sc_core::sc_time& delay) {
  if (phase != tlm::BEGIN_RESP) return tlm::TLM_ACCEPTED;
  // Completed here (the payload goes back to the pool); the task ends after the delay.
  free_.push_back(&gp);
  ends_->Response(gp.get_address(), static_cast<Ps>(delay.value()));
  return tlm::TLM_COMPLETED;
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
