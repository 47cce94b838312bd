#include "llm/model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "configs/files.h"
#include "configs/json_quote.h"
#include "llm/opgraph.h"

namespace tpsim::llm {

namespace {

using nlohmann::json;

// Supported HuggingFace `architectures` values and what they imply, with transformers'
// defaults for the keys a config may leave out (the attributes of its configuration class,
// src/transformers/models/<model>/configuration_<model>.py at huggingface/transformers
// 008e574, read 2026-12-05): num_key_value_heads (0: num_attention_heads, as for null),
// head_dim (0: hidden_size / num_attention_heads), max_position_embeddings and
// tie_word_embeddings.
struct Architecture {
  const char* hf_name;
  const char* name;  // config::Model.architecture
  bool qk_norm;
  bool moe;
  uint32_t kv_heads;
  uint32_t head_dim;
  uint32_t max_positions;
  bool tie_embeddings;
};

constexpr Architecture kArchitectures[] = {
    // LlamaConfig: num_key_value_heads None, head_dim None, max_position_embeddings 2048,
    // tie_word_embeddings False (as every class below but Gemma's).
    {"LlamaForCausalLM", "llama", false, false, 0, 0, 2048, false},
    // MistralConfig and MixtralConfig: 8, None, 4096 * 32.
    {"MistralForCausalLM", "mistral", false, false, 8, 0, 4096 * 32, false},
    // Qwen3Config: 32, 128, 32768.
    {"Qwen3ForCausalLM", "qwen3", true, false, 32, 128, 32768, false},
    // Qwen3MoeConfig: 4, no head_dim attribute (the attention's default, hidden / heads), 32768.
    {"Qwen3MoeForCausalLM", "qwen3_moe", true, true, 4, 0, 32768, false},
    {"MixtralForCausalLM", "mixtral", false, true, 8, 0, 4096 * 32, false},
    // Qwen2Config: 32, no head_dim attribute, 32768.
    {"Qwen2ForCausalLM", "qwen2", false, false, 32, 0, 32768, false},
    // Qwen2MoeConfig (Qwen1.5-MoE, Qwen2-MoE): 16, no head_dim attribute, 32768.
    {"Qwen2MoeForCausalLM", "qwen2_moe", false, true, 16, 0, 32768, false},
    // Phi3Config (Phi-3 mini and medium, Phi-3.5-mini, Phi-4, Phi-4-mini): None, no head_dim
    // attribute, 4096. Its fused qkv_proj and gate_up_proj are the same GEMMs as Llama's.
    {"Phi3ForCausalLM", "phi3", false, false, 0, 0, 4096, false},
    // GemmaConfig (Gemma 1: gemma-2b, gemma-7b; Gemma 2 and 3 slide and cap logits): 16, 256,
    // 8192, tie_word_embeddings True. Its GeGLU MLP (gelu gate times up) is the same GEMMs as
    // SwiGLU's, its (1 + weight) RMSNorm the same norm; the embeddings' scaling by
    // sqrt(hidden_size), one multiply per element of one token's hidden state, is not timed.
    {"GemmaForCausalLM", "gemma", false, false, 16, 256, 8192, true},
};

std::string SupportedHfNames() {
  std::string s;
  for (const auto& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.hf_name);
  return s;
}

std::string Stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// 1-based line and column of byte `offset` (0-based) in `text`.
config::Location LocationAt(const std::string& text, size_t offset, const std::string& file) {
  offset = std::min(offset, text.size());
  config::Location loc{file, 1, 1};
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      line_start = i + 1;
    }
  }
  loc.col = static_cast<int>(offset - line_start) + 1;
  return loc;
}

// Four hex digits of `text` at `at` as a number; -1 when they are not.
long Hex4(const std::string& text, size_t at) {
  if (at + 4 > text.size()) return -1;
  long v = 0;
  for (size_t k = at; k < at + 4; ++k) {
    const char ch = text[k];
    if (ch >= '0' && ch <= '9')
      v = v * 16 + (ch - '0');
    else if (ch >= 'a' && ch <= 'f')
      v = v * 16 + (ch - 'a' + 10);
    else if (ch >= 'A' && ch <= 'F')
      v = v * 16 + (ch - 'A' + 10);
    else
      return -1;
  }
  return v;
}

// Appends to `out` the character the JSON escape at text[at] ('\\') stands for, as the parser
// reads it (\uXXXX as UTF-8, a surrogate pair as one code point), and returns the offset of the
// escape's last character. A key's duplicate may be spelt with escapes ("hidden\u005fsize"):
// compared raw, it passed for another key and its value silently replaced the first.
size_t DecodeEscape(const std::string& text, size_t at, std::string* out) {
  const char e = text[at + 1];
  const char* simple = "\"\\/bfnrt";
  const char* meant = "\"\\/\b\f\n\r\t";
  if (const char* p = std::strchr(simple, e); p && e != '\0') {
    *out += meant[p - simple];
    return at + 1;
  }
  long cp = e == 'u' ? Hex4(text, at + 2) : -1;
  if (cp < 0) {  // not an escape the parser takes (it refused the text before this runs)
    *out += e;
    return at + 1;
  }
  size_t last = at + 5;
  if (cp >= 0xD800 && cp <= 0xDBFF && last + 2 < text.size() && text[last + 1] == '\\' &&
      text[last + 2] == 'u') {
    if (const long low = Hex4(text, last + 3); low >= 0xDC00 && low <= 0xDFFF) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      last += 6;
    }
  }
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return last;
}

