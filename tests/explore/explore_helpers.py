"""What the explore tests share: the app run headless through Textual's pilot, and the screen read back.

Each test presses keys on a 100×30 screen and checks what is shown against ``roofline.analyze`` of the same
settings, built independently with ``resolve_workload``; the chart is checked through the positions it records.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from rooflinectl.engine.roofline import analyze
from rooflinectl.explore.app import ExploreApp
from rooflinectl.render.verdict import verdict
from rooflinectl.specs.hardware import load_gpu, load_gpu_file
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.units import duration, number

ROOT = Path(__file__).parent.parent.parent
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
    # The kind column: the engine's kind, coloured by the bound (the table keeps each row's bound for that).
    assert app.query_one("#ops").bounds == [p.bound for p in ordered]
    for row, p in zip(rows, ordered):
        assert row[2] == p.op.kind
        assert float(row[3]) == pytest.approx(p.attainable_flops / 1e12, rel=5e-3)
        assert row[4] == duration(p.total_time_s, sep="")
        assert float(row[5].rstrip("%")) == pytest.approx(p.share * 100, abs=0.05)
        intensity = float(row[1].replace(",", "").replace("k", "e3"))
        assert intensity == pytest.approx(p.intensity, rel=5e-3, abs=5e-4)
    totals = str(app.query_one("#totals").content)
    assert duration(a.totals.time_s) in totals
    assert f"{number(a.totals.tokens_per_s)} " in totals  # the one formatter (units.number)
    assert ("does NOT fit" in totals) == (not a.totals.fits)
    assert str(app.query_one("#verdict").content) == "\n".join(verdict(a))

