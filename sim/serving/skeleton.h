#pragma once
// Exact fast timing of continuous-batching iterations with the analytical engine.
//
// An iteration's Program (mapping::LowerIteration) depends on its chunks in two ways
// only: attention (scores, softmax, PV) is emitted per chunk with the chunk's own
// context, and the memory plan depends on the total context L = sum(cached + new).
// Everything else (GEMMs, norms, collectives, stage sends, weight streaming) is a
// function of M = sum(new_tokens) rows. When the KV cache stays in SRAM and nothing
// spills, the attention of one (layer, rank) is a chain of compute tasks on one core
// whose external inputs (q, the KV write) all precede it, so the chain ends at
// max(inputs, core free) + D, D = the sum of its tasks' durations over all chunks.
// The analytical schedule is max-plus (start = max(deps, resource free), end = start +
// duration), so the makespan of the iteration is a max-plus polynomial in D:
//
//     makespan(D) = max_k (c_k + k * D),   k = number of attention chains on a path.
//
// A Skeleton is that polynomial for one M, obtained once from one lowered Program (the
// "skeleton": M rows, total context L_s, a few small chunks) by a symbolic pass over the
// engine's schedule (sim::ListSchedule over max-plus polynomials) with the per-task
// durations the engine computed. It applies exactly
// to every chunk list with the same M and L <= L_s whose attention spills nothing (the
// memory plan is monotone in L: KV-in-SRAM and no-spill at L_s imply both at L).
// When the KV cache is in DRAM (context beyond what fits in SRAM beside the weights), the
// memory plan no longer depends on L at all, and each chain also reads its chunks' K and V
// from DRAM: reads queue on the core's DRAM channel, each compute waits for its read. One
// skeleton per M then serves every such context; the iteration is timed by replaying the
// skeleton's schedule with each chain's max-plus map (ChainFn) for the real chunks.
// Where the GEMMs spill (the KV fills most of SRAM), the spills depend on the context
// itself: a skeleton lowered at exactly the iteration's context (with few small chunks)
// serves that iteration alone, still cheaper than its own Program with all its chunks.
// Anything else (attention spilling, unequal heads or KV heads per rank, KV in DRAM that
// is not stacked under the cores, another engine) is not handled here: Makespan returns
// -1 and the caller lowers the whole Program.
//
// The engine's schedule (sim/schedule.h) picks the next task of a core or channel by
// readiness, so its order may depend on durations; the polynomial holds for one order of
// every queue (given those orders the schedule is max-plus).
//
// Self-checks when a skeleton is built (any failure: the skeleton is not used):
//   - no transfer or memory task took longer than alone: the analytical engine shares
//     links among flows overlapping in time, so a shared flow's time moves with the
//     chains' durations; one such skeleton turns skeletons off for the layout;
//   - replaying the schedule (ListSchedule in the engine's order) with the engine's
//     durations reproduces every task's end;
//   - every core, channel and link serves its tasks in the same order when every chain task's
//     duration (and hold of its channel) is 0 or 16 times the skeleton's: the order does
//     not follow the chains' durations at those extremes (a check at three points, not
//     a proof for every duration; EngineCost's verify mode compares whole runs);
//   - each chain's tasks follow one another in its core's and its channel's queues, with
//     no other task of those queues timed between them;
//   - every attention task's duration equals the cost model's (mapping/cost.h) for the
//     chunk's shapes, which is how real chunks are timed;
//   - the polynomial (or the replay) at the skeleton's own chunks gives the engine's makespan.

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "arch/chip.h"
#include "llm/opgraph.h"
#include "mapping.pb.h"
#include "mapping/mapping.h"
#include "model.pb.h"
#include "sim/engine.h"
#include "sim/schedule.h"
#include "sim/serving/requests.h"

namespace tpsim::serving {

class SkeletonCost {
 public:
  // `plan_layers`: the layers the iteration's memory plan sizes for (LowerOptions::plan_layers;
  // 0: the `layers` lowered), as the Programs it stands for are lowered.
  SkeletonCost(const arch::Chip& chip, const config::Model& model, const config::Mapping& mapping,
               uint32_t layers, std::string dtype, uint32_t plan_layers = 0);
  ~SkeletonCost();
  // The analytical makespan of LowerIteration(chunks) with plan_layers (before scaling to all layers),
  // or -1 when the fast path does not apply.
  Ps Makespan(const std::vector<llm::SeqChunk>& chunks);
  uint64_t skeletons() const { return built_; }  // skeleton Programs lowered
  uint64_t hits() const { return hits_; }        // Makespan calls answered
  uint64_t kv_dram() const { return kv_dram_; }  // of which with the KV cache in DRAM

  // Durations of one chunk's attention tasks on a core holding `heads` query heads, `stack` of
  // them per GEMM (mapping::AttentionSpanShapes), as the analytical engine times
  // LowerIteration's tasks.
  struct ChunkPs {
    Ps scores = 0, softmax = 0, pv = 0;
  };
  ChunkPs ChunkAttention(const llm::SeqChunk& c, uint64_t heads, uint64_t stack = 1);

