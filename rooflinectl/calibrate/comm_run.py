"""``rooflinectl calibrate --comm``'s run: one process a GPU, the collectives timed through torch.distributed.

Two ways to start it:

- under torchrun (``torchrun --nproc-per-node 8 -m rooflinectl calibrate --comm -o FILE``): each rank runs the
  command; torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT say who it is;
- ``--world-size N``: the command spawns N local processes itself (torch.multiprocessing, a free port on
  127.0.0.1), as a single-node user or a CPU test would.

The backend is NCCL where torch sees CUDA (rank r drives GPU LOCAL_RANK), gloo otherwise (a CPU run: the same code
path, tested in CI; its times are the CPU's, never an interconnect's). NCCL_NVLS_ENABLE=0 is set before the
process group starts: this project's machines require NVLink multicast (NVLS) off.

Each size of each collective: WARMUP_ITERS untimed, then TIMED_ITERS back to back between CUDA events (wall clock
on the CPU), the mean time a collective; the time kept is the slowest rank's (an all-reduce of MAX over the ranks:
the collective is done when its last rank is). Rank 0 writes the file. Torch is imported inside the functions.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import shell
from ..errors import UserError
from ..records.calibration import CommCalibration
from ..specs.measured import Collective, MeasuredInterconnect
from ..specs.write import write_measured
from .comm import (
    TIMED_ITERS,
    WARMUP_ITERS,
    comm_point,
    elements_per_rank,
    message_sizes,
    run_bytes,
)

_TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
_NO_SPEC = ("calibrate --comm on the CPU (gloo): give --gpu, the spec whose file to write (no device name says "
            "which GPU it is)")
HOW_TO_RUN = ("run it under torchrun (torchrun --nproc-per-node N -m rooflinectl calibrate --comm -o FILE) "
              "or give --world-size N to start N local processes")


@dataclass(frozen=True)
class CommRequest:
    """What the command asked for, checked: the file, the spec to start from, the collectives and sizes."""

    output: Path
    gpu: str | None
    collectives: tuple[Collective, ...]
    max_bytes: int
    world_size: int | None  # --world-size: spawn locally; None: under torchrun
    command: str


def under_torchrun() -> bool:
    return all(v in os.environ for v in _TORCHRUN_VARS)


def check_launch(world_size: int | None) -> None:
    """The one-line refusals before any work: no torchrun and no --world-size, both, or fewer than 2 ranks."""
    if under_torchrun():
        if world_size is not None:
            raise UserError("--world-size starts local processes; under torchrun the ranks are torchrun's: "
                            "leave --world-size out")
        n = int(os.environ["WORLD_SIZE"])
    elif world_size is None:
        raise UserError(f"calibrate --comm needs several processes, one a GPU: {HOW_TO_RUN}")
    else:
        n = world_size
    if n < 2:
        raise UserError(f"calibrate --comm: {n} process; collectives need at least 2 ({HOW_TO_RUN})")
    # --world-size starts one local process a rank (a torch import of ~300 MB each): more than the machine's cores
    # cannot all run (1,000 ranks forked until fork failed and never exited), whatever the devices.
    cores = os.cpu_count() or 1
    if world_size is not None and world_size > cores:
        raise UserError(f"--world-size {world_size}: more local processes than this machine's {cores} cores; one "
                        f"rank a GPU, or torchrun across nodes")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _time_one(fn: Callable[[], Any], cuda: bool) -> float:
    """The mean seconds of one call over TIMED_ITERS back to back, after WARMUP_ITERS; ranks start together."""
    import time

    import torch
    import torch.distributed as dist

    for _ in range(WARMUP_ITERS):
        fn()
    if cuda:
        torch.cuda.synchronize()
        dist.barrier()
        # torch.cuda.Event is unannotated.
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        for _ in range(TIMED_ITERS):
            fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3 / TIMED_ITERS
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(TIMED_ITERS):
        fn()  # gloo's collectives on CPU tensors return when done
    return (time.perf_counter() - t0) / TIMED_ITERS


def _call(collective: Collective, count: int, n: int, device: Any) -> Callable[[], Any]:
    """The collective on fresh random fp32 buffers (never zeros), each rank's input ``count`` elements."""
    import torch
    import torch.distributed as dist

    x = torch.randn(count, device=device)
    if collective == "all_reduce":
        return lambda: dist.all_reduce(x)
    # torch 2.13 renames all_gather_into_tensor and reduce_scatter_tensor (the old names warn); older torch has
    # only the old ones. Both run the same NCCL collective.
    if collective == "all_gather":
        out = torch.empty(count * n, device=device)
        gather = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
        return lambda: gather(out, x)
    if collective == "reduce_scatter":
        big = torch.randn(count * n, device=device)
        scatter = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
        return lambda: scatter(x, big)
    out = torch.empty(count, device=device)
    return lambda: dist.all_to_all_single(out, x)


