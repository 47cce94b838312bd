#include "sim/experiment.h"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <filesystem>
#include <string_view>

#include "arch/topology/topology.h"
#include "configs/files.h"
#include "llm/model.h"
#include "mapping/mapping.h"
#include "sim/engine.h"
#include "sweep.pb.h"

namespace tpsim::sim {

using config::ConfigError;
using config::Diag;
using config::kCommandLine;
using config::Location;

namespace {

// Position (1-based line, col) of the first token of `text`, past blanks and # comments.
std::pair<int, int> FirstToken(const std::string& text) {
  int line = 1, col = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      if (i < text.size()) ++line, col = 1;
    } else if (c == '\n') {
      ++line, col = 1;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++col;
    } else {
      break;
    }
  }
  return {line, col};
}

// True when the first error of parsing `path` says it is no config at all: it is
// on the line of the file's first token, a syntax error or an unknown field, and suggests
// no field name. An error about the value of a field the config has is the config's own
// (a one-line JSON file has all its fields on the first token's line).
// protobuf's own JSON error comes after the JSON was read as this config's message type,
// so it is the config's too, though it is placed at 1:1.
bool IsNotAConfig(const Diag& d, const std::string& path, int first_line) {
  return d.where.file == path && d.where.line <= first_line &&
         (d.field == "<parse>" || d.rule.starts_with("unknown field")) &&
         d.rule.find("did you mean") == std::string::npos && !d.rule.starts_with("invalid JSON config");
}

// Parses `text` of the file `path` that `field` names into `out`. A file that fails
// at its very first token is not a config at all (a placement list, a trace, some
// other file): that is said at the reference, without quoting the file's content.
void ParseReferenced(const std::string& text, const std::string& path, const std::string& rel,
                     const std::string& field, const Location& anchor, google::protobuf::Message* out,
                     config::SourceMap* section) {
  try {
    config::ParseMessage(text, path, out, section);
  } catch (const ConfigError& err) {
    const auto [line, col] = FirstToken(text);
    const Diag& d = err.diags().front();
    if (IsNotAConfig(d, path, line)) {
      throw ConfigError(Diag{anchor, field, rel,
                             "is not a " + out->GetDescriptor()->name() + " config (" + path + ":" +
                                 std::to_string(line) + ":" + std::to_string(col) + " does not start one)"});
    }
    throw;
  }
}

// Parses the file named by `field` (relative to `dir`) into `out` and records its
// field locations under `prefix`.
void LoadSection(const std::string& dir, const std::string& rel, const std::string& field,
                 const std::string& prefix, const config::SourceMap& exp_locs, google::protobuf::Message* out,
                 config::SourceMap* locs, std::vector<std::string>* inputs) {
  Location anchor = exp_locs.Find(field);
  std::string path = config::JoinPath(dir, rel);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw ConfigError(Diag{anchor, field, rel, "file not found or not readable (looked for " + path + ")"});
  }
  std::string text = config::ReadFileOrThrow(path, anchor, field);
  inputs->push_back(path);
  config::SourceMap section(path);
  ParseReferenced(text, path, rel, field, anchor, out, &section);
  locs->Merge(prefix, section, Location{path, 1, 1});
}

bool LooksLikePath(const std::string& s) {
  std::error_code ec;
  return s.find('/') != std::string::npos || config::HasExtension(s, ".json") ||
         config::HasExtension(s, ".textproto") || std::filesystem::exists(s, ec);
}

void LoadModel(const std::string& source, bool is_path, const Location& where, const std::string& field,
               config::Model* out, config::SourceMap* locs, std::vector<std::string>* inputs) {
  std::string path = is_path ? source : llm::CatalogPath(source, where, field);
  // Refused here, at the reference, when it is not a readable regular UTF-8 file.
  const std::string text = config::ReadFileOrThrow(path, where, field);
  inputs->push_back(path);
  config::SourceMap section(path);
  try {
    *out = llm::LoadModelFile(path, &section);
  } catch (const ConfigError& err) {
    const auto [line, col] = FirstToken(text);
    const Diag& d = err.diags().front();
    if (IsNotAConfig(d, path, line)) {
      throw ConfigError(Diag{where, field, source,
                             "is not a model config or a HuggingFace config.json (" + path + ":" +
                                 std::to_string(line) + ":" + std::to_string(col) + " does not start one)"});
    }
    throw;
  }
  if (out->name().empty()) out->set_name(std::filesystem::path(path).stem().string());
  // A name taken from a file name that is not UTF-8 is shown escaped.
  if (!config::IsUtf8(out->name())) out->set_name(config::Clip(out->name(), 200));
  locs->Merge("model", section, Location{path, 1, 1});
}

}  // namespace

