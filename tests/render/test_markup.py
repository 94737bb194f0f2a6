"""Names from a user's files print as written, never as rich markup (issue 18): "[/]" raised MarkupError (a
traceback), "[bold]x" printed a bold x, "[link=http://x]y[/link]" a terminal hyperlink. rooflinectl prints through
render.console's console (markup off) and puts names in Text objects, so every command shows the name literally."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import yaml

from helpers import cli
from rooflinectl.engine.roofline import analyze
from rooflinectl.render.analysis import ops_table, print_analysis
from rooflinectl.render.console import console
from rooflinectl.render.hardware import gpu_detail, gpu_table
from rooflinectl.specs.hardware import load_gpu_file
from rooflinectl.specs.scenario import resolve_workload

ROOT = Path(__file__).parents[2]
NAMES = ["[/]", "[bold]x", "[link=http://x]y[/link]"]


def files(tmp_path: Path, name: str) -> dict[str, Path]:
    """A GPU, a model and a scenario whose every free-text field is ``name``, in folders for the search paths."""
    hw, models = tmp_path / "hw", tmp_path / "wl" / "models"
    hw.mkdir()
    models.mkdir(parents=True)
    gpu = yaml.safe_load((ROOT / "hardware" / "h100-sxm.yaml").read_text())
    gpu.update(id="markup-gpu", aliases=[name], name=name, vendor=name, architecture=name, notes=name)
    gpu["memory"].update(hbm_type=name, source=name)
    gpu.pop("measured", None)
    model = yaml.safe_load((ROOT / "workloads" / "models" / "llama-3-8b.yaml").read_text())
    model.update(id="markup-model", name=name, source=name)
    scenario = yaml.safe_load((ROOT / "workloads" / "decode.yaml").read_text())
    scenario.update(model="markup-model", description=name)
    paths = {"gpu": hw / "markup-gpu.yaml", "model": models / "markup-model.yaml",
             "scenario": tmp_path / "wl" / "markup-scenario.yaml"}
    for key, data in (("gpu", gpu), ("model", model), ("scenario", scenario)):
        paths[key].write_text(yaml.safe_dump(data, allow_unicode=True))
    return paths


def shown(renderable) -> str:
    """What render.console's console prints on a colour terminal (where a hyperlink would be an OSC 8 escape)."""
    c = console()
    c.file = io.StringIO()
    c._force_terminal = True
    c.print(renderable)
    return c.file.getvalue()


@pytest.mark.parametrize("name", NAMES)
def test_renderers_show_a_name_literally(tmp_path, name):
    p = files(tmp_path, name)
    gpu = load_gpu_file(p["gpu"])
    a = analyze(resolve_workload(str(p["scenario"]), model=str(p["model"])), gpu)
    for renderable in (ops_table(a), gpu_table([gpu]), gpu_detail(gpu)):
        out = shown(renderable)
        plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
        assert "\x1b]8;" not in out  # no hyperlink
        assert name in plain.replace("\n", "") or name in plain
    buffer = io.StringIO()
    c = console()
    c.file = buffer
    print_analysis(c, a)
    assert f"{name} on {name}" in buffer.getvalue().replace("\n", " ") or name in buffer.getvalue()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("command", ["hardware list", "hardware show", "analyze", "analyze model", "workloads"])
def test_commands_print_a_name_literally(tmp_path, name, command):
    p = files(tmp_path, name)
    env = {"ROOFLINECTL_HARDWARE_PATH": str(p["gpu"].parent), "ROOFLINECTL_WORKLOADS_PATH": str(p["scenario"].parent),
           "COLUMNS": "200"}
    args = {
        "hardware list": ["hardware", "list"],
        "hardware show": ["hardware", "show", "markup-gpu"],
        "analyze": ["analyze", str(p["scenario"]), "--gpu", "markup-gpu"],
        "analyze model": ["analyze", "decode", "--model", "markup-model", "--gpu", str(p["gpu"])],
        "workloads": ["workloads", "show", "markup-model"],
    }[command]
    result = cli(*args, env=env)
    assert result.exit_code == 0, result.output
    assert name in result.stdout
    assert "\x1b]8;" not in result.stdout


def test_every_console_is_render_consoles():
    """The rule beside render.console: no module builds a rich Console of its own (with markup on by default)."""
    package = ROOT / "rooflinectl"
    builders = [str(f.relative_to(ROOT)) for f in package.rglob("*.py")
                if re.search(r"\bConsole\(", f.read_text()) and f.name != "console.py"]
    assert builders == []


@pytest.mark.parametrize("name", NAMES)
def test_the_console_prints_a_plain_string_literally(name):
    out = shown(f"error in {name}")
    assert f"error in {name}" in out and "\x1b]8;" not in out
