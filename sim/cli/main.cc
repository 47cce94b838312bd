// The `tpsim` command line. Subcommands are a table: name, one-line summary,
// usage text and handler. Exit status: 0 success, 1 simulation failure (a
// Program that cannot progress, an I/O error), 2 bad input (config or usage).

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "arch/chip.h"
#include "arch/topology/topology.h"
#include "configs/files.h"
#include "configs/load.h"
#include "configs/registry.h"
#include "llm/model.h"
#include "llm/opgraph.h"
#include "mapping/mapping.h"
#include "mapping/moe_routing.h"
#include "sim/agree/agree.h"
#include "sim/analytical/links.h"
#include "sim/cli/args.h"
#include "sim/cli/gpu_commands.h"
#include "sim/cli/progress_line.h"
#include "sim/cli/serve.h"
#include "sim/engine.h"
#include "sim/experiment.h"
#include "sim/microbench.h"
#include "sim/result.h"
#include "sim/run.h"
#include "sim/search/search.h"
#include "sim/serving/requests.h"
#include "sim/sweep/sweep.h"
#include "traces/plot.h"
#include "traces/trace.h"
#include "validate/compare.h"

namespace tpsim::cli {
namespace {

// Options shared by subcommands that load an experiment.
struct ExperimentArgs {
  std::string path;
  std::vector<sim::Override> sets;
  std::string model;
};

// A small argv walker: flags with values as "--flag VALUE" or "--flag=VALUE".
class Args {
 public:
  Args(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) items_.emplace_back(argv[i]);
  }
  bool Done() const { return pos_ >= items_.size(); }
  const std::string& Peek() const { return items_[pos_]; }
  std::string Next() { return items_[pos_++]; }
  // If the current item is `flag` (or `flag=...`), consumes it and its value (FlagAt's rules).
  // A flag of one value given twice is a usage error (GivenTwice).
  bool Flag(const std::string& flag, std::string* value) {
    size_t last = pos_;
    if (!once_.At(items_, &last, flag, value)) return false;
    pos_ = last + 1;
    return true;
  }
  bool Switch(const std::string& flag) {
    if (items_[pos_] != flag) return false;
    ++pos_;
    return true;
  }

 private:
  std::vector<std::string> items_;
  size_t pos_ = 0;
  cli::OnceFlags once_;  // the one-value flags seen, with their values
};

bool IsHelp(const std::string& s) { return s == "-h" || s == "--help" || s == "help"; }

// Consumes --set/--model; returns false when the item is not one of them.
bool ExperimentFlag(Args& a, ExperimentArgs* ex) {
  std::string v;
  if (a.Flag("--set", &v)) {
    ex->sets.push_back(sim::ParseOverride(v));
    return true;
  }
  if (a.Flag("--model", &v)) {
    ex->model = v;
    return true;
  }
  return false;
}

// Written whole to a temporary file and renamed (configs/files.h); exit 1 on failure.
void WriteFileOrThrow(const std::string& path, const std::string& data) {
  config::WriteOutputFile(path, data);
}

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return Fixed(b, b < 10 && u > 0 ? 2 : (u > 0 ? 1 : 0)) + " " + units[u];
}

using sim::MemoryKindWord;
using sim::OffChipWord;

// ---- describe ---------------------------------------------------------------

// How a served request length is drawn (configs/schema/serving.proto LengthDist).
std::string LengthDistText(const config::LengthDist& d) {
  const std::string kind = d.dist().empty() ? "fixed" : d.dist();
  if (kind == "uniform") return "uniform from " + std::to_string(d.min()) + " to " + std::to_string(d.max());
  if (kind == "lognormal")
    return "lognormal, exp(N(" + Fixed(d.mu(), 2) + ", " + Fixed(d.sigma(), 2) + ")) from " +
           std::to_string(std::max(1u, d.min())) +
           (d.max() > 0 ? " to " + std::to_string(d.max()) : std::string(" up (no maximum)"));
  return "fixed " + std::to_string(d.value());
}

// The first dense and the first MoE layer of a model that has both kinds (mlp_only_layers,
// decoder_sparse_step > 1); nullopt when its layers are of one kind.
std::optional<std::pair<uint32_t, uint32_t>> DenseAndMoeLayer(const config::Model& m) {
  const uint64_t moe = llm::MoeLayerCount(m, m.num_layers());
  if (moe == 0 || moe >= m.num_layers()) return std::nullopt;
  const std::set<uint32_t> only(m.mlp_only_layers().begin(), m.mlp_only_layers().end());
  const uint32_t step = std::max(1u, m.decoder_sparse_step());
  // Layer l is sparse when (l + 1) % step == 0 and l is not in mlp_only_layers (llm::IsMoeLayer):
  // the loop passes at most the listed layers, and ends below num_layers as a sparse one exists.
  uint32_t first_moe = step - 1;
  while (only.count(first_moe)) first_moe += step;
  // Layer 0 is dense where step > 1; else the dense layers are the listed ones below num_layers.
  const uint32_t first_dense = step > 1 ? 0 : *only.begin();
  return std::make_pair(first_dense, first_moe);
}

const char* kDescribeUsage = R"(usage: tpsim describe [EXPERIMENT] [--set FIELD=VALUE]... [--model MODEL]

