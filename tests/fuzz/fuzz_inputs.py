"""What the fuzz tests feed rooflinectl: odd values for a spec's fields, text and byte mutations of a file, odd
paths, and option values. Every strategy is drawn from inside a test (``st.data()``), so that hypothesis shrinks a
failure to the smallest file and the fewest changes."""

from __future__ import annotations

import copy

from fuzz_support import delete_at, get_at, leaf_paths, set_at
from hypothesis import strategies as st

HUGE_DIGITS = "9" * 5000  # beyond Python's 4,300-digit limit for int(str)

# Values a field may be replaced with: every type YAML and JSON can give, and the numbers that broke things.
ODD_VALUES = st.sampled_from([
    None, True, False, 0, 1, -1, 2, -0.0, 0.5, 1e-320, 5e-324, 1e-7, 1e30, 1e308, 2**31, 2**31 - 1, 2**63, 10**400,
    float("inf"), float("-inf"), float("nan"), "80", "  8", "", " ", "yes", "0154", "1:48", "[/]",
    "[link=https://example.com]x[/link]", "[bold]x", "$\\frac{$", "$x$", "\\", "٣", "３２", "x" * 300,
    "a\nb", "\x1b[31mred", "h100", "../../etc/passwd", [], {}, [1, 2], {"a": 1}, [None], {"fp32": 1.0},
])

# Plain YAML scalars put into the text as written: what YAML 1.1 reads as numbers, booleans or dates, tags,
# aliases, broken syntax and numbers beyond every range.
RAW_SCALARS = st.sampled_from([
    "yes", "no", "on", "off", "Y", "0154", "0o17", "0x10", "1:48", "1_000", ".5", "1e3", "1E400", "-1e400",
    ".inf", "-.inf", ".nan", ".NaN", "~", "null", "", "2026-12-02", "2026-12-02T10:00:00", "!!float 1", "!!int 3",
    "!!str 5", "!!python/object/apply:os.system ['true']", "!!binary aGk=", "!!set {a}", "*nowhere", "&a 1",
    "{", "[", "}", "'unterminated", '"\\x"', "|", ">", "- 1", "[1, [2, [3]]]", "{a: {b: {c: 1}}}", HUGE_DIGITS,
    "-" + HUGE_DIGITS, "1" + "0" * 400, "0." + "0" * 400 + "1", "'[/]'", "'$\\frac{$'", "\t3", "3 # note",
])


def transformed(value: object) -> st.SearchStrategy:
    """Changes of the value that is there: negated, scaled far up or down, as a string, wrapped in a list."""
    options: list[object] = [[value], str(value)]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e300:
        # Mild changes too (most of them still load), so that the cases reach the engine and the chart.
        options += [-value, value * 10**6, value / 10**6, value * 10**300, value + 0.5, float(value), 0,
                    value * 2, value / 2, value * 1000, value / 1000, value + 1]
        if isinstance(value, float) and value.is_integer():
            options.append(int(value))
    return st.sampled_from(options)


