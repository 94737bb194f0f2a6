"""Strict loading: every failure to read a spec file is one line naming the file, the place and the reason."""

from __future__ import annotations

import os
import re

import pytest

from rooflinectl.errors import UserError
from rooflinectl.specs.load import (
    SAFE_LOADER,
    Strict,
    data_dir,
    looks_like_path,
    pure_python_loader,
    read_json,
    read_yaml,
    search_dirs,
    validate,
)


class Point(Strict):
    x_mib: float
    y_mib: float = 0.0


@pytest.mark.parametrize("loader", [SAFE_LOADER, pure_python_loader()])
def test_malformed_yaml_names_the_line_with_either_loader(tmp_path, loader):
    path = tmp_path / "bad.yaml"
    path.write_text("a: 1\nb: [1, 2\n")
    with pytest.raises(UserError, match=r"bad.yaml: malformed YAML at line \d+, column \d+"):
        read_yaml(path, loader)


def test_yaml_that_is_not_a_mapping_and_a_missing_file(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(UserError, match="expected a mapping of fields at the top level, found list"):
        read_yaml(path)
    with pytest.raises(UserError, match="no such file"):
        read_yaml(tmp_path / "absent.yaml")


def test_read_json_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{\"a\": 1,\n")
    with pytest.raises(UserError, match="malformed JSON at line"):
        read_json(bad)
    listed = tmp_path / "list.json"
    listed.write_text("[1]")
    with pytest.raises(UserError, match="expected a JSON object, found list"):
        read_json(listed)
    ok = tmp_path / "ok.json"
    ok.write_text('{"a": 1}')
    assert read_json(ok) == {"a": 1}


def test_validate_names_the_field_and_an_unknown_key_first():
    assert validate(Point, {"x_mib": 2}, "p.yaml") == Point(x_mib=2.0)
    # In the user's words, every error on the one line (up to three, then a count), the unknown key first.
    with pytest.raises(UserError, match=r"^p.yaml: field 'x_mb': unknown key; field 'x_mib': missing$"):
        validate(Point, {"x_mb": 2}, "p.yaml")
    with pytest.raises(UserError, match=r"^p.yaml: field 'a': unknown key; field 'b': unknown key; field 'c': "
                                         r"unknown key; and 2 more errors$"):
        validate(Point, {"a": 1, "b": 2, "c": 3, "d": 4}, "p.yaml")


def test_strict_models_are_frozen():
    p = Point(x_mib=1.0)
    with pytest.raises(ValueError):
        p.x_mib = 2.0  # type: ignore[misc]


def test_paths_and_search_dirs(tmp_path, monkeypatch):
    assert looks_like_path("my.yaml") and looks_like_path("dir/h100") and looks_like_path("x.json")
    assert not looks_like_path("h100")
    monkeypatch.setenv("ROOFLINECTL_TEST_PATH", str(tmp_path))
    assert search_dirs("hardware", "ROOFLINECTL_TEST_PATH") == [tmp_path, data_dir("hardware")]
    # A name that is no folder, or one the system refuses (ENAMETOOLONG was a traceback in every command that
    # looked a GPU up), holds no spec: passed over, as the shell passes over such a PATH entry.
    too_long = str(tmp_path / ("a" * 300))
    monkeypatch.setenv("ROOFLINECTL_TEST_PATH", os.pathsep.join([too_long, str(tmp_path / "none"), str(tmp_path)]))
    assert search_dirs("hardware", "ROOFLINECTL_TEST_PATH") == [tmp_path, data_dir("hardware")]
    with pytest.raises(UserError, match="bundled 'nothing' folder is missing"):
        data_dir("nothing")


@pytest.mark.parametrize("text, char", [
    ('name: "x\\e[2Jy"\n', "U+001B"),     # YAML's \e: an ANSI escape that would clear the user's terminal
    ('name: "$\\frac{$"\n', "U+000C"),    # YAML's \f inside a double-quoted string
    ('names: ["ok", "a\\x07b"]\n', "U+0007"),
    ('"k\\x01": 1\n', "U+0001"),          # in a key too
])
def test_control_characters_in_a_spec_are_refused_naming_the_field(tmp_path, text, char):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=re.escape(char)) as err:
        read_yaml(path)
    assert str(err.value).startswith(f"{path}: field '")


def test_control_characters_in_json_are_refused_and_tabs_newlines_crlf_are_not(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"a": {"b": ["x\\u009bq"]}}')
    with pytest.raises(UserError, match=r"field 'a\.b\.0' holds the control character U\+009B"):
        read_json(path)
    path.write_text('{"notes": "line one\\nline\\ttwo"}')
    assert read_json(path) == {"notes": "line one\nline\ttwo"}
    crlf = tmp_path / "crlf.yaml"
    crlf.write_bytes(b"notes: >-\r\n  folded\r\n  text\r\nname: \"quoted\r\n  two\"\r\n")
    assert read_yaml(crlf) == {"notes": "folded text", "name": "quoted two"}


def test_a_spec_of_another_kind_is_named_as_what_it_is(tmp_path):
    """A config.json given as a GPU, a GPU file as a model, a scenario as a GPU: what the file is, in one line,
    not the other schema's unknown keys ("field 'architectures': Extra inputs are not permitted (and 33 more
    errors)")."""
    from pathlib import Path

    from rooflinectl.specs.hardware import load_gpu
    from rooflinectl.specs.models import load_model

    root = Path(__file__).parents[2]
    config = tmp_path / "config.json"
    config.write_text('{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64}')
    with pytest.raises(UserError, match=r"config.json: this is a model's config.json, not a GPU file$"):
        load_gpu(str(config))
    with pytest.raises(UserError, match=r"h100-sxm.yaml: this is a GPU file, not a model file or config.json$"):
        load_model(str(root / "hardware" / "h100-sxm.yaml"))
    with pytest.raises(UserError, match=r"decode.yaml: this is a scenario file, not a GPU file$"):
        load_gpu(str(root / "workloads" / "decode.yaml"))


def test_an_alias_bomb_and_a_recursive_alias_are_refused_before_any_walk(tmp_path):
    # Nine levels of nine aliases are 468 bytes and 9^9 values: the control-character walk over the expanded
    # values did not finish (a command hung). They are counted over the distinct nodes and refused.
    levels = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    levels += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(levels) + "\n")
    with pytest.raises(UserError, match=r"holds 490,329,064 values once its aliases are expanded"):
        read_yaml(bomb)
    for text in ("a: &a [*a]\n", "a: &a {b: *a}\n", "a: &a [1, [2, *a]]\n"):  # PyYAML builds these as cycles
        looped = tmp_path / "loop.yaml"
        looped.write_text(text)
        with pytest.raises(UserError, match="a value holds itself"):
            read_yaml(looped)
    # Aliases a spec may use, reached more than once, are counted each time and accepted.
    shared = tmp_path / "shared.yaml"
    shared.write_text("a: &a {x: [1, 2, 3]}\nb: *a\nc: [*a, *a]\n")
    assert read_yaml(shared)["c"][1] == {"x": [1, 2, 3]}
