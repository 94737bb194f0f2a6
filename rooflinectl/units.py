"""Quantities, written once: binary sizes, data-type sizes, and how numbers with units are printed.

Rates are decimal (1 GB/s = 1e9 bytes/s, 1 TFLOP/s = 1e12 FLOP/s) and sizes binary (1 GiB = 2**30 bytes), as the
vendors' "3.35 TB/s" and "80 GB" are (``specs.hardware``'s field names say which: ``*_gbps``, ``*_gib``).
"""

from __future__ import annotations

KIB = 2**10
MIB = 2**20
GIB = 2**30
TIB = 2**40

# Data types rooflinectl knows, with their size in bytes. fp4 packs two values per byte.
DTYPE_BYTES: dict[str, float] = {
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,  # stored as fp32; only the tensor cores read 19 of its bits
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "fp4": 0.5,
}


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of ``dtype`` (a name from DTYPE_BYTES)."""
    return DTYPE_BYTES[dtype]


def si(x: float, unit: str = "", sep: str = " ") -> str:
    """1.23 G, 456 M … with decimal prefixes, three significant digits. A value that rounds up to 1,000 of one
    prefix takes the next (999.6 M is "1 G", not "1e+03 M")."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        digits = f"{x / factor:.3g}"
        if abs(float(digits)) >= 1:
            return f"{digits}{sep}{prefix}{unit}"
    return f"{x:.3g}{sep}{unit}".rstrip()


def duration(seconds: float, sep: str = " ") -> str:
    """A time in s, ms, µs or ns, three significant digits."""
    if seconds >= 1:
        return f"{seconds:.3g}{sep}s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g}{sep}ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.3g}{sep}µs"
    return f"{seconds * 1e9:.3g}{sep}ns"


def binary_size(n: float) -> str:
    """Binary units, as the GPU files give sizes: 80 GiB, 388 KiB."""
    for factor, unit in ((TIB, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if n >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n:.3g} B"
