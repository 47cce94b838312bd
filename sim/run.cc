#include "sim/run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "llm/opgraph.h"
#include "mapping/cost.h"
#include "mapping/estimate.h"
#include "mapping/mapping.h"
#include "sim/energy.h"
#include "sim/engine.h"
#include "sim/result.h"
#include "sim/sampled_run.h"
#include "sim/step_period.h"
#include "sim/step_reuse.h"
#include "sim/step_source.h"
#include "sim/step_streamed.h"

namespace tpsim::sim {

uint64_t DefaultMaxMemory() {
  static const uint64_t kLimit = [] {
    double total = 0;
    std::ifstream meminfo("/proc/meminfo");
    std::string key, unit;
    double kb = 0;
    while (meminfo >> key >> kb >> unit) {
      if (key == "MemTotal:") {
        total = kb * 1024;
        break;
      }
    }
    std::ifstream cgroup("/sys/fs/cgroup/memory.max");
    double cg = 0;
    if (cgroup >> cg && cg > 0 && (total == 0 || cg < total)) total = cg;  // "max" does not parse
    if (total <= 0) return uint64_t{16} * 1000 * 1000 * 1000;
    return static_cast<uint64_t>(0.8 * total);
  }();
  return kLimit;
}

std::optional<uint64_t> ParseByteSize(const std::string& text) {
  std::istringstream in(text);
  double v = 0;
  if (text.empty() || !(in >> v) || !std::isfinite(v) || v < 0) return std::nullopt;
  std::string unit;
  std::getline(in, unit);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB"))
    unit.resize(unit.size() - 2);
  else if (unit.size() > 1 && unit.ends_with("B"))
    unit.pop_back();
  else if (unit == "B")
    unit.clear();
  double scale = 1;
  if (unit == "K")
    scale = 1024.0;
  else if (unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty())
    return std::nullopt;
  const double bytes = v * scale;
  if (bytes >= 18446744073709551615.0) return std::nullopt;
  // A size under one byte ("0.5", "1e-4K") or "-0" would read as 0, no limit: only 0 means that.
  if ((v > 0 && bytes < 1) || std::signbit(v)) return std::nullopt;
  // A fraction of a byte given in bytes ("1.5") read as its floor, 1 byte.
  if (scale == 1 && bytes != std::floor(bytes)) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

namespace {

std::string Sci(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, v < 1e6 ? "%.0f" : "%.3g", v);
  return buf;
}

}  // namespace

std::string MemoryLimitText(const std::string& flag, uint64_t max_bytes) {
  return flag + " " + mapping::FormatBytes(static_cast<double>(max_bytes)) +
         (max_bytes == DefaultMaxMemory() ? " (80% of this machine's memory)" : "");
}

void CheckResources(const Experiment& e, const arch::Chip& chip, uint64_t max_bytes,
                    const std::string& limit_flag, std::optional<uint32_t> materialised_steps,
                    bool task_records, const std::string& note) {
  if (max_bytes == 0) return;
  const config::Model& model = e.cfg.model();
  config::Workload wl = e.cfg.workload();
  // Decode-step reuse lowers a fixed few steps, whatever workload.decode_steps is.
  const bool few = materialised_steps && *materialised_steps < wl.decode_steps();
  if (few) wl.set_decode_steps(*materialised_steps);
  const config::Mapping& m = e.cfg.mapping();
  const mapping::ProgramEstimate est = mapping::EstimateProgram(chip, model, wl, m);
  const double bytes =
      est.peak_bytes + (task_records ? est.tasks * mapping::ProgramEstimate::kTaskRecordBytes : 0);
  if (bytes <= static_cast<double>(max_bytes)) return;
  // Blame the factor that grows it most: the passes, the layers, or TP (its tasks per
  // layer against TP 1).
  config::Mapping one = m;
  one.set_tp(1);
  one.clear_grid_rows();
  const double tp_factor =
      est.per_layer / std::max(1.0, mapping::EstimateProgram(chip, model, wl, one).per_layer);
  const std::string layers_field = wl.num_layers() ? "workload.num_layers" : "model.num_layers";
  std::string field = "workload.decode_steps", value = std::to_string(e.cfg.workload().decode_steps());
  // (With reuse's few steps, fewer decode steps would not help: the layers or TP.)
  const double passes = few ? 0 : est.passes;
  if (est.layers >= passes && est.layers >= tp_factor) {
    field = layers_field, value = std::to_string(static_cast<uint64_t>(est.layers));
  } else if (tp_factor > passes) {
    field = "mapping.tp", value = std::to_string(m.tp());
  }
  const std::string limit = MemoryLimitText(limit_flag, max_bytes);
  throw config::ConfigError(config::Diag{
      e.locs.Find(field), field, value,
      "the Program would take about " + Sci(est.tasks) + " tasks, " + mapping::FormatBytes(bytes) +
          (task_records ? " with a record of each in the result (--tasks)" : "") + " (" + Sci(est.passes) +
          (few ? " passes (the prefill and the " + std::to_string(*materialised_steps) +
                     " decode steps that reuse lowers at once, of workload.decode_steps " +
                     std::to_string(e.cfg.workload().decode_steps()) + ")"
               : std::string(" passes (workload.decode_steps + 1)")) +
          " x " + Sci(est.layers) + " layers (" + layers_field + ") x " + Sci(est.per_layer) +
          " tasks per layer" +
          (wl.decode_steps() > 0 && est.per_layer_decode != est.per_layer
               ? " (a decode step's: " + Sci(est.per_layer_decode) + ")"
               : std::string()) +
          " at mapping.tp=" + std::to_string(m.tp()) +
          // Where the collectives' deps are most of it (direct: p - 1 a transfer), say so.
          (est.collective_deps > 4 * est.tasks
               ? "; their collectives' transfers wait on " + Sci(est.collective_deps) +
                     " others (mapping.collective " + mapping::CountedAlgorithm(m.collective()) + ")"
               : std::string()) +
          "), more than " + limit +
          (few ? ": lower the layers or mapping.tp, or raise "
               : ": lower workload.decode_steps, the layers or mapping.tp, or raise ") +
          limit_flag + note});
}

namespace {

// The field of a memory that makes its channels absurdly slow, and its value: the efficiency where
// that is the absurd factor (below 1e-3; typical is 0.7 to 0.9), else the peak bandwidth (the
// message blamed memory[0]'s bandwidth_gbps for an efficiency of 1e-300).
std::pair<std::string, double> SlowMemoryField(const config::Memory& m) {
  if (m.efficiency() > 0 && m.efficiency() < 1e-3) return {"efficiency", m.efficiency()};
  return {"bandwidth_gbps", m.bandwidth_gbps()};
}

}  // namespace

void CheckTimeBounds(const Experiment& e, const arch::Chip& chip) {
  const config::Model& model = e.cfg.model();
  const config::Workload& wl = e.cfg.workload();
  const config::Mapping& m = e.cfg.mapping();
  // Half the clock, so that the cycle's rounding and the engines' ceilings cannot make a
  // run that fits look certain to overflow.
  constexpr double kLimitS = 0.5 * 9223372036854775807.0 * 1e-12;
  const double layers = wl.num_layers() ? wl.num_layers() : model.num_layers();
  const double batch = std::max<uint32_t>(1, wl.batch());
  const uint32_t d = DtypeBytes(wl.dtype());
  llm::Phase ph;
  ph.batch = 1;
  ph.new_tokens = 1;
  ph.dtype_bytes = d;
  const double weight_bytes = static_cast<double>(llm::BuildLayer(model, ph).WeightBytes());
  auto refuse = [&](const std::string& field, const std::string& value, double seconds,
                    const std::string& what) {
    // Between half the clock and the clock, it is the margin that refuses ("59.61 days, longer
    // than the 106.7 days" contradicted itself).
    const std::string than =
        seconds > 2 * kLimitS
            ? std::string(", longer than ") + kClockLimit
            : std::string(", more than half of ") + kClockLimit +
                  " (this check before the run keeps that margin for what it does not count)";
    throw config::ConfigError(config::Diag{e.locs.Find(field), field, value,
                                           what + " would take at least " + DaysText(seconds) + than});
  };
  auto num = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  // Compute: every token of every pass goes through every layer's weight GEMMs.
  const double flops =
      2.0 * (weight_bytes / d) * layers * batch * (static_cast<double>(wl.seq_len()) + wl.decode_steps());
  // A GPU node's kernels run at its fastest tensor rate x tensor_efficiency at best
  // (arch/gpu/gemm.cc), whatever the dtype; systolic cores at their bf16 peak x utilisation. On
  // the mapping's cores (TP x stages), not the chip's: a TP 4 run on 64 cores was bounded 16x too
  // low, started, and stopped at 77 days (exit 1).
  const config::Chip& cc = e.cfg.chip();
  const double cores_used =
      static_cast<double>(std::max<uint32_t>(1, m.tp())) * std::max<uint32_t>(1, m.pipeline_stages());
  const double mapped = std::min<double>(chip.num_cores(), cores_used);
  const double per_core =
      (cc.has_gpu() ? std::max({cc.gpu().bf16_tflops(), cc.gpu().fp16_tflops(), cc.gpu().fp8_tflops()}) *
                          cc.gpu().tensor_efficiency()
                    : chip.AchievableTflops() / std::max(1, chip.num_cores())) *
      1e12;
  const double rate = per_core * mapped;
  if (rate > 0 && flops / rate > kLimitS) {
    refuse(cc.has_gpu() ? "chip.gpu.tensor_efficiency" : "chip.core.matrix_utilization",
           num(cc.has_gpu() ? cc.gpu().tensor_efficiency() : cc.core().matrix_utilization()), flops / rate,
           "the weight GEMMs (" + num(flops) + " FLOP at " + num(rate) + " FLOP/s on " +
               (mapped < chip.num_cores() ? "the mapping's " + num(mapped) + " cores"
                                          : std::string("all cores")) +
               ")");
  }
  // DRAM: streamed weights are read at least once, through at most one channel per core
  // of the mapping (every core uses one channel: arch::Chip::ChannelOf).
  double fastest_channel = 0;
  int fastest_memory = 0;
  for (const arch::MemoryChannel& c : chip.channels())
    if (c.bandwidth_gbps > fastest_channel) fastest_channel = c.bandwidth_gbps, fastest_memory = c.memory;
  const double dram =
      std::min(static_cast<double>(chip.channels().size()), cores_used) * fastest_channel * 1e9;
  // A GPU node's memory is its HBM inside each kernel's time (chip.gpu.hbm_*): no memory task
  // reads chip.memory's rate, which refused runs it never timed.
  if (dram > 0 && !e.cfg.chip().memory().empty() && !cc.has_gpu()) {
    bool streamed = false;
    try {
      const mapping::WeightPlan plan =
          mapping::PlanWeights(chip, model, m, static_cast<uint32_t>(layers), wl.dtype(), &wl);
      streamed = !plan.weights_in_sram || plan.resident_rows;  // one layout streamed: a pass at least
    } catch (const std::exception&) {
    }
    const double bytes = weight_bytes * layers;
    if (streamed && bytes / dram > kLimitS) {
      // The fastest channel's memory decides: its efficiency where that is the absurd factor
      // (below 1e-3; typical is 0.7 to 0.9), else its peak bandwidth (the message blamed
      // memory[0]'s bandwidth_gbps for an efficiency of 1e-300).
      const auto [field, value] = SlowMemoryField(e.cfg.chip().memory(fastest_memory));
      refuse("chip.memory[" + std::to_string(fastest_memory) + "]." + field, num(value), bytes / dram,
             "reading the streamed weights (" + num(bytes) + " bytes at " + num(dram / 1e9) +
                 " GB/s effective over the channels the mapping's cores use)");
    }
  }
  // Links: with TP > 1 every layer of every pass ends in data exchanged between ranks (a
  // collective or a layout conversion), and no transfer of it is smaller than a 1/P^2
  // share of the layer's output; one such transfer per layer and pass, in sequence, over
  // the fastest link. In-switch collectives (nvls, auto) do not use the links' rate.
  const double p = std::max<uint32_t>(1, m.tp());
  double fastest = 0;
  for (const arch::Link& l : chip.links()) {
    if (chip.node(l.src).kind == arch::Node::kMemory || chip.node(l.dst).kind == arch::Node::kMemory)
      continue;
    fastest = std::max(fastest, l.bandwidth_gbps);  // the network's links, not the controllers'
  }
  // On a GPU node the TP group's collectives are NCCL kernels (chip.gpu), not transfers; only
  // m_split_rotate's rotations cross the links (a ring mapping with no transfer was refused).
  if (p > 1 && fastest > 0 && m.collective() != "nvls" && m.collective() != "auto" &&
      (!cc.has_gpu() || mapping::MapsPartition(m, "m_split_rotate"))) {
    const double row = static_cast<double>(model.hidden_size()) * d / (p * p);
    const double bytes = layers * batch * row * (static_cast<double>(wl.seq_len()) + wl.decode_steps());
    const double seconds = bytes / (fastest * 1e9);
    if (seconds > kLimitS) {
      // The field that set the fastest link: on a wafer whose dies are one core each every link
      // is die-to-die (link_bandwidth_gbps was named with a value no link had).
      const config::Noc& noc = e.cfg.chip().noc();
      std::string field = "chip.noc.link_bandwidth_gbps";
      double value = noc.link_bandwidth_gbps();
      if (fastest != value && noc.topology() == "wafer" && fastest == noc.d2d_bandwidth_gbps()) {
        field = "chip.noc.d2d_bandwidth_gbps";
        value = fastest;
      } else if (fastest != value && noc.topology() == "edges") {
        field = "chip.noc.edges[].bandwidth_gbps";
        value = fastest;
      }
      refuse(field, num(value), seconds,
             "the transfers between the TP ranks (at least " + num(bytes) + " bytes in sequence at " +
                 num(fastest) + " GB/s)");
    }
  }
}

namespace {

// Validates `e` and finds its engine; returns the chip ValidateExperiment built.
// `materialised_steps`: the decode steps the run will lower (CheckResources).
// `task_records`: the Result keeps every task's times (RunOptions::keep_task_times).
arch::Chip Prepare(const Experiment& e, const std::string& requested, std::unique_ptr<Engine>* engine,
                   uint64_t max_memory_bytes, std::optional<uint32_t> materialised_steps = std::nullopt,
                   bool task_records = false, const std::string& note = "") {
  arch::Chip chip = ValidateExperiment(e);
  if (e.cfg.workload().has_requests() && (e.cfg.workload().batch() == 0 || e.cfg.workload().seq_len() == 0)) {
    throw config::ConfigError(config::Diag{e.locs.Find("workload.requests"), "workload.requests", "",
                                           "a request stream is served, not run: use `tpsim serve`"});
  }
  std::string engine_name = !requested.empty() ? requested : e.cfg.engine();
  if (engine_name.empty()) engine_name = "analytical";
  *engine = MakeEngine(engine_name);
  if (!*engine) {
    throw config::ConfigError(UnknownEngineDiag(config::kCommandLine, "--engine", engine_name));
  }
  CheckTimeBounds(e, chip);
  CheckResources(e, chip, max_memory_bytes, "--max-memory", materialised_steps, task_records, note);
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
    mem.clear_device();  // only decides the efficiency (arch/dram_device.h)
  }
  c->clear_energy();  // read by the result's energy (sim/energy.h), never by lowering
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

}  // namespace

std::vector<std::string> UnreadLinkFields(const Experiment& e, const mapping::Program& program) {
  std::vector<std::string> out;
  if (!e.cfg.chip().has_gpu() || program.num_tasks() == 0) return out;
  for (const char* f : {"link_bandwidth_gbps", "link_latency_ns", "switch_latency_ns",
                        "router_latency_cycles", "port_bandwidth_gbps", "router_buffer_packets"}) {
    const std::string path = std::string("chip.noc.") + f;
    if (GivenByCommandOrSweep(e, path))
      out.push_back(path +
                    " is ignored: this run's Program has no transfer (a GPU node's TP collectives are NCCL "
                    "kernels of chip.gpu; pipeline-stage hand-overs and m_split_rotate's rotations cross the "
                    "links)");
  }
  // The tasks are looked at only where a field was given.
  for (size_t i = 0; !out.empty() && i < program.num_tasks(); ++i)
    if (program.kind(i) == mapping::TaskKind::kTransfer) out.clear();
  return out;
}

std::vector<std::string> CollectiveFallbacks(const Experiment& e, const mapping::Program& program) {
  std::vector<std::string> out;
  const std::string asked = e.cfg.mapping().collective();
  if (asked.empty() || asked == "auto") return out;
  bool lowered = false;  // a collective run as transfers (not a GPU node's NCCL kernel)
  std::set<std::string> labels;
  for (const mapping::CollectiveInfo& c : program.collectives) {
    const std::string ran = mapping::ToString(c.algorithm);
    if (ran == "nccl") continue;
    lowered = true;
    // A TP group's collective, whose op is labelled by the algorithm that ran (a stage hand-over
    // has no ranks, and its op is the layer's); MoE's all-to-alls follow mapping.moe.all_to_all.
    if (c.kind == mapping::CollectiveKind::kAllToAll) continue;
    if (ran != asked && !c.members.empty() && c.op < program.ops.size() &&
        program.ops[c.op].ref.partition == ran)
      labels.insert(program.ops[c.op].ref.Label());
  }
  // The algorithm the lowering replaced, once per reason (halving_doubling over 7 ranks ran as
  // ring: the title said halving_doubling, only --ops's column told).
  for (const std::string& l : labels)
    out.push_back("mapping.collective " + asked + " ran as " + l + " on some collectives");
  // On a GPU node the TP group's collectives are NCCL kernels: ring and nvls force NCCL's
  // algorithm, anything else lets its tuner choose, and where no collective is lowered as
  // transfers (m_split_rotate's rotations, stage hand-overs) the value is read nowhere.
  if (e.cfg.chip().has_gpu() && !lowered && asked != "ring" && asked != "nvls")
    out.push_back("mapping.collective " + asked +
                  " is ignored: a GPU node's collectives are NCCL kernels, whose algorithm only ring or nvls "
                  "forces (anything else lets NCCL's tuner choose), and no collective here is run as "
                  "transfers");
  return out;
}

namespace {

// TimeOverflowError's text for task i of `p` (`label` names it: "task 28"), started at `start_ps`:
// what it is, where, and the fields its time depends on.
std::string OverflowText(const mapping::Program& p, const arch::Chip& chip, size_t i,
                         const std::string& label, Ps start_ps,
                         const std::string& tlm_hint = kTlmEngineHint) {
  const mapping::Task t = p.task(i);
  std::string what, fields;
  char mb[64];
  std::snprintf(mb, sizeof mb, "%.6g MB", static_cast<double>(t.bytes) / 1e6);
  switch (t.kind) {
    case mapping::TaskKind::kTransfer:
      what = std::string("a transfer of ") + mb + " from core " + std::to_string(t.core) + " to core " +
             std::to_string(t.dst_core);
      fields =
          "chip.noc.link_bandwidth_gbps (d2d_bandwidth_gbps on a wafer's die-to-die links, an edge's "
          "bandwidth_gbps on topology edges; port_bandwidth_gbps on the TLM engine) and the links' latencies";
      break;
    case mapping::TaskKind::kMemory:
      what = std::string("a DRAM ") + (t.write ? "write" : "read") + " of " + mb + " on channel " +
             std::to_string(t.channel);
      fields = "chip.memory[].bandwidth_gbps and efficiency";
      // Its data crosses the network between the channel and the core: the links time it too.
      if (!chip.MemoryPath(t.core, t.channel, t.write).empty())
        fields += ", and chip.noc.link_bandwidth_gbps (and port_bandwidth_gbps on the TLM engine): core " +
                  std::to_string(t.core) + " reaches the channel over links";
      break;
    default:
      if (chip.config().has_gpu() && t.op_kind == llm::OpKind::kCollective) {
        // An NCCL kernel (arch/gpu/nccl): its links and protocol constants, not the GEMM model's
        // (nccl_link_gbps 1e-30 was said to need a look at bf16_tflops and hbm_bandwidth_gbps).
        what = "a collective kernel on GPU " + std::to_string(t.core);
        fields =
            "chip.gpu.nccl_link_gbps, nvlink_links, nvlink_link_gbps, nccl_ring_channels, the ring and nvls "
            "efficiencies and latencies (ring_*, nvls_*, collective_*)";
      } else if (chip.config().has_gpu()) {  // a GPU node's kernels: arch/gpu (GEMM and memory-bound models)
        what = "a kernel on GPU " + std::to_string(t.core);
        fields =
            "chip.gpu.bf16_tflops (fp16_tflops, fp8_tflops), tensor_efficiency, operand_flops_per_byte, "
            "hbm_bandwidth_gbps and hbm_efficiency";
      } else {
        what = "a compute task on core " + std::to_string(t.core);
        fields =
            "chip.clock_mhz, chip.core.matrix_utilization, chip.core.sram_bandwidth_gbps and the core's "
            "units";
      }
      break;
  }
  const std::string op = t.op < p.ops.size() ? p.ops[t.op].ref.op : std::string("?");
  const double start_s = static_cast<double>(start_ps) * 1e-12;
  // The analytical engine's link calendars count a link's hold in 64 bits of 1/1024 ps
  // (sim/analytical/links.h): a flow that holds one link for 2^63 of them (2.5 hours) or more
  // ends past the clock there, though its time fits. Said so, instead of blaming the clock.
  if (t.kind == mapping::TaskKind::kTransfer || t.kind == mapping::TaskKind::kMemory) {
    const std::vector<int> links =
        t.kind == mapping::TaskKind::kTransfer
            ? (t.core == t.dst_core ? std::vector<int>{} : chip.Route(t.core, t.dst_core))
            : chip.MemoryPath(t.core, t.channel, t.write);
    double hold_s = 0;
    for (int l : links)
      hold_s = std::max(hold_s, static_cast<double>(t.bytes) / chip.links()[l].bandwidth_gbps * 1e-9);
    constexpr double kCalendarS = 9223372036854775807.0 / 1024 * 1e-12;  // 2^63 ticks, in s
    const double alone_s = static_cast<double>(mapping::TaskTime(chip, p, i)) * 1e-12;
    if (hold_s >= kCalendarS && start_s + alone_s < 9.2e6) {  // alone from its start, within the clock
      char h[64];
      std::snprintf(h, sizeof h, "%.3g", hold_s / 3600);
      return what + " (" + label + ", op " + op + "), started at " + DaysText(start_s) +
             ", holds a link for " + h +
             " hours, longer than the analytical engine's link calendars take (2.5 hours: they end such a "
             "flow past " +
             kClockLimit + "); the TLM engine times it (" + tlm_hint + "); check " + fields;
    }
  }
  // A task that starts after a day of simulated time is where the clock ran out, not
  // necessarily the only slow one: the tasks before it took most of the time.
  const std::string note =
      start_s < 86400 ? "" : " (the tasks before it, of the same kind or not, took most of that time)";
  return what + " (" + label + ", op " + op + "), started at " + DaysText(start_s) + ", ends later than " +
         kClockLimit + note + ": check " + fields;
}

// The error for task i of `p` run past the clock (OverflowText): where one field alone puts the
// task past the clock (a DRAM task's channel rate, a compute task's SRAM bandwidth), it names that
// field, for the run to say so as a config error (LocateOverflow). A DRAM rate of 1e-300 GB/s on
// a chip whose weights fit SRAM passed CheckTimeBounds (it counts only the streamed weights) and
// failed in the run, exit 1, unlocated.
TimeOverflowError OverflowError(const mapping::Program& p, const arch::Chip& chip, size_t i,
                                const std::string& label, Ps start_ps,
                                const std::string& tlm_hint = kTlmEngineHint) {
  std::string text = OverflowText(p, chip, i, label, start_ps, tlm_hint);
  const mapping::Task t = p.task(i);
  constexpr double kClockS = 9223372036854775807.0 * 1e-12;
  const std::string op = t.op < p.ops.size() ? p.ops[t.op].ref.op : std::string("?");
  char mb[64];
  std::snprintf(mb, sizeof mb, "%.6g MB", static_cast<double>(t.bytes) / 1e6);
  // A systolic core's task reads and writes its SRAM bytes at chip.core.sram_bandwidth_gbps at
  // best (arch::Chip::GemmTime, VectorTime): where that alone passes the clock, that field.
  const config::Core& core = chip.config().core();
  if (t.kind == mapping::TaskKind::kCompute && !chip.config().has_gpu() && core.sram_bandwidth_gbps() > 0 &&
      static_cast<double>(t.bytes) / (core.sram_bandwidth_gbps() * 1e9) > kClockS) {
    char value[64];
    std::snprintf(value, sizeof value, "%g", core.sram_bandwidth_gbps());
    return TimeOverflowError("a compute task on core " + std::to_string(t.core) + " (" + label + ", op " +
                                 op + ") touching " + mb + " of SRAM would take " +
                                 DaysText(static_cast<double>(t.bytes) / (core.sram_bandwidth_gbps() * 1e9)) +
                                 " at " + value + " GB/s, longer than " + kClockLimit,
                             "chip.core.sram_bandwidth_gbps", value);
  }
  if (t.kind != mapping::TaskKind::kMemory || t.channel < 0 ||
      static_cast<size_t>(t.channel) >= chip.channels().size())
    return TimeOverflowError(text);
  const arch::MemoryChannel& c = chip.channels()[t.channel];
  const double alone_s = static_cast<double>(t.bytes) / (c.bandwidth_gbps * 1e9);
  const auto& memories = chip.config().memory();
  if (!(alone_s > kClockS) || c.memory < 0 || c.memory >= memories.size()) return TimeOverflowError(text);
  // As CheckTimeBounds blames a memory.
  const auto [field, slow] = SlowMemoryField(memories.Get(c.memory));
  char value[64], rate[64];
  std::snprintf(value, sizeof value, "%g", slow);
  std::snprintf(rate, sizeof rate, "%g", c.bandwidth_gbps);
  text = std::string("a DRAM ") + (t.write ? "write" : "read") + " of " + mb + " on channel " +
         std::to_string(t.channel) + " (" + label + ", op " + op + ") would take " + DaysText(alone_s) +
         " at the channel's " + rate + " GB/s effective, longer than " + kClockLimit;
  return TimeOverflowError(text, "chip.memory[" + std::to_string(c.memory) + "]." + field, value);
}

}  // namespace

void CheckRepresentable(const mapping::Program& program, const arch::Chip& chip, const EngineOutput& timing,
                        const std::string& tlm_hint) {
  constexpr Ps kMax = std::numeric_limits<Ps>::max();
  if (timing.makespan_ps < kMax) return;
  for (size_t i = 0; i < timing.tasks.size() && i < program.num_tasks(); ++i)
    if (timing.tasks[i].end_ps >= kMax)
      throw OverflowError(program, chip, i, "task " + std::to_string(i), timing.tasks[i].start_ps, tlm_hint);
  throw TimeOverflowError(std::string("the run ends later than ") + kClockLimit);
}

void ThrowStepOverflow(const StepOverflow& o, const mapping::Program& head, const mapping::Program& step,
                       const arch::Chip& chip) {
  const mapping::Program& p = o.in_head ? head : step;
  if (o.task >= p.num_tasks()) throw TimeOverflowError(std::string("the run ends later than ") + kClockLimit);
  const std::string label = "task " + std::to_string(o.id) +
                            (o.step == 0 ? ", the prefill" : ", decode step " + std::to_string(o.step));
  throw OverflowError(p, chip, o.task, label, o.start_ps);
}

namespace {

// Whether `opts` asks to try decode-step reuse on `e` (RunOptions::reuse): kIfLarge, only
// where lowering every step would not fit --max-memory (past kReuseCountedSteps, where the
// steps reuse lowers are fewer).
enum class Reuse { kNo, kYes, kIfLarge };
Reuse TryReuse(const Experiment& e, const RunOptions& opts) {
  const uint32_t steps = e.cfg.workload().decode_steps();
  // Observers read the whole Program's times, unless they ask for a few steps.
  if (!opts.observers.empty() && opts.observe_steps.empty()) return Reuse::kNo;
  switch (opts.reuse) {
    case RunOptions::Reuse::kOff:
      return Reuse::kNo;
    case RunOptions::Reuse::kForce:
      return steps >= kHeadSteps + 2 ? Reuse::kYes : Reuse::kNo;
    case RunOptions::Reuse::kAuto:
      // With every task's times kept the whole Program is counted anyway.
      return steps >= kAutoReuseSteps                              ? Reuse::kYes
             : steps > kReuseCountedSteps && !opts.keep_task_times ? Reuse::kIfLarge
                                                                   : Reuse::kNo;
  }
  return Reuse::kNo;
}

// Runs f(); a TimeOverflowError that one chip field explains (OverflowError) becomes a config
// error located at that field, as CheckTimeBounds' refusals are.
template <class F>
auto LocateOverflow(const Experiment& e, F&& f) {
  try {
    return f();
  } catch (const TimeOverflowError& err) {
    if (err.field().empty()) throw;
    throw config::ConfigError(config::Diag{e.locs.Find(err.field()), err.field(), err.value(), err.what()});
  }
}

RunOutput RunExperimentUnlocated(const Experiment& e, const RunOptions& opts);

}  // namespace

RunOutput RunExperiment(const Experiment& e, const RunOptions& opts) {
  return LocateOverflow(e, [&] { return RunExperimentUnlocated(e, opts); });
}

namespace {

RunOutput RunExperimentUnlocated(const Experiment& e, const RunOptions& opts) {
  std::unique_ptr<Engine> engine;
  const Reuse asked = TryReuse(e, opts);
  // Reuse is counted as kReuseCountedSteps decode steps; a fallback checks the whole Program
  // below. With every task's times kept (RunOptions::keep_task_times) the Result holds a record
  // per task of every step: the whole Program is counted.
  const bool few_steps = asked != Reuse::kNo && !opts.keep_task_times;
  // Where reuse would make the run smaller but a flag lowers every step, a refusal says which.
  // The steps --trace-steps selects are each kept whole for the trace, beside those reuse lowers:
  // 3,000 of them on mesh-4x4-hbm-qwen3-0.6b passed a 1 GB --max-memory and peaked at 3.75 GB.
  const uint32_t steps = e.cfg.workload().decode_steps();
  const uint32_t observed =
      opts.observers.empty() ? 0 : static_cast<uint32_t>(std::min<size_t>(opts.observe_steps.size(), steps));
  std::string note = asked == Reuse::kNo && !opts.unrolled_by.empty() && steps > kReuseCountedSteps
                         ? " (every decode step is lowered: " + opts.unrolled_by + ")"
                         : "";
  if (few_steps && observed > 0)
    note += " (--trace-steps keeps " + std::to_string(observed) + " decode steps whole for the trace)";
  arch::Chip chip = Prepare(
      e, opts.engine, &engine, opts.max_memory_bytes,
      few_steps ? std::optional<uint32_t>(std::min(steps, kReuseCountedSteps + observed)) : std::nullopt,
      opts.keep_task_times, note);
  bool try_reuse = asked == Reuse::kYes;
  if (asked == Reuse::kIfLarge) {
    // Below kAutoReuseSteps lowering every step is quick, where it fits: on the 1024-core
    // wafer-32x32-qwen3-32b, 40 decode steps (3.3 GB when every step is lowered) were refused
    // at 26.3 GB estimated.
    try {
      CheckResources(e, chip, opts.max_memory_bytes);
    } catch (const config::ConfigError&) {
      try_reuse = true;
    }
  }
  RunOutput out;
  if (try_reuse) {
    // A list schedule times decode steps from a few lowered ones; any other engine (TLM) times
    // every step, each made from one lowered step as the engine reaches it.
    const bool listed = engine->ListSchedule();
    if (opts.on_stage)
      opts.on_stage(listed ? "lowering (decode steps reused)" : "timing (decode steps streamed)");
    std::string why;
    SampledRun view;
    std::optional<RunOutput> reused = listed ? RunWithStepReuse(e, chip, *engine, opts, &why, &view)
                                             : RunStreamed(e, chip, *engine, opts, &why, &view);
    const std::string steps = std::to_string(e.cfg.workload().decode_steps());
    if (reused) {
      out = std::move(*reused);
      out.reused = true;
      out.reuse = listed
                      ? "decode steps timed from one lowered step: " + why
                      : "decode steps " + std::to_string(kStreamHeadSteps + 1) + ".." + steps +
                            " made from one lowered step as the " + engine->name() + " engine reached them";
      out.result.set_config(ResolvedText(e));
      out.result.set_title(RunTitle(e.cfg, engine->name()));
      for (const RunObserver& observe : opts.observers)
        observe(RunView{view.program, chip, view.timing, out.result});
      return out;
    }
    out.reuse = listed ? why
                       : "the " + engine->name() +
                             " engine does not list its schedule, and its steps were not streamed: " + why;
  }
  if (few_steps && try_reuse) {
    // The guard above counted the few steps reuse lowers; every step is lowered now. (Where
    // reuse was only to be tried if large, the whole Program has passed the guard already.)
    try {
      CheckResources(e, chip, opts.max_memory_bytes);
    } catch (const config::ConfigError& err) {
      // Say why the few lowered steps were not enough.
      std::vector<config::Diag> diags = err.diags();
      diags.back().rule += " (every decode step would be lowered: " + out.reuse + ")";
      if (!engine->ListSchedule()) diags.back().rule += "; --engine analytical reuses decode steps";
      throw config::ConfigError(std::move(diags));
    }
  }
  if (opts.on_stage) opts.on_stage("lowering");
  mapping::LowerOptions lower;
  if (opts.on_count)
    lower.on_pass = [&opts](uint64_t done, uint64_t total) { opts.on_count(done, total, "passes"); };
  out.program = mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping(), lower);
  // Lives until the next stage replaces it (a progress line may hold the pointer until then).
  const std::string timing_stage = "timing (" + engine->name() + " engine)";
  if (opts.on_stage) opts.on_stage(timing_stage.c_str());
  if (opts.on_count)
    engine->set_progress([&opts](uint64_t done, uint64_t total) { opts.on_count(done, total, "tasks"); });
  EngineOutput timing = engine->Run(out.program, chip);
  engine->set_progress(nullptr);
  CheckRepresentable(out.program, chip, timing);
  if (opts.on_stage) opts.on_stage("writing results");
  // Past row_steps decode steps the op rows are summed as a run that reuses steps sums them.
  out.result = BuildResult(out.program, chip, timing, e.cfg.name(), engine->name(), opts.keep_task_times,
                           EnergyInputsOf(e.cfg.workload()), RowSums{opts.row_steps, kFirstSummedStep});
  out.result.set_config(ResolvedText(e));
  out.result.set_title(RunTitle(e.cfg, engine->name()));
  if (!opts.observers.empty() && !opts.observe_steps.empty()) {
    const std::vector<size_t> begin = SegmentBegins(out.program);
    const SampledRun view = SampleSteps(
        e, chip, opts.observe_steps,
        [&](uint32_t seg) {
          if (seg + 1 >= begin.size()) throw std::logic_error("sampled run: no such step");
          return std::vector<TaskTime>(timing.tasks.begin() + static_cast<std::ptrdiff_t>(begin[seg]),
                                       timing.tasks.begin() + static_cast<std::ptrdiff_t>(begin[seg + 1]));
        },
        timing);
    for (const RunObserver& observe : opts.observers)
      observe(RunView{view.program, chip, view.timing, out.result});
    return out;
  }
  for (const RunObserver& observe : opts.observers) observe(RunView{out.program, chip, timing, out.result});
  return out;
}

}  // namespace