// Locations of the keys of the top-level object of a (well-formed) JSON text. A key
// given twice in one object is refused at its second occurrence (the JSON parser keeps
// the last value silently).
std::map<std::string, config::Location> TopLevelKeyLocations(const std::string& text,
                                                             const std::string& file) {
  std::map<std::string, config::Location> keys;
  // The keys seen in each open object, by their offset in `text` (an open list has no set),
  // innermost last. Offsets, not locations: the top level's keys are located by a cursor that
  // only moves forward (LocationAt from the start for each made 100,000 keys, a 1.3 MB file, take
  // minutes), an error by LocationAt.
  std::vector<std::optional<std::map<std::string, size_t>>> open;
  size_t cursor = 0, line_start = 0;
  int line = 1;
  auto locate = [&](size_t offset) {
    for (; cursor < offset; ++cursor)
      if (text[cursor] == '\n') ++line, line_start = cursor + 1;
    return config::Location{file, line, static_cast<int>(offset - line_start) + 1};
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '{') {
      open.emplace_back(std::map<std::string, size_t>{});
    } else if (c == '[') {
      open.emplace_back(std::nullopt);
    } else if ((c == '}' || c == ']') && !open.empty()) {
      open.pop_back();
    } else if (c == '"') {
      size_t start = i;
      std::string s;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) {
          i = DecodeEscape(text, i, &s);
          continue;
        }
        s += text[i];
      }
      if (open.empty() || !open.back()) continue;
      size_t j = i + 1;
      while (j < text.size() && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r'))
        ++j;
      if (j >= text.size() || text[j] != ':') continue;
      if (auto [it, fresh] = open.back()->emplace(s, start); !fresh) {
        throw config::ConfigError(config::Diag{LocationAt(text, start + 1, file), config::Clip(s), "",
                                               "specified more than once (first on line " +
                                                   std::to_string(LocationAt(text, it->second, file).line) +
                                                   ")"});
      }
      if (open.size() == 1) keys[s] = locate(start);
    }
  }
  return keys;
}

// The most a Model field (uint32 in the schema) may hold: config::CheckIntegerRanges' 2^31-1.
constexpr uint32_t kMaxField = INT32_MAX;

// "2147483647 (2^31-1)" for kMaxField, else the number.
std::string LimitText(uint64_t limit) {
  return std::to_string(limit) + (limit == kMaxField ? " (2^31-1)" : "");
}

// The SourceMap entry that marks a Model field whose key the config.json gives as null
// (num_key_value_heads, head_dim). No field path has a ':', so Find falls back from it to the
// model's anchor when it is not recorded.
std::string NullMark(const std::string& field) { return field + ":null"; }

// Reads typed keys of the config object, collecting every problem as a Diag.
class Reader {
 public:
  Reader(const json& j, const std::string& text, const std::string& file)
      : j_(j), file_(file), keys_(TopLevelKeyLocations(text, file)) {}

  bool Has(const std::string& key) const { return keys_.count(key) > 0; }

  config::Location Where(const std::string& key) const {
    auto it = keys_.find(key);
    return it != keys_.end() ? it->second : config::Location{file_, 1, 1};
  }

  // A non-negative integer of at most `limit`; nullopt (and a Diag when `required`) if absent.
  // The default limit is the schema's for every uint32 Model field (config::CheckIntegerRanges:
  // 2^31-1), so that a value in between is refused here, at its key, with the same rule.
  std::optional<uint32_t> Uint(const std::string& key, bool required, uint32_t limit = kMaxField) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      if (required) Error(key, "", "required key missing");
      return std::nullopt;
    }
    if (it->is_number_unsigned() && it->get<uint64_t>() <= limit)
      return static_cast<uint32_t>(it->get<uint64_t>());
    Error(key, config::QuoteJson(*it), "must be a non-negative integer, at most " + LimitText(limit));
    return std::nullopt;
  }

  std::optional<bool> Bool(const std::string& key) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return std::nullopt;
    if (it->is_boolean()) return it->get<bool>();
    Error(key, config::QuoteJson(*it), "must be true or false");
    return std::nullopt;
  }

  void Error(const std::string& key, const std::string& value, const std::string& rule) {
    diags_.push_back(config::Diag{Where(key), key, value, rule});
  }

  std::vector<config::Diag>& diags() { return diags_; }

 private:
  const json& j_;
  std::string file_;
  std::map<std::string, config::Location> keys_;
  std::vector<config::Diag> diags_;
};

const Architecture* FindArchitecture(const json& j, Reader* r) {
  auto it = j.find("architectures");
  if (it == j.end()) {
    r->Error("architectures", "", "required key missing; supported: " + SupportedHfNames());
    return nullptr;
  }
  if (!it->is_array() || it->empty()) {
    r->Error("architectures", config::QuoteJson(*it), "must be a non-empty array of strings");
    return nullptr;
  }
  for (const auto& e : *it) {
    if (!e.is_string()) {
      r->Error("architectures", config::QuoteJson(*it), "must be a non-empty array of strings");
      return nullptr;
    }
    for (const auto& a : kArchitectures) {
      if (e.get<std::string>() != a.hf_name) continue;
      // model_type is what transformers builds the model from (AutoConfig): a config whose
      // model_type is another family's (a Gemma 2 config that also lists LlamaForCausalLM) would
      // be timed as the wrong model.
      if (auto mt = j.find("model_type"); mt != j.end() && !mt->is_null() && !mt->is_string()) {
        // 5, ["qwen3"]: not compared, accepted silently.
        r->Error("model_type", config::QuoteJson(*mt), "must be a string (the model family, e.g. qwen3)");
        return nullptr;
      }
      if (auto mt = j.find("model_type");
          mt != j.end() && mt->is_string() && mt->get<std::string>() != a.name) {
        r->Error("model_type", mt->get<std::string>(),
                 std::string("does not match architectures' ") + a.hf_name + " (model_type " + a.name + ")");
        return nullptr;
      }
      return &a;
    }
  }
  std::string names;
  for (const auto& e : *it) names += (names.empty() ? "" : ", ") + e.get<std::string>();
  r->Error("architectures", names, "unsupported architecture; supported: " + SupportedHfNames());
  return nullptr;
}

