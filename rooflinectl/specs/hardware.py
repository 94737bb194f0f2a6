"""GPU specs: the pydantic model of ``hardware/*.yaml``, loading, and lookup by id, alias or path.

Units are in the field names. Rates are decimal: ``*_gbps`` is 1e9 bytes/s, ``*_tflops`` 1e12 operations/s
(for int8, TOPS). Sizes are binary, as the vendors' "80 GB", "50 MB L2" and "228 KB per SM" really are:
``*_gib`` 2**30 bytes, ``*_mib`` 2**20, ``*_kib`` 2**10.
Every section carries a ``source``; a number that no datasheet gives is listed under the section's ``derived``
with how it was obtained. Peaks are dense: sparse figures are never used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from ..errors import UserError, closest
from .load import Strict, looks_like_path, read_yaml, search_dirs, validate

HARDWARE_PATH_ENV = "ROOFLINECTL_HARDWARE_PATH"

TensorDType = Literal["fp64", "tf32", "fp16", "bf16", "fp8", "int8", "fp4"]
VectorDType = Literal["fp64", "fp32", "fp16", "bf16"]


class Sourced(Strict):
    """A section of numbers that share a source. ``derived`` maps a field to how it was derived or estimated."""

    source: str = Field(min_length=1)
    derived: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _derived_names_fields(self):
        numbers = {n for n in type(self).model_fields if n not in ("source", "derived")}
        for name in self.derived:
            if name not in numbers:
                raise ValueError(f"'derived' names '{name}', which is not a field of this section")
            if getattr(self, name) is None:
                raise ValueError(f"'derived' explains '{name}', which has no value")
        return self


class Memory(Sourced):
    hbm_type: str
    hbm_capacity_gib: PositiveFloat
    hbm_bandwidth_gbps: PositiveFloat
    l2_size_mib: PositiveFloat
    l2_bandwidth_gbps: PositiveFloat | None = None
    # Largest shared memory (SRAM) one SM can give to its blocks, and the L1 + shared memory array it is carved from.
    smem_per_sm_kib: PositiveFloat
    l1_smem_per_sm_kib: PositiveFloat
    # Aggregate shared-memory bandwidth over all SMs (bytes per clock per SM × SMs × clock): always derived.
    smem_bandwidth_gbps: PositiveFloat | None = None
    register_file_per_sm_kib: PositiveFloat

    @model_validator(mode="after")
    def _smem_fits_l1(self):
        if self.smem_per_sm_kib > self.l1_smem_per_sm_kib:
            raise ValueError("smem_per_sm_kib is larger than the L1 + shared memory array l1_smem_per_sm_kib")
        return self


class Limits(Sourced):
    """The execution limits that decide occupancy (CUDA programming guide, 'Compute capabilities' table)."""

    warp_size: PositiveInt
    max_threads_per_block: PositiveInt
    max_threads_per_sm: PositiveInt
    max_warps_per_sm: PositiveInt
    max_blocks_per_sm: PositiveInt
    registers_per_sm: PositiveInt  # 32-bit registers
    max_registers_per_block: PositiveInt
    max_registers_per_thread: PositiveInt
    register_alloc_unit: PositiveInt  # registers are allocated per warp in units of this many
    max_smem_per_block_kib: PositiveFloat  # with the opt-in dynamic limit
    smem_alloc_unit_bytes: PositiveInt
    reserved_smem_per_block_bytes: NonNegativeInt  # the system's share of each block's shared memory

    @model_validator(mode="after")
    def _consistent(self):
        if self.max_threads_per_sm != self.max_warps_per_sm * self.warp_size:
            raise ValueError("max_threads_per_sm must equal max_warps_per_sm × warp_size")
        if self.max_threads_per_block > self.max_threads_per_sm:
            raise ValueError("max_threads_per_block exceeds max_threads_per_sm")
        return self


class Compute(Sourced):
    """Dense peak throughput: tensor (matrix) units per data type, and the plain vector units."""

    tensor_tflops: dict[TensorDType, PositiveFloat]
    vector_tflops: dict[VectorDType, PositiveFloat]

    @model_validator(mode="after")
    def _has_fp32(self):
        if "fp32" not in self.vector_tflops:
            raise ValueError("vector_tflops must give fp32, the rate of elementwise work")
        return self


class Interconnect(Sourced):
    name: str
    bandwidth_gbps: PositiveFloat  # total, both directions, per GPU


class Measured(Strict):
    """Ceilings measured on a real device by ``rooflinectl calibrate``."""

    device_name: str
    date: str
    command: str
    torch_version: str
    triton_version: str | None = None
    driver: str | None = None
    copy_bandwidth_gbps: PositiveFloat  # bytes read + bytes written of a large device-to-device copy
    tensor_tflops: dict[TensorDType, PositiveFloat] = Field(default_factory=dict)
    vector_tflops: dict[VectorDType, PositiveFloat] = Field(default_factory=dict)


class GPU(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    aliases: list[str] = Field(default_factory=list)
    name: str
    vendor: str
    architecture: str
    compute_capability: str | None = None
    sm_count: PositiveInt  # streaming multiprocessors (NVIDIA) or compute units (AMD)
    boost_clock_mhz: PositiveFloat
    memory: Memory
    limits: Limits
    compute: Compute
    interconnect: Interconnect | None = None
    measured: Measured | None = None
    notes: str | None = None

    def roofs(self, calibrated: bool = False) -> Roofs:
        """The roofs an operation is placed under: the spec sheet's, or the measured ceilings."""
        if not calibrated:
            return Roofs(
                gpu_id=self.id,
                label="spec",
                bandwidth_gbps=self.memory.hbm_bandwidth_gbps,
                tensor_tflops=dict(self.compute.tensor_tflops),
                vector_tflops=dict(self.compute.vector_tflops),
                l2_bandwidth_gbps=self.memory.l2_bandwidth_gbps,
                smem_bandwidth_gbps=self.memory.smem_bandwidth_gbps,
            )
        if self.measured is None:
            raise UserError(
                f"{self.id} has no measured ceilings: run 'rooflinectl calibrate -o FILE' on that GPU "
                f"and pass --gpu FILE"
            )
        m = self.measured
        return Roofs(
            gpu_id=self.id,
            label="measured",
            bandwidth_gbps=m.copy_bandwidth_gbps,
            # A data type not calibrated keeps its spec peak: better a known number than a guessed one.
            tensor_tflops={**self.compute.tensor_tflops, **m.tensor_tflops},
            vector_tflops={**self.compute.vector_tflops, **m.vector_tflops},
            l2_bandwidth_gbps=self.memory.l2_bandwidth_gbps,
            smem_bandwidth_gbps=self.memory.smem_bandwidth_gbps,
        )


