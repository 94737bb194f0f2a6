"""Every hardware/*.yaml loads, explains what no datasheet gives, and keeps the published dense peaks.

The pinned values below are the published dense figures, each with the document it comes from; a change to a
GPU file that moves one of them must come with a new source, not a quiet edit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rooflinectl.errors import UserError
from rooflinectl.specs.devices import device_matches, match_device
from rooflinectl.specs.hardware import Roofs, Sourced, list_gpus, load_gpu, load_gpu_file
from rooflinectl.specs.measured import Ceilings, Measured

HARDWARE = Path(__file__).parent.parent.parent / "hardware"
FILES = sorted(HARDWARE.glob("*.yaml"))


def _id(path: Path) -> str:
    return path.stem


def _sections(gpu) -> dict[str, Sourced]:
    return {
        name: value for name in type(gpu).model_fields if isinstance(value := getattr(gpu, name), Sourced)
    }


def _all_sections(gpu) -> dict[str, Sourced]:
    """Every sourced section, the nested ones too (interconnect.scale_up, interconnect.scale_out)."""
    found = dict(_sections(gpu))
    for name, section in list(found.items()):
        for sub in type(section).model_fields:
            if isinstance(value := getattr(section, sub), Sourced):
                found[f"{name}.{sub}"] = value
    return found


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_file_loads_and_its_id_is_its_name(path):
    gpu = load_gpu_file(path)
    assert gpu.id == path.stem
    # limits may be absent (a part without SMs, or whose limits no source gives): occupancy refuses it
    assert {"memory", "compute", "interconnect"} <= set(_sections(gpu))


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_every_derived_entry_says_how(path):
    for section_name, section in _all_sections(load_gpu_file(path)).items():
        assert section.source.strip(), f"{section_name} has an empty source"
        for field, how in section.derived.items():
            assert how.startswith(("derived", "estimated")), f"{section_name}.derived.{field}: {how[:40]!r}"


def test_ids_and_aliases_are_unique_across_files():
    owner: dict[str, str] = {}
    for path in FILES:
        gpu = load_gpu_file(path)
        for name in [gpu.id, *gpu.aliases]:
            key = name.lower()  # lookup is case-insensitive
            assert key not in owner, f"'{name}' names both {owner[key]} and {path.name}"
            owner[key] = path.name


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_shared_memory_bandwidth_is_128_bytes_per_clock_per_sm(path):
    # Every derived smem bandwidth here is 32 banks x 4 B per clock per SM (CU) at the clock the tensor peaks are
    # stated at: the boost clock, or below it where NVIDIA's peak implies less (the ridge then compares two
    # rates at one clock): 989.4 TFLOP/s / (132 SMs x 4,096) = 1.83 GHz; 756 / (114 x 4,096) = 1.619;
    # 2,250 / (148 x 8,192) = 1.856 (B200 and B300); 500 / (188 x 1,024) = 2.597 (RTX PRO 6000, below the 2.617
    # its file lists as the boost clock).
    tensor_clock_mhz = {"h100-sxm": 1830, "h200": 1830, "h800": 1830, "h100-pcie": 1619, "b200": 1856, "b300": 1856,
                        "rtx-pro-6000": 2597}
    gpu = load_gpu_file(path)
    if gpu.memory.smem_bandwidth_gbps is None:
        return
    assert gpu.sm_count is not None and gpu.boost_clock_mhz is not None, "a derived bandwidth needs both"
    expected = 128 * gpu.sm_count * tensor_clock_mhz.get(gpu.id, gpu.boost_clock_mhz) * 1e6 / 1e9
    assert gpu.memory.smem_bandwidth_gbps == pytest.approx(expected, rel=5e-4)


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_limits_agree_with_memory(path):
    gpu = load_gpu_file(path)
    m, lim = gpu.memory, gpu.limits
    if lim is None:
        return
    assert m.smem_per_sm_kib is not None and m.register_file_per_sm_kib is not None  # the schema's own rule
    # The per-block maximum plus the system's reserved share fits in the SM's shared memory.
    assert lim.max_smem_per_block_kib + lim.reserved_smem_per_block_bytes / 1024 <= m.smem_per_sm_kib
    # The register file in KiB holds registers_per_sm 32-bit registers.
    assert m.register_file_per_sm_kib * 1024 / 4 == lim.registers_per_sm
    assert lim.max_registers_per_block <= lim.registers_per_sm


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_peaks_are_dense_and_ordered(path):
    c = load_gpu_file(path).compute
    t = c.tensor_tflops
    # Narrower data types never run slower on the tensor cores than wider ones.
    order = [d for d in ("fp64", "tf32", "bf16", "fp8", "fp6", "fp4") if d in t]
    assert [t[d] for d in order] == sorted(t[d] for d in order)
    if "bf16" in t and "fp16" in t:
        assert t["bf16"] == t["fp16"]
    # Tensor cores beat the vector units at the same precision.
    for dtype in ("fp64", "fp16", "bf16"):
        if dtype in t and dtype in c.vector_tflops:
            assert t[dtype] >= c.vector_tflops[dtype]


# (file id, dotted field, published value); the comment above each group names the source.
PINNED = [
    # NVIDIA A100 datasheet (2021), A100 80GB SXM: BF16 Tensor 312 TFLOPS (624 with sparsity), 2,039 GB/s.
    ("a100-80gb", "compute.tensor_tflops.bf16", 312),
    ("a100-80gb", "memory.hbm_bandwidth_gbps", 2039),
    # NVIDIA A100 whitepaper (2020), Table 1: 1555 GB/s HBM2, TF32 Tensor 156 TFLOPS dense.
    ("a100-40gb", "memory.hbm_bandwidth_gbps", 1555),
    ("a100-40gb", "compute.tensor_tflops.tf32", 156),
    # NVIDIA H100 whitepaper (2022), Table 3, H100 SXM5: BF16 989.4 dense; H100 datasheet: 3.35 TB/s.
    ("h100-sxm", "compute.tensor_tflops.bf16", 989.4),
    ("h100-sxm", "memory.hbm_bandwidth_gbps", 3350),
    # NVIDIA H100 whitepaper v1.04, Table 3, H100 PCIe: BF16 756/1513, 2039 GB/s.
    ("h100-pcie", "compute.tensor_tflops.bf16", 756),
    ("h100-pcie", "memory.hbm_bandwidth_gbps", 2039),
    # NVIDIA H200 datasheet: 141 GB HBM3e at 4.8 TB/s; BF16 1,979 TFLOPS with sparsity = 989.4 dense.
    ("h200", "memory.hbm_bandwidth_gbps", 4800),
    # The capacity is the device's own (totalGlobalMem 150,109,880,320 B), not the datasheet's "141 GB".
    ("h200", "memory.hbm_capacity_gib", 139.8),
    ("h200", "compute.tensor_tflops.bf16", 989.4),
    # NVIDIA A100 whitepaper (2020), Table 1, Tesla V100 SXM2: FP16 Tensor 125 TFLOPS, 900 GB/s.
    ("v100", "compute.tensor_tflops.fp16", 125),
    ("v100", "memory.hbm_bandwidth_gbps", 900),
    # NVIDIA Ada whitepaper, Appendix A, RTX 4090: FP16 Tensor with FP32 accumulate 165.2 dense, 1008 GB/s.
    ("rtx4090", "compute.tensor_tflops.fp16", 165.2),
    ("rtx4090", "memory.hbm_bandwidth_gbps", 1008),
    # NVIDIA L4 datasheet: FP16 Tensor 242 TFLOPS with sparsity = 121 dense, 300 GB/s.
    ("l4", "compute.tensor_tflops.fp16", 121),
    ("l4", "memory.hbm_bandwidth_gbps", 300),
    # NVIDIA L40S datasheet: FP8 Tensor 733 dense (1,466 with sparsity), 864 GB/s.
    ("l40s", "compute.tensor_tflops.fp8", 733),
    ("l40s", "memory.hbm_bandwidth_gbps", 864),
    # NVIDIA HGX B200 per-GPU specifications: FP16/BF16 4.5 PFLOPS and FP4 18 PFLOPS with sparsity, 7.7 TB/s.
    ("b200", "compute.tensor_tflops.bf16", 2250),
    ("b200", "compute.tensor_tflops.fp4", 9000),
    ("b200", "memory.hbm_bandwidth_gbps", 7700),
    # AMD ROCm 'MI300 series microarchitecture' peak table: Matrix BF16 1307.4 TFLOPS, 5.3 TB/s.
    ("mi300x", "compute.tensor_tflops.bf16", 1307.4),
    ("mi300x", "memory.hbm_bandwidth_gbps", 5300),
    ("mi300x", "limits.warp_size", 64),
    # Baseten, 'NVIDIA A10 vs A10G' (2023): A10G 24 GB GDDR6 at 600 GB/s.
    ("a10g", "memory.hbm_bandwidth_gbps", 600),
    # NVIDIA HGX B300 per-GPU specifications, numbers without sparsity (as reproduced by Verda): BF16 2.25 PF,
    # FP8 4.5 PF, FP4 14 PF, INT8 0.15 POPS (cut on Blackwell Ultra), 7.7 TB/s. Other sources: FP4 13.1 (the
    # 8-GPU table's 105 PF / 8) or 15 (the full GPU, GB300); INT8 0.125 (8-GPU table, 2 POPS sparse / 16).
    ("b300", "compute.tensor_tflops.bf16", 2250),
    ("b300", "compute.tensor_tflops.fp8", 4500),
    ("b300", "compute.tensor_tflops.fp4", 14000),
    ("b300", "compute.tensor_tflops.int8", 150),
    ("b300", "memory.hbm_bandwidth_gbps", 7700),
    # cudaGetDeviceProperties on a B300 SXM6 AC: 274,113 MiB = 267.7 GiB, not NVIDIA's "270 GB" or "288 GB".
    ("b300", "memory.hbm_capacity_gib", 267.7),
    # NVIDIA GB300 NVL72 (72 GPUs): FP4 1,080 PF dense; FP8/FP6 720 and BF16 360 PF with sparsity (vendordeep,
    # Tom's Hardware's Hot Chips 2025 table); INT8 23 POPS with sparsity (0.319 PF a package); 576 TB/s.
    ("gb300", "compute.tensor_tflops.bf16", 2500),  # 360 / 72 / 2
    ("gb300", "compute.tensor_tflops.fp8", 5000),  # 720 / 72 / 2
    ("gb300", "compute.tensor_tflops.fp4", 15000),  # 1,080 / 72, as the Blackwell Ultra blog's 15 PF dense NVFP4
    ("gb300", "compute.tensor_tflops.int8", 159.7),  # 23 / 72 / 2; other summaries: 24 POPS, 0.165 POPS
    ("gb300", "memory.hbm_bandwidth_gbps", 8000),  # 576 / 72
    # NVIDIA GB200 NVL72 (72 GPUs), with sparsity: FP4 1,440, FP8 720, BF16 360 PF, INT8 720 POPS; 576 TB/s.
    ("gb200", "compute.tensor_tflops.bf16", 2500),
    ("gb200", "compute.tensor_tflops.fp8", 5000),
    ("gb200", "compute.tensor_tflops.fp4", 10000),
    ("gb200", "compute.tensor_tflops.int8", 5000),
    ("gb200", "memory.hbm_bandwidth_gbps", 8000),
    # NVIDIA H20 specification sheet (Tom's Hardware, 2024): INT8 | FP8 296 | 296, BF16 | FP16 148 | 148 TFLOPS,
    # 96 GB HBM3 at 4.0 TB/s; dense as the press reads it (148 is 15% of the H100 SXM's dense 989).
    ("h20", "compute.tensor_tflops.bf16", 148),
    ("h20", "compute.tensor_tflops.fp8", 296),
    ("h20", "compute.tensor_tflops.int8", 296),
    ("h20", "memory.hbm_bandwidth_gbps", 4000),
    # H20-3e: the H20's sheet for its peaks; the H200's 4.8 TB/s for its HBM3e, an estimate (NVIDIA gives none).
    ("h20-3e", "compute.tensor_tflops.bf16", 148),
    ("h20-3e", "compute.tensor_tflops.fp8", 296),
    ("h20-3e", "memory.hbm_bandwidth_gbps", 4800),
    ("h20-3e", "memory.hbm_capacity_gib", 139.8),  # nvidia-smi's 143,771 MiB, as on an H200 (139.8 GiB to torch)
    # NVIDIA H800 datasheet, SXM: BF16 1,979 and FP8 3,958 with sparsity, FP64 1 TFLOPS, NVLink 400 GB/s, 3.35 TB/s.
    ("h800", "compute.tensor_tflops.bf16", 989.4),
    ("h800", "compute.tensor_tflops.fp8", 1978.9),
    ("h800", "compute.tensor_tflops.fp64", 1),
    ("h800", "interconnect.bandwidth_gbps", 400),
    ("h800", "memory.hbm_bandwidth_gbps", 3350),
    # GeForce RTX 5090: NVIDIA's 3,352 AI TOPS (FP4, sparse) and the whitepaper's FP16 838.4 / FP8 1,676.8 sparse at
    # FP16 accumulate (Spheron's reproduction); GeForce halves FP16/BF16 and FP8 with FP32 accumulate; 1,792 GB/s.
    ("rtx5090", "compute.tensor_tflops.bf16", 209.5),  # FP32 accumulate: 838.4 / 2 (sparse) / 2 (accumulate)
    ("rtx5090", "compute.tensor_tflops.fp8", 419),  # FP32 accumulate: 1,676.8 / 2 / 2
    ("rtx5090", "compute.tensor_tflops.fp4", 1676),  # 3,352 / 2
    ("rtx5090", "compute.tensor_tflops.int8", 838),
    ("rtx5090", "memory.hbm_bandwidth_gbps", 1792),
    # RTX PRO 6000 Blackwell: NVIDIA's 4,000 AI TOPS (FP4, sparse) and 125 TFLOPS FP32; the rest derived from the
    # FP4 figure at RTX Blackwell's per-clock ratios, full rate with FP32 accumulate (TechPowerUp: 503.8 BF16).
    ("rtx-pro-6000", "compute.tensor_tflops.fp4", 2000),  # 4,000 / 2
    ("rtx-pro-6000", "compute.tensor_tflops.bf16", 500),  # FP4 / 4, FP32 accumulate
    ("rtx-pro-6000", "compute.tensor_tflops.fp8", 1000),
    ("rtx-pro-6000", "compute.vector_tflops.fp32", 125),
    ("rtx-pro-6000", "memory.hbm_bandwidth_gbps", 1792),
    # NVIDIA L20 specification sheet (Tom's Hardware, 2024): INT8 | FP8 239 | 239, BF16 | FP16 119.5 | 119.5 TFLOPS,
    # 48 GB GDDR6 at 864 GB/s; dense as the press reads it (BF16 about 32% of the L40S's dense).
    ("l20", "compute.tensor_tflops.bf16", 119.5),
    ("l20", "compute.tensor_tflops.fp8", 239),
    ("l20", "compute.tensor_tflops.int8", 239),
    ("l20", "memory.hbm_bandwidth_gbps", 864),
    # AMD Instinct MI325X data sheet (as awesomeagents.ai reproduces it): Matrix BF16 1307.4, FP8 2614.9 TFLOPS
    # dense (5229.8 with sparsity), INT8 2614.9 TOPS; 6 TB/s; ROCm's specifications table: 256 GiB.
    ("mi325x", "compute.tensor_tflops.bf16", 1307.4),
    ("mi325x", "compute.tensor_tflops.fp8", 2614.9),
    ("mi325x", "compute.tensor_tflops.int8", 2614.9),
    ("mi325x", "memory.hbm_bandwidth_gbps", 6000),
    ("mi325x", "memory.hbm_capacity_gib", 256),
    # AMD Instinct MI355X (ISSCC 2026 as reported: 256 CUs, 8,192 FP8 FLOP/clk/CU, "five petaflops"; 2.4 GHz):
    # dense FP8 5,033, BF16 2,517, MXFP4 10,066 (the "20 PF" figures are sparse); 288 GB HBM3E at 8 TB/s.
    ("mi355x", "compute.tensor_tflops.fp8", 5033.2),  # 256 x 8,192 x 2.4 GHz
    ("mi355x", "compute.tensor_tflops.bf16", 2516.6),  # half of FP8, as on CDNA 3
    ("mi355x", "compute.tensor_tflops.fp4", 10066.3),  # twice FP8: "up to 10 PFLOPS FP4"
    ("mi355x", "memory.hbm_bandwidth_gbps", 8000),
    ("mi355x", "memory.hbm_capacity_gib", 288),  # the device's own: 8 CPX partitions of 36.0 GiB
    # Intel Gaudi 3 (Hot Chips 2024, 'Intel Gaudi 3 Spec'): BF16 and FP8 Matrix 1835 TFLOPs, BF16 Vector 28.7,
    # 128 GB HBM2e at 3.67 TB/s, 96 MB SRAM at 12.8 TB/s; no SMs, so no SM count and no occupancy limits.
    ("gaudi3", "compute.tensor_tflops.bf16", 1835),
    ("gaudi3", "compute.tensor_tflops.fp8", 1835),
    ("gaudi3", "compute.vector_tflops.bf16", 28.7),
    ("gaudi3", "memory.hbm_bandwidth_gbps", 3670),
    ("gaudi3", "memory.l2_size_mib", 96),
    ("gaudi3", "interconnect.bandwidth_gbps", 1050),  # Intel: 21 x 200 Gb/s = 525 GB/s each way
]


@pytest.mark.parametrize(("gpu_id", "field", "value"), PINNED, ids=[f"{g}:{f}" for g, f, _ in PINNED])
def test_published_values(gpu_id, field, value):
    node = load_gpu_file(HARDWARE / f"{gpu_id}.yaml")
    for part in field.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    assert node == pytest.approx(value)


def test_only_supported_tensor_types_are_listed():
    # Volta tensor cores take FP16 only; FP8 arrives with Ada/Hopper, FP4 with Blackwell; Ampere has FP64 tensor
    # cores only on GA100.
    types = {p.stem: set(load_gpu_file(p).compute.tensor_tflops) for p in FILES}
    assert types["v100"] == {"fp16"}
    for ampere in ("a100-40gb", "a100-80gb", "a10g"):
        assert not types[ampere] & {"fp8", "fp4"}
    assert "fp64" not in types["a10g"]
    for ada in ("l4", "l40s", "rtx4090", "l20"):
        assert "fp8" in types[ada] and "fp4" not in types[ada] and "fp64" not in types[ada]
    assert "fp4" in types["b200"]
    # FP4 tensor cores: Blackwell (data-centre and RTX) and CDNA 4.
    assert {g for g, t in types.items() if "fp4" in t} == {"b200", "b300", "gb300", "gb200", "rtx5090",
                                                               "rtx-pro-6000", "mi355x"}


# --- the one merge rule of measured ceilings -------------------------------------------------------------------

SPEC = Roofs(gpu_id="t", label="spec", bandwidth_gbps=3350.0, tensor_tflops={"bf16": 989.0, "fp8": 1979.0},
             vector_tflops={"fp32": 67.0, "bf16": 134.0}, l2_bandwidth_gbps=12000.0, smem_bandwidth_gbps=33454.0)


def test_with_ceilings_replaces_what_was_measured_and_keeps_the_rest():
    roofs = SPEC.with_ceilings(Ceilings(copy_bandwidth_gbps=3000.0, tensor_tflops={"bf16": 700.0},
                                        vector_tflops={"fp32": 50.0}))
    assert roofs.label == "measured"
    assert roofs.bandwidth_gbps == 3000.0
    assert roofs.tensor_tflops == {"bf16": 700.0, "fp8": 1979.0}
    assert roofs.vector_tflops == {"fp32": 50.0, "bf16": 134.0}
    # L2 and shared memory are never measured: the spec's figures stay.
    assert (roofs.l2_bandwidth_gbps, roofs.smem_bandwidth_gbps) == (12000.0, 33454.0)
    assert SPEC.label == "spec" and SPEC.tensor_tflops["bf16"] == 989.0  # the spec's roofs are left as they were


def test_with_ceilings_without_a_copy_keeps_the_spec_bandwidth():
    roofs = SPEC.with_ceilings(Ceilings(tensor_tflops={"fp8": 1500.0}))
    assert roofs.bandwidth_gbps == 3350.0
    assert roofs.tensor_tflops == {"bf16": 989.0, "fp8": 1500.0}


def test_calibrated_gpu_roofs_are_the_spec_with_its_measured_section():
    measured = Measured(device_name="NVIDIA H100 80GB HBM3", date="2026-01-01", command="rooflinectl calibrate",
                        torch_version="2.5", copy_bandwidth_gbps=2900.0, tensor_tflops={"bf16": 720.0},
                        vector_tflops={"fp32": 51.0})
    gpu = load_gpu("h100").model_copy(update={"measured": measured})
    assert gpu.roofs(calibrated=True) == gpu.roofs().with_ceilings(measured)
    assert gpu.roofs(calibrated=True).vector_tflops["fp32"] == 51.0


def test_a_measured_section_faster_than_the_datasheet_is_another_gpus():
    """An A100 80 GB file (2,039 GB/s, 312 bf16 TFLOP/s) carrying an H200's measurements (a copy at 4,281 GB/s,
    bf16 at 788) is refused for --calibrated by the device's name (tests/specs/test_devices.py); under the A100's
    own name, by its figures, each ceiling named; 5% past the datasheet (2,141 GB/s) still passes: 2,100 does,
    2,150 does not."""
    h200_run = Measured(device_name="NVIDIA A100-SXM4-80GB", date="2026-12-03", command="rooflinectl calibrate",
                        torch_version="2.11", copy_bandwidth_gbps=4281.0, tensor_tflops={"bf16": 788.0})
    a100 = load_gpu("a100-80gb").model_copy(update={"measured": h200_run})
    with pytest.raises(UserError, match="measured on 'NVIDIA H200', not on a100-80gb"):
        a100.model_copy(update={"measured": h200_run.model_copy(update={"device_name": "NVIDIA H200"})}).roofs(
            calibrated=True)
    with pytest.raises(UserError, match=r"measured on NVIDIA A100-SXM4-80GB\) is faster than this GPU's datasheet allows: "
                                        r"a copy at 4,281 GB/s against HBM's 2,039; bf16 tensor at 788 TFLOP/s "
                                        r"against the datasheet's 312"):
        a100.roofs(calibrated=True)
    for copy, ok in ((2100.0, True), (2150.0, False)):
        close = h200_run.model_copy(update={"copy_bandwidth_gbps": copy, "tensor_tflops": {"bf16": 290.0}})
        gpu = load_gpu("a100-80gb").model_copy(update={"measured": close})
        if ok:
            assert gpu.roofs(calibrated=True).bandwidth_gbps == copy
        else:
            with pytest.raises(UserError, match="faster than this GPU's datasheet"):
                gpu.roofs(calibrated=True)


def test_measured_requires_the_copy_bandwidth():
    with pytest.raises(ValueError):
        Measured.model_validate({"device_name": "x", "date": "d", "command": "c", "torch_version": "2.5"})


def test_uncalibrated_gpu_asked_for_measured_roofs_is_a_user_error():
    with pytest.raises(UserError, match="no measured ceilings"):
        load_gpu("h100").roofs(calibrated=True)


# --- the one device-to-spec matcher ------------------------------------------------------------------------------


@pytest.mark.parametrize(("device", "spec_id"), [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA H200", "h200"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    # what the new parts report (torch.cuda.get_device_name / nvidia-smi), as recorded in the files' sources
    ("NVIDIA B300 SXM6 AC", "b300"),
    ("NVIDIA GB300", "gb300"),
    ("NVIDIA GB200", "gb200"),
    ("NVIDIA H20", "h20"),
    ("NVIDIA H20-3e", "h20-3e"),
    ("NVIDIA H800", "h800"),
    ("NVIDIA GeForce RTX 5090", "rtx5090"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000"),
    ("NVIDIA L20", "l20"),
])
def test_match_device_finds_exactly_the_right_spec(device, spec_id):
    gpus = list_gpus()
    assert match_device(device, gpus).id == spec_id
    assert device_matches(device, load_gpu(spec_id))


def test_device_matches_refuses_another_form_factor_or_memory_size():
    assert not device_matches("NVIDIA H100 PCIe", load_gpu("h100-sxm"))
    # the other editions of a part run other clocks: not this file's numbers
    assert not device_matches("NVIDIA RTX PRO 6000 Blackwell Server Edition", load_gpu("rtx-pro-6000"))
    assert not device_matches("NVIDIA H20", load_gpu("h20-3e"))
    assert not device_matches("NVIDIA B200", load_gpu("gb200"))
    assert not device_matches("NVIDIA A100-SXM4-40GB", load_gpu("a100-80gb"))
    assert not device_matches("NVIDIA H200", load_gpu("h100-sxm"))


def test_match_device_without_a_match_or_with_a_tie_is_a_user_error():
    with pytest.raises(UserError, match="no hardware spec matches"):
        match_device("Some Accelerator 9000", list_gpus())
    h200 = load_gpu("h200")
    twin = h200.model_copy(update={"id": "h200-twin", "aliases": ["h200"]})
    with pytest.raises(UserError, match="several specs"):
        match_device("NVIDIA H200", [h200, twin])


def test_derivation_tells_derived_from_estimated_from_the_spec_sheet():
    h100 = load_gpu("h100")
    assert h100.memory.derivation("smem_bandwidth_gbps") == "derived"
    assert h100.memory.derivation("hbm_bandwidth_gbps") is None
    estimated = [(g.id, f) for g in list_gpus() for f, how in g.memory.derived.items()
                 if how.lower().startswith("estimated")]
    assert estimated, "some bundled file estimates a number"
    for gpu_id, field in estimated:
        assert load_gpu(gpu_id).memory.derivation(field) == "estimated"



def test_capacity_bytes_is_the_files_gib_in_bytes():
    """The file's GiB × 2**30: H100's 80 GiB is 85,899,345,920 B; H200's 139.8 GiB is not a whole number of GiB."""
    assert load_gpu("h100").capacity_bytes == 80 * 2**30 == 85_899_345_920
    assert load_gpu("h200").capacity_bytes == 139.8 * 2**30

