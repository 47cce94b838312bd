#include "mapping/program.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <stdexcept>

namespace tpsim::mapping {

std::string Program::Dump() const {
  std::string out;
  out += "program: " + std::to_string(num_tasks()) + " tasks, " + std::to_string(ops.size()) + " ops, " +
         std::to_string(collectives.size()) + " collectives; weights " + ToString(weights_location) +
         ", kv " + ToString(kv_location) + ", spilled " + std::to_string(spilled_bytes) + " B\n";
  char buf[256];
  for (size_t id = 0; id < num_tasks(); ++id) {
    const Task t = task(id);
    const OpInfo& op = ops[t.op];
    switch (t.kind) {
      case TaskKind::kCompute:
        if (t.flops > 0)
          std::snprintf(buf, sizeof buf,
                        "t%u compute core=%d %s batch=%llu m=%llu k=%llu n=%llu flops=%.0f bytes=%llu",
                        t.id.value(), t.core.value(), llm::ToString(t.op_kind), (unsigned long long)t.batch,
                        (unsigned long long)t.m, (unsigned long long)t.k, (unsigned long long)t.n, t.flops,
                        (unsigned long long)t.bytes);
        else
          std::snprintf(buf, sizeof buf, "t%u compute core=%d %s m=%llu n=%llu vector_ops=%.0f bytes=%llu",
                        t.id.value(), t.core.value(), llm::ToString(t.op_kind), (unsigned long long)t.m,
                        (unsigned long long)t.n, t.vector_ops, (unsigned long long)t.bytes);
        break;
      case TaskKind::kTransfer:
        std::snprintf(buf, sizeof buf,
                      "t%u transfer core=%d->%d bytes=%llu offset=%llu->%llu%s coll=%d step=%u", t.id.value(),
                      t.core.value(), t.dst_core.value(), (unsigned long long)t.bytes,
                      (unsigned long long)t.offset, (unsigned long long)t.dst_offset,
                      t.reduce ? " reduce" : "", t.collective, t.coll_step);
        if (t.collective >= 0 && static_cast<size_t>(t.collective) < collectives.size() &&
            collectives[t.collective].groups > 1) {
          // Sub-group collectives only (the line is unchanged for every other one).
          const CollectiveInfo& c = collectives[t.collective];
          out += buf;
          std::snprintf(buf, sizeof buf, " groups=%dx%d", c.groups, c.ranks);
        }
        break;
      case TaskKind::kMemory:
        std::snprintf(buf, sizeof buf, "t%u memory core=%d channel=%d %s bytes=%llu", t.id.value(),
                      t.core.value(), t.channel, t.write ? "write" : "read", (unsigned long long)t.bytes);
        break;
    }
    out += buf;
    out += " op=" + std::string(ToString(op.ref.phase)) +
           (op.ref.phase == Phase::kDecode ? std::to_string(op.ref.step) : "") + ".L" +
           std::to_string(op.ref.layer) + "." + op.ref.op + " [" + op.ref.Label() + "] deps=[";
    const std::span<const TaskId> d = deps(id);
    for (size_t i = 0; i < d.size(); ++i) out += (i ? "," : "") + std::to_string(d[i]);
    out += "]\n";
  }
  return out;
}

int CollectiveInfo::GroupOf(int core) const {
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i] == core) return ranks > 0 ? static_cast<int>(i) / ranks : 0;
  return -1;
}

Task Program::task(size_t i) const {
  const TaskRecord& r = records_[i];
  Task t;
  t.id = TaskId(static_cast<uint32_t>(i));
  t.kind = r.kind;
  t.core = r.core;
  t.op = r.op;
  switch (r.kind) {
    case TaskKind::kCompute: {
      const ComputeShape& s = shapes_[r.detail];
      t.op_kind = s.op_kind;
      t.batch = s.batch, t.m = s.m, t.n = s.n, t.k = s.k;
      t.flops = s.flops;
      t.vector_ops = s.vector_ops;
      t.bytes = s.bytes;
      t.func = func_op(i);
      break;
    }
    case TaskKind::kTransfer: {
      const TransferShape& x = transfer_shapes_[r.detail];
      t.dst_core = CoreId(x.dst_core);
      t.bytes = x.bytes;
      t.offset = x.offset;
      t.dst_offset = x.dst_offset;
      t.reduce = x.reduce;
      t.in_switch_gbps = x.in_switch_gbps;
      t.collective = collective(i);
      t.coll_step = r.coll_step;
      break;
    }
    case TaskKind::kMemory: {
      const MemoryDetail& m = memories_[r.detail];
      t.channel = m.channel;
      t.write = m.write;
      t.bytes = m.bytes;
      break;
    }
  }
  return t;
}

