"""The performance figures of README.md and docs/performance.md are written from the committed records by
benchmarks/docs_figures.py; this fails when a doc's block differs from what its records give (edit the records'
run, never the numbers in the doc: `python benchmarks/docs_figures.py` rewrites the blocks)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("docs_figures", ROOT / "benchmarks" / "docs_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_block_matches_its_records(capsys):
    assert _script().main(["--check"]) == 0, capsys.readouterr().out


def test_every_marked_block_is_one_the_script_writes_and_holds_figures():
    blocks = _script().BLOCKS
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        doc = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        found = re.findall(r"<!-- figures:([\w-]+) -->\n(.*?)<!-- /figures:\1 -->", text, re.S)
        assert {name for name, _ in found} == {name for name, _ in blocks.get(doc, [])}, doc
        for name, body in found:
            assert re.search(r"\d", body), f"{doc}: figures:{name} is empty"


def test_a_changed_figure_is_caught(tmp_path, monkeypatch):
    """The check compares the doc with the records: a figure edited by hand makes it fail."""
    script = _script()
    for doc in script.BLOCKS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / doc).write_text((ROOT / doc).read_text())
    monkeypatch.setattr(script, "ROOT", tmp_path)
    assert script.main(["--check"]) == 0
    perf = tmp_path / "docs" / "performance.md"
    edited = perf.read_text().replace("| 4096 × 1,024 | rows | 5.48 |", "| 4096 × 1,024 | rows | 5.18 |")
    assert edited != perf.read_text()
    perf.write_text(edited)
    assert script.main(["--check"]) == 1
