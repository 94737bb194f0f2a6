"""cli/catalog.py: the hardware and workloads commands."""

from __future__ import annotations

import json

from helpers import assert_one_line_error, cli


def test_hardware_and_workloads_commands():
    shown = cli("hardware", "show", "h100")
    assert shown.exit_code == 0
    assert "989.4" in shown.stdout and "295" in shown.stdout  # bf16 peak and its ridge
    assert cli("hardware", "list").exit_code == 0
    data = json.loads(cli("hardware", "show", "h100", "--json").stdout)
    assert data["memory"]["hbm_bandwidth_gbps"] == 3350
    listed = cli("workloads", "list")
    assert "llama-3-8b" in listed.stdout and "decode" in listed.stdout
    assert "context: 4096" in cli("workloads", "show", "decode").stdout
    assert "hidden_size: 4096" in cli("workloads", "show", "llama-3-8b").stdout
    # Neither a scenario nor a model: both named, with the nearest models.
    assert_one_line_error(cli("workloads", "show", "lama-3-8b"), "'lama-3-8b' is no scenario (decode, prefill, "
                          "attention): unknown model 'lama-3-8b' (did you mean: llama-3-8b")


def test_workloads_show_an_moe_model_states_its_parameters_and_layers():
    shown = cli("workloads", "show", "qwen3-30b-a3b").stdout
    assert "# parameters: 30,532,122,624 in all (every expert, held in memory)" in shown
    assert "# active per token: 3,353,032,704" in shown
    assert "# layers: 48 MoE (top-8 of 128 experts of width 768), q/k RMSNorm per head" in shown
    data = json.loads(cli("workloads", "show", "mixtral-8x7b", "--json").stdout)
    assert data["parameters"] == {"total": 46_702_792_704, "active_per_token": 12_879_925_248}
    assert data["layers"] == {"dense": 0, "moe": 32, "sliding": 0, "linear": 0}
    assert data["moe"]["num_experts"] == 8
    listed = cli("workloads", "list", env={"COLUMNS": "120"}).stdout
    assert "top-2 of 8×14336" in listed


def test_workloads_show_of_an_moe_model_is_the_yaml_that_defines_it(tmp_path):
    """The derived lines are YAML comments: the text output read back as a model file is the same model."""
    from rooflinectl.specs.models import load_model

    path = tmp_path / "copy.yaml"
    path.write_text(cli("workloads", "show", "qwen3-235b-a22b").stdout)
    assert load_model(str(path)) == load_model("qwen3-235b-a22b")


# Llama 3 8B (meta-llama/Meta-Llama-3-8B config.json): H 4096, 32 layers, 32 heads of 128, 8 KV heads, MLP 14336,
# vocabulary 128256, untied embeddings.
LLAMA_8B_PARAMS = (128256 * 4096 * 2  # embedding and LM head
                   + 32 * (4096 * (4096 + 2 * 1024) + 4096 * 4096  # Q, K, V, O
                           + 3 * 4096 * 14336  # gate, up, down
                           + 2 * 4096)  # the two RMSNorm gains
                   + 4096)  # final norm
# Its linear matrices (Q, K, V, O, gate, up, down) per layer: k·n summed.
LLAMA_8B_LINEAR_PER_LAYER = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336


def test_workloads_show_states_kv_bytes_per_token_and_weight_bytes():
    """KV cache per token: 32 layers × 2 (K, V) × 8 KV heads × 128 × 2 bytes (bf16) = 131,072 B; weights:
    8,030,261,248 parameters × 2 bytes."""
    assert 32 * 2 * 8 * 128 * 2 == 131_072 and LLAMA_8B_PARAMS == 8_030_261_248
    shown = cli("workloads", "show", "llama-3-8b").stdout
    assert "# parameters: 8,030,261,248\n# layers: 32 dense (MLP 14336)\n" in shown
    assert "# KV cache per token: 131,072 B (128 KiB), all 32 layers, bf16\n" in shown
    assert "# weights: 16,060,522,496 B (15 GiB) in bf16" in shown
    data = json.loads(cli("workloads", "show", "llama-3-8b", "--json").stdout)
    assert data["kv_cache"] == {"dtype": "bf16", "bytes_per_token": 131_072, "layers": 32,
                                "recurrent_state_bytes_per_sequence": 0}
    assert data["weight_bytes"] == {"bf16": LLAMA_8B_PARAMS * 2}
    # Qwen3-30B-A3B (Qwen/Qwen3-30B-A3B config.json): 48 layers × 2 × 4 KV heads × 128 × 2 B = 98,304 B; every
    # expert is held: 30,532,122,624 parameters × 2 B.
    data = json.loads(cli("workloads", "show", "qwen3-30b-a3b", "--json").stdout)
    assert data["kv_cache"]["bytes_per_token"] == 48 * 2 * 4 * 128 * 2 == 98_304
    assert data["weight_bytes"] == {"bf16": 30_532_122_624 * 2}


