"""units.py: sizes, dtype sizes and number formatting, written once (tests/ top, as units.py is top-level)."""

from __future__ import annotations

import pytest

from rooflinectl.units import GIB, KIB, MIB, TIB, binary_size, dtype_bytes, duration, si


def test_sizes_are_binary():
    assert (KIB, MIB, GIB, TIB) == (1024, 1024**2, 1024**3, 1024**4)


@pytest.mark.parametrize(("dtype", "size"), [("fp32", 4), ("tf32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1),
                                             ("int8", 1), ("fp4", 0.5), ("fp64", 8)])
def test_dtype_bytes(dtype, size):
    assert dtype_bytes(dtype) == size


@pytest.mark.parametrize(("x", "text"), [(3.35e12, "3.35 T"), (989.4e12, "989 T"), (1234.0, "1.23 k"),
                                         (12.0, "12"), (-2e9, "-2 G")])
def test_si_uses_decimal_prefixes_and_three_digits(x, text):
    assert si(x) == text


def test_si_with_a_unit_and_separator():
    assert si(2.5e9, "B/s") == "2.5 GB/s"
    assert si(5, "x", sep="") == "5x"


@pytest.mark.parametrize(("s", "text"), [(2.0, "2 s"), (1.5e-3, "1.5 ms"), (1.252e-6, "1.25 µs"), (8e-9, "8 ns")])
def test_duration_picks_the_unit(s, text):
    assert duration(s) == text


@pytest.mark.parametrize(("n", "text"), [(80 * GIB, "80 GiB"), (388 * KIB, "388 KiB"), (50 * MIB, "50 MiB"),
                                         (2 * TIB, "2 TiB"), (512, "512 B")])
def test_binary_size(n, text):
    assert binary_size(n) == text


def test_si_takes_the_next_prefix_when_rounding_reaches_1000():
    """999.6 M rounds to 1,000 M at three digits: it is 1 G (not '1e+03 M'); 999.4 M stays 999 M."""
    assert si(999.6e6, "B") == "1 GB"
    assert si(999.4e6, "B") == "999 MB"
    assert si(999.6, "B") == "1 kB"
