"""Shared machinery for the YAML spec files: where the bundled files live, and strict loading.

Every spec model forbids unknown keys (a typo such as ``bandwith`` must fail, not fall back to a default),
and every loading error becomes a :class:`UserError` naming the file, the field and the reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from ..errors import UserError, format_validation_error
from ..files import is_dir, is_file, read_text, user_path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # rooflinectl/

class Strict(BaseModel):
    """Base of every spec model: unknown keys are errors, models are immutable, and nothing is coerced.

    pydantic's strict mode: ``sm_count: yes``, ``batch: true`` and ``"80"`` are errors, not 1, 1 and 80 (an int is
    still a valid float). Together with :data:`SAFE_LOADER`'s YAML 1.2 scalars, a value means what it reads as.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# Every number a spec gives is finite and inside a range no real chip or model leaves by orders of magnitude: an
# infinite bandwidth made every op compute-bound and printed "ridge 0"; 1e-320 printed "nan%"; 1e30 a 31-digit
# GB/s. The ranges are deliberately wide (an exotic part still loads); what they stop is a typo or a fuzzed value.
# Rates in GB/s: HBM, L2 and shared memory of any GPU today are 1e2..1e6 GB/s; a subnormal such as 1e-320 is
# refused by the lower bound, not only by 'positive'.
Rate = Annotated[float, Field(ge=1e-3, le=1e7, allow_inf_nan=False)]
# Peak TFLOP/s of one unit for one data type: 1e-3 (an fp64 vector unit of a consumer part) to 1e6.
Peak = Annotated[float, Field(ge=1e-6, le=1e6, allow_inf_nan=False)]
# A size in GiB, MiB or KiB, or a clock in MHz: finite, from a thousandth to a million of its unit (a thousandth of
# a KiB is one byte: below it a size rounds to no bytes at all).
Size = Annotated[float, Field(ge=1e-3, le=1e6, allow_inf_nan=False)]
# A count (SMs, threads, registers, heads, layers, a batch): at most 2**31 - 1, which any real one is far below.
Count = Annotated[int, Field(gt=0, le=2**31 - 1)]


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
    """The user's folders (from ``env_var``, separated like PATH) first, then the bundled folder. A name that is
    no folder, one the system refuses (too long, unreadable) included, holds no spec and is passed over, as the
    shell passes over such a PATH entry."""
    extra = [user_path(p) for p in os.environ.get(env_var, "").split(os.pathsep) if p and is_dir(user_path(p))]
    return [*extra, data_dir(kind)]


def looks_like_path(name: str) -> bool:
    """Whether a ``--gpu``/``--model``/workload argument names a file rather than an id: a spec's extension, a
    folder separator, or an existing regular file (:func:`files.is_file`, which a too-long name does not break)."""
    return name.endswith((".yaml", ".yml", ".json")) or os.sep in name or "/" in name or is_file(name)


# A spec or a record is a few hundred keys; one mapping of 10,000 is a mistake or an attack, and refused before it is
# built: 50,000 unknown keys made pydantic list 50,000 errors (45 s under load; 100,000 took 94 s).
MAX_KEYS = 10_000

# A spec file (hardware, model, scenario) is a few KiB: the largest bundled one, hardware/mi300x.yaml, is 4.4 KiB.
# The worst 256 KiB measured here (65,000 list items) loads in 0.7 s; 50,000 keys (500 KiB) took 45 s under load.
MAX_SPEC_BYTES = 256 * 2**10


# The values a spec or record holds once YAML's aliases are expanded: a spec is a few hundred; 65,000 list items
# fill MAX_SPEC_BYTES. Aliases nest ("billion laughs"): 468 bytes of nine levels of nine expand to 9^9 values,
# which a walk over them (the control-character check, then pydantic) does not finish. Counted over the
# distinct nodes, each once, so the count itself is quick.
MAX_VALUES = 100_000


def _too_many_keys(count: int) -> str:
    return f"a mapping of {count:,} keys, more than the {MAX_KEYS:,} a spec or record may have"


def _json_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len(pairs) > MAX_KEYS:
        raise ValueError(_too_many_keys(len(pairs)))
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"duplicate key '{key}' (the last one would silently win)")
        data[key] = value
    return data


