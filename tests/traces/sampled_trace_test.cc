// Traces of a run seen at a few decode steps (tpsim run --trace-steps, sim/sampled_run.h)
// against the whole run's trace, on the analytical and TLM engines: the same tasks at the
// same times, and only waits the whole run's trace has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "sim/experiment.h"
#include "sim/run.h"
#include "sim/sampled_run.h"
#include "tests/traces/trace_test_util.h"
#include "traces/trace.h"

namespace tpsim::traces {
namespace {

std::string TmpPath(const std::string& name) { return test::TmpPath("tpsim_sampled_trace_test", name); }
using test::ReadFile;

// The reviewer's run: qwen3-0.6b's first two layers on two pipeline stages of the reference
// chip, a prompt of 64 tokens.
sim::Experiment Reference(uint32_t steps) {
  return sim::LoadExperiment(
      std::string(TPSIM_SOURCE_DIR) + "/configs/experiments/reference-qwen3-4b.textproto",
      {{"workload.num_layers", "2"},
       {"mapping.pipeline_stages", "2"},
       {"workload.seq_len", "64"},
       {"workload.decode_steps", std::to_string(steps)}},
      "qwen3-0.6b");
}

struct Traced {
  nlohmann::json events;
  std::vector<size_t> begin;  // sim::SegmentBegins of the traced Program
};

// The JSON trace of `e` on `engine`, of the decode steps `steps` (empty: every step).
Traced Trace(const sim::Experiment& e, const std::string& engine, const std::vector<uint32_t>& steps,
             const std::string& name) {
  sim::RunOptions o;
  o.engine = engine;
  o.observe_steps = steps;
  const std::string path = TmpPath(name);
  Traced t;
  o.observers.push_back([&](const sim::RunView& v) {
    WriteTrace(path, v.program, v.chip, v.timing, v.result.config());
    t.begin = sim::SegmentBegins(v.program);
  });
  sim::RunExperiment(e, o);
  t.events = nlohmann::json::parse(ReadFile(path)).at("traceEvents");
  std::filesystem::remove(path);
  return t;
}

// Segment (0: the prefill, k: decode step k) of task `id` of a Program with segment begins `b`.
size_t SegmentOf(const std::vector<size_t>& b, uint64_t id) {
  size_t s = 0;
  while (s + 2 < b.size() && b[s + 1] <= id) ++s;
  return s;
}

// A receive's annotations are its send's, but for its own start_ps and end_ps.
void ExpectReceivesAnnotatedAsSends(const nlohmann::json& events) {
  std::map<uint64_t, nlohmann::json> send;
  for (const auto& e : events)
    if (e.at("ph") == "X" && e.at("cat") == "send") send[e.at("args").at("task")] = e.at("args");
  size_t recvs = 0;
  for (const auto& e : events) {
    if (e.at("ph") != "X" || e.at("cat") != "recv") continue;
    ++recvs;
    nlohmann::json r = e.at("args"), s = send.at(e.at("args").at("task").get<uint64_t>());
    for (const char* k : {"start_ps", "end_ps"}) r.erase(k), s.erase(k);
    EXPECT_EQ(r, s) << e.dump();
  }
  EXPECT_GT(recvs, 0u);
}

// The sampled trace `s` of steps `steps` against the whole run's `w`: task slices equal (args
// but the task id, which counts the lowered tasks), every wait one of the whole run's (before
// and waiting for the same tasks, at the same times), and all the whole run's waits of the
// prefill and step 1, which follow only lowered steps.
void ExpectSampledWaitsAreTheWholeRuns(const Traced& w, const Traced& s, const std::vector<uint32_t>& steps) {
  // Segments 0 .. the last step (the skipped ones empty), then the end.
  ASSERT_EQ(s.begin.size(), steps.back() + 2u);
  ASSERT_EQ(w.begin.size(), steps.back() + 2u);
  for (size_t k = 1; k <= steps.back(); ++k) {
    const bool lowered = std::find(steps.begin(), steps.end(), k) != steps.end();
    EXPECT_EQ(s.begin[k + 1] - s.begin[k], lowered ? w.begin[k + 1] - w.begin[k] : 0u) << "step " << k;
  }
  // Sampled task -> the whole run's: the same index within its segment.
  auto whole_id = [&](uint64_t id) {
    const size_t k = SegmentOf(s.begin, id);
    return static_cast<uint64_t>(w.begin[k] + (id - s.begin[k]));
  };
  auto whole_seg = [&](uint64_t id) { return SegmentOf(w.begin, id); };
  std::map<uint64_t, nlohmann::json> whole_tasks;
  for (const auto& e : w.events) {
    if (e.at("ph") == "X" && e.at("args").contains("task") && e.at("cat") != "recv" && e.at("cat") != "wait")
      whole_tasks[e.at("args").at("task")] = e;
  }
  using Wait = std::tuple<std::string, double, double, uint64_t, int64_t, std::string>;
  auto wait_of = [](const nlohmann::json& e, uint64_t before, int64_t waiting_for) {
    const nlohmann::json& a = e.at("args");
    return Wait{e.at("name"), e.at("ts"), e.at("dur"), before, waiting_for, a.value("waiting_for", "")};
  };
  std::set<Wait> whole_waits, early;  // early: before tasks of the prefill and step 1
  for (const auto& e : w.events) {
    if (e.at("ph") != "X" || e.at("cat") != "wait") continue;
    const nlohmann::json& a = e.at("args");
    const Wait x = wait_of(e, a.at("before_task"), a.value("waiting_for_task", int64_t{-1}));
    whole_waits.insert(x);
    if (whole_seg(a.at("before_task")) <= 1) early.insert(x);
  }
  size_t tasks = 0, waits = 0, later_waits = 0;
  std::set<Wait> sampled_early;
  for (const auto& e : s.events) {
    if (e.at("ph") != "X") continue;
    const nlohmann::json& a = e.at("args");
    if (e.at("cat") == "wait") {
      const uint64_t before = whole_id(a.at("before_task"));
      const int64_t waiting_for =
          a.contains("waiting_for_task") ? static_cast<int64_t>(whole_id(a.at("waiting_for_task"))) : -1;
      const Wait x = wait_of(e, before, waiting_for);
      EXPECT_TRUE(whole_waits.count(x)) << "not a wait of the whole run: " << e.dump();
      ++waits;
      if (whole_seg(before) <= 1) {
        sampled_early.insert(x);
      } else {
        ++later_waits;
      }
    } else if (a.contains("task") && e.at("cat") != "recv") {
      ++tasks;
      const nlohmann::json& x = whole_tasks.at(whole_id(a.at("task")));
      nlohmann::json ours = a, theirs = x.at("args");
      ours.erase("task"), theirs.erase("task");
      EXPECT_EQ(ours, theirs) << e.dump();
      EXPECT_EQ(e.at("name"), x.at("name"));
    }
  }
  EXPECT_EQ(tasks, s.begin.back());
  EXPECT_EQ(sampled_early, early);
  EXPECT_GT(later_waits, 0u);  // waits within the later steps stay
  EXPECT_EQ(waits, sampled_early.size() + later_waits);
}

TEST(SampledTrace, AnalyticalWaitsAreTheWholeRuns) {
  const sim::Experiment e = Reference(30);
  const std::vector<uint32_t> steps = {1, 10, 20, 30};
  const Traced whole = Trace(e, "analytical", {}, "a_whole.json");
  const Traced sampled = Trace(e, "analytical", steps, "a_sampled.json");
  ExpectSampledWaitsAreTheWholeRuns(whole, sampled, steps);
  ExpectReceivesAnnotatedAsSends(whole.events);
  ExpectReceivesAnnotatedAsSends(sampled.events);
}

TEST(SampledTrace, TlmWaitsAreTheWholeRuns) {
  const sim::Experiment e = Reference(12);
  const std::vector<uint32_t> steps = {1, 5, 10, 12};
  const Traced whole = Trace(e, "tlm", {}, "t_whole.json");
  const Traced sampled = Trace(e, "tlm", steps, "t_sampled.json");
  ExpectSampledWaitsAreTheWholeRuns(whole, sampled, steps);
  ExpectReceivesAnnotatedAsSends(whole.events);
  ExpectReceivesAnnotatedAsSends(sampled.events);
}

}  // namespace
}  // namespace tpsim::traces