Resolves and validates an experiment, then prints the chip (cores, peak
TFLOP/s, SRAM (a GPU node's L2), DRAM or HBM bandwidth, network diameter and bisection bandwidth), the
model (parameters, per-layer FLOPs and bytes for the workload) and the mapping.

  EXPERIMENT          experiment file (.textproto or .json), or a shipped experiment's
                      name (tpsim list experiment); default: the shipped
                      configs/experiments/default.textproto
  --set FIELD=VALUE   override any scalar field of the resolved experiment,
                      e.g. --set mapping.tp=16 --set chip.noc.link_bandwidth_gbps=256
  --model MODEL       use this model instead: a catalog name (qwen3-4b, ...)
                      or a HuggingFace config.json path
)";

// The EXPERIMENT word: an empty one (a script's unset variable) would read as no experiment
// and run the default one, exit 0.
std::string ExperimentWord(const std::string& w) {
  if (w.empty())
    throw UsageError("EXPERIMENT is empty (a script's unset variable?); name a file or a shipped experiment");
  return w;
}

int Describe(Args& a) {
  ExperimentArgs ex;
  while (!a.Done()) {
    if (IsHelp(a.Peek())) {
      std::cout << kDescribeUsage;
      return 0;
    }
    if (ExperimentFlag(a, &ex)) continue;
    if (a.Peek().starts_with("-")) throw UsageError("unknown option " + a.Peek());
    if (!ex.path.empty()) throw UsageError("more than one experiment given");
    ex.path = ExperimentWord(a.Next());
  }
  if (ex.path.empty()) ex.path = sim::DefaultExperimentPath();
  sim::Experiment e = sim::LoadExperiment(ex.path, ex.sets, ex.model);
  arch::Chip chip = sim::ValidateExperiment(e);
  // A request stream is checked as tpsim serve checks it first (a synthetic stream with a trace's
  // format or time_scale): describe showed it as valid, exit 0.
  if (e.cfg.workload().has_requests()) {
    std::vector<config::Diag> diags;
    serving::ValidateRequestSource(e.cfg.workload().requests(), e.locs, &diags);
    if (!diags.empty()) throw config::ConfigError(std::move(diags));
  }
  // What run (or, with a request stream, serve) would name as ignored.
  for (const std::string& w : sim::SetTwice(ex.sets)) spdlog::warn("{}", w);
  for (const std::string& w : sim::IgnoredFields(e, e.cfg.workload().has_requests())) spdlog::warn("{}", w);
  const auto& c = e.cfg.chip();
  const auto& m = e.cfg.model();
  const auto& w = e.cfg.workload();
  const auto& mp = e.cfg.mapping();
  std::ostringstream os;
  os << "experiment  " << (e.cfg.name().empty() ? e.path : e.cfg.name()) << "\n";
  if (!e.cfg.description().empty()) os << "            " << e.cfg.description() << "\n";
  os << "\nchip        " << c.name() << " (" << c.noc().topology() << ", " << chip.grid_rows() << " x "
     << chip.grid_cols() << ")\n";
  // A GPU node's kernels are timed from its gpu block (arch/gpu), not from clock_mhz.
  if (c.has_gpu()) {
    os << "  cores                 " << chip.num_cores() << " GPUs of " << c.gpu().sms() << " SMs\n";
  } else {
    os << "  cores                 " << chip.num_cores() << " at " << Fixed(c.clock_mhz(), 0) << " MHz\n";
  }
  os << "  peak                  " << config::DecimalsOrDigits(chip.PeakTflops(), 1) << " TFLOP/s bf16 ("
     << config::DecimalsOrDigits(chip.AchievableTflops(), 1) << " achievable"
     << (c.has_gpu() ? ", gpu block" : "") << ")\n";
  // In double: cores x sram_bytes passes 2^64 for a sram_bytes near 2^63 (it printed a wrapped total).
  if (c.has_gpu()) {  // a cache, not a scratchpad: the GEMM model reads gpu.l2_bytes (arch/gpu/gemm.cc)
    os << "  L2 cache              " << HumanBytes(static_cast<double>(c.gpu().l2_bytes()))
       << " per GPU (chip.gpu.l2_bytes)\n";
  } else {
    os << "  SRAM                  "
       << HumanBytes(static_cast<double>(c.core().sram_bytes()) * chip.num_cores()) << " ("
       << HumanBytes(static_cast<double>(c.core().sram_bytes())) << " per core)\n";
  }
  std::set<int> attach_nodes;
  size_t stacked = 0;
  for (size_t ch = 0; ch < chip.channels().size(); ++ch) {
    attach_nodes.insert(chip.channels()[ch].attach);
    stacked += chip.channels()[ch].attach < chip.num_cores() &&
               chip.ChannelOf(chip.channels()[ch].attach) == static_cast<int>(ch);
  }
  // A core uses one channel (Chip::ChannelOf), so channels no core takes (more at a node than
  // cores nearest it) carry nothing: their bandwidth is named apart, not silently counted.
  std::set<int> used;
  for (int c = 0; c < chip.num_cores(); ++c) used.insert(chip.ChannelOf(c));
  double idle_gbps = 0;
  size_t idle = 0;
  for (size_t ch = 0; ch < chip.channels().size(); ++ch)
    if (!used.count(static_cast<int>(ch))) ++idle, idle_gbps += chip.channels()[ch].bandwidth_gbps;
  const std::string off_chip = OffChipWord(chip);
  os << "  " << off_chip << " bandwidth" << std::string(std::max<size_t>(1, 12 - off_chip.size()), ' ')
     << config::DecimalsOrDigits(chip.TotalDramBandwidthGbps(), 1) << " GB/s effective over "
     << chip.channels().size() << (chip.channels().size() == 1 ? " channel" : " channels");
  if (idle)
    os << " (" << idle << " idle, " << config::DecimalsOrDigits(idle_gbps, 1)
       << " GB/s: no core uses them; a core uses one channel of the attach node nearest it)";
  os << "\n";
  os << "  memory controllers    " << chip.channels().size()
     << (chip.channels().size() == 1 ? " node on " : " nodes on ") << attach_nodes.size()
     << (attach_nodes.size() == 1 ? " network node (" : " network nodes (") << stacked
     << " at the node of the core that uses " << (chip.channels().size() == 1 ? "it" : "them") << ")\n";
  // The links' own bandwidths, not noc.link_bandwidth_gbps: an edges chip may give each edge its
  // own (with the noc value unset this printed 0.0 GB/s), and a wafer's die-to-die links have theirs.
  double link_min = std::numeric_limits<double>::infinity(), link_max = 0;
  for (const arch::Link& l : chip.links()) {
    if (chip.node(l.src).kind == arch::Node::kMemory || chip.node(l.dst).kind == arch::Node::kMemory)
      continue;
    link_min = std::min(link_min, l.bandwidth_gbps);
    link_max = std::max(link_max, l.bandwidth_gbps);
  }
  // A one-core chip has no network links: no bandwidth to print.
  const std::string link_bw = link_max == 0 ? std::string()
                              : config::DecimalsOrDigits(link_min, 1) == config::DecimalsOrDigits(link_max, 1)
                                  ? ", " + config::DecimalsOrDigits(link_max, 1) + " GB/s per direction"
                                  : ", " + config::DecimalsOrDigits(link_min, 1) + " to " +
                                        config::DecimalsOrDigits(link_max, 1) + " GB/s per direction";
  os << "  network               " << chip.links().size() - 2 * chip.channels().size() << " links" << link_bw
     << " (+ " << 2 * chip.channels().size() << " controller links)\n";
  os << "  diameter              " << chip.Diameter() << " hops\n";
  os << "  bisection bandwidth   " << config::DecimalsOrDigits(chip.BisectionBandwidthGbps(), 1) << " GB/s\n";

  uint32_t layers = w.num_layers() ? w.num_layers() : m.num_layers();
  uint32_t dtype = sim::DtypeBytes(w.dtype());
  llm::Phase pre{false, w.batch(), w.seq_len(), w.cached_prefix(), dtype};
  llm::Phase dec{true, w.batch(), 1, w.cached_prefix() + w.seq_len(), dtype};
  os << "\nmodel       " << m.name() << " (" << m.architecture() << ")\n";
  os << "  parameters            " << Fixed(llm::ParameterCount(m) / 1e9, 3) << " B";
  if (m.num_experts() > 0)
    os << " (" << Fixed(llm::ActiveParameterCount(m) / 1e9, 3) << " B active per token)";
  os << "\n";
  os << "  layers                " << m.num_layers() << " (" << layers << " simulated)\n";
  os << "  hidden / heads / kv   " << m.hidden_size() << " / " << m.num_attention_heads() << " / "
     << m.num_key_value_heads() << " (head_dim " << m.head_dim() << ")\n";
  // A config.json that leaves num_key_value_heads or head_dim out, or gives it as null, has it
  // defaulted or derived: said so (the number was shown as if the file wrote it).
  for (const char* f : {"num_key_value_heads", "head_dim"})
    if (const std::string how = llm::DefaultedText(m, e.locs, "model", f); !how.empty())
      os << "  " << f << std::string(std::max<size_t>(2, 22 - std::strlen(f)), ' ') << how << "\n";
  if (m.max_position_embeddings() > 0)
    os << "  positions             " << m.max_position_embeddings()
       << " (max_position_embeddings, after RoPE scaling: the longest context)\n";
  if (m.sliding_window() > 0)
    os << "  sliding window        " << m.sliding_window()
       << " tokens (a longer context is refused: tpsim times full attention)\n";
  if (m.num_experts() > 0) {
    os << "  experts               " << m.num_experts() << " (top " << m.num_experts_per_token() << ")";
    if (m.shared_expert_intermediate_size() > 0)
      os << ", shared experts of " << m.shared_expert_intermediate_size() << " every token goes through";
    os << "\n";
  }
  const std::string dtype_name = w.dtype().empty() ? "bf16" : w.dtype();
  if (w.has_requests()) {
    // A served workload (tpsim serve) has no one batch, prompt or decode count: each iteration
    // mixes the running requests' prefill chunks and decode tokens, so no one layer's figures
    // stand for it (it printed a phantom batch 0, prompt 0 tokens and 0.000 GFLOP). Where the
    // requests come from instead.
    const auto& rq = w.requests();
    const std::string first =
        rq.max_requests() > 0 ? "the first " + std::to_string(rq.max_requests()) + " of " : "";
    os << "\nworkload    served (tpsim serve), " << dtype_name << "\n";
    if (rq.has_synthetic()) {
      const auto& s = rq.synthetic();
      os << "  requests              " << first << s.num_requests() << " synthetic, "
         << (s.arrivals().empty() ? "poisson" : s.arrivals()) << " arrivals at " << Fixed(s.rate_per_s(), 2)
         << " per s, seed " << s.seed() << "\n";
      os << "  prompt tokens         " << LengthDistText(s.prompt_tokens()) << "\n";
      os << "  output tokens         " << LengthDistText(s.output_tokens()) << "\n";
    } else {
      os << "  requests              " << (first.empty() ? "every request of " : first) << "the trace "
         << rq.trace_file() << (rq.format().empty() ? "" : " (" + rq.format() + ")");
      if (rq.time_scale() > 0 && rq.time_scale() != 1) os << ", arrivals x " << Fixed(rq.time_scale(), 3);
      os << "\n";
    }
  } else {
    os << "\nworkload    batch " << w.batch() << ", prompt " << w.seq_len()
       << (w.seq_len() == 1 ? " token" : " tokens")
       << (w.cached_prefix() ? " after " + std::to_string(w.cached_prefix()) + " cached" : "") << ", "
       << w.decode_steps() << (w.decode_steps() == 1 ? " decode step, " : " decode steps, ") << dtype_name
       << "\n";
    // A model with dense and MoE layers (mlp_only_layers, decoder_sparse_step > 1) has two layers
    // to show: layer 0 alone showed the dense one of Qwen3-MoE with mlp_only_layers [0] as its
    // "prefill layer". One kind prints as before.
    struct Kind {
      std::string what;  // "" for a model of one kind
      uint32_t layer;
    };
    std::vector<Kind> kinds{{"", 0}};
    if (const auto both = DenseAndMoeLayer(m)) {
      const uint64_t moe = llm::MoeLayerCount(m, m.num_layers()), dense = m.num_layers() - moe;
      kinds = {{std::to_string(moe) + " MoE layer" + (moe == 1 ? "" : "s"), both->second},
               {std::to_string(dense) + " dense layer" + (dense == 1 ? "" : "s"), both->first}};
    }
    const std::string l_is = "L=" + std::to_string(dec.cached + 1);
    size_t width = 0;
    for (const Kind& k : kinds)
      width = std::max(width, std::string("decode layer (" + l_is + ", " + k.what + ")").size());
    const auto label = [&](const std::string& text) {
      return "  " + text + std::string(std::max<size_t>(2, width + 2 - text.size()), ' ');
    };
    for (const Kind& k : kinds) {
      auto pl = llm::BuildLayer(m, pre, k.layer);
      os << (k.what.empty() ? "  prefill layer         " : label("prefill layer (" + k.what + ")"))
         << Fixed(pl.Flops() / 1e9, 3) << " GFLOP, " << HumanBytes(static_cast<double>(pl.BytesRead()))
         << " read, " << HumanBytes(static_cast<double>(pl.BytesWritten())) << " written, "
         << HumanBytes(static_cast<double>(pl.WeightBytes())) << " weights\n";
    }
    // No decode step, no decode layer (one at L = prompt + 1 was shown); its label padded to the
    // column the prefill row's figures start at (with a long L it was two spaces).
    for (const Kind& k : w.decode_steps() > 0 ? kinds : std::vector<Kind>{}) {
      auto dl = llm::BuildLayer(m, dec, k.layer);
      const std::string one = "  decode layer (" + l_is + ")";
      os << (k.what.empty() ? one + std::string(one.size() < 24 ? 24 - one.size() : 2, ' ')
                            : label("decode layer (" + l_is + ", " + k.what + ")"))
         << Fixed(dl.Flops() / 1e9, 3) << " GFLOP, " << HumanBytes(static_cast<double>(dl.BytesRead()))
         << " read\n";
    }
  }
  if (mp.attention_dp() > 1)  // attention replicas: a stage has tp x attention_dp cores
    os << "\nmapping     tp " << mp.tp() << " x attention_dp " << mp.attention_dp() << " x "
       << std::max(1u, mp.pipeline_stages())
       << " pipeline stages = " << mp.tp() * mp.attention_dp() * std::max(1u, mp.pipeline_stages())
       << " cores of " << chip.num_cores() << "\n";
  else
    os << "\nmapping     tp " << mp.tp() << " x " << std::max(1u, mp.pipeline_stages())
       << " pipeline stages = " << mp.tp() * std::max(1u, mp.pipeline_stages()) << " cores of "
       << chip.num_cores() << "\n";
  // An empty field is named as what runs, marked as the default (the rows were blank).
  const auto or_default = [](const std::string& given, const std::string& effective) {
    return given.empty() ? effective + " (default)" : effective;
  };
  os << "  partition             " << or_default(mp.partition(), config::EffectivePartition(mp.partition()));
  for (const auto& o : mp.overrides()) os << ", " << o.op() << "=" << o.partition();
  os << "\n  placement             " << or_default(mp.placement(), config::EffectivePlacement(mp.placement()))
     << "\n";
  os << "  collective            "
     << or_default(mp.collective(), config::EffectiveCollective(mp.collective())) << "\n";
  os << "  weights               " << (mp.weights().empty() ? "auto" : mp.weights()) << "\n";
  // Where the memory plan keeps weights and KV cache, and the fullest DRAM channel against its
  // capacity (what validation checked: mapping::ValidateDramCapacity).
  if (const std::optional<mapping::MemoryUse> mu = mapping::PlanMemoryUse(mp, chip, e.cfg.model(), w)) {
    const bool gpu = chip.config().has_gpu();
    const std::string dram = OffChipWord(chip);
    os << "  memory per core       weights "
       << HumanBytes(static_cast<double>(mu->plan.weight_bytes_per_core))
       << (mu->weights_dram ? (gpu ? " in HBM" : " streamed from " + dram) : std::string(" in SRAM"));
    if (mu->plan.resident_rows)  // two layouts: the decode steps' kept (mapping::WeightPlan)
      os << " (the decode steps' layout; the prefill's "
         << HumanBytes(static_cast<double>(mu->plan.streamed_bytes_per_core)) << " streamed from " << dram
         << ")";
    if (w.has_requests())  // served: requests are admitted to the KV capacity left (tpsim serve)
      os << ", KV cache as requests are admitted";
    else
      os << ", KV cache " << HumanBytes(mu->kv_per_layer * mu->plan.layers_per_core) << " for "
         << mu->positions << " positions in " << (mu->kv_dram ? dram : std::string("SRAM"));
    os << " (the stage with the most layers, " << mu->plan.layers_per_core << ")\n";
    const size_t fullest = mapping::FullestChannel(*mu, chip);
    if (fullest < mu->channels.size()) {
      const mapping::ChannelUse& u = mu->channels[fullest];
      const arch::MemoryChannel& ch = chip.channels()[fullest];
      const std::string kind = MemoryKindWord(chip, ch.memory);
      os << "  fullest " << kind << " channel" << std::string(kind == "HBM" ? 3 : 2, ' ') << ch.name << ": "
         << HumanBytes(u.weights + u.kv)
         << (ch.capacity_bytes ? " of " + HumanBytes(static_cast<double>(ch.capacity_bytes))
                               : std::string(" (capacity_bytes 0: not checked)"));
      if (ch.capacity_bytes)
        os << " (" << Fixed(100.0 * (u.weights + u.kv) / static_cast<double>(ch.capacity_bytes), 1) << "%)";
      os << ", used by " << u.cores << (u.cores == 1 ? " core\n" : " cores\n");
    }
  }
  bool mn_2d = mp.partition() == "mn_2d";
  for (const auto& o : mp.overrides()) mn_2d = mn_2d || o.partition() == "mn_2d";
  if (mn_2d)
    os << "  mn_2d                 grid_rows "
       << (mp.grid_rows() ? std::to_string(mp.grid_rows()) : std::string("auto (most square)"))
       << ", weights " << (mp.mn_2d_weights().empty() ? "replicated" : mp.mn_2d_weights()) << "\n";
  if (e.cfg.model().num_experts() > 0) {
    const mapping::MoeGroups g = mapping::MoeGroupsOf(mp, e.cfg.model(), mapping::StageRanks(mp));
    const auto& mm = mp.moe();
    os << "  moe                   ep " << g.ep << " x tp " << g.tp << " (" << g.Replicas() << " replica"
       << (g.Replicas() == 1 ? "" : "s") << ", " << g.ExpertsPerSlot() << " experts per slot"
       << (g.ep_inner ? ", ep_inner" : "") << "), routing "
       << (mm.routing().empty() ? "balanced" : mm.routing());
    if (mm.routing() == "zipf") os << " s=" << mm.zipf_s();
    if (mm.routing() == "trace") os << " " << mm.routing_file();
    os << ", "
       << (mm.capacity_factor() > 0 ? "capacity factor " + Fixed(mm.capacity_factor(), 2) : "dropless")
       << ", all_to_all " << (mm.all_to_all().empty() ? "direct" : mm.all_to_all()) << "\n";
  }
  std::cout << os.str();
  return 0;
}

// ---- run --------------------------------------------------------------------

const char* kRunUsage = R"(usage: tpsim run [EXPERIMENT] [options]

Lowers the experiment to a Program and times it; prints what ran (the experiment's
name, with what --model and --set changed, and a title line: model on chip, TP x
stages, partition, placement, collective, engine), a table per layer and the
summary of the whole workload; --ops adds the table per op. On a terminal, a run
that takes longer than a second shows a progress line on stderr. A Program of
200,000 tasks or more uses a second core, where there is one, for side work (the
analytical engine's unloaded schedule, the result's energy and critical path, the
composition of decode steps timed step by step); the output is the same.

  EXPERIMENT           experiment file, or a shipped experiment's name (tpsim list
                       experiment); default: configs/experiments/default.textproto
  --engine NAME        analytical (default) or tlm (SystemC/TLM-2.0, link contention)
  --set FIELD=VALUE    override any scalar field, e.g. --set mapping.partition=m_split_rotate
  --model MODEL        catalog name or HuggingFace config.json path
  --out FILE           write the result as JSON (configs/schema/result.proto, snake_case)
  --dump-program FILE  write the lowered Program, one task per line
  --trace FILE         write a Perfetto trace (.pftrace; FILE.json: Chrome JSON);
                       open it in ui.perfetto.dev
  --trace-steps LIST   trace the prefill and these decode steps only (first, last,
                       every:N, step numbers; e.g. first,last,every:1000)
  --tasks              include every task's start and end in the result JSON
                       (needed by `tpsim plot timeline`)
  --ops                also print the table per op (phase, layer, op, partition,
                       compute / communication / memory / total us, steps):
                       compute_us is the op's slowest rank's compute time;
                       comm_us and memory_us are the spans of its transfers (or
                       collective kernels) and of its DRAM tasks over all ranks,
                       first start to last end; total_us is the span of all its
                       tasks, so it includes waiting for inputs and is not the
                       sum of the other three
  --quiet              print only the summary line
  --no-reuse           lower every decode step (default: from 64 steps, or from 27
                       where lowering every step would pass --max-memory; analytical
                       engine, steps timed from a few lowered ones where exact; TLM
                       engine, every step simulated but made from one lowered step
                       as the engine reaches it; README "Long generations")
  --reuse              try reuse from 5 decode steps on (TLM: from 6)
  --step-by-step       (with reuse, analytical engine) time every step from the
                       steps before it, not first as a periodic schedule or as
                       separate steps (the same results, slower; to compare the
                       ways). Step by step,
                       periods of starts that repeat are replayed and checked
                       against the engine's rules; TPSIM_REUSE_STATS=1 in the
                       environment prints which way timed the steps (and why
                       not the ways before it) and how many tasks were replayed
  --max-memory SIZE    refuse (exit 2, before lowering) an experiment whose Program
                       is estimated to need more than SIZE (e.g. 8G, 512M; 0: no
                       limit); default: 80% of this machine's memory
)";

