// Decode-step reuse (sim/step_reuse.h) against the unrolled Program: the whole Result JSON
// (summary, per-op rows, layers, links, channels, cores and every task's times) must be
// byte-identical, on every shipped experiment that `tpsim run` runs and on random ones
// (sim/agree's family, with more decode steps).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "configs/load.h"
#include "llm/model.h"
#include "mapping/estimate.h"
#include "mapping/mapping.h"
#include "mapping/program.h"
#include "sim/agree/agree.h"
#include "sim/engine.h"
#include "sim/experiment.h"
#include "sim/result.h"
#include "sim/run.h"
#include "sim/step_period.h"
#include "sim/step_reuse.h"
#include "tests/sim/experiment_test_util.h"

namespace tpsim::sim {
namespace {

std::string SourceDir() { return TPSIM_SOURCE_DIR; }

struct Both {
  RunOutput unrolled, reused;
};

// `tasks`: with every task's times in the Result (RunOptions::keep_task_times);
// `step_by_step`: overlapping steps timed one after the other (RunOptions::step_by_step).
Both RunBoth(const Experiment& e, bool tasks = false, bool step_by_step = false) {
  RunOptions off;
  off.keep_task_times = tasks;
  off.reuse = RunOptions::Reuse::kOff;
  off.row_steps = 1000;  // every step's op rows, as unrolled
  RunOptions on = off;
  on.reuse = RunOptions::Reuse::kForce;
  on.step_by_step = step_by_step;
  return {RunExperiment(e, off), RunExperiment(e, on)};
}

// On the shipped chips, with their energy block (sim/step_energy.h): the energy of reused
// steps is the unrolled Program's, byte for byte, like every other field.
// Returns whether the run was reused.
bool ExpectSame(const Experiment& e, bool must_reuse, bool tasks = false, bool step_by_step = false) {
  const Both b = RunBoth(e, tasks, step_by_step);
  SCOPED_TRACE(e.cfg.name() + ": " + b.reused.reuse);
  EXPECT_FALSE(b.unrolled.reused);
  if (must_reuse) {
    EXPECT_TRUE(b.reused.reused);
  }
  if (e.cfg.chip().has_energy()) {
    // Not vacuous: energy is there, in the summary, in the decode layers and per op.
    const config::Summary& s = b.reused.result.summary();
    EXPECT_TRUE(s.energy_modelled());
    EXPECT_GT(s.decode_energy_j(), 0);
    EXPECT_GT(s.decode_energy_per_token_j(), 0);
    EXPECT_GT(b.reused.result.layers(b.reused.result.layers_size() - 1).energy_j(), 0);
    EXPECT_GT(b.reused.result.ops(b.reused.result.ops_size() - 1).energy_j() +
                  b.reused.result.ops(b.reused.result.ops_size() - 2).energy_j(),
              0);
  }
  // EXPECT_TRUE, not EXPECT_EQ: gtest's diff of two large JSON texts takes gigabytes.
  EXPECT_TRUE(ResultToJson(b.unrolled.result) == ResultToJson(b.reused.result));
  EXPECT_TRUE(ResultTable(b.unrolled.result, true) == ResultTable(b.reused.result, true));
  return b.reused.reused;
}

// The reference streams its weights from DRAM: each stage reads step s + 1's weights while
// later stages run step s, so steps overlap, and its decode steps' all-reduce transfers share
// links (their floating-point sharing may round a picosecond apart from step to step): every
// step is lowered, and the results are the same either way. At TP 1 (no collectives) the
// schedule is periodic (sim/step_period.h) until attention binds (step 65).
Experiment Tp1(uint32_t steps) {
  return LoadExperiment(SourceDir() + "/configs/experiments/reference-qwen3-4b.textproto",
                        {{"mapping.tp", "1"}, {"workload.decode_steps", std::to_string(steps)}});
}
TEST(StepReuse, ReferenceReused) { ExpectSame(Tp1(13), true, true); }

// Qwen3-0.6B at TP 1 on the reference chip with its weights resident in SRAM: no step reads
// ahead, so steps do not overlap and each is timed alone, shifted (sim/step_reuse.h); the
// attention's time grows with the context and decides the step time, which that way allows.
TEST(StepReuse, SeparateStepsReused) {
  for (uint32_t steps : {12u, 100u}) {
    Experiment e = LoadExperiment(
        SourceDir() + "/configs/experiments/reference-qwen3-4b.textproto",
        {{"mapping.tp", "1"}, {"mapping.weights", "sram"}, {"workload.decode_steps", std::to_string(steps)}},
        "qwen3-0.6b");
    ExpectSame(e, true, true);
  }
}
// A GPU node has static power (8 x 80.3 W on h200-sxm-8): static energy is that power times
// the composed run's time. At TP 1 the steps reuse (at TP 8 two tasks of the head end last).
TEST(StepReuse, StaticPowerOverTheComposedTime) {
  const Experiment e = LoadExperiment(SourceDir() + "/validate/experiments/qwen3-4b-h200.textproto",
                                      {{"mapping.tp", "1"}, {"workload.decode_steps", "12"}});
  ASSERT_GT(e.cfg.chip().energy().core_static_w(), 0);
  ExpectSame(e, true, true);
}

// The memory guard (issue 16) counts the Programs that reuse lowers, not every decode step:
// 32,768 decode steps under a 128 MiB limit that the unrolled Program's estimate exceeds are
// accepted and run (about 0.3 s), on either engine (the TLM engine's steps made from the
// template as it reaches them, sim/step_streamed.h); the same with every step lowered or with
// every task's times kept is refused before lowering.
TEST(StepReuse, LongGenerationPassesTheMemoryGuard) {
  ExpectSame(Small(200), true);  // the steps reuse, exactly
  const Experiment e = Small(32768);
  const arch::Chip chip = ValidateExperiment(e);
  const uint64_t limit = 128ull << 20;
  EXPECT_GT(mapping::EstimateProgram(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping()).peak_bytes,
            static_cast<double>(limit));
  RunOptions opts;
  opts.max_memory_bytes = limit;
  opts.reuse = RunOptions::Reuse::kOff;
  EXPECT_THROW(RunExperiment(e, opts), config::ConfigError);
  opts.reuse = RunOptions::Reuse::kAuto;
  opts.keep_task_times = true;  // a record per task of every step: the whole Program counts
  EXPECT_THROW(RunExperiment(e, opts), config::ConfigError);
  opts.keep_task_times = false;
  // And the records themselves (mapping::ProgramEstimate::kTaskRecordBytes): the whole
  // Program's estimate, 1.48 GB, passes 2 GiB; with a record per task it does not.
  EXPECT_NO_THROW(CheckResources(e, chip, 2ull << 30));
  try {
    CheckResources(e, chip, 2ull << 30, "--max-memory", std::nullopt, true);
    ADD_FAILURE() << "a record per task passed the memory guard";
  } catch (const config::ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("with a record of each in the result (--tasks)"),
              std::string::npos)
        << err.what();
  }
  // The TLM engine holds a few steps at once too (tests/sim/step_streamed_test.cc), but where
  // its steps cannot be streamed it lowers the whole Program, which the guard counts: here a
  // record per task of every step.
  opts.engine = "tlm";
  opts.keep_task_times = true;
  try {
    RunExperiment(e, opts);
    ADD_FAILURE() << "the TLM engine's unrolled run passed the memory guard";
  } catch (const config::ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("with a record of each in the result (--tasks)"),
              std::string::npos)
        << err.what();
  }
  opts.keep_task_times = false;
  // Without them it holds a few steps, and the same run on the TLM engine passes too (its op
  // rows summed the same way: compared below).
  const RunOutput tlm = RunExperiment(e, opts);
  ASSERT_TRUE(tlm.reused) << tlm.reuse;
  opts.engine.clear();
  const RunOutput r = RunExperiment(e, opts);
  ASSERT_TRUE(r.reused) << r.reuse;
  ASSERT_EQ(tlm.result.ops_size(), r.result.ops_size());
  for (int o = 0; o < r.result.ops_size(); ++o) EXPECT_EQ(tlm.result.ops(o).steps(), r.result.ops(o).steps());
  // Past kRowSteps steps one row per op sums the steps from kFirstSummedStep on; the rows before
  // are one per step.
  uint64_t summed = 0;
  for (const config::OpResult& op : r.result.ops()) {
    if (op.has_steps()) {
      EXPECT_EQ(op.steps(), 32768u - kFirstSummedStep + 1);
      ++summed;
    }
  }
  EXPECT_GT(summed, 0u);
  EXPECT_LT(r.result.ops_size(), 1000);
  const config::Summary& s = r.result.summary();
  EXPECT_EQ(s.total_ps(), s.prefill_ps() + s.decode_ps());
  EXPECT_EQ(s.decode_step_ps_mean(), (s.decode_ps() + 32768 / 2) / 32768);
  EXPECT_TRUE(s.energy_modelled());
  EXPECT_DOUBLE_EQ(s.energy_per_token_j(), s.energy_j() / (256 + 32768));
  // The decode layers' energies and the decode ops' add up to the decode energy (no static
  // power on this chip).
  double layers_j = 0, ops_j = 0;
  for (const config::LayerResult& l : r.result.layers())
    if (l.phase() == "decode") layers_j += l.energy_j();
  for (const config::OpResult& op : r.result.ops())
    if (op.phase() == "decode") ops_j += op.energy_j();
  EXPECT_NEAR(layers_j, s.decode_energy_j(), 1e-9 * s.decode_energy_j());
  EXPECT_NEAR(ops_j, s.decode_energy_j(), 1e-9 * s.decode_energy_j());
}

