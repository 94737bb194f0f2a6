"""What ``rooflinectl measure`` asks for, checked in the order that reports bad input before a missing GPU, and the
whole run: ``measure(request)`` is what the command calls.

Order of the checks (each a one-line UserError): the kernel's name, --baseline, --timer, --save's path, --gpu's spec
(that it loads), --interpret's environment, torch and triton, the shapes and the data type, a CUDA device, the spec.
Torch and triton are imported only after --interpret has set TRITON_INTERPRET.
"""

from __future__ import annotations

import secrets
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast, get_args

from ..errors import UserError
from ..records.kernel import MAX_BYTES, MAX_FLOPS, BaselineName, MeasurementFile, Timer
from ..shell import command_line

if TYPE_CHECKING:
    from ..kernels.base import Kernel
    from ..specs.hardware import GPU
    from .harness import Plan, Reporter

# What --baseline takes: one baseline, or all the kernel offers, or none.
BASELINE_CHOICES: tuple[str, ...] = (*get_args(BaselineName), "all", "none")


@dataclass(frozen=True)
class MeasureRequest:
    """The options of one ``measure`` run, as the user gave them."""

    kernel: str
    shapes: tuple[str, ...] = ()  # --shape texts; empty: the kernel's default (or interpreter) shapes
    dtype: str | None = None  # None: the kernel's default
    baseline: str = "torch"
    gpu: str | None = None  # --gpu; None: the spec matching the device's name
    seed: int | None = None  # None: a fresh one, recorded
    interpret: bool = False
    cuda_graph: bool = False  # --cuda-graph: the old spelling of --timer cuda_graph, now the default
    timer: str | None = None  # --timer: "cuda_graph" or "events"; None: bench.DEFAULT_TIMER
    save: Path | None = None
    json: bool = False


def baselines_for(choice: str, offered: tuple[str, ...] = ()) -> tuple[BaselineName, ...]:
    """The baselines --baseline asks for: ``all`` is torch eager, torch.compile and the kernel's further ones
    (``offered``: F.linear alone for rmsnorm_linear, SDPA's backends for the attention kernels); one the kernel
    does not offer is a UserError."""
    if choice not in BASELINE_CHOICES:
        raise UserError(f"--baseline '{choice}' is not one of {', '.join(BASELINE_CHOICES)}")
    if choice == "all":
        return cast(tuple[BaselineName, ...], ("torch", "compile", *offered))
    if choice == "none":
        return ()
    if choice not in ("torch", "compile") and choice not in offered:
        raise UserError(f"--baseline {choice}: this kernel has no such baseline (its own: torch, compile"
                        f"{''.join(', ' + o for o in offered)})")
    return (cast(BaselineName, choice),)


def timer_for(request: MeasureRequest) -> Timer:
    """The timer asked for: --timer, or --cuda-graph (its old alias), or the default (CUDA-graph replays)."""
    from .bench import DEFAULT_TIMER, TIMERS

    if request.timer is not None and request.timer not in TIMERS:
        raise UserError(f"--timer '{request.timer}' is not one of {', '.join(TIMERS)}")
    if request.cuda_graph and request.timer not in (None, "cuda_graph"):
        raise UserError(f"--cuda-graph asks for --timer cuda_graph, not --timer {request.timer}")
    return "events" if request.timer == "events" else DEFAULT_TIMER


def reproducing_command(request: MeasureRequest, dtype: str, gpu: str | None, seed: int) -> str:
    """The command line that repeats this run, with the data type, seed and spec it resolved."""
    interpret = request.interpret
    return command_line(["measure"], [
        ("--kernel", request.kernel), *(("--shape", s) for s in request.shapes), ("--dtype", dtype),
        ("--baseline", None if interpret else request.baseline), ("--gpu", gpu or None), ("--seed", seed),
        ("--interpret", interpret), ("--timer", None if interpret else timer_for(request)),
        ("--save", request.save or None), ("--json", request.json)])


