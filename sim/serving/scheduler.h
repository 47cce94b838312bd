#pragma once
// Iteration-level continuous batching, independent of any engine: the cost of an
// iteration comes from an injected function, so tests can pin hand-computed times.
//
// One iteration, at time `now` (requests in admission order, oldest first):
//   1. every running request gets work while the token budget
//      (max_tokens_per_iteration) lasts: a decode step (1 token; it first needs KV
//      blocks for its context + 1 token) or its next prefill chunk
//      (min(chunk_tokens, prefill left, budget) tokens);
//   2. waiting requests that have arrived are admitted in FIFO order while
//      running < max_running, budget is left and their KV fits: a new or recomputed
//      request reserves the blocks of its whole prefill; one that arrives with its KV
//      (disaggregated decode group) reserves its context + 1 token. The first that
//      does not fit stops admission (no overtaking);
//   3. the iteration takes cost(chunks); at its end prefill chunks and decode steps
//      take effect. Finishing a prefill yields a token (the first token, or the next
//      one after a recompute); each decode step yields one.
// Preemption (recompute): when a decode step needs a block and none is free, the
// newest running request (last admitted) is preempted: its blocks are freed, and it
// goes back to the front of the waiting queue to re-prefill prompt + generated
// tokens later. When the newest is the request itself, it is the one preempted.
// KV blocks in use never exceed capacity_blocks. A request whose KV at its peak (prompt +
// output - 1 tokens: the last output token's K,V are never written) cannot fit in the whole
// capacity is rejected up front (it could never finish); every other request finishes.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "llm/opgraph.h"
#include "sim/serving/requests.h"

namespace tpsim::serving {

struct SchedulerConfig {
  uint32_t max_running = 256;
  uint32_t max_tokens = 2048;    // per iteration
  uint32_t chunk_tokens = 2048;  // prefill chunk
  uint32_t block_tokens = 16;    // KV block
  uint64_t capacity_blocks = 0;
  bool prefill_only = false;  // disaggregated prefill group: requests leave after their first token
  // The model's positions (max_position_embeddings; 0: no limit): a request whose prompt and
  // output tokens exceed them is rejected (too_long), as an inference engine refuses it.
  uint64_t max_context = 0;
};

// Whether `r`'s prompt and output tokens exceed `max_context` positions (0: no limit): such a
// request is rejected (too_long), not timed.
bool LongerThanPositions(const Request& r, uint64_t max_context);

// Time of one iteration given its chunks (in scheduling order).
using IterationCost = std::function<Ps(const std::vector<llm::SeqChunk>&)>;
// Time to move the KV cache of `tokens` tokens from the prefill to the decode group.
using TransferCost = std::function<Ps(uint64_t tokens)>;

struct RequestStats {
  uint32_t id = 0;
  Ps arrival_ps = 0;
  Ps first_token_ps = -1;
  Ps finish_ps = -1;
  Ps handoff_ps = -1;  // disaggregated: KV in the decode group (transfer done)
  uint32_t prompt_tokens = 0, output_tokens = 0;
  uint32_t preemptions = 0;
  bool rejected = false;
  bool too_long = false;  // rejected: longer than the model's positions
};

struct KvSample {
  Ps time_ps = 0;            // end of the iteration
  Ps start_ps = 0;           // start of the iteration
  uint64_t used_blocks = 0;  // held during the iteration (before finished requests free theirs)
  uint32_t running = 0, waiting = 0;
  uint32_t tokens = 0;                             // tokens processed by the iteration
  uint32_t prefill_tokens = 0, decode_tokens = 0;  // of which prefill chunks / decode steps
  uint32_t sequences = 0;                          // requests that got work (chunks)
  std::string group;                               // "fused", "prefill" or "decode"
};

struct ServeOutcome {
  std::vector<RequestStats> requests;  // by request id
  std::vector<KvSample> kv;            // every iteration, per group in time order
  uint64_t iterations = 0;
  uint64_t capacity_blocks = 0;  // fused / decode group
  uint64_t prefill_capacity_blocks = 0;
};

// Entry of a request into a group.
struct Arrival {
  uint32_t request = 0;  // index into the request vector
  Ps ready_ps = 0;
  uint32_t generated = 0;   // tokens already generated
  bool kv_present = false;  // its KV (prompt + generated - 1 tokens) is moved in with it
};

// Runs one group. `stats` (indexed by request) is updated: first_token, finish,
// handoff (prefill_only: the time the request left), preemptions, rejected.
void RunGroup(const std::vector<Request>& reqs, std::vector<Arrival> arrivals, const SchedulerConfig& cfg,
              const IterationCost& cost, const std::string& group, std::vector<RequestStats>* stats,
              std::vector<KvSample>* kv, uint64_t* iterations);

// Prefill and decode on the same cores.
ServeOutcome RunFused(const std::vector<Request>& reqs, const SchedulerConfig& cfg,
                      const IterationCost& cost);

// Prefill group (prefill_only), then each request's KV (prompt tokens) moved to the
// decode group one transfer at a time in the order prefills finish (the network
// link between the groups is one FIFO resource), then the decode group. A request is
// rejected up front, before any prefill, when its peak KV (prompt + output - 1 tokens; none
// for one output token, which the prefill makes) cannot fit the decode group's capacity or its
// prompt the prefill group's (or it is longer than the positions).
ServeOutcome RunDisaggregated(const std::vector<Request>& reqs, SchedulerConfig prefill_cfg,
                              const IterationCost& prefill_cost, const SchedulerConfig& decode_cfg,
                              const IterationCost& decode_cost, const TransferCost& transfer);

}  // namespace tpsim::serving
