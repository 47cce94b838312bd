#include "validate/lowering.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace tpsim::validate {

namespace {

struct KindInfo {
  LaunchKind kind;
  const char* name;
  const char* api;
};
constexpr KindInfo kKinds[] = {
    {LaunchKind::kGemm, "gemm", "cublasGemmEx"},
    {LaunchKind::kBatchedGemm, "batched_gemm", "cublasGemmStridedBatchedEx"},
    {LaunchKind::kRmsNorm, "rmsnorm", "rmsnorm_bf16"},
    {LaunchKind::kRope, "rope", "rope_bf16"},
    {LaunchKind::kSoftmax, "softmax", "softmax_bf16"},
    {LaunchKind::kSiluMul, "silu_mul", "silu_mul_bf16"},
    {LaunchKind::kAdd, "add", "add_bf16"},
    {LaunchKind::kCopy, "copy", "copy_bf16"},
    {LaunchKind::kGroupedGemm, "grouped_gemm", "cublasGemmGroupedBatchedEx"},
    {LaunchKind::kAllReduce, "all_reduce", "ncclAllReduce"},
    {LaunchKind::kAllGather, "all_gather", "ncclAllGather"},
    {LaunchKind::kReduceScatter, "reduce_scatter", "ncclReduceScatter"},
    {LaunchKind::kSend, "send", "ncclSend"},
    {LaunchKind::kRecv, "recv", "ncclRecv"},
    {LaunchKind::kGroupSendRecv, "group_send_recv", "ncclGroup(ncclSend/ncclRecv)"},
};

const KindInfo& Info(LaunchKind k) {
  for (const auto& i : kKinds)
    if (i.kind == k) return i;
  return kKinds[0];
}

Launch ComputeLaunch(const mapping::Program& p, const mapping::Task& t) {
  using llm::OpKind;
  using mapping::FuncKind;
  Launch l;
  l.task = t.id;
  l.flops = t.flops;
  const mapping::FuncOp* f =
      (t.func >= 0 && static_cast<size_t>(t.func) < p.func.ops.size()) ? &p.func.ops[t.func] : nullptr;
  auto vector = [&](LaunchKind k) {
    l.kind = k;
    l.rows = t.m;
    l.cols = t.n;
  };
  // The task's matmuls (its functional op chain, FuncOp::next): an MoE rank's experts.
  std::vector<GemmShape> matmuls;
  for (int64_t i = t.func; i >= 0 && static_cast<size_t>(i) < p.func.ops.size(); i = p.func.ops[i].next) {
    const mapping::FuncOp& op = p.func.ops[i];
    if (op.kind == FuncKind::kMatmul)
      matmuls.push_back({op.out.r1 - op.out.r0, op.out.c1 - op.out.c0, op.a.c1 - op.a.c0});
    if (op.next >= 0 && op.next <= i) break;
  }
  switch (t.op_kind) {
    case OpKind::kGemm:
    case OpKind::kRouter:
      if (matmuls.size() > 1 || (t.func < 0 && t.batch > 1)) {
        // Several experts' (or gate and up) GEMMs in one task: one grouped GEMM. Without
        // functional data the task's batch x [m, k] x [k, n] stands for them.
        l.kind = LaunchKind::kGroupedGemm;
        l.groups = matmuls.size() > 1 ? matmuls : std::vector<GemmShape>(t.batch, GemmShape{t.m, t.n, t.k});
        l.batch = l.groups.size();
        break;
      }
      l.kind = LaunchKind::kGemm;
      l.m = t.m, l.n = t.n, l.k = t.k;
      l.transpose_b = f && f->transpose_b;
      break;
    case OpKind::kBatchedGemm:
      l.kind = LaunchKind::kBatchedGemm;
      l.batch = t.batch, l.m = t.m, l.n = t.n, l.k = t.k;
      break;
    case OpKind::kNorm:
      vector(LaunchKind::kRmsNorm);
      l.group = (f && f->kind == FuncKind::kHeadNorm) ? f->head_dim : static_cast<uint32_t>(t.n);
      break;
    case OpKind::kRope:
      vector(LaunchKind::kRope);
      l.group = f ? f->head_dim : 0;
      break;
    case OpKind::kSoftmax:
      vector(LaunchKind::kSoftmax);
      break;
    case OpKind::kElementwise:
      vector(f && f->kind == FuncKind::kSiluMul ? LaunchKind::kSiluMul : LaunchKind::kAdd);
      break;
    case OpKind::kKvWrite:
      vector(LaunchKind::kCopy);
      break;
    case OpKind::kCollective:  // only in Programs lowered without functional data (never here)
      break;
  }
  return l;
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return b ? (a + b - 1) / b : 0; }

}  // namespace

