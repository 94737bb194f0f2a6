"""The Measurement record: what ``rooflinectl measure`` found, typed, saved and loaded as JSON.

One file holds one run: the device and software it ran on, the ceilings measured in that run, and one
``ShapeRecord`` per shape. ``load`` is the one reader of these files: ``rooflinectl plot --measured FILE`` reads
them through it. A record names its operation as the engine does (``op``: "softmax", "rmsnorm_linear"), with its
kind and what it fuses (``op_kind``, ``op_fuses``); the shape is in ``shape``/``shape_text``, never in the name.

Units are in the names: ``*_s`` seconds, ``*_gbps`` 1e9 bytes/s, ``*_tflops`` 1e12 FLOP/s, ``*_pct`` percent.
Rates and percentages come from the engine (``engine.roofline.measured_share``) through the harness; this module
only holds them.

Schema versions: 2 names ops without their shape and records ``op_fuses``; ``load`` reads version 1 files (such as
docs/results/*/*.json) too, taking the op's name from the front of version 1's "softmax 4096x16384".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..engine.count.op import OpKind
from ..errors import UserError
from ..files import write_atomic
from ..specs.dtypes import TensorDType
from ..specs.load import Peak, Rate, read_json, validate
from ..specs.measured import Ceilings

SCHEMA_VERSION = 2

# A relative error of NaN or inf (a NaN in the output) is written as the JSON string "Infinity"/"NaN", so that the
# file stays standard JSON and loads back to the same float.
_CONFIG = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

# torch eager and torch.compile of the kernel's eager code; for rmsnorm_linear, F.linear alone on the normalized x
# (cuBLAS: the speed its fusion must reach); for the attention kernels, torch's SDPA with each of its fused backends
# forced (torch.nn.attention.sdpa_kernel): FlashAttention-2, cuDNN, memory-efficient.
BaselineName = Literal["torch", "compile", "cublas", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient"]
# Each baseline's name as tables print it, one entry a BaselineName (a test checks that none is missing).
BASELINE_LABELS: dict[BaselineName, str] = {"torch": "torch eager", "compile": "torch.compile",
                                            "cublas": "F.linear alone (cuBLAS)", "sdpa_flash": "SDPA flash",
                                            "sdpa_cudnn": "SDPA cuDNN", "sdpa_efficient": "SDPA efficient"}
# How a kernel was timed (measure/bench.py): replays of a CUDA graph, or CUDA events around each run.
Timer = Literal["cuda_graph", "events"]
Status = Literal["passed", "failed", "error", "checked"]


class Record(BaseModel):
    model_config = _CONFIG


def _upper(bounded: object) -> float:
    """The upper bound of one of specs.load's annotated ranges (Rate, Peak)."""
    return float(next(m.le for m in bounded.__metadata__[0].metadata if hasattr(m, "le")))  # type: ignore[attr-defined]


# What a chart and a share divide by, bounded to what a kernel run can be, so that every rate, intensity, share and
# axis limit made from them is a finite positive float (a time of 1e-300 s drew a point at 1e307 FLOP/s, FLOPs of
# 1e300 an axis to 1e300 that matplotlib could not draw, FLOPs of 1e-300 an axis limit that underflowed to 0):
# a time from a nanosecond (below any timer's resolution) to a million seconds; bytes from 1 to 1e15 (a petabyte);
# FLOPs from 0 (pure data movement) to 1e21 (a million seconds at 1e15 FLOP/s); both whole counts.
MIN_TIME_S, MAX_TIME_S = 1e-9, 1e6
MAX_BYTES = 10**15
MAX_FLOPS = 10**21
# ... and the rates they give no faster than a hardware spec's own numbers may be (specs.load's Rate, GB/s, and
# Peak, TFLOP/s): a record faster than any GPU a spec may describe was not measured on a GPU.
MAX_ACHIEVED_GBPS = _upper(Rate)
MAX_ACHIEVED_TFLOPS = _upper(Peak)


class Correctness(Record):
    """The kernel's output against its torch reference on fresh random inputs, output poisoned with NaN first."""

    rel_error: float  # ‖out − ref‖ / ‖ref‖ in float64; inf when the output holds a NaN or inf
    tolerance: float
    passed: bool  # rel_error <= tolerance (so a NaN never passes)
    seed: int  # torch.Generator seed of the inputs: --seed reproduces them


