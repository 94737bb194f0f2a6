"""Fuzz every public loader through the commands that read it: hardware YAML (plain and calibrated), scenario and
model YAML, Hugging Face config.json, measurement records; mutated bundled files, bytes no text editor writes,
pathological documents and odd paths. The property is issue 18's (``fuzz_support.check``), and every result that
comes back is checked against its own arithmetic.

The budget is fixed (``BUDGET`` examples per test, derandomized: the same cases on every run and machine).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
import yaml
from fuzz_inputs import (
    PATHOLOGICAL_JSON,
    PATHOLOGICAL_YAML,
    mutated_bytes,
    mutated_mapping,
    mutated_text,
)
from fuzz_support import (
    HARDWARE,
    MODELS,
    SCENARIOS,
    check,
    check_analysis,
    check_chart,
    check_chart_file,
    check_occupancy,
    dump_yaml,
    fuzz_settings,
    run,
)
from hypothesis import given
from hypothesis import strategies as st

from rooflinectl.specs.hardware import load_gpu_file

GIB = 2**30
RECORD = Path(__file__).parent / "data" / "record.json"



def _read(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


BASE_GPUS = {p.name: _read(p) for p in HARDWARE}
BASE_SCENARIOS = {p.name: _read(p) for p in SCENARIOS}
BASE_MODELS = {p.name: _read(p) for p in MODELS}
MEASURED = {"device_name": "NVIDIA H100 80GB HBM3", "date": "2026-12-01T10:00:00+00:00",
            "command": "rooflinectl calibrate -o lab-h100.yaml --gpu h100", "torch_version": "2.4.0",
            "triton_version": "3.0.0", "driver": "550.54.15", "copy_bandwidth_gbps": 2950.5,
            "tensor_tflops": {"bf16": 760.0, "fp16": 771.2}, "vector_tflops": {"fp32": 50.1}}
HF_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "intermediate_size": 14336, "vocab_size": 128256, "hidden_act": "silu", "head_dim": 128,
             "max_position_embeddings": 8192, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
             "_name_or_path": "meta-llama/Meta-Llama-3-8B", "rms_norm_eps": 1e-5, "rope_theta": 500000.0}


@st.composite
def file_text(draw, base: dict, protect: tuple = ()) -> bytes:
    """A spec file: the mapping mutated, then perhaps its text, then perhaps its bytes."""
    text = dump_yaml(draw(mutated_mapping(base, protect)))
    if draw(st.integers(0, 2)) == 0:
        text = draw(mutated_text(text))
    data = text.encode()
    if draw(st.integers(0, 5)) == 0:
        data = draw(mutated_bytes(data))
    return data


def _roofs(path: Path, calibrated: bool) -> tuple[set[float], float]:
    gpu = load_gpu_file(path)  # it loaded in the command, so it loads here
    roofs = gpu.roofs(calibrated)
    return {*roofs.tensor_tflops.values(), *roofs.vector_tflops.values()}, gpu.memory.hbm_capacity_gib * GIB


def check_gpu_file(path: Path, calibrated: bool = False) -> None:
    """Every command that reads a GPU file, on ``path``: show it, analyze on it, its occupancy."""
    shown = check(run("hardware", "show", str(path), "--json"), json_out=True)
    flag = ["--calibrated"] if calibrated else []
    r = run("analyze", "decode", "--gpu", str(path), "--json", *flag)
    data = check(r, json_out=True)
    if data is not None:
        assert shown is not None, "analyze read a GPU file that hardware show refused"
        check_analysis(data, r, *_roofs(path, calibrated))
    r = run("occupancy", "--gpu", str(path), "-t", "256", "-r", "64", "--smem", "48K", "--grid", "1000", "--json")
    data = check(r, json_out=True)
    if data is not None:
        check_occupancy(data, r, load_gpu_file(path).sm_count)


@fuzz_settings(60)
@given(st.data())
def test_hardware_file(data):
    name = data.draw(st.sampled_from(sorted(BASE_GPUS)), label="base")
    content = data.draw(file_text(BASE_GPUS[name]), label="file")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gpu.yaml"
        path.write_bytes(content)
        check_gpu_file(path)


@fuzz_settings(30)
@given(st.data())
def test_calibrated_hardware_file(data):
    """A calibrated file (``rooflinectl calibrate``'s ``measured`` section) mutated where the ceilings are."""
    base = {**BASE_GPUS["h100-sxm.yaml"], "id": "lab-h100", "aliases": [], "measured": MEASURED}
    content = data.draw(file_text(base, protect=("measured",)), label="file")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lab-h100.yaml"
        path.write_bytes(content)
        check_gpu_file(path, calibrated=True)


# A small op model (engine/calibrated.py) beside MEASURED's ceilings, for the fuzz to mutate.
OP_MODEL = {"launch_floor_s": 2e-06, "grid": "fuzz", "timer": "cuda_graph", "curves": [
    {"op_class": "gemm", "bound": "memory", "points": [{"label": "gemv", "roof_s": 1e-05, "measured_s": 1.8e-05},
                                                       {"label": "gemv x4", "roof_s": 4e-05, "measured_s": 5e-05}]},
    {"op_class": "memory", "bound": "memory", "points": [{"label": "add", "roof_s": 4e-07, "measured_s": 2.2e-06}]},
]}


@fuzz_settings(30)
@given(st.data())
def test_op_model_file(data):
    """A calibrated file with an op model, mutated inside the op model: refused in one line, or every op timed
    at or above the launch floor, finite, with the roofline's own relations intact (check_analysis)."""
    base = {**BASE_GPUS["h100-sxm.yaml"], "id": "lab-h100", "aliases": [],
            "measured": {**MEASURED, "op_model": OP_MODEL}}
    content = data.draw(file_text(base, protect=("measured", "op_model")), label="file")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lab-h100.yaml"
        path.write_bytes(content)
        check_gpu_file(path, calibrated=True)


def check_workload(args: list[str], path: Path) -> None:
    r = run("analyze", *args, "--json")
    data = check(r, json_out=True)
    if data is not None:
        check_analysis(data, r, *_roofs(Path(HARDWARE[0].parent / "h100-sxm.yaml"), False))


@fuzz_settings(50)
@given(st.data())
def test_scenario_file(data):
    """A scenario naming its model by id, by a path beside it, or inline."""
    name = data.draw(st.sampled_from(sorted(BASE_SCENARIOS)), label="base")
    base = dict(BASE_SCENARIOS[name])
    how = data.draw(st.sampled_from(["id", "path", "inline"]), label="model")
    if how == "path":
        base["model"] = "models/mine.yaml"
    elif how == "inline":
        base["model"] = BASE_MODELS["llama-3-8b.yaml"]
    content = data.draw(file_text(base), label="file")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "models").mkdir()
        (Path(tmp) / "models" / "mine.yaml").write_text(dump_yaml(BASE_MODELS["mistral-7b.yaml"]))
        path = Path(tmp) / "scenario.yaml"
        path.write_bytes(content)
        check(run("workloads", "show", str(path), "--json"), json_out=True)
        check_workload([str(path), "--gpu", "h100"], path)


