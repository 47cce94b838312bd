#include "sim/search/search.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "sim/energy.h"
#include "sim/search/detail.h"
#include "sim/sweep/runner.h"
#include "sim/sweep/spec.h"
#include "sim/sweep/store.h"

// The search loop: candidates in ascending bound, dominance pruning, the SQLite store,
// the Pareto front and the ranking.
namespace tpsim::search {

namespace detail {

// Energy per token joins the front when the chip has an energy model (chip.energy).
Columns FrontColumns(const SearchOptions& o, bool energy) {
  return Columns{o.objective == "ttft" || o.slo_ttft_ms > 0, o.objective == "tpot" || o.slo_tpot_ms > 0,
                 energy};
}

size_t MetricIndex(const std::string& name) {
  const auto& cols = sweep::MetricColumns();
  return static_cast<size_t>(std::find(cols.begin(), cols.end(), name) - cols.begin());
}

}  // namespace detail

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

using detail::Columns;
using detail::FrontColumns;
using detail::MetricIndex;
using detail::Ms;

// Energy per token in mJ as the front compares it: to 12 significant digits. It is a sum of
// per-task floats in task order, so two mappings that move the same bytes (a ring and a
// bidirectional ring) differed in the last bits (3e-16 relative) and both stayed on the front,
// the slower one kept by noise alone.
double EnergyKey(double joules_per_token) {
  if (!std::isfinite(joules_per_token)) return joules_per_token * 1e3;  // NaN: no energy model
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", joules_per_token * 1e3);
  return std::strtod(buf, nullptr);
}

// One candidate's state in a search.
struct Entry {
  Candidate c;
  Bounds lb;
  uint32_t replicas = 0;
  std::string status;  // "" (not visited), ok, invalid, error, pruned, skipped (budget / shard)
  std::string error;
  Point p;
  Point reach;      // Reachable(): the bounds as a point
  std::string key;  // ProgramKey ("" shares nothing)
  double cost = 1;  // EstimatedWork
};

// The tokens one replica's run makes: its prompts' and generated ones.
double RunTokens(const sim::Experiment& base, const Entry& x) {
  return static_cast<double>(x.c.batch) *
         (static_cast<double>(base.cfg.workload().seq_len()) + base.cfg.workload().decode_steps());
}

double TokensPerSecond(const sim::Experiment& base, const Entry& x, double total_ps) {
  return total_ps > 0 ? x.replicas * RunTokens(base, x) / (total_ps * 1e-12) : 0;
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
  r.energy_mj = EnergyKey(x.lb.energy_per_token_j);
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

// Smaller is better.
double ObjectiveValue(const SearchOptions& o, const Point& p) {
  if (o.objective == "ttft") return p.ttft_ms;
  if (o.objective == "tpot") return p.tpot_ms;
  if (o.objective == "throughput") return -p.tokens_per_s;
  if (o.objective == "energy") return p.energy_mj;
  return p.total_ms;
}

// A point whose objective has no value (a serving run where no request made a second token
// has no TPOT: NaN) is not ranked: NaN would break the sort's ordering.
bool Feasible(const SearchOptions& o, const Point& p) {
  return p.complete && !std::isnan(ObjectiveValue(o, p)) &&
         (o.slo_ttft_ms <= 0 || p.ttft_ms <= o.slo_ttft_ms) &&
         (o.slo_tpot_ms <= 0 || p.tpot_ms <= o.slo_tpot_ms);
}

// Energy per token of the chip running x.replicas replicas at once, as tokens/s per chip
// assumes. The candidate's run is one replica on the whole chip, charged the chip's static power
// (sim/energy.h StaticPowerW: every core and channel, `static_w`) over its makespan; replicas
// running together share it, each adding its own dynamic energy:
//   (R x dynamic + static) / (R x tokens) = energy_per_token - static x (1 - 1/R) / tokens.
// The run's static energy is static_w x total_ps (sim::FillEnergy's product, so also for points
// stored before the store kept static_energy_j).
double ChipEnergyPerToken(const sim::Experiment& base, const Entry& x, double energy_per_token_j,
                          double total_ps, double static_w) {
  const double tokens = RunTokens(base, x);
  if (x.replicas <= 1 || !(tokens > 0) || std::isnan(energy_per_token_j)) return energy_per_token_j;
  const double static_j = static_w * total_ps * 1e-12;
  return energy_per_token_j - static_j * (1.0 - 1.0 / x.replicas) / tokens;
}

Point PointOf(const sim::Experiment& base, const Entry& x, const std::vector<double>& metrics,
              double static_w) {
  auto at = [&](const char* name) {
    const size_t i = MetricIndex(name);
    return i < metrics.size() ? metrics[i] : std::nan("");
  };
  Point p;
  if (detail::Serving(base)) {
    p.total_ms = at("latency_p99_ms");
    p.ttft_ms = at("ttft_p99_ms");
    p.tpot_ms = at("tpot_p99_ms");
    p.tokens_per_s = at("tokens_per_s");
    p.energy_mj = std::nan("");
    p.complete = at("rejected") == 0;
    return p;
  }
  p.total_ms = at("total_ps") * 1e-9;
  p.ttft_ms = at("prefill_ps") * 1e-9;
  p.tpot_ms = at("decode_step_ps_mean") * 1e-9;
  p.tokens_per_s = TokensPerSecond(base, x, at("total_ps"));
  // NaN (NULL) where the chip has no energy model.
  p.energy_mj = EnergyKey(ChipEnergyPerToken(base, x, at("energy_per_token_j"), at("total_ps"), static_w));
  return p;
}

const std::vector<std::string>& StoreFields() {
  static const std::vector<std::string> k = {"mapping.tp",
                                             "mapping.pipeline_stages",
                                             "search.attention",
                                             "search.mlp",
                                             "mapping.placement",
                                             "mapping.collective",
                                             "mapping.weights",
                                             "workload.batch",
                                             "search.replicas",
                                             "search.span",
                                             "mapping.moe.ep",
                                             "mapping.moe.tp",
                                             "mapping.moe.all_to_all",
                                             "mapping.moe.group_order",
                                             "mapping.attention_dp"};
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
          x.c.span,
          std::to_string(x.c.ep),
          std::to_string(x.c.moe_tp),
          x.c.all_to_all,
          x.c.group_order,
          std::to_string(x.c.attention_dp)};
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

}  // namespace

SearchResult Search(const sim::Experiment& base, const arch::Chip& chip, const SearchOptions& o,
                    std::ostream* progress) {
  const int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool serving = detail::Serving(base);
  const Columns cols = FrontColumns(o, !serving && sim::EnergyModelled(chip, base.cfg.workload().dtype()));
  const double static_w = sim::StaticPowerW(chip);
  if (o.objective == "energy" && !cols.energy)
    throw std::invalid_argument(serving
                                    ? "--objective energy: a served request stream reports no energy"
                                    : "--objective energy needs an energy model in the chip (chip.energy)");

  // Bounds and placements are computed once per distinct input: the bounds depend on the
  // candidate's fields but its placement, span and collective, and on the shapes of the rank
  // grids the placement gives (a grid changes mn_2d's weights per core, so whether they fit
  // in SRAM); the cores on tp, stages, placement and span.
  std::vector<Entry> all;
  std::map<std::string, std::string> placed;
  std::map<std::string, Bounds> bounds;
  std::map<std::string, double> costs;
  for (const Candidate& c : Space(base, chip, o.space)) {
    Entry x;
    x.c = c;
    x.replicas = serving ? 1 : Replicas(chip, c);
    const std::string where = std::to_string(c.tp) + " " + std::to_string(c.attention_dp) + " " +
                              std::to_string(c.stages) + " " + c.placement + " " + c.span;
    auto pl = placed.find(where);
    if (pl == placed.end()) pl = placed.emplace(where, PlacedCores(base, chip, c)).first;
    // Of the placement, the weight plan sees only the rank grids' shapes (mn_2d's shards).
    const std::string what = detail::FieldsKey(c) + " " +
                             (pl->second.empty() ? "unplaced " + c.placement + " " + c.span
                                                 : detail::SplitGrids(pl->second).grids);
    auto lb = bounds.find(what);
    if (lb == bounds.end()) lb = bounds.emplace(what, LowerBounds(base, chip, c)).first;
    x.lb = lb->second;
    x.reach = Reachable(base, x);
    const std::string lowered = what + " " + c.collective;
    auto work = costs.find(lowered);
    if (work == costs.end()) work = costs.emplace(lowered, detail::EstimatedWork(base, chip, c)).first;
    x.cost = work->second;
    if (o.share) x.key = ProgramKey(c, pl->second);
    all.push_back(std::move(x));
  }
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Ascending bound; candidates with equal bounds (they differ in placement or collective,
  // which the bounds do not see) cheapest first.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double va = ObjectiveValue(o, all[a].reach), vb = ObjectiveValue(o, all[b].reach);
    if (va != vb) return va < vb;
    return all[a].cost < all[b].cost;
  });

