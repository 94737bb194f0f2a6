"""Every ``--json`` output's shape, key by key: integers for counts and bytes, floats for rates, times and sizes in
units (GiB, KiB, MHz), strings and booleans where they are; and no key added or lost without this file changing.

A schema maps a key path to the types its value may have. ``a.b`` is a key in an object, ``a[]`` every item of a
list, ``a.*`` every key of an object whose keys are data (data types, limit names). A path ending in an empty list
or object, or holding null, is recorded as ``list``, ``dict`` or ``None``. Every path an output has must be in its
schema with one of its types, and every path of a schema must appear in one of the outputs checked (so that a key
dropped from the output fails too). ``bool`` is never an ``int`` here, and an ``int`` is never a ``float``: a rate
printed as ``1000`` one time and ``999.5`` the next is what this pins down.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from helpers import cli

ROOT = Path(__file__).parents[2]
GPUS = sorted(p.stem for p in (ROOT / "hardware").glob("*.yaml"))

NONE = type(None)


def observed(data: object, maps: frozenset[str], path: str = "", out: dict | None = None) -> dict[str, set]:
    """Each key path of ``data`` with the types found there; the keys of the objects at ``maps`` read as ``*``."""
    out = defaultdict(set) if out is None else out
    if isinstance(data, dict):
        if not data:
            out[path].add(dict)
        for key, value in data.items():
            name = "*" if path in maps else key
            observed(value, maps, f"{path}.{name}" if path else name, out)
    elif isinstance(data, list):
        if not data:
            out[path].add(list)
        for value in data:
            observed(value, maps, f"{path}[]", out)
    else:
        out[path].add(type(data))
    return out


def check_schema(outputs: list[object], schema: dict[str, tuple], maps: frozenset[str] = frozenset()) -> None:
    seen: dict[str, set] = defaultdict(set)
    for data in outputs:
        for path, types in observed(data, maps).items():
            seen[path] |= types
    unexpected = sorted(set(seen) - set(schema))
    assert not unexpected, f"keys the schema does not have: {unexpected}"
    wrong = {p: sorted(t.__name__ for t in seen[p] - set(schema[p])) for p in seen if seen[p] - set(schema[p])}
    assert not wrong, f"values of a type the schema does not allow: {wrong}"
    # A key is there when it or anything under it is (``a.b[]`` holds ``a.b``; ``a.*`` holds ``a``).
    present = {path[:i] for path in seen for i in range(len(path) + 1) if i == len(path) or path[i] in ".["}
    lost = sorted(p for p in schema if p not in present)
    assert not lost, f"keys of the schema that no output has: {lost}"


def run_json(*args: str) -> object:
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# --- analyze -----------------------------------------------------------------------------------------------------

ANALYZE = {
    "hardware.id": (str,), "hardware.name": (str,), "hardware.bandwidth_gbps": (float,),
    "hardware.peak_tflops": (float,), "hardware.ridge": (float,),
    "hardware.kernel": (str,),  # quantized linear layers only: the kernel whose data type the roof is
    "workload.weight_dtype": (str,), "workload.act_dtype": (str,),  # quantized linear layers only
    "workload.group_size": (int,),  # int4 weights only
    "workload.phase": (str,), "workload.model": (str,), "workload.batch": (int,), "workload.seq_len": (int,),
    "workload.context": (int,), "workload.dtype": (str,), "workload.kv_dtype": (str,), "workload.attention": (str,),
    "workload.experts_touched": (float,),  # a mixture-of-experts model's only
    "ops[].name": (str,), "ops[].kind": (str,), "ops[].fuses": (list,), "ops[].fuses[]": (str,),
    "ops[].unit": (str,), "ops[].dtype": (str,),
    "ops[].weight_dtype": (str,),  # quantized weights only: their storage format where it is not dtype
    "ops[].per_model": (bool,), "ops[].weight_bytes": (int,), "ops[].kv_bytes": (int,),
    "ops[].reads": (str,), "ops[].writes": (str,), "ops[].computes": (str,),
    "ops[].count": (int,), "ops[].flops": (int,), "ops[].bytes": (int,),
    "ops[].intensity": (float,), "ops[].bound": (str,), "ops[].attainable_tflops": (float,), "ops[].time_s": (float,),
    "totals.flops": (int,), "totals.bytes": (int,), "totals.time_s": (float,), "totals.tokens_per_s": (float,),
    "totals.weight_bytes": (int,), "totals.kv_cache_bytes": (int,), "totals.memory_bytes": (int,),
    "totals.fits": (bool,),
    # --calibrated only: the time model; with an op model, its figures and each op's roofline time and curve.
    "time_model.op_model": (bool,), "time_model.note": (str,), "time_model.launch_floor_s": (float,),
    "time_model.timer": (str,), "time_model.grid": (str,), "time_model.roofline_time_s": (float,),
    "ops[].roofline_time_s": (float,), "ops[].time_model": (str,), "ops[].model_limit": (str,),
    "ops[].model_tflops": (float,),
}

ANALYZE_CASES = [
    ["analyze", "decode", "--gpu", "h100"],
    ["analyze", "decode", "--gpu", "a100", "--batch", "64", "--fuse", "qkv,gate_up,act,norm_linear,residual"],
    ["analyze", "prefill", "--gpu", "mi300x", "--attention", "naive", "--dtype", "fp8", "--kv-dtype", "fp8"],
    ["analyze", "prefill", "--gpu", "l4", "--dtype", "fp32", "--model", "llama-2-7b"],
    ["analyze", "attention", "--gpu", "h200", "--no-causal", "--seq-len", "1000"],
    # Mixture of experts: the expected experts touched (a real number), and a stated one (still a float).
    ["analyze", "decode", "--gpu", "h200", "--model", "mixtral-8x7b", "--batch", "32"],
    ["analyze", "prefill", "--gpu", "h100", "--model", "qwen3-30b-a3b", "--experts-touched", "100",
     "--fuse", "qkv,gate_up,act,norm_linear,residual"],
    # Quantized weights: w4a16 (int4 and its group), w8a8 fp8, w4a4 nvfp4 on an MoE model's experts.
    ["analyze", "decode", "--gpu", "a100", "--model", "llama-3-8b", "--weight-dtype", "int4", "--group-size", "128"],
    ["analyze", "prefill", "--gpu", "h100", "--weight-dtype", "fp8", "--act-dtype", "fp8"],
    ["analyze", "decode", "--gpu", "b200", "--model", "mixtral-8x7b", "--batch", "8", "--weight-dtype", "nvfp4",
     "--act-dtype", "fp4"],
    # --calibrated: a file with an op model (engine/calibrated.py), and one with the ceilings alone.
    ["analyze", "prefill", "--gpu", str(ROOT / "docs" / "results" / "op-model-example" / "h200-issue14.yaml"),
     "--calibrated"],
    ["analyze", "decode", "--gpu", str(ROOT / "docs" / "results" / "h200-2026-12-02" / "calibrated.yaml"),
     "--calibrated"],
]


def test_analyze_json_schema():
    check_schema([run_json(*args) for args in ANALYZE_CASES], ANALYZE)


# --- occupancy ---------------------------------------------------------------------------------------------------

OCCUPANCY = {
    "gpu": (str,), "threads_per_block": (int,), "registers_per_thread": (int,), "smem_per_block_bytes": (int,),
    "warps_per_block": (int,), "allocated.registers_per_warp": (int,), "allocated.registers_per_block": (int,),
    "allocated.smem_per_block_bytes": (int,), "limits.*.blocks_per_sm": (int, NONE),
    "limits.*.arithmetic": (str,), "binding[]": (str,), "blocks_per_sm": (int,), "warps_per_sm": (int,),
    "threads_per_sm": (int,), "max_warps_per_sm": (int,), "occupancy": (float,), "grid": (int, NONE),
    "blocks_per_wave": (int, NONE), "waves": (int, NONE), "last_wave_fill": (float, NONE), "note": (str, NONE),
    "suggestions": (list,), "suggestions[].text": (str,), "suggestions[].threads_per_block": (int,),
    "suggestions[].registers_per_thread": (int,), "suggestions[].smem_per_block_bytes": (int,),
    "suggestions[].blocks_per_sm": (int,), "suggestions[].occupancy": (float,),
}

OCCUPANCY_CASES = [
    ["occupancy", "--gpu", "h100", "--threads", "256", "--regs", "64", "--smem", "48KiB", "--grid", "1000"],
    ["occupancy", "--gpu", "a100", "--threads", "128", "--regs", "0"],
    ["occupancy", "--gpu", "mi300x", "--threads", "1024", "--regs", "32", "--smem", "1.5KiB", "--grid", "7"],
    ["occupancy", "--gpu", "v100", "--threads", "32", "--regs", "32"],
]


def test_occupancy_json_schema():
    check_schema([run_json(*args) for args in OCCUPANCY_CASES], OCCUPANCY, frozenset({"limits"}))


# --- hardware list / show ------------------------------------------------------------------------------------

SOURCED = {"source": (str,), "derived": (dict,), "derived.*": (str,)}


def _section(name: str, fields: dict[str, tuple]) -> dict[str, tuple]:
    return {f"{name}.{k}": v for k, v in {**SOURCED, **fields}.items()}


GPU_SPEC = {
    "id": (str,), "aliases": (list,), "aliases[]": (str,), "name": (str,), "vendor": (str,), "architecture": (str,),
    "device_names": (list,), "device_names[]": (str,),
    "compute_capability": (str, NONE), "sm_count": (int, NONE), "boost_clock_mhz": (float, NONE),
    "notes": (str, NONE),
    **_section("memory", {
        "hbm_type": (str,), "hbm_capacity_gib": (float,), "hbm_bandwidth_gbps": (float,),
        # None: a level no source gives (a part without SMs has no shared memory or register file of an SM)
        "l2_size_mib": (float, NONE), "l2_bandwidth_gbps": (float, NONE), "smem_per_sm_kib": (float, NONE),
        "l1_smem_per_sm_kib": (float, NONE), "smem_bandwidth_gbps": (float, NONE),
        "register_file_per_sm_kib": (float, NONE)}),
    "limits": (NONE,),
    **_section("limits", {
        "warp_size": (int,), "max_threads_per_block": (int,), "max_threads_per_sm": (int,),
        "max_warps_per_sm": (int,), "max_blocks_per_sm": (int,), "registers_per_sm": (int,),
        "max_registers_per_block": (int,), "max_registers_per_thread": (int,), "register_alloc_unit": (int,),
        "max_smem_per_block_kib": (float,), "smem_alloc_unit_bytes": (int,), "reserved_smem_per_block_bytes": (int,)}),
    **_section("compute", {"tensor_tflops.*": (float,), "vector_tflops.*": (float,)}),
    "interconnect": (NONE,),
    **_section("interconnect", {"name": (str,), "link": (str,), "bandwidth_gbps": (float,), "latency_us": (float,),
                                "pcie_gen": (int, NONE), "pcie_lanes": (int, NONE),
                                "scale_up": (NONE,), "scale_out": (NONE,)}),
    "interconnect.scale_up.source": (str,), "interconnect.scale_up.derived": (dict,),
    "interconnect.scale_up.derived.*": (str,),  # v100's topology, an estimate
    "interconnect.scale_up.gpus": (int,), "interconnect.scale_up.topology": (str, NONE),
    **_section("interconnect.scale_out", {"name": (str,), "bandwidth_gbit_s": (float,), "latency_us": (float,)}),
    "power": (NONE,),
    # no bundled power section derives anything (its map is always empty)
    "power.source": (str,), "power.derived": (dict,), "power.board_w": (float,),
    "measured": (NONE,),
    # NONE: a section of collectives alone (calibrate --comm) has no one-GPU ceilings.
    "measured.device_name": (str, NONE), "measured.date": (str, NONE), "measured.command": (str, NONE),
    "measured.torch_version": (str, NONE), "measured.triton_version": (str, NONE), "measured.driver": (str, NONE),
    "measured.copy_bandwidth_gbps": (float, NONE), "measured.tensor_tflops": (dict,),
    "measured.tensor_tflops.*": (float,), "measured.vector_tflops": (dict,), "measured.vector_tflops.*": (float,),
    # No bundled file holds calibrate's check (calibrate's own schema below has its values).
    "measured.timer": (str, NONE), "measured.tensor_tflops_check": (dict,),
    "measured.interconnect": (NONE,),
    "measured.op_model": (NONE,),
    **{f"measured.op_model.{k}": v for k, v in {
        "launch_floor_s": (float,), "grid": (str,), "timer": (str,), "curves[].op_class": (str,),
        "curves[].bound": (str,), "curves[].points[].label": (str,), "curves[].points[].roof_s": (float,),
        "curves[].points[].measured_s": (float,)}.items()},
    **{f"measured.interconnect.{k}": v for k, v in {
        "device_name": (str,), "gpu_count": (int,), "backend": (str,), "date": (str,), "command": (str,),
        "torch_version": (str,), "nccl_version": (str, NONE), "collectives.*[].bytes": (int,),
        "collectives.*[].time_s": (float,), "collectives.*[].algbw_gbps": (float,),
        "collectives.*[].busbw_gbps": (float,)}.items()},
}
GPU_MAPS = frozenset({"memory.derived", "limits.derived", "compute.derived", "interconnect.derived",
                      "interconnect.scale_up.derived", "interconnect.scale_out.derived", "power.derived",
                      "compute.tensor_tflops", "compute.vector_tflops", "measured.tensor_tflops",
                      "measured.vector_tflops", "measured.tensor_tflops_check",
                      "measured.interconnect.collectives"})

HIERARCHY = {
    "hierarchy.sm_count": (int, NONE),
    "hierarchy.levels[].name": (str,), "hierarchy.levels[].size_bytes": (int,),
    "hierarchy.levels[].per_sm_bytes": (int, NONE), "hierarchy.levels[].chip_wide": (bool,),
    "hierarchy.levels[].bandwidth_gbps": (float, NONE), "hierarchy.levels[].bandwidth_per_sm_gbps": (float, NONE),
    "hierarchy.levels[].bandwidth_provenance": (str,), "hierarchy.levels[].bandwidth_how": (str,),
    "hierarchy.levels[].detail": (str,), "hierarchy.levels[].ridge_flop_per_byte": (dict,),
    "hierarchy.levels[].ridge_flop_per_byte.*.*": (float,),
    "hierarchy.levels[].notes": (list,), "hierarchy.levels[].notes[].field": (str,),
    "hierarchy.levels[].notes[].provenance": (str,), "hierarchy.levels[].notes[].how": (str,),
    "hierarchy.compute[].unit": (str,), "hierarchy.compute[].dtype": (str,), "hierarchy.compute[].tflops": (float,),
    "hierarchy.compute[].per_sm_tflops": (float, NONE), "hierarchy.compute_source": (str,),
    "hierarchy.compute_notes": (list,), "hierarchy.compute_notes[].field": (str,),
    "hierarchy.compute_notes[].provenance": (str,), "hierarchy.compute_notes[].how": (str,),
}
HIERARCHY_MAPS = frozenset({"hierarchy.levels[].ridge_flop_per_byte", "hierarchy.levels[].ridge_flop_per_byte.*"})

CALIBRATED = {"device_name": "NVIDIA H100 80GB HBM3", "date": "2026-12-01T10:00:00+00:00",
              "command": "rooflinectl calibrate -o lab-h100.yaml --gpu h100", "torch_version": "2.4.0",
              "copy_bandwidth_gbps": 2950, "tensor_tflops": {"bf16": 760.5}, "vector_tflops": {"fp32": 50},
              # An op model's times written as YAML gives them (an integer where it is one: still a float out).
              "op_model": {"launch_floor_s": 2e-6, "grid": "test", "timer": "cuda_graph", "curves": [
                  {"op_class": "gemm", "bound": "memory",
                   "points": [{"label": "linear 1x4096x4096 bf16", "roof_s": 1e-5, "measured_s": 1}]}]}}


@pytest.fixture
def calibrated_gpu(tmp_path) -> str:
    """A calibrated file, as ``rooflinectl calibrate`` writes it, with no aliases and no interconnect: the only
    file with those. The copy bandwidth is written as an integer, which the output must still give as a float."""
    import yaml

    spec = yaml.safe_load((ROOT / "hardware" / "h100-sxm.yaml").read_text())
    spec.update(id="lab-h100", aliases=[], measured=CALIBRATED)
    del spec["interconnect"]
    (tmp_path / "user").mkdir()
    path = tmp_path / "user" / "lab-h100.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


# What calibrate --comm writes (tests/measure/test_comm.py checks the numbers' arithmetic): 4096 B in 10 µs is
# 0.4096 GB/s of algbw, × 2(2−1)/2 = 1 for an all-reduce on 2 GPUs.
COMM = {"interconnect": {"device_name": "NVIDIA H100 80GB HBM3", "gpu_count": 2, "backend": "nccl",
                         "date": "2026-12-03T10:00:00+00:00", "command": "torchrun --nproc-per-node 2 -m rooflinectl "
                         "calibrate --comm -o lab-comm.yaml --gpu h100", "torch_version": "2.4.0",
                         "collectives": {"all_reduce": [{"bytes": 4096, "time_s": 1e-5, "algbw_gbps": 0.4096,
                                                         "busbw_gbps": 0.4096}]}}}


@pytest.fixture
def comm_gpu(calibrated_gpu) -> str:
    """A file calibrate --comm wrote: the collectives alone under 'measured', beside the datasheet's interconnect."""
    import yaml

    spec = yaml.safe_load((ROOT / "hardware" / "h100-sxm.yaml").read_text())
    spec.update(id="lab-comm", aliases=[], measured=COMM)
    path = Path(calibrated_gpu).parent / "lab-comm.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def test_hardware_show_json_schema(calibrated_gpu, comm_gpu):
    outputs = [run_json("hardware", "show", g) for g in [*GPUS, calibrated_gpu, comm_gpu]]
    check_schema(outputs, {**GPU_SPEC, **HIERARCHY}, GPU_MAPS | HIERARCHY_MAPS)


