"""Shared machinery for the YAML spec files: where the bundled files live, and strict loading.

Every spec model forbids unknown keys (a typo such as ``bandwith`` must fail, not fall back to a default),
and every loading error becomes a :class:`UserError` naming the file, the field and the reason.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import UserError, format_validation_error

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # rooflinectl/

class Strict(BaseModel):
    """Base of every spec model: unknown keys are errors, models are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def data_dir(kind: str) -> Path:
    """The folder of bundled ``hardware`` or ``workloads`` files.

    In a source checkout (``pip install -e .``) they sit at the top of the repository; a built wheel carries
    them as ``rooflinectl/_data/<kind>``.
    """
    for candidate in (PACKAGE_DIR / "_data" / kind, PACKAGE_DIR.parent / kind):
        if candidate.is_dir():
            return candidate
    raise UserError(f"the bundled '{kind}' folder is missing from this installation ({PACKAGE_DIR})")


def search_dirs(kind: str, env_var: str) -> list[Path]:
    """The user's folders (from ``env_var``, separated like PATH) first, then the bundled folder."""
    extra = [Path(p).expanduser() for p in os.environ.get(env_var, "").split(os.pathsep) if p]
    return [*extra, data_dir(kind)]


def looks_like_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml", ".json")) or os.sep in name or "/" in name


def read_text(path: Path) -> str:
    """A file's text, or a one-line UserError when it is missing or unreadable."""
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read: {err.strerror}") from None


def read_json(path: Path, what: str = "a JSON object") -> dict[str, Any]:
    """Parse one JSON file into a mapping, or raise a one-line UserError."""
    import json

    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise UserError(f"{path}: malformed JSON at line {err.lineno}: {err.msg}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected {what}, found {type(data).__name__}")
    return data


# libyaml's safe loader when PyYAML was built with it: the same documents, about ten times faster than the
# pure-Python SafeLoader, which parsing every hardware file at each command's start made felt. The tests load every
# data file with both and compare.
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path, loader: type[yaml.SafeLoader] | None = None) -> dict[str, Any]:
    """Parse one YAML file into a mapping, or raise a one-line UserError (``loader``: SAFE_LOADER by default)."""
    text = read_text(path)
    try:
        data = yaml.load(text, Loader=loader or SAFE_LOADER)  # a safe loader, C or Python
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError(f"{path}: malformed YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of fields at the top level, found {type(data).__name__}")
    return data


M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data: dict[str, Any], source: str) -> M:
    """Validate ``data`` as ``model``; a failure becomes one line naming ``source``, the field and the reason."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise UserError(format_validation_error(source, err)) from None
