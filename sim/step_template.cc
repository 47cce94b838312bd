#include "sim/step_template.h"

#include <algorithm>
#include <tuple>

#include "mapping/cost.h"
#include "mapping/mapping.h"
#include "sim/analytical/analytical.h"

namespace tpsim::sim {

namespace {

using mapping::ComputeShape;
using mapping::Program;
using mapping::TaskKind;

bool SameShape(const ComputeShape& a, const ComputeShape& b) {
  return a.op_kind == b.op_kind && a.batch == b.batch && a.m == b.m && a.n == b.n && a.k == b.k &&
         a.flops == b.flops && a.vector_ops == b.vector_ops && a.bytes == b.bytes;
}

bool SameTransfer(const mapping::TransferShape& x, const mapping::TransferShape& y) {
  return x.bytes == y.bytes && x.offset == y.offset && x.dst_offset == y.dst_offset &&
         x.in_switch_gbps == y.in_switch_gbps && x.dst_core == y.dst_core && x.reduce == y.reduce;
}

// The segment of a task: 0 for the prefill, s for decode step s; -1 for anything else.
int64_t SegmentOf(const Program& p, size_t i) {
  const mapping::OpRef& ref = p.ops[p.op(i)].ref;
  if (ref.phase == mapping::Phase::kPrefill) return 0;
  if (ref.phase == mapping::Phase::kDecode) return int64_t{ref.step} + 1;
  return -1;
}

int32_t CollectiveBase(const Program& p, size_t a0, size_t a1) {
  int32_t base = -1;
  for (size_t i = a0; i < a1; ++i)
    if (p.kind(i) == TaskKind::kTransfer && p.collective(i) >= 0)
      base = base < 0 ? p.collective(i) : std::min(base, p.collective(i));
  return base;
}

}  // namespace

StepTemplate::StepTemplate(const Program& step, const arch::Chip& chip, uint64_t d, uint64_t hd)
    : p_(step), chip_(chip), d_(d), hd_(hd), ctx_(step.num_tasks(), Ctx::kNone), pairs_(IndexOpCores(step)) {}

StepTemplate::~StepTemplate() = default;

ComputeShape StepTemplate::ShapeAt(size_t i, uint64_t ctx) const {
  const ComputeShape& sh = p_.shape(i);
  switch (ctx_[i]) {
    case Ctx::kScores:
      return mapping::AttentionSpanShapes(sh.batch, sh.m, ctx, hd_, d_).scores;
    case Ctx::kSoftmax:
      return mapping::AttentionSpanShapes(sh.m, 1, ctx, hd_, d_).softmax;
    case Ctx::kPv:
      return mapping::AttentionSpanShapes(sh.batch, sh.m, ctx, hd_, d_).pv;
    default:
      return sh;
  }
}

// Tasks [a0, a1) of `a` are the template's at context `ctx`: the same tasks, deps inside
// the step, ops (names, partitions, spills; flops and bytes from the shapes) and collectives.
bool StepTemplate::SameStep(const Program& a, size_t a0, size_t a1, uint64_t ctx, std::string* why) const {
  auto bad = [&](const std::string& what) {
    *why = what;
    return false;
  };
  const size_t n = p_.num_tasks();
  if (a1 - a0 != n) return bad("decode steps have different numbers of tasks");
  if (n == 0) return true;
  if (a.op(a0) < p_.op(0)) return bad("decode steps have different ops");
  const uint32_t op0 = a.op(a0) - p_.op(0);  // the step's first op (its input has no task)
  if (op0 + p_.ops.size() > a.ops.size()) return bad("decode steps have different ops");
  const int32_t ca = CollectiveBase(a, a0, a1), cp = CollectiveBase(p_, 0, n);
  std::vector<double> flops(p_.ops.size(), 0);
  std::vector<uint64_t> bytes(p_.ops.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    const size_t j = a0 + i;
    if (a.kind(j) != p_.kind(i) || a.core(j) != p_.core(i) || a.op(j) != op0 + p_.op(i) ||
        a.records()[j].coll_step != p_.records()[i].coll_step)
      return bad("decode steps differ in task " + std::to_string(i));
    switch (p_.kind(i)) {
      case TaskKind::kCompute: {
        const ComputeShape want = ShapeAt(i, ctx);
        if (!SameShape(a.shape(j), want))
          return bad("decode steps differ in compute task " + std::to_string(i));
        flops[p_.op(i)] += want.flops + want.vector_ops;
        bytes[p_.op(i)] += want.bytes;
        break;
      }
      case TaskKind::kTransfer: {
        if (!SameTransfer(a.transfer(j), p_.transfer(i)))
          return bad("decode steps differ in transfer " + std::to_string(i));
        const int32_t cx = a.collective(j), cy = p_.collective(i);
        if ((cx < 0) != (cy < 0) || (cx >= 0 && cx - ca != cy - cp))
          return bad("decode steps differ in the collective of transfer " + std::to_string(i));
        if (cx >= 0) {
          const mapping::CollectiveInfo &u = a.collectives[cx], &v = p_.collectives[cy];
          if (u.kind != v.kind || u.bytes != v.bytes || u.ranks != v.ranks || u.groups != v.groups ||
              u.members != v.members || u.op - op0 != v.op)
            return bad("decode steps differ in collective " + std::to_string(cy));
        }
        break;
      }
      case TaskKind::kMemory: {
        const mapping::MemoryDetail &x = a.memory(j), &y = p_.memory(i);
        if (x.bytes != MemoryBytesAt(i, ctx) || x.channel != y.channel || x.write != y.write)
          return bad("decode steps differ in memory task " + std::to_string(i) + " (" +
                     p_.ops[p_.op(i)].ref.op + ": " + std::to_string(y.bytes) + " B on channel " +
                     std::to_string(y.channel) + " against " + std::to_string(x.bytes) + " B on channel " +
                     std::to_string(x.channel) + ")");
        break;
      }
    }
    const auto da = a.deps(j), dp = p_.deps(i);
    size_t k = 0;
    for (uint32_t d : da) {
      if (d < a0) continue;  // a dep on the step before (the gate checks those)
      if (k >= dp.size() || d - a0 != dp[k])
        return bad("decode steps differ in the deps of task " + std::to_string(i));
      ++k;
    }
    if (k != dp.size()) return bad("decode steps differ in the deps of task " + std::to_string(i));
  }
  for (size_t o = 0; o < p_.ops.size(); ++o) {
    const mapping::OpInfo &x = a.ops[op0 + o], &y = p_.ops[o];
    if (x.ref.phase != y.ref.phase || x.ref.layer != y.ref.layer || x.ref.op != y.ref.op ||
        x.ref.partition != y.ref.partition || x.ref.note != y.ref.note ||
        x.spilled_bytes != OpSpilledAt(o, ctx))
      return bad("decode steps differ in op " + y.ref.op);
    if (x.flops != flops[o] || x.bytes != bytes[o] + other_bytes_[o])
      return bad("op " + y.ref.op + ": flops or bytes do not follow from its tasks");
  }
  return true;
}

bool StepTemplate::MatchStep(const Program& a, size_t a0, size_t a1, uint32_t k, std::string* why) const {
  return SameStep(a, a0, a1, ContextOf(k), why);
}

bool StepTemplate::Without(const StepTemplate& before, std::vector<uint8_t>* masked,
                           std::vector<uint32_t>* b_of_a, std::string* why) const {
  auto bad = [&](const std::string& what) {
    *why = "the plan changes at decode step " + std::to_string(first_) + ": " + what;
    return false;
  };
  const Program& a = before.p_;
  const size_t n = p_.num_tasks(), na = a.num_tasks();
  const uint64_t ctx = before.ctx_first_;  // before's template's context
  if (a.ops.size() != p_.ops.size() || na == 0 || na >= n) return bad("other ops or no fewer tasks");
  const int64_t op0 = int64_t{a.op(0)} - int64_t{p_.op(0)};
  masked->assign(n, 0);
  b_of_a->assign(na, 0);
  std::vector<int64_t> a_of_b(n, -1);
  size_t j = 0;
  for (size_t i = 0; i < n; ++i) {
    bool same = j < na && a.kind(j) == p_.kind(i) && a.core(j) == p_.core(i) &&
                int64_t{a.op(j)} - int64_t{p_.op(i)} == op0 &&
                a.records()[j].coll_step == p_.records()[i].coll_step;
    if (same) {
      switch (p_.kind(i)) {
        case TaskKind::kCompute:
          same = SameShape(before.ShapeAt(j, ctx), ShapeAt(i, ctx));
          break;
        case TaskKind::kTransfer:
          same =
              SameTransfer(a.transfer(j), p_.transfer(i)) && (a.collective(j) < 0) == (p_.collective(i) < 0);
          break;
        case TaskKind::kMemory:
          same = before.MemoryBytesAt(j, ctx) == MemoryBytesAt(i, ctx) &&
                 a.memory(j).channel == p_.memory(i).channel && a.memory(j).write == p_.memory(i).write;
          break;
      }
    }
    if (same) {
      (*b_of_a)[j] = static_cast<uint32_t>(i);
      a_of_b[i] = static_cast<int64_t>(j++);
      continue;
    }
    // A task of the steps from `from` on only: a memory task that follows the context (its
    // bytes, duration and channel time each step's own), so that a step without it changes
    // only what that task adds.
    if (p_.kind(i) != TaskKind::kMemory || ctx_[i] != Ctx::kMemory)
      return bad("task " + std::to_string(i) +
                 " is not in the steps before it, nor a memory task that grows with "
                 "the context");
    (*masked)[i] = 1;
  }
  if (j != na) return bad("the steps before it have tasks the later ones lack");
  // The deps among the common tasks are the same.
  std::vector<uint32_t> want;
  for (size_t i = 0; i < n; ++i) {
    if ((*masked)[i]) continue;
    want.clear();
    for (uint32_t d : p_.deps(i))
      if (!(*masked)[d]) want.push_back(static_cast<uint32_t>(a_of_b[d]));
    const auto have = a.deps(static_cast<size_t>(a_of_b[i]));
    if (!std::equal(want.begin(), want.end(), have.begin(), have.end()))
      return bad("the deps of task " + std::to_string(i) + " differ from the steps before it");
    if (want.empty() && !p_.deps(i).empty())
      return bad("task " + std::to_string(i) + " waits only on spills");
  }
  return true;
}

Ps StepTemplate::DurationAt(size_t i, uint32_t k) const {
  return mapping::KernelTime(chip_, p_, ShapeAt(i, ContextOf(k)));
}

void StepTemplate::CostsAt(uint32_t k, std::span<Ps> duration, std::span<Ps> busy,
                           std::span<const uint8_t> skip) const {
  const uint64_t ctx = ContextOf(k);
  std::vector<std::pair<ComputeShape, Ps>> kernels;
  std::vector<std::pair<std::tuple<int, int, uint64_t, bool>, std::pair<Ps, Ps>>> reads;
  for (uint32_t i : ctx_tasks_) {
    if (!skip.empty() && skip[i]) continue;
    if (p_.kind(i) == TaskKind::kMemory) {
      const mapping::MemoryDetail& m = p_.memory(i);
      const std::tuple<int, int, uint64_t, bool> key{p_.core(i), m.channel, MemoryBytesAt(i, ctx), m.write};
      auto it = std::find_if(reads.begin(), reads.end(), [&](const auto& r) { return r.first == key; });
      if (it == reads.end()) {
        reads.push_back({key,
                         {mapping::MemoryTime(chip_, p_.core(i), m.channel, std::get<2>(key), m.write),
                          mapping::ChannelBusyTime(chip_, m.channel, std::get<2>(key))}});
        it = reads.end() - 1;
      }
      duration[i] = it->second.first;
      busy[i] = it->second.second;
      continue;
    }
    const ComputeShape sh = ShapeAt(i, ctx);
    auto it =
        std::find_if(kernels.begin(), kernels.end(), [&](const auto& c) { return SameShape(c.first, sh); });
    if (it == kernels.end()) {
      kernels.emplace_back(sh, mapping::KernelTime(chip_, p_, sh));
      it = kernels.end() - 1;
    }
    duration[i] = it->second;
  }
}

uint64_t StepTemplate::MemoryBytesAt(size_t i, uint64_t ctx) const {
  return ctx_[i] == Ctx::kMemory
             ? static_cast<uint64_t>(per_token_[i] * static_cast<int64_t>(ctx) + at_zero_[i])
             : p_.memory(i).bytes;
}

uint64_t StepTemplate::OpSpilledAt(size_t o, uint64_t ctx) const {
  // The template's plus so many bytes per token more (modulo 2^64: exact for the head's
  // contexts before the template's too).
  if (o >= op_spill_per_token_.size()) return p_.ops[o].spilled_bytes;
  return p_.ops[o].spilled_bytes + static_cast<uint64_t>(op_spill_per_token_[o]) * (ctx - ctx_first_);
}

uint64_t StepTemplate::SpilledOver(uint32_t k0, uint32_t k1) const {
  if (k1 < k0) return 0;
  // Steps k0 .. k1 at contexts c0 .. c1 (c0 >= the template's): count x the template's spill
  // plus the tokens past the template's context, summed, per token.
  const uint64_t count = uint64_t{k1} - k0 + 1, c0 = ContextOf(k0) - ctx_first_,
                 c1 = ContextOf(k1) - ctx_first_;
  const uint64_t tokens = (c0 + c1) % 2 == 0 ? (c0 + c1) / 2 * count : count / 2 * (c0 + c1);
  return p_.spilled_bytes * count + static_cast<uint64_t>(spill_per_token_) * tokens;
}

bool StepTemplate::Classify(const Program& last, uint32_t first, uint32_t steps, std::string* why) {
  auto bad = [&](const std::string& what) {
    *why = what;
    return false;
  };
  first_ = first;
  const size_t n = p_.num_tasks();
  if (n == 0 || last.num_tasks() != n) {
    // Most often a memory plan that changes with the context: attention's data outgrows the
    // SRAM from some step on, and that step and the later ones spill it (one template per plan
    // is not built).
    return bad("decode steps have different numbers of tasks: " + std::to_string(n) + " in decode step " +
               std::to_string(first) + " (" + std::to_string(p_.spilled_bytes) + " B spilled), " +
               std::to_string(last.num_tasks()) + " in decode step " + std::to_string(steps) + " (" +
               std::to_string(last.spilled_bytes) + " B spilled)");
  }
  if (last.kv_location != p_.kv_location || last.weights_location != p_.weights_location)
    return bad("the memory plan differs between decode steps");
  // The ops' bytes that do not come from compute tasks (none today), from the template.
  other_bytes_.assign(p_.ops.size(), 0);
  {
    std::vector<uint64_t> compute(p_.ops.size(), 0);
    for (size_t i = 0; i < n; ++i)
      if (p_.kind(i) == TaskKind::kCompute) compute[p_.op(i)] += p_.shape(i).bytes;
    for (size_t o = 0; o < p_.ops.size(); ++o) {
      if (p_.ops[o].bytes < compute[o]) return bad("op bytes below its tasks'");
      other_bytes_[o] = p_.ops[o].bytes - compute[o];
    }
  }
  // Attention tasks: the compute tasks whose shapes differ between the template and the
  // last step, each scores, softmax or PV of AttentionSpanShapes at both contexts.
  bool have_ctx = false;
  uint64_t ctx_last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (p_.kind(i) != TaskKind::kCompute || last.kind(i) != TaskKind::kCompute) continue;
    const ComputeShape &x = p_.shape(i), &y = last.shape(i);
    if (SameShape(x, y)) continue;
    bool found = false;
    for (Ctx c : {Ctx::kScores, Ctx::kSoftmax, Ctx::kPv}) {
      const uint64_t c0 = c == Ctx::kPv ? x.k : x.n, c1 = c == Ctx::kPv ? y.k : y.n;
      ctx_[i] = c;
      if (!SameShape(ShapeAt(i, c0), x) || !SameShape(ShapeAt(i, c1), y)) continue;
      if (have_ctx && (c0 != ctx_first_ || c1 != ctx_last)) continue;
      ctx_first_ = c0, ctx_last = c1, have_ctx = found = true;
      break;
    }
    if (!found) {
      ctx_[i] = Ctx::kNone;
      return bad("compute task " + std::to_string(i) + " changes between decode steps beyond attention");
    }
    ctx_tasks_.push_back(static_cast<uint32_t>(i));
  }
  if (have_ctx && (ctx_last < ctx_first_ || ctx_last - ctx_first_ != steps - first))
    return bad("the attention context does not grow by one token per step");
  if (!have_ctx) ctx_first_ = 0;
  // Memory tasks whose bytes differ between the template and the last step: KV reads from
  // DRAM (a fixed number of bytes per token of the context) and attention's spills (its own
  // data, affine in the context, less the SRAM left: negative at context 0), each on the
  // same channel, the same way. Both are affine in the context with a whole number of bytes
  // per token; the steps between are checked at the head's (MatchHead) and follow from the
  // lowering's formulas (mapping/attention.cc, mapping::SramTimeline::BeforeCompute).
  per_token_.assign(n, 0);
  at_zero_.assign(n, 0);
  const int64_t dc = static_cast<int64_t>(ctx_last) - static_cast<int64_t>(ctx_first_);
  auto affine = [&](uint64_t x, uint64_t y, int64_t* per, int64_t* zero) {
    constexpr uint64_t kMax = uint64_t{1} << 62;  // int64 with room for per x ctx
    if (!have_ctx || dc <= 0 || x >= kMax || y >= kMax || ctx_last >= kMax / (y + 1)) return false;
    const int64_t dy = static_cast<int64_t>(y) - static_cast<int64_t>(x);
    if (dy % dc != 0) return false;
    *per = dy / dc;
    *zero = static_cast<int64_t>(x) - *per * static_cast<int64_t>(ctx_first_);
    return true;
  };
  for (size_t i = 0; i < n; ++i) {
    if (p_.kind(i) != TaskKind::kMemory || last.kind(i) != TaskKind::kMemory) continue;
    const mapping::MemoryDetail &x = p_.memory(i), &y = last.memory(i);
    if (x.bytes == y.bytes) continue;
    int64_t per = 0, zero = 0;
    if (!affine(x.bytes, y.bytes, &per, &zero) || per <= 0 || x.channel != y.channel || x.write != y.write)
      return bad("memory task " + std::to_string(i) + " (" + p_.ops[p_.op(i)].ref.op +
                 ") changes between decode steps beyond a KV read or a spill that grows with the context: " +
                 std::to_string(x.bytes) + " B, then " + std::to_string(y.bytes) + " B");
    ctx_[i] = Ctx::kMemory;
    per_token_[i] = per;
    at_zero_[i] = zero;
    ctx_tasks_.push_back(static_cast<uint32_t>(i));
    context_memory_ = true;
  }
  // The ops' spilled bytes (and the step's) follow the context the same way.
  op_spill_per_token_.assign(p_.ops.size(), 0);
  spill_per_token_ = 0;
  if (last.ops.size() < p_.ops.size() || last.op(0) < p_.op(0) ||
      last.op(0) - p_.op(0) + p_.ops.size() > last.ops.size())
    return bad("decode steps have different ops");
  for (size_t o = 0; o < p_.ops.size(); ++o) {
    const uint64_t x = p_.ops[o].spilled_bytes, y = last.ops[last.op(0) - p_.op(0) + o].spilled_bytes;
    int64_t zero = 0;
    if (x != y && (!affine(x, y, &op_spill_per_token_[o], &zero) || op_spill_per_token_[o] < 0))
      return bad("op " + p_.ops[o].ref.op +
                 "'s spilled bytes change between decode steps beyond the context");
    spill_per_token_ += op_spill_per_token_[o];
  }
  std::sort(ctx_tasks_.begin(), ctx_tasks_.end());
  PrepareWork();
  uint64_t spilled = 0;
  for (const mapping::OpInfo& o : p_.ops) spilled += o.spilled_bytes;
  if (spilled != p_.spilled_bytes) return bad("spilled bytes outside the step's ops");
  return SameStep(last, 0, n, ctx_last, why);
}

