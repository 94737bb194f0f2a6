"""``rooflinectl explore`` driven headless through Textual's pilot: keys in, the engine's numbers out.

Each test presses keys on a 100×30 screen and checks what is shown against ``roofline.analyze`` of the same
settings, built independently with ``resolve_workload``; the chart is checked through the positions it records.
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from helpers import cli
from rooflinectl.engine.explain import verdict
from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.explore import state
from rooflinectl.explore.app import ExploreApp, RooflineChart, save_chart
from rooflinectl.explore.canvas import Canvas, LogAxis
from rooflinectl.explore.chart import group_label, roofline_chart
from rooflinectl.explore.describe import describe
from rooflinectl.specs.hardware import load_gpu, load_gpu_file
from rooflinectl.specs.workload import list_models, resolve_workload
from rooflinectl.units import duration

ROOT = Path(__file__).parent.parent
SIZE = (100, 30)
H100 = load_gpu("h100")


def no_fp8_gpu(tmp_path: Path):
    """An H100 file with another id, half the bandwidth and no fp8 peak: a second GPU to cycle to."""
    data = yaml.safe_load((ROOT / "hardware" / "h100-sxm.yaml").read_text())
    data["id"], data["aliases"], data["name"] = "test-nofp8", [], "Test GPU without fp8"
    data["memory"]["hbm_bandwidth_gbps"] = data["memory"]["hbm_bandwidth_gbps"] / 2
    del data["compute"]["tensor_tflops"]["fp8"]
    data.pop("measured", None)
    path = tmp_path / "test-nofp8.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_gpu_file(path)


def explore(keys: str | list[str], check, workload=None, gpu=H100, size=SIZE, **kwargs):
    """Run the app headless, press ``keys``, then call ``check(app, pilot)`` (awaited if a coroutine)."""
    return explore_steps([(keys, check)], workload, gpu, size, **kwargs)


def explore_steps(steps, workload=None, gpu=H100, size=SIZE, **kwargs):
    """One app, several (keys, check) steps in turn: each check sees the keys pressed so far."""

    async def main():
        app = ExploreApp(workload or resolve_workload("decode"), gpu, **kwargs)
        async with app.run_test(size=size) as pilot:
            for keys, check in steps:
                for key in keys:
                    await pilot.press(key)
                await pilot.pause()
                result = check(app, pilot)
                if asyncio.iscoroutine(result):
                    await result
        return app

    return asyncio.run(main())


def screen_text(app) -> str:
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(), record=True,
                      color_system=None, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


def shown_rows(app) -> list[list[str]]:
    return [[cell.strip() for cell in row] for row in app.query_one("#ops").rows]


def assert_shows(app, expected_workload, gpu=H100):
    """Table, totals and verdict equal the engine's for ``expected_workload`` on ``gpu``."""
    a = analyze(expected_workload, gpu)
    assert app.analysis == a
    ordered = sorted(a.placements, key=lambda p: -p.total_time_s)
    rows = shown_rows(app)
    assert [r[0] for r in rows] == [p.name for p in ordered]
    for row, p in zip(rows, ordered):
        assert row[2] == p.bound
        assert float(row[3]) == pytest.approx(p.attainable_flops / 1e12, rel=5e-3)
        assert row[4] == duration(p.total_time_s, sep="")
        assert float(row[5].rstrip("%")) == pytest.approx(p.share * 100, abs=0.05)
        intensity = float(row[1].replace(",", "").replace("k", "e3"))
        assert intensity == pytest.approx(p.intensity, rel=5e-3, abs=5e-4)
    totals = str(app.query_one("#totals").content)
    assert duration(a.totals.time_s) in totals
    assert f"{a.totals.tokens_per_s:,.{1 if a.workload.phase == 'decode' else 0}f}" in totals
    assert ("does NOT fit" in totals) == (not a.totals.fits)
    assert str(app.query_one("#verdict").content) == "\n".join(verdict(a))


# --- the view follows the keys ---------------------------------------------------------------------------------


