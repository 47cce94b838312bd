#include "llm/model.h"
#include "llm/opgraph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tpsim::llm {
namespace {

std::string ModelPath(const std::string& name) {
  return std::string(TPSIM_SOURCE_DIR) + "/configs/models/" + name + ".json";
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The text of the ConfigError thrown by `f`, or "" when none is thrown.
template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Catalog, ListsTheShippedModels) {
  EXPECT_EQ(CatalogNames(),
            (std::vector<std::string>{"llama-3.1-70b", "llama-3.1-8b", "llama-3.2-1b", "llama-3.2-3b",
                                      "mistral-7b-v0.3", "mixtral-8x7b", "qwen2.5-7b", "qwen3-0.6b",
                                      "qwen3-1.7b", "qwen3-14b", "qwen3-235b-a22b", "qwen3-30b-a3b",
                                      "qwen3-32b", "qwen3-4b", "qwen3-8b"}));
}

TEST(Catalog, EveryEntryImportsAndValidates) {
  for (const auto& name : CatalogNames()) {
    config::SourceMap locs(CatalogPath(name, {}, "model"));
    config::Model m = LoadModelFile(CatalogPath(name, {}, "model"), &locs);
    EXPECT_EQ(m.name(), name);
    std::vector<config::Diag> diags;
    ValidateModel(m, locs, "", &diags);
    for (const auto& d : diags) ADD_FAILURE() << d.str();
    EXPECT_GT(ParameterCount(m), 5e8) << name;
  }
}

TEST(Catalog, UnknownNameListsValidOnes) {
  std::string err = ErrorOf([] {
    CatalogPath("qwen3-5b", config::Location{"exp.textproto", 4, 3}, "model");
  });
  EXPECT_EQ(
      err.rfind("exp.textproto:4:3: model: qwen3-5b: unknown model; the catalog has: llama-3.1-70b, ", 0), 0u)
      << err;
  EXPECT_NE(err.find("qwen3-4b"), std::string::npos);
  // A near miss is named, as for experiments (config::DidYouMean).
  EXPECT_NE(ErrorOf([] {
              CatalogPath("qwen3-4", config::Location{"exp.textproto", 4, 3}, "model");
            }).find(", qwen3-8b, did you mean qwen3-4b?"),
            std::string::npos);
}

TEST(Import, Qwen3_4BPublishedDims) {
  config::Model m = ImportHuggingFace(ModelPath("qwen3-4b"));
  EXPECT_EQ(m.name(), "qwen3-4b");
  EXPECT_EQ(m.architecture(), "qwen3");
  EXPECT_TRUE(m.qk_norm());
  EXPECT_EQ(m.hidden_size(), 2560u);
  EXPECT_EQ(m.num_layers(), 36u);
  EXPECT_EQ(m.num_attention_heads(), 32u);
  EXPECT_EQ(m.num_key_value_heads(), 8u);
  EXPECT_EQ(m.head_dim(), 128u);
  EXPECT_EQ(m.intermediate_size(), 9728u);
  EXPECT_EQ(m.vocab_size(), 151936u);
  EXPECT_TRUE(m.tie_word_embeddings());
  EXPECT_EQ(m.num_experts(), 0u);
  EXPECT_EQ(m.max_position_embeddings(), 40960u);
}

TEST(Import, HeadDimDefaultsToHiddenOverHeads) {
  config::Model m = ImportHuggingFace(ModelPath("llama-3.1-8b"));
  EXPECT_EQ(m.architecture(), "llama");
  EXPECT_FALSE(m.qk_norm());
  EXPECT_EQ(m.head_dim(), 4096u / 32);
  EXPECT_FALSE(m.tie_word_embeddings());
  EXPECT_EQ(ImportHuggingFace(ModelPath("mistral-7b-v0.3")).architecture(), "mistral");
}

TEST(Import, Qwen3Moe) {
  config::Model m = ImportHuggingFace(ModelPath("qwen3-30b-a3b"));
  EXPECT_EQ(m.architecture(), "qwen3_moe");
  EXPECT_TRUE(m.qk_norm());
  EXPECT_EQ(m.num_experts(), 128u);
  EXPECT_EQ(m.num_experts_per_token(), 8u);
  EXPECT_EQ(m.moe_intermediate_size(), 768u);
  EXPECT_EQ(m.num_key_value_heads(), 4u);
  // Published as 30.5B total parameters.
  EXPECT_NEAR(ParameterCount(m), 30.5e9, 0.02 * 30.5e9);
}

// Published totals and activated parameters (the models' HuggingFace cards): Qwen3-30B-A3B
// 30.5B / 3.3B, Qwen3-235B-A22B 235B / 22B, Mixtral-8x7B 46.7B / 12.9B.
TEST(ParameterCount, MoeTotalAndActiveMatchPublished) {
  const config::Model q30 = ImportHuggingFace(ModelPath("qwen3-30b-a3b"));
  EXPECT_NEAR(ActiveParameterCount(q30), 3.3e9, 0.02 * 3.3e9);
  const config::Model q235 = ImportHuggingFace(ModelPath("qwen3-235b-a22b"));
  EXPECT_NEAR(ParameterCount(q235), 235e9, 0.02 * 235e9);
  EXPECT_NEAR(ActiveParameterCount(q235), 22e9, 0.02 * 22e9);
  const config::Model mix = ImportHuggingFace(ModelPath("mixtral-8x7b"));
  EXPECT_NEAR(ParameterCount(mix), 46.7e9, 0.02 * 46.7e9);
  EXPECT_NEAR(ActiveParameterCount(mix), 12.9e9, 0.02 * 12.9e9);
  // By hand: embeddings and LM head 2 x 32000 x 4096; per layer q, o 4096^2 each, k, v
  // 4096 x 1024 each, two norms, the router 4096 x 8, and 8 (all) or 2 (active) experts of
  // 3 x 4096 x 14336; the final norm.
  auto mixtral = [](double experts) {
    return 2 * 32000.0 * 4096 +
           32.0 *
               (2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 2 * 4096 + 4096 * 8 + experts * 3 * 4096.0 * 14336) +
           4096;
  };
  EXPECT_DOUBLE_EQ(ParameterCount(mix), mixtral(8));
  EXPECT_DOUBLE_EQ(ActiveParameterCount(mix), mixtral(2));
  // A dense model: all parameters are active.
  const config::Model dense = ImportHuggingFace(ModelPath("qwen3-4b"));
  EXPECT_DOUBLE_EQ(ActiveParameterCount(dense), ParameterCount(dense));
}

TEST(Import, Mixtral) {
  const config::Model m = ImportHuggingFace(ModelPath("mixtral-8x7b"));
  EXPECT_EQ(m.architecture(), "mixtral");
  EXPECT_FALSE(m.qk_norm());
  EXPECT_EQ(m.num_experts(), 8u);  // num_local_experts
  EXPECT_EQ(m.num_experts_per_token(), 2u);
  EXPECT_EQ(m.moe_intermediate_size(), 14336u);  // Mixtral's intermediate_size is its experts'
  EXPECT_TRUE(m.norm_topk_prob());
  EXPECT_EQ(m.head_dim(), 128u);
  for (uint32_t l = 0; l < m.num_layers(); ++l) EXPECT_TRUE(IsMoeLayer(m, l)) << l;
}

// decoder_sparse_step 2 with mlp_only_layers [0] on 4 layers: layer l is sparse when
// (l + 1) % 2 == 0 and l != 0, so layers 1 and 3; 0 and 2 have the dense MLP.
TEST(Import, SparseStepAndMlpOnlyLayers) {
  const std::string text = R"({
  "architectures": ["Qwen3MoeForCausalLM"],
  "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
  "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
  "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
  "norm_topk_prob": false, "decoder_sparse_step": 2, "mlp_only_layers": [0]
})";
  const config::Model m = ImportHuggingFaceText(text, "s.json");
  EXPECT_FALSE(m.norm_topk_prob());
  EXPECT_EQ(m.decoder_sparse_step(), 2u);
  ASSERT_EQ(m.mlp_only_layers_size(), 1);
  EXPECT_FALSE(IsMoeLayer(m, 0));
  EXPECT_TRUE(IsMoeLayer(m, 1));
  EXPECT_FALSE(IsMoeLayer(m, 2));
  EXPECT_TRUE(IsMoeLayer(m, 3));
  // Two dense layers (3 x 64 x 128 MLP) and two sparse ones (router 64 x 8 + 8 experts of
  // 3 x 64 x 32, or 2 active); attention 64 x 64 x 2 + 64 x 32 x 2, norms 2 x 64 + 2 x 16.
  const double attn = 2 * 64.0 * 64 + 2 * 64.0 * 32 + 2 * 64 + 2 * 16, embed = 2 * 1000.0 * 64 + 64;
  auto total = [&](double experts) {
    return embed + 4 * attn + 2 * (3 * 64.0 * 128) + 2 * (64 * 8 + experts * 3 * 64.0 * 32);
  };
  EXPECT_DOUBLE_EQ(ParameterCount(m), total(8));
  EXPECT_DOUBLE_EQ(ActiveParameterCount(m), total(2));
  // MoeLayerCount is IsMoeLayer's count, in closed form: every step from 0 to 5, with dense
  // layers repeated, past the end, and on and off the step.
  for (uint32_t step = 0; step <= 5; ++step) {
    config::Model c = m;
    c.set_decoder_sparse_step(step);
    c.clear_mlp_only_layers();
    for (uint32_t l : {7u, 3u, 3u, 0u, 100u, 11u}) c.add_mlp_only_layers(l);
    for (uint32_t layers : {0u, 1u, 5u, 12u, 40u}) {
      uint64_t brute = 0;
      for (uint32_t l = 0; l < layers; ++l) brute += IsMoeLayer(c, l);
      EXPECT_EQ(MoeLayerCount(c, layers), brute) << "step " << step << ", " << layers << " layers";
    }
  }
  // 2^31 - 1 layers with 200 dense ones: counted at once (a layer-by-layer count took hours).
  config::Model huge = m;
  huge.set_num_layers(2147483647);
  huge.set_decoder_sparse_step(1);
  for (uint32_t l = 0; l < 200; ++l) huge.add_mlp_only_layers(l);
  EXPECT_EQ(MoeLayerCount(huge, huge.num_layers()), 2147483647u - 200u);
  EXPECT_GT(ParameterCount(huge), 0);
  // A dense layer index past the model is refused at validation.
  config::Model bad = m;
  bad.add_mlp_only_layers(4);
  std::vector<config::Diag> diags;
  ValidateModel(bad, config::SourceMap{}, "model", &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].field, "model.mlp_only_layers");
  std::string bad_text = text;
  bad_text.replace(bad_text.find("[0]"), 3, "[\"x\"]");
  EXPECT_NE(ErrorOf([&] { ImportHuggingFaceText(bad_text, "s.json"); }).find("mlp_only_layers"),
            std::string::npos);
}

