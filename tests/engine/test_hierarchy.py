"""The memory hierarchy of every bundled GPU, checked against its YAML file read on its own (not through the model),
and the ridge point at each level against the engine's ridge at HBM; then `hardware show` with and without --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import cli
from rooflinectl.engine.hierarchy import hierarchy
from rooflinectl.specs.hardware import load_gpu, load_gpu_file

GPU_FILES = sorted((Path(__file__).parent.parent.parent / "hardware").glob("*.yaml"))
LEVELS = ["HBM", "L2", "shared memory / L1", "register file"]


def flat(text: str) -> str:
    return " ".join(text.split())


def expected_levels(raw: dict) -> list[str]:
    """The levels a file gives a size for, top to bottom: HBM always; L2 where it gives one; an SM's shared memory
    and register file where it gives them and an SM count (the register file with its limits, which describe it)."""
    m, sms = raw["memory"], raw.get("sm_count")
    return [name for name, given in (
        ("HBM", True),
        ("L2", "l2_size_mib" in m),
        ("shared memory / L1", "smem_per_sm_kib" in m and sms is not None),
        ("register file", "register_file_per_sm_kib" in m and sms is not None and "limits" in raw),
    ) if given]


def test_a_full_file_has_every_level():
    assert expected_levels(yaml.safe_load((GPU_FILES[0].parent / "h100-sxm.yaml").read_text())) == LEVELS


@pytest.mark.parametrize("path", GPU_FILES, ids=lambda p: p.stem)
def test_levels_match_the_yaml(path):
    raw = yaml.safe_load(path.read_text())
    m, lim, c, sms = raw["memory"], raw.get("limits"), raw["compute"], raw.get("sm_count")
    h = hierarchy(load_gpu_file(path))
    assert [lv.name for lv in h.levels] == expected_levels(raw)
    levels = {lv.name: lv for lv in h.levels}
    hbm, l2, smem, regs = (levels.get(name) for name in LEVELS)
    # Sizes: binary units, as the files give them, in whole bytes (--json prints integers); HBM and L2 are shared,
    # an SM's even share rounded down to a byte (none without an SM count); the others each SM's own.
    assert hbm.size_bytes == round(m["hbm_capacity_gib"] * 2**30) and isinstance(hbm.size_bytes, int)
    assert hbm.per_sm_bytes == (None if sms is None else hbm.size_bytes // sms)
    assert sms is None or isinstance(hbm.per_sm_bytes, int)
    if l2:
        assert l2.size_bytes == round(m["l2_size_mib"] * 2**20)
        assert l2.per_sm_bytes == (None if sms is None else l2.size_bytes // sms)
    if smem:
        assert smem.per_sm_bytes == m["smem_per_sm_kib"] * 1024
        assert smem.size_bytes == m["smem_per_sm_kib"] * 1024 * sms
        assert not smem.chip_wide
    if regs:
        assert regs.per_sm_bytes == m["register_file_per_sm_kib"] * 1024
        # The register file in bytes is its 32-bit registers × 4.
        assert regs.per_sm_bytes == lim["registers_per_sm"] * 4
        assert not regs.chip_wide and regs.bandwidth_gbps is None and regs.ridges == ()
    assert hbm.chip_wide and (l2 is None or l2.chip_wide)
    # Bandwidths, and where each came from.
    derived = m.get("derived", {})
    for lv, field in ((hbm, "hbm_bandwidth_gbps"), (l2, "l2_bandwidth_gbps"), (smem, "smem_bandwidth_gbps")):
        if lv is None:
            continue
        assert lv.bandwidth_gbps == m.get(field)
        if m.get(field) is None:
            assert lv.provenance == "unknown" and lv.ridges == ()
        elif field in derived:
            assert lv.how == derived[field]
            assert lv.provenance == ("estimated" if derived[field].startswith("estimated") else "derived")
        else:
            assert lv.provenance == "spec" and lv.how == m["source"]
    # Derived sizes carry their note too.
    for lv, field in ((hbm, "hbm_capacity_gib"), (l2, "l2_size_mib"), (smem, "smem_per_sm_kib"),
                      (regs, "register_file_per_sm_kib")):
        if lv is not None:
            assert (lv.size_note.how if lv.size_note else None) == derived.get(field)
    # Ridges: peak ÷ that level's bandwidth, every data type the file gives; at shared memory a vector peak
    # (stated at the boost clock) ÷ 128 B a clock an SM at that clock.
    for lv in (hbm, l2, smem):
        if lv is None or lv.bandwidth_gbps is None:
            continue
        for unit, table in (("tensor", c["tensor_tflops"]), ("vector", c["vector_tflops"])):
            for dtype, tflops in table.items():
                at_boost = lv is smem and unit == "vector"
                bandwidth = 128 * sms * raw["boost_clock_mhz"] * 1e6 if at_boost else lv.bandwidth_gbps * 1e9
                assert lv.ridge(dtype, unit) == pytest.approx(tflops * 1e12 / bandwidth)
    # The compute level lists every peak, and its per-SM share (none without an SM count).
    peaks = {(u.unit, u.dtype): u.tflops for u in h.compute}
    assert peaks == {**{("tensor", d): v for d, v in c["tensor_tflops"].items()},
                     **{("vector", d): v for d, v in c["vector_tflops"].items()}}
    assert all(u.per_sm_tflops == (None if sms is None else pytest.approx(u.tflops / sms)) for u in h.compute)


@pytest.mark.parametrize("path", GPU_FILES, ids=lambda p: p.stem)
def test_hbm_ridge_is_the_engines_and_ridges_fall_towards_the_units(path):
    g = load_gpu_file(path)
    h = hierarchy(g)
    roofs = g.roofs()
    hbm = h.level("HBM")
    for dtype in g.compute.tensor_tflops:
        assert hbm.ridge(dtype) == pytest.approx(roofs.ridge(dtype))
    # Each level with a bandwidth above HBM's needs fewer FLOPs per byte to keep the units busy.
    for lv in h.levels[1:]:
        if lv.bandwidth_gbps is not None and lv.bandwidth_gbps > g.memory.hbm_bandwidth_gbps:
            assert lv.ridge("fp32", "vector") < hbm.ridge("fp32", "vector")


def test_h100_worked_numbers():
    """By hand from hardware/h100-sxm.yaml: 80 GiB / 132 SMs = 620.6 MiB each; 50 MiB / 132 = 387.9 KiB;
    989.4 TFLOP/s bf16 ÷ 3,350 GB/s = 295.3 FLOP/B; ÷ the derived 30,920 GB/s of shared memory (128 B/clk/SM at
    the 1.83 GHz the tensor peak is stated at) = 32.0, the 4,096 FLOP/clk ÷ 128 B/clk of one SM at any clock."""
    h = hierarchy(load_gpu("h100"))
    assert h.level("HBM").per_sm_bytes / 2**20 == pytest.approx(620.6, abs=0.05)
    assert h.level("L2").per_sm_bytes / 2**10 == pytest.approx(387.9, abs=0.05)
    assert h.level("HBM").ridge("bf16") == pytest.approx(295.3, abs=0.05)
    smem = h.level("shared memory / L1")
    assert smem.ridge("bf16") == pytest.approx(32.0, abs=0.05)
    assert smem.provenance == "derived" and "128 B/clk/SM" in smem.how
    assert smem.bandwidth_per_sm_gbps == pytest.approx(30920 / 132)
    # One clock for both rates: the shared-memory ridge of every NVIDIA part whose tensor peak is stated below its
    # maximum clock is its tensor FLOP per clock ÷ 128 B per clock.
    for gpu, flop_per_clk in (("h100-sxm", 4096), ("h200", 4096), ("h800", 4096), ("h100-pcie", 4096),
                              ("b200", 8192), ("b300", 8192), ("rtx-pro-6000", 1024)):
        ridge = hierarchy(load_gpu(gpu)).level("shared memory / L1").ridge("bf16")
        assert ridge == pytest.approx(flop_per_clk / 128, rel=2e-3), gpu
    # The fp32 vector peak is stated at the 1.98 GHz boost (132 SMs × 256 FLOP/clk): its ridge divides by the
    # bandwidth at that clock, 128 B/clk × 132 × 1.98 GHz, not the file's 1.83 GHz figure (2.16).
    assert smem.ridge("fp32", "vector") == pytest.approx(66.9e12 / (128 * 132 * 1.98e9), rel=1e-9)
    assert smem.ridge("fp32", "vector") == pytest.approx(2.0, abs=0.01)
    # 65,536 registers for 2,048 resident threads: 32 each (128 B); 255 at most (1,020 B).
    assert "32 (128 B) each with all 2,048 threads resident" in h.level("register file").detail


def test_hardware_show_prints_the_hierarchy():
    out = cli("hardware", "show", "h100").stdout
    h = hierarchy(load_gpu("h100"))
    assert "Memory hierarchy, top to bottom" in out
    assert "shared/L1" in out and "registers" in out
    row = next(line for line in out.splitlines() if line.startswith("HBM "))
    assert f"{h.level('HBM').ridge('bf16'):,.0f}" in row and "3,350" in row
    # The notes on derived numbers are printed, word for word.
    for lv in h.levels:
        if lv.provenance in ("derived", "estimated"):
            assert flat(lv.how) in flat(out)
    assert "Units the registers feed" in out and "989.4" in out


def test_hardware_show_json_has_the_hierarchy():
    data = json.loads(cli("hardware", "show", "h100", "--json").stdout)
    assert data["memory"]["hbm_bandwidth_gbps"] == 3350  # the spec is still all there
    hier = data["hierarchy"]
    assert [lv["name"] for lv in hier["levels"]] == LEVELS
    h = hierarchy(load_gpu("h100"))
    for got, lv in zip(hier["levels"], h.levels):
        assert got["bandwidth_gbps"] == lv.bandwidth_gbps
        assert got["size_bytes"] == lv.size_bytes
        for r in lv.ridges:
            assert got["ridge_flop_per_byte"][r.unit][r.dtype] == pytest.approx(r.flop_per_byte)
    assert hier["levels"][0]["bandwidth_provenance"] == "spec"
    assert {(u["unit"], u["dtype"]) for u in hier["compute"]} >= {("tensor", "bf16"), ("vector", "fp32")}


def _range(annotated) -> tuple[float, float]:
    """(lowest, highest) value a spec field type allows (specs/load.py's Rate, Peak, Size)."""
    lo = hi = None
    for info in annotated.__metadata__:
        for c in getattr(info, "metadata", []):
            lo = getattr(c, "ge", lo)
            hi = getattr(c, "le", hi)
    assert lo is not None and hi is not None
    return lo, hi


@pytest.mark.parametrize("end", ["low", "high"])
def test_every_number_at_the_end_of_its_range_gives_finite_results(end):
    """Issue 18: an infinite capacity (math.floor(inf)), infinite peaks (ZeroDivisionError) and 1e-320 bandwidth
    (nan%) broke the engine. The GPU file's ranges now stop those; at the ends of the ranges the engine's own
    arithmetic stays finite: every rate, size and peak of H100's file at its lowest, then at its highest."""
    import math

    from rooflinectl.engine.roofline import analyze
    from rooflinectl.specs.hardware import GPU
    from rooflinectl.specs.load import Peak, Rate, Size
    from rooflinectl.specs.scenario import resolve_workload

    pick = 0 if end == "low" else 1
    rate, peak, size = _range(Rate)[pick], _range(Peak)[pick], _range(Size)[pick]
    data = yaml.safe_load((GPU_FILES[0].parent / "h100-sxm.yaml").read_text())
    data.pop("measured", None)
    m = data["memory"]
    for key in ("hbm_bandwidth_gbps", "l2_bandwidth_gbps", "smem_bandwidth_gbps"):
        m[key] = rate
    for key in ("hbm_capacity_gib", "l2_size_mib", "smem_per_sm_kib", "l1_smem_per_sm_kib",
                "register_file_per_sm_kib"):
        m[key] = size
    data["limits"]["max_smem_per_block_kib"] = size
    data["limits"]["reserved_smem_per_block_bytes"] = 0  # the block's share plus the reserve must fit the SM's
    data["compute"]["tensor_tflops"] = {d: peak for d in data["compute"]["tensor_tflops"]}
    data["compute"]["vector_tflops"] = {d: peak for d in data["compute"]["vector_tflops"]}
    gpu = GPU.model_validate(data)
    h = hierarchy(gpu)
    rates = [x for lv in h.levels for x in (lv.bandwidth_gbps or 1.0, lv.bandwidth_per_sm_gbps or 1.0,
                                            *(r.flop_per_byte for r in lv.ridges))]
    rates += [x for c in h.compute for x in (c.tflops, c.per_sm_tflops)]
    assert all(math.isfinite(x) and x > 0 for x in rates)
    # Sizes are whole bytes: 1e-3 KiB (1.024 B, the smallest size the file's range allows) is 1, never a fraction.
    sizes = [x for lv in h.levels for x in (lv.size_bytes, lv.per_sm_bytes)]
    assert all(isinstance(x, int) and x >= 0 for x in sizes)
    # The ridge by hand: peak TFLOP/s × 1e12 over GB/s × 1e9 (low: 1e-6·1e12 / 1e-3·1e9 = 1; high: 1e18 / 1e16 = 100).
    assert h.level("HBM").ridge("bf16") == pytest.approx(peak * 1e12 / (rate * 1e9))
    t = analyze(resolve_workload("decode", batch=1, context=4096), gpu).totals
    assert all(math.isfinite(x) and x > 0 for x in (t.time_s, t.tokens_per_s, t.capacity_bytes))
    # Capacity 1e-3 GiB holds nothing; 1e6 GiB holds the weights (16.06 GB) and many sequences (512 MiB each).
    assert t.max_batch == (0 if end == "low" else (10**6 * 2**30 - 8_030_261_248 * 2) // (32 * 2 * 1024 * 4096 * 2))
