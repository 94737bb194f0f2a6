"""The names a spec file is found by, its top-level ``id`` and ``aliases``, read without parsing the whole file:
the hardware catalog scans every file at each lookup (``specs.hardware``)."""

from __future__ import annotations

import re
from pathlib import Path

from ..files import read_text
from .load import read_yaml

_ID_LINE = re.compile(r"^id:[ \t]*(.*?)[ \t]*(?:[ \t]#.*)?$", re.MULTILINE)
_ALIASES_LINE = re.compile(r"^aliases:[ \t]*(.*?)[ \t]*(?:[ \t]#.*)?$", re.MULTILINE)
_PLAIN_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9._-]*$")
_YAML_WORDS = {"true", "false", "null"}  # the plain names that specs.load.SAFE_LOADER reads as non-strings


def _scalar(text: str) -> str | None:
    """A YAML scalar that is surely the string it reads as: quoted without escapes, or a plain name that YAML
    cannot take for a number, a boolean or null. None: let YAML decide."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" and "\\" not in text and text[0] not in text[1:-1]:
        return text[1:-1]
    if _PLAIN_NAME.match(text) and text.lower() not in _YAML_WORDS:
        return text
    return None


def file_names(path: Path) -> list[str]:
    """The id and aliases of a spec file (a GPU file), the names it is found by. A cheap scan of the top-level ``id:`` and
    ``aliases: [...]`` lines, as every bundled file writes them, spares parsing each file at every lookup; any
    other form of those keys is read by YAML (the same answer, a test checks every bundled file both ways)."""
    text = read_text(path)
    ids, aliases = _ID_LINE.findall(text), _ALIASES_LINE.findall(text)
    scanned: list[str | None] = []
    if len(ids) == 1 and len(aliases) <= 1:
        scanned.append(_scalar(ids[0]))
        if aliases:
            flow = aliases[0]
            if flow.startswith("[") and flow.endswith("]") and "[" not in flow[1:] and "{" not in flow:
                scanned += [_scalar(item.strip()) for item in flow[1:-1].split(",") if item.strip()]
            else:
                scanned.append(None)
        if None not in scanned:
            return [n for n in scanned if n is not None]
    data = read_yaml(path)
    listed = data.get("aliases")  # a malformed list (aliases: true) names nothing; loading the file says why
    return [n for n in [data.get("id"), *(listed if isinstance(listed, list) else [])] if isinstance(n, str)]
