#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "configs/files.h"
#include "llm/opgraph.h"
#include "mapping/collective/collective.h"
#include "mapping/estimate.h"
#include "mapping/mapping.h"
#include "mapping/pipeline.h"
#include "mapping/placement/placement.h"
#include "sim/search/detail.h"
#include "sim/search/search.h"

// The search space: the candidates, the experiment of each, and their replicas.
namespace tpsim::search {

namespace detail {

uint32_t Layers(const sim::Experiment& e) {
  return e.cfg.workload().num_layers() ? e.cfg.workload().num_layers() : e.cfg.model().num_layers();
}

bool Serving(const sim::Experiment& e) { return e.cfg.workload().has_requests(); }

bool Disaggregated(const config::Mapping& m) {
  return m.has_serving() && m.serving().mode() == "disaggregated";
}

bool Disaggregated(const sim::Experiment& e) { return Serving(e) && Disaggregated(e.cfg.mapping()); }

}  // namespace detail

namespace {

using detail::Disaggregated;
using detail::Layers;

std::vector<uint32_t> Powers(uint32_t max) {
  std::vector<uint32_t> out;
  for (uint32_t v = 1; v <= max && v != 0; v *= 2) out.push_back(v);
  return out;
}

}  // namespace

std::vector<Candidate> Space(const sim::Experiment& base, const arch::Chip& chip, const SpaceOptions& o) {
  const uint32_t cores = static_cast<uint32_t>(chip.num_cores());
  const std::vector<uint32_t> tps = o.tp.empty() ? Powers(cores) : o.tp;
  const std::vector<uint32_t> stages = o.stages.empty() ? Powers(Layers(base)) : o.stages;
  const std::vector<std::string> parts = o.partitions.empty() ? mapping::PartitionerNames() : o.partitions;
  std::vector<std::string> places = o.placements;
  if (places.empty()) {
    for (const auto& p : mapping::PlacementNames())
      if (p != "file") places.push_back(p);
  }
  std::vector<std::string> colls = o.collectives;
  if (colls.empty()) {
    const bool in_switch = base.cfg.chip().noc().topology() == "switch";
    for (const auto& c : mapping::CollectiveNames())
      if (c != "nvls" || in_switch) colls.push_back(c);
  }
  const std::vector<std::string> weights =
      o.weights.empty() ? std::vector<std::string>{base.cfg.mapping().weights()} : o.weights;
  const std::vector<uint32_t> batches =
      o.batch.empty() ? std::vector<uint32_t>{std::max<uint32_t>(1, base.cfg.workload().batch())} : o.batch;
  const std::vector<std::string> spans =
      o.spans.empty() ? std::vector<std::string>{"stage", "chip:stage_major", "chip:tp_major"} : o.spans;
  const std::vector<uint32_t> dps =
      o.attention_dp.empty() ? std::vector<uint32_t>{std::max<uint32_t>(1, base.cfg.mapping().attention_dp())}
                             : o.attention_dp;
  const uint32_t experts = base.cfg.model().num_experts();
  // MoE: the expert-parallel choices for a stage of `ranks` ranks; dense: none (ep 0).
  struct MoeChoice {
    uint32_t ep = 0, moe_tp = 0;
    std::string all_to_all, group_order;
  };
  const std::vector<uint32_t> moe_tps = o.moe_tp.empty() ? std::vector<uint32_t>{0} : o.moe_tp;
  const std::vector<std::string> a2as = o.all_to_all.empty() ? std::vector<std::string>{""} : o.all_to_all;
  const std::vector<std::string> orders =
      o.group_order.empty() ? std::vector<std::string>{""} : o.group_order;
  auto moe_of = [&](uint32_t ranks) {
    if (experts == 0) return std::vector<MoeChoice>{MoeChoice{}};
    std::vector<MoeChoice> out;
    for (uint32_t ep : o.ep.empty() ? Powers(ranks) : o.ep) {
      if (ep == 0 || ranks % ep != 0 || experts % ep != 0) continue;
      for (uint32_t mt : moe_tps) {
        if (mt > 0 && ranks % (uint64_t{ep} * mt) != 0) continue;
        for (const auto& a : a2as)
          for (const auto& g : orders) out.push_back(MoeChoice{ep, mt, a, g});
      }
    }
    return out;
  };
  // Disaggregated serving: a prefill and a decode group of `st` stages each.
  const uint64_t groups = Disaggregated(base) ? 2 : 1;
  // Where every simulated layer is sparse, the MLP's partitioner partitions nothing (the MoE
  // block is split by ep and moe.tp): a candidate whose MLP partitioner differs from its
  // attention's lowers the attention's Program, so only the attention's is kept (5 x 5
  // partitioner pairs were 5 distinct Programs; SearchTest.AllSparseMoeModelsSearchOnePartitionerPair).
  const bool mlp_unused = llm::AllMoeLayers(base.cfg.model(), Layers(base));
  std::vector<Candidate> out;
  for (uint32_t tp : tps)
    for (uint32_t dp : dps)
      for (const MoeChoice& mc : moe_of(tp * dp))
        for (uint32_t st : stages) {
          if (dp == 0 || groups * tp * dp * st > cores || st > Layers(base)) continue;
          for (const auto& a : parts)
            for (const auto& m : parts)
              if (!mlp_unused || m == a)
                for (const auto& pl : places)
                  for (const auto& sp : spans) {
                    // One stage: both wafer-wide orders are the same placement.
                    if (st == 1 && sp == "chip:tp_major" &&
                        std::find(spans.begin(), spans.end(), "chip:stage_major") != spans.end())
                      continue;
                    for (const auto& co : colls)
                      for (const auto& w : weights)
                        for (uint32_t b : batches)
                          if (b % dp == 0)
                            out.push_back(Candidate{tp, st, b, a, m, pl, co, w, sp, dp, mc.ep, mc.moe_tp,
                                                    mc.all_to_all, mc.group_order});
                  }
        }
  return out;
}

namespace {

// The names and placements do not empty the space (each list names valid values): one of each
// keeps the checks below cheap. The numeric axes do.
SpaceOptions NumericAxesOnly(const SpaceOptions& opts) {
  SpaceOptions o = opts;
  auto one = [](std::vector<std::string>* v, const std::string& fallback) {
    *v = {v->empty() ? fallback : v->front()};
  };
  one(&o.partitions, mapping::PartitionerNames().front());
  one(&o.placements, "linear");
  one(&o.collectives, "ring");
  one(&o.spans, "stage");
  if (!o.weights.empty()) o.weights.resize(1);
  return o;
}

using Axis = std::vector<uint32_t> SpaceOptions::*;
constexpr std::pair<const char*, Axis> kNumericAxes[] = {{"--tp", &SpaceOptions::tp},
                                                         {"--stages", &SpaceOptions::stages},
                                                         {"--attention-dp", &SpaceOptions::attention_dp},
                                                         {"--ep", &SpaceOptions::ep},
                                                         {"--moe-tp", &SpaceOptions::moe_tp},
                                                         {"--batch", &SpaceOptions::batch}};

// What a candidate must meet, as said after "leaves none": "(tp x attention_dp x stages <= 16
// cores, stages <= 2 layers, ...)".
std::string SpaceLimits(const sim::Experiment& base, const arch::Chip& chip) {
  const bool moe = base.cfg.model().num_experts() > 0;
  std::string why = "(tp x attention_dp x stages" + std::string(Disaggregated(base) ? " x 2 groups" : "") +
                    " <= " + std::to_string(chip.num_cores()) +
                    " cores, stages <= " + std::to_string(Layers(base)) +
                    " layers, batch a multiple of attention_dp";
  if (moe)
    why += ", ep dividing tp x attention_dp and the " + std::to_string(base.cfg.model().num_experts()) +
           " experts, ep x moe-tp dividing tp x attention_dp";
  return why + ")";
}

}  // namespace

std::string EmptySpaceWhy(const sim::Experiment& base, const arch::Chip& chip, const SpaceOptions& opts) {
  const SpaceOptions o = NumericAxesOnly(opts);
  if (!Space(base, chip, o).empty()) return "";
  const auto& axes = kNumericAxes;
  auto values = [](const std::vector<uint32_t>& v) {
    std::string out;
    for (uint32_t x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
    return out;
  };
  std::string alone, given;
  for (const auto& [flag, axis] : axes) {
    if ((o.*axis).empty()) continue;
    const std::string named = std::string(flag) + " " + values(o.*axis);
    given += (given.empty() ? "" : ", ") + named;
    SpaceOptions without = o;
    (without.*axis).clear();
    if (!Space(base, chip, without).empty()) alone += (alone.empty() ? "" : ", ") + named;
  }
  std::string why = "no candidate: ";
  why += !alone.empty()   ? alone + " leave" + (alone.find(", ") == std::string::npos ? "s" : "") + " none"
         : !given.empty() ? given + " together leave none"
                          : "the experiment leaves none";
  return why + " " + SpaceLimits(base, chip);
}

std::vector<std::string> UnusedValues(const sim::Experiment& base, const arch::Chip& chip,
                                      const SpaceOptions& opts) {
  const SpaceOptions o = NumericAxesOnly(opts);
  std::vector<std::string> out;
  for (const auto& [flag, axis] : kNumericAxes) {
    const std::vector<uint32_t>& given = o.*axis;
    if (given.size() < 2) continue;  // one value: it is used, or the space is empty (EmptySpaceWhy)
    std::set<uint32_t> said;
    for (uint32_t v : given) {
      if (!said.insert(v).second) continue;
      SpaceOptions only = o;
      only.*axis = {v};
      if (Space(base, chip, only).empty())
        out.push_back(std::string(flag) + " " + std::to_string(v) + " leaves no candidate " +
                      SpaceLimits(base, chip));
    }
  }
  return out;
}

config::Mapping MappingOf(const config::Mapping& base, const Candidate& c) {
  config::Mapping mapping = base;
  config::Mapping* m = &mapping;
  m->set_tp(c.tp);
  m->set_pipeline_stages(c.stages);
  if (detail::Disaggregated(base)) {
    m->mutable_serving()->set_prefill_stages(c.stages);
    m->mutable_serving()->set_decode_stages(c.stages);
  }
  m->set_placement(c.placement);
  m->set_collective(c.collective);
  m->set_weights(c.weights);
  m->clear_span();
  m->clear_span_order();
  if (c.span.starts_with("chip")) {
    m->set_span("chip");
    m->set_span_order(c.span == "chip:tp_major" ? "tp_major" : "stage_major");
  }
  m->clear_grid_rows();
  m->clear_overrides();
  if (c.attention_dp > 1)
    m->set_attention_dp(c.attention_dp);
  else
    m->clear_attention_dp();
  if (c.ep > 0) {
    m->mutable_moe()->set_ep(c.ep);
    if (c.moe_tp > 0)
      m->mutable_moe()->set_tp(c.moe_tp);
    else
      m->mutable_moe()->clear_tp();  // the stage's ranks / ep
    if (!c.all_to_all.empty()) m->mutable_moe()->set_all_to_all(c.all_to_all);
    if (!c.group_order.empty()) m->mutable_moe()->set_group_order(c.group_order);
  }
  m->set_partition(c.mlp);
  if (c.attention != c.mlp) {
    for (const char* op : {"qkv", "o"}) {
      config::PartitionOverride* o = m->add_overrides();
      o->set_op(op);
      o->set_partition(c.attention);
    }
  }
  return mapping;
}

config::Workload WorkloadOf(const config::Workload& base, const Candidate& c) {
  config::Workload wl = base;
  wl.set_batch(c.batch);
  return wl;
}

sim::Experiment Apply(const sim::Experiment& base, const Candidate& c) {
  sim::Experiment e = base;
  *e.cfg.mutable_mapping() = MappingOf(base.cfg.mapping(), c);
  *e.cfg.mutable_workload() = WorkloadOf(base.cfg.workload(), c);
  std::ostringstream name;
  name << base.cfg.name() << " [search: tp=" << c.tp;
  if (c.attention_dp > 1) name << " attention_dp=" << c.attention_dp;
  if (c.ep > 0) name << " ep=" << c.ep;
  if (c.moe_tp > 0) name << " moe_tp=" << c.moe_tp;
  if (!c.all_to_all.empty()) name << " all_to_all=" << c.all_to_all;
  if (!c.group_order.empty()) name << " group_order=" << c.group_order;
  name << " stages=" << c.stages << " attention=" << c.attention << " mlp=" << c.mlp
       << " placement=" << c.placement << " span=" << c.span << " collective=" << c.collective;
  if (!c.weights.empty()) name << " weights=" << c.weights;
  name << " batch=" << c.batch << "]";
  e.cfg.set_name(name.str());
  return e;
}

void LocateCandidate(const sim::Experiment& base, const Candidate& c, const SpaceOptions& space,
                     sim::Experiment* e) {
  const config::Mapping& b = base.cfg.mapping();
  const config::Mapping& m = e->cfg.mapping();
  auto at = [&](const std::string& path, bool differs, const std::string& flag, bool listed,
                const std::string& value) {
    if (!differs) return;
    const config::Location where =
        listed ? sim::CommandLineLocation(flag + " " + config::Clip(value, 80))
               : config::Location{
                     "<tpsim search: " + flag + " " + config::Clip(value, 80) + " (default list)>", 1, 1};
    e->locs.SetAppending(path, where);
  };
  const std::string stages = std::to_string(c.stages);
  at("mapping.tp", m.tp() != b.tp(), "--tp", !space.tp.empty(), std::to_string(c.tp));
  at("mapping.pipeline_stages", m.pipeline_stages() != b.pipeline_stages(), "--stages", !space.stages.empty(),
     stages);
  at("mapping.serving.prefill_stages", m.serving().prefill_stages() != b.serving().prefill_stages(),
     "--stages", !space.stages.empty(), stages);
  at("mapping.serving.decode_stages", m.serving().decode_stages() != b.serving().decode_stages(), "--stages",
     !space.stages.empty(), stages);
  at("mapping.partition", m.partition() != b.partition(), "--partitions", !space.partitions.empty(), c.mlp);
  for (int i = 0; i < m.overrides_size(); ++i) {  // the attention projections' partitioner
    const std::string o = "mapping.overrides[" + std::to_string(i) + "]";
    for (const std::string& path : {o, o + ".op", o + ".partition"})
      at(path, true, "--partitions", !space.partitions.empty(), c.attention);
  }
  at("mapping.placement", m.placement() != b.placement(), "--placements", !space.placements.empty(),
     c.placement);
  for (const char* path : {"mapping.span", "mapping.span_order"})
    at(path, m.span() != b.span() || m.span_order() != b.span_order(), "--spans", !space.spans.empty(),
       c.span);
  at("mapping.collective", m.collective() != b.collective(), "--collectives", !space.collectives.empty(),
     c.collective);
  at("mapping.weights", m.weights() != b.weights(), "--weights", !space.weights.empty(), c.weights);
  at("workload.batch", e->cfg.workload().batch() != base.cfg.workload().batch(), "--batch",
     !space.batch.empty(), std::to_string(c.batch));
  at("mapping.attention_dp", m.attention_dp() != b.attention_dp(), "--attention-dp",
     !space.attention_dp.empty(), std::to_string(c.attention_dp));
  const config::MoeMapping& bm = b.moe();
  const config::MoeMapping& mm = m.moe();
  at("mapping.moe.ep", mm.ep() != bm.ep(), "--ep", !space.ep.empty(), std::to_string(c.ep));
  at("mapping.moe.tp", mm.tp() != bm.tp() && c.moe_tp > 0, "--moe-tp", !space.moe_tp.empty(),
     std::to_string(c.moe_tp));
  at("mapping.moe.all_to_all", mm.all_to_all() != bm.all_to_all(), "--all-to-all", !space.all_to_all.empty(),
     c.all_to_all);
  at("mapping.moe.group_order", mm.group_order() != bm.group_order(), "--group-order",
     !space.group_order.empty(), c.group_order);
}

std::string PlacedCores(const sim::Experiment& base, const arch::Chip& chip, const Candidate& c) {
  std::ostringstream key;
  try {
    const mapping::StagePlacement sp =
        mapping::PlaceStages(chip, MappingOf(base.cfg.mapping(), c), static_cast<int>(c.stages),
                             mapping::StageRanks(MappingOf(base.cfg.mapping(), c)), mapping::PlacementFile{});
    for (size_t s = 0; s < sp.cores.size(); ++s) {
      key << "|";
      for (int core : sp.cores[s]) key << " " << core;
      if (s < sp.grids.size()) key << " g" << sp.grids[s].rows << "x" << sp.grids[s].cols;
    }
  } catch (const std::exception&) {
    return "";
  }
  return key.str();
}

std::string ProgramKey(const Candidate& c, const std::string& cores) {
  if (cores.empty()) return "";
  std::ostringstream key;
  key << detail::FieldsKey(c);
  if (c.tp > 1) key << " " << c.collective;
  // The rank grid reaches the Program only through the collectives (mapping/lower.cc
  // coll_grid), and of those only mesh_2d and the MoE all-to-alls read it: elsewhere (and
  // where a stage is one core) two placements that give the same cores lower the same
  // Program whatever their grids.
  const bool grid_read =
      c.ep != 0 || (c.collective == "mesh_2d" && uint64_t{c.tp} * std::max<uint32_t>(1, c.attention_dp) > 1);
  key << " " << (grid_read ? cores : detail::SplitGrids(cores).cores);
  return key.str();
}

std::string ProgramKey(const sim::Experiment& base, const arch::Chip& chip, const Candidate& c) {
  return ProgramKey(c, PlacedCores(base, chip, c));
}

namespace detail {

std::string FieldsKey(const Candidate& c) {
  std::ostringstream key;
  key << c.tp << " " << c.attention_dp << " " << c.ep << " " << c.moe_tp << " " << c.all_to_all << " "
      << c.group_order << " " << c.stages << " " << c.weights << " " << c.batch << " " << c.attention << " "
      << c.mlp;
  return key.str();
}

PlacedParts SplitGrids(const std::string& placed) {
  PlacedParts out;
  for (size_t i = 0; i < placed.size();) {
    const size_t g = placed.find(" g", i);
    if (g == std::string::npos) {
      out.cores += placed.substr(i);
      break;
    }
    out.cores += placed.substr(i, g - i);
    i = placed.find_first_of(" |", g + 2);
    out.grids += placed.substr(g, (i == std::string::npos ? placed.size() : i) - g);
    if (i == std::string::npos) break;
  }
  return out;
}

double EstimatedWork(const sim::Experiment& base, const arch::Chip& chip, const Candidate& c) {
  const mapping::ProgramEstimate est = mapping::EstimateProgram(
      chip, base.cfg.model(), WorkloadOf(base.cfg.workload(), c), MappingOf(base.cfg.mapping(), c));
  return std::isnan(est.tasks) ? 1.0 : std::clamp(est.tasks, 1.0, 1e30);
}

}  // namespace detail

uint32_t Replicas(const arch::Chip& chip, const Candidate& c) {
  const uint64_t group = uint64_t{c.tp} * std::max<uint32_t>(1, c.attention_dp) * c.stages;
  return group == 0 ? 0 : static_cast<uint32_t>(static_cast<uint64_t>(chip.num_cores()) / group);
}

}  // namespace tpsim::search
