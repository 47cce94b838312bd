#include "sim/tlm/run_state.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <map>
#include <sstream>
#include <systemc>
#include <tuple>

#include "mapping/cost.h"
#include "sim/tlm/core.h"

namespace tpsim::sim::tlm_model {

using mapping::Program;
using mapping::TaskKind;

namespace {

// Per record (RunState::RecordAt): whether a memory task's data crosses links.
std::vector<uint8_t> MemoryViaNet(const RunState& st, size_t records) {
  std::vector<uint8_t> via_net(records, 0);
  std::map<std::tuple<int, int, bool>, bool> via;  // (core, channel, write) -> has a path
  for (size_t r = 0; r < records; ++r) {
    const auto [p, i] = st.RecordAt(r);
    if (p->kind(i) != TaskKind::kMemory) continue;
    const mapping::MemoryDetail& m = p->memory(i);
    auto [it, inserted] = via.try_emplace({p->core(i), m.channel, m.write}, false);
    if (inserted) it->second = !st.chip.MemoryPath(p->core(i), m.channel, m.write).empty();
    via_net[r] = it->second;
  }
  return via_net;
}

// The dependents of `p`'s tasks (CSR, in id order; out-of-range deps dropped) and each
// task's deps in range.
void Dependents(const Program& p, std::vector<uint32_t>* begin, std::vector<uint32_t>* dependents,
                std::vector<uint32_t>* unmet) {
  const size_t n = p.num_tasks();
  begin->assign(n + 1, 0);
  unmet->assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    (*unmet)[i] = static_cast<uint32_t>(p.deps(i).size());
    for (uint32_t d : p.deps(i))
      if (d < n) ++(*begin)[d + 1];
  }
  for (size_t i = 0; i < n; ++i) (*begin)[i + 1] += (*begin)[i];
  dependents->resize((*begin)[n]);
  std::vector<uint32_t> fill(begin->begin(), begin->end() - 1);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t d : p.deps(i))
      if (d < n) (*dependents)[fill[d]++] = static_cast<uint32_t>(i);
}

const char* KindName(TaskKind k) {
  switch (k) {
    case TaskKind::kCompute:
      return "compute";
    case TaskKind::kTransfer:
      return "transfer";
    case TaskKind::kMemory:
      return "memory";
  }
  return "?";
}

}  // namespace

RunState::RunState(const Program& p, const arch::Chip& c) : program(p), chip(c) {
  head_tasks_ = total = p.num_tasks();
  times.assign(head_tasks_, TaskTime{});
  done.assign(head_tasks_, 0);
  Dependents(p, &first_dependent, &dependents, &unmet);
  mem_via_net = MemoryViaNet(*this, head_tasks_);
}

