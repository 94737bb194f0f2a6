"""Quantities, written once: binary sizes, data-type sizes, and how numbers with units are printed.

Rates are decimal (1 GB/s = 1e9 bytes/s, 1 TFLOP/s = 1e12 FLOP/s) and sizes binary (1 GiB = 2**30 bytes), as the
vendors' "3.35 TB/s" and "80 GB" are (``specs.hardware``'s field names say which: ``*_gbps``, ``*_gib``).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from .errors import UserError

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


def number(x: float, digits: int = 3) -> str:
    """A plain number as a reader checks it: ``digits`` significant digits below 1,000, whole numbers with
    thousands separators from 1,000 on, never an exponent: 1,979 · 989 · 24.6 · 1.5 · 0.0263 (never "0.0", never "2.63e-02")."""
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    if x == 0:
        return "0"
    if abs(float(f"{x:.{digits}g}")) < 1:
        places = digits - 1 - math.floor(math.log10(abs(x)))  # ``digits`` significant digits, fixed point
        return f"{x:.{places}f}".rstrip("0").rstrip(".")
    rounded = float(f"{x:.{digits}g}")
    if abs(x) >= 1000:
        return f"{x:,.0f}"  # whole, every digit: 1,979 and 10,393 (no exponent, no rounding to 1,980)
    if abs(rounded) >= 10 ** (digits - 1):
        return f"{rounded:,.0f}"
    places = digits - 1 - math.floor(math.log10(abs(rounded)))
    return f"{rounded:.{places}f}".rstrip("0").rstrip(".")


def count(n: int) -> str:
    """A count with thousands separators: 32,768."""
    return f"{n:,}"


def plural(n: float, word: str, many: str | None = None) -> str:
    """"1 block", "2 blocks", "0.5 tokens": the count, formatted, with its noun in the right number."""
    text = count(n) if isinstance(n, int) else number(n)
    return f"{text} {word if n == 1 else (many or word + 's')}"


def rate(x: float, unit: str = "tokens/s") -> str:
    """A rate with sensible digits: "10,393 tokens/s", "965 tokens/s", "0.026 tokens/s"."""
    return f"{number(x)} {unit}"


def si(x: float, unit: str = "", sep: str = " ") -> str:
    """1.23 G, 456 M … with decimal prefixes, three significant digits. A value that rounds up to 1,000 of one
    prefix takes the next (999.6 M is "1 G", not "1e+03 M"); below 1, no exponent ("0.026")."""
    if abs(x) >= 999.5e15:  # beyond the largest prefix: whole peta-units with separators, never an exponent
        return f"{number(x / 1e15)}{sep}P{unit}"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        digits = f"{x / factor:.3g}"
        if abs(float(digits)) >= 1:
            return f"{digits}{sep}{prefix}{unit}"
    return f"{number(x)}{sep}{unit}".rstrip()


def billions(n: float) -> str:
    """A parameter count in billions, as model cards give it: 8.03 B, 70.6 B, 671 B, 0.494 B."""
    return f"{number(n / 1e9)} B"


def decimal_bytes(n: float) -> str:
    """HBM traffic in decimal units, as bandwidths are: 67.4 TB, 295 GB, 288 MB."""
    return si(n, "B")


def duration(seconds: float, sep: str = " ") -> str:
    """A time from ns to hours, three significant digits: 26.5 µs, 3.22 s, 4.1 min, 2.5 h. Below a minute the unit
    is the largest in which the rounded value is at least 1, so that 0.9996 s is "1 s", never "1e+03 ms"."""
    if seconds >= 3600:
        return f"{number(seconds / 3600)}{sep}h"
    if seconds >= 60:
        return f"{number(seconds / 60)}{sep}min"
    scale, unit = _time_unit(seconds)
    if unit == "ns":
        return f"{number(seconds * 1e9)}{sep}ns"
    return f"{seconds / scale:.3g}{sep}{unit}"


_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def _time_unit(seconds: float) -> tuple[float, str]:
    """The largest of s, ms, µs, ns in which ``seconds`` at three significant digits is at least 1 (ns below)."""
    return next(((f, u) for f, u in _TIME_UNITS if float(f"{seconds / f:.3g}") >= 1), _TIME_UNITS[-1])


def time_band(low: float, high: float, sep: str = " ") -> str:
    """A spread of times, both ends in the unit of the upper one, three significant digits: 1.9–2.2 µs."""
    scale, unit = _time_unit(high)
    return f"{low / scale:.3g}–{high / scale:.3g}{sep}{unit}"


def binary_size(n: float, exact: bool = False) -> str:
    """Binary units, as the GPU files give sizes: 80 GiB, 388 KiB, 1.22 TiB. ``exact``: a limit the reader acts
    on, never rounded: in the largest unit that holds it with at most three decimals (44.5 KiB, 100.375 KiB),
    else in bytes (5,000 B)."""
    for factor, unit in ((TIB, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if n >= factor and not exact:
            return f"{number(n / factor)} {unit}"
        if n >= factor and n * 1000 % factor == 0:
            return f"{n / factor:,.3f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{count(n) if isinstance(n, int) else number(n)} B"


def gib(n: float, places: int = 1) -> str:
    """A memory amount in GiB, as capacities and budgets are quoted: ``places`` decimals below 1,000 GiB (so a sum
    of parts adds up on the page: 131.4 + 0.7 + 8.0 = 140.1 GiB), whole with separators above (1,250 GiB)."""
    v = n / GIB
    return f"{v:,.{places}f} GiB" if round(v, places) < 1000 else f"{v:,.0f} GiB"


# A whole number as a user types one in a list, a pair or a file's field: ASCII digits (int() also takes "١٢٣",
# "１６" and "1_000"), at most 30 of them (every count here is far smaller, and int() of 4,301 digits raises).
_WHOLE = re.compile(r"^\s*([0-9]{1,30})\s*$")
_REAL = re.compile(r"^\s*[+-]?(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})(?:[eE][+-]?[0-9]{1,4})?\s*$")


def whole_number(text: str) -> int | None:
    """``text`` as a whole number of ASCII digits (spaces around allowed), or None for anything else."""
    m = _WHOLE.match(text)
    return int(m.group(1)) if m else None


def real_number(text: str) -> float | None:
    """``text`` as a decimal number of ASCII digits ("0.5", "-3", "1e-3"), or None for anything else (a NaN, an
    infinity, an underscore, other scripts' digits); a value past float's range is None too."""
    if not _REAL.match(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


# A size as options take it: a number (whole or with a fraction), then an optional unit. Units are binary, as the
# GPU files' sizes are: K, KB and KiB all mean 1024 bytes (as CUDA's "48 KB of shared memory" does), M, MB and MiB
# 1024², G, GB and GiB 1024³; B or no unit is bytes. Case does not matter, and spaces around and between are read.
# ASCII digits only (re.ASCII), as click's integer options take them: \d also matches "٤" and "４".
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmg])(?:i?b)?|(b))?\s*$", re.IGNORECASE | re.ASCII)
_SIZE_UNIT = {"": 1, "k": KIB, "m": MIB, "g": GIB}
# The longest size text read: 2^63 bytes is 19 digits, and a unit or a fraction adds a few characters. A longer
# text is refused before it is converted (a 5,000-digit one would make the error message itself fail, past
# Python's 4,300-digit limit on printing an integer).
_SIZE_TEXT_MAX = 40


def parse_size(text: str, what: str = "size") -> int:
    """'49152', '512B', '48K', '48kb', '48KiB', '1.5KiB', '16 MiB', '1G' -> bytes (binary units), for the option
    ``what`` names; a UserError naming it for anything else, or for a fraction that is not a whole number of bytes.
    Whether the size fits is the caller's rule."""
    if len(text) > _SIZE_TEXT_MAX:
        raise UserError(f"{what} '{text[:_SIZE_TEXT_MAX]}…' is not a size: {len(text):,} characters, more than "
                        f"any size needs")
    m = _SIZE.match(text)
    if not m:
        raise UserError(f"{what} '{text}' is not a size (examples: 49152, 48K, 48KiB, 1.5KiB, 16MiB, 1GiB)")
    value = Decimal(m.group(1)) * _SIZE_UNIT[(m.group(2) or "").lower()]
    if value != value.to_integral_value():
        raise UserError(f"{what} '{text}' is {value} bytes, not a whole number of bytes")
    return int(value)