bool StepTemplate::MatchHead(const Program& head, std::string* why) {
  auto bad = [&](const std::string& what) {
    *why = what;
    return false;
  };
  const uint32_t first = first_;
  if (head.kv_location != p_.kv_location || head.weights_location != p_.weights_location)
    return bad("the memory plan differs between decode steps");
  // The head: its segments in order, each contiguous; its last two decode steps are the
  // template at their contexts; the gate between them.
  std::vector<size_t> begin(first + 1, head.num_tasks());
  int64_t seg = 0;
  begin[0] = 0;
  for (size_t i = 0; i < head.num_tasks(); ++i) {
    const int64_t s = SegmentOf(head, i);
    if (s < seg || s >= static_cast<int64_t>(first)) return bad("the head's steps are not in order");
    while (seg < s) begin[++seg] = i;
  }
  if (seg != static_cast<int64_t>(first) - 1 || first < 3) return bad("the head lacks decode steps");
  const size_t w0 = begin[first - 2], w1 = begin[first - 1], w2 = head.num_tasks();
  if (!SameStep(head, w1, w2, ctx_first_ - 1, why) || !SameStep(head, w0, w1, ctx_first_ - 2, why))
    return false;
  std::vector<uint8_t> has_dependent(w1 - w0, 0);
  for (size_t i = w0; i < w1; ++i)
    for (uint32_t d : head.deps(i))
      if (d >= w0) has_dependent[d - w0] = 1;
  std::vector<uint32_t> sinks;
  for (size_t i = w0; i < w1; ++i)
    if (!has_dependent[i - w0]) sinks.push_back(static_cast<uint32_t>(i));
  for (size_t i = w1; i < w2; ++i) {
    const auto deps = head.deps(i);
    bool inside = false;
    for (uint32_t d : deps) inside = inside || d >= w1;
    if (inside) continue;
    for (uint32_t d : deps)
      if (d < w0) return bad("a decode step depends on a step before the previous one");
    for (uint32_t sk : sinks)
      if (!std::binary_search(deps.begin(), deps.end(), sk))
        return bad("a decode step's first tasks do not wait for every end of the step before");
  }
  return true;
}

