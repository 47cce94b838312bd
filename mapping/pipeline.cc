#include "mapping/pipeline.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <iterator>
#include <string_view>

#include "configs/files.h"
#include "mapping/layout_convert.h"
#include "mapping/memory_plan.h"

namespace tpsim::mapping {

int LayerStage(uint32_t l, int stages, uint32_t layers) {
  return static_cast<int>(uint64_t{l} * stages / layers);
}

uint32_t StageFirstLayer(int stage, int stages, uint32_t layers) {
  // The least l with l * stages / layers >= stage: ceil(stage * layers / stages).
  return static_cast<uint32_t>((uint64_t(stage) * layers + stages - 1) / stages);
}

int MostLayersPerStage(int stages, uint32_t layers) {
  uint32_t most = 0;
  for (int s = 0; s < stages; ++s)
    most = std::max(most, StageFirstLayer(s + 1, stages, layers) - StageFirstLayer(s, stages, layers));
  return static_cast<int>(most);
}

PlacementFile ReadPlacementFile(const config::Mapping& m) {
  PlacementFile f;
  if (m.placement() != "file" || m.placement_file().empty()) return f;
  std::ifstream in(m.placement_file(), std::ios::binary);
  if (!in) return f;
  f.readable = true;
  f.path = m.placement_file();
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Whitespace-separated integers, each located by line and column.
  int line = 1, col = 1;
  // A UTF-8 byte order mark (as editors on Windows save) is no token: it was refused as the first
  // id, invisibly ("﻿0: must hold ... core ids").
  size_t i = std::string_view(text).starts_with("\xEF\xBB\xBF") ? 3 : 0;
  while (i < text.size()) {
    if (text[i] == '\n') {
      ++line, col = 1, ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(text[i]))) {
      ++col, ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
    const std::string_view token(text.data() + i, end - i);
    // Digits only, as --tp reads a count ("+7" was taken, "--tp +4" refused).
    const std::string_view digits = token;
    int id = 0;
    const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
    if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size()) {
      f.bad = config::Location{m.placement_file(), line, col};
      f.bad_token = std::string(token);
      f.bad_range = ec == std::errc::result_out_of_range && p == digits.data() + digits.size();
      return f;
    }
    f.cores.push_back(id);
    f.line_col.emplace_back(line, col);
    col += static_cast<int>(end - i);
    i = end;
  }
  f.well_formed = true;
  return f;
}

int StageRanks(const config::Mapping& m) {
  return static_cast<int>(m.tp()) * std::max(1, static_cast<int>(m.attention_dp()));
}

StagePlacement PlaceStages(const arch::Chip& chip, const config::Mapping& m, int stages, int tp,
                           const PlacementFile& file) {
  StagePlacement out;
  if (m.span() == "chip") {
    // One order over the whole chip for every rank of every stage.
    PlacementRequest req;
    req.name = config::EffectivePlacement(m.placement());
    req.ranks = stages * tp;
    req.seed = m.seed();
    const std::vector<int> order = Place(req, chip);
    const bool tp_major = m.span_order() == "tp_major";
    for (int s = 0; s < stages; ++s) {
      std::vector<int> cores(tp);
      for (int r = 0; r < tp; ++r) cores[r] = order.at(tp_major ? r * stages + s : s * tp + r);
      out.cores.push_back(std::move(cores));
      out.grids.push_back(RankGrid{});  // no rectangle: mesh_2d uses its own grid of ranks
    }
    return out;
  }
  const std::vector<Region> regions = StageRegions(chip, stages, tp);
  for (int s = 0; s < stages; ++s) {
    PlacementRequest req;
    req.name = config::EffectivePlacement(m.placement());
    req.ranks = tp;
    req.region = regions.at(s);
    req.seed = m.seed() + static_cast<uint64_t>(s);
    // Stage s's ids from the file (tp per stage, in stage order); the whole list when it
    // is too short (Place then reports the count).
    if (file.cores.size() >= static_cast<size_t>((s + 1) * tp))
      req.file_cores.assign(file.cores.begin() + s * tp, file.cores.begin() + (s + 1) * tp);
    else
      req.file_cores = file.cores;
    try {
      out.cores.push_back(Place(req, chip));
    } catch (const PlacementFileError& e) {
      throw PlacementFileError(s * tp + e.rank, "stage " + std::to_string(s) + ": " + e.what());
    }
    const Region& reg = regions[s];
    out.grids.push_back(reg.rows * reg.cols == tp ? RankGrid{reg.rows, reg.cols} : RankGrid{});
  }
  return out;
}

int32_t StageSend(LowerContext& cx, LayoutConverter& conv, int32_t x, const std::vector<int>& to) {
  Layout out = (cx.t >= static_cast<uint64_t>(cx.p) && cx.p > 1) ? Layout::Rows() : Layout::Replicated();
  // mn_2d layouts gather no more than `out` needs: a grid within grid rows when those cover
  // the row split (the next stage then norms split rows, not whole grid rows redundantly).
  if (!cx.Satisfies(x, out) && IsGridKind(cx.ts[x].layout)) conv.Convert(x, out, "stage_send");
  if (!cx.Satisfies(x, out)) conv.Convert(x, Layout::Replicated(), "stage_send");
  uint64_t h = cx.model.hidden_size();
  cx.NewOp("stage_send", ToString(out));
  for (int r = 0; r < cx.p; ++r) cx.mem->Reload(x, r, nullptr);
  CollectiveInfo ci;
  ci.kind = CollectiveKind::kP2p;
  ci.algorithm = AlgorithmOf("direct");
  ci.bytes = cx.t * h * cx.d;
  ci.ranks = cx.p;
  ci.op = cx.cur_op;
  int32_t coll = static_cast<int32_t>(cx.prog.collectives.size());
  cx.prog.collectives.push_back(ci);
  FuncCollective fc;
  fc.buffer = cx.NewTensor(FuncTensorKind::kBuffer, 1, cx.t * h);
  int32_t y = cx.NewTensor(FuncTensorKind::kActivation, cx.t, h);
  std::vector<std::vector<TaskId>> landed(cx.p);
  for (int r = 0; r < cx.p; ++r) {
    Range rows = RowsOf(out, cx.t, cx.p, r);
    if (rows.size() == 0) continue;
    FuncSlice sx = Sl(x, rows, {0, h}), sy = Sl(y, rows, {0, h});
    if (cx.func) {
      fc.pack.push_back({cx.cores[r], sx, rows.lo * h, false});
      fc.unpack.push_back({to[r], sy, rows.lo * h, false});
    }
    Task tk;
    tk.kind = TaskKind::kTransfer;
    tk.core = CoreId(cx.cores[r]);
    tk.dst_core = CoreId(to[r]);
    tk.bytes = rows.size() * h * cx.d;
    tk.offset = rows.lo * h * cx.d;
    tk.dst_offset = tk.offset;
    tk.collective = coll;
    TaskId id = cx.AddTask(tk, cx.Ready(x, r));
    if (fc.first_task < 0) fc.first_task = id;
    fc.last_task = id;
    landed[r].push_back(id);
  }
  if (cx.func) cx.prog.func.collectives.push_back(std::move(fc));
  cx.ts[y].ready = landed;
  cx.ts[y].layout = out;
  cx.mem->Dead(x);  // the next stage's cores hold y; these cores are done with the layer output
  return y;
}

}  // namespace tpsim::mapping
