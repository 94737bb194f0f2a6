"""``compare --replicas N`` and ``--disagg P:D`` (serving.deployed, api.deployed): each deployment's row is
``rl.serve`` of the same load with the same options, its throughput per GPU over every GPU of the deployment, its
largest batch what its (decode) replicas hold; bad splits refused in one line; the table whole at 80 columns."""

from __future__ import annotations

import csv
import io
import json

import pytest

import rooflinectl as rl
from helpers import assert_one_line_error, cli
from rooflinectl.units import number

REQUEST = {"model": "llama-3-8b", "prompt": 1024, "output": 32}


@pytest.fixture(scope="module")
def rows():
    """On the H100: one engine, 4 aggregated replicas and 1 prefill + 3 decode replicas, each at batch 24."""
    r = rl.compare(gpus=["h100"], batch=24, replicas=[1, 4], disagg=["1:3"], price_per_gpu_hour=2.0, **REQUEST)
    return r.to_dict()["gpus"]


def _serve(**options):
    """``rl.serve`` of compare's closed batch of 24: 24 clients sending one request each, no sequence limit."""
    return rl.serve(gpu="h100", concurrency=24, requests=24, max_num_seqs=24, price_per_gpu_hour=2.0,
                    **REQUEST, **options).to_dict()


@pytest.mark.parametrize(("index", "options"), [(1, {"replicas": 4}), (2, {"disagg": "1:3"})])
def test_a_deployment_row_is_rl_serve_of_the_same_batch(rows, index, options):
    row, s = rows[index], _serve(**options)
    assert row["batch"] == 24 and row["rule"] == "given"
    for key, want in (("ttft_s", s["ttft_s"]["mean"]), ("tpot_s", s["tpot_s"]["mean"]), ("e2e_s", s["e2e_s"]["mean"]),
                      ("output_tokens_per_s_per_gpu", s["throughput"]["output_tokens_per_s_per_gpu"]),
                      ("usd_per_million_output_tokens", s["cost"]["usd_per_million_output_tokens_all_on_output"]),
                      ("joules_per_output_token", s["cost"]["joules_per_output_token"])):
        assert row[key] == pytest.approx(want, rel=1e-9), key
    transfer = s["deployment"]["kv_transfer"]
    if transfer is None:
        assert row["kv_transfer_s"] is None and row["deployment"] == "aggregated" and row["replicas"] == 4
    else:
        assert row["kv_transfer_s"] == pytest.approx(transfer["link_time_s"]["mean"], rel=1e-9)
        assert row["kv_bytes_per_request"] == pytest.approx(transfer["kv_bytes_per_request"], rel=1e-9)
        assert (row["deployment"], row["prefill_replicas"], row["decode_replicas"], row["replicas"]) == \
            ("disaggregated", 1, 3, None)
    assert row["gpus"] == 4 and row["bound"] is None


def test_one_engine_row_is_unchanged_and_the_largest_batch_is_the_replicas(rows):
    one, four, split = rows
    assert (one["deployment"], one["gpus"], one["replicas"]) == ("engine", 1, 1)
    assert one["bound"] == "memory 100%"
    # Each replica holds what one engine holds; disaggregated, only the 3 decode replicas hold a request to its end.
    assert four["largest_batch"] == 4 * one["largest_batch"]
    assert split["largest_batch"] == 3 * one["largest_batch"]


def test_throughput_per_gpu_divides_by_every_gpu_of_the_split():
    # 1 prefill replica of TP 2 and 2 decode replicas of TP 1: 1 × 2 + 2 × 1 = 4 GPUs. The run emits 16 × 32 output
    # tokens over its duration.
    r = rl.compare(gpus=["h100"], batch=16, replicas=[2], disagg=["1:2"], prefill_tp=2, decode_tp=1, **REQUEST)
    row = r.to_dict()["gpus"][1]
    run = rl.serve(gpu="h100", concurrency=16, requests=16, max_num_seqs=16, disagg="1:2", prefill_tp=2,
                   decode_tp=1, **REQUEST).run
    assert (row["gpus"], row["prefill_tp"], row["decode_tp"], row["tp"]) == (4, 2, 1, 1)
    assert row["output_tokens_per_s_per_gpu"] == pytest.approx(16 * 32 / run.duration_s / 4, rel=1e-12)
    assert row["total_tokens_per_s_per_gpu"] == pytest.approx(16 * (1024 + 32) / run.duration_s / 4, rel=1e-12)
    assert r.choices[1].gpu == "h100-sxm 1P TP2+2D TP1"


def test_a_closed_loop_row_is_rl_serve_of_that_loop():
    r = rl.compare(gpus=["h100"], concurrency=8, requests=24, disagg=["1:1"], **REQUEST).to_dict()
    assert r["load"] == {"kind": "closed loop", "concurrency": 8, "requests": 24}
    one, split = r["gpus"]
    for row, options in ((one, {}), (split, {"disagg": "1:1"})):
        s = rl.serve(gpu="h100", concurrency=8, requests=24, max_num_seqs=8, **REQUEST, **options).to_dict()
        assert row["batch"] == 8 and row["rule"] == "closed loop of 8 clients"
        assert row["tpot_s"] == pytest.approx(s["tpot_s"]["mean"], rel=1e-9)
        assert row["output_tokens_per_s_per_gpu"] == pytest.approx(s["throughput"]["output_tokens_per_s_per_gpu"],
                                                                   rel=1e-9)