Override ParseOverride(const std::string& arg) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError(Diag{kCommandLine, "--set", arg, "expected FIELD=VALUE, e.g. mapping.tp=16"});
  }
  return Override{arg.substr(0, eq), arg.substr(eq + 1)};
}

config::Location CommandLineLocation(const std::string& arg) { return {"<command line: " + arg + ">", 1, 1}; }

bool SetOnCommandLine(const config::SourceMap& locs, const std::string& path) {
  return locs.Find(path).file.starts_with("<command line");
}

bool SetOnCommandLine(const Experiment& e, const std::string& path) { return SetOnCommandLine(e.locs, path); }

bool SetBySet(const Experiment& e, const std::string& path) {
  return e.locs.Find(path).file.starts_with("<command line: --set ");  // OverrideLocation's
}

bool GivenByCommandOrSweep(const Experiment& e, const std::string& path) {
  return SetOnCommandLine(e, path) || e.locs.Find(path).file.starts_with("<sweep point");
}

std::vector<std::string> SetTwice(const std::vector<Override>& sets) {
  std::vector<std::string> out;
  std::map<std::string, std::vector<std::string>> values;
  for (const Override& o : sets) values[o.path].push_back(config::Clip(o.value, 80));
  for (const auto& [path, v] : values)
    if (v.size() > 1)
      out.push_back("--set " + path + " is given " + std::to_string(v.size()) + " times ('" +
                    config::JoinNames(v, "', then '") + "'): the last is used");
  return out;
}

std::vector<std::string> IgnoredFields(const Experiment& e, bool served, const std::string& engine) {
  const config::Experiment& cfg = e.cfg;
  std::vector<std::string> out;
  // The TLM engine's network ports and router buffers (chip.proto): the analytical engine's
  // links are queues of whole flows, without either (--set chip.noc.port_bandwidth_gbps=1e-300
  // changed nothing there, silently).
  const std::string runs = !engine.empty() ? engine : !cfg.engine().empty() ? cfg.engine() : "analytical";
  if (runs != "tlm") {
    const config::Noc& noc = cfg.chip().noc();
    if (noc.port_bandwidth_gbps() != 0)
      out.push_back("chip.noc.port_bandwidth_gbps is ignored: engine " + runs +
                    " does not model the cores' network ports (engine tlm does)");
    if (noc.router_buffer_packets() != 0)
      out.push_back("chip.noc.router_buffer_packets is ignored: engine " + runs +
                    " does not model router buffers (engine tlm does)");
  }
  for (const std::string& f : arch::UnusedNocFields(cfg.chip()))
    out.push_back("chip.noc." + f + " is ignored: topology " + cfg.chip().noc().topology() +
                  " does not read it (it reads " +
                  std::string(arch::FindTopology(cfg.chip().noc().topology())->params()) + ")");
  for (const auto& [f, why] : arch::UnusedChipFields(cfg.chip()))
    out.push_back("chip." + f + " is ignored: " + why);
  // A GPU node times its kernels from chip.gpu (arch/gpu), keeps no memory task and runs its
  // collectives as NCCL kernels: the systolic core, the memories' rates and the in-switch model
  // are validated, never timed (--set chip.core.matrix_utilization=1e-6 printed the same run).
  // Said where a --set or a sweep axis gave one: the shipped GPU chips carry them.
  if (cfg.chip().has_gpu()) {
    auto unread = [&](const std::string& path, const char* why) {
      if (GivenByCommandOrSweep(e, path)) out.push_back(path + " is ignored: " + why);
    };
    const config::Chip& chip = cfg.chip();
    const google::protobuf::Descriptor* core = config::Core::descriptor();
    for (int i = 0; i < core->field_count(); ++i)
      unread("chip.core." + std::string(core->field(i)->name()),
             "a GPU node's kernels are timed from chip.gpu (its L2 is chip.gpu.l2_bytes); the core block is "
             "only validated");
    for (int i = 0; i < chip.memory_size(); ++i)
      for (const char* f : {"bandwidth_gbps", "efficiency", "latency_ns", "device.preset",
                            "device.command_bus", "device.refresh", "device.queue_depth"})
        unread(
            "chip.memory[" + std::to_string(i) + "]." + f,
            "a GPU node's HBM is timed inside its kernels (chip.gpu.hbm_bandwidth_gbps, hbm_efficiency); no "
            "memory task reads chip.memory's rate");
    const google::protobuf::Descriptor* coll = config::CollectiveModel::descriptor();
    for (int i = 0; i < coll->field_count(); ++i)
      unread("chip.collectives." + std::string(coll->field(i)->name()),
             "a GPU node's collectives are NCCL kernels (chip.gpu: nvls, nccl_*), not the in-switch model");
    if (chip.noc().router_latency_cycles() == 0)
      unread("chip.clock_mhz", "on a GPU node it times only noc.router_latency_cycles, which is 0 here");
  }
  for (const mapping::UnreadField& u : mapping::UnreadMappingFields(cfg.mapping(), cfg.chip(), cfg.model()))
    if (!(served && u.field == "mapping.serving")) out.push_back(u.field + " is ignored: " + u.why);
  // tpsim run with a stream beside the fixed batch (without one it stops at exit 2): it timed the
  // batch and said nothing of the stream.
  if (!served && cfg.workload().has_requests())
    out.push_back("workload.requests is ignored: tpsim run times the fixed batch (workload.batch " +
                  std::to_string(cfg.workload().batch()) + " x seq_len " +
                  std::to_string(cfg.workload().seq_len()) + "); tpsim serve serves the request stream");
  return out;
}

