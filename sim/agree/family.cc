#include "sim/agree/family.h"

#include <array>

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "configs/load.h"
#include "llm/model.h"
#include "mapping/collective/collective.h"
#include "mapping/mapping.h"
#include "mapping/placement/placement.h"

// The random family of `tpsim agree` (sim/agree/agree.h describes it): the chip, model,
// workload and mapping of experiment `index` of a seed.

namespace tpsim::sim::agree {

namespace {

// SplitMix64 (Steele, Lea, Flood 2014): a small, well-mixed stream, the same on
// every platform (std::uniform_int_distribution is not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int Int(int lo, int hi) { return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1)); }
  double LogUniform(double lo, double hi) { return lo * std::exp(Unit() * std::log(hi / lo)); }
  template <class T>
  const T& Pick(const std::vector<T>& v) {
    return v[Next() % v.size()];
  }

 private:
  uint64_t s_;
};

double Round3(double x) {
  // Three significant digits: readable configs that round-trip exactly through text.
  if (x <= 0) return x;
  const double scale = std::pow(10.0, 2 - std::floor(std::log10(x)));
  return std::round(x * scale) / scale;
}

std::string Node(const std::string& topo, int row, int col, int cols) {
  if (topo == "ring") return "n" + std::to_string(row * cols + col);
  if (topo == "switch") return "gpu" + std::to_string(row * cols + col);
  return "r" + std::to_string(row) + "c" + std::to_string(col);
}

// The chip of a draw.
void DrawChip(Rng& rng, config::Chip* c) {
  const std::string topo =
      rng.Pick(std::vector<std::string>{"mesh", "mesh", "torus", "ring", "wafer", "switch"});
  config::Noc* noc = c->mutable_noc();
  noc->set_topology(topo);
  int rows = 1, cols = 1;
  if (topo == "ring" || topo == "switch") {
    cols = rng.Pick(std::vector<int>{4, 8, 8, 16, 16, 32, 64});
    noc->set_nodes(cols);
    if (topo == "ring") noc->set_bidirectional(rng.Unit() < 0.7);
    if (topo == "switch") noc->set_switch_latency_ns(Round3(rng.LogUniform(20, 300)));
  } else {
    const std::vector<int> sides =
        topo == "wafer" ? std::vector<int>{4, 8, 8, 16, 16, 32} : std::vector<int>{2, 4, 4, 8, 8, 16, 32};
    do {
      rows = rng.Pick(sides);
      cols = rng.Pick(sides);
    } while (rows * cols < 4 || rows * cols > 1024);
    noc->set_rows(rows);
    noc->set_cols(cols);
    if (topo == "wafer") {
      const int die = rng.Pick(std::vector<int>{2, 4});
      noc->set_die_rows(std::min(die, rows));
      noc->set_die_cols(std::min(die, cols));
    }
  }
  const double link = Round3(rng.LogUniform(10, 1000));
  noc->set_link_bandwidth_gbps(link);
  noc->set_router_latency_cycles(rng.Int(1, 4));
  noc->set_link_latency_ns(Round3(rng.Unit() < 0.3 ? 0 : rng.LogUniform(0.1, 2)));
  if (topo == "wafer") {
    noc->set_d2d_bandwidth_gbps(Round3(link * rng.LogUniform(0.25, 1)));
    noc->set_d2d_latency_ns(Round3(rng.LogUniform(1, 10)));
  }
  c->set_name("agree-" + topo);
  c->set_clock_mhz(rng.Pick(std::vector<double>{250, 500, 800, 1000, 1000, 1500, 2000}));
  config::Core* core = c->mutable_core();
  const int array = rng.Pick(std::vector<int>{32, 64, 64, 128});
  core->set_systolic_rows(array);
  core->set_systolic_cols(array);
  core->set_systolic_arrays(rng.Int(1, 2));
  core->set_mac_dtype("bf16");
  core->set_matrix_utilization(Round3(0.5 + 0.45 * rng.Unit()));
  core->set_vector_lanes(rng.Pick(std::vector<int>{64, 128, 256, 512}));
  core->set_sram_bytes(static_cast<uint64_t>(std::round(rng.LogUniform(1, 256))) << 20);
  core->set_sram_bandwidth_gbps(Round3(rng.LogUniform(256, 4096)));
  config::Memory* m = c->add_memory();
  const bool hbm = rng.Unit() < 0.5;
  if (!hbm) {
    m->set_name("dram");
    m->set_kind("dram");
    m->set_per_core(true);
    m->set_bandwidth_gbps(Round3(rng.LogUniform(30, 200)));
    m->set_efficiency(Round3(0.6 + 0.3 * rng.Unit()));
    m->set_latency_ns(Round3(rng.LogUniform(40, 120)));
    m->set_capacity_bytes(0);  // not checked (agree.h)
    return;
  }
  // HBM3 stacks (819.2 GB/s, JEDEC HBM3 6.4 Gb/s x 1024 bits).
  auto stack = [&](const std::string& name, std::vector<std::string> attach) {
    config::Memory* s =
        c->memory_size() == 1 && c->memory(0).name().empty() ? c->mutable_memory(0) : c->add_memory();
    s->set_name(name);
    s->set_kind("hbm");
    for (auto& a : attach) s->add_attach(a);
    s->set_bandwidth_gbps(819.2);
    s->set_efficiency(0.85);
    s->set_latency_ns(100);
    s->set_capacity_bytes(0);  // not checked (agree.h)
  };
  const bool two = rng.Unit() < 0.5;
  if (topo == "ring" || topo == "switch") {
    const int stacks = std::min(cols / 2, rng.Pick(std::vector<int>{1, 2, 4}));
    for (int s = 0; s < stacks; ++s) {
      const int at = s * cols / stacks;
      std::vector<std::string> attach{Node(topo, 0, at, cols)};
      if (two) attach.push_back(Node(topo, 0, at + 1, cols));
      stack("hbm" + std::to_string(s), attach);
    }
    return;
  }
  const bool corners = rng.Unit() < 0.4;
  if (corners) {
    const int pairs[4][2] = {{0, 0}, {0, cols - 1}, {rows - 1, 0}, {rows - 1, cols - 1}};
    const int stacks = rng.Pick(std::vector<int>{2, 4});
    for (int s = 0; s < stacks; ++s) {
      const int r = pairs[s * (4 / stacks)][0], k = pairs[s * (4 / stacks)][1];
      std::vector<std::string> attach{Node(topo, r, k, cols)};
      if (two) attach.push_back(Node(topo, r == 0 ? 1 : r - 1, k, cols));
      stack("hbm_corner" + std::to_string(s), attach);
    }
    return;
  }
  // Edge midpoints: west and east, then north and south, one or two stacks per edge.
  const int edges = rng.Pick(std::vector<int>{2, 4});
  const int per_edge = rng.Int(1, 2);
  int id = 0;
  for (int e = 0; e < edges; ++e) {
    const bool vertical = e < 2;  // west / east edges run along rows
    const int len = vertical ? rows : cols;
    for (int k = 0; k < per_edge; ++k) {
      const int at = std::min(len - 2, (2 * k + 1) * len / (2 * per_edge));
      std::vector<std::string> attach;
      for (int j = 0; j < (two ? 2 : 1); ++j) {
        const int pos = std::max(0, at) + j;
        const int r = vertical ? pos : (e == 2 ? 0 : rows - 1);
        const int col = vertical ? (e == 0 ? 0 : cols - 1) : pos;
        attach.push_back(Node(topo, r, col, cols));
      }
      stack("hbm" + std::to_string(id++), attach);
    }
  }
}

config::Model CatalogModel(const std::string& name) {
  return llm::ImportHuggingFace(llm::CatalogPath(name, config::Location{}, "model_name"));
}

// Packet-hops of a Program on a chip: what the TLM engine's work grows with.
uint64_t PacketHops(const mapping::Program& p, const arch::Chip& chip) {
  std::map<std::pair<int, int>, int> hops;
  uint64_t sum = 0;
  for (const mapping::Task t : p.tasks()) {
    int h = 0;
    if (t.kind == mapping::TaskKind::kTransfer && t.core != t.dst_core) {
      auto [it, inserted] = hops.try_emplace({t.core, t.dst_core}, 0);
      if (inserted) it->second = chip.Hops(t.core, t.dst_core);
      h = it->second;
    } else if (t.kind == mapping::TaskKind::kMemory) {
      auto [it, inserted] = hops.try_emplace({-1 - t.channel, t.core}, 0);
      if (inserted) it->second = static_cast<int>(chip.MemoryPath(t.core, t.channel, t.write).size());
      h = it->second;
    }
    sum += (t.bytes + 4095) / 4096 * static_cast<uint64_t>(h);
  }
  return sum;
}

Experiment Resolve(const config::Experiment& cfg, const std::string& label) {
  Experiment e;
  e.path = label;
  e.cfg = cfg;
  *e.cfg.mutable_model() = CatalogModel(cfg.model_name());
  return e;
}

void DrawRest(Rng& rng, const arch::Chip& chip, Family family, config::Experiment* cfg) {
  const std::string model = rng.Pick(FamilyModels(family));
  cfg->set_model_name(model);
  const config::Model m = CatalogModel(model);
  config::Workload* w = cfg->mutable_workload();
  w->set_batch(rng.Pick(std::vector<int>{1, 1, 1, 2, 4}));
  w->set_seq_len(rng.Pick(std::vector<int>{16, 32, 64, 128, 256, 512, 1024}));
  w->set_decode_steps(rng.Int(1, 4));
  w->set_dtype("bf16");
  config::Mapping* mp = cfg->mutable_mapping();
  const int cores = chip.num_cores();
  std::vector<int> tps;
  for (int tp : {1, 2, 4, 8, 16, 32})
    if (tp <= cores) tps.push_back(tp);
  const int tp = rng.Pick(tps);
  std::vector<int> stages;
  for (int s : {1, 2, 4, 8})
    if (tp * s <= cores && static_cast<uint32_t>(s) <= m.num_layers()) stages.push_back(s);
  const int st = rng.Pick(stages);
  const int per_stage = rng.Int(1, std::max(1, 8 / st));
  w->set_num_layers(static_cast<uint32_t>(std::min<int>(st * per_stage, static_cast<int>(m.num_layers()))));
  mp->set_tp(tp);
  mp->set_pipeline_stages(st);
  mp->set_partition(rng.Pick(mapping::PartitionerNames()));
  // The placements of the family are fixed (the registered ones but file when the family was
  // made): a placement added later would change every draw after this one for every seed.
  static const std::vector<std::string> places = {"block",  "linear", "linear_interleave",
                                                  "random", "ring",   "snake"};
  mp->set_placement(rng.Pick(places));
  if (mp->placement() == "random") mp->set_seed(rng.Next() % 1000);
  mp->set_collective(rng.Pick(mapping::CollectiveNames()));
  if (mp->partition() == "mn_2d" && rng.Unit() < 0.5) mp->set_mn_2d_weights("k_steps");
  if (family == Family::kMoe) {  // drawn last: the dense draws above are the same either way
    std::vector<int> eps;
    for (int ep : {1, 2, 4, 8, 16, 32})
      if (tp % ep == 0 && m.num_experts() % static_cast<uint32_t>(ep) == 0) eps.push_back(ep);
    config::MoeMapping* moe = mp->mutable_moe();
    moe->set_ep(static_cast<uint32_t>(rng.Pick(eps)));
    if (rng.Unit() < 0.5) {
      moe->set_routing("zipf");
      moe->set_zipf_s(1.2);
    }
  }
}

}  // namespace

