#include "validate/microbench_plan.h"

#include <algorithm>
#include <set>

namespace tpsim::validate {

std::vector<int> SweepRanks(int devices) {
  std::vector<int> out;
  for (int r : {2, 4, 8}) {
    if (r <= devices) out.push_back(r);
  }
  return out;
}

std::vector<uint64_t> SweepSizes() {
  std::vector<uint64_t> out;
  for (uint64_t b = 8 << 10; b <= (uint64_t{1} << 30); b *= 2) out.push_back(b);
  return out;
}

std::vector<std::string> SweepOps() { return {"all_reduce", "all_gather", "reduce_scatter"}; }

std::vector<int> CollectiveSweepRanks(int devices, bool dry_run, int chip_gpus, const std::string& chip,
                                      std::string* note) {
  note->clear();
  if (chip_gpus < 2) return {};
  if (dry_run) return SweepRanks(chip_gpus);
  if (devices < 2) return {std::min(8, chip_gpus)};  // predictions only
  const std::vector<int> here = SweepRanks(devices);
  std::vector<int> out = SweepRanks(std::min(devices, chip_gpus));
  if (out.size() < here.size()) {
    *note = "this machine has " + std::to_string(devices) + " GPUs, chip " + chip + " has " +
            std::to_string(chip_gpus) + ": ranks";
    for (size_t i = out.size(); i < here.size(); ++i) *note += " " + std::to_string(here[i]);
    *note += " not swept (tpsim predicts no collective over more GPUs than the chip has)";
  }
  return out;
}

std::string GpuNodeWarning(const config::Chip& chip) {
  if (chip.has_gpu()) return "";
  return "chip " + chip.name() + " is not a GPU node (it has no `gpu` block; noc.topology \"" +
         chip.noc().topology() + "\"); its cores are mapped to GPUs anyway";
}

CollectiveRow MeasuredCollectiveRow(const std::string& op, int ranks, uint64_t bytes, double seconds) {
  CollectiveRow r;
  r.op = op;
  r.ranks = ranks;
  r.size_bytes = bytes;
  r.time_us = seconds * 1e6;
  r.algbw_gbps = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  const double n = ranks;
  const double factor = op == "all_reduce" ? 2 * (n - 1) / n : (n - 1) / n;
  r.busbw_gbps = r.algbw_gbps * factor;
  return r;
}

GemmRow MeasuredGemmRow(uint64_t m, uint64_t n, uint64_t k, const std::string& dtype, double seconds) {
  GemmRow g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.dtype = dtype;
  g.time_us = seconds * 1e6;
  g.tflops = seconds > 0 ? 2.0 * m * n * k / seconds / 1e12 : 0;
  return g;
}

std::vector<GemmShapeRow> DefaultGemmShapes() {
  struct Model {
    uint64_t hidden, intermediate, heads, kv_heads, head_dim;
  };
  // configs/models/llama-3.1-8b.json and llama-3.1-70b.json.
  const Model models[] = {{4096, 14336, 32, 8, 128}, {8192, 28672, 64, 8, 128}};
  std::vector<std::pair<uint64_t, uint64_t>> nk;
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (const Model& md : models) {
    for (uint64_t tp : {1, 2, 4, 8}) {
      const std::pair<uint64_t, uint64_t> shapes[] = {
          {(md.heads + 2 * md.kv_heads) * md.head_dim / tp, md.hidden},
          {md.hidden, md.heads * md.head_dim / tp},
          {2 * md.intermediate / tp, md.hidden},
          {md.hidden, md.intermediate / tp}};
      for (const auto& s : shapes) {
        if (s.first < 1024 || s.first > 28672 || s.second < 1024 || s.second > 28672) continue;
        if (seen.insert(s).second) nk.push_back(s);
      }
    }
  }
  std::vector<GemmShapeRow> out;
  for (const auto& [n, k] : nk) {
    for (uint64_t m = 1; m <= 8192; m *= 2) out.push_back({m, n, k, "bf16"});
  }
  return out;
}

std::string CollectiveCsvText(const std::vector<std::string>& provenance,
                              const std::vector<CollectiveRow>& rows) {
  std::string s;
  for (const auto& p : provenance) s += "# " + p + "\n";
  s += std::string(kCollectiveCsvHeader) + "\n";
  for (const auto& r : rows) s += CollectiveCsvLine(r) + "\n";
  return s;
}

std::string GemmCsvText(const std::vector<std::string>& provenance, const std::vector<GemmRow>& rows) {
  std::string s;
  for (const auto& p : provenance) s += "# " + p + "\n";
  s += std::string(kGemmCsvHeader) + "\n";
  for (const auto& r : rows) s += GemmCsvLine(r) + "\n";
  return s;
}

}  // namespace tpsim::validate