config::Location OverrideLocation(const Override& o) {
  return CommandLineLocation("--set " + config::Clip(o.path, 80) + "=" + config::Clip(o.value, 80));
}

void DeriveName(const std::string& model_override, const std::vector<Override>& sets,
                config::Experiment* cfg) {
  std::string changes;
  auto add = [&](const std::string& c) { changes += (changes.empty() ? "" : ", ") + c; };
  if (!model_override.empty()) add("model=" + cfg->model().name());
  bool named = false;
  for (const auto& s : sets) {
    if (s.path == "name") named = true;
    if (s.path == "name" || s.path == "description") continue;
    std::string_view path = s.path;
    for (std::string_view root : {"chip.", "model.", "workload.", "mapping."}) {
      if (path.starts_with(root)) path.remove_prefix(root.size());
    }
    add(std::string(path) + "=" + config::Clip(s.value, 40));
  }
  if (named || changes.empty()) return;
  cfg->set_name((cfg->name().empty() ? std::string("experiment") : cfg->name()) + " [" + changes + "]");
}

std::string RunTitle(const config::Experiment& cfg, const std::string& engine) {
  const auto& m = cfg.mapping();
  // An empty partition, placement or collective is named as what runs (it printed blanks).
  std::string title = cfg.model().name() + " on " + cfg.chip().name() + ": TP " + std::to_string(m.tp()) +
                      " x " + std::to_string(std::max<uint32_t>(1, m.pipeline_stages())) + " stage" +
                      (m.pipeline_stages() > 1 ? "s" : "") + ", " +
                      config::EffectivePartition(m.partition()) + ", " +
                      config::EffectivePlacement(m.placement()) + " placement, " +
                      config::EffectiveCollective(m.collective()) + " collective, " + engine + " engine";
  return title;
}

// A shipped experiment's name (configs/experiments/NAME.textproto) where `arg` is no path
// and no such file; else `arg`. A name that is neither is refused with the shipped names.
std::string ExperimentPath(const std::string& arg) {
  if (LooksLikePath(arg)) return arg;
  const std::string dir = config::JoinPath(config::ConfigDir(), "experiments");
  const std::string shipped = config::JoinPath(dir, arg + ".textproto");
  std::error_code ec;
  if (std::filesystem::is_regular_file(shipped, ec)) return shipped;
  const std::vector<std::string> names = config::ShippedNames("experiments", ".textproto");
  throw ConfigError(Diag{kCommandLine, "EXPERIMENT", config::Clip(arg),
                         "no such file, nor a shipped experiment (" +
                             config::ShippedList("experiments", ".textproto") + "; tpsim list experiment)" +
                             config::DidYouMean(arg, names)});
}