RunState::RunState(const StepSource& s, const arch::Chip& c) : program(*s.head), chip(c), source(&s) {
  const Program& T = *s.step;
  head_tasks_ = program.num_tasks();
  step_tasks_ = T.num_tasks();
  const uint32_t HB = s.head_steps, N = s.steps, n = static_cast<uint32_t>(step_tasks_);
  uint32_t back = 0;  // the most steps back a step's task waits
  for (const auto& [off, i] : s.ext) back = std::max(back, off);
  auto refuse = [&](const std::string& why) {
    stream_why = why;
    mem_via_net.assign(head_tasks_ + step_tasks_, 0);
  };
  // Steps before masked_from lack the masked tasks: the head's steps are such steps.
  const bool mask = !s.masked.empty();
  short_index_.assign(n, kNoIndex);
  for (uint32_t i = 0; i < n; ++i)
    if (!mask || (i < s.masked.size() && !s.masked[i])) {
      short_index_[i] = static_cast<uint32_t>(template_of_short_.size());
      template_of_short_.push_back(i);
    }
  if (mask) masked_from_ = std::min(s.masked_from, N + 1);
  back_ = back;
  std::string no;
  if (N <= HB || HB < 2 || s.head_begin.size() != HB + 2) no = "no decode steps after the head";
  if (no.empty() && (back == 0 || back + 2 > HB))
    no = "decode steps wait on " + std::to_string(back) + " steps before";
  if (no.empty() && (head_tasks_ >= (uint64_t{1} << 32) || N >= (uint32_t{1} << 31)))
    no = "too many tasks to name";
  if (no.empty() && mask && (s.masked.size() != n || s.masked_from <= HB))
    no = "the plan changes within the head";
  for (uint32_t k = 2; no.empty() && k <= HB; ++k)
    if (s.head_begin[k + 1] - s.head_begin[k] != template_of_short_.size())
      no = "a head step is not the template";
  for (uint32_t i = 0; no.empty() && i < n; ++i)
    if (T.deps(i).empty() && s.ext_begin[i] == s.ext_begin[i + 1])
      no = "a decode step's task waits on nothing (task " + std::to_string(i) + " of the template)";
  if (!no.empty()) {
    refuse(no);
    return;
  }
  // A ring of slots, more than the steps a task reaches back; it doubles when a step finds its
  // slot taken (Grow).
  const uint64_t slots = std::bit_ceil(uint64_t{back} + 2);
  slot_mask_ = slots - 1;
  slots_.assign(slots, Slot{});
  const uint32_t from = mask ? masked_from_ : HB + 1;  // the first step with every task
  total = head_tasks_ + uint64_t{from - HB - 1} * template_of_short_.size() + uint64_t{N + 1 - from} * n;
  const size_t room = head_tasks_ + slots * step_tasks_;
  times.assign(room, TaskTime{});
  done.assign(room, 0);
  enabler_.assign(room, Ended{});
  step_duration_.assign(slots * step_tasks_, 0);
  step_bytes_.assign(slots * step_tasks_, 0);
  Dependents(program, &first_dependent, &dependents, &unmet);
  unmet.resize(room, 0);
  Dependents(T, &step_dep_begin_, &step_dependents_, &step_unmet_);
  for (uint32_t i = 0; i < n; ++i) step_unmet_[i] += s.ext_begin[i + 1] - s.ext_begin[i];
  mem_via_net = MemoryViaNet(*this, head_tasks_ + step_tasks_);
  memory_of_.assign(records(), 0);
  for (size_t r = 0; r < records(); ++r) {
    const auto [p, i] = RecordAt(r);
    if (p->kind(i) != TaskKind::kMemory) continue;
    memory_of_[r] = static_cast<uint32_t>(r < head_tasks_ ? head_memory_++ : step_memory_++);
  }
  memory_.assign(head_memory_ + slots * step_memory_, MemoryPath{});
  path_kind_.resize(records());
  duration_.assign(records(), 0);
  for (size_t r = 0; r < records(); ++r) {
    const auto [p, i] = RecordAt(r);
    path_kind_[r] = static_cast<uint8_t>(PathKind(*p, i));
    if (p->kind(i) == TaskKind::kCompute) duration_[r] = mapping::KernelTime(chip, *p, p->shape(i));
  }
  at_duration_.assign(step_tasks_, 0);
  at_bytes_.assign(step_tasks_, 0);
  core_last_.assign(static_cast<size_t>(std::max(0, chip.num_cores())), QueueLast{});
  channel_last_.assign(chip.channels().size(), QueueLast{});
  channel_early_.resize(chip.channels().size());
  channel_now_.resize(chip.channels().size());
  next_out_ = HB + 1;
}

Ps RunState::ComputeTime(TaskRef t) const {
  if (!source) return mapping::KernelTime(chip, program, program.shape(IndexOf(t)));
  return InStep(t) && source->context[IndexOf(t)] ? step_duration_[SlotOf(t) - head_tasks_]
                                                  : duration_[Record(t)];
}

uint64_t RunState::UnrolledId(TaskRef t) const {
  if (!InStep(t)) return t;
  // The steps before masked_from have their short count of tasks.
  const uint32_t k = static_cast<uint32_t>(t >> 32);
  return UnrolledStepBegin(head_tasks_, source->head_steps, k, masked_from_, template_of_short_.size(),
                           step_tasks_) +
         (k < masked_from_ ? short_index_[IndexOf(t)] : IndexOf(t));
}

void RunState::Fail(const std::string& why) {
  if (!stream_why.empty()) return;
  stream_why = why;
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  sc_core::sc_stop();
}

