#pragma once
// `tpsim search`: the best mapping of an experiment's model and workload on its chip.
//
// The space (Space): TP x pipeline stages (powers of two whose product fits the chip),
// the partition of the attention projections (qkv, o) and of the MLP (gate_up, down),
// placement (inside each stage's region, or wafer-wide: mapping.span = chip, stage- or
// TP-major), collective, weights location and batch; the experiment's chip, model and
// workload stay. Each candidate runs as one replica of the model on tp x stages cores;
// the chip holds floor(cores / (tp x stages)) replicas, which only scales throughput
// (replicas are not simulated together: they would share DRAM stacks and links).
//
// Order and pruning (deterministic whatever --jobs): candidates are visited in chunks
// from two orders that share the simulated work (by mapping::EstimateProgram's task count)
// half and half: ascending lower bound of the objective (LowerBounds; equal bounds cheapest
// first), and ascending estimated work; a candidate is
// skipped when an evaluated point already dominates its bounds on every dimension of
// the front (total latency, tokens/s per chip, and TTFT / TPOT where the objective or
// an SLO uses them), strictly on one: then no point it could reach is on the front or
// the best. Pruning decisions depend only on the chunks evaluated before, so the same
// input gives the same front, best and database.
//
// Lower bounds, valid for the systolic cores' cost model (arch/chip.h GemmTime >=
// MACs / (R x C x arrays) cycles, matrix_utilization <= 1): each phase runs every
// layer's weight GEMMs, 2 x tokens x weight parameters FLOPs, on the tp cores of one
// stage at a time (the layers of one batch follow one another), so the phase takes at
// least that over tp x the core's peak. GPU-node chips and MoE models get no bound
// (0: never pruned).

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "arch/chip.h"
#include "sim/experiment.h"