// Model field -> HuggingFace key, for the SourceMap.
constexpr std::pair<const char*, const char*> kFieldKeys[] = {
    {"architecture", "architectures"},
    {"hidden_size", "hidden_size"},
    {"num_layers", "num_hidden_layers"},
    {"num_attention_heads", "num_attention_heads"},
    {"num_key_value_heads", "num_key_value_heads"},
    {"head_dim", "head_dim"},
    {"intermediate_size", "intermediate_size"},
    {"vocab_size", "vocab_size"},
    {"tie_word_embeddings", "tie_word_embeddings"},
    {"num_experts", "num_experts"},
    {"num_experts_per_token", "num_experts_per_tok"},
    {"moe_intermediate_size", "moe_intermediate_size"},
    {"norm_topk_prob", "norm_topk_prob"},
    {"shared_expert_intermediate_size", "shared_expert_intermediate_size"},
    {"decoder_sparse_step", "decoder_sparse_step"},
    {"mlp_only_layers", "mlp_only_layers"},
    {"max_position_embeddings", "max_position_embeddings"},
    {"sliding_window", "sliding_window"},
};

// The attention window of the layers that slide, where the config puts sliding-window
// attention in effect as transformers reads it; 0: none. `layers`: num_hidden_layers.
//   - Qwen2, Qwen3, Qwen2-MoE: layer_types (newer configs) names each layer's attention:
//     "sliding_attention" slides, but only with use_sliding_window true (their configuration
//     classes set sliding_window to None, Qwen2-MoE's to 0, without it, and a sliding layer's
//     attention takes config.sliding_window: no window). Mistral, Mixtral, Phi-3 and Qwen3-MoE
//     have no layer_types in transformers 5 (MistralConfig only warns about one): theirs is not
//     read.
//   - Mistral and Mixtral: sliding_window itself (absent: transformers' default, 4096 for
//     Mistral, none for Mixtral; null: none).
//   - Qwen2, Qwen3: only with use_sliding_window true, for the layers from max_window_layers
//     on (default 28); sliding_window absent: 4096, null: none.
//   - Qwen3-MoE: only with use_sliding_window true, in every layer (Qwen3MoeConfig has no
//     max_window_layers; its attention takes config.sliding_window in every layer); absent:
//     4096, null: none.
//   - Qwen2-MoE: only with use_sliding_window true, for the even layers below
//     max_window_layers (Qwen2MoeConfig's layer_types: (i + 1) % 2 and i < max_window_layers).
//   - Phi-3: sliding_window itself, in every layer (absent or null: none).
//   - Llama: none.
uint32_t SlidingWindow(const json& j, const Architecture& a, std::optional<uint32_t> layers, Reader* r) {
  const std::string name = a.name;
  if (name == "llama") return 0;
  const bool reads_layer_types = name == "qwen2" || name == "qwen3" || name == "qwen2_moe";
  bool slides = false;
  if (auto it = j.find("layer_types"); reads_layer_types && it != j.end() && !it->is_null()) {
    bool ok = it->is_array();
    // transformers names two kinds; another ("banana") was read as full attention, silently.
    for (const auto& e : ok ? *it : json::array()) {
      ok = ok && e.is_string() &&
           (e.get<std::string>() == "sliding_attention" || e.get<std::string>() == "full_attention");
      if (ok) slides = slides || e.get<std::string>() == "sliding_attention";
    }
    if (!ok) {
      r->Error("layer_types", config::QuoteJson(*it),
               "must be an array of \"full_attention\" and \"sliding_attention\"");
      return 0;
    }
    // One entry a layer, as transformers' layer_type_validation checks (3 entries for 28 layers
    // were read, and one sliding entry made every layer slide).
    if (layers && it->size() != *layers) {
      r->Error("layer_types", std::to_string(it->size()) + " entries",
               "must name one attention per layer: num_hidden_layers is " + std::to_string(*layers));
      return 0;
    }
    // Read whether or not a layer slides: a wrong type ("yes") passed where none did.
    const bool use = r->Bool("use_sliding_window").value_or(false);
    slides = slides && use;
  } else if (name == "mistral" || name == "mixtral" || name == "phi3") {
    slides = true;
  } else if (name == "qwen3_moe") {
    slides = r->Bool("use_sliding_window").value_or(false);
  } else if (r->Bool("use_sliding_window").value_or(false)) {
    // Not a Model field: any uint32 is taken (one past num_hidden_layers means no layer slides).
    const uint32_t from = r->Uint("max_window_layers", false, UINT32_MAX).value_or(28);
    slides = layers && (name == "qwen2_moe" ? from > 0 && *layers > 0 : from < *layers);
  }
  if (!slides) return 0;
  auto it = j.find("sliding_window");
  if (it == j.end()) return name == "mixtral" || name == "phi3" ? 0 : 4096;
  return r->Uint("sliding_window", false).value_or(0);
}