// Below kAutoReuseSteps the default lowers every step, unless that would not fit --max-memory
// while the steps reuse lowers would: then it reuses them (before, it refused the run; on
// wafer-32x32-qwen3-32b 40 decode steps, about 3.5 GB, were refused at 26.3 GB estimated).
TEST(StepReuse, FewerStepsReusedWhereLoweringEveryOneWouldNotFit) {
  const Experiment e = Tp1(40);
  const arch::Chip chip = ValidateExperiment(e);
  auto estimate = [&](uint32_t steps) {
    config::Workload wl = e.cfg.workload();
    wl.set_decode_steps(steps);
    return mapping::EstimateProgram(chip, e.cfg.model(), wl, e.cfg.mapping()).peak_bytes;
  };
  // The guard counts kReuseCountedSteps decode steps where reuse is tried (run.cc).
  const double few = estimate(kReuseCountedSteps), all = estimate(40);
  ASSERT_LT(few, all);
  RunOptions opts;
  opts.max_memory_bytes = static_cast<uint64_t>((few + all) / 2);
  opts.row_steps = 1000;  // every step's op rows, as the unrolled run below
  const RunOutput r = RunExperiment(e, opts);
  EXPECT_TRUE(r.reused) << r.reuse;
  RunOptions off = opts;
  off.reuse = RunOptions::Reuse::kOff;
  off.max_memory_bytes = 0;
  const RunOutput u = RunExperiment(e, off);
  EXPECT_FALSE(u.reused);
  EXPECT_TRUE(ResultToJson(u.result) == ResultToJson(r.result));
  // Where every step fits, the default still lowers them all.
  opts.max_memory_bytes = static_cast<uint64_t>(all) + 1;
  EXPECT_FALSE(RunExperiment(e, opts).reused);
  // --no-reuse, or too little for the few steps: refused, saying why.
  off.max_memory_bytes = static_cast<uint64_t>((few + all) / 2);
  off.unrolled_by = "--no-reuse";
  try {
    RunExperiment(e, off);
    ADD_FAILURE() << "--no-reuse passed the memory guard";
  } catch (const config::ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("(every decode step is lowered: --no-reuse)"), std::string::npos)
        << err.what();
  }
  // Too little for the few steps: more decode steps would not matter, so the refusal names
  // them as reuse's and blames the layers or TP.
  opts.max_memory_bytes = static_cast<uint64_t>(few) - 1;
  try {
    RunExperiment(e, opts);
    ADD_FAILURE() << "the few steps passed the memory guard";
  } catch (const config::ConfigError& err) {
    const std::string what = err.what();
    EXPECT_NE(what.find("27 passes (the prefill and the 26 decode steps that reuse lowers at once, of "
                        "workload.decode_steps 40)"),
              std::string::npos)
        << what;
    EXPECT_NE(err.diags().back().field, "workload.decode_steps") << what;
    EXPECT_NE(what.find(": lower the layers or mapping.tp, or raise"), std::string::npos) << what;
  }
}

