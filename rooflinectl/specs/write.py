"""Writing spec files: a hardware YAML with its ``measured`` section, the one writer of that section.

``measured`` has two parts, each written by its own command: the one-GPU ceilings with where, when and how they
were measured, and the op model fitted under them (``calibrate``); and the collectives (``calibrate --comm``).
:func:`write_measured` replaces the part it is given and keeps the other as the spec it starts from holds it, so
that the two commands, run one after the other on the same file (the first one's file passed as ``--gpu``), keep
both, in either order. New ceilings without an op model drop the spec's old one: its roof times were those of the
old ceilings.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ..files import write_atomic
from .hardware import GPU
from .load import SAFE_LOADER, validate
from .measured import Measured, MeasuredInterconnect, OpModel


def _file_id(spec: GPU, out: Path) -> str:
    """The written file's id: its file name (``my-h200.yaml`` -> ``my-h200``), so that it never collides with the
    spec it came from in ``hardware list``; the spec's own id when the name is the same or not a valid id."""
    stem = re.sub(r"[^a-z0-9._-]+", "-", out.stem.lower()).strip("-._")
    return stem if re.fullmatch(r"[a-z0-9][a-z0-9._-]*", stem or "") else spec.id


def _header(spec: GPU, ceilings: Measured | None, interconnect: MeasuredInterconnect | None, out: Path) -> str:
    """The comment atop the file: what each part of ``measured`` is, who measured it, and how to use it."""
    parts, uses = [], []
    if ceilings is not None:
        parts.append(("'measured' the ceilings that",
                      f"`{ceilings.command}` measured on a {ceilings.device_name} ({ceilings.date})"))
        uses.append(f"Use them as roofs with: rooflinectl analyze --calibrated --gpu {out}")
    if interconnect is not None:
        parts.append(("'measured.interconnect' the collectives that",
                      f"`{interconnect.command}` measured on {interconnect.gpu_count} × {interconnect.device_name} "
                      f"({interconnect.backend}, {interconnect.date})"))
        uses.append(f"Time collectives with them: rooflinectl analyze --calibrated --tp N --gpu {out}")
    (what, who), *more = parts
    lines = [f"{spec.name}: the spec sheet's numbers, and under {what}", who]
    for what, who in more:
        lines[-1] += ","
        lines += [f"and under {what}", who]
    lines[-1] += "."
    return "".join(f"# {line}\n" for line in lines + uses)


def write_measured(spec: GPU, out: Path, *, ceilings: Measured | None = None, op_model: OpModel | None = None,
                   interconnect: MeasuredInterconnect | None = None) -> GPU:
    """Write ``spec`` to ``out`` with the parts of its ``measured`` section given here put in; return the GPU the
    file loads as.

    ``ceilings`` (the one-GPU ceilings and their provenance, no collectives and no op model in it) replaces the
    spec's, with ``op_model`` fitted under them or with none; ``interconnect`` replaces the spec's collectives. A
    part not given is kept (see the module's docstring). A new id (the file's name, when it is not the spec's)
    drops the spec's aliases, so that ``--gpu h200`` still means the bundled spec; the same id keeps them, so that
    a file in a folder of ROOFLINECTL_HARDWARE_PATH shadows the bundled one entirely. The text is checked by the
    rules of every spec before it is written (a file that would not load is never written), then written
    atomically (files.write_atomic).
    """
    if op_model is not None and ceilings is None:
        raise ValueError("write_measured: an op model comes with the ceilings it was fitted under")
    if ceilings is not None and (ceilings.op_model is not None or ceilings.interconnect is not None):
        raise ValueError("write_measured: give the op model as op_model= and the collectives as interconnect=")
    # The notes of a file with a new id say where it came from: the command whose part is new here.
    if ceilings is not None:
        by, date = "calibrate", ceilings.date
    elif interconnect is not None:
        by, date = "calibrate --comm", interconnect.date
    else:
        raise ValueError("write_measured: give the ceilings, the collectives or both")
    old = spec.measured
    if ceilings is None and old is not None and old.has_ceilings:
        ceilings, op_model = old, old.op_model
    if interconnect is None and old is not None:
        interconnect = old.interconnect

    section: dict[str, Any] = {}
    if ceilings is not None:
        section = ceilings.model_dump(mode="json", exclude_none=True, exclude={"op_model", "interconnect"})
    if op_model is not None:
        section["op_model"] = op_model.model_dump(mode="json", exclude_none=True)
    if interconnect is not None:
        section["interconnect"] = interconnect.model_dump(mode="json", exclude_none=True)
    data = spec.model_dump(mode="json", exclude_none=True)
    data["id"] = _file_id(spec, out)
    if data["id"] != spec.id:
        data["aliases"] = []
        origin = f"Calibrated from the spec '{spec.id}' by rooflinectl {by} on {date}."
        data["notes"] = f"{origin} {spec.notes}" if spec.notes else origin
    data["measured"] = {k: section[k] for k in Measured.model_fields if k in section}  # the schema's order

    text = _header(spec, ceilings, interconnect, out) + yaml.safe_dump(data, sort_keys=False, allow_unicode=True,
                                                                      width=110)
    gpu = validate(GPU, yaml.load(text, Loader=SAFE_LOADER), str(out))  # the same rules as load_gpu_file's
    # A unique temporary file, then os.replace: never OUT.tmp, never half a file; OUT may be the spec read (the
    # measured section merged into it is this writer's job).
    write_atomic(out, text, "-o", replaces_input=True)
    return gpu