Experiment LoadExperiment(const std::string& arg, const std::vector<Override>& sets,
                          const std::string& model_override) {
  const std::string path = ExperimentPath(arg);
  Experiment e;
  e.path = path;
  e.locs = config::SourceMap(path);
  std::string text = config::ReadFileOrThrow(path, kCommandLine, "EXPERIMENT");
  e.inputs.push_back(path);
  config::SourceMap raw(path);
  try {
    config::ParseMessage(text, path, &e.cfg, &raw);
  } catch (const ConfigError& err) {
    // A chip, model or sweep file given as the experiment (`tpsim run chips/wafer-8x8.textproto`,
    // a sweep's base): it said "clock_mhz: : unknown field of Experiment". Named as what it is
    // where it parses as one; any other file keeps the parser's error.
    // A field of the file's top level that Experiment lacks (name and description are shared).
    const Diag& d = err.diags().front();
    if (d.where.file == path && d.rule.starts_with("unknown field of Experiment") &&
        d.field.find('.') == std::string::npos) {
      config::Chip chip;
      config::Sweep sweep;
      auto parses = [&](google::protobuf::Message* m) {
        try {
          config::SourceMap ignored(path);
          config::ParseMessage(text, path, m, &ignored);
          return true;
        } catch (const ConfigError&) {
          return false;
        }
      };
      std::string what;
      if (parses(&sweep) && !sweep.base().empty())
        what = "is a sweep, not an experiment: run it with tpsim sweep (its base is the experiment)";
      else if (parses(&chip))
        what = "is a chip config, not an experiment: an experiment names it with chip_file";
      else if ([&] {
                 try {  // a Model textproto or JSON, or a HuggingFace config.json
                   config::SourceMap ignored(path);
                   (void)llm::LoadModelFile(path, &ignored);
                   return true;
                 } catch (const std::exception&) {
                   return false;
                 }
               }())
        what =
            "is a model config, not an experiment: an experiment names it with model_file, or give it to "
            "--model";
      if (!what.empty()) throw ConfigError(Diag{kCommandLine, "EXPERIMENT", path, what});
    }
    throw;
  }
  e.locs.Merge("", raw, {});
  const std::string dir = config::DirName(path);
  auto& cfg = e.cfg;

  if (cfg.has_chip_file()) {
    config::Chip chip;
    LoadSection(dir, cfg.chip_file(), "chip_file", "chip", raw, &chip, &e.locs, &e.inputs);
    *cfg.mutable_chip() = std::move(chip);
  } else if (!cfg.has_chip()) {
    throw ConfigError(
        Diag{Location{path, 1, 1}, "chip", "", "an experiment needs chip_file or an inline chip"});
  }

  if (!model_override.empty()) {
    LoadModel(model_override, LooksLikePath(model_override), kCommandLine, "--model", cfg.mutable_model(),
              &e.locs, &e.inputs);
  } else if (cfg.has_model_file()) {
    config::Model m;
    LoadModel(config::JoinPath(dir, cfg.model_file()), true, raw.Find("model_file"), "model_file", &m,
              &e.locs, &e.inputs);
    *cfg.mutable_model() = std::move(m);
  } else if (cfg.has_model_name()) {
    config::Model m;
    LoadModel(cfg.model_name(), false, raw.Find("model_name"), "model_name", &m, &e.locs, &e.inputs);
    *cfg.mutable_model() = std::move(m);
  } else if (!cfg.has_model()) {
    throw ConfigError(Diag{Location{path, 1, 1}, "model", "",
                           "an experiment needs model_file, model_name or an inline model"});
  }

  if (cfg.has_workload_file()) {
    config::Workload w;
    LoadSection(dir, cfg.workload_file(), "workload_file", "workload", raw, &w, &e.locs, &e.inputs);
    *cfg.mutable_workload() = std::move(w);
  } else if (!cfg.has_workload()) {
    throw ConfigError(Diag{Location{path, 1, 1}, "workload", "",
                           "an experiment needs workload_file or an inline workload"});
  }

  if (cfg.has_mapping_file()) {
    config::Mapping m;
    LoadSection(dir, cfg.mapping_file(), "mapping_file", "mapping", raw, &m, &e.locs, &e.inputs);
    // A placement file (and a routing trace) named in the mapping file is relative to that file.
    if (!m.placement_file().empty())
      m.set_placement_file(config::JoinPath(config::DirName(e.inputs.back()), m.placement_file()));
    if (!m.moe().routing_file().empty())
      m.mutable_moe()->set_routing_file(
          config::JoinPath(config::DirName(e.inputs.back()), m.moe().routing_file()));
    *cfg.mutable_mapping() = std::move(m);
  } else if (cfg.has_mapping()) {
    // Like every other reference of the experiment: relative to its folder.
    if (!cfg.mapping().placement_file().empty())
      cfg.mutable_mapping()->set_placement_file(config::JoinPath(dir, cfg.mapping().placement_file()));
    if (!cfg.mapping().moe().routing_file().empty())
      cfg.mutable_mapping()->mutable_moe()->set_routing_file(
          config::JoinPath(dir, cfg.mapping().moe().routing_file()));
  } else {
    throw ConfigError(
        Diag{Location{path, 1, 1}, "mapping", "", "an experiment needs mapping_file or an inline mapping"});
  }
  // A request trace is relative to the experiment's folder, also when a workload file names it
  // (serving::LoadRequests). Absolute, not only joined: serving joins it with the folder of the
  // experiment it loads, so that the resolved experiment (a sweep's child process reads a
  // temporary copy of it; its stored config) names the same file from anywhere.
  if (cfg.workload().has_requests() && !cfg.workload().requests().trace_file().empty()) {
    std::error_code ec;
    const std::filesystem::path abs =
        std::filesystem::absolute(config::JoinPath(dir, cfg.workload().requests().trace_file()), ec);
    if (!ec) cfg.mutable_workload()->mutable_requests()->set_trace_file(abs.lexically_normal().string());
  }

  for (const auto& s : sets) {
    // Errors about an overridden field name the --set argument that set it.
    const Location where = OverrideLocation(s);
    static const char* kRoots[] = {"chip.", "model.", "workload.", "mapping."};
    bool ok = s.path == "name" || s.path == "description" || s.path == "engine";
    for (const char* r : kRoots) ok = ok || s.path.starts_with(r);
    if (!ok) {
      throw ConfigError(
          Diag{where, s.path, s.value,
               "--set reaches name, engine, and fields under chip., model., workload., mapping."});
    }
    config::SetScalarField(&cfg, s.path, s.value, where);
    e.locs.SetAppending(s.path, where);
  }
  // An unnamed experiment is called by its file's stem (min.textproto: "min"), so that the
  // result, the run's first line and the trace name it (they printed an empty name).
  if (cfg.name().empty()) cfg.set_name(std::filesystem::path(path).stem().string());
  DeriveName(model_override, sets, &cfg);
  return e;
}