TEST(StepReuse, ReferenceUpTo200Steps) {
  for (uint32_t steps : {5u, 8u, 200u}) ExpectSame(Load("reference-qwen3-4b.textproto", steps), false, true);
  for (uint32_t steps : {11u, 40u, 60u}) ExpectSame(Tp1(steps), true, true);
}

// Past RunOptions::row_steps the op rows of decode steps kFirstSummedStep on are summed, one
// row per op of a step, whether the steps are reused or unrolled: the same Result byte for byte
// (the unrolled rows are summed by BuildResult, sim::RowSums), on the periodic way (the TP=1
// reference) and on the way for steps that do not overlap (the small model of
// LongGenerationPassesTheMemoryGuard, Small). The TLM engine, which unrolls, sums the same rows.
// The summed rows' energy is the sum of its steps' (pJ, then J) as unrolled per-step rows give it.
TEST(StepReuse, SummedOpRows) {
  // Small(7) with row_steps 5: past the limit but before kFirstSummedStep, nothing is summed.
  for (const Experiment& e : {Tp1(40), Small(40), Small(7)}) {
    SCOPED_TRACE(e.cfg.name());
    RunOptions off;
    off.reuse = RunOptions::Reuse::kOff;
    const uint32_t steps = e.cfg.workload().decode_steps();
    off.row_steps = steps > 20 ? 20 : 5;
    RunOptions on = off;
    on.reuse = RunOptions::Reuse::kForce;
    RunOptions rows = off;
    rows.row_steps = 1000;  // every step's rows
    const RunOutput u = RunExperiment(e, off), r = RunExperiment(e, on), each = RunExperiment(e, rows);
    ASSERT_TRUE(r.reused) << r.reuse;
    EXPECT_TRUE(ResultToJson(u.result) == ResultToJson(r.result));
    EXPECT_TRUE(ResultTable(each.result, true) == ResultTable(r.result, true));
    const config::Result &a = each.result, &b = r.result;
    if (steps >= kFirstSummedStep) {
      EXPECT_LT(b.ops_size(), a.ops_size());
    } else {
      EXPECT_TRUE(ResultToJson(each.result) == ResultToJson(r.result));
    }
    std::map<std::tuple<std::string, uint32_t, std::string>, double> each_j;
    for (const config::OpResult& op : a.ops()) each_j[{op.phase(), op.layer(), op.op()}] += op.energy_j();
    std::map<std::tuple<std::string, uint32_t, std::string>, double> summed_j;
    int summed = 0;
    for (const config::OpResult& op : b.ops()) {
      summed_j[{op.phase(), op.layer(), op.op()}] += op.energy_j();
      if (op.has_steps()) {
        EXPECT_EQ(op.steps(), steps - kFirstSummedStep + 1);
        ++summed;
      }
    }
    EXPECT_EQ(summed > 0, steps >= kFirstSummedStep);
    ASSERT_EQ(each_j.size(), summed_j.size());
    for (const auto& [key, j] : each_j) EXPECT_NEAR(summed_j.at(key), j, 1e-12 * j) << std::get<2>(key);
    RunOptions tlm = off;
    tlm.engine = "tlm";
    const RunOutput t = RunExperiment(e, tlm);
    ASSERT_EQ(t.result.ops_size(), b.ops_size());
    for (int o = 0; o < b.ops_size(); ++o) {
      EXPECT_EQ(t.result.ops(o).op(), b.ops(o).op());
      EXPECT_EQ(t.result.ops(o).steps(), b.ops(o).steps());
    }
  }
}

