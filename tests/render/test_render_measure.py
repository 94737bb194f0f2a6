"""render/measure.py: the tables of a run laid out from its record, and the calibration beside the spec."""

from __future__ import annotations

from measure_fakes import FakeClock, FakeSoftmax, run_fake

from rooflinectl.records.kernel import RunCeilings, UnfusedOp
from rooflinectl.render.measure import print_run


def test_timed_run_lays_out_every_number(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    clock = FakeClock((2.0e-6, 1.9e-6, 2.2e-6), (3.0e-6, 2.9e-6, 3.1e-6))
    run = run_fake(FakeSoftmax(), [(512, 2048)], clock=clock,
                   ceilings=RunCeilings(copy_bandwidth_gbps=3000.0, tensor_tflops={"bf16": 760.0}))
    print_run(run)
    text = capsys.readouterr().out
    rows = [line.split() for line in text.splitlines() if line.lstrip().startswith("512x2048")]
    # shape, check, time, band, timer, GB/s, TFLOP/s, predicted, %spec, %meas (the numbers of the test above)
    assert rows[0] == ["512x2048", "ok", f"{run.records[0].correctness.rel_error:.1e}", "2", "µs", "1.9–2.2", "µs",
                       "graph", "2,097", "2.6", "1.25", "µs", "63", "70"]
    # the torch baseline: time, band, timer, GB/s, TFLOP/s, its error, the kernel's speedup
    assert rows[1][:12] == ["512x2048", "torch", "eager", "3", "µs", "2.9–3.1", "µs", "graph", "1,398", "1.7",
                            f"{run.records[0].baselines[0].rel_error:.1e}", "1.50"]
    # the launch: grid 512, 4 warps, 128 threads, no registers/spills/smem known, 16 per SM, ≤100%, 1 wave
    assert rows[2] == ["512x2048", "run", "512", "4", "128", "-", "-", "-", "16", "≤100%", "1", "warps"]
    assert "ceilings measured in this run: copy 3,000 GB/s, bf16 matmul 760 TFLOP/s" in text
    assert "reproduce: rooflinectl measure --kernel fake_softmax" in text


def test_the_command_to_reproduce_is_one_line_at_any_width(capsys, monkeypatch):
    # Wrapped at a blank, "--seed" and its value landed on two lines: a paste ran two commands.
    monkeypatch.setenv("COLUMNS", "40")
    run = run_fake(FakeSoftmax(), [(3, 7)], timed=False, spec=None)
    print_run(run)
    lines = capsys.readouterr().out.splitlines()
    line = next(line for line in lines if line.startswith("reproduce: "))
    assert line == f"reproduce: {run.command}" and len(line) > 40


def test_fusion_table_shows_the_records_sums(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "140")
    run = run_fake(FakeSoftmax(), [(3, 7)], timed=False, spec=None)
    rec = run.records[0].model_copy(update={"unfused": [
        UnfusedOp(op="rmsnorm", kind="norm", flops=4, bytes=1.5e6, predicted_time_s=1e-6),
        UnfusedOp(op="linear", kind="linear", flops=8, bytes=2.5e6, predicted_time_s=3e-6)]})
    run = run.model_copy(update={"records": [rec]})
    print_run(run)
    row = next(line for line in capsys.readouterr().out.splitlines() if "rmsnorm + linear" in line)
    assert row.split()[:6] == ["3x7", "rmsnorm", "+", "linear", "4", "MB"]
    assert "4 µs" in row


def test_at_80_columns_the_anatomy_is_one_line_per_launch_with_its_kernel_whole(capsys, monkeypatch):
    """Issue 19: at 80 columns the launch-anatomy heading was cut and a kernel's name wrapped over three lines.
    The same numbers as the 120-column table above: grid 512, 4 warps, 128 threads, 16 per SM, ≤100%, 1 wave."""
    monkeypatch.setenv("COLUMNS", "80")
    run = run_fake(FakeSoftmax(), [(512, 2048)], clock=FakeClock((2.0e-6, 1.9e-6, 2.2e-6), (3.0e-6, 2.9e-6, 3.1e-6)),
                   ceilings=RunCeilings(copy_bandwidth_gbps=3000.0, tensor_tflops={"bf16": 760.0}))
    print_run(run)
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "Launch anatomy: each Triton launch of the checked run (occupancy on the spec's limits)" in " ".join(
        line.strip() for line in lines)
    launch = next(line for line in lines if line.startswith("512x2048 run:"))  # the kernel's name whole
    joined = " ".join(line.strip() for line in lines[lines.index(launch):lines.index(launch) + 2])
    assert ("512x2048 run: grid 512, 4 warps (128 threads), - registers, - spills, smem -; 16 per SM, "
            "occupancy ≤100%, 1 wave, limit warps") in joined


def test_each_row_says_which_timer_took_its_figure(capsys, monkeypatch):
    """The kernel captured (graph), its baseline did not (events, with the capture's error in a note); at 100
    columns every line fits."""
    from measure_fakes import FakeDevice

    monkeypatch.setenv("COLUMNS", "100")
    graph = FakeDevice((2.0e-6, 1.9e-6, 2.2e-6), no_capture={1})
    events = FakeDevice((5.0e-6, 4.0e-6, 6.0e-6), name="events")
    run = run_fake(FakeSoftmax(), [(512, 2048)], clock=graph, events=events,
                   ceilings=RunCeilings(copy_bandwidth_gbps=3000.0, timer="cuda_graph"))
    print_run(run)
    text = capsys.readouterr().out
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 100
    rows = [line.split() for line in text.splitlines() if line.lstrip().startswith("512x2048")]
    assert rows[0][7] == "graph" and rows[1][7] == "events"
    flat = " ".join(text.split())
    assert "512x2048: baseline torch: not captured in a CUDA graph (RuntimeError: operation not permitted" in flat
    assert "this run asked for graph" in flat and "ceilings measured in this run, timed by graph" in flat
