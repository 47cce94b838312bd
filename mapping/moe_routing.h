#pragma once
// Token routing of mixture-of-experts layers: how many tokens each expert receives in one
// layer and step (mapping.moe.routing). Pure functions of the routing settings, the token
// count and the layer; no randomness beyond a seeded, per-layer shuffle.
//
//   R = tokens x top_k assignments (every token picks top_k distinct experts)
//   balanced   every expert floor(R / E); the R mod E extra assignments spread evenly over the
//              expert ids (Bresenham: expert e gets one more when floor((e+1) rem / E) >
//              floor(e rem / E)), so they do not pile up on the first expert slot
//   zipf       the expert of popularity rank i weighs 1 / (i + 1)^s; R is apportioned by
//              weight (largest remainder, ties to the lower rank), no expert above `tokens`
//              (a token picks an expert once; the excess goes to the others by weight);
//              popularity rank i is expert HotOrder(E, seed, layer)[i]
//   trace      the trace's tokens per expert for the layer, as weights, apportioned to R the
//              same way (a trace taken at another batch size scales to this one)
//   capacity   capacity_factor > 0: each expert keeps at most ceil(capacity_factor x R / E)
//              assignments; the rest are dropped (they skip the experts: residual only)

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "configs/load.h"
#include "mapping.pb.h"
#include "model.pb.h"