// RunOptions::on_count (tpsim run's progress line): decode steps as they are timed with reuse
// (or streamed into the TLM engine); unrolled, the passes as they are lowered, then the tasks
// as the TLM engine simulates them (every RunState::kProgressTasks); each count rising, never
// past its total.
TEST(StepReuse, ProgressCountsStepsAndTasks) {
  for (const std::string engine : {"analytical", "tlm", "tlm unrolled"}) {
    std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> seen;
    std::vector<std::string> order;
    RunOptions opts;
    opts.reuse = engine == "tlm unrolled" ? RunOptions::Reuse::kOff : RunOptions::Reuse::kForce;
    if (engine != "analytical") opts.engine = "tlm";
    opts.on_count = [&](uint64_t done, uint64_t total, const char* what) {
      if (order.empty() || order.back() != what) order.push_back(what);
      seen[what].emplace_back(done, total);
    };
    const RunOutput r = RunExperiment(Tp1(40), opts);
    SCOPED_TRACE(engine);
    for (const auto& [what, counts] : seen) {
      ASSERT_FALSE(counts.empty()) << what;
      for (size_t i = 1; i < counts.size(); ++i) {
        EXPECT_GT(counts[i].first, counts[i - 1].first) << what;
        EXPECT_EQ(counts[i].second, counts[0].second) << what;
      }
      EXPECT_LE(counts.back().first, counts.back().second) << what;
    }
    if (engine == "tlm unrolled") {
      EXPECT_EQ(order, (std::vector<std::string>{"passes", "tasks"}));
      EXPECT_EQ(seen["passes"].back(), std::make_pair(uint64_t{41}, uint64_t{41}));  // the prefill, 40 steps
      EXPECT_EQ(seen["tasks"][0], std::make_pair(uint64_t{4096}, uint64_t{r.program.num_tasks()}));
    } else {
      // The steps after the head's as they are timed (the TLM engine's as they end).
      ASSERT_TRUE(r.reused) << r.reuse;
      EXPECT_EQ(order, std::vector<std::string>{"decode steps"});
      EXPECT_EQ(seen["decode steps"].back(), std::make_pair(uint64_t{40}, uint64_t{40}));
    }
  }
}

// Where attention decides a step's time once the context is long, nothing is periodic (at TP 1
// from step 65 on, on the reference from step 321): the steps are timed one after the other
// from the steps before them (sim/step_rolling.h), and the Result is the unrolled one.
TEST(StepReuse, StepByStepWhenAttentionBinds) {
  RunOptions on;
  on.reuse = RunOptions::Reuse::kForce;
  const RunOutput r = RunExperiment(Tp1(80), on);
  EXPECT_TRUE(r.reused) << r.reuse;
  ExpectSame(Tp1(80), true, true);
  ExpectSame(Tp1(150), true);
  ExpectSame(Load("reference-qwen3-4b.textproto", 340), true);
}

// With a long cached prefix the KV cache does not fit in SRAM: each decode step reads it from
// DRAM, its bytes growing with the context (StepTemplate::context_memory). Those steps are
// timed step by step, with the channels' bytes and busy time and the reads' energy of each
// step's context, and give the unrolled Result.
TEST(StepReuse, KvReadsFromDram) {
  for (uint32_t steps : {12u, 40u}) {
    const Experiment e = LoadExperiment(
        SourceDir() + "/configs/experiments/reference-qwen3-4b.textproto",
        {{"workload.cached_prefix", "32700"}, {"workload.decode_steps", std::to_string(steps)}});
    ExpectSame(e, true, steps == 12);
    RunOptions on;
    on.reuse = RunOptions::Reuse::kForce;
    EXPECT_EQ(RunExperiment(e, on).result.summary().kv_location(), "dram");
  }
}

