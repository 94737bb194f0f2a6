"""What a calibration did, for the renderers: ``calibrate``'s measured ceilings beside the spec's figures, and
``calibrate --comm``'s collectives; plain data, no torch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..specs.hardware import GPU
from ..specs.measured import Measured, MeasuredInterconnect


@dataclass(frozen=True)
class CalibrationRow:
    """One measured ceiling beside the spec's figure for it."""

    ceiling: str  # "copy bandwidth (read + write)", "bf16 matmul"
    measured: float
    spec: float | None
    unit: str  # "GB/s" or "TFLOP/s"
    check: float | None = None  # the same probe timed by the second method in the same run (matmuls)

    @property
    def check_gap(self) -> float | None:
        """measured / check − 1: how far the two methods are apart."""
        return self.measured / self.check - 1 if self.check else None

    @property
    def of_spec(self) -> float | None:
        """measured / spec: the share of the spec sheet's figure reached."""
        return self.measured / self.spec if self.spec else None


def calibration_rows(spec: GPU, measured: Measured) -> list[CalibrationRow]:
    if measured.copy_bandwidth_gbps is None:  # a section of collectives alone (calibrate --comm)
        return []
    rows = [CalibrationRow("copy bandwidth (read + write)", measured.copy_bandwidth_gbps,
                           spec.memory.hbm_bandwidth_gbps, "GB/s")]
    rows += [CalibrationRow(f"{d} matmul", v, spec.compute.tensor_tflops.get(d), "TFLOP/s",
                            measured.tensor_tflops_check.get(d))
             for d, v in measured.tensor_tflops.items()]
    rows += [CalibrationRow(f"{d} vector", v, spec.compute.vector_tflops.get(d), "TFLOP/s")
             for d, v in measured.vector_tflops.items()]
    return rows


@dataclass(frozen=True)
class Calibration:
    """What ``rooflinectl calibrate`` did: the spec it started from, the file it wrote (loaded back), its notes."""

    spec: GPU
    written: GPU
    measured: Measured
    notes: list[str]
    output: Path

    @property
    def rows(self) -> list[CalibrationRow]:
        return calibration_rows(self.spec, self.measured)

    def to_dict(self) -> dict[str, Any]:
        """``calibrate --json``: the file written, its id, the spec it started from, the measured section."""
        return {"file": str(self.output), "id": self.written.id, "spec": self.spec.id,
                "measured": self.measured.model_dump(mode="json"), "notes": self.notes}


@dataclass(frozen=True)
class CommCalibration:
    """What rank 0 wrote: the spec it started from, the file (loaded back), the collectives' curves."""

    spec: GPU
    written: GPU
    measured: MeasuredInterconnect
    output: Path

    def to_dict(self) -> dict[str, Any]:
        """``calibrate --comm --json``: the file written, its id, the spec it started from, the collectives."""
        return {"file": str(self.output), "id": self.written.id, "spec": self.spec.id,
                "interconnect": self.measured.model_dump(mode="json")}
