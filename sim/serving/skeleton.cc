#include "sim/serving/skeleton.h"

#include <algorithm>
#include <limits>
#include <span>
#include <stdexcept>

#include "mapping/cost.h"
#include "mapping/mapping.h"
#include "sim/schedule.h"

namespace tpsim::serving {

namespace {

bool IsAttention(const mapping::Task& t) {
  return t.kind == mapping::TaskKind::kCompute &&
         (t.op_kind == llm::OpKind::kBatchedGemm || t.op_kind == llm::OpKind::kSoftmax);
}

// A transfer over links or a memory task: a flow that the analytical engine may slow down
// by sharing its links or channel with flows overlapping it in time.
bool IsFlow(const mapping::Task& t) {
  return (t.kind == mapping::TaskKind::kTransfer && t.core != t.dst_core && t.in_switch_gbps <= 0) ||
         t.kind == mapping::TaskKind::kMemory;
}

}  // namespace

SkeletonCost::SkeletonCost(const arch::Chip& chip, const config::Model& model, const config::Mapping& mapping,
                           uint32_t layers, std::string dtype, uint32_t plan_layers)
    : chip_(chip),
      model_(model),
      mapping_(mapping),
      layers_(std::max<uint32_t>(1, layers)),
      dtype_(std::move(dtype)),
      engine_(sim::MakeEngine("analytical")) {
  lower_.plan_layers = plan_layers;
  d_ = dtype_ == "fp32" ? 4 : 2;
  hd_ = model_.head_dim();
  // The memory plan of mapping::Lower (see mapping::PlanWeights) for the layers it sizes
  // for: weights resident when they stay in SRAM, the KV cache (2 x context x KV heads per
  // core x head_dim x dtype x layers of the most loaded stage) resident when it fits beside
  // them.
  mapping::WeightPlan plan =
      mapping::PlanWeights(chip_, model_, mapping_, plan_layers ? plan_layers : layers_, dtype_);
  sram_ = chip_.config().core().sram_bytes();
  weights_resident_ = plan.weights_in_sram ? plan.weight_bytes_per_core : 0;
  kv_per_token_ = 2ull * plan.kv_heads_per_core * hd_ * d_ * plan.layers_per_core;
  kv_cols_max_ = uint64_t{plan.kv_heads_per_core} * hd_;
  context_cap_ =
      sram_ >= weights_resident_ && kv_per_token_ ? (sram_ - weights_resident_) / kv_per_token_ : 0;
  // KV reads are modelled here only where the DRAM is stacked under each core: memory
  // traffic that crosses network links shares them with the other memory flows of the
  // whole Program, which a chain's reads cannot be timed apart from.
  stacked_ = !chip_.channels().empty();
  for (int c = 0; c < chip_.num_cores() && stacked_; ++c) {
    const int ch = chip_.ChannelOf(c);
    stacked_ =
        ch >= 0 && ch < static_cast<int>(chip_.channels().size()) && chip_.MemoryPath(c, ch, false).empty();
  }
}

SkeletonCost::~SkeletonCost() = default;

uint64_t SkeletonCost::Avail(uint64_t context) const {
  const uint64_t resident = weights_resident_ + (context > context_cap_ ? 0 : kv_per_token_ * context);
  return sram_ > resident ? sram_ - resident : 0;
}

uint64_t SkeletonCost::AttentionTransient(const llm::SeqChunk& c, uint64_t heads, uint64_t kv_cols,
                                          bool dram) const {
  const uint64_t s = c.new_tokens, lt = uint64_t{c.cached} + c.new_tokens;
  // scores / PV: heads x (s x hd + s x lt), plus the chunk's K or V when read from DRAM;
  // softmax: its input and output, heads x s x lt each.
  return std::max(heads * s * (hd_ + lt) * d_ + (dram ? lt * kv_cols * d_ : 0), 2 * heads * s * lt * d_);
}

SkeletonCost::ChunkPs SkeletonCost::ChunkAttention(const llm::SeqChunk& c, uint64_t heads, uint64_t stack) {
  const uint64_t s = c.new_tokens, lt = uint64_t{c.cached} + c.new_tokens;
  const ChunkKey key{c.new_tokens, static_cast<uint32_t>(lt), heads, stack};
  if (lt <= UINT32_MAX) {
    auto it = chunk_ps_.find(key);
    if (it != chunk_ps_.end()) return it->second;
  }
  // The shapes lowering emits for this chunk (one sequence, `heads` query heads).
  const mapping::AttentionShapes sh = mapping::AttentionSpanShapes(heads, s, lt, hd_, d_, stack);
  const ChunkPs t{mapping::ComputeTime(chip_, sh.scores), mapping::ComputeTime(chip_, sh.softmax),
                  mapping::ComputeTime(chip_, sh.pv)};
  if (lt <= UINT32_MAX) chunk_ps_.emplace(key, t);
  return t;
}

Ps SkeletonCost::ReadPs(const ReadSig& sig, uint64_t bytes) const {
  return mapping::StackedMemoryTime(chip_, sig.channel, bytes);
}

Ps SkeletonCost::ReadBusyPs(const ReadSig& sig, uint64_t bytes) const {
  return mapping::ChannelBusyTime(chip_, sig.channel, bytes);
}

// sim::ListSchedule's symbolic algebra (KV in SRAM): every time is a max-plus polynomial
// max_k (c_k + k D) in one chain's duration D, stored as K coefficients c_k (kNone when
// absent). A chain's first task ends at its start times D (the coefficients shift up by
// one); its other tasks end at their start (the whole chain is charged once).
struct SkeletonCost::SymbolicTimes {
  using Time = Ps*;  // K coefficients
  size_t K;
  const std::vector<uint8_t>& role;  // 1: first task of a chain, 2: a later one
  const std::vector<Ps>& dur;
  const std::vector<Ps>& busy;
  std::vector<Ps> ends, core_free, channel_free, link_free, start, makespan;
  bool ok = true;  // false: a path would hold more than K - 1 chains

