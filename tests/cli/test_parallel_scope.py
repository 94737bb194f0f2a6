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
