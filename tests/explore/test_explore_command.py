"""cli/explore.py: the command's checks before the terminal starts, and a --help without textual."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import cli


def test_not_a_terminal_exits_2_with_one_line_pointing_to_analyze():
    result = subprocess.run(["rooflinectl", "explore", "decode", "--gpu", "h100"], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: explore needs an interactive terminal")
    assert "rooflinectl analyze" in lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize(("args", "said"), [
    (["--gpu", "h1000"], "error: unknown GPU 'h1000'"),
    (["--tp", "3"], "error: TP 3: model llama-3-8b has 32 attention heads"),  # was "needs an interactive terminal"
    (["--calibrated"], "error: h100-sxm has no measured ceilings"),
])
def test_bad_options_exit_2_before_the_terminal_check(args, said):
    result = cli("explore", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith(said)


def test_help_loads_no_textual():
    code = (
        "import sys\n"
        "from rooflinectl.cli import main\n"
        "sys.argv = ['rooflinectl', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('HEAVY', [m for m in ('textual', 'matplotlib', 'torch', 'triton') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "explore" in out  # the command is listed ...
    assert "HEAVY []" in out  # ... without importing its UI library


def test_an_out_dir_the_system_refuses_is_one_line_not_a_traceback(tmp_path):
    """Issue 18: Path.is_dir raised ENAMETOOLONG (and PermissionError in a folder that may not be read)."""
    from helpers import assert_one_line_error

    for out_dir in ("x" * 300, str(tmp_path / "missing"), str(tmp_path / ("y" * 300) / "z")):
        assert_one_line_error(cli("explore", "--out-dir", out_dir), "--out-dir", "no such folder")
    (tmp_path / "file").write_text("")
    assert_one_line_error(cli("explore", "--out-dir", str(tmp_path / "file")), "no such folder")


def test_is_folder_and_gpu_reference_never_raise(tmp_path):
    from rooflinectl.cli.explore import gpu_reference
    from rooflinectl.files import is_dir

    assert is_dir(tmp_path) and not is_dir(tmp_path / "missing") and not is_dir("x" * 5000)
    assert not is_dir("a\0b")
    gpu = tmp_path / "g.yaml"
    gpu.write_text("id: g\n")
    assert gpu_reference(str(gpu)) == str(gpu.resolve())
    for name in ("h100", "x" * 5000 + ".yaml", "~nobody-such-user-x/g.yaml", "a\0b"):
        assert gpu_reference(name) == name
