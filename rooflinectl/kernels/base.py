"""The interface every measured kernel implements; the measure harness calls nothing else.

A kernel is a singleton object (``KERNEL`` in its module) that knows its shapes, its data types, its FLOP and byte
count (built from ``rooflinectl.engine.count.op``, so that ``measure`` and ``analyze`` count the same), how to make fresh random
inputs, how to run its Triton kernel into a given output, its torch reference and baselines, and its tolerance.

How the harness uses one (a sketch, not code to copy)::

    k = get_kernel("fused_softmax")
    shape = k.parse_shape("4096x16384")               # UserError on a malformed or impossible shape
    k.check(shape, "bf16")                             # UserError on an unsupported dtype
    inputs = k.make_inputs(shape, "bf16", "cuda", torch.Generator("cuda").manual_seed(0))
    out = k.make_output(inputs); out.fill_(float("nan"))   # poison
    k.run(inputs, out)
    err = relative_error(out, k.reference(inputs))    # passes when err <= k.tolerance("bf16") and no NaN
    launches = k.last_launches()                       # registers, spills, shared memory, warps, grids
    t = do_bench(lambda: k.run(inputs, out))           # same call, timed
    op = k.op(shape, "bf16")                           # bytes and FLOPs for GB/s and TFLOP/s

Torch and triton are imported inside the methods that need them (and at the top of each kernel's own module,
which only ``registry.get_kernel`` imports), so importing this file costs nothing.
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import TYPE_CHECKING, Any

from ..engine.count.op import Op
from ..errors import UserError
from ..units import KIB

if TYPE_CHECKING:
    import torch

    from ..specs.hardware import GPU
    from .registry import KernelInfo

Inputs = dict[str, "torch.Tensor"]

# The one map from rooflinectl's data type names (units.DTYPE_BYTES keys) to torch's attribute names, for the
# kernels, the workload runner, the profile and the ceiling probes. tf32 is stored as fp32 (only the tensor cores
# read 19 of its bits); fp8 is torch's e4m3 (the format the fp8 tensor cores' matmuls take); int64 is the index
# type of a gather's token ids. The first name of a torch type is the one dtype_name gives back.
# log2(e): the attention kernels' softmax runs in base 2, its scale folded into log2(e)/√d.
LOG2E = 1.4426950408889634

TORCH_DTYPE_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "tf32": "float32",
                     "fp8": "float8_e4m3fn", "int64": "int64"}


def torch_dtype(name: str) -> Any:
    """torch's dtype for a rooflinectl dtype name ("bf16" -> torch.bfloat16); KeyError for a name torch lacks."""
    import torch

    return getattr(torch, TORCH_DTYPE_NAMES[name])


def dtype_name(dtype) -> str:
    """rooflinectl's name for a torch dtype (torch.bfloat16 -> "bf16")."""
    for name, attr in TORCH_DTYPE_NAMES.items():
        if str(dtype) == f"torch.{attr}":
            return name
    raise ValueError(f"no rooflinectl name for {dtype}")


def dot_dtype(dtype: str) -> str:
    """The data type a kernel's ``tl.dot`` runs in, for the roof its matmul is placed under: fp32 operands go
    through the tensor cores as tf32 (``input_precision="tf32"``, the same 4-byte storage); 16-bit ones as they
    are. (The engine's ``op.matmul_unit`` places a plain fp32 matmul on the vector units: PyTorch's default.)"""
    return "tf32" if dtype == "fp32" else dtype


# Shared memory one program may take where no GPU spec says (a spec's ``limits.max_smem_per_block_kib``): the
# opt-in limit of the H100 and H200 (227 KiB), which the kernels' configs were tuned for.
TUNED_SMEM_PER_BLOCK_BYTES = 227 * KIB


