"""rooflinectl's command line: thin typer commands over the library. Each command lives in its own module."""

from __future__ import annotations

import importlib

from ._app import app

# Each module registers its commands on ``app`` when imported. Modules stay light: heavy imports (matplotlib,
# torch, triton, textual) happen inside the command functions that need them.
_COMMAND_MODULES = ("analyze", "catalog", "plot", "measure", "occupancy", "explore")

for _name in _COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}")


def main() -> None:
    app()


__all__ = ["app", "main"]
