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
// engine, the functional executor and the GPU harness all read it.
//
// Storage (flat, for Programs of millions of tasks): one 16-byte TaskRecord per task
// (kind, core, op, a transfer's collective step, and the index of its detail); what
// repeats is stored once: compute shapes (the shards of one op mostly share one), the
// payload and byte ranges of transfers (every layer repeats its collectives), memory
// details; a transfer keeps only its collective beside the index of its shape; every
// task's deps in one CSR array. A ProgramBuilder is the only way to add tasks; its
// Build() runs Verify. Program::task(i) decodes task i into a Task.

#include <cstdint>
#include <span>
#include <stdexcept>
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

// One task, decoded: what ProgramBuilder::Add takes and Program::task returns. Fields
// that do not apply to the task's kind keep their defaults.
struct Task {
  TaskKind kind = TaskKind::kCompute;
  CoreId core{0};       // executing core; transfers: the source core
  CoreId dst_core{-1};  // transfers
  int channel = -1;     // memory tasks: DRAM channel index (arch::Chip::channels())
  bool write = false;   // memory tasks: write (spill) vs read
  // compute: GEMM shape (op_kind GEMM-like) or vector work; op_kind kCollective (a GPU-node
  // chip's collective, one kernel per rank): m = its CollectiveKind, n = its ranks, bytes =
  // its buffer (CollectiveInfo::bytes, nccl-tests' size)
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
  OpId op{0};               // index into Program::ops
  int32_t collective = -1;  // transfers: index into Program::collectives, -1 when none
  uint16_t coll_step = 0;   // transfers: step within the collective
  int32_t func = -1;        // compute: index into Program::func.ops (LowerOptions::functional only)
  TaskId id{0};             // Program::task sets it; ProgramBuilder::Add ignores it
};

// ---- The stored form.
struct TaskRecord {
  TaskKind kind = TaskKind::kCompute;
  uint8_t reserved = 0;
  uint16_t coll_step = 0;  // transfers: step within the collective
  CoreId core{0};
  OpId op{0};
  uint32_t detail = 0;  // compute: Program::shapes(); transfer: transfer_shapes(); memory: memories()
};
static_assert(sizeof(TaskRecord) == 16);

// A compute task's shape and work; equal shapes are stored once.
struct ComputeShape {
  llm::OpKind op_kind = llm::OpKind::kGemm;
  uint64_t batch = 1, m = 0, n = 0, k = 0;
  double flops = 0;
  double vector_ops = 0;
  uint64_t bytes = 0;
};
// A transfer's destination, payload and byte ranges; equal ones are stored once.
struct TransferShape {
  uint64_t bytes = 0, offset = 0, dst_offset = 0;
  double in_switch_gbps = 0;
  int32_t dst_core = -1;
  bool reduce = false;
};
// The transfers from task `first_task` on (up to the next run's first task) belong to
// `collective` (an index into Program::collectives, -1 for none): lowering emits a
// collective's transfers one after the other, so a Program keeps a run per collective, not
// an index per transfer.
struct TransferCollectiveRun {
  uint32_t first_task = 0;
  int32_t collective = -1;
};
// A memory task's channel, direction and payload; equal ones are stored once.
struct MemoryDetail {
  uint64_t bytes = 0;
  int32_t channel = -1;
  bool write = false;
};

// One collective. Sub-group collectives (mn_2d's grid rows or grid columns): `groups`
// disjoint groups of `ranks` ranks each run the same collective at once, each on its own
// data; their transfers share the collective's steps (Task::coll_step), so the engines
// see them as concurrent. `bytes` and `ranks` are then one group's: the transfers touch
// groups x ranks ranks. groups = 1: one collective over `ranks` ranks, as before.
struct CollectiveInfo {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  // The algorithm (mapping/program_types.h): ring, bidirectional_ring, mesh_2d,
  // halving_doubling, direct, nvls, ... or nccl; ToString(algorithm) prints it.
  AlgorithmId algorithm{};
  uint64_t bytes = 0;  // per-rank payload (the full buffer each rank of a group holds)
  int ranks = 0;       // ranks per group
  OpId op{0};
  int groups = 1;  // concurrent groups (> 1: a sub-group collective; see above)
  // The cores of the ranks, group-major: group g's rank r runs on members[g * ranks + r].
  // Empty for p2p hand-overs (no ranks). Verify checks that each transfer of the collective
  // stays within one group.
  std::vector<int> members{};
  // The group of `core` (-1 when it is not a member).
  int GroupOf(int core) const;
};

struct OpInfo {
  OpRef ref;
  double flops = 0;    // whole op, all ranks
  uint64_t bytes = 0;  // whole op, all ranks
  uint64_t spilled_bytes = 0;
};