def test_hardware_list_json_schema(calibrated_gpu, comm_gpu):
    result = cli("hardware", "list", "--json", env={"ROOFLINECTL_HARDWARE_PATH": str(Path(calibrated_gpu).parent)})
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, list) and {g["id"] for g in data} == {"lab-h100", "lab-comm", *(g.id for g in _bundled())}
    check_schema(data, GPU_SPEC, GPU_MAPS)


def _bundled():
    from rooflinectl.specs.hardware import load_gpu

    return [load_gpu(name) for name in GPUS]


# --- workloads list / show -----------------------------------------------------------------------------------

MODEL = {
    "id": (str,), "name": (str,), "source": (str,), "hidden_size": (int,), "num_layers": (int,), "num_heads": (int,),
    "num_kv_heads": (int,), "head_dim": (int,), "intermediate_size": (int,), "mlp": (str,), "vocab_size": (int,),
    "tie_embeddings": (bool,), "max_position_embeddings": (int, NONE), "sliding_window": (int, NONE),
}
# The fields only a model that has them dumps (Qwen3's q/k norm, Qwen2's Q/K/V biases, a mixture of experts; a
# config.json's quantized weight format is no bundled model's), and what `workloads show` adds to a model: its parameters
# and layers, computed.
MOE_MODEL = {
    **MODEL, "qk_norm": (bool,), "qk_norm_per_layer": (bool,), "qkv_bias": (bool,), "moe.num_experts": (int,),
    "moe.experts_per_token": (int,),
    "moe.expert_intermediate_size": (int,), "moe.num_shared_experts": (int,),
    "moe.shared_expert_intermediate_size": (int, NONE), "moe.first_dense_layers": (int,),
    # Issue 12's variants: Gemma 3's norms, GELU and window pattern, gpt-oss's biases, sinks and MXFP4 experts.
    "post_norms": (bool,), "scale_embeddings": (bool,), "layer_pattern[]": (str,), "o_bias": (bool,),
    "mlp_bias": (bool,), "attention_sinks": (bool,), "moe.router_bias": (bool,), "moe.router_softmax": (str,),
    "weight_dtype": (str,),
    "quantized": (str,),
    "mla.q_lora_rank": (int, NONE), "mla.kv_lora_rank": (int,), "mla.qk_nope_head_dim": (int,),
    "mla.qk_rope_head_dim": (int,), "mla.v_head_dim": (int,),
    # Llama 4's chunked attention, NoPE layers, weightless Q/K norm and interleaved experts.
    "attention_chunk_size": (int, NONE), "nope_full_layers": (bool,), "attn_temperature_tuning": (bool,),
    "rope_qk_l2_norm": (bool,), "moe.moe_every": (int,),
    # Qwen3-Next's partial RoPE, gated attention, Gated DeltaNet layers and gated shared expert.
    "rotary_dim": (int, NONE), "attn_output_gate": (bool,), "linear_attention.num_key_heads": (int,),
    "linear_attention.num_value_heads": (int,), "linear_attention.key_head_dim": (int,),
    "linear_attention.value_head_dim": (int,), "linear_attention.conv_kernel": (int,),
    "moe.shared_expert_gate": (bool,),
    # DeepSeek-V3.2's sparse attention: the lightning indexer's sizes.
    "sparse_attention.index_n_heads": (int,), "sparse_attention.index_head_dim": (int,),
    "sparse_attention.index_topk": (int,),
    # Nemotron-H's Mamba-2 layers.
    "mamba.num_heads": (int,), "mamba.head_dim": (int,), "mamba.state_size": (int,), "mamba.n_groups": (int,),
    "mamba.conv_kernel": (int,), "mamba.conv_bias": (bool,), "mamba.chunk_size": (int,),
    # The multi-token-prediction modules of DeepSeek-V3, GLM-4.5 and MiniMax-M2 (speculation's mtp:K).
    "mtp_layers": (int,),
}
MODEL_SHOWN = {**MOE_MODEL, "parameters.total": (int,), "parameters.active_per_token": (int,),
               "layers.dense": (int,), "layers.moe": (int,), "layers.sliding": (int,), "layers.linear": (int,),
               # The KV cache one token adds (all layers, in its dtype) and the weights' bytes by format (bf16, and
               # a quantized checkpoint's own: a map keyed by data type).
               "kv_cache.dtype": (str,), "kv_cache.bytes_per_token": (int,), "kv_cache.layers": (int,),
               "kv_cache.recurrent_state_bytes_per_sequence": (int,), "weight_bytes.*": (int,)}