class Timing(Record):
    """Median and 20–80% band of the timed runs, and the timer that took them (``measure.bench``): "cuda_graph"
    (replays of a CUDA graph of the rotated runs) or "events" (triton's do_bench, the L2 flushed before each run)."""

    median_s: float
    p20_s: float
    p80_s: float
    timer: Timer  # the timer this figure used: the run's, or "events" where the graph capture failed
    input_sets: int  # buffers rotated between runs so that the L2 cannot hold the working set
    capture_error: str | None = None  # why a CUDA graph was not used, when the run asked for one

    @model_validator(mode="after")
    def _ordered(self) -> Timing:
        # Three quantiles of the same runs: p20 <= median <= p80, or they were mislabelled on the way here.
        if not self.p20_s <= self.median_s <= self.p80_s:
            raise ValueError(f"p20 {self.p20_s:g} s <= median {self.median_s:g} s <= p80 {self.p80_s:g} s does not "
                             f"hold: the quantiles are mislabelled")
        return self


class Baseline(Record):
    """The same operation run by torch eager or torch.compile, timed the same way."""

    name: BaselineName
    time_s: float | None = None
    timing: Timing | None = None
    achieved_gbps: float | None = None
    achieved_tflops: float | None = None
    speedup: float | None = None  # baseline time / kernel time: > 1 when the kernel is faster
    rel_error: float | None = None  # the baseline's own error against the same reference
    error: str | None = None  # why it has no time (torch.compile failed, ...)


class LaunchRecord(Record):
    """One Triton launch: its shape on the GPU and the resources it took (``measure``'s launch anatomy).

    Resource fields are None when the compiler's metadata is not there: under the interpreter nothing is compiled,
    and the occupancy then counts only the warps (``occupancy_upper_bound``). Occupancy fields come from
    ``rooflinectl.engine.occupancy.launch_anatomy`` on the spec's limits; None without a spec (``note`` says why).
    """

    function: str
    grid: list[int]
    programs: int
    num_warps: int | None = None  # warps per program
    threads_per_program: int | None = None  # num_warps × warp size
    n_regs: int | None = None  # registers per thread
    n_spills: int | None = None
    shared_bytes: int | None = None  # shared memory per program
    config: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    programs_per_sm: int | None = None  # resident programs (blocks) per SM
    occupancy: float | None = None  # active warps / max warps per SM, 0..1
    occupancy_upper_bound: bool = False  # registers or shared memory unknown: only what is known was counted
    limiter: str | None = None  # what binds the occupancy: warps, registers, shared memory, blocks
    waves: int | None = None  # ceil(programs / (programs per SM × SMs))
    last_wave_fill: float | None = None  # share of the last wave's slots that hold a program
    warnings: list[str] = Field(default_factory=list)
    note: str | None = None  # why some fields are missing


class UnfusedOp(Record):
    """One of the operations a fused kernel replaces, counted as its own kernel by the engine (count included)."""

    op: str  # the engine's name ("rmsnorm", "linear")
    kind: OpKind | None = None  # None in version 1 records
    flops: float
    bytes: float
    predicted_time_s: float | None = None


class ShapeRecord(Record):
    kernel: str
    op: str  # the operation's name as the engine calls it, without the shape
    shape: list[int]
    shape_text: str  # "4096x16384", in the kernel's shape_format
    shape_format: str
    dtype: str
    # One run, counted by the engine's rules (rooflinectl.engine.count.op); finite, since a chart or a share divides by them.
    # Whole counts, saved as JSON integers (the --json schema: integers for counts and bytes); a saved 117440512.0
    # reads as 117440512, a fraction is refused.
    flops: int = Field(ge=0, le=MAX_FLOPS)
    bytes: int = Field(ge=1, le=MAX_BYTES)
    unit: Literal["tensor", "vector"]  # the compute roof the engine places the op under
    op_dtype: str  # … at this data type
    op_kind: OpKind | None = None  # what the op is (engine.count.op.OpKind); None in records saved before it was kept
    op_fuses: list[OpKind] = Field(default_factory=list)  # the kinds of work folded into it (engine.count.op.Op.fuses)
    status: Status  # passed (checked and timed), failed (wrong result), error (raised), checked (interpreter)
    correctness: Correctness | None = None
    error: str | None = None  # the exception the kernel raised, on one line
    time_s: float | None = Field(default=None, ge=MIN_TIME_S, le=MAX_TIME_S, allow_inf_nan=False)  # median; None: not timed
    timing: Timing | None = None
    achieved_gbps: float | None = None  # bytes / time_s
    achieved_tflops: float | None = None  # flops / time_s
    bound: Literal["memory", "compute"] | None = None  # under the spec's roofs
    predicted_time_s: float | None = None  # roofline.place(op, spec roofs).time_s
    spec_roof_pct: float | None = None  # predicted_time_s / time_s × 100: share of the attainable, spec roofs
    measured_predicted_time_s: float | None = None  # the same under the ceilings measured in this run
    measured_roof_pct: float | None = None
    baselines: list[Baseline] = Field(default_factory=list)
    launches: list[LaunchRecord] = Field(default_factory=list)
    unfused: list[UnfusedOp] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _plausible_rates(self) -> ShapeRecord:
        if self.time_s is not None:
            gbps, tflops = self.bytes / self.time_s / 1e9, self.flops / self.time_s / 1e12
            if gbps > MAX_ACHIEVED_GBPS:
                raise ValueError(f"bytes / time_s is {gbps:.3g} GB/s, above the {MAX_ACHIEVED_GBPS:.0g} GB/s any "
                                 f"hardware spec may have: not a measurement")
            if tflops > MAX_ACHIEVED_TFLOPS:
                raise ValueError(f"flops / time_s is {tflops:.3g} TFLOP/s, above the {MAX_ACHIEVED_TFLOPS:.0g} "
                                 f"TFLOP/s any hardware spec may have: not a measurement")
        return self

    @property
    def unfused_bytes(self) -> float | None:
        """HBM bytes of the operations this fused kernel replaces, together (None for an unfused kernel)."""
        return sum(u.bytes for u in self.unfused) if self.unfused else None

    @property
    def unfused_predicted_time_s(self) -> float | None:
        """Their predicted times under the spec's roofs, together; None where one has none."""
        times = [u.predicted_time_s for u in self.unfused]
        return None if not times or None in times else sum(t for t in times if t is not None)