def test_the_largest_shared_memory_per_block_comes_from_the_spec():
    # The kernels' tile choice reads this instead of a Hopper constant (227 KiB, CUDA guide's table).
    assert load_gpu("h100").limits.max_smem_per_block_bytes == 227 * 1024
    assert load_gpu("h200").limits.max_smem_per_block_bytes == 227 * 1024
    assert load_gpu("a100").limits.max_smem_per_block_bytes == 163 * 1024


def _yaml_names(path):
    import yaml

    from rooflinectl.specs.load import SAFE_LOADER

    data = yaml.load(path.read_text(), Loader=SAFE_LOADER)
    return [n for n in [data.get("id"), *(data.get("aliases") or [])] if isinstance(n, str)]


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_the_cheap_name_scan_agrees_with_yaml(path):
    from rooflinectl.specs.names import file_names as _names

    assert _names(path) == _yaml_names(path)


@pytest.mark.parametrize("head", [
    "id: x1\naliases: [a, 'b c', \"4090\", yes, 12]\n",  # a boolean and a number: not names
    "id: x1\naliases:\n  - a\n  - b\n",  # a block list: read by YAML
    "id: 'x1'  # quoted, with a comment\n",
    "id: x1\naliases: [a, [b]]\n",
    "id: x1#2\naliases: [a#b, c]  # a '#' without a space before it is part of the name\n",
])
def test_the_cheap_name_scan_falls_back_to_yaml(tmp_path, head):
    from rooflinectl.specs.names import file_names as _names

    path = tmp_path / "x1.yaml"
    path.write_text(head + "name: X\n")
    assert _names(path) == _yaml_names(path)