// On mesh-4x4-hbm the HBM is reached over the mesh: with a 20,000-token cached prefix each
// step's KV reads are flows over links whose bytes grow with the context (their holds, inject,
// links' bytes and busy time are each step's own: StepShape::step_flows). Timed step by step,
// every task's times and the links' use are the unrolled Program's.
TEST(StepReuse, KvReadsOverLinks) {
  for (uint32_t steps : {14u, 40u}) {
    const Experiment e = LoadExperiment(
        SourceDir() + "/configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto",
        {{"workload.cached_prefix", "20000"}, {"workload.decode_steps", std::to_string(steps)}});
    EXPECT_TRUE(ExpectSame(e, true, steps == 14));
  }
}

// The steps a trace samples (RunOptions::observe_steps, tpsim run --trace-steps) are timed as
// in the whole run when the steps are timed step by step too: the observers see the same
// Program and times either way.
TEST(StepReuse, SampledStepsStepByStep) {
  ExpectSampledSame(Load("reference-qwen3-4b.textproto", 340), RunOptions{}, {1, 9, 200, 330, 340});
}

// Forced step by step where the periodic schedule applies: the same Result again, every
// task's times included; the reference variants and the shipped small experiments, each
// either reused or lowered whole.
TEST(StepReuse, StepByStepAsUnrolled) {
  for (uint32_t steps : {11u, 40u}) ExpectSame(Load("reference-qwen3-4b.textproto", steps), true, true, true);
  ExpectSame(Tp1(30), true, true, true);
}

// With a spare core (sim::SetSpareThread, as `tpsim run` has) and enough tasks, each step is
// composed on a thread of its own, a step behind the schedule, which waits for a step to be
// composed before it reuses the step's room: the same Result as unrolled (and so as one
// thread), with tasks and with the trace's sampled steps.
TEST(StepReuse, StepByStepComposedOnASecondThread) {
  SetSpareThread(true);
  // 120 steps of 3,580 tasks: past the 200,000 tasks from which a spare thread is used.
  const Experiment e = Load("reference-qwen3-4b.textproto", 120);
  ExpectSame(e, true, true, true);
  auto sampled = [&](std::vector<TaskTime>* times) {
    RunOptions o;
    o.reuse = RunOptions::Reuse::kForce;
    o.step_by_step = true;
    o.observe_steps = {1, 60, 120};
    o.observers.push_back([times](const RunView& v) { *times = v.timing.tasks; });
    return RunExperiment(e, o);
  };
  std::vector<TaskTime> threaded, one;
  const RunOutput a = sampled(&threaded);
  SetSpareThread(false);
  const RunOutput b = sampled(&one);
  EXPECT_TRUE(a.reused && b.reused) << a.reuse;
  EXPECT_TRUE(ResultToJson(a.result) == ResultToJson(b.result));
  ASSERT_GT(one.size(), 0u);
  ASSERT_EQ(threaded.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(threaded[i].start_ps, one[i].start_ps) << i;
    ASSERT_EQ(threaded[i].end_ps, one[i].end_ps) << i;
  }
}

// The MoE block's weighted sum makes its output tensor before the task that writes it. The SRAM
// timeline used to count that unwritten tensor as held and, short of SRAM, "evict" it: a DRAM
// write (1 MiB per rank in the prompt, 256 rows x 2048 x 2 bytes) that waited on nothing, so it
// ran at time 0, and in this run's later decode steps it kept every step lowered ("a decode
// step's task waits on nothing (task 209 of the template, experts.sum)"). An activation no task
// has produced yet holds nothing (mapping::SramTimeline::BeforeCompute).
TEST(StepReuse, UnwrittenOutputsAreNotEvicted) {
  const Experiment e = Agreed(8, 6, 150, agree::Family::kMoe);  // tpsim agree --seed 8 --only 6 --family moe
  Experiment two = e;
  two.cfg.mutable_workload()->set_decode_steps(2);
  const arch::Chip chip = ValidateExperiment(two);
  const mapping::Program p = mapping::Lower(chip, two.cfg.model(), two.cfg.workload(), two.cfg.mapping());
  size_t writes = 0;
  for (const mapping::Task& t : p.tasks()) {
    if (t.kind != mapping::TaskKind::kMemory || !t.write || p.ops[t.op].ref.op != "experts.sum") continue;
    ++writes;
    EXPECT_FALSE(p.deps(t.id).empty()) << "task " << t.id << " waits on nothing";
  }
  EXPECT_GT(writes, 0u);  // the sum still spills what does not fit: not vacuous
  EXPECT_TRUE(ExpectSame(e, true));
}

