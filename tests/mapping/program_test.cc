// The Program IR: the builder's storage (records, interned details, CSR deps), decoding,
// Verify's rules, and the enums' text.
#include "mapping/program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "mapping/collective/collective.h"
#include "tests/mapping/program_test_util.h"

namespace tpsim::mapping {
namespace {

Task Gemm(int core, uint64_t m, uint64_t n, uint64_t k) {
  Task t;
  t.core = mapping::CoreId(core);
  t.m = m, t.n = n, t.k = k;
  t.flops = 2.0 * m * n * k;
  t.bytes = 2 * (m * k + k * n + m * n);
  return t;
}
Task Send(int src, int dst, uint64_t bytes, int32_t coll = -1, uint16_t step = 0) {
  Task t;
  t.kind = TaskKind::kTransfer;
  t.core = mapping::CoreId(src), t.dst_core = mapping::CoreId(dst), t.bytes = bytes, t.collective = coll,
  t.coll_step = step;
  return t;
}
Task Read(int core, int channel, uint64_t bytes) {
  Task t;
  t.kind = TaskKind::kMemory;
  t.core = mapping::CoreId(core), t.channel = channel, t.bytes = bytes;
  return t;
}

ProgramBuilder Builder() {
  ProgramBuilder b(4, 2);
  b.program().ops.resize(2);
  return b;
}

TEST(Program, TasksDecodeAsTheyWereAdded) {
  ProgramBuilder b = Builder();
  Task g = Gemm(1, 64, 32, 16);
  g.op = mapping::OpId(1);
  Task x = Send(1, 2, 4096);
  x.offset = 100, x.dst_offset = 200, x.reduce = true, x.in_switch_gbps = 480;
  b.program().collectives.push_back(
      {CollectiveKind::kAllReduce, mapping::AlgorithmOf("nvls"), 4096, 2, mapping::OpId(0), 1, {1, 2}});
  x.collective = 0, x.coll_step = 3;
  Task r = Read(3, 1, 777);
  r.write = true;
  EXPECT_EQ(b.Add(g), 0u);
  EXPECT_EQ(b.Add(x, {TaskId(0)}), 1u);
  EXPECT_EQ(b.Add(r, {TaskId(1), TaskId(0)}), 2u);
  const Program p = b.Build();
  ASSERT_EQ(p.num_tasks(), 3u);
  const Task t0 = p.task(0), t1 = p.task(1), t2 = p.task(2);
  EXPECT_EQ(t0.kind, TaskKind::kCompute);
  EXPECT_EQ(t0.core, 1);
  EXPECT_EQ(t0.op, 1u);
  EXPECT_EQ(t0.m, 64u);
  EXPECT_EQ(t0.n, 32u);
  EXPECT_EQ(t0.k, 16u);
  EXPECT_EQ(t0.flops, 65536.0);
  EXPECT_EQ(t0.bytes, 2u * (64 * 16 + 16 * 32 + 64 * 32));
  EXPECT_EQ(t1.kind, TaskKind::kTransfer);
  EXPECT_EQ(t1.dst_core, 2);
  EXPECT_EQ(t1.offset, 100u);
  EXPECT_EQ(t1.dst_offset, 200u);
  EXPECT_TRUE(t1.reduce);
  EXPECT_EQ(t1.in_switch_gbps, 480.0);
  EXPECT_EQ(t1.collective, 0);
  EXPECT_EQ(t1.coll_step, 3);
  EXPECT_EQ(t1.id, 1u);
  EXPECT_EQ(t2.channel, 1);
  EXPECT_TRUE(t2.write);
  EXPECT_EQ(t2.bytes, 777u);
  // Deps in the order given, in one CSR array.
  EXPECT_EQ(std::vector<uint32_t>(p.deps(2).begin(), p.deps(2).end()), (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(p.dep_begin(), (std::vector<uint32_t>{0, 0, 1, 3}));
  EXPECT_EQ(p.dep_list(), (std::vector<TaskId>{TaskId(0), TaskId(1), TaskId(0)}));
  EXPECT_EQ(p.func_op(0), -1);
  EXPECT_EQ(p.ComputeFlops(), 65536.0);
}

TEST(Program, EqualDetailsAreStoredOnce) {
  // 100 equal GEMMs on 4 cores, 100 transfers of 2 shapes in 10 collectives, 10 equal reads:
  // 1 compute shape, 2 transfer shapes (+ 10 collective runs), 1 memory detail.
  ProgramBuilder b = Builder();
  for (int c = 0; c < 10; ++c)
    b.program().collectives.push_back(
        {CollectiveKind::kAllGather, mapping::AlgorithmOf("ring"), 8, 4, mapping::OpId(0)});
  for (int i = 0; i < 100; ++i) b.Add(Gemm(i % 4, 8, 8, 8));
  for (int i = 0; i < 100; ++i) b.Add(Send(1 + i % 3, 0, 8 << (i % 2), i / 10, static_cast<uint16_t>(i % 3)));
  for (int i = 0; i < 10; ++i) b.Add(Read(i % 4, 0, 64));
  const Program p = b.Build();
  EXPECT_EQ(p.shapes().size(), 1u);
  EXPECT_EQ(p.collective_runs().size(), 10u);  // one run per collective
  EXPECT_EQ(p.transfer_shapes().size(), 2u);
  EXPECT_EQ(p.memories().size(), 1u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(p.task(100 + i).collective, i / 10);
    EXPECT_EQ(p.task(100 + i).coll_step, i % 3);
    EXPECT_EQ(p.task(100 + i).bytes, uint64_t{8} << (i % 2));
    EXPECT_EQ(p.task(100 + i).core, 1 + i % 3);
    EXPECT_EQ(p.task(100 + i).dst_core, 0);
  }
  // 210 records of 16 B, the details, 211 offsets and no deps.
  // The 10 collective runs and one block of their index (Program::collective).
  EXPECT_EQ(p.TaskBytes(), 210 * sizeof(TaskRecord) + sizeof(ComputeShape) +
                               10 * sizeof(TransferCollectiveRun) + sizeof(uint32_t) +
                               2 * sizeof(TransferShape) + sizeof(MemoryDetail) + 211 * sizeof(uint32_t));
}

TEST(Program, ShapesInternBitForBit) {
  // -0.0 == 0.0 as doubles, but the dump prints them apart: they stay two shapes.
  ProgramBuilder b = Builder();
  Task v;
  v.op_kind = llm::OpKind::kNorm;
  v.vector_ops = 0.0;
  b.Add(v);
  v.vector_ops = -0.0;
  b.Add(v);
  const Program p = b.Build();
  EXPECT_EQ(p.shapes().size(), 2u);
  EXPECT_TRUE(std::signbit(p.task(1).vector_ops));
}

TEST(Program, TransfersInBulkAreWhatAddMakes) {
  // 3000 transfers of 1000 distinct shapes (transfer i: shape i mod 1000, told apart by its
  // bytes; the table grows several times): interned all at once (InternTransfers), then
  // added twice by those indices (AddTransfer), as a repeated collective is; the same arrays
  // as adding the Tasks one by one.
  std::vector<Task> xs;
  for (int i = 0; i < 3000; ++i) {
    const int s = i % 1000;
    Task x = Send(i % 4, (s + 1) % 4, 8 * (s + 1), 0, static_cast<uint16_t>(i % 5));
    x.offset = 8 * (s % 7), x.dst_offset = x.offset + 8 * (s % 2), x.reduce = s % 3 == 0;
    xs.push_back(x);
  }
  ProgramBuilder one = Builder(), bulk = Builder();
  for (ProgramBuilder* b : {&one, &bulk})
    b->program().collectives.push_back(
        {CollectiveKind::kAllReduce, mapping::AlgorithmOf("ring"), 64, 4, mapping::OpId(0), 1, {0, 1, 2, 3}});
  // Task n (of 6000) waits on task n / 2 (none for task 0).
  auto deps = [](size_t n) {
    return n ? std::vector<TaskId>{TaskId(static_cast<uint32_t>(n / 2))} : std::vector<TaskId>{};
  };
  for (size_t n = 0; n < 2 * xs.size(); ++n) one.Add(xs[n % xs.size()], deps(n));
  std::vector<TransferShape> shapes;
  for (const Task& x : xs)
    shapes.push_back({x.bytes, x.offset, x.dst_offset, x.in_switch_gbps, x.dst_core, x.reduce});
  std::vector<uint32_t> ids;
  bulk.InternTransfers(shapes, &ids);
  ASSERT_EQ(ids.size(), xs.size());
  for (size_t n = 0; n < 2 * xs.size(); ++n) {
    const Task& x = xs[n % xs.size()];
    bulk.AddTransfer(x.core, x.op, x.coll_step, ids[n % xs.size()], x.collective, deps(n));
  }
  EXPECT_EQ(bulk.InternTransfer(shapes[1234]), ids[1234]);  // one at a time: the same index
  EXPECT_THROW(bulk.AddTransfer(CoreId(0), OpId(0), 0, 1000, 0, {}), std::logic_error);  // no such shape
  const Program a = one.Build(), b = bulk.Build();
  EXPECT_EQ(a.transfer_shapes().size(), 1000u);
  ASSERT_EQ(b.transfer_shapes().size(), a.transfer_shapes().size());
  for (size_t i = 0; i < a.transfer_shapes().size(); ++i) {
    const TransferShape &x = a.transfer_shapes()[i], &y = b.transfer_shapes()[i];
    EXPECT_TRUE(x.bytes == y.bytes && x.offset == y.offset && x.dst_offset == y.dst_offset &&
                x.dst_core == y.dst_core && x.reduce == y.reduce)
        << i;
  }
  ASSERT_EQ(a.num_tasks(), b.num_tasks());
  for (size_t i = 0; i < a.num_tasks(); ++i) {
    if (a.kind(i) == TaskKind::kTransfer) {
      EXPECT_EQ(a.transfer_shape_id(i), b.transfer_shape_id(i)) << i;
      EXPECT_EQ(a.collective(i), b.collective(i)) << i;
    }
    EXPECT_EQ(a.records()[i].coll_step, b.records()[i].coll_step) << i;
    EXPECT_EQ(a.records()[i].core, b.records()[i].core) << i;
  }
  EXPECT_EQ(a.dep_begin(), b.dep_begin());
  EXPECT_EQ(a.dep_list(), b.dep_list());
}

TEST(Program, CollectiveRunsGiveEachTransferItsCollective) {
  // 30,000 tasks over 8 blocks of the runs' index: every 5th a GEMM, the transfers' collective
  // changing every 777 transfers (none for every third stretch), and one run of a single
  // transfer; each transfer reads back what it was given.
  ProgramBuilder b = Builder();
  for (int c = 0; c < 40; ++c)
    b.program().collectives.push_back(
        {CollectiveKind::kAllGather, mapping::AlgorithmOf("ring"), 8, 4, mapping::OpId(0)});
  std::vector<int32_t> given;
  int transfers = 0;
  for (int i = 0; i < 30000; ++i) {
    if (i % 5 == 0) {
      b.Add(Gemm(i % 4, 8, 8, 8));
      given.push_back(-2);
      continue;
    }
    const int stretch = transfers / 777;
    int32_t coll = stretch % 3 == 2 ? -1 : stretch;
    if (i == 20001) coll = 39;  // a run of one
    b.Add(Send(1, 0, 8, coll, 0));
    given.push_back(coll);
    ++transfers;
  }
  const Program p = b.Build();
  EXPECT_LT(p.collective_runs().size(), 40u);
  for (size_t i = 0; i < given.size(); ++i) {
    if (given[i] != -2) {
      ASSERT_EQ(p.collective(i), given[i]) << "task " << i;
    }
  }
  EXPECT_EQ(p.task(20001).collective, 39);
}

TEST(Program, FuncIndicesOnlyWhenAnyTaskHasOne) {
  ProgramBuilder b = Builder();
  b.program().func.ops.resize(1);
  b.Add(Gemm(0, 1, 1, 1));
  Task g = Gemm(0, 1, 1, 1);
  g.func = 0;
  b.Add(g);
  const Program p = b.Build();
  EXPECT_EQ(p.func_op(0), -1);
  EXPECT_EQ(p.func_op(1), 0);
  EXPECT_EQ(p.task(1).func, 0);
}

// Each broken Program names its first problem.
void ExpectInvalid(const ProgramBuilder& b, const std::string& what) {
  ProgramBuilder copy = b;
  try {
    copy.Build();
    ADD_FAILURE() << "expected InvalidProgram: " << what;
  } catch (const InvalidProgram& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(Program, VerifyRejectsWhatWouldCrashOrHangAnExecutor) {
  {
    ProgramBuilder b = Builder();
    b.Add(Gemm(0, 1, 1, 1));
    b.Add(Gemm(0, 1, 1, 1), {TaskId(1)});  // itself
    ExpectInvalid(b, "task 1: dep 1 is not an earlier task");
  }
  {
    ProgramBuilder b = Builder();
    b.Add(Gemm(0, 1, 1, 1), {TaskId(7)});
    ExpectInvalid(b, "task 0: dep 7 is not an earlier task");
  }
  {
    ProgramBuilder b = Builder();
    b.Add(Gemm(4, 1, 1, 1));
    ExpectInvalid(b, "task 0: core 4 not in [0, 4)");
  }
  {
    ProgramBuilder b = Builder();
    b.Add(Gemm(-1, 1, 1, 1));
    ExpectInvalid(b, "task 0: core -1 not in [0, 4)");
  }
  {
    ProgramBuilder b = Builder();
    b.Add(Send(0, 4, 8));
    ExpectInvalid(b, "task 0: dst_core 4 not in [0, 4)");
  }
  {
    ProgramBuilder b = Builder();
    b.Add(Read(0, 2, 8));
    ExpectInvalid(b, "task 0: channel 2 not in [0, 2)");
  }
  {
    ProgramBuilder b = Builder();
    Task g = Gemm(0, 1, 1, 1);
    g.op = mapping::OpId(2);
    b.Add(g);
    ExpectInvalid(b, "task 0: op 2 not in [0, 2)");
  }
  {
    ProgramBuilder b = Builder();
    b.Add(Send(0, 1, 8, 0));
    ExpectInvalid(b, "task 0: collective 0 not in [-1, 0)");
  }
  {
    ProgramBuilder b = Builder();
    Task g = Gemm(0, 1, 1, 1);
    g.func = 0;
    b.Add(g);
    ExpectInvalid(b, "task 0: func op 0 not in [0, 0)");
  }
  {
    // Two groups {0, 1} and {2, 3}: a transfer 1 -> 2 leaves its group.
    ProgramBuilder b = Builder();
    b.program().collectives.push_back(
        {CollectiveKind::kAllGather, mapping::AlgorithmOf("ring"), 8, 2, mapping::OpId(0), 2, {0, 1, 2, 3}});
    b.Add(Send(0, 1, 8, 0));
    b.Add(Send(1, 2, 8, 0));
    ExpectInvalid(b, "task 1: transfer 1->2 leaves the member groups of collective 0");
  }
  {
    ProgramBuilder b = Builder();
    b.program().collectives.push_back(
        {CollectiveKind::kAllGather, mapping::AlgorithmOf("ring"), 8, 2, mapping::OpId(0), 2, {0, 1, 2}});
    ExpectInvalid(b, "collective 0: 3 members for 2 x 2 ranks");
  }
  {
    ProgramBuilder b = Builder();
    b.program().collectives.push_back(
        {CollectiveKind::kAllGather, mapping::AlgorithmOf("ring"), 8, 2, mapping::OpId(5)});
    ExpectInvalid(b, "collective 0: op 5 not in [0, 2)");
  }
}

TEST(Program, VerifyFitsAChipWithFewerCoresOnlyWhenTheTasksDo) {
  ProgramBuilder b(8, 2);
  b.program().ops.resize(1);
  b.Add(Send(0, 3, 8));
  b.Add(Read(1, 0, 8));
  const Program p = b.Build();
  EXPECT_NO_THROW(VerifyFits(p, 8, 2));
  EXPECT_NO_THROW(VerifyFits(p, 4, 1));  // cores 0, 1, 3 and channel 0 exist there
  EXPECT_THROW(VerifyFits(p, 3, 1), InvalidProgram);
  EXPECT_THROW(VerifyFits(p, 4, 0), InvalidProgram);
}

TEST(Program, CollectiveMembersGiveEachCoreItsGroup) {
  CollectiveInfo c{CollectiveKind::kAllReduce, mapping::AlgorithmOf("ring"), 8, 2, mapping::OpId(0), 3,
                   {4, 5, 0, 1, 7, 6}};
  EXPECT_EQ(c.GroupOf(4), 0);
  EXPECT_EQ(c.GroupOf(1), 1);
  EXPECT_EQ(c.GroupOf(6), 2);
  EXPECT_EQ(c.GroupOf(2), -1);
}

TEST(Program, EnumsPrintTheirFormerText) {
  EXPECT_STREQ(ToString(Phase::kPrefill), "prefill");
  EXPECT_STREQ(ToString(Phase::kDecode), "decode");
  EXPECT_STREQ(ToString(Phase::kMixed), "mixed");
  EXPECT_STREQ(ToString(Phase::kKvTransfer), "kv_transfer");
  EXPECT_STREQ(ToString(CollectiveKind::kReduceScatter), "reduce_scatter");
  EXPECT_STREQ(ToString(CollectiveKind::kP2p), "p2p");
  EXPECT_STREQ(ToString(WeightsLocation::kDramStreamed), "dram (streamed each use)");
  EXPECT_STREQ(ToString(WeightsLocation::kNone), "");
  EXPECT_STREQ(ToString(KvLocation::kDram), "dram");
  for (Phase p : {Phase::kPrefill, Phase::kDecode, Phase::kMixed, Phase::kKvTransfer})
    EXPECT_EQ(ParsePhase(ToString(p)), p);
  for (int k = 0; k <= static_cast<int>(CollectiveKind::kP2p); ++k)
    EXPECT_EQ(ParseCollectiveKind(ToString(static_cast<CollectiveKind>(k))), static_cast<CollectiveKind>(k));
  EXPECT_EQ(ParseWeightsLocation("dram (streamed each use)"), WeightsLocation::kDramStreamed);
  EXPECT_EQ(ParseKvLocation("sram"), KvLocation::kSram);
  EXPECT_EQ(ParsePhase("Prefill"), std::nullopt);
  EXPECT_EQ(ParseCollectiveKind("allreduce"), std::nullopt);
}

TEST(Program, LabelKeepsThePartitionApartFromItsNote) {
  OpRef r;
  r.partition = "ring";
  EXPECT_EQ(r.Label(), "ring");
  r.note = "2 grid-row groups of 2 ranks";
  EXPECT_EQ(r.Label(), "ring (2 grid-row groups of 2 ranks)");
  EXPECT_EQ(r.partition, "ring");
}

TEST(Program, TestProgramBuildsThroughTheBuilder) {
  testing::TestProgram t;
  t.num_cores = 2;
  t.ops.resize(1);
  t.Add(Gemm(0, 1, 1, 1));
  t.Add(Send(0, 1, 8), {0});
  const Program p = t;
  ASSERT_EQ(p.num_tasks(), 2u);
  const testing::TaskView v = testing::View(p, 1);
  EXPECT_EQ(v.kind, TaskKind::kTransfer);
  ASSERT_EQ(v.deps.size(), 1u);
  EXPECT_EQ(v.deps[0], 0u);
  t.tasks[1].deps = {TaskId(1)};
  EXPECT_THROW(static_cast<void>(t.Build()), InvalidProgram);
}

// Typed ids: made only explicitly from their integer (a core is not an op or a task, and a
// plain number is none of them), read implicitly as it; the records stay 16 bytes.
static_assert(!std::is_convertible_v<int, CoreId> && !std::is_convertible_v<uint32_t, TaskId> &&
              !std::is_convertible_v<uint32_t, OpId>);
static_assert(!std::is_convertible_v<TaskId, CoreId> && !std::is_convertible_v<OpId, TaskId> &&
              !std::is_convertible_v<CoreId, OpId>);
static_assert(std::is_convertible_v<CoreId, int32_t> && std::is_convertible_v<TaskId, uint32_t>);
static_assert(sizeof(CoreId) == 4 && sizeof(TaskId) == 4 && sizeof(OpId) == 4 && sizeof(TaskRecord) == 16);

TEST(Program, TypedIdsReadAsTheirIntegers) {
  ProgramBuilder b(4, 1);
  b.program().ops.resize(2);
  Task g = Gemm(3, 1, 1, 1);
  g.op = OpId(1);
  const TaskId first = b.Add(g);
  const TaskId second = b.Add(Send(3, 0, 64), {first});
  const Program p = b.Build();
  EXPECT_EQ(first.value(), 0u);
  EXPECT_EQ(second, 1u);
  EXPECT_EQ(p.core(0), 3);
  EXPECT_EQ(p.task(1).dst_core, 0);
  EXPECT_EQ(p.op(0), 1u);
  ASSERT_EQ(p.deps(1).size(), 1u);
  EXPECT_EQ(p.deps(1)[0], first);
}

TEST(Program, AlgorithmIdsNameTheRegisteredAlgorithmsAndNccl) {
  // Every registered algorithm (collectives and the uneven all_to_all's) and nccl has an id
  // that prints back as its name; ids are the sorted order of the names, so distinct names get
  // distinct ids.
  std::vector<std::string> names = CollectiveNames();
  for (const std::string& n : AllToAllVNames()) names.push_back(n);
  names.push_back("nccl");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (size_t i = 0; i < names.size(); ++i) {
    const std::optional<AlgorithmId> a = ParseAlgorithm(names[i]);
    ASSERT_TRUE(a.has_value()) << names[i];
    EXPECT_EQ(static_cast<size_t>(*a), i) << names[i];
    EXPECT_EQ(ToString(*a), names[i]);
    EXPECT_EQ(AlgorithmOf(names[i]), *a);
  }
  EXPECT_NE(AlgorithmOf("ring"), AlgorithmOf("nvls"));
  EXPECT_FALSE(ParseAlgorithm("auto").has_value());  // a request, not an algorithm
  EXPECT_FALSE(ParseAlgorithm("").has_value());
  try {
    static_cast<void>(AlgorithmOf("tree"));
    FAIL() << "tree is not an algorithm of the registry";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'tree'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ring"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpsim::mapping
