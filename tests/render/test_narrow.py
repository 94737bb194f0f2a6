"""At 80 columns or piped, a table never wraps or cuts a name or a number: it leaves out columns, and says so in
one line; a value beside a label wraps under itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import cli

ROOT = Path(__file__).parents[2]


def op_rows(out: str) -> list[str]:
    """The first word of each table row (rows are indented by one space in the analysis table)."""
    return [line.split()[0] for line in out.splitlines() if line.startswith(" ") and line.split()
            and re.match(r"[a-z]", line.split()[0])]


@pytest.mark.parametrize(("args", "width"), [
    (["analyze", "decode", "--gpu", "a100"], 80),
    (["analyze", "decode", "--model", "deepseek-v3"], 80),
    (["analyze", "decode", "--gpu", "h200", "--model", "deepseek-v3", "--batch", "64"], 80),
    (["analyze", "step", "--gpu", "h100", "--seqs", "16x1@4095", "--seqs", "1x512@1024"], 64),
    (["analyze", "prefill", "--gpu", "h100", "--model", "gemma-3-27b", "--tp", "2"], 72),
])
def test_piped_tables_keep_every_name_whole(args, width):
    out = cli(*args, env={"COLUMNS": str(width)}).stdout
    full = cli(*args, "--csv").stdout.splitlines()[1:]
    names = [row.split(",")[0] for row in full]
    assert all(len(line.rstrip()) <= width for line in out.splitlines())
    rows = op_rows(out)
    for name in names:  # each op's row starts with its whole name
        assert name in rows, (name, width)
    assert "…" not in out
    # Below the table's natural width, what was left out is said in one line (the README's first command fits
    # 80 whole; DeepSeek-V3's longest op name, kv_a_proj_with_mqa, does not).
    notes = [line for line in out.splitlines() if line.startswith("(left out")]
    assert len(notes) == (width < 80 or "deepseek-v3" in args)


@pytest.mark.parametrize(("args", "width", "device"), [
    (["analyze", "step", "--seqs", "16x1"], 80, "NVIDIA H100 SXM5 80GB"),
    (["analyze", "step", "--seqs", "100x1", "--gpu", "h200"], 80, "NVIDIA H200 SXM 141GB"),
    (["analyze", "decode"], 72, "NVIDIA H100 SXM5 80GB"),
    (["analyze", "step", "--seqs", "16x1"], 40, "NVIDIA H100 SXM5 80GB"),
])
def test_a_title_wraps_whole_at_the_console(args, width, device):
    # A table whose blank right edge passes the console's width had its title wrapped there and cut: the title's
    # every word must print, within the width.
    out = cli(*args, env={"COLUMNS": str(width)}).stdout
    title = out.split("\n\n")[0]
    assert all(len(line.rstrip()) <= width for line in title.splitlines())
    assert device in " ".join(title.split()) and "(spec roofs)" in title


def test_workloads_list_at_80_columns_has_every_id_and_number_whole():
    out = cli("workloads", "list", env={"COLUMNS": "80"}).stdout
    data = json.loads(cli("workloads", "list", "--json").stdout)
    assert "…" not in out
    assert all(len(line.rstrip()) <= 80 for line in out.splitlines())
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    for model in data["models"]:  # each id whole, starting its row, with its layer count whole after it
        assert str(model["num_layers"]) in rows[model["id"]], model["id"]
    assert "(left out at 80 columns: mlp; --json has all)" in out.splitlines()


def test_hardware_list_at_80_columns_has_every_alias_whole():
    # "rtx-pro-6000-blackwell" was folded into "rtx-pro-6000-black" / "well,": the first part is no GPU's name.
    out = cli("hardware", "list", env={"COLUMNS": "80"}).stdout
    words = {word.strip(",") for line in out.splitlines() for word in line.split()}
    for gpu in json.loads(cli("hardware", "list", "--json").stdout):
        assert gpu["id"] in words and set(gpu["aliases"]) <= words, gpu["id"]
    assert all(len(line.rstrip()) <= 80 for line in out.splitlines()) and "…" not in out


def test_compare_and_generate_at_80_columns():
    out = cli("compare", "--gpu", "h100", "--gpu", "h200", "--model", "llama-3-70b", "--tp", "4", "--tp", "8",
              env={"COLUMNS": "80"}).stdout
    assert "…" not in out
    for gpu in ("h100-sxm TP4", "h100-sxm TP8", "h200 TP4", "h200 TP8"):
        assert any(line.startswith(gpu) for line in out.splitlines()), gpu
    assert "(left out at 80 columns: largest, end-to-end; --json has all)" in out.splitlines()
    out = cli("analyze", "generate", env={"COLUMNS": "80"}).stdout
    assert "bound (of its time)" in out and "largest op (of its time)" in out
    assert not any(line.rstrip().endswith("…") for line in out.splitlines())  # a cut cell ends in one
    # The summary's values wrap under themselves, the memory breakdown's below its label too.
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("memory:"))
    for line in lines[start + 1:start + 4]:
        assert line.startswith(" " * len("time to first token:   ")) and line.strip(), line


def test_the_readme_first_command_piped_into_cat():
    """The README's first command, run as a user runs it with its output piped (no terminal), at 80 columns."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "rooflinectl", "analyze", "decode", "--gpu", "a100"], env=env,
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "attn_residual " in out and "mlp_residual " in out
    assert "…" not in out
    assert all(len(line) <= 80 for line in out.splitlines())