bool StepTemplate::Calibrate(const EngineOutput& out, std::string* why) {
  auto bad = [&](const std::string& what) {
    *why = what;
    return false;
  };
  const size_t n = p_.num_tasks();
  if (out.tasks.size() != n) return bad("the engine timed another Program");
  base_.resize(n);
  for (size_t i = 0; i < n; ++i) base_[i] = out.tasks[i].end_ps - out.tasks[i].start_ps;
  for (uint32_t i : ctx_tasks_)
    if (base_[i] != mapping::KernelTime(chip_, p_, ShapeAt(i, ctx_first_)))
      return bad("an attention task's time is not its shape's");
  // Queues as the analytical engine has them (sim/analytical/analytical.h LinkProgram): a
  // memory task holds its channel, a transfer over links its first link, and flows queue on
  // links (links.h), from their unloaded times.
  const auto& links = chip_.links();
  LinkedProgram q = LinkProgram(p_, chip_);
  if (q.in_switch) return bad("in-switch transfers");
  busy_ = std::move(q.busy);
  first_link_ = std::move(q.first_link);
  links_ = std::make_unique<LinkModel>(std::move(q.model));
  for (uint32_t i : links_->task) base_[i] = q.duration[i];
  reserve_ = std::make_unique<LinkReservation>(*links_, n);
  dispatcher_ = std::make_unique<Dispatcher>(p_, first_link_, static_cast<int>(links.size()));
  t_.times.resize(n);
  dur_ = base_;
  const Ps makespan =
      RunOnLinks(*reserve_, *dispatcher_, TaskCosts{dur_, busy_}, t_.times, &unqueued_).queued;
  if (makespan != out.makespan_ps) return bad("the step's schedule is not the engine's");
  for (size_t i = 0; i < n; ++i)
    if (t_.times[i].start_ps != out.tasks[i].start_ps || t_.times[i].end_ps != out.tasks[i].end_ps)
      return bad("the step's schedule is not the engine's");
  last_key_.clear();
  return true;
}

