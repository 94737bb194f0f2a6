"""A command whose first argument may name a sub-command: ``analyze generate …``, ``plot pareto …``.

``analyze`` and ``plot`` take a workload as their first argument (a phase or a YAML file); a few words are
commands of their own with their own options (``--prompt``, ``--output``) instead. Click hands a command its
arguments through ``make_context``: where the first one is such a word, the context made is the
sub-command's, so that click parses, helps ("Usage: rooflinectl analyze generate …") and runs it as the command
it is. A workload file named ``generate`` or ``pareto`` is given as ``./generate``.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer

from ._app import Command


def routed(**subcommands: str) -> type[Command]:
    """A command class (``_app.Command``) that hands ``<word> …`` to the typer app ``module:attribute`` that ``subcommands``
    names for that word (imported when used, so that ``rooflinectl --help`` stays light); its help ends with
    a line naming them."""

    class Routed(Command):
        words = tuple(subcommands)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            words = ", ".join(f"'{self.name} {word} --help'" for word in subcommands)
            self.epilog = f"Sub-commands with options of their own: {words}."

        @staticmethod
        def route(word: str) -> Any:
            """The click command of sub-command ``word``."""
            module, attribute = subcommands[word].split(":")
            return typer.main.get_command(getattr(importlib.import_module(module, __package__), attribute))

        def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
            if args and args[0] in subcommands:
                sub = self.route(args[0])
                return sub.make_context(f"{info_name} {args[0]}", list(args[1:]), parent=parent, **extra)
            return super().make_context(info_name, args, parent, **extra)

    return Routed
