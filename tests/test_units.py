"""units.py: sizes, dtype sizes and number formatting, written once (tests/ top, as units.py is top-level)."""

from __future__ import annotations

import pytest

from rooflinectl.errors import UserError
from rooflinectl.units import (
    GIB,
    KIB,
    MIB,
    TIB,
    billions,
    binary_size,
    count,
    decimal_bytes,
    dtype_bytes,
    duration,
    gib,
    number,
    parse_size,
    plural,
    rate,
    real_number,
    si,
    time_band,
    whole_number,
)


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


def test_si_beyond_peta_keeps_separators_and_no_exponent():
    """A fuzzed size can reach 1e25 bytes: 10,000,000,000 PB, never "1e+10 PB"; 999.6e15 rounds to 1,000 PB."""
    assert si(1e25, "B") == "10,000,000,000 PB"
    assert si(999.6e15, "B") == "1,000 PB"
    assert si(999.4e15, "B") == "999 PB"


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


@pytest.mark.parametrize(("x", "text"), [
    (1978.9, "1,979"), (10392.6, "10,393"), (989.4, "989"), (24.63, "24.6"), (1.5, "1.5"), (312.0, "312"),
    (0.026, "0.026"), (0.02634, "0.0263"), (0.9995, "1"), (0.667, "0.667"), (0.0, "0"), (-3.2, "-3.2"),
    (99.96, "100"), (1e-9, "0.000000001"),
])
def test_number_has_three_significant_digits_separators_and_no_exponent(x, text):
    """Issue 19: "0.0 tokens/s" (0.026 is the truth), "1.98e+03" beside "1,978.9" for the same kind of value."""
    assert number(x) == text


def test_number_keeps_four_digits_where_asked():
    assert number(494.7, 4) == "494.7" and number(1978.9, 4) == "1,979" and number(7.999, 4) == "7.999"


@pytest.mark.parametrize(("seconds", "text"), [(71.70093, "1.2 min"), (3.22497, "3.22 s"), (9000.0, "2.5 h"),
                                               (2e-9, "2 ns"), (26.5e-6, "26.5 µs"), (0.0717, "71.7 ms")])
def test_duration_runs_from_ns_to_hours(seconds, text):
    """Issue 19: "Time to first token: 71700.93 ms" is 1.2 min."""
    assert duration(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [(0.9996, "1 s"), (0.9994, "999 ms"), (0.0009996, "1 ms"),
                                               (9.996e-7, "1 µs"), (9.994e-7, "999 ns")])
def test_a_duration_that_rounds_to_1000_of_a_unit_takes_the_next(seconds, text):
    """0.9996 s at three digits is 1,000 ms: printed "1 s", never "1e+03 ms" (as ``si`` takes the next prefix)."""
    assert duration(seconds) == text


def test_a_time_band_whose_upper_end_rounds_to_1000_takes_the_next_unit():
    assert time_band(0.5, 0.9996) == "0.5–1 s" and time_band(0.5e-3, 0.9996e-3) == "0.5–1 ms"


def test_sizes_scale_with_their_prefix():
    """Issue 19: "moves 71743.13 GB", "holds 500000000015.0 GiB"."""
    assert decimal_bytes(71743.13e9) == "71.7 TB"
    assert binary_size(500000000015.0 * GIB) == "488,281,250 TiB"  # 5e11 GiB / 1,024
    assert gib(1250.2 * GIB) == "1,250 GiB" and gib(131.44 * GIB) == "131.4 GiB" and gib(80 * GIB, 0) == "80 GiB"


