"""Groups past the scale-up domain (engine/parallel/network.py): each GPU's collective bytes split between the
interconnect and the scale-out network by the two-level algorithms, the time of each derived by hand at the GPU
file's figures, groups within the domain unchanged, and the parts that cannot price a crossing refusing it.

The figures (hardware/h100-sxm.yaml): NVLink 900 GB/s both ways, 450 a direction, 10 µs a collective; the domain
8 GPUs; InfiniBand NDR 400 Gb/s a GPU = 50 GB/s a direction, 5 µs a network step. B200: NVLink 1,800 GB/s (900 a
direction), the same 8-GPU domain and NDR port.
"""

from __future__ import annotations

import json
import math

import pytest

from helpers import assert_one_line_error, cli
from rooflinectl.engine.parallel import Layout
from rooflinectl.engine.parallel.network import Fabric
from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.scenario import resolve_workload

NVLINK, NDR = 450e9, 50e9  # bytes/s a direction, H100 SXM
NVLINK_LAT, NDR_STEP = 10e-6, 5e-6


def _decode(model: str = "llama-3-70b", batch: int = 32):
    return resolve_workload("decode", model=model, batch=batch, context=4096)


def test_all_reduce_over_two_hgx_h100_nodes_by_hand():
    """TP 16 = 2 domains of 8. Llama-3-70B decode, B 32: S = 32 × 8,192 × 2 B = 524,288 B. Reduce-scatter and
    all-gather within the node send 2·7/8·S = 917,504 B over NVLink; the ring all-reduce of the 1/8 shard across
    the 2 nodes sends 2·(1/2)·S/8 = 65,536 B over the NIC in 2 steps; together 2·15/16·S = 983,040, the flat
    ring's bytes. NVLink 917,504 / 450e9 = 2.039 µs against the NIC's 65,536 / 50e9 = 1.311 µs: NVLink binds,
    and the time is 10 µs + 2 × 5 µs + 2.039 µs."""
    a = analyze(_decode(), load_gpu("h100"), layout=Layout(tp=16))
    p = a.placement("attn_all_reduce")
    S = 32 * 8192 * 2
    assert (p.op.bytes, p.op.network_bytes, p.op.network_steps) == (983_040, 65_536, 2)
    assert p.op.bytes == 2 * 15 * S // 16 and p.op.network_bytes == 2 * 1 * S // 16
    nvlink, nic = 917_504 / NVLINK, 65_536 / NDR
    assert p.bound == "interconnect"
    assert math.isclose(p.time_s, NVLINK_LAT + 2 * NDR_STEP + max(nvlink, nic), rel_tol=1e-12)
    assert math.isclose(p.latency_s, 20e-6, rel_tol=1e-12)
    # the collective's bus bandwidth: its bytes over the binding link's time, 482 GB/s, above NVLink's 450 since
    # 1/15 of the bytes cross the NIC at the same time
    assert math.isclose(p.bandwidth, 983_040 / nvlink, rel_tol=1e-12) and round(p.bandwidth / 1e9) == 482
    # within one node (TP 8) nothing crosses: 2·7/8 of the same S, all over NVLink, as the model always priced it
    p8 = analyze(_decode(), load_gpu("h100"), layout=Layout(tp=8)).placement("attn_all_reduce")
    assert (p8.op.network_bytes, p8.op.network_steps, p8.bound) == (0, 0, "interconnect")
    assert math.isclose(p8.time_s, NVLINK_LAT + 917_504 / NVLINK, rel_tol=1e-12)


def test_on_b200_the_nic_binds():
    """B200's NVLink moves 900 GB/s a direction: the 917,504 NVLink bytes take 1.019 µs, the 65,536 over the NIC
    1.311 µs: the network binds."""
    p = analyze(_decode(), load_gpu("b200"), layout=Layout(tp=16)).placement("mlp_all_reduce")
    assert p.bound == "network"
    assert math.isclose(p.time_s, 10e-6 + 2 * 5e-6 + 65_536 / 50e9, rel_tol=1e-12)