@fuzz_settings(40)
@given(st.data())
def test_model_file(data):
    name = data.draw(st.sampled_from(sorted(BASE_MODELS)), label="base")
    content = data.draw(file_text(BASE_MODELS[name]), label="file")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.yaml"
        path.write_bytes(content)
        check(run("workloads", "show", str(path), "--json"), json_out=True)
        check_workload(["decode", "--model", str(path), "--gpu", "h100"], path)
        check_workload(["prefill", "--model", str(path), "--gpu", "h100", "--seq-len", "512"], path)


@st.composite
def json_text(draw, base: dict) -> bytes:
    """A JSON document: the mapping mutated (NaN and Infinity as Python writes them), a key given twice, or cut."""
    text = json.dumps(draw(mutated_mapping(base)), indent=1)
    action = draw(st.sampled_from(["as is", "as is", "duplicate", "raw"]))
    if action == "duplicate":
        lines = text.splitlines()
        i = draw(st.integers(1, max(1, len(lines) - 2)))
        if lines[i].rstrip().endswith(","):
            lines.insert(i, lines[i])
        text = "\n".join(lines)
    elif action == "raw":
        key = draw(st.sampled_from(sorted(base)))
        raw = draw(st.sampled_from(["NaN", "-Infinity", "1e999", "9" * 5000, "01", "0x10", "true", "[]",
                                    '"8"', "1.0", "-0", "1e-400"]))
        text = text.replace(f'"{key}": ', f'"{key}": {raw}, "_was": ', 1)
    data = text.encode()
    if draw(st.integers(0, 4)) == 0:
        data = draw(mutated_bytes(data))
    return data