def smem_per_block_bytes(gpu: GPU | None = None) -> int:
    """Shared memory one program may take on ``gpu`` (its spec's limit), or TUNED_SMEM_PER_BLOCK_BYTES without a
    spec. A spec without SM-level limits (a part that has no SMs) is refused: no tile choice fits it."""
    if gpu is None:
        return TUNED_SMEM_PER_BLOCK_BYTES
    if gpu.limits is None:
        raise UserError(f"{gpu.id}'s spec gives no shared memory per block, which the Triton kernels' tile choice "
                        f"needs")
    return gpu.limits.max_smem_per_block_bytes


# The SM count the tuning constants were measured with (H100 SXM and H200: 132). Used where no CUDA device is
# visible, as under Triton's interpreter, so that the interpreter takes the same code paths as an H200 would.
TUNED_SM_COUNT = 132
TUNED_CC = 9.0  # the H200's compute capability


def interpreting() -> bool:
    """Whether kernels run in Triton's interpreter (TRITON_INTERPRET=1, set before triton is imported)."""
    import os

    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.cache
def sm_count() -> int:
    """Streaming multiprocessors of the current CUDA device, or TUNED_SM_COUNT without one."""
    import torch

    if interpreting() or not torch.cuda.is_available():
        return TUNED_SM_COUNT
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def compute_capability() -> float:
    """The current CUDA device's compute capability (9.0 for an H200), or TUNED_CC without one (the interpreter
    runs what the tuned GPU runs, tensor descriptors included)."""
    import torch

    if interpreting() or not torch.cuda.is_available():
        return TUNED_CC
    major, minor = torch.cuda.get_device_capability(torch.cuda.current_device())
    return major + minor / 10


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖ / ‖ref‖ in float64; NaN or inf anywhere in ``out`` gives inf, so that it never passes."""
    import torch

    o = out.detach().to(torch.float64)
    r = ref.detach().to(torch.float64)
    if not bool(torch.isfinite(o).all()):
        return math.inf
    den = float(torch.linalg.vector_norm(r))
    num = float(torch.linalg.vector_norm(o - r))
    return num / den if den > 0 else num


@dataclass(frozen=True)
class Launch:
    """One Triton launch of a kernel's last ``run``: which function, on what grid, with which settings.

    ``handle`` is what ``fn[grid](...)`` returned: on a GPU, triton's ``CompiledKernel``, from which the resource
    fields below are read. Under the interpreter (``TRITON_INTERPRET=1``) there is no compiled kernel: ``handle``,
    ``n_regs``, ``n_spills`` and ``shared_bytes`` are None, and ``num_warps`` is the value that was asked for
    (the interpreter runs each program as one thread of numpy code, so it has no warps of its own).
    """

    function: str
    grid: tuple[int, ...]
    # The kernel's config dataclass (or a dict) and launch-time extras; ``config`` merges them on demand, so that
    # recording a launch costs the hot path nothing.
    settings: Any = None
    handle: Any = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> dict[str, Any]:
        """The meta-parameters of the launch: block sizes and flags (constexprs), num_warps, num_stages."""
        s = self.settings
        base = asdict(s) if is_dataclass(s) and not isinstance(s, type) else dict(s or {})
        return {**base, **self.extra}

    @property
    def programs(self) -> int:
        return math.prod(self.grid)

    @property
    def n_regs(self) -> int | None:
        """Registers per thread, as the driver reports after loading the binary."""
        return _handle_attr(self.handle, "n_regs")

    @property
    def n_spills(self) -> int | None:
        """Registers spilled to local memory (bytes of spill stores, as triton reports ptxas' count)."""
        return _handle_attr(self.handle, "n_spills")

    @property
    def shared_bytes(self) -> int | None:
        """Shared memory per program, in bytes (triton's ``metadata.shared``)."""
        meta = getattr(self.handle, "metadata", None)
        return getattr(meta, "shared", None)

    @property
    def num_warps(self) -> int | None:
        meta = getattr(self.handle, "metadata", None)
        if meta is not None and getattr(meta, "num_warps", None) is not None:
            return meta.num_warps
        return self.config.get("num_warps")


def _handle_attr(handle, name: str):
    if handle is None:
        return None
    try:
        return getattr(handle, name)
    except Exception:  # an older or newer triton that loads lazily and fails without a device: report unknown
        return None


class _LazyCompiled:
    """torch.compile of a kernel's eager code, built on the first call (compilation takes seconds)."""

    def __init__(self, fn: Callable[[Inputs], torch.Tensor]):
        self._fn = fn
        self._compiled: Callable[[Inputs], torch.Tensor] | None = None

    def __call__(self, inputs: Inputs) -> torch.Tensor:
        if self._compiled is None:
            import torch

            # Each distinct shape compiles its own static graph (dynamic=False): the fastest code torch.compile
            # makes for that shape, which is the fair baseline. Dynamo's default cap of 8 recompiles per function
            # would silently fall back to eager after eight shapes, so raise it for this process.
            dyn = torch._dynamo.config
            for knob in ("recompile_limit", "cache_size_limit"):
                if hasattr(dyn, knob):
                    setattr(dyn, knob, max(getattr(dyn, knob), 256))
            self._compiled = torch.compile(self._fn, dynamic=False)
        return self._compiled(inputs)


class Kernel(ABC):
    """A Triton kernel with its count, inputs, reference, baselines and tolerance.

    Subclasses set the class attributes below and implement the abstract methods. Shapes are tuples of ints in
    the order ``shape_format`` names them ("ROWSxCOLS", "MxKxN", "N"). A kernel's name and summary are its
    registry entry's (``registry.KERNELS``, found by the kernel's module): written once, there.
    """

    shape_format: str
    dtypes: tuple[str, ...]
    default_dtype: str
    # Sized for a big GPU (an H100/H200): enough programs to fill every SM, data beyond a 60 MB L2.
    default_shapes: list[tuple[int, ...]]
    # Small odd shapes that Triton's interpreter runs on a CPU in seconds.
    interpret_shapes: list[tuple[int, ...]]

    def __init__(self) -> None:
        self._launches: list[Launch] = []

    @property
    def info(self) -> KernelInfo:
        """This kernel's registry entry."""
        from .registry import info_for_module

        return info_for_module(type(self).__module__)

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def summary(self) -> str:
        return self.info.summary

    # ---- shapes and data types -------------------------------------------------------------------------------

    def parse_shape(self, text: str) -> tuple[int, ...]:
        """'4096x16384' -> (4096, 16384), checked against ``shape_format``; UserError when malformed."""
        dims = self.shape_format.split("x")
        parts = text.lower().replace("×", "x").split("x")
        try:
            shape = tuple(int(p.replace("_", "")) for p in parts)
        except ValueError:
            raise UserError(
                f"kernel {self.name}: shape '{text}' is not {self.shape_format} (positive integers joined by 'x')"
            ) from None
        if len(shape) != len(dims):
            raise UserError(
                f"kernel {self.name}: shape '{text}' has {len(shape)} sizes, expected {self.shape_format}"
            )
        self.check_shape(shape)
        return shape

    def check_shape(self, shape: tuple[int, ...]) -> None:
        """UserError when a size is not a positive integer or the kernel cannot take the shape."""
        dims = self.shape_format.split("x")
        if len(shape) != len(dims):
            raise UserError(
                f"kernel {self.name}: shape {shape} has {len(shape)} sizes, expected {self.shape_format}"
            )
        for dim, size in zip(dims, shape):
            if not isinstance(size, int) or size < 1:
                raise UserError(f"kernel {self.name}: {dim} must be a positive integer, got {size!r}")

    def check(self, shape: tuple[int, ...], dtype: str) -> None:
        """UserError when the shape is impossible or the data type is not one this kernel runs."""
        self.check_shape(shape)
        if dtype not in self.dtypes:
            raise UserError(f"kernel {self.name}: dtype '{dtype}' is not one of {', '.join(self.dtypes)}")

    # ---- counts ----------------------------------------------------------------------------------------------

    @abstractmethod
    def op(self, shape: tuple[int, ...], dtype: str) -> Op:
        """FLOPs and HBM bytes of one run, built as the engine builds them (engine.count.primitives)."""

    def unfused_ops(self, shape: tuple[int, ...], dtype: str) -> list[Op]:
        """The operations that this kernel fuses, counted as separate kernels; empty for an unfused kernel."""
        return []

    # ---- data ------------------------------------------------------------------------------------------------

    @abstractmethod
    def make_inputs(self, shape: tuple[int, ...], dtype: str, device, generator) -> Inputs:
        """Fresh random inputs (never zeros) on ``device``, drawn from ``generator`` (a torch.Generator there)."""

    @abstractmethod
    def make_output(self, inputs: Inputs) -> torch.Tensor:
        """An uninitialised output of the right shape, dtype and device (the harness poisons it)."""

    @abstractmethod
    def run(self, inputs: Inputs, out: torch.Tensor, config=None) -> None:
        """Run the Triton kernel, writing into ``out``. ``config`` overrides the choice by shape (for tuning).

        Without ``config`` it runs ``config_for(shape, dtype)`` of the inputs it was given, dtype included: the
        config that the tuning chose is then the one that ``measure`` times."""

    @abstractmethod
    def reference(self, inputs: Inputs) -> torch.Tensor:
        """The exact result in float32 (float64 where it matters), computed by torch from the same inputs."""

    @abstractmethod
    def eager(self, inputs: Inputs) -> torch.Tensor:
        """What a torch user writes for the same operation, in the inputs' data type."""

    def baselines(self) -> dict[str, Callable[[Inputs], torch.Tensor]]:
        """ "torch": the eager code; "compile": torch.compile of the same code, compiled on its first call; and
        the kernel's own further baselines (``extra_baselines``)."""
        if not hasattr(self, "_baselines"):
            self._baselines: dict[str, Callable[[Inputs], torch.Tensor]] = {
                "torch": self.eager, "compile": _LazyCompiled(self.eager), **self.extra_baselines()}
        return self._baselines

    def extra_baselines(self) -> dict[str, Callable[[Inputs], torch.Tensor]]:
        """Baselines beyond torch eager and torch.compile that ``--baseline all`` adds for this kernel (the
        attention kernels: SDPA with each fused backend forced); none by default."""
        return {}

    def baseline_note(self, inputs: Inputs) -> str | None:
        """A sentence on what the "torch" baseline ran for these inputs (the backend SDPA picked), or None."""
        return None

    @abstractmethod
    def tolerance(self, dtype: str) -> float:
        """Largest passing relative error ‖out − ref‖/‖ref‖ (passes when err <= tolerance and nothing is NaN)."""

    # ---- configuration and anatomy ----------------------------------------------------------------------------

    @abstractmethod
    def config_for(self, shape: tuple[int, ...], dtype: str):
        """The launch configuration ``run`` picks for this shape and data type (a frozen dataclass)."""

    def candidates(self, shape: tuple[int, ...], dtype: str, gpu: GPU | None = None) -> list:
        """Configurations worth timing for this shape (benchmarks/tune_kernels.py) on ``gpu`` (default: the GPU
        the configs were tuned on); the chosen one first."""
        return [self.config_for(shape, dtype)]

    def last_launches(self) -> list[Launch]:
        """The Triton launches of the last ``run``, in order (see Launch for what the interpreter leaves out)."""
        return list(self._launches)

    def _record(self, fn, grid: tuple[int, ...], settings, handle, **extra) -> None:
        self._launches.append(Launch(getattr(fn, "__name__", str(fn)), tuple(grid), settings, handle, extra))

    def _start_run(self) -> None:
        self._launches = []
