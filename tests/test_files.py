"""files.py: reading takes regular UTF-8 files of bounded size; writing is all or nothing and never follows a link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rooflinectl.errors import UserError
from rooflinectl.files import MAX_READ_BYTES, check_writable, command_inputs, is_file, read_text, write_atomic


def test_read_text_refuses_what_is_not_a_small_utf8_file(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a regular file"):
        read_text(fifo)  # would block forever if it were opened
    with pytest.raises(UserError, match="is a folder"):
        read_text(tmp_path)
    utf16 = tmp_path / "u16.yaml"
    utf16.write_bytes("id: x\n".encode("utf-16"))
    with pytest.raises(UserError, match=r"not UTF-8 text \(byte 0xff at offset 0\)"):
        read_text(utf16)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_READ_BYTES + 1))
    with pytest.raises(UserError, match="more than the"):
        read_text(big)
    with pytest.raises(UserError, match="name is too long|no such file"):
        read_text(tmp_path / ("x" * 300))
    assert not is_file("x" * 5000)  # ENAMETOOLONG is an answer, not a traceback
    bom = tmp_path / "bom.yaml"
    bom.write_bytes(b"\xef\xbb\xbfid: x\n")
    assert read_text(bom) == "id: x\n"


def test_write_atomic_replaces_whole_and_refuses_links_and_special_files(tmp_path):
    out = tmp_path / "out.json"
    write_atomic(out, "old")
    write_atomic(out, b"new")
    assert out.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left
    target = tmp_path / "target"
    target.write_text("keep")
    link = tmp_path / "link.png"
    link.symlink_to(target)
    with pytest.raises(UserError, match="symbolic link"):
        write_atomic(link, "x")
    assert target.read_text() == "keep"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(UserError, match="symbolic link"):
        check_writable(dangling, "--save")
    assert dangling.is_symlink() and not (tmp_path / "nowhere").exists()  # the check created nothing
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a regular file"):
        write_atomic(fifo, "x")
    with pytest.raises(UserError, match="no such folder"):
        check_writable(tmp_path / "absent" / "x.json", "-o")
    check_writable(tmp_path / "new.json", "-o")
    assert not (tmp_path / "new.json").exists()


def test_a_write_that_fails_halfway_leaves_the_old_file_intact(tmp_path, monkeypatch):
    out = tmp_path / "chart.svg"
    out.write_text("the old chart")

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)  # the bytes went to the temporary file; the disk then fills up
    with pytest.raises(UserError, match="chart.svg: cannot write: No space left on device"):
        write_atomic(out, "the new chart" * 1000)
    assert out.read_text() == "the old chart"
    assert [p.name for p in tmp_path.iterdir()] == ["chart.svg"]


def test_a_writer_killed_halfway_leaves_the_old_file_intact(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "record.json"
    out.write_text('{"old": true}')
    script = (
        "import os, sys\n"
        "from rooflinectl import files\n"
        "real = os.fsync\n"
        "def slow(fd):\n"
        "    print('writing', flush=True); import time; time.sleep(30)\n"
        "os.fsync = slow\n"
        f"files.write_atomic({str(out)!r}, 'x' * 10_000_000)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    time.sleep(0.05)
    assert out.read_text() == '{"old": true}'


def test_user_path_expands_a_home_and_leaves_an_unknown_user_as_given(monkeypatch, tmp_path):
    """'~nobody/g.yaml' made Path.expanduser raise RuntimeError: a traceback from --gpu, --model and the
    ROOFLINECTL_*_PATH folders. As given, it is then no such file, in one line."""
    from rooflinectl.files import user_path

    monkeypatch.setenv("HOME", str(tmp_path))
    assert user_path("~/g.yaml") == tmp_path / "g.yaml"
    assert user_path("~nobody-such-user-x/g.yaml") == Path("~nobody-such-user-x/g.yaml")
    assert user_path("rel/g.yaml") == Path("rel/g.yaml")


def test_an_unknown_users_home_is_one_line(tmp_path):
    from helpers import assert_one_line_error, cli

    for args in (["analyze", "decode", "--gpu", "~nobody-such-user-x/g.yaml"],
                 ["analyze", "decode", "--model", "~nobody-such-user-x/m.yaml"],
                 ["analyze", "~nobody-such-user-x/w.yaml"]):
        assert_one_line_error(cli(*args), "~nobody-such-user-x/", "no such file")


def test_no_writer_replaces_a_file_its_command_read(tmp_path):
    spec, other, link = tmp_path / "gpu.yaml", tmp_path / "out.svg", tmp_path / "hard.svg"
    spec.write_text("id: x\n")
    os.link(spec, link)  # the same file by another name
    with command_inputs():
        read_text(spec)
        for path in (spec, link):
            with pytest.raises(UserError, match=f"-o {path}: cannot write: this command read it as an input"):
                write_atomic(path, "<svg/>", "-o")
        write_atomic(other, "<svg/>", "-o")  # a file it did not read
        write_atomic(spec, "id: y\n", "-o", replaces_input=True)  # a writer that updates the file it read
    assert spec.read_text() == "id: y\n"
    write_atomic(spec, "id: z\n")  # outside a command (a library caller) nothing is remembered
    assert spec.read_text() == "id: z\n"


@pytest.mark.parametrize("command", [
    ["plot", "decode", "--gpu", "{gpu}", "-o", "{gpu}"],
    ["plot", "decode", "--gpu", "h100", "--model", "{model}", "-o", "{model}"],
    ["measure", "--workload", "decode", "--model", "{config}", "--batch", "1", "--context", "8", "--device", "cpu",
     "--save", "{config}"],
    ["profile", "--model", "{config}", "--device", "cpu", "--batch", "1", "--context", "8", "--save", "{config}"],
])
def test_an_output_path_equal_to_an_input_is_refused_and_the_input_kept(tmp_path, command):
    from helpers import assert_one_line_error, cli

    if command[0] in ("measure", "profile"):
        pytest.importorskip("torch")
    if command[0] == "profile":
        pytest.importorskip("transformers")
    root = Path(__file__).parents[1]
    files = {"gpu": tmp_path / "gpu.svg", "model": tmp_path / "model.svg", "config": tmp_path / "config.json"}
    files["gpu"].write_text((root / "hardware" / "h100-sxm.yaml").read_text())
    files["model"].write_text((root / "workloads" / "models" / "llama-3-8b.yaml").read_text())
    files["config"].write_text('{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, '
                               '"num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, '
                               '"vocab_size": 256}')
    before = {k: p.read_bytes() for k, p in files.items()}
    args = [a.format(**{k: str(p) for k, p in files.items()}) for a in command]
    assert_one_line_error(cli(*args), "cannot write: this command re")  # read it, or reads it (known before)
    assert {k: p.read_bytes() for k, p in files.items()} == before