TEST(ParameterCount, MatchesPublished) {
  double qwen = ParameterCount(ImportHuggingFace(ModelPath("qwen3-4b")));
  EXPECT_NEAR(qwen, 4.02e9, 0.02 * 4.02e9);
  // embed 151936*2560 (tied) + 36 layers * 100930816 + final norm 2560.
  EXPECT_DOUBLE_EQ(qwen, 151936.0 * 2560 + 36.0 * 100930816 + 2560);
  double llama = ParameterCount(ImportHuggingFace(ModelPath("llama-3.1-8b")));
  EXPECT_NEAR(llama, 8.03e9, 0.02 * 8.03e9);
  EXPECT_DOUBLE_EQ(llama, 2 * 128256.0 * 4096 +
                              32.0 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3.0 * 4096 * 14336 + 2 * 4096) +
                              4096);
  EXPECT_NEAR(ParameterCount(ImportHuggingFace(ModelPath("llama-3.1-70b"))), 70.6e9, 0.02 * 70.6e9);
  EXPECT_NEAR(ParameterCount(ImportHuggingFace(ModelPath("mistral-7b-v0.3"))), 7.25e9, 0.02 * 7.25e9);
}

// Qwen2.5-7B (Qwen2ForCausalLM): Llama's shapes, no per-head norms, untied embeddings.
// Published as 7.61B parameters; by hand: embeddings and LM head 2 x 152064 x 3584; per layer
// q, o 3584^2 each, k, v 3584 x 512 each, gate, up, down 3584 x 18944 each, two norms; the
// final norm (its q/k/v biases, 28 x 4608 values, are not counted: llm/model.h).
TEST(Import, Qwen2_5_7B) {
  const config::Model m = ImportHuggingFace(ModelPath("qwen2.5-7b"));
  EXPECT_EQ(m.architecture(), "qwen2");
  EXPECT_FALSE(m.qk_norm());
  EXPECT_EQ(m.head_dim(), 128u);
  EXPECT_EQ(m.num_key_value_heads(), 4u);
  EXPECT_EQ(m.max_position_embeddings(), 131072u);
  EXPECT_EQ(m.sliding_window(), 0u);  // use_sliding_window false
  EXPECT_DOUBLE_EQ(ParameterCount(m),
                   2 * 152064.0 * 3584 +
                       28.0 * (2 * 3584.0 * 3584 + 2 * 3584.0 * 512 + 3 * 3584.0 * 18944 + 2 * 3584) + 3584);
  EXPECT_NEAR(ParameterCount(m), 7.61e9, 0.02 * 7.61e9);
}

// Sliding-window attention where the config puts it in effect, as transformers reads it; a
// quantized checkpoint refused.
TEST(Import, SlidingWindowIsReadAndQuantizationRefused) {
  auto window = [](const std::string& arch, const std::string& keys) {
    return ImportHuggingFaceText(R"({"architectures": [")" + arch + R"("], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
      "vocab_size": 1000)" + keys + "}",
                                 "w.json")
        .sliding_window();
  };
  // Mistral: sliding_window itself; absent is transformers' default 4096, null is none.
  EXPECT_EQ(window("MistralForCausalLM", R"(, "sliding_window": 4096)"), 4096u);
  EXPECT_EQ(window("MistralForCausalLM", ""), 4096u);
  EXPECT_EQ(window("MistralForCausalLM", R"(, "sliding_window": null)"), 0u);
  // Mixtral: absent is none.
  EXPECT_EQ(window("MixtralForCausalLM", R"(, "num_local_experts": 4, "num_experts_per_tok": 2)"), 0u);
  // Qwen: only with use_sliding_window, for the layers from max_window_layers (default 28) on.
  EXPECT_EQ(window("Qwen2ForCausalLM", R"(, "sliding_window": 2048)"), 0u);
  EXPECT_EQ(window("Qwen2ForCausalLM", R"(, "use_sliding_window": true, "sliding_window": 2048)"), 0u);
  EXPECT_EQ(window("Qwen2ForCausalLM",
                   R"(, "use_sliding_window": true, "sliding_window": 2048, "max_window_layers": 3)"),
            2048u);
  EXPECT_EQ(window("Qwen3ForCausalLM",
                   R"(, "use_sliding_window": true, "sliding_window": 2048, "max_window_layers": 4)"),
            0u);
  EXPECT_EQ(window("Qwen3ForCausalLM", R"(, "use_sliding_window": true, "max_window_layers": 0)"), 4096u);
  // layer_types names each layer's attention, with use_sliding_window true (without it, below).
  EXPECT_EQ(window("Qwen3ForCausalLM", R"(, "use_sliding_window": true, "sliding_window": 512,
      "layer_types": ["full_attention", "sliding_attention", "full_attention", "sliding_attention"])"),
            512u);
  EXPECT_EQ(window("Qwen3ForCausalLM", R"(, "use_sliding_window": true, "max_window_layers": 0,
      "layer_types": ["full_attention", "full_attention", "full_attention", "full_attention"])"),
            0u);
  // Llama has none.
  EXPECT_EQ(window("LlamaForCausalLM", R"(, "sliding_window": 16)"), 0u);
  // Qwen3-MoE (transformers 5: no max_window_layers, config.sliding_window in every layer): with
  // use_sliding_window every layer slides, whatever max_window_layers says. Before, it was read
  // as Qwen3's rule: the published max_window_layers 48 = num_hidden_layers meant no window.
  const std::string experts = R"(, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32)";
  EXPECT_EQ(
      window("Qwen3MoeForCausalLM",
             experts + R"(, "use_sliding_window": true, "sliding_window": 300, "max_window_layers": 48)"),
      300u);
  EXPECT_EQ(window("Qwen3MoeForCausalLM", experts + R"(, "use_sliding_window": true)"), 4096u);
  EXPECT_EQ(window("Qwen3MoeForCausalLM", experts + R"(, "sliding_window": 300)"), 0u);
  // Mistral, Mixtral and Phi-3 have no layer_types (MistralConfig only warns about one): it is not
  // read; before, "full_attention" everywhere hid a 300-token window.
  EXPECT_EQ(window("MistralForCausalLM", R"(, "sliding_window": 300, "layer_types": ["full_attention",
      "full_attention", "full_attention", "full_attention"])"),
            300u);
  // Bad values are located.
  EXPECT_EQ(ErrorOf([&] { window("MistralForCausalLM", R"(, "sliding_window": -1)"); }),
            "w.json:3:27: sliding_window: -1: must be a non-negative integer, at most 2147483647 (2^31-1)");
  EXPECT_EQ(ErrorOf([&] { window("Qwen3ForCausalLM", R"(, "layer_types": "sliding_attention")"); }),
            "w.json:3:27: layer_types: \"sliding_attention\": must be an array of \"full_attention\" and "
            "\"sliding_attention\"");
  // One entry a layer (3 entries for 4 layers were read, and one sliding entry made every layer
  // slide).
  EXPECT_EQ(ErrorOf([&] {
              window("Qwen3ForCausalLM", R"(, "use_sliding_window": true,
      "layer_types": ["sliding_attention", "full_attention", "full_attention"])");
            }),
            "w.json:4:7: layer_types: 3 entries: must name one attention per layer: num_hidden_layers is 4");
  // A quantized checkpoint is refused at its key (its weights are not workload.dtype's).
  EXPECT_EQ(ErrorOf([&] {
              window("Qwen2ForCausalLM", R"(, "quantization_config": {"bits": 4, "quant_method": "awq"})");
            }),
            "w.json:3:27: quantization_config: awq: quantized weights are not modelled (tpsim's weights are "
            "workload.dtype: bf16, fp16 or fp32); remove the key to time the model unquantized");
  EXPECT_EQ(window("Qwen2ForCausalLM", R"(, "quantization_config": null)"), 0u);
  // The rule a longer context breaks.
  config::Model m;
  m.set_sliding_window(4096);
  EXPECT_EQ(SlidingWindowRule(m, 4096), "");
  EXPECT_EQ(SlidingWindowRule(m, 4097),
            "exceeds the model's sliding_window (4096): its sliding layers attend to the last 4096 tokens "
            "only, and tpsim times full attention in every layer");
  m.set_sliding_window(0);
  EXPECT_EQ(SlidingWindowRule(m, 1u << 30), "");
}