uint32_t DtypeBytes(const std::string& dtype) {
  if (dtype.empty() || dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "fp32") return 4;
  return 0;
}

void ValidateWorkload(const Experiment& e, std::vector<Diag>* diags) {
  const auto& w = e.cfg.workload();
  auto add = [&](const std::string& f, const std::string& value, const std::string& rule) {
    std::string path = "workload." + f;
    diags->push_back(Diag{e.locs.Find(path), path, value, rule});
  };
  // A request stream (tpsim serve) sizes its own batches; a fixed batch needs both.
  if (!w.has_requests()) {
    if (w.batch() == 0) add("batch", "0", "must be positive");
    if (w.seq_len() == 0) add("seq_len", "0", "must be positive (prompt tokens processed in prefill)");
  }
  uint32_t model_layers = e.cfg.model().num_layers();
  if (w.num_layers() > model_layers) {
    add("num_layers", std::to_string(w.num_layers()),
        "exceeds the model's " + std::to_string(model_layers) + " layers");
  }
  if (DtypeBytes(w.dtype()) == 0) add("dtype", w.dtype(), "must be bf16, fp16 or fp32");
  uint64_t ctx = uint64_t{w.cached_prefix()} + w.seq_len() + w.decode_steps();
  uint32_t max_pos = e.cfg.model().max_position_embeddings();
  // The context rules are said at the summed field given on the command line (--set), the
  // largest of them where several were: the unchanged seq_len at its line in the file was
  // named when --set workload.cached_prefix made the context too long. Else at seq_len.
  std::string ctx_field = "seq_len";
  uint32_t ctx_value = w.seq_len();
  {
    bool from_command_line = false;
    for (const auto& [f, v] : {std::pair<const char*, uint32_t>{"seq_len", w.seq_len()},
                               {"cached_prefix", w.cached_prefix()},
                               {"decode_steps", w.decode_steps()}}) {
      if (!SetOnCommandLine(e, std::string("workload.") + f)) continue;
      if (!from_command_line || v > ctx_value) ctx_field = f, ctx_value = v;
      from_command_line = true;
    }
  }
  // Contexts are counted in 32 bits (mapping::Phase::cached): a decode step's past 2^32 - 1
  // wrapped to a few tokens and cost nothing, silently (with no max_position_embeddings).
  if (ctx > std::numeric_limits<uint32_t>::max()) {
    add(ctx_field, std::to_string(ctx_value),
        "cached_prefix + seq_len + decode_steps (" + std::to_string(ctx) +
            ") exceeds 4294967295 positions, the longest context tpsim times");
  } else if (max_pos > 0 && ctx > max_pos) {
    add(ctx_field, std::to_string(ctx_value),
        "cached_prefix + seq_len + decode_steps (" + std::to_string(ctx) +
            ") exceeds the model's max_position_embeddings (" + std::to_string(max_pos) + ")");
  }
  if (std::string rule = llm::SlidingWindowRule(e.cfg.model(), ctx); !rule.empty())
    add(ctx_field, std::to_string(ctx_value),
        "cached_prefix + seq_len + decode_steps (" + std::to_string(ctx) + ") " + rule);
}