@pytest.mark.parametrize(("n", "text"), [(45568, "44.5 KiB"), (40 * KIB, "40 KiB"), (102784, "100.375 KiB"),
                                         (6656, "6.5 KiB"), (5000, "5,000 B"), (12345, "12,345 B"), (0, "0 B"),
                                         (3 * MIB // 2, "1.5 MiB"), (1536 * KIB + 512, "1,536.5 KiB")])
def test_an_exact_binary_size_is_never_rounded(n, text):
    """A limit the reader acts on ("at most 44.5 KiB of shared memory") reads back as the same number of bytes."""
    assert binary_size(n, exact=True) == text


@pytest.mark.parametrize(("low", "high", "text"), [(1.9e-6, 2.2e-6, "1.9–2.2 µs"), (800e-9, 1.2e-6, "0.8–1.2 µs"),
                                                   (0.5, 2.0, "0.5–2 s"), (1e-10, 5e-10, "0.1–0.5 ns"),
                                                   (1.234e-3, 1.5e-3, "1.23–1.5 ms")])
def test_a_time_band_takes_the_unit_of_its_upper_end(low, high, text):
    assert time_band(low, high) == text
    assert time_band(low, high, sep="") == text.replace(" ", "")


def test_billions():
    assert [billions(n) for n in (8_030_261_248, 671_026_404_352, 493_000_000, 1_026_000_000_000)] == [
        "8.03 B", "671 B", "0.493 B", "1,026 B"]


def test_plural_and_count():
    assert plural(1, "block") == "1 block" and plural(2, "block") == "2 blocks" and count(32768) == "32,768"
    assert rate(0.02634) == "0.0263 tokens/s"


@pytest.mark.parametrize(("text", "size"), [
    # what --smem read: K, KB and KiB alike, fractions that make whole bytes, B, no unit, spaces
    ("48KiB", 49152), ("48K", 49152), ("48k", 49152), ("48kb", 49152), ("49152", 49152), ("1.5KiB", 1536),
    ("512B", 512), ("0", 0), ("1M", MIB), (" 16 KiB ", 16 * KIB), (".5K", 512),
    # what --comm-max read: G and GiB, and MiB with a space
    ("64KiB", 64 * KIB), ("1GiB", GIB), ("1g", GIB), ("16 MiB", 16 * MIB), ("65536", 65536),
    # what neither read before the grammar was one: GB, MB, and a fraction of MiB or GiB
    ("2GB", 2 * GIB), ("3mb", 3 * MIB), ("1.5MiB", 3 * MIB // 2), ("0.25GiB", GIB // 4),
])
def test_parse_size_reads_one_grammar(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize(("text", "reason"), [
    ("48XB", "not a size"), ("KiB", "not a size"), ("-1K", "not a size"), ("", "not a size"), ("1e3", "not a size"),
    ("1TiB", "not a size"), ("48 K iB", "not a size"), ("1.3K", "not a whole number of bytes"),
    ("0.5", "not a whole number of bytes"), ("9" * 41, "41 characters"), ("٤٨", "not a size"), ("４8K", "not a size"),
])
def test_parse_size_refuses_naming_the_option(text, reason):
    with pytest.raises(UserError, match=reason) as e:
        parse_size(text, "--smem")
    assert str(e.value).startswith("--smem '")


@pytest.mark.parametrize(("text", "value"), [("16", 16), (" 4095 ", 4095), ("0", 0), ("9" * 30, int("9" * 30)),
                                             ("9" * 31, None), ("1_000", None), ("١٢", None), ("１６", None),
                                             ("-1", None), ("1.0", None), ("", None), ("0x10", None)])
def test_a_whole_number_is_ascii_digits_and_no_longer_than_any_count(text, value):
    # int() takes the underscores and other scripts' digits, and raises past 4,300 digits.
    assert whole_number(text) == value


@pytest.mark.parametrize(("text", "value"), [("0.7", 0.7), ("-3", -3.0), ("1e-3", 1e-3), (".5", 0.5), ("2.", 2.0),
                                             ("nan", None), ("inf", None), ("1e400", None), ("1_0", None),
                                             ("٠.٧", None), ("", None), ("0x1p3", None)])
def test_a_real_number_is_finite_and_in_ascii_digits(text, value):
    assert real_number(text) == value
