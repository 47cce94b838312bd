#include "mapping/moe_routing.h"

#include "configs/files.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace tpsim::mapping {

namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Splits a CSV line into fields with their 1-based start columns.
std::vector<std::pair<std::string, int>> Fields(const std::string& line) {
  std::vector<std::pair<std::string, int>> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    std::string f = line.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t lead = f.find_first_not_of(" \t\r");
    const size_t end = f.find_last_not_of(" \t\r");
    const int col = static_cast<int>(start + (lead == std::string::npos ? 0 : lead)) + 1;
    f = lead == std::string::npos ? "" : f.substr(lead, end - lead + 1);
    out.emplace_back(f, col);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// A number in [0, 1e12] (tokens; the bound keeps every sum of a line finite), or false.
bool ParseCount(const std::string& s, double* v) {
  // Decimal only: strtod also reads hexadecimal ("0x10" was 16) and "infinity".
  if (s.empty() || s.find_first_not_of("0123456789.eE+-") != std::string::npos) return false;
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(x) || x < 0 || x > 1e12) return false;
  *v = x;
  return true;
}

}  // namespace

RoutingTrace ReadRoutingTrace(const std::string& path, uint32_t experts, const config::Location& referrer,
                              const std::string& field) {
  std::string text = config::ReadFileOrThrow(path, referrer, field);
  // A UTF-8 byte order mark (as spreadsheets save) is not part of the first line: it made a
  // first line of numbers read as a header, and "has no line for layer 0" followed.
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);
  RoutingTrace t;
  std::vector<config::Diag> diags;
  auto add = [&](int line, int col, const std::string& value, const std::string& rule) {
    if (diags.size() < 20)
      diags.push_back({config::Location{path, line, col}, field, config::Clip(value, 80), rule});
  };
  size_t pos = 0;
  int line_no = 0;
  bool first_data = true;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    const size_t lead = line.find_first_not_of(" \t\r");
    if (lead == std::string::npos || line[lead] == '#') continue;
    const auto fields = Fields(line);
    double layer = 0;
    if (first_data && !ParseCount(fields[0].first, &layer)) {
      first_data = false;  // a header line
      continue;
    }
    first_data = false;
    if (fields.size() != size_t{experts} + 1) {
      add(line_no, 1, line,
          "a routing trace line is the layer then tokens for each of the model's " + std::to_string(experts) +
              " experts (" + std::to_string(experts + 1) + " fields), this one has " +
              std::to_string(fields.size()));
      continue;
    }
    if (!ParseCount(fields[0].first, &layer) || layer != std::floor(layer) || layer > 1e9) {
      add(line_no, fields[0].second, fields[0].first, "the layer must be a non-negative integer");
      continue;
    }
    std::vector<double> counts(experts);
    bool ok = true;
    double sum = 0;
    for (uint32_t e = 0; e < experts; ++e) {
      const auto& [f, col] = fields[e + 1];
      if (!ParseCount(f, &counts[e])) {
        add(line_no, col, f, "tokens of expert " + std::to_string(e) + " must be a number in [0, 1e12]");
        ok = false;
        break;
      }
      sum += counts[e];
    }
    if (!ok) continue;
    if (!(sum > 0)) {
      add(line_no, 1, line, "a layer's tokens per expert must not all be 0");
      continue;
    }
    const uint32_t l = static_cast<uint32_t>(layer);
    if (!t.layers.emplace(l, std::move(counts)).second)
      add(line_no, fields[0].second, fields[0].first, "layer " + std::to_string(l) + " appears twice");
    else
      t.line[l] = line_no;
  }
  if (diags.empty() && t.layers.empty())
    add(1, 1, path, "a routing trace needs at least one line of tokens per expert");
  if (!diags.empty()) throw config::ConfigError(std::move(diags));
  return t;
}

bool ParseRoutingKind(const std::string& name, RoutingKind* kind) {
  if (name.empty() || name == "balanced") {
    *kind = RoutingKind::kBalanced;
  } else if (name == "zipf") {
    *kind = RoutingKind::kZipf;
  } else if (name == "trace") {
    *kind = RoutingKind::kTrace;
  } else {
    return false;
  }
  return true;
}

