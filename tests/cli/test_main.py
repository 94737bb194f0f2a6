"""cli/__init__.py: the entry point (one-line usage errors, help), every command in the README, and no heavy
import at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import command_paths

ROOT = Path(__file__).parents[2]


# What the CLI's start must not load: the GPU stack, the chart and app libraries, and the spec and record schemas
# (pydantic, yaml and the modules that define them): the commands import those inside their functions. typer's
# own help rendering imports pydantic (typer._adapters), so --help is held to the rest.
NOT_AT_START = ('torch', 'triton', 'matplotlib', 'textual', 'pydantic', 'yaml', 'rooflinectl.specs.load',
                'rooflinectl.records.kernel')
NOT_IN_HELP = tuple(m for m in NOT_AT_START if m != 'pydantic')


def test_cli_imports_no_heavy_module():
    code = f"import sys, rooflinectl.cli; print(' '.join(m for m in {NOT_AT_START!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


@pytest.mark.parametrize("command", [["analyze", "--help"], ["measure", "--help"], ["--help"]])
def test_help_runs_without_heavy_imports(command):
    code = ("import sys; from rooflinectl.cli import app; from typer.testing import CliRunner; "
            f"r = CliRunner().invoke(app, {command!r}); assert r.exit_code == 0, r.output; "
            f"print(' '.join(m for m in {NOT_IN_HELP!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_every_command_is_documented_in_the_readme():
    from rooflinectl.cli import app

    readme = (ROOT / "README.md").read_text()
    paths = list(command_paths(app))
    assert {"analyze", "plot", "measure", "calibrate", "occupancy", "explore", "hardware show"} <= set(paths)
    for path in paths:
        assert f"rooflinectl {path}" in readme, f"README.md does not show `rooflinectl {path}`"


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["analyze", "--batch", "abc"], "'--batch'"),
        (["analyze", "--bogus"], "No such option: --bogus"),
        (["occupancy", "--threads", "x"], "'--threads'"),
        (["analyze", "--gpu", "nope"], "unknown GPU"),
        # An option of one value given twice: click kept the last, so this ran on the h200 alone.
        (["analyze", "serve", "--gpu", "h100", "--gpu", "h200", "--requests", "2"], "--gpu given 2 times"),
        (["plot", "serve", "--gpu", "h100", "-g", "h200"], "--gpu and -g given 2 times: it takes one value"),
        (["analyze", "decode", "--batch", "2", "--batch=3"], "--batch given 2 times"),
        # A short option with its value attached (click reads -b64 as -b 64) counts as given too.
        (["analyze", "-b1", "-b64"], "-b given 2 times"),
        (["analyze", "--batch=1", "-b64"], "--batch and -b given 2 times"),
        (["plot", "-ofoo.svg", "-obar.svg"], "-o given 2 times"),
    ],
)
def test_usage_errors_through_the_entry_point_are_one_line(args, fragment):
    """Click's own errors (bad option values, unknown options) get the same one-line form as ours."""
    proc = subprocess.run([sys.executable, "-m", "rooflinectl", *args], capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], proc.stderr
    assert proc.stdout == ""


