"""calibrate --comm: nccl-tests' bus-bandwidth arithmetic by hand, the options' checks, the hardware file's round
trip (with calibrate's ceilings kept, and kept by it, in either order) and its strict refusals, and the engine
timing collectives with a measured interconnect (--calibrated). The gloo runs on the CPU are in
test_comm_gloo.py."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from measure_fakes import H200

from helpers import assert_one_line_error, cli
from rooflinectl.calibrate.comm import (
    comm_point,
    elements_per_rank,
    message_sizes,
    parse_collectives,
    parse_size,
    run_bytes,
)
from rooflinectl.calibrate.comm_run import command_line
from rooflinectl.engine.parallel import Layout
from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.specs.hardware import load_gpu, load_gpu_file
from rooflinectl.specs.load import validate
from rooflinectl.specs.measured import MeasuredInterconnect, OpCurve, OpModel, OpPoint, bus_factor
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.specs.write import write_measured

GIB = 2**30

# --- nccl-tests' arithmetic ------------------------------------------------------------------------------------
# NVIDIA/nccl-tests doc/PERFORMANCE.md: algbw = S / t; busbw = algbw × 2(n−1)/n (all-reduce), × (n−1)/n (all-gather,
# reduce-scatter, and all-to-all, which nccl-tests' alltoall.cu computes the same way).


@pytest.mark.parametrize("collective, n, factor", [
    ("all_reduce", 2, 1.0), ("all_reduce", 8, 1.75), ("all_reduce", 4, 1.5),
    ("all_gather", 8, 0.875), ("reduce_scatter", 2, 0.5), ("all_to_all", 4, 0.75),
])
def test_bus_factor_by_hand(collective, n, factor):
    assert bus_factor(collective, n) == factor


def test_comm_point_by_hand():
    # 1 GiB all-reduce in 5 ms on 8 GPUs: algbw = 1,073,741,824 / 0.005 = 214.7483648 GB/s; busbw × 2·7/8 = 1.75:
    # 375.8096384 GB/s (written to 6 significant digits).
    p = comm_point("all_reduce", GIB, 0.005, 8)
    assert (p.bytes, p.time_s, p.algbw_gbps, p.busbw_gbps) == (GIB, 0.005, 214.748, 375.81)
    # 4 KiB reduce-scatter in 10 µs on 2 GPUs: 4096 / 1e-5 = 0.4096 GB/s; × 1/2 = 0.2048.
    p = comm_point("reduce_scatter", 4096, 1e-5, 2)
    assert (p.algbw_gbps, p.busbw_gbps) == (0.4096, 0.2048)
    # busbw × t is the bytes one GPU sends, the engine's ring count: 2(n−1)/n · S for the all-reduce.
    p = comm_point("all_reduce", GIB, 0.005, 8)
    assert p.busbw_gbps * 1e9 * 0.005 == pytest.approx(2 * 7 / 8 * GIB, rel=1e-5)


def test_message_sizes_are_nccl_tests_powers_of_two():
    sizes = message_sizes()
    assert len(sizes) == 19 and sizes[0] == 4096 and sizes[-1] == GIB  # 2^12 .. 2^30
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))
    assert message_sizes(16 * 1024) == [4096, 8192, 16384]
    assert message_sizes(100 * 1024) == [4096 * 2**k for k in range(5)]  # up to 64 KiB, the last ≤ 100 KiB


def test_sizes_split_over_ranks_as_nccl_tests_rounds_them():
    # n = 3: an all-gather's 4096-byte output is 1,024 fp32 elements, 341 a rank (rounded down): S = 341·4·3 = 4,092.
    assert elements_per_rank("all_gather", 4096, 3) == 341
    assert run_bytes("all_gather", 4096, 3) == 4092
    assert run_bytes("reduce_scatter", 4096, 3) == 4092
    assert elements_per_rank("all_to_all", 4096, 3) == 1023 and run_bytes("all_to_all", 4096, 3) == 4092
    assert run_bytes("all_reduce", 4096, 3) == 4096
    assert run_bytes("all_gather", 4096, 8) == 4096 and elements_per_rank("all_gather", 4096, 8) == 128


@pytest.mark.parametrize("text, size", [("4KiB", 4096), ("64k", 65536), ("1GiB", GIB), ("16 MiB", 16 * 2**20),
                                        ("8192", 8192), ("1.5MiB", 3 * 2**19), ("64kb", 65536)])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["2GiB", "1KiB", "4095", "abc", "-4KiB", "4097.5", ""])
def test_parse_size_refuses(text):
    with pytest.raises(UserError, match="--comm-max"):
        parse_size(text)


def test_parse_collectives():
    assert parse_collectives(None) == ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
    assert parse_collectives("all-to-all,all_reduce,all_reduce") == ["all_reduce", "all_to_all"]
    with pytest.raises(UserError, match="unknown collective 'broadcast'"):
        parse_collectives("all_reduce,broadcast")
    with pytest.raises(UserError, match="give one or more"):
        parse_collectives(",")


def test_command_line_reproduces_the_run(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert command_line("my.yaml", "h200", None, "64MiB", None) == (
        "torchrun --nproc-per-node 8 -m rooflinectl calibrate --comm -o my.yaml --gpu h200 --comm-max 64MiB")
    assert command_line("my.yaml", None, "all_reduce", None, 2) == (
        "rooflinectl calibrate --comm -o my.yaml --collectives all_reduce --world-size 2")


# --- the hardware file ----------------------------------------------------------------------------------------


def _comm(n: int = 8, **over) -> MeasuredInterconnect:
    # All-reduce on 8 GPUs: 4 KiB in 20 µs (the latency), 1 GiB in 5 ms (busbw 375.81 GB/s, above); all-gather:
    # 4 KiB in 15 µs, 1 GiB in 2.5 ms: algbw 429.497 GB/s, busbw × 7/8 = 375.81.
    curves = {"all_reduce": [comm_point("all_reduce", 4096, 20e-6, n), comm_point("all_reduce", GIB, 0.005, n)],
              "all_gather": [comm_point("all_gather", 4096, 15e-6, n), comm_point("all_gather", GIB, 0.0025, n)]}
    data = dict(device_name="NVIDIA H200", gpu_count=n, backend="nccl", date="2026-12-03T10:00:00+00:00",
                command="torchrun --nproc-per-node 8 -m rooflinectl calibrate --comm -o my-8xh200.yaml",
                torch_version="2.9.0", nccl_version="2.27.3",
                collectives={k: [p.model_dump() for p in v] for k, v in curves.items()})
    return MeasuredInterconnect.model_validate({**data, **over})


def test_yaml_round_trip(tmp_path):
    out = tmp_path / "my-8xh200.yaml"
    written = write_measured(H200, out, interconnect=_comm())
    loaded = load_gpu_file(out)
    assert loaded == written
    assert loaded.id == "my-8xh200" and loaded.aliases == []
    assert loaded.measured.interconnect == _comm()
    assert loaded.measured.copy_bandwidth_gbps is None and not loaded.measured.has_ceilings
    assert loaded.interconnect == H200.interconnect  # the datasheet's figure stays beside the measured one
    assert loaded.measured.interconnect.fit("all_reduce") == (375.81, 20.0)
    assert loaded.measured.interconnect.fit("all_to_all") is None
    assert out.read_text().startswith("# NVIDIA H200 SXM 141GB: the spec sheet's numbers, and under "
                                      "'measured.interconnect'")


def _op_model() -> OpModel:
    # calibrate's op model, one probe: what write_measured keeps or drops with the ceilings it was fitted under.
    point = OpPoint(label="linear 1x4096x4096 bf16", roof_s=7.9e-6, measured_s=9.1e-6)
    return OpModel(launch_floor_s=1.8e-6, grid="one probe", timer="cuda_graph",
                   curves=[OpCurve(op_class="gemm", bound="memory", points=[point])])


def _both_kept(out, written) -> None:
    from test_ceilings import fake_measured

    assert load_gpu_file(out) == written
    assert written.id == "my-h200" and written.aliases == []
    assert written.measured.interconnect == _comm()
    ceilings = written.measured.model_dump(exclude={"interconnect", "op_model"})
    assert ceilings == fake_measured().model_dump(exclude={"interconnect", "op_model"})
    assert written.notes.count("Calibrated from the spec 'h200'") == 1  # the second write starts from the first
    text = out.read_text()
    assert "under 'measured' the ceilings that\n# `rooflinectl calibrate -o my-h200.yaml --gpu h200` measured" in text
    assert "and under 'measured.interconnect' the collectives that\n# `torchrun" in text


def test_comm_keeps_the_ceilings_calibrate_wrote(tmp_path):
    from test_ceilings import fake_measured

    out = tmp_path / "my-h200.yaml"
    first = write_measured(H200, out, ceilings=fake_measured(), op_model=_op_model())
    both = write_measured(first, out, interconnect=_comm())  # calibrate --comm -o my-h200.yaml --gpu my-h200.yaml
    _both_kept(out, both)
    assert both.measured.op_model == _op_model()  # fitted under the ceilings kept, so kept with them


def test_calibrate_keeps_the_collectives_comm_wrote(tmp_path):
    from test_ceilings import fake_measured

    out = tmp_path / "my-h200.yaml"
    first = write_measured(H200, out, interconnect=_comm())
    both = write_measured(first, out, ceilings=fake_measured(), op_model=_op_model())
    _both_kept(out, both)
    assert both.measured.op_model == _op_model()


def test_new_ceilings_drop_the_op_model_fitted_under_the_old(tmp_path):
    from test_ceilings import fake_measured

    out = tmp_path / "my-h200.yaml"
    first = write_measured(H200, out, ceilings=fake_measured(), op_model=_op_model())
    first = write_measured(first, out, interconnect=_comm())
    again = write_measured(first, out, ceilings=fake_measured())  # calibrate without the op model
    assert again.measured.op_model is None and again.measured.interconnect == _comm()
    assert load_gpu_file(out) == again


def test_write_measured_refuses_parts_that_do_not_go_together(tmp_path):
    from test_ceilings import fake_measured

    out = tmp_path / "my-h200.yaml"
    with pytest.raises(ValueError, match="give the ceilings, the collectives or both"):
        write_measured(H200, out)
    with pytest.raises(ValueError, match="comes with the ceilings"):
        write_measured(H200, out, op_model=_op_model(), interconnect=_comm())
    with_model = fake_measured().model_copy(update={"op_model": _op_model()})
    with pytest.raises(ValueError, match="as op_model="):
        write_measured(H200, out, ceilings=with_model)
    assert not out.exists()


def _file_with(tmp_path, change) -> str:
    out = tmp_path / "my-8xh200.yaml"
    write_measured(H200, out, interconnect=_comm())
    data = yaml.safe_load(out.read_text())
    change(data["measured"])
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(out)


@pytest.mark.parametrize("change, fragment", [
    (lambda m: m["interconnect"]["collectives"]["all_reduce"][0].update(latency_us=3), "latency_us"),
    (lambda m: m["interconnect"].update(gpus=8), "gpus"),
    (lambda m: m["interconnect"]["collectives"].update(broadcast=[]), "broadcast"),
    (lambda m: m["interconnect"]["collectives"]["all_reduce"][1].update(busbw_gbps=450.0), "busbw_gbps is not"),
    (lambda m: m["interconnect"]["collectives"]["all_reduce"][1].update(algbw_gbps=300.0), "algbw_gbps is not"),
    (lambda m: m["interconnect"].update(gpu_count=4), "busbw_gbps is not"),  # 375.81 ≠ 214.748 × 1.5
    (lambda m: m["interconnect"].update(gpu_count=1), "gpu_count"),
    (lambda m: m["interconnect"]["collectives"]["all_reduce"].reverse(), "must rise"),
    (lambda m: m["interconnect"]["collectives"]["all_reduce"].clear(), "no message sizes"),
    (lambda m: m["interconnect"]["collectives"]["all_reduce"][0].update(time_s=0), "time_s"),
    (lambda m: m["interconnect"].update(backend="mpi"), "backend"),
    (lambda m: m.update(copy_bandwidth_gbps=3000.0), "device_name, date, command, torch_version"),
    (lambda m: m.pop("interconnect"), "holds nothing"),
])
def test_strict_refusal_of_bad_fields(tmp_path, change, fragment):
    path = _file_with(tmp_path, change)
    with pytest.raises(UserError, match="my-8xh200.yaml") as err:
        load_gpu_file(path)
    assert fragment in str(err.value)
    assert_one_line_error(cli("hardware", "show", path), "my-8xh200.yaml")


def _one_point(m) -> None:
    m["interconnect"]["collectives"]["all_reduce"] = m["interconnect"]["collectives"]["all_reduce"][1:]


def _two_large(m) -> None:
    # 512 MiB in 2.5 ms beside 1 GiB in 5 ms: both at busbw 375.81 GB/s, no latency in either
    m["interconnect"]["collectives"]["all_reduce"][0] = comm_point("all_reduce", GIB // 2, 0.0025, 8).model_dump()


@pytest.mark.parametrize("change, fragment", [(_one_point, "at one size (1073741824 bytes)"),
                                              (_two_large, "its time is no latency")])
def test_a_curve_without_a_latency_point_times_no_collective(tmp_path, change, fragment):
    """The latency is read at the smallest size: one point alone (its whole 5 ms, read as the latency, would make
    every 8 KB decode all-reduce cost 5 ms), or a smallest size already at full bus bandwidth, gives none: the file
    loads and shows, but a collective it would time is refused in one line rather than extrapolated; the other
    measured collective (all_gather, from 4 KiB at 0.36 GB/s beside 376) still times its ops."""
    path = _file_with(tmp_path, change)
    gpu = load_gpu_file(path)
    assert fragment in gpu.measured.interconnect.no_latency("all_reduce")
    assert gpu.measured.interconnect.no_latency("all_gather") is None
    assert cli("hardware", "show", path).exit_code == 0
    assert cli("analyze", "decode", "--gpu", path, "--calibrated").exit_code == 0  # one GPU: no collective
    assert_one_line_error(cli("analyze", "decode", "--gpu", path, "--tp", "2", "--calibrated"), fragment)
    roofs = gpu.roofs(calibrated=True)
    assert "all_reduce" not in roofs.measured_collectives and "all_gather" in roofs.measured_collectives


def test_hardware_show_prints_the_measured_beside_the_datasheet(tmp_path):
    out = tmp_path / "my-8xh200.yaml"
    write_measured(H200, out, interconnect=_comm())
    text = cli("hardware", "show", str(out)).stdout
    assert "Measured interconnect (8 × NVIDIA H200, nccl" in text
    assert "376 GB/s at 1 GiB" in text and "20 µs at 4 KiB" in text and "450 GB/s + 10 µs" in text


# --- the engine with a measured interconnect ------------------------------------------------------------------


def test_engine_times_collectives_with_the_measured_interconnect(tmp_path):
    out = tmp_path / "my-8xh200.yaml"
    gpu = write_measured(H200, out, interconnect=_comm())
    w = resolve_workload("decode", model="llama-3-70b", batch=32, context=4096)
    spec = analyze(w, gpu, layout=Layout(8))
    cal = analyze(w, gpu, calibrated=True, layout=Layout(8))
    # attn_all_reduce sends 2·7/8 · 32·8192·2 = 917,504 bytes (tests/engine/test_parallel.py). Spec: 10 µs +
    # bytes / 450 GB/s (H200 datasheet 900 GB/s both ways); measured: 20 µs + bytes / 375.81 GB/s (all-reduce's
    # busbw at 1 GiB and time at 4 KiB, above).
    assert spec.placement("attn_all_reduce").time_s == pytest.approx(10e-6 + 917_504 / 450e9, rel=1e-12)
    assert cal.placement("attn_all_reduce").time_s == pytest.approx(20e-6 + 917_504 / 375.81e9, rel=1e-12)
    # The logits' all-gather: B×V×2 = 32·128,256·2 = 8,208,384 bytes, each GPU sends 7/8: 7,182,336 at 375.81 GB/s.
    assert cal.placement("logits_all_gather").op.bytes == 7_182_336
    assert cal.placement("logits_all_gather").time_s == pytest.approx(15e-6 + 7_182_336 / 375.81e9, rel=1e-12)
    # The HBM roofs are the datasheet's: the file measured no one-GPU ceiling.
    assert cal.roofs.bandwidth_gbps == spec.roofs.bandwidth_gbps == 4800
    assert cal.placement("o_proj").time_s == spec.placement("o_proj").time_s


def test_unmeasured_collectives_keep_the_datasheet(tmp_path):
    # A point-to-point send (PP) and an all-to-all (EP) were not measured here: the datasheet's figures time them.
    gpu = write_measured(H200, tmp_path / "my-8xh200.yaml", interconnect=_comm())
    w = resolve_workload("decode", model="llama-3-70b", batch=32, context=4096)
    a = analyze(w, gpu, calibrated=True, layout=Layout(tp=2, pp=2))
    x = 32 * 8192 * 2  # N×H in bf16
    assert a.placement("pp_send").time_s == pytest.approx(10e-6 + x / 450e9, rel=1e-12)
    moe = resolve_workload("decode", model="mixtral-8x7b", batch=32, context=4096)
    e = analyze(moe, gpu, calibrated=True, layout=Layout(ep=2))
    sent = e.placement("dispatch_all_to_all").op.bytes
    assert e.placement("dispatch_all_to_all").time_s == pytest.approx(10e-6 + sent / 450e9, rel=1e-12)


def test_analyze_calibrated_json_names_the_measured_collectives(tmp_path):
    out = tmp_path / "my-8xh200.yaml"
    write_measured(H200, out, interconnect=_comm())
    args = ("analyze", "decode", "--model", "llama-3-70b", "--tp", "8", "--gpu", str(out), "--json")
    cal = json.loads(cli(*args, "--calibrated").stdout)
    assert cal["parallel"]["measured_collectives"] == {"all_reduce": {"busbw_gbps": 375.81, "latency_us": 20.0},
                                                       "all_gather": {"busbw_gbps": 375.81, "latency_us": 15.0}}
    assert "measured_collectives" not in json.loads(cli(*args).stdout)["parallel"]
    text = cli(*args[:-1], "--calibrated").stdout
    assert "all_reduce: measured bus bandwidth 376 GB/s + 20 µs (calibrate --comm on 8 GPUs)" in text
    note = ("all_reduce, all_gather timed with the bus bandwidth and latency calibrate --comm measured, any other "
            "with the datasheet's interconnect")
    assert note in cal["parallel"]["notes"][-1]
    assert json.loads(cli(*args).stdout)["parallel"]["notes"][-1].endswith("not measured")


def test_validate_names_the_field():
    bad = _comm().model_dump()
    bad["collectives"]["all_reduce"][0]["bytes"] = 0
    with pytest.raises(UserError, match=r"collectives.all_reduce.0.bytes"):
        validate(MeasuredInterconnect, bad, "x.yaml")


# --- bad input: one line, exit 2 -----------------------------------------------------------------------------

_TORCHRUN = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}


@pytest.mark.parametrize("args, env, fragments", [
    ((), {}, ("torchrun --nproc-per-node N -m rooflinectl calibrate --comm", "--world-size N")),
    (("--world-size", "1"), {}, ("--world-size 1", "at least 2")),
    # One local process a rank: past the cores (about 300 MB of torch each) it is refused before any starts.
    (("--world-size", "1000", "--gpu", "h200"), {}, ("--world-size 1000", "cores")),
    (("--world-size", "99999999999999999999", "--gpu", "h200"), {}, ("--world-size 99999999999999999999",)),
    (("--world-size", "2"), _TORCHRUN, ("under torchrun", "leave --world-size out")),
    (("--world-size", "2", "--collectives", "all_reduse"), {}, ("unknown collective 'all_reduse'", "all_reduce")),
    (("--world-size", "2", "--comm-max", "2GiB"), {}, ("--comm-max 2GiB", "4 KiB to 1 GiB")),
    (("--world-size", "2", "--comm-max", "lots"), {}, ("--comm-max 'lots'",)),
    (("--world-size", "2"), {}, ("give --gpu",)),  # on the CPU (gloo) no device name says which GPU
])
def test_bad_input_is_one_line(tmp_path, args, env, fragments):
    out = tmp_path / "x.yaml"
    assert_one_line_error(cli("calibrate", "--comm", "-o", str(out), *args, env=env), *fragments)
    assert not out.exists()


def test_torchrun_with_one_process_is_refused(tmp_path):
    env = {**_TORCHRUN, "WORLD_SIZE": "1"}
    assert_one_line_error(cli("calibrate", "--comm", "-o", str(tmp_path / "x.yaml"), env=env), "at least 2")


@pytest.mark.parametrize("option, value", [("--comm-max", "64KiB"), ("--collectives", "all_reduce"),
                                           ("--world-size", "2")])
def test_comm_options_need_comm(tmp_path, option, value):
    assert_one_line_error(cli("calibrate", "-o", str(tmp_path / "x.yaml"), option, value),
                          f"{option} belongs to calibrate --comm")


def test_bundled_h200_unchanged():
    assert load_gpu("h200").measured is None


def test_nvls_is_off_before_the_process_group_starts(monkeypatch):
    # The machines' notes require NCCL's NVLink multicast off: NCCL reads NCCL_NVLS_ENABLE when the process group
    # creates its communicator, so it must be set before init_process_group.
    import torch.distributed as dist

    from rooflinectl.calibrate import comm_run

    seen = {}
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    monkeypatch.setattr(dist, "init_process_group",
                        lambda backend, **kw: seen.update(backend=backend, nvls=os.environ["NCCL_NVLS_ENABLE"], **kw))
    comm_run._init(0, 2, 0)
    assert seen["nvls"] == "0" and seen["rank"] == 0 and seen["world_size"] == 2
    import torch

    assert seen["backend"] == ("nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo")
