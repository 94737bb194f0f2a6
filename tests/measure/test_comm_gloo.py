"""calibrate --comm's own code path on the CPU: two processes through torch.distributed's gloo backend, started by
the command (--world-size 2, torch.multiprocessing) and by torchrun (its environment). Small sizes; no time is
asserted (a CPU's gloo times are no interconnect's), only that rank 0 wrote a file that loads by the hardware
rules and holds every collective at every size, with nccl-tests' arithmetic."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rooflinectl.specs.hardware import load_gpu_file
from rooflinectl.specs.measured import COLLECTIVES, bus_factor

pytest.importorskip("torch.distributed")

ROOT = Path(__file__).resolve().parents[2]
SIZES = [4096, 8192, 16384]  # --comm-max 16KiB: the powers of two from 4 KiB


def _run(launcher: list[str], extra: list[str], out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, *launcher, "-m", "rooflinectl", "calibrate", "--comm", "--gpu", "h200",
                           "--comm-max", "16KiB", "-o", str(out), "--json", *extra],
                          capture_output=True, text=True, env=env, timeout=300)


def _check(out: Path, printed: dict) -> None:
    gpu = load_gpu_file(out)  # the hardware rules, strict: algbw = S / t and busbw = algbw × the factor
    m = gpu.measured.interconnect
    assert (m.gpu_count, m.backend, m.device_name) == (2, "gloo", "CPU (gloo)")
    assert list(m.collectives) == list(COLLECTIVES)
    for name, points in m.collectives.items():
        assert [p.bytes for p in points] == SIZES  # n = 2 divides every size: S is the nominal size
        for p in points:
            assert p.busbw_gbps == pytest.approx(p.bytes / p.time_s / 1e9 * bus_factor(name, 2), rel=1e-4)
    assert gpu.interconnect is not None and gpu.interconnect.bandwidth_gbps == 900  # the datasheet's, kept
    assert printed["id"] == out.stem and printed["interconnect"] == m.model_dump(mode="json")
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]  # written atomically


def test_gloo_two_processes_spawned(tmp_path):
    out = tmp_path / "cpu-pair.yaml"
    result = _run([], ["--world-size", "2"], out)
    assert result.returncode == 0, result.stderr[-3000:]
    _check(out, json.loads(result.stdout))
    assert load_gpu_file(out).measured.interconnect.command.endswith("--world-size 2")


def test_gloo_two_processes_under_torchrun(tmp_path):
    out = tmp_path / "cpu-pair.yaml"
    result = _run(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"], [], out)
    assert result.returncode == 0, result.stderr[-3000:]
    _check(out, json.loads(result.stdout))  # rank 1 prints nothing: stdout is rank 0's JSON alone
    assert load_gpu_file(out).measured.interconnect.command.startswith("torchrun --nproc-per-node 2 -m rooflinectl")
