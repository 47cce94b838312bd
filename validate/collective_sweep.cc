#include "validate/collective_sweep.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "validate/compare.h"
#include "validate/gpu_csv.h"

namespace tpsim::validate {
namespace {

std::string Fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// (kind, ranks) groups in first-seen order.
std::vector<std::pair<std::string, std::vector<const CollectiveSweepRow*>>> Groups(
    const std::vector<CollectiveSweepRow>& rows) {
  std::vector<std::pair<std::string, std::vector<const CollectiveSweepRow*>>> out;
  std::map<std::string, size_t> at;
  for (const auto& r : rows) {
    const std::string key = r.kind + ", " + std::to_string(r.ranks) + " ranks";
    auto [it, fresh] = at.emplace(key, out.size());
    if (fresh) out.push_back({key, {}});
    out[it->second].second.push_back(&r);
  }
  return out;
}

}  // namespace

std::string CollectiveSweepHeader() {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-15s %5s %12s %12s %10s %10s %5s %12s %10s %10s %12s %12s\n", "kind",
                "ranks", "bytes", "time_us", "algbw", "busbw", "algo", "pred_us", "pred_alg", "pred_bus",
                "ring_us", "nvls_us");
  return buf;
}

std::string CollectiveSweepLine(const CollectiveSweepRow& r) {
  const std::string t = r.measured ? Fixed2(r.time_us) : "-";
  const std::string alg = r.measured ? Fixed2(r.algbw_gbps) : "-";
  const std::string bus = r.measured ? Fixed2(r.busbw_gbps) : "-";
  const std::string nvls = r.predicted_nvls_us ? Fixed2(*r.predicted_nvls_us) : "-";
  char buf[320];
  std::snprintf(buf, sizeof buf, "%-15s %5d %12llu %12s %10s %10s %5s %12.2f %10.2f %10.2f %12.2f %12s\n",
                r.kind.c_str(), r.ranks, static_cast<unsigned long long>(r.bytes), t.c_str(), alg.c_str(),
                bus.c_str(), r.predicted_algorithm.c_str(), r.predicted_us, r.predicted_algbw_gbps,
                r.predicted_busbw_gbps, r.predicted_ring_us, nvls.c_str());
  return buf;
}

std::string CollectiveSweepJson(const std::vector<CollectiveSweepRow>& rows) {
  nlohmann::json js = nlohmann::json::array();
  for (const auto& r : rows) {
    js.push_back(
        {{"kind", r.kind},
         {"bytes", r.bytes},
         {"ranks", r.ranks},
         {"measured", r.measured},
         {"time_us", r.time_us},
         {"algbw_gbps", r.algbw_gbps},
         {"busbw_gbps", r.busbw_gbps},
         {"predicted_algorithm", r.predicted_algorithm},
         {"predicted_us", r.predicted_us},
         {"predicted_ring_us", r.predicted_ring_us},
         {"predicted_nvls_us", r.predicted_nvls_us ? nlohmann::json(*r.predicted_nvls_us) : nlohmann::json()},
         {"predicted_algbw_gbps", r.predicted_algbw_gbps},
         {"predicted_busbw_gbps", r.predicted_busbw_gbps}});
  }
  return js.dump(2) + "\n";
}

bool IsCollectiveSweepJson(const std::string& text) {
  const nlohmann::json js = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return js.is_array() && !js.empty() && js[0].is_object() && js[0].contains("kind") &&
         js[0].contains("bytes") && js[0].contains("predicted_us");
}

