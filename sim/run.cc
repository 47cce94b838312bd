#include "sim/run.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "mapping/mapping.h"
#include "sim/engine.h"
#include "sim/result.h"

namespace tpsim::sim {

namespace {

// Validates `e` and finds its engine; returns the chip ValidateExperiment built.
arch::Chip Prepare(const Experiment& e, const std::string& requested, std::unique_ptr<Engine>* engine) {
  arch::Chip chip = ValidateExperiment(e);
  CheckLowerable(e);
  if (e.cfg.workload().has_requests() && (e.cfg.workload().batch() == 0 || e.cfg.workload().seq_len() == 0)) {
    throw config::ConfigError(config::Diag{e.locs.Find("workload.requests"), "workload.requests", "",
                                           "a request stream is served, not run: use `tpsim serve`"});
  }
  std::string engine_name = !requested.empty() ? requested : e.cfg.engine();
  if (engine_name.empty()) engine_name = "analytical";
  *engine = MakeEngine(engine_name);
  if (!*engine) {
    throw config::ConfigError(
        UnknownEngineDiag(config::Location{"<command line>", 1, 1}, "--engine", engine_name));
  }
  return chip;
}

// Clears the timing-only fields of a chip config (ProgramCache::TimingOnlyFields).
void ClearTiming(config::Chip* c) {
  c->clear_clock_mhz();
  config::Core* core = c->mutable_core();
  core->clear_systolic_rows();
  core->clear_systolic_cols();
  core->clear_systolic_arrays();
  core->clear_matrix_utilization();
  core->clear_vector_lanes();
  core->clear_sram_bandwidth_gbps();
  config::Noc* noc = c->mutable_noc();
  noc->clear_link_bandwidth_gbps();
  noc->clear_router_latency_cycles();
  noc->clear_link_latency_ns();
  noc->clear_d2d_bandwidth_gbps();
  noc->clear_d2d_latency_ns();
  noc->clear_switch_latency_ns();
  for (auto& edge : *noc->mutable_edges()) {
    edge.clear_bandwidth_gbps();
    edge.clear_latency_ns();
  }
  for (auto& mem : *c->mutable_memory()) {
    mem.clear_bandwidth_gbps();
    mem.clear_efficiency();
    mem.clear_latency_ns();
  }
}

void AppendSerialised(const google::protobuf::Message& m, std::string* out) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  *out += std::to_string(bytes.size()) + ":" + bytes;
}

// Times saturate at the clock's maximum instead of wrapping (SatAdd); a saturated end
// means the run cannot be represented. Throws TimeOverflowError naming the first task
// (in id order) that ended there, its payload and the fields its time depends on.
void CheckRepresentable(const mapping::Program& program, const EngineOutput& timing) {
  constexpr Ps kMax = std::numeric_limits<Ps>::max();
  if (timing.makespan_ps < kMax) return;
  for (size_t i = 0; i < timing.tasks.size() && i < program.num_tasks(); ++i) {
    if (timing.tasks[i].end_ps < kMax) continue;
    const mapping::Task t = program.task(i);
    std::string what, fields;
    char mb[64];
    std::snprintf(mb, sizeof mb, "%.6g MB", static_cast<double>(t.bytes) / 1e6);
    switch (t.kind) {
      case mapping::TaskKind::kTransfer:
        what = std::string("a transfer of ") + mb + " from core " + std::to_string(t.core) + " to core " +
               std::to_string(t.dst_core);
        fields = "chip.noc.link_bandwidth_gbps and the links' latencies";
        break;
      case mapping::TaskKind::kMemory:
        what = std::string("a DRAM ") + (t.write ? "write" : "read") + " of " + mb + " on channel " +
               std::to_string(t.channel);
        fields = "chip.memory[].bandwidth_gbps and efficiency";
        break;
      default:
        what = "a compute task on core " + std::to_string(t.core);
        fields = "chip.clock_mhz, chip.core.matrix_utilization and the core's units";
        break;
    }
    const std::string op = t.op < program.ops.size() ? program.ops[t.op].ref.op : std::string("?");
    const double start_days = static_cast<double>(timing.tasks[i].start_ps) / 864e14;
    char started[64];
    std::snprintf(started, sizeof started, "%.3g days", start_days);
    // A task that starts after a day of simulated time is where the clock ran out, not
    // necessarily the only slow one: the tasks before it took most of the time.
    const std::string note =
        start_days < 1 ? "" : " (the tasks before it, of the same kind or not, took most of that time)";
    throw TimeOverflowError(what + " (task " + std::to_string(i) + ", op " + op + "), started at " + started +
                            ", ends later than the 106.7 days (2^63 ps) tpsim can represent" + note +
                            ": check " + fields);
  }
  throw TimeOverflowError("the run ends later than the 106.7 days (2^63 ps) tpsim can represent");
}

}  // namespace