void StepTemplate::PrepareWork() {
  const size_t n = p_.num_tasks();
  std::vector<uint8_t> op_follows(p_.ops.size(), 0);
  for (uint32_t i : ctx_tasks_)
    if (p_.kind(i) == TaskKind::kCompute) op_follows[p_.op(i)] = 1;
  work_.op_flops.assign(p_.ops.size(), 0);
  work_.op_bytes = other_bytes_;
  work_.op_spilled.clear();
  for (const mapping::OpInfo& o : p_.ops) work_.op_spilled.push_back(o.spilled_bytes);
  work_.compute_flops.clear();
  work_.tasks.clear();
  for (size_t i = 0; i < n; ++i) {
    if (p_.kind(i) != TaskKind::kCompute) continue;
    const uint32_t o = p_.op(i);
    if (op_follows[o])
      work_.tasks.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(work_.compute_flops.size())});
    const ComputeShape& sh = p_.shape(i);
    if (!op_follows[o]) work_.op_flops[o] += sh.flops + sh.vector_ops;
    if (ctx_[i] == Ctx::kNone) work_.op_bytes[o] += sh.bytes;
    work_.compute_flops.push_back(sh.flops);
  }
}

void StepTemplate::WorkAt(uint32_t k, StepTimes* t) const {
  // The sums of the ops without context tasks are the template's (the same additions in the
  // same order); the others are summed again in id order, as the template's were.
  const uint64_t ctx = ContextOf(k);
  t->op_flops = work_.op_flops;
  t->op_bytes = work_.op_bytes;
  t->op_spilled = work_.op_spilled;
  t->compute_flops = work_.compute_flops;
  if (spill_per_token_ != 0)
    for (size_t o = 0; o < t->op_spilled.size(); ++o) t->op_spilled[o] = OpSpilledAt(o, ctx);
  for (const auto& [i, c] : work_.tasks) {
    const uint32_t o = p_.op(i);
    if (ctx_[i] == Ctx::kNone) {
      const ComputeShape& sh = p_.shape(i);
      t->op_flops[o] += sh.flops + sh.vector_ops;
      continue;
    }
    const ComputeShape sh = ShapeAt(i, ctx);
    t->op_flops[o] += sh.flops + sh.vector_ops;
    t->op_bytes[o] += sh.bytes;
    t->compute_flops[c] = sh.flops;
  }
}