int Run(Args& a) {
  ExperimentArgs ex;
  sim::RunOptions opts;
  sim::SetSpareThread(true);  // one Program at a time: a second core for its side work (sim/engine.h)
  std::string out, dump, trace_path, trace_steps;
  bool quiet = false, ops = false;
  while (!a.Done()) {
    std::string v;
    if (IsHelp(a.Peek())) {
      std::cout << kRunUsage;
      return 0;
    }
    if (ExperimentFlag(a, &ex)) continue;
    if (a.Flag("--engine", &opts.engine) || a.Flag("--out", &out) || a.Flag("--dump-program", &dump) ||
        a.Flag("--trace", &trace_path) || a.Flag("--trace-steps", &trace_steps)) {
      continue;
    }
    if (a.Flag("--max-memory", &v)) {
      opts.max_memory_bytes = MaxMemoryValue(v);
      continue;
    }
    if (a.Switch("--tasks")) {
      opts.keep_task_times = true;
      continue;
    }
    if (a.Switch("--quiet")) {
      quiet = true;
      continue;
    }
    if (a.Switch("--no-reuse")) {
      if (opts.reuse == sim::RunOptions::Reuse::kForce)
        throw UsageError("--reuse and --no-reuse contradict each other");
      opts.reuse = sim::RunOptions::Reuse::kOff;
      continue;
    }
    if (a.Switch("--reuse")) {
      if (opts.reuse == sim::RunOptions::Reuse::kOff)
        throw UsageError("--reuse and --no-reuse contradict each other");
      opts.reuse = sim::RunOptions::Reuse::kForce;
      continue;
    }
    if (a.Switch("--step-by-step")) {
      opts.step_by_step = true;
      continue;
    }
    if (a.Switch("--ops")) {
      ops = true;
      continue;
    }
    if (a.Peek().starts_with("-")) throw UsageError("unknown option " + a.Peek());
    if (!ex.path.empty()) throw UsageError("more than one experiment given");
    ex.path = ExperimentWord(a.Next());
  }
  // The task records go only into the result JSON: without --out they went nowhere, and their
  // bytes still counted against --max-memory (a run that fits could exit 2).
  if (opts.keep_task_times && out.empty())
    throw UsageError("--tasks needs --out (the task records are written to the result JSON only)");
  if (ops && quiet) throw UsageError("--ops prints the table per op; --quiet prints only the summary line");
  if (ex.path.empty()) ex.path = sim::DefaultExperimentPath();
  sim::Experiment e = sim::LoadExperiment(ex.path, ex.sets, ex.model);
  config::CheckOutputs({{"--out", out}, {"--dump-program", dump}, {"--trace", trace_path}},
                       sim::InputFiles(e));
  traces::CheckTraceName(trace_path);
  // --step-by-step chooses how reused steps are timed: it needs reuse.
  if (opts.step_by_step && opts.reuse == sim::RunOptions::Reuse::kOff)
    throw UsageError("--step-by-step times reused decode steps; --no-reuse lowers every step");
  if (opts.step_by_step && !dump.empty())
    throw UsageError("--step-by-step times reused decode steps; --dump-program needs every step lowered");
  if (opts.step_by_step) {
    // It picks among the ways a list schedule times reused steps; another engine (TLM) has one.
    std::string name = !opts.engine.empty() ? opts.engine : e.cfg.engine();
    if (name.empty()) name = "analytical";
    const std::unique_ptr<sim::Engine> engine = sim::MakeEngine(name);
    if (engine && !engine->ListSchedule())
      throw UsageError("--step-by-step chooses how the analytical engine times reused decode steps; the " +
                       name + " engine always makes each step from one lowered step as it reaches it");
  }
  if (opts.reuse == sim::RunOptions::Reuse::kOff) opts.unrolled_by = "--no-reuse";
  if (!dump.empty()) {
    opts.reuse = sim::RunOptions::Reuse::kOff;  // the dump is the whole Program
    opts.unrolled_by = "--dump-program writes the whole Program";
  }
  if (!trace_steps.empty()) {
    if (trace_path.empty()) throw UsageError("--trace-steps needs --trace");
    try {
      opts.observe_steps = sim::ParseObserveSteps(trace_steps, e.cfg.workload().decode_steps());
    } catch (const std::invalid_argument& err) {
      throw UsageError(std::string("--trace-steps: ") + err.what());
    }
    if (opts.observe_steps.empty())
      throw UsageError("--trace-steps '" + trace_steps + "' selects no decode step of the " +
                       std::to_string(e.cfg.workload().decode_steps()) + " (workload.decode_steps)");
  }
  // An output that cannot be written (a missing folder, a directory) is found now, not after
  // the run (exit 1, as a failed write): nothing is created or truncated.
  config::CheckOutputsWritable({{"--out", out}, {"--dump-program", dump}, {"--trace", trace_path}});
  if (!trace_path.empty() && trace_steps.empty() && opts.unrolled_by.empty())
    opts.unrolled_by =
        "--trace without --trace-steps traces every step; --trace-steps first,last,every:N traces a few";
  if (!trace_path.empty())  // the trace writer observes the run; the pipeline knows nothing of it
    opts.observers.push_back([&trace_path](const sim::RunView& v) {
      traces::WriteTrace(trace_path, v.program, v.chip, v.timing, v.result.config());
    });
  // TPSIM_REUSE_STATS set: stderr says which way timed the reused steps, and for steps timed
  // step by step what the replay did.
  sim::RunOptions::ReplayStats replay;
  if (std::getenv("TPSIM_REUSE_STATS")) opts.replay_stats = &replay;
  sim::RunOutput r = [&] {
    ProgressLine progress("tpsim run");
    opts.on_stage = [&progress](const char* stage) { progress.Stage(stage); };
    opts.on_count = [&progress](uint64_t done, uint64_t total, const char* what) {
      progress.Count(done, total, what);
    };
    return sim::RunExperiment(e, opts);
  }();
  if (!r.reused && !r.reuse.empty()) spdlog::warn("every decode step lowered: {}", r.reuse);
  if (opts.replay_stats && r.reused) std::cerr << "tpsim: " << r.reuse << "\n";
  if (replay.step_by_step)
    std::cerr << "tpsim: step by step: " << replay.replayed << " tasks replayed, " << replay.rollbacks
              << " rollbacks to the event loop\n";
  // State every partitioner fallback once (e.g. m_split_rotate->k_split in decode).
  std::set<std::string> fallbacks;
  for (const auto& op : r.program.ops) {
    if (op.ref.partition.find("->") != std::string::npos) fallbacks.insert(op.ref.Label());
  }
  for (const auto& f : fallbacks) spdlog::warn("partition fallback: {}", f);
  // Fields this run does not read (a mapping.moe block on a dense model, a noc field the topology
  // does not read, ...): each was accepted and ignored silently.
  for (const std::string& w : sim::SetTwice(ex.sets)) spdlog::warn("{}", w);
  for (const std::string& w : sim::IgnoredFields(e, false, opts.engine)) spdlog::warn("{}", w);
  for (const std::string& w : sim::UnreadLinkFields(e, r.program)) spdlog::warn("{}", w);
  for (const std::string& w : sim::CollectiveFallbacks(e, r.program)) spdlog::warn("{}", w);
  // fp32 moves twice the bytes and costs mac_fp32_pj, but matrix units (core.mac_dtype, and the
  // GPU GEMM model) are timed at their bf16 rate: GEMM times equalled bf16's, silently.
  if (e.cfg.workload().dtype() == "fp32")
    spdlog::warn(
        "workload.dtype fp32: GEMMs are timed at the matrix unit's bf16 rate (the only one modelled); "
        "bytes moved and energy are fp32's");
  // fp16 was accepted and timed, moved and charged exactly as bf16, silently.
  if (e.cfg.workload().dtype() == "fp16")
    spdlog::warn(
        "workload.dtype fp16: timed, moved and charged as bf16 (2 bytes, the matrix unit's bf16 rate and "
        "mac_bf16_pj: the only ones modelled)");
  if (r.result.summary().contention() > sim::kContentionWarning) {
    spdlog::warn(
        "contention {:.2f}: queues on links added {:.0f}% to this run; on 4,000 runs of the random family "
        "(tpsim agree) 1 of the 98 above 0.5 differed from the TLM engine by more than 10%, and 8 of the "
        "3,902 at or below 0.5 did: check with --engine tlm",
        r.result.summary().contention(), 100 * r.result.summary().contention());
  }
  if (!dump.empty()) WriteFileOrThrow(dump, r.program.Dump());
  if (!out.empty()) {
    config::OutputFile file(out);
    sim::WriteResultJson(r.result, [&](std::string_view piece) { file.Write(piece); });
    file.Commit();
  }
  if (quiet) {
    const auto& s = r.result.summary();
    auto share = [&](int64_t ps) { return Fixed(s.total_ps() ? 100.0 * ps / s.total_ps() : 0.0, 1) + "%"; };
    std::cout << "total " << Fixed(s.total_ps() / 1e6, 3) << " us, prefill " << Fixed(s.prefill_ps() / 1e6, 3)
              << " us, decode step " << Fixed(s.decode_step_ps_mean() / 1e6, 3)
              << " us; critical path: compute " << share(s.compute_ps()) << ", communication "
              << share(s.communication_ps()) << ", memory " << share(s.memory_ps());
    if (s.energy_modelled()) {
      std::cout << "; energy " << Fixed(s.energy_per_token_j() * 1e3, 3) << " mJ/token, "
                << Fixed(s.average_power_w(), 1) << " W";
    }
    std::cout << "\n";
  } else {
    std::cout << sim::ResultTable(r.result, ops);
  }
  return 0;
}

