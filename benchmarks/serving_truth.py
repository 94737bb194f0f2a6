"""The serving simulation against published runs of vLLM, SGLang and TensorRT-LLM on H100 SXM and B200: mean TPOT
and mean TTFT, predicted and measured, per engine and GPU.

    python benchmarks/serving_truth.py [CSV] [--json FILE]     # the report (markdown) on stdout
    python benchmarks/serving_truth.py [CSV] --fit [--write-stacks]

CSV: the published runs (default ``../shared/serving_truth/published_h100_b200.csv`` from the repository root;
its README states the columns and the known faults). Data measured by others: read here at run time, never copied
into the project.

A row is used when it is aggregated serving (``mode`` agg) on one model copy, its attention tensor-parallel
(expert parallelism, ``ep_effective`` above 1, only over the same GPUs as the TP: --tp E --ep E), of a model
bundled here (MODELS), in a quantization mapped here (``quant_options``). Each is simulated with ``api.serve``:
``concurrency`` clients in a closed loop, every request ``isl`` prompt and ``osl`` output tokens,
``tp_effective`` as --tp (and --ep), max_num_seqs = concurrency (the engines were configured to hold every
client), the engine's scheduling of prompts beside decodes (PREFILL_STEPS), token budget a step and chunked
prefill or not (``Case.budget``, ``Case.chunked``), blocks of 16, the KV cache in bf16 (the runs do not record
its type; fp8 for nvfp4 checkpoints, ``quant_options``), and ``requests_for(concurrency)`` requests, fewer than
the measured runs had, for speed (how many rounds of clients are simulated moves the mean TTFT:
``requests_for`` says how the count was chosen).

Each row's predictions:
- ``generate``: the static path, ``api.generate`` at batch = concurrency (every request prefilled at once, then
  decoded together): TTFT is the batch's prefill, TPOT its mean decode step;
- ``roofline``: ``api.serve`` with the ``roofline`` stack (the ops at the roofs, nothing between them);
- ``stack``: ``api.serve`` with the engine's stack (``stacks/<backend>.yaml``).
Per engine and GPU the report gives the mean absolute percentage error (MAPE) of each and the median ratio of
predicted to measured.

``--fit`` fits each engine's stack to the rows of the fitting half (``in_fit_half``: the SHA-256 of the row's id
starts with an even hex digit) that the simulation represents (``Result.represented``: the clients' sequences fit
the simulated KV cache, and the data's README names no fault), once over both GPUs (the stack's own figures) and
once over each GPU family's rows (its ``families``, which price that family's rows: an engine runs other kernels,
and the data other engine versions, on Hopper than on Blackwell), and reports every table on the other half. In
a closed loop with fixed lengths the steps the engine runs do not depend on their times (a client's next request
arrives at the end of the step that finished its last), so one recorded run per row prices every stack
(``Linear``): a step costs Σ ops count · max(compute time / compute_efficiency, memory time /
bandwidth_efficiency) (a collective's interconnect time over collective_efficiency; the attention ops' over
attention_efficiency) + kernels × kernel_gap_us + step_overhead_us + sequences × sequence_overhead_us + KV
positions × layers × kv_position_ns, each request's TTFT and TPOT are sums of its steps' costs, and TTFT adds
request_latency_us + stream_lag_steps × its TPOT. For each (bandwidth_efficiency, compute_efficiency,
stream_lag_steps) of a grid the other figures are the non-negative minimizers of the sum of absolute relative
errors of TPOT and TTFT over the fitting rows (iteratively reweighted least squares, each a non-negative least
squares), the errors weighed by the targets (TPOT MAPE / 12% + TTFT MAPE / 25%); the grid point with the smallest
weighted error wins. ``--write-stacks`` writes the three stack files with what was fitted.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import functools
import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = "../shared/serving_truth/published_h100_b200.csv"

# Hugging Face id → bundled model. DeepSeek-R1's config.json is DeepSeek-V3's architecture, every size the same.
MODELS = {
    "Qwen/Qwen3-32B": "qwen3-32b",
    "nvidia/Qwen3-32B-NVFP4": "qwen3-32b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    "deepseek-ai/DeepSeek-R1": "deepseek-v3",
    "nvidia/DeepSeek-R1-NVFP4": "deepseek-v3",
    "nvidia/DeepSeek-V3.1-NVFP4": "deepseek-v3",
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
}
# Each engine's scheduling of prompts beside decodes (Stack.prefill_steps): vLLM V1 and TensorRT-LLM's in-flight
# batching put prefill chunks in the decodes' step; SGLang runs a prefill batch apart whenever one can be formed
# (its scheduler's default without --enable-mixed-chunk). Measured here: SGLang's rows replayed with separate
# steps, refit, held-out TTFT error 10.5% against 47.6% mixed; TensorRT-LLM's with separate steps 96.6%.
PREFILL_STEPS = {"vllm": "mixed", "sglang": "separate", "trtllm": "mixed"}
# Each engine's token budget a step in the runs (written into its stack's max_num_batched_tokens). vLLM: 2,048,
# its SchedulerConfig's own default where the engine is built outside its OpenAI server and LLM class (which take
# 8,192 and 16,384 on a GPU of 70 GiB or more: vllm/engine/arg_utils.py, get_batch_defaults; the runs do not
# record how their workers were built), and the budget ai-dynamo/aiconfigurator's replay of its own H100 Qwen3-32B
# vLLM rows states
# (docs/blogs/digital-twin-simulation, h100_qwen3_counterpart); measured here on half the vLLM rows, refit:
# held-out TTFT error 23.4% at 2,048 against 31.9% at 8,192, TPOT 11.3% against 10.7%; the budget
# aiconfigurator's generator writes for vLLM workers (batch + ISL + 1,500, as ``trtllm_budget``), chunked,
# measured 21.0% against 17.9% (8 rounds, families). SGLang: 8,192, its chunked_prefill_size. TensorRT-LLM: its
# default max_num_tokens, 8,192, the stack's default; each of its rows is replayed with the budget
# aiconfigurator gave the run (``trtllm_budget``).
BUDGETS = {"vllm": 2048, "sglang": 8192, "trtllm": 8192}
# Chunked prefill in the runs: on in vLLM V1 and SGLang, off in TensorRT-LLM (its default, which aiconfigurator's
# TensorRT-LLM configurations leave: ``trtllm_budget``).
CHUNKED = {"vllm": True, "sglang": True, "trtllm": False}
DEFAULT_BUDGET = 8192  # api.serve's budget where neither the options nor the stack give one (SchedulerConfig)


def trtllm_budget(batch: int, isl: int) -> int:
    """TensorRT-LLM's max_num_tokens in a run of ``batch`` clients of ``isl``-token prompts as
    ai-dynamo/aiconfigurator configures an aggregated worker: max_batch_size = the batch and max_num_tokens =
    batch + ISL + 1,500, rounded up to the 32-token KV block, chunked prefill off
    (src/aiconfigurator/cli/backends/trtllm.py at its first commit efcae124, August 2025: "we're assuming no
    chunked prefill"; generator/rule_plugin/benchmark/trtllm.rule from 71bb3d00, January 2026, its benchmark
    configurations). The rows do not record their options: that the runs were configured so is an assumption,
    which the held-out errors test. A step then holds one or two whole prompts beside the decodes, where 8,192
    chunked would hold eight of 1,024. Measured on the TensorRT-LLM rows (8 rounds, families,
    refit): held-out TTFT 31.6% → 29.6%, TPOT 12.9% → 12.6%; with the halves swapped 31.2% → 30.3%."""
    return -(-(batch + isl + 1500) // 32) * 32


SYSTEMS = {"h100_sxm": "h100-sxm", "b200_sxm": "b200"}
BACKENDS = ("vllm", "sglang", "trtllm")
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
# The fusions every one of the three engines loads its checkpoints into: Q, K and V as one matrix, gate and up as
# one (vLLM's and SGLang's QKVParallelLinear and MergedColumnParallelLinear, TensorRT-LLM's fused QKV and gate_up).
FUSED = ("qkv", "gate_up")
# The efficiency grid --fit scans: every stack's efficiencies are one of these pairs.
BANDWIDTH_GRID = tuple(round(0.40 + 0.05 * i, 2) for i in range(13))  # 0.40 … 1.00
COMPUTE_GRID = tuple(round(0.20 + 0.05 * i, 2) for i in range(17))  # 0.20 … 1.00
# The stream lags --fit scans (Stack.stream_lag_steps, in steps of a request's own TPOT): TTFT gains lag × TPOT, a
# product of two fitted things, so the lag is a grid beside the efficiencies'. Measured on the fitting half, each
# engine refit (8 rounds, families): TensorRT-LLM's rows chose 4–8 steps, SGLang's 16, vLLM's 0–2; held out,
# TTFT went 29.6% → 28.5% (TensorRT-LLM), 18.0% → 16.9% (vLLM), 11.7% → 9.3% (SGLang); halves swapped
# 30.3% → 28.5%, 24.9% → 24.2%, 20.4% → 18.9%.
LAG_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0)
TARGET_TPOT, TARGET_TTFT = 12.0, 25.0  # MAPE targets, percent
# The fewest fitting rows of a GPU family that are fitted apart: five a figure (seven unknowns and the grid's two).
# What fitting each family apart gave is in docs/serving.md, "Each GPU family's own figures".
FAMILY_ROWS = 45


# The folders every cached prediction is computed from: the package, and the GPUs' and models' spec files.
CODE_FOLDERS = ("rooflinectl", "hardware", "workloads")
ROUNDS, LEAST_REQUESTS = 8, 32  # requests_for: the rounds of clients simulated, and the fewest requests


@functools.cache
def code_fingerprint(root: Path = ROOT) -> str:
    """A hash of every source and spec file under CODE_FOLDERS: part of each --cache key, so predictions cached by
    other code are never read back as this code's."""
    h = hashlib.sha256()
    for folder in CODE_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".yaml", ".yml", ".json"):
                h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def requests_for(concurrency: int) -> int:
    """Requests simulated per row: ROUNDS rounds of the clients, at least LEAST_REQUESTS. The runs' own request
    counts are not recorded. All the clients start at once, so the first round queues for its prefills and the
    mean TTFT falls as rounds are added (Qwen3-32B TP4 on H100, 4096/512 tokens, 128 clients, vLLM's stack: 3.6 s
    over 2 rounds, 1.9 s over 4, 0.96 s over 10; measured 1.36 s). The count was chosen on the fitting half alone:
    every stack refit with 4, 6 and 8 rounds simulated, the fitting rows' weighted error (TPOT MAPE / 12% + TTFT
    MAPE / 25%) was 2.27, 2.12 and 2.09; the first round weighed as 1/5 … 1/20 of the mean beside rounds 2–4 was
    best at 1/7–1/8 (2.12). docs/serving.md, "Validation against published runs", gives the held-out errors."""
    return max(ROUNDS * concurrency, LEAST_REQUESTS)