TEST(Import, ExpertCountUnderEitherNameAndModelTypeChecked) {
  auto import = [](const std::string& arch, const std::string& keys) {
    return ImportHuggingFaceText(R"({"architectures": [")" + arch + R"("], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
      "vocab_size": 1000, "num_experts_per_tok": 2, "moe_intermediate_size": 32)" +
                                     keys + "}",
                                 "e.json");
  };
  // transformers 5 saves Qwen3-MoE's expert count as num_local_experts (Qwen3MoeConfig's
  // attribute_map), and reads Mixtral's from num_experts too. Before, each was refused with
  // "required key missing".
  EXPECT_EQ(import("Qwen3MoeForCausalLM", R"(, "num_local_experts": 8)").num_experts(), 8u);
  EXPECT_EQ(import("Qwen3MoeForCausalLM", R"(, "num_experts": 8)").num_experts(), 8u);
  EXPECT_EQ(import("MixtralForCausalLM", R"(, "num_experts": 8)").num_experts(), 8u);
  EXPECT_EQ(import("MixtralForCausalLM", R"(, "num_local_experts": 8, "num_experts": 8)").num_experts(), 8u);
  EXPECT_EQ(ErrorOf([&] { import("MixtralForCausalLM", R"(, "num_local_experts": 8, "num_experts": 4)"); }),
            "e.json:3:106: num_experts: 4: gives another expert count than num_local_experts (8); give one");
  // model_type is the family transformers builds: one that another listed architecture does
  // not match is refused (before, a Gemma 2 config listing LlamaForCausalLM too was timed as Llama).
  EXPECT_EQ(
      ErrorOf([&] {
        ImportHuggingFaceText(R"({"architectures": ["Gemma2ForCausalLM", "LlamaForCausalLM"],
      "model_type": "gemma2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
      "num_attention_heads": 4, "vocab_size": 1000})",
                              "g.json");
      }),
      "g.json:2:7: model_type: gemma2: does not match architectures' LlamaForCausalLM (model_type llama)");
}

// The longest context a small Qwen3 config with 40,960 positions and the extra `keys` imports to.
uint32_t PositionsWith(const std::string& keys) {
  return ImportHuggingFaceText(R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
      "vocab_size": 1000, "max_position_embeddings": 40960)" +
                                   keys + "}",
                               "p.json")
      .max_position_embeddings();
}

// rope_scaling extends the positions as vLLM derives a model's longest context (Qwen's
// documented YaRN setting takes Qwen3 from 40,960 to 131,072 positions).
TEST(Import, RopeScalingExtendsThePositions) {
  EXPECT_EQ(PositionsWith(""), 40960u);
  EXPECT_EQ(PositionsWith(R"(, "rope_scaling": null)"), 40960u);
  EXPECT_EQ(PositionsWith(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
      "original_max_position_embeddings": 32768})"),
            131072u);
  EXPECT_EQ(PositionsWith(R"(, "rope_scaling": {"type": "yarn", "factor": 2})"), 81920u);
  EXPECT_EQ(PositionsWith(R"(, "rope_scaling": {"type": "linear", "factor": 1.5})"), 61440u);
  // llama3's max_position_embeddings is already the extended one; a factor below 1 never shrinks.
  EXPECT_EQ(PositionsWith(R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
      "original_max_position_embeddings": 8192})"),
            40960u);
  EXPECT_EQ(ErrorOf([&] { PositionsWith(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 0.5})"); }),
            "p.json:3:61: rope_scaling: 0.5: factor must be a number from 1 to 1e6");
  EXPECT_EQ(ErrorOf([&] { PositionsWith(R"(, "rope_scaling": "yarn")"); }),
            "p.json:3:61: rope_scaling: \"yarn\": must be an object or null");
  // The catalog's Llama 3.1 (llama3 scaling) keeps its published 131,072.
  EXPECT_EQ(ImportHuggingFace(ModelPath("llama-3.1-8b")).max_position_embeddings(), 131072u);
  // 0 positions is a broken config, not the schema's "no bound" (before: imported as unbounded).
  EXPECT_EQ(ErrorOf([&] {
              ImportHuggingFaceText(R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
      "vocab_size": 1000, "max_position_embeddings": 0})",
                                    "z.json");
            }),
            "z.json:3:27: max_position_embeddings: 0: must be positive: the longest context the model takes "
            "(absent: the architecture's default)");
}

// Keys a config leaves out take the defaults of its transformers configuration class
// (huggingface/transformers 008e574, src/transformers/models/<model>/configuration_<model>.py):
// num_key_value_heads (null: num_attention_heads), head_dim, max_position_embeddings.
TEST(Import, OmittedKeysTakeTransformersDefaults) {
  struct Case {
    const char* arch;
    uint32_t kv, head_dim, positions;
  };
  // hidden 512, 8 heads: hidden / heads = 64.
  const Case cases[] = {
      {"LlamaForCausalLM", 8, 64, 2048},     {"MistralForCausalLM", 8, 64, 131072},
      {"MixtralForCausalLM", 8, 64, 131072}, {"Qwen2ForCausalLM", 32, 64, 32768},
      {"Qwen3ForCausalLM", 32, 128, 32768},  {"Qwen3MoeForCausalLM", 4, 64, 32768},
  };
  for (const Case& c : cases) {
    const std::string base = std::string(R"({"architectures": [")") + c.arch + R"("], "hidden_size": 512,
      "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 1000,
      "num_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 256)";
    const config::Model m = ImportHuggingFaceText(base + "}", "d.json");
    EXPECT_EQ(m.num_key_value_heads(), c.kv) << c.arch;
    EXPECT_EQ(m.head_dim(), c.head_dim) << c.arch;
    EXPECT_EQ(m.max_position_embeddings(), c.positions) << c.arch;
    // null num_key_value_heads: num_attention_heads; a key that is there is taken as it is.
    EXPECT_EQ(
        ImportHuggingFaceText(base + R"(, "num_key_value_heads": null})", "d.json").num_key_value_heads(), 8u)
        << c.arch;
    const config::Model set = ImportHuggingFaceText(
        base + R"(, "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 4096})", "d.json");
    EXPECT_EQ(set.num_key_value_heads(), 2u) << c.arch;
    EXPECT_EQ(set.head_dim(), 32u) << c.arch;
    EXPECT_EQ(set.max_position_embeddings(), 4096u) << c.arch;
  }
  // Every shipped config sets the keys whose default differs from hidden / heads and MHA.
  for (const std::string& name : CatalogNames()) {
    const std::string text = ReadText(ModelPath(name));
    EXPECT_NE(text.find("\"num_key_value_heads\""), std::string::npos) << name;
    EXPECT_NE(text.find("\"max_position_embeddings\""), std::string::npos) << name;
    if (text.find("Qwen3") != std::string::npos) {
      EXPECT_NE(text.find("\"head_dim\""), std::string::npos) << name;
    }
  }
}