RunOutput RunExperiment(const Experiment& e, const RunOptions& opts) {
  std::unique_ptr<Engine> engine;
  arch::Chip chip = Prepare(e, opts.engine, &engine);
  RunOutput out;
  if (opts.on_stage) opts.on_stage("lowering");
  out.program = mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping());
  // Lives until the next stage replaces it (a progress line may hold the pointer until then).
  const std::string timing_stage = "timing (" + engine->name() + " engine)";
  if (opts.on_stage) opts.on_stage(timing_stage.c_str());
  EngineOutput timing = engine->Run(out.program, chip);
  CheckRepresentable(out.program, timing);
  if (opts.on_stage) opts.on_stage("writing results");
  out.result = BuildResult(out.program, chip, timing, e.cfg.name(), engine->name(), opts.keep_task_times);
  out.result.set_config(ResolvedText(e));
  out.result.set_title(RunTitle(e.cfg, engine->name()));
  for (const RunObserver& observe : opts.observers) observe(RunView{out.program, chip, timing, out.result});
  return out;
}

const std::vector<std::string>& ProgramCache::TimingOnlyFields() {
  static const std::vector<std::string> kFields = {
      "chip.clock_mhz",
      "chip.core.systolic_rows",
      "chip.core.systolic_cols",
      "chip.core.systolic_arrays",
      "chip.core.matrix_utilization",
      "chip.core.vector_lanes",
      "chip.core.sram_bandwidth_gbps",
      "chip.noc.link_bandwidth_gbps",
      "chip.noc.router_latency_cycles",
      "chip.noc.link_latency_ns",
      "chip.noc.d2d_bandwidth_gbps",
      "chip.noc.d2d_latency_ns",
      "chip.noc.switch_latency_ns",
      "chip.noc.edges[].bandwidth_gbps",
      "chip.noc.edges[].latency_ns",
      "chip.memory[].bandwidth_gbps",
      "chip.memory[].efficiency",
      "chip.memory[].latency_ns",
  };
  return kFields;
}

std::string ProgramCache::Key(const config::Experiment& cfg) {
  if (cfg.mapping().placement() == "file") return "";
  config::Chip chip = cfg.chip();
  ClearTiming(&chip);
  std::string key;
  AppendSerialised(chip, &key);
  AppendSerialised(cfg.model(), &key);
  AppendSerialised(cfg.workload(), &key);
  AppendSerialised(cfg.mapping(), &key);
  return key;
}

namespace {

std::shared_ptr<const ProgramCache::Entry> MakeEntry(const Experiment& e, const arch::Chip& chip,
                                                     const Engine* engine) {
  auto entry = std::make_shared<ProgramCache::Entry>();
  entry->program = mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping());
  if (engine) {
    entry->prepared_by = engine->name();
    entry->prepared = engine->Prepare(entry->program, chip);
  }
  return entry;
}

}  // namespace

std::shared_ptr<const ProgramCache::Entry> ProgramCache::Get(const Experiment& e, const arch::Chip& chip,
                                                             const Engine* engine) {
  const std::string key = capacity_ > 0 ? Key(e.cfg) : "";
  std::unique_lock<std::mutex> lock(mu_);
  if (key.empty()) {
    ++misses_;
    lock.unlock();
    return MakeEntry(e, chip, engine);
  }
  for (;;) {
    auto it = std::find_if(lru_.begin(), lru_.end(), [&](const Slot& s) { return s.key == key; });
    if (it == lru_.end()) break;
    if (it->entry && (!engine || it->entry->prepared_by == engine->name())) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it);
      return it->entry;
    }
    if (it->entry) break;  // cached without what this engine prepares: made again below
    ready_.wait(lock);     // another caller is lowering it
  }
  ++misses_;
  lru_.remove_if([&](const Slot& s) { return s.key == key; });
  lru_.push_front(Slot{key, nullptr});
  const auto pending = lru_.begin();
  lock.unlock();
  std::shared_ptr<const Entry> entry;
  try {
    entry = MakeEntry(e, chip, engine);
  } catch (...) {
    lock.lock();
    lru_.erase(pending);
    ready_.notify_all();
    throw;
  }
  lock.lock();
  pending->entry = entry;
  lru_.splice(lru_.begin(), lru_, pending);
  // Evict the least recently used finished entries beyond the capacity.
  for (auto it = lru_.end(); lru_.size() > capacity_ && it != lru_.begin();) {
    --it;
    if (it->entry) it = lru_.erase(it);
  }
  ready_.notify_all();
  return entry;
}

uint64_t ProgramCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

uint64_t ProgramCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

size_t ProgramCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

config::Summary RunSummary(const Experiment& e, const std::string& engine_name, ProgramCache* cache) {
  std::unique_ptr<Engine> engine;
  arch::Chip chip = Prepare(e, engine_name, &engine);
  // A cached entry keeps what the engine prepared; without a cache, Run prepares for itself.
  const std::shared_ptr<const ProgramCache::Entry> entry =
      cache ? cache->Get(e, chip, engine.get()) : MakeEntry(e, chip, nullptr);
  const mapping::Program& program = entry->program;
  const EngineOutput timing = engine->Run(program, chip, entry->prepared.get());
  CheckRepresentable(program, timing);
  return BuildSummary(program, chip, timing);
}

}  // namespace tpsim::sim
