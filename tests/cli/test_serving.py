"""``analyze generate``, ``compare`` and ``plot pareto``: their JSON shapes key by key (as test_json_schema.py does
for analyze), their numbers against ``analyze``'s, and bad combinations refused in one line."""

from __future__ import annotations

import csv
import io

import pytest
from test_json_schema import check_schema, run_json

import rooflinectl as rl
from helpers import assert_one_line_error, cli
from rooflinectl.errors import UserError

NONE = type(None)

METHOD = {"method.simulated": (bool,), "method.stack": (str,), "method.chunked_prefill": (bool,),
          "method.max_num_batched_tokens": (int, NONE), "method.block_size": (int, NONE)}
STATS = ("mean", "p50", "p90", "p99")

GENERATE = {
    **METHOD,
    **{f"simulation.{k}": (int,) for k in ("steps", "prefill_steps", "max_tokens_in_step", "kv_blocks_peak")},
    "simulation.duration_s": (float,),
    **{f"simulation.{m}.{k}": (float,) for m in ("ttft_s", "tpot_s", "e2e_s") for k in STATS},
    "simulation.tpot_s": (NONE,),
    "hardware.id": (str,), "hardware.name": (str,), "hardware.roofs": (str,), "hardware.bandwidth_gbps": (float,),
    "hardware.peak_tflops": (float,), "hardware.op_model": (bool,),
    "workload.model": (str,), "workload.dtype": (str,), "workload.kv_dtype": (str,), "workload.weight_dtype": (str,),
    "workload.act_dtype": (str,), "workload.attention": (str,), "workload.fused": (list,), "workload.fused[]": (str,),
    "request.prompt": (int,), "request.output": (int,), "request.batch": (int,), "request.gpus": (int,),
    "latency.ttft_s": (float,), "latency.tpot_s": (float, NONE), "latency.tpot_first_s": (float, NONE),
    "latency.tpot_last_s": (float, NONE), "latency.decode_s": (float,), "latency.e2e_s": (float,),
    "throughput.output_tokens_per_s_per_gpu": (float,), "throughput.total_tokens_per_s_per_gpu": (float,),
    "throughput.output_tokens_per_s_per_request": (float,),
    "throughput.decode_tokens_per_s_per_request": (float, NONE),
    "decode_steps.steps": (int,), "decode_steps.first_context": (int, NONE), "decode_steps.last_context": (int, NONE),
    "decode_steps.analysed_every_step": (bool,),
    "phases[].phase": (str,), "phases[].steps": (int,), "phases[].time_s": (float,), "phases[].share": (float,),
    "phases[].bound": (str,), "phases[].bound_share": (float,), "phases[].top_op": (str,),
    "phases[].top_op_share": (float,),
    "ops[].name": (str,), "ops[].kind": (str,), "ops[].prefill_s": (float,), "ops[].decode_s": (float,),
    "ops[].total_s": (float,), "ops[].share": (float,),
    **{f"memory.{k}": (int,) for k in ("capacity_bytes", "weight_bytes", "kv_cache_bytes",
                                       "kv_cache_bytes_per_sequence", "activation_bytes", "reserve_bytes",
                                       "total_bytes", "largest_batch")},
    "memory.activation_op": (str,), "memory.activation_phase": (str,), "memory.fits": (bool,),
}

# The static batch (every prompt in one prefill step), the numbers of analyze prefill and decode.
STATIC = ["--stack", "roofline", "--no-chunked-prefill"]
GENERATE_CASES = [
    ["analyze", "generate", "--gpu", "h100", "--model", "llama-3-8b", "--prompt", "2048", "--output", "256",
     "--batch", "32", *STATIC],
    ["analyze", "generate", "--gpu", "h100", "--model", "llama-3-8b", "--prompt", "2048", "--output", "64",
     "--batch", "32"],
    ["analyze", "generate", "--gpu", "a100", "--prompt", "100", "--output", "1", "--fuse", "qkv,gate_up,act"],
    ["analyze", "generate", "--gpu", "h200", "--model", "mixtral-8x7b", "--prompt", "512", "--output", "3",
     "--weight-dtype", "fp8", "--act-dtype", "fp8", "--reserve-gib", "0"],
]


def test_generate_json_schema():
    check_schema([run_json(*args) for args in GENERATE_CASES], GENERATE)


