"""`rooflinectl explore --serve`: explore in a browser through textual-serve, on localhost by default, the address
and port stated. Tested twice: as a browser drives it (the page over HTTP, then the page's websocket, through which
the app's screen arrives and keys go), and in a real headless Chromium (Debian's `chromium` package) driven through
the Chrome DevTools Protocol over aiohttp's websocket client: it loads the page, presses a key, reads the numbers
off the page's terminal and takes the screenshot in docs/explore.md."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from helpers import assert_one_line_error, cli
from rooflinectl.explore.serve import tab_command


def test_each_tab_runs_explore_with_the_users_arguments_less_the_serving_ones(monkeypatch):
    # Built from the options as parsed, not from sys.argv: an in-process call (here, pytest's argv) gets its own.
    ran = []
    monkeypatch.setattr("rooflinectl.explore.serve.serve", lambda command, host, port: ran.append((command, host,
                                                                                                port)))
    result = cli("explore", "decode", "--gpu", "h100", "--serve", "--port", "9000", "--host=0.0.0.0", "-b", "8",
                 "--no-causal", "--tp", "2")
    assert result.exit_code == 0, result.output
    assert ran == [(f"{sys.executable} -m rooflinectl explore decode --gpu h100 --batch 8 --no-causal --tp 2",
                    "0.0.0.0", 9000)]
    assert tab_command("my workload.yaml", [("--fuse", ""), ("--calibrated", False)]) == \
        f"{sys.executable} -m rooflinectl explore 'my workload.yaml' --fuse ''"


def test_a_bad_port_is_one_line():
    assert_one_line_error(cli("explore", "--serve", "--port", "70000"), "--port 70000", "1 to 65535")


def test_without_textual_serve_it_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "textual_serve.server", None)  # import fails as if not installed
    assert_one_line_error(cli("explore", "--serve"), "pip install")


def test_a_port_taken_or_a_host_not_here_is_one_line_before_any_promise():
    # Each used to print "serving … at http://…" and then a 55-line traceback, exit 1.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("explore", "--serve", "--port", str(port))
        assert_one_line_error(result, f"--port {port}: cannot listen there")
        assert "serving" not in result.stdout
    assert_one_line_error(cli("explore", "--serve", "--host", "no-such-host.invalid"), "cannot listen there")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_served_page_runs_the_app_and_takes_keys():
    pytest.importorskip("textual_serve")
    aiohttp = pytest.importorskip("aiohttp")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    server = subprocess.Popen([sys.executable, "-m", "rooflinectl", "explore", "--gpu", "h100", "--serve", "--port",
                               str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        first = server.stdout.readline()
        assert first.startswith(f"serving rooflinectl explore at http://127.0.0.1:{port}/ (listening on 127.0.0.1, "
                                f"port {port}; this machine only")

        async def browse() -> tuple[str, str, str]:
            async with aiohttp.ClientSession() as session:
                for _ in range(50):  # the server starts listening after its banner
                    try:
                        async with session.get(f"http://127.0.0.1:{port}/") as page:
                            html = await page.text()
                        break
                    except aiohttp.ClientConnectorError:
                        await asyncio.sleep(0.2)
                async with session.ws_connect(f"http://127.0.0.1:{port}/ws?width=100&height=30") as ws:
                    before = await screen(ws, "gate_proj")
                    await ws.send_str(json.dumps(["stdin", "b"]))  # the batch key
                    after = await screen(ws, "batch 2")
            return html, before, after

        async def screen(ws, until: str, seconds: float = 30) -> str:
            seen, end = "", time.monotonic() + seconds
            while until not in seen and time.monotonic() < end:
                try:
                    msg = await ws.receive(timeout=1)
                except asyncio.TimeoutError:
                    continue
                if msg.type == aiohttp.WSMsgType.BINARY:
                    seen += msg.data.decode("utf-8", "ignore")
                elif msg.type == aiohttp.WSMsgType.TEXT:
                    seen += msg.data
            return seen

        html, before, after = asyncio.run(browse())
        assert "textual.js" in html and f"ws://127.0.0.1:{port}/ws" in html
        assert "h100-sxm" in before and "gate_proj" in before  # the app's screen, as a browser receives it
        assert "batch 2" in after  # a key pressed in the browser turned the knob
    finally:
        server.terminate()
        server.wait(timeout=10)


# Run in the page before its own scripts. textual-serve's page keeps its xterm.js Terminal in a closure (as
# `this.terminal` of its own class) and draws it on a canvas (WebGL or 2D), so the text is in neither the DOM nor a
# global. This accessor on Object.prototype sees the first assignment of a `terminal` property anywhere, turns it
# back into the plain own property it would have been, and keeps the one that is an xterm.js Terminal (it has
# `buffer` and `write`) as window.__xterm, so the test reads what the page's terminal holds through xterm.js's
# public buffer API (buffer.active.getLine(y).translateToString()).
FIND_TERMINAL = """Object.defineProperty(Object.prototype, 'terminal', {configurable: true,
  get() { return undefined; },
  set(value) {
    Object.defineProperty(this, 'terminal', {value, writable: true, configurable: true, enumerable: true});
    if (value && value.buffer && typeof value.write === 'function') window.__xterm = value;
  }});"""
# The terminal's visible rows as text, one line each (null until the page has made its terminal).
READ_TERMINAL = """(() => { const t = window.__xterm; if (!t) return null; const b = t.buffer.active, rows = [];
  for (let y = 0; y < t.rows; y++) { const line = b.getLine(b.viewportY + y); rows.push(line ? line.translateToString(true) : ''); }
  return rows.join('\\n'); })()"""
VIEWPORT = (1280, 720)  # CSS pixels; the screenshot has these dimensions


def chromium() -> str | None:
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def step_numbers(screen: str) -> tuple[float, float]:
    """The summary's "<t> ms per step · <r> tokens/s" off the screen."""
    found = re.search(r"([\d.]+) ms per step · ([\d,.]+) tokens/s", screen)
    assert found, screen
    return float(found[1]), float(found[2].replace(",", ""))


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_in_headless_chromium_the_page_shows_explore_and_a_key_turns_the_batch(tmp_path):
    """Chromium loads the served page, the page runs explore for h100; pressing `b` in the page doubles the batch:
    the GPU, the batch and the step's numbers are read off the page's terminal before and after. Set
    ROOFLINECTL_SERVE_SCREENSHOT=docs/img/explore-serve.png to write the docs' screenshot."""
    pytest.importorskip("textual_serve")
    aiohttp = pytest.importorskip("aiohttp")
    browser = chromium()
    if browser is None:
        pytest.skip("no chromium (apt-get install chromium; .ci/run installs it)")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    profile = Path(tempfile.mkdtemp(prefix="rooflinectl-chromium-"))
    server = subprocess.Popen([sys.executable, "-m", "rooflinectl", "explore", "--gpu", "h100", "--serve", "--port",
                               str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    chrome = None
    try:
        assert server.stdout.readline().startswith(f"serving rooflinectl explore at http://127.0.0.1:{port}/")
        chrome = subprocess.Popen([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                   "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
                                   f"--user-data-dir={profile}", "about:blank"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        async def drive() -> tuple[str, str, bytes]:
            devtools = profile / "DevToolsActivePort"  # Chromium writes the port it picked here
            end = time.monotonic() + 15
            while not (devtools.exists() and devtools.read_text().strip()):
                assert time.monotonic() < end and chrome.poll() is None, "chromium did not start"
                await asyncio.sleep(0.1)
            debug = int(devtools.read_text().split()[0])
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{debug}/json/list") as reply:
                    targets = await reply.json()
                page_ws = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
                async with session.ws_connect(page_ws, max_msg_size=64 << 20) as ws:
                    ids = iter(range(1, 1 << 30))

                    async def call(method: str, **params):
                        sent = next(ids)
                        await ws.send_json({"id": sent, "method": method, "params": params})
                        while True:  # events arrive between replies; skip them
                            msg = await ws.receive_json(timeout=20)
                            if msg.get("id") == sent:
                                assert "error" not in msg, msg
                                return msg["result"]

                    async def screen(until: str, seconds: float = 20) -> str:
                        text, end = "", time.monotonic() + seconds
                        while until not in text and time.monotonic() < end:
                            await asyncio.sleep(0.1)
                            got = await call("Runtime.evaluate", expression=READ_TERMINAL, returnByValue=True)
                            text = got["result"].get("value") or ""
                        return text

                    async def press(key: str) -> None:
                        code = {"key": key, "code": f"Key{key.upper()}", "windowsVirtualKeyCode": ord(key.upper())}
                        await call("Input.dispatchKeyEvent", type="keyDown", text=key, **code)
                        await call("Input.dispatchKeyEvent", type="keyUp", **code)

                    await call("Page.enable")
                    await call("Emulation.setDeviceMetricsOverride", width=VIEWPORT[0], height=VIEWPORT[1],
                               deviceScaleFactor=1, mobile=False)
                    await call("Page.addScriptToEvaluateOnNewDocument", source=FIND_TERMINAL)
                    await call("Page.navigate", url=f"http://127.0.0.1:{port}/")
                    before = await screen("gate_proj")
                    # keys go where a click would put them: xterm.js's input textarea
                    await call("Runtime.evaluate", expression="document.querySelector('.xterm-helper-textarea').focus()")
                    await press("b")
                    after = await screen("batch 2 │")
                    await asyncio.sleep(1)  # the page's fade-in and the chart, drawn after the numbers
                    shot = await call("Page.captureScreenshot", format="png")
            return before, after, base64.b64decode(shot["data"])

        before, after, png = asyncio.run(asyncio.wait_for(drive(), timeout=60))
    finally:
        if chrome is not None:
            stop(chrome)
        stop(server)
        shutil.rmtree(profile, ignore_errors=True)
    assert "gate_proj" in before and "batch 2 │" in after, (before, after)
    assert before.splitlines()[0].split("│")[:4] == [" h100-sxm ", " decode ", " llama-3-8b ", " batch 1 "], before
    assert after.splitlines()[0].split("│")[:4] == [" h100-sxm ", " decode ", " llama-3-8b ", " batch 2 "], after
    # The step's numbers off the page: tokens/s is batch / step time, as the app computes it; a doubled batch
    # shares each weight read, so the step barely lengthens (KV reads and FLOPs double) and tokens/s nearly doubles.
    step1, rate1 = step_numbers(before)
    step2, rate2 = step_numbers(after)
    assert rate1 == pytest.approx(1 / (step1 / 1e3), rel=5e-3) and rate2 == pytest.approx(2 / (step2 / 1e3), rel=5e-3)
    assert step1 < step2 < 1.1 * step1 and 1.8 * rate1 < rate2 < 2 * rate1
    # gate_proj's arithmetic intensity read off the table: 2·b·4096·14336 FLOPs over about 2·4096·14336 bytes of
    # bf16 weights is b FLOP/byte (1 before the key, 2 after).
    assert re.search(r"^gate_proj +1 linear", before, re.M) and re.search(r"^gate_proj +2 linear", after, re.M)
    assert "computes 2·2·4096·14336 FLOPs of matmul" in after
    assert png_size(png) == VIEWPORT
    if out := os.environ.get("ROOFLINECTL_SERVE_SCREENSHOT"):
        Path(out).write_bytes(png)
