"""explore/app.py (with its panels) and state.py driven headless through Textual's pilot: keys in, the engine's numbers out;
saving, quitting and the whole screen."""

from __future__ import annotations

import json

import pytest
import yaml
from explore_helpers import (
    H100,
    assert_shows,
    explore,
    explore_steps,
    no_fp8_gpu,
    screen_text,
)

from helpers import cli
from rooflinectl.errors import UserError
from rooflinectl.explore import state
from rooflinectl.explore.app import ExploreApp
from rooflinectl.explore.panels import ops_in_time_order
from rooflinectl.specs.models import list_models
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.units import number


def test_start_shows_the_engines_numbers_for_the_default_decode():
    def check(app, pilot):
        assert_shows(app, resolve_workload("decode"))
        text = screen_text(app)
        assert "h100-sxm │ decode │ llama-3-8b │ batch 1 │ context 4,096 │ bf16 │ attn flash" in text
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

    # Halve, then double back: doubling first would pass Llama 3 8B's 8,192 positions, which the model refuses.
    explore_steps([(["b", "b", "c"], check), (["B", "b", "C", "c"], check)])


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
        "model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
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
        assert "cannot write: no such folder" in str(app.query_one("#status").content)

    explore(["s"], check, out_dir=tmp_path / "missing")


def test_chart_key_saves_through_plot(tmp_path):
    async def check(app, pilot):
        await app.workers.wait_for_complete()
        await pilot.pause()
        png = tmp_path / state.workload_filename(app.knobs).replace(".yaml", ".png")
        assert str(app.query_one("#status").content) == f"saved the chart to {png}"  # or the error, shown
        assert png.is_file() and png.read_bytes().startswith(b"\x89PNG")

    explore(["x"], check, out_dir=tmp_path)




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
        bar = " ".join(lines[-2:]).replace("\u00a0", " ")  # the key bar wraps between hints, never inside one
        for key_hint in ("p phase", "batch ×2/÷2", "length ×2/÷2", "d dtype", "a attn", "m model", "g GPU",
                         "↓↑ op", "s YAML", "x chart", "q quit"):
            assert key_hint in bar, key_hint
        for widget in ("#settings", "#ops", "#chart", "#totals", "#verdict-box", "#detail-box", "#status"):
            region = app.query_one(widget).content_region
            assert region.width > 0 and region.height > 0, widget
        table = app.query_one("#ops")
        assert len(table.rows) == 18 and "share" in lines[1] and "24.2%" in lines[2]
        assert lines[1].startswith("op 1-13/18")  # 13 of the 18 ops in view: the header says so
        assert "4.64 ms per step · 215 tokens/s" in text  # the totals line, whole
        assert "Decode reads every weight once per step" in text  # the verdict starts in view

    explore("", check)


@pytest.mark.parametrize("name", ["[/]", "[bold]x", "[link=http://x]y[/link]"])
def test_names_with_markup_show_as_written(tmp_path, name):
    """Issue 18: a model or GPU named "[/]" must not raise MarkupError, nor "[link=…]" make a hyperlink."""
    model = yaml.safe_load(open("workloads/models/llama-3-8b.yaml"))
    model.update(id=name, name=name)
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(model))
    w = resolve_workload("decode", model=str(path))

    def check(app, pilot):
        assert name in screen_text(app)
        assert name in str(app.query_one("#settings").content)

    explore(["b"], check, workload=w, gpu=H100.model_copy(update={"name": name}))


