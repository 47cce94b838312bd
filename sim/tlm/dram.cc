#include "sim/tlm/dram.h"

#include <algorithm>
#include <limits>

#include "mapping/cost.h"
#include "sim/tlm/network.h"

namespace tpsim::sim::tlm_model {

Dram::Dram(sc_core::sc_module_name name, RunState* state)
    : sc_module(name),
      socket("socket"),
      st_(state),
      free_(state->chip.channels().size(), 0),
      usage_(state->chip.channels().size()) {
  socket.register_nb_transport_fw(this, &Dram::nb_transport_fw);
  SC_METHOD(Serve);
  sensitive << serve_ev_;
  dont_initialize();
}

void Dram::Request(TaskRef task, uint32_t slot) {
  arrived_.push_back(Arrival{task, sc_core::sc_delta_count(), nullptr, slot});
  serve_ev_.notify(sc_core::SC_ZERO_TIME);
}

Dram::Grant Dram::Reserve(TaskRef task, Ps now) {
  const int ch = static_cast<int>(st_->ProgramOf(task).memory(RunState::IndexOf(task)).channel);
  const uint64_t bytes = st_->bytes(task);  // a KV read's at its step's context
  const Ps total = st_->chip.DramTime(ch, bytes);
  const Ps occupy = mapping::ChannelBusyTime(st_->chip, ch, bytes);
  const Ps start = std::max(now, free_[ch]);
  free_[ch] = arch::SatAdd(start, occupy);
  ChannelUsage& u = usage_[ch];
  u.bytes += bytes;
  u.busy_ps = arch::SatAdd(u.busy_ps, occupy);
  u.max_queue_ps = std::max(u.max_queue_ps, start - now);
  return Grant{start, total};
}

tlm::tlm_sync_enum Dram::nb_transport_fw(int port, tlm::tlm_generic_payload& gp, tlm::tlm_phase& phase,
                                         sc_core::sc_time&) {
  if (phase != tlm::BEGIN_REQ) return tlm::TLM_ACCEPTED;
  arrived_.push_back(Arrival{gp.get_address(), sc_core::sc_delta_count(), &gp, static_cast<uint32_t>(port)});
  serve_ev_.notify(sc_core::SC_ZERO_TIME);
  // Accepted at once; BEGIN_RESP follows on the backward path once the channel takes it.
  phase = tlm::END_REQ;
  return tlm::TLM_UPDATED;
}

void Dram::Serve() {
  // The requests of earlier delta cycles (at this time: every task that ended then has made
  // its dependents ready). One that arrived in this delta, from a process that ran before
  // this one, waits for the next: it was made ready later at this time.
  const sc_dt::uint64 delta = sc_core::sc_delta_count();
  size_t n = 0;
  while (n < arrived_.size() && arrived_[n].delta < delta) ++n;
  serving_.assign(arrived_.begin(), arrived_.begin() + static_cast<std::ptrdiff_t>(n));
  arrived_.erase(arrived_.begin(), arrived_.begin() + static_cast<std::ptrdiff_t>(n));
  if (!arrived_.empty()) serve_ev_.notify(sc_core::SC_ZERO_TIME);
  std::sort(serving_.begin(), serving_.end(),
            [](const Arrival& a, const Arrival& b) { return a.task < b.task; });
  const Ps now = NowPs();
  for (const Arrival& a : serving_) {
    const Grant g = Reserve(a.task, now);
    st_->Served(a.task, g.start);
    if (!a.gp) {
      net_->Granted(a.port_or_slot, g);
      continue;
    }
    // Base protocol: BEGIN_RESP (implies END_REQ), annotated with the time until the response.
    // A response past the 2^63 ps clock stops the run (RunState::StopOnOverflow) at once.
    const Ps done = arch::SatAdd(g.start, g.total);
    if (done >= std::numeric_limits<Ps>::max()) st_->StopOnOverflow(a.task);
    a.gp->set_response_status(tlm::TLM_OK_RESPONSE);
    tlm::tlm_phase phase = tlm::BEGIN_RESP;
    sc_core::sc_time delay = sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(done - now));
    socket[static_cast<int>(a.port_or_slot)]->nb_transport_bw(*a.gp, phase, delay);
  }
  serving_.clear();
}

}  // namespace tpsim::sim::tlm_model
