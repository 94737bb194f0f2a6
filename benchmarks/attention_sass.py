"""What the compiler makes of flash_attention's K/V loop for an H100/H200, read on a CPU: no GPU needed.

Compiles ``_flash_fwd_kernel`` for sm_90 with the installed triton (as the launcher would specialise it for a
sequence length that is a multiple of 16: the pointers, strides and length 16-divisible, the unit strides constant;
the same specialisation as tests/kernel_checks.py's Sm90Job, which a benchmark does not import), disassembles the
cubin with triton's own ``cuobjdump``, and prints per program its registers, stack (spills) and shared memory, and
for each loop (a backward branch) the count of each instruction and, in order, its waits (for the tensor cores'
products, for the asynchronous copies, the program-wide barrier) and what runs between two of them: the products
issued (HGMMA), the copies issued (LDGSTS), the exponentials (MUFU.EX2) and the instructions in all. A product
overlaps with what runs after its issue until the next wait for products. Then what ptxas (``-v``) says of the code:
where it serialises the products, its reason.

    python benchmarks/attention_sass.py                         # the shipped 128×128, 8 warps, 3 stages
    python benchmarks/attention_sass.py --block 128x128 --warps 8 --stages 2 --qk-ahead
    python benchmarks/attention_sass.py --gluon [--block 128x64] [--stages 3] [--pingpong]   # flash_attention_sm90
    PYTHONPATH=/path/to/triton-3.6 python benchmarks/attention_sass.py   # another triton (pip --target)

With --gluon, the Gluon kernel for Hopper (``rooflinectl/kernels/flash_attention_sm90.py``, d 128) instead, and of
its loops the two consumer warpgroups' (the loops that hold both products): there the waits are also the mbarrier
waits (for a K or V copy; with --pingpong, first for the consumer's turn) and arrivals (a buffer freed; the other
consumer's turn), and a "barrier" is the warpgroup's own.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import warnings
from collections import Counter

import triton  # type: ignore[import-untyped]
from triton.backends.compiler import GPUTarget  # type: ignore[import-untyped]
from triton.compiler import ASTSource  # type: ignore[import-untyped]

from rooflinectl.kernels import flash_attention as fa

# The waits that split a loop into segments: for the tensor cores' products (wgmma.wait_group), for the
# asynchronous copies (cp.async.wait_group), the barrier, and the mbarriers' waits and arrivals (the Gluon kernel's
# TMA copies and buffers). Within a segment nothing waits.
WAITS = {"WARPGROUP.DEPBAR.LE": "wait for products", "DEPBAR.LE": "wait for copies", "BAR.SYNC.DEFER_BLOCKING": "barrier",
         "SYNCS.PHASECHK.TRANS64.TRYWAIT": "mbarrier wait", "SYNCS.ARRIVE.TRANS64.A1T0": "mbarrier arrive"}
_LOCAL = re.compile(r"\b(?:LDL|STL)\b")
_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)([^;]*);")
_TARGET = re.compile(r"0x([0-9a-f]+)")


def compile_kernel(block_m: int, block_n: int, warps: int, stages: int, causal: bool, qk_ahead: bool,
                   max_regs: int | None):
    names = fa._flash_fwd_kernel.arg_names
    consts = {"HEAD_D": 128, "BLOCK_M": block_m, "BLOCK_N": block_n, "CAUSAL": causal, "WARP_SPEC": False,
              "k_td": None, "v_td": None, "TMA": False, "HEADS_FAST": True, "POLY_EXP": False, "QK_AHEAD": qk_ahead,
              "sqd": 1, "skd": 1, "svd": 1, "sod": 1}
    signature, attrs = {}, {}
    for i, name in enumerate(names):
        if name in consts:
            signature[name] = "constexpr"
        elif name.endswith("_ptr"):
            signature[name], attrs[(i,)] = "*bf16", [["tt.divisibility", 16]]
        elif name == "qk_scale":
            signature[name] = "fp32"
        else:
            signature[name] = "i32"
            if name not in ("n_heads", "group"):
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fa._flash_fwd_kernel, signature, constexprs={(names.index(k),): v for k, v in consts.items()},
                    attrs=attrs)
    options: dict = {"num_warps": warps, "num_stages": stages}
    if max_regs:
        options["maxnreg"] = max_regs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def compile_gluon(block_n: int, stages: int, causal: bool, pingpong: bool):
    """flash_attention_sm90's kernel at d 128, bf16, as its launcher specialises it (the output pointer 16-byte
    divisible), with the launch's registers."""
    from triton.experimental.gluon._runtime import GluonASTSource  # type: ignore[import-untyped]

    from rooflinectl.kernels import flash_attention_sm90 as fa3

    fn = fa3._fa3_fwd_kernel
    names = fn.arg_names
    consts = {"HEAD_D": 128, "BLOCK_N": block_n, "STAGES": stages, "CAUSAL": causal, "PINGPONG": pingpong}
    signature = {**fa3.sm90_signature(128, block_n), **{k: "constexpr" for k in consts}}
    src = GluonASTSource(fn, signature, constexprs={(names.index(k),): v for k, v in consts.items()},
                         attrs={(names.index("o_ptr"),): [["tt.divisibility", 16]]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4,
                                                                             "maxnreg": fa3.MAX_REGS})