def test_workloads_show_of_a_hybrid_model_names_the_layers_that_hold_kv_and_the_fixed_state(tmp_path):
    """Qwen3-Next 80B-A3B (Qwen/Qwen3-Next-80B-A3B-Instruct config.json): 48 layers of the pattern (linear,
    linear, linear, full). Only the 12 full layers hold KV: 12 × 2 × 2 KV heads × 256 × 2 B = 24,576 B a token.
    The 36 Gated DeltaNet layers hold a fixed state a sequence: the delta rule's 32 value heads × 128 × 128 and
    the conv's (4 − 1) taps × (16·128 + 16·128 + 32·128 = 8,192) channels, 548,864 values, × 36 × 2 B =
    39,518,208 B."""
    assert 12 * 2 * 2 * 256 * 2 == 24_576 and (32 * 128 * 128 + 3 * 8192) * 36 * 2 == 39_518_208
    shown = cli("workloads", "show", "qwen3-next-80b-a3b", env={"COLUMNS": "80"}).stdout
    assert "layer_pattern: [linear, linear, linear, full]\n" in shown
    assert "; attention: 36 linear (Gated DeltaNet, a fixed state), 12 full\n" in shown
    assert ("# KV cache per token: 24,576 B (24 KiB), the 12 attention layers of 48 (the 36 linear layers hold a "
            "fixed state instead), bf16\n") in shown
    assert "# recurrent state per sequence: 39,518,208 B (37.7 MiB), the 36 linear layers'" in shown
    data = json.loads(cli("workloads", "show", "qwen3-next-80b-a3b", "--json").stdout)
    assert data["kv_cache"] == {"dtype": "bf16", "bytes_per_token": 24_576, "layers": 12,
                                "recurrent_state_bytes_per_sequence": 39_518_208}
    assert data["layers"]["linear"] == 36
    # What it prints at 80 columns is a model file that loads back as the same model.
    mine = tmp_path / "mine.yaml"
    mine.write_text(shown)
    again = json.loads(cli("workloads", "show", str(mine), "--json").stdout)
    assert {k: v for k, v in again.items() if k != "id"} == {k: v for k, v in data.items() if k != "id"}


def test_workloads_show_of_a_quantized_checkpoint_adds_its_format(tmp_path):
    """A GPTQ int4 g128 config.json of Llama 3 8B's sizes: bf16, and int4 with fp16 scales per 128 weights along
    k (4.125 bits) on every linear matrix, the embedding, LM head and norms in bf16 (engine/count/quant.py):
    32 × Σk·n × (1/2 + 2/128) + (parameters − 32 × Σk·n) × 2 = 5,700,591,616 B."""
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192,
           "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True}}
    path = tmp_path / "llama-3-8b-gptq" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    linear = 32 * LLAMA_8B_LINEAR_PER_LAYER
    int4 = linear // 2 + linear // 128 * 2 + (LLAMA_8B_PARAMS - linear) * 2
    assert int4 == 5_700_591_616
    data = json.loads(cli("workloads", "show", str(path), "--json").stdout)
    assert data["weight_bytes"] == {"bf16": LLAMA_8B_PARAMS * 2, "int4": int4}
    shown = " ".join(cli("workloads", "show", str(path)).stdout.split())  # the long line wraps at the width
    assert ("# weights: 16,060,522,496 B (15 GiB) in bf16; 5,700,591,616 B (5.31 GiB) in int4 g128 (the "
            "checkpoint's format)") in shown


def test_errors_of_a_config_json_name_its_own_keys_in_plain_words(tmp_path):
    """A config.json's value out of range names its key as the file spells it (num_hidden_layers, not the
    internal num_layers), in plain words; `workloads show` reports the config's own error, not the scenario
    reader's; `--gpu config.json` says what the file is."""
    from helpers import assert_one_line_error

    config = tmp_path / "config.json"
    config.write_text('{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, '
                      '"num_hidden_layers": 0, "num_attention_heads": 32, "num_key_value_heads": 8, '
                      '"intermediate_size": 8192, "vocab_size": 128256}')
    message = "config.json: field 'num_hidden_layers': must be greater than 0"
    assert_one_line_error(cli("workloads", "show", str(config)), message)
    assert_one_line_error(cli("analyze", "decode", "--model", str(config)), message)
    assert_one_line_error(cli("analyze", "decode", "--gpu", str(config)), "this is a model's config.json, not a GPU "
                          "file")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("phase: decode\nmodel: llama-3-8b\nbatch: 0\ncontext: 10\n")
    assert_one_line_error(cli("analyze", str(scenario)), "s.yaml: field 'batch': must be greater than 0")
