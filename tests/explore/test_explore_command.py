"""cli/explore.py: the command's checks before the terminal starts, and a --help without textual."""

from __future__ import annotations

import subprocess
import sys

from helpers import cli


def test_not_a_terminal_exits_2_with_one_line_pointing_to_analyze():
    result = subprocess.run(["rooflinectl", "explore", "decode", "--gpu", "h100"], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: explore needs an interactive terminal")
    assert "rooflinectl analyze" in lines[0]
    assert result.stdout == ""


def test_bad_options_exit_2_before_the_terminal_check():
    result = cli("explore", "--gpu", "h1000")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: unknown GPU 'h1000'")


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