def test_logits_all_gather_over_two_nodes():
    """The logits all-gather of B × V' = 32 × 128,256 × 2 B = 8,208,384 B (V' = V, 16 divides it): (g−1)/g of it
    a GPU = 7,695,360; across the 2 nodes (n−1)·T/g = 513,024 of them over the NIC, in one step (10.3 µs), the
    other 7,182,336 over NVLink (16.0 µs), which binds."""
    p = analyze(_decode(), load_gpu("h100"), layout=Layout(tp=16)).placement("logits_all_gather")
    T = 32 * 128_256 * 2
    assert (p.op.bytes, p.op.network_bytes, p.op.network_steps) == (15 * T // 16, T // 16, 1)
    nvlink, nic = (15 * T // 16 - T // 16) / NVLINK, (T // 16) / NDR
    assert nvlink > nic and p.bound == "interconnect"
    assert math.isclose(p.time_s, NVLINK_LAT + NDR_STEP + nvlink, rel_tol=1e-12)


def test_all_to_all_over_two_nodes_by_hand():
    """EP 16 on H200 (domain 8): DeepSeek-V3 decode, B 32: each GPU serves ⌈32/16⌉ = 2 sequences, 2 tokens × top-8
    copies of H 7,168 × 2 B = 229,376 B of pairs; it sends 15/16 of them (215,040 B), the 8 of 16 peers in the
    other node getting 8/16 = 114,688 B over the NIC, the 7 in its own node 100,352 B over NVLink. The NIC binds:
    10 µs + one 5 µs step + 114,688 / 50e9."""
    a = analyze(_decode("deepseek-v3"), load_gpu("h200"), layout=Layout(ep=16))
    p = a.placement("dispatch_all_to_all")
    pairs = 2 * 8 * 7168 * 2
    assert (p.op.bytes, p.op.network_bytes, p.op.network_steps) == (pairs * 15 // 16, pairs * 8 // 16, 1)
    assert p.op.bytes - p.op.network_bytes == pairs * 7 // 16
    assert p.bound == "network" and p.op.count == 58  # one each way per MoE layer (61 − 3 dense)
    assert math.isclose(p.time_s, NVLINK_LAT + NDR_STEP + 114_688 / NDR, rel_tol=1e-12)


@pytest.mark.parametrize(("tp", "pp", "within", "across"), [(8, 2, 0, 1), (4, 4, 2, 1), (2, 4, 3, 0), (16, 2, 0, 1)])
def test_pp_sends_across_nodes(tp, pp, within, across):
    """Stages of t GPUs pack ⌊8/t⌋ to a node: TP 8 × PP 2, one send and it crosses; TP 4 × PP 4, two stages a node,
    the middle of the 3 sends crosses; TP 2 × PP 4 fits one node; TP 16 × PP 2, stages of two nodes each. A send
    across moves N × H × 2 = 32 × 8,192 × 2 B over the NIC alone: 10 µs + 5 µs + 524,288 / 50e9."""
    a = analyze(_decode(), load_gpu("h100"), layout=Layout(tp=tp, pp=pp))
    names = {p.name: p for p in a.placements if p.name.startswith("pp_send")}
    assert {n: p.op.count for n, p in names.items()} == {
        **({"pp_send": within} if within else {}), **({"pp_send_network": across} if across else {})}
    x = 32 * 8192 * 2
    if across:
        p = names["pp_send_network"]
        assert (p.op.bytes, p.op.network_bytes, p.bound) == (x, x, "network")
        assert math.isclose(p.time_s, NVLINK_LAT + NDR_STEP + x / NDR, rel_tol=1e-12)
    if within:
        p = names["pp_send"]
        assert (p.op.network_bytes, p.bound) == (0, "interconnect")
        assert math.isclose(p.time_s, NVLINK_LAT + x / NVLINK, rel_tol=1e-12)


def test_totals_count_every_link_byte_once():
    a = analyze(_decode(), load_gpu("h100"), layout=Layout(tp=16))
    links = [p for p in a.placements if p.op.kind == "communication"]
    assert a.totals.communication_bytes == sum(p.op.bytes * p.op.count for p in links)
    assert a.totals.bytes == sum(p.op.bytes * p.op.count for p in a.placements if p.op.kind != "communication")


def test_groups_past_the_domain_are_refused_where_they_cannot_be_priced():
    """MI300X states its 8-GPU Infinity Fabric domain and no scale-out network; a group past a domain fills whole
    domains."""
    assert_one_line_error(cli("analyze", "decode", "--gpu", "mi300x", "--model", "llama-3-70b", "--tp", "16"),
                          "--tp 16", "scale_out")
    assert_one_line_error(cli("analyze", "decode", "--gpu", "mi300x", "--model", "llama-3-70b", "--tp", "8",
                              "--pp", "2"), "--pp 2", "scale_out")
    assert_one_line_error(cli("analyze", "decode", "--gpu", "mi300x", "--model", "deepseek-v3", "--ep", "16"),
                          "--ep 16", "scale_out")
    assert cli("analyze", "decode", "--gpu", "mi300x", "--model", "llama-3-70b", "--tp", "8").exit_code == 0
    h100 = Fabric.of(load_gpu("h100"))
    with pytest.raises(UserError, match="multiple of 8"):
        h100.span("h100-sxm", "--tp", 12)
    assert (h100.span("h100-sxm", "--tp", 8).domains, h100.span("h100-sxm", "--tp", 64).domains) == (1, 8)


def test_a_pcie_part_reaches_its_peers_over_pcie():
    """A PCIe card's domain is 1 (no fabric): its peers are reached over PCIe at any group size, as before."""
    a = analyze(_decode("llama-3-8b", batch=4), load_gpu("l4"), layout=Layout(tp=4))
    p = a.placement("attn_all_reduce")
    assert (p.op.network_bytes, p.bound, a.network.crosses) == (0, "interconnect", False)
    assert math.isclose(p.time_s, 20e-6 + p.op.bytes / 32e9, rel_tol=1e-12)  # L4: PCIe 4.0 x16, 32 GB/s a way


def test_output_says_where_a_group_crosses_the_domain():
    args = ("analyze", "decode", "--gpu", "h100", "--model", "llama-3-70b", "--batch", "32")
    text = cli(*args, "--tp", "16").stdout
    assert "past the scale-up domain: --tp 16 spans 2 8-GPU NVLink 4 (18 links) domains" in " ".join(text.split())
    assert "past the scale-up domain" not in cli(*args, "--tp", "8").stdout
    net = json.loads(cli(*args, "--tp", "16", "--json").stdout)["parallel"]["network"]
    assert net == {"scale_up_gpus": 8, "scale_up_link": "NVLink 4 (18 links)", "crosses_scale_up": True,
                   "groups": [{"option": "--tp", "gpus": 16, "domains": 2, "gpus_per_domain": 8}],
                   "pp_sends_across": 0,
                   "scale_out": {"name": "InfiniBand NDR (ConnectX-7), one port a GPU", "gbps": 50.0,
                                 "latency_us": 5.0}}


def test_collective_labels_in_table_json_and_csv():
    """A collective's unit is its link, its dtype the activations' it moves, its bound the binding link, and its
    bytes are link bytes: 0 in the HBM column of --json and --csv, the link's beside."""
    args = ("analyze", "decode", "--gpu", "h100", "--model", "llama-3-70b", "--batch", "32", "--tp", "16")
    ops = {o["name"]: o for o in json.loads(cli(*args, "--json").stdout)["ops"]}
    ar = ops["attn_all_reduce"]
    assert (ar["unit"], ar["dtype"], ar["bound"], ar["bytes"]) == ("link", "bf16", "interconnect", 0)
    assert (ar["link_bytes"], ar["network_bytes"]) == (983_040, 65_536)
    assert ops["logits_all_gather"]["bound"] == "interconnect"
    pp = {o["name"]: o for o in json.loads(cli(*args, "--pp", "2", "--json").stdout)["ops"]}
    assert (pp["pp_send_network"]["bound"], pp["pp_send_network"]["network_bytes"]) == ("network", 32 * 8192 * 2)
    assert "link_bytes" not in ops["q_proj"] and ops["q_proj"]["bytes"] > 0
    rows = cli(*args, "--csv").stdout.splitlines()
    header = rows[0].split(",")
    row = dict(zip(header, next(r for r in rows if r.startswith("attn_all_reduce,")).split(",")))
    assert (row["unit"], row["dtype"], row["bound"], row["bytes"], row["link_bytes"]) == (
        "link", "bf16", "interconnect", "0", "983040")
    text = cli(*args).stdout
    assert "not HBM" in " ".join(text.split())


def test_a_mesh_gives_a_small_group_its_links_between_them():
    """MI355X (hardware/mi355x.yaml): 7 xGMI links, one to each other GPU of 8, 1,075.2 GB/s both ways in all:
    537.6 GB/s one way, 76.8 a link; 10 µs a collective. Llama-3-70B prefill of 4,096 tokens: S = 4,096 × 8,192 ×
    2 = 67,108,864 bytes. TP 2 sends 2·1/2·S = S over the one link between the two GPUs: 10 µs + S / 76.8e9 =
    883.8 µs; TP 4 sends 2·3/4·S over 3 links; TP 8 sends 2·7/8·S over all 7."""
    w = resolve_workload("prefill", model="llama-3-70b", batch=1, seq_len=4096)
    mi355x = load_gpu("mi355x")
    S, link = 4096 * 8192 * 2, 537.6e9 / 7
    for tp, links in ((2, 1), (4, 3), (8, 7)):
        p = analyze(w, mi355x, layout=Layout(tp=tp)).placement("attn_all_reduce")
        assert p.op.bytes == 2 * (tp - 1) * S // tp and p.op.link_share == links / 7
        assert math.isclose(p.time_s, 10e-6 + p.op.bytes / (links * link), rel_tol=1e-12)
        assert (f"over {links} of its 7 mesh links" in p.op.computes) == (links < 7)
    assert round(analyze(w, mi355x, layout=Layout(tp=2)).placement("attn_all_reduce").time_s * 1e6, 1) == 883.8
    # PP's point-to-point send between two stages runs over one link.
    send = analyze(w, mi355x, layout=Layout(pp=2)).placement("pp_send")
    assert send.op.link_share == 1 / 7
    assert math.isclose(send.time_s, 10e-6 + S / link, rel_tol=1e-12)
    # NVSwitch (H100): any group at the whole 450 GB/s one way.
    h = analyze(w, load_gpu("h100"), layout=Layout(tp=2)).placement("attn_all_reduce")
    assert h.op.link_share == 1 and math.isclose(h.time_s, NVLINK_LAT + S / NVLINK, rel_tol=1e-12)
