#include "sim/search/search.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <thread>

#include "configs/load.h"
#include "llm/opgraph.h"
#include "mapping/collective/collective.h"
#include "mapping/mapping.h"
#include "mapping/placement/placement.h"
#include "sim/energy.h"
#include "sim/sweep/runner.h"
#include "sim/sweep/spec.h"
#include "sim/sweep/store.h"

namespace tpsim::search {

const char* const kSearchUsage =
    R"(usage: tpsim search EXPERIMENT [options]

Searches mappings of the experiment's model and workload on its chip with the analytical
engine and prints the Pareto front (total latency, tokens/s per chip, energy per token when
the chip has an energy model, and TTFT / TPOT when the objective or an SLO uses them), the best candidate for the objective, and the top ones
confirmed with the TLM engine.

The space: TP x pipeline stages (powers of two, tp x stages <= cores), the partitioner of
the attention projections (qkv, o) and of the MLP (gate_up, down), placement (but file),
collective, weights location and batch. Each candidate is one replica on tp x stages cores;
the chip holds floor(cores / (tp x stages)) of them, which multiplies tokens/s per chip
(replicas are not simulated together). Candidates are visited in ascending lower bound of
the objective; one whose bounds an evaluated point already beats on every front column is
skipped (pruned): it cannot be on the front nor the best. Deterministic for any --jobs.