// The positions rope_scaling extends max_position_embeddings to, as vLLM derives a model's
// longest context: yarn: factor x original_max_position_embeddings (absent: x
// max_position_embeddings); linear, dynamic and other factor types: factor x
// max_position_embeddings; llama3, longrope and su: as published (their
// max_position_embeddings is already the extended one). nullopt: no scaling, or a problem
// (recorded in *r). transformers 5 writes the same object as rope_parameters (with rope_theta
// in it); like its PreTrainedConfig.convert_rope_params_to_dict, a non-empty rope_scaling
// is read first. A rope_parameters per layer type ({"full_attention": {...}, ...}) is read
// at full_attention. Phi-3 reads su and yarn as longrope (Phi3Config's backward compatibility).
std::optional<uint32_t> ScaledPositions(const json& j, std::optional<uint32_t> max_pos,
                                        const Architecture* arch, Reader* r) {
  const char* key = "rope_scaling";
  auto found = j.find(key);
  if (found == j.end() || found->is_null() || (found->is_object() && found->empty())) {
    key = "rope_parameters";
    found = j.find(key);
  }
  if (found == j.end() || found->is_null()) return std::nullopt;
  const json* it = &*found;
  if (auto full = it->find("full_attention"); it->is_object() && full != it->end() && full->is_object())
    it = &*full;
  if (!it->is_object()) {
    r->Error(key, config::QuoteJson(*it), "must be an object or null");
    return std::nullopt;
  }
  std::string type;
  for (const char* name : {"rope_type", "type"})
    if (auto t = it->find(name); type.empty() && t != it->end() && t->is_string())
      type = t->get<std::string>();
  if (arch && std::string(arch->name) == "phi3" && type == "yarn") type = "longrope";
  if (type == "llama3" || type == "longrope" || type == "su" || type == "default") return std::nullopt;
  auto f = it->find("factor");
  if (f == it->end() || f->is_null()) return std::nullopt;
  if (!f->is_number() || !(f->get<double>() >= 1) || !(f->get<double>() <= 1e6)) {
    r->Error(key, config::QuoteJson(*f), "factor must be a number from 1 to 1e6");
    return std::nullopt;
  }
  double base = max_pos.value_or(0);
  std::string base_name = r->Has("max_position_embeddings")
                              ? "max_position_embeddings"
                              : "max_position_embeddings, the architecture's default";
  if (type == "yarn") {
    if (auto o = it->find("original_max_position_embeddings"); o != it->end() && !o->is_null()) {
      // 0 gave 0 positions, read as no scaling, silently: the context is factor x a positive count.
      if (!o->is_number_unsigned() || o->get<uint64_t>() == 0 || o->get<uint64_t>() > kMaxField) {
        r->Error(
            key, config::QuoteJson(*o),
            "original_max_position_embeddings must be a positive integer, at most " + LimitText(kMaxField));
        return std::nullopt;
      }
      base = static_cast<double>(o->get<uint64_t>());
      base_name = "original_max_position_embeddings";
    }
  }
  const double positions = std::floor(base * f->get<double>());
  if (positions <= 0) return std::nullopt;
  // The extended context becomes max_position_embeddings, a uint32 field of at most 2^31-1 in
  // the schema: refused here, at the factor, since the file's max_position_embeddings is not
  // what is out of range.
  if (positions > kMaxField) {
    r->Error(key, config::QuoteJson(*f),
             "factor x " + base_name + " (" + std::to_string(static_cast<uint64_t>(base)) +
                 ") = " + std::to_string(static_cast<uint64_t>(positions)) +
                 " positions: the extended context must be at most " + LimitText(kMaxField));
    return std::nullopt;
  }
  return static_cast<uint32_t>(positions);
}