SCENARIO = {
    "phase": (str,), "model": (str,), "description": (str, NONE), "batch": (int,), "seq_len": (int, NONE),
    "context": (int, NONE), "dtype": (str,), "kv_dtype": (str, NONE), "attention": (str,), "causal": (bool,),
    "fused": (list,), "fused[]": (str,), **{f"model.{k}": v for k, v in MODEL.items()},
}


def test_workloads_show_json_schema(tmp_path):
    """Scenarios (one naming its model, one with the model inline and fusions) and models."""
    import yaml

    inline = tmp_path / "inline.yaml"
    model = yaml.safe_load((ROOT / "workloads" / "models" / "llama-3-8b.yaml").read_text())
    inline.write_text(yaml.safe_dump({"phase": "prefill", "model": model, "seq_len": 512, "kv_dtype": "fp8",
                                      "fused": ["qkv", "gate_up", "act"]}))
    scenarios = [run_json("workloads", "show", name) for name in ("decode", "prefill", "attention", str(inline))]
    check_schema(scenarios, SCENARIO)
    models = [run_json("workloads", "show", p.stem) for p in sorted((ROOT / "workloads" / "models").glob("*.yaml"))]
    check_schema(models, MODEL_SHOWN, frozenset({"weight_bytes"}))


def test_workloads_list_json_schema():
    data = run_json("workloads", "list")
    assert set(data) == {"scenarios", "models"}
    check_schema(list(data["scenarios"].values()), {k: v for k, v in SCENARIO.items() if k != "fused[]"
                                                    and not k.startswith("model.")})
    check_schema(data["models"], MOE_MODEL)


