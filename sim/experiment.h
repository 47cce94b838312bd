#pragma once
// Loading an experiment: stage one parses the experiment file and the files it
// names (chip, model, workload, mapping; paths relative to the experiment file),
// inlines them, and applies --set overrides; stage two validates the whole
// against the rules each library owns. Errors are config::ConfigError, printed
// one per line as "file:line:col: field.path: value: rule".

#include <string>
#include <vector>

#include "arch/chip.h"
#include "configs/load.h"
#include "experiment.pb.h"

namespace tpsim::sim {

struct Override {
  std::string path;   // "mapping.tp"
  std::string value;  // "16"
};

// Parses "field.path=value"; ConfigError when there is no '='.
Override ParseOverride(const std::string& arg);

// Where errors about a value given by command-line argument `arg` point ("<command line:
// ARG>", line 1, column 1), not a file's line of the field it set.
config::Location CommandLineLocation(const std::string& arg);
// CommandLineLocation of the --set argument `o` ("--set PATH=VALUE").
config::Location OverrideLocation(const Override& o);

struct Experiment {
  std::string path;        // the experiment file
  config::Experiment cfg;  // chip, model, workload and mapping all inline
  config::SourceMap locs;  // field paths from the experiment root
  // Every file read to make it (the experiment, the chip, model, workload and
  // mapping files), so that no output of the run overwrites one.
  std::vector<std::string> inputs;
};

// Whether field `path` of `e` was given on the command line (located at a
// CommandLineLocation), not read from a file.
bool SetOnCommandLine(const Experiment& e, const std::string& path);
bool SetOnCommandLine(const config::SourceMap& locs, const std::string& path);
// Whether it was given by a --set (OverrideLocation), not by a file nor by another flag that
// sets it (tpsim search's --stages sets mapping.pipeline_stages).
bool SetBySet(const Experiment& e, const std::string& path);

// Whether field `path` of `e` was given by the command line (a --set or a flag) or by a sweep's
// axis (MakeExperiment's "<sweep point N: ...>"), not by a file.
bool GivenByCommandOrSweep(const Experiment& e, const std::string& path);

// What `e` sets that the command does not read, one message each ("FIELD is ignored: why"), for
// tpsim run (`served` false) and tpsim serve (true) to warn with; each was accepted and ignored
// silently: chip.noc fields the topology does not read (arch::UnusedNocFields), chip fields for
// what the chip lacks (arch::UnusedChipFields), mapping fields another field, the chip or the model
// leaves unread (mapping::UnreadMappingFields, a mapping.moe block on a model without experts
// among them; the serving block is tpsim serve's), the TLM engine's network ports and router
// buffers on another `engine` (empty: the experiment's engine, else analytical), on a GPU node
// the core block, the memories' rates, the in-switch collective model and the clock where a
// --set or a sweep axis gives them (GivenByCommandOrSweep), and for tpsim run a request stream
// beside the fixed batch.
std::vector<std::string> IgnoredFields(const Experiment& e, bool served, const std::string& engine = "");

// One field set by two --set (`--set workload.decode_steps=5 --set workload.decode_steps=6`): the
// last is used, which was silent. One warning per field.
std::vector<std::string> SetTwice(const std::vector<Override>& sets);

// Every file the experiment's run reads: `inputs`, the placement file (placement "file"), the
// MoE routing trace and the request trace (relative to the experiment's folder, as serving
// reads it). No output may name one of them (config::CheckOutputs).
std::vector<std::string> InputFiles(const Experiment& e);

// Stage one. `model_override` (from --model) replaces the model source when set:
// a path to a config.json / Model file, or a catalog name. When --model or --set
// change anything but the name, the experiment's name says what changed, so that
// every output names the run it comes from: "reference-qwen3-4b [model=qwen3-32b,
// tp=16]" (paths without their chip./model./workload./mapping. root; DeriveName).
// `--set name=...` names it outright.
Experiment LoadExperiment(const std::string& path, const std::vector<Override>& sets,
                          const std::string& model_override = "");

// Appends " [what changed]" to cfg->name() for a --model and every --set but name and
// description; leaves it alone when a --set gives the name or nothing changed.
void DeriveName(const std::string& model_override, const std::vector<Override>& sets,
                config::Experiment* cfg);

// One line that says what ran: "qwen3-32b on wafer-8x8: TP 16 x 4 stages, k_split,
// linear placement, ring collective, analytical engine". Plots and tables show it.
std::string RunTitle(const config::Experiment& cfg, const std::string& engine);

// Stage two: every rule of chip, model, workload and mapping. Throws
// config::ConfigError with all violations found; returns the chip it built to
// check the mapping, so callers need not build it again. `memory_capacity` false leaves out
// the memory channels' capacity (mapping::ValidateDramCapacity), which depends on the mapping:
// for a stand-in mapping whose own candidates are checked later (tpsim search).
arch::Chip ValidateExperiment(const Experiment& e, bool memory_capacity = true);

// Refuses a placement file (placement = file) that is not a readable regular UTF-8
// file within the size cap, at mapping.placement_file's location.
void CheckPlacementFile(const Experiment& e);

// Checks of the workload alone (positive sizes, layers within the model, dtype).
void ValidateWorkload(const Experiment& e, std::vector<config::Diag>* diags);

// Bytes per element of the workload's dtype (bf16 = 2, fp16 = 2, fp32 = 4).
uint32_t DtypeBytes(const std::string& dtype);

// The shipped default experiment: <ConfigDir()>/experiments/default.textproto.
std::string DefaultExperimentPath();

// The resolved experiment as protobuf text (embedded in results and traces).
std::string ResolvedText(const Experiment& e);

}  // namespace tpsim::sim
