#pragma once
// `tpsim agree`: the analytical engine against the TLM engine over a seeded random
// family of valid experiments.
//
// Experiment `index` of seed `seed` is drawn by RandomExperiment from a SplitMix64
// stream seeded with (seed, index, attempt) only, so it is the same on every
// machine and independent of --count, --jobs and the other experiments. A draw the
// validator or the lowering rejects, or whose Program would cost the TLM engine
// more than kMaxPacketHops packet-hops, is redrawn with the next attempt.
//
// The family:
//   chip      mesh, torus, ring (one way or both), wafer (dies of 2x2 .. 4x4 cores with
//             die-to-die links) or switch; 4 .. 1024 cores; 250 .. 2000 MHz; 32x32 ..
//             128x128 systolic arrays; SRAM 1 .. 256 MiB per core; links 10 .. 1000
//             GB/s (log-uniform); DRAM stacked under every core (30 .. 200 GB/s) or
//             HBM3 stacks (819.2 GB/s) at edge midpoints or corners (grids), or at
//             evenly spaced nodes (rings, switches), with one or two attach points;
//             capacity_bytes 0 (not checked, mapping::ValidateDramCapacity): the engines'
//             times do not depend on it, and the family drawn before that check existed
//             (where a 4 GiB channel held up to 35 GB of weights) stays the same
//   model     a dense catalog model (llm::CatalogNames() without experts), 1 .. 8
//             layers simulated; with Family::kMoe an MoE catalog model instead, with
//             mapping.moe.ep a power of two dividing tp and its experts, routing
//             balanced or Zipf (s = 1.2)
//   workload  batch 1 .. 4, prompt 16 .. 1024 tokens, 1 .. 4 decode steps
//   mapping   every partitioner and collective, the placements block, linear,
//             linear_interleave, random, ring and snake (fixed, so that a placement
//             added later does not change the draws), tp 1 .. 32 and
//             pipeline stages 1 .. 8 within the chip
// Sizes are drawn so that a TLM run takes about a second on average.

#include <cstdint>
#include <string>
#include <vector>

#include "experiment.pb.h"

namespace tpsim::sim::agree {

// At most this many (4 KiB packet x hop) steps in a drawn Program (TLM cost bound).
inline constexpr uint64_t kMaxPacketHops = 3'000'000;

// One drawn experiment: the config (model by catalog name, chip inline) and how
// many attempts it took.
struct Drawn {
  config::Experiment cfg;
  uint32_t attempt = 0;
};

// Which catalog models the family draws: dense ones (the default; every figure of the
// README's "TLM vs analytical" before MoE) or mixture-of-experts ones (`--family moe`).
enum class Family { kDense, kMoe };

// Experiment `index` of the family of `seed` (see above). Throws std::runtime_error
// when no valid draw is found in 1000 attempts (never seen).
Drawn RandomExperiment(uint64_t seed, uint32_t index, Family family = Family::kDense);

// The `tpsim agree` command line (words after "agree"); returns the exit status.
int AgreeCommand(const std::vector<std::string>& args);

extern const char* const kAgreeUsage;

}  // namespace tpsim::sim::agree
