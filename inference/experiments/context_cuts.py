"""What cuts the cost of a long context: four ways to hold fewer cache bytes, each labelled.

    grouped-query attention (GQA)  several query heads share one KV head: this model has 9
                                   query heads and 3 KV heads, so its cache is 3× smaller
                                   than with one KV head per query head (measured: its tensors)
    KV cache in 8 bits             1 byte per value instead of the run's 4 or 2 (theoretical:
                                   this app does not quantize its cache)
    sliding window                 each layer attends to the last W positions only, so the cache
                                   stops growing at W (theoretical: SmolLM2 was not trained so)
    prefix caching                 requests that start with the same text share its cache
                                   (theoretical here; lesson 4's Prefix reuse and the server's
                                   shared pages measure it)

Every row counts cache bytes for one context of `tokens` positions (and, for prefix caching,
`requests` requests that share it). A smaller cache is read faster by every decode step and
leaves room for more requests; what each one gives up is in `trade_off`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..kv_cache import kv_cache_bytes

MEASURED = "measured"
THEORETICAL = "theoretical"


@dataclass(frozen=True)
class CostCut:
    name: str  # the technique
    label: str  # MEASURED or THEORETICAL: how `bytes_after` was obtained
    tokens: int  # context length the bytes are counted for, positions
    bytes_before: int  # cache bytes without the technique (the formula)
    bytes_after: int  # cache bytes with it
    how: str  # what changes, in one phrase
    trade_off: str  # what it gives up

    @property
    def factor(self) -> float:
        """How many times fewer bytes."""
        return self.bytes_before / self.bytes_after if self.bytes_after else float("inf")


def cost_cuts(layers: int, heads: int, kv_heads: int, head_dim: int, bytes_per_value: int,
              tokens: int, sliding_window: int, requests: int = 8,
              measured_bytes_per_token: int | None = None) -> tuple[CostCut, ...]:
    """The four rows for a model of this shape at `tokens` positions. `measured_bytes_per_token`:
    this model's cache bytes per position read from real tensors (the GQA row is then measured)."""
    def cache(kv: int = kv_heads, bpv: int = bytes_per_value, n: int = tokens) -> int:
        return kv_cache_bytes(layers, kv, head_dim, bpv, n)

    ours = cache()
    gqa_label = THEORETICAL
    if measured_bytes_per_token is not None:
        ours, gqa_label = measured_bytes_per_token * tokens, MEASURED
    ratio = heads // kv_heads if kv_heads else 1
    return (
        CostCut("grouped-query attention (GQA)", gqa_label, tokens, cache(kv=heads), ours,
                f"{kv_heads} KV heads shared by {heads} query heads ({ratio} each), "
                f"against {heads} KV heads", "built into the model when it is trained; "
                "fewer distinct keys per layer"),
        CostCut("KV cache in 8 bits", THEORETICAL, tokens, ours,
                cache(bpv=1) if bytes_per_value > 1 else ours,
                f"1 byte per cached value instead of {bytes_per_value}",
                "rounding error in every key and value (plus a scale per group, not counted)"),
        CostCut(f"sliding window of {sliding_window:,} tokens", THEORETICAL, tokens, ours,
                cache(n=min(tokens, sliding_window)),
                f"each layer keeps only the last {sliding_window:,} positions",
                "nothing further back is read directly; the model must be trained this way "
                "(this one was not)"),
        CostCut(f"prefix caching ({requests} requests, one shared text)", THEORETICAL, tokens,
                requests * ours, ours,
                f"{requests} requests that start with the same {tokens:,} tokens hold one copy",
                "only helps when prompts share their beginning; lesson 4's Prefix reuse "
                "measures the time it saves"),
    )


def measured_bytes_per_token(points) -> int | None:
    """Cache bytes per position and row read from a sweep's real tensors (`DecodeLengthPoint`s
    with a non-empty cache), for the GQA row; None without such a point."""
    held = [p for p in points if p.cache_tokens > 0]
    if not held:
        return None
    p = max(held, key=lambda q: q.cache_tokens * q.batch)
    return round(p.cache_bytes / (p.cache_tokens * p.batch))
