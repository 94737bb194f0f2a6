"""Fuzz every command's options: sizes as text (huge, negative, Unicode digits, lists with holes), data types,
fusion lists, names with markup and mathtext, GPUs and models by id, alias and nonsense. The property is issue 18's
(``fuzz_support.check``); a result is checked against its own arithmetic, and ``analyze``'s "largest batch that
fits" against two more runs: that batch fits, one more does not.

The budget is fixed (``max_examples`` per test, derandomized: the same cases on every run and machine).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from fuzz_support import (
    HARDWARE,
    MODELS,
    check,
    check_analysis,
    check_chart,
    check_chart_file,
    check_occupancy,
    fuzz_settings,
    run,
)
from hypothesis import given
from hypothesis import strategies as st

from rooflinectl.specs.hardware import load_gpu

GIB = 2**30



ODD_TEXT = ["", " ", "[/]", "[bold]x[/bold]", "$\\frac{$", "$x$", "\\", "٣", "３", "x" * 300, "nan", "inf",
            "-", "--json", "a,b", "é", "\x1b[0m", "h100\n", "None", "null"]

def mostly(valid: st.SearchStrategy, odd: st.SearchStrategy) -> st.SearchStrategy:
    """A valid value seven times in eight: a command takes up to ten options, and each odd one alone is refused;
    this way about half the cases reach the engine, and its arithmetic is checked."""
    return st.one_of(*[valid] * 7, odd)


SIZE_TEXT = mostly(
    st.one_of(st.integers(1, 64).map(str), st.integers(1, 10**5).map(str)),
    st.one_of(
        st.integers(-5, 10**6).map(str),
        st.sampled_from(["0", "2147483647", "2147483648", "9" * 30, "1" + "0" * 309, "9" * 5000, "-1", "+8", "08",
                         "1e3", "8.0", "0x10", "1_000", "٣", "３２", "²", "𝟠", "Ⅷ", " 8", "8 ", "1,8", "1,,8", "8,",
                         ",8", "1, 8", "1,8,64,256", "64,1,8,1"]),
        st.sampled_from(ODD_TEXT)),
)
DTYPES = mostly(st.sampled_from(["bf16", "fp16", "fp8", "int8", "fp32"]),
                st.sampled_from(["FP16", "bf 16", "fp4", "fp64", "tf32", "float16", *ODD_TEXT[:6]]))
FUSE = mostly(
    st.lists(st.sampled_from(["qkv", "gate_up", "norm_linear", "residual"]), max_size=4, unique=True).map(",".join),
    st.sampled_from(["", ",", "qkv,", ",qkv", "qkv,,act", "QKV", "act", "act,gate_up", "qkv,qkv", "everything",
                     " qkv , gate_up ", *ODD_TEXT]),
)
GPU_NAMES = mostly(st.sampled_from([*(p.stem for p in HARDWARE), "h100", "a100", "H100"]),
                   st.sampled_from(["h10", "nvidia", "l4 ", *ODD_TEXT]))
MODEL_NAMES = mostly(st.sampled_from([*(p.stem for p in MODELS), "LLAMA-3-8B"]),
                     st.sampled_from(["llama-3-8", *ODD_TEXT]))
WORKLOADS = mostly(st.sampled_from(["decode", "prefill", "attention", "DECODE"]),
                   st.sampled_from(["decod", "models", *ODD_TEXT]))


@st.composite
def workload_options(draw) -> list[str]:
    """A workload and some of the options over it, each given or not; the length option is the phase's own
    (--context for decode, --seq-len otherwise) seven times in eight."""
    workload = draw(WORKLOADS) if draw(st.integers(0, 4)) else None
    args = [workload] if workload is not None else []
    own = "--context" if (workload or "decode").lower() == "decode" else "--seq-len"
    length = own if draw(st.integers(0, 7)) else draw(st.sampled_from(["--context", "--seq-len"]))
    for flag, values in (("--gpu", GPU_NAMES), ("--model", MODEL_NAMES), ("--batch", SIZE_TEXT),
                         (length, SIZE_TEXT), ("--dtype", DTYPES), ("--kv-dtype", DTYPES),
                         ("--attention", mostly(st.sampled_from(["naive", "flash"]), st.sampled_from(["paged", ""]))),
                         ("--fuse", FUSE)):
        if draw(st.integers(0, 2)) == 0:
            args += [flag, draw(values)]
    if draw(st.booleans()):
        args.append(draw(st.sampled_from(["--causal", "--no-causal"])))
    if draw(st.integers(0, 9)) == 0:
        args.append("--calibrated")
    return args


def _gpu_of(args: list[str]):
    gpu = args[args.index("--gpu") + 1] if "--gpu" in args else "h100-sxm"
    return load_gpu(gpu)


def _roofs(args: list[str]):
    gpu = _gpu_of(args)
    roofs = gpu.roofs("--calibrated" in args)
    return {*roofs.tensor_tflops.values(), *roofs.vector_tflops.values()}, gpu.memory.hbm_capacity_gib * GIB


def _with_batch(args: list[str], batch: int) -> list[str]:
    out = list(args)
    if "--batch" in out:
        out[out.index("--batch") + 1] = str(batch)
    else:
        out += ["--batch", str(batch)]
    return out


LARGEST = re.compile(r"largest batch that fits: ([\d,]+)")


def _batch_limit() -> int:
    """The largest --batch a scenario takes (specs.sizes.Batch's upper bound)."""
    from rooflinectl.specs.scenario import Scenario

    return next(m.le for m in Scenario.model_fields["batch"].metadata if hasattr(m, "le"))


def check_largest_batch(args: list[str]) -> None:
    """The text output's "largest batch that fits: N": at batch N the step fits, at N + 1 it does not. Where N is
    beyond the largest batch --batch takes, that largest batch fits."""
    if "--json" in args:  # an option value that was '--json' (ODD_TEXT): the "text" output is JSON
        return
    text = run(*args)
    check(text)
    found = LARGEST.search(" ".join(text.stdout.split()))
    assert found, f"no 'largest batch that fits' line:\n{text.describe()}"
    largest = int(found.group(1).replace(",", ""))
    limit = _batch_limit()
    if largest >= 1:
        r = run(*_with_batch(args, min(largest, limit)), "--json")
        data = check(r, json_out=True)
        assert data is not None and data["totals"]["fits"], f"the largest batch {largest} does not fit:\n{r.describe()}"
    if largest < limit:
        r = run(*_with_batch(args, largest + 1), "--json")
        data = check(r, json_out=True)
        assert data is not None and not data["totals"]["fits"], (
            f"one more than the largest batch ({largest + 1}) fits:\n{r.describe()}")


@fuzz_settings(120)
@given(workload_options())
def test_analyze(args):
    r = run("analyze", *args, "--json")
    data = check(r, json_out=True)
    if data is None:
        return
    check_analysis(data, r, *_roofs(args))
    check_largest_batch(["analyze", *args])


@fuzz_settings(20)
@given(options=workload_options(), suffix=st.sampled_from([".png", ".svg", ".pdf"]), gpus=st.lists(GPU_NAMES, max_size=3))
def test_plot(options, suffix, gpus):
    """plot -o into a temporary folder: a whole chart file and its JSON, or one line and no file."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"chart{suffix}"
        extra = [a for g in gpus for a in ("--gpu", g)]
        r = run("plot", *options, *extra, "-o", str(out), "--json")
        data = check(r, json_out=True)
        if data is None:
            assert not out.exists(), f"a refused plot left {out} behind:\n{r.describe()}"
            return
        check_chart(data, r)
        check_chart_file(out, r)


SMEM = mostly(
    st.one_of(st.integers(0, 100 * 1024).map(str), st.sampled_from(["48K", "48KiB", "48kb", "1.5KiB", "512B", "0"])),
    st.sampled_from(["1M", "1.5", "-1", "48 K", "1e3", "٣", "inf", "nan", "99" * 20, "0.0001K", "228K", "227K",
                     "233472", "KiB", "", "300K"]))
INTS = st.one_of(st.integers(-4, 2100).map(str), st.sampled_from(
    ["0", "1", "32", "255", "256", "1024", "1025", "2147483647", "2147483648", "9" * 40, "٣", "1e3", "x", ""]))
THREADS = mostly(st.sampled_from(["32", "64", "128", "256", "512", "1024", "96", "33", "1"]), INTS)
REGS = mostly(st.integers(0, 255).map(str), INTS)
GRID = st.one_of(st.none(), mostly(st.integers(1, 10**6).map(str), INTS))


@fuzz_settings(120)
@given(gpu=GPU_NAMES, threads=THREADS, regs=REGS, smem=SMEM, grid=GRID)
def test_occupancy(gpu, threads, regs, smem, grid):
    args = ["occupancy", "--gpu", gpu, "--threads", threads, "--regs", regs, "--smem", smem]
    if grid is not None:
        args += ["--grid", grid]
    r = run(*args, "--json")
    data = check(r, json_out=True)
    if data is not None:
        check_occupancy(data, r, load_gpu(gpu).sm_count)
    text = run(*args)  # the text output of the same: the same exit code, no markup error
    check(text)
    assert text.code == r.code, f"--json exit {r.code}, text exit {text.code}:\n{text.describe()}"


@fuzz_settings(40)
@given(command=st.sampled_from(["hardware show", "workloads show"]),
       name=st.one_of(GPU_NAMES, MODEL_NAMES, WORKLOADS), as_json=st.booleans())
def test_catalog(command, name, as_json):
    args = [*command.split(), name, *(["--json"] if as_json else [])]
    check(run(*args), json_out=as_json)


def test_catalog_lists():
    for args in (["hardware", "list"], ["workloads", "list"]):
        check(run(*args))
        assert check(run(*args, "--json"), json_out=True)


KERNELS = st.sampled_from(["fused_softmax", "copy", "matmul", "rmsnorm_linear", "fused_softmx", "softmax", "",
                           "[/]", "$\\frac{$"])
SHAPES = st.sampled_from(["4096x16384", "4x8", "0x10", "4096x", "x", "1x1x1", "64x100x40", "٣x٣", "1e3x2",
                          "99999999999999999999x2", "2x" + "9" * 5000, "-1x4", "4,8", "4x8,8x16", "", " 4 x 8 "])


@fuzz_settings(40)
@given(kernel=KERNELS, shapes=st.lists(SHAPES, max_size=2), dtype=st.one_of(st.none(), DTYPES),
       baseline=st.one_of(st.none(), st.sampled_from(["torch", "compile", "all", "none", "eager", ""])),
       gpu=st.one_of(st.none(), GPU_NAMES), seed=st.one_of(st.none(), INTS), flags=st.sets(st.sampled_from(
           ["--cuda-graph", "--json", "--list"])))
def test_measure_arguments(kernel, shapes, dtype, baseline, gpu, seed, flags):
    """With no GPU every measure ends in one line: a bad argument named, or no GPU to run on (``--list``: exit 0).
    ``--interpret`` is left out: one run in Triton's interpreter takes longer than the bound on an example."""
    args = ["measure", "--kernel", kernel, *[a for s in shapes for a in ("--shape", s)]]
    for flag, value in (("--dtype", dtype), ("--baseline", baseline), ("--gpu", gpu), ("--seed", seed)):
        if value is not None:
            args += [flag, value]
    args += sorted(flags)
    r = run(*args)
    check(r, json_out="--json" in flags and "--list" in flags)
    if "--list" not in flags:
        assert r.code == 2, f"measure without a GPU did not stop:\n{r.describe()}"


@fuzz_settings(15)
@given(gpu=st.one_of(st.none(), GPU_NAMES), as_json=st.booleans())
def test_calibrate_arguments(gpu, as_json):
    with tempfile.TemporaryDirectory() as tmp:
        args = ["calibrate", "-o", f"{tmp}/lab.yaml", *(["--gpu", gpu] if gpu else []), *(["--json"] if as_json else [])]
        r = run(*args)
        check(r)
        assert r.code == 2 and not Path(tmp, "lab.yaml").exists(), f"calibrate without a GPU:\n{r.describe()}"


@fuzz_settings(40)
@given(options=workload_options())
def test_explore_refuses_without_a_terminal(options):
    """explore's non-interactive path: a bad option named, or the refusal to run without a terminal."""
    r = run("explore", *options)
    check(r)
    assert r.code == 2, f"explore without a terminal did not refuse:\n{r.describe()}"
