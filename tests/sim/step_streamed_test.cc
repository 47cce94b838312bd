// Decode steps handed to the TLM engine one by one (sim/step_streamed.h, Engine::RunSteps)
// against the unrolled Program on the same engine: the whole Result JSON (summary, per-op rows,
// layers, links, channels, cores, the critical path and, where asked, every task's times) must
// be byte-identical, on the shipped experiments, the reference's variants and random ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/engine.h"
#include "sim/experiment.h"
#include "sim/result.h"
#include "sim/run.h"
#include "sim/step_reuse.h"
#include "tests/sim/experiment_test_util.h"

namespace tpsim::sim {
namespace {

// Runs `e` on the TLM engine unrolled and streamed; true when it was streamed. `tasks`: with
// every task's times in the Result.
bool ExpectSame(const Experiment& e, bool must_stream, bool tasks = false) {
  RunOptions off;
  off.engine = "tlm";
  off.keep_task_times = tasks;
  off.reuse = RunOptions::Reuse::kOff;
  off.row_steps = 1000;  // every step's op rows
  RunOptions on = off;
  on.reuse = RunOptions::Reuse::kForce;
  const RunOutput unrolled = RunExperiment(e, off), streamed = RunExperiment(e, on);
  SCOPED_TRACE(e.cfg.name() + ": " + streamed.reuse);
  EXPECT_FALSE(unrolled.reused);
  if (must_stream) {
    EXPECT_TRUE(streamed.reused);
  }
  if (streamed.reused) {
    // The streamed run lowered the head only.
    EXPECT_LT(streamed.program.num_tasks(), unrolled.program.num_tasks());
  }
  // EXPECT_TRUE, not EXPECT_EQ: gtest's diff of two large JSON texts takes gigabytes.
  EXPECT_TRUE(ResultToJson(unrolled.result) == ResultToJson(streamed.result));
  EXPECT_TRUE(ResultTable(unrolled.result, true) == ResultTable(streamed.result, true));
  return streamed.reused;
}

// The reference: its weights stream from DRAM, steps overlap, and from step 321 attention
// decides a step's time; at TP 1 its steps are periodic for the analytical engine until step 65.
TEST(StepStreamed, ReferenceUpTo200Steps) {
  for (uint32_t steps : {6u, 70u, 200u}) ExpectSame(Load("reference-qwen3-4b.textproto", steps), true, true);
  ExpectSame(Load("reference-qwen3-4b.textproto", 90, {{"mapping.tp", "1"}}), true, true);
}

// The reference's variants (experiment_test_util.h), and with finite router buffers (each
// packet an event on every hop).
TEST(StepStreamed, ReferenceVariants) {
  std::vector<std::vector<Override>> variants = ReferenceVariants();
  variants.push_back({{"chip.noc.router_buffer_packets", "4"}});
  for (const auto& sets : variants) ExpectSame(Load("reference-qwen3-4b.textproto", 12, sets), true);
}

// Every shipped experiment `tpsim run` runs (the serving ones are request streams for `tpsim
// serve`); `big`: the 1024-core wafer, MoE-235B and the 256-core HBM mesh (TLM minutes).
void ShippedSame(bool big) {
  std::vector<std::string> files;
  for (const auto& f :
       std::filesystem::directory_iterator(std::string(TPSIM_SOURCE_DIR) + "/configs/experiments"))
    if (f.path().extension() == ".textproto") files.push_back(f.path().filename().string());
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    if (f.starts_with("serving-")) continue;
    const bool is_big =
        f.starts_with("wafer-32x32") || f.starts_with("moe-qwen3-235b") || f.starts_with("mesh-16x16");
    if (is_big != big) continue;
    SCOPED_TRACE(f);
    ExpectSame(Load(f, 12), true);
  }
}
TEST(StepStreamed, ShippedSmall) { ShippedSame(false); }
TEST(StepStreamed, ShippedBig) { ShippedSame(true); }

// `tpsim agree`'s family: dense and MoE experiments; each streams or falls back with the
// unrolled run's Result, and most stream (the count guards against a check that refuses all).
TEST(StepStreamed, RandomExperiments) {
  int streamed = 0, runs = 0;
  for (uint32_t i = 0; i < 8; ++i, ++runs) streamed += ExpectSame(Agreed(18, i, 12), false);
  for (uint32_t i = 0; i < 4; ++i, ++runs)
    streamed += ExpectSame(Agreed(8, i, 30, agree::Family::kMoe), false);
  EXPECT_GE(streamed, runs - 2);
}

// KV reads that cross a mesh to HBM (each step's own bytes over links), where several requests
// reach a channel at one time out of id order (the critical path's queue order is kept by id).
TEST(StepStreamed, KvReadsOverLinks) {
  ExpectSame(Load("mesh-4x4-hbm-qwen3-0.6b.textproto", 12), true, true);
  ExpectSame(Load("mesh-4x4-hbm-qwen3-0.6b.textproto", 30, {{"workload.cached_prefix", "3000"}}), true);
}

// A memory plan that changes mid-run: with 8 MiB of SRAM per core and a 15,600-token cached
// prefix, attention's data outgrows the SRAM at decode step 28 (StepReuse.MemoryPlanThatChanges
// MidRun has the arithmetic). The steps are the later template's, those before the change
// lacking its spill tasks (StepSource::masked), and the head is the earlier template's: the
// unrolled Result, every task's times and ids included.
TEST(StepStreamed, MemoryPlanThatChangesMidRun) {
  EXPECT_TRUE(ExpectSame(Load("reference-qwen3-4b.textproto", 40,
                              {{"chip.core.sram_bytes", "8388608"}, {"workload.cached_prefix", "15600"}}),
                         true, true));
}
// More of them: 60 steps; mesh-4x4-hbm, whose KV reads and spills cross the mesh to the HBM, the
// plan changing at step 102; random experiments whose plan changes.
TEST(StepStreamed, MemoryPlanThatChangesMidRunMore) {
  EXPECT_TRUE(ExpectSame(Load("reference-qwen3-4b.textproto", 60,
                              {{"chip.core.sram_bytes", "8388608"}, {"workload.cached_prefix", "15600"}}),
                         true));
  EXPECT_TRUE(ExpectSame(Load("mesh-4x4-hbm-qwen3-0.6b.textproto", 120,
                              {{"chip.core.sram_bytes", "10719784"}, {"workload.cached_prefix", "20000"}}),
                         true, true));
  EXPECT_TRUE(ExpectSame(Agreed(11, 35, 200), true));
  EXPECT_TRUE(ExpectSame(Agreed(7, 11, 200), true, true));
}

// With a spare core (sim::SetSpareThread, as `tpsim run` has) and enough tasks, the steps are
// composed on a thread of their own as the engine hands them over: the same Result, every
// task's times included.
TEST(StepStreamed, ComposedOnASecondThread) {
  SetSpareThread(true);
  // 120 steps of 3,580 tasks: past the 200,000 tasks from which a spare thread is used.
  ExpectSame(Load("reference-qwen3-4b.textproto", 120), true, true);
  SetSpareThread(false);
}

// Sampled steps (--trace-steps) are the unrolled run's, task by task, composed on one thread or
// two.
TEST(StepStreamed, SampledSteps) {
  for (const bool spare : {false, true}) {
    SetSpareThread(spare);
    RunOptions tlm;
    tlm.engine = "tlm";
    ExpectSampledSame(Load("reference-qwen3-4b.textproto", 120), tlm, {1, 9, 10, 64, 120});
  }
  SetSpareThread(false);
}

// An exception thrown while a step is composed (here by the progress callback, which the TLM
// stream calls inside the engine's simulation) leaves RunExperiment as itself, composed on one
// thread or two, and a later run is unaffected; the analytical step-by-step way too.
TEST(StepStreamed, AnExceptionWhileComposingLeavesAsItself) {
  for (const std::string engine : {"tlm", "analytical"})
    for (const bool spare : {false, true}) {
      SCOPED_TRACE(engine);
      SetSpareThread(spare);
      RunOptions opts;
      opts.engine = engine;
      opts.step_by_step = true;
      opts.reuse = RunOptions::Reuse::kForce;
      opts.on_count = [](uint64_t done, uint64_t, const char*) {
        if (done == 60) throw std::runtime_error("stopped at decode step 60");
      };
      try {
        RunExperiment(Load("reference-qwen3-4b.textproto", 120), opts);
        ADD_FAILURE() << "no exception, spare thread " << spare;
      } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "stopped at decode step 60") << "spare thread " << spare;
      }
      opts.on_count = nullptr;
      EXPECT_TRUE(RunExperiment(Load("reference-qwen3-4b.textproto", 20), opts).reused)
          << "spare thread " << spare;
    }
  SetSpareThread(false);
}

}  // namespace
}  // namespace tpsim::sim