const std::vector<std::string>& FamilyModels(Family family) {
  static const std::array<std::vector<std::string>, 2> names = {
      std::vector<std::string>{"llama-3.1-70b", "llama-3.1-8b", "llama-3.2-1b", "llama-3.2-3b",
                               "mistral-7b-v0.3", "qwen3-0.6b", "qwen3-1.7b", "qwen3-14b", "qwen3-32b",
                               "qwen3-4b", "qwen3-8b"},
      std::vector<std::string>{"mixtral-8x7b", "qwen3-235b-a22b", "qwen3-30b-a3b"}};
  return names[family == Family::kMoe ? 1 : 0];
}

Case Draw(uint64_t seed, uint32_t index, Family family) {
  for (uint32_t attempt = 0; attempt < 1000; ++attempt) {
    Rng rng(seed * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(index) << 20) ^ attempt);
    rng.Next();
    config::Experiment cfg;
    cfg.set_name("agree-" + std::to_string(seed) + "-" + std::to_string(index));
    DrawChip(rng, cfg.mutable_chip());
    try {
      arch::Chip chip = arch::Chip::Build(cfg.chip());
      DrawRest(rng, chip, family, &cfg);
      Experiment e = Resolve(cfg, cfg.name());
      chip = ValidateExperiment(e);
      mapping::Program program = mapping::Lower(chip, e.cfg.model(), e.cfg.workload(), e.cfg.mapping());
      if (program.empty() || PacketHops(program, chip) > kMaxPacketHops) continue;
      return Case{Drawn{cfg, attempt}, std::move(e), std::move(chip), std::move(program)};
    } catch (const config::ConfigError&) {
      continue;
    } catch (const std::invalid_argument&) {
      continue;
    }
  }
  throw std::runtime_error("agree: no valid experiment for seed " + std::to_string(seed) + " index " +
                           std::to_string(index) + " in 1000 attempts");
}

Drawn RandomExperiment(uint64_t seed, uint32_t index, Family family) {
  return Draw(seed, index, family).drawn;
}

}  // namespace tpsim::sim::agree
