"""``rooflinectl explore --serve``: the same app in a browser, through textual-serve (Textualize's own server: an
aiohttp page with xterm.js that starts one ``rooflinectl explore`` process per browser tab and relays its screen).

No web code of our own: this module builds the command each tab runs (the user's own options, less the serving
ones) and hands it to ``textual_serve.server.Server``. textual-serve is an optional extra, imported only here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from ..errors import UserError
from ..shell import Option, command_line

WEB_DRIVER = "textual.drivers.web_driver:WebDriver"  # what textual-serve sets TEXTUAL_DRIVER to in each tab's process


def tab_command(workload: str, options: Iterable[Option]) -> str:
    """The command line each browser tab runs: ``python -m rooflinectl explore`` with the workload and explore's
    options as parsed (``shell.command_line``'s pairs), the serving options left out by the caller."""
    return command_line(["explore", workload], options, program=(sys.executable, "-m", "rooflinectl"))


def check_port(port: int) -> None:
    if not 1 <= port <= 65535:
        raise UserError(f"--port {port}: a TCP port is 1 to 65535")


def serve(command: str, host: str, port: int) -> None:
    """Serve ``command`` on ``host``:``port`` until Ctrl+C; says where first."""
    check_port(port)
    try:
        from textual_serve.server import Server
    except ImportError:
        raise UserError("explore --serve needs textual-serve: pip install 'rooflinectl[serve]' (or "
                        "pip install textual-serve)") from None
    check_listen(host, port)
    print(f"serving rooflinectl explore at http://{host}:{port}/ (listening on {host}, port {port}; "
          f"{'this machine only' if host in ('127.0.0.1', 'localhost', '::1') else 'reachable from the network'}; "
          f"Ctrl+C stops)", flush=True)
    try:
        Server(command, host=host, port=port, title="rooflinectl explore").serve()
    except OSError as err:  # the port taken between the check and the server's own bind
        raise UserError(f"--host {host} --port {port}: cannot listen there ({err.strerror or err})") from None


def check_listen(host: str, port: int) -> None:
    """The server can listen on ``host``:``port`` (the name resolves to an address of this machine, the port is
    free and this user may bind it): tried with a socket of its own before "serving … at" is printed, so a taken
    port or a wrong host is one line, not the server's traceback after a promise."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server sets it
            probe.bind(address)
    except OSError as err:
        raise UserError(f"--host {host} --port {port}: cannot listen there ({err.strerror or err})") from None