class RunCeilings(Ceilings):
    """The ceilings measured once in this run on this device (``specs.measured.Ceilings``, which
    ``Roofs.with_ceilings`` applies to the spec's roofs), with what the probes were: the same probes as
    ``rooflinectl calibrate``."""

    model_config = _CONFIG

    copy_bytes: int | None = None  # bytes moved by one copy (read + written)
    copy_probe: str | None = None  # the kernel that copied (ceilings.COPY_PROBE): an SM kernel, not a memcpy
    matmul_size: int | None = None  # n of the n×n×n products
    vector_probe: str | None = None  # the kernel whose FMAs gave vector_tflops (ceilings.VECTOR_PROBE)
    timer: Timer | None = None  # how every probe was timed (a probe that fell back to events says so in notes)
    warm_up_s: float | None = None  # seconds of matmuls run before the first probe, to bring the clocks up
    # The same matmuls timed by the second method (check_timer) in the same run; a note where they differ by > 3%.
    tensor_tflops_check: dict[TensorDType, Peak] = Field(default_factory=dict)
    check_timer: Timer | None = None
    notes: list[str] = Field(default_factory=list)


class DeviceInfo(Record):
    name: str  # torch.cuda.get_device_name(), or "CPU (Triton interpreter)"
    spec: str | None = None  # id of the hardware spec compared against
    spec_name: str | None = None
    driver: str | None = None
    cuda: str | None = None  # torch.version.cuda
    compute_capability: str | None = None
    sm_count: int | None = None
    l2_bytes: int | None = None  # as the device reports it


class MeasurementFile(Record):
    """One ``rooflinectl measure`` run."""

    schema_version: int = SCHEMA_VERSION
    gpu: DeviceInfo
    torch_version: str
    triton_version: str
    python_version: str
    date: str  # local time with its UTC offset, ISO 8601
    command: str
    interpret: bool
    seed: int  # the first shape's input seed; shape i uses seed + 1000·i (each record holds its own)
    timer: Timer | None = None  # None: not timed (the interpreter)
    warmup_ms: float | None = None
    rep_ms: float | None = None
    ceilings: RunCeilings | None = None
    records: list[ShapeRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def failed(self) -> list[ShapeRecord]:
        return [r for r in self.records if r.status in ("failed", "error")]

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


def save(run: MeasurementFile, path: Path) -> None:
    """Write the record as JSON, all at once or not at all (``files.write_atomic``); an unwritable path is a
    UserError."""
    write_atomic(path, run.to_json(), "--save")


def _from_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version 1 file as version 2: each op's name was the engine's name, a space and the shape."""

    def name(op: object) -> object:
        return op.split(" ", 1)[0] if isinstance(op, str) else op

    records = []
    for rec in data.get("records") or []:
        if isinstance(rec, dict):
            rec = {**rec, "op": name(rec.get("op"))}
            rec["unfused"] = [{**u, "op": name(u.get("op"))} if isinstance(u, dict) else u
                              for u in rec.get("unfused") or []]
        records.append(rec)
    return {**data, "schema_version": SCHEMA_VERSION, "records": records}


def load(path: Path) -> MeasurementFile:
    """A saved record (version 1 or 2), validated; a missing, malformed or foreign file is a one-line UserError."""
    data = read_json(path, "a measurement record (a JSON object)")
    version = data.get("schema_version", SCHEMA_VERSION)
    if version == 1:
        data = _from_v1(data)
    elif version != SCHEMA_VERSION:
        raise UserError(f"{path}: schema_version {version!r}: this rooflinectl reads versions 1 and {SCHEMA_VERSION}")
    return validate(MeasurementFile, data, str(path))
