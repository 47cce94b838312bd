#pragma once
// Time-windowed sharing of links (the analytical engine's contention model; DRAM
// channels are queues in its schedule, sim/schedule.h). Plain C++: no Program, no
// chip; the engine describes its flows here and reads back their times.
//
// A flow is a transfer or a memory task whose data crosses links: `bytes` that cross
// a set of resources (the links of its route or memory path), each with a bandwidth,
// after a fixed latency (hop latencies, and a memory task's channel latency). Given a
// schedule, every flow u is taken to spread its bytes evenly over its own window
// [s_u, e_u). The bytes the other flows put on resource r while flow f runs are
//
//     O(f, r) = sum over flows u != f that use r of  bytes(u) * |[s_u, e_u) ∩ [s_f, e_f)| / (e_u - s_u)
//
// and a work-conserving resource that is busy throughout f's window has carried
// bytes(f) + O(f, r) by its end, so f takes
//
//     time(f) = latency(f) + max over r of ceil(1000 * (bytes(f) + O(f, r)) / bw(r))   [ps]
//
// (cut-through: the slowest resource decides), and never less than its unloaded time,
// which both engines use (arch::Chip::TransferTime, MemoryTime: a memory task's
// channel may be slower than its path).
// Flows that never overlap in time never slow each other: pipeline stages that
// run one after another, memory streams of different phases, a transfer and a
// memory flow on the same link only while both are in flight.
//
//   link l:  ████ f1 ████                  f1, f2 overlap on l during [s2, e1):
//                    ████████ f2 ████       f1 sees the bytes f2 sends then, f2 those of f1;
//                                  ██ f3 ██ f3 starts after both ended: O(f3, l) = 0
//
// The schedule depends on the times and the times on the schedule: the engine
// iterates (times -> schedule -> times) from the unloaded times; Windowed is one
// step. Cost per step: O(F log F) per resource over the F flows that use it.
//
// Contention indicator: the share of the final makespan that sharing added to the
// unloaded schedule's, (makespan - unloaded makespan) / makespan. 0 where no flows
// overlap; near 1 where the run is dominated by shared links, where the even-spread
// rule above is furthest from the TLM engine's packet queues.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sim/engine.h"

namespace tpsim::sim {

class FlowSet {
 public:
  explicit FlowSet(std::vector<double> resource_gbps) : gbps_(std::move(resource_gbps)) {}

  // Room for `flows` flows over `incidences` resources in all (avoids growth slack).
  void Reserve(size_t flows, size_t incidences);
  // Adds a flow over `resources` (ids into the bandwidth table); returns its index.
  uint32_t Add(uint64_t bytes, Ps latency_ps, const int* resources, size_t count);

  size_t size() const { return bytes_.size(); }
  size_t num_resources() const { return gbps_.size(); }
  double gbps(int r) const { return gbps_[r]; }
  uint64_t bytes(uint32_t f) const { return bytes_[f]; }
  Ps latency(uint32_t f) const { return latency_[f]; }
  // Flow f's resources are incidences first_incidence(f) .. first_incidence(f + 1) - 1.
  uint32_t first_incidence(uint32_t f) const { return f == 0 ? 0 : res_end_[f - 1]; }
  size_t num_incidences() const { return res_.size(); }
  std::span<const int> resources(uint32_t f) const {
    const uint32_t b = first_incidence(f);
    return {res_.data() + b, res_end_[f] - b};
  }

 private:
  std::vector<double> gbps_;
  std::vector<uint64_t> bytes_;
  std::vector<Ps> latency_;
  std::vector<uint32_t> res_end_;  // CSR: flow f's resources res_[res_end_[f-1], res_end_[f])
  std::vector<int> res_;
};

// One step of the iteration over a fixed FlowSet: each flow's time under the sharing
// its window [start, end) sees (the formula above), flow f's window being
// times[task[f]]. `alone[f]` is its unloaded time, returned where nothing overlaps (so
// the unloaded time is exact to the picosecond whatever rounding the caller used).
//
// Made for repeated steps: the flows by resource and the buffers are built once, and a
// resource whose flows' windows all moved by the same amount since its last step keeps
// its overlaps (the formula depends on differences of times only). Results equal those
// of a fresh evaluation to the bit. Memory: per flow two times, per incidence two ids
// and one overlap; the sweep's buffers are sized for the busiest resource.
class WindowedSharing {
 public:
  explicit WindowedSharing(const FlowSet& flows);
  // Writes each flow's time into duration[task[f]]; true when one moved by more than
  // 0.1% (of at least a nanosecond) from the value it replaced.
  bool Step(std::span<const TaskTime> times, std::span<const uint32_t> task, std::span<const Ps> alone,
            std::span<Ps> duration);

 private:
  // Overlaps on resource r from the windows in times[task[f]].
  void Sweep(size_t r, std::span<const TaskTime> times, std::span<const uint32_t> task);

  const FlowSet& flows_;
  // Flows with bytes by resource (CSR): resource r's are positions begin_[r] .. begin_[r + 1] - 1.
  std::vector<uint32_t> begin_;
  std::vector<uint32_t> by_flow_;
  std::vector<uint32_t> by_slot_;          // the incidence's index in the flow's list
  std::vector<Ps> last_start_, last_end_;  // per flow: its window at the previous step
  std::vector<uint64_t> keys_, scratch_;   // Sweep's events
  std::vector<TaskTime> win_;              // Sweep's, per position of r: the flow's window
  std::vector<double> rate_;               // Sweep's, per position of r: bytes per ps over the window
  std::vector<double> w_start_;            // Sweep's, per position of r
  std::vector<double> other_;              // per incidence: other bytes in the flow's window
  std::vector<char> swept_;                // per resource: other_ holds its last step's overlaps
};

// The flows of one Program on one chip, as the analytical engine builds them:
// resources 0 .. links - 1 are the chip's links (a resource past them, r = links + c,
// is counted as DRAM channel c in the statistics).
struct LinkModel {
  FlowSet flows;
  std::vector<uint32_t> task;  // per flow: its task id
  std::vector<Ps> alone;       // per flow: unloaded time
};

// Iterates from the unloaded times: Windowed over the schedule `out->tasks`, new flow
// times into `duration`, `schedule()` (which refills out->tasks and returns the
// makespan), until no flow time moves by more than 0.1% or kMaxSharingRounds rounds.
// Sets out->makespan_ps, adds the largest slow-down of a flow over its unloaded time to
// its links' and channels' max_queue_ps, and returns the contention indicator.
inline constexpr int kMaxSharingRounds = 8;
// `tpsim run` warns, and sweeps flag a point, when the indicator exceeds this
// (calibrated on `tpsim agree`, README "TLM vs analytical").
inline constexpr double kContentionWarning = 0.15;
double SettleSharing(const LinkModel& model, const std::function<Ps()>& schedule, std::vector<Ps>* duration,
                     EngineOutput* out);

}  // namespace tpsim::sim
