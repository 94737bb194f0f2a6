"""The one reader of every record a GPU-side command saves, by its ``kind``: ``measure --save`` (no kind, or any
other), ``measure --workload --save`` ("workload") and ``profile --save`` ("profile"). Each kind's own loader
checks its schema and version; this module only dispatches, once."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from ..errors import UserError, format_validation_error
from ..specs.load import read_json
from . import profile, step
from .kernel import MeasurementFile
from .kernel import load as load_kernel


def read_record(path: Path) -> MeasurementFile | step.WorkloadRun | profile.ProfileRecord:
    """The record at ``path`` as its own type; a malformed one is a one-line UserError from its loader."""
    data = read_json(path, "a measurement record (a JSON object)")
    if profile.is_profile(data):
        return profile.load(path, data)
    if data.get("kind") == "workload":
        return step.load_workload(path)
    return load_kernel(path)


def read_measurements(path: Path) -> MeasurementFile:
    """Any record as measured records of ops (a workload run's ops, a profile's ops: each kind's conversion)."""
    record = read_record(path)
    try:
        if isinstance(record, profile.ProfileRecord):
            return record.to_measurement()
        if isinstance(record, step.WorkloadRun):
            return step.as_measurement(record)
    except ValidationError as err:  # a figure its own schema allows and a measured op's does not
        raise UserError(format_validation_error(f"{path} (its ops as measured records)", err)) from None
    return record
