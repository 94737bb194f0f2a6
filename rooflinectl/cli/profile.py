"""``rooflinectl profile``: a Hugging Face model's kernels, each charged to the engine op it serves, beside the
engine's prediction."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ..shell import command_line
from ._app import DEFAULT_GPU, app, command, console, print_json


def _command_line(model: str, phase: str, batch: int, context: int | None, seq_len: int | None, attn: str,
                  cuda_graph: bool | None, device: str, gpu: str | None, module: str | None) -> str:
    """The command that reproduces the run (the record's ``command``)."""
    return command_line(["profile"], [
        ("--model", model), ("--phase", phase), ("--batch", batch),
        ("--context", context), ("--seq-len", seq_len), ("--attn-implementation", attn),
        ("--device", device), ("--cuda-graph", cuda_graph is True), ("--no-cuda-graph", cuda_graph is False),
        ("--gpu", gpu), ("--module", module)])


@command(app)
def profile(
    model: str = typer.Option("llama-3-8b", "--model", "-m", help="Model id or a local Hugging Face config.json "
                              "(llama, mistral, qwen2, qwen3); random weights, nothing downloaded."),
    phase: str = typer.Option("decode", "--phase", help="decode or prefill."),
    batch: int = typer.Option(1, "--batch", "-b", help="Sequences in the batch."),
    context: int = typer.Option(None, "--context", "-c", help="Decode: KV positions attended, the new token "
                                "included (the cache holds context − 1 random ones); default: the bundled decode "
                                "scenario's."),
    seq_len: int = typer.Option(None, "--seq-len", "-s", help="Prefill: prompt tokens per sequence; default: "
                                "the bundled prefill scenario's."),
    attn_implementation: str = typer.Option("sdpa", "--attn-implementation", help="sdpa (the engine's flash "
                                            "attention) or eager (its naive qk, softmax, pv)."),
    cuda_graph: bool = typer.Option(None, "--cuda-graph/--no-cuda-graph", help="Time the step replayed from a "
                                    "CUDA graph (default on a GPU, where the step captures)."),
    device: str = typer.Option("cuda", "--device", help="cuda, or cpu (CPU time: the attribution, not a GPU "
                               "figure)."),
    gpu: str = typer.Option(None, "--gpu", "-g", help=f"The spec whose roofs predict (default: the device's; on "
                            f"the CPU {DEFAULT_GPU})."),
    module: str = typer.Option(None, "--module", help="pkg.mod:build, a function returning (an nn.Module, its "
                               "inputs) to run instead of the Hugging Face model (--model gives the engine's ops)."),
    json: bool = typer.Option(False, "--json", help="Print the record as JSON."),
    save: Path = typer.Option(None, "--save", help="Write the record as JSON (what plot --measured reads)."),
) -> None:
    """Profile one step of a Hugging Face model and charge every kernel to the engine's op it serves.

    Example: rooflinectl profile --model llama-3-8b --phase decode --batch 16 --context 4096

    On the CPU (the attribution, CPU time): rooflinectl profile --model config.json --device cpu --batch 2 --context 64
    """
    from ..files import check_writable
    from ..profile.run import ProfileRequest, run_profile
    from ..records.profile import save as save_record
    from ..render.profile import print_profile

    if save is not None:
        check_writable(save, "--save", will_read=(model, gpu))
    req = ProfileRequest(model=model, phase=phase, batch=batch, context=context, seq_len=seq_len,
                         attn_implementation=attn_implementation, cuda_graph=cuda_graph, device=device, module=module,
                         command=_command_line(model, phase, batch, context, seq_len, attn_implementation,
                                               cuda_graph, device, gpu, module))
    record = run_profile(req, gpu, DEFAULT_GPU)
    if json:
        print_json(record.model_dump(mode="json"))
    else:
        print_profile(console(), record)
    if save is not None:  # after the results are shown: a save that fails (a full disk) loses none of them
        sys.stdout.flush()
        save_record(record, save)
        if not json:
            print(f"wrote {save}")
