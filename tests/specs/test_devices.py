"""specs.devices: the one rule that says a device is a spec's GPU, applied to what a device reports
(torch.cuda.get_device_name()), to a `measured:` section used by --calibrated, and to a record drawn by
plot --measured. Exact or nothing: another GPU's name, a slower one's included, is refused in one line."""

from __future__ import annotations

import pytest
import yaml

from helpers import assert_one_line_error, cli
from rooflinectl.errors import UserError
from rooflinectl.specs.devices import device_matches, require_device
from rooflinectl.specs.hardware import list_gpus, load_gpu
from rooflinectl.specs.measured import Measured, MeasuredInterconnect

BUNDLED = [g for g in list_gpus() if g.device_names]
# What the H100 family reports besides the SXM part: the NVL and PCIe boards and MIG slices of the SXM itself
# (NVIDIA's MIG user guide names the profiles 1g.10gb to 7g.80gb; torch appends the profile to the device's name).
NOT_THE_SXM = ["NVIDIA H100 NVL", "NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
               "NVIDIA H100 80GB HBM3 MIG 3g.40gb", "NVIDIA H100 80GB HBM3 MIG 7g.80gb", "NVIDIA H200",
               "NVIDIA A100-SXM4-80GB", "NVIDIA H800"]


def test_every_bundled_gpu_but_gaudi_states_what_its_device_reports():
    # Gaudi 3 is no CUDA device: torch.cuda names it nothing.
    assert {g.id for g in list_gpus()} - {g.id for g in BUNDLED} == {"gaudi3"}


@pytest.mark.parametrize("gpu", BUNDLED, ids=lambda g: g.id)
def test_a_bundled_gpus_device_names_are_its_own_and_no_others(gpu):
    for device in gpu.device_names:
        assert [g.id for g in list_gpus() if device_matches(device, g)] == [gpu.id]
        require_device(device, gpu, "a record")  # accepted: returns without a word


@pytest.mark.parametrize("gpu", BUNDLED, ids=lambda g: g.id)
def test_every_other_bundled_gpus_device_is_refused(gpu):
    for other in (g for g in BUNDLED if g.id != gpu.id):
        for device in other.device_names:
            with pytest.raises(UserError, match=f"measured on '{device}', not on {gpu.id} "):
                require_device(device, gpu, "a record")


@pytest.mark.parametrize("device", NOT_THE_SXM)
def test_nvl_pcie_and_mig_slices_are_not_the_h100_sxm(device):
    with pytest.raises(UserError) as err:
        require_device(device, load_gpu("h100"), "h100-sxm: the measured section (ceilings)")
    assert str(err.value) == (f"h100-sxm: the measured section (ceilings) was measured on '{device}', not on "
                              f"h100-sxm (NVIDIA H100 SXM5 80GB): measure on that GPU, or, if the device is that "
                              f"GPU, add '{device}' to its file's device_names")


@pytest.mark.parametrize("device", [None, "", "   "])
def test_a_record_that_names_no_device_is_refused(device):
    with pytest.raises(UserError, match=r"names no device it was measured on, so nothing says it is h200's"):
        require_device(device, load_gpu("h200"), "a record")


def test_a_users_own_board_is_matched_by_the_device_names_its_file_lists():
    board = load_gpu("h100").model_copy(update={"id": "my-nvl", "aliases": [], "name": "My H100 board",
                                                "device_names": ["NVIDIA H100 NVL"]})
    assert device_matches("NVIDIA H100 NVL", board)
    assert not device_matches("NVIDIA H100 80GB HBM3", board)


# --- --calibrated: a measured section recorded on another device ---------------------------------------------

def _ceilings(device: str | None, copy: float = 1400.0) -> Measured:
    # 1,400 GB/s and 250 bf16 TFLOP/s: under both A100s' datasheets (1,555 and 2,039 GB/s; 312 TFLOP/s), so the
    # datasheet check (Ceilings.above) passes them and only the device's name tells the GPUs apart.
    return Measured(device_name=device, date="2026-12-03", command="rooflinectl calibrate", torch_version="2.9",
                    copy_bandwidth_gbps=copy, tensor_tflops={"bf16": 250.0})