def test_start_shows_the_engines_numbers_for_the_default_decode():
    def check(app, pilot):
        assert_shows(app, resolve_workload("decode"))
        text = screen_text(app)
        assert "decode │ llama-3-8b │ batch 1 │ context 4,096 │ bf16 │ flash attention │ h100-sxm" in text
        # The most expensive op is selected first and explained: what it reads, writes and computes.
        assert app.selected == "gate_proj"
        detail = str(app.query_one("#detail").content)
        assert "reads    x 1×4096 bf16, W 4096×14336 bf16" in detail
        assert "memory-bound" in detail and "batching (key b)" in detail

    explore("", check)


def test_batch_and_context_keys_double_and_halve():
    def check(app, pilot):
        # batch 1 -> 4, context 4096 -> 8192.
        assert_shows(app, resolve_workload("decode", batch=4, context=8192))
        # Hand-derived: gate_proj at batch 4 does 2·4·4096·14336 FLOPs over 2·(4·4096 + 4096·14336 + 4·14336)
        # bytes of bf16.
        p = app.analysis.placement("gate_proj")
        assert p.intensity == pytest.approx(2 * 4 * 4096 * 14336 / (2 * (4 * 4096 + 4096 * 14336 + 4 * 14336)))
        assert "context 8,192" in screen_text(app)

    explore_steps([(["b", "b", "c"], check), (["b", "B", "c", "C"], check)])


def test_phase_key_cycles_and_keeps_the_length():
    explore_steps([
        (["p"], lambda app, pilot: assert_shows(app, resolve_workload("prefill", seq_len=4096))),
        (["p"], lambda app, pilot: assert_shows(app, resolve_workload("attention", seq_len=4096))),
        (["p"], lambda app, pilot: assert_shows(app, resolve_workload("decode"))),
    ])


def test_attention_toggle_replaces_flash_by_the_naive_kernels():
    def check(app, pilot):
        assert_shows(app, resolve_workload("prefill", seq_len=4096, attention="naive"))
        names = {p.name for p in app.analysis.placements}
        assert {"qk", "softmax", "pv"} <= names and "attention" not in names
        assert "naive attention" in str(app.query_one("#status").content)

    explore(["p", "a"], check)


def test_dtype_key_cycles_through_the_gpus_peaks_only(tmp_path):
    gpu = no_fp8_gpu(tmp_path)
    assert state.dtypes_with_peaks(gpu) == ["fp32", "bf16", "fp16", "int8"]
    seen = []

    def check(app, pilot):
        seen.append(app.knobs.dtype)
        d = app.knobs.dtype
        assert_shows(app, resolve_workload("decode", dtype=d, kv_dtype=d), gpu)

    explore_steps([(["d"], check)] * 4, gpu=gpu, gpus=[gpu])
    assert seen == ["fp16", "int8", "fp32", "bf16"]


def test_model_key_cycles_through_the_bundled_models():
    models = [m.id for m in list_models()]

    def check(app, pilot):
        expected = models[(models.index("llama-3-8b") + 1) % len(models)]
        assert app.knobs.model.id == expected
        assert_shows(app, resolve_workload("decode", model=expected))

    explore(["m"], check)


def test_gpu_key_skips_gpus_without_the_dtype_and_errors_stay_in_the_status_line(tmp_path):
    other = no_fp8_gpu(tmp_path)

    def switched(app, pilot):
        assert app.knobs.gpu.id == "test-nofp8"
        assert_shows(app, resolve_workload("decode"), other)
        assert "GPU test-nofp8: 4.64 ms → " in str(app.query_one("#status").content)

    def refused(app, pilot):
        # back to the H100, then bf16 -> fp16 -> fp8; the only other GPU has no fp8 peak, so g says so and
        # changes nothing.
        assert app.is_running
        assert app.knobs.gpu.id == "h100-sxm"
        assert_shows(app, resolve_workload("decode", dtype="fp8", kv_dtype="fp8"))
        status = app.query_one("#status")
        assert "error: no other GPU has a fp8 peak (skipped test-nofp8)" in str(status.content)
        assert status.has_class("error")

    explore_steps([(["g"], switched), (["g", "d", "d", "g"], refused)], gpus=[H100, other])


