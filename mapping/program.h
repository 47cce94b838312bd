#pragma once
// The Program: the contract between mapping and every executor.
//
// A Program is a DAG of tasks, each bound to a core:
//   compute  - an op's shard on one core (GEMM shape or vector work)
//   transfer - `bytes` from `core` to `dst_core` over the network; it may start
//              when its deps are done, and tasks that depend on it may start
//              when the last byte has arrived
//   memory   - `bytes` read from or written to a DRAM channel by `core`
// Tasks are stored in a topological order (every dep has a smaller id), so an
// executor can schedule in one forward pass. The analytical engine, the TLM
// engine, the functional executor and the GPU harness all read this struct.

#include <cstdint>
#include <string>
#include <vector>

#include "llm/opgraph.h"
#include "mapping/func_data.h"
#include "mapping/program_types.h"

namespace tpsim::mapping {

enum class TaskKind : uint8_t { kCompute, kTransfer, kMemory };

// Provenance of a task: which op of which layer of which phase.
struct OpRef {
  Phase phase = Phase::kPrefill;
  uint32_t step = 0;  // decode step (0 for prefill)
  uint32_t layer = 0;
  std::string op;         // op name in the layer graph, or e.g. "q_proj.allreduce", "stage_send"
  std::string partition;  // partitioner (collectives: the algorithm) that produced it
  std::string note{};     // what else to know (a fallback, sub-groups), "" when nothing
  // What outputs print: "partition", or "partition (note)".
  std::string Label() const { return note.empty() ? partition : partition + " (" + note + ")"; }
};

struct Task {
  uint32_t id = 0;
  TaskKind kind = TaskKind::kCompute;
  int core = 0;        // executing core; transfers: the source core
  int dst_core = -1;   // transfers
  int channel = -1;    // memory tasks: DRAM channel index (arch::Chip::channels())
  bool write = false;  // memory tasks: write (spill) vs read
  // compute: GEMM shape (op_kind GEMM-like) or vector work
  llm::OpKind op_kind = llm::OpKind::kGemm;
  uint64_t batch = 1, m = 0, n = 0, k = 0;
  double flops = 0;
  double vector_ops = 0;    // lane-operations for vector-unit ops
  uint64_t bytes = 0;       // compute: SRAM bytes touched; transfer/memory: payload
  uint64_t offset = 0;      // transfers: byte offset in the collective's buffer
  uint64_t dst_offset = 0;  // transfers: where the range lands at dst_core (== offset except all_to_all)
  bool reduce = false;      // transfers: accumulate into the destination
  // transfers: > 0 when the transfer goes through the switch's reduction/multicast
  // engine (collective algorithm nvls) at this per-GPU rate in GB/s (bytes/ns).
  // Both timing engines then ignore the links' bandwidth and contention: the task
  // takes the hop latencies of its route plus its bytes at this rate through its
  // source core's switch port, which the in-switch transfers from that core in
  // the same (collective, coll_step) share (serialised in the TLM engine, each
  // scaled by their count in the analytical one).
  double in_switch_gbps = 0;
  uint32_t op = 0;          // index into Program::ops
  int32_t collective = -1;  // index into Program::collectives, -1 when none
  uint16_t coll_step = 0;   // step within the collective
  int32_t func = -1;        // compute: index into Program::func.ops (LowerOptions::functional only)
  std::vector<uint32_t> deps;
};

// One collective. Sub-group collectives (mn_2d's grid rows or grid columns): `groups`
// disjoint groups of `ranks` ranks each run the same collective at once, each on its own
// data; their transfers share the collective's steps (Task::coll_step), so the engines
// see them as concurrent. `bytes` and `ranks` are then one group's: the transfers touch
// groups x ranks ranks. groups = 1: one collective over `ranks` ranks, as before.
struct CollectiveInfo {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  // The registered algorithm's name (mapping/collective/collective.h): ring,
  // bidirectional_ring, mesh_2d, halving_doubling, direct, nvls, ... A name, not an enum,
  // so that adding an algorithm stays one new file; nothing branches on it.
  std::string algorithm;
  uint64_t bytes = 0;     // per-rank payload (the full buffer each rank of a group holds)
  int ranks = 0;          // ranks per group
  uint32_t op = 0;
  int groups = 1;  // concurrent groups (> 1: a sub-group collective; see above)
};

struct OpInfo {
  OpRef ref;
  double flops = 0;    // whole op, all ranks
  uint64_t bytes = 0;  // whole op, all ranks
  uint64_t spilled_bytes = 0;
};

struct Program {
  int num_cores = 0;
  std::vector<Task> tasks;
  std::vector<OpInfo> ops;
  std::vector<CollectiveInfo> collectives;
  WeightsLocation weights_location = WeightsLocation::kNone;
  KvLocation kv_location = KvLocation::kNone;
  uint64_t spilled_bytes = 0;
  FuncData func;  // data semantics for the functional executors (mapping/func_data.h)

  // A readable dump: one line per task with kind, core(s), shape/bytes, op and deps.
  std::string Dump() const;
};

// A Program's tasks as flat arrays, for code that passes over every task several
// times (the analytical engine, sim::BuildSummary): the Task structs and their deps
// vectors are scattered over the heap, these are not. Task i's deps are
// deps[dep_end[i - 1], dep_end[i]) (from 0 for i = 0), as in Task::deps.
struct TaskGraph {
  std::vector<uint32_t> dep_end;  // one per task
  std::vector<uint32_t> deps;
  std::vector<TaskKind> kind;
  std::vector<int> core;
  std::vector<uint32_t> op;
  double compute_flops = 0;  // sum of Task::flops over compute tasks, in id order
  size_t size() const { return kind.size(); }
  uint32_t dep_begin(size_t i) const { return i == 0 ? 0 : dep_end[i - 1]; }
};
TaskGraph FlattenTasks(const Program& program);

}  // namespace tpsim::mapping
