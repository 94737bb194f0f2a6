"""calibrate's op model on the CPU: the probes (a tiny grid, a fake timer) fitted under the run's ceilings, written
into the calibrated YAML, and read back by analyze --calibrated; no time of the CPU asserted."""

from __future__ import annotations

import pytest
from measure_fakes import H200
from test_ceilings import fake_measured

from rooflinectl.calibrate.op_model import fit_probes, grid_text
from rooflinectl.calibrate.probes import KIB, ProbeGrid, probe_samples
from rooflinectl.engine.calibrated import op_class
from rooflinectl.engine.placement import place
from rooflinectl.measure.harness import Reporter
from rooflinectl.specs.hardware import load_gpu_file
from rooflinectl.specs.write import write_measured

GRID = ProbeGrid(gemm_m=(1, 64), gemm_kn=((256, 128),), decode_batch=(2,), decode_positions=(64,),
                 prefill_tokens=(16,), prefill_batch=(1,), memory_bytes=(16 * KIB, 64 * KIB), vocab=64)


def test_probes_fitted_under_the_runs_ceilings_and_read_back_by_analyze(tmp_path):
    # Each probe "takes" 3 times its roofline time under the measured ceilings plus 2 µs; the floor is 1.5 µs.
    measured = fake_measured()
    roofs = H200.model_copy(update={"measured": measured}).roofs(calibrated=True)
    run = probe_samples("cpu", "bf16", Reporter(), grid=GRID, time_fn=lambda fn: (fn(), (1.5e-6,) * 3)[1])
    samples = [s.__class__(s.op, 3 * place(s.op, roofs).roofline_time_s + 2e-6, 0, 0, s.label, s.family,
                           s.input_sets) for s in run.samples]
    model = fit_probes(run.__class__(samples, 1.5e-6, run.grid, run.device, run.dtype, run.timer, []), H200,
                       measured)
    assert model.launch_floor_s == 1.5e-6 and model.timer == "cpu_wall" and model.grid == grid_text(GRID, "bf16")
    # One point per (class, roofline time): probes that move the same bytes (the 16 KiB memory probes of equal
    # sizes) merge into one point.
    assert sum(len(c.points) for c in model.curves) == len({(op_class(s.op), place(s.op, roofs).roofline_time_s)
                                                            for s in samples}) < len(samples)
    gpu = write_measured(H200, tmp_path / "my-h200.yaml", ceilings=measured, op_model=model)
    again = load_gpu_file(tmp_path / "my-h200.yaml")
    assert again.measured.op_model == gpu.measured.op_model == model
    # Every point lies on 3·t_roof + 2 µs, so a probe's own op reads back its own time exactly.
    for s in samples:
        p = place(s.op, again.roofs(calibrated=True))
        curve = again.measured.op_model.curve(op_class(s.op), "compute" if p.bound == "compute" else "memory")
        assert curve is not None
        assert min(abs(pt.roof_s - p.roofline_time_s) for pt in curve.points) == 0
    from rooflinectl.engine.calibrated import predict_time

    for s in samples:
        assert predict_time(s.op, model, again.roofs(calibrated=True))[0] == pytest.approx(s.median_s, rel=1e-9)