void RunState::StopOnOverflow(TaskRef task) {
  time(task).end_ps = std::numeric_limits<Ps>::max();
  if (source) {
    if (!stream_overflow) {
      const uint32_t step =
          InStep(task) ? static_cast<uint32_t>(task >> 32) : SegmentOf(source->head_begin, task);
      stream_overflow = StepOverflow{!InStep(task), InStep(task) ? IndexOf(task) : task, UnrolledId(task),
                                     step, time(task).start_ps};
    }
    return Fail("a time passes the 2^63 ps clock");
  }
  if (overflow_task >= 0) return;  // already stopping on an earlier one
  overflow_task = static_cast<int64_t>(task);
  // sc_stop reports "Simulation stopped by user." as an info of type /OSCI/SystemC on stdout.
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  sc_core::sc_stop();
}

void RunState::Kickoff() {
  for (size_t i = 0; i < head_tasks_; ++i)
    if (unmet[i] == 0) cores[program.core(i)]->Ready(i);
}

void RunState::Issued(TaskRef task, Ps now_ps) {
  time(task).start_ps = now_ps;
  if (!source || !InStep(task)) return;
  Slot& sl = slots_[(task >> 32) & slot_mask_];
  if (!sl.issued) {
    sl.issued = true;
    sl.first_issue = now_ps;
  }
}

void RunState::Served(TaskRef task, Ps start_ps) {
  time(task).start_ps = start_ps;
  if (!source || kind(task) != TaskKind::kMemory) return;
  // A channel's requests in order of start, then id (sim::CriticalPath's queue), linked both
  // ways: each knows the one before it (its end once it ends) and the one after it. The
  // channel takes them in order of start; those of one start (all but the first hold it for
  // no time) come in order of arrival, and each goes to its place by id among them.
  const int ch = ProgramOf(task).memory(IndexOf(task)).channel;
  QueueLast& q = channel_last_[ch];
  std::vector<TaskRef>& now_started = channel_now_[ch];  // started at q.start, by id
  MemoryPath& me = memory_[MemorySlotOf(task)];
  if (q.task != kNone && q.start == start_ps && task < q.task) {
    // Out of id order among the requests started at this time (none of which has ended:
    // StreamComplete): in its place among them.
    const auto at = std::lower_bound(now_started.begin(), now_started.end(), task);
    MemoryPath& after = memory_[MemorySlotOf(*at)];
    me.prev = after.prev;
    if (at != now_started.begin()) {
      memory_[MemorySlotOf(*(at - 1))].next = task;
    } else if (me.prev.task != kNone && me.prev.end == kPending) {
      memory_[MemorySlotOf(me.prev.task)].next = task;
    }
    me.next = *at;
    after.prev = Ended{task, kPending, {}};
    now_started.insert(at, task);
    return;
  }
  if (q.task != kNone) {
    if (q.ended) {
      me.prev = q.at;
    } else {
      memory_[MemorySlotOf(q.task)].next = task;
      me.prev = Ended{q.task, kPending, {}};  // its end comes with it
    }
  }
  if (q.task == kNone || q.start != start_ps) now_started.clear();
  now_started.push_back(task);
  q = QueueLast{task, start_ps, false, {}};
}

void RunState::Started(TaskRef task, Ps now_ps) {
  time(task).start_ps = now_ps;
  if (!source) return;
  // A core's compute tasks run one at a time: the one before has ended.
  QueueLast& q = core_last_[core(task)];
  if (q.task != kNone) {
    if (q.start == now_ps && task < q.task)
      return Fail("two tasks of a core started at one time out of id order");
    // It ended before this one starts: a candidate enabler whatever this one's end.
    if (q.ended) Prefer(&enabler_[SlotOf(task)], q.at);
  }
  q = QueueLast{task, now_ps, false, {}};
}

void RunState::Complete(TaskRef task, Ps now_ps) {
  if (now_ps < 0) {  // the kernel's unsigned clock went past 2^63 ps (a DRAM or network delay)
    StopOnOverflow(task);
    return;
  }
  if (source) return StreamComplete(task, now_ps);
  done[task] = 1;
  times[task].end_ps = now_ps;
  ++completed;
  if (progress && completed % kProgressTasks == 0) (*progress)(completed, total);
  for (uint32_t k = first_dependent[task]; k < first_dependent[task + 1]; ++k) {
    uint32_t j = dependents[k];
    if (--unmet[j] == 0) cores[program.core(j)]->Ready(j);
  }
}