namespace tpsim::search {

struct Candidate {
  uint32_t tp = 1, stages = 1, batch = 1;
  std::string attention, mlp;  // partitioners of qkv/o and of gate_up/down
  std::string placement, collective, weights;
  std::string span;  // "stage" (per-stage regions), "chip:stage_major" or "chip:tp_major" (wafer-wide)
  // mapping.attention_dp: a stage has tp x attention_dp cores (attention as that many
  // replicas of TP tp beside the MoE block, which spans them all).
  uint32_t attention_dp = 1;
  // MoE models: mapping.moe.ep (each expert slot then has tp x attention_dp / ep ranks,
  // mapping.moe.tp left to that default); 0 = the experiment's mapping.moe (dense models).
  uint32_t ep = 0;
  // MoE models: mapping.moe.tp (ranks per expert slot; 0 = the default, the stage's ranks / ep;
  // fewer replicate each slot), mapping.moe.all_to_all and mapping.moe.group_order ("" = the
  // experiment's).
  uint32_t moe_tp = 0;
  std::string all_to_all, group_order;
};

// What to search over; empty lists mean every registered choice (tp and stages: powers
// of two; batch and weights: the experiment's).
struct SpaceOptions {
  // ep: MoE models only; empty = every power of two that divides both num_experts and the
  // stage's ranks (tp x attention_dp). attention_dp: empty = the experiment's; a value that
  // does not divide the batch is left out (each attention replica takes whole sequences).
  // moe_tp, all_to_all, group_order: MoE models only; empty = the default moe.tp and the
  // experiment's all_to_all and group_order; a moe_tp with ep x moe_tp not dividing the
  // stage's ranks is left out.
  std::vector<uint32_t> tp, stages, batch, ep, attention_dp, moe_tp;
  std::vector<std::string> all_to_all, group_order;
  std::vector<std::string> partitions, placements, collectives, weights;
  std::vector<std::string>
      spans;  // default: stage, chip:stage_major, chip:tp_major (the last with stages > 1)
};

// Every candidate, in a fixed order (tp, attention_dp, ep, moe_tp, all_to_all,
// group_order, stages, attention, mlp, placement, collective, weights, batch; the last
// fastest).
std::vector<Candidate> Space(const sim::Experiment& base, const arch::Chip& chip, const SpaceOptions& opts);
// Where Space is empty: the options whose values left no candidate (each, given alone with the
// others at their defaults, empties it, or a set of them does together) and the rules they
// broke, as one line for the command's usage error (exit 2); "" where Space is not empty.
std::string EmptySpaceWhy(const sim::Experiment& base, const arch::Chip& chip, const SpaceOptions& opts);
// Where Space is not empty: each value of a numeric LIST (--tp, --stages, --attention-dp, --ep,
// --moe-tp, --batch) that no candidate can take, with the others' lists as given (--tp 128 on
// 16 cores, --stages 3 of 2 layers), as "--tp 128 leaves no candidate (<the rules>)", for the
// command's notes; those values were dropped silently.
std::vector<std::string> UnusedValues(const sim::Experiment& base, const arch::Chip& chip,
                                      const SpaceOptions& opts);

// The experiment of a candidate: the base with its mapping (and batch) changed and a
// name that says so.
sim::Experiment Apply(const sim::Experiment& base, const Candidate& c);

// Points the errors about the fields a candidate set at the search flag that chose the value:
// every field of `e` (Apply(base, c)) whose value differs from the base's gets the location
// "<command line: --tp 3>" when `space` lists that flag's values, "<tpsim search: --tp 8
// (default list)>" when the search's own list gave it. Fields left at the base's value keep the
// base file's line, which says that value. (A candidate's errors pointed at the base file's
// line of mapping.tp for a tp that came from --tp.)
void LocateCandidate(const sim::Experiment& base, const Candidate& c, const SpaceOptions& space,
                     sim::Experiment* e);

// What a candidate's lowered Program depends on: tp, stages, the partitions, collective,
// weights, batch and the cores the placement gives each stage (and the rank grid, for the
// collectives that read it: mesh_2d, and MoE models' all-to-alls), not the placement's name
// or span; at tp 1 not the collective (one core per stage: no group).
// (At tp 1 every partition lowers the same tasks, under its own op labels; the key keeps them
// apart, so each is run.) Candidates with equal
// keys lower the same Program and get the same metrics, so the search runs one of them. "" when the placement
// cannot be met (the run reports it).
std::string ProgramKey(const sim::Experiment& base, const arch::Chip& chip, const Candidate& c);
// The same from the cores PlacedCores gives (what ProgramKey depends on through the
// placement: every stage's cores by rank and rank grid; "" when it cannot be met).
std::string PlacedCores(const sim::Experiment& base, const arch::Chip& chip, const Candidate& c);
std::string ProgramKey(const Candidate& c, const std::string& cores);

// The mapping of a candidate: `base` with tp, stages, placement, span, collective, weights
// and partitions set (Apply without copying the experiment).
config::Mapping MappingOf(const config::Mapping& base, const Candidate& c);
// The workload of a candidate: `base` with its batch (Apply without copying the experiment).
config::Workload WorkloadOf(const config::Workload& base, const Candidate& c);

// Replicas of a candidate's tp x stages cores on the chip (a request stream is served by
// one group: the search counts 1 there).
uint32_t Replicas(const arch::Chip& chip, const Candidate& c);

struct Bounds {
  double prefill_ps = 0, decode_step_ps = 0, total_ps = 0;
  double energy_per_token_j = 0;  // chips with chip.energy; 0 otherwise
};
Bounds LowerBounds(const sim::Experiment& base, const arch::Chip& chip, const Candidate& c);

// The metrics of an evaluated candidate (ms, tokens/s per chip). A request stream
// (workload.requests, served as `tpsim serve` does): total_ms, ttft_ms and tpot_ms are the
// p99 request latency, TTFT and TPOT, tokens_per_s the output tokens per second of the one
// group that serves the whole stream, energy NaN (serve reports none), and a candidate
// that rejects a request (its KV cache cannot hold it) is not feasible.
struct Point {
  double total_ms = 0, ttft_ms = 0, tpot_ms = 0, tokens_per_s = 0;
  double energy_mj = 0;  // per token; NaN where the chip has no energy model
  bool complete = true;  // serving: no request rejected
};

// Indices of the points on the Pareto front (minimising each `min` column, maximising
// each `max` column), in input order. Ties: a point equal to another on every column
// stays.
std::vector<size_t> ParetoFront(const std::vector<std::vector<double>>& min_cols,
                                const std::vector<std::vector<double>>& max_cols);

struct SearchOptions {
  std::string objective = "latency";        // latency, ttft, tpot, throughput
  double slo_ttft_ms = 0, slo_tpot_ms = 0;  // 0: none
  uint64_t budget = 10000;                  // candidates simulated at most
  int jobs = 0;                             // 0: all cores
  bool prune = true;
  bool share = true;  // run one candidate per ProgramKey, copy its metrics to the others
  uint32_t shard = 0, shards = 1;
  std::string db;  // SQLite store ("" none)
  SpaceOptions space;
};

struct Found {
  Candidate c;
  uint32_t replicas = 0;
  Point p;
  size_t index = 0;  // in Space order
};

struct SearchResult {
  uint64_t candidates = 0, ok = 0, invalid = 0, errors = 0, pruned = 0, skipped = 0;
  uint64_t simulated = 0, reused = 0;  // reused: from the store
  uint64_t shared = 0;                 // metrics copied from a candidate with the same ProgramKey
  std::vector<Found> front;            // the Pareto front of feasible points, by total latency
  std::vector<Found> ranked;           // every feasible point, best first by the objective
  // Why candidates were invalid or failed: each distinct message with its count, most frequent
  // first (ties: the message first met in Space order), at most kReasons of them.
  static constexpr size_t kReasons = 3;
  std::vector<std::pair<std::string, uint64_t>> reasons;
};

// Runs the search (analytical engine); progress lines to `progress` when not null.
// Throws sweep::StoreError for a database it cannot use.
SearchResult Search(const sim::Experiment& base, const arch::Chip& chip, const SearchOptions& o,
                    std::ostream* progress);

// The `tpsim search` command line (words after "search"); returns the exit status.
int SearchCommand(const std::vector<std::string>& args);
extern const char* const kSearchUsage;

}  // namespace tpsim::search