config::Model Import(const std::string& text, const std::string& display_name, config::SourceMap* locs) {
  // A published config.json is a few KB; the document a 64 MiB one builds took 4 GB and 7 s.
  constexpr size_t kMaxHfBytes = size_t{4} << 20;
  if (text.size() > kMaxHfBytes)
    throw config::ConfigError(config::Diag{
        config::Location{display_name, 1, 1}, "<json>", std::to_string(text.size()) + " bytes",
        "a HuggingFace config.json is read up to 4 MiB (4194304 bytes; published ones are a few KB)"});
  // The parser ends the text at a NUL byte: what followed was read by nothing but the key
  // locator (a second object after it was accepted, errors were placed past it).
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    throw config::ConfigError(
        config::Diag{LocationAt(text, nul, display_name), "<json>", "\\0", "a NUL byte: JSON text has none"});
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    if (auto colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    throw config::ConfigError(
        config::Diag{LocationAt(text, offset, display_name), "<json>", "", "malformed JSON: " + what});
  } catch (const json::exception& e) {
    config::Diag d{config::Location{display_name, 1, 1}, "<json>", "",
                   std::string("malformed JSON: ") + e.what()};
    // A number too large for a double names no position: find its token, 'number overflow
    // parsing '1e400'', where a value starts, and the key just before it.
    const std::string what = e.what();
    const std::string mark = "number overflow parsing '";
    if (auto a = what.find(mark); a != std::string::npos && what.ends_with("'")) {
      const std::string token = what.substr(a + mark.size(), what.size() - a - mark.size() - 1);
      for (size_t at = text.find(token); !token.empty() && at != std::string::npos;
           at = text.find(token, at + 1)) {
        size_t b = at;
        while (b > 0 && std::isspace(static_cast<unsigned char>(text[b - 1]))) --b;
        const size_t after = at + token.size();
        if (b == 0 || std::string_view(":[,").find(text[b - 1]) == std::string_view::npos ||
            (after < text.size() && (std::isdigit(static_cast<unsigned char>(text[after])) ||
                                     text[after] == '.' || text[after] == 'e' || text[after] == 'E')))
          continue;
        d.where = LocationAt(text, at, display_name);
        d.value = token;
        d.rule = "number out of range of double";
        if (text[b - 1] == ':') {  // "key": 1e400
          size_t q = b - 1;
          while (q > 0 && std::isspace(static_cast<unsigned char>(text[q - 1]))) --q;
          if (q >= 2 && text[q - 1] == '"') {
            const size_t open = text.rfind('"', q - 2);
            if (open != std::string::npos) d.field = config::Clip(text.substr(open + 1, q - 2 - open));
          }
        }
        break;
      }
    }
    throw config::ConfigError(d);
  }
  if (!j.is_object()) {
    throw config::ConfigError(config::Diag{config::Location{display_name, 1, 1}, "<json>",
                                           std::string(j.type_name()), "top level must be a JSON object"});
  }

  Reader r(j, text, display_name);
  // A multimodal config (Qwen2.5-VL, Llama 4, Gemma 3) keeps its language model's dimensions
  // under text_config: "hidden_size: : required key missing" did not say where they were.
  if (auto tc = j.find("text_config"); tc != j.end() && tc->is_object() && !j.contains("hidden_size"))
    r.Error("text_config", "",
            "the language model's keys are under text_config, which tpsim does not read: save text_config's "
            "keys (with architectures) as a config.json of their own");
  config::Model m;
  m.set_name(Stem(display_name));
  const Architecture* arch = FindArchitecture(j, &r);
  if (arch) {
    m.set_architecture(arch->name);
    m.set_qk_norm(arch->qk_norm);
  }
  auto hidden = r.Uint("hidden_size", true);
  auto layers = r.Uint("num_hidden_layers", true);
  auto heads = r.Uint("num_attention_heads", true);
  auto vocab = r.Uint("vocab_size", true);
  // Absent in some configs; transformers then uses its class's defaults (kArchitectures).
  auto kv_heads = r.Uint("num_key_value_heads", false);
  auto head_dim = r.Uint("head_dim", false);
  // null: num_attention_heads (transformers' "backward compatibility"); absent: the class's default.
  const bool kv_null = j.contains("num_key_value_heads") && j["num_key_value_heads"].is_null();
  bool moe = arch && arch->moe;
  const bool mixtral = arch && std::string(arch->name) == "mixtral";
  // Mixtral's intermediate_size is its experts' size (every layer is sparse).
  auto inter = r.Uint("intermediate_size", !moe || mixtral);
  auto max_pos = r.Uint("max_position_embeddings", false);
  // 0 would read as the schema's "no bound" (configs/schema/model.proto): a config that says 0
  // positions is broken, not unbounded.
  if (max_pos && *max_pos == 0) {
    r.Error("max_position_embeddings", "0",
            "must be positive: the longest context the model takes (absent: the architecture's default)");
    max_pos.reset();
  }
  if (!max_pos && arch) max_pos = arch->max_positions;
  if (auto scaled = ScaledPositions(j, max_pos, arch, &r)) max_pos = std::max(*scaled, max_pos.value_or(0));
  auto tie = r.Bool("tie_word_embeddings");
  // A quantized checkpoint's weights (AWQ, GPTQ, FP8, ...) are not workload.dtype's: timed as
  // if they were, every weight read would be off by the ratio of the widths, silently.
  if (auto it = j.find("quantization_config"); it != j.end() && !it->is_null()) {
    std::string method = "quantized";
    if (it->is_object())
      if (auto q = it->find("quant_method"); q != it->end() && q->is_string()) method = q->get<std::string>();
    r.Error("quantization_config", method,
            "quantized weights are not modelled (tpsim's weights are workload.dtype: bf16, fp16 or fp32); "
            "remove the key to time the model unquantized");
  }
  const uint32_t window = arch ? SlidingWindow(j, *arch, layers, &r) : 0;
  // Mixtral's and Qwen3-MoE's configs name the expert count either way (attribute_map
  // num_experts -> num_local_experts in transformers 5, which writes num_local_experts for
  // both): the key given is read; both given must agree.
  const auto experts = [&](const char* primary, const char* alias) -> std::optional<uint32_t> {
    if (!r.Has(primary) && r.Has(alias)) return r.Uint(alias, true);
    const std::optional<uint32_t> v = r.Uint(primary, true);
    if (v && r.Has(alias)) {
      const std::optional<uint32_t> w = r.Uint(alias, true);
      if (w && *w != *v)
        r.Error(alias, std::to_string(*w),
                std::string("gives another expert count than ") + primary + " (" + std::to_string(*v) +
                    "); give one");
    }
    return v;
  };
  const bool qwen3_moe = arch && std::string(arch->name) == "qwen3_moe";
  if (mixtral) {
    // Mixtral: num_local_experts experts of intermediate_size each, every layer sparse; its
    // router takes the softmax over the top-k logits, which is the renormalised top-k.
    if (auto v = experts("num_local_experts", "num_experts")) m.set_num_experts(*v);
    if (auto v = r.Uint("num_experts_per_tok", true)) m.set_num_experts_per_token(*v);
    if (inter) m.set_moe_intermediate_size(*inter);
    m.set_norm_topk_prob(true);
  } else if (moe) {
    if (auto v = qwen3_moe ? experts("num_experts", "num_local_experts") : r.Uint("num_experts", true))
      m.set_num_experts(*v);
    if (auto v = r.Uint("num_experts_per_tok", true)) m.set_num_experts_per_token(*v);
    if (auto v = r.Uint("moe_intermediate_size", true)) m.set_moe_intermediate_size(*v);
    if (auto v = r.Bool("norm_topk_prob")) m.set_norm_topk_prob(*v);
    // Qwen2-MoE's shared experts: one FFN of this size that every token goes through (its
    // sigmoid gate, one hidden-wide dot product per token, is left out).
    if (std::string(arch->name) == "qwen2_moe")
      if (auto v = r.Uint("shared_expert_intermediate_size", true)) m.set_shared_expert_intermediate_size(*v);
    // Qwen3-MoE: layer l is sparse when (l + 1) % decoder_sparse_step == 0 and l is not in
    // mlp_only_layers (llm::IsMoeLayer); the others have the dense MLP of intermediate_size.
    if (auto v = r.Uint("decoder_sparse_step", false)) {
      // transformers takes (l + 1) % decoder_sparse_step: 0 raises ZeroDivisionError there, and
      // read as the schema's 0 (unset) it made every layer sparse, silently.
      if (*v == 0)
        r.Error("decoder_sparse_step", "0",
                "must be positive (layer l is sparse when (l + 1) % decoder_sparse_step == 0; transformers "
                "divides by it): 1 makes every layer sparse");
      m.set_decoder_sparse_step(*v);
    }
    if (auto it = j.find("mlp_only_layers"); it != j.end() && !it->is_null()) {
      bool ok = it->is_array();
      for (const auto& e : ok ? *it : json::array()) {
        ok = ok && e.is_number_unsigned() && e.get<uint64_t>() <= UINT32_MAX;
        if (ok) m.add_mlp_only_layers(e.get<uint32_t>());
      }
      if (!ok)
        r.Error("mlp_only_layers", config::QuoteJson(*it),
                "must be an array of layer indices (non-negative integers)");
    }
  }
  if (!r.diags().empty()) throw config::ConfigError(std::move(r.diags()));

  m.set_hidden_size(*hidden);
  m.set_num_layers(*layers);
  m.set_num_attention_heads(*heads);
  const uint32_t kv_default = kv_null || !arch->kv_heads ? *heads : arch->kv_heads;
  m.set_num_key_value_heads(kv_heads.value_or(kv_default));
  m.set_head_dim(head_dim.value_or(arch->head_dim ? arch->head_dim : *heads ? *hidden / *heads : 0));
  m.set_intermediate_size(inter.value_or(0));
  m.set_vocab_size(*vocab);
  m.set_tie_word_embeddings(tie.value_or(arch->tie_embeddings));
  m.set_max_position_embeddings(max_pos.value_or(0));
  m.set_sliding_window(window);

  if (locs) {
    for (const auto& [field, key] : kFieldKeys) {
      if (r.Has(key)) locs->Set(field, r.Where(key));
    }
    // A value the file leaves out is located at the key it comes from: num_attention_heads or
    // architectures (the class's default) for num_key_value_heads, hidden_size (divided by the
    // heads) or architectures for head_dim. ValidateModel reads a location shared with that key
    // as "absent" and says how the value was derived (two keys of a file never share one).
    if (!r.Has("num_key_value_heads"))
      locs->Set("num_key_value_heads", r.Where(arch->kv_heads ? "architectures" : "num_attention_heads"));
    if (!r.Has("head_dim")) locs->Set("head_dim", r.Where(arch->head_dim ? "architectures" : "hidden_size"));
    // A null value is written, so it stays located at its key; a second entry at the same key
    // (NullMark) says it was null: it was shown as the number it was taken as, as if written.
    for (const char* key : {"num_key_value_heads", "head_dim"})
      if (auto it = j.find(key); it != j.end() && it->is_null()) locs->Set(NullMark(key), r.Where(key));
    if (qwen3_moe && !r.Has("num_experts") && r.Has("num_local_experts"))
      locs->Set("num_experts", r.Where("num_local_experts"));
    if (mixtral) {
      if (r.Has("num_local_experts"))
        locs->Set("num_experts", r.Where("num_local_experts"));
      else if (r.Has("num_experts"))
        locs->Set("num_experts", r.Where("num_experts"));
      if (r.Has("intermediate_size")) locs->Set("moe_intermediate_size", r.Where("intermediate_size"));
    }
  }
  return m;
}

}  // namespace