# --- plot ----------------------------------------------------------------------------------------------------

POINT = {"gpu": (str,), "op": (str,), "kind": (str,), "intensity": (float,), "flops": (float,), "bound": (str,),
         "share": (float,), "value": (int, NONE)}
SWEPT_POINT = {**POINT, "value": (int,)}


def _under(prefix: str, fields: dict[str, tuple]) -> dict[str, tuple]:
    return {f"{prefix}.{k}": v for k, v in fields.items()}


PLOT = {
    "path": (str,), "title": (str,), "gpus[]": (str,),
    "legend[].label": (str,), "legend[].kind": (str,), "legend[].color": (str,), "legend[].marker": (str, NONE),
    "legend[].linestyle": (str, NONE),
    "panels[].title": (str,), "panels[].phase": (str,),
    **_under("panels[].roofs[]", {"gpu": (str,), "kind": (str,), "name": (str,), "value": (float,),
                                  "slope": (float,), "label": (str,), "x_from": (float,), "x_to": (float,)}),
    **_under("panels[].ridges[]", {"gpu": (str,), "intensity": (float,), "flops": (float,), "label": (str,)}),
    **_under("panels[].points[]", POINT),
    "panels[].trajectories": (list,),
    **_under("panels[].trajectories[]", {"gpu": (str,), "op": (str,), "field": (str,)}),
    **_under("panels[].trajectories[].points[]", SWEPT_POINT),
    **_under("panels[].groups[]", {"gpu": (str,), "label": (str,), "moves": (bool,), "ops[]": (str,),
                                   "show_values": (bool,)}),
    **_under("panels[].groups[].points[]", POINT),
    **_under("panels[].labels[]", {"text": (str,), "intensity": (float,), "flops": (float,), "share": (float,),
                                   "ops[]": (str,)}),
    "panels[].measured": (list,),
    **_under("panels[].measured[]", {
        "gpu": (str,), "kernel": (str,), "op": (str,), "intensity": (float,), "flops": (float,),
        "roof_flops": (float,), "fraction": (float,), "label": (str,), "predicted": (NONE,),
        "predicted[]": (float,)}),
    "panels[].footnotes": (list,), "panels[].footnotes[]": (str,),
    "panels[].xlim[]": (float,), "panels[].ylim[]": (float,),
    "panels[].sweep_field": (str, NONE), "panels[].values": (list,), "panels[].values[]": (int,),
}

