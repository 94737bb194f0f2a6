"""A measure request: the baseline choices, and the command line that reproduces a run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers import assert_one_line_error, cli
from rooflinectl.cli import main
from rooflinectl.errors import UserError
from rooflinectl.measure.request import MeasureRequest, baselines_for, reproducing_command, timer_for


def test_baseline_choices():
    assert baselines_for("all") == ("torch", "compile")
    assert baselines_for("none") == ()
    assert baselines_for("compile") == ("compile",)
    with pytest.raises(UserError, match="--baseline 'eager' is not one of torch, compile, cublas, sdpa_flash, sdpa_cudnn, "
                                        "sdpa_efficient, all, none"):
        baselines_for("eager")
    # An attention kernel offers SDPA's three fused backends: all of them under 'all', each by its name.
    sdpa = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient")
    assert baselines_for("all", sdpa) == ("torch", "compile", *sdpa)
    assert baselines_for("sdpa_cudnn", sdpa) == ("sdpa_cudnn",)
    with pytest.raises(UserError, match="--baseline sdpa_cudnn: this kernel has no such baseline "
                                        r"\(its own: torch, compile\)"):
        baselines_for("sdpa_cudnn")



def test_reproducing_command_names_what_the_run_resolved():
    req = MeasureRequest(kernel="fused_softmax", shapes=("5x781,1x1",), interpret=True, save=Path("o.json"),
                         json=True)
    assert reproducing_command(req, "fp32", "h200", 11) == (
        "rooflinectl measure --kernel fused_softmax --shape 5x781,1x1 --dtype fp32 --gpu h200 --seed 11 "
        "--interpret --save o.json --json")
    timed = MeasureRequest(kernel="copy", baseline="all", cuda_graph=True)
    assert reproducing_command(timed, "bf16", None, 3) == (
        "rooflinectl measure --kernel copy --dtype bf16 --baseline all --seed 3 --timer cuda_graph")
    events = MeasureRequest(kernel="copy", timer="events")
    assert reproducing_command(events, "bf16", None, 3) == (
        "rooflinectl measure --kernel copy --dtype bf16 --baseline torch --seed 3 --timer events")


def test_the_default_timer_is_graph_replay_and_cuda_graph_is_its_alias():
    assert timer_for(MeasureRequest(kernel="copy")) == "cuda_graph"
    assert timer_for(MeasureRequest(kernel="copy", cuda_graph=True)) == "cuda_graph"
    assert timer_for(MeasureRequest(kernel="copy", timer="events")) == "events"
    with pytest.raises(UserError, match="--timer 'wall' is not one of cuda_graph, events"):
        timer_for(MeasureRequest(kernel="copy", timer="wall"))
    with pytest.raises(UserError, match="--cuda-graph asks for --timer cuda_graph, not --timer events"):
        timer_for(MeasureRequest(kernel="copy", timer="events", cuda_graph=True))


def test_a_shape_beyond_what_a_record_holds_is_refused_before_it_runs():
    # 99,999,999,999² fp32 elements read and written: 8e22 bytes, past the record's 1e15 (records.kernel.MAX_BYTES);
    # the error record of the failed run used to fail its own validation (a traceback).
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    result = cli("measure", "--kernel", "fused_softmax", "--interpret", "--shape", "99999999999x99999999999")
    assert_one_line_error(result, "--shape 99999999999x99999999999", "beyond what one kernel run can be")


@pytest.mark.parametrize("seed", [str(2**64), "99999999999999999999", "-1"])
def test_a_seed_torch_cannot_take_is_refused_in_one_line(seed, monkeypatch, capsys):
    # torch.Generator.manual_seed takes at most 2**64 − 1, and a run adds 1000 per op to the seed: refused as a
    # usage error (the console entry point's one line), before anything runs.
    monkeypatch.setattr(sys, "argv", ["rooflinectl", "measure", "--workload", "decode", "--device", "cpu",
                                      "--seed", seed])
    with pytest.raises(SystemExit) as exit_:
        main()
    out, err = capsys.readouterr()
    assert (exit_.value.code, out) == (2, "")
    assert err.startswith("error: Invalid value for '--seed'") and len(err.strip().splitlines()) == 1
