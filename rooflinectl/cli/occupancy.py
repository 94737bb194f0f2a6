"""``rooflinectl occupancy``: how many blocks and warps of a kernel an SM holds, which limit binds, and the waves."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

import typer

from ..errors import UserError
from . import options as opt
from ._app import DEFAULT_GPU, app, command, console, one_format, print_json

# A size: a number, then an optional unit. K, KB and KiB all mean 1024 bytes, as CUDA's "48 KB of shared
# memory" does (hardware.py: sizes are binary); M, MB and MiB 1024².
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:(k|m)(?:i?b)?|(b))?\s*$", re.IGNORECASE)
_UNIT = {None: 1, "k": 1024, "m": 1024**2}


# The longest size text read: 2^63 bytes is 19 digits, and a unit or a fraction adds a few characters. A longer
# text is refused before it is converted (a 5,000-digit one made the error message itself fail, past Python's
# 4,300-digit limit on printing an integer).
_SIZE_TEXT_MAX = 40


def parse_size(text: str, what: str = "--smem") -> int:
    """'48KiB', '48K', '48kb', '49152', '1.5KiB', '512B' -> bytes; a UserError for anything else."""
    if len(text) > _SIZE_TEXT_MAX:
        raise UserError(f"{what}: '{text[:_SIZE_TEXT_MAX]}…' is not a size: {len(text):,} characters, more than "
                        f"any shared memory size needs")
    m = _SIZE.match(text)
    if not m:
        raise UserError(f"{what}: '{text}' is not a size (examples: 49152, 48K, 48KiB, 1.5KiB)")
    try:
        value = Decimal(m.group(1)) * _UNIT[(m.group(2) or "").lower() or None]
    except InvalidOperation:  # pragma: no cover - the pattern admits only plain decimals
        raise UserError(f"{what}: '{text}' is not a size") from None
    if value != value.to_integral_value():
        raise UserError(f"{what}: '{text}' is {value} bytes, not a whole number of bytes")
    return int(value)


@command(app)
def occupancy(
    gpu: opt.Gpu = DEFAULT_GPU,
    threads: int = typer.Option(..., "--threads", "-t", help="Threads per block (a Triton program: num_warps × 32)."),
    regs: int = typer.Option(..., "--regs", "-r", help="Registers per thread (ptxas -v, or triton's n_regs)."),
    smem: str = typer.Option("0", "--smem", "-s",
                             help="Shared memory per block, static + dynamic: 49152, 48K, 48KiB, 1.5KiB."),
    grid: int = typer.Option(None, "--grid", help="Blocks in the launch, to count the waves it takes."),
    json: opt.Json = False,
    csv: opt.Csv = False,
) -> None:
    """Active blocks and warps per SM, the occupancy, which limit binds (registers, shared memory, warps,
    blocks), the waves a grid takes, and what would raise it: NVIDIA's occupancy-calculator arithmetic.

    Example: rooflinectl occupancy --gpu h100 --threads 256 --regs 64 --smem 48KiB --grid 1000
    """
    one_format(json, csv)
    from ..engine.occupancy import occupancy as compute_occupancy
    from ..render.occupancy import occupancy_json, print_occupancy
    from ..specs.hardware import load_gpu

    g = load_gpu(gpu)
    result = compute_occupancy(g, threads, regs, parse_size(smem), grid)
    if json:
        print_json(occupancy_json(result))
    elif csv:
        from ..render.csvout import occupancy_csv

        print(occupancy_csv(result), end="")
    else:
        print_occupancy(console(), result, g.name)
