#include "sim/tlm/dram.h"

#include <algorithm>
#include <limits>

#include "mapping/cost.h"

namespace tpsim::sim::tlm_model {

Dram::Dram(sc_core::sc_module_name name, RunState* state)
    : sc_module(name),
      socket("socket"),
      st_(state),
      free_(state->chip.channels().size(), 0),
      usage_(state->chip.channels().size()) {
  socket.register_nb_transport_fw(this, &Dram::nb_transport_fw);
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

tlm::tlm_sync_enum Dram::nb_transport_fw(int, tlm::tlm_generic_payload& gp, tlm::tlm_phase& phase,
                                         sc_core::sc_time& delay) {
  if (phase != tlm::BEGIN_REQ) return tlm::TLM_ACCEPTED;
  const Ps now = NowPs();
  const Grant g = Reserve(gp.get_address(), now);
  // Base-protocol shortcut: BEGIN_RESP on the return path (implies END_REQ),
  // annotated with the time until the response.
  gp.set_response_status(tlm::TLM_OK_RESPONSE);
  phase = tlm::BEGIN_RESP;
  // A response past the 2^63 ps clock stops the run (RunState::StopOnOverflow) at once.
  const Ps done = arch::SatAdd(g.start, g.total);
  if (done >= std::numeric_limits<Ps>::max()) st_->StopOnOverflow(gp.get_address());
  delay = sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(done - now));
  return tlm::TLM_UPDATED;
}

}  // namespace tpsim::sim::tlm_model