RECORD = Path(__file__).parents[1] / "fuzz" / "data" / "record.json"


def test_plot_json_schema(tmp_path):
    cases = [
        ["plot", "-o", str(tmp_path / "a.png")],
        ["plot", "decode", "--gpu", "h100", "--gpu", "a100", "--batch", "1,8,64", "-o", str(tmp_path / "b.svg")],
        ["plot", "prefill", "--gpu", "h100", "--attention", "naive", "--measured", str(RECORD),
         "-o", str(tmp_path / "c.pdf")],
        ["plot", "decode", "--gpu", "h200", "--model", "mixtral-8x7b", "--batch", "1,8,32", "-o",
         str(tmp_path / "d.png")],
    ]
    check_schema([run_json(*args) for args in cases], PLOT)


# --- measure and calibrate -------------------------------------------------------------------------------------

TIMING = {"median_s": (float,), "p20_s": (float,), "p80_s": (float,), "timer": (str,), "input_sets": (int,),
          "capture_error": (str, NONE)}
RECORD_SCHEMA = {
    "schema_version": (int,), "torch_version": (str,), "triton_version": (str, NONE), "python_version": (str,),
    "date": (str,), "command": (str,), "interpret": (bool,), "seed": (int,), "timer": (str, NONE),
    "warmup_ms": (float, NONE), "rep_ms": (float, NONE),
    **_under("gpu", {"name": (str,), "spec": (str, NONE), "spec_name": (str, NONE), "driver": (str, NONE),
                     "cuda": (str, NONE), "compute_capability": (str, NONE), "sm_count": (int, NONE),
                     "l2_bytes": (int, NONE)}),
    "ceilings": (NONE,),
    **_under("ceilings", {"copy_bandwidth_gbps": (float, NONE), "tensor_tflops": (dict,), "tensor_tflops.*": (float,),
                          "vector_tflops": (dict,), "vector_tflops.*": (float,), "copy_bytes": (int, NONE),
                          "matmul_size": (int, NONE), "notes": (list,), "notes[]": (str,),
                          "copy_probe": (str, NONE), "timer": (str, NONE), "warm_up_s": (float, NONE),
                          "tensor_tflops_check": (dict,), "tensor_tflops_check.*": (float,),
                          "check_timer": (str, NONE), "vector_probe": (str, NONE)}),
    **_under("records[]", {
        "kernel": (str,), "op": (str,), "shape[]": (int,), "shape_text": (str,), "shape_format": (str,),
        "dtype": (str,), "flops": (int,), "bytes": (int,), "unit": (str,), "op_dtype": (str,),
        "op_kind": (str, NONE), "op_fuses": (list,), "status": (str,), "correctness": (NONE,),
        # A wrong result's error may be infinite: the record writes it as the string "inf" (ser_json_inf_nan).
        "correctness.rel_error": (float, str), "correctness.tolerance": (float,), "correctness.passed": (bool,),
        "correctness.seed": (int,), "error": (str, NONE), "time_s": (float, NONE), "timing": (NONE,),
        **_under("timing", TIMING),
        "achieved_gbps": (float, NONE), "achieved_tflops": (float, NONE), "bound": (str, NONE),
        "predicted_time_s": (float, NONE), "spec_roof_pct": (float, NONE), "measured_predicted_time_s": (float, NONE),
        "measured_roof_pct": (float, NONE), "baselines": (list,),
        **_under("baselines[]", {"name": (str,), "time_s": (float, NONE), "achieved_gbps": (float, NONE),
                                 "achieved_tflops": (float, NONE), "speedup": (float, NONE),
                                 "rel_error": (float, str, NONE), "error": (str, NONE), "timing": (NONE,)}),
        **_under("baselines[].timing", TIMING),
        **_under("launches[]", {
            "function": (str,), "grid[]": (int,), "programs": (int,), "num_warps": (int, NONE),
            "threads_per_program": (int, NONE), "n_regs": (int, NONE), "n_spills": (int, NONE),
            "shared_bytes": (int, NONE), "config": (dict,), "config.*": (str, int, float, bool, NONE),
            "programs_per_sm": (int, NONE), "occupancy": (float, NONE), "occupancy_upper_bound": (bool,),
            "limiter": (str, NONE), "waves": (int, NONE), "last_wave_fill": (float, NONE), "warnings": (list,),
            "warnings[]": (str,), "note": (str, NONE)}),
        "unfused": (list,), "notes": (list,), "notes[]": (str,)}),
    "notes": (list,), "notes[]": (str,),
}
RECORD_MAPS = frozenset({"ceilings.tensor_tflops", "ceilings.vector_tflops", "ceilings.tensor_tflops_check",
                         "records[].launches[].config"})


