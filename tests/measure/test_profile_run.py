"""rooflinectl profile on the CPU with tiny configs (two layers, hidden 64, 4 heads over 2 KV heads, vocabulary
128): every CPU op of the step is charged to an op's work, its overhead or unattributed, the parts add up to the
profiled total, and the ops are the engine's for the same workload. No time is asserted (CPU times vary)."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from rooflinectl.engine.count.transformer import step_ops  # noqa: E402
from rooflinectl.profile.run import ProfileRequest, run_profile, workload_of  # noqa: E402

TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
        "vocab_size": 128, "max_position_embeddings": 256, "hidden_act": "silu", "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False}


def tiny_config(tmp_path_factory, name: str, **changes) -> str:
    path = tmp_path_factory.mktemp("cfg") / f"{name}.json"
    path.write_text(json.dumps({**TINY, **changes}))
    return str(path)


CASES = {
    "decode-sdpa": ({}, dict(phase="decode", batch=2, context=24, attn_implementation="sdpa")),
    "decode-eager": ({}, dict(phase="decode", batch=2, context=24, attn_implementation="eager")),
    "prefill-sdpa": ({}, dict(phase="prefill", batch=1, seq_len=16, attn_implementation="sdpa")),
    # Qwen3: q_norm and k_norm over each head, between the projections and RoPE.
    "qwen3-decode": ({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]},
                     dict(phase="decode", batch=1, context=16, attn_implementation="sdpa")),
    # Mistral with a window of 16 positions: every layer slides, the engine's core is attention_local.
    "mistral-window": ({"model_type": "mistral", "architectures": ["MistralForCausalLM"], "sliding_window": 16},
                       dict(phase="decode", batch=1, context=24, attn_implementation="sdpa")),
}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One CPU thread: a tiny model's matmuls on several threads, on a shared CI machine, spend their time
    waiting for each other (25 ms a 64×64 linear under load, against well under 1 ms on one)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for case, (changes, kw) in CASES.items():
        req = ProfileRequest(model=tiny_config(tmp_path_factory, case, **changes), device="cpu", reps=1, **kw)
        out[case] = (req, run_profile(req))
    return out


@pytest.mark.parametrize("case", CASES)
def test_ops_are_the_engines_and_each_ran(runs, case):
    req, r = runs[case]
    engine = [o.name for o in step_ops(workload_of(req))]
    assert [o.op for o in r.ops] == engine
    assert all(o.launches > 0 and o.measured_s is not None for o in r.ops), [o.op for o in r.ops if not o.launches]
    if case == "decode-eager":
        assert {"qk", "softmax", "pv"} <= set(engine) and "attention" not in engine
    elif case == "mistral-window":
        assert "attention_local" in engine and "attention" not in engine
    else:
        assert "attention" in engine
    if case == "qwen3-decode":
        assert {"q_norm", "k_norm"} <= set(engine)


@pytest.mark.parametrize("case", CASES)
def test_every_event_is_charged_once_and_the_parts_add_up(runs, case):
    _, r = runs[case]
    work = math.fsum(o.measured_s or 0.0 for o in r.ops)
    overhead = math.fsum(k.time_s for o in r.ops for k in o.overhead)
    unattributed = math.fsum(k.time_s for k in r.unattributed)
    assert math.isclose(work + overhead + unattributed, r.profiled_s, rel_tol=1e-9)
    assert math.isclose(r.work_s, work, rel_tol=1e-9) and math.isclose(r.overhead_s, overhead, rel_tol=1e-9)
    launches = sum(o.launches + sum(k.launches for k in o.overhead) for o in r.ops) + \
        sum(k.launches for k in r.unattributed)
    assert launches == r.launches > 0
    assert r.clock == "cpu ops" and r.timer == "eager" and r.device == "cpu"
    assert any("CPU time, not a GPU figure" in n for n in r.notes)
    assert all(o.roof_pct is None for o in r.ops)  # CPU time is never a share of a GPU's roof


def test_the_engine_counts_are_the_whole_steps(runs):
    """Each op's FLOPs and bytes are one instance's times its count (the two layers)."""
    req, r = runs["decode-sdpa"]
    for op, row in zip(step_ops(workload_of(req)), r.ops):
        assert row.count == op.count and row.flops == round(op.flops * op.count)
        assert row.bytes == round(op.bytes * op.count)
    q = next(o for o in r.ops if o.op == "q_proj")
    # q_proj: 2 tokens × 64 → 64, fp32, 2 layers: 2·2·64·64 FLOPs a layer, (2·64 + 64·64 + 2·64)·4 bytes.
    assert q.flops == 2 * (2 * 2 * 64 * 64)
    assert q.bytes == 2 * (2 * 64 + 64 * 64 + 2 * 64) * 4


def test_the_cpu_total_is_every_cpu_op_of_the_step(tmp_path_factory):
    """Independently of trace.py: the profiler's own per-name totals (key_averages) of the step's CPU ops, the
    ranges left out, equal the events the attribution received."""
    import torch

    from rooflinectl.profile import build, ranges, trace
    from rooflinectl.profile.attribute import HARNESS

    req = ProfileRequest(model=tiny_config(tmp_path_factory, "total"), phase="decode", batch=1, context=8,
                         device="cpu")
    w = workload_of(req)
    config = build.config_from_json(req.model)
    b = build.decoder_step(build.build_model(config, "cpu", "sdpa"), config, w, "cpu")
    with torch.no_grad():
        b.reset()
        b.step()
        with ranges.installed(b.model, b.cache):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                b.reset()  # outside the harness's range here: its ops are then the step's, in the totals below
                b.step()
    events = trace.cpu_events(prof.events())
    ours = math.fsum(e.time_s for e in events)
    theirs = math.fsum(k.self_cpu_time_total for k in prof.key_averages()
                       if not k.key.startswith(ranges.PREFIX)) * 1e-6
    assert math.isclose(ours, theirs, rel_tol=1e-9)
    assert len(events) == sum(k.count for k in prof.key_averages() if not k.key.startswith(ranges.PREFIX))
    assert not any(r.label == HARNESS for e in events for r in e.ranges)
    labels = {r.label for e in events for r in e.ranges}
    assert {"q_proj", "attention_core", "rope", "kv_write", "attn_residual", "mlp_residual"} <= labels


def test_predictions_under_the_spec_and_the_measured_ceilings(tmp_path, tmp_path_factory):
    """With a GPU file that calibrate wrote, each op is predicted twice. q_proj at batch 2 (decode, fp32, two
    layers) moves 2·(2·64 + 64·64 + 2·64)·4 = 34,816 bytes for 32,768 FLOPs: memory-bound under both, so
    34,816 B / 3,350 GB/s (the H100 SXM's datasheet) and / 2,950 GB/s (the copy ceiling measured)."""
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2]
    spec = yaml.safe_load((root / "hardware" / "h100-sxm.yaml").read_text())
    spec.update(id="lab-h100", aliases=[], measured={
        "device_name": "NVIDIA H100 80GB HBM3", "date": "2026-12-01T10:00:00+00:00",
        "command": "rooflinectl calibrate -o lab-h100.yaml --gpu h100", "torch_version": "2.4.0",
        "copy_bandwidth_gbps": 2950.0, "tensor_tflops": {"bf16": 760.5}, "vector_tflops": {"fp32": 50.0}})
    path = tmp_path / "lab-h100.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    req = ProfileRequest(model=tiny_config(tmp_path_factory, "calib"), phase="decode", batch=2, context=8,
                         device="cpu", reps=1)
    r = run_profile(req, gpu=str(path))
    q = next(o for o in r.ops if o.op == "q_proj")
    assert q.bytes == 34816 and q.flops == 32768
    assert math.isclose(q.predicted_s, 34816 / 3350e9, rel_tol=1e-12)
    assert math.isclose(q.calibrated_s, 34816 / 2950e9, rel_tol=1e-12)
    assert all(o.calibrated_s is not None for o in r.ops)
    # The table gives one instance's times, as measure --workload's does: 34,816 B over 2 layers, / 3,350 GB/s
    # = 5.2 ns (the record keeps the step's 10.4 ns), and / 2,950 GB/s = 5.9 ns; and it says so, and that the
    # CPU ran fp32.
    from io import StringIO

    from rich.console import Console

    from rooflinectl.render.profile import print_profile
    from rooflinectl.units import duration

    con = Console(file=StringIO(), width=200, no_color=True)
    print_profile(con, r)
    out = con.file.getvalue()  # type: ignore[attr-defined]
    row = next(line for line in out.splitlines() if line.split()[:1] == ["q_proj"])
    each = f" {duration(34816 / 2 / 3350e9)} {duration(34816 / 2 / 2950e9)} "
    assert each == " 5.2 ns 5.9 ns " and each in " ".join(row.split()) + " "
    assert "one instance's time" in " ".join(out.split())
    assert any(n.startswith("--device cpu runs the model in fp32, not the bf16 of a GPU run") for n in r.notes)