# C0 and C1 control characters and DEL, but tab and line feed (a note may run over lines): a YAML "\e[2J" or a JSON
# "\u001b]8;;" in a name would be sent to the user's terminal as an escape sequence by every table and title, and a
# "\f" reached matplotlib as a glyph it lacks. Refused in any string or key of a spec or record, naming the field.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _expanded_values(data: Any) -> int | None:
    """How many values ``data`` holds with every alias expanded (a node shared by aliases counts each time it is
    reached), computed over the distinct nodes, each container's count memoised by identity; None where a
    container holds itself (a recursive alias, ``a: &a [*a]``), which no spec is."""
    counts: dict[int, int] = {}
    busy: set[int] = set()  # containers whose children are being counted: reaching one again is a cycle
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        node, children_counted = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        items = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        if children_counted:
            counts[id(node)] = 1 + sum(counts.get(id(item), 1) for item in items)
            busy.discard(id(node))
            continue
        if id(node) in busy:
            return None
        if id(node) in counts:
            continue
        busy.add(id(node))
        stack.append((node, True))
        stack.extend((item, False) for item in items if isinstance(item, (dict, list)))
    return counts.get(id(data), 1)


def _refuse_alias_bombs(path: Path, data: Any) -> None:
    """YAML's aliases, expanded: a value that holds itself, or more than MAX_VALUES values in all, is refused."""
    values = _expanded_values(data)
    if values is None:
        raise UserError(f"{path}: a value holds itself (a recursive alias): no spec does")
    if values > MAX_VALUES:
        raise UserError(f"{path}: holds {values:,} values once its aliases are expanded, more than the "
                        f"{MAX_VALUES:,} a spec may have")


