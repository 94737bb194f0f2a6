"""records.read: the one reader of every saved record, by its kind (the committed H200 records of each kind)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooflinectl.errors import UserError
from rooflinectl.records.kernel import MeasurementFile
from rooflinectl.records.profile import ProfileRecord
from rooflinectl.records.read import read_measurements, read_record
from rooflinectl.records.step import WorkloadRun

RESULTS = Path(__file__).parents[2] / "docs" / "results"


@pytest.mark.parametrize(("path", "kind"), [
    ("h200-2026-12-02/copy-bf16.json", MeasurementFile),
    ("h200-2026-12-03-workload/llama-decode-b1-c1024.json", WorkloadRun),
    ("h200-2026-12-03-profile/profile-decode-b64.json", ProfileRecord),
])
def test_each_kind_reads_as_itself_and_as_measurements(path, kind):
    assert isinstance(read_record(RESULTS / path), kind)
    run = read_measurements(RESULTS / path)
    assert isinstance(run, MeasurementFile) and run.records


def test_a_malformed_record_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "workload", "schema_version": 999}))
    with pytest.raises(UserError, match="schema_version 999"):
        read_record(bad)


@pytest.mark.parametrize(("change", "reason"), [
    # Allowed by nothing a measured op may hold: bytes over a petabyte (MAX_BYTES), a rate past any GPU's spec.
    ({"bytes": 10**16}, r"field 'ops\.\d+\.bytes'"),
    ({"bytes": 10**15, "measured_s": 1e-6}, "its ops as measured records.*not a measurement"),
])
def test_a_profile_op_beyond_what_a_measured_op_holds_is_one_line(tmp_path, change, reason):
    data = json.loads((RESULTS / "h200-2026-12-03-profile/profile-decode-b64.json").read_text())
    timed = next(i for i, o in enumerate(data["ops"]) if o["measured_s"] is not None)
    data["ops"][timed].update(change)
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match=reason):
        read_measurements(path)
