"""Fuzz ``analyze generate`` and ``compare``: sizes, reserves and targets as text, GPUs and models by id and
nonsense. Issue 18's property (``fuzz_support.check``: a result, or one line and exit 2), and a result against its
own arithmetic: end-to-end = TTFT + decode, the memory parts add up and fit, the batch is at most the largest."""

from __future__ import annotations

from fuzz_support import check, close, fuzz_settings, run
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_commands import DTYPES, GPU_NAMES, MODEL_NAMES, ODD_TEXT, mostly

# Request sizes: mostly small enough to run (a prompt of tens of thousands is refused by the position limits).
TOKENS = mostly(st.one_of(st.integers(1, 4096).map(str), st.integers(1, 10**5).map(str)),
                st.sampled_from(["0", "-1", "9" * 30, "1e3", "8.0", "٣", "1,8", *ODD_TEXT]))
BATCH = mostly(st.integers(1, 512).map(str), st.sampled_from(["0", "-3", "2147483648", "1,8", *ODD_TEXT]))
RESERVE = mostly(st.sampled_from(["0", "1", "2.5", "8", "70"]),
                 st.sampled_from(["-1", "nan", "inf", "1e400", "200", "", "x"]))
TPOT = mostly(st.sampled_from(["5", "20", "50", "0.5"]), st.sampled_from(["0", "-20", "nan", "inf", "x"]))


@st.composite
def request_options(draw) -> list[str]:
    args: list[str] = []
    for flag, values in (("--gpu", GPU_NAMES), ("--model", MODEL_NAMES), ("--prompt", TOKENS), ("--output", TOKENS),
                         ("--dtype", DTYPES), ("--reserve-gib", RESERVE)):
        if draw(st.integers(0, 2)) == 0:
            args += [flag, draw(values)]
    return args


@fuzz_settings(40)
@given(request_options(), BATCH)
def test_generate(args, batch):
    r = run("analyze", "generate", *args, "--batch", batch, "--json")
    data = check(r, json_out=True)
    if data is None:
        return
    lat, mem = data["latency"], data["memory"]
    assert close(lat["e2e_s"], lat["ttft_s"] + lat["decode_s"]), r.describe()
    parts = mem["weight_bytes"] + mem["kv_cache_bytes"] + mem["activation_bytes"] + mem["reserve_bytes"]
    assert abs(parts - mem["total_bytes"]) <= 4 and mem["total_bytes"] <= mem["capacity_bytes"], r.describe()
    assert data["request"]["batch"] <= mem["largest_batch"], r.describe()
    assert data["decode_steps"]["steps"] == data["request"]["output"] - 1, r.describe()


@fuzz_settings(20)
@given(request_options(), st.one_of(st.none(), TPOT), st.lists(GPU_NAMES, min_size=1, max_size=3))
def test_compare(args, tpot, gpus):
    extra = [a for g in gpus for a in ("--gpu", g)] + (["--tpot-ms", tpot] if tpot is not None else [])
    r = run("compare", *args, *extra, "--json")
    data = check(r, json_out=True)
    if data is None:
        return
    for row in data["gpus"]:
        if row["batch"] is not None:
            assert 1 <= row["batch"] <= row["largest_batch"], r.describe()
            if tpot is not None and row["tpot_s"] is not None:
                assert row["tpot_s"] <= float(tpot) / 1e3, r.describe()