int32_t Program::collective(size_t i) const {
  if (runs_.empty()) return -1;
  const size_t b = i >> kRunBlockBits;
  // The runs that can hold task i: from the block's to the next block's (inclusive).
  const size_t lo =
      b < run_of_block_.size() ? run_of_block_[b] : (run_of_block_.empty() ? 0 : run_of_block_.back());
  const size_t hi = b + 1 < run_of_block_.size() ? run_of_block_[b + 1] + 1 : runs_.size();
  const auto it =
      std::upper_bound(runs_.begin() + lo, runs_.begin() + hi, static_cast<uint32_t>(i),
                       [](uint32_t t, const TransferCollectiveRun& r) { return t < r.first_task; });
  return it == runs_.begin() ? -1 : std::prev(it)->collective;
}

size_t Program::TaskBytes() const {
  return records_.size() * sizeof(TaskRecord) + shapes_.size() * sizeof(ComputeShape) +
         runs_.size() * sizeof(TransferCollectiveRun) + run_of_block_.size() * sizeof(uint32_t) +
         transfer_shapes_.size() * sizeof(TransferShape) + memories_.size() * sizeof(MemoryDetail) +
         (dep_begin_.size() + deps_.size()) * sizeof(uint32_t) + func_of_.size() * sizeof(int32_t);
}

double Program::ComputeFlops() const {
  double f = 0;
  for (const TaskRecord& r : records_)
    if (r.kind == TaskKind::kCompute) f += shapes_[r.detail].flops;
  return f;
}

// ---- Verify.

namespace {

[[noreturn]] void Bad(size_t task, const std::string& what) {
  throw InvalidProgram("invalid Program: task " + std::to_string(task) + ": " + what);
}

std::string OutOf(int64_t v, int64_t n) {
  return std::to_string(v) + " not in [0, " + std::to_string(n) + ")";
}

}  // namespace