// m_split_rotate with its weights held in SRAM (tpsim agree --seed 7 --only 5: Qwen3-0.6B, TP 4
// x 8 stages on a 32-core torus, batch 4, so the decode steps rotate too). A rotation's first
// send lands in the destination's second (arriving) buffer, which the destination's earlier ops
// used; with resident weights that send used to wait on nothing, so in the unrolled Program every
// decode step's first rotations queued on the links from time 0, ahead of the prompt's own
// traffic (prefill layer 0 took 26,917 us against 19,013 for layer 1) and the steps were lowered
// whole. It now waits for the destination's last compute before the op
// (GemmContext::BufferFree, mapping/partition/blocks.cc).
TEST(StepReuse, FirstRotationWaitsForTheArrivingBuffer) {
  const Experiment e = Agreed(7, 5, 30);
  Experiment two = e;
  two.cfg.mutable_workload()->set_decode_steps(2);
  const arch::Chip chip = ValidateExperiment(two);
  const mapping::Program p = mapping::Lower(chip, two.cfg.model(), two.cfg.workload(), two.cfg.mapping());
  ASSERT_EQ(p.weights_location, mapping::WeightsLocation::kSram);
  // The last compute on each core so far, and as it stood at each op's first task.
  std::vector<int64_t> last(static_cast<size_t>(p.num_cores), -1);
  std::map<uint32_t, std::vector<int64_t>> before_op;
  size_t firsts = 0;
  for (const mapping::Task& t : p.tasks()) {
    const uint32_t op = static_cast<uint32_t>(t.op);
    before_op.emplace(op, last);
    if (t.kind == mapping::TaskKind::kTransfer && t.collective >= 0 &&
        p.collectives[t.collective].kind == mapping::CollectiveKind::kRotate && t.coll_step == 0) {
      ++firsts;
      // The destination's last compute before the rotation op's first task: among the deps.
      const int64_t before = before_op[op][static_cast<size_t>(t.dst_core)];
      ASSERT_GE(before, 0);
      const auto deps = p.deps(t.id);
      EXPECT_NE(std::find(deps.begin(), deps.end(), mapping::TaskId(static_cast<uint32_t>(before))),
                deps.end())
          << "first rotation send " << t.id << " does not wait for task " << before;
    }
    if (t.kind == mapping::TaskKind::kCompute) last[static_cast<size_t>(t.core)] = static_cast<int64_t>(t.id);
  }
  EXPECT_GT(firsts, 0u);
  // Layer 0 of the prompt is no longer slowed by every decode step's rotations (1 % apart).
  const RunOutput r = RunExperiment(e, {});
  const double l0 = static_cast<double>(r.result.layers(0).total_ps()),
               l1 = static_cast<double>(r.result.layers(1).total_ps());
  EXPECT_LT(std::abs(l0 - l1), 0.01 * l1) << l0 << " vs " << l1;
  EXPECT_TRUE(ExpectSame(e, true, false, true));
}

// Where attention's own data (the query and the scores or probabilities, and the K or V it
// reads from DRAM) outgrows the SRAM left beside what is resident, the rest is written to DRAM
// and read back around the task: bytes affine in the context, less the SRAM left
// (mapping::SramTimeline::BeforeCompute). Such steps are timed step by step like KV reads, with
// each op's and the run's spilled bytes at each step's context (they used to lower every step:
// "memory task 24 (attn_qk) changes between decode steps beyond a KV read").
TEST(StepReuse, AttentionSpillsFollowTheContext) {
  for (const auto& [seed, i] : {std::pair{11u, 36u}, std::pair{3u, 27u}}) {
    for (uint32_t steps : {12u, 40u}) {
      SCOPED_TRACE("tpsim agree --seed " + std::to_string(seed) + " --only " + std::to_string(i));
      EXPECT_TRUE(ExpectSame(Agreed(seed, i, steps), true, steps == 12));
    }
  }
  // By hand, seed 11 #36 (Mistral-7B at TP 1, batch 2, a 256-token prompt, 1 MiB of SRAM with
  // nothing resident): layer 0's scores at decode step k (context c = 256 + k) hold the query and
  // the scores of 32 heads x 2 sequences, 64 x (128 + c) bf16 values, and read K for 8 KV heads
  // of 128 over 2 sequences, 2 x 1024 x c x 2 bytes; all of it past 1 MiB is spilled.
  RunOptions on;
  on.reuse = RunOptions::Reuse::kForce;
  const RunOutput r = RunExperiment(Agreed(11, 36, 40), on);
  ASSERT_TRUE(r.reused) << r.reuse;
  std::vector<uint64_t> spilled;
  for (const config::OpResult& o : r.result.ops())
    if (o.phase() == "decode" && o.layer() == 0 && o.op() == "attn_qk") spilled.push_back(o.spilled_bytes());
  ASSERT_EQ(spilled.size(), 40u);
  for (uint64_t k : {1u, 9u, 40u}) {
    const uint64_t c = 256 + k;
    EXPECT_EQ(spilled[k - 1], 64 * (128 + c) * 2 + 2 * 1024 * c * 2 - 1048576) << k;
  }
  // Past row_steps the reused steps' rows are summed: a summed row's spilled bytes are its
  // steps' (each at its own context), the unrolled rows' sum.
  RunOptions off;
  off.reuse = RunOptions::Reuse::kOff;
  on.row_steps = 20;
  const RunOutput u = RunExperiment(Agreed(11, 36, 40), off), s = RunExperiment(Agreed(11, 36, 40), on);
  ASSERT_TRUE(s.reused) << s.reuse;
  std::map<std::tuple<std::string, uint32_t, std::string>, uint64_t> unrolled, summed;
  for (const config::OpResult& o : u.result.ops())
    unrolled[{o.phase(), o.layer(), o.op()}] += o.spilled_bytes();
  int rows = 0;
  for (const config::OpResult& o : s.result.ops()) {
    summed[{o.phase(), o.layer(), o.op()}] += o.spilled_bytes();
    rows += o.has_steps() && o.op() == "attn_qk";
  }
  EXPECT_GT(rows, 0);
  EXPECT_TRUE(unrolled == summed);
  EXPECT_EQ(s.result.summary().spilled_bytes(), u.result.summary().spilled_bytes());
}