def known_fault(case: Case) -> str | None:
    """Why a row's TTFT is not the engine's steady state, by the data's README (its known faults), else None."""
    if case.backend == "sglang" and case.model == "deepseek-v3" and case.system == "b200_sxm":
        return "SGLang's DeepSeek runs on B200 (TTFTs of seconds even at low concurrency)"
    if case.concurrency >= 512 and case.ttft_ms > 10_000:
        return "concurrency 512 with a TTFT above 10 s (the engine did not hold every client)"
    return None


def in_fit_half(row_id: str) -> bool:
    """The fitting half: rows whose id's SHA-256 (hex) starts with an even digit (0, 2, 4, 6, 8, a, c, e)."""
    return int(hashlib.sha256(row_id.encode()).hexdigest()[0], 16) % 2 == 0


class Skip(Exception):
    """A row the validation cannot simulate; the message is the reason, counted in the report."""


def quant_options(gemm: str, moe: str, has_experts: bool, fp4_peak: bool) -> dict[str, str]:
    """--weight-dtype, --act-dtype and --kv-dtype of a row's quantization: '' → bf16 (the defaults); fp8 → fp8
    weights and activations; fp8_block → fp8_block weights (128×128 blocks) and fp8 activations; nvfp4 → nvfp4
    weights, with fp4 activations where the GPU has an fp4 peak (else bf16: w4a16), and an fp8 KV cache. The
    engines read nvfp4 weights from NVIDIA Model Optimizer checkpoints (nvidia/*-NVFP4), whose
    hf_quant_config.json names an FP8 KV cache (kv_cache_quant_algo), which vLLM's and TensorRT-LLM's automatic
    KV dtype follow; the other rows' KV type is not recorded and stays bf16. Measured: refit, held-out TPOT 12.3%
    → 12.1% and TTFT 30.9% → 30.7%, DeepSeek-V3 on TensorRT-LLM's TPOT 22.2% → 20.9%; an fp8 KV cache for the
    fp8 rows too gave 12.3% and 31.1%. A model with experts takes the experts' format (``moe``; its experts hold
    most of its weights), any other model the GEMMs' (``gemm``); an unknown format is a Skip."""
    mode = (moe if has_experts and moe else gemm).strip()
    if mode == "":
        return {}
    if mode == "fp8":
        return {"weight_dtype": "fp8", "act_dtype": "fp8"}
    if mode == "fp8_block":
        return {"weight_dtype": "fp8_block", "act_dtype": "fp8"}
    if mode == "nvfp4":
        fp4 = {"weight_dtype": "nvfp4", "act_dtype": "fp4"} if fp4_peak else {"weight_dtype": "nvfp4"}
        return {**fp4, "kv_dtype": "fp8"}
    raise Skip(f"quantization {mode} not mapped")


@dataclass(frozen=True)
class Case:
    """One usable row: what it measured and the options it is simulated with."""

    id: str
    backend: str
    system: str
    model: str
    gpu: str
    tp: int
    ep: int
    concurrency: int
    isl: int
    osl: int
    dtypes: tuple[tuple[str, str], ...]
    tpot_ms: float
    ttft_ms: float
    fit: bool
    # The engine's version and the month it was measured, as the row gives them ("?" where it does not): the rows
    # of one campaign share a container and a benchmark setup
    campaign: str = ""
    batch: int | None = None  # the engine's max batch where it is not the clients (a data-parallel rank's)

    @property
    def options(self) -> dict[str, object]:
        """api.serve's keywords but the stack and the fusions."""
        layout = {"ep": self.ep} if self.ep > 1 else {}
        steps: dict[str, object] = {"prefill_steps": "separate"} if not self.mixed else {}
        if self.budget != DEFAULT_BUDGET:
            steps["max_num_batched_tokens"] = self.budget
        if not self.chunked:
            steps["chunked_prefill"] = False
        return dict(gpu=self.gpu, model=self.model, tp=self.tp, **layout, concurrency=self.concurrency,
                    prompt=self.isl, output=self.osl, requests=requests_for(self.concurrency),
                    max_num_seqs=self.concurrency, **steps, **dict(self.dtypes))

    @property
    def budget(self) -> int:
        """The engine's token budget a step in the run (BUDGETS; TensorRT-LLM's, ``trtllm_budget``)."""
        if self.backend == "trtllm":
            return trtllm_budget(self.batch or self.concurrency, self.isl)
        return BUDGETS[self.backend]

    @property
    def chunked(self) -> bool:
        """Whether the engine prefilled prompts in chunks (CHUNKED)."""
        return CHUNKED[self.backend]

    @property
    def mixed(self) -> bool:
        """Whether the engine puts prefill chunks in the decodes' step (PREFILL_STEPS)."""
        return PREFILL_STEPS[self.backend] == "mixed"


