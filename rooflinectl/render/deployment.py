"""``analyze serve --replicas N`` and ``--disagg P:D``: the replicas of each role and the KV transfers, as JSON and
as lines under the serve table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..units import duration, number, plural, si

if TYPE_CHECKING:
    from ..serving.metrics import Side, Simulation, Stats


def _stats(s: Stats | None) -> dict[str, float] | None:
    return None if s is None else {"mean": s.mean, "p50": s.p50, "p90": s.p90, "p99": s.p99}


def label(r: Simulation) -> str:
    """The deployment in a few words: "2 prefill replicas of TP 2 + 6 decode replicas of TP 1 (10 GPUs)"."""
    d = r.deployment
    assert d is not None
    parts = [f"{plural(s.replicas, _role(s))} of {s.layout.label()}" for s in d.sides]
    return f"{' + '.join(parts)} ({plural(d.gpus, 'GPU')})"


def _role(s: Side) -> str:
    return "replica" if s.role == "aggregated" else f"{s.role} replica"


def deployment_json(r: Simulation) -> dict[str, Any] | None:
    """The replicas and the KV transfers; None on one engine."""
    d = r.deployment
    if d is None:
        return None
    duration_s = d.run.duration_s
    sides = [{"role": s.role, "replicas": s.replicas, "tp": s.layout.tp, "ep": s.layout.ep, "pp": s.layout.pp,
              "gpus_per_replica": s.layout.gpus, "gpus": s.gpus,
              "max_num_batched_tokens": s.config.max_num_batched_tokens, "max_num_seqs": s.config.max_num_seqs,
              "kv_blocks": s.capacity.blocks, "kv_block_bytes": s.capacity.block_bytes,
              "kv_peak_blocks": s.kv_blocks_peak, "weight_bytes": s.capacity.weight_bytes, "steps": s.steps,
              "busy_s": s.busy_s, "busy_share": s.busy_s / (s.replicas * duration_s),
              "max_tokens": s.max_tokens_in_step, "preemptions": s.preemptions, "requests": list(s.requests)}
             for s in d.sides]
    t = d.transfers
    transfer = None if t is None else {
        "mode": t.mode, "link": t.link.name, "scale_up": t.link.scale_up, "bandwidth_gbps": t.link.bandwidth_gbps,
        "latency_us": t.link.latency_us, "transfers": t.count, "kv_bytes": t.kv_bytes,
        "kv_bytes_per_request": t.kv_bytes / t.count if t.count else None, "link_bytes": t.link_bytes,
        "link_time_s": _stats(t.time), "wait_s": _stats(t.wait)}
    return {"gpus": d.gpus, "sides": sides, "kv_transfer": transfer}


def deployment_lines(r: Simulation) -> list[str]:
    """A line a role (its replicas' steps, busy share, requests and KV cache), and one for the KV transfers."""
    data = deployment_json(r)
    if data is None:
        return []
    lines = []
    for s in data["sides"]:
        name = s["role"] if s["role"] != "aggregated" else "each replica"
        lines.append(f"{name}: {s['steps']:,} steps over {plural(s['replicas'], 'replica')} "
                     f"({s['max_num_batched_tokens']:,} tokens a step), busy {s['busy_share']:.0%} of the run; "
                     f"requests {', '.join(f'{n:,}' for n in s['requests'])}; KV cache at most "
                     f"{s['kv_peak_blocks']:,} of {s['kv_blocks']:,} blocks a replica; "
                     f"{plural(s['preemptions'], 'preemption')}")
    t = data["kv_transfer"]
    if t is not None and t["transfers"]:
        wait = t["wait_s"]
        lines.append(f"KV transfer {'after the prefill' if t['mode'] == 'after' else 'overlapped with the prefill'}"
                     f" over {t['link']} ({'scale-up' if t['scale_up'] else 'scale-out'}, "
                     f"{number(t['bandwidth_gbps'])} GB/s a direction + {duration(t['latency_us'] / 1e6)}): "
                     f"{si(t['kv_bytes_per_request'], 'B')} a request (mean), "
                     f"{duration(t['link_time_s']['mean'])} on the busiest link; TTFT waits "
                     f"{duration(wait['mean'])} for it after the prefill (mean; p99 {duration(wait['p99'])})")
    return lines
