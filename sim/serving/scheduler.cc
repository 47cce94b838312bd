#include "sim/serving/scheduler.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <stdexcept>

#include "sim/engine.h"

namespace tpsim::serving {

namespace {

uint64_t Blocks(uint64_t tokens, uint32_t block) { return (tokens + block - 1) / block; }

// at + dt, or sim::TimeOverflowError naming `what` when that passes the 2^63 ps clock.
Ps Later(Ps at, Ps dt, const std::string& what) {
  if (dt <= std::numeric_limits<Ps>::max() - at) return at + dt;
  throw sim::TimeOverflowError(
      what + " starts at " + sim::DaysText(static_cast<double>(at) * 1e-12) + " and takes " +
      sim::DaysText(static_cast<double>(dt) * 1e-12) + ": the stream runs past " + sim::kClockLimit +
      "; check the chip's bandwidths and compute, or serve fewer or shorter requests");
}

struct Live {
  uint32_t req = 0;
  uint64_t admit_seq = 0;
  uint32_t generated = 0;
  uint64_t kv_tokens = 0;    // tokens whose K,V are in the cache
  uint64_t target = 0;       // prefill target (prompt + generated at admission); 0 when decoding
  uint64_t blocks = 0;       // blocks held
  uint32_t step_tokens = 0;  // work scheduled this iteration
  bool decode_step = false;
};

// Rejects `r` (marks `st`) when it could never finish in a group of `cfg`: longer than the
// model's positions, or more KV than the whole capacity at its peak: its prompt in a
// prefill-only group, else prompt + output - 1 tokens (the prefill writes the prompt's K,V
// and each of the output - 1 decode steps one more: the last output token is never fed back;
// prompt + output rejected requests that fit). `decode_group`: the decode group of a
// disaggregated run, which a request of one output token never enters (its prefill makes it).
bool RejectUpFront(const Request& r, const SchedulerConfig& cfg, RequestStats* st,
                   bool decode_group = false) {
  const uint64_t peak = uint64_t{r.prompt_tokens} + std::max<uint32_t>(r.output_tokens, 1) - 1;
  const uint64_t need = cfg.prefill_only                       ? uint64_t{r.prompt_tokens}
                        : decode_group && r.output_tokens <= 1 ? 0
                                                               : peak;
  const bool too_long = LongerThanPositions(r, cfg.max_context);
  if (!too_long && Blocks(need, std::max<uint32_t>(1, cfg.block_tokens)) <= cfg.capacity_blocks) return false;
  st->rejected = true;
  st->too_long = too_long;
  return true;
}

}  // namespace

bool LongerThanPositions(const Request& r, uint64_t max_context) {
  return max_context > 0 && uint64_t{r.prompt_tokens} + r.output_tokens > max_context;
}

void RunGroup(const std::vector<Request>& reqs, std::vector<Arrival> arrivals, const SchedulerConfig& cfg,
              const IterationCost& cost, const std::string& group, std::vector<RequestStats>* stats,
              std::vector<KvSample>* kv, uint64_t* iterations) {
  const uint32_t B = std::max<uint32_t>(1, cfg.block_tokens);
  const uint32_t budget0 = std::max<uint32_t>(1, cfg.max_tokens);
  const uint32_t chunk = std::max<uint32_t>(1, cfg.chunk_tokens);
  const uint32_t max_running = std::max<uint32_t>(1, cfg.max_running);
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const Arrival& a, const Arrival& b) { return a.ready_ps < b.ready_ps; });
  // Requests that could never finish alone are rejected.
  std::vector<Arrival> ok;
  for (const Arrival& a : arrivals)
    if (!RejectUpFront(reqs[a.request], cfg, &(*stats)[a.request])) ok.push_back(a);
  size_t next = 0;
  std::deque<Live> waiting;
  std::vector<Live> running;
  uint64_t used = 0, seq = 0;
  Ps now = 0;
  auto make_live = [&](const Arrival& a) {
    Live l;
    l.req = a.request;
    l.generated = a.generated;
    if (a.kv_present) {
      l.kv_tokens = uint64_t{reqs[a.request].prompt_tokens} + a.generated - 1;
    } else {
      l.target = uint64_t{reqs[a.request].prompt_tokens} + a.generated;
    }
    return l;
  };
  std::vector<llm::SeqChunk> chunks;
  while (true) {
    while (next < ok.size() && ok[next].ready_ps <= now) waiting.push_back(make_live(ok[next++]));
    if (running.empty() && waiting.empty()) {
      if (next >= ok.size()) break;
      now = std::max(now, ok[next].ready_ps);
      continue;
    }
    uint32_t budget = budget0;
    chunks.clear();
    // 1. Running requests, oldest first.
    for (size_t i = 0; i < running.size(); ++i) {
      Live& l = running[i];
      l.step_tokens = 0;
      l.decode_step = false;
      if (budget == 0) continue;
      if (l.target > 0) {
        uint64_t left = l.target - l.kv_tokens;
        l.step_tokens = static_cast<uint32_t>(std::min<uint64_t>({left, chunk, budget}));
      } else {
        uint64_t need = Blocks(l.kv_tokens + 1, B);
        bool self_preempted = false;
        while (l.blocks < need && used - l.blocks + need > cfg.capacity_blocks) {
          // Preempt the newest running request (the last element: admission order).
          Live victim = running.back();
          running.pop_back();
          used -= victim.blocks;
          RequestStats& st = (*stats)[victim.req];
          st.preemptions++;
          Live back;
          back.req = victim.req;
          back.generated = victim.generated;
          back.target = uint64_t{reqs[victim.req].prompt_tokens} + victim.generated;
          waiting.push_front(back);
          if (running.size() == i) {
            self_preempted = true;
            break;
          }
        }
        if (self_preempted) break;
        used += need > l.blocks ? need - l.blocks : 0;
        l.blocks = std::max(l.blocks, need);
        l.step_tokens = 1;
        l.decode_step = true;
      }
      budget -= l.step_tokens;
    }
    // 2. Admission.
    while (!waiting.empty() && running.size() < max_running && budget > 0) {
      Live& w = waiting.front();
      uint64_t need = w.target > 0 ? Blocks(w.target, B) : Blocks(w.kv_tokens + 1, B);
      if (used + need > cfg.capacity_blocks) break;
      Live l = w;
      waiting.pop_front();
      l.admit_seq = seq++;
      l.blocks = need;
      used += need;
      if (l.target > 0) {
        l.step_tokens = static_cast<uint32_t>(std::min<uint64_t>({l.target - l.kv_tokens, chunk, budget}));
        l.decode_step = false;
      } else {
        l.step_tokens = 1;
        l.decode_step = true;
      }
      budget -= l.step_tokens;
      running.push_back(l);
    }
    for (const Live& l : running)
      if (l.step_tokens > 0) chunks.push_back({l.step_tokens, static_cast<uint32_t>(l.kv_tokens)});
    if (chunks.empty()) {
      if (next >= ok.size())
        throw std::logic_error("serving: scheduler made no progress with no arrivals left");
      now = std::max(now, ok[next].ready_ps);
      continue;
    }
    const uint64_t used_during = used;
    Ps dt = cost(chunks);
    if (dt < 0) throw std::logic_error("serving: negative iteration cost");
    const Ps start = now;
    now = Later(now, dt, "iteration " + std::to_string(*iterations + 1) + " of the " + group + " group");
    ++*iterations;
    uint32_t tokens = 0, prefill_tokens = 0, decode_tokens = 0;
    std::vector<Live> still;
    for (Live& l : running) {
      tokens += l.step_tokens;
      (l.decode_step ? decode_tokens : prefill_tokens) += l.step_tokens;
      bool produced = false;
      if (l.step_tokens > 0) {
        l.kv_tokens += l.step_tokens;
        if (l.decode_step || l.kv_tokens == l.target) {
          produced = true;
          l.target = 0;
        }
      }
      RequestStats& st = (*stats)[l.req];
      if (produced) {
        l.generated++;
        if (st.first_token_ps < 0) st.first_token_ps = now;
      }
      bool done = l.generated >= reqs[l.req].output_tokens;
      bool leave = cfg.prefill_only && produced;
      if (done) st.finish_ps = now;
      if (leave && !done) st.handoff_ps = now;
      if (done || leave) {
        used -= l.blocks;
      } else {
        still.push_back(l);
      }
    }
    running = std::move(still);
    if (used_during > cfg.capacity_blocks) throw std::logic_error("serving: KV use exceeds capacity");
    KvSample s;
    s.time_ps = now;
    s.used_blocks = used_during;
    s.running = static_cast<uint32_t>(running.size());
    s.waiting = static_cast<uint32_t>(waiting.size());
    s.tokens = tokens;
    s.start_ps = start;
    s.prefill_tokens = prefill_tokens;
    s.decode_tokens = decode_tokens;
    s.sequences = static_cast<uint32_t>(chunks.size());
    s.group = group;
    kv->push_back(s);
  }
}