@functools.cache
def _has_fp4(gpu: str) -> bool:
    from rooflinectl.specs.hardware import load_gpu

    return "fp4" in load_gpu(gpu).compute.tensor_tflops


@functools.cache
def family(gpu: str) -> str | None:
    """The GPU's family as a stack keys its figures (specs.stack.family_of: its compute capability's major)."""
    from rooflinectl.specs.hardware import load_gpu
    from rooflinectl.specs.stack import family_of

    return family_of(load_gpu(gpu).compute_capability)


@functools.cache
def _has_experts(model: str) -> bool:
    from rooflinectl.specs.models import load_model

    return load_model(model).moe is not None


def case_of(row: dict[str, str]) -> Case:
    """The row as a Case; a row that cannot be simulated is a Skip naming why."""

    if row["mode"] != "agg":
        raise Skip(f"mode {row['mode']} (disaggregated serving is not simulated)")
    if row["attention_dp_size"] not in ("", "1") or row["tp_effective"] == "1" != row["ep_effective"]:
        raise Skip("data-parallel attention (replayed apart: serving_truth_dp.py)")
    if row["ep_effective"] not in ("1", row["tp_effective"]):
        raise Skip("expert parallelism over other GPUs than the TP's")
    if row["backend"] not in BACKENDS:
        raise Skip(f"backend {row['backend']}")
    if row["system"] not in SYSTEMS:
        raise Skip(f"system {row['system']}")
    if row["model_path"] not in MODELS:
        raise Skip(f"no bundled model ({row['model_path']})")
    model = MODELS[row["model_path"]]
    gpu = SYSTEMS[row["system"]]
    dtypes = quant_options(row["gemm_quant_mode"], row["moe_quant_mode"], _has_experts(model), _has_fp4(gpu))
    tpot, ttft = float(row["silicon_tpot_ms"] or "nan"), float(row["silicon_ttft_ms"] or "nan")
    if not (tpot > 0 and ttft > 0):
        raise Skip("no measured TPOT or TTFT")
    return Case(id=row["id"], backend=row["backend"], system=row["system"], model=model, gpu=gpu,
                tp=int(row["tp_effective"]), ep=int(row["ep_effective"]), concurrency=int(row["concurrency"]),
                isl=int(row["isl"]), osl=int(row["osl"]), dtypes=tuple(sorted(dtypes.items())), tpot_ms=tpot,
                ttft_ms=ttft, fit=in_fit_half(row["id"]),
                campaign=f"{row.get('backend_version') or '?'}, {(row.get('measured') or '?')[:7]}")


def read_cases(path: Path) -> tuple[list[Case], Counter[str], str]:
    """The usable rows, the skipped ones counted by reason, and the CSV's source commit(s)."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    cases, skipped = [], Counter()
    for row in rows:
        try:
            cases.append(case_of(row))
        except Skip as why:
            skipped[str(why)] += 1
    commits = sorted({r["source_commit"] for r in rows})
    return cases, skipped, ", ".join(commits)


# --- the predictions ---------------------------------------------------------------------------------------------


def predict_generate(case: Case) -> tuple[float, float]:
    """(TTFT, TPOT) in ms of the static path: the batch of every client prefilled at once, then decoded."""
    import rooflinectl.api as api

    o = case.options
    g = api.generate(gpu=o["gpu"], model=o["model"], tp=case.tp, ep=case.ep, prompt=case.isl, output=case.osl,
                     batch=case.concurrency, **dict(case.dtypes)).generation
    return g.ttft_s * 1e3, (g.tpot_s or 0.0) * 1e3


def serve_means(stack: str, options: dict[str, object]) -> tuple[float, float]:
    """(mean TTFT, mean TPOT) in ms of api.serve with ``stack`` (an id or a path) and ``options``; the three
    published-runs scripts predict through it."""
    import rooflinectl.api as api

    run = api.serve(stack=stack, **options).run  # type: ignore[arg-type]
    assert run.ttft is not None and run.tpot is not None
    return run.ttft.mean * 1e3, run.tpot.mean * 1e3


def predict_serve(case: Case, stack: str) -> tuple[float, float]:
    """(mean TTFT, mean TPOT) in ms of api.serve on the case with ``stack``."""
    return serve_means(stack, case.options)


# A stack's unknowns as the fit sees them, in the order of Linear's columns and of the fit's solution: µs per
# kernel, µs per step, µs per sequence in a step, ns per KV position and layer, µs per request between engine and
# client, 1/attention_efficiency − 1 (the attention ops' extra time over their time at the roofs) and
# 1/collective_efficiency − 1 (the collectives' extra time over theirs at the interconnect's roof).
UNKNOWNS = ("kernel_gap_us", "step_overhead_us", "sequence_overhead_us", "kv_position_ns", "request_latency_us",
            "attention_extra", "collective_extra")
EXTRAS = 2  # the last UNKNOWNS: the ops' extra times, each a share of an op class's time at the roofs
SCALES = (1e-6, 1e-6, 1e-6, 1e-9, 1e-6)  # the linear unknowns' units in seconds


@dataclass(frozen=True)
class Linear:
    """A row's mean TTFT and TPOT (seconds) as functions of a stack. At each grid point (b, c) of the efficiencies
    the ops' time and the attention ops' part of it are numbers; the rest is linear in the stack's other figures:
    mean = ops(b, c) + attention(b, c) · attention_extra + collectives(b, c) · collective_extra
    + Σ_j column_j · unknown_j · SCALES_j, the columns being
    the kernels, the steps, the sequences, the KV positions × layers (each step's, weighted as the steps enter
    the mean) and the requests' latency (1 for TTFT, 0 for TPOT)."""

    ops: dict[tuple[float, float], tuple[float, float]]  # (b, c) → (TTFT, TPOT) of the ops at the roofs scaled
    attention: dict[tuple[float, float], tuple[float, float]]  # (b, c) → the attention ops' share of that
    collectives: dict[tuple[float, float], tuple[float, float]]  # (b, c) → the collectives' share of that
    columns: tuple[tuple[float, ...], tuple[float, ...]]  # (TTFT, TPOT) × the linear unknowns

    def at(self, b: float, c: float, x: Sequence[float], lag: float = 0.0) -> tuple[float, float]:
        """(mean TTFT, mean TPOT) in ms at grid point (b, c), unknowns ``x`` (UNKNOWNS' order and units) and a
        stream lag of ``lag`` steps: each request's TTFT grows by lag × its TPOT (``simulate.delivery_delay``), so the
        mean TTFT by lag × the mean TPOT (every request of these rows makes more than one token)."""
        out = []
        for m in (0, 1):
            fixed = sum(col * v * scale for col, v, scale in zip(self.columns[m], x[:-EXTRAS], SCALES))
            out.append((self.ops[(b, c)][m] + self.attention[(b, c)][m] * x[-2]
                        + self.collectives[(b, c)][m] * x[-1] + fixed) * 1e3)
        return out[0] + lag * out[1], out[1]

    def to_json(self) -> dict[str, object]:
        return {"ops": [[b, c, *v] for (b, c), v in self.ops.items()],
                "attention": [[b, c, *v] for (b, c), v in self.attention.items()],
                "collectives": [[b, c, *v] for (b, c), v in self.collectives.items()],
                "columns": [list(col) for col in self.columns]}

    @classmethod
    def from_json(cls, d: dict) -> Linear:
        def table(key: str) -> dict[tuple[float, float], tuple[float, float]]:
            return {(b, c): (t, p) for b, c, t, p in d[key]}

        return cls(table("ops"), table("attention"), table("collectives"),
                   (tuple(d["columns"][0]), tuple(d["columns"][1])))


