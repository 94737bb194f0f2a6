"""The Measurement record: its JSON round trip, one-line errors for foreign files, version 1 files (every one under
docs/results/) loaded as version 2, and the sums a fused kernel's record gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest
from measure_fakes import H100, FakeClock, FakeSoftmax, run_fake

from rooflinectl.errors import UserError
from rooflinectl.measure.request import BASELINE_CHOICES
from rooflinectl.records.kernel import (
    BASELINE_LABELS,
    SCHEMA_VERSION,
    BaselineName,
    MeasurementFile,
    RunCeilings,
    ShapeRecord,
    UnfusedOp,
    load,
    save,
)

# measure --kernel's committed records, each with its schema_version (a workload's or a profile's carry a "kind" and
# schema versions of their own; benchmark scripts' records carry neither).
RESULTS_ALL = [p for p in sorted((Path(__file__).parents[2] / "docs" / "results").glob("*/*.json"))
               if isinstance(record := json.loads(p.read_text()), dict) and "kind" not in record
               and "schema_version" in record]
# Those saved before schema 2 (docs/results/h200-2026-12-02*/); later ones are version 2.
RESULTS = [p for p in RESULTS_ALL if json.loads(p.read_text()).get("schema_version") == 1]


def test_every_baseline_has_a_label_and_a_choice():
    """BaselineName is the list: each name has its label, in the same order, and is a --baseline choice."""
    assert tuple(BASELINE_LABELS) == get_args(BaselineName)
    assert BASELINE_CHOICES == (*get_args(BaselineName), "all", "none")


def test_record_json_round_trip_and_plot_keys(tmp_path):
    run = run_fake(FakeSoftmax(), [(512, 2048)], clock=FakeClock((2e-6, 2e-6, 2e-6), (3e-6, 3e-6, 3e-6)),
                   ceilings=RunCeilings(copy_bandwidth_gbps=3000.0))
    failing = run_fake(FakeSoftmax("half"), [(4, 4)], ceilings=RunCeilings(copy_bandwidth_gbps=1.0))
    run.records += failing.records
    path = tmp_path / "r.json"
    save(run, path)
    data = json.loads(path.read_text())  # standard JSON (inf is the string "Infinity")
    assert data["gpu"]["name"] == "fake GPU"
    for rec in data["records"]:
        assert {"kernel", "op", "shape", "dtype", "flops", "bytes", "time_s"} <= set(rec)
    # Interface 5 (schema 2): the engine's op name, the shape apart (was "softmax 512x2048" in schema 1).
    assert data["records"][0]["op"] == "softmax" and data["records"][0]["shape"] == [512, 2048]
    assert data["schema_version"] == 2 and data["records"][0]["op_kind"] == "attention"
    assert data["records"][1]["correctness"]["rel_error"] == "Infinity"
    back = load(path)
    assert back == run
    assert isinstance(back, MeasurementFile)
    # What `plot --measured` reads through records.load: the spec, and each record with the engine's count.
    assert back.gpu.spec == "h100-sxm" == H100.id
    assert [(r.op, r.shape_text, r.flops, r.bytes, r.time_s) for r in back.records] == [
        ("softmax", "512x2048", 5_242_880, 4_194_304, 2e-6), ("softmax", "4x4", 80, 64, None)]


def test_loading_a_foreign_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"gpu": {"name": "x"}, "records": [], "bogus": 1}')
    with pytest.raises(UserError, match="bad.json: field 'bogus': unknown key; "):
        load(bad)
    bad.write_text("[1, 2")
    with pytest.raises(UserError, match="malformed JSON at line 1"):
        load(bad)


def test_save_to_an_unwritable_path_is_a_user_error(tmp_path):
    run = run_fake(FakeSoftmax(), [(3, 7)], timed=False, spec=None)
    with pytest.raises(UserError, match="cannot write"):
        save(run, tmp_path / "missing" / "r.json")



def test_there_are_version_1_files_to_read():
    assert len(RESULTS) >= 8


@pytest.mark.parametrize("path", [p for p in RESULTS_ALL if p not in RESULTS], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_saved_version_2_file_loads_as_written(path):
    raw = json.loads(path.read_text())
    run = load(path)
    assert raw["schema_version"] == run.schema_version == SCHEMA_VERSION
    assert [r.op for r in run.records] == [r["op"] for r in raw["records"]]


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_saved_version_1_file_loads(path):
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == 1
    run = load(path)
    assert run.schema_version == SCHEMA_VERSION == 2
    assert len(run.records) == len(raw["records"])
    for rec, old in zip(run.records, raw["records"]):
        # version 1 wrote "softmax 4096x1024": the engine's name, a space, the shape
        assert old["op"] == f"{rec.op} {rec.shape_text}" and " " not in rec.op
        assert [u.op for u in rec.unfused] == [u["op"].split(" ")[0] for u in old.get("unfused", [])]
        assert (rec.flops, rec.bytes, rec.time_s) == (old["flops"], old["bytes"], old["time_s"])
    assert run.ceilings is not None and run.ceilings.copy_bandwidth_gbps == raw["ceilings"]["copy_bandwidth_gbps"]


def test_an_unknown_schema_version_is_one_line(tmp_path):
    run = run_fake(FakeSoftmax(), [(3, 7)], timed=False, spec=None)
    path = tmp_path / "r.json"
    path.write_text(run.to_json().replace('"schema_version": 2', '"schema_version": 7'))
    with pytest.raises(UserError, match="schema_version 7: this rooflinectl reads versions 1 and 2"):
        load(path)


def test_a_fused_record_sums_what_it_replaces():
    def rec(*unfused):
        return ShapeRecord(kernel="k", op="rmsnorm_linear", shape=[1], shape_text="1", shape_format="N",
                           dtype="bf16", flops=1, bytes=1, unit="tensor", op_dtype="bf16", status="checked",
                           unfused=list(unfused))

    a = UnfusedOp(op="rmsnorm", kind="norm", flops=4, bytes=10, predicted_time_s=1e-6)
    b = UnfusedOp(op="linear", kind="linear", flops=8, bytes=30, predicted_time_s=3e-6)
    assert (rec(a, b).unfused_bytes, rec(a, b).unfused_predicted_time_s) == (40, pytest.approx(4e-6))
    assert rec(a, b.model_copy(update={"predicted_time_s": None})).unfused_predicted_time_s is None
    assert (rec().unfused_bytes, rec().unfused_predicted_time_s) == (None, None)
