"""The device side of measure: the spec detected from the device's name (specs.hardware.match_device, the one
matcher), the device's description, and a spec that visibly is not the device."""

from __future__ import annotations

import pytest
import torch
from measure_fakes import H100, H200

from rooflinectl.errors import UserError
from rooflinectl.measure.device import detect_device_spec, spec_mismatch_notes
from rooflinectl.records.kernel import DeviceInfo
from rooflinectl.specs.devices import match_device as detect_spec


@pytest.mark.parametrize("device, spec_id", [
    ("NVIDIA H200", "h200"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),  # the SXM part's name says no form factor
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA GeForce RTX 4090", "rtx4090"),
])
def test_detect_spec_from_the_device_name(device, spec_id):
    from rooflinectl.specs.hardware import list_gpus

    assert detect_spec(device, list_gpus()).id == spec_id


@pytest.mark.parametrize("device", [
    "NVIDIA H100 NVL",  # a form factor no bundled spec names: never the SXM's numbers
    "NVIDIA A100 80GB PCIe",
    "Tesla V100-SXM2-16GB",  # the bundled V100 is the 32 GB part
    "NVIDIA GH200 480GB",  # not an H200
    "Intel Arc A770",
])
def test_detect_spec_refuses_to_guess(device):
    from rooflinectl.specs.hardware import list_gpus

    with pytest.raises(UserError, match="pass --gpu"):
        detect_spec(device, list_gpus())


def test_detect_spec_reports_a_tie():
    twin = H200.model_copy(update={"id": "h200-copy", "aliases": ["h200"]})
    with pytest.raises(UserError, match=r"matches several specs \(h200, h200-copy\)"):
        detect_spec("NVIDIA H200", [H200, twin])


def test_device_name_picks_the_spec(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    assert detect_device_spec().id == "h200"



def test_a_spec_that_is_not_the_device_is_noted():
    info = DeviceInfo(name="NVIDIA H200", sm_count=132, compute_capability="9.0")
    assert spec_mismatch_notes(H200, info) == []
    a100 = H100.model_copy(update={"id": "a100ish", "sm_count": 108, "compute_capability": "8.0"})
    assert spec_mismatch_notes(a100, info) == [
        "the spec a100ish has 108 SMs, the device 132: is --gpu right?",
        "the spec a100ish is compute capability 8.0, the device 9.0: is --gpu right?",
    ]