def test_measure_json_schema():
    """``measure --json`` prints the record (``MeasurementFile.to_json``): runs of a kernel faked on the CPU, timed by
    a fake clock: one passed in two shapes against the ceilings measured in it, one failed on a mismatched spec."""
    from measure_fakes import FakeClock, FakeSoftmax, run_fake

    from rooflinectl.records.kernel import DeviceInfo, RunCeilings

    info = DeviceInfo(name="NVIDIA H100 80GB HBM3", spec="h100-sxm", driver="550.54.15", sm_count=132,
                      l2_bytes=50 * 2**20)
    clock = FakeClock(*[(2e-6, 1.9e-6, 2.2e-6)] * 8)
    ceilings = RunCeilings(copy_bandwidth_gbps=3000.0, tensor_tflops={"bf16": 700.0}, vector_tflops={"fp32": 60.0},
                           copy_bytes=2**30, copy_probe="torch.add", timer="cuda_graph", warm_up_s=1.0,
                           vector_probe="kernels.fma",
                           tensor_tflops_check={"bf16": 710.0}, check_timer="events",
                           notes=["fp8 matmul not measured: test"])
    passed = run_fake(FakeSoftmax(), [(64, 128), (8, 4096)], clock=clock, ceilings=ceilings, info=info)
    # A device of another SM count than the spec's: the run carries a note asking whether --gpu is right.
    other = info.model_copy(update={"sm_count": 114})
    failed = run_fake(FakeSoftmax("half"), [(4, 4)], clock=FakeClock(), ceilings=None, info=other, timed=False,
                      baselines=())
    outputs = [json.loads(run.to_json()) for run in (passed, failed)]
    check_schema(outputs, RECORD_SCHEMA, RECORD_MAPS)