// A memory plan that changes with the context: with 8 MiB of SRAM per core (the weights
// streamed, the KV cache in DRAM: nothing resident) each core's attention task at context c
// holds 8 heads' query and scores, 8 x (128 + c) bf16 values, and reads K (or V) for 2 KV heads
// of 128, 512 x c bytes: 528 c + 2048 bytes, past the SRAM once c > (8388608 - 2048) / 528 =
// 15883.6. After a 256-token prompt and a 15,600-token cached prefix that is decode step 28
// (context 15,884), whose attention spills 528 x 15884 + 2048 - 8388608 = 192 bytes per core
// (768 for the op's 4 ranks) and 528 more per step after it. The steps before it lack those
// spill tasks: they are timed as the later template less them (sim/step_reuse.cc, StepStream::
// set_masked), the same Result as unrolled, every task's times and ids included.
TEST(StepReuse, MemoryPlanThatChangesMidRun) {
  for (uint32_t steps : {40u, 60u}) {
    const Experiment e = LoadExperiment(SourceDir() + "/configs/experiments/reference-qwen3-4b.textproto",
                                        {{"chip.core.sram_bytes", "8388608"},
                                         {"workload.cached_prefix", "15600"},
                                         {"workload.decode_steps", std::to_string(steps)}});
    EXPECT_TRUE(ExpectSame(e, true, steps == 40));
    RunOptions on;
    on.reuse = RunOptions::Reuse::kForce;
    const RunOutput r = RunExperiment(e, on);
    std::vector<uint64_t> spilled;
    for (const config::OpResult& o : r.result.ops())
      if (o.phase() == "decode" && o.layer() == 0 && o.op() == "attn_qk")
        spilled.push_back(o.spilled_bytes());
    ASSERT_EQ(spilled.size(), steps);
    EXPECT_EQ(spilled[26], 0u);                // decode step 27
    EXPECT_EQ(spilled[27], 4 * 192u);          // step 28: the plan changes
    EXPECT_EQ(spilled[28], 4 * (192u + 528));  // one more token per step
  }
  // On mesh-4x4-hbm the KV reads and the spills cross the mesh to the HBM (each step's flows,
  // StepShape::step_flows): with 10,719,784 bytes of SRAM per core and a 20,000-token prefix the
  // plan changes at decode step 102 (stderr of a binary without this way says so).
  EXPECT_TRUE(
      ExpectSame(LoadExperiment(SourceDir() + "/configs/experiments/mesh-4x4-hbm-qwen3-0.6b.textproto",
                                {{"chip.core.sram_bytes", "10719784"},
                                 {"workload.cached_prefix", "20000"},
                                 {"workload.decode_steps", "120"}}),
                 true, true));
  // Random experiments whose plan changes mid-run (they lowered every step before).
  EXPECT_TRUE(ExpectSame(Agreed(11, 35, 200), true));
  EXPECT_TRUE(ExpectSame(Agreed(7, 11, 200), true, true));
}

