"""benchmarks/serving_truth_dp.py without the published runs: which rows it replays as data-parallel attention and
with what options, and that its prediction is api.serve's."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import rooflinectl as rl

BENCH = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
spec = importlib.util.spec_from_file_location("serving_truth_dp", BENCH / "serving_truth_dp.py")
assert spec is not None and spec.loader is not None
dp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dp)

ROW = {"id": "r", "backend": "trtllm", "system": "b200_sxm", "model_path": "deepseek-ai/DeepSeek-R1", "mode": "agg",
       "isl": "300", "osl": "6", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4", "batch_size": "2",
       "tp_size": "1", "attention_dp_size": "8", "moe_tp_size": "1", "moe_ep_size": "8", "silicon_ttft_ms": "100",
       "silicon_tpot_ms": "10", "concurrency": "16", "tp_effective": "1", "ep_effective": "8"}


def _csv(tmp_path, rows):
    path = tmp_path / "runs.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(ROW))
        w.writeheader()
        w.writerows(rows)
    return path


def test_data_parallel_rows_are_replayed_with_their_ranks_and_per_rank_batch(tmp_path):
    rows = [ROW, {**ROW, "id": "tp", "tp_effective": "8", "attention_dp_size": "1"},  # tensor-parallel: not here
            {**ROW, "id": "product", "attention_dp_size": "64"},  # a product label: left out, named
            {**ROW, "id": "nobatch", "batch_size": ""}]
    cases, skipped = dp.dp_cases(_csv(tmp_path, rows))
    assert [(c.id, c.tp, c.ep, seqs) for c, seqs in cases] == [("r", 1, 8, 2), ("nobatch", 1, 8, 16)]
    assert dict(cases[0][0].dtypes) == {"weight_dtype": "nvfp4", "act_dtype": "fp4", "kv_dtype": "fp8"}
    assert skipped == ["product: attention_dp_size 64 against ep_effective 8"]
    assert not any(c.fit for c, _ in cases)  # no data-parallel row is in the fit


def test_the_prediction_is_api_serve_with_the_rank_limit(tmp_path):
    (case, seqs), = dp.dp_cases(_csv(tmp_path, [{**ROW, "model_path": "openai/gpt-oss-120b",
                                                  "attention_dp_size": "2", "ep_effective": "2"}]))[0]
    ttft, tpot = dp.predict(case, seqs, "trtllm")
    run = rl.serve(stack="trtllm", **{**case.options, "max_num_seqs": seqs}).run
    assert run.ttft is not None and run.tpot is not None
    assert (ttft, tpot) == (run.ttft.mean * 1e3, run.tpot.mean * 1e3)
    assert case.options["ep"] == 2 and case.options["tp"] == 1  # --ep alone: data-parallel attention