def test_measure_list_json_schema():
    check_schema([run_json("measure", "--list")], {"[].name": (str,), "[].summary": (str,)})


CALIBRATE = {
    "file": (str,), "id": (str,), "spec": (str,), "notes[]": (str,),
    **_under("measured", {k.removeprefix("measured."): v for k, v in GPU_SPEC.items()
                          if k.startswith("measured.")
                          and not k.startswith("measured.interconnect.")  # calibrate --comm's: not calibrate's
                          and k != "measured.op_model"}),  # always written by calibrate (no None)
    "measured.tensor_tflops_check.*": (float,),
}


def test_calibrate_json_schema(monkeypatch, tmp_path):
    """``calibrate --json`` on a GPU faked as an H200 whose probes return round numbers (integers, which the output
    must give as floats)."""
    import torch

    import rooflinectl.measure.ceilings as probes
    import rooflinectl.measure.device as device
    import rooflinectl.measure.harness as harness
    from rooflinectl.records.kernel import DeviceInfo, RunCeilings

    def info(spec, device_kind):
        return DeviceInfo(name="NVIDIA H200", spec=spec.id, driver="580.159.03", sm_count=132, l2_bytes=60 * 2**20)

    def ceilings(bench, l2_bytes, dtypes, on_step=lambda text: None, n=8192, **kw):
        return RunCeilings(copy_bandwidth_gbps=4251, tensor_tflops={"bf16": 760, "fp16": 771.2},
                           vector_tflops={"fp32": 60}, timer="cuda_graph", tensor_tflops_check={"bf16": 790},
                           check_timer="events", notes=["fp8 matmul not measured: test"])

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(harness, "device_info", info)
    monkeypatch.setattr(device, "device_info", info)
    monkeypatch.setattr(probes, "measure_ceilings", ceilings)
    # The op model's probes: a tiny grid on the CPU, each "taking" a round 5 µs.
    import rooflinectl.calibrate.op_model as op_model
    from rooflinectl.calibrate.probes import KIB, ProbeGrid

    real_probes = op_model.probe_samples
    tiny = ProbeGrid(gemm_m=(1,), gemm_kn=((64, 32),), decode_batch=(2,), decode_positions=(16,), prefill_tokens=(8,),
                     prefill_batch=(1,), memory_bytes=(16 * KIB,), vocab=64)
    monkeypatch.setattr(op_model, "probe_samples", lambda device, dtype, reporter, grid: real_probes(
        "cpu", dtype, reporter, grid=tiny, time_fn=lambda fn: (fn(), (5e-6,) * 3)[1]))
    check_schema([run_json("calibrate", "-o", str(tmp_path / "lab-h200.yaml"))], CALIBRATE,
                 frozenset({"measured.tensor_tflops", "measured.vector_tflops", "measured.tensor_tflops_check"}))
