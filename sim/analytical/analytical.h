#pragma once
// The analytical engine: closed-form task times and one event pass over the Program's
// DAG with queues on links (the schedule of sim/schedule.h; once more without the queues
// for the contention indicator when a flow waited). Microseconds per layer; no packets.
//
// Task durations
// --------------
// Alone, each task takes what the cost model gives (mapping/cost.h: ComputeTime,
// TransferTime, InSwitchTime with the port bytes below, MemoryTime); src == dst takes 0 ps.
//   in-switch the source core's switch port carries the bytes of all its in-switch
//             transfers of one (collective, step); each ends when it has sent them all.
//   links     transfers and memory tasks whose data crosses links are flows over those
//             links, whatever their collective, step, stage or kind
//             (sim/analytical/links.h): every link is a first-come-first-served queue of
//             whole flows, reserved when the schedule starts a flow, in start order; a
//             flow ends when the last of its links has carried it (plus the hop
//             latencies after that link), never before its unloaded time.
//
// Schedule
// --------
// The one schedule of sim/schedule.h (Dispatcher), which picks work as the TLM engine's
// cores, channels and network do: a free core starts its lowest-id ready compute task, a
// DRAM channel serves its requests first come first served and holds each for its bytes
// at the channel's rate (mapping::ChannelBusyTime), and a transfer over links queues
// first come first served for the first link of its route, holding it for its bytes at
// that link's rate (mapping::SerialisationPs; the links' queues above may slow it further on).
// In-switch transfers and transfers to the same core start when ready.
//
// Statistics in EngineOutput
//   links[l].bytes        payload bytes of every transfer routed over l and of every
//                         memory task whose MemoryPath crosses l
//   links[l].busy_ps      sum over those tasks of ceil(bytes / bw(l)) (unshared)
//   links[l].max_queue_ps the longest a flow waited in l's queue (links.h; a transfer's
//                         wait for its first link before it starts is not included)
//   channels[c].bytes / busy_ps (ChannelBusyTime, the time the channel is held) /
//   channels[c].max_queue_ps (the longest a request waited for the channel after its
//                         deps ended)
//   contention            links.h's indicator of the final schedule
//
// Errors: a dep that is not an earlier task (id >= the task's id, or out of
// range) or a task whose id is not its index throws StallError naming the tasks;
// a core, destination or channel out of range throws std::invalid_argument.
// Cost: the schedule is O(n log n) in tasks, once or twice (its event and ready heaps), plus
// route lengths, plus a sort of the transfers by step unless they come sorted. Routes are computed once per
// core pair, and the chip's cost functions once per distinct compute shape, (src, dst, bytes) transfer and
// (core, channel, direction, bytes) memory task: equal arguments, equal times, and
// the link and channel statistics are sums and maxima, so a distinct task's share
// is added count times at once. What does not depend on the chip's timing (checks,
// flat deps, the distinct shapes and their counts, transfer groups)
// is an AnalyticalPlan (the engine's Prepare): Run without one makes one per call;
// with one made earlier, so a sweep times one Program on many chips that differ only in timing
// fields without redoing it (sim::ProgramCache).

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/analytical/links.h"
#include "sim/engine.h"

namespace tpsim::sim {

// What timing a Program needs that no chip timing field changes. Made by
// PlanAnalytical for a Program and the chip's core and channel counts; valid for
// that Program on every chip with the same layout (core grid, topology, channels).
struct AnalyticalPlan : PreparedProgram {
  int num_cores = 0, num_channels = 0;
  size_t num_tasks = 0;
  std::vector<uint32_t> shapes;            // a compute task of each distinct cost shape
  std::vector<uint32_t> shape_of;          // compute task: index into shapes; transfer: index into pairs
  std::vector<std::pair<int, int>> pairs;  // distinct (src, dst) of transfers with src != dst
  std::vector<uint32_t> linked;            // transfers over links (src != dst, not in-switch), by id
  std::vector<uint32_t> in_switch;         // by (collective, step, core, id)
  std::vector<uint32_t> memory;            // memory tasks, by id
  struct Key {
    uint32_t task;   // the first task with this key
    uint64_t count;  // tasks with it
  };
  std::vector<Key> transfer_keys;         // distinct (src, dst, bytes) of linked transfers
  std::vector<uint32_t> transfer_key_of;  // per linked entry
  std::vector<Key> memory_keys;           // distinct (core, channel, write, bytes) of memory tasks
  std::vector<uint32_t> memory_key_of;    // per memory entry
  std::vector<std::tuple<int, int, bool>> memory_flows;  // distinct (core, channel, write), sorted
};

// Checks the Program (throws as Run does) and plans it.
std::shared_ptr<const AnalyticalPlan> PlanAnalytical(const mapping::Program& program, const arch::Chip& chip);

// Run with a plan made by PlanAnalytical for `program` on a chip of the same
// layout: the same output as AnalyticalEngine::Run. Throws std::invalid_argument
// when the plan's task, core or channel counts differ.
EngineOutput RunAnalytical(const mapping::Program& program, const AnalyticalPlan& plan,
                           const arch::Chip& chip);

// The analytical engine's queues for a Program on `chip`, built without a plan (for code
// that replays its schedule, e.g. sim/step_template.h): per task the unloaded duration
// (mapping::TaskTime), what it holds of its queue (a memory task its channel, a transfer
// over links its first link) and that first link (-1 for none), and the flows over links
// (links.h). `in_switch`: the Program has in-switch transfers, whose durations depend on
// their port's other transfers (RunAnalytical times them; `duration` holds them alone).
struct LinkedProgram {
  std::vector<Ps> duration, busy;  // per task (LinkProgram), or per key (the engine's own)
  std::vector<int32_t> first_link;
  LinkModel model;
  bool in_switch = false;
  std::vector<uint32_t> key;  // the engine's: per task, its entry in duration and busy (TaskCosts)
  // The engine's: per key, a transfer's first link (TaskCosts::first_link_of_key; `first_link`
  // and `model.task` are then empty, the model is by key).
  std::vector<int32_t> first_link_of_key;
};
LinkedProgram LinkProgram(const mapping::Program& p, const arch::Chip& chip);

class AnalyticalEngine : public Engine {
 public:
  using Engine::Run;
  std::string name() const override { return "analytical"; }
  // PlanAnalytical.
  std::shared_ptr<const PreparedProgram> Prepare(const mapping::Program& program,
                                                 const arch::Chip& chip) const override;
  // RunAnalytical with `prepared` (an AnalyticalPlan), or with a fresh plan when it is null.
  EngineOutput Run(const mapping::Program& program, const arch::Chip& chip,
                   const PreparedProgram* prepared) override;
  // The queued schedule's makespan alone: no task times, no unloaded schedule, no queue maxima.
  Ps Makespan(const mapping::Program& program, const arch::Chip& chip) override;
  bool ListSchedule() const override { return true; }
};

std::unique_ptr<Engine> MakeAnalyticalEngine();

}  // namespace tpsim::sim