@dataclass(frozen=True)
class Prepared:
    """A checked request: the kernel, the plan, the spec compared against and the reproducing command."""

    kernel: Kernel
    plan: Plan
    spec: GPU | None
    command: str


def prepare(request: MeasureRequest) -> Prepared:
    """Check the request (see the module docstring for the order) and resolve what it leaves open."""
    from ..files import check_writable
    from ..kernels.registry import KERNELS, get_kernel
    from .device import require_cuda, require_gpu_stack, resolve_spec, set_interpret
    from .harness import Plan, parse_shapes

    if request.kernel not in KERNELS:
        get_kernel(request.kernel)  # the UserError naming the closest kernels
    baselines_for(request.baseline, BASELINE_CHOICES)  # a name no kernel has: refused before anything is imported
    timer = timer_for(request)
    if request.save is not None:
        check_writable(request.save, "--save")
    if request.gpu is not None:
        from ..specs.hardware import load_gpu

        load_gpu(request.gpu)  # an unknown --gpu is said as such on any machine, not as "no GPU"
    if request.interpret:
        set_interpret(KERNELS[request.kernel].module)
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")
    require_gpu_stack()
    kernel: Kernel = get_kernel(request.kernel)
    chosen = baselines_for(request.baseline, tuple(kernel.extra_baselines()))
    if request.shapes:
        shapes = parse_shapes(kernel, request.shapes)
    else:
        shapes = list(kernel.interpret_shapes if request.interpret else kernel.default_shapes)
    dtype = request.dtype or kernel.default_dtype
    # Triton's interpreter multiplies the bit patterns of bf16 operands in tl.dot (triton-lang/triton#11584): a
    # correct matmul would be reported wrong (relative error ~1e10). Under --interpret a kernel on the tensor
    # units defaults to fp16 and refuses bf16; loads, stores and casts of bf16 are right, so softmax keeps it.
    if request.interpret and dtype == "bf16" and shapes and kernel.op(shapes[0], "fp16").unit == "tensor":
        if request.dtype == "bf16":
            raise UserError(f"--interpret: {kernel.name} multiplies in tl.dot, which Triton's interpreter gets wrong "
                            f"for bf16 (triton-lang/triton#11584); use --dtype fp16 or fp32 on the CPU")
        dtype = "fp16" if "fp16" in kernel.dtypes else "fp32"
    for s in shapes:
        kernel.check(s, dtype)
        op = kernel.op(s, dtype)  # a record holds what a run can be (records.kernel's bounds): refused before any run
        if op.bytes > MAX_BYTES or op.flops > MAX_FLOPS:
            raise UserError(f"--shape {'x'.join(map(str, s))}: {op.bytes:.3g} bytes and {op.flops:.3g} FLOPs, "
                            f"beyond what one kernel run can be ({MAX_BYTES:.0e} bytes, {MAX_FLOPS:.0e} FLOPs)")
    device = "cpu" if request.interpret else "cuda"
    if not request.interpret:
        require_cuda()
    spec = resolve_spec(request.gpu, device)
    seed = request.seed if request.seed is not None else secrets.randbelow(2**31 - 10**6)
    plan = Plan(shapes=shapes, dtype=dtype, device=device, timed=not request.interpret,
                baselines=() if request.interpret else chosen, seed=seed,
                timer=timer)
    command = reproducing_command(request, dtype, request.gpu or (spec.id if spec else None), seed)
    return Prepared(kernel, plan, spec, command)


def measure(request: MeasureRequest, reporter: Reporter | None = None) -> MeasurementFile:
    """The whole ``measure`` run: check the request (``--save``'s path among the rest), measure every shape. The
    caller saves the record (``records.kernel.save``) after it has shown it, so that a save that fails (a full
    disk) loses no result."""
    from . import harness

    p = prepare(request)
    return harness.run_measure(p.kernel, p.plan, p.spec, command=p.command, reporter=reporter)