// ---- list -------------------------------------------------------------------

const char* kListUsage = R"(usage: tpsim list [KIND]

Prints, by name with a one-line description, each kind's registered implementations
(all_to_all, collective, engine, partitioner, placement, topology), the shipped configs
(chip: configs/chips, experiment: configs/experiments, model: the catalog, configs/models)
and the HuggingFace architectures `--model config.json` imports (architecture), or those of
KIND only. Shipped names go where a file would: `tpsim collectives h200-sxm-8`,
`model_name: "qwen3-8b"`, `--model qwen2.5-7b`.
)";

// The shipped configs of `dir` under ConfigDir() (chips, experiments): name and description.
std::vector<std::pair<std::string, std::string>> ShippedConfigs(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& name : config::ShippedNames(dir, ".textproto")) {
    const std::string path =
        config::JoinPath(config::JoinPath(config::ConfigDir(), dir), name + ".textproto");
    std::string description;
    try {
      config::SourceMap locs(path);
      if (dir == "chips") {
        config::Chip c;
        config::ParseFile(path, &c, &locs);
        description = c.description();
      } else {
        config::Experiment x;
        config::ParseFile(path, &x, &locs);
        description = x.description();
      }
    } catch (const config::ConfigError& err) {
      description = "(does not parse: " + err.diags().front().str() + ")";
    }
    out.emplace_back(name, description);
  }
  return out;
}