@fuzz_settings(60)
@given(st.data())
def test_hf_config_json(data):
    content = data.draw(json_text(HF_CONFIG), label="config.json")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "my-model"
        folder.mkdir()
        (folder / "config.json").write_bytes(content)
        check_workload(["decode", "--model", str(folder / "config.json"), "--gpu", "h100"], folder)
        check(run("workloads", "show", str(folder / "config.json"), "--json"), json_out=True)


@fuzz_settings(15)
@given(st.data())
def test_measurement_record(data):
    """``plot --measured``: the record ``measure --save`` writes, mutated."""
    base = json.loads(RECORD.read_text())
    content = data.draw(json_text(base), label="record")
    suffix = data.draw(st.sampled_from([".png", ".svg", ".pdf"]), label="format")
    with tempfile.TemporaryDirectory() as tmp:
        record, out = Path(tmp) / "r.json", Path(tmp) / f"chart{suffix}"
        record.write_bytes(content)
        r = run("plot", "decode", "--gpu", "h100", "--measured", str(record), "-o", str(out), "--json")
        chart = check(r, json_out=True)
        if chart is not None:
            check_chart(chart, r)
            check_chart_file(out, r)
        else:
            assert not out.exists(), f"a refused plot left {out} behind:\n{r.describe()}"


def test_the_base_record_plots():
    """The record the fuzz mutates is one plot --measured draws (else every mutation would only be refused)."""
    with tempfile.TemporaryDirectory() as tmp:
        r = run("plot", "decode", "--gpu", "h100", "--measured", str(RECORD), "-o", f"{tmp}/c.svg", "--json")
        chart = check(r, json_out=True)
        assert chart is not None and any(p["measured"] for p in chart["panels"]), r.describe()


# --- whole documents no spec looks like, in every place a file is read -----------------------------------------

READERS = {
    "gpu": lambda p: ["analyze", "--gpu", p, "--json"],
    "hardware show": lambda p: ["hardware", "show", p, "--json"],
    "scenario": lambda p: ["analyze", p, "--json"],
    "model": lambda p: ["analyze", "--model", p, "--json"],
    "workloads show": lambda p: ["workloads", "show", p, "--json"],
    "occupancy": lambda p: ["occupancy", "--gpu", p, "-t", "128", "-r", "32", "--json"],
    "config.json": lambda p: ["analyze", "--model", p, "--json"],
    "records": lambda p: ["plot", "decode", "--gpu", "h100", "--measured", p, "-o", str(Path(p).parent / "c.svg")],
}


@fuzz_settings(40)
@given(reader=st.sampled_from(sorted(READERS)), data=st.data())
def test_pathological_documents(reader, data):
    json_reader = reader in ("config.json", "records")
    text = data.draw(PATHOLOGICAL_JSON if json_reader else PATHOLOGICAL_YAML, label="document")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("config.json" if reader == "config.json" else "r.json" if json_reader else "f.yaml")
        path.write_text(text)
        check(run(*READERS[reader](str(path))), json_out="--json" in READERS[reader]("x"))


@fuzz_settings(20)
@given(st.data())
def test_a_bad_file_in_the_user_folders(data):
    """ROOFLINECTL_HARDWARE_PATH and ROOFLINECTL_WORKLOADS_PATH name a folder with a broken file in it: every
    command that looks a name up still answers in one line or with a result."""
    kind = data.draw(st.sampled_from(["hardware", "workloads", "models"]), label="folder")
    base = (BASE_GPUS["h100-sxm.yaml"] if kind == "hardware" else BASE_SCENARIOS["decode.yaml"] if kind ==
            "workloads" else BASE_MODELS["llama-3-8b.yaml"])
    content = data.draw(st.one_of(file_text(base), PATHOLOGICAL_YAML.map(str.encode)), label="file")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / ("models" if kind == "models" else "")
        folder.mkdir(exist_ok=True)
        (folder / "mine.yaml").write_bytes(content)
        env = {"ROOFLINECTL_HARDWARE_PATH" if kind == "hardware" else "ROOFLINECTL_WORKLOADS_PATH": tmp}
        for args in (["analyze", "--gpu", "h100", "--json"], ["hardware", "list", "--json"],
                     ["workloads", "list", "--json"], ["analyze", "mine", "--json"], ["hardware", "show", "mine"],
                     ["workloads", "show", "mine", "--json"], ["analyze", "--model", "mine", "--json"]):
            check(run(*args, env=env), json_out="--json" in args)


