#pragma once
// Programs in tests. Tests that build a Program task by task fill a TestProgram (the
// Program's fields, and tasks as a plain vector of Task + deps they may edit freely); it
// turns into a mapping::Program through mapping::ProgramBuilder wherever one is needed, so
// every hand-built Program is verified (mapping::InvalidProgram for a broken one). Tests
// that read a Program's tasks with their deps use TaskViews.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "mapping/program.h"

namespace tpsim::mapping::testing {

// A task and its deps, as a test writes them (id: its index, set by the test's helper).
struct TestTask : mapping::Task {
  std::vector<mapping::TaskId> deps;
};

struct TestProgram {
  int num_cores = 0;
  int num_channels = 0;
  std::vector<mapping::OpInfo> ops;
  std::vector<mapping::CollectiveInfo> collectives;
  mapping::WeightsLocation weights_location = mapping::WeightsLocation::kNone;
  mapping::KvLocation kv_location = mapping::KvLocation::kNone;
  uint64_t spilled_bytes = 0;
  mapping::FuncData func;
  std::vector<TestTask> tasks;

  // Appends `t` with `deps` (plain numbers, as tests write them); returns its id.
  mapping::TaskId Add(mapping::Task t, const std::vector<uint32_t>& deps = {}) {
    TestTask x;
    static_cast<mapping::Task&>(x) = t;
    x.id = mapping::TaskId(static_cast<uint32_t>(tasks.size()));
    for (uint32_t d : deps) x.deps.push_back(mapping::TaskId(d));
    tasks.push_back(std::move(x));
    return tasks.back().id;
  }

  // A built Program as a TestProgram, to edit and build again.
  static TestProgram Of(const mapping::Program& p) {
    TestProgram t;
    t.num_cores = p.num_cores;
    t.num_channels = p.num_channels;
    t.ops = p.ops;
    t.collectives = p.collectives;
    t.weights_location = p.weights_location;
    t.kv_location = p.kv_location;
    t.spilled_bytes = p.spilled_bytes;
    t.func = p.func;
    for (size_t i = 0; i < p.num_tasks(); ++i) {
      const std::span<const mapping::TaskId> d = p.deps(i);
      t.Add(p.task(i), std::vector<uint32_t>(d.begin(), d.end()));
    }
    return t;
  }

  // Through a ProgramBuilder: throws mapping::InvalidProgram as Build does.
  mapping::Program Build() const {
    mapping::ProgramBuilder b(num_cores, num_channels);
    mapping::Program& p = b.program();
    p.ops = ops;
    p.collectives = collectives;
    p.weights_location = weights_location;
    p.kv_location = kv_location;
    p.spilled_bytes = spilled_bytes;
    p.func = func;
    for (const TestTask& t : tasks) b.Add(t, t.deps);
    return b.Build();
  }
  operator mapping::Program() const { return Build(); }  // NOLINT: tests pass it where a Program goes
};

// A built Program's task with its deps.
struct TaskView : mapping::Task {
  std::span<const mapping::TaskId> deps;
};
inline TaskView View(const mapping::Program& p, size_t i) {
  TaskView v;
  static_cast<mapping::Task&>(v) = p.task(i);
  v.deps = p.deps(i);
  return v;
}
inline std::vector<TaskView> TaskViews(const mapping::Program& p) {
  std::vector<TaskView> v;
  v.reserve(p.num_tasks());
  for (size_t i = 0; i < p.num_tasks(); ++i) v.push_back(View(p, i));
  return v;
}

}  // namespace tpsim::mapping::testing