def test_help_through_the_entry_point():
    proc = subprocess.run([sys.executable, "-m", "rooflinectl", "analyze", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "Example: rooflinectl analyze" in proc.stdout
    bare = subprocess.run([sys.executable, "-m", "rooflinectl"], capture_output=True, text=True)
    assert bare.returncode == 0 and "analyze" in bare.stdout


HEAVY = ("torch", "triton", "matplotlib", "textual")


def _startup_cases() -> list[list[str]]:
    """Every command's and group's --help, and the commands that answer from the specs alone."""
    from rooflinectl.cli import app

    paths = list(command_paths(app))
    groups = sorted({p.rsplit(" ", 1)[0] for p in paths if " " in p})
    helps = [[], *([*p.split(), "--help"] for p in [*groups, *paths])]
    helps[0] = ["--help"]
    runs = [["analyze", "decode"], ["hardware", "list"], ["hardware", "show", "h100"], ["workloads", "list"],
            ["occupancy", "--gpu", "h100", "--threads", "256", "--regs", "64", "--smem", "48KiB", "--grid", "1000"]]
    return helps + runs


def test_no_command_imports_a_heavy_module_at_start():
    """Through the real entry point in a fresh interpreter: after each command ran, none of torch, triton,
    matplotlib or textual is in sys.modules (the commands that need them import them inside). One interpreter runs
    them all in turn: sys.modules only grows, so the first command that imports one is the one named."""
    cases = _startup_cases()
    code = (
        "import contextlib, io, json, sys\n"
        "from rooflinectl.cli import main\n"
        f"for args in {cases!r}:\n"
        "    sys.argv, code = ['rooflinectl', *args], None\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n            main()\n        except SystemExit as e:\n            code = e.code\n"
        f"    print('RAN', json.dumps([args, [m for m in {HEAVY!r} if m in sys.modules], code]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    ran = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("RAN ")]
    assert [args for args, _, _ in ran] == cases, proc.stdout[-500:] + proc.stderr
    for args, heavy, exit_code in ran:
        assert (heavy, exit_code) == ([], 0), f"rooflinectl {' '.join(args)}"


def _all_commands(group, path=()):
    """Every command under ``group``, the routed sub-commands ('analyze step', 'plot serve') too."""
    import click

    for name, cmd in sorted(getattr(group, "commands", {}).items()):
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from _all_commands(cmd, (*path, name))
        for word in getattr(cmd, "words", ()):
            yield (*path, name, word), cmd.route(word)


def test_no_help_text_holds_brackets_that_rich_would_swallow():
    """Typer renders help through rich markup: '[default: decode and prefill]' in a help string vanished from
    'plot --help' ("… a workload YAML file ."). No option, argument or command help may hold a '['."""
    import typer.main

    from rooflinectl.cli import app

    root = typer.main.get_command(app)
    offenders = []
    for path, cmd in _all_commands(root):
        texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        offenders += [f"{' '.join(path)}: {t}" for t in texts if "[" in t]
    assert len(list(_all_commands(root))) >= 8
    assert offenders == []


def test_no_help_shows_a_type_beside_a_flag():
    """A flag takes no value: its help row shows none (typer 0.29 printed '<bool>' beside --json, --help and
    '--causal --no-causal'). Every group, command and routed sub-command ('analyze generate', 'plot pareto')."""
    import re

    import typer.main

    from helpers import cli
    from rooflinectl.cli import app

    root = typer.main.get_command(app)
    paths = [(), *(path for path, _ in _all_commands(root))]
    for _, cmd in _all_commands(root):  # a routed command's epilog names its sub-commands
        paths += [tuple(words.split()[:-1]) for words in re.findall(r"'([^']+ --help)'", cmd.epilog or "")]
    assert ("analyze", "generate") in paths and ("plot", "pareto") in paths and ("hardware",) in paths
    for path in paths:
        out = cli(*path, "--help").stdout
        assert "--help" in out and "Show this message and exit." in out, path
        assert "<bool>" not in out, path
    causal = next(line for line in cli("analyze", "--help").stdout.splitlines() if "--no-causal" in line)
    assert re.search(r"--no-causal +Causal mask", causal), causal



def test_every_help_fits_80_columns_with_every_option_name_whole():
    """At 80 columns rich's boxed help cut long names ('--max-num-batched-…', two options both shown as
    '--prefill-max-num-…'); where the box would, the help is click's plain layout, which wraps instead."""
    import re

    import typer.main

    from helpers import cli
    from rooflinectl.cli import app

    root = typer.main.get_command(app)
    paths = [(), *(path for path, _ in _all_commands(root))]
    for _, cmd in _all_commands(root):
        paths += [tuple(words.split()[:-1]) for words in re.findall(r"'([^']+ --help)'", cmd.epilog or "")]
    assert ("analyze", "serve") in paths and ("plot", "serve") in paths
    for path in paths:
        out = cli(*path, "--help", env={"COLUMNS": "80"}).stdout
        assert "…" not in out, (path, [line for line in out.splitlines() if "…" in line])
        assert max(map(len, out.splitlines())) <= 80, path
    serve = cli("analyze", "serve", "--help", env={"COLUMNS": "80"}).stdout
    for name in ("--max-num-batched-tokens", "--prefill-max-num-batched-tokens", "--prefill-max-num-seqs",
                 "--no-chunked-prefill", "--price-per-gpu-hour"):
        assert name in serve, name
    assert "╭─ Options" in cli("analyze", "serve", "--help", env={"COLUMNS": "160"}).stdout  # wide: the box


# The help examples a CPU cannot run: they time kernels or profile models on a GPU, or open the terminal UI.
NEEDS_A_GPU_OR_A_TERMINAL = ("measure", "calibrate", "profile", "explore")


def _help_examples() -> list[tuple[str, list[str]]]:
    """Every 'rooflinectl …' example in a command's help that runs here, as (the example, its arguments)."""
    import re
    import shlex

    import typer.main

    from rooflinectl.cli import app

    out = []
    for path, cmd in _all_commands(typer.main.get_command(app)):
        for example in re.findall(r"rooflinectl (.+?)(?:\n\n|$)", cmd.help or "", flags=re.S):
            example = " ".join(example.split())
            if path[0] not in NEEDS_A_GPU_OR_A_TERMINAL:
                out.append((example, shlex.split(example)))
    return out


@pytest.mark.parametrize(("example", "args"), _help_examples(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_help_example_runs(example, args, tmp_path, monkeypatch):
    """'analyze serve --help' showed DeepSeek-V3 on 8 H200s with --spec, which did not fit without fp8 weights."""
    from helpers import cli

    monkeypatch.chdir(tmp_path)  # plot's examples write their charts here
    result = cli(*args)
    assert result.exit_code == 0, f"rooflinectl {example}: {result.stderr}"


def test_explore_help_names_no_data_type_option_it_lacks():
    """explore takes --dtype and --kv-dtype alone: its --dtype help once told of --weight-dtype and --act-dtype."""
    import typer.main

    from rooflinectl.cli import app

    explore = typer.main.get_command(app).commands["explore"]  # type: ignore[attr-defined]
    own = {name for p in explore.params for name in p.opts}
    helps = " ".join(getattr(p, "help", None) or "" for p in explore.params)
    assert "--dtype" in own and "--weight-dtype" not in own and "--act-dtype" not in own
    assert "--weight-dtype" not in helps and "--act-dtype" not in helps



@pytest.mark.parametrize("columns", ["0", "99999999999999999999", "-5", "wide"])
def test_a_columns_no_renderer_can_draw_at_is_ignored(columns):
    # COLUMNS=0 made textwrap raise ValueError (plot's "wrote" line), 10^20 rich's help an OverflowError.
    env = {**os.environ, "COLUMNS": columns}
    for args in (["analyze", "--help"], ["workloads", "list"]):
        proc = subprocess.run([sys.executable, "-m", "rooflinectl", *args], capture_output=True, text=True, env=env)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_a_pipe_gets_no_trailing_blanks_and_an_ascii_stdout_no_traceback():
    """At 80 columns rich padded table rows and blank lines to the width and ended wrapped lines with a blank (11
    lines of analyze decode); an ASCII stdout (LANG=C) raised UnicodeEncodeError at the first '×'. Through the
    entry point, stdout a pipe: no line ends in a blank, every line fits 80 columns; with ASCII, the run ends with
    exit 0, no traceback, the characters the encoding lacks printed as '?' and the boxes drawn in ASCII."""
    args = [sys.executable, "-m", "rooflinectl", "analyze", "decode", "--gpu", "a100"]
    env = {**os.environ, "COLUMNS": "80", "PYTHONIOENCODING": "utf-8"}
    out = subprocess.run(args, capture_output=True, text=True, env=env, check=True).stdout.splitlines()
    assert len(out) > 20 and all(line == line.rstrip() and len(line) <= 80 for line in out)
    assert any("─" in line for line in out)
    ascii_env = {**env, "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run(args, capture_output=True, env=ascii_env)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr[-2000:]
    text = proc.stdout.decode("ascii")  # every byte ASCII
    assert "llama-3-8b decode" in text and "?" in text and "─" not in text