def test_batch_below_one_is_an_error_in_the_status_line_not_a_crash():
    def check(app, pilot):
        assert app.is_running and app.knobs.batch == 1
        assert "error: batch is already 1" in str(app.query_one("#status").content)
        assert_shows(app, resolve_workload("decode"))

    explore(["B"], check)


def test_a_workload_the_gpu_cannot_run_fails_before_the_app_starts(tmp_path):
    with pytest.raises(UserError, match="no tensor-core peak for fp8"):
        ExploreApp(resolve_workload("decode", dtype="fp8"), no_fp8_gpu(tmp_path))


def test_select_keys_walk_the_table_in_time_order():
    def check(app, pilot):
        order = [p.name for p in sorted(app.analysis.placements, key=lambda p: -p.total_time_s)]
        assert app.selected == order[2]
        table = app.query_one("#ops")
        assert table.selected_index == 2
        screen = screen_text(app).splitlines()
        assert screen[2 + 2].startswith(order[2])  # settings, header, then the rows: the selected one in view
        assert app.query_one("#chart").chart.labels  # redrawn with the new selection
        assert str(app.query_one("#detail").content).startswith(f"{order[2]} ×32")

    def last(app, pilot):
        # up from the first op wraps to the last: the table scrolls to keep it in view and says where it is.
        order = [p.name for p in sorted(app.analysis.placements, key=lambda p: -p.total_time_s)]
        assert app.selected == order[-1]
        screen = screen_text(app).splitlines()
        assert screen[1].startswith(f"op 6-18/{len(order)}")
        assert screen[1 + 13].startswith(order[-1])

    explore_steps([(["down", "down"], check), (["j", "k", "up", "j"], check), (["up", "up", "up"], last)])


def test_selection_survives_a_change_and_falls_back_when_its_op_goes():
    def check(app, pilot):
        # prefill, select 'attention' (flash), then naive: 'attention' is gone, the top op is selected.
        assert app.knobs.attention == "naive"
        top = max(app.analysis.placements, key=lambda p: p.total_time_s).name
        assert app.selected == top

    def select_attention(app, pilot):
        assert app.selected == "attention"

    explore_steps([(["p", "p"], select_attention), (["a"], check)])  # the attention phase holds one op


# --- the chart -------------------------------------------------------------------------------------------------