def _measure(request: CommRequest, rank: int, n: int, local_rank: int) -> CommCalibration | None:
    """One rank's run, inside an initialised process group; rank 0 writes and returns the result."""
    import torch
    import torch.distributed as dist

    from ..measure.device import now, resolve_spec

    cuda = dist.get_backend() == "nccl"
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    spec = resolve_spec(request.gpu, "cuda" if cuda else "cpu")
    if spec is None:
        raise UserError(_NO_SPEC)
    sizes = message_sizes(request.max_bytes)
    times: list[float] = []
    for collective in request.collectives:
        for size in sizes:
            fn = _call(collective, elements_per_rank(collective, size, n), n, device)
            times.append(_time_one(fn, cuda))
            del fn
            if cuda:
                torch.cuda.empty_cache()
    slowest = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if rank != 0:
        return None
    it = iter(slowest.tolist())
    curves = {c: [comm_point(c, run_bytes(c, s, n), next(it), n) for s in sizes] for c in request.collectives}
    # torch.cuda.nccl.version is unannotated; it returns (major, minor, patch).
    nccl = ".".join(str(v) for v in torch.cuda.nccl.version()) if cuda else None  # type: ignore[no-untyped-call]
    name = torch.cuda.get_device_name(device) if cuda else "CPU (gloo)"
    comm = MeasuredInterconnect(device_name=name, gpu_count=n, backend="nccl" if cuda else "gloo", date=now(),
                                command=request.command, torch_version=str(torch.__version__),
                                nccl_version=nccl, collectives=curves)
    written = write_measured(spec, request.output, interconnect=comm)
    return CommCalibration(spec, written, comm, request.output)


def _init(rank: int, n: int, local_rank: int) -> None:
    import torch
    import torch.distributed as dist

    os.environ["NCCL_NVLS_ENABLE"] = "0"  # before the process group: NVLink multicast off (the machines' notes)
    cuda = torch.cuda.is_available() and dist.is_nccl_available()
    if cuda:
        if local_rank >= torch.cuda.device_count():
            raise UserError(f"rank {rank}: local rank {local_rank} but {torch.cuda.device_count()} GPUs visible: "
                            f"one process a GPU")
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=n,
                            device_id=torch.device("cuda", local_rank) if cuda else None)


def _run_rank(rank: int, n: int, local_rank: int, request: CommRequest) -> CommCalibration | None:
    import torch.distributed as dist

    _init(rank, n, local_rank)
    try:
        return _measure(request, rank, n, local_rank)
    finally:
        dist.destroy_process_group()


def _spawned(rank: int, n: int, port: int, request: CommRequest) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(n),
                      LOCAL_RANK=str(rank))
    _run_rank(rank, n, rank, request)


def command_line(output: Path, gpu: str | None, collectives: str | None, comm_max: str | None,
                 world_size: int | None) -> str:
    """The command that reproduces the run, as written into the file."""
    options = [("-o", output), ("--gpu", gpu or None), ("--collectives", collectives or None),
               ("--comm-max", comm_max or None)]
    if world_size is not None:
        return shell.command_line(["calibrate", "--comm"], [*options, ("--world-size", world_size)])
    nodes = os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "N"))
    return shell.command_line(["calibrate", "--comm"], options,
                              program=("torchrun", "--nproc-per-node", nodes, "-m", "rooflinectl"))


def calibrate_comm(request: CommRequest) -> CommCalibration | None:
    """Run the collectives over the ranks and write ``request.output`` from rank 0; the result on rank 0 (the
    file loaded back, after a local spawn), None on the other ranks."""
    from ..files import check_writable
    from ..measure.device import require_gpu_stack, resolve_spec
    from ..specs.hardware import load_gpu_file
    from .comm import measured_of

    check_launch(request.world_size)
    if request.world_size is not None or int(os.environ["RANK"]) == 0:  # the rank that writes (another node's
        check_writable(request.output, "-o", replaces_input=True)          # ranks may not have that folder;
                                                                            # -o may be the spec it merges into)
    try:
        import torch.distributed as dist
        from torch.multiprocessing.spawn import ProcessRaisedException, spawn
    except ImportError:
        require_gpu_stack("calibrate")  # says what to install
        raise
    if not dist.is_available():
        raise UserError("calibrate --comm needs torch.distributed, which this torch build lacks")
    import torch

    cuda = torch.cuda.is_available() and dist.is_nccl_available()
    spec = resolve_spec(request.gpu, "cuda" if cuda else "cpu")
    if spec is None:  # the refusal rank 0 would make, here before any process group starts
        raise UserError(_NO_SPEC)
    if request.world_size is None:
        rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        return _run_rank(rank, n, int(os.environ["LOCAL_RANK"]), request)
    n = request.world_size
    if cuda and n > torch.cuda.device_count():
        raise UserError(f"--world-size {n}: {torch.cuda.device_count()} GPUs visible; one process a GPU")
    try:
        # torch.multiprocessing's spawn is unannotated.
        spawn(_spawned, args=(n, _free_port(), request), nprocs=n, join=True)  # type: ignore[no-untyped-call]
    except ProcessRaisedException as err:  # a rank's error, with its traceback: its last line is the reason
        raise UserError(f"calibrate --comm: a rank failed: {str(err).strip().splitlines()[-1]}") from None
    written = load_gpu_file(request.output)
    return CommCalibration(spec, written, measured_of(written), request.output)