config::Model ImportHuggingFaceText(const std::string& json_text, const std::string& display_name,
                                    config::SourceMap* locs) {
  try {
    return Import(json_text, display_name, locs);
  } catch (const config::ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw config::ConfigError(config::Diag{config::Location{display_name, 1, 1}, "<json>", "",
                                           std::string("cannot import: ") + e.what()});
  }
}

config::Model ImportHuggingFaceText(const std::string& json_text, const std::string& display_name) {
  return ImportHuggingFaceText(json_text, display_name, nullptr);
}

config::Model ImportHuggingFace(const std::string& path) {
  std::string text = config::ReadFileOrThrow(path, config::Location{path, 1, 1}, "model");
  return ImportHuggingFaceText(text, path, nullptr);
}

namespace {

// Whether a JSON text is malformed or an object with a key of a HuggingFace config at its top
// level (architectures, model_type, num_hidden_layers), read as events: the document it would
// build took about 60 bytes a byte of input (4 GB for a 64 MiB file, then built again).
struct HfSniff : json::json_sax_t {
  int depth = 0;
  bool hf = false, malformed = false;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth, true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return ++depth, true; }
  bool end_array() override { return --depth, true; }
  bool key(string_t& k) override {
    if (depth == 1 && (k == "architectures" || k == "model_type" || k == "num_hidden_layers")) hf = true;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    malformed = true;
    return false;
  }
};

}  // namespace

