#pragma once
// The analytical engine: closed-form task times and one forward pass over the
// Program's DAG. Microseconds per layer; no queues, no events.
//
// Task durations
// --------------
//   compute   GEMM kinds (kGemm, kBatchedGemm, kRouter):
//                 chip.GemmTime(batch, m, n, k, bytes)
//             every other kind:
//                 chip.VectorTime(vector_ops, bytes)
//
//   transfer  alpha-beta over the route, with the links shared among the
//             transfers of the same collective step (same `collective` and
//             `coll_step`; a transfer with collective == -1 shares with nobody):
//
//                 load(l)   = number of transfers of this step whose route uses link l
//                 ser(t)    = max over links l of route(t):  bytes * load(l) / bw(l)
//                 time(t)   = sum of hop latencies on route(t) + ser(t)
//
//             computed as chip.TransferTime(src, dst, B) with the equivalent
//             payload B = bytes * max_l(load(l) * bw_min / bw(l)), so a transfer
//             alone (every load 1) takes exactly chip.TransferTime(src, dst, bytes)
//             and on a uniform network B = bytes * max load. Example: one step,
//             two transfers on a mesh row (XY routes):
//
//                 c0 ─────► c1 ─────► c2      t1: c0 -> c2, route {c0->c1, c1->c2}
//                 t1 ══════════════►          t2: c1 -> c2, route {c1->c2}
//                           t2 ═════►         load(c0->c1) = 1, load(c1->c2) = 2
//
//                 time(t1) = 2 hop latencies + 2 * bytes / bw
//                 time(t2) = 1 hop latency   + 2 * bytes / bw
//
//             Transfers of different collectives or steps never see each other
//             here (that is what the TLM engine adds). src == dst takes 0 ps.
//
//   memory    the channel's bandwidth is shared by every core that has a memory
//             task on that channel anywhere in the Program (n(c) distinct cores):
//                 time(t) = chip.MemoryTime(core, channel, bytes, write, n(c))
//             i.e. latency once plus serialisation at bandwidth / n(c)
//             (= chip.DramTime(channel, bytes * n(c))) when the channel is stacked
//             under the core; otherwise plus the hop latencies of
//             chip.MemoryPath and, when the path's narrowest link is slower
//             than the channel share, the difference (cut-through). Each link
//             of that path is shared by the distinct (core, channel, direction)
//             memory flows over it anywhere in the Program, with the transfers'
//             equivalent-payload rule (path_factor = max over the path of flows
//             x narrowest bandwidth / link bandwidth). Memory flows and
//             transfers do not share links here (the TLM engine models that).
//
// Schedule
// --------
// One pass over tasks in id order (the Program is topologically ordered):
//   compute:   start = max(end of deps, end of the core's previous compute task)
//              (a core runs one compute task at a time, in id order)
//   memory:    start = max(end of deps, end of the core's previous memory task)
//              (each core has one DRAM DMA queue, served in id order at its
//              1/n(c) share of the channel, so a core never moves more than its
//              share at once, even when reads are issued without deps as prefetches)
//   transfer:  start = max(end of deps)
//              (network DMA engines: transfers overlap with compute, with DRAM
//              accesses and with each other; only the same-step link sharing
//              above slows them)
//   end = start + time(t); makespan = max end (0 for an empty Program).
//
// Statistics in EngineOutput
//   links[l].bytes        payload bytes of every transfer routed over l and of every
//                         memory task whose MemoryPath crosses l
//   links[l].busy_ps      sum over those tasks of ceil(bytes / bw(l)) (unshared)
//   links[l].max_queue_ps largest extra serialisation a transfer on l suffered from
//                         sharing: ser(t) - unshared ser(t)
//   channels[c].bytes / busy_ps (DramTime(c, bytes) - latency, unshared) /
//   channels[c].max_queue_ps (largest extra time from sharing the channel)
//
// Errors: a dep that is not an earlier task (id >= the task's id, or out of
// range) or a task whose id is not its index throws StallError naming the tasks;
// a core, destination or channel out of range throws std::invalid_argument.
// Cost: linear in tasks plus route lengths, plus a sort of the transfers by step
// unless they come sorted. Routes are computed once per core pair, and the chip's
// cost functions once per distinct compute shape, (src, dst, bytes) transfer and
// (core, channel, direction, bytes) memory task: equal arguments, equal times, and
// the link and channel statistics are sums and maxima, so a distinct task's share
// is added count times at once. What does not depend on the chip's timing (checks,
// flat deps, the distinct shapes and their counts, transfer groups, DRAM sharers)
// is an AnalyticalPlan: Run makes one per call; RunAnalytical takes one made
// earlier, so a sweep times one Program on many chips that differ only in timing
// fields without redoing it (sim::ProgramCache).

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/engine.h"

namespace tpsim::sim {

// What timing a Program needs that no chip timing field changes. Made by
// PlanAnalytical for a Program and the chip's core and channel counts; valid for
// that Program on every chip with the same layout (core grid, topology, channels).
struct AnalyticalPlan {
  int num_cores = 0, num_channels = 0;
  size_t num_tasks = 0;
  std::vector<uint32_t> shapes;            // a compute task of each distinct cost shape
  std::vector<uint32_t> shape_of;          // compute task: index into shapes; transfer: index into pairs
  std::vector<std::pair<int, int>> pairs;  // distinct (src, dst) of transfers with src != dst
  std::vector<uint32_t> linked;            // transfers over links (src != dst, not in-switch), by id
  std::vector<uint32_t> grouped;           // linked transfers of a collective, by (collective, step, id)
  std::vector<std::pair<uint32_t, uint32_t>> group_spans;  // [begin, end) in grouped of steps with > 1
  std::vector<uint32_t> in_switch;                         // by (collective, step, core, id)
  std::vector<uint32_t> memory;                            // memory tasks, by id
  std::vector<uint64_t> sharers;  // per channel: distinct cores with memory tasks on it
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

class AnalyticalEngine : public Engine {
 public:
  std::string name() const override { return "analytical"; }
  EngineOutput Run(const mapping::Program& program, const arch::Chip& chip) override;
};

std::unique_ptr<Engine> MakeAnalyticalEngine();

}  // namespace tpsim::sim
