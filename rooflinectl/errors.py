"""The one exception type the CLI turns into a one-line message and exit code 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pydantic is imported only for the type: errors.py stays the lowest, lightest layer
    from pydantic import ValidationError


def one_line(text: str) -> str:
    """``text`` as one line of plain characters: a line break, an escape sequence or any other character that is
    not printable (a name given as ``'h100\\n'``, a path holding ``\\x1b[31m``) is shown escaped, as ``repr``
    shows it, so that a message naming it stays one line and cannot drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class UserError(Exception):
    """Bad input from the user: an unknown name, a malformed file, an impossible size.

    The CLI prints ``str(err)`` on one line and exits with code 2, never a traceback: ``str`` is the message
    with whatever the user gave that is not a printable character escaped (:func:`one_line`).
    """

    def __str__(self) -> str:
        return one_line(super().__str__())


def closest(name: str, candidates: Iterable[str], n: int = 3) -> str:
    """A ' (did you mean: a, b?)' hint naming the closest candidates, or '' when none is close."""
    matches = difflib.get_close_matches(name.lower(), sorted(set(candidates)), n=n, cutoff=0.5)
    return f" (did you mean: {', '.join(matches)}?)" if matches else ""


# Pydantic's messages in the user's words: the start of each message, and what replaces it ("Input should be
# greater than 0" reads "must be greater than 0"; an unknown key is named as one).
_PLAIN_WORDS = (("Input should be ", "must be "), ("Extra inputs are not permitted", "unknown key"),
                ("Field required", "missing"), ("Value error, ", ""))
# The most errors one line names; the rest are counted.
SHOWN_ERRORS = 3


def _plain(message: str) -> str:
    for start, words in _PLAIN_WORDS:
        if message.startswith(start):
            return words + message[len(start):]
    return message


def format_validation_error(source: str, err: ValidationError, names: Mapping[str, str] | None = None) -> str:
    """One line from a pydantic ValidationError: the file, then up to SHOWN_ERRORS fields, each with its reason
    in plain words, and how many more. ``names`` maps a field to the key as the user's file spells it (a
    config.json's ``num_hidden_layers`` for the field ``num_layers``)."""
    # An unknown key is usually the cause of a 'missing' one (a typo such as 'bandwith'): named first. One lean
    # pass over the errors (no inputs, URLs or contexts copied): a file of 200,000 unknown keys took 3 s here.
    errors = err.errors(include_url=False, include_context=False, include_input=False)
    ordered = sorted(errors, key=lambda e: e.get("type") != "extra_forbidden")[:SHOWN_ERRORS]
    parts = []
    for e in ordered:
        loc = [str(p) for p in e.get("loc", ())]
        if loc and names:
            loc[0] = names.get(loc[0], loc[0])
        parts.append(f"field '{'.'.join(loc) or '(top level)'}': {_plain(e['msg'])}")
    more = err.error_count() - len(ordered)
    tail = f"; and {more} more error{'s' if more > 1 else ''}" if more > 0 else ""
    return f"{source}: {'; '.join(parts)}{tail}"