void RunState::Prefer(Ended* best, const Ended& e) {
  if (best->task == kNone || e.end > best->end || (e.end == best->end && e.task < best->task)) *best = e;
}

void RunState::Unblock(const Ended& e, TaskRef j) {
  const size_t sj = SlotOf(j);
  Prefer(&enabler_[sj], e);
  if (--unmet[sj] == 0) cores[core(j)]->Ready(j);
}

void RunState::StreamComplete(TaskRef task, Ps now_ps) {
  if (!stream_why.empty()) return;  // stopping
  const size_t s = SlotOf(task);
  done[s] = 1;
  times[s].end_ps = now_ps;
  ++completed;
  if (progress && completed % kProgressTasks == 0) (*progress)(completed, total);
  // Its critical path: its enabler's (the latest-ending, then lowest-id, of its deps and of its
  // queue's task before it, among those that end no later than it) plus its part after that.
  const TaskKind k = kind(task);
  Ended enabler = enabler_[s];
  MemoryPath* mp = k == TaskKind::kMemory ? &memory_[MemorySlotOf(task)] : nullptr;
  if (mp && mp->prev.end != kPending) Prefer(&enabler, mp->prev);  // ended: no later than now
  const Ended* e = enabler.task != kNone ? &enabler : nullptr;
  Ended me{task, now_ps, e ? e->split : CriticalPathSplit{}};
  const Ps own = PathPart(now_ps, e ? &e->end : nullptr);
  switch (static_cast<TaskKind>(path_kind_[Record(task)])) {
    case TaskKind::kCompute:
      me.split.compute_ps += own;
      break;
    case TaskKind::kTransfer:
      me.split.communication_ps += own;
      break;
    case TaskKind::kMemory:
      me.split.memory_ps += own;
      break;
  }
  if (last_.task == kNone || now_ps > last_.end || (now_ps == last_.end && task < last_.task)) last_ = me;
  if (k == TaskKind::kCompute) {
    QueueLast& q = core_last_[core(task)];
    if (q.task == task) {
      q.ended = true;
      q.at = me;
    }
  } else if (k == TaskKind::kMemory) {
    const int ch = ProgramOf(task).memory(IndexOf(task)).channel;
    QueueLast& q = channel_last_[ch];
    // A request that the channel takes later with the same start may go before it in id order
    // (Served), which needs it not ended.
    if (times[s].start_ps == now_ps) return Fail("a request to a DRAM channel ended at the time it started");
    if (q.task == task) {
      q.ended = true;
      q.at = me;
    }
    // The next request on the channel: ended already (it is among the early ones, and this one
    // must end later than it for sim::CriticalPath's order to hold), or it takes this end.
    std::vector<std::pair<TaskRef, Ps>>& early = channel_early_[ch];
    bool next_ended = false;
    for (size_t x = 0; x < early.size(); ++x) {
      if (early[x].first != task) continue;
      if (early[x].second == now_ps)
        return Fail("two requests to a DRAM channel ended at one time, the later one in its queue first");
      early.erase(early.begin() + static_cast<std::ptrdiff_t>(x));
      next_ended = true;
      break;
    }
    if (!next_ended && mp->next != kNone) memory_[MemorySlotOf(mp->next)].prev = me;
    if (mp->prev.task != kNone && mp->prev.end == kPending) early.emplace_back(mp->prev.task, now_ps);
  }
  if (!InStep(task)) {
    for (uint32_t x = first_dependent[task]; x < first_dependent[task + 1]; ++x) Unblock(me, dependents[x]);
    // A head step's task (the template's) with dependents in the steps after the head.
    const std::vector<size_t>& hb = source->head_begin;
    const uint32_t seg = SegmentOf(hb, task);
    if (seg >= 2) {
      const uint32_t rel = template_of_short_[task - hb[seg]];
      for (uint32_t x = source->ext_dep_begin[rel]; x < source->ext_dep_begin[rel + 1]; ++x) {
        const auto [off, j] = source->ext_dep[x];
        const uint32_t to = seg + off;
        if (to <= source->head_steps || to > source->steps || Lacks(to, j)) continue;
        if (!Ensure(to)) return;
        Unblock(me, uint64_t{to} << 32 | j);
      }
    }
    ++head_ended_;
  } else {
    const uint32_t step = static_cast<uint32_t>(task >> 32), rel = IndexOf(task);
    const uint64_t hi = uint64_t{step} << 32;
    for (uint32_t x = step_dep_begin_[rel]; x < step_dep_begin_[rel + 1]; ++x)
      if (!Lacks(step, step_dependents_[x])) Unblock(me, hi | step_dependents_[x]);
    for (uint32_t x = source->ext_dep_begin[rel]; x < source->ext_dep_begin[rel + 1]; ++x) {
      const auto [off, j] = source->ext_dep[x];
      if (step + off > source->steps) break;  // sorted by steps on
      if (Lacks(step + off, j)) continue;
      if (!Ensure(step + off)) return;
      Unblock(me, uint64_t{step + off} << 32 | j);
    }
    ++slots_[step & slot_mask_].ended;
  }
  HandOut();
}