std::vector<uint32_t> ParseObserveSteps(const std::string& text, uint32_t decode_steps) {
  std::vector<uint32_t> steps;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    auto number = [&](const std::string& v) -> uint64_t {
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
        throw std::invalid_argument("'" + item + "' is not first, last, every:N or a step number");
      // A number of many digits is out of range, not malformed (it said "is not ... every:N").
      if (v.size() > 9)
        throw std::invalid_argument("'" + item + "': " + v + " is past the " + std::to_string(decode_steps) +
                                    " decode steps (workload.decode_steps)");
      return std::stoull(v);
    };
    if (item == "first") {
      if (decode_steps > 0) steps.push_back(1);
    } else if (item == "last") {
      if (decode_steps > 0) steps.push_back(decode_steps);
    } else if (item.starts_with("every:")) {
      const uint64_t n = number(item.substr(6));
      if (n == 0) throw std::invalid_argument("'" + item + "': every:N needs N >= 1");
      // Each item selects a step, as a step number past the last is refused (every:15 beside
      // first on 10 steps was dropped without a word; alone it was refused).
      if (n > decode_steps && decode_steps > 0)
        throw std::invalid_argument("'" + item + "' selects no decode step of the " +
                                    std::to_string(decode_steps) + " (workload.decode_steps)");
      for (uint64_t k = n; k <= decode_steps; k += n) steps.push_back(static_cast<uint32_t>(k));
    } else {
      const uint64_t k = number(item);
      if (k == 0 || k > decode_steps)
        throw std::invalid_argument("step " + item + " is not within 1.." + std::to_string(decode_steps));
      steps.push_back(static_cast<uint32_t>(k));
    }
    pos = comma + 1;
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
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
      "chip.memory[].device.preset",
      "chip.memory[].device.command_bus",
      "chip.memory[].device.refresh",
      "chip.memory[].device.queue_depth",
      "chip.energy.mac_bf16_pj",
      "chip.energy.mac_fp32_pj",
      "chip.energy.vector_op_pj",
      "chip.energy.sram_read_pj_per_byte",
      "chip.energy.sram_write_pj_per_byte",
      "chip.energy.hop_pj_per_byte",
      "chip.energy.d2d_hop_pj_per_byte",
      "chip.energy.dram_pj_per_byte",
      "chip.energy.hbm_pj_per_byte",
      "chip.energy.core_static_w",
      "chip.energy.memory_static_w",
      "chip.energy.core_tdp_w",
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

config::Summary RunSummary(const Experiment& e, const std::string& engine_name, ProgramCache* cache,
                           uint64_t max_memory_bytes) {
  std::unique_ptr<Engine> engine;
  arch::Chip chip = Prepare(e, engine_name, &engine, max_memory_bytes);
  // A cached entry keeps what the engine prepared; without a cache, Run prepares for itself.
  const std::shared_ptr<const ProgramCache::Entry> entry =
      cache ? cache->Get(e, chip, engine.get()) : MakeEntry(e, chip, nullptr);
  const mapping::Program& program = entry->program;
  const EngineOutput timing = engine->Run(program, chip, entry->prepared.get());
  LocateOverflow(e, [&] {
    CheckRepresentable(program, chip, timing);
    return 0;
  });
  return BuildSummary(program, chip, timing, EnergyInputsOf(e.cfg.workload()));
}

}  // namespace tpsim::sim