// transformers 5 saves rope_scaling's object as rope_parameters (rope_theta inside); a
// non-empty rope_scaling is read first, and a per-layer-type rope_parameters at full_attention.
TEST(Import, RopeParametersExtendThePositions) {
  const std::string yarn = R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
      "rope_theta": 1000000.0})";
  EXPECT_EQ(PositionsWith(R"(, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0})"),
            40960u);
  EXPECT_EQ(PositionsWith(", \"rope_parameters\": " + yarn), 131072u);
  EXPECT_EQ(PositionsWith(", \"rope_scaling\": null, \"rope_parameters\": " + yarn), 131072u);
  EXPECT_EQ(PositionsWith(", \"rope_scaling\": {}, \"rope_parameters\": " + yarn), 131072u);
  EXPECT_EQ(PositionsWith(R"(, "rope_scaling": {"type": "linear", "factor": 2}, "rope_parameters": )" + yarn),
            81920u);
  EXPECT_EQ(PositionsWith(R"(, "rope_parameters": {"full_attention": )" + yarn +
                          R"(, "sliding_attention": {"rope_type": "default"}})"),
            131072u);
  EXPECT_EQ(ErrorOf([&] { PositionsWith(R"(, "rope_parameters": {"rope_type": "yarn", "factor": 0.5})"); }),
            "p.json:3:61: rope_parameters: 0.5: factor must be a number from 1 to 1e6");
  EXPECT_EQ(ErrorOf([&] { PositionsWith(R"(, "rope_parameters": 4)"); }),
            "p.json:3:61: rope_parameters: 4: must be an object or null");
}

constexpr const char* kGood = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "hidden_size": 64,
  "intermediate_size": 128,
  "num_hidden_layers": 2,
  "num_attention_heads": 4,
  "num_key_value_heads": 2,
  "vocab_size": 1000
})";

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

// Qwen2-MoE (Qwen1.5-MoE-A2.7B-Chat's config.json): 60 routed experts, top-4 without
// renormalisation, and shared experts of 5,632 every token goes through; the model card says
// 14.3B parameters in total and 2.7B activated.
TEST(Import, Qwen2Moe) {
  const std::string text = R"({"architectures": ["Qwen2MoeForCausalLM"], "decoder_sparse_step": 1,
    "hidden_size": 2048, "intermediate_size": 5632, "max_position_embeddings": 8192, "max_window_layers": 21,
    "moe_intermediate_size": 1408, "norm_topk_prob": false, "num_attention_heads": 16, "num_experts": 60,
    "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 16,
    "shared_expert_intermediate_size": 5632, "sliding_window": 32768, "tie_word_embeddings": false,
    "use_sliding_window": false, "vocab_size": 151936})";
  const config::Model m = ImportHuggingFaceText(text, "qwen1.5-moe-a2.7b.json");
  EXPECT_EQ(m.architecture(), "qwen2_moe");
  EXPECT_FALSE(m.qk_norm());
  EXPECT_EQ(m.head_dim(), 128u);
  EXPECT_EQ(m.num_experts(), 60u);
  EXPECT_EQ(m.num_experts_per_token(), 4u);
  EXPECT_FALSE(m.norm_topk_prob());
  EXPECT_EQ(m.moe_intermediate_size(), 1408u);
  EXPECT_EQ(m.shared_expert_intermediate_size(), 5632u);
  EXPECT_EQ(m.sliding_window(), 0u);
  std::vector<config::Diag> diags;
  ValidateModel(m, config::SourceMap("q.json"), "", &diags);
  for (const auto& d : diags) ADD_FAILURE() << d.str();
  // attention 4 H^2, two norms, router H x 60, experts 3 H Im each, shared 3 H Is; untied embeddings.
  const double h = 2048, layer = 4 * h * h + 2 * h + h * 60 + 3 * h * 5632;
  EXPECT_DOUBLE_EQ(ParameterCount(m), 2 * 151936 * h + 24 * (layer + 60 * 3 * h * 1408) + h);
  EXPECT_DOUBLE_EQ(ActiveParameterCount(m), 2 * 151936 * h + 24 * (layer + 4 * 3 * h * 1408) + h);
  EXPECT_NEAR(ParameterCount(m), 14.3e9, 0.02 * 14.3e9);
  EXPECT_NEAR(ActiveParameterCount(m), 2.7e9, 0.02 * 2.7e9);
  // The shared experts' size is required, as the routed experts' are; a sliding window applies
  // to the even layers below max_window_layers (Qwen2MoeConfig's layer_types).
  EXPECT_NE(ErrorOf([&] {
              ImportHuggingFaceText(Replace(text, "\"shared_expert_intermediate_size\": 5632,", ""),
                                    "q.json");
            }).find("shared_expert_intermediate_size: : required key missing"),
            std::string::npos);
  EXPECT_EQ(ImportHuggingFaceText(
                Replace(text, "\"use_sliding_window\": false", "\"use_sliding_window\": true"), "q.json")
                .sliding_window(),
            32768u);
  EXPECT_EQ(ImportHuggingFaceText(
                Replace(Replace(text, "\"use_sliding_window\": false", "\"use_sliding_window\": true"),
                        "\"max_window_layers\": 21", "\"max_window_layers\": 0"),
                "q.json")
                .sliding_window(),
            0u);
}

// Phi-3 and Phi-4 (Phi3ForCausalLM): Llama's layer with fused q/k/v and gate/up projections.
// microsoft/phi-4's config.json (14.7B parameters on its card) and Phi-3-mini-4k's (3.8B), whose
// sliding window of 2,047 tokens applies to every layer; Phi-3's su and yarn rope blocks are
// longrope (Phi3Config), its max_position_embeddings already the extended one.
// Gemma 1 (GemmaForCausalLM): google/gemma-7b's config.json, which leaves tie_word_embeddings out
// (GemmaConfig's default: true, so the embedding is counted once), and gemma-2b's (multi-query:
// one KV head). The Gemma report (arXiv 2403.08295, Table 2) gives 7,751,248,896 non-embedding
// parameters for 7B and 1,981,884,416 for 2B, which tpsim's count matches exactly (per layer
// q/k/v/o, the three MLP matrices and two norms, plus the final norm; by hand: 28 x (4 x 3072 x
// 4096 + 3 x 3072 x 24576 + 2 x 3072) + 3072). Its embedding counts (786,825,216 and
// 524,550,144) are of a 256,128-row table; the checkpoints' vocab_size is 256,000.
TEST(Import, Gemma) {
  const std::string gemma7b = R"({"architectures": ["GemmaForCausalLM"], "attention_bias": false,
    "attention_dropout": 0.0, "bos_token_id": 2, "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu",
    "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 24576,
    "max_position_embeddings": 8192, "model_type": "gemma", "num_attention_heads": 16,
    "num_hidden_layers": 28, "num_key_value_heads": 16, "pad_token_id": 0, "rms_norm_eps": 1e-06,
    "rope_scaling": null, "rope_theta": 10000.0, "torch_dtype": "bfloat16", "use_cache": true,
    "vocab_size": 256000})";
  const config::Model m = ImportHuggingFaceText(gemma7b, "gemma-7b.json");
  EXPECT_EQ(m.architecture(), "gemma");
  EXPECT_FALSE(m.qk_norm());
  EXPECT_TRUE(m.tie_word_embeddings());
  EXPECT_EQ(m.head_dim(), 256u);
  EXPECT_EQ(m.sliding_window(), 0u);
  EXPECT_DOUBLE_EQ(ParameterCount(m), 256000.0 * 3072 + 7751248896.0);
  // gemma-2b: no head_dim, num_key_value_heads or max_position_embeddings (GemmaConfig's
  // defaults: 256, 16 and 8192; the published config sets 1 KV head).
  const std::string gemma2b = R"({"architectures": ["GemmaForCausalLM"], "hidden_size": 2048,
    "intermediate_size": 16384, "num_attention_heads": 8, "num_hidden_layers": 18,
    "num_key_value_heads": 1, "vocab_size": 256000})";
  const config::Model m2 = ImportHuggingFaceText(gemma2b, "gemma-2b.json");
  EXPECT_EQ(m2.head_dim(), 256u);
  EXPECT_EQ(m2.num_key_value_heads(), 1u);
  EXPECT_EQ(m2.max_position_embeddings(), 8192u);
  EXPECT_TRUE(m2.tie_word_embeddings());
  const double h = 2048;
  EXPECT_DOUBLE_EQ(ParameterCount(m2),
                   256000 * h + 18 * (2 * h * 2048 + 2 * h * 256 + 3 * h * 16384 + 2 * h) + h);
  EXPECT_DOUBLE_EQ(ParameterCount(m2), 256000 * h + 1981884416.0);
  const config::Model untied = ImportHuggingFaceText(
      Replace(gemma2b, "\"vocab_size\"", "\"tie_word_embeddings\": false, \"vocab_size\""), "u.json");
  EXPECT_FALSE(untied.tie_word_embeddings());
}