bool RunState::Ensure(uint32_t k) {
  while (slots_[k & slot_mask_].step != k && slots_[k & slot_mask_].step != 0) {
    if (slots_.size() >= kMaxSlots) {
      Fail("more than " + std::to_string(kMaxSlots) + " decode steps in flight");
      return false;
    }
    Grow();
  }
  Slot& sl = slots_[k & slot_mask_];
  if (sl.step == k) return true;
  sl = Slot{k, 0, false, 0};
  const size_t at = (k & slot_mask_) * step_tasks_, base = head_tasks_ + at;
  std::copy(step_unmet_.begin(), step_unmet_.end(), unmet.begin() + static_cast<std::ptrdiff_t>(base));
  std::fill_n(done.begin() + static_cast<std::ptrdiff_t>(base), step_tasks_, 0);
  std::fill_n(times.begin() + static_cast<std::ptrdiff_t>(base), step_tasks_, TaskTime{});
  std::fill_n(enabler_.begin() + static_cast<std::ptrdiff_t>(base), step_tasks_, Ended{});
  std::fill_n(memory_.begin() + static_cast<std::ptrdiff_t>(head_memory_ + (k & slot_mask_) * step_memory_),
              step_memory_, MemoryPath{});
  if (!Guarded([&] {
        source->at(k, std::span<Ps>(step_duration_).subspan(at, step_tasks_),
                   std::span<uint64_t>(step_bytes_).subspan(at, step_tasks_));
        return true;
      }))
    return false;
  if (k < uint64_t{masked_from_} + back_) {
    // A step that lacks tasks, or waits on one that does: those count as ended (never issued),
    // and no task waits on them.
    const Program& T = *source->step;
    for (uint32_t i = 0; i < step_tasks_; ++i) {
      if (Lacks(k, i)) {
        done[base + i] = 1;
        unmet[base + i] = 0;
        ++sl.ended;
        continue;
      }
      uint32_t u = 0;
      for (uint32_t d : T.deps(i)) u += !Lacks(k, d);
      for (uint32_t x = source->ext_begin[i]; x < source->ext_begin[i + 1]; ++x)
        u += !Lacks(k - source->ext[x].first, source->ext[x].second);
      if (u == 0) {
        Fail("a decode step's task waits only on tasks its step lacks");
        return false;
      }
      unmet[base + i] = u;
    }
  }
  return true;
}

void RunState::Grow() {
  const size_t slots = 2 * slots_.size();
  const uint64_t old_mask = slot_mask_;
  slot_mask_ = slots - 1;
  // Each slot's steps move to their place in the larger ring (steps that did not share a slot
  // in the smaller one do not in this one); the head stays where it is. `n`: entries a step.
  auto move = [&](auto& v, size_t head, size_t n) {
    std::remove_reference_t<decltype(v)> w(head + slots * n);
    std::copy_n(v.begin(), head, w.begin());
    for (const Slot& sl : slots_)
      if (sl.step != 0)
        std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(head + (sl.step & old_mask) * n), n,
                    w.begin() + static_cast<std::ptrdiff_t>(head + (sl.step & slot_mask_) * n));
    v.swap(w);
  };
  move(times, head_tasks_, step_tasks_);
  move(unmet, head_tasks_, step_tasks_);
  move(done, head_tasks_, step_tasks_);
  move(enabler_, head_tasks_, step_tasks_);
  move(memory_, head_memory_, step_memory_);
  move(step_duration_, 0, step_tasks_);
  move(step_bytes_, 0, step_tasks_);
  std::vector<Slot> grown(slots);
  for (const Slot& sl : slots_)
    if (sl.step != 0) grown[sl.step & slot_mask_] = sl;
  slots_.swap(grown);
}

