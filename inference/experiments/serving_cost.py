"""Lesson 5: from measured tokens per second to dollars, the arithmetic behind API prices.

A machine rented at P dollars per hour that produces R output tokens per second costs

    P / (R × 3600) × 1,000,000      dollars per million output tokens.

Input (prompt) tokens are priced the same way from the measured prefill rate, which is much
higher: that is why APIs charge less for input than for output. One conversation of
`prompt_tokens` in and `output_tokens` out occupies the machine for

    prompt_tokens / prefill rate + output_tokens / decode rate   seconds (its share of a batch)

so its cost is that many seconds of the hourly price. Batching raises the decode rate, so the
same hardware serves more conversations per hour and each one costs less.

What this leaves out: idle time between requests (a real server is not 100% busy), the
memory that limits how large a batch can grow, and the provider's margin.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import LIMITS
from .batch_sweep import BatchPoint


@dataclass(frozen=True)
class CostPoint:
    batch: int
    output_tokens_per_s: float  # measured decode throughput, all requests together
    input_tokens_per_s: float  # measured prefill throughput
    usd_per_million_output: float
    usd_per_million_input: float
    seconds_per_conversation: float  # machine time one conversation uses, at this batch
    usd_per_conversation: float
    conversations_per_hour: float


def usd_per_million(price_per_hour: float, tokens_per_s: float) -> float:
    """Dollars per million tokens at this hourly price and rate."""
    return price_per_hour / (tokens_per_s * 3600) * 1e6 if tokens_per_s > 0 else float("inf")


def serving_costs(points: tuple[BatchPoint, ...] | list[BatchPoint], price_per_hour: float,
                  prompt_tokens: int = 200, output_tokens: int = 300) -> list[CostPoint]:
    """One CostPoint per measured batch size."""
    LIMITS.price_per_hour.check("Price per hour ($)", price_per_hour)
    LIMITS.conversation_prompt_tokens.check("Prompt tokens per conversation", prompt_tokens)
    LIMITS.conversation_output_tokens.check("Output tokens per conversation", output_tokens)
    costs = []
    for p in points:
        out_rate, in_rate = p.tokens_per_s, p.prefill_tokens_per_s
        seconds = prompt_tokens / in_rate + output_tokens / out_rate
        costs.append(CostPoint(
            batch=p.batch, output_tokens_per_s=out_rate, input_tokens_per_s=in_rate,
            usd_per_million_output=usd_per_million(price_per_hour, out_rate),
            usd_per_million_input=usd_per_million(price_per_hour, in_rate),
            seconds_per_conversation=seconds,
            usd_per_conversation=price_per_hour * seconds / 3600,
            conversations_per_hour=3600 / seconds))
    return costs