TEST(Import, Phi3) {
  const std::string phi4 = R"({"architectures": ["Phi3ForCausalLM"], "hidden_size": 5120,
    "intermediate_size": 17920, "max_position_embeddings": 16384, "num_attention_heads": 40,
    "num_hidden_layers": 40, "num_key_value_heads": 10, "original_max_position_embeddings": 16384,
    "rope_scaling": null, "rope_theta": 250000, "sliding_window": null, "tie_word_embeddings": false,
    "vocab_size": 100352})";
  const config::Model m = ImportHuggingFaceText(phi4, "phi-4.json");
  EXPECT_EQ(m.architecture(), "phi3");
  EXPECT_FALSE(m.qk_norm());
  EXPECT_EQ(m.head_dim(), 128u);
  EXPECT_EQ(m.num_key_value_heads(), 10u);
  EXPECT_EQ(m.max_position_embeddings(), 16384u);
  EXPECT_EQ(m.sliding_window(), 0u);
  const double h = 5120;
  EXPECT_DOUBLE_EQ(ParameterCount(m),
                   2 * 100352 * h + 40 * (2 * h * h + 2 * h * 1280 + 3 * h * 17920 + 2 * h) + h);
  EXPECT_NEAR(ParameterCount(m), 14.7e9, 0.02 * 14.7e9);
  const std::string mini = R"({"architectures": ["Phi3ForCausalLM"], "hidden_size": 3072,
    "intermediate_size": 8192, "max_position_embeddings": 4096, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
    "rope_scaling": null, "sliding_window": 2047, "tie_word_embeddings": false, "vocab_size": 32064})";
  const config::Model m3 = ImportHuggingFaceText(mini, "phi-3-mini-4k.json");
  EXPECT_EQ(m3.sliding_window(), 2047u);
  EXPECT_NEAR(ParameterCount(m3), 3.8e9, 0.02 * 3.8e9);
  for (const char* type : {"su", "longrope", "yarn"}) {
    const std::string text =
        Replace(Replace(mini, "\"max_position_embeddings\": 4096", "\"max_position_embeddings\": 131072"),
                "\"rope_scaling\": null",
                std::string(R"("rope_scaling": {"type": ")") + type + R"(", "factor": 32})");
    EXPECT_EQ(ImportHuggingFaceText(text, "phi-3-mini-128k.json").max_position_embeddings(), 131072u) << type;
  }
}

TEST(ImportErrors, GoodTinyConfig) {
  config::Model m = ImportHuggingFaceText(kGood, "dir/tiny.json");
  EXPECT_EQ(m.name(), "tiny");
  EXPECT_EQ(m.head_dim(), 128u);  // Qwen3Config's default, not hidden / heads (16)
}

TEST(ImportErrors, MissingKey) {
  std::string text = Replace(kGood, "  \"vocab_size\": 1000\n", "  \"rope_theta\": 1e6\n");
  EXPECT_EQ(ErrorOf([&] { ImportHuggingFaceText(text, "b.json"); }),
            "b.json:1:1: vocab_size: : required key missing");
}

// A value nested 100,000 deep (a 200 KB file) is named by its kind, and a long one clipped:
// quoting it recursed once a level and overflowed the stack (SIGSEGV, exit 139).
TEST(ImportErrors, DeeplyNestedOrLongValuesAreQuotedShort) {
  const std::string deep =
      Replace(kGood, "\"num_hidden_layers\": 2",
              "\"num_hidden_layers\": " + std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(ErrorOf([&] { ImportHuggingFaceText(deep, "b.json"); }),
            "b.json:5:3: num_hidden_layers: an array nested more than 64 levels deep: must be a non-negative "
            "integer, at most 2147483647 (2^31-1)");
  std::string list = "[0";
  for (int i = 1; i < 1000; ++i) list += "," + std::to_string(i);
  const std::string err = ErrorOf([&] {
    ImportHuggingFaceText(Replace(kGood, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": " + list + "]"),
                          "b.json");
  });
  EXPECT_NE(err.find(": [0,1,2,3,"), std::string::npos) << err;
  EXPECT_LT(err.size(), 320u) << err;
}

TEST(ImportErrors, UnsupportedArchitecture) {
  std::string text = Replace(kGood, "Qwen3ForCausalLM", "GPT2LMHeadModel");
  EXPECT_EQ(
      ErrorOf([&] { ImportHuggingFaceText(text, "b.json"); }),
      "b.json:2:3: architectures: GPT2LMHeadModel: unsupported architecture; supported: "
      "LlamaForCausalLM, MistralForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, MixtralForCausalLM, "
      "Qwen2ForCausalLM, Qwen2MoeForCausalLM, Phi3ForCausalLM, GemmaForCausalLM");
}

TEST(ImportErrors, WrongType) {
  std::string text = Replace(kGood, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": \"2\"");
  EXPECT_EQ(
      ErrorOf([&] { ImportHuggingFaceText(text, "b.json"); }),
      "b.json:5:3: num_hidden_layers: \"2\": must be a non-negative integer, at most 2147483647 (2^31-1)");
  text = Replace(kGood, "\"hidden_size\": 64", "\"hidden_size\": -64");
  EXPECT_EQ(ErrorOf([&] { ImportHuggingFaceText(text, "b.json"); }),
            "b.json:3:3: hidden_size: -64: must be a non-negative integer, at most 2147483647 (2^31-1)");
  text = Replace(kGood, "\"vocab_size\": 1000", "\"vocab_size\": 1000, \"tie_word_embeddings\": 1");
  EXPECT_EQ(ErrorOf([&] { ImportHuggingFaceText(text, "b.json"); }),
            "b.json:8:23: tie_word_embeddings: 1: must be true or false");
}

TEST(ImportErrors, MalformedJson) {
  std::string text = Replace(kGood, "\"num_hidden_layers\": 2,", "\"num_hidden_layers\": ,");
  EXPECT_EQ(ErrorOf([&] { ImportHuggingFaceText(text, "b.json"); }),
            "b.json:5:24: <json>: : malformed JSON: syntax error while parsing value - unexpected ','; "
            "expected '[', '{', or a literal");
  EXPECT_EQ(ErrorOf([] { ImportHuggingFaceText("[1, 2]", "b.json"); }),
            "b.json:1:1: <json>: array: top level must be a JSON object");
}

// The parser stops at a NUL byte: a second object after it was accepted unread, and errors were
// placed past it (the key locator read on); a config.json with 100,000 keys took minutes to
// locate them (each from the start of the text).
TEST(ImportErrors, NulBytesAreRefusedAndManyKeysLocatedInLinearTime) {
  const std::string nul = std::string(kGood) + std::string(1, '\0') + "{\"hidden_size\": \"x\"}";
  EXPECT_EQ(ErrorOf([&] { ImportHuggingFaceText(nul, "n.json"); }),
            "n.json:9:2: <json>: \\0: a NUL byte: JSON text has none");
  std::string extra;
  for (int i = 0; i < 100000; ++i) extra += "\"k" + std::to_string(i) + "\": 0,\n";
  const std::string many = Replace(Replace(kGood, "\"hidden_size\": 64,", extra + "\"hidden_size\": 64,"),
                                   "\"num_attention_heads\": 4", "\"num_attention_heads\": -4");
  const std::string err = ErrorOf([&] { ImportHuggingFaceText(many, "m.json"); });
  EXPECT_NE(err.find("m.json:100006:3: num_attention_heads: -4: must be"), std::string::npos)
      << err.substr(0, 300);
}

// A multimodal config's text model under text_config: said where the keys are (it said only
// "hidden_size: : required key missing").
TEST(ImportErrors, TextConfigIsNamed) {
  const std::string err = ErrorOf([] {
    ImportHuggingFaceText(R"({"architectures": ["Qwen3ForCausalLM"],
  "text_config": {"hidden_size": 64, "num_hidden_layers": 2}})",
                          "vl.json");
  });
  EXPECT_NE(err.find("vl.json:2:3: text_config: : the language model's keys are under text_config"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("hidden_size: : required key missing"), std::string::npos) << err;
}

// decoder_sparse_step 0 divides by zero in transformers; it was read as unset (every layer sparse).
TEST(ImportErrors, DecoderSparseStepZeroIsRefused) {
  std::string text = Replace(kGood, "Qwen3ForCausalLM", "Qwen3MoeForCausalLM");
  text = Replace(
      text, "\"hidden_size\": 64,",
      "\"hidden_size\": 64, \"num_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, "
      "\"decoder_sparse_step\": 0,");
  const std::string err = ErrorOf([&] { ImportHuggingFaceText(text, "m.json"); });
  EXPECT_NE(err.find("m.json:3:95: decoder_sparse_step: 0: must be positive"), std::string::npos) << err;
}

TEST(ImportErrors, SeveralProblemsAreAllReported) {
  std::string text = Replace(kGood, "  \"hidden_size\": 64,\n", "");
  text = Replace(text, "\"num_attention_heads\": 4", "\"num_attention_heads\": 4.5");
  std::string err = ErrorOf([&] { ImportHuggingFaceText(text, "b.json"); });
  EXPECT_NE(err.find("b.json:1:1: hidden_size: : required key missing"), std::string::npos) << err;
  EXPECT_NE(err.find("b.json:5:3: num_attention_heads: 4.5: must be"), std::string::npos) << err;
}