void Verify(const Program& p) {
  const size_t n = p.num_tasks();
  if (p.num_cores < 0 || p.num_channels < 0)
    throw InvalidProgram("invalid Program: negative core or channel count");
  // group_of[core]: the member group of `core` in collective `filled` (-1: none).
  std::vector<int> group_of(static_cast<size_t>(p.num_cores), -1);
  int64_t filled = -1;
  auto fill = [&](size_t c) {
    if (filled >= 0)
      for (int core : p.collectives[filled].members) group_of[core] = -1;
    const CollectiveInfo& ci = p.collectives[c];
    for (size_t m = 0; m < ci.members.size(); ++m) {
      const int core = ci.members[m];
      if (group_of[core] >= 0)
        throw InvalidProgram("invalid Program: collective " + std::to_string(c) + ": member core " +
                             std::to_string(core) + " twice");
      group_of[core] = static_cast<int>(m / static_cast<size_t>(ci.ranks));
    }
    filled = static_cast<int64_t>(c);
  };
  for (size_t c = 0; c < p.collectives.size(); ++c) {
    const CollectiveInfo& ci = p.collectives[c];
    const std::string what = "invalid Program: collective " + std::to_string(c) + ": ";
    if (ci.op >= p.ops.size()) throw InvalidProgram(what + "op " + OutOf(ci.op, p.ops.size()));
    if (!ci.members.empty()) {
      if (ci.ranks < 1 || ci.groups < 1 ||
          ci.members.size() != static_cast<size_t>(ci.ranks) * static_cast<size_t>(ci.groups))
        throw InvalidProgram(what + std::to_string(ci.members.size()) + " members for " +
                             std::to_string(ci.groups) + " x " + std::to_string(ci.ranks) + " ranks");
      for (int core : ci.members)
        if (core < 0 || core >= p.num_cores)
          throw InvalidProgram(what + "member core " + OutOf(core, p.num_cores));
      fill(c);  // distinct members
    }
  }
  const FuncData& f = p.func;
  if (!f.collectives.empty() && f.collectives.size() != p.collectives.size())
    throw InvalidProgram("invalid Program: " + std::to_string(f.collectives.size()) +
                         " functional collectives for " + std::to_string(p.collectives.size()) +
                         " collectives");
  // Program::collective(i), walked in id order along the runs instead of searched per task.
  const std::vector<TransferCollectiveRun>& runs = p.collective_runs();
  size_t next_run = 0;
  int32_t run_collective = -1;
  for (size_t i = 0; i < n; ++i) {
    while (next_run < runs.size() && runs[next_run].first_task <= i)
      run_collective = runs[next_run++].collective;
    const TaskRecord& r = p.records()[i];
    if (r.core < 0 || r.core >= p.num_cores) Bad(i, "core " + OutOf(r.core, p.num_cores));
    if (r.op >= p.ops.size()) Bad(i, "op " + OutOf(r.op, p.ops.size()));
    for (uint32_t d : p.deps(i))
      if (d >= i) Bad(i, "dep " + std::to_string(d) + " is not an earlier task");
    switch (r.kind) {
      case TaskKind::kCompute: {
        const int32_t fo = p.func_op(i);
        if (fo >= 0 && static_cast<size_t>(fo) >= f.ops.size()) Bad(i, "func op " + OutOf(fo, f.ops.size()));
        break;
      }
      case TaskKind::kTransfer: {
        const TransferShape& x = p.transfer(i);
        const int32_t coll = run_collective;
        if (x.dst_core < 0 || x.dst_core >= p.num_cores) Bad(i, "dst_core " + OutOf(x.dst_core, p.num_cores));
        if (coll < -1 || coll >= static_cast<int32_t>(p.collectives.size()))
          Bad(i, "collective " + std::to_string(coll) + " not in [-1, " +
                     std::to_string(p.collectives.size()) + ")");
        if (coll >= 0) {
          const CollectiveInfo& ci = p.collectives[coll];
          if (!ci.members.empty()) {
            if (filled != coll) fill(static_cast<size_t>(coll));  // transfers come collective by collective
            const int g = group_of[r.core];
            if (g < 0 || g != group_of[x.dst_core])
              Bad(i, "transfer " + std::to_string(r.core) + "->" + std::to_string(x.dst_core) +
                         " leaves the member groups of collective " + std::to_string(coll));
          }
        }
        break;
      }
      case TaskKind::kMemory: {
        const MemoryDetail& m = p.memory(i);
        if (m.channel < 0 || m.channel >= p.num_channels)
          Bad(i, "channel " + OutOf(m.channel, p.num_channels));
        break;
      }
      default:
        Bad(i, "kind " + std::to_string(static_cast<int>(r.kind)) + " unknown");
    }
  }
}

void VerifyFits(const Program& p, int num_cores, int num_channels) {
  if (p.num_cores > num_cores || (p.num_channels > num_channels && p.num_channels > 0)) {
    // A Program made for more cores or channels than the chip has may still fit when its
    // tasks use fewer: check the tasks themselves.
    for (size_t i = 0; i < p.num_tasks(); ++i) {
      const TaskRecord& r = p.records()[i];
      if (r.core >= num_cores) Bad(i, "core " + OutOf(r.core, num_cores) + " of the chip");
      if (r.kind == TaskKind::kTransfer && p.transfer(i).dst_core >= num_cores)
        Bad(i, "dst_core " + OutOf(p.transfer(i).dst_core, num_cores) + " of the chip");
      if (r.kind == TaskKind::kMemory && p.memory(i).channel >= num_channels)
        Bad(i, "channel " + OutOf(p.memory(i).channel, num_channels) + " of the chip");
    }
  }
}

// ---- ProgramBuilder.

namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h = (h ^ v) * 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 29);
}
uint64_t Bits(double d) { return std::bit_cast<uint64_t>(d); }

uint64_t HashOf(const ComputeShape& s) {
  uint64_t h = static_cast<uint64_t>(s.op_kind) + 1;
  for (uint64_t v : {s.batch, s.m, s.n, s.k, Bits(s.flops), Bits(s.vector_ops), s.bytes}) h = Mix(h, v);
  return h;
}
bool Same(const ComputeShape& a, const ComputeShape& b) {
  return a.op_kind == b.op_kind && a.batch == b.batch && a.m == b.m && a.n == b.n && a.k == b.k &&
         Bits(a.flops) == Bits(b.flops) && Bits(a.vector_ops) == Bits(b.vector_ops) && a.bytes == b.bytes;
}
uint64_t HashOf(const TransferShape& x) {
  uint64_t h = x.reduce ? 1 : 2;
  for (uint64_t v :
       {x.bytes, x.offset, x.dst_offset, Bits(x.in_switch_gbps), uint64_t{static_cast<uint32_t>(x.dst_core)}})
    h = Mix(h, v);
  return h;
}
bool Same(const TransferShape& a, const TransferShape& b) {
  return a.bytes == b.bytes && a.offset == b.offset && a.dst_offset == b.dst_offset &&
         Bits(a.in_switch_gbps) == Bits(b.in_switch_gbps) && a.dst_core == b.dst_core && a.reduce == b.reduce;
}
uint64_t HashOf(const MemoryDetail& m) {
  return Mix(Mix(m.bytes, static_cast<uint32_t>(m.channel)), m.write ? 1 : 2);
}
bool Same(const MemoryDetail& a, const MemoryDetail& b) {
  return a.bytes == b.bytes && a.channel == b.channel && a.write == b.write;
}

}  // namespace

