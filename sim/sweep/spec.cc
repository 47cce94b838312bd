#include "sim/sweep/spec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

#include <google/protobuf/text_format.h>

#include "configs/files.h"
#include "sim/engine.h"
#include "sim/sweep/slurm.h"

namespace tpsim::sweep {

using config::ConfigError;
using config::Diag;
using config::Location;

namespace {

// The same roots `tpsim run --set` accepts.
bool SettableRoot(const std::string& path) {
  static const char* kRoots[] = {"chip.", "model.", "workload.", "mapping."};
  if (path == "name" || path == "description") return true;
  for (const char* r : kRoots) {
    if (path.starts_with(r)) return true;
  }
  return false;
}

void Apply(sim::Experiment* e, const sim::Override& s, const Location& where) {
  if (!SettableRoot(s.path)) {
    // The engine is the sweep's own field: its points run in this process or in child processes
    // by engine (an engine axis ran every point on the sweep's engine, its values unread).
    throw ConfigError(Diag{
        where, s.path, s.value,
        s.path == "engine" ? "the engine is not swept: it is the sweep's engine field, one per sweep (run "
                             "a sweep per engine, each into its own --db)"
                           : "a swept field is name, description, or a field under chip., model., "
                             "workload., mapping."});
  }
  config::SetScalarField(&e->cfg, s.path, s.value, where);
  // As `run --set` records it: an element the base lacks (chip.memory[0].attach[0], a new
  // mapping.overrides[0]) is at the sweep point, not at the chip or base file line of its block.
  e->locs.SetAppending(s.path, where);
}

void CheckAxis(const SweepSpec& spec, const config::SweepAxis& axis, const std::string& at,
               std::set<std::string>* seen, std::vector<Diag>* diags) {
  if (axis.field().empty()) {
    diags->push_back(Diag{spec.locs.Find(at), at + ".field", "", "an axis needs a field"});
    return;
  }
  if (!seen->insert(axis.field()).second) {
    diags->push_back(
        Diag{spec.locs.Find(at + ".field"), at + ".field", axis.field(), "field is swept twice"});
  }
  if (axis.values().empty()) {
    diags->push_back(Diag{spec.locs.Find(at), at + ".values", "", "an axis needs at least one value"});
  }
  for (int i = 0; i < axis.values_size(); ++i) {
    std::string vpath = at + ".values[" + std::to_string(i) + "]";
    sim::Experiment copy = spec.base;
    try {
      Apply(&copy, sim::Override{axis.field(), axis.values(i)}, spec.locs.Find(vpath));
    } catch (const ConfigError& err) {
      for (const auto& d : err.diags()) diags->push_back(d);
      break;  // one report per axis is enough: the rest fail the same way
    }
  }
}

}  // namespace

SweepSpec LoadSweep(const std::string& path) {
  SweepSpec spec;
  spec.path = path;
  spec.locs = config::SourceMap(path);
  config::ParseFile(path, &spec.cfg, &spec.locs);
  const auto& cfg = spec.cfg;
  if (cfg.base().empty()) {
    throw ConfigError(Diag{Location{path, 1, 1}, "base", "", "a sweep needs a base experiment"});
  }
  spec.base_path = config::JoinPath(config::DirName(path), cfg.base());
  // Errors inside the base experiment name its own file and line.
  // A base that cannot be read is reported at the sweep's base field, not the command line.
  try {
    spec.base = sim::LoadExperiment(spec.base_path, {});
  } catch (const ConfigError& err) {
    std::vector<Diag> diags = err.diags();
    for (auto& d : diags) {
      if (d.where.file != config::kCommandLine.file || d.field != "EXPERIMENT") continue;
      d.where = spec.locs.Find("base");
      d.field = "base";
    }
    throw ConfigError(std::move(diags));
  }

  std::vector<Diag> diags;
  std::set<std::string> seen;
  for (int i = 0; i < cfg.axis_size(); ++i) {
    CheckAxis(spec, cfg.axis(i), "axis[" + std::to_string(i) + "]", &seen, &diags);
    spec.fields.push_back(cfg.axis(i).field());
    spec.dims.push_back(static_cast<size_t>(cfg.axis(i).values_size()));
  }
  for (int z = 0; z < cfg.zip_size(); ++z) {
    const auto& zip = cfg.zip(z);
    std::string at = "zip[" + std::to_string(z) + "]";
    if (zip.axis().empty()) {
      diags.push_back(Diag{spec.locs.Find(at), at + ".axis", "", "a zip needs at least one axis"});
      spec.dims.push_back(0);
      continue;
    }
    for (int i = 0; i < zip.axis_size(); ++i) {
      std::string aat = at + ".axis[" + std::to_string(i) + "]";
      CheckAxis(spec, zip.axis(i), aat, &seen, &diags);
      spec.fields.push_back(zip.axis(i).field());
      if (zip.axis(i).values_size() != zip.axis(0).values_size()) {
        diags.push_back(Diag{spec.locs.Find(aat), aat + ".values", std::to_string(zip.axis(i).values_size()),
                             "every axis of a zip needs the same number of values (the first has " +
                                 std::to_string(zip.axis(0).values_size()) + ")"});
      }
    }
    spec.dims.push_back(static_cast<size_t>(zip.axis(0).values_size()));
  }

  // Points are indexed in 64 bits (PointAt, --shard, the store): a product past 2^64 - 1 would
  // be run as its first 2^64 - 1 points and reported with that count.
  {
    uint64_t n = 1;
    for (size_t d = 0; d < spec.dims.size(); ++d) {
      if (spec.dims[d] == 0 || n <= std::numeric_limits<uint64_t>::max() / spec.dims[d]) {
        n *= spec.dims[d];
        continue;
      }
      const std::string at = d < static_cast<size_t>(cfg.axis_size())
                                 ? "axis[" + std::to_string(d) + "]"
                                 : "zip[" + std::to_string(d - static_cast<size_t>(cfg.axis_size())) + "]";
      diags.push_back(Diag{spec.locs.Find(at), at, std::to_string(spec.dims[d]) + " values",
                           "the axes and zips up to here multiply to more than 18446744073709551615 "
                           "points (2^64 - 1, the most a sweep indexes): fewer values, or zip axes"});
      break;
    }
  }
  spec.engine = !cfg.engine().empty() ? cfg.engine() : spec.base.cfg.engine();
  if (spec.engine.empty()) spec.engine = "analytical";
  if (!sim::MakeEngine(spec.engine)) {
    diags.push_back(sim::UnknownEngineDiag(spec.locs.Find("engine"), "engine", spec.engine));
  }
  if (cfg.time_limit_s() < 0 || !std::isfinite(cfg.time_limit_s())) {
    char as_written[32];  // -1, not -1.000000
    std::snprintf(as_written, sizeof as_written, "%.15g", cfg.time_limit_s());
    diags.push_back(Diag{spec.locs.Find("time_limit_s"), "time_limit_s", as_written,
                         "must be a non-negative number of seconds (0 = 600)"});
  }

  for (int i = 0; i < cfg.require_size(); ++i) {
    std::string at = "require[" + std::to_string(i) + "]";
    try {
      Expr e = Expr::Parse(cfg.require(i));
      for (const auto& f : e.Fields()) ReadField(spec.base.cfg, f);  // the field must exist
      // A field's type is the same at every point: a comparison of a string with a number (or a
      // string for a result) fails on the base as on each point, where it was stored as an
      // invalid row without the require's location.
      (void)e.Holds(spec.base.cfg);
      spec.require.push_back(std::move(e));
    } catch (const std::invalid_argument& err) {
      diags.push_back(Diag{spec.locs.Find(at), at, cfg.require(i), err.what()});
    }
  }
  if (!diags.empty()) throw ConfigError(std::move(diags));
  return spec;
}

uint64_t PointCount(const SweepSpec& spec) {
  uint64_t n = 1;
  for (size_t d : spec.dims) {
    if (d == 0) return 0;
    if (n > std::numeric_limits<uint64_t>::max() / d) return std::numeric_limits<uint64_t>::max();
    n *= d;
  }
  return n;
}

Point PointAt(const SweepSpec& spec, uint64_t index) {
  Point p;
  p.index = index;
  std::vector<size_t> pick(spec.dims.size());
  uint64_t rest = index;
  for (size_t d = spec.dims.size(); d-- > 0;) {
    pick[d] = static_cast<size_t>(rest % spec.dims[d]);
    rest /= spec.dims[d];
  }
  const auto& cfg = spec.cfg;
  size_t d = 0;
  for (int i = 0; i < cfg.axis_size(); ++i, ++d) {
    p.sets.push_back(sim::Override{cfg.axis(i).field(), cfg.axis(i).values(static_cast<int>(pick[d]))});
  }
  for (int z = 0; z < cfg.zip_size(); ++z, ++d) {
    for (const auto& axis : cfg.zip(z).axis()) {
      p.sets.push_back(sim::Override{axis.field(), axis.values(static_cast<int>(pick[d]))});
    }
  }
  return p;
}

sim::Experiment MakeExperiment(const SweepSpec& spec, const Point& point) {
  sim::Experiment e = spec.base;
  for (const auto& s : point.sets) {
    Apply(
        &e, s,
        Location{"<sweep point " + std::to_string(point.index) + ": " + s.path + "=" + s.value + ">", 1, 1});
  }
  e.cfg.set_engine(spec.engine);
  // A request trace an axis names is relative to the base experiment's folder, as serving
  // reads it; absolute, as sim::LoadExperiment makes the base's own, so that the point's
  // resolved text (a child process's temporary copy, the stored config) names the same file.
  if (e.cfg.workload().has_requests()) {
    const std::string& trace = e.cfg.workload().requests().trace_file();
    if (!trace.empty() && !std::filesystem::path(trace).is_absolute())
      e.cfg.mutable_workload()->mutable_requests()->set_trace_file(
          Absolute(config::JoinPath(config::DirName(e.path), trace)));
  }
  return e;
}

bool PassesFilter(const SweepSpec& spec, const sim::Experiment& e, std::string* undefined) {
  for (size_t i = 0; i < spec.require.size(); ++i) {
    const std::string at = "require[" + std::to_string(i) + "]";
    bool nan = false;
    try {
      if (spec.require[i].Holds(e.cfg, &nan)) continue;
    } catch (const std::invalid_argument& err) {
      throw ConfigError(Diag{spec.locs.Find(at), at, spec.cfg.require(static_cast<int>(i)), err.what()});
    }
    if (nan && undefined) {
      const Location where = spec.locs.Find(at);
      *undefined =
          where.file + ":" + std::to_string(where.line) + ":" + std::to_string(where.col) + ": " + at +
          " \"" + spec.cfg.require(static_cast<int>(i)) +
          "\" divides by zero (a division or remainder by 0 is not a number): the point did not pass";
    }
    return false;
  }
  return true;
}

std::string HashText(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  static const char* kHex = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<size_t>(i)] = kHex[h & 15];
  return out;
}