def test_generate_json_is_the_engine_steps():
    """TTFT is `analyze prefill` of the batch, the first and last TPOT `analyze decode` at P + 1 and P + O − 1,
    and the decode time the sum of `analyze decode` at every context between."""
    g = run_json(*GENERATE_CASES[0])
    prefill = run_json("analyze", "prefill", "--gpu", "h100", "--model", "llama-3-8b", "--seq-len", "2048",
                       "--batch", "32")
    assert g["latency"]["ttft_s"] == prefill["totals"]["time_s"]
    steps = [run_json("analyze", "decode", "--gpu", "h100", "--model", "llama-3-8b", "--context", str(c),
                      "--batch", "32")["totals"]["time_s"] for c in (2049, 2303)]
    assert (g["latency"]["tpot_first_s"], g["latency"]["tpot_last_s"]) == tuple(steps)
    assert g["decode_steps"] == {"steps": 255, "first_context": 2049, "last_context": 2303,
                                 "analysed_every_step": False}
    assert g["latency"]["e2e_s"] == pytest.approx(g["latency"]["ttft_s"] + g["latency"]["decode_s"], rel=1e-15)
    assert g["memory"]["largest_batch"] == 128 and g["memory"]["fits"]


def test_generate_text():
    result = cli(*GENERATE_CASES[0])
    assert result.exit_code == 0, result.output
    for fragment in ("time to first token", "time per output token", "mean of 255 steps",
                     "end-to-end latency", "largest batch that fits: 128", "the largest op: prefill act",
                     "time by op, all steps"):
        assert fragment in result.stdout


