"""The typer app, and the one place where a UserError becomes a one-line message and exit code 2."""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup, TyperOption

from ..errors import UserError
from ..files import command_inputs
from ..render.console import console as plain_console

DEFAULT_GPU = "h100-sxm"
P = ParamSpec("P")
R = TypeVar("R")

class _FlagsWithoutType:
    """Help that shows no value type beside a flag: typer 0.29 with click 8.5 prints ``<bool>`` after ``--json``,
    ``--help`` and ``--causal --no-causal``, which take no value. An empty metavar leaves that column blank."""

    def get_params(self, ctx: Any) -> Any:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
                param.metavar = ""
        return params


class _HelpThatFits:
    """Rich's boxed help where it shows every option's name whole; click's plain help where the box would cut one
    (at 80 columns ``analyze serve --help`` showed ``--max-num-batched-…`` and two options as
    ``--prefill-max-num-…``: a name the user cannot read is one they cannot type). The box is rendered once into a
    buffer at the terminal's width to tell, then printed for real (in colour where the terminal has it)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        names = [name for param in self.get_params(ctx)  # type: ignore[attr-defined]
                 for name in (*param.opts, *param.secondary_opts) if name.startswith("--")]
        width = shutil.get_terminal_size().columns  # COLUMNS, else the terminal's (80 without one), as rich reads it
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer), _columns(width):
            super().format_help(ctx, formatter)  # type: ignore[misc]
        if all(name in buffer.getvalue() for name in names):
            super().format_help(ctx, formatter)  # type: ignore[misc]
            return
        mode = vars(self)["rich_markup_mode"]  # typer's command's; None is its switch to click's own formatter
        vars(self)["rich_markup_mode"] = None
        try:
            super().format_help(ctx, formatter)  # type: ignore[misc]
        finally:
            vars(self)["rich_markup_mode"] = mode


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    """COLUMNS set to ``width`` for a rich console made inside (one writing to a buffer measures 80 otherwise)."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


class _OptionsOnce:
    """An option of one value given twice is refused: click keeps the last one silently, so ``analyze serve --gpu
    h100 --gpu h200`` ran on the H200 alone, where ``plot`` and ``compare`` take several GPUs that way. Flags and
    options that take several values (``multiple``) may repeat."""

    def parse_args(self, ctx: Any, args: list[str]) -> Any:
        single = {name: param for param in self.get_params(ctx)  # type: ignore[attr-defined]
                  if isinstance(param, TyperOption) and not param.multiple and not param.is_flag and not param.count
                  for name in param.opts}
        given: dict[str, list[str]] = {}
        for arg in args:
            if arg == "--":  # what follows is arguments, not options
                break
            if arg.startswith("--"):
                name = arg.split("=", 1)[0]  # --batch=8
            elif arg.startswith("-") and arg[:2] in single:
                name = arg[:2]  # -b8, click's short option with its value attached
            else:
                name = arg
            if name in single:
                given.setdefault(single[name].name, []).append(name)
        for names in given.values():
            if len(names) > 1:
                usage = {cls.__name__: cls for cls in typer.BadParameter.__mro__}["UsageError"]
                raise usage(f"{' and '.join(dict.fromkeys(names))} given {len(names)} times: it takes one value",
                            ctx=ctx)
        return super().parse_args(ctx, args)  # type: ignore[misc]


class Command(_HelpThatFits, _OptionsOnce, _FlagsWithoutType, TyperCommand):
    """Every rooflinectl command's click class (:class:`_HelpThatFits`, :class:`_OptionsOnce`,
    :class:`_FlagsWithoutType`)."""


class Group(_HelpThatFits, _FlagsWithoutType, TyperGroup):
    """Every rooflinectl group's click class (see :class:`_HelpThatFits`, :class:`_FlagsWithoutType`)."""


app = typer.Typer(
    cls=Group,
    name="rooflinectl",
    help="Roofline analysis of LLM inference: is each operation bound by bytes or by FLOPs, and how far from "
    "the ceiling is it?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def version_text() -> str:
    """"rooflinectl X.Y.Z", from the installed package's metadata (pyproject's version)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"rooflinectl {version('rooflinectl')}"
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "rooflinectl (not installed: no version recorded)"


def _print_version(value: bool) -> None:
    if value:
        print(version_text())
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print rooflinectl's version and exit."),
) -> None:
    """Roofline analysis of LLM inference: is each operation bound by bytes or by FLOPs, and how far from the
    ceiling is it?"""


def console() -> Console:
    """The one console of the commands (``render.console``: markup off, so a user's names print as written)."""
    return plain_console()


def fail(message: str) -> typer.Exit:
    """Print one line to stderr; the caller raises the returned Exit(2)."""
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(2)


def one_line_paragraphs(doc: str | None) -> str | None:
    """A docstring as help text: each paragraph on one line, so that the help wraps it to the terminal (rich's
    help keeps a docstring's own line breaks: "warps,⏎ blocks)" in the middle of a sentence)."""
    if doc is None:
        return None
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))


def command(target: typer.Typer = app, *args: Any, **kwargs: Any) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``target.command`` whose function turns a UserError into one line on stderr and exit code 2
    (``args`` and ``kwargs`` are typer's ``command`` options)."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*a: P.args, **kw: P.kwargs) -> R:
            try:
                with command_inputs():  # no writer of this command replaces a file it read
                    return fn(*a, **kw)
            except UserError as err:
                raise fail(str(err)) from None

        wrapper.__doc__ = one_line_paragraphs(fn.__doc__)
        return target.command(*args, **{"cls": Command, **kwargs})(wrapper)

    return decorate


def one_format(json: bool, csv: bool) -> None:
    """--json and --csv each replace the text: one of them at most."""
    if json and csv:
        raise UserError("--json and --csv: give one")


def print_json(data: object) -> None:
    """Standard JSON only: a NaN or an infinity is a bug to report, never ``Infinity`` printed as a number."""
    try:
        text = json.dumps(data, indent=2, allow_nan=False)
    except ValueError:
        raise UserError("the result holds a non-finite number; please report this with the command") from None
    sys.stdout.write(text + "\n")


# The most values one comma-separated list may give. A sweep draws every op at every value: 64 sizes are 64
# markers per op, more than a chart shows apart, and 399 sizes took 88 s to draw (64 take about
# as long as a chart of a few measured records). Refused above it, in one line, before any work.
MAX_LIST = 64


MAX_DIGITS = 18  # the longest number a list may give: below 2**63, as click's integer options hold them


def split_ints(value: str, what: str) -> list[int]:
    """'1,8,64' -> [1, 8, 64], each a positive integer; at most MAX_LIST of them."""
    out = []
    if value.count(",") >= MAX_LIST:
        raise UserError(f"{what}: {value.count(',') + 1} values, more than the {MAX_LIST} one list may give "
                        f"(a chart shows no more apart)")
    items = [v.strip() for v in value.split(",")]
    if any(not v for v in items):
        raise UserError(f"{what}: '{value}' has an empty item: give a value or a list such as 1,8,64")
    for item in items:
        # ASCII digits only, as click's integer options take them: int() would also take '٣' and '３'.
        if not (item.isascii() and item.isdigit()):
            raise UserError(f"{what}: '{item}' is not a positive integer")
        if len(item.lstrip("0")) > MAX_DIGITS:  # int() refuses past 4,300 digits; no size here is near 10^18
            raise UserError(f"{what}: {item[:12]}… ({len(item):,} digits) is too large")
        n = int(item)
        if n <= 0:
            raise UserError(f"{what}: {n} must be a positive integer")
        out.append(n)
    return out