def test_a_tpot_target_picks_the_deployment_batch_that_meets_it():
    r = rl.compare(gpus=["h100"], tpot_ms=6, replicas=[2], model="llama-3-8b", prompt=512, output=8)
    (row,) = r.to_dict()["gpus"]
    assert row["tpot_s"] <= 0.006 < rl.compare(gpus=["h100"], batch=row["batch"] + 1, replicas=[2],
                                               model="llama-3-8b", prompt=512, output=8).to_dict()["gpus"][0]["tpot_s"]


@pytest.mark.parametrize(("args", "fragments"), [
    (["--disagg", "0:4"], ["--disagg 0:4", "1 to 512"]),
    (["--disagg", "2:0"], ["--disagg 2:0"]),
    (["--disagg", "1.5:2"], ["--disagg 1.5:2", "P:D"]),
    (["--disagg", "two:six"], ["--disagg two:six"]),
    (["--model", "llama-3-70b", "--gpu", "h100", "--disagg", "1:1", "--prefill-tp", "4"],
     ["--disagg 1:1 on h100-sxm", "decode replica (TP 1) cannot hold one request", "--decode-tp"]),
    # llama-3.1-70b's 131.4 GiB of weights leave a TP-1 H200 no KV block: no prompt can be prefilled there.
    (["--model", "llama-3.1-70b", "--gpu", "h200", "--tp", "4", "--disagg", "1:1", "--prefill-tp", "1"],
     ["--disagg 1:1 on h200", "prefill replica (TP 1) holds 0 KV blocks", "--prefill-tp"]),
    (["--replicas", "0"], ["--replicas 0"]),
    (["--prefill-tp", "2"], ["--prefill-tp", "give the split"]),
    (["--disagg", "1:1", "--prefill-tp", "0"], ["--prefill-tp 0", "whole number of GPUs"]),
    (["--concurrency", "8", "--batch", "4"], ["give one load"]),
    (["--requests", "8"], ["--requests without --concurrency"]),
    (["--disagg", "1:1", "--stack", "roofline", "--no-chunked-prefill"], ["--no-chunked-prefill"]),
    (["--disagg", "1:1", "--kv-transfer", "soon"], ["--kv-transfer soon"]),
])
def test_bad_deployments_are_one_line(args, fragments):
    assert_one_line_error(cli("compare", *args), *fragments)


def test_the_table_at_80_columns_is_whole_and_the_csv_carries_the_deployment():
    args = ["compare", "--gpu", "h100", "--gpu", "h200", "--model", "llama-3-8b", "--batch", "32", "--replicas", "1",
            "--replicas", "8", "--disagg", "2:6", "--disagg", "1:3", "--decode-tp", "2", "--price-per-gpu-hour", "2.5"]
    out = cli(*args, env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    assert "…" not in out and all(len(line.rstrip()) <= 80 for line in lines)
    table = list(csv.DictReader(io.StringIO(cli(*args, "--csv").stdout)))
    names = [row["gpu"] for row in table]
    assert names == ["h100-sxm", "h100-sxm 8×TP1", "h100-sxm 2P TP1+6D TP2", "h100-sxm 1P TP1+3D TP2",
                     "h200", "h200 8×TP1", "h200 2P TP1+6D TP2", "h200 1P TP1+3D TP2"]
    for row in table:  # each row starts with its whole name and its output tokens/s per GPU, grep finds both
        line = next(line for line in lines if line.startswith(row["gpu"] + "  "))
        assert f" {number(float(row['output_tokens_per_s_per_gpu']))} " in line
    assert "(left out: largest, end-to-end, decode bound, GPUs, KV xfer, J/tok)" in lines
    # The lines under the table say what each deployment is, its GPUs and its KV transfer.
    text = " ".join(line.strip() for line in lines)
    # llama-3-8b's KV of 2,048 positions: 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes × 2,048 = 268,435,456
    # bytes; the one TP-1 prefill GPU sends all of it, over the 50 GB/s NDR port a GPU since 14 GPUs exceed the HGX
    # board: 268,435,456 / 50e9 s + 5 µs = 5.37 ms.
    assert "h100-sxm 2P TP1+6D TP2: 2 prefill replicas of TP 1 + 6 decode replicas of TP 2, 14 GPUs; KV 268 MB a " \
           "request, 5.37 ms on InfiniBand NDR" in text  # 14 GPUs exceed the HGX board's 8: the KV crosses the NIC
    assert "h100-sxm 1P TP1+3D TP2: 1 prefill replica of TP 1 + 3 decode replicas of TP 2, 7 GPUs" in text
    split = table[2]
    assert (split["deployment"], split["prefill_replicas"], split["prefill_tp"], split["decode_replicas"],
            split["decode_tp"], split["gpus"]) == ("disaggregated", "2", "1", "6", "2", "14")
    assert float(split["kv_transfer_s"]) > 0 and split["replicas"] == ""
    data = json.loads(cli(*args, "--json").stdout)
    assert [row["gpus"] for row in data["gpus"]][:4] == [1, 8, 14, 7]
