"""cli/analyze.py: the JSON shape, options over the scenario, spec files, and bad input (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import assert_one_line_error, cli
from rooflinectl.engine.roofline import analyze
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.scenario import resolve_workload

ROOT = Path(__file__).parents[2]


def test_analyze_json_has_exactly_the_documented_shape():
    result = cli("analyze", "decode", "--gpu", "h100", "--batch", "8", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"hardware", "workload", "ops", "totals"}
    assert set(data["hardware"]) == {"id", "name", "bandwidth_gbps", "peak_tflops", "ridge"}
    assert set(data["workload"]) == {"phase", "model", "batch", "seq_len", "context", "dtype", "kv_dtype",
                                     "attention"}
    assert set(data["totals"]) == {"flops", "bytes", "time_s", "tokens_per_s", "weight_bytes", "kv_cache_bytes",
                                   "memory_bytes", "fits"}
    for op in data["ops"]:
        assert set(op) == {"name", "kind", "fuses", "unit", "dtype", "per_model", "count", "flops", "bytes",
                           "weight_bytes", "kv_bytes", "reads", "writes", "computes", "intensity", "bound",
                           "attainable_tflops", "time_s"}
    # Totals are the sums of count × per-instance values.
    assert data["totals"]["flops"] == pytest.approx(sum(o["count"] * o["flops"] for o in data["ops"]))
    assert data["totals"]["bytes"] == pytest.approx(sum(o["count"] * o["bytes"] for o in data["ops"]))
    assert data["totals"]["time_s"] == pytest.approx(sum(o["count"] * o["time_s"] for o in data["ops"]))
    # And they equal the engine's.
    engine = analyze(resolve_workload("decode", batch=8), load_gpu("h100"))
    assert data["totals"]["time_s"] == pytest.approx(engine.totals.time_s)
    assert data["workload"] == {"phase": "decode", "model": "llama-3-8b", "batch": 8, "seq_len": 1,
                                "context": 4096, "dtype": "bf16", "kv_dtype": "bf16", "attention": "flash"}


def test_analyze_options_override_the_scenario():
    result = cli("analyze", "prefill", "--gpu", "h100", "--model", "llama-2-7b", "--seq-len", "4096",
                 "--batch", "4", "--dtype", "fp16", "--attention", "naive", "--no-causal", "--json")
    data = json.loads(result.stdout)
    assert data["workload"]["model"] == "llama-2-7b"
    assert data["workload"]["seq_len"] == 4096 and data["workload"]["batch"] == 4
    assert {o["name"] for o in data["ops"]} >= {"qk", "softmax", "pv"}


def test_hf_config_json_is_accepted(tmp_path):
    cfg = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "intermediate_size": 14336, "vocab_size": 128256, "hidden_act": "silu", "model_type": "llama"}
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    from_file = json.loads(cli("analyze", "decode", "--model", str(folder / "config.json"), "--json").stdout)
    bundled = json.loads(cli("analyze", "decode", "--model", "llama-3-8b", "--json").stdout)
    assert from_file["workload"]["model"] == "my-llama"
    assert from_file["totals"] == bundled["totals"]


def test_workload_file_and_gpu_file(tmp_path):
    gpu = ROOT / "hardware" / "h100-sxm.yaml"
    wl = tmp_path / "mine.yaml"
    wl.write_text("phase: decode\nmodel: mistral-7b\nbatch: 16\ncontext: 2048\n")
    result = cli("analyze", str(wl), "--gpu", str(gpu), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["workload"]["model"] == "mistral-7b" and data["workload"]["batch"] == 16


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["analyze", "--gpu", "h10"], ["unknown GPU 'h10'", "h100"]),
        (["analyze", "--model", "llama-3-8", "--gpu", "h100"], ["unknown model", "llama-3-8b"]),
        (["analyze", "decod"], ["unknown workload 'decod'", "decode"]),
        (["analyze", "--batch", "-4"], ["batch", "greater than 0"]),
        (["analyze", "--batch", "0"], ["batch"]),
        (["analyze", "prefill", "--seq-len", "0"], ["seq_len"]),
        (["analyze", "decode", "--seq-len", "128"], ["--context"]),
        (["analyze", "prefill", "--context", "128"], ["--seq-len"]),
        (["analyze", "--dtype", "fp7"], ["dtype"]),
        (["analyze", "--attention", "paged"], ["attention"]),
        (["analyze", "--fuse", "everything"], ["fused"]),
        (["hardware", "show", "b300x"], ["unknown GPU"]),
        (["workloads", "show", "nothing-like-this"], ["is no scenario", "unknown model"]),
        # Issue 18: a length beyond the model's positions passed silently. Llama 3 8B has 8,192.
        (["analyze", "decode", "--context", "8193"],
         ["context 8,193", "exceeds model llama-3-8b's max_position_embeddings of 8,192"]),
        (["analyze", "prefill", "--seq-len", "8193"], ["seq_len 8,193", "max_position_embeddings of 8,192"]),
        (["analyze", "attention", "--model", "llama-2-70b", "--seq-len", "4097"],
         ["seq_len 4,097", "llama-2-70b's max_position_embeddings of 4,096"]),
        # Mistral 7B v0.1's sliding window is modelled (issue 12): its limit is max_position_embeddings.
        (["analyze", "decode", "--model", "mistral-7b", "--context", "32769"],
         ["context 32,769", "mistral-7b's max_position_embeddings of 32,768"]),
        # Sizes beyond float range were OverflowErrors (exit 1); now outside the field's range.
        (["analyze", "--batch", "1" + "0" * 309], ["field 'batch'", "less than or equal to 1048576"]),
        (["analyze", "prefill", "--seq-len", "1" + "0" * 30], ["field 'seq_len'", "less than or equal to 1073741824"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, fragments):
    assert_one_line_error(cli(*args), *fragments)


@pytest.mark.parametrize(
    "text, fragments",
    [
        ("phase: decode\nmodel: llama-3-8b\ncontext: [1, 2\n", ["malformed YAML", "line"]),
        ("phase: decode\nmodel: llama-3-8b\ncontext: 64\nbacth: 4\n", ["bacth", "unknown key"]),
        ("phase: decode\nmodel: llama-3-8b\ncontext: -64\n", ["context", "greater than 0"]),
        ("- just\n- a list\n", ["mapping"]),
        # Issue 18: an incomplete inline model said "field 'model.str' … (and 9 more errors)".
        ("phase: decode\ncontext: 64\nmodel:\n  id: m\n  name: M\n  source: s\n  hidden_size: 64\n"
         "  num_layers: 2\n  num_heads: 4\n  num_kv_heads: 4\n  head_dim: 16\n  vocab_size: 100\n",
         ["field 'model.intermediate_size': missing"]),
        ("phase: decode\ncontext: 64\nmodel: 12\n", ["field 'model'", "an inline model", "not int"]),
        ("phase: decode\nmodel: llama-2-7b\ncontext: 4097\n", ["llama-2-7b's max_position_embeddings of 4,096"]),
    ],
)
def test_malformed_workload_files(tmp_path, text, fragments):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    where = [] if "max_position" in fragments[0] else [str(path)]  # a limit names the model, not the file
    assert_one_line_error(cli("analyze", str(path)), *where, *fragments)


def test_the_last_position_a_model_has_is_analysed():
    """Decode's context counts the new token: context 8,192 uses positions 0 … 8,191 of Llama 3 8B's 8,192."""
    result = cli("analyze", "decode", "--context", "8192", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["workload"]["context"] == 8192


def test_a_prefill_reads_no_more_weights_than_the_model_has():
    """Issue 18: the 70B prefill at batch 64 reported 143.30 GB of weights read, more than its 141.11 GB."""
    result = cli("analyze", "prefill", "--model", "llama-3-70b", "--batch", "64", "--seq-len", "4096", "--gpu",
                 "h200", "--json")
    assert json.loads(result.stdout)["totals"]["weight_bytes"] == 70_553_706_496 * 2


def test_malformed_gpu_file_names_file_and_field(tmp_path):
    src = (ROOT / "hardware" / "h100-sxm.yaml").read_text()
    bad = tmp_path / "gpu.yaml"
    bad.write_text(src.replace("hbm_bandwidth_gbps: 3350", "hbm_bandwith_gbps: 3350"))
    assert_one_line_error(cli("analyze", "--gpu", str(bad)), str(bad), "hbm_bandwith_gbps")
    bad.write_text(src.replace("hbm_bandwidth_gbps: 3350", "hbm_bandwidth_gbps: -3350"))
    assert_one_line_error(cli("analyze", "--gpu", str(bad)), "memory.hbm_bandwidth_gbps", "greater than or equal to 0.001")
    assert_one_line_error(cli("analyze", "--gpu", str(tmp_path / "missing.yaml")), "no such file")


def test_missing_peak_for_dtype(tmp_path):
    src = (ROOT / "hardware" / "h100-sxm.yaml").read_text()
    gpu = tmp_path / "no-fp8.yaml"
    gpu.write_text(src.replace("    fp8: 1978.9\n", ""))
    assert_one_line_error(cli("analyze", "--gpu", str(gpu), "--dtype", "fp8"), "no tensor-core peak for fp8")


def test_calibrated_without_measurements_is_a_user_error():
    assert_one_line_error(cli("analyze", "--gpu", "h100", "--calibrated"), "no measured ceilings")


@pytest.mark.parametrize("args, kw", [
    (["decode", "--gpu", "h200", "--model", "mixtral-8x7b", "--batch", "32"],
     {"model": "mixtral-8x7b", "batch": 32}),
    (["prefill", "--gpu", "h100", "--model", "qwen3-30b-a3b", "--fuse", "qkv,gate_up,act,norm_linear,residual"],
     {"model": "qwen3-30b-a3b", "fused": ["qkv", "gate_up", "act", "norm_linear", "residual"]}),
    (["prefill", "--gpu", "h100", "--attention", "naive"], {"attention": "naive"}),
    (["decode", "--gpu", "a100", "--model", "llama-3-8b", "--weight-dtype", "int4", "--group-size", "128"],
     {"model": "llama-3-8b", "weight_dtype": "int4", "group_size": 128}),
])
def test_analyze_json_gives_each_op_as_the_engine_has_it(args, kw):
    """Each op's kind, fusions, unit, data types, weight and KV bytes and words are the engine's Op's, for every
    kind a step has (router and expert ops included): one generic path, no table of names."""
    data = json.loads(cli("analyze", *args, "--json").stdout)
    gpu = args[args.index("--gpu") + 1]
    engine = analyze(resolve_workload(args[0], **kw), load_gpu(gpu))
    assert [o["name"] for o in data["ops"]] == [p.name for p in engine.placements]
    for o, p in zip(data["ops"], engine.placements):
        op = p.op
        assert (o["kind"], o["fuses"], o["unit"], o["dtype"], o["per_model"]) == (
            op.kind, list(op.fuses), op.unit, op.dtype, op.per_model)
        assert (o["weight_bytes"], o["kv_bytes"], o["reads"], o["writes"], o["computes"]) == (
            op.weight_bytes, op.kv_bytes, op.reads, op.writes, op.computes)
        assert o.get("weight_dtype") == op.weight_dtype
    kinds = {o["kind"] for o in data["ops"]}
    assert {"gather", "norm", "linear", "elementwise", "copy", "attention"} <= kinds
    if "mixtral" in args or "qwen3-30b-a3b" in args:
        assert {"router", "expert"} <= kinds


def test_analyze_json_names_the_quantized_weight_format_only_where_weights_are_quantized():
    """w4a16 on Llama 3 8B: every projection reads int4 weights (4·4096·4096/8 bytes of values + 4096·32 fp16
    scales for q_proj); the embedding, the norms' gains and the LM head stay bf16 (engine/count/quant.py), so their
    ops have no weight_dtype."""
    data = json.loads(cli("analyze", "decode", "--gpu", "a100", "--model", "llama-3-8b", "--weight-dtype", "int4",
                          "--json").stdout)
    quantized = {o["name"] for o in data["ops"] if "weight_dtype" in o}
    assert quantized == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert all(o["weight_dtype"] == "int4" for o in data["ops"] if "weight_dtype" in o)
    q = next(o for o in data["ops"] if o["name"] == "q_proj")
    assert q["weight_bytes"] == 4096 * 4096 // 2 + 4096 * (4096 // 128) * 2 == 8_650_752
    assert q["kind"] == "linear" and q["unit"] == "tensor" and q["dtype"] == "bf16"
    head = next(o for o in data["ops"] if o["name"] == "lm_head")
    assert head["per_model"] and head["weight_bytes"] == 4096 * 128256 * 2


def test_readme_analyze_output_is_current():
    """The README's `$ rooflinectl analyze decode --gpu a100` block is the command's real output."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("$ rooflinectl analyze decode --gpu a100\n", 1)[1].split("```", 1)[0]
    got = cli("analyze", "decode", "--gpu", "a100").stdout.rstrip()
    # Trailing spaces (rich pads each line to the table's width) are not part of what a reader sees.
    assert [x.rstrip() for x in got.splitlines()] == [x.rstrip() for x in block.rstrip().splitlines()]


def test_analyze_a_mixture_of_experts_decode():
    """Issue 12's first example runs, and its JSON states the experts each MoE layer reads."""
    result = cli("analyze", "decode", "--gpu", "h200", "--model", "mixtral-8x7b", "--batch", "32")
    assert result.exit_code == 0, result.output
    assert "expert_gate_proj" in result.stdout and "router" in result.stdout
    data = json.loads(cli("analyze", "decode", "--gpu", "h200", "--model", "mixtral-8x7b", "--batch", "32",
                          "--experts-touched", "6", "--json").stdout)
    assert data["workload"]["experts_touched"] == 6.0
    gate = next(o for o in data["ops"] if o["name"] == "expert_gate_proj")
    # 64 rows of x, 6 experts' 4096×14336 weights, 64×14336 out, in bf16.
    assert gate["bytes"] == (64 * 4096 + 6 * 4096 * 14336 + 64 * 14336) * 2


@pytest.mark.parametrize("args, message", [
    (["--model", "mixtral-8x7b", "--experts-touched", "9"],
     "error: experts_touched 9: mixtral-8x7b routes each token to 2 of its 8 experts"),
    (["--model", "mixtral-8x7b", "--experts-touched", "0"], "experts_touched"),
    (["--model", "llama-3-8b", "--experts-touched", "2"], "model llama-3-8b has no experts"),
])
def test_analyze_refuses_impossible_experts_touched_in_one_line(args, message):
    base = ["analyze", "decode", "--gpu", "h200", "--batch", "32"]
    result = cli(*base, *args)
    assert result.exit_code == 2
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_an_estimated_memory_roof_says_so_where_the_roofs_are_printed():
    # The H20-3e's 4,800 GB/s is an estimate (its file's memory.derived); analyze and analyze generate print
    # the roof with that mark, and a datasheet's roof (the H100's 3,350 GB/s) without one.
    for command in (("analyze", "decode"), ("analyze", "generate")):
        out = " ".join(cli(*command, "--gpu", "h20-3e", env={"COLUMNS": "200"}).stdout.split())
        assert "roofs: 4,800 GB/s (estimated), 148 TFLOP/s" in out
        out = " ".join(cli(*command, "--gpu", "h100", env={"COLUMNS": "200"}).stdout.split())
        assert "roofs: 3,350 GB/s, 989" in out