class Roofs(Strict):
    """Everything the roofline needs of a GPU: one memory roof (HBM) and the compute roofs per data type."""

    gpu_id: str
    label: Literal["spec", "measured"]
    bandwidth_gbps: float
    tensor_tflops: dict[str, float]
    vector_tflops: dict[str, float]
    l2_bandwidth_gbps: float | None = None
    smem_bandwidth_gbps: float | None = None

    @property
    def bandwidth(self) -> float:
        """HBM bandwidth in bytes/s (decimal: 1 GB/s = 1e9 B/s)."""
        return self.bandwidth_gbps * 1e9

    def peak(self, dtype: str, unit: Literal["tensor", "vector"]) -> float:
        """Peak FLOP/s of ``unit`` for ``dtype``; a data type the GPU has no peak for is a UserError."""
        table = self.tensor_tflops if unit == "tensor" else self.vector_tflops
        if dtype not in table:
            have = ", ".join(sorted(table))
            kind = "tensor-core" if unit == "tensor" else "vector-unit"
            raise UserError(f"{self.gpu_id} has no {kind} peak for {dtype} (it has: {have})")
        return table[dtype] * 1e12

    def ridge(self, dtype: str, unit: Literal["tensor", "vector"] = "tensor") -> float:
        """Arithmetic intensity (FLOP/byte) where the HBM roof meets the compute roof."""
        return self.peak(dtype, unit) / self.bandwidth


# --- loading -------------------------------------------------------------------------------------------------


def load_gpu_file(path: Path) -> GPU:
    return validate(GPU, read_yaml(path), str(path))


def _catalog() -> dict[str, Path]:
    """Every known GPU file by id and alias; the user's folders shadow the bundled one."""
    names: dict[str, Path] = {}
    for folder in reversed(search_dirs("hardware", HARDWARE_PATH_ENV)):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.y*ml")):
            data = read_yaml(path)
            for name in [data.get("id"), *(data.get("aliases") or [])]:
                if isinstance(name, str):
                    names[name.lower()] = path
    return names


def list_gpus() -> list[GPU]:
    seen: dict[Path, GPU] = {}
    for path in _catalog().values():
        if path not in seen:
            seen[path] = load_gpu_file(path)
    return sorted(seen.values(), key=lambda g: g.id)


def load_gpu(name: str) -> GPU:
    """A GPU by id, alias (case-insensitive) or path to a YAML file."""
    if looks_like_path(name) or Path(name).is_file():
        return load_gpu_file(Path(name).expanduser())
    catalog = _catalog()
    path = catalog.get(name.lower())
    if path is None:
        raise UserError(f"unknown GPU '{name}'{closest(name, catalog)}; 'rooflinectl hardware list' shows them all")
    return load_gpu_file(path)