TEST(ImportErrors, MoeKeysRequired) {
  std::string text = Replace(kGood, "Qwen3ForCausalLM", "Qwen3MoeForCausalLM");
  std::string err = ErrorOf([&] { ImportHuggingFaceText(text, "m.json"); });
  EXPECT_NE(err.find("m.json:1:1: num_experts: : required key missing"), std::string::npos) << err;
  EXPECT_NE(err.find("m.json:1:1: num_experts_per_tok: : required key missing"), std::string::npos) << err;
  EXPECT_NE(err.find("m.json:1:1: moe_intermediate_size: : required key missing"), std::string::npos) << err;
}

// No input makes the importer crash or throw anything but ConfigError.
TEST(ImportErrors, EveryTruncationIsAConfigError) {
  std::string text = ReadText(ModelPath("qwen3-30b-a3b"));
  ASSERT_FALSE(text.empty());
  for (size_t n = 0; n + 2 < text.size(); ++n) {
    try {
      ImportHuggingFaceText(text.substr(0, n), "t.json");
      ADD_FAILURE() << "prefix of " << n << " bytes imported";
    } catch (const config::ConfigError&) {
    }
  }
  for (const char* s :
       {"", "null", "{}", "{\"architectures\": 5}", "{\"architectures\": []}", "{\"architectures\": [null]}",
        "\xff\xfe", "{\"a\": \"\\ud800\"}", "[[[[[[[[[[",
        "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 99999999999999999999}"}) {
    EXPECT_NE(ErrorOf([&] { ImportHuggingFaceText(s, "t.json"); }), "") << s;
  }
}

TEST(Validate, LocatesFieldsThroughTheSourceMap) {
  std::string text = Replace(kGood, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3");
  text = Replace(text, "\"hidden_size\": 64", "\"hidden_size\": 0");
  text = Replace(text, "Qwen3ForCausalLM", "LlamaForCausalLM");  // head_dim: hidden / heads
  config::SourceMap file_locs("e.json");
  config::Model m = ImportHuggingFaceText(text, "e.json", &file_locs);
  config::SourceMap locs("exp.textproto");
  locs.Merge("model", file_locs, config::Location{"exp.textproto", 2, 1});
  std::vector<config::Diag> diags;
  ValidateModel(m, locs, "model", &diags);
  ASSERT_EQ(diags.size(), 3u);
  EXPECT_EQ(diags[0].str(), "e.json:3:3: model.hidden_size: 0: must be positive");
  // head_dim was not written (derived as 0 / 4): located at hidden_size, which it comes from, and
  // said to be absent (it was shown as a written 0 at the model's anchor).
  EXPECT_EQ(
      diags[1].str(),
      "e.json:3:3: model.head_dim: absent, hidden_size / num_attention_heads = 0 / 4 = 0: must be positive");
  EXPECT_EQ(diags[2].str(),
            "e.json:7:3: model.num_key_value_heads: 3: num_attention_heads (4) must be divisible by "
            "num_key_value_heads (3)");
}

TEST(Validate, MoeConsistency) {
  config::Model m = ImportHuggingFace(ModelPath("qwen3-30b-a3b"));
  m.set_num_experts_per_token(200);
  m.set_moe_intermediate_size(0);
  std::vector<config::Diag> diags;
  ValidateModel(m, config::SourceMap("x"), "model", &diags);
  ASSERT_EQ(diags.size(), 2u);
  EXPECT_EQ(diags[0].str(), "x:1:1: model.num_experts_per_token: 200: must be at most num_experts (128)");
  EXPECT_EQ(diags[1].str(), "x:1:1: model.moe_intermediate_size: 0: must be positive");
  // At most 65,536 experts (16 million took over 2.5 GB and 2 minutes a run).
  config::Model many = ImportHuggingFace(ModelPath("qwen3-30b-a3b"));
  many.set_num_experts(65536);
  diags.clear();
  ValidateModel(many, config::SourceMap("x"), "model", &diags);
  EXPECT_TRUE(diags.empty());
  many.set_num_experts(65537);
  ValidateModel(many, config::SourceMap("x"), "model", &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].str(), "x:1:1: model.num_experts: 65537: must be at most 65536");
  diags.clear();
  // Every MoE architecture (kArchitectures' flag) needs experts; a misspelt one is named.
  for (const char* arch : {"qwen3_moe", "qwen2_moe", "mixtral"}) {
    config::Model dense = ImportHuggingFace(ModelPath("qwen3-4b"));
    dense.set_architecture(arch);
    diags.clear();
    ValidateModel(dense, config::SourceMap("x"), "model", &diags);
    ASSERT_EQ(diags.size(), 1u) << arch;
    EXPECT_EQ(diags[0].str(), std::string("x:1:1: model.num_experts: 0: must be positive for ") + arch);
  }
  config::Model typo = ImportHuggingFace(ModelPath("qwen3-4b"));
  typo.set_architecture("qwen3moe");
  diags.clear();
  ValidateModel(typo, config::SourceMap("x"), "model", &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(
      diags[0].str(),
      "x:1:1: model.architecture: qwen3moe: unknown architecture; valid: llama, mistral, qwen3, qwen3_moe, "
      "mixtral, qwen2, qwen2_moe, phi3, gemma, did you mean qwen3_moe?");
  // A dense model's expert fields: each refused at its field (moe_intermediate_size,
  // decoder_sparse_step, mlp_only_layers and norm_topk_prob were accepted and changed nothing).
  config::Model dense = ImportHuggingFace(ModelPath("qwen3-4b"));
  dense.set_moe_intermediate_size(128);
  dense.set_decoder_sparse_step(2);
  dense.add_mlp_only_layers(3);
  dense.set_norm_topk_prob(true);
  diags.clear();
  ValidateModel(dense, config::SourceMap("x"), "model", &diags);
  ASSERT_EQ(diags.size(), 4u);
  EXPECT_EQ(
      diags[0].str(),
      "x:1:1: model.moe_intermediate_size: 128: must be 0 when num_experts is 0 (dense model: its MLP is "
      "intermediate_size)");
  EXPECT_EQ(
      diags[1].str(),
      "x:1:1: model.decoder_sparse_step: 2: must be 0 when num_experts is 0 (dense model: every layer is "
      "dense)");
  EXPECT_EQ(
      diags[2].str(),
      "x:1:1: model.mlp_only_layers: 3: must be empty when num_experts is 0 (dense model: every layer is "
      "dense)");
  EXPECT_EQ(
      diags[3].str(),
      "x:1:1: model.norm_topk_prob: true: must be false when num_experts is 0 (dense model: no router)");
}

class LoadModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tpsim_llm_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::string p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  std::filesystem::path dir_;
};

TEST_F(LoadModelFileTest, TextprotoAndModelJson) {
  std::string tp = Write("tiny.textproto",
                         "architecture: \"llama\"\nhidden_size: 64\nnum_layers: 2\nnum_attention_heads: 4\n"
                         "num_key_value_heads: 2\nhead_dim: 16\nintermediate_size: 128\nvocab_size: 100\n");
  config::SourceMap locs(tp);
  config::Model m = LoadModelFile(tp, &locs);
  EXPECT_EQ(m.name(), "tiny");
  EXPECT_EQ(m.hidden_size(), 64u);
  EXPECT_EQ(locs.Find("num_layers").line, 3);

  std::string js = Write("proto.json", R"({"name": "p", "hiddenSize": 32, "numLayers": 1})");
  m = LoadModelFile(js, nullptr);
  EXPECT_EQ(m.name(), "p");
  EXPECT_EQ(m.hidden_size(), 32u);

  std::string hf = Write("hf.json", kGood);
  config::SourceMap hf_locs(hf);
  m = LoadModelFile(hf, &hf_locs);
  EXPECT_EQ(m.name(), "hf");
  EXPECT_EQ(hf_locs.Find("num_layers").line, 5);  // the "num_hidden_layers" key

  // The extension in any case (UPPER.JSON was read as a textproto: "is not a model config").
  std::string upper = Write("UPPER.JSON", kGood);
  EXPECT_EQ(LoadModelFile(upper, nullptr).num_layers(), 2u);
  std::string proto_upper = Write("P.JSON", R"({"name": "p", "hiddenSize": 32, "numLayers": 1})");
  EXPECT_EQ(LoadModelFile(proto_upper, nullptr).hidden_size(), 32u);

  std::string bad = Write("bad.json", "{\"architectures\": [\"X\"],\n");
  EXPECT_NE(ErrorOf([&] { LoadModelFile(bad, nullptr); }).find("bad.json:2:1: <json>: : malformed JSON"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { LoadModelFile((dir_ / "absent.json").string(), nullptr); }), "");
}

