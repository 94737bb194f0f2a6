"""render/hardware.py: the GPU list and detail, each number once, the measured ceilings beside the spec's."""

from __future__ import annotations

import io
from pathlib import Path

import yaml
from rich.console import Console

from rooflinectl.render.hardware import gpu_detail, gpu_json, gpu_table
from rooflinectl.specs.hardware import list_gpus, load_gpu, load_gpu_file

ROOT = Path(__file__).parents[2]
CALIBRATED = ROOT / "docs" / "results" / "h200-2026-12-02" / "calibrated.yaml"


def text(renderable) -> str:
    console = Console(width=100, file=io.StringIO(), color_system=None, highlight=False)
    console.print(renderable)
    return console.file.getvalue()


def test_detail_prints_the_peaks_and_the_hbm_ridges_once():
    out = text(gpu_detail(load_gpu("h100")))
    assert "Dense peaks" not in out  # the peak/ridge table that repeated the hierarchy's is gone
    assert sum(line.startswith("HBM ") for line in out.splitlines()) == 1  # the hierarchy's HBM row
    assert out.count("Units the registers feed") == 1
    assert out.count("494.7") == 1  # tf32's tensor peak: one table holds it
    assert "[3]" in out.split("Units the registers feed")[1].splitlines()[0]  # the peaks point to their source


def test_every_note_on_a_peak_is_marked_where_the_peak_is_printed():
    # Gaudi 3's FP32 vector peak is estimated: its note "≈2" had no mark in any table.
    out = text(gpu_detail(load_gpu("gaudi3")))
    note = next(line for line in out.splitlines() if "peak vector_tflops — estimated" in line)
    mark = note.split()[0]
    assert mark.startswith("≈")
    row = next(line for line in out.splitlines() if line.startswith("vector units"))
    assert row.split()[2] == mark and row.split()[-1] == "14.35"


def test_a_bandwidth_no_datasheet_gives_is_marked_in_the_spec_table():
    # H20-3e's 4,800 GB/s is estimated and MI355X's 1,075 GB/s of xGMI derived (7 links x 153.6): each figure
    # carries its mark, as the capacity beside it did; the H100's datasheet figures carry none.
    h20 = " ".join(text(gpu_detail(load_gpu("h20-3e"))).split())
    assert "4,800 GB/s (estimated)" in h20
    mi = " ".join(text(gpu_detail(load_gpu("mi355x"))).split())
    assert "1,075 GB/s (derived)" in mi
    h100 = " ".join(text(gpu_detail(load_gpu("h100"))).split())
    assert "3,350 GB/s [1]" in h100 and "900 GB/s both directions" in h100


def test_measured_ceilings_stand_beside_the_spec(tmp_path):
    data = yaml.safe_load(CALIBRATED.read_text())
    data["measured"]["vector_tflops"] = {"fp32": 51.2}
    data["measured"]["tensor_tflops"]["fp4"] = 1000.0  # a peak the spec does not give
    path = tmp_path / "calibrated.yaml"
    path.write_text(yaml.safe_dump(data))
    g = load_gpu_file(path)
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:4]]
            for line in text(gpu_detail(g)).splitlines() if line.startswith("│ ")}
    spec = g.compute
    assert rows["copy bandwidth"] == ["4,246 GB/s", f"{g.memory.hbm_bandwidth_gbps:,.0f} GB/s"]
    assert rows["tensor bf16"] == ["678.1 TFLOP/s", f"{spec.tensor_tflops['bf16']:,.1f} TFLOP/s"]
    assert rows["vector fp32"] == ["51.2 TFLOP/s", f"{spec.vector_tflops['fp32']:,.1f} TFLOP/s"]
    assert rows["tensor fp4"] == ["1,000 TFLOP/s", "—"]  # no spec figure: a dash, not 0.0


def test_list_has_every_gpu_and_json_keeps_the_file():
    gpus = list_gpus()
    out = text(gpu_table(gpus))
    for g in gpus:
        assert g.id in out
    h100 = load_gpu("h100")
    data = gpu_json(h100)
    assert data["memory"]["hbm_bandwidth_gbps"] == h100.memory.hbm_bandwidth_gbps
    assert [lv["name"] for lv in data["hierarchy"]["levels"]][0] == "HBM"
