"""The requests of a simulated run: their prompt and output lengths (fixed, or drawn from a distribution with a
seed), and how they arrive: a closed loop of C clients (each sends its next request when its last one finishes,
as aiperf and vLLM's benchmark_serving do), an open loop of Poisson arrivals at R requests/s, or a trace."""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, TypeVar

from ..errors import UserError
from ..files import read_text
from ..units import real_number, whole_number

T = TypeVar("T")

# The most requests one run simulates: a million output tokens of a thousand requests runs in seconds; ten
# million requests would hold gigabytes of per-token times.
MAX_REQUESTS = 1_000_000
# The longest prompt or output one request may have (the engine's position limit, 2**30).
MAX_TOKENS = 2**30
# The longest span of a trace's arrivals, seconds (about four months): a clock this far from the first arrival
# still resolves a step's microseconds (1e7 s × 2.2e-16, float64's epsilon, is 2 ns), where one of 1e300 s would
# absorb every step and print latencies of 0.
MAX_TRACE_S = 1e7


@dataclass(frozen=True)
class Request:
    """One request: it arrives at ``arrival_s`` (a closed loop's later requests: when a client's last finishes),
    with ``prompt`` tokens, and asks for ``output`` new tokens (``ignore_eos``: exactly that many). Its prompt's
    first ``prefix`` tokens are the prefix ``prefix_id`` that other requests share (None: none)."""

    id: int
    arrival_s: float
    prompt: int
    output: int
    prefix_id: int | None = None
    prefix: int = 0