// A key given twice in config.json was read with the last value (nlohmann's rule) but located
// at the first: "hfdup.json:3:3: hidden_size: 0: must be positive" on the line holding 64.
// It is refused at its second occurrence, in a nested object too.
// A config.json past 4 MiB is refused before it is parsed (a 64 MiB one took 4 GB and 7 s); a
// model file's JSON is told from a config.json without building its document.
TEST(Import, AConfigJsonPastFourMebibytesIsRefused) {
  const std::string head = R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "vocab_size": 1000, "junk": [)";
  std::string big = head;
  while (big.size() <= (size_t{4} << 20)) big += "{},";
  big += "{}]}";
  EXPECT_EQ(ErrorOf([&] { ImportHuggingFaceText(big, "big.json"); }),
            "big.json:1:1: <json>: " + std::to_string(big.size()) +
                " bytes: a HuggingFace config.json is read up to 4 MiB (4194304 bytes; published ones are a "
                "few KB)");
  EXPECT_EQ(ImportHuggingFaceText(head + "{}]}", "small.json").num_layers(), 4u);
}

TEST(Import, DuplicateKeysAreRefusedAtTheSecondOne) {
  const std::string dup =
      Replace(kGood, "\"hidden_size\": 64,", "\"hidden_size\": 64,\n  \"hidden_size\": 0,");
  EXPECT_EQ(ErrorOf([&] { ImportHuggingFaceText(dup, "hfdup.json"); }),
            "hfdup.json:4:4: hidden_size: : specified more than once (first on line 3)");
  const std::string nested =
      Replace(kGood, "\"hidden_size\": 64,",
              "\"hidden_size\": 64,\n  \"rope_scaling\": {\"factor\": 2,\n \"factor\": 4},");
  EXPECT_EQ(ErrorOf([&] { ImportHuggingFaceText(nested, "hfdup.json"); }),
            "hfdup.json:5:3: factor: : specified more than once (first on line 4)");
  // The same key in two objects, or a key's text as a value, is no duplicate.
  const std::string ok =
      Replace(kGood, "\"hidden_size\": 64,",
              "\"hidden_size\": 64,\n  \"x\": {\"hidden_size\": 1}, \"y\": [\"hidden_size\"],");
  EXPECT_EQ(ErrorOf([&] { ImportHuggingFaceText(ok, "hfok.json"); }), "");
}

// A duplicate spelt with JSON escapes is the same key to the parser (it kept the last value:
// "hidden\u005fsize": 512 replaced 64 silently); keys are compared as the parser decodes them.
TEST(Import, DuplicateKeysSpeltWithEscapesAreRefused) {
  EXPECT_EQ(ErrorOf([&] {
              ImportHuggingFaceText(Replace(kGood, "\"hidden_size\": 64,",
                                            "\"hidden_size\": 64,\n  \"hidden\\u005fsize\": 512,"),
                                    "esc.json");
            }),
            "esc.json:4:4: hidden_size: : specified more than once (first on line 3)");
  // \/ is '/', \u00e9 is U+00E9 (UTF-8 C3 A9), and the pair \ud83d\ude00 is U+1F600 (F0 9F 98 80).
  EXPECT_EQ(ErrorOf([&] {
              ImportHuggingFaceText(
                  Replace(kGood, "\"hidden_size\": 64,", "\"hidden_size\": 64, \"a/b\": 1, \"a\\/b\": 2,"),
                  "esc.json");
            }),
            "esc.json:3:33: a/b: : specified more than once (first on line 3)");
  EXPECT_EQ(ErrorOf([&] {
              ImportHuggingFaceText(Replace(kGood, "\"hidden_size\": 64,",
                                            "\"hidden_size\": 64, \"\xc3\xa9\": 1, \"\\u00e9\": 2,"),
                                    "esc.json");
            }).rfind("esc.json:3:32: ", 0),
            0u);
  EXPECT_NE(ErrorOf([&] {
              ImportHuggingFaceText(
                  Replace(kGood, "\"hidden_size\": 64,",
                          "\"hidden_size\": 64, \"\xf0\x9f\x98\x80\": 1, \"\\ud83d\\ude00\": 2,"),
                  "esc.json");
            }).find("specified more than once"),
            std::string::npos);
  // Escapes that spell different keys are no duplicate.
  EXPECT_EQ(ErrorOf([&] {
              ImportHuggingFaceText(
                  Replace(kGood, "\"hidden_size\": 64,",
                          "\"hidden_size\": 64, \"\\u0061\": 1, \"\\u0062\": 2, \"\\n\": 3,"),
                  "esc.json");
            }),
            "");
}

// The importer refuses past the schema's limit for a Model field (2^31-1, as
// config::CheckIntegerRanges does), at the key and with that limit: 2^32 was "at most
// 4294967295", then 2^32 - 1 passed the importer to be refused as "at most 2147483647".
TEST(ImportErrors, IntegersPastTheSchemasLimitAreRefusedAtTheirKey) {
  EXPECT_EQ(
      ErrorOf([&] {
        ImportHuggingFaceText(Replace(kGood, "\"vocab_size\": 1000", "\"vocab_size\": 2147483648"), "v.json");
      }),
      "v.json:8:3: vocab_size: 2147483648: must be a non-negative integer, at most 2147483647 (2^31-1)");
  EXPECT_EQ(
      ErrorOf([&] {
        ImportHuggingFaceText(Replace(kGood, "\"hidden_size\": 64", "\"hidden_size\": 4294967296"), "v.json");
      }),
      "v.json:3:3: hidden_size: 4294967296: must be a non-negative integer, at most 2147483647 (2^31-1)");
  EXPECT_EQ(
      ImportHuggingFaceText(Replace(kGood, "\"vocab_size\": 1000", "\"vocab_size\": 2147483647"), "v.json")
          .vocab_size(),
      2147483647u);
  // max_window_layers is no Model field: any uint32 (past num_hidden_layers: no layer slides).
  EXPECT_EQ(ImportHuggingFaceText(Replace(kGood, "\"vocab_size\": 1000",
                                          "\"vocab_size\": 1000, \"use_sliding_window\": true, "
                                          "\"max_window_layers\": 4294967295"),
                                  "v.json")
                .sliding_window(),
            0u);
}

// A rope factor that takes the context past 2^31-1 positions is refused at rope_scaling with the
// product: it was refused only past 2^32-1, so 4,096,000,000 was blamed on the file's
// max_position_embeddings (40960) by the schema's check. By hand: 40960 x 52428 = 2,147,450,880
// fits 2,147,483,647; 40960 x 52429 = 2,147,491,840 does not; 32768 x 65536 = 2^31 is one past.
TEST(Import, RopeFactorPastTheLimitIsBlamedOnTheFactor) {
  EXPECT_EQ(PositionsWith(R"(, "rope_scaling": {"type": "yarn", "factor": 52428})"), 2147450880u);
  EXPECT_EQ(
      ErrorOf([&] { PositionsWith(R"(, "rope_scaling": {"type": "yarn", "factor": 52429})"); }),
      "p.json:3:61: rope_scaling: 52429: factor x max_position_embeddings (40960) = 2147491840 positions: "
      "the extended context must be at most 2147483647 (2^31-1)");
  EXPECT_EQ(
      ErrorOf([&] {
        PositionsWith(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 65536,
      "original_max_position_embeddings": 32768})");
      }),
      "p.json:3:61: rope_scaling: 65536: factor x original_max_position_embeddings (32768) = 2147483648 "
      "positions: the extended context must be at most 2147483647 (2^31-1)");
  EXPECT_EQ(ErrorOf([&] {
              PositionsWith(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 2,
      "original_max_position_embeddings": 2147483648})");
            }),
            "p.json:3:61: rope_scaling: 2147483648: original_max_position_embeddings must be a positive "
            "integer, at most 2147483647 (2^31-1)");
  // 0 positions to scale were read as no scaling.
  EXPECT_EQ(
      ErrorOf([&] {
        PositionsWith(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 2,
      "original_max_position_embeddings": 0})");
      }),
      "p.json:3:61: rope_scaling: 0: original_max_position_embeddings must be a positive integer, at most "
      "2147483647 (2^31-1)");
}