def _refuse_control_characters(path: Path, data: Any) -> None:
    stack: list[tuple[tuple[str, ...], Any]] = [((), data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                stack.append(((*where, str(key)), item))
                stack.append(((*where, str(key)), key))
        elif isinstance(value, list):
            stack.extend(((*where, str(i)), item) for i, item in enumerate(value))
        elif isinstance(value, str) and (found := _CONTROL.search(value)):
            field = ".".join(where) or "(top level)"
            raise UserError(f"{path}: field '{field}' holds the control character U+{ord(found.group()):04X}: "
                            f"names and text are printed to terminals and charts, which it would corrupt")


def read_json(path: Path, what: str = "a JSON object") -> dict[str, Any]:
    """Parse one JSON file into a mapping, or raise a one-line UserError.

    Refused: a key given twice in one object, the non-standard NaN/Infinity, numbers of more digits than Python
    converts (4,300), nesting deeper than the interpreter's recursion limit.
    """
    import json

    text = read_text(path)
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_json_constant)
    except json.JSONDecodeError as err:
        raise UserError(f"{path}: malformed JSON at line {err.lineno}: {err.msg}") from None
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to be a spec or a record") from None
    except ValueError as err:  # a duplicate key, NaN/Infinity, an integer of over 4,300 digits
        raise UserError(f"{path}: {' '.join(str(err).split())}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected {what}, found {type(data).__name__}")
    _refuse_control_characters(path, data)
    return data


# libyaml's parser when PyYAML was built with it (about ten times faster than the pure-Python one, which parsing
# every hardware file at each command's start made felt), under PyYAML's safe constructor. The tests load every
# data file with both parsers and compare.
_BASE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# YAML 1.2's core schema for plain scalars, in place of PyYAML's YAML 1.1 one: there, `yes`/`no`/`on`/`off` are
# booleans, `0154` is octal (108), `1:48` is sexagesimal (108) and `2026-12-02` a date. Here those are strings,
# which a number or boolean field then rejects by name. Only `true`/`false` are booleans, integers are decimal
# (a leading zero is not a number), floats are decimal (the same rule) with an optional exponent or `.inf`/`.nan`
# (which the fields reject as not finite), and `null`/`~`/empty are null.
_RESOLVERS: list[tuple[str, re.Pattern[str], str]] = [
    ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), "tTfF"),
    ("tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"), "-+0123456789"),
    ("tag:yaml.org,2002:float",
     re.compile(r"^(?:[-+]?(?:\.[0-9]+|(?:0|[1-9][0-9]*)(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
     "-+0123456789."),
    ("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), "~nN"),
    ("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), "<"),
]


def _construct_unique_mapping(self: yaml.constructor.SafeConstructor, node: yaml.MappingNode,
                              deep: bool = False) -> dict[Any, Any]:
    """SafeConstructor.construct_mapping that refuses a key given twice in one mapping (YAML forbids it; PyYAML
    lets the last one win silently), and one of more than :data:`MAX_KEYS` keys."""
    if len(node.value) > MAX_KEYS:
        raise yaml.constructor.ConstructorError(None, None, _too_many_keys(len(node.value)), node.start_mark)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = self.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: the base constructor reports it
            break
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key '{key}' (the last one would silently win)", key_node.start_mark)
        seen.add(key)
    return yaml.constructor.SafeConstructor.construct_mapping(self, node, deep=deep)


class _Loader(_BASE_LOADER):  # type: ignore[valid-type,misc]
    """The safe loader with YAML 1.2 plain scalars, which refuses a key given twice in one mapping."""

    yaml_implicit_resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}
    construct_mapping = _construct_unique_mapping


for _tag, _regexp, _first in _RESOLVERS:
    for _ch in _first:
        _Loader.yaml_implicit_resolvers.setdefault(_ch, []).append((_tag, _regexp))
    if _tag == "tag:yaml.org,2002:null":  # the empty scalar
        _Loader.yaml_implicit_resolvers.setdefault("", []).append((_tag, _regexp))

SAFE_LOADER: type[yaml.SafeLoader] = _Loader


def pure_python_loader() -> type[yaml.SafeLoader]:
    """:data:`SAFE_LOADER`'s rules on PyYAML's pure-Python parser (the tests compare the two on every file)."""

    class _PyLoader(yaml.SafeLoader):
        yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers
        construct_mapping = _Loader.construct_mapping

    return _PyLoader


def read_yaml(path: Path, loader: type[yaml.SafeLoader] | None = None) -> dict[str, Any]:
    """Parse one YAML file into a mapping, or raise a one-line UserError (``loader``: SAFE_LOADER by default)."""
    text = read_text(path, MAX_SPEC_BYTES)
    try:
        data = yaml.load(text, Loader=loader or SAFE_LOADER)  # a safe loader, C or Python
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError(f"{path}: malformed YAML{where}: {problem}") from None
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to be a spec") from None
    except ValueError as err:  # an integer of more than 4,300 digits
        raise UserError(f"{path}: {' '.join(str(err).split())}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of fields at the top level, found {type(data).__name__}")
    _refuse_alias_bombs(path, data)
    _refuse_control_characters(path, data)
    return data


M = TypeVar("M", bound=BaseModel)


# The kinds of spec file, each by the keys only it has (a config.json by transformers' keys), and the schema
# class that reads it: a file of one kind given where another is read is named as what it is, not as a list of
# unknown keys ("field 'architectures': Extra inputs are not permitted (and 33 more errors)").
_FILE_KINDS = (
    ("a model's config.json", any, ("model_type", "architectures", "num_hidden_layers"), "Model"),
    ("a GPU file", all, ("memory", "compute"), "GPU"),
    ("a model file", all, ("hidden_size", "num_layers"), "Model"),
    ("a scenario file", all, ("phase",), "Scenario"),
)
_SCHEMA_KINDS = {"GPU": "a GPU file", "Model": "a model file or config.json", "Scenario": "a scenario file"}


def _wrong_kind(model: type[BaseModel], data: dict[str, Any], source: str) -> str | None:
    """'X: this is a model's config.json, not a GPU file', where ``data`` is plainly a spec of another kind."""
    expected = _SCHEMA_KINDS.get(model.__name__)
    if expected is None:
        return None
    for kind, test, keys, schema in _FILE_KINDS:
        if schema != model.__name__ and test(k in data for k in keys):
            return f"{source}: this is {kind}, not {expected}"
    return None


def validate(model: type[M], data: dict[str, Any], source: str, names: Mapping[str, str] | None = None) -> M:
    """Validate ``data`` as ``model``; a failure becomes one line naming ``source``, the fields and the reasons
    (``names``: a field's key as the user's file spells it), or the kind of file it is where it is another's."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        if any(e.get("type") == "extra_forbidden" for e in err.errors(include_url=False, include_context=False,
                                                                      include_input=False)[:1000]):
            wrong = _wrong_kind(model, data, source)
            if wrong is not None:
                raise UserError(wrong) from None
        raise UserError(format_validation_error(source, err, names)) from None
    except RecursionError:
        raise UserError(f"{source}: nested too deeply to be a spec") from None


# Names: never empty (an empty id printed '' in every table and title) and short enough for a table cell and a
# file name (a file system refuses a name over 255 bytes).
Id = Annotated[str, Field(min_length=1, max_length=128)]
Name = Annotated[str, Field(min_length=1, max_length=256)]
Text = Annotated[str, Field(min_length=1, max_length=2000)]


def leave_out_unused(data: dict[str, Any], unused: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the keys of ``unused`` whose value is the one given there: the fields of architectures a
    spec does not use (experts, Qwen3's q/k norm) stay out of its dump, YAML and JSON, as before they existed."""
    return {k: v for k, v in data.items() if not (k in unused and v == unused[k])}


def invalid(message: str | None) -> PydanticCustomError:
    """A validation error whose message is ``message`` alone (a ValueError's reads 'Value error, …')."""
    return PydanticCustomError("invalid", message or "invalid")


def split_list(value: str | None, what: str) -> list[str] | None:
    """'a,b' -> ['a', 'b'] (a command line's comma-separated list); None stays None (not given)."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items and value.strip():
        raise UserError(f"{what}: empty list")
    return items
