#include "mapping/gemm_emitter.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>

#include "chip.pb.h"
#include "configs/files.h"

#include "mapping/layout_convert.h"
#include "mapping/memory_plan.h"

namespace tpsim::mapping {

using llm::OpClass;
using llm::OpRole;

bool IsWeightGemm(OpRole role) {
  switch (role) {
    case OpRole::kQProj:
    case OpRole::kKProj:
    case OpRole::kVProj:
    case OpRole::kOProj:
    case OpRole::kGateProj:
    case OpRole::kUpProj:
    case OpRole::kDownProj:
      return true;
    default:
      return false;
  }
}

LayerGemm GemmOf(const llm::Op& op, const config::Model& model) {
  const uint32_t hd = static_cast<uint32_t>(model.head_dim());
  return {op.role,
          op.cls,
          op.k,
          op.n,
          op.cls == llm::OpClass::kO ? hd : 1u,
          op.cls == llm::OpClass::kQkv ? hd : 1u};
}

std::vector<LayerGemm> LayerGemms(const config::Model& model) {
  std::vector<LayerGemm> out;
  config::Model dense = model;
  dense.set_num_experts(0);
  for (const llm::Op& op : llm::BuildLayer(dense, llm::Phase{}).ops)
    if (IsWeightGemm(op.role)) out.push_back(GemmOf(op, model));
  return out;
}

const Partitioner* GemmEmitter::PartitionerFor(OpClass cls) const {
  std::string name = config::EffectivePartition(cx_.m.partition());
  for (const auto& o : cx_.m.overrides())
    if (o.op() == llm::ToString(cls)) name = o.partition();
  const Partitioner* p = FindPartitioner(name);
  if (!p) throw std::invalid_argument("mapping: unknown partition " + name);
  return p;
}

GemmSpec GemmEmitter::Spec(const LayerGemm& lg) const {
  GemmSpec g;
  g.cls = lg.cls;
  g.t = cx_.t, g.k = lg.k, g.n = lg.n, g.k_unit = lg.k_unit, g.n_unit = lg.n_unit;
  return g;
}

const Partitioner* GemmEmitter::Choose(const GemmSpec& g, std::string* label) const {
  return PartitionerFor(g.cls)->Choose(g, *this, label);
}

Layout GemmEmitter::WantedInput(const LayerGemm& lg) const {
  const GemmSpec g = Spec(lg);
  std::string label;
  return Choose(g, &label)->Input(g, *this);
}

uint64_t GemmEmitter::ShardElems(const LayerGemm& lg, std::span<const uint64_t> rows) const {
  std::vector<const Partitioner*> runs;
  uint64_t elems = 0;
  std::string label;
  for (uint64_t t : rows) {
    GemmSpec g = Spec(lg);
    g.t = t;
    const Partitioner* p = Choose(g, &label);
    if (std::find(runs.begin(), runs.end(), p) != runs.end()) continue;
    runs.push_back(p);
    elems += p->ShardElems(g, cx_.p, cx_.grid);
  }
  return elems;
}

std::optional<LayerGemm> GemmEmitter::Fused(std::span<const LayerGemm* const> parts) const {
  if (!cx_.chip.config().has_gpu() || cx_.func || parts.size() < 2) return std::nullopt;
  LayerGemm whole = *parts.front();
  whole.n = 0;
  std::string label;
  for (const LayerGemm* lg : parts) {
    if (lg->k != whole.k || lg->cls != whole.cls) return std::nullopt;
    if (std::string_view(Choose(Spec(*lg), &label)->name()) != "n_split") return std::nullopt;
    whole.n += lg->n;
  }
  if (std::string_view(Choose(Spec(whole), &label)->name()) != "n_split") return std::nullopt;
  return whole;
}

int32_t GemmEmitter::Gemm(const LayerGemm& lg, int32_t x, int32_t w, const std::string* name_given) {
  GemmSpec g = Spec(lg);
  std::string label;
  const Partitioner* p = Choose(g, &label);
  const std::string& name = name_given ? *name_given : cx_.names[lg.role];
  conv_.Convert(x, p->Input(g, *this), name);
  // Its weights stream where the plan keeps none in SRAM, or keeps another layout's
  // (MemoryPlanner::ResidentRows: the partitioner at those rows is another).
  streamed_ = !cx_.mem->WeightsResident();
  if (const std::optional<uint64_t> resident = cx_.mem->ResidentRows(); !streamed_ && resident) {
    GemmSpec at = Spec(lg);
    at.t = *resident;
    std::string unused;
    streamed_ = Choose(at, &unused) != p;
  }
  g.op = cx_.NewOp(name, label);
  g.x = x, g.w = w;
  g.y = cx_.NewTensor(FuncTensorKind::kActivation, cx_.t, lg.n);
  const Layout out = p->Emit(g, *this);
  cx_.ts[g.y].layout = cx_.p == 1 ? Layout::Replicated() : out;
  return g.y;
}

TaskId GemmEmitter::EmitGemm(const GemmSpec& g, int rank, const ShardGemm& s, std::vector<TaskId> deps) {
  Append(&deps, cx_.Ready(g.x, rank));
  Task t;
  t.op_kind = llm::OpKind::kGemm;
  t.m = s.rows.size(), t.n = s.cols.size(), t.k = s.ks.size();
  t.flops = 2.0 * t.m * t.n * t.k;
  t.bytes = (t.m * t.k + t.m * t.n + t.k * t.n) * cx_.d;
  FuncOp f;
  f.kind = FuncKind::kMatmul;
  f.a = Sl(g.x, s.rows, s.ks);
  f.b = s.b;
  f.transpose_b = s.transpose_b;
  f.accumulate = s.accumulate;
  f.out = Sl(g.y, s.rows, s.cols);
  const uint64_t transient = (t.m * t.k + t.m * t.n) * cx_.d + s.buffer_bytes;
  const TaskId id = cx_.Compute(rank, t, f, std::move(deps), transient);
  cx_.ts[g.y].ready[rank].push_back(id);
  return id;
}

GemmContext::WeightBlock GemmEmitter::FetchWeights(int rank, uint64_t bytes) {
  if (!streamed_) return {};
  return {{cx_.Memory(rank, bytes, false, cx_.mem->WeightReadDeps(rank))}, bytes};
}

std::vector<TaskId> GemmEmitter::BufferFree(int rank) {
  return streamed_ ? std::vector<TaskId>{} : cx_.mem->LastCompute(rank);
}

CollectiveRun GemmEmitter::AddCollective(CollectiveKind kind, const std::vector<std::vector<int>>& groups,
                                         uint64_t bytes, uint64_t align_bytes, OpId op) {
  const int n = static_cast<int>(groups[0].size());
  CollectiveRun c;
  c.id = conv_.AddCollective(kind, ChooseCollective(cx_.algo, kind, n, bytes, cx_.sw), groups, bytes,
                             align_bytes, op, &c.schedule);
  return c;
}

TaskId GemmEmitter::EmitTransfer(const CollectiveRun& c, size_t step, const Xfer& x,
                                 std::vector<TaskId> deps) {
  return cx_.AddTask(XferTask(x, *c.schedule, cx_.sw, c.id, step, cx_.cores), std::move(deps));
}

int32_t GemmEmitter::NewBuffer(uint64_t rows, uint64_t cols) {
  return cx_.NewTensor(FuncTensorKind::kBuffer, rows, cols);
}

void GemmEmitter::AddFuncCollective(FuncCollective fc) { cx_.prog.func.collectives.push_back(std::move(fc)); }

}  // namespace tpsim::mapping