# --- odd paths where a file is read, and where one is written -------------------------------------------------

def make_path(kind: str, tmp: Path, content: bytes) -> str:
    """A path of ``kind`` under ``tmp``; a regular file holds ``content``."""
    regular = tmp / "spec.yaml"
    regular.write_bytes(content)
    if kind == "file":
        return str(regular)
    if kind == "link":
        (tmp / "link.yaml").symlink_to(regular)
        return str(tmp / "link.yaml")
    if kind == "dangling link":
        (tmp / "dangling.yaml").symlink_to(tmp / "nowhere.yaml")
        return str(tmp / "dangling.yaml")
    if kind == "link loop":
        (tmp / "loop.yaml").symlink_to(tmp / "loop.yaml")
        return str(tmp / "loop.yaml")
    if kind == "fifo":
        os.mkfifo(tmp / "fifo.yaml")
        return str(tmp / "fifo.yaml")
    if kind == "folder":
        (tmp / "folder.yaml").mkdir()
        return str(tmp / "folder.yaml")
    if kind == "long name":
        return str(tmp / ("x" * 300 + ".yaml"))
    if kind == "long path":
        return str(tmp / "/".join(["d" * 200] * 25) / "f.yaml")
    if kind == "under a file":
        return str(regular / "inner.yaml")
    if kind == "missing":
        return str(tmp / "missing.yaml")
    if kind == "markup name":
        odd = tmp / "[bold]x[red]$\\frac{$ [link=x].yaml"
        odd.write_bytes(content)
        return str(odd)
    return {"dev zero": "/dev/zero", "dev null": "/dev/null", "proc": "/proc/self/status", "root": "/"}[kind]


PATH_KINDS = ["file", "link", "dangling link", "link loop", "fifo", "folder", "long name", "long path",
              "under a file", "missing", "markup name", "dev zero", "dev null", "proc", "root"]


@fuzz_settings(60)
@given(reader=st.sampled_from(sorted(READERS)), kind=st.sampled_from(PATH_KINDS))
def test_odd_input_paths(reader, kind):
    content = {"gpu": "h100-sxm.yaml", "hardware show": "h100-sxm.yaml", "occupancy": "h100-sxm.yaml"}.get(reader)
    if content:
        body = (HARDWARE[0].parent / content).read_bytes()
    elif reader in ("scenario", "workloads show"):
        body = SCENARIOS[1].read_bytes()
    elif reader == "model":
        body = MODELS[0].read_bytes()
    elif reader == "config.json":
        body = json.dumps(HF_CONFIG).encode()
    else:
        body = RECORD.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        path = make_path(kind, Path(tmp), body)
        if reader == "config.json" and kind in ("file", "link", "markup name"):
            path = str(Path(path).rename(Path(path).with_suffix(".json")))
        args = READERS[reader](path)
        if reader == "records":  # the chart goes beside, in the temporary folder
            args[-1] = f"{tmp}/c.svg"
        check(run(*args), json_out="--json" in args)


WRITERS = {
    "plot -o": lambda p: ["plot", "decode", "--gpu", "h100", "-o", p],
    "measure --save": lambda p: ["measure", "--kernel", "fused_softmax", "--save", p],
    "calibrate -o": lambda p: ["calibrate", "-o", p],
    "explore -o": lambda p: ["explore", "-o", p],
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@fuzz_settings(16)
@given(kind=st.sampled_from(PATH_KINDS), suffix=st.sampled_from([".png", ".svg", ".pdf", ".json", ".yaml", ""]))
def test_odd_output_paths(writer, kind, suffix):
    """Where nothing can be written, one line says so and nothing was created or changed."""
    with tempfile.TemporaryDirectory() as tmp:
        path = make_path(kind, Path(tmp), b"old contents\n")
        if writer != "explore -o" and kind in ("file", "missing", "long name") and suffix:
            path = str(Path(path).with_suffix(suffix))
        before = {p: (p.read_bytes() if p.is_file() else None) for p in Path(tmp).rglob("*") if not p.is_fifo()}
        result = run(*WRITERS[writer](path))
        check(result)
        if result.code == 2:
            after = {p: (p.read_bytes() if p.is_file() else None) for p in Path(tmp).rglob("*") if not p.is_fifo()}
            assert after == before, f"a refused command changed files:\n{result.describe()}"
