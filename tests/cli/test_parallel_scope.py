"""Over several GPUs every batch and rate of analyze states its scope: the workload is the whole deployment's,
``parallel.batch_per_gpu`` one GPU's, tokens/s the deployment's beside tokens/s per GPU, and the verdict's batches
say which they are."""

from __future__ import annotations

import json
import re

import pytest

from helpers import cli

MIXTRAL_EP4 = ("analyze", "decode", "--gpu", "h200", "--model", "mixtral-8x7b", "--batch", "32", "--ep", "4")


def test_under_ep_the_workload_is_the_whole_batch_and_one_gpus_is_beside_it():
    d = json.loads(cli(*MIXTRAL_EP4, "--json").stdout)
    w, t, par = d["workload"], d["totals"], d["parallel"]
    assert (w["batch"], par["batch_per_gpu"], par["gpus"]) == (32, 8, 4)  # ⌈32/4⌉ sequences a GPU
    # tokens/s = the deployment's tokens over the step's time; per GPU a quarter of it.
    assert t["tokens_per_s"] == pytest.approx(w["batch"] * w["seq_len"] / t["time_s"], rel=1e-12)
    assert t["tokens_per_s_per_gpu"] == pytest.approx(t["tokens_per_s"] / 4, rel=1e-12)
    # Each GPU's experts are those the whole batch's 32 tokens touch: 8·(1 − (1 − 2/8)^32), not 8 tokens' 7.199.
    assert w["experts_touched"] == pytest.approx(8 * (1 - 0.75 ** 32), rel=1e-12)


def test_under_tp_every_gpu_runs_the_whole_batch():
    d = json.loads(cli("analyze", "decode", "--gpu", "h100", "--model", "llama-3-70b", "--batch", "32", "--tp", "4",
                       "--json").stdout)
    assert d["workload"]["batch"] == d["parallel"]["batch_per_gpu"] == 32


def test_the_verdicts_batches_under_ep_say_a_gpus_and_the_deployments():
    text = " ".join(cli(*MIXTRAL_EP4, env={"COLUMNS": "200"}).stdout.split())
    assert "for only 8 new tokens a GPU, 32 over its 4 GPUs" in text
    turn = re.search(r"compute-bound at batch ≈ ([\d,]+) a GPU, ([\d,]+) over its 4 GPUs", text)
    assert turn is not None, text
    per_gpu, whole = (int(x.replace(",", "")) for x in turn.groups())
    assert whole == 4 * per_gpu
    fits = re.search(r"largest batch that fits at this length is ([\d,]+) over the 4 GPUs, ([\d,]+) a GPU", text)
    assert fits is not None, text
    whole, per_gpu = (int(x.replace(",", "")) for x in fits.groups())
    assert whole == 4 * per_gpu
    assert f"largest batch that fits: {whole:,} over the 4 GPUs" in text


def test_the_collectives_line_states_the_rate_each_op_ran_at():
    # MI355X: xGMI 1,075 GB/s both directions over 7 links of a full mesh, 537.6 a direction; TP 2's two GPUs share
    # 1 of the 7 links, 76.8 GB/s. One all-reduce of x (32 × 8192 bf16, 524,288 B, of which a GPU sends
    # 2·(2 − 1)/2 = 1×) takes 524,288 / 76.8e9 + 10 µs = 16.83 µs: the line names 76.8, not 538.
    cmd = ("analyze", "decode", "--gpu", "mi355x", "--model", "llama-3-70b", "--tp", "2", "--batch", "32",
           "--context", "1024")
    d = json.loads(cli(*cmd, "--json").stdout)
    reduce = next(o for o in d["ops"] if o["name"] == "attn_all_reduce")
    assert reduce["time_s"] == pytest.approx(524_288 / 76.8e9 + 10e-6, rel=1e-9)
    text = " ".join(cli(*cmd, env={"COLUMNS": "200"}).stdout.split())
    assert "of the step) at 76.8 GB/s a direction + 10 µs each" in text
    # B200 TP 16 spans two 8-GPU NVLink domains: an all-reduce of S sends 1.875·S a GPU, 0.125·S of it over the
    # 50 GB/s NIC, which binds (0.125·S / 50 GB/s > 1.75·S / 900 GB/s): a bus bandwidth of 1.875 / (0.125 / 50)
    # = 750 GB/s, and 10 µs + 2 network steps × 5 µs of latency (the logits' all-gather: 1 step, 15 µs).
    text = " ".join(cli("analyze", "decode", "--gpu", "b200", "--model", "llama-3-70b", "--tp", "16", "--batch",
                        "64", "--context", "1024", env={"COLUMNS": "200"}).stdout.split())
    assert "of the step) at 750 GB/s of bus bandwidth, the network binding + 15–20 µs each" in text