def test_chart_places_every_op_at_the_engines_coordinates():
    def check(app, pilot):
        widget = app.query_one("#chart", RooflineChart)
        chart = widget.chart
        a = app.analysis
        lines = chart.lines()
        assert (len(lines[0]), len(lines)) == widget.content_size  # drawn to the widget's size
        assert chart.off_chart == ["embed", "kv_write"]  # no FLOPs: intensity 0 has no place on a log axis
        for p in a.placements:
            if p.name in chart.off_chart:
                continue
            col, row = chart.points[p.name]
            assert col == chart.left + chart.x.cell(p.intensity)
            assert row == chart.top + chart.y.cells - 1 - chart.y.cell(p.attainable_flops)
            # Decode at batch 1: every op is memory-bound, left of the ridge.
            assert col < chart.ridge_col
        # The ridge column holds the ridge intensity.
        x0 = chart.ridge_col - chart.left
        assert chart.x.value(x0) <= a.ridge < chart.x.value(x0 + 1)
        # The selected op is the diamond, labelled; the tensor roof is labelled with its value.
        col, row = chart.points["gate_proj"]
        assert lines[row][col] == "◆"
        sharing = [name for name, point in chart.points.items() if point == (col, row)]
        assert {"q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "lm_head"} < set(sharing)
        assert f"gate_proj +{len(sharing) - 1}" in lines[row]  # the ops at intensity 1 share one point
        assert "989T bf16" in "\n".join(lines)
        assert chart.roof_rows["bf16"] < chart.roof_rows["fp32 vector"]

    explore("", check)


def test_batching_moves_the_linear_layers_right_toward_the_ridge():
    cols = {}

    def record(app, pilot):
        chart = app.query_one("#chart").chart
        cols[app.knobs.batch] = (chart.points["gate_proj"][0], chart.points["attention"][0], chart.ridge_col)

    explore_steps([("", record), (["b"] * 8, record)])
    (g1, att1, ridge), (g256, att256, _) = cols[1], cols[256]
    assert g1 < g256 < ridge  # batch 256 is still left of the ridge (batch ≈ 332 reaches it) ...
    assert att1 == att256  # ... and attention does not move: each sequence reads its own KV cache


def test_prefill_puts_the_big_matmuls_right_of_the_ridge():
    def check(app, pilot):
        chart = app.query_one("#chart").chart
        for p in app.analysis.placements:
            if p.name in chart.points:
                col = chart.points[p.name][0]
                assert (col >= chart.ridge_col) == (p.bound == "compute"), p.name

    explore(["p"], check)


def test_log_axis_and_canvas():
    axis = LogAxis(0.1, 1e4, 50)
    assert axis.position(0.1) == 0 and axis.position(1e4) == pytest.approx(50)
    assert axis.cell(1.0) == 10 and axis.cell(1e9) == 49 and axis.cell(1e-9) == 0
    assert axis.decades() == [0.1, 1, 10, 100, 1000, 10000]
    assert axis.value(axis.position(3.3)) == pytest.approx(3.3)
    canvas = Canvas(4, 2)
    canvas.polyline([(0, 2), (4, 0)])  # corner to corner: a braille dot in every cell of the diagonal
    canvas.put(3, 1, "xyz")  # cut at the edge
    assert canvas.lines() == ["  ⢀⠔", "⢀⠔⠁x"]
    assert group_label(["gate_proj", "up_proj", "down_proj"]) == "gate/up/down_proj"


def test_chart_stays_readable_when_small():
    a = analyze(resolve_workload("prefill", attention="naive"), H100)
    chart = roofline_chart(a, "softmax", 30, 10)
    assert all(len(line) == 30 for line in chart.lines()) and len(chart.lines()) == 10
    assert set(chart.points) == {p.name for p in a.placements} - {"embed", "kv_write"}


# --- saving, quitting, the screen ------------------------------------------------------------------------------


def test_saved_yaml_is_accepted_by_analyze_with_the_same_numbers(tmp_path):
    def check(app, pilot):
        path = tmp_path / state.workload_filename(app.knobs)
        assert path.is_file()
        assert f"saved {path}" in str(app.query_one("#status").content)
        text = path.read_text()
        assert text.startswith(f"# Reproduce with: rooflinectl analyze {path} --gpu h100-sxm\n")
        data = yaml.safe_load(text)
        assert data["model"] == "llama-3-8b" and data["batch"] == 2 and data["seq_len"] == 4096
        result = cli("analyze", str(path), "--gpu", "h100-sxm", "--json")
        assert result.exit_code == 0, result.output
        shown = json.loads(result.stdout)
        assert shown["totals"]["time_s"] == app.analysis.totals.time_s
        assert [o["name"] for o in shown["ops"]] == [p.name for p in app.analysis.placements]

    explore(["p", "b", "a", "s"], check, out_dir=tmp_path)


def test_saved_yaml_inlines_a_model_that_is_not_in_the_catalog(tmp_path):
    config = tmp_path / "tiny-llama" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps({
        "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
        "intermediate_size": 1536, "vocab_size": 32000, "hidden_act": "silu",
    }))
    w = resolve_workload("decode", model=str(config))

    def check(app, pilot):
        path = next(tmp_path.glob("explore-tiny-llama-*.yaml"))
        data = yaml.safe_load(path.read_text())
        assert data["model"]["hidden_size"] == 512  # inline: the file stands on its own
        config.unlink()  # ... even once the config it came from is gone
        result = cli("analyze", str(path), "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["totals"]["time_s"] == app.analysis.totals.time_s

    explore(["s"], check, workload=w, out_dir=tmp_path)


def test_save_into_a_missing_folder_is_an_error_in_the_status_line(tmp_path):
    def check(app, pilot):
        assert app.is_running
        assert "error: cannot write" in str(app.query_one("#status").content)

    explore(["s"], check, out_dir=tmp_path / "missing")


def test_chart_key_saves_through_plot(tmp_path):
    pytest.importorskip("matplotlib")

    async def check(app, pilot):
        await app.workers.wait_for_complete()
        await pilot.pause()
        png = tmp_path / state.workload_filename(app.knobs).replace(".yaml", ".png")
        status = str(app.query_one("#status").content)
        if "plot module" in status or "plot_workloads" in status:
            pytest.skip(status)
        assert png.is_file() and png.read_bytes().startswith(b"\x89PNG")
        assert status == f"saved the chart to {png}"

    explore(["x"], check, out_dir=tmp_path)


def test_without_plot_the_chart_key_says_so(monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "rooflinectl.plot.build"
                        else real(name, *a))
    with pytest.raises(UserError, match="plot module"):
        save_chart(analyze(resolve_workload("decode"), H100), tmp_path / "x.png")


def test_q_quits_cleanly():
    async def check(app, pilot):
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running

    app = explore("", check)
    assert app.return_code == 0


def test_screen_at_100x30_shows_every_panel_and_key():
    def check(app, pilot):
        text = screen_text(app)
        lines = text.splitlines()
        assert len(lines) == 30 and max(len(line) for line in lines) <= 100
        for key_hint in ("p phase", "batch ×2/÷2", "length ×2/÷2", "d dtype", "a attn", "m model", "g GPU",
                         "↓↑ op", "s YAML", "x chart", "q quit"):
            assert key_hint in lines[-1], key_hint
        for widget in ("#settings", "#ops", "#chart", "#totals", "#verdict-box", "#detail-box", "#status"):
            region = app.query_one(widget).content_region
            assert region.width > 0 and region.height > 0, widget
        table = app.query_one("#ops")
        assert len(table.rows) == 18 and "share" in lines[1] and "24.2%" in lines[2]
        assert lines[1].startswith("op 1-13/18")  # 13 of the 18 ops in view: the header says so
        assert "4.64 ms per step · 215.3 tokens/s" in text  # the totals line, whole
        assert "Decode reads every weight once per step" in text  # the verdict starts in view

    explore("", check)


def test_describe_gives_the_rule_for_each_kind_of_op():
    prefill_naive = analyze(resolve_workload("prefill", attention="naive"), H100)
    decode = analyze(resolve_workload("decode"), H100)
    text = {name: "\n".join(describe(a.placement(name), a)) for a, name in
            ((prefill_naive, "softmax"), (prefill_naive, "gate_proj"), (decode, "attention"), (decode, "act"))}
    assert "FlashAttention (key a)" in text["softmax"]
    assert "compute-bound" in text["gate_proj"] and "fp8 peaks at 1,978.9 TFLOP/s" in text["gate_proj"]
    assert "each sequence reads its own KV cache" in text["attention"]
    assert "--fuse gate_up + act" in text["act"]


# --- the command -------------------------------------------------------------------------------------------------


def test_not_a_terminal_exits_2_with_one_line_pointing_to_analyze():
    result = subprocess.run(["rooflinectl", "explore", "decode", "--gpu", "h100"], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: explore needs an interactive terminal")
    assert "rooflinectl analyze" in lines[0]
    assert result.stdout == ""


def test_bad_options_exit_2_before_the_terminal_check():
    result = cli("explore", "--gpu", "h1000")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: unknown GPU 'h1000'")


def test_help_loads_no_textual():
    code = (
        "import sys\n"
        "from rooflinectl.cli import main\n"
        "sys.argv = ['rooflinectl', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('HEAVY', [m for m in ('textual', 'matplotlib', 'torch', 'triton') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "explore" in out  # the command is listed ...
    assert "HEAVY []" in out  # ... without importing its UI library