std::vector<std::string> InputFiles(const Experiment& e) {
  std::vector<std::string> in = e.inputs;
  const config::Mapping& m = e.cfg.mapping();
  if (m.placement() == "file" && !m.placement_file().empty()) in.push_back(m.placement_file());
  if (!m.moe().routing_file().empty()) in.push_back(m.moe().routing_file());
  const config::Workload& w = e.cfg.workload();
  if (w.has_requests() && !w.requests().trace_file().empty())
    in.push_back(config::JoinPath(config::DirName(e.path), w.requests().trace_file()));
  return in;
}

void CheckPlacementFile(const Experiment& e) {
  const auto& m = e.cfg.mapping();
  if (m.placement() != "file" || m.placement_file().empty()) return;
  // Read here first: a FIFO, a device or a huge file is refused before the mapping reads it.
  config::ReadFileOrThrow(m.placement_file(), e.locs.Find("mapping.placement_file"),
                          "mapping.placement_file");
}

arch::Chip ValidateExperiment(const Experiment& e, bool memory_capacity) {
  std::vector<Diag> diags;
  config::CheckIntegerRanges(e.cfg, e.locs, "", &diags);
  if (!diags.empty()) throw ConfigError(std::move(diags));
  CheckPlacementFile(e);
  arch::ValidateChip(e.cfg.chip(), e.locs, "chip", &diags);
  llm::ValidateModel(e.cfg.model(), e.locs, "model", &diags);
  ValidateWorkload(e, &diags);
  const std::string& engine = e.cfg.engine();
  if (!engine.empty() && !MakeEngine(engine))
    diags.push_back(UnknownEngineDiag(e.locs.Find("engine"), "engine", engine));
  // The mapping is checked against the built chip, so only once the rest holds.
  if (!diags.empty()) throw ConfigError(std::move(diags));
  arch::Chip chip = arch::Chip::Build(e.cfg.chip(), e.locs);
  mapping::ValidateMapping(e.cfg.mapping(), chip, e.cfg.model(), e.cfg.workload(), e.locs, &diags);
  if (!diags.empty()) throw ConfigError(std::move(diags));
  if (memory_capacity)
    mapping::ValidateDramCapacity(e.cfg.mapping(), chip, e.cfg.model(), e.cfg.workload(), e.locs, &diags);
  if (!diags.empty()) throw ConfigError(std::move(diags));
  return chip;
}

std::string DefaultExperimentPath() { return config::ConfigDir() + "/experiments/default.textproto"; }

std::string ResolvedText(const Experiment& e) {
  std::string out;
  google::protobuf::TextFormat::PrintToString(e.cfg, &out);
  return out;
}

}  // namespace tpsim::sim
