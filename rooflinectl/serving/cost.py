"""What a simulated run costs: dollars per million tokens at a GPU-hour price, and joules per output token at the
board's power.

Dollars: the run's GPUs are paid for its whole duration, idle or not: price × GPUs × duration / 3,600 s. That cost
is split between the prompt (input) and the output tokens by GPU time: the time of the steps that carry prompt
tokens goes to the input tokens, the time of the steps that only decode to the output tokens, each then divided by
its tokens (and the idle time in the same shares). Rule chosen over one price for every token because prefill and
decode use the GPU so differently (a prompt token costs a share of a compute-bound step, an output token a share of
a step bound by the weights' bytes), which is why providers price them apart; chosen over a per-token split of
each mixed step because it needs nothing the run does not keep. A mixed step (chunked prefill beside decodes)
counts as prompt time, so at loads where most steps are mixed, the input price is an upper bound and the output
price a lower one; ``all_on_output`` puts the whole cost on the output tokens, the other bound.

Energy: the board's power (``specs.hardware.Power``, its datasheet's maximum) × GPUs × the run's busy time (the
sum of its steps' times) / output tokens: an upper bound, since a GPU seldom draws its full board power, and one
that leaves out idle power and the host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UserError

# The highest GPU-hour price taken, dollars: above any rental (an H100 rents for a few dollars an hour) by five
# orders of magnitude, and low enough that a run's cost prints as a number of sensible length, never as pages of
# digits or an overflow.
MAX_PRICE_PER_GPU_HOUR = 1e6
# The lowest, a hundredth of a cent an hour: below any rental by four orders of magnitude, and high enough that a
# cost a million tokens prints in a few digits (1e-300 printed 300 of them).
MIN_PRICE_PER_GPU_HOUR = 1e-4


def check_price(price_per_gpu_hour: float | None) -> None:
    """A GPU-hour price, where one is given, is MIN_PRICE_PER_GPU_HOUR to MAX_PRICE_PER_GPU_HOUR dollars."""
    p = price_per_gpu_hour
    if p is not None and not (math.isfinite(p) and MIN_PRICE_PER_GPU_HOUR <= p <= MAX_PRICE_PER_GPU_HOUR):
        raise UserError(f"--price-per-gpu-hour {p}: give a price in dollars from {MIN_PRICE_PER_GPU_HOUR:g} to "
                        f"{MAX_PRICE_PER_GPU_HOUR:,.0f}")


@dataclass(frozen=True)
class Costs:
    """Dollars per million input and output tokens (None without a price) and joules per output token (None
    without the board's power)."""

    price_per_gpu_hour: float | None
    usd_per_million_input: float | None
    usd_per_million_output: float | None
    usd_per_million_output_all_on_output: float | None
    board_w: float | None
    joules_per_output_token: float | None
    input_tokens: int
    busy_s: float


def run_costs(duration_s: float, busy_s: float, prefill_time_s: float, input_tokens: int, output_tokens: int,
              gpus: int, price_per_gpu_hour: float | None, board_w: float | None) -> Costs:
    """A run's costs (the module's docstring): its duration, busy time and time in steps that carry prompt tokens,
    seconds; its prompt and output tokens; the GPUs it ran on."""
    return split_costs(duration_s, gpus, prefill_time_s / busy_s if busy_s else 0.0, busy_s * gpus, input_tokens,
                       output_tokens, price_per_gpu_hour, board_w)


def split_costs(duration_s: float, gpus: int, input_share: float, busy_gpu_s: float, input_tokens: int,
                output_tokens: int, price_per_gpu_hour: float | None, board_w: float | None) -> Costs:
    """Costs of ``gpus`` GPUs paid for ``duration_s``, ``input_share`` of the cost on the input tokens, busy for
    ``busy_gpu_s`` GPU-seconds in all. Several replicas: their steps' time summed (aggregated, the share being their
    prompt-carrying time's); disaggregated, the prefill GPUs' cost goes to the input tokens (share = prefill GPUs
    / GPUs) and the decode GPUs' to the output tokens, each GPU's busy time its replica's."""
    check_price(price_per_gpu_hour)
    usd_in = usd_out = usd_all = None
    if price_per_gpu_hour is not None:
        total = price_per_gpu_hour * gpus * duration_s / 3600
        usd_in = total * input_share / input_tokens * 1e6
        usd_out = total * (1 - input_share) / output_tokens * 1e6
        usd_all = total / output_tokens * 1e6
    joules = None if board_w is None else board_w * busy_gpu_s / output_tokens
    return Costs(price_per_gpu_hour, usd_in, usd_out, usd_all, board_w, joules, input_tokens, busy_gpu_s / gpus)


@dataclass(frozen=True)
class Pricing:
    """A GPU's price and board power, for the served batches of ``compare`` and ``plot pareto``: a closed batch
    keeps its GPUs busy from its start to its last token, so per output token it costs price / 3,600 s / (output
    tokens/s per GPU) dollars, all of it on the output tokens (its prompts are paid through them, as ``serve``'s
    all-on-output figure), and board power / (output tokens/s per GPU) joules, an upper bound as in ``serve``."""

    price_per_gpu_hour: float | None
    board_w: float | None

    def __post_init__(self) -> None:
        check_price(self.price_per_gpu_hour)

    def per_output_token(self, tokens_per_s_per_gpu: float) -> tuple[float | None, float | None]:
        """(dollars per million output tokens, joules per output token) at that throughput; None where the price
        or the board power is not known."""
        usd = None if self.price_per_gpu_hour is None else self.price_per_gpu_hour / 3600 / tokens_per_s_per_gpu * 1e6
        joules = None if self.board_w is None else self.board_w / tokens_per_s_per_gpu
        return usd, joules
