"""Every `$ rooflinectl …` example in README.md and docs/*.md that shows its output is run and compared with
that output, so that the docs cannot drift from the tool.

The expected text is the doc itself: when a change to the code changes an output, this test fails and names
the example; fix the doc (or the code), never the test. The examples run in-process (typer's CliRunner), at the
width the docs were made at (100 columns, or the N of a `<!-- COLUMNS=N -->` comment on the line before the
block), without colour, in an empty folder that holds only what the examples
read (see ``_workdir``). Normalized: trailing spaces of each line, and the date of a measure run. An output that
ends in a line of just `...` or `…` shows only its beginning, and is compared as a prefix. A block marked
`<!-- TIMES VARY -->` on the line before it (a CPU run's times) is compared with every number masked (``_mask``):
its words, columns, names and order stay pinned; its figures are the run's.

Examples that cannot run here are listed in ``NOT_RUN`` with the reason; a new example that cannot run must be
added there by hand, or the test fails.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import cli

ROOT = Path(__file__).parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CUT = {"...", "…"}

# (doc, command) -> why it is not run. Only what needs a CUDA GPU (and cannot run under Triton's interpreter).
NOT_RUN = {
    ("docs/plot.md", "rooflinectl measure --kernel matmul --shape 1x4096x14336,8x4096x14336,64x4096x14336,"
                     "256x4096x14336 --dtype bf16 --baseline none --gpu h200 --save decode-matmul.json"):
        "times the kernel on an H200: the interpreter checks correctness only and saves no time_s",
}


@dataclass(frozen=True)
class Example:
    doc: str  # path relative to the repository
    line: int  # 1-based line of the `$ ` command
    command: str  # without the leading `$ `
    output: str  # the lines shown after it, up to the next `$ ` line or the end of the block
    # What earlier lines of the same doc made: ("cat", name, content) for a file a `$ cat NAME` shows, and
    # ("jq", command, "") for a `$ jq FILTER IN > OUT` that writes one.
    setup: tuple[tuple[str, str, str], ...]
    columns: int = 100  # the terminal width the block was made at: `<!-- COLUMNS=N -->` on the line before it
    times_vary: bool = False  # `<!-- TIMES VARY -->` on the line before the block: compared with numbers masked


def _examples(path: Path) -> list[Example]:
    """The `$ rooflinectl` commands of a doc's fenced blocks that show output."""
    rel = path.relative_to(ROOT).as_posix()
    out: list[Example] = []
    setup: list[tuple[str, str, str]] = []
    lines = path.read_text().splitlines()
    in_block = False
    current: tuple[int, str] | None = None
    shown: list[str] = []
    columns = 100
    times_vary = False

    def close() -> None:
        nonlocal current
        if current is not None:
            line, command = current
            text = "\n".join(shown)
            if command.startswith("cat "):
                setup.append(("cat", command.split()[1], text + "\n"))
            elif command.startswith("jq ") and " > " in command:
                setup.append(("jq", command, ""))
            elif command.startswith("rooflinectl ") and text.strip():
                out.append(Example(rel, line, command, text, tuple(setup), columns, times_vary))
        current = None
        shown.clear()

    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            close()
            in_block = not in_block
            marker = re.fullmatch(r"<!-- COLUMNS=(\d+) -->", lines[number - 2].strip()) if number > 1 else None
            columns = int(marker.group(1)) if in_block and marker else 100
            times_vary = in_block and number > 1 and lines[number - 2].strip() == "<!-- TIMES VARY -->"
        elif in_block and line.startswith("$ "):
            close()
            command = line[2:]
            # A trailing comment is for the reader.
            if "  #" in command and not command.startswith("cat "):
                command = command.split("  #")[0]
            current = (number, command.strip())
        elif in_block and current is not None:
            shown.append(line)
    return out


EXAMPLES = [e for doc in DOCS for e in _examples(doc)]