Ps RunState::Horizon(uint32_t k) const {
  Ps h = NowPs();
  for (const Slot& sl : slots_)
    if (sl.step > k && sl.issued) h = std::min(h, sl.first_issue);
  return h;
}

void RunState::HandOut() {
  std::string why;
  if (!head_out_) {
    if (head_ended_ < head_tasks_) return;
    head_out_ = true;
    if (!Guarded([&] { return source->on_head(std::span<const TaskTime>(times.data(), head_tasks_), &why); }))
      return Fail(why);
  }
  while (next_out_ <= source->steps) {
    Slot& sl = slots_[next_out_ & slot_mask_];
    if (sl.step != next_out_ || sl.ended < step_tasks_) return;
    const size_t base = head_tasks_ + (next_out_ & slot_mask_) * step_tasks_;
    if (!Guarded([&] {
          return source->on_step(next_out_, std::span<const TaskTime>(times.data() + base, step_tasks_),
                                 Horizon(next_out_), &why);
        }))
      return Fail(why);
    sl.step = 0;
    ++next_out_;
  }
}

std::string RunState::Stuck() const {
  constexpr int kPerCore = 8;
  std::map<int, std::vector<TaskRef>> stuck;  // by core, ids ascending
  for (size_t i = 0; i < head_tasks_; ++i)
    if (!done[i]) stuck[program.core(i)].push_back(i);
  // Streamed: the steps in their slots, in order (a step not made yet waits on them).
  std::vector<uint32_t> live;
  for (const Slot& sl : slots_)
    if (sl.step != 0) live.push_back(sl.step);
  std::sort(live.begin(), live.end());
  for (uint32_t k : live)
    for (uint32_t i = 0; i < step_tasks_; ++i) {
      const TaskRef t = uint64_t{k} << 32 | i;
      if (!done[SlotOf(t)]) stuck[core(t)].push_back(t);
    }
  // Whether a dep has ended: the head's and the live steps' say; a step handed out has.
  auto ended = [&](TaskRef d) {
    if (!InStep(d)) return d < head_tasks_ && done[d] != 0;
    const uint32_t k = static_cast<uint32_t>(d >> 32);
    if (slots_[k & slot_mask_].step == k) return done[SlotOf(d)] != 0;
    return k < next_out_;
  };
  std::ostringstream os;
  os << "tlm: simulation stalled at " << NowPs() << " ps with " << (total - completed) << " of " << total
     << " tasks not done";
  for (const auto& [core, ids] : stuck) {
    os << "\n  core " << core << ":";
    for (size_t x = 0; x < ids.size() && x < kPerCore; ++x) {
      const TaskRef t = ids[x];
      const Program& p = ProgramOf(t);
      const uint32_t i = IndexOf(t);
      os << "\n    task " << UnrolledId(t) << " " << KindName(p.kind(i)) << " op " << p.op(i);
      if (p.op(i) < p.ops.size()) os << " (" << p.ops[p.op(i)].ref.op << ")";
      os << " waits on";
      const uint64_t hi = t & ~uint64_t{0xffffffff};
      for (uint32_t d : p.deps(i)) {
        if (d >= p.num_tasks()) {
          os << " " << d << " (no such task)";
        } else if (!ended(hi | d)) {
          os << " " << UnrolledId(hi | d);
        }
      }
      if (InStep(t)) {
        const uint32_t k = static_cast<uint32_t>(t >> 32);
        for (uint32_t x2 = source->ext_begin[i]; x2 < source->ext_begin[i + 1]; ++x2) {
          const auto [off, j] = source->ext[x2];
          const uint32_t kd = k - off;
          if (Lacks(kd, j)) continue;
          const TaskRef d =
              kd <= source->head_steps ? source->head_begin[kd] + short_index_[j] : uint64_t{kd} << 32 | j;
          if (!ended(d)) os << " " << UnrolledId(d);
        }
      }
    }
    if (ids.size() > kPerCore) os << "\n    ... and " << ids.size() - kPerCore << " more";
  }
  return os.str();
}

}  // namespace tpsim::sim::tlm_model
