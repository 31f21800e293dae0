"""Lesson 4c's theory beside its measurements: what a long context must cost, and what cuts it.

    decode bytes read = weight bytes + B × L × KV bytes per token;  floor = bytes ÷ bandwidth
    prefill seconds   = a + b·L + c·L²   (fixed part, matrix products, attention; fitted)

Past L* = weight bytes ÷ (B × KV bytes per token) the cache outweighs the model in every step.
`cost_cuts`: four ways to hold fewer cache bytes (GQA, 8-bit, a sliding window, prefix caching).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..kv_cache import bytes_per_token, kv_cache_bytes
from ..loading import bytes_read_per_token
from .roofline import machine_bandwidth

MEASURED = "measured"
THEORETICAL = "theoretical"


@dataclass(frozen=True)
class DecodeTheory:
    """The bandwidth floor of one decode step, from the loaded model and this machine."""

    weight_bytes: int  # bytes of weights one decode step reads (the tied head counted once)
    kv_bytes_per_token: int  # cache bytes one position holds for one row (K and V, all layers)
    bandwidth_gbs: float  # measured read bandwidth of this machine, GB/s
    dtype: str  # the dtype both counts are in

    def bytes_read(self, tokens: int, batch: int = 1) -> int:
        return self.weight_bytes + batch * tokens * self.kv_bytes_per_token

    def kv_share(self, tokens: int, batch: int = 1) -> float:
        """The cache's share of the bytes one step reads (0 to 1)."""
        return batch * tokens * self.kv_bytes_per_token / self.bytes_read(tokens, batch)

    def seconds(self, tokens: int, batch: int = 1) -> float:
        """The floor: bytes read ÷ bandwidth."""
        return self.bytes_read(tokens, batch) / (self.bandwidth_gbs * 1e9)

    def crossover_tokens(self, batch: int = 1) -> int:
        """L*: where the cache reads equal the weight reads."""
        return round(self.weight_bytes / (batch * self.kv_bytes_per_token))


def decode_theory(lm, shared=None) -> DecodeTheory:
    info = lm.info
    kv = bytes_per_token(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value)
    return DecodeTheory(bytes_read_per_token(lm.model), kv,
                        machine_bandwidth(shared, lm.device), str(lm.dtype).replace("torch.", ""))


@dataclass(frozen=True)
class QuadraticFit:
    """seconds(L) = a + b·L + c·L², least squares through measured (L, seconds) points."""

    a: float  # seconds: the fixed part of one pass
    b: float  # seconds per token: the matrix products
    c: float  # seconds per token²: attention's scores against the growing key set
    rms_seconds: float  # root-mean-square residual of the points (the fit's own noise)
    points: int  # how many measured points it went through

    def at(self, tokens: float) -> float:
        return self.a + self.b * tokens + self.c * tokens ** 2

    def quadratic_share(self, tokens: float) -> float:
        """The L² term's share of the fitted time at `tokens` (0 to 1)."""
        total = self.at(tokens)
        return min(1.0, self.c * tokens ** 2 / total) if total > 0 else 0.0

    def quadratic_is_measurable(self, tokens: float) -> bool:
        """Whether the L² term at `tokens` stands clear of the fit's residual noise (twice it)."""
        return self.c > 0 and self.c * tokens ** 2 > 2 * self.rms_seconds


def _solve(xs: np.ndarray, ys: np.ndarray, terms: tuple[int, ...]) -> np.ndarray:
    """Least squares on the chosen powers of L (0: a, 1: b·L, 2: c·L²); the others are 0."""
    design = np.stack([xs ** k for k in terms], axis=1)  # [n, len(terms)]
    coef, *_ = np.linalg.lstsq(design, ys, rcond=None)
    full = np.zeros(3)
    full[list(terms)] = coef
    return full


def fit_quadratic(tokens: Sequence[float], seconds: Sequence[float]) -> QuadraticFit:
    """Least-squares a + b·L + c·L², fewer terms for fewer lengths, none negative (noise)."""
    if len(tokens) != len(seconds) or not tokens:
        raise ValueError("fit_quadratic needs as many times as lengths, at least one.")
    xs, ys = np.asarray(tokens, dtype=float), np.asarray(seconds, dtype=float)
    distinct = len(set(tokens))
    candidates = [t for t in ((0, 1, 2), (0, 1), (0, 2), (0,)) if len(t) <= distinct]
    fits = [c for c in (_solve(xs, ys, t) for t in candidates) if c[1] >= 0 and c[2] >= 0]
    residuals = [ys - (c[0] + c[1] * xs + c[2] * xs ** 2) for c in fits]
    best, res = min(zip(fits, residuals), key=lambda pair: float(np.sum(pair[1] ** 2)))
    rms = math.sqrt(float(np.mean(res ** 2)))  # (0,) always fits, so `fits` is never empty
    return QuadraticFit(float(best[0]), float(best[1]), float(best[2]), rms, len(tokens))


def attention_flops_share(tokens: int, matmul_parameters: int, layers: int, heads: int,
                          head_dim: int) -> float:
    """Theoretical: attention's share of a causal prefill's arithmetic at `tokens`: matrix
    products 2 × matmul_parameters × L; scores and weights·V, each 2 × layers × heads ×
    head_dim × L²/2 (a query sees only the keys before it)."""
    matmul = 2 * matmul_parameters * tokens
    attention = 2 * layers * heads * head_dim * tokens ** 2
    return attention / (attention + matmul) if tokens > 0 else 0.0


@dataclass(frozen=True)
class LengthShare:
    tokens: int  # prompt length L
    quadratic_share: float  # c·L² ÷ the fitted time (0 to 1), from the measured fit
    measurable: bool  # the L² term at L stands clear of the fit's noise (twice its residual)
    attention_flops_share: float  # theoretical: attention's share of the arithmetic at L


def length_shares(curve: QuadraticFit, lengths: Sequence[int], matmul_parameters: int,
                  layers: int, heads: int, head_dim: int) -> tuple[LengthShare, ...]:
    return tuple(LengthShare(
        n, curve.quadratic_share(n), curve.quadratic_is_measurable(n),
        attention_flops_share(n, matmul_parameters, layers, heads, head_dim)) for n in lengths)


def matmul_parameters(parameters: int, vocab_size: int, hidden_size: int) -> int:
    """Parameters a prefill multiplies every token by: all but the (tied) embedding table."""
    return parameters - vocab_size * hidden_size


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
        return self.bytes_before / self.bytes_after if self.bytes_after else float("inf")


def cost_cuts(layers: int, heads: int, kv_heads: int, head_dim: int, bytes_per_value: int,
              tokens: int, sliding_window: int, requests: int = 8,
              measured_bytes_per_token: int | None = None) -> tuple[CostCut, ...]:
    """The four rows at `tokens` positions (GQA measured given `measured_bytes_per_token`)."""
    def cache(kv: int = kv_heads, bpv: int = bytes_per_value, n: int = tokens) -> int:
        return kv_cache_bytes(layers, kv, head_dim, bpv, n)

    ours, gqa_label = cache(), THEORETICAL
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
    """Cache bytes per position and row from a sweep's real tensors (None: none held)."""
    p = max((q for q in points if q.cache_tokens > 0), key=lambda q: q.cache_tokens * q.batch,
            default=None)
    return round(p.cache_bytes / (p.cache_tokens * p.batch)) if p else None
