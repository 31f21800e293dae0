"""Why a long prompt costs more than its length: fitting a + b·L + c·L² to measured times.

A forward pass over L tokens does two kinds of work:

    b·L   the matrix products (every token times every weight): twice the parameters per token
    c·L²  attention: each of the L queries is scored against up to L keys, and the weights of
          that L × L table multiply the L values

plus a fixed part a (reading the weights once, launching the layers). `fit_quadratic` finds
a, b, c by least squares through measured points; `QuadraticFit.quadratic_share(L)` is the part
of the fitted time at L that the L² term carries. The fit needs three lengths or more; with
fewer it drops the terms it cannot pin down. A negative c (noise on nearly straight points) is
not physical: the fit is then redone without it.

>>> f = fit_quadratic([1, 2, 3, 4], [1 + 2 + 3, 1 + 4 + 12, 1 + 6 + 27, 1 + 8 + 48])
>>> round(f.a, 6), round(f.b, 6), round(f.c, 6)
(1.0, 2.0, 3.0)
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class QuadraticFit:
    """seconds(L) = a + b·L + c·L², least squares through measured (L, seconds) points."""

    a: float  # seconds: the fixed part of one pass
    b: float  # seconds per token: the matrix products
    c: float  # seconds per token²: attention's scores against the growing key set
    rms_seconds: float  # root-mean-square residual of the points (the fit's own noise)
    points: int  # how many measured points it went through

    def at(self, tokens: float) -> float:
        """Fitted seconds at `tokens`."""
        return self.a + self.b * tokens + self.c * tokens ** 2

    def quadratic_seconds(self, tokens: float) -> float:
        return self.c * tokens ** 2

    def quadratic_share(self, tokens: float) -> float:
        """The L² term's share of the fitted time at `tokens` (0 to 1)."""
        total = self.at(tokens)
        return self.quadratic_seconds(tokens) / total if total > 0 else 0.0

    def quadratic_is_measurable(self, tokens: float) -> bool:
        """Whether the L² term at `tokens` stands clear of the fit's residual noise (twice it)."""
        return self.c > 0 and self.quadratic_seconds(tokens) > 2 * self.rms_seconds


def _solve(xs: np.ndarray, ys: np.ndarray, degree: int) -> np.ndarray:
    design = np.vander(xs, degree + 1, increasing=True)  # [n, degree + 1]: 1, L, L²
    coef, *_ = np.linalg.lstsq(design, ys, rcond=None)
    return np.pad(coef, (0, 2 - degree))


def fit_quadratic(tokens: Sequence[float], seconds: Sequence[float]) -> QuadraticFit:
    """Least-squares a + b·L + c·L² through the points (see the module docstring)."""
    if len(tokens) != len(seconds) or not tokens:
        raise ValueError("fit_quadratic needs as many times as lengths, at least one.")
    xs, ys = np.asarray(tokens, dtype=float), np.asarray(seconds, dtype=float)
    distinct = len(set(tokens))
    degree = min(2, distinct - 1)
    coef = _solve(xs, ys, degree)
    if coef[2] < 0:  # noise bent the curve down: keep the straight line
        coef = _solve(xs, ys, min(1, degree))
    residual = ys - (coef[0] + coef[1] * xs + coef[2] * xs ** 2)
    rms = math.sqrt(float(np.mean(residual ** 2)))
    return QuadraticFit(float(coef[0]), float(coef[1]), float(coef[2]), rms, len(tokens))


def attention_flops_share(tokens: int, matmul_parameters: int, layers: int, heads: int,
                          head_dim: int) -> float:
    """Theoretical: attention's share of a causal prefill's arithmetic at `tokens`.

    matrix products: 2 × matmul_parameters × L (the layers' weights; a prefill skips the
    output head for all but its last token and only looks rows up in the embedding);
    attention: scores Q·Kᵀ and weights·V, each
    2 × layers × heads × head_dim × L²/2 (causal: a query sees only the keys before it)."""
    matmul = 2 * matmul_parameters * tokens
    attention = 2 * layers * heads * head_dim * tokens ** 2
    return attention / (attention + matmul) if tokens > 0 else 0.0


@dataclass(frozen=True)
class LengthShare:
    """What the L² term is worth at one prompt length."""

    tokens: int  # prompt length L
    fitted_seconds: float  # a + b·L + c·L² at L
    quadratic_share: float  # c·L² ÷ the fitted time (0 to 1), from the measured fit
    measurable: bool  # the L² term at L stands clear of the fit's noise (twice its residual)
    attention_flops_share: float  # theoretical: attention's share of the arithmetic at L


def length_shares(curve: QuadraticFit, lengths: Sequence[int], matmul_parameters: int,
                  layers: int, heads: int, head_dim: int) -> tuple[LengthShare, ...]:
    """One `LengthShare` per length: the fitted share beside the arithmetic's own."""
    return tuple(LengthShare(
        n, curve.at(n), curve.quadratic_share(n), curve.quadratic_is_measurable(n),
        attention_flops_share(n, matmul_parameters, layers, heads, head_dim)) for n in lengths)


def matmul_parameters(parameters: int, vocab_size: int, hidden_size: int) -> int:
    """The parameters a prefill multiplies every token by: all but the embedding table (looked
    up, not multiplied; tied to the output head, which a prefill runs for its last token only)."""
    return parameters - vocab_size * hidden_size