  SymbolicTimes(size_t k, size_t n, int cores, int channels, int links, const std::vector<uint8_t>& r,
                const std::vector<Ps>& d, const std::vector<Ps>& b)
      : K(k),
        role(r),
        dur(d),
        busy(b),
        ends(n * k, kNone),
        core_free(static_cast<size_t>(cores) * k, kNone),
        channel_free(static_cast<size_t>(channels) * k, kNone),
        link_free(static_cast<size_t>(links) * k, kNone),
        start(k),
        makespan(k, kNone) {}
  static void Max(Ps* a, const Ps* b, size_t k) {
    for (size_t j = 0; j < k; ++j) a[j] = std::max(a[j], b[j]);
  }
  Ps* Origin() {
    std::fill(start.begin(), start.end(), kNone);
    start[0] = 0;
    return start.data();
  }
  Ps* EndOf(uint32_t d) { return &ends[d * K]; }
  Ps* FreeAt(sim::Queue q, int r) {
    return q == sim::Queue::kCompute ? &core_free[r * K]
           : q == sim::Queue::kDram  ? &channel_free[r * K]
                                     : &link_free[r * K];
  }
  Ps* Later(Ps* a, const Ps* b) const {
    Max(a, b, K);
    return a;
  }
  Ps* Finish(size_t i, const Ps* s) {
    Ps* e = &ends[i * K];
    if (role[i] == 1) {
      if (s[K - 1] != kNone) ok = false;
      for (size_t k = 1; k < K; ++k) e[k] = s[k - 1];
    } else if (role[i] == 2) {
      std::copy(s, s + K, e);
    } else {
      for (size_t k = 0; k < K; ++k) e[k] = s[k] == kNone ? kNone : s[k] + dur[i];
    }
    Max(makespan.data(), e, K);
    return e;
  }
  void Release(size_t i, sim::Queue q, int r, const Ps* s, const Ps* end) {
    Ps* f = FreeAt(q, r);
    if (q != sim::Queue::kCompute) {
      for (size_t k = 0; k < K; ++k) f[k] = s[k] == kNone ? kNone : s[k] + busy[i];
    } else {
      std::copy(end, end + K, f);
    }
  }
};

SkeletonCost::Why SkeletonCost::Build(uint32_t rows, uint64_t context, Skeleton* sk, bool exact) {
  ++built_;
  const bool dram = context > context_cap_;
  // Chunks: one token with the rest of the context, then the other rows in pieces small
  // enough that their attention does not spill (a skeleton that spills is not used).
  const uint64_t nq = model_.num_attention_heads(), tp = std::max<uint32_t>(1, mapping_.tp());
  const uint64_t heads_max = (nq + tp - 1) / tp;
  std::vector<llm::SeqChunk> chunks{{1, static_cast<uint32_t>(context - rows)}};
  uint32_t piece = rows - 1;
  while (piece > 1 && AttentionTransient({piece, 0}, heads_max, kv_cols_max_, dram) > Avail(context))
    piece = (piece + 1) / 2;
  for (uint32_t left = rows - 1; left > 0;) {
    const uint32_t s = std::min(left, piece);
    chunks.push_back({s, 0});
    left -= s;
  }
  mapping::Program p;
  sim::EngineOutput o;
  try {
    p = mapping::LowerIteration(chip_, model_, mapping_, chunks, layers_, dtype_, lower_);
    if (p.kv_location != (dram ? mapping::KvLocation::kDram : mapping::KvLocation::kSram))
      return Why::kOther;  // the plan is not ours
    if (p.spilled_bytes != 0 && !exact) return Why::kMemory;
    o = engine_->Run(p, chip_);
  } catch (const std::exception&) {
    return Why::kOther;
  }
  const size_t n = p.num_tasks();
  std::vector<Ps> dur(n);
  for (size_t i = 0; i < n; ++i) dur[i] = o.tasks[i].end_ps - o.tasks[i].start_ps;
  // 0. No transfer or memory task lost time to sharing (sim/analytical/links.h): shared
  // flows take times that depend on when the others run, which a skeleton cannot follow
  // when the chunks change the chains' durations. Such a layout is left to the Program.
  for (size_t i = 0; i < n; ++i) {
    if (IsFlow(p.task(i)) && dur[i] != mapping::TaskTime(chip_, p, i)) {
      shared_ = true;
      return Why::kOther;
    }
  }
  // 1. The engine's schedule (sim/schedule.h) with these durations, and its replay in the
  // engine's order, are the engine's.
  // Memory tasks hold their channel, transfers over links their first link, as the
  // analytical engine has them.
  const int num_links = static_cast<int>(chip_.links().size());
  std::vector<Ps> busy(n, 0);
  std::vector<int32_t> first_link(n, -1);
  {
    std::map<std::pair<int, int>, int32_t> first;  // (src, dst) -> first link of the route
    for (size_t i = 0; i < n; ++i) {
      const mapping::Task& t = p.task(i);
      if (t.kind == mapping::TaskKind::kMemory) {
        busy[i] = mapping::ChannelBusyTime(chip_, t.channel, t.bytes);
      } else if (t.kind == mapping::TaskKind::kTransfer && t.core != t.dst_core && t.in_switch_gbps <= 0) {
        auto [it, inserted] = first.try_emplace({t.core, t.dst_core}, -1);
        if (inserted) {
          const std::vector<int> route = chip_.Route(t.core, t.dst_core);
          if (!route.empty()) it->second = route[0];
        }
        first_link[i] = it->second;
        if (it->second >= 0)
          busy[i] = mapping::SerialisationPs(t.bytes, chip_.links()[it->second].bandwidth_gbps);
      }
    }
  }
  sim::Dispatcher dispatcher(p, first_link, num_links);
  std::vector<sim::TaskTime> times(n);
  if (dispatcher.Run(dur, busy, times) != o.makespan_ps) return Why::kOther;
  const std::vector<uint32_t> order = dispatcher.order();
  const std::vector<Ps> end = sim::ReplayEnds(p, order, dur, busy, first_link, num_links);
  for (size_t i = 0; i < n; ++i)
    if (end[i] != o.tasks[i].end_ps || times[i].end_ps != end[i]) return Why::kOther;
  // 2. Attention chains per (layer, core): the tasks of attention ops (those with a batched
  // GEMM or softmax), per chunk in order [read,] scores, softmax, [read,] PV, each timed as
  // ChunkAttention / ReadPs give, the same heads and KV columns everywhere.
  std::vector<uint8_t> attn_op(p.ops.size(), 0);
  for (const mapping::Task& t : p.tasks())
    if (IsAttention(t)) attn_op[t.op] = 1;
  for (size_t i = 0; i < p.ops.size(); ++i)
    if (attn_op[i] && p.ops[i].spilled_bytes != 0) return Why::kMemory;
  std::map<std::pair<uint32_t, int>, std::vector<uint32_t>> chains;
  for (size_t i = 0; i < n; ++i)
    if (attn_op[p.task(i).op]) chains[{p.ops[p.task(i).op].ref.layer, p.task(i).core}].push_back(i);
  if (chains.empty()) return Why::kOther;
  const size_t per = dram ? 5 : 3;
  uint64_t heads = 0, stack = 1, kv_cols = 0;
  std::vector<uint8_t> role(n, 0);   // 1: first task of a chain, 2: a later one
  std::vector<uint32_t> last(n, 0);  // chain tasks: the chain's last task
  std::vector<int32_t> sig_of;       // per chain (map order)
  std::vector<int> chain_channel;    // per chain: its reads' channel
  std::vector<ReadSig> sigs;
  for (const auto& [key, ids] : chains) {
    if (ids.size() != per * chunks.size()) return Why::kOther;
    ReadSig sig;
    for (size_t j = 0; j < ids.size(); ++j) {
      const mapping::Task& t = p.task(ids[j]);
      const size_t q = j % per;
      const bool read = dram && (q == 0 || q == 3);
      const bool softmax = q == (dram ? 2u : 1u);
      if (read) {
        if (t.kind != mapping::TaskKind::kMemory || t.write || t.core != key.second) return Why::kOther;
        const uint64_t lt = uint64_t{chunks[j / per].cached} + chunks[j / per].new_tokens;
        if (kv_cols == 0 && lt * d_ > 0) kv_cols = t.bytes / (lt * d_);
        if (t.bytes != lt * kv_cols * d_ || kv_cols == 0) return Why::kOther;
        if (q == 3 && t.channel != sig.channel) return Why::kOther;
        sig = {t.core, t.channel};
      } else {
        if (!IsAttention(t) || (t.op_kind == llm::OpKind::kSoftmax) != softmax) return Why::kOther;
        if (!softmax) {
          // m = stack x the chunk's new tokens (mapping::AttentionSpanShapes).
          const uint64_t s = chunks[j / per].new_tokens, st = s ? t.m / s : 0;
          if (st == 0 || t.m != st * s) return Why::kOther;
          if (heads == 0) heads = t.batch * st, stack = st;
          if (t.batch * st != heads || st != stack || heads == 0) return Why::kOther;
        }
      }
      role[ids[j]] = j == 0 ? 1 : 2;
      last[ids[j]] = ids.back();
    }
    for (size_t j = 0; j < ids.size(); ++j) {
      const size_t q = j % per;
      const llm::SeqChunk& c = chunks[j / per];
      const ChunkPs t = ChunkAttention(c, heads, stack);
      Ps want = 0;
      if (dram && (q == 0 || q == 3)) {
        want = ReadPs(sig, (uint64_t{c.cached} + c.new_tokens) * kv_cols * d_);
      } else {
        const size_t k = dram ? (q == 1 ? 0 : q == 2 ? 1 : 2) : q;
        want = k == 0 ? t.scores : k == 1 ? t.softmax : t.pv;
      }
      if (dur[ids[j]] != want) return Why::kOther;
    }
    uint32_t si = 0;
    if (dram) {
      while (si < sigs.size() &&
             !(chip_.channels()[sigs[si].channel].latency_ps == chip_.channels()[sig.channel].latency_ps &&
               chip_.channels()[sigs[si].channel].bandwidth_gbps ==
                   chip_.channels()[sig.channel].bandwidth_gbps))
        ++si;
      if (si == sigs.size()) sigs.push_back(sig);
    }
    sig_of.push_back(static_cast<int32_t>(si));
    chain_channel.push_back(sig.channel);
  }
  // The chain is one block on its core: its tasks wait only on the chain (earlier tasks),
  // on inputs of the chain's first compute or first read (or what those wait on), or on
  // earlier compute of the same core; nothing else runs between its tasks; whoever reads
  // a chain task also reads its last.
  for (const auto& [key, ids] : chains) {
    const uint32_t first_c = dram ? ids[1] : ids[0];
    const uint32_t first_r = dram ? ids[0] : UINT32_MAX;
    auto in_deps = [&](uint32_t of, uint32_t d) {
      if (of == UINT32_MAX) return false;
      const auto v = p.deps(of);
      if (std::find(v.begin(), v.end(), d) != v.end()) return true;
      for (uint32_t x : v)
        if (role[x] == 0 && std::find(p.deps(x).begin(), p.deps(x).end(), d) != p.deps(x).end()) return true;
      return false;
    };
    for (size_t j = 0; j < ids.size(); ++j) {
      const mapping::Task& t = p.task(ids[j]);
      const bool read = t.kind == mapping::TaskKind::kMemory;
      for (uint32_t d : p.deps(ids[j])) {
        if (role[d] != 0) {
          if (last[d] != ids.back() || d >= ids[j] || read) return Why::kOther;
          continue;
        }
        if (d >= ids[0]) return Why::kOther;
        if (read ? in_deps(first_r, d) : in_deps(first_c, d)) continue;
        if (!read && p.task(d).kind == mapping::TaskKind::kCompute && p.task(d).core == key.second) continue;
        return Why::kOther;
      }
    }
    for (uint32_t i = ids[0]; i < ids.back(); ++i)
      if (role[i] == 0) return Why::kOther;
  }
  for (size_t i = 0; i < n; ++i) {
    if (role[i] != 0) continue;
    for (uint32_t d : p.deps(i))
      if (role[d] != 0 && std::find(p.deps(i).begin(), p.deps(i).end(), last[d]) == p.deps(i).end())
        return Why::kOther;
  }
  // 2b. Every queue serves its tasks in the same order with every chain task taking no time,
  // or 16 times as long (sim/schedule.h picks by readiness; see the header).
  {
    auto queue_orders = [&](const std::vector<uint32_t>& ord) {
      std::vector<std::pair<int64_t, uint32_t>> q;  // (queue, task), stable in `ord`
      for (uint32_t i : ord) {
        if (p.kind(i) == mapping::TaskKind::kCompute) q.emplace_back(p.core(i), i);
        if (p.kind(i) == mapping::TaskKind::kMemory) q.emplace_back(-1 - int64_t{p.memory(i).channel}, i);
        if (first_link[i] >= 0) q.emplace_back(-1 - int64_t{p.num_channels} - first_link[i], i);
      }
      std::stable_sort(q.begin(), q.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      return q;
    };
    const auto base = queue_orders(order);
    for (Ps scale : {Ps{0}, Ps{16}}) {
      std::vector<Ps> d2 = dur, b2 = busy;
      for (size_t i = 0; i < n; ++i) {
        if (role[i] == 0) continue;
        d2[i] = dur[i] * scale;
        b2[i] = busy[i] * scale;
      }
      dispatcher.Run(d2, b2, times);
      if (queue_orders(dispatcher.order()) != base) return Why::kOther;
    }
  }
  // 2c. A chain's tasks are consecutive in its core's and its channel's queues in the
  // engine's order: nothing else of those queues between its first and its last.
  {
    std::vector<uint32_t> pos(n);
    for (size_t k = 0; k < n; ++k) pos[order[k]] = static_cast<uint32_t>(k);
    for (const auto& [key, ids] : chains) {
      uint32_t lo = UINT32_MAX, hi = 0;
      int channel = -1;
      for (uint32_t i : ids) {
        lo = std::min(lo, pos[i]);
        hi = std::max(hi, pos[i]);
        if (p.kind(i) == mapping::TaskKind::kMemory) channel = p.memory(i).channel;
      }
      for (uint32_t k = lo; k <= hi; ++k) {
        const uint32_t i = order[k];
        if (role[i] != 0) continue;
        if (p.kind(i) == mapping::TaskKind::kCompute && p.core(i) == key.second) return Why::kOther;
        if (p.kind(i) == mapping::TaskKind::kMemory && p.memory(i).channel == channel) return Why::kOther;
      }
    }
  }
  sk->dram = dram;
  sk->heads = heads, sk->stack = stack;
  sk->kv_cols = kv_cols;
  if (dram) {
    // 3a. The skeleton as Replay's nodes.
    sk->num_cores = p.num_cores;
    sk->num_channels = p.num_channels;
    sk->num_links = num_links;
    // The engine's order, with each chain's first node (which times the whole chain) moved
    // to its last task's place: after every input of the chain, and no task of the chain's
    // core or channel between (2c).
    {
      std::vector<int64_t> first_of(n, -1);
      for (const auto& [key, ids] : chains) first_of[ids.back()] = ids[0];
      for (uint32_t i : order) {
        if (role[i] == 1) continue;
        if (first_of[i] >= 0) sk->order.push_back(static_cast<uint32_t>(first_of[i]));
        sk->order.push_back(i);
      }
    }
    sk->sigs = sigs;
    std::map<uint32_t, uint32_t> chain_of_first;
    size_t ci = 0;
    for (const auto& [key, ids] : chains) {
      Skeleton::Chain ch;
      ch.core = key.second;
      ch.channel = chain_channel[ci];
      ch.last = ids.back();
      ch.sig = static_cast<uint32_t>(sig_of[ci++]);
      ch.x_begin = static_cast<uint32_t>(sk->ext.size());
      for (uint32_t d : p.deps(ids[1]))
        if (role[d] == 0) sk->ext.push_back(d);
      ch.x_end = ch.y_begin = static_cast<uint32_t>(sk->ext.size());
      for (uint32_t d : p.deps(ids[0]))
        if (role[d] == 0) sk->ext.push_back(d);
      ch.y_end = static_cast<uint32_t>(sk->ext.size());
      chain_of_first[ids[0]] = static_cast<uint32_t>(sk->chains.size());
      sk->chains.push_back(ch);
    }
    sk->nodes.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const mapping::Task& t = p.task(i);
      Skeleton::Node& nd = sk->nodes[i];
      nd.core = t.core;
      nd.dur = dur[i];
      nd.busy = busy[i];
      if (t.kind == mapping::TaskKind::kMemory) nd.channel = t.channel;
      if (role[i] == 1) {
        nd.chain = static_cast<int32_t>(chain_of_first.at(static_cast<uint32_t>(i)));
        continue;
      }
      if (role[i] == 2) {
        nd.chain_rest = true;
        continue;
      }
      nd.queue = sim::QueueOf(t.kind, first_link, i);
      if (nd.queue == sim::Queue::kLink) nd.channel = first_link[i];
      nd.dep_begin = static_cast<uint32_t>(sk->deps.size());
      for (uint32_t d : p.deps(i))
        if (role[d] == 0 || d == last[d]) sk->deps.push_back(d);
      nd.dep_end = static_cast<uint32_t>(sk->deps.size());
    }
    // 4a. Replaying the skeleton's own chunks gives the engine's makespan.
    fns_.clear();
    for (const ReadSig& s : sk->sigs) fns_.push_back(Fn(chunks, *sk, &s));
    if (Replay(*sk, fns_) != o.makespan_ps) return Why::kOther;
    return Why::kOk;
  }
  // 3. Symbolic pass: every end as max_k (c_k + k D), D one chain's duration.
  SymbolicTimes sym(layers_ + 1, n, p.num_cores, p.num_channels, num_links, role, dur, busy);
  sim::ListSchedule(sim::ProgramGraph{p, order, first_link}, sym);
  if (!sym.ok) return Why::kOther;
  sk->poly = std::move(sym.makespan);
  // 4. The polynomial at the skeleton's own D is the engine's makespan.
  const Ps d_skel = Fn(chunks, *sk, nullptr).a;
  Ps at = kNone;
  for (size_t k = 0; k < sk->poly.size(); ++k)
    if (sk->poly[k] != kNone) at = std::max(at, sk->poly[k] + static_cast<Ps>(k) * d_skel);
  if (at != o.makespan_ps) return Why::kOther;
  return Why::kOk;
}

Ps SkeletonCost::Makespan(const std::vector<llm::SeqChunk>& chunks) {
  if (!engine_ || chunks.empty() || shared_) return -1;
  uint64_t rows64 = 0, context = 0;
  for (const llm::SeqChunk& c : chunks) {
    if (c.new_tokens == 0) return -1;
    rows64 += c.new_tokens;
    context += uint64_t{c.cached} + c.new_tokens;
  }
  if (rows64 > std::numeric_limits<uint32_t>::max() || context > std::numeric_limits<uint32_t>::max())
    return -1;
  const uint32_t rows = static_cast<uint32_t>(rows64);
  PerRows& pr = rows_[rows];
  const Skeleton* sk = nullptr;
  if (context > context_cap_) {
    // KV in DRAM: one skeleton per rows, at the smallest such context.
    if (!stacked_) return -1;
    if (!pr.dram_tried) {
      pr.dram_tried = true;
      auto s = std::make_unique<Skeleton>();
      if (Build(rows, std::max<uint64_t>(context_cap_ + 1, rows), s.get()) == Why::kOk)
        pr.dram = std::move(s);
    }
    sk = pr.dram.get();
  } else {
    auto it = pr.by_context.lower_bound(context);
    if (it != pr.by_context.end()) {
      sk = &it->second;
    } else {
      // A band of 4096 tokens of context first, then 512 (a skeleton at a larger context
      // covers more iterations, but spills sooner: its GEMMs have less SRAM left).
      for (uint64_t cand : {(context + 4095) / 4096 * 4096, (context + 511) / 512 * 512}) {
        cand = std::min(cand, context_cap_);
        if (cand < context || cand >= pr.bad_from) continue;
        Skeleton s;
        Why why = Build(rows, cand, &s);
        if (why == Why::kOk) {
          sk = &pr.by_context.emplace(cand, std::move(s)).first->second;
          break;
        }
        pr.bad_from = why == Why::kMemory ? std::min(pr.bad_from, cand) : 0;
      }
    }
    // GEMMs spill at this context: their spills depend on the context itself, so only a
    // skeleton at exactly this context (not kept) has the same Program outside attention.
    if (!sk && pr.bad_from != 0 && pr.bad_from != UINT64_MAX) {
      const uint64_t nq = model_.num_attention_heads(), tp = std::max<uint32_t>(1, mapping_.tp());
      const uint64_t avail = Avail(context);
      bool spills = false;
      for (const llm::SeqChunk& c : chunks)
        spills = spills || AttentionTransient(c, (nq + tp - 1) / tp, kv_cols_max_, false) > avail;
      exact_ = Skeleton();
      if (!spills && Build(rows, context, &exact_, true) == Why::kOk) sk = &exact_;
    }
  }
  if (!sk) return -1;
  // Real attention must not spill either.
  const uint64_t avail = Avail(context);
  for (const llm::SeqChunk& c : chunks)
    if (AttentionTransient(c, sk->heads, sk->kv_cols, sk->dram) > avail) return -1;
  Ps best = kNone;
  if (sk->dram) {
    fns_.clear();
    for (const ReadSig& s : sk->sigs) fns_.push_back(Fn(chunks, *sk, &s));
    best = Replay(*sk, fns_);
    ++kv_dram_;
  } else {
    const Ps d = Fn(chunks, *sk, nullptr).a;
    for (size_t k = 0; k < sk->poly.size(); ++k)
      if (sk->poly[k] != kNone) best = std::max(best, sk->poly[k] + static_cast<Ps>(k) * d);
  }
  ++hits_;
  return best;
}

}  // namespace tpsim::serving
