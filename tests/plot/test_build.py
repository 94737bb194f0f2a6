"""plot.build: the chart's content through its data (roofs, ridge, points, trajectories, legend), and the
``plot`` command that builds and writes it (bad input: one line, exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from plot_helpers import DECODE, GPU1, GPU2, PREFILL, assert_one_line_error, measured_file, write_gpu

from helpers import cli
from rooflinectl.engine.roofline import analyze, sweep
from rooflinectl.errors import UserError
from rooflinectl.plot.build import build_chart
from rooflinectl.specs.hardware import GPU
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.units import GIB


def test_roofs_have_their_values_and_slopes():
    panel = build_chart([DECODE], [GPU1]).panels[0]
    roofs = {r.name: r for r in panel.roofs}
    assert set(roofs) == {"HBM", "L2", "SRAM", "bf16 tensor", "fp32 vector"}
    assert (roofs["HBM"].value, roofs["HBM"].slope) == (2000e9, 1.0)
    assert (roofs["L2"].value, roofs["L2"].slope) == (5000e9, 1.0)
    assert (roofs["SRAM"].value, roofs["SRAM"].slope) == (20000e9, 1.0)
    assert (roofs["bf16 tensor"].value, roofs["bf16 tensor"].slope) == (300e12, 0.0)
    assert (roofs["fp32 vector"].value, roofs["fp32 vector"].slope) == (20e12, 0.0)
    assert roofs["HBM"].at(10) == 20e12 and roofs["bf16 tensor"].at(10) == 300e12
    # Memory roofs rise to the top compute roof; compute roofs start where they meet HBM: 300e12/2000e9 = 150,
    # 20e12/2000e9 = 10 FLOP/byte.
    assert roofs["HBM"].x_to == pytest.approx(150)
    assert roofs["L2"].x_to == pytest.approx(60)
    assert roofs["bf16 tensor"].x_from == pytest.approx(150)
    assert roofs["fp32 vector"].x_from == pytest.approx(10)
    assert roofs["bf16 tensor"].x_to == panel.xlim[1]
    assert roofs["HBM"].label == "HBM 2 TB/s"
    assert roofs["L2"].label == "L2 5 TB/s (estimated)"
    assert roofs["bf16 tensor"].label == "bf16 tensor 300 TFLOP/s"


def test_no_l2_or_sram_roof_where_the_spec_gives_none():
    names = [r.name for r in build_chart([DECODE], [GPU2]).panels[0].roofs]
    assert names == ["HBM", "bf16 tensor", "fp32 vector"]


def test_ridge_point():
    panel = build_chart([DECODE], [GPU1]).panels[0]
    (ridge,) = panel.ridges
    assert (ridge.gpu, ridge.intensity, ridge.flops) == ("test-gpu", pytest.approx(150), 300e12)
    assert ridge.label == "ridge 150 FLOP/B"


def test_each_op_is_the_engines_point_and_zero_flop_ops_are_named_in_a_footnote():
    panel = build_chart([DECODE], [GPU1]).panels[0]
    engine = analyze(DECODE, GPU1)
    drawn = {p.op: p for p in panel.points}
    assert set(drawn) == {p.name for p in engine.placements} - {"embed", "kv_write"}
    for p in engine.placements:
        if p.op.flops == 0:
            continue
        point = drawn[p.name]
        assert (point.intensity, point.flops, point.bound, point.share) == (
            p.intensity, p.attainable_flops, p.bound, p.share)
    # q_proj by hand: 2·4096·4096 FLOPs over (4096 + 4096·4096 + 4096)·2 bytes, under the 2000 GB/s roof.
    q = drawn["q_proj"]
    intensity = 2 * 4096 * 4096 / ((4096 + 4096 * 4096 + 4096) * 2)
    assert q.intensity == pytest.approx(intensity)
    assert q.flops == pytest.approx(intensity * 2000e9)
    assert q.bound == "memory"
    assert panel.footnotes[0].startswith("Not drawn: embed, kv_write (0 FLOPs")


def test_a_batch_sweep_draws_one_trajectory_per_op_sliding_up_to_the_ridge():
    values = [1, 8, 64, 256]
    panel = build_chart([DECODE], [GPU1], "batch", values).panels[0]
    engine = sweep(DECODE, GPU1, "batch", values)
    ops_with_flops = [p.name for p in engine[0].placements if p.op.flops > 0]
    assert [t.op for t in panel.trajectories] == ops_with_flops
    for t in panel.trajectories:
        assert [p.value for p in t.points] == values
        for p, a in zip(t.points, engine):
            assert (p.intensity, p.flops) == (a.placement(t.op).intensity, a.placement(t.op).attainable_flops)
    q = next(t for t in panel.trajectories if t.op == "q_proj")
    assert all(a.intensity < b.intensity for a, b in zip(q.points, q.points[1:]))
    # Memory-bound on the bandwidth roof until batch 256 takes it past the ridge (150) onto the compute roof.
    assert [p.bound for p in q.points] == ["memory", "memory", "memory", "compute"]
    assert q.points[2].flops == pytest.approx(q.points[2].intensity * 2000e9)
    assert q.points[3].flops == 300e12
    # Attention reads each sequence's own KV cache: it does not move, and its label says so.
    attention = next(g for g in panel.groups if g.ops == ("attention",))
    assert not attention.moves
    assert len({(p.intensity, p.flops) for p in attention.points}) == 1
    assert next(lab for lab in panel.labels if lab.ops == ("attention",)).text == "attention (every batch)"
    assert panel.title == "decode · batch 1, 8, 64, 256 · context 4096"
    assert sum(g.show_values for g in panel.groups) == 1


def test_several_gpus_each_get_roofs_points_and_a_legend_entry():
    chart = build_chart([PREFILL], [GPU1, GPU2])
    panel = chart.panels[0]
    assert {r.gpu for r in panel.roofs} == {"test-gpu", "test-gpu-2"}
    assert [(r.gpu, r.intensity) for r in panel.ridges] == [("test-gpu", pytest.approx(150)),
                                                            ("test-gpu-2", pytest.approx(75))]
    assert {p.gpu for p in panel.points} == {"test-gpu", "test-gpu-2"}
    gpus = [e for e in chart.legend if e.kind == "gpu"]
    # Each GPU says whether the step's weights and KV cache fit (Totals.fits), with the engine's numbers.
    fits = [analyze(PREFILL, g).totals for g in (GPU1, GPU2)]
    assert [e.label for e in gpus] == [
        f"Test GPU {k} ({g})\nfits: {t.memory_bytes / GIB:.1f} of {t.capacity_bytes / GIB:.0f} GiB"
        for k, g, t in ((1, "test-gpu", fits[0]), (2, "test-gpu-2", fits[1]))]
    assert len({e.color for e in gpus}) == 2 and len({e.marker for e in gpus}) == 2
    assert {e.kind for e in chart.legend} == {"gpu", "bound", "share", "ridge", "note"}
    # Several GPUs: no L2 or SRAM roofs (five grey diagonals in issue 19), and the footnote says so.
    assert {r.name for r in panel.roofs if r.kind == "memory"} == {"HBM"}
    assert any("L2 and SRAM roofs are left out" in f for f in panel.footnotes)
    # The same ops sit in one column on both GPUs: one label for both.
    assert sorted(op for lab in panel.labels for op in lab.ops) == sorted(
        p.op for p in panel.points if p.gpu == "test-gpu")
    assert chart.title == "Meta Llama 3 8B on Test GPU 1 vs Test GPU 2 · bf16 · flash attention"


def test_calibrated_roofs_are_the_measured_ceilings():
    data = GPU1.model_dump()
    data["measured"] = {"device_name": "Test GPU 1", "date": "2026-12-01", "command": "rooflinectl calibrate",
                        "torch_version": "2.11.0", "copy_bandwidth_gbps": 1600, "tensor_tflops": {"bf16": 240}}
    chart = build_chart([DECODE], [GPU.model_validate(data)], calibrated=True)
    roofs = {r.name: r for r in chart.panels[0].roofs}
    assert (roofs["HBM"].value, roofs["bf16 tensor"].value) == (1600e9, 240e12)
    assert roofs["HBM"].label == "HBM 1.6 TB/s measured"
    assert roofs["fp32 vector"].value == 20e12  # not calibrated: the spec's
    assert chart.panels[0].ridges[0].intensity == pytest.approx(150)
    assert "(measured roofs)" in chart.title


def test_a_gpu_given_twice_is_an_error():
    with pytest.raises(UserError, match="given twice"):
        build_chart([DECODE], [GPU1, GPU1])


# --- the command ---------------------------------------------------------------------------------------------


def test_plot_with_no_arguments_draws_decode_and_prefill(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("plot")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("wrote roofline.png (decode · batch 1 · context 4096, prefill · batch 1")
    assert (tmp_path / "roofline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_json_svg_sweep_and_several_gpus(tmp_path):
    out = tmp_path / "chart.svg"
    g1, g2 = write_gpu(tmp_path, GPU1), write_gpu(tmp_path, GPU2)
    result = cli("plot", "decode", "--gpu", g1, "--gpu", g2, "--batch", "64,1,8", "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["path"] == str(out) and data["gpus"] == ["test-gpu", "test-gpu-2"]
    (panel,) = data["panels"]
    assert panel["values"] == [1, 8, 64] and panel["sweep_field"] == "batch"
    assert len(panel["trajectories"]) == 2 * 16  # 18 decode ops less embed and kv_write, on each GPU
    assert "<svg" in out.read_text()[:1000]


def test_a_context_list_with_no_workload_sweeps_decode(tmp_path):
    result = cli("plot", "--context", "1024,4096", "-o", str(tmp_path / "c.png"), "--json")
    assert result.exit_code == 0, result.output
    (panel,) = json.loads(result.stdout)["panels"]
    assert (panel["phase"], panel["sweep_field"], panel["values"]) == ("decode", "context", [1024, 4096])


def test_plot_pdf(tmp_path):
    out = tmp_path / "prefill.pdf"
    result = cli("plot", "prefill", "--attention", "naive", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:5] == b"%PDF-"


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["plot", "--gpu", "h10", "-o", "{tmp}/x.png"], ["unknown GPU 'h10'"]),
        (["plot", "-o", "{tmp}/x.jpg"], ["unknown image format '.jpg'", ".png, .svg, .pdf"]),
        (["plot", "-o", "{tmp}/x"], ["unknown image format '(none)'"]),
        (["plot", "-o", "{tmp}/missing/x.png"], ["cannot write", "no such folder"]),
        (["plot", "-o", "{tmp}"], ["cannot write: it is a folder; give the chart's file"]),  # was "unknown image format"
        (["plot", "-o", "{tmp}/folder.png"], ["cannot write", "is a folder"]),
        (["plot", "--batch", "1,x", "-o", "{tmp}/x.png"], ["--batch: 'x' is not a positive integer"]),
        # issue 18: these were read as 1 and 8, as 8, and as 3 (Arabic-Indic) and 8 (full-width)
        (["plot", "--batch", "1,,8", "-o", "{tmp}/x.png"], ["--batch: '1,,8' has an empty item"]),
        (["plot", "--batch", "8,", "-o", "{tmp}/x.png"], ["has an empty item"]),
        (["plot", "--batch", "\u0663,\uff18", "-o", "{tmp}/x.png"], ["is not a positive integer"]),
        # a 5,000-digit number passed int()'s 4,300-digit limit as a traceback; 19 digits pass 2**63
        (["plot", "--context", "9" * 5000, "-o", "{tmp}/x.png"], ["--context: 999999999999… (5,000 digits) is too large"]),
        (["plot", "--batch", "1" + "0" * 18, "-o", "{tmp}/x.png"], ["(19 digits) is too large"]),
        (["plot", "--batch", "1,8", "--context", "1,2", "-o", "{tmp}/x.png"], ["sweep one size at a time"]),
        # issue 18: 399 sizes took 88 s to draw
        (["plot", "--batch", ",".join(str(i) for i in range(1, 66)), "-o", "{tmp}/x.png"],
         ["--batch: 65 values, more than the 64 one list may give"]),
        (["plot", "--context", "1," * 399 + "1", "-o", "{tmp}/x.png"], ["--context: 400 values"]),
        # issue 18's 5 s: 64 sizes on 6 GPUs took 4.4 s, on 4 GPUs 2.9 s (benchmarks/plot_speed.py)
        (["plot", *[x for g in ("h100", "a100", "mi300x", "h200", "l4") for x in ("--gpu", g)], "--batch", "1,2",
          "-o", "{tmp}/x.png"], ["--gpu: 5 GPUs with a list of --batch values; a sweep draws at most 4"]),
        (["plot", "prefill", "--context", "1,2", "-o", "{tmp}/x.png"], ["seq_len, not context"]),
        (["plot", "--context", "128", "--seq-len", "64", "-o", "{tmp}/x.png"], ["name the workload"]),
        (["plot", "--measured", "{tmp}/nothing.json", "-o", "{tmp}/x.png"], ["no such file"]),
        (["plot", "--measured", "{tmp}/bad.json", "-o", "{tmp}/x.png"], ["bad.json", "malformed JSON"]),
        (["plot", "--measured", "{tmp}/a100.json", "-o", "{tmp}/x.png"], ["measured on 'NVIDIA A100'"]),
        (["plot", "--gpu", "l4", "--measured", "{tmp}/l40s.json", "-o", "{tmp}/x.png"],
         ["measured on 'NVIDIA L40S', none of the GPUs plotted: l4 (NVIDIA L4)", "pass --gpu l40s"]),
        (["plot", "--measured", "{tmp}/fast.json", "-o", "{tmp}/x.png"], ["fast.json", "records.0.time_s"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments):
    (tmp_path / "folder.png").mkdir()
    (tmp_path / "bad.json").write_text("{oops")
    (tmp_path / "a100.json").write_text(json.dumps(measured_file("NVIDIA A100")))
    (tmp_path / "l40s.json").write_text(json.dumps(measured_file("NVIDIA L40S")))
    (tmp_path / "fast.json").write_text(json.dumps(measured_file("NVIDIA H100 80GB HBM3", time_s=1e-300)))
    assert_one_line_error(cli(*[a.replace("{tmp}", str(tmp_path)) for a in args]), *fragments)
    assert not (tmp_path / "x.png").exists()


def test_plot_help_loads_no_matplotlib():
    code = ("import sys; from rooflinectl.cli import app; from typer.testing import CliRunner; "
            "r = CliRunner().invoke(app, ['plot', '--help']); assert r.exit_code == 0, r.output; "
            "assert 'Example: rooflinectl plot' in r.output; print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_sweep_of_the_most_sizes_a_list_may_give_is_drawn(tmp_path):
    result = cli("plot", "decode", "--batch", ",".join(str(i) for i in range(1, 65)), "-o", str(tmp_path / "b.png"),
                 "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["panels"][0]["values"] == list(range(1, 65))


def test_each_gpu_says_whether_the_model_fits_and_where_it_stops():
    """Issue 19: "nothing says that 70B fits on none of the 80 GB GPUs". Llama 3 70B at batch 256, context 4096:
    131.4 GiB of bf16 weights alone exceed 80 GiB; the legend names the batch that needs the most."""
    from rooflinectl.specs.hardware import load_gpu

    w = resolve_workload("decode", model="llama-3-70b")
    h100 = load_gpu("h100")
    chart = build_chart([w], [h100, load_gpu("b200")], "batch", [1, 256])
    worst = analyze(w.with_size("batch", 256), h100).totals
    (entry, b200) = [e.label for e in chart.legend if e.kind == "gpu"]
    assert entry.endswith(f"does NOT fit: {worst.memory_bytes / GIB:.1f} of 80 GiB at batch 256")
    assert "does NOT fit" in b200  # 178 GiB: the weights fit, the KV cache of 256 × 4,096 positions does not


def test_several_gpus_label_each_gpus_share():
    """One label for ops that sit in one column on several GPUs, with each GPU's share in the chart's order."""
    from rooflinectl.specs.hardware import load_gpu

    gpus = [load_gpu("a100"), load_gpu("h100")]
    chart = build_chart([resolve_workload("prefill", attention="naive")], gpus)
    label = next(lab for lab in chart.panels[0].labels if lab.ops == ("softmax",))
    shares = [analyze(resolve_workload("prefill", attention="naive"), g).placement("softmax").share for g in gpus]
    assert label.text == f"softmax {shares[0]:.0%} · {shares[1]:.0%}"
    assert shares[0] != shares[1]
    assert any(e.label == "label %: share of the step on a100-80gb · h100-sxm" for e in chart.legend)