class _Clock:
    """A step model for ``simulate`` that prices every step at one second and keeps the steps it was given: the
    run's times are then step counts (a token at time k came out of the k-th step), exact in floats."""

    stack = None  # no costs beyond the steps: request latencies are priced by the fit

    def __init__(self) -> None:
        self.steps: list[tuple[tuple[tuple[int, int], int], ...]] = []

    def time_counts(self, counts: dict[tuple[int, int], int]) -> float:
        self.steps.append(tuple(sorted(counts.items())))
        return 1.0


@dataclass(frozen=True)
class Recorded:
    """A case's run: the groups of every step in order ({(new, cached): sequences} as sorted items), and each
    served request's (arrival, first token, last token, output tokens) as step counts."""

    steps: list[tuple[tuple[tuple[int, int], int], ...]]
    requests: list[tuple[int, int, int, int]]
    kv_blocks: int


def step_model(case: Case, fused: Sequence[str]):
    """``api.serve``'s step model of the case (its roofs, no stack) with these fusions."""
    import rooflinectl.api as api
    from rooflinectl.engine.parallel import Layout
    from rooflinectl.serving.stepmodel import StepModel
    from rooflinectl.specs.hardware import load_gpu

    base = api.base_workload(model=case.model, fuse=list(fused), **dict(case.dtypes))
    return StepModel(base, load_gpu(case.gpu), False, Layout(case.tp, case.ep), None)


def record(case: Case, model, reuse: Recorded | None = None) -> Recorded:
    """The steps ``api.serve`` runs for the case (its closed loop, scheduler and KV cache, ``model``'s fusions): in
    a closed loop with fixed lengths they do not depend on the steps' times (a client's next request arrives at the
    end of the step that finished its last), so any clock records them. ``reuse``: steps recorded with other
    fusions, the same where the KV cache has as many blocks (nothing else differs)."""
    from rooflinectl.engine.memory import reserve_bytes
    from rooflinectl.errors import UserError
    from rooflinectl.serving.capacity import kv_capacity
    from rooflinectl.serving.load import Lengths, closed_loop
    from rooflinectl.serving.scheduler import SchedulerConfig
    from rooflinectl.serving.simulate import simulate

    o = case.options
    load = closed_loop(case.concurrency, int(o["requests"]), Lengths("fixed", case.isl), Lengths("fixed", case.osl),
                       0)
    capacity = kv_capacity(model, case.budget, 16, reserve_bytes(model.gpu.capacity_bytes, None))
    if capacity.blocks == 0:
        raise UserError(f"{case.model} on {case.gpu} TP{case.tp}: no room for the KV cache")
    if reuse is not None and reuse.kv_blocks == capacity.blocks:
        return reuse
    clock = _Clock()
    config = SchedulerConfig(case.budget, case.concurrency, case.chunked, case.mixed)
    run = simulate(load, clock, capacity.pool(16), config)  # type: ignore[arg-type]
    requests = [(round(s.request.arrival_s), round(s.token_times_s[0]), round(s.token_times_s[-1]),
                 len(s.token_times_s)) for s in run.served]
    return Recorded(clock.steps, requests, capacity.blocks)


def step_weights(rec: Recorded) -> tuple[np.ndarray, np.ndarray]:
    """Per step, its weight in the mean TTFT and in the mean TPOT: mean TTFT = Σ weight · step time (a request's
    TTFT is the sum of the steps from its arrival to its first token), likewise TPOT (the steps after its first
    token to its last, over output − 1). Step k (from 0) ends at time k + 1 of the record."""
    n = len(rec.steps)
    ttft, tpot = np.zeros(n + 1), np.zeros(n + 1)
    decoding = sum(1 for r in rec.requests if r[3] > 1)
    for arrival, first, last, tokens in rec.requests:
        ttft[arrival] += 1 / len(rec.requests)
        ttft[first] -= 1 / len(rec.requests)
        if tokens > 1:
            w = 1 / (tokens - 1) / decoding
            tpot[first] += w
            tpot[last] -= w
    return np.cumsum(ttft)[:n], np.cumsum(tpot)[:n]


def linear_of(case: Case, rec: Recorded, model, grid: Iterable[tuple[float, float]]) -> Linear:
    """The case's mean TTFT and TPOT as linear functions of the stack (``Linear``) from its recorded steps, each
    step's ops taken from ``model`` (``StepModel.step_ops``; its fusions must be those it was recorded with)."""
    from rooflinectl.engine.roofline import place

    w_ttft, w_tpot = step_weights(rec)
    by_key: dict[tuple, list[float]] = {}  # a step's groups → its [ttft weight, tpot weight]
    for i, key in enumerate(rec.steps):
        acc = by_key.setdefault(key, [0.0, 0.0])
        acc[0] += w_ttft[i]
        acc[1] += w_tpot[i]
    # an op's (compute time, memory time, collective?, attention?) → its [ttft, tpot] weights × its instances
    weights: dict[tuple[float, float, bool, bool], list[float]] = {}

    def add(ops: Sequence, is_attention: bool, a: float, b: float) -> None:
        for op in ops:
            p = place(op, model.roofs)
            k = (p.compute_time_s, p.memory_time_s, op.kind == "communication", is_attention)  # one instance
            acc = weights.setdefault(k, [0.0, 0.0])
            acc[0] += a * op.count
            acc[1] += b * op.count

    columns = np.zeros((2, len(SCALES)))
    columns[0, 4] = 1.0  # every request's TTFT pays the latency once; TPOT never
    rest_weights: dict[int, list] = {}  # the ops other than attention, by identity → [ops, ttft, tpot weights]
    for key, (a, b) in by_key.items():
        counts = dict(key)
        tokens, positions = model.shape(counts)
        rest, attention = model.step_ops(counts)
        kernels = sum(op.count for op in rest) + sum(op.count for op in attention)
        layers = sum(model.attention_layers(op) for op in attention)
        per_step = np.array([kernels, 1.0, sum(counts.values()), positions * layers, 0.0])
        columns[0] += a * per_step
        columns[1] += b * per_step
        shared = rest_weights.setdefault(id(rest), [rest, 0.0, 0.0])  # one tuple for the steps sharing them
        shared[1] += a
        shared[2] += b
        add(attention, True, a, b)
    for rest, a, b in rest_weights.values():
        add(rest, False, a, b)
    keys = list(weights)
    ct, mt = np.array([k[0] for k in keys]), np.array([k[1] for k in keys])
    comm, att = np.array([k[2] for k in keys]), np.array([k[3] for k in keys])
    wt, wp = np.array([weights[k][0] for k in keys]), np.array([weights[k][1] for k in keys])
    ops, attn, coll = {}, {}, {}
    for b, c in grid:
        # a collective's time is the interconnect's: a stack's bandwidth efficiency scales HBM alone
        t = np.maximum(ct / c, np.where(comm, mt, mt / b))
        ops[(b, c)] = (float(wt @ t), float(wp @ t))
        attn[(b, c)] = (float(wt @ (t * att)), float(wp @ (t * att)))
        coll[(b, c)] = (float(wt @ (t * comm)), float(wp @ (t * comm)))
    return Linear(ops, attn, coll, (tuple(columns[0]), tuple(columns[1])))  # type: ignore[arg-type]