void ProgramBuilder::Interner::Grow(size_t entries) {
  if (2 * entries <= slots.size()) return;
  size_t size = std::max<size_t>(64, 2 * slots.size());
  while (2 * entries > size) size *= 2;
  // Rehash every index by its stored hash.
  std::vector<uint64_t> old(size, 0);
  old.swap(slots);
  const size_t mask = slots.size() - 1;
  for (uint64_t e : old) {
    if ((e & 0xffffffffu) == 0) continue;
    size_t k = static_cast<size_t>(e >> 32) & mask;
    while (slots[k] != 0) k = (k + 1) & mask;
    slots[k] = e;
  }
}

namespace {

uint64_t TagOf(uint64_t h) { return (h ^ (h >> 32)) & 0xffffffffu; }

// The index of `v` (hash tag `tag`) in `values`, appended when new, probing `slots` (room
// for one more entry).
template <class T>
uint32_t Probe(const T& v, uint64_t tag, std::vector<uint64_t>* slots, size_t* used, std::vector<T>* values) {
  const size_t mask = slots->size() - 1;
  for (size_t k = static_cast<size_t>(tag) & mask;; k = (k + 1) & mask) {
    const uint64_t e = (*slots)[k];
    if (e == 0) {
      values->push_back(v);
      (*slots)[k] = (tag << 32) | values->size();
      ++*used;
      return static_cast<uint32_t>(values->size() - 1);
    }
    if ((e >> 32) == tag && Same((*values)[(e & 0xffffffffu) - 1], v))
      return static_cast<uint32_t>((e & 0xffffffffu) - 1);
  }
}

}  // namespace

template <class T>
uint32_t ProgramBuilder::Interner::Intern(const T& v, std::vector<T>* values) {
  Grow(used + 1);
  return Probe(v, TagOf(HashOf(v)), &slots, &used, values);
}

template <class T>
void ProgramBuilder::Interner::InternAll(std::span<const T> vs, std::vector<T>* values,
                                         std::vector<uint32_t>* out) {
  Grow(used + vs.size());
  const size_t mask = slots.size() - 1;
  std::vector<uint64_t> tags(vs.size());
  for (size_t i = 0; i < vs.size(); ++i) tags[i] = TagOf(HashOf(vs[i]));
  constexpr size_t kAhead = 16;  // probes in flight
  for (size_t i = 0; i < vs.size(); ++i) {
    if (i + kAhead < vs.size()) __builtin_prefetch(&slots[static_cast<size_t>(tags[i + kAhead]) & mask]);
    out->push_back(Probe(vs[i], tags[i], &slots, &used, values));
  }
}

ProgramBuilder::ProgramBuilder(int num_cores, int num_channels) {
  p_.num_cores = num_cores;
  p_.num_channels = num_channels;
}

void ProgramBuilder::ReserveMore(const Fill& since, size_t more) {
  const Fill now = fill();
  const size_t tasks = now.tasks + more * (now.tasks - since.tasks);
  p_.records_.reserve(tasks);
  p_.dep_begin_.reserve(tasks + 1);
  if (with_func_) p_.func_of_.reserve(tasks);
  p_.deps_.reserve(now.deps + more * (now.deps - since.deps));
}