@pytest.mark.parametrize("section, field, value, reason", [
    ("memory", "hbm_bandwidth_gbps", float("inf"), "finite"),
    ("memory", "hbm_bandwidth_gbps", 1e-320, "greater than or equal to"),
    ("memory", "hbm_bandwidth_gbps", 1e30, "less than or equal to"),
    ("memory", "hbm_bandwidth_gbps", True, "valid number"),
    ("memory", "hbm_capacity_gib", float("nan"), "finite"),
    ("memory", "l2_size_mib", "50", "valid number"),
    ("limits", "registers_per_sm", 1024, "max_registers_per_block exceeds registers_per_sm"),
    ("limits", "max_smem_per_block_kib", 500.0, "exceeds memory.smem_per_sm_kib"),
    (None, "sm_count", True, "valid integer"),
    (None, "sm_count", "132", "valid integer"),
])
def test_non_finite_absurd_coerced_and_inconsistent_numbers_are_refused(tmp_path, section, field, value, reason):
    """Issue 18: each of these loaded and printed wrong numbers with exit 0 (inf bandwidth: 'ridge 0'; 1e-320:
    'nan%'; sm_count true read as 1; the block larger than its SM: '0 blocks per SM')."""
    import yaml

    from rooflinectl.specs.hardware import load_gpu_file

    data = yaml.safe_load((HARDWARE / "h100-sxm.yaml").read_text())
    (data[section] if section else data)[field] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match=reason):
        load_gpu_file(path)


