"""The kernel tests' one check: run into a NaN-poisoned output and compare with the torch reference; their one
way to compile for a GPU on a CPU machine (``compile_for_hopper``); and their reading of what
benchmarks/attention_sass.py prints (``sass_report``, ``sass_orders``, ``count``).

``python -m kernel_checks`` (with tests/ on the path) is the compiling half of ``compile_for_hopper``: it reads
``Sm90Job``s as JSON on stdin, compiles each for sm_90 and writes what the compiler made as JSON on stdout."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DTYPES = ["fp32", "fp16"]

NO_PTXAS = 3  # the compiling process's exit status where this triton build cannot compile for sm_90


def gen(seed: int = 0):
    import torch

    return torch.Generator().manual_seed(seed)


def check(kernel, inputs, dtype, config=None):
    import torch

    from rooflinectl.kernels.base import relative_error

    out = kernel.make_output(inputs)
    out.fill_(float("nan"))  # poison: an element the kernel does not write fails the check
    kernel.run(inputs, out, config)
    assert not torch.isnan(out).any(), "NaN in the output: an element was not written"
    err = relative_error(out, kernel.reference(inputs))
    assert err <= kernel.tolerance(dtype), f"relative error {err:.2e} > {kernel.tolerance(dtype):.0e}"
    return out


@dataclass(frozen=True)
class Sm90Job:
    """One kernel to compile for sm_90: ``kernel`` is "module:name" of a ``triton.jit`` function; ``signature`` its
    runtime arguments' types (the ``constexprs`` are added as such); ``aligned`` the arguments the launcher tells
    the compiler are 16-byte divisible. ``launch_on``: also the launch record (``measure.anatomy.launch_record``)
    of the compiled kernel on ``grid`` on that bundled GPU."""

    kernel: str
    signature: dict[str, str]
    constexprs: dict[str, Any]
    num_warps: int
    num_stages: int | None = None
    aligned: tuple[str, ...] = ()
    launch_on: str | None = None
    grid: tuple[int, ...] = (1,)


@dataclass(frozen=True)
class Sm90Kernel:
    """What the compiler made of one job: its PTX and TritonGPU IR, the shared memory a program takes and its
    warps (triton's metadata); the launch record as JSON where the job asked for one."""

    ptx: str
    ttgir: str
    shared: int
    num_warps: int
    launch: dict[str, Any] | None = field(default=None)


def run_uninterpreted(args: list[str], stdin: str | None = None):
    """``python ARGS`` in a fresh interpreter without TRITON_INTERPRET (tests/kernels/conftest.py turns the
    interpreter on for the whole process, and an interpreted kernel cannot be compiled for a GPU target), with
    tests/ and the repository on its path; its CompletedProcess, output captured as text."""
    import os
    import subprocess

    here = Path(__file__).parent
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(here), str(here.parent), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, env=env)


def compile_for_hopper(jobs: list[Sm90Job]) -> list[Sm90Kernel]:
    """Compile ``jobs`` for sm_90 with the installed triton (``run_uninterpreted``). Skips the calling test where
    this triton build has no ptxas."""
    import pytest

    pytest.importorskip("triton")
    proc = run_uninterpreted(["-m", "kernel_checks"], json.dumps([asdict(j) for j in jobs]))
    if proc.returncode == NO_PTXAS:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [Sm90Kernel(**k) for k in json.loads(proc.stdout.splitlines()[-1])]


def _compile(job: Sm90Job) -> Sm90Kernel:
    import importlib
    import warnings

    import triton  # type: ignore[import-untyped]
    from triton.backends.compiler import GPUTarget  # type: ignore[import-untyped]
    from triton.compiler import ASTSource  # type: ignore[import-untyped]

    module, name = job.kernel.split(":")
    fn = getattr(importlib.import_module(module), name)
    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in job.aligned}
    src = ASTSource(fn=fn, signature={**job.signature, **{k: "constexpr" for k in job.constexprs}},
                    constexprs=job.constexprs, attrs=attrs)
    options: dict[str, int] = {"num_warps": job.num_warps}
    if job.num_stages is not None:
        options["num_stages"] = job.num_stages
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    launch = None
    if job.launch_on is not None:
        from rooflinectl.kernels.base import Launch
        from rooflinectl.measure.anatomy import launch_record
        from rooflinectl.specs.hardware import load_gpu

        record = launch_record(Launch(name, job.grid, {"num_warps": job.num_warps}, compiled), load_gpu(job.launch_on))
        launch = record.model_dump(mode="json")
    return Sm90Kernel(ptx=compiled.asm["ptx"], ttgir=compiled.asm["ttgir"], shared=compiled.metadata.shared,
                      num_warps=compiled.metadata.num_warps, launch=launch)


def sass_report(*args: str) -> str:
    """What benchmarks/attention_sass.py prints for ``args`` (``run_uninterpreted``); skips the calling test where
    this triton build cannot compile for sm_90."""
    import pytest

    pytest.importorskip("triton")
    proc = run_uninterpreted([str(Path(__file__).resolve().parents[1] / "benchmarks/attention_sass.py"), *args])
    if proc.returncode and "ptxas" in proc.stderr.lower():
        pytest.skip("this triton build cannot compile for sm_90 here")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def sass_orders(report: str) -> list[list[str]]:
    """Each loop's order line of a ``sass_report``, split at its arrows."""
    return [[part.strip() for part in ln.split("order:")[1].split("→")]
            for ln in report.splitlines() if ln.strip().startswith("order:")]


def count(segment: str, what: str) -> int:
    """The number before ``what`` in one segment of an order line ("[8 HGMMA, 0 LDGSTS, ...]"), 0 if absent."""
    import re

    match = re.search(rf"(\d+) {what}", segment)
    return int(match.group(1)) if match else 0

def main() -> int:
    jobs = [Sm90Job(**{**j, "aligned": tuple(j["aligned"]), "grid": tuple(j["grid"])}) for j in json.load(sys.stdin)]
    made = []
    for job in jobs:
        try:
            made.append(_compile(job))
        except Exception as err:
            if "ptxas" in str(err).lower():
                print(f"cannot compile for sm_90 here: {err}")
                return NO_PTXAS
            raise
    print(json.dumps([asdict(k) for k in made]))  # one line, the last
    return 0


if __name__ == "__main__":
    sys.exit(main())