# --- the fit -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fitted:
    backend: str
    family: str | None  # the GPU family (compute capability's major) its rows ran on; None: every family's rows
    bandwidth_efficiency: float
    compute_efficiency: float
    figures: dict[str, float]  # UNKNOWNS but the extras, rounded as the stack file states them
    attention_efficiency: float
    collective_efficiency: float
    rows: int
    tpot_mape: float  # on the fitting rows
    ttft_mape: float
    stream_lag_steps: float = 0.0  # the stack's stream_lag_steps, one of LAG_GRID

    @property
    def unknowns(self) -> tuple[float, ...]:
        """The figures in UNKNOWNS' order."""
        return (*(self.figures[k] for k in UNKNOWNS[:-EXTRAS]), 1 / self.attention_efficiency - 1,
                1 / self.collective_efficiency - 1)


def nnls(a: np.ndarray, y: np.ndarray, iterations: int = 100) -> np.ndarray:
    """argmin_{x ≥ 0} ‖a x − y‖² by Lawson and Hanson's active-set method (Solving Least Squares Problems, 1974,
    ch. 23): move the variable whose gradient most wants to grow into the free set, solve there, and step back
    along the segment to the first variable that would turn negative."""
    n = a.shape[1]
    x = np.zeros(n)
    free = np.zeros(n, dtype=bool)
    for _ in range(iterations):
        gradient = a.T @ (y - a @ x)
        if free.all() or (gradient[~free] <= 1e-12 * max(1.0, float(np.abs(gradient).max()))).all():
            break
        j = int(np.argmax(np.where(free, -np.inf, gradient)))
        free[j] = True
        while True:
            z = np.zeros(n)
            z[free], *_ = np.linalg.lstsq(a[:, free], y, rcond=None)
            if (z[free] > 0).all():
                x = z
                break
            shrinking = free & (z <= 0)
            alpha = float(np.min(x[shrinking] / (x[shrinking] - z[shrinking])))
            x = x + alpha * (z - x)
            free &= x > 1e-15
            x[~free] = 0.0
    return x


def fit_unknowns(lins: Sequence[Linear], cases: Sequence[Case], b: float, c: float,
                 lag: float = 0.0) -> tuple[np.ndarray, float]:
    """(UNKNOWNS at grid point (b, c) and stream lag ``lag``, the weighted sum of the absolute relative errors):
    the non-negative figures that minimize the sum of the absolute relative errors of TPOT and TTFT over the rows
    (iteratively reweighted least squares on the relative residuals, each solved by ``nnls``)."""
    rows_a, rows_y = [], []
    for lin, case in zip(lins, cases):
        # relative residual = (ops + Σ column·x)/measured − 1 → a·x − y; TTFT's terms gain lag × TPOT's
        for m, measured, k in ((1, case.tpot_ms / 1e3, 0.0), (0, case.ttft_ms / 1e3, lag)):
            rows_a.append([*((col + k * tpot) * unit / measured
                             for col, tpot, unit in zip(lin.columns[m], lin.columns[1], SCALES)),
                           (lin.attention[(b, c)][m] + k * lin.attention[(b, c)][1]) / measured,
                           (lin.collectives[(b, c)][m] + k * lin.collectives[(b, c)][1]) / measured])
            rows_y.append(1 - (lin.ops[(b, c)][m] + k * lin.ops[(b, c)][1]) / measured)
    a, y = np.array(rows_a), np.array(rows_y)
    # Each metric's residuals count in proportion to its target: a TTFT error of 25% weighs as a TPOT one of 12%.
    scale = np.tile([1 / TARGET_TPOT, 1 / TARGET_TTFT], len(lins))
    w = np.ones(len(y))
    x = np.zeros(a.shape[1])
    for _ in range(20):
        sw = np.sqrt(w * scale)
        x = nnls(a * sw[:, None], y * sw)
        r = np.abs(a @ x - y)
        w = 1 / np.maximum(r, 1e-3)
    r = np.abs(a @ x - y)
    return x, float((r * scale * 100).sum())


def fit_backend(backend: str, lins: Sequence[Linear], cases: Sequence[Case], family: str | None = None,
                lags: Sequence[float] = LAG_GRID) -> Fitted:
    """The grid point, stream lag and figures with the smallest weighted error over ``cases`` (of ``family``'s
    GPUs, None: of any), rounded as the stack file states them."""
    best: tuple[float, float, float, float, np.ndarray] | None = None
    for lag in lags:
        for b in BANDWIDTH_GRID:
            for c in COMPUTE_GRID:
                x, cost = fit_unknowns(lins, cases, b, c, lag)
                if best is None or cost < best[0]:
                    best = (cost, b, c, lag, x)
    assert best is not None
    _, b, c, lag, x = best
    digits = {"kv_position_ns": 2, "kernel_gap_us": 2}
    figures = {k: round(float(v), digits.get(k, 1)) for k, v in zip(UNKNOWNS[:-EXTRAS], x)}
    f = Fitted(backend, family, b, c, figures, round(1 / (1 + float(x[-2])), 3), round(1 / (1 + float(x[-1])), 3),
               len(cases), 0.0, 0.0, lag)
    tpot = [abs(lin.at(b, c, f.unknowns, lag)[1] / k.tpot_ms - 1) * 100 for lin, k in zip(lins, cases)]
    ttft = [abs(lin.at(b, c, f.unknowns, lag)[0] / k.ttft_ms - 1) * 100 for lin, k in zip(lins, cases)]
    return replace(f, tpot_mape=statistics.fmean(tpot), ttft_mape=statistics.fmean(ttft))


# --- the report --------------------------------------------------------------------------------------------------


@dataclass
class Result:
    case: Case
    predictions: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # method → (TTFT, TPOT) ms
    # The bytes of its simulated KV cache, and of one client's whole sequence (isl + osl positions) as analyze
    # counts them (a sliding layer its window: engine.count.attention.positions_held)
    kv_room: tuple[float, float] = (0.0, 0.0)

    @property
    def represented(self) -> bool:
        """Whether the simulation represents the row: its clients' sequences fit the simulated KV cache, and the
        data's README names no fault in it."""
        return not self.kv_bound and known_fault(self.case) is None

    @property
    def kv_bound(self) -> bool:
        """Whether the simulated KV cache holds less than every client's whole sequence: the simulation then
        queues or preempts requests where the engine, given its own memory split, may not have."""
        cache_bytes, sequence_bytes = self.kv_room
        return cache_bytes < self.case.concurrency * sequence_bytes
    errors: dict[str, str] = field(default_factory=dict)  # method → why it has no prediction


def _stats(results: Sequence[Result], method: str) -> tuple[int, str, str, str, str]:
    pairs = [(r.predictions[method], r.case) for r in results if r.predictions.get(method)]
    if not pairs:
        return 0, "—", "—", "—", "—"
    tpot = [p[1] / k.tpot_ms for p, k in pairs]
    ttft = [p[0] / k.ttft_ms for p, k in pairs]

    def mape(xs: list[float]) -> str:
        return f"{statistics.fmean(abs(x - 1) for x in xs) * 100:.1f}%"

    return (len(pairs), mape(tpot), f"{statistics.median(tpot):.2f}", mape(ttft), f"{statistics.median(ttft):.2f}")


METHOD_TITLES = {"generate": "before: generate", "roofline": "before: serve, roofline stack",
                 "stack": "after: serve, engine stack"}


def table(results: Sequence[Result], methods: Sequence[str]) -> list[str]:
    lines = ["| engine | GPU | method | rows | TPOT MAPE | TPOT median ratio | TTFT MAPE | TTFT median ratio |",
             "|---|---|---|--:|--:|--:|--:|--:|"]
    groups = sorted({(r.case.backend, r.case.system) for r in results},
                    key=lambda k: (BACKENDS.index(k[0]), k[1]))
    for backend, system in [*groups, ("all", "all")]:
        rs = [r for r in results if backend == "all" or (r.case.backend, r.case.system) == (backend, system)]
        for m in methods:
            n, tm, tr, fm, fr = _stats(rs, m)
            name = "**all**" if backend == "all" else ENGINE_NAMES[backend]
            gpu = "" if backend == "all" else SYSTEMS[system]
            lines.append(f"| {name} | {gpu} | {METHOD_TITLES[m]} | {n} | {tm} | {tr} | {fm} | {fr} |")
    return lines