  std::unique_ptr<sweep::Store> store;
  std::map<std::string, Stored> stored;
  // Stored rows with a NULL field column (written by a tpsim whose store had no such column,
  // e.g. mapping.attention_dp): a reuse fills them in.
  std::set<std::string> missing;
  if (!o.db.empty()) {
    store = std::make_unique<sweep::Store>(o.db, StoreFields(),
                                           sweep::HashText("tpsim search\n" + sim::ResolvedText(base)),
                                           std::string(sweep::kSearchWriterPrefix) + base.cfg.name());
    stored = ReadStored(store->db());
    for (const auto& r : store->Rows())
      if (r.missing_value) missing.insert(r.config_hash);
  }

  // No Program cache: its key holds the placement's name, so candidates never share an entry
  // (those that lower the same Program share through ProgramKey instead), and up to four
  // large Programs would stay in memory for nothing.
  const sweep::PointRunner run = sweep::InProcessRunner("analytical", sim::DefaultMaxMemory(), false);
  // A candidate's identity in the store is the sweep's (sweep::PointHash): its resolved text and
  // the contents of the files it reads beyond it (an MoE routing trace, a request trace), so a
  // candidate whose trace was edited is simulated again, not reused. Each file is hashed once.
  sweep::FileDigests digests;
  const bool tty = progress == &std::cerr && isatty(2);
  const auto t0 = std::chrono::steady_clock::now();
  auto last_report = t0;
  uint64_t simulated = 0, reused = 0, pruned = 0, shared = 0;
  std::vector<size_t> evaluated;  // ok entries, in evaluation order
  std::vector<size_t> pfront;     // the front of `evaluated` (every point, feasible or not)
  // The candidate that runs for each ProgramKey, and those waiting for it in the chunk.
  std::map<std::string, size_t> runs;
  std::vector<std::pair<size_t, size_t>> followers;  // (candidate, the one it copies)
  auto copy = [&](size_t to, size_t from) {
    Entry& x = all[to];
    const Entry& r = all[from];
    x.status = r.status;
    x.error = r.error;
    ++shared;
    if (x.status != "ok") return;
    x.p = r.p;  // same tp x stages: same replicas, same tokens/s
    evaluated.push_back(to);
    AddToFront(all, cols, to, &pfront);
  };
  // Two streams share the work: `order` (ascending bound: the most promising first) and
  // `cheap` (ascending estimated Program size, ties by bound). The next candidate comes from
  // the stream that has simulated less estimated work so far (the bound stream on a tie), so
  // each gets half of it: a search stopped early has tried both the best-bounded candidates
  // and as many cheap ones as that work buys. Only estimates and bounds decide the order.
  std::vector<size_t> cheap = order;
  std::stable_sort(cheap.begin(), cheap.end(), [&](size_t a, size_t b) { return all[a].cost < all[b].cost; });
  const std::vector<size_t>* streams[2] = {&order, &cheap};
  size_t pos[2] = {0, 0};
  double spent[2] = {0, 0};
  std::vector<char> seen(all.size(), 0);
  auto take = [&](int* from) -> std::optional<size_t> {
    int s = spent[1] < spent[0] ? 1 : 0;
    for (int tries = 0; tries < 2; ++tries, s ^= 1) {
      const std::vector<size_t>& v = *streams[s];
      while (pos[s] < v.size() && seen[v[pos[s]]]) ++pos[s];
      if (pos[s] < v.size()) {
        *from = s;
        seen[v[pos[s]]] = 1;
        return v[pos[s]++];
      }
    }
    return std::nullopt;
  };
  // A chunk holds at least `chunk` simulations and, so that the workers end it together,
  // estimated work of at least jobs x its largest candidate's (a chunk with one large
  // candidate also takes the cheap ones that balance it), at most kMaxChunk simulations.
  const size_t chunk = static_cast<size_t>(std::max(8, 4 * jobs));
  constexpr size_t kMaxChunk = 4096;
  size_t visited = 0;
  while (visited < all.size()) {
    // The next chunk: candidates not pruned by the points evaluated so far.
    std::vector<size_t> batch;
    double chunk_cost = 0, chunk_largest = 0;
    while (batch.size() < kMaxChunk && (batch.size() < chunk || chunk_cost < jobs * chunk_largest)) {
      int from = 0;
      const std::optional<size_t> k = take(&from);
      if (!k) break;
      ++visited;
      Entry& x = all[*k];
      if (*k % o.shards != o.shard) {
        x.status = "skipped";
        continue;
      }
      // Same Program as a candidate already run (or running in this chunk): its metrics.
      if (!x.key.empty()) {
        auto run = runs.find(x.key);
        if (run != runs.end()) {
          const std::string& st = all[run->second].status;
          if (st == "ok" || st == "invalid" || st == "error") {
            copy(*k, run->second);
            continue;
          }
          if (st == "running") {
            followers.emplace_back(*k, run->second);
            continue;
          }
        }
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
      batch.push_back(*k);
      spent[from] += x.cost;
      chunk_cost += x.cost;
      chunk_largest = std::max(chunk_largest, x.cost);
      x.status = "running";
      if (!x.key.empty()) runs[x.key] = *k;
    }
    if (batch.empty()) continue;
    std::vector<sim::Experiment> exps;
    std::vector<std::string> hashes;
    for (size_t k : batch) {
      exps.push_back(Apply(base, all[k].c));
      LocateCandidate(base, all[k].c, o.space, &exps.back());
      hashes.push_back(sweep::PointHash(exps.back(), &digests));
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
        x.p = PointOf(base, x, outs[i].metrics, static_w);
        evaluated.push_back(batch[i]);
        AddToFront(all, cols, batch[i], &pfront);
      }
      if (wall[i] < 0) {
        ++reused;
        if (store && missing.erase(hashes[i])) store->SetPoint(hashes[i], batch[i], FieldValues(x));
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
    for (const auto& [to, from] : followers) copy(to, from);
    followers.clear();
    const auto now = std::chrono::steady_clock::now();
    if (progress && (now - last_report > std::chrono::seconds(tty ? 1 : 10) || visited == all.size())) {
      last_report = now;
      *progress << (tty ? "\r" : "") << "tpsim search: " << visited << "/" << all.size() << " candidates, "
                << simulated << " simulated (" << reused << " from " << (o.db.empty() ? "-" : o.db) << "), "
                << shared << " shared, " << pruned << " pruned, "
                << Ms(std::chrono::duration<double>(now - t0).count()) << " s" << (tty ? "   " : "\n")
                << std::flush;
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
  res.shared = shared;
  std::map<std::string, std::pair<uint64_t, size_t>> why;  // message: (count, first index)
  for (size_t i = 0; i < all.size(); ++i) {
    const Entry& x = all[i];
    res.invalid += x.status == "invalid";
    res.errors += x.status == "error";
    res.skipped += x.status == "skipped";
    if (x.status == "invalid" || x.status == "error") why.try_emplace(x.error, 0, i).first->second.first++;
  }
  for (size_t k : evaluated)
    if (all[k].p.complete && std::isnan(ObjectiveValue(o, all[k].p)))
      why.try_emplace("its " + o.objective +
                          " has no value (no request completed, or for tpot none made a second token)",
                      0, k)
          .first->second.first++;
  std::vector<std::tuple<uint64_t, size_t, std::string>> by_count;
  for (const auto& [msg, ci] : why) by_count.emplace_back(ci.first, ci.second, msg);
  std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) {
    return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) > std::get<0>(b)
                                            : std::get<1>(a) < std::get<1>(b);
  });
  for (size_t k = 0; k < by_count.size() && k < SearchResult::kReasons; ++k)
    res.reasons.emplace_back(std::get<2>(by_count[k]), std::get<0>(by_count[k]));
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

}  // namespace tpsim::search