TaskId ProgramBuilder::Add(const Task& t, std::span<const TaskId> deps) {
  switch (t.kind) {
    case TaskKind::kCompute: {
      TaskRecord r;
      r.kind = t.kind;
      r.core = t.core;
      r.op = t.op;
      r.detail = shapes_.Intern(
          ComputeShape{t.op_kind, t.batch, t.m, t.n, t.k, t.flops, t.vector_ops, t.bytes}, &p_.shapes_);
      return Append(r, t.func, deps);
    }
    case TaskKind::kTransfer:
      return AddTransfer(t.core, t.op, t.coll_step,
                         InternTransfer(TransferShape{t.bytes, t.offset, t.dst_offset, t.in_switch_gbps,
                                                      t.dst_core, t.reduce}),
                         t.collective, deps);
    case TaskKind::kMemory:
      break;
  }
  TaskRecord r;
  r.kind = t.kind;
  r.core = t.core;
  r.op = t.op;
  r.detail = memories_.Intern(MemoryDetail{t.bytes, t.channel, t.write}, &p_.memories_);
  return Append(r, -1, deps);
}

uint32_t ProgramBuilder::InternTransfer(const TransferShape& x) {
  return transfers_.Intern(x, &p_.transfer_shapes_);
}

void ProgramBuilder::InternTransfers(std::span<const TransferShape> xs, std::vector<uint32_t>* out) {
  transfers_.InternAll(xs, &p_.transfer_shapes_, out);
}

TaskId ProgramBuilder::AddTransfer(CoreId core, OpId op, uint16_t coll_step, uint32_t shape,
                                   int32_t collective, std::span<const TaskId> deps) {
  if (shape >= p_.transfer_shapes_.size())
    throw std::logic_error("ProgramBuilder::AddTransfer: shape " + OutOf(shape, p_.transfer_shapes_.size()));
  TaskRecord r;
  r.kind = TaskKind::kTransfer;
  r.coll_step = coll_step;
  r.core = core;
  r.op = op;
  r.detail = shape;
  const TaskId id = Append(r, -1, deps);
  if (p_.runs_.empty() || p_.runs_.back().collective != collective)
    p_.runs_.push_back(TransferCollectiveRun{static_cast<uint32_t>(id), collective});
  return id;
}

TaskId ProgramBuilder::Append(const TaskRecord& r, int32_t func, std::span<const TaskId> deps) {
  const size_t id = p_.records_.size();
  if (id >= UINT32_MAX) throw InvalidProgram("invalid Program: more than 2^32 - 1 tasks");
  p_.records_.push_back(r);
  // Functional op indices: none until a task has one, then one per task (earlier ones -1).
  if (func >= 0 && !with_func_) {
    p_.func_of_.assign(id, -1);
    with_func_ = true;
  }
  if (with_func_) p_.func_of_.push_back(func);
  if (p_.deps_.size() + deps.size() >= UINT32_MAX)
    throw InvalidProgram("invalid Program: more than 2^32 - 1 deps");
  p_.deps_.insert(p_.deps_.end(), deps.begin(), deps.end());
  p_.dep_begin_.push_back(static_cast<uint32_t>(p_.deps_.size()));
  return TaskId(static_cast<uint32_t>(id));
}

Program ProgramBuilder::Build() {
  Verify(p_);
  // The arrays grew by doubling. A small one gives its spare room back (it sits in malloc's
  // heap, where that room may be memory used before); a large one keeps it: its spare pages
  // were never written, so they are not resident, and copying the array would write (and
  // fault in) as many new pages as it holds (wafer-32x32-qwen3-32b: 65 MB).
  auto fit = [](auto& v) {
    if (v.capacity() * sizeof(v[0]) < kShrinkBelowBytes) v.shrink_to_fit();
  };
  fit(p_.records_);
  fit(p_.dep_begin_);
  fit(p_.deps_);
  fit(p_.runs_);
  fit(p_.shapes_);
  fit(p_.transfer_shapes_);
  fit(p_.memories_);
  fit(p_.func_of_);
  // Where collective(i) starts looking: the last run starting at or before each block.
  const size_t blocks = (p_.records_.size() >> Program::kRunBlockBits) + 1;
  p_.run_of_block_.assign(p_.runs_.empty() ? 0 : blocks, 0);
  for (size_t b = 0, r = 0; b < p_.run_of_block_.size(); ++b) {
    const size_t first = b << Program::kRunBlockBits;
    while (r + 1 < p_.runs_.size() && p_.runs_[r + 1].first_task <= first) ++r;
    p_.run_of_block_[b] = static_cast<uint32_t>(r);
  }
  Program out = std::move(p_);
  p_ = Program();
  p_.num_cores = out.num_cores;
  p_.num_channels = out.num_channels;
  with_func_ = false;
  shapes_.Clear();
  transfers_.Clear();
  memories_.Clear();
  return out;
}

}  // namespace tpsim::mapping