def test_gpu_records_at_80_columns_cut_no_number(monkeypatch):
    """measure's, measure --workload's and profile's tables, rendered from committed H200 records at 80 columns:
    "1,…" for 1,748 GB/s and a "×" column of ellipses before; now the columns that do not fit are left out and
    the line under the table says which."""
    import io

    from rich.console import Console

    from rooflinectl.records.kernel import load as load_kernels
    from rooflinectl.records.profile import load as load_profile
    from rooflinectl.records.step import load_workload
    from rooflinectl.render import measure as render_measure
    from rooflinectl.render.profile import print_profile
    from rooflinectl.render.workload_measure import print_workload_run

    results = Path(__file__).parents[2] / "docs" / "results"
    outs = []
    for draw in (
        lambda c: print_workload_run(load_workload(results / "h200-2026-12-03-workload" / "llama-decode-b16-c4096.json"),
                                     out=c),
        lambda c: print_profile(c, load_profile(results / "h200-2026-12-03-profile" / "profile-decode-b1.json")),
    ):
        c = Console(width=80, file=io.StringIO(), color_system=None)
        draw(c)
        outs.append(c.file.getvalue())
    c = Console(width=80, file=io.StringIO(), color_system=None)
    monkeypatch.setattr(render_measure, "console", lambda: c)  # print_run prints on the commands' console
    render_measure.print_run(load_kernels(results / "h200-2026-12-03" / "decode-matmul.json"))
    outs.append(c.file.getvalue())
    for out in outs:
        lines = out.splitlines()
        said = next(i for i, line in enumerate(lines) if line.startswith("(left out"))  # under the first table
        cut = [line for line in lines[:said] if "…" in line]  # (profile's kernel names below are cut on purpose)
        assert cut == [], cut
        assert max(map(len, lines[:said])) <= 80


def test_what_plot_wrote_wraps_at_80_columns_with_its_path_whole(tmp_path):
    # A sweep of seven batches made a 150-character line; a path is never broken, however long.
    chart = tmp_path / ("a-long-folder-name-" * 4) / "roofline.png"
    chart.parent.mkdir()
    out = cli("plot", "-o", str(chart), "--batch", "1,2,4,8,16,32,64", env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    assert out.startswith("wrote") and any(line.split()[:1] == [str(chart)] for line in lines)
    assert all(len(line) <= 80 for line in lines if str(chart) not in line)
    assert " ".join(out.split()).endswith("seq_len 2048; h100-sxm)")


def test_one_step_is_one_step():
    out = cli("analyze", "generate", "--output", "1", env={"COLUMNS": "100"}).stdout
    assert "(1 step)" in out and "(1 steps)" not in out