  --objective O        latency (default: total time), ttft, tpot, throughput (tokens/s
                       per chip), energy (per token; needs chip.energy)
  --slo-ttft-ms X      only candidates with TTFT (prefill) <= X ms count as feasible
  --slo-tpot-ms Y      only candidates with TPOT (mean decode step) <= Y ms
  --budget N           simulate at most N candidates (default 10000)
  --jobs J             worker threads (default: all cores)
  --confirm K          rerun the K best feasible candidates with the TLM engine (default 5,
                       0: none), one child process each
  --out FILE           write the best candidate as an experiment `tpsim run` accepts
  --db FILE            store every simulated candidate in SQLite (the `points` table of
                       sweeps); a rerun with the same file reuses them (resumable)
  --shard I/N          simulate only candidates whose index is I mod N (merge the shards'
                       databases with `tpsim sweep merge`, then rerun without --shard
                       on the merged file: stored points are reused)
  --no-prune           simulate every candidate (up to --budget): the exhaustive reference
  --top N              rows of the front to print (default 20; 0: all)
  --tp LIST            e.g. 4,8,16 (default: powers of two)
  --stages LIST        pipeline stages (default: powers of two up to the layers)
  --partitions LIST    partitioners for both op kinds (default: all registered)
  --placements LIST    (default: all but file)
  --collectives LIST   (default: all registered, nvls only on in-switch chips)
  --spans LIST         where a placement applies: stage (each stage's own region),
                       chip:stage_major, chip:tp_major (one order over the whole chip,
                       mapping.span); default: all three
  --weights LIST       auto, sram, dram (default: the experiment's)
  --batch LIST         batch sizes (default: the experiment's)
  --set FIELD=VALUE    override a field of the experiment first (as tpsim run)
  --model MODEL        catalog name or config.json (as tpsim run)
)";

namespace {

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<uint32_t> Powers(uint32_t max) {
  std::vector<uint32_t> out;
  for (uint32_t v = 1; v <= max && v != 0; v *= 2) out.push_back(v);
  return out;
}

uint32_t Layers(const sim::Experiment& e) {
  return e.cfg.workload().num_layers() ? e.cfg.workload().num_layers() : e.cfg.model().num_layers();
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
  std::vector<Candidate> out;
  for (uint32_t tp : tps)
    for (uint32_t st : stages) {
      if (uint64_t{tp} * st > cores || st > Layers(base)) continue;
      for (const auto& a : parts)
        for (const auto& m : parts)
          for (const auto& pl : places)
            for (const auto& sp : spans) {
              // One stage: both wafer-wide orders are the same placement.
              if (st == 1 && sp == "chip:tp_major" &&
                  std::find(spans.begin(), spans.end(), "chip:stage_major") != spans.end())
                continue;
              for (const auto& co : colls)
                for (const auto& w : weights)
                  for (uint32_t b : batches) out.push_back(Candidate{tp, st, b, a, m, pl, co, w, sp});
            }
    }
  return out;
}

sim::Experiment Apply(const sim::Experiment& base, const Candidate& c) {
  sim::Experiment e = base;
  config::Mapping* m = e.cfg.mutable_mapping();
  m->set_tp(c.tp);
  m->set_pipeline_stages(c.stages);
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
  m->set_partition(c.mlp);
  if (c.attention != c.mlp) {
    for (const char* op : {"qkv", "o"}) {
      config::PartitionOverride* o = m->add_overrides();
      o->set_op(op);
      o->set_partition(c.attention);
    }
  }
  e.cfg.mutable_workload()->set_batch(c.batch);
  std::ostringstream name;
  name << base.cfg.name() << " [search: tp=" << c.tp << " stages=" << c.stages << " attention=" << c.attention
       << " mlp=" << c.mlp << " placement=" << c.placement << " span=" << c.span
       << " collective=" << c.collective;
  if (!c.weights.empty()) name << " weights=" << c.weights;
  name << " batch=" << c.batch << "]";
  e.cfg.set_name(name.str());
  return e;
}

uint32_t Replicas(const arch::Chip& chip, const Candidate& c) {
  const uint64_t group = uint64_t{c.tp} * c.stages;
  return group == 0 ? 0 : static_cast<uint32_t>(static_cast<uint64_t>(chip.num_cores()) / group);
}

Bounds LowerBounds(const sim::Experiment& base, const arch::Chip& chip, const Candidate& c) {
  Bounds b;
  const config::Chip& cc = chip.config();
  const config::Model& model = base.cfg.model();
  if (cc.has_gpu() || model.num_experts() > 0) return b;
  const auto& core = cc.core();
  // MACs per picosecond of one core at 100%: R x C x arrays per cycle.
  const double cycle_ps = 1e6 / cc.clock_mhz();
  // (matrix_utilization above 1 would make the unit faster than its peak: taken into account.)
  const double macs_per_ps = std::max(1.0, core.matrix_utilization()) *
                             static_cast<double>(core.systolic_rows()) * core.systolic_cols() *
                             std::max<uint32_t>(1, core.systolic_arrays()) / cycle_ps;
  if (!(macs_per_ps > 0)) return b;
  llm::Phase ph;
  ph.batch = 1;
  ph.new_tokens = 1;
  ph.dtype_bytes = sim::DtypeBytes(base.cfg.workload().dtype());
  // Weight-GEMM parameters only (kGemm always runs on the matrix unit, mapping/cost.h);
  // norm weights are not MACs.
  double params = 0;
  for (const llm::Op& op : llm::BuildLayer(model, ph).ops)
    if (op.kind == llm::OpKind::kGemm) params += static_cast<double>(op.weight_bytes) / ph.dtype_bytes;
  const double layers = Layers(base);
  const config::Workload& wl = base.cfg.workload();
  // Every token of the phase meets every weight once per layer: tokens x params MACs,
  // spread at best evenly over the tp cores of the stage that runs the layer.
  auto phase = [&](double tokens) { return tokens * params * layers / (c.tp * macs_per_ps); };
  b.prefill_ps = phase(static_cast<double>(c.batch) * wl.seq_len());
  b.decode_step_ps = wl.decode_steps() > 0 ? phase(c.batch) : 0;
  b.total_ps = b.prefill_ps + b.decode_step_ps * wl.decode_steps();
  // Energy per token: at least the weight GEMMs' MACs at the chip's MAC energy (every
  // other term of sim/energy.h is >= 0), plus the weights read from DRAM below.
  const bool fp32 = wl.dtype() == "fp32";
  const double mac_pj = fp32 ? cc.energy().mac_fp32_pj() : cc.energy().mac_bf16_pj();
  const double tokens =
      static_cast<double>(c.batch) * (static_cast<double>(wl.seq_len()) + wl.decode_steps());
  double energy_j =
      (static_cast<double>(c.batch) * wl.seq_len() + static_cast<double>(c.batch) * wl.decode_steps()) *
      params * layers * mac_pj * 1e-12;
  // Weights the memory plan leaves in DRAM are read in every pass (the prefill and each
  // decode step): at least the model's weight bytes per pass, over all the chip's
  // channels at once (each channel serves its requests one after another at its
  // effective bandwidth, arch/chip.h).
  try {
    config::Mapping m = Apply(base, c).cfg.mapping();
    const mapping::WeightPlan plan = mapping::PlanWeights(chip, model, m, Layers(base), wl.dtype());
    double gbps = 0;
    for (const auto& ch : chip.channels()) gbps += ch.bandwidth_gbps;
    if (!plan.weights_in_sram && gbps > 0) {
      const double bytes = params * ph.dtype_bytes * layers * (1.0 + wl.decode_steps());
      b.total_ps = std::max(b.total_ps, bytes * 1000.0 / gbps);
      double pj_per_byte = std::numeric_limits<double>::infinity();  // the cheapest memory kind
      for (const auto& mem : cc.memory())
        pj_per_byte = std::min(pj_per_byte, mem.kind() == "hbm" ? cc.energy().hbm_pj_per_byte()
                                                                : cc.energy().dram_pj_per_byte());
      if (std::isfinite(pj_per_byte)) energy_j += bytes * pj_per_byte * 1e-12;
    }
  } catch (const std::exception&) {
    // An invalid mapping: the run reports it; no memory bound.
  }
  b.energy_per_token_j = cc.has_energy() && tokens > 0 ? energy_j / tokens : 0;
  return b;
}

std::vector<size_t> ParetoFront(const std::vector<std::vector<double>>& min_cols,
                                const std::vector<std::vector<double>>& max_cols) {
  const size_t n = !min_cols.empty() ? min_cols[0].size() : !max_cols.empty() ? max_cols[0].size() : 0;
  std::vector<size_t> front;
  for (size_t i = 0; i < n; ++i) {
    bool dominated = false;
    for (size_t j = 0; j < n && !dominated; ++j) {
      if (j == i) continue;
      bool no_worse = true, better = false;
      for (const auto& col : min_cols) {
        no_worse = no_worse && col[j] <= col[i];
        better = better || col[j] < col[i];
      }
      for (const auto& col : max_cols) {
        no_worse = no_worse && col[j] >= col[i];
        better = better || col[j] > col[i];
      }
      dominated = no_worse && better;
    }
    if (!dominated) front.push_back(i);
  }
  return front;
}

namespace {

struct Options {
  std::string path, model, out;
  std::vector<sim::Override> sets;
  uint32_t confirm = 5, top = 20;
  SearchOptions search;
};

// One candidate's state in a search.
struct Entry {
  Candidate c;
  Bounds lb;
  uint32_t replicas = 0;
  std::string status;  // "" (not visited), ok, invalid, error, pruned, skipped (budget / shard)
  std::string error;
  Point p;
  Point reach;  // Reachable(): the bounds as a point
};

double TokensPerSecond(const sim::Experiment& base, const Entry& x, double total_ps) {
  const double tokens = static_cast<double>(x.c.batch) * (static_cast<double>(base.cfg.workload().seq_len()) +
                                                          base.cfg.workload().decode_steps());
  return total_ps > 0 ? x.replicas * tokens / (total_ps * 1e-12) : 0;
}

// The front's columns for this search: total latency and tokens/s always, TTFT and
// TPOT where the objective or an SLO uses them.
struct Columns {
  bool ttft = false, tpot = false, energy = false;
};

// Energy per token joins the front when the chip has an energy model (chip.energy).
Columns FrontColumns(const SearchOptions& o, bool energy) {
  return Columns{o.objective == "ttft" || o.slo_ttft_ms > 0, o.objective == "tpot" || o.slo_tpot_ms > 0,
                 energy};
}

// The best point `x` could reach: its lower bounds as a Point (tokens/s an upper bound).
// A point that dominates it dominates every point `x` can give.
Point Reachable(const sim::Experiment& base, const Entry& x) {
  Point r;
  r.total_ms = x.lb.total_ps * 1e-9;
  r.ttft_ms = x.lb.prefill_ps * 1e-9;
  r.tpot_ms = x.lb.decode_step_ps * 1e-9;
  r.tokens_per_s =
      x.lb.total_ps > 0 ? TokensPerSecond(base, x, x.lb.total_ps) : std::numeric_limits<double>::infinity();
  r.energy_mj = x.lb.energy_per_token_j * 1e3;
  return r;
}

// a no worse than b on every front column and better on one.
bool Dominates(const Point& a, const Point& b, const Columns& cols) {
  bool no_worse = a.total_ms <= b.total_ms && a.tokens_per_s >= b.tokens_per_s;
  bool better = a.total_ms < b.total_ms || a.tokens_per_s > b.tokens_per_s;
  if (cols.ttft) {
    no_worse = no_worse && a.ttft_ms <= b.ttft_ms;
    better = better || a.ttft_ms < b.ttft_ms;
  }
  if (cols.tpot) {
    no_worse = no_worse && a.tpot_ms <= b.tpot_ms;
    better = better || a.tpot_ms < b.tpot_ms;
  }
  if (cols.energy) {
    no_worse = no_worse && a.energy_mj <= b.energy_mj;
    better = better || a.energy_mj < b.energy_mj;
  }
  return no_worse && better;
}

void AddToFront(const std::vector<Entry>& all, const Columns& cols, size_t k, std::vector<size_t>* front) {
  for (size_t f : *front)
    if (Dominates(all[f].p, all[k].p, cols)) return;
  std::erase_if(*front, [&](size_t f) { return Dominates(all[k].p, all[f].p, cols); });
  front->push_back(k);
}

bool Feasible(const SearchOptions& o, const Point& p) {
  return (o.slo_ttft_ms <= 0 || p.ttft_ms <= o.slo_ttft_ms) &&
         (o.slo_tpot_ms <= 0 || p.tpot_ms <= o.slo_tpot_ms);
}

// Smaller is better.
double ObjectiveValue(const SearchOptions& o, const Point& p) {
  if (o.objective == "ttft") return p.ttft_ms;
  if (o.objective == "tpot") return p.tpot_ms;
  if (o.objective == "throughput") return -p.tokens_per_s;
  if (o.objective == "energy") return p.energy_mj;
  return p.total_ms;
}

size_t MetricIndex(const std::string& name) {
  const auto& cols = sweep::MetricColumns();
  return static_cast<size_t>(std::find(cols.begin(), cols.end(), name) - cols.begin());
}

Point PointOf(const sim::Experiment& base, const Entry& x, const std::vector<double>& metrics) {
  auto at = [&](const char* name) {
    const size_t i = MetricIndex(name);
    return i < metrics.size() ? metrics[i] : std::nan("");
  };
  Point p;
  p.total_ms = at("total_ps") * 1e-9;
  p.ttft_ms = at("prefill_ps") * 1e-9;
  p.tpot_ms = at("decode_step_ps_mean") * 1e-9;
  p.tokens_per_s = TokensPerSecond(base, x, at("total_ps"));
  p.energy_mj = at("energy_per_token_j") * 1e3;  // NaN (NULL) where the chip has no energy model
  return p;
}

const std::vector<std::string>& StoreFields() {
  static const std::vector<std::string> k = {"mapping.tp",        "mapping.pipeline_stages",
                                             "search.attention",  "search.mlp",
                                             "mapping.placement", "mapping.collective",
                                             "mapping.weights",   "workload.batch",
                                             "search.replicas",   "search.span"};
  return k;
}

std::vector<std::string> FieldValues(const Entry& x) {
  return {std::to_string(x.c.tp),
          std::to_string(x.c.stages),
          x.c.attention,
          x.c.mlp,
          x.c.placement,
          x.c.collective,
          x.c.weights,
          std::to_string(x.c.batch),
          std::to_string(x.replicas),
          x.c.span};
}

// Rows already in the store: config hash -> (status, metrics in MetricColumns order, error).
struct Stored {
  std::string status, error;
  std::vector<double> metrics;
};

std::map<std::string, Stored> ReadStored(sqlite3* db) {
  std::map<std::string, Stored> out;
  std::string sql = "SELECT config_hash, status, error";
  for (const auto& m : sweep::MetricColumns()) sql += ", " + m;
  sql += " FROM points";
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    throw sweep::StoreError(std::string("reading stored points: ") + sqlite3_errmsg(db));
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    Stored s;
    auto text = [&](int i) {
      const unsigned char* t = sqlite3_column_text(st, i);
      return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
    };
    const std::string hash = text(0);
    s.status = text(1);
    s.error = text(2);
    for (size_t m = 0; m < sweep::MetricColumns().size(); ++m) {
      const int col = static_cast<int>(3 + m);
      s.metrics.push_back(sqlite3_column_type(st, col) == SQLITE_NULL ? std::nan("")
                                                                      : sqlite3_column_double(st, col));
    }
    out.emplace(hash, std::move(s));
  }
  sqlite3_finalize(st);
  return out;
}

std::string Ms(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// The placement column: "snake", or "snake@chip:tp_major" for a wafer-wide one.
std::string Placed(const Candidate& c) {
  return c.span.starts_with("chip") ? c.placement + "@" + c.span : c.placement;
}

std::string Describe(const Found& x) {
  std::ostringstream os;
  os << "tp " << x.c.tp << " x " << x.c.stages << " stages x " << x.replicas << " replicas, attention "
     << x.c.attention << ", mlp " << x.c.mlp << ", " << x.c.placement
     << (x.c.span.starts_with("chip") ? " over the chip (" + x.c.span.substr(5) + ")" : "") << ", "
     << x.c.collective;
  if (!x.c.weights.empty()) os << ", weights " << x.c.weights;
  os << ", batch " << x.c.batch;
  return os.str();
}

int Usage(const std::string& msg) {
  std::cerr << "tpsim search: " << msg << "\n\n" << kSearchUsage;
  return 2;
}

}  // namespace

SearchResult Search(const sim::Experiment& base, const arch::Chip& chip, const SearchOptions& o,
                    std::ostream* progress) {
  const int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const Columns cols = FrontColumns(o, sim::EnergyModelled(chip, base.cfg.workload().dtype()));
  if (o.objective == "energy" && !cols.energy)
    throw std::invalid_argument("--objective energy needs an energy model in the chip (chip.energy)");

  std::vector<Entry> all;
  for (const Candidate& c : Space(base, chip, o.space)) {
    Entry x;
    x.c = c;
    x.replicas = Replicas(chip, c);
    x.lb = LowerBounds(base, chip, c);
    x.reach = Reachable(base, x);
    all.push_back(std::move(x));
  }
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ObjectiveValue(o, all[a].reach) < ObjectiveValue(o, all[b].reach);
  });

  std::unique_ptr<sweep::Store> store;
  std::map<std::string, Stored> stored;
  if (!o.db.empty()) {
    store = std::make_unique<sweep::Store>(o.db, StoreFields(),
                                           sweep::HashText("tpsim search\n" + sim::ResolvedText(base)),
                                           "search " + base.cfg.name());
    stored = ReadStored(store->db());
  }

  const sweep::PointRunner run = sweep::InProcessRunner("analytical");
  const bool tty = progress == &std::cerr && isatty(2);
  const auto t0 = std::chrono::steady_clock::now();
  auto last_report = t0;
  uint64_t simulated = 0, reused = 0, pruned = 0;
  std::vector<size_t> evaluated;  // ok entries, in evaluation order
  std::vector<size_t> pfront;     // the front of `evaluated` (every point, feasible or not)
  const size_t chunk = static_cast<size_t>(std::max(8, 4 * jobs));
  size_t next = 0;
  while (next < order.size()) {
    // The next chunk: candidates not pruned by the points evaluated so far.
    std::vector<size_t> batch;
    while (next < order.size() && batch.size() < chunk) {
      Entry& x = all[order[next++]];
      if (order[next - 1] % o.shards != o.shard) {
        x.status = "skipped";
        continue;
      }
      if (simulated >= o.budget) {
        x.status = "skipped";
        continue;
      }
      // A point that dominates the bounds has a front point that does too.
      bool dominated = false;
      if (o.prune && x.lb.total_ps > 0) {
        for (size_t k : pfront) {
          if (Dominates(all[k].p, x.reach, cols)) {
            dominated = true;
            break;
          }
        }
      }
      if (dominated) {
        x.status = "pruned";
        ++pruned;
        continue;
      }
      ++simulated;
      batch.push_back(order[next - 1]);
    }
    if (batch.empty()) continue;
    std::vector<sim::Experiment> exps;
    std::vector<std::string> hashes;
    for (size_t k : batch) {
      exps.push_back(Apply(base, all[k].c));
      hashes.push_back(sweep::ConfigHash(exps.back()));
    }
    std::vector<sweep::PointOutcome> outs(batch.size());
    std::vector<double> wall(batch.size(), 0);
    std::atomic<size_t> cursor{0};
    auto worker = [&] {
      for (size_t i; (i = cursor.fetch_add(1)) < batch.size();) {
        auto s = stored.find(hashes[i]);
        if (s != stored.end() && (s->second.status == "ok" || s->second.status == "invalid")) {
          outs[i] = sweep::PointOutcome{s->second.status, s->second.metrics, s->second.error};
          wall[i] = -1;  // reused
          continue;
        }
        const auto w0 = std::chrono::steady_clock::now();
        outs[i] = run(exps[i], sweep::Point{batch[i], {}});
        wall[i] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
      }
    };
    std::vector<std::thread> pool;
    for (int j = 1; j < std::min<int>(jobs, static_cast<int>(batch.size())); ++j) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
    for (size_t i = 0; i < batch.size(); ++i) {
      Entry& x = all[batch[i]];
      x.status = outs[i].status;
      x.error = outs[i].error;
      if (x.status == "ok") {
        x.p = PointOf(base, x, outs[i].metrics);
        evaluated.push_back(batch[i]);
        AddToFront(all, cols, batch[i], &pfront);
      }
      if (wall[i] < 0) {
        ++reused;
        continue;
      }
      if (store) {
        sweep::Row row;
        row.config_hash = hashes[i];
        row.point_index = batch[i];
        row.status = outs[i].status;
        row.engine = "analytical";
        row.field_values = FieldValues(x);
        row.metrics = outs[i].metrics;
        row.wall_ms = wall[i];
        row.error = outs[i].error;
        row.config = sim::ResolvedText(exps[i]);
        store->Insert(row);
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (progress && (now - last_report > std::chrono::seconds(tty ? 1 : 10) || next == order.size())) {
      last_report = now;
      *progress << (tty ? "\r" : "") << "tpsim search: " << next << "/" << order.size() << " candidates, "
                << simulated << " simulated (" << reused << " from " << (o.db.empty() ? "-" : o.db) << "), "
                << pruned << " pruned, " << Ms(std::chrono::duration<double>(now - t0).count()) << " s"
                << (tty ? "   " : "\n") << std::flush;
    }
  }
  if (tty && progress) *progress << "\n";

  // The front over feasible points, sorted by total latency, then the best.
  std::vector<size_t> feasible;
  for (size_t k : evaluated)
    if (Feasible(o, all[k].p)) feasible.push_back(k);
  std::sort(feasible.begin(), feasible.end());
  std::vector<std::vector<double>> mins(1), maxs(1);
  if (cols.ttft) mins.emplace_back();
  if (cols.tpot) mins.emplace_back();
  if (cols.energy) mins.emplace_back();
  for (size_t k : feasible) {
    const Point& p = all[k].p;
    size_t c = 0;
    mins[c++].push_back(p.total_ms);
    if (cols.ttft) mins[c++].push_back(p.ttft_ms);
    if (cols.tpot) mins[c++].push_back(p.tpot_ms);
    if (cols.energy) mins[c++].push_back(p.energy_mj);
    maxs[0].push_back(p.tokens_per_s);
  }
  std::vector<size_t> front;
  for (size_t i : ParetoFront(mins, maxs)) front.push_back(feasible[i]);
  std::stable_sort(front.begin(), front.end(), [&](size_t a, size_t b) {
    if (all[a].p.total_ms != all[b].p.total_ms) return all[a].p.total_ms < all[b].p.total_ms;
    return a < b;
  });
  SearchResult res;
  res.candidates = all.size();
  res.simulated = simulated;
  res.reused = reused;
  res.pruned = pruned;
  for (const Entry& x : all) {
    res.invalid += x.status == "invalid";
    res.errors += x.status == "error";
    res.skipped += x.status == "skipped";
  }
  res.ok = evaluated.size();
  auto found = [&](size_t k) { return Found{all[k].c, all[k].replicas, all[k].p, k}; };
  for (size_t k : front) res.front.push_back(found(k));
  std::vector<size_t> ranked = feasible;
  std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
    const double va = ObjectiveValue(o, all[a].p), vb = ObjectiveValue(o, all[b].p);
    if (va != vb) return va < vb;
    return a < b;
  });
  for (size_t k : ranked) res.ranked.push_back(found(k));
  return res;
}

int SearchCommand(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kSearchUsage;
      return 0;
    }
    if (!a.starts_with("--")) {
      if (!o.path.empty()) return Usage("unexpected argument " + a + " (one experiment only)");
      o.path = a;
      continue;
    }
    if (a == "--no-prune") {
      o.search.prune = false;
      continue;
    }
    std::string flag = a, value;
    const size_t eq = a.find('=');
    if (eq != std::string::npos && !a.starts_with("--set")) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return Usage(a + " needs a value");
    }
    auto u32list = [&](std::vector<uint32_t>* out) {
      for (const auto& s : SplitList(value)) {
        const unsigned long v = std::stoul(s);
        if (v == 0 || v > 1u << 20) throw std::out_of_range(s);
        out->push_back(static_cast<uint32_t>(v));
      }
      if (out->empty()) throw std::invalid_argument(value);
    };
    try {
      if (flag == "--objective") {
        if (value != "latency" && value != "ttft" && value != "tpot" && value != "throughput" &&
            value != "energy")
          return Usage("--objective must be latency, ttft, tpot, throughput or energy, not '" + value + "'");
        o.search.objective = value;
      } else if (flag == "--slo-ttft-ms") {
        o.search.slo_ttft_ms = std::stod(value);
        if (!(o.search.slo_ttft_ms > 0) || !std::isfinite(o.search.slo_ttft_ms))
          return Usage("--slo-ttft-ms must be > 0");
      } else if (flag == "--slo-tpot-ms") {
        o.search.slo_tpot_ms = std::stod(value);
        if (!(o.search.slo_tpot_ms > 0) || !std::isfinite(o.search.slo_tpot_ms))
          return Usage("--slo-tpot-ms must be > 0");
      } else if (flag == "--budget") {
        o.search.budget = std::stoull(value);
        if (o.search.budget == 0) return Usage("--budget must be >= 1");
      } else if (flag == "--jobs") {
        o.search.jobs = std::stoi(value);
        if (o.search.jobs < 1 || o.search.jobs > 256) return Usage("--jobs must be 1 .. 256");
      } else if (flag == "--confirm") {
        o.confirm = static_cast<uint32_t>(std::stoul(value));
      } else if (flag == "--top") {
        o.top = static_cast<uint32_t>(std::stoul(value));
      } else if (flag == "--out") {
        o.out = value;
      } else if (flag == "--db") {
        o.search.db = value;
      } else if (flag == "--shard") {
        const size_t slash = value.find('/');
        if (slash == std::string::npos) return Usage("--shard needs I/N, e.g. 0/4");
        o.search.shard = static_cast<uint32_t>(std::stoul(value.substr(0, slash)));
        o.search.shards = static_cast<uint32_t>(std::stoul(value.substr(slash + 1)));
        if (o.search.shards == 0 || o.search.shard >= o.search.shards)
          return Usage("--shard I/N needs 0 <= I < N");
      } else if (flag == "--set") {
        o.sets.push_back(sim::ParseOverride(value));
      } else if (flag == "--model") {
        o.model = value;
      } else if (flag == "--tp") {
        u32list(&o.search.space.tp);
      } else if (flag == "--stages") {
        u32list(&o.search.space.stages);
      } else if (flag == "--batch") {
        u32list(&o.search.space.batch);
      } else if (flag == "--partitions") {
        o.search.space.partitions = SplitList(value);
      } else if (flag == "--placements") {
        o.search.space.placements = SplitList(value);
      } else if (flag == "--collectives") {
        o.search.space.collectives = SplitList(value);
      } else if (flag == "--spans") {
        o.search.space.spans = SplitList(value);
      } else if (flag == "--weights") {
        o.search.space.weights = SplitList(value);
      } else {
        return Usage("unknown option " + a);
      }
    } catch (const config::ConfigError& err) {
      for (const auto& d : err.diags()) std::cerr << d.str() << "\n";
      return 2;
    } catch (const std::logic_error&) {
      return Usage("bad value '" + value + "' for " + flag);
    }
  }
  if (o.path.empty()) return Usage("needs an experiment file");
  // Names in the lists must be registered (a typo would silently search nothing).
  auto known = [&](const std::vector<std::string>& given, const std::vector<std::string>& names,
                   const char* flag) -> std::string {
    for (const auto& g : given)
      if (std::find(names.begin(), names.end(), g) == names.end())
        return std::string(flag) + ": unknown '" + g + "'";
    return "";
  };
  for (const std::string& err :
       {known(o.search.space.partitions, mapping::PartitionerNames(), "--partitions"),
        known(o.search.space.placements, mapping::PlacementNames(), "--placements"),
        known(o.search.space.collectives, mapping::CollectiveNames(), "--collectives"),
        known(o.search.space.weights, {"auto", "sram", "dram"}, "--weights"),
        known(o.search.space.spans, {"stage", "chip:stage_major", "chip:tp_major"}, "--spans")}) {
    if (!err.empty()) return Usage(err);
  }
  if (std::find(o.search.space.placements.begin(), o.search.space.placements.end(), "file") !=
      o.search.space.placements.end())
    return Usage("--placements: file needs a placement file per candidate; not searched");

  sim::Experiment base;
  arch::Chip chip;
  try {
    base = sim::LoadExperiment(o.path, o.sets, o.model);
    // The chip, model and workload are checked with the plainest mapping (the base's own
    // mapping is replaced by every candidate's).
    sim::Experiment plain = base;
    config::Mapping* m = plain.cfg.mutable_mapping();
    m->set_tp(1);
    m->set_pipeline_stages(1);
    m->set_partition("n_split");
    m->set_placement("linear");
    m->set_collective("ring");
    m->clear_overrides();
    m->clear_grid_rows();
    m->clear_placement_file();
    chip = sim::ValidateExperiment(plain);
  } catch (const config::ConfigError& err) {
    for (const auto& d : err.diags()) std::cerr << d.str() << "\n";
    return 2;
  }
  if (base.cfg.workload().has_requests())
    return Usage("a request stream is served, not searched (tpsim serve)");
  SearchResult res;
  try {
    res = Search(base, chip, o.search, &std::cerr);
  } catch (const std::exception& err) {
    std::cerr << "tpsim search: " << err.what() << "\n";
    return 1;
  }
  const SearchOptions& so = o.search;
  const Columns cols = FrontColumns(so, sim::EnergyModelled(chip, base.cfg.workload().dtype()));
  std::cout << "tpsim search " << o.path << ": " << base.cfg.model().name() << " on "
            << base.cfg.chip().name() << ", objective " << so.objective;
  if (so.slo_ttft_ms > 0) std::cout << ", TTFT <= " << so.slo_ttft_ms << " ms";
  if (so.slo_tpot_ms > 0) std::cout << ", TPOT <= " << so.slo_tpot_ms << " ms";
  std::cout << "\n  " << res.candidates << " candidates: " << res.ok << " simulated ok, " << res.invalid
            << " invalid, " << res.errors << " errors, " << res.pruned << " pruned by bounds, " << res.skipped
            << " not visited (budget or shard); " << res.ranked.size() << " feasible\n\n";
  if (res.front.empty()) {
    std::cout << "no feasible candidate\n";
    return 1;
  }
  std::cout << "Pareto front (total latency, tokens/s per chip" << (cols.ttft ? ", TTFT" : "")
            << (cols.tpot ? ", TPOT" : "") << (cols.energy ? ", energy per token" : "") << "), "
            << res.front.size()
            << " points; candidates with equal metrics are counted in `ties`, the first shown:\n";
  std::printf("  %4s %5s %6s %8s %-15s %-15s %-28s %-19s %7s %5s %12s %10s %10s %12s %9s %5s\n", "#", "tp",
              "stages", "replicas", "attention", "mlp", "placement", "collective", "weights", "batch",
              "total_ms", "ttft_ms", "tpot_ms", "tokens/s", "mJ/token", "ties");
  size_t shown = 0;
  for (size_t r = 0; r < res.front.size(); ++r) {
    const Found& x = res.front[r];
    size_t ties = 1;
    while (r + ties < res.front.size() && res.front[r + ties].p.total_ms == x.p.total_ms &&
           res.front[r + ties].p.tokens_per_s == x.p.tokens_per_s &&
           res.front[r + ties].p.ttft_ms == x.p.ttft_ms && res.front[r + ties].p.tpot_ms == x.p.tpot_ms &&
           (std::isnan(x.p.energy_mj) || res.front[r + ties].p.energy_mj == x.p.energy_mj))
      ++ties;
    if (o.top == 0 || shown < o.top) {
      std::printf("  %4zu %5u %6u %8u %-15s %-15s %-28s %-19s %7s %5u %12s %10s %10s %12.1f %9.3f %5zu\n",
                  shown + 1, x.c.tp, x.c.stages, x.replicas, x.c.attention.c_str(), x.c.mlp.c_str(),
                  Placed(x.c).c_str(), x.c.collective.c_str(),
                  x.c.weights.empty() ? "-" : x.c.weights.c_str(), x.c.batch, Ms(x.p.total_ms).c_str(),
                  Ms(x.p.ttft_ms).c_str(), Ms(x.p.tpot_ms).c_str(), x.p.tokens_per_s, x.p.energy_mj, ties);
    }
    ++shown;
    r += ties - 1;
  }
  if (o.top > 0 && shown > o.top) std::cout << "  ... " << shown - o.top << " more (--top 0)\n";

  const Found& best = res.ranked[0];
  std::cout << "\nbest (" << so.objective << "): " << Describe(best) << "\n  total " << Ms(best.p.total_ms)
            << " ms, TTFT " << Ms(best.p.ttft_ms) << " ms, TPOT " << Ms(best.p.tpot_ms) << " ms, "
            << Ms(best.p.tokens_per_s) << " tokens/s per chip";
  if (cols.energy) std::cout << ", " << Ms(best.p.energy_mj) << " mJ/token";
  std::cout << "\n";
  if (!o.out.empty()) {
    std::ofstream out(o.out);
    out << "# tpsim search " << o.path << " --objective " << so.objective << ": the best candidate\n"
        << "# proto-file: configs/schema/experiment.proto\n# proto-message: tpsim.config.Experiment\n"
        << sim::ResolvedText(Apply(base, best.c));
    if (!out) {
      std::cerr << "tpsim search: cannot write " << o.out << "\n";
      return 1;
    }
    std::cout << "  written to " << o.out << " (tpsim run " << o.out << ")\n";
  }
  if (o.confirm > 0) {
    std::error_code ec;
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    const std::filesystem::path tmp =
        std::filesystem::temp_directory_path() / ("tpsim-search-" + std::to_string(getpid()));
    std::filesystem::create_directories(tmp, ec);
    const sweep::PointRunner tlm = sweep::ChildProcessRunner(exe, "tlm", 600, tmp.string());
    std::cout << "\nconfirmed with the TLM engine (the " << std::min<size_t>(o.confirm, res.ranked.size())
              << " best by " << so.objective << "; total time):\n";
    std::printf("  %4s %12s %12s %9s  %s\n", "#", "analytical", "tlm", "ratio", "candidate");
    for (size_t r = 0; r < res.ranked.size() && r < o.confirm; ++r) {
      const Found& x = res.ranked[r];
      const sweep::PointOutcome t = tlm(Apply(base, x.c), sweep::Point{x.index, {}});
      if (t.status != "ok") {
        std::printf("  %4zu %12s %12s %9s  %s (%s)\n", r + 1, Ms(x.p.total_ms).c_str(), t.status.c_str(), "-",
                    Describe(x).c_str(), t.error.c_str());
        continue;
      }
      const double tlm_ms = t.metrics[MetricIndex("total_ps")] * 1e-9;
      std::printf("  %4zu %12s %12s %9.3f  %s\n", r + 1, Ms(x.p.total_ms).c_str(), Ms(tlm_ms).c_str(),
                  x.p.total_ms / tlm_ms, Describe(x).c_str());
    }
    std::filesystem::remove_all(tmp, ec);
  }
  return 0;
}

}  // namespace tpsim::search