const StepTimes& StepTemplate::Time(uint32_t k, std::string* why) {
  const uint64_t ctx = ContextOf(k);
  WorkAt(k, &t_);
  // The attention tasks' durations at this context; the same ones give the same schedule.
  std::vector<Ps> key;
  key.reserve(ctx_tasks_.size());
  for (uint32_t i : ctx_tasks_) key.push_back(mapping::KernelTime(chip_, p_, ShapeAt(i, ctx)));
  if (!last_key_.empty() && key == last_key_ && t_.ok) return t_;
  for (size_t j = 0; j < ctx_tasks_.size(); ++j) dur_[ctx_tasks_[j]] = key[j];
  last_key_ = std::move(key);
  t_.ok = false;
  const LinkedMakespans m = RunOnLinks(*reserve_, *dispatcher_, TaskCosts{dur_, busy_}, t_.times, &unqueued_);
  t_.makespan = m.queued;
  t_.unloaded = m.unloaded;
  t_.link_wait = reserve_->max_wait();
  ++schedules_;
  if (!Reduce(why)) return t_;
  t_.ok = true;
  return t_;
}

// The schedule in t_.times, reduced; false with *why when the step cannot be shifted exactly.
bool StepTemplate::Reduce(std::string* why) {
  auto bad = [&](const std::string& what) {
    *why = what;
    return false;
  };
  const size_t n = p_.num_tasks();
  const std::vector<TaskTime>& t = t_.times;
  // The step's last task is unique and every task ends after the step's start (the
  // critical path then crosses the boundary where the shift puts it).
  size_t best = 0, ties = 0;
  for (size_t i = 0; i < n; ++i) {
    if (t[i].end_ps <= 0) return bad("a decode step's task ends at its start");
    if (t[i].end_ps > t[best].end_ps)
      best = i, ties = 0;
    else if (i != best && t[i].end_ps == t[best].end_ps)
      ++ties;
  }
  if (ties) return bad("two tasks of a decode step end last");
  const size_t ops = p_.ops.size();
  const int cores = chip_.num_cores();
  ReduceOps(p_, t, &t_, pairs_);
  t_.core_compute.assign(cores, 0);
  t_.core_busy.assign(cores, 0);
  t_.channel_queue.assign(chip_.channels().size(), 0);
  std::vector<std::vector<std::pair<Ps, Ps>>> iv(cores);
  for (size_t i = 0; i < n; ++i) {
    const TaskKind k = p_.kind(i);
    if (k == TaskKind::kMemory) {
      Ps ready = 0;
      for (uint32_t d : p_.deps(i)) ready = std::max(ready, t[d].end_ps);
      Ps& q = t_.channel_queue[p_.memory(i).channel];
      q = std::max(q, t[i].start_ps - ready);
    }
    const int c = p_.core(i);
    if (c >= 0 && c < cores) {
      iv[c].emplace_back(t[i].start_ps, t[i].end_ps);
      if (k == TaskKind::kCompute) t_.core_compute[c] += t[i].end_ps - t[i].start_ps;
    }
  }
  for (int c = 0; c < cores; ++c) {
    auto& v = iv[c];
    std::sort(v.begin(), v.end());
    Ps total = 0, cs = 0, ce = std::numeric_limits<Ps>::min();
    for (const auto& [s, e] : v) {
      if (ce == std::numeric_limits<Ps>::min() || s > ce) {
        if (ce != std::numeric_limits<Ps>::min()) total += ce - cs;
        cs = s, ce = e;
      } else {
        ce = std::max(ce, e);
      }
    }
    if (ce != std::numeric_limits<Ps>::min()) total += ce - cs;
    t_.core_busy[c] = total;
  }
  // Layers: each layer's last end against the previous layer's (BuildResult).
  std::map<uint32_t, Ps> layer_end;
  for (size_t o = 0; o < ops; ++o) {
    if (t_.op_all[o].empty()) continue;
    Ps& e = layer_end.try_emplace(p_.ops[o].ref.layer, std::numeric_limits<Ps>::min()).first->second;
    e = std::max(e, t_.op_all[o].last);
  }
  t_.layer_inc.clear();
  Ps baseline = 0;
  for (const auto& [layer, end] : layer_end) {
    t_.layer_inc.emplace_back(layer, std::max<Ps>(0, end - baseline));
    baseline = std::max(baseline, end);
  }
  t_.path = CriticalPath(p_, t);
  return true;
}

}  // namespace tpsim::sim
