"""The fuzz tests' machinery: run the real entry point in-process, and the property every run must hold.

``run`` calls :func:`rooflinectl.cli.main` (the console script: click's usage errors become exit 2 there, and the
commands' UserErrors in ``cli._app.command``), with ``sys.argv``, the environment and the standard streams of the
console replaced. ``check`` is issue 18's bar: exit 0 with valid JSON of finite, non-negative numbers, or exit 2
with exactly one line on stderr and nothing on stdout; never a traceback, never exit 1, never 5 s for one run.
The command-specific checks (``check_analysis``, ``check_occupancy``, ``check_chart``) add the arithmetic a
result must agree with.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis.control import currently_in_test_context

from rooflinectl.cli import main

ROOT = Path(__file__).parents[2]
HARDWARE = sorted((ROOT / "hardware").glob("*.yaml"))
SCENARIOS = sorted((ROOT / "workloads").glob("*.yaml"))
MODELS = sorted((ROOT / "workloads" / "models").glob("*.yaml"))

# One run of pathological input may take at most this long (issue 18: "never longer than 5 s"), in CPU seconds of
# this process: on CI's 2 cores shared with a second xdist worker (or here with other jobs), the wall time of a
# chart's render measures the machine's load as much as the run (a 5.1 s wall-time plot of deepseek-v2-lite failed
# while other test processes held both cores). A run that hangs is still caught by the wall-clock alarm (HANG_S).
PER_RUN_LIMIT_S = 5.0

# A run still going after this long is stopped by an alarm and reported (a FIFO opened for reading blocks forever
# otherwise, and the suite with it).
HANG_S = 30


class Hung(Exception):
    pass


def _alarm(signum, frame):
    raise Hung(f"still running after {HANG_S} s")


# What the console sees: a fixed width, no colour, no GPU (measure and calibrate stop at "no CUDA GPU"), and no
# user folders of specs unless a test names one.
BASE_ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "CUDA_VISIBLE_DEVICES": ""}
CLEARED_ENV = ("ROOFLINECTL_HARDWARE_PATH", "ROOFLINECTL_WORKLOADS_PATH", "FORCE_COLOR")


@dataclass
class Run:
    args: list[str]
    code: int
    stdout: str
    stderr: str
    seconds: float
    error: str | None  # the traceback of an exception that escaped main(), if one did
    cpu_seconds: float = 0.0  # this process's CPU time over the run

    def describe(self) -> str:
        shown = " ".join(repr(a) if (not a or any(c.isspace() for c in a)) else a for a in self.args)
        return (f"rooflinectl {shown[:2000]}\n"
                f"exit {self.code} after {self.seconds:.2f} s ({self.cpu_seconds:.2f} CPU s)\n"
                f"--- stdout (tail)\n{self.stdout[-1500:]}\n--- stderr (tail)\n{self.stderr[-3000:]}"
                + (f"\n--- escaped\n{self.error}" if self.error else ""))


@contextlib.contextmanager
def _environment(env: dict[str, str] | None) -> Iterator[None]:
    saved = dict(os.environ)
    for key in CLEARED_ENV:
        os.environ.pop(key, None)
    os.environ.update({**BASE_ENV, **(env or {})})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


RUNS = {"commands": 0}  # how many commands the fuzz ran, for the summary line (conftest.py)


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
    """``rooflinectl ARGS`` through the console entry point, in this process."""
    RUNS["commands"] += 1
    out, err = io.StringIO(), io.StringIO()
    argv, stdin, here = sys.argv, sys.stdin, os.getcwd()
    sys.argv = ["rooflinectl", *args]
    sys.stdin = io.StringIO("")  # not a terminal: explore refuses, nothing waits for a key
    code, escaped = 0, None
    start, cpu_start = time.perf_counter(), time.process_time()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_S)
    try:
        if cwd is not None:
            os.chdir(cwd)
        with _environment(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001 - the property: nothing escapes the entry point
        code, escaped = 1, traceback.format_exc()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        sys.argv, sys.stdin = argv, stdin
        os.chdir(here)
    return Run(list(args), code, out.getvalue(), err.getvalue(), seconds, escaped, cpu_seconds)


class _NotJson(ValueError):
    pass


def _reject_constant(name: str) -> float:
    raise _NotJson(f"{name} is not JSON")


def numbers(data: object, path: str = "") -> Iterator[tuple[str, float]]:
    """Every number (not a boolean) in ``data`` with its key path."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from numbers(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from numbers(value, f"{path}[{i}]")
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        yield path, data


