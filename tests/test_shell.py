"""shell.py: the command lines rooflinectl writes down, built one way (tests/ top, as shell.py is top-level)."""

from __future__ import annotations

import shlex
from pathlib import Path

from rooflinectl.shell import command_line


def test_options_given_follow_the_words_in_order_and_quoted():
    line = command_line(["measure"], [("--kernel", "matmul"), ("--shape", "1x2x3"), ("--gpu", None),
                                      ("--seed", 0), ("--save", Path("my run.json"))])
    assert line == "rooflinectl measure --kernel matmul --shape 1x2x3 --seed 0 --save 'my run.json'"
    assert shlex.split(line)[-1] == "my run.json"  # pastes back as the value given


def test_a_flag_is_bare_when_true_and_left_out_when_false():
    assert command_line(["profile"], [("--cuda-graph", True), ("--no-cuda-graph", False), ("--json", False)]) == (
        "rooflinectl profile --cuda-graph")


def test_the_program_may_be_another_launcher():
    assert command_line(["calibrate", "--comm"], [("-o", "f.yaml")],
                        program=("torchrun", "--nproc-per-node", "2", "-m", "rooflinectl")) == (
        "torchrun --nproc-per-node 2 -m rooflinectl calibrate --comm -o f.yaml")
    assert command_line(["explore", "--gpu", "h100; rm -rf /"], program=("python", "-m", "rooflinectl")) == (
        "python -m rooflinectl explore --gpu 'h100; rm -rf /'")