// The catalog's models: architecture, parameters, layers.
std::vector<std::pair<std::string, std::string>> CatalogModels() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& name : llm::CatalogNames()) {
    std::string description;
    try {
      const std::string path = llm::CatalogPath(name, {}, "model");
      config::SourceMap locs(path);
      const config::Model m = llm::ImportHuggingFaceText(
          config::ReadFileOrThrow(path, config::Location{path, 1, 1}, "model"), path, &locs);
      // An entry that imports but fails the model's checks (top 9 of 4 experts) has no
      // parameters to list: it printed impossible ones ("1.492 B active of 1.404 B").
      std::vector<config::Diag> diags;
      llm::ValidateModel(m, locs, "", &diags);
      if (!diags.empty()) throw config::ConfigError(std::move(diags));
      description = m.architecture() + ", " + Fixed(llm::ParameterCount(m) / 1e9, 3) + " B parameters";
      if (m.num_experts() > 0)
        description += " (" + Fixed(llm::ActiveParameterCount(m) / 1e9, 3) + " B active, " +
                       std::to_string(m.num_experts()) + " experts, top " +
                       std::to_string(m.num_experts_per_token()) + ")";
      description += ", " + std::to_string(m.num_layers()) + " layers";
    } catch (const config::ConfigError& err) {
      description = "(does not import: " + err.diags().front().str() + ")";
    }
    out.emplace_back(name, description);
  }
  return out;
}

