"""Lesson 5: from measured tokens per second to dollars, the arithmetic behind API prices.

A machine rented at P dollars per hour that produces R output tokens per second costs

    P / (R × 3600) × 1,000,000      dollars per million output tokens.

Input (prompt) tokens are priced the same way from the measured prefill rate, which is much
higher: that is why APIs charge less for input than for output. One conversation of
`prompt_tokens` in and `output_tokens` out occupies the machine for

    prompt_tokens / prefill rate + output_tokens / decode rate   seconds (its share of a batch)

so its cost is that many seconds of the hourly price. Batching raises the decode rate, so the
same hardware serves more conversations per hour and each one costs less.

The sweep decodes with a short context (its prompt and a few tokens), but a conversation's
later tokens read a longer KV cache every step. Given the cache's bytes per token, the decode
rate is carried to the conversation's mean context (prompt + half the answer) the way a
memory-bound step scales, by the bytes it reads (theoretical, from the measured step):

    step at context C = measured step × (weights + B × kv_per_token × C)
                                      ÷ (weights + B × kv_per_token × C_measured)

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
    output_tokens_per_s: float  # decode throughput, all requests together, at `context_tokens`
    input_tokens_per_s: float  # measured prefill throughput
    usd_per_million_output: float
    usd_per_million_input: float
    seconds_per_conversation: float  # machine time one conversation uses, at this batch
    usd_per_conversation: float
    conversations_per_hour: float
    measured_output_tokens_per_s: float = 0.0  # as the sweep measured it (its short context)
    context_tokens: float = 0.0  # mean context the rate above is for (0: the sweep's own)


def usd_per_million(price_per_hour: float, tokens_per_s: float) -> float:
    """Dollars per million tokens at this hourly price and rate."""
    return price_per_hour / (tokens_per_s * 3600) * 1e6 if tokens_per_s > 0 else float("inf")


def rate_at_context(p: BatchPoint, kv_bytes_per_token: int, context: float) -> float:
    """The measured decode rate carried to `context` tokens per row (theoretical: the step's
    time scaled by the bytes it reads, weights plus every row's cache)."""
    per_row = p.batch * kv_bytes_per_token
    scale = ((p.weight_bytes + per_row * context)
             / (p.weight_bytes + per_row * p.mean_context))
    return p.tokens_per_s / scale


def serving_costs(points: tuple[BatchPoint, ...] | list[BatchPoint], price_per_hour: float,
                  prompt_tokens: int = 200, output_tokens: int = 300,
                  kv_bytes_per_token: int | None = None) -> list[CostPoint]:
    """One CostPoint per measured batch size; with `kv_bytes_per_token`, the decode rate at
    the conversation's mean context (`rate_at_context`), else as measured."""
    LIMITS.price_per_hour.check("Price per hour ($)", price_per_hour)
    LIMITS.conversation_prompt_tokens.check("Prompt tokens per conversation", prompt_tokens)
    LIMITS.conversation_output_tokens.check("Output tokens per conversation", output_tokens)
    costs = []
    context = prompt_tokens + output_tokens / 2
    for p in points:
        out_rate, in_rate = p.tokens_per_s, p.prefill_tokens_per_s
        if kv_bytes_per_token:
            out_rate = rate_at_context(p, kv_bytes_per_token, context)
        seconds = prompt_tokens / in_rate + output_tokens / out_rate
        costs.append(CostPoint(
            batch=p.batch, output_tokens_per_s=out_rate, input_tokens_per_s=in_rate,
            usd_per_million_output=usd_per_million(price_per_hour, out_rate),
            usd_per_million_input=usd_per_million(price_per_hour, in_rate),
            seconds_per_conversation=seconds,
            usd_per_conversation=price_per_hour * seconds / 3600,
            conversations_per_hour=3600 / seconds,
            measured_output_tokens_per_s=p.tokens_per_s,
            context_tokens=context if kv_bytes_per_token else 0.0))
    return costs
