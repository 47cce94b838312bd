// SkeletonCost's chains as max-plus maps (Fn) and the replay of a skeleton's schedule
// with them (Replay): sim/serving/skeleton.h.

#include <algorithm>
#include <limits>
#include <span>
#include <stdexcept>

#include "mapping/cost.h"
#include "sim/schedule.h"
#include "sim/serving/skeleton.h"

namespace tpsim::serving {

SkeletonCost::ChainFn SkeletonCost::Fn(const std::vector<llm::SeqChunk>& chunks, const Skeleton& sk,
                                       const ReadSig* sig) {
  // Max-plus in (X, Y): a value is max(X + x, Y + y).
  struct V {
    Ps x, y;
  };
  auto add = [](V v, Ps t) { return V{v.x == kNone ? kNone : v.x + t, v.y == kNone ? kNone : v.y + t}; };
  auto vmax = [](V a, V b) { return V{std::max(a.x, b.x), std::max(a.y, b.y)}; };
  // `dram` is when the channel is free: a read starts there, holds the channel for its
  // busy time and ends `rd` after its start (sim/schedule.h).
  V core{0, kNone}, dram{kNone, 0};
  for (const llm::SeqChunk& c : chunks) {
    const ChunkPs t = ChunkAttention(c, sk.heads, sk.stack);
    if (sig) {
      const uint64_t bytes = (uint64_t{c.cached} + c.new_tokens) * sk.kv_cols * d_;
      const Ps rd = ReadPs(*sig, bytes), hold = ReadBusyPs(*sig, bytes);
      core = add(vmax(core, add(dram, rd)), t.scores + t.softmax);
      dram = add(dram, hold);
      core = add(vmax(core, add(dram, rd)), t.pv);
      dram = add(dram, hold);
    } else {
      core = add(core, t.scores + t.softmax + t.pv);
    }
  }
  return {core.x, core.y, dram.y};
}

// The collapsed skeleton as sim::ListSchedule's graph, in the engine's order: chain nodes
// have no deps and no queue of their own (ReplayTimes times a chain's first node from its
// inputs and queues).
struct SkeletonCost::SkeletonGraph {
  const Skeleton& sk;
  std::span<const uint32_t> order() const { return sk.order; }
  std::span<const uint32_t> deps(size_t i) const {
    const Skeleton::Node& nd = sk.nodes[i];
    return {sk.deps.data() + nd.dep_begin, nd.dep_end - nd.dep_begin};
  }
  sim::Queue queue(size_t i) const { return sk.nodes[i].queue; }
  int resource(size_t i) const {
    return sk.nodes[i].queue == sim::Queue::kCompute ? sk.nodes[i].core : sk.nodes[i].channel;
  }
};

// sim::ListSchedule's numeric algebra on the collapsed skeleton: a chain's first node ends
// the chain by its ChainFn, max(X + a, Y + b), and frees the core at that end and the
// chain's channel at Y + r; its other nodes take no time of their own.
struct SkeletonCost::ReplayTimes {
  using Time = Ps;
  const Skeleton& sk;
  const std::vector<ChainFn>& fns;
  Ps* ends;
  Ps* core_free;
  Ps* channel_free;
  Ps* link_free;
  Ps makespan = 0;

  Ps& free(sim::Queue q, int r) const {
    return q == sim::Queue::kCompute ? core_free[r] : q == sim::Queue::kDram ? channel_free[r] : link_free[r];
  }
  static Ps Origin() { return 0; }
  Ps EndOf(uint32_t d) const { return ends[d]; }
  Ps FreeAt(sim::Queue q, int r) const { return free(q, r); }
  static Ps Later(Ps a, Ps b) { return std::max(a, b); }
  Ps Finish(size_t i, Ps start) {
    const Skeleton::Node& nd = sk.nodes[i];
    if (nd.chain_rest) return start;
    if (nd.chain >= 0) {
      const Skeleton::Chain& ch = sk.chains[nd.chain];
      Ps x = core_free[ch.core], y = channel_free[ch.channel];
      for (uint32_t j = ch.x_begin; j < ch.x_end; ++j) x = std::max(x, ends[sk.ext[j]]);
      for (uint32_t j = ch.y_begin; j < ch.y_end; ++j) y = std::max(y, ends[sk.ext[j]]);
      const ChainFn& f = fns[ch.sig];
      const Ps e = std::max(x + f.a, f.b == kNone ? kNone : y + f.b);
      core_free[ch.core] = e;
      if (f.b != kNone) channel_free[ch.channel] = y + f.r;
      ends[ch.last] = e;
      makespan = std::max(makespan, e);
      return e;
    }
    ends[i] = start + nd.dur;
    makespan = std::max(makespan, ends[i]);
    return ends[i];
  }
  void Release(size_t i, sim::Queue q, int r, Ps start, Ps end) {
    free(q, r) = q == sim::Queue::kDram ? start + sk.nodes[i].busy : end;
  }
};

Ps SkeletonCost::Replay(const Skeleton& sk, const std::vector<ChainFn>& fns) {
  ends_.assign(sk.nodes.size(), 0);
  core_free_.assign(static_cast<size_t>(sk.num_cores), 0);
  channel_free_.assign(static_cast<size_t>(sk.num_channels), 0);
  link_free_.assign(static_cast<size_t>(sk.num_links), 0);
  ReplayTimes times{sk, fns, ends_.data(), core_free_.data(), channel_free_.data(), link_free_.data()};
  sim::ListSchedule(SkeletonGraph{sk}, times);
  return times.makespan;
}

}  // namespace tpsim::serving