@pytest.mark.parametrize("text, reason", [
    ("sm_count: yes", "valid integer"),  # YAML 1.1's boolean: a string here, refused by name
    ("sm_count: 0154", "valid integer"),  # YAML 1.1's octal (108)
    ("sm_count: 1:48", "valid integer"),  # YAML 1.1's sexagesimal (108)
    ("sm_count: 132\nsm_count: 133", "duplicate key 'sm_count'"),
])
def test_yaml_11_surprises_and_duplicate_keys_are_refused(tmp_path, text, reason):
    from rooflinectl.specs.hardware import load_gpu_file

    src = (HARDWARE / "h100-sxm.yaml").read_text()
    lines = [line for line in src.splitlines() if not line.startswith("sm_count:")]
    path = tmp_path / "bad.yaml"
    path.write_text("\n".join(lines) + "\n" + text + "\n")
    with pytest.raises(UserError, match=reason):
        load_gpu_file(path)


def test_a_name_too_long_for_the_system_is_an_unknown_gpu_not_a_traceback():
    """pathlib's is_file raises ENAMETOOLONG; the lookup asks files.is_file once, through looks_like_path."""
    with pytest.raises(UserError, match="unknown GPU"):
        load_gpu("h" * 300)


# --- a part without SM-level figures ------------------------------------------------------------------------------