std::string ConfigHash(const sim::Experiment& e) { return HashText(sim::ResolvedText(e)); }

std::string PointHash(const sim::Experiment& e, FileDigests* digests) {
  const std::string text = sim::ResolvedText(e);
  std::vector<std::string> files = sim::InputFiles(e);
  // The experiment, chip, model, workload and mapping files come first: the text holds them.
  files.erase(files.begin(),
              files.begin() + static_cast<std::ptrdiff_t>(std::min(e.inputs.size(), files.size())));
  if (files.empty()) return HashText(text);  // the identity stores written before kept
  auto digest = [](const std::string& path) -> std::string {
    // Not a FIFO (opening one blocks) or a device: the run refuses those itself.
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return "not a regular file";
    std::ifstream in(path, std::ios::binary);
    if (!in) return "unreadable";
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return "unreadable";
    return HashText(ss.str());
  };
  std::string key = text + "\n--- referenced files ---\n";
  for (const std::string& f : files) {
    std::string d;
    if (digests) {
      auto it = digests->find(f);
      if (it == digests->end()) it = digests->emplace(f, digest(f)).first;
      d = it->second;
    } else {
      d = digest(f);
    }
    key += f + "\n" + d + "\n";
  }
  return HashText(key);
}

std::string SweepIdentity(const SweepSpec& spec) {
  config::Sweep shape = spec.cfg;
  shape.clear_name();
  shape.clear_description();
  shape.clear_base();
  shape.clear_time_limit_s();
  shape.set_engine(spec.engine);
  std::string text;
  google::protobuf::TextFormat::PrintToString(shape, &text);
  return HashText(sim::ResolvedText(spec.base) + "\n--- sweep ---\n" + text);
}

bool InShard(uint64_t index, uint32_t shard, uint32_t shards) {
  return shards <= 1 || index % shards == shard;
}

}  // namespace tpsim::sweep