std::vector<CollectiveSweepRow> ParseCollectiveSweepJson(const std::string& text, const std::string& name) {
  const nlohmann::json js = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (js.is_discarded()) throw std::runtime_error(name + ": not JSON");
  if (!js.is_array())
    throw std::runtime_error(name + ": expected an array of rows (tpsim-validate --collectives --out)");
  std::vector<CollectiveSweepRow> rows;
  for (size_t i = 0; i < js.size(); ++i) {
    const auto& o = js[i];
    const std::string at = name + ": rows[" + std::to_string(i) + "]";
    if (!o.is_object()) throw std::runtime_error(at + ": not an object");
    auto need = [&](const char* f) -> const nlohmann::json& {
      if (!o.contains(f)) throw std::runtime_error(at + ": no field " + f);
      return o.at(f);
    };
    auto number = [&](const char* f) {
      const auto& v = need(f);
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
        throw std::runtime_error(at + "." + f + ": not a number >= 0");
      return v.get<double>();
    };
    auto text_of = [&](const char* f) {
      const auto& v = need(f);
      if (!v.is_string()) throw std::runtime_error(at + "." + f + ": not a string");
      return v.get<std::string>();
    };
    CollectiveSweepRow r;
    r.kind = text_of("kind");
    const double ranks = number("ranks"), bytes = number("bytes");
    if (ranks < 1 || ranks > 1e6 || ranks != std::floor(ranks))
      throw std::runtime_error(at + ".ranks: not a rank count");
    if (bytes < 1 || bytes > 1e18 || bytes != std::floor(bytes))
      throw std::runtime_error(at + ".bytes: not a size");
    r.ranks = static_cast<int>(ranks);
    r.bytes = static_cast<uint64_t>(bytes);
    const auto& m = need("measured");
    if (!m.is_boolean()) throw std::runtime_error(at + ".measured: not true or false");
    r.measured = m.get<bool>();
    r.time_us = number("time_us");
    r.algbw_gbps = number("algbw_gbps");
    r.busbw_gbps = number("busbw_gbps");
    r.predicted_algorithm = text_of("predicted_algorithm");
    r.predicted_us = number("predicted_us");
    r.predicted_algbw_gbps = number("predicted_algbw_gbps");
    r.predicted_busbw_gbps = number("predicted_busbw_gbps");
    r.predicted_ring_us = number("predicted_ring_us");
    if (o.contains("predicted_nvls_us") && !o.at("predicted_nvls_us").is_null())
      r.predicted_nvls_us = number("predicted_nvls_us");
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string CollectiveSweepSummary(const std::vector<CollectiveSweepRow>& rows) {
  std::string out;
  for (const auto& [key, group] : Groups(rows)) {
    size_t measured = 0;
    double sum = 0, worst = 0;
    uint64_t worst_bytes = 0;
    for (const auto* r : group) {
      if (!r->measured || r->busbw_gbps <= 0) continue;
      ++measured;
      const double err = (r->predicted_busbw_gbps - r->busbw_gbps) / r->busbw_gbps * 100;
      sum += std::fabs(err);
      if (std::fabs(err) > std::fabs(worst)) {
        worst = err;
        worst_bytes = r->bytes;
      }
    }
    char buf[256];
    if (measured == 0) {
      std::snprintf(buf, sizeof buf, "%s: %zu sizes, none measured (predictions only)\n", key.c_str(),
                    group.size());
    } else {
      std::snprintf(buf, sizeof buf,
                    "%s: %zu sizes, %zu measured, busbw MAPE %.2f %%, worst %+.1f %% at %llu B\n",
                    key.c_str(), group.size(), measured, sum / measured, worst,
                    static_cast<unsigned long long>(worst_bytes));
    }
    out += buf;
  }
  return out;
}

std::string CollectiveSweepPlotData(const std::vector<CollectiveSweepRow>& rows, const std::string& title) {
  nlohmann::json data;
  data["kind"] = "collective";
  data["title"] = title;
  data["tables"] = nlohmann::json::array();
  for (const auto& [key, group] : Groups(rows)) {
    nlohmann::json t;
    t["name"] = key;
    t["x"] = nlohmann::json::array();
    t["predicted_rate"] = nlohmann::json::array();
    t["predicted_us"] = nlohmann::json::array();
    t["measured_x"] = nlohmann::json::array();
    t["measured_rate"] = nlohmann::json::array();
    t["measured_us"] = nlohmann::json::array();
    nlohmann::json ring = nlohmann::json::array(), nvls_x = nlohmann::json::array(),
                   nvls = nlohmann::json::array();
    for (const auto* r : group) {
      t["x"].push_back(r->bytes);
      t["predicted_rate"].push_back(r->predicted_busbw_gbps);
      t["predicted_us"].push_back(r->predicted_us);
      ring.push_back(
          r->predicted_ring_us > 0 ? r->predicted_busbw_gbps * r->predicted_us / r->predicted_ring_us : 0.0);
      if (r->predicted_nvls_us && *r->predicted_nvls_us > 0) {
        nvls_x.push_back(r->bytes);
        nvls.push_back(r->predicted_busbw_gbps * r->predicted_us / *r->predicted_nvls_us);
      }
      if (r->measured) {
        t["measured_x"].push_back(r->bytes);
        t["measured_rate"].push_back(r->busbw_gbps);
        t["measured_us"].push_back(r->time_us);
      }
    }
    t["predicted_label"] = "predicted (tpsim's choice)";
    t["extra"] =
        nlohmann::json::array({{{"label", "predicted, ring forced"}, {"x", t["x"]}, {"rate", ring}}});
    if (!nvls.empty())
      t["extra"].push_back({{"label", "predicted, nvls forced"}, {"x", nvls_x}, {"rate", nvls}});
    data["tables"].push_back(std::move(t));
  }
  return data.dump(1);
}

int CompareCollectiveSweep(const std::string& path, const std::string& plot) {
  std::vector<CollectiveSweepRow> rows;
  try {
    rows = ParseCollectiveSweepJson(ReadTextFile(path), path);
  } catch (const std::exception& e) {
    std::cerr << "tpsim compare: " << e.what() << "\n";
    return 2;
  }
  std::cout << "# " << path << ": tpsim-validate --collectives rows; busbw in GB/s; '-': not measured\n"
            << CollectiveSweepHeader();
  for (const auto& r : rows) std::cout << CollectiveSweepLine(r);
  std::cout << CollectiveSweepSummary(rows);
  if (plot.empty()) return 0;
  std::string err;
  if (!RunPlotScript(PlotScriptBeside("plot_gpu.py"),
                     CollectiveSweepPlotData(rows, path + ": busbw over size"), plot, &err)) {
    std::cerr << "tpsim compare: --plot: " << err << "\n";
    return 1;
  }
  std::cout << "plot: " << plot << "\n";
  return 0;
}

}  // namespace tpsim::validate
