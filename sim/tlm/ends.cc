#include "sim/tlm/ends.h"

#include <algorithm>

#include "sim/tlm/core.h"
#include "sim/tlm/dram.h"
#include "sim/tlm/network.h"

namespace tpsim::sim::tlm_model {

Ends::Ends(sc_core::sc_module_name name, RunState* state) : sc_module(name), st_(state) {
  SC_METHOD(Fire);
  sensitive << ev_;
  dont_initialize();
}

void Ends::Add(const End& e, Ps delay_ps) {
  if (delay_ps == 0) {
    next_delta_.push_back(e);
    if (!firing_ && !delta_armed_) {
      ev_.notify(sc_core::SC_ZERO_TIME);  // cancels a timed notification: Fire notifies again
      delta_armed_ = true;
    }
    return;
  }
  timed_.push(e);
  if (!firing_ && !delta_armed_ && e.t < armed_) {
    ev_.notify(sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(delay_ps)));
    armed_ = e.t;
  }
}

void Ends::Fire() {
  firing_ = true;
  armed_ = kNever;
  delta_armed_ = false;
  const Ps now = NowPs();
  fired_ = now;
  // The ends due now (in this time's first delta cycle), then those of no delay issued in
  // the delta cycle before (in a later one; the two do not meet).
  while (!timed_.empty() && timed_.top().t <= now) {
    const End e = timed_.top();
    timed_.pop();
    Finish(e);
  }
  if (!next_delta_.empty()) {
    now_.swap(next_delta_);
    std::sort(now_.begin(), now_.end(), [](const End& a, const End& b) { return a.task < b.task; });
    for (const End& e : now_) Finish(e);
    now_.clear();
  }
  if (net_ && sc_core::sc_delta_count_at_current_time() == 0 && next_delta_.empty() && st_->deciding == 0 &&
      !dram_->waiting() && !st_->stopping() && net_->Due(now)) {
    net_->TakeNow();
  }
  firing_ = false;
  if (!next_delta_.empty()) {
    ev_.notify(sc_core::SC_ZERO_TIME);
    delta_armed_ = true;
  } else if (!timed_.empty()) {
    armed_ = timed_.top().t;
    ev_.notify(sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(armed_ - now)));
  }
}

void Ends::Finish(const End& e) {
  if (e.core >= 0) {
    st_->cores[e.core]->ComputeDone(e.task);
  } else {
    st_->Complete(e.task, NowPs());
  }
}

}  // namespace tpsim::sim::tlm_model