int List(Args& a) {
  std::string only;
  while (!a.Done()) {
    if (IsHelp(a.Peek())) {
      std::cout << kListUsage;
      return 0;
    }
    if (a.Peek().starts_with("-")) throw UsageError("unknown option " + a.Peek());
    if (!only.empty()) throw UsageError("more than one KIND given");
    only = a.Next();
    if (only.empty()) throw UsageError("KIND is empty (a script's unset variable?)");
  }
  // A TPSIM_CONFIG_DIR without chips/ lists no shipped config: say why (it printed empty lists,
  // exit 0, without a word).
  if (const char* env = std::getenv("TPSIM_CONFIG_DIR"); env && *env) {
    std::error_code ec;
    if (!std::filesystem::is_directory(std::filesystem::path(env) / "chips", ec))
      std::cerr << "tpsim list: warning: TPSIM_CONFIG_DIR=" << env
                << " has no chips/ folder: no shipped chip, experiment or model is listed from it\n";
  }
  // Every kind, sorted: the registries' and the shipped configs' (read only when listed).
  std::map<std::string, std::function<std::vector<std::pair<std::string, std::string>>()>> kinds;
  for (const auto& [kind, r] : RegistryBase::All()) {
    kinds[std::string(kind)] = [r = r] {
      std::vector<std::pair<std::string, std::string>> out;
      for (const auto& e : r->List()) out.emplace_back(e.name, e.description);
      return out;
    };
  }
  kinds["chip"] = [] { return ShippedConfigs("chips"); };
  kinds["experiment"] = [] { return ShippedConfigs("experiments"); };
  kinds["model"] = &CatalogModels;
  kinds["architecture"] = &llm::ImportableArchitectures;
  if (!only.empty() && !kinds.count(only)) {
    std::string valid;
    for (const auto& [kind, list] : kinds) valid += (valid.empty() ? "" : ", ") + kind;
    throw UsageError("unknown kind '" + only + "' (valid: " + valid + ")");
  }
  bool first = true;
  for (const auto& [kind, list] : kinds) {
    if (!only.empty() && kind != only) continue;
    std::cout << (first ? "" : "\n") << kind << "\n";
    // A column of 20, or the kind's longest name (shipped experiment names).
    const auto rows = list();
    size_t width = 20;
    for (const auto& row : rows) width = std::max(width, row.first.size());
    for (const auto& [name, description] : rows)
      std::cout << "  " << name << std::string(width + 1 - name.size(), ' ') << description << "\n";
    first = false;
  }
  return 0;
}