// The Program: built by a ProgramBuilder (tasks can be added in no other way); the fields
// around the tasks are the builder's too, set before Build.
class Program {
 public:
  int num_cores = 0;     // cores tasks may name: [0, num_cores)
  int num_channels = 0;  // DRAM channels memory tasks may name: [0, num_channels)
  std::vector<OpInfo> ops;
  std::vector<CollectiveInfo> collectives;
  WeightsLocation weights_location = WeightsLocation::kNone;
  KvLocation kv_location = KvLocation::kNone;
  uint64_t spilled_bytes = 0;
  // GPU-node chips in eager mode (mapping.enforce_eager): the host's launch cost of one
  // kernel (chip.gpu.kernel_launch_us), which every compute task adds to its duration
  // (mapping/cost.h, KernelTime). 0 elsewhere and under CUDA graphs.
  int64_t kernel_launch_ps = 0;
  FuncData func;  // data semantics for the functional executors (mapping/func_data.h)

  size_t num_tasks() const { return records_.size(); }
  bool empty() const { return records_.empty(); }
  // Task i decoded (id = i).
  Task task(size_t i) const;
  TaskKind kind(size_t i) const { return records_[i].kind; }
  CoreId core(size_t i) const { return records_[i].core; }
  OpId op(size_t i) const { return records_[i].op; }
  // Task i's deps (ids < i), in the order they were given.
  std::span<const TaskId> deps(size_t i) const {
    return {deps_.data() + dep_begin_[i], deps_.data() + dep_begin_[i + 1]};
  }
  // The detail of task i; only for a task of that kind.
  const ComputeShape& shape(size_t i) const { return shapes_[records_[i].detail]; }
  const TransferShape& transfer(size_t i) const { return transfer_shapes_[records_[i].detail]; }
  // Transfer i's index into transfer_shapes().
  uint32_t transfer_shape_id(size_t i) const { return records_[i].detail; }
  int32_t collective(size_t i) const;
  const MemoryDetail& memory(size_t i) const { return memories_[records_[i].detail]; }
  // Task i's Task::bytes (compute: SRAM bytes touched; transfer and memory: payload) without
  // decoding the rest.
  uint64_t bytes(size_t i) const {
    const TaskRecord& r = records_[i];
    return r.kind == TaskKind::kCompute    ? shapes_[r.detail].bytes
           : r.kind == TaskKind::kTransfer ? transfer_shapes_[r.detail].bytes
                                           : memories_[r.detail].bytes;
  }
  int32_t func_op(size_t i) const { return func_of_.empty() ? -1 : func_of_[i]; }

  // The stored arrays. Task i's deps are dep_list()[dep_begin()[i], dep_begin()[i + 1]).
  const std::vector<TaskRecord>& records() const { return records_; }
  const std::vector<ComputeShape>& shapes() const { return shapes_; }
  const std::vector<TransferCollectiveRun>& collective_runs() const { return runs_; }
  const std::vector<TransferShape>& transfer_shapes() const { return transfer_shapes_; }
  const std::vector<MemoryDetail>& memories() const { return memories_; }
  const std::vector<uint32_t>& dep_begin() const { return dep_begin_; }
  const std::vector<TaskId>& dep_list() const { return deps_; }
  // Bytes the tasks take: records, details, shapes, deps (and func indices when present).
  size_t TaskBytes() const;
  // Sum of the compute tasks' flops, in id order.
  double ComputeFlops() const;

  // The tasks decoded, in id order: for (const Task& t : program.tasks()), or
  // program.tasks()[i] (a Task by value; bind it to a const reference or copy it).
  class TaskRange {
   public:
    class iterator {
     public:
      using value_type = Task;
      using difference_type = std::ptrdiff_t;
      iterator(const Program* p, size_t i) : p_(p), i_(i) {}
      Task operator*() const { return p_->task(i_); }
      iterator& operator++() {
        ++i_;
        return *this;
      }
      bool operator==(const iterator& o) const { return i_ == o.i_; }

     private:
      const Program* p_;
      size_t i_;
    };
    explicit TaskRange(const Program* p) : p_(p) {}
    iterator begin() const { return {p_, 0}; }
    iterator end() const { return {p_, p_->num_tasks()}; }
    size_t size() const { return p_->num_tasks(); }
    bool empty() const { return p_->empty(); }
    Task operator[](size_t i) const { return p_->task(i); }

   private:
    const Program* p_;
  };
  TaskRange tasks() const { return TaskRange(this); }

  // A readable dump: one line per task with kind, core(s), shape/bytes, op and deps.
  std::string Dump() const;

