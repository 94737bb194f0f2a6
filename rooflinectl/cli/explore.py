"""``rooflinectl explore``: the roofline in a full-screen terminal interface, every knob on a key.

Textual is imported inside the command only, so that ``rooflinectl --help`` and ``analyze`` stay light.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ..errors import UserError
from ..files import is_dir, is_file, user_path
from . import options as opt
from ._app import DEFAULT_GPU, app, command
from .options import workload_overrides


def gpu_reference(gpu: str) -> str:
    """How the saved YAML names the GPU: a file's absolute path (the saved file may be read from elsewhere), or
    the id or alias as given. ``files.is_file`` never raises for a name the system refuses; ``~user`` that names
    no user is not a file either."""
    path = user_path(gpu)
    return str(path.resolve()) if is_file(path) else gpu


def is_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def served() -> bool:
    """Run by textual-serve for a browser tab: no terminal, Textual's web driver instead."""
    import os

    from ..explore.serve import WEB_DRIVER

    return os.environ.get("TEXTUAL_DRIVER") == WEB_DRIVER


@command(app)
def explore(
    workload: str = typer.Argument("decode", help="A phase (decode, prefill, attention) or a workload YAML file."),
    gpu: opt.Gpu = DEFAULT_GPU,
    model: opt.Model = None,
    batch: opt.Batch = None,
    seq_len: opt.SeqLen = None,
    context: opt.Context = None,
    dtype: opt.DtypeAll = None,
    kv_dtype: opt.KvDtype = None,
    attention: opt.Attention = None,
    causal: opt.Causal = None,
    fuse: opt.Fuse = None,
    calibrated: opt.Calibrated = False,
    tp: opt.Tp = 1,
    ep: opt.Ep = 1,
    pp: opt.Pp = 1,
    out_dir: Path = typer.Option(Path("."), "--out-dir", "-o", help="Where the s and x keys save files."),
    serve: bool = typer.Option(False, "--serve", help="Serve explore to a browser (textual-serve), one app per "
                               "tab, instead of running it in this terminal."),
    host: str = typer.Option("127.0.0.1", "--host", help="With --serve: the address to listen on (default: this "
                             "machine only; 0.0.0.0 for the network)."),
    port: int = typer.Option(8000, "--port", help="With --serve: the TCP port."),
) -> None:
    """Explore a workload's roofline interactively: keys change phase, batch, length, dtype, attention, model
    and GPU, and the ops table, chart, totals and verdict follow at once.

    Example: rooflinectl explore decode --gpu h100 --model llama-3-70b --tp 4
    """
    from ..engine.parallel import Layout
    from ..specs.hardware import load_gpu
    from ..specs.scenario import resolve_workload

    w = resolve_workload(
        workload, **workload_overrides(model, batch, seq_len, context, dtype, kv_dtype, attention, causal, fuse)
    )
    g = load_gpu(gpu)
    layout = Layout(tp, ep, pp)
    from ..engine.roofline import analyze

    analyze(w, g, calibrated, layout)  # the first screen's numbers: a layout or --calibrated they refuse, said now
    if not is_dir(out_dir):  # a name too long or a folder we may not read is "no such folder", not a traceback
        raise UserError(f"--out-dir {out_dir}: no such folder (or one that may not be read)")
    if serve:
        from ..explore.serve import serve as serve_app
        from ..explore.serve import tab_command

        # Each tab runs the same command as parsed, less the serving options.
        given = [("--gpu", gpu), ("--model", model), ("--batch", batch), ("--seq-len", seq_len),
                 ("--context", context), ("--dtype", dtype), ("--kv-dtype", kv_dtype), ("--attention", attention),
                 ("--causal", causal is True), ("--no-causal", causal is False), ("--fuse", fuse),
                 ("--calibrated", calibrated), ("--tp", tp if tp != 1 else None), ("--ep", ep if ep != 1 else None),
                 ("--pp", pp if pp != 1 else None), ("--out-dir", None if out_dir == Path(".") else out_dir)]
        serve_app(tab_command(workload, given), host, port)
        return
    if not is_terminal() and not served():
        raise UserError(
            "explore needs an interactive terminal; for the same numbers as text, run 'rooflinectl analyze' "
            "with the same arguments"
        )
    from ..explore.app import ExploreApp

    ui = ExploreApp(w, g, calibrated=calibrated, layout=layout, gpu_ref=gpu_reference(gpu), out_dir=out_dir)
    ui.run()  # Textual restores the terminal on the way out, an unexpected error included
    if ui.return_code:
        raise typer.Exit(ui.return_code)