def by_campaign(results: Sequence[Result], method: str) -> list[str]:
    """The method's errors per campaign (engine, GPU, version and month, model), most rows first, as markdown
    lines: how far the data's own setups, which the rows do not record, move the errors."""
    groups: dict[tuple[str, str, str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.case.backend, r.case.gpu, r.case.campaign, r.case.model), []).append(r)
    lines = ["| engine | GPU | version, measured | model | rows | TPOT MAPE | TTFT MAPE | TTFT median ratio |",
             "|---|---|---|---|--:|--:|--:|--:|"]
    for (backend, gpu, campaign, model), rs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        n, tm, _, fm, fr = _stats(rs, method)
        lines.append(f"| {ENGINE_NAMES[backend]} | {gpu} | {campaign} | {model} | {n} | {tm} | {fm} | {fr} |")
    return lines


def worst(results: Sequence[Result], method: str, metric: int, k: int = 8) -> list[str]:
    """The k rows the method misses most on a metric (0 TTFT, 1 TPOT), as markdown lines: what dominates."""
    name = ("TTFT", "TPOT")[metric]
    scored = []
    for r in results:
        p = r.predictions.get(method)
        if p:
            meas = r.case.ttft_ms if metric == 0 else r.case.tpot_ms
            scored.append((abs(p[metric] / meas - 1), p[metric], meas, r.case))
    scored.sort(key=lambda s: -s[0])
    lines = [f"| {name} error | predicted ms | measured ms | engine | GPU | model | TP | quant | c | isl/osl |",
             "|--:|--:|--:|---|---|---|--:|---|--:|---|"]
    for e, p, m, c in scored[:k]:
        q = dict(c.dtypes).get("weight_dtype", "bf16")
        lines.append(f"| {e * 100:.0f}% | {p:,.1f} | {m:,.1f} | {c.backend} | {c.gpu} | {c.model} | {c.tp} | {q} | "
                     f"{c.concurrency} | {c.isl}/{c.osl} |")
    return lines


def family_text(fam: str | None) -> str:
    """A GPU family as the report names it, with the data's GPUs of it."""
    if fam is None:
        return "any"
    return f"compute capability {fam}.x ({', '.join(g for g in SYSTEMS.values() if family(g) == fam)})"


def git_head() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


STACK_TEXT = """\
# {name}'s costs beyond the roofline, fitted to published runs of it on H100 SXM and B200: both GPUs' rows
# together (the figures here), and each GPU family's apart where the data has more than one (families).
id: {id}
name: {name}
source: >-
  fitted by benchmarks/serving_truth.py --fit to the published runs of {name} in {csv_name}
  (ai-dynamo/aiconfigurator's silicon_sample.csv at commit {commit}) that it simulates (agg, attention
  tensor-parallel, a bundled model) and whose id's SHA-256 starts with an even hex digit, less those whose clients'
  sequences overflow the simulated KV cache and those the data's README flags: {rows} rows; on the other half's
  rows it represents ({held} rows), each priced with its GPU family's figures where families lists it, mean TPOT
  is off by {tpot:.1f}% and mean TTFT by {ttft:.1f}% (mean absolute error; docs/serving.md, "Validation against
  published runs")
{figures}prefill_steps: {prefill_steps}
max_num_batched_tokens: {budget}
fused: [{fused}]
{families}notes: >-
  Reproduce: python benchmarks/serving_truth.py --fit --write-stacks (from the repository root, the CSV at
  {csv_default}). The figures are fits over every model and quantization of the rows: they absorb what the
  roofline does not model (attention and MoE kernels below the roofs, the KV cache's type, which the runs do not
  record and the fit took as bf16, fp8 for nvfp4 checkpoints, the engine's scheduler and API server) and are not
  measurements of {name} itself; the published runs used the engine's own scheduler limits, which the fit
  simulated as {budget_text} and as many sequences as clients;
  prefill_steps is the engine's scheduling of prompts beside decodes (benchmarks/serving_truth.py's PREFILL_STEPS
  and BUDGETS say why and what was measured). fused: the Q/K/V and gate/up weights {name} loads as one matrix each.
"""


# How each engine's runs were replayed, as its stack's notes say it (Case.budget, Case.chunked): the engines with
# chunked prefill at their stack's budget, TensorRT-LLM at each run's own.
CHUNKED_TEXT = "max_num_batched_tokens tokens a step with chunked prefill"
BUDGET_TEXT = {
    "trtllm": "each run's max_num_tokens as ai-dynamo/aiconfigurator configures it (clients + prompt + 1,500\n"
              "  tokens: benchmarks/serving_truth.py's trtllm_budget) without chunked prefill, TensorRT-LLM's\n"
              "  default (analyze serve --no-chunked-prefill --max-num-batched-tokens N runs the same)",
}


FAMILY_TEXT = """\
  "{family}":
    source: >-
      fitted the same way to the {rows} of those rows on GPUs of {gpus}; on the other half's
      rows of them it represents ({held} rows) mean TPOT is off by {tpot} and mean TTFT by {ttft}
{figures}"""


def figures_yaml(f: Fitted, indent: str = "") -> str:
    """A fit's figures as a stack file's lines, in the stack's order (a family's indented under it)."""
    values = {**f.figures, "bandwidth_efficiency": f.bandwidth_efficiency, "compute_efficiency": f.compute_efficiency,
              "attention_efficiency": f.attention_efficiency, "collective_efficiency": f.collective_efficiency,
              "stream_lag_steps": f.stream_lag_steps}
    order = ("step_overhead_us", "kernel_gap_us", "sequence_overhead_us", "request_latency_us", "stream_lag_steps",
             "bandwidth_efficiency", "compute_efficiency", "attention_efficiency", "collective_efficiency",
             "kv_position_ns")
    return "".join(f"{indent}{k}: {values[k]}\n" for k in order)