SM_LEVEL = ("sm_count", "boost_clock_mhz", "limits")
SM_MEMORY = ("smem_per_sm_kib", "l1_smem_per_sm_kib", "smem_bandwidth_gbps", "register_file_per_sm_kib")


def _without_sm_level(tmp_path, drop_l2=False) -> Path:
    """hardware/h100-sxm.yaml with every SM-level figure taken out, as a part without SMs (Gaudi) has none."""
    import yaml

    data = yaml.safe_load((HARDWARE / "h100-sxm.yaml").read_text())
    data["id"], data["aliases"] = "no-sms", []
    for key in SM_LEVEL:
        data.pop(key)
    for key in SM_MEMORY + (("l2_size_mib", "l2_bandwidth_gbps") if drop_l2 else ()):
        data["memory"].pop(key)
        data["memory"]["derived"].pop(key, None)
    path = tmp_path / "no-sms.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_part_without_sm_level_figures_loads_and_analyzes(tmp_path):
    from rooflinectl.engine.hierarchy import hierarchy
    from rooflinectl.engine.roofline import analyze
    from rooflinectl.specs.scenario import resolve_workload

    gpu = load_gpu_file(_without_sm_level(tmp_path))
    assert gpu.sm_count is None and gpu.limits is None and gpu.memory.smem_per_sm_kib is None
    h = hierarchy(gpu)
    # HBM and L2 stay (chip-wide); the SM's own levels and every per-SM figure go.
    assert [lv.name for lv in h.levels] == ["HBM", "L2"]
    assert h.sm_count is None and all(lv.per_sm_bytes is None for lv in h.levels)
    assert all(c.per_sm_tflops is None for c in h.compute)
    assert analyze(resolve_workload("decode", model="llama-3-8b"), gpu).totals.time_s > 0