def test_a_stated_experts_touched_is_refused_not_dropped():
    """explore's keys change the batch, and with it the experts a step can touch: it counts the uniform
    expectation, and says so rather than silently showing another analysis than 'analyze' does."""
    w = resolve_workload("decode", model="mixtral-8x7b", batch=32, experts_touched=4)
    with pytest.raises(UserError, match="experts_touched 4: explore counts the experts touched under uniform"):
        state.Knobs.from_workload(w, H100)
    uniform = state.Knobs.from_workload(resolve_workload("decode", model="mixtral-8x7b", batch=32), H100)
    assert uniform.analyze().placement("expert_gate_proj").op.count == 32


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
def test_every_key_the_gpu_and_apart_columns_at_a_stock_and_a_large_terminal(size):
    """Issue 19: at 80×24 the key bar was cut ("x chart", "q quit" invisible) and the GPU id fell off the header;
    at fp8 the bound and rate columns ran together ("compute1.98e+03"). Prefill at fp8 on an H100: compute-bound
    linear layers at 1,979 TFLOP/s."""
    w = resolve_workload("prefill", dtype="fp8")
    width, height = size

    def check(app, pilot):
        lines = screen_text(app).splitlines()
        assert len(lines) == height and max(len(line) for line in lines) <= width
        bar = " ".join(lines[-2:]).replace("\u00a0", " ")  # the key bar: one line at 200, two at 80
        for key_hint in ("p phase", "batch ×2/÷2", "length ×2/÷2", "d dtype", "a attn", "m model", "g GPU",
                         "↓↑ op", "s YAML", "x chart", "q quit"):
            assert key_hint in bar, key_hint
        assert lines[0].split("│")[0].strip() == "h100-sxm"  # the GPU first in the header
        table = app.query_one("#ops")
        assert table.compact == (width < 100)
        columns = 5 if width < 100 else 6
        rows = [line.split("▕")[0] for line in lines[2:2 + 5]]
        for row, p in zip(rows, ops_in_time_order(app.analysis)):
            cells = row.split()
            assert len(cells) == columns and cells[0] == p.name, row  # every column apart
            assert cells[-3] == number(p.attainable_flops / 1e12)
        assert "1,979" in rows[0]
        for widget in ("#ops", "#chart", "#totals", "#verdict-box", "#detail-box", "#status", "#keys"):
            region = app.query_one(widget).content_region
            assert region.width > 0 and region.height > 0, widget
        assert app.query_one("#chart").content_region.width >= 30  # room for a chart beside the table

    explore("", check, workload=w, size=size)


@pytest.mark.parametrize("width", [80, 120])
def test_the_save_confirmation_is_wrapped_not_cut(tmp_path, width):
    """Issue 19: at 120 columns the `s` key's confirmation (the path and the command that reads it) was cut."""

    async def check(app, pilot):
        await pilot.pause()  # the status line's new height laid out
        status = app.query_one("#status").region  # the status line's rows, joined (spaces dropped: it folds)
        rows = screen_text(app).splitlines()[status.y:status.y + status.height]
        text = "".join(row.strip() for row in rows).replace(" ", "")
        path = next(tmp_path.glob("explore-*.yaml"))
        assert f"saved{path};rooflinectlanalyze{path}--gpuh100-sxm" in text

    explore(["s"], check, size=(width, 30), out_dir=tmp_path)


def test_a_chunked_attention_model_explores_with_its_own_attention_ops():
    """Llama 4 Scout's chunked layers show as attention_chunked beside the NoPE layers' attention, and the length
    key (c) recounts both at twice the context."""
    w = resolve_workload("decode", model="llama-4-scout", context=32768)

    def check(app, pilot):
        assert_shows(app, resolve_workload("decode", model="llama-4-scout", context=65536))
        assert "attention_chunked" in [p.name for p in app.analysis.placements]

    explore("c", check, workload=w)


def test_a_layout_over_gpus_is_analysed_per_gpu_and_saved_with_its_flags(tmp_path):
    """--tp 4 on Llama 3 70B: explore shows the engine's per-GPU analysis (the same as analyze --tp 4), says so
    in its settings line, and the saved file's command carries the layout."""
    from rooflinectl.engine.parallel import Layout
    from rooflinectl.engine.roofline import analyze
    from rooflinectl.specs.hardware import load_gpu

    w = resolve_workload("decode", model="llama-3-70b", batch=8)

    def check(app, pilot):
        expected = analyze(w, load_gpu("h100"), layout=Layout(tp=4))
        assert app.analysis.totals.time_s == expected.totals.time_s
        assert app.analysis.placement("attn_all_reduce").op.count == 80
        assert "TP 4, per GPU" in screen_text(app)
        path = tmp_path / state.workload_filename(app.knobs)
        assert path.read_text().startswith(f"# Reproduce with: rooflinectl analyze {path} --gpu h100-sxm --tp 4\n")
        shown = json.loads(cli("analyze", str(path), "--gpu", "h100-sxm", "--tp", "4", "--json").stdout)
        assert shown["totals"]["time_s"] == expected.totals.time_s

    explore(["s"], check, workload=w, layout=Layout(tp=4), out_dir=tmp_path)


def test_a_layout_explore_refuses_is_one_line_before_the_terminal():
    from helpers import assert_one_line_error

    assert_one_line_error(cli("explore", "--model", "mixtral-8x7b", "--tp", "2", "--ep", "4"), "--ep 4")