def check(r: Run, json_out: bool = False) -> object | None:
    """Issue 18's property for one run; returns the parsed JSON of a successful ``--json`` run."""
    where = r.describe()
    if currently_in_test_context():  # --hypothesis-show-statistics: how many cases ran through, how many refused
        event(f"exit {r.code}")
    assert r.error is None, f"an exception escaped the entry point:\n{where}"
    assert "Traceback" not in r.stdout + r.stderr, f"a traceback was printed:\n{where}"
    assert r.cpu_seconds < PER_RUN_LIMIT_S, (
        f"one run took {r.cpu_seconds:.1f} CPU s (limit {PER_RUN_LIMIT_S} s):\n{where}")
    assert r.code in (0, 2), f"exit {r.code}: only 0 (a result) or 2 (one line saying why) are allowed:\n{where}"
    if r.code == 2:
        lines = r.stderr.strip("\n").splitlines()
        assert len(lines) == 1, f"exit 2 must print exactly one line on stderr, got {len(lines)}:\n{where}"
        assert lines[0].startswith("error: ") and lines[0].strip() != "error:", f"not an error line:\n{where}"
        assert r.stdout == "", f"exit 2 printed on stdout (a number printed as if it were right?):\n{where}"
        return None
    if not json_out:
        return None
    try:
        data = json.loads(r.stdout, parse_constant=_reject_constant)
    except (ValueError, _NotJson) as err:
        raise AssertionError(f"--json printed invalid JSON ({err}):\n{where}") from None
    for path, value in numbers(data):
        assert math.isfinite(value), f"{path} = {value} is not finite:\n{where}"
        assert value >= 0, f"{path} = {value} is negative:\n{where}"
    return data


# --- what a result must agree with ----------------------------------------------------------------------------

REL = 1e-9


def close(a: float, b: float, rel: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=0.0) or (a == 0 and b == 0)


def check_analysis(data: dict, r: Run, peaks_tflops: set[float], capacity_bytes: float) -> None:
    """``analyze --json``: totals are Σ count × value; each op's time is at least both floors (bytes over the
    bandwidth, FLOPs over its peak) and equals the larger; fits ⇔ the footprint is within the capacity."""
    where = r.describe()
    ops, totals, hw = data["ops"], data["totals"], data["hardware"]
    assert ops, f"no operation:\n{where}"
    for key in ("flops", "bytes", "time_s"):
        total = math.fsum(o["count"] * o[key] for o in ops)
        assert close(totals[key], total), f"totals.{key} {totals[key]!r} != Σ count × {key} {total!r}:\n{where}"
    bandwidth = hw["bandwidth_gbps"] * 1e9
    top_peak = max(peaks_tflops) * 1e12
    assert close(hw["ridge"], hw["peak_tflops"] * 1e12 / bandwidth), f"ridge != peak / bandwidth:\n{where}"
    assert any(close(hw["peak_tflops"], p) for p in peaks_tflops), f"peak_tflops is none of the roofs:\n{where}"
    model = data.get("time_model", {})
    for o in ops:
        memory_floor, compute_floor = o["bytes"] / bandwidth, o["flops"] / top_peak
        name = o["name"]
        assert o["count"] >= 1 and isinstance(o["count"], int), f"{name}: count {o['count']!r}:\n{where}"
        assert o["time_s"] > 0 and math.isfinite(o["time_s"]), f"{name}: time {o['time_s']!r}:\n{where}"
        if "roofline_time_s" in o:  # timed by the calibrated op model: never under its launch floor
            assert model.get("op_model") is True, f"{name}: an op model's time without the op model:\n{where}"
            assert o["time_s"] >= model["launch_floor_s"] * (1 - REL), f"{name}: under the launch floor:\n{where}"
            o = {**o, "time_s": o["roofline_time_s"]}  # the roofline's own relations hold of its time
        assert o["time_s"] >= memory_floor * (1 - REL), f"{name}: time below bytes / bandwidth:\n{where}"
        assert o["time_s"] >= compute_floor * (1 - REL), f"{name}: time below FLOPs / the highest peak:\n{where}"
        if o["bytes"] > 0:
            assert close(o["intensity"], o["flops"] / o["bytes"]), f"{name}: intensity != FLOPs / bytes:\n{where}"
        assert o["attainable_tflops"] * 1e12 <= top_peak * (1 + REL), f"{name}: attainable above every peak:\n{where}"
        if o["bound"] == "memory":
            assert close(o["time_s"], memory_floor), f"{name}: memory-bound, time != bytes / bandwidth:\n{where}"
        else:
            assert o["bound"] == "compute", f"{name}: bound {o['bound']!r}:\n{where}"
            op_peak = o["attainable_tflops"]
            assert any(close(op_peak, p) for p in peaks_tflops), f"{name}: compute-bound below no roof:\n{where}"
            assert close(o["time_s"], o["flops"] / (op_peak * 1e12)), f"{name}: time != FLOPs / peak:\n{where}"
            assert o["time_s"] >= memory_floor * (1 - REL), f"{name}: compute-bound under the memory floor:\n{where}"
    w = data["workload"]
    tokens = w["batch"] * w["seq_len"]
    assert close(totals["tokens_per_s"], tokens / totals["time_s"]), f"tokens/s != tokens / time:\n{where}"
    assert totals["fits"] == (totals["memory_bytes"] <= capacity_bytes), (
        f"fits {totals['fits']} but footprint {totals['memory_bytes']} vs capacity {capacity_bytes}:\n{where}")