def disassemble(cubin: bytes) -> tuple[str, str]:
    """The cubin's resource usage line and its SASS, by triton's bundled cuobjdump."""
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        usage = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True, check=True)
        sass = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True, check=True)
    line = next((ln.strip() for ln in usage.stdout.splitlines() if "REG:" in ln), "")
    return line, sass.stdout


def ptxas_notes(ptx: str, max_regs: int | None) -> list[str]:
    """What triton's ptxas says of the PTX (``-v``): its register count, and why it serialised the
    wgmma instructions where it did (its "Potential Performance Loss" notes)."""
    from triton.backends.nvidia.compiler import get_ptxas  # type: ignore[import-untyped]

    tool = get_ptxas(90).path  # the ptxas triton itself compiles sm_90 with (its PTX version needs that one)
    with tempfile.NamedTemporaryFile(suffix=".ptx", mode="w") as f:
        f.write(ptx)
        f.flush()
        extra = ["--maxrregcount", str(max_regs)] if max_regs else []
        out = subprocess.run([tool, "-arch=sm_90a", "-v", *extra, f.name, "-o", os.devnull], capture_output=True,
                             text=True, check=True)
    return [ln.split(":", 1)[1].strip() for ln in (out.stdout + out.stderr).splitlines()
            if "Performance Loss" in ln or "Used" in ln]


def loops(sass: str) -> list[list[tuple[int, str, str]]]:
    """Each loop's instructions (address, opcode, operands): from a backward branch's target to the branch."""
    code = [(int(a, 16), op, rest) for a, op, rest in _INSTR.findall(sass)]
    found = []
    for addr, op, rest in code:
        target = _TARGET.search(rest)
        if op == "BRA" and target and int(target.group(1), 16) < addr:
            start = int(target.group(1), 16)
            found.append([c for c in code if start <= c[0] <= addr])
    return found


def segments(body: list[tuple[int, str, str]]) -> list[str]:
    """The loop in order, split at its WAITS: each wait, then what runs before the next one, counted as products
    issued (HGMMA), copies issued (LDGSTS), exponentials (MUFU.EX2) and instructions in all."""
    out: list[str] = []
    seg: Counter = Counter()

    def flush() -> None:
        if seg["all"]:
            out.append(f"[{seg['HGMMA']} HGMMA, {seg['LDGSTS']} LDGSTS, {seg['MUFU.EX2']} EX2, {seg['all']} instr]")
        seg.clear()

    for _, op, _ in body:
        if op in WAITS:
            flush()
            out.append(WAITS[op])
            continue
        seg["all"] += 1
        for kind in ("HGMMA", "LDGSTS", "MUFU.EX2"):
            seg[kind] += op.startswith(kind)
    flush()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--block", default="128x128", help="BLOCK_MxBLOCK_N")
    p.add_argument("--warps", type=int, default=8)
    p.add_argument("--stages", type=int, default=3)
    p.add_argument("--qk-ahead", action="store_true", help="FlashConfig.qk_ahead")
    p.add_argument("--max-regs", type=int, default=None, help="FlashConfig.max_regs")
    p.add_argument("--no-mask", action="store_true", help="the non-causal kernel")
    p.add_argument("--gluon", action="store_true", help="flash_attention_sm90 (block_m 128; --stages its buffers)")
    p.add_argument("--pingpong", action="store_true", help="with --gluon: the consumers take turns (FlashConfig)")
    args = p.parse_args()
    bm, bn = (int(x) for x in args.block.split("x"))
    if args.gluon:
        kernel = compile_gluon(bn, args.stages, not args.no_mask, args.pingpong)
        what = f"Gluon 128x{bn}, 3 warpgroups, {args.stages} K/V buffers{', ping-pong' if args.pingpong else ''}"
    else:
        kernel = compile_kernel(bm, bn, args.warps, args.stages, not args.no_mask, args.qk_ahead, args.max_regs)
        what = (f"{args.block}, {args.warps} warps, {args.stages} stages"
                f"{', scores a block ahead' if args.qk_ahead else ''}"
                f"{f', max {args.max_regs} registers' if args.max_regs else ''}")
    usage, sass = disassemble(kernel.asm["cubin"])
    print(f"triton {triton.__version__}, sm_90: {what}; {usage}; shared memory {kernel.metadata.shared:,} B; "
          f"{len(_LOCAL.findall(sass))} local-memory loads and stores")
    for note in ptxas_notes(kernel.asm["ptx"], args.max_regs):
        print(f"ptxas: {note}")
    found = loops(sass)
    if args.gluon:  # the consumers' loops: the shortest that issue both products, none overlapping another
        kept: list = []
        for body in sorted(found, key=len):
            if (sum(op.startswith("HGMMA") for _, op, _ in body) == 128 // 16 + bn // 16  # Q·Kᵀ, P·V k-steps
                    and all(body[-1][0] < k[0][0] or body[0][0] > k[-1][0] for k in kept)):
                kept.append(body)
        found = sorted(kept, key=lambda b: b[0][0])
    for i, body in enumerate(found):
        counts = Counter(op for _, op, _ in body)
        print(f"\nloop {i + 1}: {len(body)} instructions, {body[0][0]:#x}-{body[-1][0]:#x}")
        print("  counts: " + ", ".join(f"{op} {n}" for op, n in counts.most_common(12)))
        print("  order:  " + " → ".join(segments(body)))


if __name__ == "__main__":
    main()
