// Second-stage checks of a chip config (see ValidateChip in chip.h).
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "arch/chip.h"
#include "arch/dram_device.h"
#include "arch/topology/topology.h"
#include "configs/files.h"

namespace tpsim::arch {

namespace {

// "r0c0..r3c3", or every name when there are few; non-core nodes listed after.
std::string NodeNamesText(const Network& net) {
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (net.num_cores <= 4) {
    for (int i = 0; i < net.num_cores; ++i) add(net.nodes[i].name);
  } else {
    add(net.nodes[0].name + ".." + net.nodes[net.num_cores - 1].name);
  }
  int others = static_cast<int>(net.nodes.size()) - net.num_cores;
  for (int i = net.num_cores; i < static_cast<int>(net.nodes.size()) && i < net.num_cores + 4; ++i) {
    add(net.nodes[i].name);
  }
  if (others > 4) add("...");
  return s;
}

void ValidateCore(const config::Chip& c, DiagSink& sink) {
  const auto& k = c.core();
  if (k.systolic_rows() == 0) sink.Add("core.systolic_rows", "0", "must be positive");
  if (k.systolic_cols() == 0) sink.Add("core.systolic_cols", "0", "must be positive");
  if (!k.mac_dtype().empty() && k.mac_dtype() != "bf16") {
    sink.Add("core.mac_dtype", k.mac_dtype(), "only bf16 is modelled");
  }
  const double u = k.matrix_utilization();
  if (!(u > 0 && u <= 1)) sink.Add("core.matrix_utilization", NumText(u), "must be in (0, 1]");
  if (k.vector_lanes() == 0) sink.Add("core.vector_lanes", "0", "must be positive");
  if (k.sram_bytes() == 0) sink.Add("core.sram_bytes", "0", "must be positive");
  CheckNonNegative(sink, "core.sram_bandwidth_gbps", k.sram_bandwidth_gbps());
}

void ValidateMemory(const config::Chip& c, const Network* net, DiagSink& sink) {
  if (c.memory().empty()) {
    sink.Add("memory", "", "must declare at least one memory (per_core or attached to nodes)");
    return;
  }
  std::set<std::string> names;
  // The network's node names, once: scanning the nodes for each attach entry cost nodes x
  // entries (a million entries on a 4096-node chip), before Chip::Build's bound on channels.
  std::unordered_set<std::string_view> node_names;
  if (net) {
    node_names.reserve(net->nodes.size());
    for (const auto& node : net->nodes) node_names.insert(node.name);
  }
  for (int i = 0; i < c.memory_size(); ++i) {
    const auto& m = c.memory(i);
    const std::string sub = "memory[" + std::to_string(i) + "]";
    if (m.name().empty()) {
      sink.Add(sub + ".name", "", "must not be empty");
    } else if (!names.insert(m.name()).second) {
      sink.Add(sub + ".name", m.name(), "names another memory already (names must be unique)");
    }
    if (m.kind() != "dram" && m.kind() != "hbm") sink.Add(sub + ".kind", m.kind(), "must be dram or hbm");
    CheckPositive(sink, sub + ".bandwidth_gbps", m.bandwidth_gbps());
    const double e = m.efficiency();
    if (m.has_device()) {
      const auto& d = m.device();
      if (!dram::FindPreset(d.preset())) {
        sink.Add(sub + ".device.preset", d.preset(),
                 "must name a DRAM device preset: " + config::JoinNames(dram::PresetNames()));
      }
      if (!d.command_bus().empty() && d.command_bus() != "shared" && d.command_bus() != "split") {
        sink.Add(sub + ".device.command_bus", d.command_bus(), "must be shared or split");
      }
      if (d.queue_depth() > 4096) {
        sink.Add(sub + ".device.queue_depth", std::to_string(d.queue_depth()),
                 "must be at most 4096 (0 = 32)");
      }
      if (e != 0) {
        sink.Add(sub + ".efficiency", NumText(e),
                 "must be unset when device is set (the device model's streaming saturation gives it)");
      }
    } else if (!(e > 0 && e <= 1)) {
      sink.Add(sub + ".efficiency", NumText(e), "must be in (0, 1]");
    }
    CheckLatencyNs(sink, sub + ".latency_ns", m.latency_ns());
    if (m.per_core() && !m.attach().empty()) {
      sink.Add(sub + ".attach", m.attach(0), "must be empty when per_core is true");
    } else if (!m.per_core() && m.attach().empty()) {
      sink.Add(sub + ".attach", "", "must name at least one node when per_core is false");
    }
    if (net && !m.per_core()) {
      for (int j = 0; j < m.attach_size(); ++j) {
        if (!node_names.count(m.attach(j))) {
          sink.Add(sub + ".attach[" + std::to_string(j) + "]", m.attach(j),
                   "names no node of the chip (nodes are " + NodeNamesText(*net) + ")");
        }
      }
    }
  }
}

void ValidateCollectives(const config::Chip& c, DiagSink& sink) {
  const auto& k = c.collectives();
  if (!k.in_switch_reduction()) return;
  if (c.noc().topology() != "switch") {
    sink.Add("collectives.in_switch_reduction", "true",
             "needs noc.topology switch (it is " + c.noc().topology() + ")");
  }
  CheckPositive(sink, "collectives.in_switch_bandwidth_gbps", k.in_switch_bandwidth_gbps());
}

// A non-negative duration of at most 1e6 us (1 s): the tighter bound's message first, since
// CheckNonNegative's own bound (1e30) is looser.
void AtMostOneSecond(DiagSink& sink, const std::string& sub, double v) {
  if (v > 1e6)
    sink.Add(sub, NumText(v), "must be at most 1000000 (1 s)");
  else
    CheckNonNegative(sink, sub, v);
}

// The gpu block (configs/schema/chip.proto, message Gpu): every field the GEMM and
// collective models read, in range.
void ValidateGpu(const config::Chip& c, DiagSink& sink) {
  if (!c.has_gpu()) return;
  const auto& g = c.gpu();
  if (c.noc().topology() != "switch") {
    sink.Add("gpu", "",
             "needs noc.topology switch (one GPU per core behind NVSwitch; it is " +
                 (c.noc().topology().empty() ? std::string("unset") : c.noc().topology()) + ")");
  }
  auto positive_int = [&](const std::string& sub, uint64_t v) {
    if (v == 0) sink.Add("gpu." + sub, "0", "must be positive");
  };
  auto fraction = [&](const std::string& sub, double v) {
    if (!(v > 0 && v <= 1)) sink.Add("gpu." + sub, NumText(v), "must be in (0, 1]");
  };
  positive_int("sms", g.sms());
  // Each SM runs peak / sms (arch/gpu/gemm.cc): 2^31 - 1 of them made a GEMM's few tiles run at a
  // 2^31th of the peak (10,881 s for one MoE decode step). Bounded as other fields are, far above
  // a real GPU's (H100 SXM 132, B200 148).
  if (g.sms() > 4096)
    sink.Add("gpu.sms", std::to_string(g.sms()), "must be at most 4096 (an H100 SXM has 132)");
  CheckPositive(sink, "gpu.bf16_tflops", g.bf16_tflops());
  CheckPositive(sink, "gpu.fp16_tflops", g.fp16_tflops());
  CheckNonNegative(sink, "gpu.fp8_tflops", g.fp8_tflops());
  fraction("tensor_efficiency", g.tensor_efficiency());
  CheckNonNegative(sink, "gpu.operand_flops_per_byte", g.operand_flops_per_byte());
  AtMostOneSecond(sink, "gpu.kernel_overhead_us", g.kernel_overhead_us());
  CheckPositive(sink, "gpu.hbm_bandwidth_gbps", g.hbm_bandwidth_gbps());
  fraction("hbm_efficiency", g.hbm_efficiency());
  positive_int("l2_bytes", g.l2_bytes());
  positive_int("nvlink_links", g.nvlink_links());
  CheckPositive(sink, "gpu.nvlink_link_gbps", g.nvlink_link_gbps());
  CheckPositive(sink, "gpu.nccl_link_gbps", g.nccl_link_gbps());
  if (g.compute_capability() < 90) {
    sink.Add("gpu.compute_capability", std::to_string(g.compute_capability()),
             "must be at least 90: NCCL's tuning tables are modelled for Hopper (90) and Blackwell (100)");
  }
  positive_int("nccl_ring_channels", g.nccl_ring_channels());
  AtMostOneSecond(sink, "gpu.collective_launch_us", g.collective_launch_us());
  AtMostOneSecond(sink, "gpu.kernel_launch_us", g.kernel_launch_us());
  CheckNonNegative(sink, "gpu.ring_channel_memory_gbps", g.ring_channel_memory_gbps());  // 0 = no cap
  // 0 = NCCL's tuner hop latency / no NVLS chunk limit; a microsecond-scale latency otherwise.
  for (const auto& [sub, v] :
       {std::pair<const char*, double>{"collective_launch_per_gpu_us", g.collective_launch_per_gpu_us()},
        {"ring_ll128_step_us", g.ring_ll128_step_us()},
        {"ring_simple_step_us", g.ring_simple_step_us()},
        {"nvls_chunk_rtt_us", g.nvls_chunk_rtt_us()}}) {
    AtMostOneSecond(sink, std::string("gpu.") + sub, v);
  }
  AtMostOneSecond(sink, "gpu.collective_kernel_us", g.collective_kernel_us());
  if (const double p = g.collective_launch_exponent(); p != 0 && !(p >= 1 && p <= 64)) {
    sink.Add("gpu.collective_launch_exponent", NumText(p), "must be 0 (= 2) or in [1, 64]");
  }
  fraction("ring_allreduce_efficiency", g.ring_allreduce_efficiency());
  fraction("ring_efficiency", g.ring_efficiency());
  if (g.nvls()) {
    fraction("nvls_efficiency", g.nvls_efficiency());
    const double loss = g.nvls_rank_loss();
    if (!(loss >= 0 && loss < 1)) sink.Add("gpu.nvls_rank_loss", NumText(loss), "must be in [0, 1)");
  }
}

// The energy block (configs/schema/chip.proto, message Energy): every field finite, >= 0 and
// at most kMaxEnergyField (so that a run's sums stay finite: 1e6 pJ a flop over the most flops a
// run can time within the 2^63 ps clock is far below a double's range; before, 1e308 printed
// "energy inf mJ/token, inf W" as a result); the MAC energy and the per-byte energy of every
// memory kind the chip declares positive (a zero there would make that traffic silently free).
void ValidateEnergy(const config::Chip& c, DiagSink& sink) {
  if (!c.has_energy()) return;
  constexpr double kMaxEnergyField = 1e6;
  const config::Energy& e = c.energy();
  const google::protobuf::Descriptor* d = e.GetDescriptor();
  const google::protobuf::Reflection* r = e.GetReflection();
  bool ok = true;
  for (int i = 0; i < d->field_count(); ++i) {
    const std::string sub = "energy." + std::string(d->field(i)->name());
    const double v = r->GetDouble(e, d->field(i));
    if (v > kMaxEnergyField) {  // before CheckNonNegative, whose own bound (1e30) is looser
      sink.Add(sub, NumText(v),
               "must be at most 1e6 (pJ per operation or byte; W for the static and TDP fields)");
      ok = false;
    } else if (!CheckNonNegative(sink, sub, v)) {
      ok = false;
    }
  }
  if (!ok) return;
  if (e.mac_bf16_pj() == 0) sink.Add("energy.mac_bf16_pj", "0", "must be positive");
  for (int i = 0; i < c.memory_size(); ++i) {
    const std::string& kind = c.memory(i).kind();
    const double pj = kind == "dram" ? e.dram_pj_per_byte() : kind == "hbm" ? e.hbm_pj_per_byte() : -1;
    if (pj == 0) {
      sink.Add("energy." + kind + "_pj_per_byte", "0",
               "must be positive: the chip has a memory of kind " + kind + " (memory[" + std::to_string(i) +
                   "], " + c.memory(i).name() + ")");
      break;
    }
  }
}

}  // namespace

void ValidateChip(const config::Chip& c, const config::SourceMap& locs, const std::string& prefix,
                  std::vector<config::Diag>* diags) {
  DiagSink sink(locs, prefix, diags);
  const double clock = c.clock_mhz();
  if (!(clock >= 1 && clock <= 1e6)) {
    sink.Add("clock_mhz", NumText(clock), clock > 0 ? "must be in [1, 1000000] MHz" : "must be positive");
  }
  ValidateCore(c, sink);

  const Topology* topo = FindTopology(c.noc().topology());
  std::optional<Network> net;
  if (!topo) {
    sink.Add("noc.topology", c.noc().topology(),
             std::string(c.noc().topology().empty() ? "must name a topology" : "unknown topology") +
                 " (valid: " + TopologyNamesText() + ")");
  } else {
    const size_t before = sink.count();
    topo->Validate(c, sink);
    if (sink.count() == before) {
      net = topo->Build(c, clock >= 1 && clock <= 1e6 ? CyclePs(clock) : 1);
    }
  }
  CheckNonNegative(sink, "noc.port_bandwidth_gbps", c.noc().port_bandwidth_gbps());
  const std::string& topo_name = c.noc().topology();
  const uint32_t buffers = c.noc().router_buffer_packets();
  if (buffers > 0 && topo_name == "edges") {
    sink.Add("noc.router_buffer_packets", std::to_string(buffers),
             "finite router buffers are not modelled on topology edges (its shortest-path routes may "
             "deadlock); use 0");
  } else if (buffers == 1 && (topo_name == "torus" || topo_name == "ring")) {
    sink.Add("noc.router_buffer_packets", "1",
             "must be 0 or at least 2 on topology " + topo_name + " (two dateline classes of slots)");
  }
  ValidateMemory(c, net ? &*net : nullptr, sink);
  ValidateCollectives(c, sink);
  ValidateGpu(c, sink);
  ValidateEnergy(c, sink);
}

}  // namespace tpsim::arch
