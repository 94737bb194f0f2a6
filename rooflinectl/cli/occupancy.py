"""``rooflinectl occupancy``: how many blocks and warps of a kernel an SM holds, which limit binds, and the waves."""

from __future__ import annotations

import typer

from ..units import parse_size
from . import options as opt
from ._app import DEFAULT_GPU, app, command, console, one_format, print_json


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
    result = compute_occupancy(g, threads, regs, parse_size(smem, "--smem"), grid)
    if json:
        print_json(occupancy_json(result))
    elif csv:
        from ..render.csvout import occupancy_csv

        print(occupancy_csv(result), end="")
    else:
        print_occupancy(console(), result, g.name)