def test_a_slower_gpus_section_is_refused_and_the_gpus_own_is_taken():
    a100 = load_gpu("a100-80gb")
    with pytest.raises(UserError, match=r"a100-80gb: the measured section \(ceilings\) was measured on "
                                        r"'NVIDIA A100-SXM4-40GB', not on a100-80gb \(NVIDIA A100 SXM4 80GB\)"):
        a100.model_copy(update={"measured": _ceilings("NVIDIA A100-SXM4-40GB")}).roofs(calibrated=True)
    own = a100.model_copy(update={"measured": _ceilings("NVIDIA A100-SXM4-80GB")})
    assert own.roofs(calibrated=True).bandwidth_gbps == 1400.0


def test_collectives_of_another_device_are_refused():
    comm = MeasuredInterconnect.model_validate(dict(
        device_name="CPU (gloo)", gpu_count=2, backend="gloo", date="d", command="c", torch_version="2.9",
        collectives={"all_reduce": [dict(bytes=4096, time_s=1e-4, algbw_gbps=4096 / 1e-4 / 1e9,
                                         busbw_gbps=4096 / 1e-4 / 1e9)]}))
    h200 = load_gpu("h200").model_copy(update={"measured": Measured(interconnect=comm)})
    with pytest.raises(UserError, match=r"h200: the measured section \(collectives\) was measured on 'CPU \(gloo\)', "
                                        r"not on h200"):
        h200.roofs(calibrated=True)


def _gpu_file(tmp_path, base: str, measured: Measured) -> str:
    data = load_gpu(base).model_dump(exclude_none=True)
    data.update(id=f"my-{base}", aliases=[], measured=measured.model_dump(exclude_none=True))
    path = tmp_path / f"my-{base}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


@pytest.mark.parametrize(("base", "device"), [("a100-80gb", "NVIDIA A100-SXM4-40GB"),
                                              ("h100-sxm", "NVIDIA H100 NVL"),
                                              ("h100-sxm", "NVIDIA H100 80GB HBM3 MIG 1g.10gb")])
def test_analyze_calibrated_refuses_another_devices_section_in_one_line(tmp_path, base, device):
    path = _gpu_file(tmp_path, base, _ceilings(device))
    assert_one_line_error(cli("analyze", "decode", "--gpu", path, "--calibrated"),
                          f"was measured on '{device}', not on my-{base}")
    assert cli("analyze", "decode", "--gpu", path).exit_code == 0  # the datasheet's roofs need no measurement


def test_analyze_calibrated_takes_the_gpus_own_section(tmp_path):
    path = _gpu_file(tmp_path, "h100-sxm", _ceilings("NVIDIA H100 80GB HBM3"))
    result = cli("analyze", "decode", "--gpu", path, "--calibrated", "--json")
    assert result.exit_code == 0, result.output
    assert "1,400" in cli("analyze", "decode", "--gpu", path, "--calibrated").stdout


def test_a_file_calibrate_writes_under_a_new_id_keeps_its_devices_names(tmp_path):
    """write_measured drops the spec's aliases for a new id (``--gpu h200`` stays the bundled file) but keeps its
    device_names: the section it writes is then the new file's own device's."""
    from rooflinectl.specs.hardware import load_gpu_file
    from rooflinectl.specs.write import write_measured

    ceilings = _ceilings("NVIDIA H200", copy=4278.0)
    written = write_measured(load_gpu("h200"), tmp_path / "my-h200.yaml", ceilings=ceilings)
    loaded = load_gpu_file(tmp_path / "my-h200.yaml")
    assert (written.aliases, loaded.device_names) == ([], ["NVIDIA H200"])
    assert loaded.roofs(calibrated=True).bandwidth_gbps == 4278.0
