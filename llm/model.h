#pragma once
// Models: the HuggingFace config.json import and the shipped catalog.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "configs/load.h"
#include "model.pb.h"

namespace tpsim::llm {

// Reads a HuggingFace-format config.json (Qwen3, Qwen3-MoE, Qwen2, Llama, Mistral, Mixtral)
// into a Model. Attention biases (Qwen2's q/k/v, Llama's attention_bias / mlp_bias) are not
// modelled (neither timed nor counted: 0.002% of Qwen2.5-7B's parameters). An unsupported `architectures`
// entry or a missing key is a config::ConfigError naming the file and the key.
config::Model ImportHuggingFace(const std::string& path);
// Same, from text already read; `display_name` is used in errors.
config::Model ImportHuggingFaceText(const std::string& json_text, const std::string& display_name);
// Same, also recording in `locs` (may be null) where each Model field's key was
// written ("hidden_size" -> the "hidden_size" key, "num_layers" -> "num_hidden_layers").
config::Model ImportHuggingFaceText(const std::string& json_text, const std::string& display_name,
                                    config::SourceMap* locs);

// Loads a model file: a config.json (HuggingFace) when it ends in .json and has
// an "architectures" key, else a Model textproto / JSON.
config::Model LoadModelFile(const std::string& path, config::SourceMap* locs);

// Catalog names ("qwen3-4b", "llama-3.1-8b", ...) of the shipped config.json
// files under <ConfigDir()>/models, sorted.
std::vector<std::string> CatalogNames();

// The HuggingFace `architectures` a config.json may name (`--model path/to/config.json`), each
// with what it imports as: config::Model.architecture, dense or MoE, Q/K norms, and the
// transformers defaults for the keys it may leave out.
std::vector<std::pair<std::string, std::string>> ImportableArchitectures();
// Path of a catalog entry; ConfigError listing the valid names when unknown.
std::string CatalogPath(const std::string& name, const config::Location& where, const std::string& field);

// Second-stage checks of a model (positive sizes, heads divisible by KV heads,
// MoE fields consistent). Diags name fields under `prefix` (e.g. "model").
void ValidateModel(const config::Model& m, const config::SourceMap& locs, const std::string& prefix,
                   std::vector<config::Diag>* diags);

// How an imported config.json gave num_key_value_heads or head_dim (`field`) when it did not write
// it as a number, as messages show the value: "absent, so ...", "null, so ..." with where the
// value came from (ImportHuggingFaceText locates such values for this); "" for a value written
// (or set with --set), a Model file's, or another field. `prefix` as for ValidateModel.
std::string DefaultedText(const config::Model& m, const config::SourceMap& locs, const std::string& prefix,
                          const std::string& field);

// Where a context of `context` tokens passes the model's sliding window (m.sliding_window > 0),
// the rule it breaks ("exceeds the model's sliding_window (W): ..."); else empty. tpsim times
// full attention in every layer, which the sliding layers do only up to W tokens.
std::string SlidingWindowRule(const config::Model& m, uint64_t context);

// Parameter count of the whole model (embeddings, all layers, final norm, LM head).
double ParameterCount(const config::Model& m);
// The parameters one token uses: as ParameterCount, with num_experts_per_token routed experts
// per MoE layer instead of all of them (the router and shared experts count whole). Equal to
// ParameterCount for a dense model.
double ActiveParameterCount(const config::Model& m);

}  // namespace tpsim::llm