// Qwen2 and Qwen3 (and Qwen2-MoE) slide only with use_sliding_window true, layer_types or not:
// their transformers configs set sliding_window to None (Qwen2-MoE: 0) without it, and a
// "sliding_attention" layer takes config.sliding_window. Before, layer_types imposed the window.
TEST(Import, LayerTypesSlideOnlyWithUseSlidingWindow) {
  const std::string lt = R"(, "sliding_window": 300, "layer_types": ["full_attention", "sliding_attention",
      "full_attention", "sliding_attention"])";
  for (const char* arch : {"Qwen3ForCausalLM", "Qwen2ForCausalLM"}) {
    const std::string head = std::string(R"({"architectures": [")") + arch + R"("], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "vocab_size": 1000)";
    EXPECT_EQ(ImportHuggingFaceText(head + lt + "}", "w.json").sliding_window(), 0u) << arch;
    EXPECT_EQ(ImportHuggingFaceText(head + R"(, "use_sliding_window": false)" + lt + "}", "w.json")
                  .sliding_window(),
              0u)
        << arch;
    EXPECT_EQ(
        ImportHuggingFaceText(head + R"(, "use_sliding_window": true)" + lt + "}", "w.json").sliding_window(),
        300u)
        << arch;
  }
  // Read whatever the layers: "yes" passed where no layer slid; an unknown kind was full
  // attention; a model_type that is no string was not compared.
  const std::string q3 = R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "vocab_size": 1000)";
  EXPECT_NE(ErrorOf([&] {
              ImportHuggingFaceText(
                  q3 + R"(, "use_sliding_window": "yes", "layer_types": ["full_attention", "full_attention",
                  "full_attention", "full_attention"]})",
                  "w.json");
            }).find("use_sliding_window: \"yes\": must be true or false"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf([&] {
        ImportHuggingFaceText(q3 + R"(, "use_sliding_window": true, "layer_types": ["banana"]})", "w.json");
      }).find("layer_types: [\"banana\"]: must be an array of \"full_attention\" and \"sliding_attention\""),
      std::string::npos);
  EXPECT_NE(ErrorOf([&] {
              ImportHuggingFaceText(q3 + R"(, "model_type": 5})", "w.json");
            }).find("model_type: 5: must be a string"),
            std::string::npos);
  const std::string moe = R"({"architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "vocab_size": 1000,
      "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
      "shared_expert_intermediate_size": 32)";
  EXPECT_EQ(ImportHuggingFaceText(moe + lt + "}", "w.json").sliding_window(), 0u);
  EXPECT_EQ(
      ImportHuggingFaceText(moe + R"(, "use_sliding_window": true)" + lt + "}", "w.json").sliding_window(),
      300u);
}

// ValidateModel's diagnostics for config.json `text` imported as d.json under "model".
std::vector<std::string> ImportedDiags(const std::string& text) {
  config::SourceMap file_locs("d.json");
  const config::Model m = ImportHuggingFaceText(text, "d.json", &file_locs);
  config::SourceMap locs("d.json");
  locs.Merge("model", file_locs, config::Location{"d.json", 1, 1});
  std::vector<config::Diag> diags;
  ValidateModel(m, locs, "model", &diags);
  std::vector<std::string> out;
  for (const auto& d : diags) out.push_back(d.str());
  return out;
}

// A value the file leaves out is said to be absent, with how it was derived, at the key it comes
// from: it was shown as if written ("num_key_value_heads: 32" at file:1:1).
TEST(Validate, DefaultedAndDerivedValuesAreSaidToBeAbsent) {
  // Qwen3 without num_key_value_heads: Qwen3Config's 32, which 16 heads do not divide; located
  // at architectures (line 2).
  EXPECT_EQ(
      ImportedDiags(Replace(Replace(kGood, "  \"num_key_value_heads\": 2,\n", ""),
                            "\"num_attention_heads\": 4", "\"num_attention_heads\": 16")),
      std::vector<std::string>{"d.json:2:3: model.num_key_value_heads: absent, so qwen3's default (32) as "
                               "transformers has it: num_attention_heads (16) must be divisible by "
                               "num_key_value_heads (32)"});
  // Llama: hidden 16 over 32 heads, no head_dim: 16 / 32 = 0, located at hidden_size (line 3).
  const std::string llama = Replace(Replace(kGood, "Qwen3ForCausalLM", "LlamaForCausalLM"),
                                    "\"hidden_size\": 64", "\"hidden_size\": 16");
  EXPECT_EQ(
      ImportedDiags(Replace(Replace(llama, "\"num_attention_heads\": 4", "\"num_attention_heads\": 32"),
                            "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 8")),
      std::vector<std::string>{"d.json:3:3: model.head_dim: absent, hidden_size / num_attention_heads = "
                               "16 / 32 = 0: must be positive"});
  // Llama without num_key_value_heads takes num_attention_heads (0 here): located there (line 6).
  EXPECT_EQ(
      ImportedDiags(Replace(Replace(llama, "  \"num_key_value_heads\": 2,\n", ""),
                            "\"num_attention_heads\": 4", "\"num_attention_heads\": 0")),
      (std::vector<std::string>{
          "d.json:6:3: model.num_attention_heads: 0: must be positive",
          "d.json:6:3: model.num_key_value_heads: absent, so num_attention_heads (0) as transformers "
          "defaults: must be positive",
          "d.json:3:3: model.head_dim: absent, 0 with no num_attention_heads to divide hidden_size by: must "
          "be positive"}));
  // Written values are shown as written.
  EXPECT_EQ(
      ImportedDiags(Replace(kGood, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3")),
      std::vector<std::string>{"d.json:7:3: model.num_key_value_heads: 3: num_attention_heads (4) must be "
                               "divisible by num_key_value_heads (3)"});
}

// A null num_key_value_heads is said to be null, with what it was taken as (num_attention_heads,
// as transformers 4 reads a null), at its own key: it was shown as the number, as if written
// ("model.num_key_value_heads: 0: must be positive"). A null head_dim is read as if absent, and
// said so. kGood's lines: num_attention_heads 6, num_key_value_heads 7, vocab_size 8.
TEST(Validate, NullValuesAreSaidToBeNull) {
  const std::string llama = Replace(kGood, "Qwen3ForCausalLM", "LlamaForCausalLM");
  // 0 heads, kv null: kv is the heads' 0; head_dim (absent) 64 / 0 cannot be derived.
  EXPECT_EQ(
      ImportedDiags(Replace(Replace(llama, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": null"),
                            "\"num_attention_heads\": 4", "\"num_attention_heads\": 0")),
      (std::vector<std::string>{
          "d.json:6:3: model.num_attention_heads: 0: must be positive",
          "d.json:7:3: model.num_key_value_heads: null, so num_attention_heads (0) as transformers 4 reads "
          "a null: must be positive",
          "d.json:3:3: model.head_dim: absent, 0 with no num_attention_heads to divide hidden_size by: must "
          "be positive"}));
  // hidden 16 over 32 heads (8 KV heads), head_dim null: 16 / 32 = 0, at head_dim's own key (line 8).
  EXPECT_EQ(ImportedDiags(Replace(Replace(Replace(llama, "\"hidden_size\": 64", "\"hidden_size\": 16"),
                                          "\"num_attention_heads\": 4", "\"num_attention_heads\": 32"),
                                  "\"num_key_value_heads\": 2,",
                                  "\"num_key_value_heads\": 8,\n  \"head_dim\": null,")),
            std::vector<std::string>{"d.json:8:3: model.head_dim: null, taken as absent: hidden_size / "
                                     "num_attention_heads = 16 / 32 = 0: must be positive"});
}

// DefaultedText, what describe prints under the heads: Qwen3 with kv null takes its 4 heads (not
// Qwen3Config's 32, which an absent key takes), head_dim absent takes Qwen3Config's 128; written
// values, and a value a --set replaced (located on the command line), have no text.
TEST(Validate, DefaultedTextSaysHowAValueWasTaken) {
  config::SourceMap locs("d.json");
  const config::Model m = ImportHuggingFaceText(
      Replace(kGood, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": null"), "d.json", &locs);
  EXPECT_EQ(m.num_key_value_heads(), 4u);
  EXPECT_EQ(m.head_dim(), 128u);
  EXPECT_EQ(DefaultedText(m, locs, "", "num_key_value_heads"),
            "null, so num_attention_heads (4) as transformers 4 reads a null");
  EXPECT_EQ(DefaultedText(m, locs, "", "head_dim"),
            "absent, so qwen3's default (128) as transformers has it");
  EXPECT_EQ(DefaultedText(m, locs, "", "hidden_size"), "");
  config::SourceMap merged("e.textproto");
  merged.Merge("model", locs, config::Location{"d.json", 1, 1});
  EXPECT_EQ(DefaultedText(m, merged, "model", "num_key_value_heads"),
            "null, so num_attention_heads (4) as transformers 4 reads a null");
  merged.Set("model.num_key_value_heads", config::Location{"<command line: --set>", 1, 1});
  merged.Set("model.head_dim", config::Location{"<command line: --set>", 1, 1});
  EXPECT_EQ(DefaultedText(m, merged, "model", "num_key_value_heads"), "");
  EXPECT_EQ(DefaultedText(m, merged, "model", "head_dim"), "");
  // Written: no text.
  config::SourceMap written("d.json");
  const config::Model w = ImportHuggingFaceText(kGood, "d.json", &written);
  EXPECT_EQ(DefaultedText(w, written, "", "num_key_value_heads"), "");
}

// A number past a double's range was reported at 1:1; it is at the value, with its key.
TEST(Import, NumberOverflowIsLocated) {
  const std::string big = Replace(kGood, "\"vocab_size\": 1000", "\"vocab_size\": 1e400");
  EXPECT_EQ(ErrorOf([&] { ImportHuggingFaceText(big, "hf.json"); }),
            "hf.json:8:17: vocab_size: 1e400: number out of range of double");
}

}  // namespace
}  // namespace tpsim::llm