config::Model LoadModelFile(const std::string& path, config::SourceMap* locs) {
  std::string text = config::ReadFileOrThrow(path, config::Location{path, 1, 1}, "model");
  if (config::HasExtension(path, ".json")) {  // UPPER.JSON too: it was read as a textproto
    HfSniff sniff;
    json::sax_parse(text, &sniff);
    // Malformed JSON goes through the HF importer too, for its line:col diagnostics, and so
    // does a config.json without `architectures` (model_type or num_hidden_layers, keys no
    // tpsim Model has), for the importer's "architectures: required key missing" rather than
    // an unknown field of Model.
    if (sniff.malformed || sniff.hf) return ImportHuggingFaceText(text, path, locs);
  }
  config::Model m;
  config::ParseMessage(text, path, &m, locs);
  if (m.name().empty()) m.set_name(Stem(path));
  return m;
}

std::vector<std::string> CatalogNames() { return config::ShippedNames("models", ".json"); }

std::vector<std::pair<std::string, std::string>> ImportableArchitectures() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Architecture& a : kArchitectures) {
    out.emplace_back(a.hf_name, std::string(a.name) + ", " + (a.moe ? "MoE" : "dense") +
                                    (a.qk_norm ? ", Q/K norms" : "") + "; omitted: num_key_value_heads " +
                                    (a.kv_heads ? std::to_string(a.kv_heads) : "= heads") + ", head_dim " +
                                    (a.head_dim ? std::to_string(a.head_dim) : "= hidden / heads") +
                                    ", max_position_embeddings " + std::to_string(a.max_positions) +
                                    ", tie_word_embeddings " + (a.tie_embeddings ? "true" : "false"));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string CatalogPath(const std::string& name, const config::Location& where, const std::string& field) {
  std::vector<std::string> names = CatalogNames();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw config::ConfigError(
        config::Diag{where, field, name,
                     "unknown model; the catalog has: " + config::ShippedList("models", ".json") +
                         config::DidYouMean(name, names)});
  }
  return (std::filesystem::path(config::ConfigDir()) / "models" / (name + ".json")).string();
}

std::string DefaultedText(const config::Model& m, const config::SourceMap& locs, const std::string& prefix,
                          const std::string& field) {
  if (field != "num_key_value_heads" && field != "head_dim") return "";
  auto path = [&](const std::string& f) { return prefix.empty() ? f : prefix + "." + f; };
  const config::Location anchor = locs.Find(prefix);
  const auto same = [](const config::Location& x, const config::Location& y) {
    return x.file == y.file && x.line == y.line && x.col == y.col;
  };
  // One the file leaves out is located by the importer at the key it comes from
  // (ImportHuggingFaceText): sharing that key's location, it is said to be absent, with where it
  // came from (it was shown as if written, at file:1:1). A --set of the field moves its location
  // to the command line, and it is then written.
  const config::Location at = locs.Find(path(field));
  const auto absent_from = [&](const std::string& from) {
    return same(at, locs.Find(path(from))) && !same(at, anchor);
  };
  const std::string n = std::to_string(field == "head_dim" ? m.head_dim() : m.num_key_value_heads());
  const std::string head_dim_derived =
      m.num_attention_heads() == 0
          ? n + " with no num_attention_heads to divide hidden_size by"
          : "hidden_size / num_attention_heads = " + std::to_string(m.hidden_size()) + " / " +
                std::to_string(m.num_attention_heads()) + " = " + n;
  const std::string arch_default = m.architecture() + "'s default (" + n + ") as transformers has it";
  // null: located at its own key, with the importer's mark there too (NullMark).
  if (const config::Location mark = locs.Find(path(NullMark(field))); same(mark, at) && !same(mark, anchor)) {
    if (field == "num_key_value_heads")
      return "null, so num_attention_heads (" + n + ") as transformers 4 reads a null";
    // head_dim: a null is read as if the key were absent.
    for (const Architecture& a : kArchitectures)
      if (m.architecture() == a.name && a.head_dim) return "null, taken as absent: " + arch_default;
    return "null, taken as absent: " + head_dim_derived;
  }
  if (field == "num_key_value_heads" && absent_from("num_attention_heads"))
    return "absent, so num_attention_heads (" + n + ") as transformers defaults";
  if (absent_from("architecture")) return "absent, so " + arch_default;
  if (field == "head_dim" && absent_from("hidden_size")) return "absent, " + head_dim_derived;
  return "";
}

// The most routed experts a model may have (ValidateModel).
constexpr uint32_t kMaxExperts = 65536;