// ---- commands implemented in other libraries: they take the remaining words --

std::vector<std::string> Rest(Args& a) {
  std::vector<std::string> words;
  while (!a.Done()) words.push_back(a.Next());
  return words;
}

const char* kPlotUsage = R"(usage: tpsim plot heatmap RESULT.json [RESULT.json...] --out links.png
           [--metric utilization|bytes|queue|busy] [--vmax V] [--labels auto|on|off] [--no-groups]
       tpsim plot timeline RESULT.json --out gantt.png   (RESULT from run --tasks --out)
           [--cores 0-7,16] [--window T0:T1] [--group tp|stage]
       tpsim plot sweep RESULTS.sqlite --x FIELD --y METRIC --out sweep.png
           [--color FIELD] [--facet FIELD] [--where EXPR] [--logx] [--logy] [--ratio A/B] [--table]
       tpsim plot energy RESULT.json [RESULT.json...] --out energy.png [--top N]
       tpsim plot front S.sqlite[:LABEL] [S.sqlite[:LABEL]...] --out front.png   (S from search --db)
       tpsim plot serving REQUESTS.csv KV.csv --out serving.png   (CSVs from tpsim serve)
(tpsim plot COMMAND --help describes every option; --dump-series FILE writes what was drawn, for
heatmap, timeline, sweep, energy and front)
)";
int Plot(Args& a) {
  if (!a.Done() && IsHelp(a.Peek())) {
    std::cout << kPlotUsage;
    return 0;
  }
  return traces::PlotCommand(Rest(a));
}

int Sweep(Args& a) { return sweep::SweepCommand(Rest(a)); }

// serve and compare print their own usage (these name where it is, and stay true as they grow).
const char* kServeUsage = "usage: tpsim serve EXPERIMENT [OPTIONS]   (tpsim serve --help lists them)\n";
int Serve(Args& a) { return cli::ServeCommand(Rest(a)); }

