"""The analyze, hardware and workloads commands: JSON shape, bad input (one line, exit 2), golden output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import cli
from rooflinectl.engine.roofline import analyze
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.workload import resolve_workload

GOLDEN = Path(__file__).parent / "golden"


def assert_one_line_error(result, *fragments: str):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]
    assert result.stdout == ""  # no number printed as if it were right


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
        assert set(op) == {"name", "count", "flops", "bytes", "intensity", "bound", "attainable_tflops", "time_s"}
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
    gpu = Path(__file__).parent.parent / "hardware" / "h100-sxm.yaml"
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
        (["workloads", "show", "nothing-like-this"], ["unknown workload"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, fragments):
    assert_one_line_error(cli(*args), *fragments)


@pytest.mark.parametrize(
    "text, fragments",
    [
        ("phase: decode\nmodel: llama-3-8b\ncontext: [1, 2\n", ["malformed YAML", "line"]),
        ("phase: decode\nmodel: llama-3-8b\ncontext: 64\nbacth: 4\n", ["bacth", "Extra inputs"]),
        ("phase: decode\nmodel: llama-3-8b\ncontext: -64\n", ["context", "greater than 0"]),
        ("- just\n- a list\n", ["mapping"]),
    ],
)
def test_malformed_workload_files(tmp_path, text, fragments):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert_one_line_error(cli("analyze", str(path)), str(path), *fragments)


def test_malformed_gpu_file_names_file_and_field(tmp_path):
    src = (Path(__file__).parent.parent / "hardware" / "h100-sxm.yaml").read_text()
    bad = tmp_path / "gpu.yaml"
    bad.write_text(src.replace("hbm_bandwidth_gbps: 3350", "hbm_bandwith_gbps: 3350"))
    assert_one_line_error(cli("analyze", "--gpu", str(bad)), str(bad), "hbm_bandwith_gbps")
    bad.write_text(src.replace("hbm_bandwidth_gbps: 3350", "hbm_bandwidth_gbps: -3350"))
    assert_one_line_error(cli("analyze", "--gpu", str(bad)), "memory.hbm_bandwidth_gbps", "greater than 0")
    assert_one_line_error(cli("analyze", "--gpu", str(tmp_path / "missing.yaml")), "no such file")


def test_missing_peak_for_dtype(tmp_path):
    src = (Path(__file__).parent.parent / "hardware" / "h100-sxm.yaml").read_text()
    gpu = tmp_path / "no-fp8.yaml"
    gpu.write_text(src.replace("    fp8: 1978.9\n", ""))
    assert_one_line_error(cli("analyze", "--gpu", str(gpu), "--dtype", "fp8"), "no tensor-core peak for fp8")


def test_calibrated_without_measurements_is_a_user_error():
    assert_one_line_error(cli("analyze", "--gpu", "h100", "--calibrated"), "no measured ceilings")


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


@pytest.mark.parametrize(
    "name, args",
    [
        ("analyze_decode_h100", ["analyze", "decode", "--gpu", "h100"]),
        ("analyze_attention_naive_h100", ["analyze", "attention", "--gpu", "h100", "--attention", "naive"]),
    ],
)
def test_golden_output(name, args, update_golden):
    """Fixed width, no colour; regenerate with `pytest --update-golden` and review the diff."""
    out = cli(*args).stdout
    path = GOLDEN / f"{name}.txt"
    if update_golden:
        path.write_text(out)
    assert path.exists(), f"{path} missing: run pytest --update-golden"
    assert out == path.read_text()


def test_cli_imports_no_heavy_module():
    code = ("import sys, rooflinectl.cli; "
            "print(' '.join(m for m in ('torch', 'triton', 'matplotlib', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_help_runs_without_heavy_imports():
    code = ("import sys; from rooflinectl.cli import app; from typer.testing import CliRunner; "
            "r = CliRunner().invoke(app, ['analyze', '--help']); assert r.exit_code == 0, r.output; "
            "print(' '.join(m for m in ('torch', 'triton', 'matplotlib', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def _command_paths(group, prefix=()):
    import typer

    click_group = typer.main.get_command(group) if not hasattr(group, "commands") else group
    for name, cmd in click_group.commands.items():
        if hasattr(cmd, "commands"):
            yield from _command_paths(cmd, (*prefix, name))
        else:
            yield " ".join((*prefix, name))


def test_every_command_is_documented_in_the_readme():
    from rooflinectl.cli import app

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    paths = list(_command_paths(app))
    assert {"analyze", "plot", "measure", "calibrate", "occupancy", "explore", "hardware show"} <= set(paths)
    for path in paths:
        assert f"rooflinectl {path}" in readme, f"README.md does not show `rooflinectl {path}`"


def test_readme_analyze_output_is_current():
    """The README's `$ rooflinectl analyze decode --gpu a100` block is the command's real output."""
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    block = readme.split("$ rooflinectl analyze decode --gpu a100\n", 1)[1].split("```", 1)[0]
    assert cli("analyze", "decode", "--gpu", "a100").stdout.rstrip() == block.rstrip()


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["analyze", "--batch", "abc"], "'--batch'"),
        (["analyze", "--bogus"], "No such option: --bogus"),
        (["occupancy", "--threads", "x"], "'--threads'"),
        (["analyze", "--gpu", "nope"], "unknown GPU"),
    ],
)
def test_usage_errors_through_the_entry_point_are_one_line(args, fragment):
    """Click's own errors (bad option values, unknown options) get the same one-line form as ours."""
    proc = subprocess.run([sys.executable, "-m", "rooflinectl", *args], capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], proc.stderr
    assert proc.stdout == ""


def test_help_through_the_entry_point():
    proc = subprocess.run([sys.executable, "-m", "rooflinectl", "analyze", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "Example: rooflinectl analyze" in proc.stdout
    bare = subprocess.run([sys.executable, "-m", "rooflinectl"], capture_output=True, text=True)
    assert bare.returncode == 0 and "analyze" in bare.stdout
