#!/usr/bin/env python3
"""Checks tpsim's import of HuggingFace config.json files against transformers itself.

For each supported architecture, a small config that leaves out num_key_value_heads, head_dim
and max_position_embeddings (and variants with a null num_key_value_heads, a transformers 5
rope_parameters block, and both rope blocks) is loaded by transformers' configuration class
(PreTrainedConfig.from_dict) and imported by `tpsim describe --model`; the KV heads, head_dim,
longest context and tie_word_embeddings must agree (tpsim's tie is read as whether adding
"tie_word_embeddings": false changes the parameters `describe` prints). transformers' context is max_position_embeddings scaled as the
importer documents (README "Models", Positions): yarn factor x original_max_position_embeddings,
linear factor x max_position_embeddings. Needs transformers (pip install transformers; no
torch), so it is not part of ctest. Usage: hf_defaults_check.py [TPSIM]
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
try:
    import transformers
except ImportError:
    sys.exit("hf_defaults_check: needs transformers (pip install transformers)")
transformers.logging.set_verbosity_error()

here = os.path.dirname(os.path.abspath(__file__))
tpsim = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "build", "bin", "tpsim")
ARCHS = {"LlamaForCausalLM": "LlamaConfig", "MistralForCausalLM": "MistralConfig",
         "MixtralForCausalLM": "MixtralConfig", "Qwen2ForCausalLM": "Qwen2Config",
         "Qwen3ForCausalLM": "Qwen3Config", "Qwen3MoeForCausalLM": "Qwen3MoeConfig",
         "Qwen2MoeForCausalLM": "Qwen2MoeConfig", "Phi3ForCausalLM": "Phi3Config",
         "GemmaForCausalLM": "GemmaConfig"}
# 32 query heads: every default KV head count (4, 8, 32) divides them, as tpsim's validation asks.
BASE = {"hidden_size": 1024, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 32,
        "vocab_size": 100000, "num_local_experts": 4, "num_experts": 4, "num_experts_per_tok": 2,
        "moe_intermediate_size": 256, "shared_expert_intermediate_size": 512}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 1e6}
VARIANTS = {"omitted": {}, "kv null": {"num_key_value_heads": None}, "rope_parameters": {"rope_parameters": YARN},
            "both rope blocks": {"rope_scaling": {"rope_type": "linear", "factor": 2.0}, "rope_parameters": YARN}}


def transformers_view(cls, d):
    try:
        # A deep copy: transformers may edit the nested rope block (Phi3Config did, for the next class).
        c = getattr(transformers, cls).from_dict(copy.deepcopy(d))
    except Exception as e:  # transformers refuses the config (either string counts as agreeing)
        return "refused (" + type(e).__name__ + ")"
    if c.num_key_value_heads is None:  # kept as None: the attention cannot be built
        return "unusable (num_key_value_heads None)"
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    rope = c.rope_parameters or {}
    positions = c.max_position_embeddings
    if rope.get("rope_type") == "yarn":
        positions = int(rope.get("original_max_position_embeddings", positions) * rope["factor"])
    elif rope.get("rope_type") == "linear":
        positions = int(positions * rope["factor"])
    return (c.num_key_value_heads, head_dim, max(positions, c.max_position_embeddings), bool(c.tie_word_embeddings))


def describe(d, tmp):
    path = os.path.join(tmp, "m.json")
    with open(path, "w") as f:
        json.dump(d, f)
    return subprocess.run([tpsim, "describe", "reference-qwen3-4b", "--model", path, "--set", "workload.num_layers=4",
                           "--set", "mapping.pipeline_stages=4"], capture_output=True, text=True).stdout


def tpsim_view(d, tmp):
    out, untied = describe(d, tmp), describe(dict(d, tie_word_embeddings=False), tmp)
    kv = re.search(r"hidden / heads / kv\s+\d+ / \d+ / (\d+) \(head_dim (\d+)\)", out)
    pos = re.search(r"positions\s+(\d+)", out)
    params = [re.search(r"parameters\s+(\S+) B", o) for o in (out, untied)]
    if not kv or not pos or not all(params):
        return "no model lines in describe's output"
    return (int(kv.group(1)), int(kv.group(2)), int(pos.group(1)), params[0].group(1) != params[1].group(1))


bad = 0
with tempfile.TemporaryDirectory() as tmp:
    print("transformers", transformers.__version__)
    for arch, cls in ARCHS.items():
        for name, extra in VARIANTS.items():
            d = dict(BASE, architectures=[arch], **extra)
            want, got = transformers_view(cls, d), tpsim_view(d, tmp)
            same = want == got or (isinstance(want, str) and not isinstance(got, str))
            bad += not same
            print(f"{arch:20} {name:16} transformers {str(want):34} tpsim {str(got):20} {'ok' if same else 'DIFFERS'}")
print(f"hf_defaults_check: {bad} differ")
sys.exit(1 if bad else 0)