const char* kCompareUsage =
    "usage: tpsim compare PREDICTED MEASURED [OPTIONS]   (tpsim compare --help lists them)\n";
int Compare(Args& a) {
  const validate::GpuPredictorFactory gpu = sim::MicrobenchPredictorFactory();
  return validate::CompareCommand(Rest(a), &gpu);
}

int Agree(Args& a) { return sim::agree::AgreeCommand(Rest(a)); }
int Search(Args& a) { return search::SearchCommand(Rest(a)); }

int Collectives(Args& a) { return CollectivesCommand(Rest(a)); }
int Gemm(Args& a) { return GemmCommand(Rest(a)); }

// ---- the table of subcommands -------------------------------------------------

struct Command {
  const char* name;
  const char* summary;
  int (*handler)(Args&);
  const char* usage;
};

const Command kCommands[] = {
    {"describe", "resolve and validate an experiment; print chip, model and mapping", &Describe,
     kDescribeUsage},
    {"run", "lower an experiment to a Program and time it (analytical or TLM engine)", &Run, kRunUsage},
    {"sweep", "run a sweep on all cores into SQLite (resumable); --shard, --slurm, merge", &Sweep,
     sweep::kSweepUsage},
    {"serve", "serve a request stream: continuous batching, KV capacity, TTFT/TPOT/goodput", &Serve,
     kServeUsage},
    {"plot", "draw a result, sweep or stream: heatmap, timeline, sweep, energy, front, serving (matplotlib)",
     &Plot, kPlotUsage},
    {"compare", "predicted vs measured per op: table, MAPE, worst op; --plot PNG", &Compare, kCompareUsage},
    {"collectives", "one collective over a size sweep, nccl-tests style (GPU node or any chip)", &Collectives,
     kCollectivesUsage},
    {"gemm", "GEMM shapes on one core: time, TFLOP/s, bound, tiles, waves", &Gemm, kGemmUsage},
    {"agree", "analytical vs TLM engine over a seeded random family of experiments", &Agree,
     sim::agree::kAgreeUsage},
    {"search", "the best mapping of an experiment on its chip: Pareto front, TLM-confirmed", &Search,
     search::kSearchUsage},
    {"list",
     "the registered topologies, partitioners, placements, collectives and engines; shipped chips, "
     "experiments, models",
     &List, kListUsage},
};

void PrintMainHelp() {
  std::cout << "tpsim - tensor-parallel LLM layers on multi-core accelerators\n\n"
               "usage: tpsim                  run the default experiment and print its table\n"
               "       tpsim COMMAND [ARGS]   (tpsim COMMAND --help for its options)\n\ncommands:\n";
  for (const auto& c : kCommands) {
    std::printf("  %-11s %s\n", c.name, c.summary);  // "collectives" is 11
  }
  std::cout << "\nConfigs are protobuf text format (.textproto) or JSON; schemas in configs/schema/.\n"
               "Shipped configs are found under $TPSIM_CONFIG_DIR, else the source tree's configs/.\n"
               "Exit status: 0 ok, 1 simulation failure, 2 bad input (errors: file:line:col: field: value: "
               "rule).\n";
}

int Main(int argc, char** argv) {
  // Diagnostics that are not results go to stderr as "tpsim: warning: ...".
  auto log = spdlog::stderr_logger_st("tpsim");
  log->set_pattern("tpsim: %l: %v");
  spdlog::set_default_logger(log);
  if (argc < 2) {
    Args none(argc, argv, argc);
    return Run(none);
  }
  std::string cmd = argv[1];
  if (IsHelp(cmd)) {
    // `tpsim help run` is `tpsim run --help` (it printed the general help).
    if (argc >= 3) {
      for (const auto& c : kCommands) {
        if (argv[2] != std::string_view(c.name)) continue;
        char help[] = "--help";
        char* words[] = {argv[0], argv[2], help, nullptr};
        Args args(3, words, 2);
        return c.handler(args);
      }
    }
    PrintMainHelp();
    return 0;
  }
  for (const auto& c : kCommands) {
    if (cmd != c.name) continue;
    Args args(argc, argv, 2);
    try {
      return c.handler(args);
    } catch (const UsageError& u) {
      std::cerr << "tpsim " << c.name << ": " << u.what() << "\n\n" << c.usage;
      return 2;
    }
  }
  std::vector<std::string> names;
  for (const auto& c : kCommands) names.emplace_back(c.name);
  std::cerr << "tpsim: unknown command '" << cmd << "' (commands: " << config::JoinNames(names, " ")
            << "; see tpsim --help)" << config::DidYouMean(cmd, names) << "\n";
  return 2;
}

}  // namespace
}  // namespace tpsim::cli

// Main, with what it throws said and turned into exit statuses.
static int GuardedMain(int argc, char** argv) {
  try {
    return tpsim::cli::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    // The last resort: the estimates (mapping/estimate.h) refuse what they can foresee.
    std::string cmd;
    for (int i = 1; i < argc && cmd.size() < 200; ++i) cmd += std::string(" ") + argv[i];
    if (cmd.size() > 200) cmd = cmd.substr(0, 200) + "...";
    std::cerr
        << "tpsim: error: out of memory (std::bad_alloc) in `tpsim" << cmd
        << "`: the experiment needs more memory than this machine gives it; lower workload.decode_steps, "
           "the layers, mapping.tp or the requests, or pass a lower --max-memory to be refused up front\n";
    return 1;
  } catch (const tpsim::config::ConfigError& e) {
    for (const auto& d : e.diags()) std::cerr << d.str() << "\n";
    return 2;
  } catch (const tpsim::sim::StallError& e) {
    std::cerr << "tpsim: simulation stalled:\n" << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tpsim: error: " << e.what() << "\n";
    return 1;
  }
}

int main(int argc, char** argv) {
  // Arrays of 1 MiB and more are mapped on their own and given back when freed. glibc
  // raises its threshold to the largest array freed so far, after which the big per-task
  // arrays of one phase (lowering, the analytical plan) came from the heap and stayed in the
  // process's memory under the next phase's: wafer-32x32-qwen3-32b peaked at 208 MB
  // resident against 186 MB with this (tests/bench/program_bench.sh).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  const int rc = GuardedMain(argc, argv);
  if (!tpsim::config::FlushStandardOutput()) {
    std::cerr << "tpsim: error: writing standard output failed (a full disk?): what it shows is incomplete\n";
    return rc == 0 ? 1 : rc;
  }
  return rc;
}
