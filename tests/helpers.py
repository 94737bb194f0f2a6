"""Shared test helpers: run the CLI in-process with a fixed, colourless console."""

from __future__ import annotations

from typer.testing import CliRunner

from rooflinectl.cli import app


def cli(*args: str, env: dict | None = None):
    """Invoke rooflinectl in-process; 100 columns, no colour, so output is stable."""
    runner = CliRunner()
    base = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    return runner.invoke(app, list(args), env={**base, **(env or {})}, catch_exceptions=False)