def test_generate_and_compare_import_nothing_heavy():
    """They answer from the specs and the engine alone: no torch, triton, matplotlib or textual."""
    import subprocess
    import sys

    code = ("import sys; from rooflinectl.cli import app; from typer.testing import CliRunner; "
            "r = CliRunner().invoke(app, ['analyze', 'generate', '--batch', '4']); assert r.exit_code == 0, r.output; "
            "r = CliRunner().invoke(app, ['compare', '--gpu', 'a100', '--gpu', 'h200']); assert r.exit_code == 0; "
            "print(' '.join(m for m in ('torch', 'triton', 'matplotlib', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_generate_help_and_analyze_still_analyze():
    result = cli("analyze", "generate", "--help")
    assert result.exit_code == 0 and "Usage: rooflinectl analyze generate" in result.stdout
    assert "--reserve-gib" in result.stdout
    # Each serving command says how its batch is simulated, and how to get the static batch.
    for command in (["analyze", "generate"], ["compare"], ["plot", "pareto"]):
        text = " ".join(cli(*command, "--help").stdout.split())
        assert "closed batch" in text and "no refills" in text and "--no-chunked-prefill" in text, command
    assert cli("analyze", "decode", "--gpu", "h100").exit_code == 0


@pytest.mark.parametrize("args, fragments", [
    (["analyze", "generate", "--output", "0"], ["--output 0"]),
    (["analyze", "generate", "--prompt", "-5"], ["--prompt -5"]),
    (["analyze", "generate", "--model", "llama-3-8b", "--prompt", "8000", "--output", "200"],
     ["8,200 tokens exceed", "max_position_embeddings of 8,192"]),
    (["analyze", "generate", "--gpu", "h100", "--batch", "4096"], ["batch 4,096 does not fit", "largest batch"]),
    (["analyze", "generate", "--gpu", "h100", "--model", "llama-3-70b"],
     ["does not fit", "largest batch that fits: 0"]),
    (["analyze", "generate", "--reserve-gib", "-1"], ["--reserve-gib -1"]),
    (["analyze", "generate", "--gpu", "nope"], ["unknown GPU"]),
    (["compare", "--batch", "8", "--tpot-ms", "20"], ["give one"]),
    (["analyze", "generate", "--no-chunked-prefill", "--max-num-batched-tokens", "4096"],
     ["--max-num-batched-tokens with --no-chunked-prefill"]),
    (["analyze", "generate", "--max-num-batched-tokens", "0"], ["--max-num-batched-tokens 0"]),
    (["compare", "--stack", "nope"], ["unknown stack 'nope'"]),
    (["plot", "pareto", "--stack", "nope", "-o", "x.png"], ["unknown stack 'nope'"]),
    (["analyze", "generate", "--model", "mixtral-8x7b", "--ep", "2"], ["--ep", "not simulated"]),
    (["compare", "--tpot-ms", "0"], ["--tpot-ms 0"]),
    (["compare", "--json", "--csv"], ["give one"]),
    (["compare", "--gpu", "h100", "--gpu", "h100-sxm"], ["--gpu h100-sxm", "already compared (as h100)"]),
    (["compare", "--output", "1", "--tpot-ms", "20"], ["at least 2 output tokens"]),
    (["plot", "pareto", "--output", "1", "-o", "x.png"], ["at least 2 output tokens"]),
    (["plot", "pareto", "-o", "x.txt"], ["unknown image format"]),
])
def test_bad_input_is_one_line(args, fragments, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert_one_line_error(cli(*args), *fragments)


# --- compare ----------------------------------------------------------------------------------------------------

ROW = {"gpu": (str,), "tp": (int,), "ep": (int,), "pp": (int,), "gpus": (int,), "deployment": (str,),
       "replicas": (int, NONE), **{k: (int, NONE) for k in ("prefill_replicas", "prefill_tp", "prefill_ep",
                                                            "decode_replicas", "decode_tp", "decode_ep")},
       "kv_transfer_s": (float, NONE), "kv_wait_s": (float, NONE), "kv_bytes_per_request": (float, NONE),
       "name": (str,), "rule": (str,), "batch": (int, NONE), "largest_batch": (int,),
       "ttft_s": (float, NONE), "tpot_s": (float, NONE), "e2e_s": (float, NONE),
       "output_tokens_per_s_per_gpu": (float, NONE), "total_tokens_per_s_per_gpu": (float, NONE),
       "bound": (str, NONE), "note": (str,), "stack": (str,), "chunked_prefill": (bool,),
       "usd_per_million_output_tokens": (NONE,), "joules_per_output_token": (float, NONE)}
# The data types every row and point ran, and the whole output's (a script tells an int4 run from a bf16 one).
TYPES = {"dtype": (str,), "weight_dtype": (str,), "group_size": (int, NONE), "act_dtype": (str,), "kv_dtype": (str,)}
COMPARE = {"request.prompt": (int,), "request.output": (int,), "model": (str, NONE), **METHOD, **TYPES,
           "price_per_gpu_hour": (NONE,), "load.kind": (str,), "load.concurrency": (int, NONE),
           "load.requests": (int, NONE),
           **{f"gpus[].{k}": v for k, v in {**ROW, **TYPES}.items()}}


def test_compare_json_schema_and_rows():
    outputs = [
        run_json("compare", "--gpu", "a100", "--gpu", "h100", "--gpu", "b200", "--model", "llama-3-8b", "--tpot-ms",
                 "20"),
        run_json("compare", "--gpu", "h100", "--gpu", "b200", "--model", "llama-3-70b", "--batch", "8"),
        # One output token: no TPOT (null). On the B200: on the H100 no row would have a result (exit 2).
        run_json("compare", "--gpu", "b200", "--model", "llama-3-70b", "--output", "1"),
        run_json("compare", "--gpu", "h100", "--model", "llama-3-8b", "--batch", "8", "--output", "8", "--replicas",
                 "2", "--disagg", "1:1"),
        run_json("compare", "--gpu", "h100", "--model", "llama-3-8b", "--concurrency", "4", "--requests", "8",
                 "--output", "8"),
    ]
    check_schema(outputs, COMPARE)
    at_target = outputs[0]["gpus"]
    assert all(r["tpot_s"] <= 0.020 and r["batch"] <= r["largest_batch"] for r in at_target)
    h100_70b = outputs[1]["gpus"][0]
    assert h100_70b["batch"] is None and h100_70b["largest_batch"] == 0 and "does not fit" in h100_70b["note"]


def test_compare_row_is_analyze_generate():
    """A row at a given batch is `analyze generate` at that batch, number for number; the CSV holds the same."""
    row = run_json("compare", "--gpu", "h200", "--batch", "16", "--prompt", "1000", "--output", "100")["gpus"][0]
    g = run_json("analyze", "generate", "--gpu", "h200", "--batch", "16", "--prompt", "1000", "--output", "100")
    assert (row["ttft_s"], row["tpot_s"], row["e2e_s"]) == (g["latency"]["ttft_s"], g["latency"]["tpot_s"],
                                                            g["latency"]["e2e_s"])
    assert row["largest_batch"] == g["memory"]["largest_batch"]
    result = cli("compare", "--gpu", "h200", "--batch", "16", "--prompt", "1000", "--output", "100", "--csv")
    (line,) = list(csv.DictReader(io.StringIO(result.stdout)))
    assert float(line["tpot_s"]) == row["tpot_s"] and int(line["batch"]) == 16


def test_compare_text_names_what_does_not_fit():
    result = cli("compare", "--gpu", "h100", "--gpu", "b200", "--model", "llama-3-70b")
    assert result.exit_code == 0, result.output
    assert "h100-sxm: does not fit: one request needs" in result.stdout and "b200" in result.stdout


# Where no row has a result, compare printed a table of dashes and exited 0, as if it had answered.
@pytest.mark.parametrize("args, message", [
    (["--gpu", "h100", "--gpu", "a100", "--model", "llama-3.1-405b"],
     "llama-3.1-405b: no row has a result: h100-sxm, a100-80gb: does not fit: one request needs 767.5 GiB (weights "
     "756.0 GiB) of 80 GiB; split it with --tp or --pp, or quantize it (--weight-dtype)"),
    (["--gpu", "h100", "--gpu", "h200", "--model", "llama-3-8b", "--tpot-ms", "1"],
     "llama-3-8b: no row has a result: h100-sxm: TPOT is 4.57 ms at batch 1; h200: TPOT is 3.19 ms at batch 1"),
    (["--gpu", "h100", "--model", "llama-3-70b", "--tp", "1", "--tp", "2", "--batch", "4000"],
     "llama-3-70b: no row has a result: h100-sxm TP1: does not fit: one request needs 141.4 GiB (weights 131.4 GiB) "
     "of 80 GiB; h100-sxm TP2: batch 4,000 does not fit (largest 16)"),
    (["--gpu", "h100", "--model", "llama-3.1-405b", "--replicas", "2", "--concurrency", "2", "--requests", "2"],
     "llama-3.1-405b: no row has a result: h100-sxm 2×TP1: does not fit: one request needs 767.5 GiB (weights 756.0 "
     "GiB) of 80 GiB; split it with --tp or --pp, or quantize it (--weight-dtype)"),
], ids=["fits-nowhere", "tpot-target", "batch", "replicas"])
@pytest.mark.parametrize("output", [[], ["--json"], ["--csv"]], ids=["text", "json", "csv"])
def test_compare_with_no_result_exits_2_naming_each_rows_reason(args, message, output):
    result = cli("compare", *args, *output)
    assert_one_line_error(result)
    assert result.stderr == f"error: {message}\n"


def test_the_api_refuses_a_compare_with_no_result():
    with pytest.raises(UserError, match="^llama-3.1-405b: no row has a result: h100-sxm: does not fit"):
        rl.compare(gpus=["h100"], model="llama-3.1-405b")
    # One row with a result is an answer: the rows without one keep their notes.
    r = rl.compare(gpus=["h100", "b200"], model="llama-3-70b", batch=8)
    assert [row["batch"] for row in r.to_dict()["gpus"]] == [None, 8]


# --- plot pareto ------------------------------------------------------------------------------------------------

PARETO = {
    "path": (str, type(None)), "request.prompt": (int,), "request.output": (int,),
    "gpus[].gpu": (str,), "gpus[].tp": (int,), "gpus[].ep": (int,), "gpus[].pp": (int,),
    "gpus[].gpus": (int,), "gpus[].largest_batch": (int,), "gpus[].fits": (bool,),
    "gpus[].memory_at_limit_bytes": (int,), "gpus[].capacity_bytes": (int,),
    "points": (list,),
    **{f"points[].{k}": (int,) for k in ("batch", "largest_batch", "memory_bytes", "capacity_bytes")},
    **{f"points[].{k}": (float,) for k in ("tpot_s", "ttft_s", "e2e_s", "output_tokens_per_s_per_gpu",
                                           "total_tokens_per_s_per_gpu")},
    "points[].gpu": (str,), "points[].tp": (int,), "points[].ep": (int,), "points[].pp": (int,),
    "points[].gpus": (int,), "points[].stack": (str,), "points[].chunked_prefill": (bool,), **METHOD,
    "model": (str,), **TYPES, **{f"points[].{k}": v for k, v in TYPES.items()},
    "price_per_gpu_hour": (NONE,), "points[].usd_per_million_output_tokens": (NONE,),
    "points[].joules_per_output_token": (float,),
}


def test_pareto_json_csv_and_analyze_agree(tmp_path):
    args = ["plot", "pareto", "--gpu", "h100", "--gpu", "b200", "--model", "llama-3-8b", "--prompt", "2048",
            "--output", "256", "-o", str(tmp_path / "p.png")]
    data = run_json(*args)
    check_schema([data], PARETO)
    # A model that fits on none of the GPUs draws nothing: refused in one line (the next test), not an empty chart.
    h100 = [p for p in data["points"] if p["gpu"] == "h100-sxm"]
    # Chunked prefill: a step's activations are the budget's, and 200 requests of ⌈2,303 / 16⌉ = 144 blocks fit.
    assert [p["batch"] for p in h100] == [1, 2, 4, 8, 16, 32, 64, 128, 200]
    assert all(p["memory_bytes"] <= p["capacity_bytes"] for p in data["points"])
    rows = list(csv.DictReader(io.StringIO(cli(*args, "--csv").stdout)))
    assert [(r["gpu"], int(r["batch"]), float(r["tpot_s"])) for r in rows] == \
        [(p["gpu"], p["batch"], p["tpot_s"]) for p in data["points"]]
    # The point at batch 8 is `analyze generate --batch 8`.
    g = run_json("analyze", "generate", "--gpu", "h100", "--model", "llama-3-8b", "--batch", "8")
    (p8,) = [p for p in h100 if p["batch"] == 8]
    assert (p8["tpot_s"], p8["output_tokens_per_s_per_gpu"]) == (g["latency"]["tpot_s"],
                                                                 g["throughput"]["output_tokens_per_s_per_gpu"])


def _labels_apart(fig) -> tuple[int, int]:
    """(labels drawn, labels left out per the footnote), after checking that every batch label lies inside the
    axes and overlaps no other label and not the legend."""
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    labels = [t for t in ax.texts if (t.get_gid() or "").startswith("batch ")]
    boxes = [t.get_window_extent(renderer) for t in labels]
    axes_box = ax.get_window_extent(renderer)
    legend_box = ax.get_legend().get_window_extent(renderer)
    for i, a in enumerate(boxes):
        assert axes_box.x0 <= a.x0 and a.x1 <= axes_box.x1 and axes_box.y0 <= a.y0 and a.y1 <= axes_box.y1
        assert not any(a.overlaps(b) for b in boxes[i + 1:])
        assert not a.overlaps(legend_box)
    footnote = [t.get_text() for t in ax.texts if t.get_gid() == "labels-left-out"]
    left_out = int(footnote[0].split()[0]) if footnote else 0
    return len(labels), left_out


def test_pareto_crowded_labels_never_overlap(tmp_path):
    """Six GPUs, two of them (the A100 80GB and the H100 PCIe, both about 2 TB/s) with nearly the same curve: a
    label with no free spot is left out and counted in the footnote, never drawn over another."""
    from rooflinectl.engine.choice import latency_throughput_curve
    from rooflinectl.engine.memory import reserve_bytes
    from rooflinectl.engine.roofline import analyze
    from rooflinectl.plot.pareto import draw_pareto
    from rooflinectl.specs.hardware import load_gpu
    from rooflinectl.specs.scenario import resolve_workload

    base = resolve_workload("prefill", model="llama-3-8b", batch=1, seq_len=1)
    curves = []
    for name in ("a100-40gb", "a100", "h100", "h100-pcie", "h200", "l40s"):
        gpu = load_gpu(name)
        curves.append(latency_throughput_curve(base, 512, 512, lambda w, gpu=gpu: analyze(w, gpu),
                                               reserve_bytes(gpu.memory.hbm_capacity_gib * 2**30, None), gpu.id))
    fig = draw_pareto(curves, "t", tmp_path / "crowded.png")
    drawn, left_out = _labels_apart(fig)
    assert drawn + left_out == sum(len(c.points) for c in curves) and drawn > 0.9 * (drawn + left_out)


def test_pareto_draws_labels_apart_and_says_what_does_not_fit(tmp_path):
    """Every batch label lies inside the axes and overlaps no other label; a model that fits nowhere is named."""
    from rooflinectl.engine.choice import latency_throughput_curve
    from rooflinectl.engine.memory import reserve_bytes
    from rooflinectl.engine.roofline import analyze
    from rooflinectl.plot.pareto import draw_pareto
    from rooflinectl.specs.hardware import load_gpu
    from rooflinectl.specs.scenario import resolve_workload

    curves = []
    for model in ("llama-3-8b", "llama-3-70b"):
        base = resolve_workload("prefill", model=model, batch=1, seq_len=1)
        curves = []
        for name in ("h100", "h200", "b200"):
            gpu = load_gpu(name)
            curves.append(latency_throughput_curve(base, 2048, 256, lambda w, gpu=gpu: analyze(w, gpu),
                                                   reserve_bytes(gpu.memory.hbm_capacity_gib * 2**30, None),
                                                   gpu.id))
        fig = draw_pareto(curves, "t", tmp_path / f"{model}.png")
        ax = fig.axes[0]
        assert _labels_apart(fig) == (sum(len(c.points) for c in curves), 0)  # every point labelled
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        notes = [t.get_text() for t in ax.get_legend().get_texts() if t.get_gid() == "does-not-fit"]
        if model == "llama-3-70b":  # 131.4 GiB of weights: the H100 (80 GiB) and, with its 14 GiB reserve, the H200
            assert notes == ["h100-sxm: does not fit, one request needs 140.4 GiB of 80 GiB (131.4 GiB weights, 8.0 GiB reserve)",
                             "h200: does not fit, one request needs 146.4 GiB of 140 GiB (131.4 GiB weights, 14.0 GiB reserve)"]
            assert legend[0] == "b200 (largest batch 28)"
        else:
            assert notes == []
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_pareto_refuses_a_model_that_fits_nowhere_and_writes_nothing(tmp_path):
    from helpers import assert_one_line_error

    chart = tmp_path / "p.png"
    assert_one_line_error(cli("plot", "pareto", "--gpu", "a100", "--model", "llama-3.1-405b", "-o", str(chart),
                              "--json"), "fits on none of the GPUs", "--tp")
    assert not chart.exists()


def test_pareto_json_and_csv_write_a_chart_only_when_asked(tmp_path, monkeypatch):
    """--json and --csv print the points: no pareto.png appears unless -o names a chart."""
    monkeypatch.chdir(tmp_path)
    args = ["plot", "pareto", "--gpu", "h100", "--model", "llama-3-8b", "--output", "16"]
    data = run_json(*args)
    assert data["path"] is None and data["points"]
    assert cli(*args, "--csv").exit_code == 0
    assert list(tmp_path.iterdir()) == []
    assert run_json(*args, "-o", "p.svg")["path"] == "p.svg"
    assert [p.name for p in tmp_path.iterdir()] == ["p.svg"]
    # A plain run writes the default chart and says so.
    assert cli(*args).stdout.startswith("wrote pareto.png (llama-3-8b: h100-sxm up to batch ")
    assert (tmp_path / "pareto.png").exists()


def test_compare_and_pareto_name_quantized_weights():
    out = cli("compare", "--gpu", "h100", "--model", "llama-3-8b", "--weight-dtype", "int4").stdout
    assert "int4 g128 weights, bf16 activations" in out.splitlines()[0]
    # --json and --csv carry the types, the output's and each row's or point's: int4 g128, gpt-oss's own mxfp4.
    int4 = {"dtype": "bf16", "weight_dtype": "int4", "group_size": 128, "act_dtype": "bf16", "kv_dtype": "bf16"}
    data = run_json("compare", "--gpu", "h100", "--model", "llama-3-8b", "--weight-dtype", "int4")
    assert {k: data[k] for k in int4} == int4 and {k: data["gpus"][0][k] for k in int4} == int4
    (row,) = csv.DictReader(io.StringIO(cli("compare", "--gpu", "h100", "--model", "gpt-oss-120b", "--csv").stdout))
    assert (row["weight_dtype"], row["group_size"], row["act_dtype"]) == ("mxfp4", "", "bf16")
    args = ["plot", "pareto", "--gpu", "h100", "--model", "gpt-oss-20b", "--output", "8"]
    data = run_json(*args)
    assert data["weight_dtype"] == "mxfp4" and {p["weight_dtype"] for p in data["points"]} == {"mxfp4"}
    rows = list(csv.DictReader(io.StringIO(cli(*args, "--csv").stdout)))
    assert {r["weight_dtype"] for r in rows} == {"mxfp4"}


def test_compare_refuses_a_tpot_target_that_is_not_a_finite_number():
    for bad in ("inf", "nan", "0", "-3"):
        r = cli("compare", "--gpu", "h100", "--tpot-ms", bad)
        assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "--tpot-ms" in r.stderr, (bad, r.stderr)


def test_the_stack_line_names_the_refill_latency():
    # stacks/hf.yaml measures 280 µs between a client's last request finishing and its next reaching the engine.
    r = cli("analyze", "serve", "--gpu", "h200", "--model", "llama-3-8b", "--stack", "hf", "--concurrency", "2",
            "--requests", "4", "--prompt", "128", "--output", "8")
    assert r.exit_code == 0, r.output
    assert "a closed loop's next request reaches the engine 280 µs after the last" in " ".join(r.output.split())
