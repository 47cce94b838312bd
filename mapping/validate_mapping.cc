// Stage-two checks of the mapping against chip, model and workload (mapping.h).
#include "mapping/validate_mapping.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string>

#include "configs/files.h"
#include "mapping/collective/collective.h"
#include "mapping/estimate.h"
#include "mapping/moe_routing.h"
#include "mapping/pipeline.h"

namespace tpsim::mapping {

namespace {

// "W of weights in its S": rounded, or in bytes where the two round alike (7864320 B in
// 7864319 B read "7.86 MB of weights in its 7.86 MB").
std::string BytesApart(uint64_t weights, uint64_t sram) {
  const std::string w = FormatBytes(static_cast<double>(weights)), s = FormatBytes(static_cast<double>(sram));
  if (w != s) return w + " of weights in its " + s;
  return std::to_string(weights) + " B of weights in its " + std::to_string(sram) + " B";
}
std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
// The product of config sizes (each at most 2^32 - 1), exact: an error message that prints a
// product prints the sizes the user gave, not the clamped ones the checks compare.
std::string ProductOf(std::initializer_list<uint64_t> factors) {
  unsigned __int128 v = 1;
  for (uint64_t f : factors) v *= f;
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  return s;
}
// Tensors tpsim counts in 64-bit bytes (llm::BuildLayer, the memory plan): one past 2^61 bytes
// (2 EiB; a layer's sums of a few of them stay below 2^64) is refused at the field that makes it
// (in double, so the check itself cannot wrap). Before,
// the layer graph's products wrapped: 32,768 heads of 1 dimension over a 65,536-token prompt
// at batch 65,536 printed fewer FLOPs than 16,384 heads, and spilled bytes wrapped in `run`.
template <class Add>
void CheckTensorSizes(const config::Model& model, const config::Workload& wl, uint32_t layers, Add add) {
  constexpr double kMaxTensorBytes = 2305843009213693952.0;  // 2^61
  const double b = wl.dtype() == "fp32" ? 4 : 2, batch = wl.batch(), s = wl.seq_len();
  const double ctx = double(wl.cached_prefix()) + wl.seq_len() + wl.decode_steps();
  const double h = model.hidden_size(), heads = model.num_attention_heads(), d = model.head_dim();
  const double kv = model.num_key_value_heads() ? model.num_key_value_heads() : heads;
  const double widest = std::max({h, heads * d, double(model.intermediate_size()),
                                  double(model.moe_intermediate_size()), double(model.vocab_size())});
  const struct {
    const char* field;
    uint64_t value;
    const char* what;
    double bytes;
  } sizes[] = {
      {"workload.seq_len", wl.seq_len(), "attention scores (batch x heads x prompt x context)",
       batch * heads * s * (double(wl.cached_prefix()) + s) * b},
      {"workload.batch", wl.batch(), "activations (batch x prompt x the widest dimension)",
       batch * s * widest * b},
      {"workload.seq_len", wl.seq_len(), "KV cache (2 x batch x context x KV heads x head_dim x layers)",
       2 * batch * ctx * kv * d * layers * b},
      {"model.hidden_size", model.hidden_size(),
       "weights (hidden x the widest dimension x 3, experts included)",
       3 * h * widest * std::max(1.0, double(model.num_experts())) * b},
  };
  for (const auto& z : sizes)
    if (z.bytes > kMaxTensorBytes) {
      add(z.field, std::to_string(z.value),
          std::string("a layer's ") + z.what + " would take " + Num(z.bytes) +
              " bytes, past 2^61: beyond what tpsim counts in 64 bits");
      return;
    }
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// mapping.moe against the model (num_experts > 0) and the stage's ranks tp (mapping.tp x
// mapping.attention_dp; -1: too large).
void ValidateMoe(const config::Mapping& m, const config::Model& model, const config::Workload& wl,
                 const config::SourceMap& locs, int tp, std::vector<config::Diag>* diags) {
  const std::string group = m.attention_dp() > 1 ? "mapping.tp x mapping.attention_dp" : "mapping.tp";
  auto add = [&](const std::string& field, const std::string& value, const std::string& rule) {
    diags->push_back({locs.Find(field), field, value, rule});
  };
  const config::MoeMapping& mm = m.moe();
  const uint32_t experts = model.num_experts();
  const uint32_t ep = std::max<uint32_t>(1, mm.ep());
  if (mm.ep() > 0 && experts % mm.ep() != 0)
    add("mapping.moe.ep", std::to_string(mm.ep()),
        "must divide num_experts (" + std::to_string(experts) +
            ") so every expert slot holds as many experts");
  if (tp > 0) {
    // In 64 bits: ep and moe.tp may each be up to 2^31 - 1.
    const uint64_t span =
        uint64_t{ep} * (mm.tp() ? mm.tp() : std::max<uint32_t>(1, static_cast<uint32_t>(tp) / ep));
    const bool spans = ep <= static_cast<uint32_t>(tp) && span <= static_cast<uint64_t>(tp) &&
                       static_cast<uint64_t>(tp) % span == 0;
    // With moe.tp unset (its default, the ranks / moe.ep) only moe.ep is given: said of it, with
    // no derived moe.tp quoted as if given ("moe.ep x moe.tp (128 x 0)", "(3 x 5)").
    if (!spans && mm.tp())
      add("mapping.moe.tp", std::to_string(mm.tp()),
          "moe.ep x moe.tp (" + std::to_string(ep) + " x " + std::to_string(mm.tp()) + ") must divide " +
              group + " (" + std::to_string(tp) + ")");
    else if (!spans)
      add("mapping.moe.ep", std::to_string(mm.ep()),
          ep > static_cast<uint32_t>(tp)
              ? "must be at most " + group + " (" + std::to_string(tp) + ")"
              : "must divide " + group + " (" + std::to_string(tp) +
                    "): with mapping.moe.tp unset, each expert " + "slot has " + group + " / moe.ep ranks");
    const uint32_t etp = mm.tp() ? mm.tp() : std::max<uint32_t>(1, static_cast<uint32_t>(tp) / ep);
    if ((spans || mm.tp()) && model.moe_intermediate_size() % etp != 0)
      add(mm.tp() ? "mapping.moe.tp" : "mapping.moe.ep", std::to_string(mm.tp() ? mm.tp() : mm.ep()),
          "the ranks per expert (" +
              (mm.tp() ? std::to_string(etp)
                       : std::to_string(etp) + ": " + group + " / moe.ep, mapping.moe.tp being unset") +
              ") must divide moe_intermediate_size (" + std::to_string(model.moe_intermediate_size()) + ")");
  }
  if (!mm.group_order().empty() && mm.group_order() != "tp_inner" && mm.group_order() != "ep_inner")
    add("mapping.moe.group_order", mm.group_order(), "must be tp_inner or ep_inner");
  const std::vector<std::string> a2a = AllToAllVNames();
  if (!mm.all_to_all().empty() && mm.all_to_all() != "auto" && !Contains(a2a, mm.all_to_all()))
    add("mapping.moe.all_to_all", mm.all_to_all(),
        "unknown all-to-all algorithm; valid: " + config::JoinNames(a2a) + ", auto");
  RoutingKind kind;
  if (!ParseRoutingKind(mm.routing(), &kind)) {
    add("mapping.moe.routing", mm.routing(), "must be balanced, zipf or trace");
    return;
  }
  if (!std::isfinite(mm.zipf_s()) || mm.zipf_s() < 0 || mm.zipf_s() > 100)
    add("mapping.moe.zipf_s", Num(mm.zipf_s()), "must be in [0, 100]");
  if (kind == RoutingKind::kZipf && mm.zipf_s() == 0)
    add("mapping.moe.routing", mm.routing(),
        "zipf routing needs mapping.moe.zipf_s > 0 (the skew, e.g. 1.0)");
  if (!std::isfinite(mm.capacity_factor()) || mm.capacity_factor() < 0 || mm.capacity_factor() > 1e6)
    add("mapping.moe.capacity_factor", Num(mm.capacity_factor()),
        "must be 0 (dropless) or a positive factor up to 1e6");
  if (kind != RoutingKind::kTrace) return;
  if (mm.routing_file().empty()) {
    add("mapping.moe.routing", mm.routing(), "trace routing needs mapping.moe.routing_file");
    return;
  }
  try {
    const RoutingTrace trace =
        ReadRoutingTrace(mm.routing_file(), experts, locs.Find("mapping.moe.routing_file"));
    // A line for a layer the model does not have was never read (exit 0, the result the same).
    for (const auto& [l, line] : trace.line)
      if (l >= model.num_layers()) {
        diags->push_back({config::Location{mm.routing_file(), line, 1}, "mapping.moe.routing_file",
                          "layer " + std::to_string(l),
                          "the model has " + std::to_string(model.num_layers()) + " layers (0.." +
                              std::to_string(model.num_layers() - 1) +
                              "): a line for another is never read"});
        break;
      }
    const uint32_t layers = wl.num_layers() ? wl.num_layers() : model.num_layers();
    for (uint32_t l = 0; l < layers; ++l)
      if (llm::IsMoeLayer(model, l) && !trace.layers.contains(l)) {
        add("mapping.moe.routing_file", mm.routing_file(),
            "has no line for layer " + std::to_string(l) + " (every simulated MoE layer needs one)");
        break;
      }
  } catch (const config::ConfigError& e) {
    diags->insert(diags->end(), e.diags().begin(), e.diags().end());
  }
}
}  // namespace

void ValidateMapping(const config::Mapping& m, const arch::Chip& chip, const config::Model& model,
                     const config::Workload& wl, const config::SourceMap& locs,
                     std::vector<config::Diag>* diags) {
  ValidateMapping(m, chip, model, wl, locs, ReadPlacementFile(m), diags);
}

void ValidateMapping(const config::Mapping& m, const arch::Chip& chip, const config::Model& model,
                     const config::Workload& wl, const config::SourceMap& locs, const PlacementFile& file,
                     std::vector<config::Diag>* diags) {
  const size_t before = diags->size();
  auto add = [&](const std::string& field, const std::string& value, const std::string& rule) {
    diags->push_back({locs.Find(field), field, value, rule});
  };
  // Sizes beyond the chip are rejected before any int arithmetic on them.
  const int64_t cores = chip.num_cores();
  const int tp = m.tp() > cores ? -1 : static_cast<int>(m.tp());
  const uint32_t stages_given = std::max<uint32_t>(1, m.pipeline_stages());  // 0: one stage
  const int stages = stages_given > cores ? static_cast<int>(cores) + 1 : static_cast<int>(stages_given);
  const uint32_t layers = wl.num_layers() ? wl.num_layers() : model.num_layers();
  CheckTensorSizes(model, wl, layers, add);
  if (m.tp() == 0) add("mapping.tp", "0", "must be > 0");
  if (tp < 0) {
    add("mapping.tp", std::to_string(m.tp()), "exceeds the chip's " + std::to_string(cores) + " cores");
  }
  if (tp > 0 && static_cast<int64_t>(tp) * stages > chip.num_cores())
    add("mapping.tp", std::to_string(tp),
        "tp x pipeline_stages (" + ProductOf({m.tp(), stages_given}) + ") exceeds the chip's " +
            std::to_string(chip.num_cores()) + " cores");
  // Attention replicas: the stage's ranks are tp x attention_dp (stage_ranks; -1: too large).
  const uint32_t dp = std::max<uint32_t>(1, m.attention_dp());
  int stage_ranks = tp;
  if (dp > 1) {
    const std::string v = std::to_string(m.attention_dp());
    if (tp > 0 && static_cast<int64_t>(tp) * dp * stages > cores) {
      add("mapping.attention_dp", v,
          "tp x attention_dp x pipeline_stages (" + ProductOf({m.tp(), m.attention_dp(), stages_given}) +
              ") exceeds the chip's " + std::to_string(cores) + " cores");
      stage_ranks = -1;
    } else if (tp > 0) {
      stage_ranks = tp * static_cast<int>(dp);
    }
    if (std::max<uint32_t>(1, wl.batch()) % dp != 0)
      add("mapping.attention_dp", v,
          "must divide workload.batch (" + std::to_string(std::max<uint32_t>(1, wl.batch())) +
              "): each attention replica takes whole sequences");
  }
  if (static_cast<uint32_t>(stages) > layers)
    add("mapping.pipeline_stages", std::to_string(stages_given),
        "more stages than simulated layers (" + std::to_string(layers) + ")");
  const std::vector<std::string> parts = PartitionerNames();
  const std::string dflt = config::EffectivePartition(m.partition());
  if (!Contains(parts, dflt))
    add("mapping.partition", m.partition(), "unknown partitioner; valid: " + config::JoinNames(parts));
  const std::vector<std::string> weight_classes = {"qkv", "o", "gate_up", "down"};
  const std::vector<std::string> fixed_classes = {"attention", "norm", "elementwise", "router", "experts"};
  for (int i = 0; i < m.overrides_size(); ++i) {
    const auto& o = m.overrides(i);
    std::string f = "mapping.overrides[" + std::to_string(i) + "]";
    if (Contains(fixed_classes, o.op()))
      add(f + ".op", o.op(),
          "op class has a fixed partition (attention splits by heads; norms and element-wise ops follow "
          "their input; MoE blocks follow mapping.moe); partitioners apply to: " +
              config::JoinNames(weight_classes));
    else if (!Contains(weight_classes, o.op()))
      add(f + ".op", o.op(), "unknown op class; valid: " + config::JoinNames(weight_classes));
    // A class overridden twice ran with the last one, silently (describe listed both).
    for (int j = 0; j < i; ++j)
      if (m.overrides(j).op() == o.op()) {
        add(f + ".op", o.op(),
            "op class already overridden by mapping.overrides[" + std::to_string(j) + "] (partition " +
                m.overrides(j).partition() + "): give each class one override");
        break;
      }
    if (!Contains(parts, o.partition()))
      add(f + ".partition", o.partition(), "unknown partitioner; valid: " + config::JoinNames(parts));
  }
  const std::vector<std::string> places = PlacementNames();
  if (!m.placement().empty() && !Contains(places, m.placement()))
    add("mapping.placement", m.placement(), "unknown placement; valid: " + config::JoinNames(places));
  const std::vector<std::string> colls = CollectiveNames();
  if (!m.collective().empty() && m.collective() != "auto" && !Contains(colls, m.collective()))
    add("mapping.collective", m.collective(),
        "unknown collective algorithm; valid: " + config::JoinNames(colls) + ", auto");
  if (m.collective() == "nvls" && !InSwitchReductionOf(chip.config()).available)
    add("mapping.collective", m.collective(),
        "needs a chip with noc.topology switch and collectives.in_switch_reduction true");
  // A GPU node's collectives are NCCL kernels of chip.gpu: without gpu.nvls the run stopped at
  // its first collective ("algorithm nvls is not available", exit 1).
  else if (m.collective() == "nvls" && chip.config().has_gpu() && !chip.config().gpu().nvls())
    add("mapping.collective", m.collective(), "needs chip.gpu.nvls true on a GPU node (NVLink SHARP)");
  if (m.span() != "" && m.span() != "stage" && m.span() != "chip")
    add("mapping.span", m.span(), "must be stage or chip");
  if (m.span_order() != "" && m.span_order() != "stage_major" && m.span_order() != "tp_major")
    add("mapping.span_order", m.span_order(), "must be stage_major or tp_major");
  if (m.span() == "chip" && m.placement() == "file")
    add("mapping.span", m.span(),
        "placement = file already lists every stage's cores; span applies to the others");
  if (!m.span_order().empty() && (m.span().empty() || m.span() == "stage"))
    add("mapping.span_order", m.span_order(), "applies only with mapping.span = chip");
  const std::vector<std::string> weights = {"", "auto", "sram", "dram"};
  if (!Contains(weights, m.weights())) add("mapping.weights", m.weights(), "must be auto, sram or dram");
  const std::vector<std::string> mn_2d_weights = {"", "replicated", "k_steps"};
  if (!Contains(mn_2d_weights, m.mn_2d_weights()))
    add("mapping.mn_2d_weights", m.mn_2d_weights(), "must be replicated or k_steps");
  if (tp > 0) {
    uint32_t nq = model.num_attention_heads();
    uint32_t nkv = model.num_key_value_heads() ? model.num_key_value_heads() : nq;
    if (nq == 0 || (nq % tp != 0 && tp % nq != 0))
      add("mapping.tp", std::to_string(tp),
          "attention splits by heads: num_attention_heads (" + std::to_string(nq) +
              ") must divide by tp, or tp by it (heads are then replicated)");
    // Heads shared by tp / nq ranks each: the attention output is gathered from tp equal
    // column blocks, each inside the head its rank holds (LayoutConverter's shared-head
    // gather), which needs head_dim to split into tp / nq blocks. Before, run stopped with
    // "cannot gather split(cols)" (exit 1) where describe had accepted the mapping.
    const uint32_t hd = model.head_dim();
    if (nq > 0 && tp > static_cast<int>(nq) && tp % nq == 0 && hd > 0 && hd % (tp / nq) != 0)
      add("mapping.tp", std::to_string(tp),
          "replicates each of the " + std::to_string(nq) + " attention heads over " +
              std::to_string(tp / nq) +
              " ranks, and the attention output is gathered from tp equal column blocks inside the heads: "
              "head_dim (" +
              std::to_string(hd) + ") must divide by " + std::to_string(tp / nq));
    if (nkv > 0 && nkv % tp != 0 && tp % nkv != 0)
      add("mapping.tp", std::to_string(tp),
          "num_key_value_heads (" + std::to_string(nkv) +
              ") must divide by tp, or tp by it (KV heads are then replicated)");
    if (MapsPartition(m, "mn_2d") && m.grid_rows() > 0 && tp % static_cast<int>(m.grid_rows()) != 0)
      add("mapping.grid_rows", std::to_string(m.grid_rows()), "must divide tp (" + std::to_string(tp) + ")");
  }
  if (model.num_experts() > 0) ValidateMoe(m, model, wl, locs, stage_ranks, diags);
  if (m.placement() == "file") {
    if (!file.readable) {
      add("mapping.placement_file", m.placement_file(), "placement = file needs a readable file");
    } else {
      // Errors in the file are located there (line:col of the id).
      auto in_file = [&](const config::Location& at, const std::string& value, const std::string& rule) {
        diags->push_back({at, "mapping.placement_file", value, rule});
      };
      // An integer of many digits is a core id off the chip, not a malformed one.
      if (!file.well_formed)
        in_file(file.bad, config::Clip(file.bad_token),
                file.bad_range
                    ? "core id is not on the chip (0 to " + std::to_string(chip.num_cores() - 1) + ")"
                    : "must hold whitespace-separated core ids (integers)");
      const int64_t needed = int64_t{stages} * stage_ranks;
      if (file.well_formed && stage_ranks > 0 && static_cast<int64_t>(file.cores.size()) != needed)
        add("mapping.placement_file", m.placement_file(),
            "has " + std::to_string(file.cores.size()) +
                " core ids; placement = file needs one per rank of every stage, " + std::to_string(stages) +
                " stages x " + std::to_string(stage_ranks) + " ranks (" +
                (dp > 1 ? "tp x attention_dp" : "tp") + ") = " + std::to_string(needed) + ", in stage order");
      for (size_t k = 0; k < file.cores.size(); ++k)
        if (file.cores[k] < 0 || file.cores[k] >= chip.num_cores()) {
          in_file(file.At(k), std::to_string(file.cores[k]),
                  "core id (rank " + std::to_string(k) + " of the file) is not on the chip (0 to " +
                      std::to_string(chip.num_cores() - 1) + ")");
          break;
        }
    }
  }
  if (diags->size() == before) {
    // Everything else is consistent: the placements themselves must be possible.
    try {
      PlaceStages(chip, m, stages, stage_ranks, file);
    } catch (const PlacementFileError& e) {
      const size_t k = static_cast<size_t>(e.rank);
      diags->push_back({k < file.line_col.size() ? file.At(k) : locs.Find("mapping.placement_file"),
                        "mapping.placement_file", k < file.cores.size() ? std::to_string(file.cores[k]) : "",
                        e.what()});
    } catch (const StageRegionError& e) {
      // No placement could fix it: it was said at mapping.placement, whatever its value.
      add("mapping.pipeline_stages", std::to_string(stages_given),
          std::string(e.what()) +
              ": change mapping.tp or mapping.pipeline_stages, or set mapping.span: chip "
              "(the stages' ranks then follow one placement of the whole chip)");
    } catch (const std::exception& e) {
      add(m.placement() == "file" ? "mapping.placement_file" : "mapping.placement",
          m.placement() == "file" ? m.placement_file() : m.placement(), e.what());
    }
  }
  if (diags->size() == before && m.weights() == "sram" && !chip.config().has_gpu()) {
    // Weights pinned in SRAM must fit there: each core of the stage with the most layers. A
    // request stream (tpsim serve) lowers a few layers but plans the model's (its stages hold
    // every layer: LowerOptions::plan_layers), so all of them must fit.
    WeightPlan plan;
    try {
      plan = PlanWeights(chip, model, m, wl.has_requests() ? 0 : layers, wl.dtype(), &wl);
    } catch (const std::exception&) {
      return;  // the lowering says what it cannot plan
    }
    const uint64_t sram = chip.config().core().sram_bytes();
    if (plan.weight_bytes_per_core > sram)
      add("mapping.weights", m.weights(),
          "each core of the stage with the most layers (" + std::to_string(plan.layers_per_core) +
              ") would keep " + BytesApart(plan.weight_bytes_per_core, sram) +
              " of SRAM (chip.core.sram_bytes): use auto (SRAM where they fit) or dram, give the cores more "
              "SRAM, or spread the model over more cores (mapping.tp, mapping.pipeline_stages)");
  }
}

std::optional<MemoryUse> PlanMemoryUse(const config::Mapping& m, const arch::Chip& chip,
                                       const config::Model& model, const config::Workload& wl) {
  const uint32_t layers = wl.num_layers() ? wl.num_layers() : model.num_layers();
  const int stages = std::max<int>(1, static_cast<int>(m.pipeline_stages()));
  StagePlacement placed;
  MemoryUse u;
  try {
    placed = PlaceStages(chip, m, stages, StageRanks(m), ReadPlacementFile(m));
    u.plan = PlanWeights(chip, model, m, layers, wl.dtype(), &wl);
  } catch (const std::exception&) {
    return std::nullopt;  // ValidateMapping reports what makes these impossible
  }
  const WeightPlan& plan = u.plan;
  if (plan.stage_weight_bytes.size() != static_cast<size_t>(stages) ||
      placed.cores.size() != plan.stage_weight_bytes.size())
    return std::nullopt;
  const bool gpu = chip.config().has_gpu();
  u.positions = uint64_t{wl.cached_prefix()} + wl.seq_len() + wl.decode_steps();
  u.kv_per_layer = KvBytesPerLayer(model, wl, m, plan.kv_heads_per_core);
  u.weights_dram = gpu || !plan.weights_in_sram;
  const double sram = static_cast<double>(chip.config().core().sram_bytes());
  u.kv_dram = gpu || (u.weights_dram ? 0.0 : static_cast<double>(plan.weight_bytes_per_core)) +
                             u.kv_per_layer * plan.layers_per_core >
                         sram;
  const bool kv_counted = u.kv_dram && !wl.has_requests();
  u.channels.resize(chip.channels().size());
  for (size_t s = 0; s < placed.cores.size(); ++s)
    for (int core : placed.cores[s]) {
      ChannelUse& c = u.channels[static_cast<size_t>(chip.ChannelOf(core))];
      if (u.weights_dram) c.weights += static_cast<double>(plan.stage_weight_bytes[s]);
      if (plan.resident_rows) c.weights += static_cast<double>(plan.stage_streamed_bytes[s]);
      if (kv_counted) c.kv += u.kv_per_layer * plan.stage_layers[s];
      ++c.cores;
    }
  return u;
}

size_t FullestChannel(const MemoryUse& use, const arch::Chip& chip) {
  size_t fullest = use.channels.size();
  double most = -1;
  for (size_t c = 0; c < use.channels.size(); ++c) {
    const ChannelUse& u = use.channels[c];
    const double cap = static_cast<double>(chip.channels()[c].capacity_bytes);
    const double key = cap > 0 ? (u.weights + u.kv) / cap : 0;
    if (u.cores > 0 && key > most) fullest = c, most = key;
  }
  return fullest;
}

bool MapsPartition(const config::Mapping& m, const std::string& partition) {
  if (config::EffectivePartition(m.partition()) == partition) return true;
  for (const auto& o : m.overrides())
    if (o.partition() == partition) return true;
  return false;
}

std::vector<UnreadField> UnreadMappingFields(const config::Mapping& m, const config::Chip& chip,
                                             const config::Model& model) {
  std::vector<UnreadField> out;
  const std::string placement = config::EffectivePlacement(m.placement());
  if (m.seed() != 0 && placement != "random")
    out.push_back({"mapping.seed", "placement " + placement + " does not read it (placement random does)"});
  if (!m.placement_file().empty() && placement != "file")
    out.push_back(
        {"mapping.placement_file", "placement " + placement + " does not read it (placement file does)"});
  const bool mn_2d = MapsPartition(m, "mn_2d");
  for (const auto& [f, set] : {std::pair{"mapping.grid_rows", m.grid_rows() != 0},
                               {"mapping.mn_2d_weights", !m.mn_2d_weights().empty()}})
    if (set && !mn_2d)
      out.push_back({f, "no op class is mapped to mn_2d (mapping.partition " +
                            config::EffectivePartition(m.partition()) + ", no mn_2d override)"});
  if (m.enforce_eager() && !chip.has_gpu())
    out.push_back(
        {"mapping.enforce_eager", (chip.name().empty() ? std::string("the chip") : "chip " + chip.name()) +
                                      " is not a GPU node (chip.gpu): no kernel launches"});
  // A GPU node keeps the weights in HBM (the memory plan): weights sram there changed nothing.
  if (m.weights() == "sram" && chip.has_gpu())
    out.push_back({"mapping.weights", "sram: a GPU node (chip.gpu) keeps the weights in HBM"});
  if (m.has_serving())
    out.push_back({"mapping.serving", "read by tpsim serve only (a request stream's scheduler)"});
  // A capacity_factor of -1 included: a --model or --set that dropped the experts says so.
  if (m.has_moe() && model.num_experts() == 0)
    out.push_back({"mapping.moe", model.name() + " has no experts"});
  if (model.num_experts() > 0) {
    const config::MoeMapping& mm = m.moe();
    const std::string routing = mm.routing().empty() ? "balanced" : mm.routing();
    for (const auto& [f, set] :
         {std::pair{"mapping.moe.zipf_s", mm.zipf_s() != 0}, {"mapping.moe.seed", mm.seed() != 0}})
      if (set && routing != "zipf")
        out.push_back({f, "routing " + routing + " does not read it (routing zipf does)"});
    if (!mm.routing_file().empty() && routing != "trace")
      out.push_back(
          {"mapping.moe.routing_file", "routing " + routing + " does not read it (routing trace does)"});
    // gate_up and down are the dense MLP's classes: a model whose every layer is an MoE block
    // has none (its experts, shared ones included, follow mapping.moe).
    if (llm::AllMoeLayers(model, model.num_layers())) {
      bool qkv = false, o = false;
      for (int i = 0; i < m.overrides_size(); ++i) {
        const std::string& op = m.overrides(i).op();
        qkv |= op == "qkv";
        o |= op == "o";
        if (op == "gate_up" || op == "down")
          out.push_back({"mapping.overrides[" + std::to_string(i) + "]",
                         "op class " + op + " is the dense MLP's, and every layer of " + model.name() +
                             " is an MoE block (its experts follow mapping.moe)"});
      }
      // The partition then reaches no op: the attention projections have theirs, and the rest
      // of a layer is replicated, split by heads or an MoE block (the Programs of the five
      // partitioners are the same: SearchTest.AllSparseMoeModelsSearchOnePartitionerPair).
      if (qkv && o && !m.partition().empty())
        out.push_back(
            {"mapping.partition", "overrides set the attention projections' (qkv, o), and every layer of " +
                                      model.name() + " is an MoE block (its experts follow mapping.moe)"});
    }
  }
  return out;
}

void ValidateDramCapacity(const config::Mapping& m, const arch::Chip& chip, const config::Model& model,
                          const config::Workload& wl, const config::SourceMap& locs,
                          std::vector<config::Diag>* diags) {
  const std::optional<MemoryUse> mu = PlanMemoryUse(m, chip, model, wl);
  if (!mu) return;
  const std::vector<ChannelUse>& use = mu->channels;
  const uint64_t positions = mu->positions;
  // The channel fullest against its capacity says it; the count of the others that overflow.
  auto overflows = [&](size_t c) {
    const uint64_t cap = chip.channels()[c].capacity_bytes;
    return cap > 0 && use[c].weights + use[c].kv > static_cast<double>(cap);
  };
  const size_t worst = FullestChannel(*mu, chip);
  if (worst == use.size() || !overflows(worst)) return;
  size_t over = 0;
  for (size_t c = 0; c < use.size(); ++c) over += overflows(c);
  const arch::MemoryChannel& ch = chip.channels()[worst];
  const ChannelUse& u = use[worst];
  const std::string field = "chip.memory[" + std::to_string(ch.memory) + "].capacity_bytes";
  std::string what;
  if (u.weights > 0) what = "weights: " + FormatBytes(u.weights);
  // The batch multiplies the KV cache too: say so where it is more than one sequence.
  const uint32_t batch = std::max<uint32_t>(1, wl.batch());
  if (u.kv > 0)
    what += (what.empty() ? "" : "; ") + std::string("KV cache for ") + std::to_string(positions) +
            " positions (workload.cached_prefix + seq_len + decode_steps)" +
            (batch > 1 ? " x batch " + std::to_string(batch) + " (workload.batch)" : "") + ": " +
            FormatBytes(u.kv);
  diags->push_back({locs.Find(field), field, std::to_string(ch.capacity_bytes),
                    "memory channel " + ch.name + ", used by " + std::to_string(u.cores) +
                        (u.cores == 1 ? " core" : " cores") + " of the mapping, would hold " +
                        FormatBytes(u.weights + u.kv) + " (" + what + "), more than its capacity" +
                        (over == 2  ? " (and 1 more channel overflows)"
                         : over > 2 ? " (and " + std::to_string(over - 1) + " more channels overflow)"
                                    : "") +
                        ": raise capacity_bytes, spread the model over more cores (mapping.tp, "
                        "mapping.pipeline_stages" +
                        // A rank holds every expert of its slot whatever mapping.tp: E / moe.ep
                        // experts, each cut moe.tp ways (it named mapping.tp alone, which does not
                        // shrink an explicit moe.ep 1 x moe.tp 1).
                        (model.num_experts() > 0 && u.weights > 0
                             ? "; an MoE layer's experts over more ranks: mapping.moe.ep, mapping.moe.tp"
                             : "") +
                        "), or shorten the context" +
                        (batch > 1 && u.kv > 0 ? " or lower workload.batch" : "")});
}

}  // namespace tpsim::mapping
