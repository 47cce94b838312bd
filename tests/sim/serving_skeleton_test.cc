// The skeleton timing of serving iterations (sim/serving/skeleton.h) against whole
// Programs: equal to the picosecond wherever it answers, and it falls back where it must.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "arch/chip.h"
#include "configs/load.h"
#include "llm/model.h"
#include "mapping/cost.h"
#include "mapping/mapping.h"
#include "sim/engine.h"
#include "sim/experiment.h"
#include "sim/schedule.h"
#include "sim/serving/requests.h"
#include "sim/serving/scheduler.h"
#include "sim/serving/serving.h"
#include "sim/serving/skeleton.h"

namespace tpsim::serving {
namespace {

// The shipped fused serving experiment: Qwen3-4B on wafer-8x8, 16 stages x tp 4, one layer
// per stage, weights streamed from DRAM (50 MB of shards per core > 32 MiB SRAM), KV in
// SRAM up to 32 MiB / 1 KiB per token = 32768 tokens of context.
// Its tp 4 all-reduce transfers share NoC links (sim/analytical/links.h), which the
// skeleton refuses (SharedLinksAreLeftToTheProgram); the other tests therefore raise the
// links to 1e12 GB/s, where sharing never costs a picosecond (every transfer serialises
// in 1 ps alone or shared), to exercise the skeleton on this layout's memory plan.
std::vector<sim::Override> FastLinks(std::vector<sim::Override> sets) {
  sets.push_back(sim::ParseOverride("chip.noc.link_bandwidth_gbps=1e12"));
  return sets;
}
struct Fused {
  sim::Experiment e;
  arch::Chip chip;
  config::Mapping m;
  explicit Fused(std::vector<sim::Override> sets = {}, bool fast_links = true)
      : e(sim::LoadExperiment(std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/serving-fused.textproto",
                              fast_links ? FastLinks(std::move(sets)) : std::move(sets))),
        chip(arch::Chip::Build(e.cfg.chip(), e.locs)),
        m(e.cfg.mapping()) {
    m.clear_serving();
  }
};

TEST(ServingSkeleton, ReplayIsTheAnalyticalSchedule) {
  // A lowered iteration: the engine's durations schedule (sim/schedule.h, by hand in
  // tests/sim/schedule_test.cc) and replay in that order to the engine's ends.
  Fused f;
  mapping::Program it =
      mapping::LowerIteration(f.chip, f.e.cfg.model(), f.m, {{64, 0}, {1, 500}, {1, 70}}, 16, "bf16");
  sim::EngineOutput o = sim::MakeEngine("analytical")->Run(it, f.chip);
  // Memory tasks hold their channel for ChannelBusyTime, transfers over links the first
  // link of their route for their bytes at its rate.
  std::vector<Ps> dur, busy, ends;
  std::vector<int32_t> first_link;
  for (const sim::TaskTime& t : o.tasks) dur.push_back(t.end_ps - t.start_ps), ends.push_back(t.end_ps);
  for (size_t i = 0; i < it.num_tasks(); ++i) {
    const mapping::Task& t = it.task(i);
    busy.push_back(t.kind == mapping::TaskKind::kMemory ? mapping::ChannelBusyTime(f.chip, t.channel, t.bytes)
                                                        : 0);
    first_link.push_back(-1);
    if (t.kind == mapping::TaskKind::kTransfer && t.core != t.dst_core && t.in_switch_gbps <= 0) {
      first_link.back() = f.chip.Route(t.core, t.dst_core).at(0);
      busy.back() = mapping::SerialisationPs(t.bytes, f.chip.links()[first_link.back()].bandwidth_gbps);
    }
  }
  const int links = static_cast<int>(f.chip.links().size());
  sim::Dispatcher d(it, first_link, links);
  std::vector<sim::TaskTime> times(it.num_tasks());
  EXPECT_EQ(d.Run(dur, busy, times), o.makespan_ps);
  EXPECT_EQ(sim::ReplayEnds(it, d.order(), dur, busy, first_link, links), ends);
}

TEST(ServingSkeleton, MatchesTheProgramToThePicosecond) {
  Fused f;
  const config::Model& model = f.e.cfg.model();
  auto engine = sim::MakeEngine("analytical");
  SkeletonCost sk(f.chip, model, f.m, 16, "bf16");
  // Softmax of a chunk of s tokens with context lt holds 2 x 8 heads x s x lt x 2 bytes
  // per core: a 1024-token prefill (33.5 MB) or 512 tokens at context 3512 (57.5 MB)
  // spills out of 32 MiB, so those iterations are not the skeleton's (spill = true).
  // One row at context up to 4096 (the first two cases): the skeleton is refused, as
  // sim/schedule.h picks work: v_proj of layer 0 waits for its weights from DRAM, so the
  // one-token attention chain on core 0 starts first and v_proj, a lower id, cuts into it
  // when its weights arrive (between scores and softmax); with the chain taking no time
  // it does not, so core 0's order depends on the chain's duration (refused = true).
  struct Case {
    std::vector<llm::SeqChunk> chunks;
    bool spill;
    bool refused = false;
  };
  std::vector<Case> cases = {
      {{{1, 100}}, false, true},
      {{{1, 200}}, false, true},  // same rows and context band as the first: same skeleton
      {{{1, 700}, {1, 31}, {1, 2000}}, false},
      {{{512, 0}, {1, 700}, {1, 30}}, false},
      {{{300, 1200}, {1, 5}, {200, 0}}, false},
      {{{1024, 0}}, true},
      {{{512, 3000}, {512, 0}}, true},
      {{{7, 9000}, {1, 1}}, false},
      {{}, false},
  };
  for (uint32_t i = 0; i < 40; ++i) cases.back().chunks.push_back({1, 100 + 7 * i});
  int answered = 0;
  for (const Case& c : cases) {
    const Ps fast = sk.Makespan(c.chunks);
    mapping::Program p = mapping::LowerIteration(f.chip, model, f.m, c.chunks, 16, "bf16");
    const Ps full = engine->Run(p, f.chip).makespan_ps;
    std::string name;
    for (const llm::SeqChunk& x : c.chunks)
      name += " {" + std::to_string(x.new_tokens) + "," + std::to_string(x.cached) + "}";
    EXPECT_EQ(p.kv_location, mapping::KvLocation::kSram) << name;
    EXPECT_EQ(p.spilled_bytes > 0, c.spill) << name;
    if (c.spill || c.refused) {
      EXPECT_EQ(fast, -1) << name;
    } else {
      EXPECT_EQ(fast, full) << name;
      ++answered;
    }
  }
  EXPECT_EQ(sk.hits(), static_cast<uint64_t>(answered));
  // One skeleton per (rows, band of 4096 tokens of context): rows (context) 1 (101, 201:
  // built once for both, refused), 3 (2734), 514 (1244), 501 (1706), 8 (9009), 40 (40 x 101 + 7 x 780 =
  // 9500); rows 1024 (context 1024) tries the bands 4096 and 1024 and keeps neither: up_proj evicts the
  // residual there. Its shard and data, (1024 x 2560 + 1024 x 2432) x 2 + 2560 x 2432 x 2 = 22,675,456 B,
  // beside the held residual (1024 x 2560 x 2 = 5,242,880) and gate output (1024 x 2432 x 2 = 4,980,736) make
  // 32,899,072 B, more than the 33,554,432 - 1024 x 1024 = 32,505,856 B the KV leaves; 4024 then builds none.
  // 8 skeletons for 9 batches.
  EXPECT_EQ(sk.skeletons(), 8u);

  // GEMMs spill once the KV leaves less SRAM than up_proj needs: 8 rows: its shard and data,
  // (8 x 2560 + 8 x 2432) x 2 + 2560 x 2432 x 2 = 12,531,712 B, plus the residual and gate
  // output held meanwhile, 8 x 2560 x 2 + 8 x 2432 x 2 = 79,872 B: past
  // (33,554,432 - 12,611,584) / 1024 = 20,451 tokens of context. Rows 8 at context 24,999:
  // the bands 28,672 and 25,088 spill (refused), the skeleton at exactly 24,999 serves it
  // (its attention, 2 x 8 x 7 x 24,997 x 2 = 5.6 MB for the softmax, fits in the 7.96 MB left).
  {
    const std::vector<llm::SeqChunk> b = {{7, 24990}, {1, 1}};
    mapping::Program p = mapping::LowerIteration(f.chip, model, f.m, b, 16, "bf16");
    EXPECT_GT(p.spilled_bytes, 0u);
    EXPECT_EQ(sk.Makespan(b), engine->Run(p, f.chip).makespan_ps);
    EXPECT_EQ(sk.skeletons(), 11u);
  }

  // KV beyond SRAM (33000 tokens > 32768): the Program reads each chunk's K and V from DRAM
  // before its scores and PV; one skeleton per rows serves every such context.
  const std::vector<std::vector<llm::SeqChunk>> dram = {
      {{1, 32999}},
      {{1, 40000}},
      {{300, 0}, {1, 33000}, {1, 17}},
      {{1, 20000}, {1, 20000}},
  };
  const uint64_t before = sk.skeletons();
  for (const auto& b : dram) {
    mapping::Program p = mapping::LowerIteration(f.chip, model, f.m, b, 16, "bf16");
    EXPECT_EQ(p.kv_location, mapping::KvLocation::kDram);
    EXPECT_EQ(p.spilled_bytes, 0u);
    EXPECT_EQ(sk.Makespan(b), engine->Run(p, f.chip).makespan_ps) << b.size() << " chunks";
  }
  EXPECT_EQ(sk.kv_dram(), dram.size());
  EXPECT_EQ(sk.skeletons() - before, 3u);  // rows 1 (twice), 302, 2
}

// The memory plan of the model's layers (LowerOptions::plan_layers), as EngineCost lowers its
// iterations: serving-fused's 36 layers over 16 stages hold at most 3 a stage, so the KV cache
// takes 3 x 2 KV heads x 128 x 2 (K, V) x 2 bytes = 3 KiB per token of context on a core, and
// leaves SRAM (the weights are streamed) past 32 MiB / 3 KiB = 10,922 tokens, not 32,768 as
// for the 16 lowered layers' plan. The skeleton times the Program so planned.
TEST(ServingSkeleton, TimesTheProgramOfTheModelsMemoryPlan) {
  Fused f;
  const config::Model& model = f.e.cfg.model();
  auto engine = sim::MakeEngine("analytical");
  SkeletonCost sk(f.chip, model, f.m, 16, "bf16", model.num_layers());
  mapping::LowerOptions opts;
  opts.plan_layers = model.num_layers();
  int answered = 0;
  for (const std::vector<llm::SeqChunk>& b : std::vector<std::vector<llm::SeqChunk>>{
           {{1, 700}, {1, 31}, {1, 2000}}, {{1, 10920}}, {{1, 12000}}, {{1, 12000}, {3, 100}}}) {
    const uint64_t context = [&] {
      uint64_t c = 0;
      for (const llm::SeqChunk& x : b) c += uint64_t{x.cached} + x.new_tokens;
      return c;
    }();
    const mapping::Program own = mapping::LowerIteration(f.chip, model, f.m, b, 16, "bf16");
    const mapping::Program p = mapping::LowerIteration(f.chip, model, f.m, b, 16, "bf16", opts);
    EXPECT_EQ(own.kv_location, mapping::KvLocation::kSram) << context;
    EXPECT_EQ(p.kv_location, context > 10922 ? mapping::KvLocation::kDram : mapping::KvLocation::kSram)
        << context;
    const Ps fast = sk.Makespan(b);
    if (fast >= 0) {
      EXPECT_EQ(fast, engine->Run(p, f.chip).makespan_ps) << context;
      ++answered;
    }
  }
  EXPECT_GE(answered, 2);
  EXPECT_GT(sk.kv_dram(), 0u);  // the contexts past 10,922 tokens, from a KV-in-DRAM skeleton
}

// The shipped fused layout as it is: the tp 4 all-reduce transfers share NoC links, so
// their times depend on when the chains around them end; the first skeleton sees it and
// no skeleton is used for this layout (every iteration lowers its own Program).
TEST(ServingSkeleton, SharedLinksAreLeftToTheProgram) {
  Fused f({}, false);
  SkeletonCost sk(f.chip, f.e.cfg.model(), f.m, 16, "bf16");
  EXPECT_EQ(sk.Makespan({{1, 100}}), -1);
  EXPECT_EQ(sk.Makespan({{1, 100}, {64, 0}}), -1);
  EXPECT_EQ(sk.Makespan({{1, 40000}}), -1);
  EXPECT_EQ(sk.skeletons(), 1u);  // one built, refused; none tried after it
  EXPECT_EQ(sk.hits(), 0u);
  EngineCost cost(f.chip, f.e.cfg.model(), f.m, 16, "bf16", "analytical", 0);
  EXPECT_GT(cost({{1, 100}}), 0);
  EXPECT_EQ(cost.skeleton_hits(), 0u);
}

// A whole overloaded run (contexts grow until GEMMs spill, then KV leaves SRAM) timed both
// ways for every distinct iteration: EngineCost throws if a skeleton disagrees.
TEST(ServingSkeleton, WholeRunAgreesWithPrograms) {
  Fused f({sim::ParseOverride("workload.requests.synthetic.num_requests=80"),
           sim::ParseOverride("workload.requests.synthetic.rate_per_s=8")});
  std::vector<Request> reqs = LoadRequests(f.e.cfg.workload().requests(), "", f.e.locs);
  SchedulerConfig sc;
  sc.max_running = 64;
  sc.max_tokens = 1024;
  sc.chunk_tokens = 512;
  sc.block_tokens = 16;
  sc.capacity_blocks = 84984;
  EngineCost cost(f.chip, f.e.cfg.model(), f.m, 16, "bf16", "analytical", 0);
  cost.set_verify(true);
  ServeOutcome out;
  ASSERT_NO_THROW(out = RunFused(reqs, sc, [&](const std::vector<llm::SeqChunk>& c) { return cost(c); }));
  EXPECT_GT(cost.skeleton_hits(), 0u);
  EXPECT_GT(cost.skeleton_kv_dram(), 0u);         // some with the KV cache in DRAM
  EXPECT_LT(cost.skeleton_hits(), cost.timed());  // some fell back (their attention spills)
  // The reference path never consults a skeleton.
  EngineCost ref(f.chip, f.e.cfg.model(), f.m, 16, "bf16", "analytical", 0);
  ref.set_use_skeletons(false);
  EXPECT_EQ(ref({{1, 100}}), cost({{1, 100}}));
  EXPECT_EQ(ref.skeleton_hits(), 0u);
}

// Other layouts, every distinct iteration verified: the disaggregated experiment's decode
// group (8 stages x tp 4), and Qwen3-0.6B on mesh-4x4-hbm (HBM at the chip edge: KV reads
// cross the network and channels are shared) with 2 stages x tp 2 and 4 layers lowered.
TEST(ServingSkeleton, OtherLayoutsAgreeWithPrograms) {
  struct Setup {
    std::string exp, chip, model;  // chip and model files: "" keeps the experiment's
    uint32_t tp, stages, layers;
    std::string dtype = "bf16";
  };
  const std::string src = TPSIM_SOURCE_DIR;
  const std::vector<Setup> setups = {
      {"serving-disaggregated", "", "", 4, 8, 8},
      {"serving-fused", src + "/configs/chips/mesh-4x4-hbm.textproto",
       src + "/configs/models/qwen3-0.6b.json", 2, 2, 4},
      // Two layers per stage; and fp32 with tp 8 on one stage.
      {"serving-fused", "", "", 4, 8, 16},
      {"serving-fused", src + "/configs/chips/mesh-4x4-hbm.textproto",
       src + "/configs/models/qwen3-0.6b.json", 8, 1, 1, "fp32"},
  };
  for (const Setup& su : setups) {
    sim::Experiment e =
        sim::LoadExperiment(src + "/configs/experiments/" + su.exp + ".textproto",
                            {sim::ParseOverride("workload.requests.synthetic.num_requests=30")});
    config::Chip cc = e.cfg.chip();
    if (!su.chip.empty()) config::ParseFile(su.chip, &cc, nullptr);
    // 1e12 GB/s links, as in Fused: with real links every layout here shares them (and
    // is left to the Program, SharedLinksAreLeftToTheProgram).
    cc.mutable_noc()->set_link_bandwidth_gbps(1e12);
    config::Model model = su.model.empty() ? e.cfg.model() : llm::LoadModelFile(su.model, nullptr);
    arch::Chip chip = arch::Chip::Build(cc, config::SourceMap());
    config::Mapping m = e.cfg.mapping();
    m.clear_serving();
    m.set_tp(su.tp);
    m.set_pipeline_stages(su.stages);
    std::vector<Request> reqs = LoadRequests(e.cfg.workload().requests(), "", e.locs);
    SchedulerConfig sc;
    sc.max_running = 64;
    sc.max_tokens = 1024;
    sc.chunk_tokens = 512;
    sc.capacity_blocks = 1 << 20;
    EngineCost cost(chip, model, m, su.layers, su.dtype, "analytical", 0);
    cost.set_verify(true);
    ASSERT_NO_THROW(RunFused(reqs, sc, [&](const std::vector<llm::SeqChunk>& c) { return cost(c); }))
        << su.exp;
    EXPECT_GT(cost.skeleton_hits(), 0u) << su.exp;
    // A context large enough that the KV leaves SRAM while nothing spills: stacked DRAM
    // (wafer-8x8) is timed from a skeleton; HBM at the chip edge (mesh-4x4-hbm: the reads
    // cross network links shared with other memory flows) is left to the Program.
    SkeletonCost sk(chip, model, m, su.layers, su.dtype);
    auto engine = sim::MakeEngine("analytical");
    int in_dram = 0;
    for (uint32_t lt = 4096; lt <= (1u << 20) && in_dram < 2; lt *= 2) {
      const std::vector<llm::SeqChunk> b = {{1, lt}, {3, 100}};
      mapping::Program p = mapping::LowerIteration(chip, model, m, b, su.layers, su.dtype);
      if (p.kv_location != mapping::KvLocation::kDram || p.spilled_bytes != 0) continue;
      const Ps fast = sk.Makespan(b);
      if (fast >= 0) {
        EXPECT_EQ(fast, engine->Run(p, chip).makespan_ps) << su.exp << " context " << lt;
      }
      ++in_dram;
    }
    EXPECT_GE(in_dram, 1) << su.exp;
    const bool stacked = cc.name() == "wafer-8x8";
    EXPECT_EQ(sk.kv_dram(), stacked ? static_cast<uint64_t>(in_dram) : 0u) << su.exp;
    std::cout << su.exp << " " << cc.name() << ": " << cost.skeleton_hits() << " of " << cost.timed()
              << " distinct iterations from " << cost.skeletons() << " skeletons, " << cost.skeleton_kv_dram()
              << " with KV in DRAM\n";
  }
}

}  // namespace
}  // namespace tpsim::serving