const char* ToString(LaunchKind k) { return Info(k).name; }
const char* ApiName(LaunchKind k) { return Info(k).api; }
bool IsCollective(LaunchKind k) { return k >= LaunchKind::kAllReduce; }

size_t GpuPlan::NumLaunches() const {
  size_t n = 0;
  for (const auto& o : ops) n += o.launches.size();
  return n;
}
size_t GpuPlan::NumKernels() const {
  size_t n = 0;
  for (const auto& o : ops)
    for (const auto& l : o.launches) n += !IsCollective(l.kind);
  return n;
}
size_t GpuPlan::NumCollectives() const { return NumLaunches() - NumKernels(); }

LaunchPlan PlanLaunches(const mapping::Program& p, uint32_t dtype_bytes) {
  if (dtype_bytes == 0) throw std::invalid_argument("validate: dtype_bytes must be positive");
  LaunchPlan plan;
  plan.dtype_bytes = dtype_bytes;
  // Per core: (task id, launch), later grouped by op.
  std::map<int, std::vector<std::pair<uint32_t, Launch>>> per_gpu;
  std::map<int, uint64_t> memory;
  struct CollState {
    std::map<int, uint32_t> first;                    // core -> first transfer task touching it
    std::map<int, uint64_t> sent;                     // core -> bytes it sends
    std::map<int, std::map<int, uint64_t>> to, from;  // core -> peer -> bytes sent / received
  };
  std::map<int32_t, CollState> colls;

  // Op and collective indices are valid: the builder verified the Program (mapping::Verify).
  for (const mapping::Task& t : p.tasks()) {
    switch (t.kind) {
      case mapping::TaskKind::kCompute:
        per_gpu[t.core].push_back({t.id, ComputeLaunch(p, t)});
        break;
      case mapping::TaskKind::kMemory:
        ++memory[t.core];
        per_gpu[t.core];
        break;
      case mapping::TaskKind::kTransfer: {
        if (t.collective < 0 || p.collectives[t.collective].kind == mapping::CollectiveKind::kP2p) {
          Launch s;
          s.kind = LaunchKind::kSend;
          s.task = t.id;
          s.collective = t.collective;
          s.bytes = t.bytes;
          s.count = CeilDiv(t.bytes, dtype_bytes);
          s.padded = t.bytes % dtype_bytes != 0;
          s.nranks = 2;
          s.peer = t.dst_core;
          Launch r = s;
          r.kind = LaunchKind::kRecv;
          r.peer = t.core;
          per_gpu[t.core].push_back({t.id, s});
          per_gpu[t.dst_core].push_back({t.id, r});
          break;
        }
        CollState& st = colls[t.collective];
        st.first.emplace(t.core, t.id);
        st.first.emplace(t.dst_core, t.id);
        st.sent[t.core] += t.bytes;
        st.to[t.core][t.dst_core] += t.bytes;
        st.from[t.dst_core][t.core] += t.bytes;
        break;
      }
    }
  }

  for (auto& [c, st] : colls) {
    const mapping::CollectiveInfo& ci = p.collectives[c];
    const int touched = static_cast<int>(st.first.size());
    const int groups = std::max(1, ci.groups);
    // Sub-group collectives (CollectiveInfo::groups > 1): one NCCL call per group, over its
    // ranks (CollectiveInfo::members); coll_group numbers the groups by their smallest core.
    std::map<int, int> group_of;  // member group -> group index
    if (groups > 1 && ci.members.empty())
      throw std::invalid_argument("validate: collective " + std::to_string(c) + " has " +
                                  std::to_string(groups) + " groups but no members");
    if (groups > 1)
      for (const auto& [core, first] : st.first)
        group_of.emplace(ci.GroupOf(core), static_cast<int>(group_of.size()));
    const int n = groups > 1 ? touched / static_cast<int>(group_of.size()) : touched;
    if (ci.ranks * groups != touched)
      plan.notes.push_back("collective " + std::to_string(c) + " (" + p.ops[ci.op].ref.op +
                           "): Program says " + std::to_string(ci.ranks) + " ranks" +
                           (groups > 1 ? " x " + std::to_string(groups) + " groups" : "") +
                           ", its transfers touch " + std::to_string(touched) + " GPUs; the NCCL call uses " +
                           std::to_string(n));
    for (const auto& [core, first] : st.first) {
      Launch l;
      l.task = first;
      l.collective = c;
      l.nranks = n;
      if (groups > 1) l.coll_group = group_of.at(ci.GroupOf(core));
      l.bytes = ci.bytes;
      const uint64_t per_rank = uint64_t{static_cast<uint64_t>(n)} * dtype_bytes;
      if (ci.kind == mapping::CollectiveKind::kAllReduce) {
        l.kind = LaunchKind::kAllReduce;
        l.count = CeilDiv(ci.bytes, dtype_bytes);
        l.padded = ci.bytes % dtype_bytes != 0;
      } else if (ci.kind == mapping::CollectiveKind::kAllGather ||
                 ci.kind == mapping::CollectiveKind::kReduceScatter) {
        l.kind = ci.kind == mapping::CollectiveKind::kAllGather ? LaunchKind::kAllGather
                                                                : LaunchKind::kReduceScatter;
        l.count = CeilDiv(ci.bytes, per_rank);
        l.padded = ci.bytes % per_rank != 0;
      } else {
        l.kind = LaunchKind::kGroupSendRecv;
        auto it = st.sent.find(core);
        l.bytes = it == st.sent.end() ? 0 : it->second;
        l.count = CeilDiv(l.bytes, dtype_bytes);
        l.padded = l.bytes % dtype_bytes != 0;
        if (ci.kind == mapping::CollectiveKind::kAllToAll) {  // uneven: exact counts per peer
          for (const auto& [peer, b] : st.to[core]) {
            l.sends.push_back({peer, CeilDiv(b, dtype_bytes)});
            l.padded = l.padded || b % dtype_bytes != 0;
          }
          for (const auto& [peer, b] : st.from[core]) {
            l.recvs.push_back({peer, CeilDiv(b, dtype_bytes)});
            l.padded = l.padded || b % dtype_bytes != 0;
          }
        }
      }
      per_gpu[core].push_back({first, l});
    }
  }

  for (auto& [core, items] : per_gpu) {
    std::stable_sort(items.begin(), items.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    GpuPlan g;
    g.gpu = core;
    g.memory_tasks = memory[core];
    std::map<uint32_t, size_t> slot;  // op -> index in g.ops
    for (auto& [task, launch] : items) {
      uint32_t op = p.task(task).op;
      auto it = slot.find(op);
      if (it == slot.end()) {
        it = slot.emplace(op, g.ops.size()).first;
        OpPlan o;
        o.op = op;
        o.ref = p.ops[op].ref;
        g.ops.push_back(std::move(o));
      }
      g.ops[it->second].launches.push_back(launch);
    }
    plan.gpus.push_back(std::move(g));
  }
  return plan;
}

std::string LaunchPlan::Dump(const mapping::Program& p) const {
  std::ostringstream os;
  char buf[4096];
  for (const GpuPlan& g : gpus) {
    os << "GPU " << g.gpu << ": " << g.NumLaunches() << " launches (" << g.NumKernels() << " kernels, "
       << g.NumCollectives() << " NCCL calls)";
    if (g.memory_tasks) os << ", " << g.memory_tasks << " DRAM tasks not launched";
    os << "\n";
    for (const OpPlan& o : g.ops) {
      os << "  " << mapping::ToString(o.ref.phase);
      if (o.ref.phase == mapping::Phase::kDecode) os << " step " << o.ref.step;
      os << " L" << o.ref.layer << " " << o.ref.op << " [" << o.ref.Label() << "]\n";
      for (const Launch& l : o.launches) {
        switch (l.kind) {
          case LaunchKind::kGemm:
            std::snprintf(buf, sizeof buf, "m=%llu n=%llu k=%llu%s bf16->fp32", (unsigned long long)l.m,
                          (unsigned long long)l.n, (unsigned long long)l.k, l.transpose_b ? " B^T" : "");
            break;
          case LaunchKind::kBatchedGemm:
            std::snprintf(buf, sizeof buf, "batch=%llu m=%llu n=%llu k=%llu bf16->fp32",
                          (unsigned long long)l.batch, (unsigned long long)l.m, (unsigned long long)l.n,
                          (unsigned long long)l.k);
            break;
          case LaunchKind::kRmsNorm:
          case LaunchKind::kRope:
            std::snprintf(buf, sizeof buf, "rows=%llu cols=%llu group=%u elements=%llu",
                          (unsigned long long)l.rows, (unsigned long long)l.cols, l.group,
                          (unsigned long long)l.Elements());
            break;
          case LaunchKind::kSoftmax:
          case LaunchKind::kSiluMul:
          case LaunchKind::kAdd:
          case LaunchKind::kCopy:
            std::snprintf(buf, sizeof buf, "rows=%llu cols=%llu elements=%llu", (unsigned long long)l.rows,
                          (unsigned long long)l.cols, (unsigned long long)l.Elements());
            break;
          case LaunchKind::kGroupedGemm: {
            std::string g = std::to_string(l.groups.size()) + " problems:";
            for (const GemmShape& gs : l.groups)
              g += " " + std::to_string(gs.m) + "x" + std::to_string(gs.n) + "x" + std::to_string(gs.k);
            std::snprintf(buf, sizeof buf, "%s (m x n x k) bf16->fp32", g.c_str());
            break;
          }
          case LaunchKind::kSend:
          case LaunchKind::kRecv:
            std::snprintf(buf, sizeof buf, "bytes=%llu count=%llu %s GPU %d", (unsigned long long)l.bytes,
                          (unsigned long long)l.count, l.kind == LaunchKind::kSend ? "to" : "from", l.peer);
            break;
          default:
            std::snprintf(
                buf, sizeof buf, "bytes=%llu count=%llu ranks=%d (collective %d, %s)%s%s",
                (unsigned long long)l.bytes, (unsigned long long)l.count, l.nranks, l.collective,
                l.collective >= 0 ? mapping::ToString(p.collectives[l.collective].algorithm).c_str() : "",
                l.padded ? " padded" : "",
                l.coll_group >= 0 ? (" group " + std::to_string(l.coll_group)).c_str() : "");
            break;
        }
        std::string api = ApiName(l.kind);
        api.resize(std::max<size_t>(api.size(), 28), ' ');
        os << "    " << api << " " << buf << "\n";
        if (!l.sends.empty() || !l.recvs.empty()) {
          os << "      ";
          for (const PeerCount& pc : l.sends) os << " ncclSend(" << pc.count << " to GPU " << pc.peer << ")";
          for (const PeerCount& pc : l.recvs)
            os << " ncclRecv(" << pc.count << " from GPU " << pc.peer << ")";
          os << "\n";
        }
      }
    }
  }
  for (const auto& n : notes) os << "note: " << n << "\n";
  return os.str();
}

double AlgBandwidthGbps(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
}

double BusFactor(const std::string& kind, int nranks) {
  if (nranks <= 0) return 0;
  const double n = nranks;
  if (kind == "all_reduce") return 2.0 * (n - 1) / n;
  if (kind == "all_gather" || kind == "reduce_scatter") return (n - 1) / n;
  return 1.0;
}

double BusBandwidthGbps(const std::string& kind, uint64_t bytes, double seconds, int nranks) {
  return AlgBandwidthGbps(bytes, seconds) * BusFactor(kind, nranks);
}

}  // namespace tpsim::validate