def check_occupancy(data: dict, r: Run, sm_count: int) -> None:
    """``occupancy --json``: the binding limit's blocks are the fewest; warps, threads and waves follow."""
    where = r.describe()
    limits = {k: v["blocks_per_sm"] for k, v in data["limits"].items() if v["blocks_per_sm"] is not None}
    fewest = min(limits.values())  # None: a resource the kernel does not use (0 registers) limits nothing
    assert data["blocks_per_sm"] == fewest, f"blocks_per_sm is not the binding limit's:\n{where}"
    assert set(data["binding"]) == {k for k, v in limits.items() if v == fewest}, where
    assert data["warps_per_sm"] == data["blocks_per_sm"] * data["warps_per_block"], where
    assert data["threads_per_sm"] == data["blocks_per_sm"] * data["threads_per_block"], where
    assert data["warps_per_sm"] <= data["max_warps_per_sm"], where
    assert close(data["occupancy"], data["warps_per_sm"] / data["max_warps_per_sm"]), where
    assert 0 <= data["occupancy"] <= 1, where
    if data["grid"] is not None:
        assert data["blocks_per_wave"] == data["blocks_per_sm"] * sm_count, where
        if data["blocks_per_wave"]:
            assert data["waves"] == math.ceil(data["grid"] / data["blocks_per_wave"]), where
            assert 0 < data["last_wave_fill"] <= 1, where
    for s in data["suggestions"]:
        assert 0 < s["occupancy"] <= 1 and s["occupancy"] > data["occupancy"] - REL, (
            f"a suggestion that does not raise occupancy: {s}:\n{where}")


SIGNATURES = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF"}


def check_chart_file(path: Path, r: Run) -> None:
    """What ``plot -o`` wrote after exit 0: a whole file of the format its suffix names."""
    where = r.describe()
    assert path.is_file() and not path.is_symlink(), f"exit 0 but {path} was not written:\n{where}"
    head = path.read_bytes()[:200]
    suffix = path.suffix.lower()
    if suffix in SIGNATURES:
        assert head.startswith(SIGNATURES[suffix]), f"{path} is not a {suffix} file:\n{where}"
    else:
        assert head.lstrip().startswith((b"<?xml", b"<svg")), f"{path} is not an SVG file:\n{where}"
    if suffix == ".svg":
        assert path.read_bytes().rstrip().endswith(b"</svg>"), f"{path} is a truncated SVG:\n{where}"
    if suffix == ".pdf":
        assert b"%%EOF" in path.read_bytes()[-64:], f"{path} is a truncated PDF:\n{where}"


def check_chart(data: dict, r: Run) -> None:
    """``plot --json``: axes that are ranges, points under their GPU's roofs."""
    where = r.describe()
    for panel in data["panels"]:
        for lim in ("xlim", "ylim"):
            lo, hi = panel[lim]
            assert 0 < lo < hi, f"{panel['title']}: {lim} {panel[lim]}:\n{where}"
        top = {}
        for roof in panel["roofs"]:
            if roof["kind"] == "compute":
                top[roof["gpu"]] = max(top.get(roof["gpu"], 0.0), roof["value"])
        for point in panel["points"]:
            assert point["flops"] <= top[point["gpu"]] * (1 + REL), f"a point above every roof: {point}:\n{where}"


# CI runs the fixed budget. To look further by hand: FUZZ_SCALE=20 python -m pytest tests/fuzz (20 times the
# cases, drawn at random: a new sample on each run).
FUZZ_SCALE = int(os.environ.get("FUZZ_SCALE", "1"))


def fuzz_settings(max_examples: int) -> settings:
    """A fixed budget: ``max_examples`` cases, the same on every run and machine (derandomized, no example
    database), no deadline (the 5 s bound is ``check``'s, on the command alone), and no "explain" phase (it traces
    every line, which makes a plot take minutes and turns a time bound into noise)."""
    return settings(max_examples=max_examples * FUZZ_SCALE, derandomize=FUZZ_SCALE == 1, deadline=None,
                    database=None,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- mutating the bundled files -----------------------------------------------------------------------------


def leaf_paths(data: object, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a nested mapping (mappings and lists included, so a whole section can be changed)."""
    out: list[tuple] = []
    if isinstance(data, dict):
        for key, value in data.items():
            out.append((*prefix, key))
            out += leaf_paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.append((*prefix, i))
            out += leaf_paths(value, (*prefix, i))
    return out


def get_at(data: object, path: tuple) -> object:
    for key in path:
        data = data[key]  # type: ignore[index]
    return data


def set_at(data: object, path: tuple, value: object) -> None:
    parent = get_at(data, path[:-1])
    parent[path[-1]] = value  # type: ignore[index]


def delete_at(data: object, path: tuple) -> None:
    parent = get_at(data, path[:-1])
    del parent[path[-1]]  # type: ignore[union-attr,arg-type]


def dump_yaml(data: object) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10**6)
