"""Occupancy: hand-worked examples on Ampere (A100, 8.0) and Hopper (H100, 9.0), one per binding limit on each;
the CUDA runtime's own calculator on an H200 as ground truth; the launch anatomy; the command and its bad input.

The rules (rooflinectl/occupancy.py cites cuda_occupancy.h for each):
  warps/block        = ceil(threads / 32)
  by warps           = 64 // warps/block
  regs/warp          = round_up(regs × 32, 256)
  by registers       = (65536 / 4 sub-partitions // regs/warp) × 4 // warps/block
  smem/block         = round_up(smem + 1024 reserved, 128)
  by shared memory   = smem/SM // smem/block          (H100: 228 KiB = 233,472 B; A100: 164 KiB = 167,936 B)
  by blocks          = 32
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import cli
from rooflinectl.engine.occupancy import launch_anatomy, occupancy
from rooflinectl.engine.occupancy.limits import active_blocks
from rooflinectl.errors import UserError
from rooflinectl.specs.hardware import GPU, load_gpu
from rooflinectl.units import parse_size

ROOT = Path(__file__).parent.parent.parent
DATA = Path(__file__).parent.parent / "data"


@pytest.fixture(scope="module")
def h100() -> GPU:
    return load_gpu("h100")


@pytest.fixture(scope="module")
def a100() -> GPU:
    """The bundled A100 80GB if it is there; else H100's file with the compute capability 8.0 limits (CUDA C++
    Programming Guide, 'Technical Specifications per Compute Capability', column 8.0: 164 KB shared memory per
    SM, 163 KB per block; A100 whitepaper: 108 SMs, 192 KB L1 + shared memory per SM)."""
    try:
        return load_gpu("a100-80gb")
    except UserError:
        data = yaml.safe_load((ROOT / "hardware" / "h100-sxm.yaml").read_text())
        data.update(id="a100-built", aliases=[], compute_capability="8.0", sm_count=108)
        data["memory"].update(smem_per_sm_kib=164, l1_smem_per_sm_kib=192)
        data["limits"].update(max_smem_per_block_kib=163)
        return GPU.model_validate(data)


def test_the_limits_the_examples_rely_on(h100, a100):
    """The worked examples below use these numbers: if a GPU file changes them, this fails first."""
    for g in (h100, a100):
        lim = g.limits
        assert (lim.warp_size, lim.max_warps_per_sm, lim.max_blocks_per_sm) == (32, 64, 32)
        assert (lim.registers_per_sm, lim.max_registers_per_block, lim.register_alloc_unit) == (65536, 65536, 256)
        assert (lim.smem_alloc_unit_bytes, lim.reserved_smem_per_block_bytes) == (128, 1024)
        assert lim.max_registers_per_thread == 255 and lim.max_threads_per_block == 1024
    assert (h100.compute_capability, h100.sm_count, h100.memory.smem_per_sm_kib) == ("9.0", 132, 228)
    assert h100.limits.max_smem_per_block_kib == 227
    assert (a100.compute_capability, a100.sm_count, a100.memory.smem_per_sm_kib) == ("8.0", 108, 164)
    assert a100.limits.max_smem_per_block_kib == 163


def blocks_by(o) -> tuple:
    """(by warps, by registers, by shared memory, by blocks)."""
    return tuple(o.limit(n).blocks for n in ("warps", "registers", "shared memory", "blocks"))


# --- Hopper (H100, 9.0) ----------------------------------------------------------------------------------------


def test_h100_registers_bind(h100):
    # 256 threads = 8 warps           -> by warps 64 // 8 = 8
    # 96 × 32 = 3,072 regs/warp (a multiple of 256) -> 16,384 // 3,072 = 5 warps per sub-partition × 4 = 20 warps
    #                                 -> by registers 20 // 8 = 2
    # 0 + 1,024 reserved = 1,024 B    -> by shared memory 233,472 // 1,024 = 228;  by blocks 32
    o = occupancy(h100, 256, 96, 0)
    assert blocks_by(o) == (8, 2, 228, 32)
    assert (o.blocks_per_sm, o.warps_per_sm, o.occupancy, o.binding) == (2, 16, 0.25, ("registers",))
    assert (o.registers_per_warp, o.registers_per_block) == (3072, 8 * 3072)
    # One more block needs 24 warps = 6 per sub-partition: regs/warp <= 16,384 // 6 = 2,730 -> 2,560 -> 80 per
    # thread (81 × 32 = 2,592 rounds to 2,816, and 16,384 // 2,816 = 5 again).
    first = o.suggestions[0]
    assert (first.registers_per_thread, first.blocks_per_sm, first.occupancy) == (80, 3, 0.375)


def test_h100_shared_memory_binds(h100):
    # 128 threads = 4 warps           -> by warps 64 // 4 = 16
    # 32 × 32 = 1,024 regs/warp       -> 16,384 // 1,024 = 16 × 4 = 64 warps -> by registers 64 // 4 = 16
    # 100 KiB = 102,400 + 1,024 = 103,424 B (808 × 128) -> by shared memory 233,472 // 103,424 = 2
    o = occupancy(h100, 128, 32, 100 * 1024)
    assert blocks_by(o) == (16, 16, 2, 32)
    assert (o.blocks_per_sm, o.warps_per_sm, o.occupancy, o.binding) == (2, 8, 0.125, ("shared memory",))
    assert o.smem_allocated_per_block_bytes == 103424
    # Three blocks: 233,472 // 3 = 77,824 B (608 × 128) - 1,024 reserved = 76,800 B = 75 KiB.
    smem = o.suggestions[0]
    assert (smem.smem_per_block_bytes, smem.blocks_per_sm, smem.occupancy) == (76800, 3, 0.1875)
    assert occupancy(h100, 128, 32, 76800).blocks_per_sm == 3
    assert occupancy(h100, 128, 32, 76801).blocks_per_sm == 2  # one byte more rounds up to 77,952 B
    # Or blocks of 1,024 threads with the same 100 KiB: 2 blocks × 32 warps = 64 warps.
    assert (o.suggestions[1].threads_per_block, o.suggestions[1].occupancy) == (1024, 1.0)


def test_h100_warps_bind(h100):
    # 768 threads = 24 warps          -> by warps 64 // 24 = 2 (48 of 64 warp slots)
    # 16 × 32 = 512 regs/warp         -> 16,384 // 512 = 32 × 4 = 128 warps -> by registers 128 // 24 = 5
    o = occupancy(h100, 768, 16, 0)
    assert blocks_by(o) == (2, 5, 228, 32)
    assert (o.blocks_per_sm, o.warps_per_sm, o.occupancy, o.binding) == (2, 48, 0.75, ("warps",))
    # A block size that divides 64 warps fills the SM; 512 and 1,024 are equally near 768, the larger is chosen.
    assert [(s.threads_per_block, s.occupancy) for s in o.suggestions] == [(1024, 1.0)]


def test_h100_blocks_bind(h100):
    # 32 threads = 1 warp             -> by warps 64
    # 32 × 32 = 1,024 regs/warp       -> 64 warps -> by registers 64;  by blocks 32 -> 32 warps of 64
    o = occupancy(h100, 32, 32, 0)
    assert blocks_by(o) == (64, 64, 228, 32)
    assert (o.blocks_per_sm, o.warps_per_sm, o.occupancy, o.binding) == (32, 32, 0.5, ("blocks",))
    # Blocks of 64 threads: 32 blocks × 2 warps = 64 warps.
    assert [(s.threads_per_block, s.blocks_per_sm, s.occupancy) for s in o.suggestions] == [(64, 32, 1.0)]


def test_h100_sub_partitions_make_the_calculator_differ_from_the_naive_division(h100):
    # 96 threads = 3 warps; 40 × 32 = 1,280 regs/warp.
    # Calculator: 16,384 // 1,280 = 12 per sub-partition × 4 = 48 warps -> 48 // 3 = 16 blocks (75%).
    # Naive:      65,536 // 1,280 = 51 warps -> 17 blocks: wrong, a warp's registers come from one sub-partition.
    o = occupancy(h100, 96, 40, 0)
    assert o.limit("registers").blocks == 16
    assert (o.blocks_per_sm, o.warps_per_sm, o.occupancy) == (16, 48, 0.75)


def test_registers_round_up_to_eight_per_thread(h100):
    # 33 × 32 = 1,056 -> 1,280 regs/warp (5 × 256): a 33-register kernel is charged 40.
    assert occupancy(h100, 128, 33).registers_per_warp == occupancy(h100, 128, 40).registers_per_warp == 1280
    assert occupancy(h100, 128, 33).blocks_per_sm == 12  # 48 warps // 4
    assert occupancy(h100, 128, 32).blocks_per_sm == 16  # 1,024 regs/warp: 64 warps // 4


def test_issue_example_with_a_grid(h100):
    # 256 threads, 64 regs, 48 KiB: by registers 2,048/warp -> 8 × 4 = 32 warps // 8 = 4;
    # by shared memory 49,152 + 1,024 = 50,176 B -> 233,472 // 50,176 = 4. Both bind: 4 blocks, 32 warps, 50%.
    # Grid 1,000: 4 × 132 = 528 per wave -> ceil(1000 / 528) = 2 waves, the last 472 / 528 full.
    o = occupancy(h100, 256, 64, 48 * 1024, grid=1000)
    assert blocks_by(o) == (8, 4, 4, 32)
    assert (o.blocks_per_sm, o.occupancy, o.binding) == (4, 0.5, ("registers", "shared memory"))
    assert (o.blocks_per_wave, o.waves) == (528, 2)
    assert o.last_wave_fill == pytest.approx(472 / 528)
    # Both must give: 5 blocks = 40 warps = 10 per sub-partition -> regs/warp <= 1,638 -> 1,536 -> 48 regs;
    # 233,472 // 5 = 46,694 -> 46,592 (364 × 128) - 1,024 = 45,568 B = 44.5 KiB.
    both = o.suggestions[0]
    assert (both.registers_per_thread, both.smem_per_block_bytes, both.blocks_per_sm) == (48, 45568, 5)
    assert occupancy(h100, 256, 48, 45568).blocks_per_sm == 5


def test_full_occupancy_needs_no_suggestion(h100):
    # 256 threads, 32 regs: by warps 8, by registers 64 // 8 = 8: 8 × 8 = 64 warps.
    o = occupancy(h100, 256, 32, 0)
    assert (o.occupancy, o.binding, o.suggestions) == (1.0, ("warps", "registers"), ())


# --- Ampere (A100, 8.0) ----------------------------------------------------------------------------------------


def test_a100_registers_bind(a100):
    # 256 threads = 8 warps -> by warps 8
    # 128 × 32 = 4,096 regs/warp -> 16,384 // 4,096 = 4 × 4 = 16 warps -> by registers 16 // 8 = 2
    # 16 KiB + 1 KiB = 17,408 B (136 × 128) -> by shared memory 167,936 // 17,408 = 9
    o = occupancy(a100, 256, 128, 16 * 1024)
    assert blocks_by(o) == (8, 2, 9, 32)
    assert (o.blocks_per_sm, o.warps_per_sm, o.occupancy, o.binding) == (2, 16, 0.25, ("registers",))


def test_a100_shared_memory_binds_where_h100_has_room(a100, h100):
    # 256 threads, 32 regs: by warps 8, by registers 64 // 8 = 8
    # 48 KiB + 1 KiB = 50,176 B -> A100: 167,936 // 50,176 = 3 (37.5%); H100: 233,472 // 50,176 = 4 (50%)
    o = occupancy(a100, 256, 32, 48 * 1024, grid=400)
    assert blocks_by(o) == (8, 8, 3, 32)
    assert (o.blocks_per_sm, o.warps_per_sm, o.occupancy, o.binding) == (3, 24, 0.375, ("shared memory",))
    assert occupancy(h100, 256, 32, 48 * 1024).blocks_per_sm == 4
    # Grid 400: 3 × 108 = 324 per wave -> 2 waves, the last 76 / 324 full.
    assert (o.blocks_per_wave, o.waves) == (324, 2)
    assert o.last_wave_fill == pytest.approx(76 / 324)
    # Four blocks: 167,936 // 4 = 41,984 B (328 × 128) - 1,024 = 40,960 B = 40 KiB.
    assert o.suggestions[0].smem_per_block_bytes == 40 * 1024


def test_a100_warps_bind(a100):
    # 640 threads = 20 warps -> by warps 64 // 20 = 3 (60 warps)
    # 24 × 32 = 768 regs/warp -> 16,384 // 768 = 21 × 4 = 84 warps -> by registers 84 // 20 = 4
    o = occupancy(a100, 640, 24, 0)
    assert blocks_by(o) == (3, 4, 164, 32)
    assert (o.blocks_per_sm, o.warps_per_sm, o.occupancy, o.binding) == (3, 60, 60 / 64, ("warps",))


def test_a100_blocks_bind(a100):
    # 32 threads = 1 warp -> by warps 64;  16 × 32 = 512 regs/warp -> 32 × 4 = 128 warps -> by registers 128
    # 1 KiB + 1 KiB = 2,048 B -> by shared memory 167,936 // 2,048 = 82;  by blocks 32 -> 32 warps, 50%
    o = occupancy(a100, 32, 16, 1024)
    assert blocks_by(o) == (64, 128, 82, 32)
    assert (o.blocks_per_sm, o.warps_per_sm, o.occupancy, o.binding) == (32, 32, 0.5, ("blocks",))


# --- blocks that cannot launch, and bad input -----------------------------------------------------------------


def test_blocks_that_cannot_launch(h100):
    # 1,024 threads × 64 regs: 2,048 × 32 warps = 65,536, exactly the per-block limit: 1 block (50%).
    assert occupancy(h100, 1024, 64).blocks_per_sm == 1
    # 1,024 × 72: 2,304 × 32 = 73,728 > 65,536.
    with pytest.raises(UserError, match="cannot launch"):
        occupancy(h100, 1024, 72)
    # 800 × 80: 2,560 × 25 warps = 64,000 fits, but the hardware checks 2,560 × 28 (25 rounded up to the 4
    # sub-partitions) = 71,680 > 65,536 (cuda_occupancy.h, "Hardware check").
    with pytest.raises(UserError, match="hardware checks"):
        occupancy(h100, 800, 80)
    # The largest shared memory one block may have on H100: 227 KiB + 1 KiB reserved = all 228 KiB: 1 block.
    assert occupancy(h100, 128, 32, 227 * 1024).blocks_per_sm == 1


def test_the_cuda_runtime_agrees_on_every_case():
    """cudaOccupancyMaxActiveBlocksPerMultiprocessor on an H200 (compute capability 9.0, the H100's limits) for
    13 kernels pinned to 24-78 registers (__maxnreg__), 36 block sizes and 15 dynamic shared-memory sizes:
    benchmarks/occupancy_probe/probe.cu made tests/data/occupancy_driver_h200.json. Every one of the 7,020 answers,
    the 885 zeros (blocks that cannot launch) included, must be ours."""
    d = json.loads((DATA / "occupancy_driver_h200.json").read_text())
    g = load_gpu("h100")
    lim = g.limits
    # The device's properties are the H100 file's limits.
    assert (d["cc"], d["sm_count"], d["max_blocks_per_sm"]) == (g.compute_capability, g.sm_count,
                                                                lim.max_blocks_per_sm)
    assert (d["regs_per_sm"], d["regs_per_block"]) == (lim.registers_per_sm, lim.max_registers_per_block)
    assert d["smem_per_sm"] == g.memory.smem_per_sm_kib * 1024
    assert d["smem_per_block_optin"] == lim.max_smem_per_block_kib * 1024
    assert d["reserved_smem_per_block"] == lim.reserved_smem_per_block_bytes
    checked = 0
    for case in d["cases"]:
        for threads, driver in zip(d["block_sizes"], case["blocks_per_sm"]):
            assert active_blocks(g, threads, case["regs"], case["smem"] + case["static_smem"]) == driver, (case, threads)
            checked += 1
    assert checked == 7020


def test_triton_launches_on_a_gpu_agree_with_the_driver():
    """Fourteen Triton launches on an H200 (benchmarks/occupancy_probe/triton_probe.py): what the compiled kernel
    reported, and the driver's cuOccupancyMaxActiveBlocksPerMultiprocessor on the kernel's own CUfunction."""
    d = json.loads((DATA / "occupancy_triton_h200.json").read_text())
    g = load_gpu("h100")
    assert len(d["launches"]) == 14
    for launch in d["launches"]:
        a = launch_anatomy(g, launch["grid"], launch["num_warps"], launch["n_regs"], launch["n_spills"],
                           launch["shared"])
        assert a.occupancy.blocks_per_sm == launch["driver_blocks_per_sm"], launch
        assert a.metadata_complete


@pytest.mark.parametrize(
    "threads, regs, smem, fragment",
    [
        (0, 32, 0, "threads per block must be between 1 and 1024"),
        (1025, 32, 0, "got 1025"),
        (256, 256, 0, "registers per thread must be between 0 and 255"),
        (256, -1, 0, "got -1"),
        (256, 32, 227 * 1024 + 1, "227 KiB"),
    ],
)
def test_out_of_range_input_is_a_user_error(h100, threads, regs, smem, fragment):
    with pytest.raises(UserError, match=fragment):
        occupancy(h100, threads, regs, smem)


# --- the launch anatomy ---------------------------------------------------------------------------------------


def test_anatomy_of_a_compiled_launch(h100):
    # 8,192 programs × 4 warps (128 threads), 32 regs, no shared memory: 16 per SM (warps and registers bind),
    # 16 × 132 = 2,112 per wave -> 4 waves, the last (8,192 - 3 × 2,112) / 2,112 = 1,856 / 2,112 full.
    a = launch_anatomy(h100, (8192,), num_warps=4, n_regs=32, n_spills=0, shared_bytes=0)
    assert (a.programs, a.threads_per_program, a.occupancy.blocks_per_sm, a.waves) == (8192, 128, 16, 4)
    assert a.last_wave_fill == pytest.approx(1856 / 2112)
    assert a.metadata_complete and a.warnings == ()


def test_anatomy_warns_about_spills_idle_sms_and_an_empty_last_wave(h100):
    spills = launch_anatomy(h100, (8192,), 4, 255, 6, 0)
    assert any("24 bytes of local memory" in w for w in spills.warnings)  # triton's n_spills = local bytes / 4
    # 4 × 8 × 2 = 64 programs for 132 SMs: 68 sit idle.
    idle = launch_anatomy(h100, (4, 8, 2), 4, 32, 0, 0)
    assert idle.programs == 64
    assert any("68 SMs" in w and "idle" in w for w in idle.warnings)
    # 2,112 + 100 programs: 2 waves, the last 100 / 2,112 = 5% full.
    tail = launch_anatomy(h100, 2212, 4, 32, 0, 0)
    assert tail.waves == 2
    assert any("last of 2 waves is 5% full" in w for w in tail.warnings)


def test_anatomy_without_compiler_metadata_says_so(h100):
    """Under TRITON_INTERPRET=1 nothing is compiled: registers, spills and shared memory are unknown."""
    a = launch_anatomy(h100, (1024,), 4, None, None, None)
    assert not a.metadata_complete
    assert a.registers_per_thread is None and a.shared_bytes is None
    assert any("upper bound" in w for w in a.warnings)
    # Only the warps count: 64 // 4 = 16 blocks of 4 warps = 100%.
    assert (a.occupancy.blocks_per_sm, a.occupancy.occupancy) == (16, 1.0)


# --- the command ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [("48KiB", 49152), ("48K", 49152), ("48k", 49152), ("48KB", 49152), ("49152", 49152), ("1.5KiB", 1536),
     ("512B", 512), ("0", 0), ("1M", 1048576), (" 16 KiB ", 16384)],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


def assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert result.stdout == ""
    for f in fragments:
        assert f in lines[0]


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--threads", "0", "--regs", "32"], ["threads per block", "got 0"]),
        (["--threads", "2048", "--regs", "32"], ["between 1 and 1024"]),
        (["--threads", "256", "--regs", "256"], ["between 0 and 255"]),
        (["--threads", "256", "--regs", "32", "--smem", "228KiB"], ["227 KiB"]),
        (["--gpu", "a100-80gb", "--threads", "256", "--regs", "32", "--smem", "164KiB"], ["163 KiB"]),
        (["--threads", "256", "--regs", "32", "--smem", "48XB"], ["--smem", "'48XB' is not a size"]),
        (["--threads", "256", "--regs", "32", "--smem", "KiB"], ["not a size"]),
        (["--threads", "256", "--regs", "32", "--smem", "-1K"], ["not a size"]),
        (["--threads", "256", "--regs", "32", "--smem", "1.3K"], ["not a whole number of bytes"]),
        (["--threads", "256", "--regs", "32", "--grid", "0"], ["grid"]),
        # CUDA's largest grid is (2^31 − 1) × 65,535 × 65,535 = 9,223,090,559,730,712,575 blocks.
        (["--threads", "256", "--regs", "32", "--grid", "9223090559730712576"],
         ["between 1 and 9,223,090,559,730,712,575 blocks", "got 9,223,090,559,730,712,576"]),
        (["--threads", "256", "--regs", "32", "--grid", "9" * 4000], ["got a number of 4,000 digits"]),  # not echoed
        (["--threads", "9" * 4000, "--regs", "32"], ["got a number of 4,000 digits"]),
        # A 5,000-digit size made the error message itself fail (Python prints at most 4,300 digits).
        (["--threads", "256", "--regs", "32", "--smem", "9" * 5000], ["5,000 characters"]),
        (["--threads", "1024", "--regs", "72"], ["cannot launch"]),
        (["--gpu", "b300x", "--threads", "256", "--regs", "32"], ["unknown GPU"]),
    ],
)
def test_bad_input_exits_2_with_one_line(args, fragments):
    assert_one_line_error(cli("occupancy", *args), *fragments)


def test_command_json():
    result = cli("occupancy", "--gpu", "h100", "--threads", "256", "--regs", "64", "--smem", "48KiB", "--grid",
                 "1000", "--json")
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout)
    assert (d["blocks_per_sm"], d["warps_per_sm"], d["occupancy"], d["waves"]) == (4, 32, 0.5, 2)
    assert d["binding"] == ["registers", "shared memory"]
    assert d["allocated"] == {"registers_per_warp": 2048, "registers_per_block": 16384,
                              "smem_per_block_bytes": 50176}
    assert {k: v["blocks_per_sm"] for k, v in d["limits"].items()} == {
        "warps": 8, "registers": 4, "shared memory": 4, "blocks": 32}
    assert d["suggestions"][0]["registers_per_thread"] == 48


def test_command_text():
    out = " ".join(cli("occupancy", "--gpu", "h100", "--threads", "256", "--regs", "64", "--smem", "48K",
                       "--grid", "1000").stdout.split())  # as one line: rich wraps at the console's width
    assert "occupancy 50.0%, bound by registers and shared memory" in out
    assert "→ 2 waves, the last 89% full" in out
    assert "at most 48 registers per thread" in out
    assert "cuda_occupancy.h" in out


# --- issue 18: a block that never fits, absurd but schema-valid limits, and a bounded search --------------------


def _h100_with(h100: GPU, memory: dict | None = None, **limits) -> GPU:
    data = h100.model_dump()
    data["limits"].update(limits)
    data["memory"].update(memory or {})
    return GPU.model_validate(data)


def _h100_unchecked(h100: GPU, **limits) -> GPU:
    """H100 with limits a file may no longer give (the GPU spec refuses them at load): the engine is pure and
    may be handed a spec built in code, so its own guards are tested on one built without validation."""
    return h100.model_copy(update={"limits": h100.limits.model_copy(update=limits)})


def test_a_per_block_limit_the_sm_cannot_hold_is_refused_in_the_file(h100):
    """A per-block limit of the whole SM's 228 KiB plus the 1 KiB reserve (234,496 B > 233,472 B), or a block
    limit below one warp, admits a block no SM can hold: the file is refused, naming the fields."""
    with pytest.raises(ValueError, match="max_smem_per_block_kib plus reserved_smem_per_block_bytes exceeds"):
        _h100_with(h100, max_smem_per_block_kib=228)
    with pytest.raises(ValueError, match="max_threads_per_block is less than one warp"):
        _h100_with(h100, max_threads_per_block=16)
    # 227 KiB + 1 KiB = 228 KiB, exactly the SM's: allowed (H100's own file).
    assert _h100_with(h100, max_smem_per_block_kib=227).limits.max_smem_per_block_bytes == 232_448


def test_a_block_no_sm_can_hold_is_one_line_not_0_blocks(h100):
    """A spec whose per-block limit is the whole SM's 228 KiB: a block at that limit also needs the 1 KiB reserved
    share, 233,472 + 1,024 = 234,496 B, more than the SM's 233,472 B: 233,472 // 234,496 = 0 blocks. It was
    reported as '0 blocks per SM', and with --grid divided by it (ZeroDivisionError). A file may no longer say
    so (the test above); the engine still refuses such a block in one line."""
    g = _h100_unchecked(h100, max_smem_per_block_kib=228)
    for grid in (None, 1000):
        with pytest.raises(UserError) as err:
            occupancy(g, 128, 32, 228 * 1024, grid=grid)
        message = str(err.value)
        assert message.startswith("a block of 128 threads, 32 registers per thread and 233,472 B of shared "
                                  "memory never fits on one h100-sxm SM: shared memory allows 0 (")
        assert "233,472 B/SM ÷ 234,496 B" in message
    # 1 KiB less fits once: 232,448 + 1,024 = 233,472 B, exactly the SM's.
    assert occupancy(g, 128, 32, 227 * 1024, grid=1000).blocks_per_sm == 1


def test_the_issues_small_register_file_with_a_grid(h100):
    """registers_per_sm 1024 (and so max_registers_per_block at most 1024) with --grid was a ZeroDivisionError.
    32 threads × 8 registers: 8 × 32 = 256 per warp; the launch check charges 256 × 4 sub-partitions = 1,024 ≤
    1,024; 1,024 / 4 = 256 per sub-partition ÷ 256 = 1 warp × 4 = 4 warps ÷ 1 per block = 4 blocks (warps
    64 // 1 = 64, shared memory 233,472 // 1,024 = 228, blocks 32). Grid 1000: 4 × 132 = 528 per wave, 2 waves,
    the last (1000 − 528) / 528 = 89.4% full."""
    g = _h100_with(h100, registers_per_sm=1024, max_registers_per_block=1024)
    o = occupancy(g, 32, 8, 0, grid=1000)
    assert blocks_by(o) == (64, 4, 228, 32)
    assert (o.blocks_per_sm, o.blocks_per_wave, o.waves) == (4, 528, 2)
    assert o.last_wave_fill == pytest.approx(472 / 528)
    # 256 threads × 64 registers: 2,048 per warp × 8 warps = 16,384 > 1,024: cannot launch, one line.
    with pytest.raises(UserError, match="more than the 1,024 one block may have: it cannot launch"):
        occupancy(g, 256, 64, 0, grid=1000)


def test_the_command_says_which_limit_a_block_never_fits(h100, tmp_path):
    data = h100.model_dump(exclude_none=True)
    data.update(id="tiny-regs", aliases=[])
    data["limits"].update(registers_per_sm=1024, max_registers_per_block=1024)
    path = tmp_path / "tiny-regs.yaml"
    path.write_text(yaml.safe_dump(data))
    for args, fragments in (
        (["--threads", "256", "--regs", "64", "--grid", "1000"], ["cannot launch"]),
    ):
        assert_one_line_error(cli("occupancy", "--gpu", str(path), *args), *fragments)
    ok = json.loads(cli("occupancy", "--gpu", str(path), "--threads", "32", "--regs", "8", "--grid", "1000",
                        "--json").stdout)
    assert (ok["blocks_per_sm"], ok["waves"]) == (4, 2)


def test_a_per_block_limit_below_one_warp_gives_no_block_size_to_suggest(h100):
    """A spec built in code may allow 16 threads per block with 32-thread warps (a file may not): no multiple of the warp size fits, so there
    is no block size to suggest (the search over multiples was empty and failed an assertion). 16 threads × 32
    registers: 1 warp; 1,024 registers per warp → 16,384 // 1,024 = 16 × 4 = 64 warps; 32 blocks bind: 50%."""
    g = _h100_unchecked(h100, max_threads_per_block=16)
    o = occupancy(g, 16, 32)
    assert (blocks_by(o), o.binding, o.occupancy, o.suggestions) == ((64, 64, 228, 32), ("blocks",), 0.5, ())


def _exhaustive_block_size(gpu: GPU, threads: int, regs: int, smem: int) -> tuple[int, int]:
    """The search the bounded one replaces: every multiple of the warp size, the same key."""
    lim = gpu.limits
    best = None
    for t in range(lim.warp_size, lim.max_threads_per_block + 1, lim.warp_size):
        blocks = active_blocks(gpu, t, regs, smem)
        key = (blocks * (t // lim.warp_size) / lim.max_warps_per_sm, -abs(t - threads), t)
        if best is None or key > best[0]:
            best = (key, t, blocks)
    assert best is not None
    return best[1], best[2]


def _bounded_block_size(gpu: GPU, threads: int, regs: int, smem: int) -> tuple[int, int]:
    from rooflinectl.engine.occupancy.suggest import _block_size_candidates

    lim = gpu.limits
    best = None
    for w in _block_size_candidates(gpu, regs, smem):
        t = w * lim.warp_size
        blocks = active_blocks(gpu, t, regs, smem)
        key = (blocks * w / lim.max_warps_per_sm, -abs(t - threads), t)
        if best is None or key > best[0]:
            best = (key, t, blocks)
    assert best is not None
    return best[1], best[2]


def _odd_gpus(h100: GPU) -> list[GPU]:
    """Limits no real GPU has, chosen so that each limit, the launch check and the sub-partitions all bind
    somewhere: warps of 1 to 64 threads, register files that do not divide evenly, allocation units of 1 and 300."""
    return [
        _h100_with(h100, warp_size=1, max_threads_per_block=300, max_threads_per_sm=300, max_warps_per_sm=300,
                   registers_per_sm=6000, max_registers_per_block=5000, register_alloc_unit=1, max_blocks_per_sm=7),
        _h100_with(h100, warp_size=2, max_threads_per_block=250, max_threads_per_sm=260, max_warps_per_sm=130,
                   registers_per_sm=70001, max_registers_per_block=30000, register_alloc_unit=300,
                   max_blocks_per_sm=64, smem_alloc_unit_bytes=1000, reserved_smem_per_block_bytes=0),
        _h100_with(h100, warp_size=64, max_threads_per_block=1024, max_threads_per_sm=2560, max_warps_per_sm=40,
                   registers_per_sm=131072, max_registers_per_block=65536, max_blocks_per_sm=40),
    ]


def test_the_bounded_block_size_search_finds_what_trying_every_size_finds(h100, a100):
    for g in [h100, a100, *_odd_gpus(h100)]:
        lim = g.limits
        threads_set = sorted({1, lim.warp_size, lim.max_threads_per_block // 3 or 1, lim.max_threads_per_block})
        for threads in threads_set:
            for regs in (0, 1, 8, 33, 64, 96, 168, 255):
                for smem in (0, 1000, 20 * 1024, 100 * 1024):
                    expected = _exhaustive_block_size(g, threads, regs, smem)
                    assert _bounded_block_size(g, threads, regs, smem) == expected, (g.limits, threads, regs, smem)


def test_the_register_bisection_finds_what_counting_down_finds(h100, a100):
    from rooflinectl.engine.occupancy.limits import regs_allow
    from rooflinectl.engine.occupancy.suggest import _most_registers

    for g in [h100, a100, *_odd_gpus(h100)]:
        for threads in (1, g.limits.warp_size, g.limits.max_threads_per_block):
            for regs in (2, 9, 40, 64, 128, 255):
                target = regs_allow(g, threads, regs) + 1
                linear = next((n for n in range(regs - 1, 0, -1) if regs_allow(g, threads, n) >= target), 0)
                assert _most_registers(g, threads, regs, target) == linear, (g.limits, threads, regs)


def test_the_suggestions_stay_bounded_on_an_absurd_spec(h100, monkeypatch):
    """Warp size 1 and 2^31 − 1 threads per block: the old search tried every block size (25 s at 2^20 threads,
    hours at 2^31). By hand: registers of 1 per thread, allocation unit 1: a warp takes 1 register;
    (2^31 − 1) // 4 = 536,870,911 per sub-partition: 2,147,483,644 warps fit, K = min(that, 2^31 − 1 warps) =
    2,147,483,644; shared memory 233,472 // 1,024 = 228 blocks = C. A block of 715,827,882 threads gets
    min(2,147,483,647 // 715,827,882 = 3, K // 715,827,882 = 2, 228) = 2 blocks. The most occupancy, K warps,
    needs a divisor w of K with K // w ≤ 228: K = 4 · (2^29 − 1) = 4 · 233 · 1103 · 2089, so w is K, K/2 or K/4;
    nearest the block asked for is K/4 = 536,870,911 threads, 4 blocks."""
    import rooflinectl.engine.occupancy.limits as limits_mod

    n = 2**31 - 1
    g = _h100_with(h100, warp_size=1, max_threads_per_block=n, max_threads_per_sm=n, max_warps_per_sm=n,
                   registers_per_sm=n, max_registers_per_block=n, register_alloc_unit=1)
    calls = 0
    counts = limits_mod.counts

    def counting(*args):
        nonlocal calls
        calls += 1
        return counts(*args)

    monkeypatch.setattr(limits_mod, "counts", counting)
    o = occupancy(g, 715_827_882, 1, 0, grid=1000)
    assert o.blocks_per_sm == 2
    (s,) = o.suggestions
    assert (s.threads_per_block, s.blocks_per_sm) == (536_870_911, 4)
    # What it cost: at most C + 2 candidate sizes (the run ends where K // w < C, plus two), and a bisection of
    # 31 steps for the last launchable size; every try is one counts call.
    assert calls <= 1 + 31 + 1 + (228 + 2)