def simulate_rows(cases: Sequence[Case], cache: Path | None, stacks: dict, grid: list | None,
                  started: float) -> tuple[list[Result], dict[str, Linear], Counter[str]]:
    """Every case's predictions (``Result``), with ``grid``: each case's ``Linear`` over it too, and the cases
    ``serve`` refused counted by reason. ``cache``: a folder that keeps each case's predictions. ``stacks``: each
    engine's stack, priced on each case's GPU with that GPU family's figures."""
    from rooflinectl.errors import UserError
    from rooflinectl.specs.hardware import load_gpu

    def cache_path(case: Case, what: str) -> Path | None:
        if cache is None:
            return None
        key = hashlib.sha256(json.dumps([case.id, case.options, what, code_fingerprint()],
                                        default=str).encode()).hexdigest()[:20]
        return cache / f"{key}.json"

    def cached(case: Case, what: str, compute: Callable[[], object]) -> object:
        path = cache_path(case, what)
        if path is not None and path.exists():
            return json.loads(path.read_text())
        value = compute()
        if path is not None:
            path.write_text(json.dumps(value))
        return value

    full_grid = [(b, c) for b in BANDWIDTH_GRID for c in COMPUTE_GRID]
    grid_what = f"grid {FUSED} {full_grid} collectives"

    results: list[Result] = []
    linears: dict[str, Linear] = {}
    failed: Counter[str] = Counter()
    for i, case in enumerate(cases):
        r = Result(case)
        recorded: dict[tuple[str, ...], tuple[object, Recorded]] = {}  # fusions → (step model, steps)

        def steps_with(fused: Sequence[str], case: Case = case, recorded: dict = recorded) -> tuple[object, Recorded]:
            key = tuple(fused)
            if key not in recorded:
                model = step_model(case, fused)
                other = next(iter(recorded.values()), None)
                recorded[key] = (model, record(case, model, other[1] if other else None))
            return recorded[key]

        def serve_at(fused: Sequence[str], b: float, c: float, x: Sequence[float], lag: float = 0.0,
                     case: Case = case) -> list:
            kept = cache_path(case, grid_what)
            if tuple(fused) == FUSED and (b, c) in full_grid and kept is not None and kept.exists():
                # a --fit run priced these steps at every grid point: the same sums
                return list(Linear.from_json(json.loads(kept.read_text())).at(b, c, x, lag))
            model, rec = steps_with(fused)
            return list(linear_of(case, rec, model, [(b, c)]).at(b, c, x, lag))

        methods: dict[str, tuple[str, Callable[[], object]]] = {
            "generate": ("generate", lambda case=case: list(predict_generate(case))),
            "roofline": ("roofline", lambda: serve_at((), 1.0, 1.0, (0.0,) * len(UNKNOWNS))),
        }
        if case.backend in stacks:
            st = stacks[case.backend].on(load_gpu(case.gpu).compute_capability)
            x = (*(getattr(st, k) for k in UNKNOWNS[:-EXTRAS]), 1 / st.attention_efficiency - 1,
                 1 / st.collective_efficiency - 1)
            methods["stack"] = (f"stack {list(st.fused)} {st.bandwidth_efficiency} {st.compute_efficiency} {x} "
                                f"{st.stream_lag_steps}",
                                lambda st=st, x=x: serve_at(st.fused, st.bandwidth_efficiency,
                                                            st.compute_efficiency, x, st.stream_lag_steps))
        for m, (what, compute) in methods.items():
            try:
                r.predictions[m] = tuple(cached(case, what, compute))  # type: ignore[arg-type]
            except UserError as e:
                r.predictions[m] = None
                r.errors[m] = _reason(str(e))
        if r.predictions.get("roofline") is None:
            failed[f"serve: {r.errors.get('roofline', '')}"] += 1
            continue
        r.kv_room = tuple(cached(case, "kv room", lambda case=case: list(kv_room(case))))  # type: ignore[arg-type]
        if grid is not None:
            def make_linear(case: Case = case) -> dict:
                model, rec = steps_with(FUSED)
                return linear_of(case, rec, model, grid).to_json()
            linears[case.id] = Linear.from_json(cached(case, grid_what, make_linear))  # type: ignore[arg-type]
        results.append(r)
        if (i + 1) % 25 == 0:
            print(f"{i + 1}/{len(cases)} rows, {time.time() - started:.0f} s", file=sys.stderr)
    return results, linears, failed


