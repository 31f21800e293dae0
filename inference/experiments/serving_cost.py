"""Lesson 5: from measured tokens per second to dollars, the arithmetic behind API prices.

    $ per million tokens = price per hour ÷ (tokens/s × 3,600) × 1,000,000
    one conversation     = prompt ÷ prefill rate + output ÷ decode rate   seconds of the machine

Input is priced from the prefill rate, much higher than decode's: why APIs charge less for it.
The sweep decodes at a short context; the rate is carried to the conversation's mean context C
(an estimate on top of the measurement) by adding only what a longer context adds, whichever is
slower: the extra cache bytes at the measured bandwidth, or attention's extra FLOPs at the
measured peak:

    step at C = measured step + max(B × kv × ΔC ÷ bandwidth,  B × attn × ΔC ÷ peak)

Left out: idle time between requests, the memory that caps a batch, the provider's margin.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import LIMITS
from ..kv_cache import bytes_per_token
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
    """Dollars per million tokens at this hourly price and rate.

    >>> usd_per_million(3.6, 1000.0)
    1.0
    """
    return price_per_hour / (tokens_per_s * 3600) * 1e6 if tokens_per_s > 0 else float("inf")


def rate_at_context(p: BatchPoint, kv_bytes_per_token: int, context: float,
                    bandwidth_gbs: float, attention_flops_per_position: float = 0.0,
                    peak_gflops: float = 0.0) -> float:
    """The measured decode rate carried to `context` tokens per row (an estimate): the
    measured step plus the time of the extra cache reads (at `bandwidth_gbs`) or of the extra
    attention FLOPs (at `peak_gflops`, when given), whichever is longer.

    >>> p = BatchPoint(batch=2, prompt_tokens=10, prefill_seconds=1, step_seconds=0.1,
    ...                step_times=(0.1, 0.1), cache_bytes=0, weight_bytes=10**9)
    >>> round(rate_at_context(p, 10**6, 511, bandwidth_gbs=10), 3)  # +2 × 1 MB × 500 ÷ 10 GB/s
    10.0
    """
    extra = max(context - p.mean_context, 0.0) * p.batch  # extra positions read, all rows
    memory_s = extra * kv_bytes_per_token / (bandwidth_gbs * 1e9) if bandwidth_gbs > 0 else 0.0
    compute_s = (extra * attention_flops_per_position / (peak_gflops * 1e9)
                 if peak_gflops > 0 else 0.0)
    return p.batch / (p.step_seconds + max(memory_s, compute_s))


def attention_flops_per_position(info) -> float:
    """FLOPs one row's attention spends per cached position in one decode step (scores and
    the weighted sum: 2 × 2 × head_dim per head per layer)."""
    return 4.0 * info.layers * info.heads * info.head_dim


def serving_costs(points: tuple[BatchPoint, ...] | list[BatchPoint], price_per_hour: float,
                  prompt_tokens: int = 200, output_tokens: int = 300,
                  kv_bytes_per_token: int | None = None, bandwidth_gbs: float = 0.0,
                  attention_flops: float = 0.0, peak_gflops: float = 0.0) -> list[CostPoint]:
    """One CostPoint per measured batch size; with `kv_bytes_per_token` and the measured
    `bandwidth_gbs`, the decode rate at the conversation's mean context (`rate_at_context`),
    else as measured. Lesson 5's table and the presenter's cost screen both call this."""
    LIMITS.price_per_hour.check("Price per hour ($)", price_per_hour)
    LIMITS.conversation_prompt_tokens.check("Prompt tokens per conversation", prompt_tokens)
    LIMITS.conversation_output_tokens.check("Output tokens per conversation", output_tokens)
    costs = []
    context = prompt_tokens + output_tokens / 2
    carry = bool(kv_bytes_per_token) and bandwidth_gbs > 0
    for p in points:
        out_rate, in_rate = p.tokens_per_s, p.prefill_tokens_per_s
        if carry:
            out_rate = rate_at_context(p, kv_bytes_per_token, context, bandwidth_gbs,
                                       attention_flops, peak_gflops)
        seconds = prompt_tokens / in_rate + output_tokens / out_rate
        costs.append(CostPoint(
            batch=p.batch, output_tokens_per_s=out_rate, input_tokens_per_s=in_rate,
            usd_per_million_output=usd_per_million(price_per_hour, out_rate),
            usd_per_million_input=usd_per_million(price_per_hour, in_rate),
            seconds_per_conversation=seconds,
            usd_per_conversation=price_per_hour * seconds / 3600,
            conversations_per_hour=3600 / seconds,
            measured_output_tokens_per_s=p.tokens_per_s,
            context_tokens=context if carry else 0.0))
    return costs


def model_serving_costs(lm, points, price_per_hour: float, prompt_tokens: int,
                        output_tokens: int, bandwidth_gbs: float) -> list[CostPoint]:
    """`serving_costs` for the loaded model: its KV bytes per token and attention FLOPs per
    position, carried at the measured bandwidth. Lesson 5's cost table and the presenter's
    cost screen both call this, so one batch gets one figure on both."""
    info = lm.info
    kv = bytes_per_token(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value)
    return serving_costs(points, price_per_hour, prompt_tokens, output_tokens,
                         kv_bytes_per_token=kv, bandwidth_gbs=bandwidth_gbs,
                         attention_flops=attention_flops_per_position(info))
