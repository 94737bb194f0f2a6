"""rooflinectl's command line: thin typer commands over the library. Each command lives in its own module."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer

from ..errors import one_line
from ._app import app

# Each module registers its commands on ``app`` when imported. Modules stay light: heavy imports (matplotlib,
# torch, triton, textual) happen inside the command functions that need them.
_COMMAND_MODULES = ("analyze", "catalog", "plot", "measure", "occupancy", "explore", "compare", "profile")

for _name in _COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}")


def _click_error_classes() -> tuple[Any, Any]:
    """Click's UsageError and ClickException, wherever this typer takes click from (newer typers vendor it)."""
    mro = {cls.__name__: cls for cls in typer.BadParameter.__mro__}
    return mro["UsageError"], mro["ClickException"]


# The terminal widths taken from COLUMNS: rich and textwrap fail on 0 (ValueError) or on one past a C index
# (OverflowError); any width outside this range is treated as no COLUMNS at all (the terminal's own, or 80).
_COLUMNS_RANGE = range(20, 10_001)


def _sane_columns() -> None:
    """Drop a COLUMNS that is no width the renderers can draw at (0, negative, 10^20, not a number)."""
    import os

    from ..units import whole_number

    text = os.environ.get("COLUMNS")
    if text is not None and whole_number(text) not in _COLUMNS_RANGE:  # None (not a number) is in no range
        del os.environ["COLUMNS"]


def _lossy_stdout() -> None:
    """Let stdout write what its encoding cannot hold as '?': rooflinectl prints '×', '·', 'µ' and box lines, and
    on an ASCII stdout (LANG=C, PYTHONIOENCODING=ascii) Python's strict default raised UnicodeEncodeError, a
    traceback after half the output. (stderr already replaces them: Python opens it with backslashreplace.)"""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="replace")


def main() -> None:
    """The console entry point. Click's usage errors (an unknown option, ``--batch abc``) become one line on
    stderr and exit code 2, like every other bad input; ``rooflinectl`` alone prints the help."""
    usage_error, click_exception = _click_error_classes()
    _sane_columns()
    _lossy_stdout()
    try:
        code = app(standalone_mode=False)
    except usage_error as err:
        if type(err).__name__ == "NoArgsIsHelpError" and err.ctx is not None:
            print(err.ctx.get_help())
            sys.exit(0)
        command = err.ctx.command_path if err.ctx is not None else "rooflinectl"
        message = one_line(" ".join(err.format_message().split()))
        print(f"error: {message} (see '{command} --help')", file=sys.stderr)
        sys.exit(2)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except click_exception as err:
        print(f"error: {one_line(' '.join(err.format_message().split()))}", file=sys.stderr)
        sys.exit(err.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["app", "main"]
