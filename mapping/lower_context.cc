#include "mapping/lower_context.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "mapping/memory_plan.h"

namespace tpsim::mapping {

RoleNames::RoleNames(const llm::LayerGraph& g) {
  for (int r = 0; r < llm::kNumOpRoles; ++r) names_[r] = llm::ToString(static_cast<llm::OpRole>(r));
  for (const llm::Op& op : g.ops) {
    names_[static_cast<int>(op.role)] = op.name;
  }
}

int32_t LowerContext::NewTensor(FuncTensorKind kind, uint64_t rows, uint64_t cols, uint64_t seed,
                                uint32_t init) {
  FuncTensor ft;
  ft.kind = kind;
  ft.rows = static_cast<uint32_t>(rows);
  ft.cols = static_cast<uint32_t>(cols);
  ft.seed = seed;
  ft.init_rows = init;
  tensors.push_back(ft);
  TState st;
  st.ready.resize(p);
  st.replica = replica;
  ts.push_back(std::move(st));
  const int32_t id = static_cast<int32_t>(tensors.size() - 1);
  mem->Created(id, kind);
  return id;
}

OpId LowerContext::NewOp(const std::string& name, const std::string& partition) {
  if (op_share == OpShare::kReplay && shared_pos < shared_ops.size())
    return cur_op = shared_ops[shared_pos++];
  OpInfo info;
  info.ref.phase = phase;
  info.ref.step = step;
  info.ref.layer = layer;
  info.ref.op = name;
  info.ref.partition = partition;
  prog.ops.push_back(std::move(info));
  cur_op = OpId(static_cast<uint32_t>(prog.ops.size() - 1));
  if (op_share == OpShare::kRecord) shared_ops.push_back(cur_op);
  return cur_op;
}

void LowerContext::SortUnique(std::vector<TaskId>* deps) {
  // Mostly sorted already, or two sorted runs (ready lists grow in id order, and a task
  // often waits on two of them): a long pair of runs is merged, anything else sorted.
  const auto mid = std::is_sorted_until(deps->begin(), deps->end());
  if (mid != deps->end()) {
    if (deps->size() > 16 && std::is_sorted(mid, deps->end())) {
      merged.clear();
      std::merge(deps->begin(), mid, mid, deps->end(), std::back_inserter(merged));
      std::copy(merged.begin(), merged.end(), deps->begin());
    } else {
      std::sort(deps->begin(), deps->end());
    }
  }
  deps->erase(std::unique(deps->begin(), deps->end()), deps->end());
}

TaskId LowerContext::AddTask(Task t, std::vector<TaskId> deps) {
  t.op = cur_op;
  SortUnique(&deps);
  return builder.Add(t, deps);
}

TaskId LowerContext::Memory(int rank, uint64_t bytes, bool write, std::vector<TaskId> deps) {
  Task t;
  t.kind = TaskKind::kMemory;
  t.core = CoreId(cores[rank]);
  t.channel = chip.ChannelOf(t.core);
  t.write = write;
  t.bytes = bytes;
  return AddTask(t, std::move(deps));
}

TaskId LowerContext::Compute(int rank, Task t, FuncOp f, std::vector<TaskId> deps, uint64_t transient) {
  const int32_t used[3] = {f.a.tensor, f.b.tensor, f.out.tensor};
  mem->BeforeCompute(rank, t.op_kind, used, transient, &deps);
  f.core = cores[rank];
  t.kind = TaskKind::kCompute;
  t.core = CoreId(cores[rank]);
  if (func) {
    t.func = static_cast<int32_t>(prog.func.ops.size());
    prog.func.ops.push_back(f);
  }
  prog.ops[cur_op].flops += t.flops + t.vector_ops;
  prog.ops[cur_op].bytes += t.bytes;
  const TaskId id = AddTask(t, std::move(deps));
  mem->AfterCompute(rank, id);
  return id;
}

void LowerContext::Vector(int rank, llm::OpKind kind, FuncKind fk, double ops_per_elem, FuncSlice a,
                          FuncSlice b, FuncSlice out, std::vector<TaskId> deps, uint32_t head_dim,
                          uint32_t position_offset) {
  const uint64_t elems = uint64_t{out.r1 - out.r0} * (out.c1 - out.c0);
  const uint64_t in =
      uint64_t{a.r1 - a.r0} * (a.c1 - a.c0) + (b.tensor >= 0 ? uint64_t{b.r1 - b.r0} * (b.c1 - b.c0) : 0);
  Task t;
  t.op_kind = kind;
  t.m = out.r1 - out.r0;
  t.n = out.c1 - out.c0;
  t.vector_ops = ops_per_elem * static_cast<double>(elems);
  t.bytes = (in + elems) * d;
  FuncOp f;
  f.kind = fk;
  f.a = a, f.b = b, f.out = out;
  f.head_dim = head_dim, f.position_offset = position_offset;
  const TaskId id = Compute(rank, t, f, std::move(deps), t.bytes);
  ts[out.tensor].ready[rank].push_back(id);
}

bool LowerContext::Covers(const Layout& have, int32_t x, const Layout& want) const {
  if (have == want) return true;
  if (have.kind == LayoutKind::kPartial || want.kind == LayoutKind::kPartial) return false;
  const FuncTensor& ft = tensors[x];
  for (int r = 0; r < p; ++r) {
    Range hr = RowsOf(have, ft.rows, p, r), hc = ColsOf(have, ft.cols, p, r);
    Range wr = RowsOf(want, ft.rows, p, r), wc = ColsOf(want, ft.cols, p, r);
    if (wr.lo < hr.lo || wr.hi > hr.hi || wc.lo < hc.lo || wc.hi > hc.hi) return false;
  }
  return true;
}

}  // namespace tpsim::mapping
