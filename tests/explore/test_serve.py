"""`rooflinectl explore --serve`: explore in a browser through textual-serve, on localhost by default, the address
and port stated. Tested as a browser drives it: the page over HTTP, then the page's websocket, through which the
app's screen arrives and keys go (a real headless browser is not used here: see docs/explore.md)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from helpers import assert_one_line_error, cli
from rooflinectl.explore.serve import tab_command


def test_each_tab_runs_explore_with_the_users_arguments_less_the_serving_ones():
    cmd = tab_command(["decode", "--gpu", "h100", "--serve", "--port", "9000", "--host=0.0.0.0", "-b", "8"])
    assert cmd == f"{sys.executable} -m rooflinectl explore decode --gpu h100 -b 8"


def test_a_bad_port_is_one_line():
    assert_one_line_error(cli("explore", "--serve", "--port", "70000"), "--port 70000", "1 to 65535")


def test_without_textual_serve_it_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "textual_serve.server", None)  # import fails as if not installed
    assert_one_line_error(cli("explore", "--serve"), "pip install")


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