def test_hardware_show_of_a_part_without_sm_level_figures(tmp_path):
    from helpers import cli

    result = cli("hardware", "show", str(_without_sm_level(tmp_path, drop_l2=True)))
    assert result.exit_code == 0, result.output
    assert "SMs × boost clock" not in result.stdout and "limits / SM" not in result.stdout
    assert "no SM count in this GPU file" in result.stdout
    # sources numbered without the missing limits: memory [1], compute [2], interconnect [3]
    assert "[3] NVIDIA H100 Tensor Core GPU datasheet (2023), SXM column: NVLink" in result.stdout
    assert "(int8: TOPS) [2]:" in result.stdout


def test_occupancy_says_in_one_line_that_it_does_not_apply(tmp_path):
    from helpers import assert_one_line_error, cli

    result = cli("occupancy", "--gpu", str(_without_sm_level(tmp_path)), "--threads", "256", "--regs", "64")
    assert_one_line_error(result, "occupancy does not apply to no-sms", "no SM-level limits")


@pytest.mark.parametrize("drop, reason", [
    ("sm_count", "limits are given without sm_count"),
    ("smem_per_sm_kib", "limits are given without memory.smem_per_sm_kib"),
    ("l2_size_mib", "l2_bandwidth_gbps is given without l2_size_mib"),
])
def test_sm_level_figures_come_with_what_reads_them(tmp_path, drop, reason):
    import yaml

    data = yaml.safe_load((HARDWARE / "h100-sxm.yaml").read_text())
    section = data if drop == "sm_count" else data["memory"]
    section.pop(drop)
    section.get("derived", {}).pop(drop, None)
    if drop == "smem_per_sm_kib":
        data["memory"].pop("smem_bandwidth_gbps")
        data["memory"]["derived"].pop("smem_bandwidth_gbps")
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match=reason):
        load_gpu_file(path)