def kv_room(case: Case) -> tuple[float, float]:
    """(the bytes of the case's KV cache, api.serve's: the GPU less weights, activations and the reserve, in whole
    blocks; the bytes one client's whole sequence of isl + osl positions holds, as analyze counts them on one
    GPU). Without sliding layers, the cache's positions against the clients' as before: blocks · 16 against
    concurrency · (isl + osl)."""
    from rooflinectl.engine.memory import reserve_bytes
    from rooflinectl.engine.parallel import kv_bytes_per_sequence_per_gpu
    from rooflinectl.serving.capacity import kv_capacity
    from rooflinectl.specs.step import Seqs

    model = step_model(case, ())
    capacity = kv_capacity(model, case.budget, 16, reserve_bytes(model.gpu.capacity_bytes, None))
    per_gpu = model.analyze((Seqs(1, 1),)).workload
    return (capacity.blocks * capacity.block_bytes,
            kv_bytes_per_sequence_per_gpu(per_gpu, model.layout, case.isl + case.osl))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="?", default=DEFAULT_CSV, help=f"the published runs (default {DEFAULT_CSV})")
    ap.add_argument("--json", metavar="FILE", help="also write every row's predictions as JSON")
    ap.add_argument("--fit", action="store_true", help="fit each engine's stack on the fitting half")
    ap.add_argument("--write-stacks", action="store_true", help="with --fit: write stacks/<engine>.yaml")
    ap.add_argument("--backend", choices=BACKENDS, action="append", help="only this engine (repeatable)")
    ap.add_argument("--limit", type=int, help="only the first N usable rows (a quick look)")
    ap.add_argument("--cache", metavar="DIR", help="keep each row's predictions here and reuse them (keyed by the "
                    "code: a change to the package or the spec files starts them afresh)")
    ap.add_argument("--shard", metavar="I/N", help="only every N-th usable row from the I-th (0-based): run N of "
                    "these in parallel with one --cache, then once without --shard to report")
    ap.add_argument("--reverse", action="store_true", help="the rows from the last: a second process on one "
                    "shard and one --cache meets the first in the middle")
    ap.add_argument("--check", type=int, metavar="N", help="run api.serve itself on N of the rows and compare")
    ap.add_argument("--swap-halves", action="store_true", help="with --fit: fit on the odd half and report on the "
                    "even one (how much the split moves the errors; the stacks are the even half's)")
    args = ap.parse_args(argv)
    if args.write_stacks and not args.fit:
        ap.error("--write-stacks needs --fit")
    if args.swap_halves and (args.write_stacks or not args.fit):
        ap.error("--swap-halves needs --fit and writes no stacks")

    os.chdir(ROOT)
    csv_path = Path(args.csv)
    cases, skipped, commit = read_cases(csv_path)
    if args.backend:
        cases = [c for c in cases if c.backend in args.backend]
    if args.limit:
        cases = cases[:args.limit]
    if args.shard:
        index, shards = (int(v) for v in args.shard.split("/"))
        cases = cases[index::shards]
    if args.reverse:
        cases = cases[::-1]
    if args.swap_halves:
        cases = [replace(c, fit=not c.fit) for c in cases]
    cache = Path(args.cache) if args.cache else None
    if cache:
        cache.mkdir(parents=True, exist_ok=True)
    grid = [(b, c) for b in BANDWIDTH_GRID for c in COMPUTE_GRID]
    started = time.time()
    from rooflinectl.specs.stack import load_stack

    stacks = {b: load_stack(b) for b in BACKENDS if (ROOT / "stacks" / f"{b}.yaml").exists()} if not args.fit else {}
    results, linears, failed = simulate_rows(cases, cache, stacks, grid if args.fit else None, started)
    for reason, n in failed.items():
        skipped[reason] += n
    check_lines = check(results, args.check, stacks) if args.check else []

    fitted: dict[str, Fitted] = {}
    by_family: dict[str, dict[str, Fitted]] = {}  # engine → GPU family → its figures, fitted apart
    if args.fit:
        for backend in BACKENDS:
            # the fitting half's rows the simulation represents: their clients' sequences fit its KV cache, and
            # the data's README names no fault in them
            rs = [r for r in results if r.case.backend == backend and r.case.fit and r.represented]
            if not rs:
                continue
            fitted[backend] = fit_backend(backend, [linears[r.case.id] for r in rs], [r.case for r in rs])
            groups: dict[str | None, list[Result]] = {}
            for r in rs:
                groups.setdefault(family(r.case.gpu), []).append(r)
            by_family[backend] = {
                fam: fit_backend(backend, [linears[r.case.id] for r in g], [r.case for r in g], fam)
                for fam, g in sorted(groups.items(), key=lambda kv: int(kv[0] or 0))
                if fam is not None and len(groups) > 1 and len(g) >= FAMILY_ROWS}
            for r in results:
                if r.case.backend == backend:
                    f = by_family[backend].get(family(r.case.gpu) or "", fitted[backend])
                    r.predictions["stack"] = linears[r.case.id].at(f.bandwidth_efficiency, f.compute_efficiency,
                                                                   f.unknowns, f.stream_lag_steps)

    held = [r for r in results if not r.case.fit]
    fit_rows = [r for r in results if r.case.fit]
    out = sys.stdout
    w = out.write
    w("# Serving simulation against published runs\n\n")
    w(f"{csv_path} (source commit {commit}); rooflinectl {git_head()}; {datetime.date.today()}; "
      f"{platform.node() or 'this machine'} ({platform.processor() or platform.machine()}, Python "
      f"{platform.python_version()}); {time.time() - started:.0f} s.\n\n")
    w(f"Rows simulated: {len(results)} ({len(fit_rows)} in the fitting half: SHA-256 of the id starts with an even "
      f"hex digit; {len(held)} held out). Requests per row: max({ROUNDS} × concurrency, "
      f"{LEAST_REQUESTS}).\n\n")
    w("Rows skipped, by reason:\n\n| reason | rows |\n|---|--:|\n")
    for reason, n in skipped.most_common():
        w(f"| {reason} | {n} |\n")
    methods = ["generate", "roofline", "stack"]
    if fitted:
        names = ["bandwidth_efficiency", "compute_efficiency", *UNKNOWNS[:-EXTRAS], "stream_lag_steps",
                 "attention_efficiency", "collective_efficiency"]
        w("\n## Fitted stacks\n\nEach engine's figures fitted to all its fitting rows (GPUs: any, the stack's own "
          "figures), and apart on each GPU family's rows where it has more than one (the stack's `families`; "
          f"at least {FAMILY_ROWS} rows), which price that family's rows.\n\n| engine | GPUs | "
          + " | ".join(names) + " | rows fitted | TPOT MAPE (fitted rows) | TTFT MAPE (fitted rows) |\n|---|---|"
          + "--:|" * (len(names) + 3) + "\n")
        for f in (g for b in fitted for g in (fitted[b], *by_family[b].values())):
            values = [f.bandwidth_efficiency, f.compute_efficiency, *f.figures.values(), f.stream_lag_steps,
                      f.attention_efficiency, f.collective_efficiency]
            w(f"| {ENGINE_NAMES[f.backend]} | {family_text(f.family)} | " + " | ".join(str(v) for v in values)
              + f" | {f.rows} | {f.tpot_mape:.1f}% | {f.ttft_mape:.1f}% |\n")
    w("\n## Held-out rows (not fitted on)\n\n")
    w("\n".join(table(held, methods)) + "\n")
    clean = [r for r in held if not r.kv_bound and known_fault(r.case) is None]
    faults = Counter(why for r in held if (why := known_fault(r.case)) is not None)
    bound = sum(1 for r in held if r.kv_bound and known_fault(r.case) is None)
    w("\n## Held-out rows the simulation represents\n\n")
    w(f"The held-out rows less {bound} whose clients' whole sequences do not fit the simulated KV cache (it then "
      f"queues and preempts; api.serve's reserve is 10% of HBM) and the README's known faults: "
      + "; ".join(f"{n} rows: {why}" for why, n in faults.items()) + ".\n\n")
    w("\n".join(table(clean, methods)) + "\n")
    w("\nThe same rows by campaign (the engine's version and the month measured, as the data gives them, and the "
      "model), the engine stacks' errors:\n\n" + "\n".join(by_campaign(clean, "stack")) + "\n")
    w("\n## Fitted rows\n\n")
    w("\n".join(table(fit_rows, methods)) + "\n")
    for metric in (1, 0):
        w(f"\n## Largest {('TTFT', 'TPOT')[metric]} errors of the engine stacks, held-out rows\n\n")
        w("\n".join(worst(held, "stack", metric)) + "\n")
    if check_lines:
        w("\n## The replay against api.serve\n\n" + "\n".join(check_lines) + "\n")
    gen_missing = Counter(v for r in results for m, v in r.errors.items() if m == "generate")
    if gen_missing:
        w("\ngenerate has no prediction for " + ", ".join(f"{n} rows ({why})" for why, n in gen_missing.items())
          + ".\n")

    if args.json:
        Path(args.json).write_text(json.dumps({
            "csv": str(csv_path), "source_commit": commit, "skipped": dict(skipped),
            "fitted": {k: vars(v) for k, v in fitted.items()},
            "fitted_families": {k: {fam: vars(f) for fam, f in v.items()} for k, v in by_family.items()},
            "rows": [{"id": r.case.id, "backend": r.case.backend, "system": r.case.system, "fit": r.case.fit,
                      "campaign": r.case.campaign, "model": r.case.model, "tp": r.case.tp, "ep": r.case.ep,
                      "concurrency": r.case.concurrency, "isl": r.case.isl, "osl": r.case.osl,
                      "dtypes": dict(r.case.dtypes), "kv_bound": r.kv_bound,
                      "known_fault": known_fault(r.case),
                      "measured": {"ttft_ms": r.case.ttft_ms, "tpot_ms": r.case.tpot_ms},
                      "predicted": {m: (None if p is None else {"ttft_ms": p[0], "tpot_ms": p[1]})
                                    for m, p in r.predictions.items()}} for r in results]}, indent=1))

    if args.write_stacks:
        for backend, f in fitted.items():
            rs = [r for r in held if r.case.backend == backend and r.represented]
            _, tm, _, fm, _ = _stats(rs, "stack")
            families = ""
            for fam, ff in by_family[backend].items():
                n, ftm, _, ffm, _ = _stats([r for r in rs if family(r.case.gpu) == fam], "stack")
                families += FAMILY_TEXT.format(family=fam, gpus=family_text(fam), rows=ff.rows, held=n,
                                               tpot=ftm, ttft=ffm, figures=figures_yaml(ff, "    "))
            text = STACK_TEXT.format(
                id=backend, name=ENGINE_NAMES[backend], csv_name=csv_path.name, commit=commit, rows=f.rows,
                held=len(rs), tpot=float(tm.rstrip("%")), ttft=float(fm.rstrip("%")), figures=figures_yaml(f),
                fused=", ".join(FUSED), prefill_steps=PREFILL_STEPS[backend], budget=BUDGETS[backend],
                budget_text=BUDGET_TEXT.get(backend, CHUNKED_TEXT),
                csv_default=DEFAULT_CSV, families=("families:\n" + families) if families else "")
            (ROOT / "stacks" / f"{backend}.yaml").write_text(text)
    return 0


def _reason(message: str) -> str:
    """An error as a reason to count: its numbers as N, its first clause."""
    return re.sub(r"\d[\d,.]*", "N", message.split(";")[0])[:120]


def check(results: Sequence[Result], n: int, stacks: dict) -> list[str]:
    """``api.serve`` itself on n of the rows (evenly spaced), with the roofline stack and the engine's: the largest
    relative difference from the replay's predictions, as report lines."""
    picked = list(results)[:: max(1, len(results) // n)][:n]
    worst_diff, runs = 0.0, 0
    for r in picked:
        for m, stack in (("roofline", "roofline"), ("stack", r.case.backend)):
            if m == "stack" and r.case.backend not in stacks:
                continue
            p = r.predictions.get(m)
            if p is None:
                continue
            ttft, tpot = predict_serve(r.case, stack)
            worst_diff = max(worst_diff, abs(ttft / p[0] - 1), abs(tpot / p[1] - 1))
            runs += 1
    return [f"api.serve on {len(picked)} rows ({runs} runs): the largest relative difference from the replay's mean "
            f"TTFT or TPOT is {worst_diff:.1e}."]


if __name__ == "__main__":
    sys.exit(main())