@dataclass(frozen=True)
class Lengths:
    """A length: ``fixed`` tokens, or drawn ``uniform`` over [a, b] or ``normal`` (mean a, SD b, rounded, at least
    1) per request."""

    kind: Literal["fixed", "uniform", "normal"]
    a: float
    b: float = 0

    @classmethod
    def parse(cls, text: str, what: str) -> Lengths:
        """``512``, ``uniform:256-1024`` or ``normal:512,128``; anything else is a UserError naming ``what``."""
        form = f"{what} '{text}': give tokens (512), uniform:A-B (uniform:256-1024) or normal:MEAN,SD (normal:512,128)"
        kind, colon, rest = text.strip().partition(":")
        try:
            if not colon:
                n = _whole(kind)
                lengths = cls("fixed", n)
                low = n
            elif kind == "uniform":
                lo, hi = (_whole(v) for v in rest.split("-"))
                if lo > hi:
                    raise UserError(f"{what} '{text}': the lower bound is above the upper")
                lengths, low = cls("uniform", lo, hi), lo
            elif kind == "normal":
                mean, sd = (_real(v) for v in rest.split(","))
                if not (math.isfinite(mean) and math.isfinite(sd) and sd >= 0 and mean >= 1):
                    raise UserError(f"{what} '{text}': the mean must be at least 1 and the SD not negative")
                lengths, low = cls("normal", mean, sd), 1
            else:
                raise UserError(form)
        except ValueError:
            raise UserError(form) from None
        if not 1 <= low or max(lengths.a, lengths.b) > MAX_TOKENS:
            raise UserError(f"{what} '{text}': lengths are 1 to {MAX_TOKENS:,} tokens")
        return lengths

    def draw(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        return max(1, min(MAX_TOKENS, round(rng.gauss(self.a, self.b))))

    @property
    def mean(self) -> float:
        """The mean length (a normal's before rounding and clipping)."""
        return (self.a + self.b) / 2 if self.kind == "uniform" else self.a

    def text(self) -> str:
        if self.kind == "fixed":
            return f"{int(self.a):,}"
        return f"uniform {int(self.a):,}-{int(self.b):,}" if self.kind == "uniform" else \
            f"normal {self.a:g} ± {self.b:g}"


@dataclass(frozen=True)
class Load:
    """How requests arrive: ``concurrency`` clients in a closed loop, Poisson arrivals at ``rate`` requests/s, or a
    trace's own arrival times; ``requests`` holds every request with its lengths (a closed loop's arrival times
    are those of its first ``concurrency`` requests, 0; the rest arrive when a client is free)."""

    kind: Literal["concurrency", "rate", "trace"]
    requests: tuple[Request, ...]
    concurrency: int = 0
    rate: float = 0.0

    def text(self) -> str:
        if self.kind == "concurrency":
            return f"{self.concurrency:,} concurrent clients (closed loop)"
        if self.kind == "rate":
            return f"Poisson arrivals at {self.rate:g} requests/s (open loop)"
        return "a trace's arrivals"

    def opening(self) -> tuple[list[Request], Iterator[Request]]:
        """The requests known at the start, at their arrival times (a closed loop's first ``concurrency``, every
        request of an open loop or a trace), and the rest in order, each sent when a client's last one finishes."""
        queue = iter(self.requests)
        first = self.concurrency if self.kind == "concurrency" else len(self.requests)
        return [next(queue) for _ in range(min(first, len(self.requests)))], queue

    def refill(self, queue: Iterator[Request], t: float, delay_s: float = 0.0) -> Request | None:
        """A closed loop's next request from ``queue`` (``opening``'s), its client's last one having finished in
        the engine at ``t``: it arrives ``delay_s`` later (a stack's refill_latency_us). None for an open loop or a
        trace, or when no request is left."""
        if self.kind != "concurrency":
            return None
        following = next(queue, None)
        return None if following is None else replace(following, arrival_s=t + delay_s)


def with_shared_prefix(load: Load, tokens: int) -> Load:
    """``load`` with every request's first ``tokens`` prompt tokens one shared prefix (id 0; a shorter prompt is
    all prefix)."""
    if not 1 <= tokens <= MAX_TOKENS:
        raise UserError(f"--shared-prefix {tokens:,}: give 1 to {MAX_TOKENS:,} tokens")
    return replace(load, requests=tuple(replace(r, prefix_id=0, prefix=min(tokens, r.prompt)) for r in load.requests))


def _whole(text: str) -> int:
    """A whole number of ASCII digits (units.whole_number), else ValueError for the caller to word."""
    n = whole_number(text)
    if n is None:
        raise ValueError(text)
    return n


def _real(text: str) -> float:
    """A finite decimal number of ASCII digits (units.real_number), else ValueError for the caller to word."""
    x = real_number(text)
    if x is None:
        raise ValueError(text)
    return x


def _field(value: object, parse: Callable[[str], T]) -> T:
    """A trace field: a JSON number (not a boolean) or a CSV's or JSON's text, read by ``parse``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(value)
    return parse(repr(value) if isinstance(value, float) else str(value))


def _prefix(text: str, where: str) -> tuple[int | None, int]:
    """A trace's ``prefix`` field, ``ID:TOKENS`` (empty: none)."""
    if not text.strip():
        return None, 0
    try:
        pid, tokens = (_whole(v) for v in text.split(":"))
    except ValueError:
        raise UserError(f"{where}: prefix is ID:TOKENS (3:512), got '{text}'") from None
    if pid < 0 or not 1 <= tokens <= MAX_TOKENS:
        raise UserError(f"{where}: a prefix id at least 0 and 1 to {MAX_TOKENS:,} tokens")
    return pid, tokens


def _count(requests: int) -> None:
    if not 1 <= requests <= MAX_REQUESTS:
        raise UserError(f"--requests {requests:,}: give 1 to {MAX_REQUESTS:,}")


def closed_loop(concurrency: int, requests: int, prompt: Lengths, output: Lengths, seed: int = 0) -> Load:
    """``requests`` requests from ``concurrency`` clients, the first ``concurrency`` at time 0."""
    _count(requests)
    if not 1 <= concurrency <= MAX_REQUESTS:
        raise UserError(f"--concurrency {concurrency:,}: give 1 to {MAX_REQUESTS:,} clients")
    rng = random.Random(seed)
    return Load("concurrency", tuple(Request(i, 0.0, prompt.draw(rng), output.draw(rng)) for i in range(requests)),
                concurrency=concurrency)


def open_loop(rate: float, requests: int, prompt: Lengths, output: Lengths, seed: int = 0) -> Load:
    """``requests`` Poisson arrivals at ``rate`` per second: exponential gaps of mean 1/rate, the first at 0."""
    _count(requests)
    if not (math.isfinite(rate) and 1e-6 <= rate <= 1e9):
        raise UserError(f"--rate {rate}: give requests per second, 1e-6 to 1e9")
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(requests):
        out.append(Request(i, t, prompt.draw(rng), output.draw(rng)))
        t += rng.expovariate(rate)
    return Load("rate", tuple(out), rate=rate)


def read_trace(path: str) -> Load:
    """A trace file: JSON lines ``{"arrival_s": 0.5, "prompt": 512, "output": 128}`` or a CSV (a name ending in
    .csv, any case) with the header ``arrival_s,prompt,output``, each optionally with ``prefix``, ``ID:TOKENS``
    (the prompt's first TOKENS are the prefix ID that other requests share; at most the prompt); arrivals at or
    after 0, in any order (sorted here), counted from the first (Unix timestamps run as the seconds after the
    first request, so that the run's duration, and every rate and cost per second, starts with it), spanning at
    most ``MAX_TRACE_S``; a bad line is a UserError naming the file and the line."""
    text = read_text(Path(path))
    rows: list[tuple[int, dict[str, object]]] = []
    if path.lower().endswith(".csv"):
        reader = csv.DictReader(text.splitlines())
        try:
            names = reader.fieldnames
            if names is None or set(names) - {"prefix"} != {"arrival_s", "prompt", "output"} or \
                    len(set(names)) != len(names):  # a column twice: the csv module keeps its last silently
                raise UserError(f"{path}: a trace CSV has the header arrival_s,prompt,output (and prefix), each once")
            rows = [(i + 2, dict(row)) for i, row in enumerate(reader)]
        except csv.Error as err:  # a field past the csv module's 131,072 characters, a NUL
            raise UserError(f"{path}:{reader.line_num + 1}: not a trace row ({err})") from None
    else:
        for i, text_line in enumerate(text.splitlines()):
            if text_line.strip():
                try:
                    row = json.loads(text_line)
                except (ValueError, RecursionError):  # malformed; an integer of over 4,300 digits; deep nesting
                    raise UserError(f"{path}:{i + 1}: not a JSON object of a request") from None
                if not isinstance(row, dict):
                    raise UserError(f"{path}:{i + 1}: not a JSON object")
                rows.append((i + 1, row))
    requests = []
    for line, row in rows:
        if set(row) - {"prefix"} != {"arrival_s", "prompt", "output"}:
            raise UserError(f"{path}:{line}: a request has arrival_s, prompt and output (and prefix), got "
                            f"{', '.join(map(str, row))}")
        try:
            arrival = _field(row["arrival_s"], _real)
            prompt, output = _field(row["prompt"], _whole), _field(row["output"], _whole)
        except ValueError:
            raise UserError(f"{path}:{line}: arrival_s is seconds, prompt and output whole tokens") from None
        if not (math.isfinite(arrival) and arrival >= 0 and 1 <= prompt <= MAX_TOKENS and 1 <= output <= MAX_TOKENS):
            raise UserError(f"{path}:{line}: arrival_s at or after 0, prompt and output 1 to {MAX_TOKENS:,} tokens")
        given = row.get("prefix")
        if given is not None and not isinstance(given, str):  # a JSON 0 or false is no ID:TOKENS
            raise UserError(f"{path}:{line}: prefix is ID:TOKENS (3:512) in quotes, got {json.dumps(given)[:40]}")
        pid, prefix = _prefix(given or "", f"{path}:{line}")
        if prefix > prompt:
            raise UserError(f"{path}:{line}: a prefix of {prefix:,} tokens in a prompt of {prompt:,}")
        requests.append((arrival, prompt, output, pid, prefix))
    if not requests:
        raise UserError(f"{path}: the trace holds no requests")
    if len(requests) > MAX_REQUESTS:
        raise UserError(f"{path}: {len(requests):,} requests; a trace holds at most {MAX_REQUESTS:,}")
    requests.sort(key=lambda r: r[0])
    first = requests[0][0]
    if requests[-1][0] - first > MAX_TRACE_S:
        raise UserError(f"{path}: arrivals span {requests[-1][0] - first:.6g} s; a trace spans at most "
                        f"{MAX_TRACE_S:.0e} s (about four months)")
    return Load("trace", tuple(Request(i, a - first, p, o, pid, x)
                               for i, (a, p, o, pid, x) in enumerate(requests)))