 private:
  static constexpr Ps kNone = std::numeric_limits<Ps>::min();  // no time (max-plus zero)
  // How a chain's KV reads are timed: stacked DRAM (no network path) on `channel`:
  // DramTime(channel, bytes), holding the channel for ChannelBusyTime(channel, bytes).
  struct ReadSig {
    int core = 0, channel = 0;
  };
  // The chain of one (layer, rank) as a max-plus map: it ends at max(X + a, Y + b) and
  // leaves its channel free at Y + r, X = max(core free, the inputs of its first compute),
  // Y = max(channel free, the inputs of its first read); b = kNone and r = 0 without reads.
  struct ChainFn {
    Ps a = 0, b = 0, r = 0;
  };
  struct Skeleton {
    bool dram = false;                           // KV cache in DRAM: the chains read it; timed by Replay
    uint64_t heads = 0, stack = 1, kv_cols = 0;  // query heads per core, stacked per GEMM
    std::vector<Ps> poly;                        // KV in SRAM: c_k (kNone when no path has k chains)
    // KV in DRAM: the skeleton's tasks with each chain collapsed onto its first task.
    struct Node {
      uint32_t dep_begin = 0, dep_end = 0;
      Ps dur = 0;
      int core = 0;
      Ps busy = 0;                           // a memory task: how long it holds its channel
      int channel = 0;                       // a memory task's channel, a transfer's first link
      sim::Queue queue = sim::Queue::kNone;  // QueueOf(kind); kNone on chain tasks
      bool chain_rest = false;               // a chain's task after its first
      int32_t chain = -1;                    // a chain's first task: index into chains
    };
    struct Chain {
      int core = 0, channel = 0;
      uint32_t x_begin = 0, x_end = 0, y_begin = 0, y_end = 0;  // into ext
      uint32_t last = 0;
      uint32_t sig = 0;
    };
    std::vector<Node> nodes;
    std::vector<uint32_t> deps, ext;
    std::vector<uint32_t> order;  // the engine's order (sim::Dispatcher) of the nodes
    std::vector<Chain> chains;
    std::vector<ReadSig> sigs;
    int num_cores = 0, num_channels = 0, num_links = 0;
  };
  struct PerRows {
    std::map<uint64_t, Skeleton> by_context;  // L_s -> skeleton (ok ones), KV in SRAM
    uint64_t bad_from = UINT64_MAX;           // skeletons at L >= bad_from are not usable
    std::unique_ptr<Skeleton> dram;           // KV in DRAM (any context beyond the cap)
    bool dram_tried = false;
  };
  enum class Why { kOk, kMemory, kOther };
  // exact: the skeleton may spill outside attention (it then serves this context only).
  Why Build(uint32_t rows, uint64_t context, Skeleton* out, bool exact = false);
  uint64_t Avail(uint64_t context) const;
  uint64_t AttentionTransient(const llm::SeqChunk& c, uint64_t heads, uint64_t kv_cols, bool dram) const;
  Ps ReadPs(const ReadSig& s, uint64_t bytes) const;
  Ps ReadBusyPs(const ReadSig& s, uint64_t bytes) const;
  ChainFn Fn(const std::vector<llm::SeqChunk>& chunks, const Skeleton& sk, const ReadSig* sig);
  // The schedule (sim::ListSchedule) of a KV-in-DRAM skeleton with the chains' maps `fns`.
  Ps Replay(const Skeleton& sk, const std::vector<ChainFn>& fns);
  struct SkeletonGraph;  // ListSchedule's graph and algebras (skeleton.cc)
  struct ReplayTimes;
  struct SymbolicTimes;

  const arch::Chip& chip_;
  const config::Model& model_;
  config::Mapping mapping_;
  uint32_t layers_;
  mapping::LowerOptions lower_;  // LowerIteration's options (plan_layers)
  std::string dtype_;
  uint64_t d_ = 2, hd_ = 0, kv_cols_max_ = 0;
  uint64_t sram_ = 0, weights_resident_ = 0, kv_per_token_ = 0, context_cap_ = 0;
  bool stacked_ = false;  // every core's DRAM channel is stacked under it
  bool shared_ = false;   // a skeleton's flows shared a link: no skeletons
  std::unique_ptr<sim::Engine> engine_;
  std::unordered_map<uint32_t, PerRows> rows_;
  Skeleton exact_;  // the last skeleton at one exact context (GEMMs spilling)
  std::vector<Ps> ends_, core_free_, channel_free_, link_free_;  // Replay's buffers
  std::vector<ChainFn> fns_;
  struct ChunkKey {
    uint32_t s, lt;
    uint64_t heads, stack;
    bool operator==(const ChunkKey&) const = default;
  };
  struct ChunkHash {
    size_t operator()(const ChunkKey& k) const {
      return std::hash<uint64_t>()((uint64_t{k.s} << 32 | k.lt) * 0x9E3779B97F4A7C15ull ^ k.heads ^
                                   k.stack << 40);
    }
  };
  std::unordered_map<ChunkKey, ChunkPs, ChunkHash> chunk_ps_;  // ChunkAttention, memoised
  uint64_t built_ = 0, hits_ = 0, kv_dram_ = 0;
};

}  // namespace tpsim::serving