std::vector<uint64_t> BalancedCounts(uint64_t assignments, uint32_t experts) {
  std::vector<uint64_t> c(experts, experts ? assignments / experts : 0);
  if (experts == 0) return c;
  const uint64_t rem = assignments % experts;
  for (uint64_t e = 0; e < experts; ++e) c[e] += (e + 1) * rem / experts - e * rem / experts;
  return c;
}

std::vector<uint64_t> Apportion(uint64_t total, const std::vector<double>& weights, uint64_t cap) {
  const size_t n = weights.size();
  std::vector<uint64_t> out(n, 0);
  std::vector<bool> capped(n, false);
  uint64_t left = total;
  while (left > 0) {
    // Uncapped entries by weight; when only zero weights remain, evenly.
    std::vector<double> ew(n, 0);
    double wsum = 0;
    for (size_t i = 0; i < n; ++i)
      if (!capped[i]) ew[i] = weights[i], wsum += weights[i];
    if (!(wsum > 0)) {
      for (size_t i = 0; i < n; ++i)
        if (!capped[i]) ew[i] = 1, wsum += 1;
      if (!(wsum > 0)) break;
    }
    std::vector<uint64_t> add(n, 0);
    std::vector<std::pair<double, size_t>> rema;
    uint64_t given = 0;
    for (size_t i = 0; i < n; ++i) {
      if (capped[i]) continue;
      const double q = static_cast<double>(left) * ew[i] / wsum;
      add[i] = static_cast<uint64_t>(std::floor(q));
      given += add[i];
      rema.emplace_back(q - std::floor(q), i);
    }
    std::stable_sort(rema.begin(), rema.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    // The units left go to the largest remainders. Where they run out inside a run of equal
    // remainders (equal weights: a uniform routing trace), the k units are spread over that run
    // as BalancedCounts spreads a remainder (its j-th of m entries takes floor((j+1)k/m) -
    // floor(jk/m)): ties went to the lowest ids, so a uniform trace put a decode step's top-k
    // assignments on experts 0..k-1, one slot, where routing balanced spreads them.
    const uint64_t units = given < left ? std::min<uint64_t>(left - given, rema.size()) : 0;
    if (units > 0) {
      const double cut = rema[units - 1].first;
      size_t first = 0, end = 0;
      while (first < rema.size() && rema[first].first > cut) ++first;
      end = first;
      while (end < rema.size() && rema[end].first == cut) ++end;
      for (size_t j = 0; j < first; ++j) ++add[rema[j].second];
      const uint64_t k = units - first, m = end - first;
      for (uint64_t j = 0; j < m; ++j)
        if ((j + 1) * k / m - j * k / m == 1) ++add[rema[first + j].second];
      given += units;
    }
    // Floating-point floors can overshoot by a unit: take it back from the largest.
    while (given > left) {
      size_t big = 0;
      for (size_t i = 1; i < n; ++i)
        if (add[i] > add[big]) big = i;
      --add[big], --given;
    }
    uint64_t excess = 0;
    for (size_t i = 0; i < n; ++i) {
      if (capped[i]) continue;
      out[i] += add[i];
      if (out[i] >= cap) {
        excess += out[i] - cap;
        out[i] = cap;
        capped[i] = true;
      }
    }
    left = excess;
  }
  return out;
}

std::vector<double> ZipfWeights(uint32_t experts, double s) {
  std::vector<double> w(experts);
  for (uint32_t i = 0; i < experts; ++i) w[i] = 1.0 / std::pow(double(i) + 1.0, s);
  return w;
}

std::vector<uint32_t> HotOrder(uint32_t experts, uint64_t seed, uint32_t layer) {
  std::vector<uint32_t> order(experts);
  std::iota(order.begin(), order.end(), 0u);
  uint64_t state = seed ^ (0x5851f42d4c957f2dULL * (uint64_t{layer} + 1));
  for (uint32_t i = experts; i > 1; --i) {
    const uint32_t j = static_cast<uint32_t>(SplitMix64(&state) % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

uint64_t ExpertCapacity(double capacity_factor, uint64_t assignments, uint32_t experts) {
  if (!(capacity_factor > 0) || experts == 0) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(std::ceil(capacity_factor * static_cast<double>(assignments) / experts));
}

ExpertLoad RouteTokens(const Routing& r, uint32_t experts, uint32_t top_k, uint64_t tokens, uint32_t layer) {
  ExpertLoad load;
  const uint64_t assignments = tokens * top_k;
  switch (r.kind) {
    case RoutingKind::kBalanced:
      load.tokens = BalancedCounts(assignments, experts);
      break;
    case RoutingKind::kZipf: {
      const std::vector<uint64_t> by_rank = Apportion(assignments, ZipfWeights(experts, r.zipf_s), tokens);
      const std::vector<uint32_t> hot = HotOrder(experts, r.seed, layer);
      load.tokens.assign(experts, 0);
      for (uint32_t i = 0; i < experts; ++i) load.tokens[hot[i]] = by_rank[i];
      break;
    }
    case RoutingKind::kTrace: {
      if (r.trace == nullptr) throw std::invalid_argument("moe routing: trace routing without a trace");
      const auto it = r.trace->layers.find(layer);
      if (it == r.trace->layers.end())
        throw std::invalid_argument("moe routing: the routing trace has no line for layer " +
                                    std::to_string(layer));
      load.tokens = Apportion(assignments, it->second, tokens);
      break;
    }
  }
  const uint64_t cap = ExpertCapacity(r.capacity_factor, assignments, experts);
  for (uint64_t& n : load.tokens)
    if (n > cap) load.dropped += n - cap, n = cap;
  return load;
}

uint64_t ExpertPhase(uint64_t e, uint64_t experts, uint64_t tokens) {
  if (experts == 0) return 0;
  // a: round(0.618034 E), raised to the first value coprime with E, so that e -> a e mod E is
  // a permutation that puts consecutive experts far apart.
  uint64_t a = std::max<uint64_t>(1, (experts * 618034 + 500000) / 1000000);
  while (std::gcd(a, experts) != 1) ++a;
  const unsigned __int128 pi = (static_cast<unsigned __int128>(a) * e) % experts;
  return static_cast<uint64_t>(pi * tokens / experts);
}

std::vector<std::vector<uint64_t>> SplitBySource(const std::vector<uint64_t>& per_expert,
                                                 const std::vector<uint64_t>& tokens_per_source) {
  const uint64_t total = std::accumulate(tokens_per_source.begin(), tokens_per_source.end(), uint64_t{0});
  std::vector<std::vector<uint64_t>> out(tokens_per_source.size(),
                                         std::vector<uint64_t>(per_expert.size(), 0));
  if (total == 0) return out;
  for (size_t e = 0; e < per_expert.size(); ++e) {
    const unsigned __int128 n = per_expert[e], phase = ExpertPhase(e, per_expert.size(), total);
    uint64_t before = 0;
    for (size_t s = 0; s < tokens_per_source.size(); ++s) {
      const uint64_t after = before + tokens_per_source[s];
      out[s][e] = static_cast<uint64_t>((n * after + phase) / total - (n * before + phase) / total);
      before = after;
    }
  }
  return out;
}

std::vector<std::vector<uint32_t>> ExpertTokens(const std::vector<uint64_t>& per_expert, uint64_t tokens) {
  std::vector<std::vector<uint32_t>> out(per_expert.size());
  for (size_t e = 0; e < per_expert.size(); ++e) {
    const unsigned __int128 n = per_expert[e], phase = ExpertPhase(e, per_expert.size(), tokens);
    if (n > tokens) throw std::invalid_argument("moe routing: an expert has more assignments than tokens");
    for (uint64_t i = 0; i < tokens; ++i)
      if ((n * (i + 1) + phase) / tokens > (n * i + phase) / tokens)
        out[e].push_back(static_cast<uint32_t>(i));
  }
  return out;
}

MoeGroups MoeGroupsOf(const config::Mapping& m, const config::Model& model, int p) {
  MoeGroups g;
  g.p = std::max(1, p);
  g.ep = std::max(1, static_cast<int>(m.moe().ep()));
  g.tp = m.moe().tp() ? static_cast<int>(m.moe().tp()) : std::max(1, g.p / g.ep);
  g.experts = model.num_experts();
  g.ep_inner = m.moe().group_order() == "ep_inner";
  return g;
}

uint64_t MoeLayerWeightElems(const config::Model& model, const MoeGroups& g) {
  const uint64_t h = model.hidden_size(), im = model.moe_intermediate_size();
  return h * model.num_experts() + uint64_t{g.ExpertsPerSlot()} * 3 * h * (im / static_cast<uint64_t>(g.tp)) +
         3 * h * model.shared_expert_intermediate_size();
}

}  // namespace tpsim::mapping