# --- the scale-up domain and the scale-out network ---------------------------------------------------------------


def test_scale_up_and_scale_out_load_with_their_sources(tmp_path):
    import yaml

    data = yaml.safe_load((HARDWARE / "h100-sxm.yaml").read_text())
    data["interconnect"]["scale_up"] = {"source": "a datasheet", "gpus": 8, "topology": "switch"}
    data["interconnect"]["scale_out"] = {"source": "a datasheet", "name": "InfiniBand NDR", "bandwidth_gbit_s": 400,
                                         "latency_us": 5, "derived": {"latency_us": "estimated: a guess"}}
    path = tmp_path / "scaled.yaml"
    path.write_text(yaml.safe_dump(data))
    ic = load_gpu_file(path).interconnect
    assert ic.scale_up.gpus == 8
    # A NIC's 400 Gb/s (bits, one way) is 50 GB/s one way: the unit the other roofs are in.
    assert ic.scale_out.bandwidth_gbps == 50
    assert ic.scale_out.derivation("latency_us") == "estimated"
    data["interconnect"]["scale_out"].pop("source")
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match="source"):
        load_gpu_file(path)


@pytest.mark.parametrize(("scale_up", "message"), [
    ({"source": "a datasheet", "gpus": 8}, "a domain of 8 GPUs states its topology: 'switch'"),
    ({"source": "a datasheet", "gpus": 1, "topology": "mesh"}, "topology is for a domain of more than one GPU"),
    ({"source": "a datasheet", "gpus": 8, "topology": "ring"}, "topology"),
])
def test_a_domain_of_several_gpus_states_its_topology_in_one_line(tmp_path, scale_up, message):
    import yaml

    data = yaml.safe_load((HARDWARE / "h100-sxm.yaml").read_text())
    data["interconnect"]["scale_up"] = scale_up
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match=message) as error:
        load_gpu_file(path)
    assert "\n" not in str(error.value) and "interconnect.scale_up" in str(error.value)


