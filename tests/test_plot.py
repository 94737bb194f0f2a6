"""rooflinectl plot: the chart's content through its data (roofs, ridge, points, trajectories, legend, measured
points), the drawn artists that carry it, and bad input (one line, exit 2).

Roof and ridge numbers are pinned on a made-up GPU whose round numbers make the hand derivations easy:
HBM 2000 GB/s, L2 5000 GB/s, SRAM 20000 GB/s, bf16 tensor 300 TFLOP/s, fp32 vector 20 TFLOP/s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import cli
from rooflinectl.engine.roofline import analyze, sweep
from rooflinectl.errors import UserError
from rooflinectl.plot.build import MeasuredFile, build_chart, draw, join_names, load_measured
from rooflinectl.plot.draw import wrap_title
from rooflinectl.specs.hardware import GPU, load_gpu
from rooflinectl.specs.workload import resolve_workload

BASE = load_gpu("h100")


def made_up_gpu(gpu_id: str = "test-gpu", name: str = "Test GPU 1", hbm: float = 2000, bf16: float = 300,
                fp32: float = 20, l2: float | None = 5000, smem: float | None = 20000) -> GPU:
    data = BASE.model_dump()
    data.update(id=gpu_id, name=name, aliases=[], measured=None)
    data["memory"].update(hbm_bandwidth_gbps=hbm, l2_bandwidth_gbps=l2, smem_bandwidth_gbps=smem,
                          derived={"l2_bandwidth_gbps": "estimated: for the test"} if l2 else {})
    data["compute"].update(tensor_tflops={"bf16": bf16}, vector_tflops={"fp32": fp32})
    return GPU.model_validate(data)


GPU1 = made_up_gpu()
GPU2 = made_up_gpu("test-gpu-2", "Test GPU 2", hbm=4000, bf16=300, fp32=40, l2=None, smem=None)
DECODE = resolve_workload("decode")  # Llama 3 8B, batch 1, context 4096, bf16, flash
PREFILL = resolve_workload("prefill")


def write_gpu(tmp_path: Path, gpu: GPU) -> str:
    path = tmp_path / f"{gpu.id}.yaml"
    path.write_text(yaml.safe_dump(gpu.model_dump(exclude_none=True)))
    return str(path)


def assert_one_line_error(result, *fragments: str):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.stdout == ""


# --- the chart's data ----------------------------------------------------------------------------------------


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


def test_ops_that_share_a_point_share_a_marker_and_a_label():
    panel = build_chart([DECODE], [GPU1]).panels[0]
    linear = next(g for g in panel.groups if "q_proj" in g.ops)
    assert linear.ops == ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")
    assert linear.label == "q/k/v/o/gate/up/down_proj, lm_head"
    engine = analyze(DECODE, GPU1)
    assert linear.points[0].share == pytest.approx(sum(engine.placement(op).share for op in linear.ops))
    # Every drawn op is in exactly one group, and named by exactly one label.
    drawn = [p.op for p in panel.points]
    assert sorted(op for g in panel.groups for op in g.ops) == sorted(drawn)
    assert sorted(op for lab in panel.labels for op in lab.ops) == sorted(drawn)
    assert next(lab for lab in panel.labels if "q_proj" in lab.ops).text == "q/k/v/o/gate/up/down_proj, lm_head 97%"


@pytest.mark.parametrize(
    "names, joined",
    [
        (["q_proj", "k_proj", "v_proj", "o_proj"], "q/k/v/o_proj"),
        (["attn_norm", "mlp_norm", "final_norm", "lm_head"], "attn/mlp/final_norm, lm_head"),
        (["attn_norm+q_proj", "attn_norm+k_proj"], "attn_norm+q/k_proj"),
        (["attn_norm+q_proj", "o_proj"], "attn_norm+q_proj, o_proj"),
        (["attention"], "attention"),
        (["qk", "pv"], "qk, pv"),
    ],
)
def test_join_names(names, joined):
    assert join_names(names) == joined


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
    assert [e.label for e in gpus] == ["Test GPU 1 (test-gpu)", "Test GPU 2 (test-gpu-2)"]
    assert len({e.color for e in gpus}) == 2 and len({e.marker for e in gpus}) == 2
    assert {e.kind for e in chart.legend} == {"gpu", "bound", "share", "ridge"}
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


def test_wrap_title_breaks_between_pieces_only():
    title = "Meta Llama 3 8B on NVIDIA A100 SXM4 80GB vs NVIDIA H100 SXM5 80GB · bf16 · naive attention"
    assert wrap_title(title, 200) == title
    assert wrap_title(title, 60).split("\n") == ["Meta Llama 3 8B on NVIDIA A100 SXM4 80GB vs",
                                                 "NVIDIA H100 SXM5 80GB · bf16 · naive attention"]


# --- measured points -----------------------------------------------------------------------------------------


def measured_file(name: str = "Test GPU 1", **record) -> dict:
    base = {"kernel": "gemv", "op": "q_proj", "shape": [1, 4096, 4096], "dtype": "bf16",
            "flops": 2 * 4096 * 4096, "bytes": (4096 + 4096 * 4096 + 4096) * 2, "time_s": 20e-6}
    return {"gpu": {"name": name}, "records": [{**base, **record}]}


def test_measured_point_sits_at_flops_over_bytes_and_time_with_its_share_of_the_roof():
    data = measured_file()
    data["records"].append({"kernel": "fused_softmax", "op": "softmax 4096x16384", "shape": [4096, 16384],
                            "dtype": "bf16", "flops": 5 * 4096 * 16384, "bytes": 2 * 2 * 4096 * 16384,
                            "time_s": 80e-6, "unit": "vector", "op_dtype": "fp32"})
    data["records"].append({"kernel": "copy", "op": "copy", "flops": 0, "bytes": 1e9, "time_s": 1e-3})
    data["records"].append({"kernel": "matmul", "op": "matmul 8x8x8", "flops": 1024, "bytes": 384, "time_s": None})
    panel = build_chart([DECODE], [GPU1], measured=MeasuredFile.model_validate(data)).panels[0]
    gemv, softmax = panel.measured
    flops, nbytes = 2 * 4096 * 4096, (4096 + 4096 * 4096 + 4096) * 2
    assert gemv.intensity == pytest.approx(flops / nbytes)
    assert gemv.flops == pytest.approx(flops / 20e-6)
    # Under the HBM roof at that intensity: 2000e9 · intensity; 20 µs against the 16.8 µs the roof allows.
    assert gemv.roof_flops == pytest.approx(2000e9 * flops / nbytes)
    assert gemv.fraction == pytest.approx(nbytes / 2000e9 / 20e-6)
    assert gemv.label == f"gemv 1x4096x4096 {gemv.fraction:.0%}" == "gemv 1x4096x4096 84%"
    q = next(p for p in panel.points if p.op == "q_proj")
    assert gemv.predicted == (q.intensity, q.flops)
    # The softmax record names its roof (fp32 vector): intensity 5/4 FLOP/byte, memory-bound under 2000 GB/s.
    assert softmax.intensity == pytest.approx(1.25)
    assert softmax.roof_flops == pytest.approx(1.25 * 2000e9)
    assert softmax.predicted is None  # a flash decode step has no softmax op
    assert "Measured, not drawn: copy (0 FLOPs: no place on a log axis)." in panel.footnotes
    assert "Measured, not drawn: matmul (not timed)." in panel.footnotes


@pytest.mark.parametrize(
    "measured_name, gpu_name, gpu_id, matches",
    [
        ("NVIDIA H200", "NVIDIA H200 SXM 141GB", "h200", True),
        ("nvidia h200 sxm 141gb", "NVIDIA H200 SXM 141GB", "h200", True),
        ("NVIDIA H200 SXM 141GB (HGX)", "NVIDIA H200 SXM 141GB", "h200", True),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA H200 SXM 141GB", "h200", False),
        ("H200", "NVIDIA H200 SXM 141GB", "h200", True),
    ],
)
def test_measured_gpu_name_matching(measured_name, gpu_name, gpu_id, matches):
    gpu = made_up_gpu(gpu_id, gpu_name)
    assert MeasuredFile.model_validate(measured_file(measured_name)).matches(gpu) is matches


def test_measured_file_naming_the_spec_matches_whatever_the_device_calls_itself():
    data = measured_file("NVIDIA H100 80GB HBM3")
    data["gpu"]["spec"] = "h100-sxm"
    assert MeasuredFile.model_validate(data).matches(BASE)
    assert not MeasuredFile.model_validate(measured_file("NVIDIA H100 80GB HBM3")).matches(BASE)


@pytest.mark.parametrize(
    "content, fragments",
    [
        ("{not json", ["malformed JSON", "line 1"]),
        ("[1, 2]", ["expected a JSON object"]),
        (json.dumps({"records": []}), ["gpu"]),
        (json.dumps({"gpu": {"name": "x"}, "records": []}), ["records", "at least 1"]),
        (json.dumps(measured_file(time_s=-1)), ["records.0.time_s", "greater than 0"]),
        (json.dumps(measured_file(bytes=0)), ["records.0.bytes"]),
        (json.dumps({"gpu": {"name": "x"}, "records": [{"kernel": "k", "op": "o", "flops": 1, "bytes": 1}]}),
         ["no record has a time"]),
    ],
)
def test_malformed_measured_files(tmp_path, content, fragments):
    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(UserError) as err:
        load_measured(path)
    assert str(path) in str(err.value)
    for fragment in fragments:
        assert fragment in str(err.value)


def test_measured_on_another_gpu_is_an_error():
    with pytest.raises(UserError, match="was measured on 'NVIDIA A100', not on the GPU plotted: test-gpu"):
        build_chart([DECODE], [GPU1], measured=MeasuredFile.model_validate(measured_file("NVIDIA A100")))


# --- the drawing ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def drawn():
    """One figure with most of what a chart can hold: a sweep, two GPUs, measured points."""
    import matplotlib.pyplot as plt

    measured = MeasuredFile.model_validate(measured_file())
    chart = build_chart([DECODE], [GPU1, GPU2], "batch", [1, 8, 64, 256], measured)
    fig = draw(chart)
    yield chart, fig
    plt.close(fig)


def by_gid(ax, gid: str) -> list:
    """The artists drawn with this gid, in drawing order."""
    return [a for a in [*ax.lines, *ax.collections, *ax.texts] if a.get_gid() == gid]


def test_drawn_roofs_ridges_and_points_are_the_charts_data(drawn):
    chart, fig = drawn
    panel, ax = chart.panels[0], fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlim() == pytest.approx(panel.xlim) and ax.get_ylim() == pytest.approx(panel.ylim)
    for r in panel.roofs:
        (line,) = by_gid(ax, f"roof {r.gpu} {r.name}")
        assert list(line.get_xdata()) == pytest.approx([r.x_from, r.x_to])
        assert list(line.get_ydata()) == pytest.approx([r.at(r.x_from), r.at(r.x_to)])
    for r in panel.ridges:
        (marker,) = by_gid(ax, f"ridge {r.gpu}")
        assert (marker.get_xdata()[0], marker.get_ydata()[0]) == pytest.approx((r.intensity, r.flops))
    for g in panel.groups:
        markers = by_gid(ax, f"point {g.gpu} {g.label}")
        assert len(markers) == len(g.points)
        for m, p in zip(markers, g.points):
            assert tuple(m.get_offsets()[0]) == pytest.approx((p.intensity, p.flops))
    (measured,) = by_gid(ax, "measured test-gpu gemv")
    assert tuple(measured.get_offsets()[0]) == pytest.approx((panel.measured[0].intensity, panel.measured[0].flops))
    texts = {t.get_text() for t in ax.texts}
    assert "gemv 1x4096x4096 84%" in texts
    assert {lab.text for lab in panel.labels} <= texts
    assert any(t.startswith("test-gpu ") and "HBM 2 TB/s" in t for t in texts)
    assert [t.get_text() for t in by_gid(ax, "footnote")] == ["\n".join(panel.footnotes)]


def test_drawn_legend_and_title(drawn):
    chart, fig = drawn
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [e.label for e in chart.legend]
    assert "batch 1 → 8 → 64 → 256" in [e.label for e in chart.legend]
    title = fig._suptitle.get_text().replace("\n", " ")
    for part in ("Meta Llama 3 8B", "Test GPU 1", "Test GPU 2", "bf16"):
        assert part in title
    assert fig.axes[0].get_title(loc="left") == "decode · batch 1, 8, 64, 256 · context 4096"


def test_op_labels_do_not_overlap(drawn):
    _, fig = drawn
    ax = fig.axes[0]
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    labels = by_gid(ax, "op-label") + by_gid(ax, "measured-label") + by_gid(ax, "value-label")
    boxes = []
    for t in labels:
        t.update_positions(renderer)
        boxes.append(Text.get_window_extent(t, renderer))  # the text, without its leader line
    assert len(boxes) >= 5
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b)


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
        (["plot", "-o", "{tmp}"], ["unknown image format"]),
        (["plot", "-o", "{tmp}/folder.png"], ["cannot write", "is a folder"]),
        (["plot", "--batch", "1,x", "-o", "{tmp}/x.png"], ["--batch: 'x' is not an integer"]),
        (["plot", "--batch", "1,8", "--context", "1,2", "-o", "{tmp}/x.png"], ["sweep one size at a time"]),
        (["plot", "prefill", "--context", "1,2", "-o", "{tmp}/x.png"], ["sweep seq_len, not context"]),
        (["plot", "--context", "128", "--seq-len", "64", "-o", "{tmp}/x.png"], ["name the workload"]),
        (["plot", "--measured", "{tmp}/nothing.json", "-o", "{tmp}/x.png"], ["no such file"]),
        (["plot", "--measured", "{tmp}/bad.json", "-o", "{tmp}/x.png"], ["bad.json", "malformed JSON"]),
        (["plot", "--measured", "{tmp}/a100.json", "-o", "{tmp}/x.png"], ["measured on 'NVIDIA A100'"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments):
    (tmp_path / "folder.png").mkdir()
    (tmp_path / "bad.json").write_text("{oops")
    (tmp_path / "a100.json").write_text(json.dumps(measured_file("NVIDIA A100")))
    assert_one_line_error(cli(*[a.replace("{tmp}", str(tmp_path)) for a in args]), *fragments)
    assert not (tmp_path / "x.png").exists()


def test_plot_help_loads_no_matplotlib():
    code = ("import sys; from rooflinectl.cli import app; from typer.testing import CliRunner; "
            "r = CliRunner().invoke(app, ['plot', '--help']); assert r.exit_code == 0, r.output; "
            "assert 'Example: rooflinectl plot' in r.output; print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_readme_chart_is_committed():
    png = Path(__file__).parent.parent / "docs" / "img" / "decode-batching.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000