namespace {

std::vector<RequestStats> NewStats(const std::vector<Request>& reqs) {
  std::vector<RequestStats> stats(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    stats[i].id = reqs[i].id;
    stats[i].arrival_ps = reqs[i].arrival_ps;
    stats[i].prompt_tokens = reqs[i].prompt_tokens;
    stats[i].output_tokens = reqs[i].output_tokens;
  }
  return stats;
}

}  // namespace

ServeOutcome RunFused(const std::vector<Request>& reqs, const SchedulerConfig& cfg,
                      const IterationCost& cost) {
  ServeOutcome out;
  out.requests = NewStats(reqs);
  out.capacity_blocks = cfg.capacity_blocks;
  std::vector<Arrival> arrivals;
  for (size_t i = 0; i < reqs.size(); ++i)
    arrivals.push_back({static_cast<uint32_t>(i), reqs[i].arrival_ps, 0, false});
  RunGroup(reqs, arrivals, cfg, cost, "fused", &out.requests, &out.kv, &out.iterations);
  return out;
}

ServeOutcome RunDisaggregated(const std::vector<Request>& reqs, SchedulerConfig prefill_cfg,
                              const IterationCost& prefill_cost, const SchedulerConfig& decode_cfg,
                              const IterationCost& decode_cost, const TransferCost& transfer) {
  ServeOutcome out;
  out.requests = NewStats(reqs);
  out.capacity_blocks = decode_cfg.capacity_blocks;
  out.prefill_capacity_blocks = prefill_cfg.capacity_blocks;
  prefill_cfg.prefill_only = true;
  // A request the decode group could never finish (its peak KV over its capacity, or
  // longer than the positions) is rejected before it takes any prefill time, as in fused
  // mode; the prefill group rejects one whose prompt does not fit its own capacity.
  SchedulerConfig decode_only = decode_cfg;
  decode_only.prefill_only = false;
  std::vector<Arrival> arrivals;
  for (size_t i = 0; i < reqs.size(); ++i)
    if (!RejectUpFront(reqs[i], decode_only, &out.requests[i], /*decode_group=*/true))
      arrivals.push_back({static_cast<uint32_t>(i), reqs[i].arrival_ps, 0, false});
  RunGroup(reqs, arrivals, prefill_cfg, prefill_cost, "prefill", &out.requests, &out.kv, &out.iterations);
  // Requests that left the prefill group, in the order they left.
  std::vector<uint32_t> moved;
  for (size_t i = 0; i < reqs.size(); ++i)
    if (out.requests[i].handoff_ps >= 0) moved.push_back(static_cast<uint32_t>(i));
  std::stable_sort(moved.begin(), moved.end(), [&](uint32_t a, uint32_t b) {
    return out.requests[a].handoff_ps < out.requests[b].handoff_ps;
  });
  Ps link_free = 0;
  std::vector<Arrival> decode;
  for (uint32_t i : moved) {
    Ps start = std::max(out.requests[i].handoff_ps, link_free);
    Ps done =
        Later(start, transfer(reqs[i].prompt_tokens), "the KV transfer of request " + std::to_string(i));
    link_free = done;
    out.requests[i].handoff_ps = done;
    decode.push_back({i, done, 1, true});
  }
  RunGroup(reqs, decode, decode_cfg, decode_cost, "decode", &out.requests, &out.kv, &out.iterations);
  return out;
}

}  // namespace tpsim::serving
