"""``rooflinectl analyze step``: a step made of groups of sequences (a continuous-batching step), on the roofline."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from . import options as opt
from ._app import DEFAULT_GPU, command, console, one_format, print_json

if TYPE_CHECKING:
    from ..api import StepResult

# Its own app: `analyze` hands it `analyze step …` (cli.routing), and it is not a top-level command.
step_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@command(step_app, "step")
def step(
    seqs: list[str] = typer.Option(..., "--seqs", help="A group of sequences, COUNTxNEW or COUNTxNEW@CACHED: "
                                   "COUNT sequences that each compute NEW tokens after CACHED tokens in their KV "
                                   "cache (16x1@4095: 16 decode tokens at context 4,096; 1x512@1024: a 512-token "
                                   "prefill chunk after 1,024). Repeat for each group."),
    gpu: opt.Gpu = DEFAULT_GPU,
    model: opt.Model = None,
    dtype: opt.Dtype = None,
    kv_dtype: opt.KvDtype = None,
    weight_dtype: opt.WeightDtype = None,
    act_dtype: opt.ActDtype = None,
    group_size: opt.GroupSize = None,
    attention: opt.Attention = None,
    causal: opt.Causal = None,
    fuse: opt.Fuse = None,
    experts_touched: opt.ExpertsTouched = None,
    calibrated: opt.Calibrated = False,
    tp: opt.Tp = 1,
    ep: opt.Ep = 1,
    pp: opt.Pp = 1,
    json: opt.Json = False,
    csv: opt.Csv = False,
) -> None:
    """Place every operation of a step made of groups of sequences on a GPU's roofline: the step a serving engine
    runs when it decodes some sequences while it prefills a chunk of another's prompt. The weights are read once
    for all of them; attention, KV reads and writes follow each group. Groups that make a decode or a prefill step
    give analyze decode's or prefill's numbers.

    Example: rooflinectl analyze step --gpu h100 --model llama-3-8b --seqs 16x1@4095 --seqs 1x512@1024

    Decode alone (the same as analyze decode --batch 16 --context 4096): rooflinectl analyze step --seqs 16x1@4095
    """
    one_format(json, csv)
    from .. import api

    result = api.analyze_step(seqs=seqs, gpu=gpu, calibrated=calibrated, tp=tp, ep=ep, pp=pp, model=model,
                              dtype=dtype, kv_dtype=kv_dtype, weight_dtype=weight_dtype, act_dtype=act_dtype,
                              group_size=group_size, attention=attention, causal=causal, fuse=fuse,
                              experts_touched=experts_touched)
    print_step(result, json, csv)


def print_step(result: StepResult, json: bool, csv: bool) -> None:
    """A step's result as ``--json``, ``--csv`` or the table with its verdict (``analyze`` and ``analyze step``)."""
    if json:
        print_json(result.to_dict())
    elif csv:
        from ..render.csvout import analysis_csv

        print(analysis_csv(result.analysis), end="")
    else:
        from ..render.analysis import print_analysis

        print_analysis(console(), result.analysis)