 private:
  friend class ProgramBuilder;
  std::vector<TaskRecord> records_;
  std::vector<ComputeShape> shapes_;
  std::vector<TransferCollectiveRun> runs_;  // by first_task
  // Per block of kRunBlock tasks: the last run starting at or before the block's first
  // task (0 when none does), where collective(i) starts its search (ProgramBuilder::Build).
  static constexpr int kRunBlockBits = 12;
  std::vector<uint32_t> run_of_block_;
  std::vector<TransferShape> transfer_shapes_;
  std::vector<MemoryDetail> memories_;
  std::vector<uint32_t> dep_begin_{0};  // num_tasks() + 1 offsets into deps_
  std::vector<TaskId> deps_;
  std::vector<int32_t> func_of_;  // per task, only when some task has a func op
};

// A Program that breaks the contract; what() names the first problem found.
class InvalidProgram : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The contract, checked: every dep an earlier task; cores, destination cores and channels
// in range; op, collective and func indices valid; a collective's transfers within one of
// its member groups; FuncData's per-collective entries parallel to the collectives. Throws
// InvalidProgram.
void Verify(const Program& p);
// The Program fits a chip of `num_cores` cores and `num_channels` DRAM channels (what an
// engine checks before it runs it). Throws InvalidProgram.
void VerifyFits(const Program& p, int num_cores, int num_channels);

// The only way to make a Program with tasks:
//   ProgramBuilder b(num_cores, num_channels);
//   b.program().ops.push_back(...);              // ops, collectives, memory plan, func
//   TaskId id = b.Add(task, {deps...});
//   Program p = std::move(b).Build();            // Verify, then the Program
class ProgramBuilder {
 public:
  explicit ProgramBuilder(int num_cores = 0, int num_channels = 0);
  // The Program being built: everything but its tasks may be set through it.
  Program& program() { return p_; }
  // Appends `t` with `deps` (kept in the given order); returns its id.
  TaskId Add(const Task& t, std::span<const TaskId> deps = {});
  TaskId Add(const Task& t, std::initializer_list<TaskId> deps) {
    return Add(t, std::span<const TaskId>(deps.begin(), deps.size()));
  }
  // Transfers in bulk (what Add does for a transfer, in two halves): the index of shape `x`
  // in Program::transfer_shapes() (appended when new), then a transfer of that shape. A
  // lowering that emits the same transfers again (layers repeat their collectives) may keep
  // the indices and skip the interning; AddTransfer(..., InternTransfer(x), ...) is Add.
  uint32_t InternTransfer(const TransferShape& x);
  // InternTransfer of each of `xs` in turn, the indices appended to *out (the same ones;
  // faster for many: the table's slots are fetched ahead).
  void InternTransfers(std::span<const TransferShape> xs, std::vector<uint32_t>* out);
  // Appends a transfer of interned shape `shape` (an index InternTransfer returned); returns its id.
  TaskId AddTransfer(CoreId core, OpId op, uint16_t coll_step, uint32_t shape, int32_t collective,
                     std::span<const TaskId> deps);
  size_t size() const { return p_.records_.size(); }
  // The builder's fill (tasks, deps), and room for `more` times what was added
  // since `since` on top of what it holds, so that a lowering that has made one of N alike
  // parts grows its arrays once instead of by doubling (a hint: nothing else changes).
  struct Fill {
    size_t tasks = 0, deps = 0;
  };
  Fill fill() const { return {p_.records_.size(), p_.deps_.size()}; }
  void ReserveMore(const Fill& since, size_t more);
  // Arrays of this many bytes or more keep their spare capacity when built (Build).
  static constexpr size_t kShrinkBelowBytes = size_t{1} << 20;
  // Verify, then hand the Program over (the builder is empty afterwards).
  Program Build();

 private:
  // Interning: the index of `v` in `values`, appended when new. Equal means bit-for-bit
  // equal (doubles compared by their bits). Open addressing over (hash, index + 1) slots,
  // at most half full: one probe into a flat array per task in the common case.
  struct Interner {
    std::vector<uint64_t> slots;  // high 32 bits: hash; low 32 bits: index + 1 (0: empty)
    size_t used = 0;
    template <class T>
    uint32_t Intern(const T& v, std::vector<T>* values);
    template <class T>
    void InternAll(std::span<const T> vs, std::vector<T>* values, std::vector<uint32_t>* out);
    void Grow(size_t entries);  // room for `entries` at most half full
    void Clear() {
      slots.clear();
      used = 0;
    }
  };
  // Appends record `r` (its detail set) with its functional op and deps.
  TaskId Append(const TaskRecord& r, int32_t func, std::span<const TaskId> deps);
  Program p_;
  bool with_func_ = false;  // some task has a functional op: p_.func_of_ has one entry per task
  Interner shapes_, transfers_, memories_;
};

}  // namespace tpsim::mapping