namespace tpsim::mapping {

// A routing trace: tokens per expert by layer (CSV, one line per layer:
// "layer,tokens_expert_0,...,tokens_expert_{E-1}"; blank lines, lines starting with '#' and a
// header line whose first field is not a number are skipped).
struct RoutingTrace {
  std::map<uint32_t, std::vector<double>> layers;
  std::map<uint32_t, int> line;  // each layer's line in the file
};
// Reads a trace for `experts` experts. Errors (unreadable file, a field that is not a
// non-negative number, a line without 1 + experts fields, a layer twice, a line whose counts
// are all 0) are ConfigErrors at file:line:col naming `field`.
RoutingTrace ReadRoutingTrace(const std::string& path, uint32_t experts, const config::Location& referrer,
                              const std::string& field = "mapping.moe.routing_file");

enum class RoutingKind { kBalanced, kZipf, kTrace };
// The routing kind named by mapping.moe.routing; false when the name is unknown.
bool ParseRoutingKind(const std::string& name, RoutingKind* kind);

struct Routing {
  RoutingKind kind = RoutingKind::kBalanced;
  double zipf_s = 0;
  double capacity_factor = 0;  // 0: dropless
  uint64_t seed = 0;
  const RoutingTrace* trace = nullptr;  // kTrace
};

// What one layer's routing gives: assignments per expert (after capacity) and those dropped.
struct ExpertLoad {
  std::vector<uint64_t> tokens;
  uint64_t dropped = 0;
};
// `tokens` tokens, each to `top_k` of `experts` experts, at layer `layer`. Throws
// std::invalid_argument for a trace without that layer.
ExpertLoad RouteTokens(const Routing& r, uint32_t experts, uint32_t top_k, uint64_t tokens, uint32_t layer);

// The pieces, for tests.
std::vector<uint64_t> BalancedCounts(uint64_t assignments, uint32_t experts);
// `total` apportioned by `weights` (largest remainder; the units a run of equal remainders
// shares spread over it as BalancedCounts spreads them, so equal weights give balanced counts), none above
// `cap` (the excess re-apportioned over the others by weight). Needs cap x weights.size() >= total.
std::vector<uint64_t> Apportion(uint64_t total, const std::vector<double>& weights, uint64_t cap);
std::vector<double> ZipfWeights(uint32_t experts, double s);
// Popularity rank -> expert id: a Fisher-Yates shuffle of 0..experts-1 driven by splitmix64
// seeded with seed and layer.
std::vector<uint32_t> HotOrder(uint32_t experts, uint64_t seed, uint32_t layer);
// Most assignments one expert keeps: ceil(capacity_factor x assignments / experts); 0 factor:
// no limit (UINT64_MAX).
uint64_t ExpertCapacity(double capacity_factor, uint64_t assignments, uint32_t experts);
// Expert e's phase among `tokens` tokens of `experts` experts: floor(pi(e) x tokens / experts),
// pi(e) = a e mod experts, a = round(0.618034 experts) raised to the first value coprime with
// `experts` (8 experts: a = 5, pi = 0, 5, 2, 7, 4, 1, 6, 3). SplitBySource and ExpertTokens
// start each expert's cumulative rounding at its phase, so that experts with fewer assignments
// than there are sources (decode: n_e often 1) take rows from different tokens and sources.
// Without it every such expert took the last token: one rank sent every row of a step and one
// expert-parallel replica did all the expert work (Qwen3-30B-A3B, 16 tokens on 16 ranks, ep 4:
// 3.5x the decode step of ep 16, where each replica should do a quarter).
uint64_t ExpertPhase(uint64_t e, uint64_t experts, uint64_t tokens);
// Each expert's assignments split over sources in proportion to the sources' tokens, by
// cumulative rounding from the expert's phase: source s gets floor((n C(s+1) + ph) / T) -
// floor((n C(s) + ph) / T) of an expert's n, C(s) the tokens of sources before s, T all tokens,
// ph = ExpertPhase(e, E, T) < T (the counts sum to n). Rows: sources.
std::vector<std::vector<uint64_t>> SplitBySource(const std::vector<uint64_t>& per_expert,
                                                 const std::vector<uint64_t>& tokens_per_source);

// Which tokens each expert takes (the functional executor's assignment, mapping/functional.h):
// expert e with n_e of `tokens` tokens takes token i when floor((n_e (i+1) + ph) / tokens) >
// floor((n_e i + ph) / tokens), ph = ExpertPhase(e, E, tokens) (n_e <= tokens; a larger n_e
// throws std::invalid_argument). For every split of the tokens into consecutive ranges this
// gives each range exactly SplitBySource's count, so the partitioned layer and the
// unpartitioned reference route the same tokens to the same experts whatever the ranks. A token
// takes between 0 and E experts; balanced counts spread evenly (16 tokens, 8 experts of 4,
// top-2: phases 0, 10, 4, 14, 8, 2, 12, 6; tokens 3, 7, 11, 15 take experts 0 and 5, tokens
// 1, 5, 9, 13 experts 1 and 4, tokens 2, 6, 10, 14 experts 2 and 7, tokens 0, 4, 8, 12 experts
// 3 and 6: each token its top-2). Ascending token ids.
std::vector<std::vector<uint32_t>> ExpertTokens(const std::vector<uint64_t>& per_expert, uint64_t tokens);

// How mapping.moe splits the p ranks of a stage (mapping.tp x mapping.attention_dp:
// StageRanks; mapping.proto, MoeMapping). A replica is ep x tp consecutive ranks; within it
// local rank k belongs to slot Slot and is rank J of that slot's tp ranks:
//   tp_inner (default)  slot k / tp, J k % tp     (2 x 2: slots {0, 1}, {2, 3})
//   ep_inner            slot k % ep, J k / ep     (2 x 2: slots {0, 2}, {1, 3})
struct MoeGroups {
  int p = 1, ep = 1, tp = 1;                   // ranks, expert-parallel degree, ranks per expert
  uint32_t experts = 0;                        // E
  bool ep_inner = false;                       // mapping.moe.group_order
  int Span() const { return ep * tp; }         // ranks of one replica
  int Replicas() const { return p / Span(); }  // replicas of all the experts
  int Replica(int r) const { return r / Span(); }
  int Slot(int r) const { return ep_inner ? (r % Span()) % ep : (r % Span()) / tp; }
  int J(int r) const { return ep_inner ? (r % Span()) / ep : (r % Span()) % tp; }
  // Global rank of rank j of slot s in replica rep.
  int Rank(int rep, int s, int j) const { return rep * Span() + (ep_inner ? j * ep + s : s * tp + j); }
  uint32_t ExpertsPerSlot() const { return experts / static_cast<uint32_t>(ep); }
  int SlotOf(uint32_t expert) const { return static_cast<int>(expert / ExpertsPerSlot()); }
};
// ep 0 -> 1, tp 0 -> p / ep (at least 1); p: the stage's ranks (StageRanks). No checks
// (ValidateMapping makes them).
MoeGroups MoeGroupsOf(const config::Mapping& m, const config::Model& model, int p);
// Weight elements one rank holds for one MoE layer: the router (H x E), its slot's experts'
// shards (E / ep x 3 H Im / tp_moe) and the shared experts (3 H Is).
uint64_t MoeLayerWeightElems(const config::Model& model, const MoeGroups& g);

}  // namespace tpsim::mapping
