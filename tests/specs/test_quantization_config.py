"""config.json's quantization_config (issue 12): a quantized checkpoint is imported in its weight format, never
as the unquantized model it is not; what engine/count/quant.py does not count is refused in one line naming the key.
Figures derived by hand from the layouts engine/count/quant.py states."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import assert_one_line_error, cli
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.errors import UserError
from rooflinectl.specs.models import model_from_hf_config
from rooflinectl.specs.scenario import resolve_workload, scenario_from_workload, workload_from_scenario

# Llama 3 8B's sizes: H = 4096, 32 heads of 128, 8 KV heads, I = 14336.
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
         "vocab_size": 128256, "max_position_embeddings": 131072}


def write(tmp_path, quant) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "quantization_config": quant}))
    return str(path)


@pytest.mark.parametrize("quant, fmt, group", [
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}, "int4", 128),
    ({"quant_method": "gptq", "bits": 4, "group_size": 64}, "int4", 64),  # sym absent: GPTQConfig's True
    ({"quant_method": "gptq", "bits": 4, "group_size": -1, "sym": True}, "int4", 2**22),  # one scale a column
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": False}, "int4", 128),
    # AWQ's zero points are its default (AwqConfig zero_point=True), and GPTQ's with sym false: int4_zp.
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"}, "int4_zp", 128),
    ({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True}, "int4_zp", 64),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": False}, "int4_zp", 128),
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "fp8", None),
    ({"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head", "model.embed_tokens"]}, "mxfp4", None),
])
def test_quantized_checkpoint_is_read_in_its_format(tmp_path, quant, fmt, group):
    m = model_from_hf_config(Path(write(tmp_path, quant)))
    assert (m.weight_dtype, m.group_size) == (fmt, group)
    w = resolve_workload("decode", model=str(tmp_path / "config.json"), batch=1, context=4096)
    assert w.weights == fmt and w.dtype == "bf16" and w.quantized


def test_gptq_int4_g128_reads_its_bytes(tmp_path):
    """q_proj of the GPTQ checkpoint: 4096·4096 values of 4 bits (8,388,608 B) + 4096 columns · 4096/128 = 32
    groups · 2 B of fp16 scale (262,144 B) = 8,650,752 B, 4.125 bits a weight, as --weight-dtype int4 counts."""
    path = write(tmp_path, {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True})
    ops = {op.name: op for op in step_ops(resolve_workload("decode", model=path, batch=1, context=4096))}
    assert ops["q_proj"].weight_bytes == 4096 * 4096 // 2 + 4096 * 32 * 2 == 8_650_752
    # Per column (group -1): one fp16 scale per column, 4096·4096/2 + 4096·1·2 = 8,396,800 B.
    path = write(tmp_path, {"quant_method": "gptq", "bits": 4, "group_size": -1, "sym": True})
    ops = {op.name: op for op in step_ops(resolve_workload("decode", model=path, batch=1, context=4096))}
    assert ops["q_proj"].weight_bytes == 8_388_608 + 4096 * 2 == 8_396_800
    # fp8: 4096·4096 one-byte values + one fp32 scale = 16,777,220 B.
    path = write(tmp_path, {"quant_method": "fp8"})
    ops = {op.name: op for op in step_ops(resolve_workload("decode", model=path, batch=1, context=4096))}
    assert ops["q_proj"].weight_bytes == 4096 * 4096 + 4 == 16_777_220


def test_explicit_options_win_over_the_checkpoints_format(tmp_path):
    path = write(tmp_path, {"quant_method": "gptq", "bits": 4, "group_size": 64, "sym": True})
    # --weight-dtype wins (the model's group goes with its format and is dropped); --group-size wins over 64.
    assert resolve_workload("decode", model=path, context=64, weight_dtype="bf16").quantized is False
    assert resolve_workload("decode", model=path, context=64, group_size=32).group_size == 32
    # --dtype sets the activations; the checkpoint's weights stay int4 g64 (w4a16 on the fp16 tensor cores).
    w = resolve_workload("decode", model=path, context=64, dtype="fp16")
    assert (w.weights, w.group_size, w.matmul_dtype) == ("int4", 64, "fp16")
    # A pair no kernel runs is refused as for --weight-dtype: int4 weights with fp32 activations.
    with pytest.raises(UserError, match="int4 with activations in fp32"):
        resolve_workload("decode", model=path, context=64, dtype="fp32")


def test_a_saved_scenario_keeps_an_override_of_the_checkpoints_format(tmp_path):
    path = write(tmp_path, {"quant_method": "gptq", "bits": 4, "group_size": 64, "sym": True})
    for override in ({}, {"weight_dtype": "bf16"}, {"weight_dtype": "fp8"}):
        w = resolve_workload("decode", model=path, context=64, **override)
        assert workload_from_scenario(scenario_from_workload(w)) == w


@pytest.mark.parametrize("quant, key", [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "quantization_config.quant_method': 'bitsandbytes'"),
    ({"quant_method": "compressed-tensors"}, "quantization_config.quant_method': 'compressed-tensors'"),
    ({"bits": 4}, "quantization_config.quant_method': None"),
    ({"quant_method": "gptq", "bits": 8, "group_size": 128}, "quantization_config.bits': 8"),
    ({"quant_method": "gptq", "bits": 3}, "quantization_config.bits': 3"),
    ({"quant_method": "gptq", "bits": True}, "quantization_config.bits': True"),
    ({"quant_method": "gptq", "bits": 4, "sym": "false"}, "quantization_config.sym': expected true or false"),
    ({"quant_method": "awq", "bits": 4, "zero_point": 1}, "quantization_config.zero_point': expected true or false"),
    # block-wise fp8 is modelled in DeepSeek-V3's 128×128 blocks only (fp8_block)
    ({"quant_method": "fp8", "weight_block_size": [64, 64]}, "quantization_config.weight_block_size': \\[64, 64\\]"),
    ({"quant_method": "fp8", "weight_block_size": [128.0, 128.0]}, "quantization_config.weight_block_size'"),
    # A dense model that keeps its attention in bf16: which of its other layers are quantized is not said
    # (gpt-oss, with experts, is read as quantized: experts).
    ({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]},
     "modules_to_not_convert': the attention stays unquantized in a model without experts"),
    ({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.mlp.down_proj"]},
     "modules_to_not_convert': 'model.layers.\\*.mlp.down_proj'"),
    ("gptq", "quantization_config': expected a mapping"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 0}, "group_size"),
])
def test_quantization_not_modelled_is_refused(tmp_path, quant, key):
    with pytest.raises(UserError, match=key):
        model_from_hf_config(Path(write(tmp_path, quant)))


def test_cli_refuses_bitsandbytes_in_one_line(tmp_path):
    path = write(tmp_path, {"quant_method": "bitsandbytes", "load_in_4bit": True})
    assert_one_line_error(cli("analyze", "decode", "--model", path, "--context", "64"), "bitsandbytes")


def test_cli_names_the_checkpoints_kernel(tmp_path):
    path = write(tmp_path, {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True})
    result = cli("analyze", "decode", "--gpu", "a100", "--model", path, "--context", "64", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert "w4a16: int4 g128" in json.dumps(data)


def test_awq_int4_with_zero_points_g128_reads_its_bytes(tmp_path):
    """q_proj of an AWQ checkpoint (zero points, its default): 4096·4096 values of 4 bits (8,388,608 B), 4096
    columns · 4096/128 = 32 groups of one fp16 scale (262,144 B) and one 4-bit zero (131,072 groups · 0.5 B =
    65,536 B): 8,716,288 B of weights, 4.15625 bits a weight; with x and y in bf16 (8,192 B each) the op moves
    8,732,672 B, 65,536 B more than the symmetric GPTQ layout."""
    from rooflinectl.engine.count.quant import bits_per_weight, weight_matrix_bytes
    from rooflinectl.engine.count.transformer import step_ops

    assert weight_matrix_bytes("int4_zp", 4096, 4096, 128) == 8_388_608 + 262_144 + 65_536
    assert bits_per_weight("int4_zp") == 4.15625
    w = resolve_workload("decode", model=write(tmp_path, {"quant_method": "awq", "bits": 4, "group_size": 128}),
                         batch=1, context=4096)
    q_proj = next(op for op in step_ops(w) if op.name == "q_proj")
    assert q_proj.weight_bytes == 8_716_288 and q_proj.bytes == 8_716_288 + 2 * 8_192
    assert q_proj.weight_dtype == "int4_zp"


@pytest.mark.parametrize(("fmt", "refused"), [(None, True), ("fp8", True), ("mxfp4", True), ("int4", False),
                                              ("int4_zp", False)])
def test_only_int4_takes_a_group_size(fmt, refused):
    """specs.dtypes.group_size_refusal is the rule and its message; a model file that breaks it names both."""
    from rooflinectl.specs.dtypes import group_size_refusal
    from rooflinectl.specs.load import validate
    from rooflinectl.specs.model import Model

    data = {"id": "m", "name": "M", "source": "test", "hidden_size": 4096, "num_layers": 32, "num_heads": 32,
            "num_kv_heads": 8, "head_dim": 128, "intermediate_size": 14336, "vocab_size": 128256, "group_size": 64,
            **({"weight_dtype": fmt} if fmt else {})}
    assert group_size_refusal(None, fmt) is None
    if not refused:
        assert group_size_refusal(64, fmt) is None and validate(Model, data, "m.yaml").group_size == 64
        return
    message = group_size_refusal(64, fmt)
    assert message == ("group size 64: only int4 weights take a group size (weight_dtype int4 or int4_zp"
                       + (f", not {fmt})" if fmt else ")"))
    with pytest.raises(UserError, match=f"m.yaml: .*{re.escape(message)}"):
        validate(Model, data, "m.yaml")