// Step by step, periods whose starts repeat are replayed and checked (sim/step_stream.cc)
// instead of run through the event loop: the same Result as the event loop alone and as
// unrolled, every task's times included. On the reference nearly every task of the steps timed
// step by step is replayed. On experiments of `tpsim agree --seed 3` the replay meets starts
// that break the engine's rules, goes back to the event loop there and replays again later
// (both runs give other times without the checks: at 200 steps of experiment 14 a core would
// start a task while a lower-id one of that core was ready; at 30 steps of experiment 6 the
// checks of decision order, links' order and queues' order find a start out of order).
TEST(StepReuse, ReplayIsTheEventLoop) {
  for (const auto& [e, min_rollbacks] :
       {std::pair{Load("reference-qwen3-4b.textproto", 60), 0u}, std::pair{Agreed(3, 14, 200), 2u},
        std::pair{Agreed(3, 6, 30), 1u}}) {
    SCOPED_TRACE(e.cfg.name());
    RunOptions::ReplayStats stats;
    RunOptions o;
    o.keep_task_times = true;
    o.reuse = RunOptions::Reuse::kForce;
    o.step_by_step = true;
    o.replay_stats = &stats;
    const RunOutput replayed = RunExperiment(e, o);
    ASSERT_TRUE(replayed.reused) << replayed.reuse;
    const uint64_t tasks = replayed.result.tasks_size();
    EXPECT_GT(stats.replayed, tasks / 2);
    EXPECT_GE(stats.rollbacks, min_rollbacks);
    o.step_replay = false;
    stats = {};
    const RunOutput looped = RunExperiment(e, o);
    EXPECT_EQ(stats.replayed, 0u);
    EXPECT_TRUE(ResultToJson(replayed.result) == ResultToJson(looped.result));
    ExpectSame(e, true, true, true);
  }
}

TEST(StepReuse, ObserveSteps) {
  EXPECT_EQ(ParseObserveSteps("first,last,every:4", 10), (std::vector<uint32_t>{1, 4, 8, 10}));
  EXPECT_EQ(ParseObserveSteps("3,3,1", 10), (std::vector<uint32_t>{1, 3}));
  EXPECT_THROW(ParseObserveSteps("every:0", 10), std::invalid_argument);
  EXPECT_THROW(ParseObserveSteps("11", 10), std::invalid_argument);
  EXPECT_THROW(ParseObserveSteps("firsts", 10), std::invalid_argument);
  EXPECT_THROW(ParseObserveSteps("every:15,first", 10), std::invalid_argument);  // every:15 selects none
  EXPECT_EQ(ParseObserveSteps("every:10,first", 10), (std::vector<uint32_t>{1, 10}));
}

TEST(StepReuse, ReferenceVariants) {
  for (auto sets : ReferenceVariants()) {
    sets.push_back({"workload.decode_steps", "12"});
    const Experiment e =
        LoadExperiment(SourceDir() + "/configs/experiments/reference-qwen3-4b.textproto", sets);
    ExpectSame(e, false);
  }
}

// Every shipped experiment `tpsim run` runs: the serving ones (serving-*.textproto) are
// request streams that only `tpsim serve` runs, so they are skipped. 12 steps: the periodic
// reuse applies from 11. ShippedExperiments (slow label: the wafer-32x32 and MoE-235B runs
// take minutes) takes every one; ShippedSmall the others.
void ShippedSame(bool big, bool step_by_step = false) {
  std::vector<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(SourceDir() + "/configs/experiments"))
    if (f.path().extension() == ".textproto") files.push_back(f.path().filename().string());
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    if (f.starts_with("serving-")) continue;
    const bool is_big = f.starts_with("wafer-32x32") || f.starts_with("moe-qwen3-235b");
    if (is_big != big) continue;
    SCOPED_TRACE(f);
    ExpectSame(Load(f, 12), false, false, step_by_step);
  }
}
TEST(StepReuse, ShippedSmall) { ShippedSame(false); }
TEST(StepReuse, ShippedSmallStepByStep) { ShippedSame(false, true); }
TEST(StepReuse, ShippedExperiments) { ShippedSame(true); }

// `count` random experiments of `tpsim agree`'s family (seed `seed`) with `steps` decode
// steps; returns how many were reused.
int RandomSame(bool step_by_step, uint32_t seed, uint32_t count, uint32_t steps) {
  int reused = 0;
  for (uint32_t i = 0; i < count; ++i)
    reused += ExpectSame(Agreed(seed, i, steps), false, false, step_by_step);
  return reused;
}
TEST(StepReuse, RandomExperiments) { RandomSame(false, 18, 6, 12); }

// Experiment 3 of `tpsim agree --seed 11` has steps that do not overlap, but two tasks of its
// head end last (its critical path cannot be carried across steps): the separate-steps way
// fails a check, and the steps are timed by the other ways instead of every step being
// lowered (tests/bench/reuse_soak.sh found it).
TEST(StepReuse, SeparateStepsFailingTriesTheOtherWays) { EXPECT_TRUE(ExpectSame(Agreed(11, 3, 30), true)); }
// Step by step, on more of the family and more steps: all 16 are reused (the 6th was lowered
// whole before its first rotations waited for their arriving buffers:
// FirstRotationWaitsForTheArrivingBuffer). The count guards against a check that silently
// refuses them.
TEST(StepReuse, RandomExperimentsStepByStep) {
  RandomSame(true, 18, 6, 12);
  EXPECT_EQ(RandomSame(true, 7, 16, 30), 16);
}

}  // namespace
}  // namespace tpsim::sim