void ValidateModel(const config::Model& m, const config::SourceMap& locs, const std::string& prefix,
                   std::vector<config::Diag>* diags) {
  auto path = [&](const std::string& f) { return prefix.empty() ? f : prefix + "." + f; };
  auto fail = [&](const std::string& f, const std::string& value, const std::string& rule) {
    diags->push_back(config::Diag{locs.Find(path(f)), path(f), value, rule});
  };
  // The value as a message shows it: how it was taken where the file did not write it.
  const auto shown = [&](const std::string& f, uint32_t v) {
    const std::string how = DefaultedText(m, locs, prefix, f);
    return how.empty() ? std::to_string(v) : how;
  };
  auto positive = [&](const std::string& f, uint32_t v) {
    if (v == 0) fail(f, shown(f, 0), "must be positive");
  };

  const Architecture* arch = nullptr;
  if (!m.architecture().empty()) {
    std::vector<std::string> names;
    for (const auto& a : kArchitectures) {
      if (m.architecture() == a.name) arch = &a;
      names.push_back(a.name);
    }
    if (!arch)
      fail("architecture", m.architecture(),
           "unknown architecture; valid: " + config::JoinNames(names) +
               config::DidYouMean(m.architecture(), names));
  }
  positive("hidden_size", m.hidden_size());
  positive("num_layers", m.num_layers());
  positive("num_attention_heads", m.num_attention_heads());
  positive("num_key_value_heads", m.num_key_value_heads());
  positive("head_dim", m.head_dim());
  positive("vocab_size", m.vocab_size());
  if (m.num_attention_heads() > 0 && m.num_key_value_heads() > 0 &&
      m.num_attention_heads() % m.num_key_value_heads() != 0) {
    fail("num_key_value_heads", shown("num_key_value_heads", m.num_key_value_heads()),
         "num_attention_heads (" + std::to_string(m.num_attention_heads()) +
             ") must be divisible by num_key_value_heads (" + std::to_string(m.num_key_value_heads()) + ")");
  }
  if (m.num_experts() == 0) {
    positive("intermediate_size", m.intermediate_size());
    if (m.num_experts_per_token() != 0) {
      fail("num_experts_per_token", std::to_string(m.num_experts_per_token()),
           "must be 0 when num_experts is 0 (dense model)");
    }
    if (arch && arch->moe) fail("num_experts", "0", "must be positive for " + m.architecture());
    if (m.shared_expert_intermediate_size() != 0)
      fail("shared_expert_intermediate_size", std::to_string(m.shared_expert_intermediate_size()),
           "must be 0 when num_experts is 0 (dense model)");
    // The other expert fields changed nothing on a dense model (--set model.moe_intermediate_size=128
    // on qwen3-4b was accepted, the same run): refused as the two above.
    if (m.moe_intermediate_size() != 0)
      fail("moe_intermediate_size", std::to_string(m.moe_intermediate_size()),
           "must be 0 when num_experts is 0 (dense model: its MLP is intermediate_size)");
    if (m.decoder_sparse_step() != 0)
      fail("decoder_sparse_step", std::to_string(m.decoder_sparse_step()),
           "must be 0 when num_experts is 0 (dense model: every layer is dense)");
    if (m.mlp_only_layers_size() != 0)
      fail("mlp_only_layers", std::to_string(m.mlp_only_layers(0)),
           "must be empty when num_experts is 0 (dense model: every layer is dense)");
    if (m.norm_topk_prob())
      fail("norm_topk_prob", "true", "must be false when num_experts is 0 (dense model: no router)");
  } else {
    bool dense_layers = false;
    for (uint32_t l : m.mlp_only_layers()) {
      if (l >= m.num_layers())
        fail("mlp_only_layers", std::to_string(l),
             "must be a layer index below num_layers (" + std::to_string(m.num_layers()) + ")");
      dense_layers = true;
    }
    if (m.decoder_sparse_step() > 1) dense_layers = true;
    if (dense_layers && m.intermediate_size() == 0)
      fail("intermediate_size", "0",
           "must be positive: mlp_only_layers or decoder_sparse_step give dense layers");
    // The MoE pass keeps per-expert counts for every rank of a layer: 16 million experts took
    // over 2.5 GB and 2 minutes a run (1 million: 57 s). Published MoE models have at most a
    // few thousand (Switch-C: 2,048; DeepSeek-V3: 256 routed; Qwen3-Next: 512).
    if (m.num_experts() > kMaxExperts)
      fail("num_experts", std::to_string(m.num_experts()), "must be at most " + std::to_string(kMaxExperts));
    positive("num_experts_per_token", m.num_experts_per_token());
    if (m.num_experts_per_token() > m.num_experts()) {
      fail("num_experts_per_token", std::to_string(m.num_experts_per_token()),
           "must be at most num_experts (" + std::to_string(m.num_experts()) + ")");
    }
    positive("moe_intermediate_size", m.moe_intermediate_size());
  }
}

namespace {

// Parameters of the whole model counting `experts_per_layer` routed experts in each MoE layer
// (all of them, or the num_experts_per_token one token activates).
double Parameters(const config::Model& m, double experts_per_layer) {
  const double h = m.hidden_size(), d = m.head_dim(), q = double(m.num_attention_heads()) * d,
               kv = double(m.num_key_value_heads()) * d;
  const double attn = h * q + 2 * h * kv + q * h;
  const double norms = 2 * h + (m.qk_norm() ? 2 * d : 0);
  const double dense_mlp = 3 * h * m.intermediate_size();
  const double moe_mlp = h * m.num_experts() + experts_per_layer * 3 * h * m.moe_intermediate_size() +
                         3 * h * m.shared_expert_intermediate_size();
  const double moe = static_cast<double>(MoeLayerCount(m, m.num_layers()));
  const double layers = m.num_layers() * (attn + norms) + moe * moe_mlp + (m.num_layers() - moe) * dense_mlp;
  const double embed = double(m.vocab_size()) * h;
  return embed + (m.tie_word_embeddings() ? 0 : embed) + h + layers;
}

}  // namespace

std::string SlidingWindowRule(const config::Model& m, uint64_t context) {
  const uint32_t w = m.sliding_window();
  if (w == 0 || context <= w) return "";
  return "exceeds the model's sliding_window (" + std::to_string(w) +
         "): its sliding layers attend to the last " + std::to_string(w) +
         " tokens only, and tpsim times full attention in every layer";
}

double ParameterCount(const config::Model& m) { return Parameters(m, m.num_experts()); }

double ActiveParameterCount(const config::Model& m) { return Parameters(m, m.num_experts_per_token()); }

}  // namespace tpsim::llm
