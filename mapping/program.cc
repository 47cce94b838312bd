#include "mapping/program.h"

#include <cstdio>

namespace tpsim::mapping {

std::string Program::Dump() const {
  std::string out;
  out += "program: " + std::to_string(tasks.size()) + " tasks, " + std::to_string(ops.size()) + " ops, " +
         std::to_string(collectives.size()) + " collectives; weights " + ToString(weights_location) +
         ", kv " + ToString(kv_location) + ", spilled " + std::to_string(spilled_bytes) + " B\n";
  char buf[256];
  for (const Task& t : tasks) {
    const OpInfo& op = ops[t.op];
    switch (t.kind) {
      case TaskKind::kCompute:
        if (t.flops > 0)
          std::snprintf(
              buf, sizeof buf, "t%u compute core=%d %s batch=%llu m=%llu k=%llu n=%llu flops=%.0f bytes=%llu",
              t.id, t.core, llm::ToString(t.op_kind), (unsigned long long)t.batch, (unsigned long long)t.m,
              (unsigned long long)t.k, (unsigned long long)t.n, t.flops, (unsigned long long)t.bytes);
        else
          std::snprintf(buf, sizeof buf, "t%u compute core=%d %s m=%llu n=%llu vector_ops=%.0f bytes=%llu",
                        t.id, t.core, llm::ToString(t.op_kind), (unsigned long long)t.m,
                        (unsigned long long)t.n, t.vector_ops, (unsigned long long)t.bytes);
        break;
      case TaskKind::kTransfer:
        std::snprintf(buf, sizeof buf,
                      "t%u transfer core=%d->%d bytes=%llu offset=%llu->%llu%s coll=%d step=%u", t.id, t.core,
                      t.dst_core, (unsigned long long)t.bytes, (unsigned long long)t.offset,
                      (unsigned long long)t.dst_offset, t.reduce ? " reduce" : "", t.collective, t.coll_step);
        if (t.collective >= 0 && static_cast<size_t>(t.collective) < collectives.size() &&
            collectives[t.collective].groups > 1) {
          // Sub-group collectives only (the line is unchanged for every other one).
          const CollectiveInfo& c = collectives[t.collective];
          out += buf;
          std::snprintf(buf, sizeof buf, " groups=%dx%d", c.groups, c.ranks);
        }
        break;
      case TaskKind::kMemory:
        std::snprintf(buf, sizeof buf, "t%u memory core=%d channel=%d %s bytes=%llu", t.id, t.core, t.channel,
                      t.write ? "write" : "read", (unsigned long long)t.bytes);
        break;
    }
    out += buf;
    out += " op=" + std::string(ToString(op.ref.phase)) +
           (op.ref.phase == Phase::kDecode ? std::to_string(op.ref.step) : "") + ".L" +
           std::to_string(op.ref.layer) + "." + op.ref.op + " [" + op.ref.Label() + "] deps=[";
    for (size_t i = 0; i < t.deps.size(); ++i) out += (i ? "," : "") + std::to_string(t.deps[i]);
    out += "]\n";
  }
  return out;
}

TaskGraph FlattenTasks(const Program& program) {
  TaskGraph g;
  const size_t n = program.tasks.size();
  g.dep_end.resize(n);
  g.kind.resize(n);
  g.core.resize(n);
  g.op.resize(n);
  size_t total = 0;
  for (const Task& t : program.tasks) total += t.deps.size();
  g.deps.reserve(total);
  for (size_t i = 0; i < n; ++i) {
    const Task& t = program.tasks[i];
    g.deps.insert(g.deps.end(), t.deps.begin(), t.deps.end());
    g.dep_end[i] = static_cast<uint32_t>(g.deps.size());
    g.kind[i] = t.kind;
    g.core[i] = t.core;
    g.op[i] = t.op;
    if (t.kind == TaskKind::kCompute) g.compute_flops += t.flops;
  }
  return g;
}

}  // namespace tpsim::mapping