def _normalize(text: str) -> str:
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?", "<date>", text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _workdir(tmp_path: Path, example: Example) -> None:
    """The examples' current folder: the committed records they read (docs/results/), the folders their -o
    paths name, and the files earlier lines of the same doc showed (`$ cat`) or made (`$ jq … > FILE`)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "results").symlink_to(ROOT / "docs" / "results")
    (tmp_path / "docs" / "img").mkdir()
    for kind, name, content in example.setup:
        if kind == "cat":
            (tmp_path / name).write_text(content)
        else:
            if shutil.which("jq") is None:
                pytest.skip(f"jq is not installed, and the example needs: {name}")
            subprocess.run(name, shell=True, cwd=tmp_path, check=True)


def _argv(command: str) -> tuple[list[str], list[str] | None]:
    """The rooflinectl arguments, and the jq command its output is piped through, if any."""
    words = shlex.split(command)
    jq = None
    if "|" in words:
        at = words.index("|")
        jq = words[at + 1:]
        assert jq[0] == "jq" and "|" not in jq, f"unsupported pipe in {command!r}: only one jq"
        words = words[:at]
    if "<" in words:  # `< /dev/null`: the runner's stdin is never a terminal anyway
        at = words.index("<")
        words = words[:at] + words[at + 2:]
    assert words[0] == "rooflinectl"
    return words[1:], jq


# A number as the tools print it (1,234, 0.153, <0.001, 2.5e-05), with the unit a time or share takes: masked
# whole, since a time that moves from 98.6 µs to 1.01 ms changes its unit too.
_NUMBER = re.compile(r"<?\d[\d,.]*(?:e[+-]?\d+)?(?:\s?(?:ns|µs|ms|s|%)(?![\w]))?")


def _mask(text: str) -> str:
    """Every number as '#', and what its width moves with it collapsed: runs of spaces (a table's alignment) and
    of a rule's '─'."""
    lines = (re.sub(r"\s+", " ", re.sub("─+", "─", _NUMBER.sub("#", line))).strip() for line in text.splitlines())
    return "\n".join(lines)


def _matches(got: str, expected: str) -> bool:
    """Equal, or, where the doc cuts the output with a line of `...` or `…`, each shown stretch found in order,
    the first at the start unless the doc cuts before it, the last at the end unless it cuts after it."""
    shown = expected.splitlines()
    if not any(line.strip() in CUT for line in shown):
        return got == expected
    stretches: list[list[str]] = [[]]
    for line in shown:
        if line.strip() in CUT:
            stretches.append([])
        else:
            stretches[-1].append(line)
    lines = got.splitlines()
    at = 0
    for i, stretch in enumerate(stretches):
        if not stretch:
            continue
        starts = [j for j in range(at, len(lines) - len(stretch) + 1) if lines[j:j + len(stretch)] == stretch]
        if i == 0:
            starts = starts[:1] if starts[:1] == [0] else []
        if i == len(stretches) - 1:
            starts = [j for j in starts if j + len(stretch) == len(lines)]
        if not starts:
            return False
        at = starts[0] + len(stretch)
    return True


def _run(args: list[str], columns: int) -> tuple[int, str, str]:
    """In-process, except under --interpret: TRITON_INTERPRET must be set before triton is first imported,
    which another test of the same process may have done, so that runs in a fresh interpreter."""
    if "--interpret" not in args:
        result = cli(*args, env={"COLUMNS": str(columns)})
        return result.exit_code, result.stdout, result.stderr
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-m", "rooflinectl", *args], capture_output=True, text=True, env=env)
    return done.returncode, done.stdout, done.stderr


def test_cut_outputs_match_in_order():
    assert _matches("a\nb\nc\nd", "a\n...\nd")
    assert _matches("a\nb\nc\nd", "…\nc\nd")
    assert _matches("a\nb\nc\nd", "a\nb\n...")
    assert not _matches("a\nb\nc\nd", "b\n...")  # the first stretch starts the output
    assert not _matches("a\nb\nc\nd", "...\nc")  # the last one ends it
    assert not _matches("a\nb\nc\nd", "a\n...\nx\n...")


def test_masking_keeps_the_words_and_drops_the_figures():
    row = " qk             2    2.83 ns   8.75 ms       26  0.00108   <0.001    355 µs "
    assert _mask(row) == "qk # # # # # # #"
    assert _mask(row) == _mask(" qk  2  2.83 ns  101 µs  26  0.1  <0.001  1.2 ms")
    assert _mask("aten::_to_copy  mlp_norm  24.2 µs    4    0.0") == "aten::_to_copy mlp_norm # # #"
    assert _mask(" ───── ") == _mask(" ─────────── ") == "─"
    assert _mask("2 more names") != _mask("2 more kernels")


def test_examples_found():
    """The parser sees the docs' examples (a broken parser would make the test below pass on nothing)."""
    docs = {e.doc for e in EXAMPLES}
    assert {"README.md", "docs/plot.md", "docs/measure.md", "docs/occupancy.md", "docs/explore.md"} <= docs
    assert len(EXAMPLES) >= 25
    listed = {(e.doc, e.command) for e in EXAMPLES}
    assert set(NOT_RUN) <= listed, "NOT_RUN names an example that is no longer in the docs"


# measure --interpret runs every kernel in Triton's interpreter, in a fresh process: out of the inner loop.
@pytest.mark.parametrize("example", [pytest.param(e, marks=pytest.mark.slow) if "--interpret" in e.command else e
                                     for e in EXAMPLES], ids=lambda e: f"{e.doc}:{e.line}")
def test_example_output_matches_the_doc(example: Example, tmp_path, monkeypatch):
    reason = NOT_RUN.get((example.doc, example.command))
    if reason:
        pytest.skip(reason)
    _workdir(tmp_path, example)
    monkeypatch.chdir(tmp_path)
    args, jq = _argv(example.command)
    if "measure" in args and "--list" not in args:
        pytest.importorskip("torch", reason="measure's examples need torch (pip install -e '.[gpu]')")
        pytest.importorskip("triton", reason="measure's examples need triton (pip install -e '.[gpu]')")
    expected = _normalize(example.output)
    is_error = expected.startswith("error:")
    code, stdout, stderr = _run(args, example.columns)
    assert code == (2 if is_error else 0), stdout + stderr
    got = stderr if is_error else stdout
    if jq is not None:
        if shutil.which("jq") is None:
            pytest.skip("jq is not installed")
        got = subprocess.run(jq, input=got, capture_output=True, text=True, check=True).stdout
    got = _normalize(got)
    if example.times_vary:
        got, expected = _mask(got), _mask(expected)
    message = f"{example.doc}:{example.line}: {example.command}\n--- doc\n{expected}\n--- now\n{got}"
    assert _matches(got, expected), message