def test_a_mesh_gives_a_group_its_links_share():
    """MI355X: 7 xGMI links, one to each other GPU of 8: a group of g reaches g − 1 of them; NVSwitch any."""
    mesh = load_gpu("mi355x").interconnect.scale_up
    assert mesh.topology == "mesh"
    assert [mesh.share(g) for g in (2, 4, 8)] == [1 / 7, 3 / 7, 1.0]
    switch = load_gpu("h100").interconnect.scale_up
    assert [switch.share(g) for g in (2, 4, 8)] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_every_file_states_its_scale_up_domain(path):
    """Each file says how many GPUs its interconnect joins (a PCIe card: 1, its peers over PCIe alone), and a
    scale-out network, where it gives one, runs slower than the domain's own link (else it would not be 'out')."""
    ic = load_gpu_file(path).interconnect
    assert ic is not None and ic.scale_up is not None, "no scale_up: how many GPUs share this link's domain?"
    if ic.link == "pcie":
        assert ic.scale_up.gpus == 1
    if ic.scale_out is not None:
        assert ic.scale_out.bandwidth_gbps < ic.per_direction_gbps
        assert ic.scale_out.derivation("latency_us") == "estimated"


def test_an_fp6_peak_loads_and_shows(tmp_path):
    """fp6 is a tensor data type of Blackwell and CDNA 4; no workload computes in it, so it is shown, not placed."""
    import yaml

    from helpers import cli

    data = yaml.safe_load((HARDWARE / "b200.yaml").read_text())
    data["compute"]["tensor_tflops"]["fp6"] = 4500
    path = tmp_path / "fp6.yaml"
    path.write_text(yaml.safe_dump(data))
    assert load_gpu_file(path).compute.tensor_tflops["fp6"] == 4500
    result = cli("hardware", "show", str(path))
    assert result.exit_code == 0 and "fp6" in result.stdout


def test_gaudi3_has_no_sm_level_figures_and_occupancy_says_so():
    """A part without SMs: no SM count, clock, limits or SM memory, and the calculator refuses in one line."""
    from helpers import assert_one_line_error, cli

    gaudi = load_gpu("gaudi3")
    assert (gaudi.sm_count, gaudi.boost_clock_mhz, gaudi.limits, gaudi.memory.smem_per_sm_kib) == (None,) * 4
    result = cli("occupancy", "--gpu", "gaudi3", "--threads", "256", "--regs", "64")
    assert_one_line_error(result, "occupancy does not apply to gaudi3", "no SM-level limits")


def test_a_user_file_with_malformed_aliases_spoils_no_other_lookup(tmp_path, monkeypatch):
    """The catalog names a user file by its id and aliases without validating it: ``aliases: true`` names nothing
    (the fuzz's find: a TypeError escaped every --gpu lookup), and the file itself is refused when asked for."""
    from rooflinectl.errors import UserError
    from rooflinectl.specs.hardware import HARDWARE_PATH_ENV, load_gpu

    (tmp_path / "x.yaml").write_text("id: yes\naliases: true\n")
    monkeypatch.setenv(HARDWARE_PATH_ENV, str(tmp_path))
    assert load_gpu("h100").id == "h100-sxm"
    with pytest.raises(UserError, match="aliases"):
        load_gpu("yes")