def mild(value: float) -> st.SearchStrategy:
    """A change that keeps a number plausible (doubled, halved, one more): the spec still loads, more often than
    not, and the result's arithmetic is checked on a GPU or a model no file describes."""
    if abs(value) > 1e300:  # an int beyond float range (an earlier change): halve it as an int
        return st.just(int(value) // 2)
    options = [value * 2, value / 2, value * 1.37, value * 0.73]
    if isinstance(value, int):
        options += [value + 1, max(1, value - 1), value * 3, max(1, value // 2)]
    return st.sampled_from(options)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@st.composite
def mutated_mapping(draw, base: dict, protect: tuple = ()) -> dict:
    """``base`` (a parsed spec) with one to three fields deleted, retyped, negated, scaled or replaced; or, one
    time in two, one to three numbers changed mildly (a spec that still loads, with other numbers)."""
    data = copy.deepcopy(base)
    gentle = draw(st.booleans())
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in leaf_paths(data) if p[: len(protect)] == protect] if protect else leaf_paths(data)
        if gentle:
            paths = [p for p in paths if _is_number(get_at(data, p))]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        action = "mild" if gentle else draw(st.sampled_from(["delete", "odd", "transform", "odd"]))
        if action == "mild":
            set_at(data, path, draw(mild(get_at(data, path))))  # type: ignore[arg-type]
        elif action == "delete":
            delete_at(data, path)
        elif action == "odd":  # a copy: ODD_VALUES' lists and dicts are shared, and a later change may go inside
            set_at(data, path, copy.deepcopy(draw(ODD_VALUES)))
        else:
            set_at(data, path, copy.deepcopy(draw(transformed(get_at(data, path)))))
    if not gentle and draw(st.booleans()) and isinstance(data, dict):  # an unknown key: a typo must fail, not fall back
        data[draw(st.sampled_from(["bandwith_gbps", "sm_cout", "extra", "batch_size", "id "]))] = 1
    return data


def _value_lines(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines()) if ":" in line and not line.lstrip().startswith("#")]


@st.composite
def mutated_text(draw, text: str) -> str:
    """Line-level changes YAML serialisation cannot make: a raw scalar in place of a value, a key given twice,
    a line dropped or re-indented, garbage appended."""
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 2))):
        candidates = _value_lines("\n".join(lines)) or [0]
        i = draw(st.sampled_from(candidates))
        line = lines[i] if lines else ""
        action = draw(st.sampled_from(["raw", "duplicate", "drop", "indent", "append"]))
        if action == "raw" and ":" in line:
            key = line.split(":", 1)[0]
            lines[i] = f"{key}: {draw(RAW_SCALARS)}"
        elif action == "duplicate":
            lines.insert(i + 1, line)
        elif action == "drop" and lines:
            del lines[i]
        elif action == "indent" and lines:
            lines[i] = "   " + line
        else:
            lines.append(draw(st.sampled_from(["junk", "- 1", "a: [", "? x", "%YAML 1.1", "---", "...", "\t: 1"])))
    return "\n".join(lines) + "\n"


@st.composite
def mutated_bytes(draw, data: bytes) -> bytes:
    """The file's bytes changed below the text level: another encoding, an invalid byte, cut short, a NUL."""
    action = draw(st.sampled_from(["utf16", "utf8-bom", "latin1-byte", "cut", "nul", "cr", "invalid"]))
    if action == "utf16":
        return data.decode("utf-8").encode("utf-16")
    if action == "utf8-bom":
        return b"\xef\xbb\xbf" + data
    if action == "latin1-byte":
        i = draw(st.integers(0, len(data)))
        return data[:i] + b"\xe9" + data[i:]
    if action == "cut":
        return data[: draw(st.integers(0, len(data)))]
    if action == "nul":
        i = draw(st.integers(0, len(data)))
        return data[:i] + b"\x00" + data[i:]
    if action == "cr":
        return data.replace(b"\n", b"\r")
    return draw(st.binary(min_size=1, max_size=64)) + data


# Whole files no spec looks like: nesting past the recursion limit, alias bombs, huge numbers, huge files.
PATHOLOGICAL_YAML = st.sampled_from([
    "[" * 5000 + "]" * 5000,
    "a: " + "{b: " * 3000 + "1" + "}" * 3000,
    "\n".join(f"{' ' * i}k{i}:" for i in range(1500)) + " 1",
    "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
    f"id: {HUGE_DIGITS}\n",
    "x: 1\n" * 20000,
    "\n".join(f"k{i}: {i}" for i in range(50000)) + "\n",
    "a: " + "x" * (3 * 2**20) + "\n",
    "", "\n", "~\n", "42\n", "- a\n- b\n", "'just a string'\n", "!!python/object/apply:os.system ['true']\n",
    "a: 1\n---\nb: 2\n", "? [a, b]\n: 1\n", "{[1]: 2}\n", "a: *b\n",
])

PATHOLOGICAL_JSON = st.sampled_from([
    "[" * 100000 + "]" * 100000,
    '{"a": ' * 5000 + "1" + "}" * 5000,
    '{"hidden_size": ' + HUGE_DIGITS + "}",
    '{"a": NaN}', '{"a": Infinity}', '{"a": -Infinity}', '{"a": 1, "a": 2}', "", "null", "[]", "42",
    '"config"', "{", '{"a": 1e999}', '{"a": 1}garbage', "{'a': 1}", "\ufeff{}",
])

# An output path's folder, and its name, chosen to break the writer.
ODD_NAMES = st.sampled_from([
    "out", "x" * 255, "x" * 256, "é" * 128, "[/]", "$\\frac{$", "-o", " ", ".", "..", ".hidden", "a b", "٣",
])
