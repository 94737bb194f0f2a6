"""GPU specs: the pydantic model of ``hardware/*.yaml``, loading, and lookup by id, alias or path.

Units are in the field names. Rates are decimal: ``*_gbps`` is 1e9 bytes/s, ``*_tflops`` 1e12 operations/s
(for int8, TOPS). Sizes are binary, as the vendors' "80 GB", "50 MB L2" and "228 KB per SM" really are:
``*_gib`` 2**30 bytes, ``*_mib`` 2**20, ``*_kib`` 2**10.
Every section carries a ``source``; a number that no datasheet gives is listed under the section's ``derived``
with how it was obtained. Peaks are dense: sparse figures are never used. A figure no source gives is left out
rather than guessed: a part without SMs (Intel Gaudi) has no SM count, no SM-level memory and no ``limits``, and
what needs them (the occupancy calculator, the per-SM columns of the memory hierarchy) says it does not apply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, NonNegativeInt, model_validator
from typing_extensions import Self  # typing.Self is 3.11+; the floor is 3.10

from ..errors import UserError, closest
from ..files import user_path
from ..units import GIB, KIB
from .devices import require_device
from .dtypes import TensorDType, VectorDType
from .load import Count, Peak, Rate, Size, Strict, looks_like_path, read_yaml, search_dirs, validate
from .measured import COLLECTIVES, Ceilings, Collective, Measured
from .names import file_names

HARDWARE_PATH_ENV = "ROOFLINECTL_HARDWARE_PATH"


class Sourced(Strict):
    """A section of numbers that share a source. ``derived`` maps a field to how it was derived or estimated."""

    source: str = Field(min_length=1)
    derived: dict[str, str] = Field(default_factory=dict)

    def derivation(self, field: str) -> Literal["derived", "estimated"] | None:
        """How ``field`` was obtained when no datasheet gives it: "estimated" when its ``derived`` note starts with
        that word (a judgement or a measurement by others), "derived" for any other note (arithmetic on published
        figures, a device query); None when the number is the section's source's."""
        how = self.derived.get(field)
        if how is None:
            return None
        return "estimated" if how.lower().startswith("estimated") else "derived"

    @model_validator(mode="after")
    def _derived_names_fields(self) -> Self:
        numbers = {n for n in type(self).model_fields if n not in ("source", "derived")}
        for name in self.derived:
            if name not in numbers:
                raise ValueError(f"'derived' names '{name}', which is not a field of this section")
            if getattr(self, name) is None:
                raise ValueError(f"'derived' explains '{name}', which has no value")
        return self


class Memory(Sourced):
    """HBM, and the on-chip levels below it. Only HBM is required: an on-chip size no source gives is left out
    (None), and the memory hierarchy leaves out its level."""

    hbm_type: str
    hbm_capacity_gib: Size
    hbm_bandwidth_gbps: Rate
    # The last chip-wide cache before HBM (on Gaudi 3, the on-die SRAM Intel calls its L2 cache).
    l2_size_mib: Size | None = None
    l2_bandwidth_gbps: Rate | None = None
    # Largest shared memory (SRAM) one SM can give to its blocks, and the L1 + shared memory array it is carved from.
    smem_per_sm_kib: Size | None = None
    l1_smem_per_sm_kib: Size | None = None
    # Aggregate shared-memory bandwidth over all SMs (bytes per clock per SM × SMs × clock): always derived.
    smem_bandwidth_gbps: Rate | None = None
    register_file_per_sm_kib: Size | None = None

    @model_validator(mode="after")
    def _smem_fits_l1(self) -> Self:
        if (self.smem_per_sm_kib is not None and self.l1_smem_per_sm_kib is not None
                and self.smem_per_sm_kib > self.l1_smem_per_sm_kib):
            raise ValueError("smem_per_sm_kib is larger than the L1 + shared memory array l1_smem_per_sm_kib")
        return self

    @model_validator(mode="after")
    def _bandwidth_has_its_level(self) -> Self:
        # A bandwidth without the level it is the bandwidth of would draw a roof under nothing.
        if self.l2_bandwidth_gbps is not None and self.l2_size_mib is None:
            raise ValueError("l2_bandwidth_gbps is given without l2_size_mib")
        if self.smem_bandwidth_gbps is not None and self.smem_per_sm_kib is None:
            raise ValueError("smem_bandwidth_gbps is given without smem_per_sm_kib")
        return self


class Limits(Sourced):
    """The execution limits that decide occupancy (CUDA programming guide, 'Compute capabilities' table)."""

    warp_size: Count
    max_threads_per_block: Count
    max_threads_per_sm: Count
    max_warps_per_sm: Count
    max_blocks_per_sm: Count
    registers_per_sm: Count  # 32-bit registers
    max_registers_per_block: Count
    max_registers_per_thread: Count
    register_alloc_unit: Count  # registers are allocated per warp in units of this many
    max_smem_per_block_kib: Size  # with the opt-in dynamic limit
    smem_alloc_unit_bytes: Count
    reserved_smem_per_block_bytes: NonNegativeInt  # the system's share of each block's shared memory

    @property
    def max_smem_per_block_bytes(self) -> int:
        """The most shared memory one block may ask for (the opt-in dynamic limit), in bytes: what a kernel's
        tile choice must fit (227 KiB = 232,448 B on Hopper, 163 KiB on the A100)."""
        return int(self.max_smem_per_block_kib * KIB)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.max_threads_per_sm != self.max_warps_per_sm * self.warp_size:
            raise ValueError("max_threads_per_sm must equal max_warps_per_sm × warp_size")
        if self.max_threads_per_block > self.max_threads_per_sm:
            raise ValueError("max_threads_per_block exceeds max_threads_per_sm")
        # A block is scheduled in whole warps: a limit below one warp admits no block at all.
        if self.max_threads_per_block < self.warp_size:
            raise ValueError("max_threads_per_block is less than one warp (warp_size)")
        # Otherwise a block at the per-block limit would not fit on one SM, and occupancy would report 0 blocks
        # per SM as if it were a result.
        if self.max_registers_per_block > self.registers_per_sm:
            raise ValueError("max_registers_per_block exceeds registers_per_sm")
        return self


class Compute(Sourced):
    """Dense peak throughput: tensor (matrix) units per data type, and the plain vector units."""

    tensor_tflops: dict[TensorDType, Peak]
    vector_tflops: dict[VectorDType, Peak]

    @model_validator(mode="after")
    def _has_fp32(self) -> Self:
        if "fp32" not in self.vector_tflops:
            raise ValueError("vector_tflops must give fp32, the rate of elementwise work")
        return self


class ScaleUp(Sourced):
    """The scale-up domain: how many GPUs the interconnect above joins at its bandwidth (an NVLink, Infinity Fabric
    or RoCE domain: 8 on an HGX board, 72 in an NVL72 rack; 1 where a card reaches its peers over PCIe alone).
    Tensor parallelism past it crosses the scale-out network.

    ``topology``, given wherever the domain holds more than one GPU, says how much of that bandwidth a group of
    g < ``gpus`` of them reaches: ``switch``, all of it (NVSwitch: every link goes to the switches, which reach
    any peer); ``mesh``, g − 1 of the ``gpus`` − 1 equal shares (AMD's xGMI, Gaudi's RoCE ports: each GPU's links
    join it to each other GPU one to one, so two GPUs exchange over one peer's share of the links)."""

    gpus: Count
    topology: Literal["switch", "mesh"] | None = None

    @model_validator(mode="after")
    def _a_domain_states_its_topology(self) -> Self:
        if self.gpus > 1 and self.topology is None:
            raise ValueError(f"a domain of {self.gpus} GPUs states its topology: 'switch' (NVSwitch: any group at the "
                             f"whole bandwidth) or 'mesh' (each GPU's links to each other one to one: xGMI, Gaudi)")
        if self.gpus == 1 and self.topology is not None:
            raise ValueError("topology is for a domain of more than one GPU; this one has 1")
        return self

    def share(self, group: int) -> float:
        """The share of a GPU's interconnect bandwidth its sends to the other GPUs of a group of ``group`` GPUs
        inside this domain can use: 1 behind a switch, (group − 1)/(gpus − 1) of a mesh's links."""
        if self.topology != "mesh":
            return 1.0
        return (min(group, self.gpus) - 1) / (self.gpus - 1)


class ScaleOut(Sourced):
    """The network each GPU reaches other nodes over: its share of the node's NICs, in 10⁹ bits per second one
    way, as NICs are rated (400 for one InfiniBand NDR port), and one hop's latency, which no datasheet gives
    (each file marks it estimated and says how)."""

    name: str
    bandwidth_gbit_s: Rate  # one direction, per GPU, 1e9 bits/s
    latency_us: Rate

    @property
    def bandwidth_gbps(self) -> float:
        """The same bandwidth in GB/s (1e9 bytes/s) one way: the line rate / 8."""
        return self.bandwidth_gbit_s / 8


class Interconnect(Sourced):
    """The GPU's link to its peers, what tensor, expert and pipeline parallelism communicate over
    (engine/parallel/). ``bandwidth_gbps`` is the datasheet's figure: the total of both directions, per GPU;
    a collective sends and receives at once, so its roof is half of it (:attr:`per_direction_gbps`).
    ``latency_us`` is the fixed cost of one collective, which no datasheet gives: each file marks it estimated
    and says how. A PCIe link states its generation and lanes. ``scale_up`` says how many GPUs share this link's
    domain and ``scale_out`` what each GPU has past it, each with its own source."""

    name: str
    link: Literal["nvlink", "pcie", "infinity_fabric", "ethernet"]
    bandwidth_gbps: Rate  # total, both directions, per GPU
    latency_us: Rate  # one collective's fixed cost (an estimate: see the file's derived note)
    pcie_gen: Literal[3, 4, 5, 6] | None = None
    pcie_lanes: Literal[1, 2, 4, 8, 16] | None = None
    scale_up: ScaleUp | None = None
    scale_out: ScaleOut | None = None

    @property
    def per_direction_gbps(self) -> float:
        """One direction's bandwidth: half the datasheet's bidirectional total."""
        return self.bandwidth_gbps / 2

    @model_validator(mode="after")
    def _pcie_states_its_link(self) -> Self:
        pcie = self.link == "pcie"
        if pcie != (self.pcie_gen is not None) or pcie != (self.pcie_lanes is not None):
            raise ValueError("pcie_gen and pcie_lanes are given for a PCIe link, and only for one")
        return self


class Power(Sourced):
    """The board's power: ``board_w``, the most the board draws as its datasheet states it (NVIDIA's max TDP,
    AMD's total board power), what bounds the energy of a busy GPU from above."""

    board_w: Rate


class GPU(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    aliases: list[str] = Field(default_factory=list)
    name: str
    # What the device reports as its name (torch.cuda.get_device_name()) where id, aliases and name do not spell
    # it: the names specs.devices matches a device, a record or a measured section to this spec by.
    device_names: list[str] = Field(default_factory=list)
    vendor: str
    architecture: str
    compute_capability: str | None = None
    # Streaming multiprocessors (NVIDIA) or compute units (AMD); None for a part without them (Gaudi's matrix
    # engines and tensor processor cores are not SMs) or whose count no source gives.
    sm_count: Count | None = None
    boost_clock_mhz: Size | None = None
    memory: Memory
    # The occupancy calculator's limits; None where they do not apply (no SMs) or no source gives them.
    limits: Limits | None = None
    compute: Compute
    interconnect: Interconnect | None = None
    power: Power | None = None
    measured: Measured | None = None
    notes: str | None = None

    @model_validator(mode="after")
    def _limits_have_their_sm(self) -> Self:
        # The occupancy calculator reads the limits with the SM count, the SM's shared memory and register file:
        # limits without them would be half a calculator.
        if self.limits is None:
            return self
        missing = [name for name, value in (("sm_count", self.sm_count),
                                            ("memory.smem_per_sm_kib", self.memory.smem_per_sm_kib),
                                            ("memory.register_file_per_sm_kib", self.memory.register_file_per_sm_kib))
                   if value is None]
        if missing:
            raise ValueError(f"limits are given without {', '.join(missing)}, which occupancy reads with them")
        return self

    @model_validator(mode="after")
    def _block_fits_the_sm(self) -> Self:
        # A block at the per-block limit, with the system's reserved share added (CUDA reserves 1 KiB a block
        # since sm_80), must still fit in one SM's shared memory: otherwise a legal block would never be resident.
        if self.limits is None or self.memory.smem_per_sm_kib is None:
            return self
        smem_sm_bytes = self.memory.smem_per_sm_kib * KIB
        if self.limits.max_smem_per_block_bytes + self.limits.reserved_smem_per_block_bytes > smem_sm_bytes:
            raise ValueError("limits.max_smem_per_block_kib plus reserved_smem_per_block_bytes exceeds "
                             "memory.smem_per_sm_kib: a block cannot have more shared memory than its SM")
        return self

    @property
    def capacity_bytes(self) -> float:
        """HBM capacity in bytes (binary: the file's GiB × 2**30); not always whole (the H200 file's 139.8 GiB)."""
        return self.memory.hbm_capacity_gib * GIB

    def roofs(self, calibrated: bool = False) -> Roofs:
        """The roofs an operation is placed under: the spec sheet's, or those with the measured ceilings put in
        (:meth:`Roofs.with_ceilings`)."""
        scale_out = self.interconnect.scale_out if self.interconnect else None
        spec = Roofs(
            gpu_id=self.id,
            label="spec",
            bandwidth_gbps=self.memory.hbm_bandwidth_gbps,
            tensor_tflops={k: v for k, v in self.compute.tensor_tflops.items()},
            vector_tflops={k: v for k, v in self.compute.vector_tflops.items()},
            l2_bandwidth_gbps=self.memory.l2_bandwidth_gbps,
            smem_bandwidth_gbps=self.memory.smem_bandwidth_gbps,
            interconnect_gbps=self.interconnect.per_direction_gbps if self.interconnect else None,
            interconnect_latency_us=self.interconnect.latency_us if self.interconnect else None,
            network_gbps=scale_out.bandwidth_gbps if scale_out else None,
            network_latency_us=scale_out.latency_us if scale_out else None,
        )
        if not calibrated:
            return spec
        if self.measured is None:
            raise UserError(
                f"{self.id} has no measured ceilings: run 'rooflinectl calibrate -o FILE' on that GPU "
                f"and pass --gpu FILE"
            )
        for what, device in self.measured.devices():  # measured on this GPU (specs.devices), or refused
            require_device(device, self, f"{self.id}: the measured section ({what})")
        if over := self.measured.above(self.memory.hbm_bandwidth_gbps, self.compute.tensor_tflops,
                                       self.compute.vector_tflops):
            device = f" (measured on {self.measured.device_name})" if self.measured.device_name else ""
            raise UserError(f"{self.id}: the measured section{device} is faster than this GPU's datasheet allows: "
                            f"{'; '.join(over)}; it was measured on another GPU, or a datasheet figure is wrong")
        roofs = spec.with_ceilings(self.measured)
        comm = self.measured.interconnect
        if comm is None:
            return roofs
        unusable = {c: why for c in COLLECTIVES if (why := comm.no_latency(c)) is not None}
        fits = {c: fit for c in COLLECTIVES if (fit := comm.fit(c)) is not None and c not in unusable}
        return roofs.model_copy(update={"measured_collectives": fits, "unusable_collectives": unusable})


class Roofs(Strict):
    """Everything the roofline needs of a GPU: one memory roof (HBM) and the compute roofs per data type."""

    gpu_id: str
    label: Literal["spec", "measured"]
    bandwidth_gbps: float
    tensor_tflops: dict[str, float]
    vector_tflops: dict[str, float]
    l2_bandwidth_gbps: float | None = None
    smem_bandwidth_gbps: float | None = None
    # The interconnect's roof, one direction (GB/s), and one collective's fixed cost; None: no interconnect given.
    interconnect_gbps: float | None = None
    interconnect_latency_us: float | None = None
    # The scale-out network past the scale-up domain, one direction per GPU (GB/s), and one hop's latency; None:
    # the file gives none. Only a group past the domain uses them (engine/parallel/network.py).
    network_gbps: float | None = None
    network_latency_us: float | None = None
    # Measured (GB/s bus bandwidth, µs) per collective (``calibrate --comm``, MeasuredInterconnect.fit): a
    # collective op of one of these is timed with them in place of the two figures above; empty for the spec.
    measured_collectives: dict[Collective, tuple[float, float]] = Field(default_factory=dict)
    # The measured collectives whose curve gives no latency (MeasuredInterconnect.no_latency), with why: a
    # collective op of one is refused, not timed by an extrapolation nor silently by the datasheet.
    unusable_collectives: dict[Collective, str] = Field(default_factory=dict)

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

    def with_ceilings(self, ceilings: Ceilings) -> Roofs:
        """These roofs with measured ceilings put in: THE one merge rule, for calibrated specs and per-run ceilings.

        HBM bandwidth comes from the copy when it was measured; each measured tensor and vector peak replaces the
        spec's for its data type; what was not measured keeps the spec's figure (better a known number than a
        guessed one). The L2 and shared-memory roofs are never measured and stay. The label becomes "measured".
        """
        return self.model_copy(update={
            "label": "measured",
            "bandwidth_gbps": ceilings.copy_bandwidth_gbps or self.bandwidth_gbps,
            "tensor_tflops": {**self.tensor_tflops, **ceilings.tensor_tflops},
            "vector_tflops": {**self.vector_tflops, **ceilings.vector_tflops},
        })


# --- loading -------------------------------------------------------------------------------------------------


def load_gpu_file(path: Path) -> GPU:
    return validate(GPU, read_yaml(path), str(path))


def _catalog() -> dict[str, Path]:
    """Every known GPU file by id and alias; the user's folders shadow the bundled one."""
    return _catalog_and_claims()[0]


def _catalog_and_claims() -> tuple[dict[str, Path], dict[str, tuple[Path, Path]]]:
    """The catalog, and the names a user's file takes from another file by an alias: {name: (the user's file,
    the file whose id or alias it was)}. A file with a bundled GPU's own id replaces that GPU on purpose (the
    user's folders shadow the bundled one); an alias that takes another GPU's name would do it unseen, and
    :func:`load_gpu` refuses the name."""
    names: dict[str, Path] = {}
    ids: dict[Path, str] = {}
    claims: dict[str, tuple[Path, Path]] = {}
    for folder in reversed(search_dirs("hardware", HARDWARE_PATH_ENV)):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.y*ml")):
            found = file_names(path)
            if found:
                ids[path] = found[0].lower()
            for i, name in enumerate(found):
                key = name.lower()
                other = names.get(key)
                if i > 0 and other is not None and other != path and ids.get(other) != ids.get(path):
                    # an alias over another GPU's name
                    claims[key] = (path, names[key])
                elif i == 0:
                    claims.pop(key, None)
                names[key] = path
    return names, claims


def list_gpus() -> list[GPU]:
    seen: dict[Path, GPU] = {}
    for path in _catalog().values():
        if path not in seen:
            seen[path] = load_gpu_file(path)
    return sorted(seen.values(), key=lambda g: g.id)


def load_gpu(name: str) -> GPU:
    """A GPU by id, alias (case-insensitive) or path to a YAML file."""
    if looks_like_path(name):
        return load_gpu_file(user_path(name))
    catalog, claims = _catalog_and_claims()
    path = catalog.get(name.lower())
    if path is None:
        raise UserError(f"unknown GPU '{name}'{closest(name, catalog)}; 'rooflinectl hardware list' shows them all")
    if name.lower() in claims:
        mine, theirs = claims[name.lower()]
        raise UserError(f"GPU '{name}' is both {theirs} and an alias in {mine}: give a path, or an id of one of "
                        f"them, or take the alias out of {mine.name}")
    return load_gpu_file(path)
