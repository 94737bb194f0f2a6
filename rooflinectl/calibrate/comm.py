"""``rooflinectl calibrate --comm``: the collectives' curves and their arithmetic.

Pure (no torch): the options checked (:func:`parse_size`, :func:`message_sizes`, :func:`parse_collectives`), one
timed size turned into algbw and busbw (:func:`comm_point`). The timing itself, one process a GPU through
torch.distributed, is ``calibrate/comm_run.py``; the hardware YAML with its ``measured.interconnect`` is written by
``specs.write.write_measured``, which keeps the ceilings ``calibrate`` wrote.

The bandwidths are nccl-tests' (NVIDIA/nccl-tests, doc/PERFORMANCE.md): algbw = S / t, S the collective's size
(an all-reduce's buffer; an all-gather's output and a reduce-scatter's input, all n ranks' parts together; an
all-to-all's send buffer), and busbw = algbw × 2(n−1)/n for an all-reduce, × (n−1)/n for an all-gather, a
reduce-scatter and an all-to-all (``specs.measured.bus_factor``), the rate a rank's link carries, comparable with
the link's one-direction bandwidth whatever n is.
"""

from __future__ import annotations

from ..errors import UserError, closest
from ..specs.hardware import GPU
from ..specs.measured import COLLECTIVES, Collective, CommPoint, Measured, MeasuredInterconnect, bus_factor
from ..units import GIB, KIB, binary_size
from ..units import parse_size as parse_size_text

# nccl-tests' own range for a curve from latency to bandwidth: 4 KiB (where the fixed cost is nearly all of the
# time on NVLink) to 1 GiB (where it is under 1%: 1 GiB at 450 GB/s is 2.4 ms against about 10-20 µs of latency).
MIN_BYTES = 4 * KIB
MAX_BYTES = 1 * GIB
# nccl-tests' defaults (-w 5 -n 20): warm-up collectives untimed, then this many timed back to back.
WARMUP_ITERS = 5
TIMED_ITERS = 20
# Elements are fp32, nccl-tests' default type (-d float).
ELEMENT_BYTES = 4


def parse_size(text: str, option: str = "--comm-max") -> int:
    """'64KiB', '1GiB', '65536' -> bytes (``units.parse_size``'s grammar); a UserError for anything else or for a
    size outside MIN_BYTES..MAX_BYTES."""
    size = parse_size_text(text, option)
    if not MIN_BYTES <= size <= MAX_BYTES:
        raise UserError(f"{option} {text}: give a size from {binary_size(MIN_BYTES)} to {binary_size(MAX_BYTES)}")
    return size


def message_sizes(max_bytes: int = MAX_BYTES) -> list[int]:
    """The powers of two from MIN_BYTES up to ``max_bytes`` (4 KiB, 8 KiB, ... 1 GiB: 19 sizes)."""
    sizes, s = [], MIN_BYTES
    while s <= max_bytes:
        sizes.append(s)
        s *= 2
    return sizes


def parse_collectives(text: str | None) -> list[Collective]:
    """'all_reduce,all-gather' -> the collectives, in COLLECTIVES' order, each once; None: all four."""
    if text is None:
        return list(COLLECTIVES)
    names = [t.strip().lower().replace("-", "_") for t in text.split(",") if t.strip()]
    if not names:
        raise UserError(f"--collectives {text!r}: give one or more of {', '.join(COLLECTIVES)}")
    for name in names:
        if name not in COLLECTIVES:
            raise UserError(f"--collectives: unknown collective '{name}'{closest(name, COLLECTIVES)}; "
                            f"known: {', '.join(COLLECTIVES)}")
    return [c for c in COLLECTIVES if c in names]


def elements_per_rank(collective: Collective, size: int, n: int) -> int:
    """The fp32 elements of each rank's input: S / 4 for an all-reduce and an all-to-all (each rank's whole
    buffer), S / 4n for an all-gather (its part of the output) and a reduce-scatter (its part of the result, the
    input being S). Rounded down to a multiple of n where the collective splits the buffer n ways, as nccl-tests
    does; the size recorded is then the one run (:func:`run_bytes`)."""
    count = size // ELEMENT_BYTES
    if collective == "all_reduce":
        return count
    if collective == "all_to_all":
        return count // n * n
    return count // n


def run_bytes(collective: Collective, size: int, n: int) -> int:
    """S of the collective actually run for the nominal ``size`` (see :func:`elements_per_rank`)."""
    count = elements_per_rank(collective, size, n)
    return count * ELEMENT_BYTES * (1 if collective in ("all_reduce", "all_to_all") else n)


def _sig(x: float, digits: int = 6) -> float:
    return float(f"{x:.{digits}g}")


def comm_point(collective: Collective, size_bytes: int, time_s: float, n: int) -> CommPoint:
    """One size's point: algbw = S / t, busbw = algbw × bus_factor (nccl-tests), in GB/s (1e9 B/s)."""
    if time_s <= 0:
        raise UserError(f"{collective} of {size_bytes} bytes timed at {time_s} s: the clock gave no time")
    algbw = size_bytes / time_s / 1e9
    return CommPoint(bytes=size_bytes, time_s=_sig(time_s), algbw_gbps=_sig(algbw),
                     busbw_gbps=_sig(algbw * bus_factor(collective, n)))


def measured_of(gpu: GPU) -> MeasuredInterconnect:
    """The collectives a written file holds (what the CLI prints back)."""
    m: Measured | None = gpu.measured
    if m is None or m.interconnect is None:
        raise UserError(f"{gpu.id}: the file holds no measured collectives")
    return m.interconnect
