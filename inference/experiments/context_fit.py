"""Why a long prompt costs more than its length: fitting a + b·L + c·L² to measured times.

A forward pass over L tokens does two kinds of work:

    b·L   the matrix products (every token times every weight): twice the parameters per token
    c·L²  attention: each of the L queries is scored against up to L keys, and the weights of
          that L × L table multiply the L values

plus a fixed part a (reading the weights once, launching the layers). `fit_quadratic` finds
a, b, c by least squares through measured points; `QuadraticFit.quadratic_share(L)` is the part
of the fitted time at L that the L² term carries. The fit needs three lengths or more; with
fewer it drops the terms it cannot pin down. A negative b or c (noise) is not physical: the
fit then keeps the best of the smaller term sets whose costs are all zero or above.

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
        return min(1.0, self.quadratic_seconds(tokens) / total) if total > 0 else 0.0

    def quadratic_is_measurable(self, tokens: float) -> bool:
        """Whether the L² term at `tokens` stands clear of the fit's residual noise (twice it)."""
        return self.c > 0 and self.quadratic_seconds(tokens) > 2 * self.rms_seconds


def _solve(xs: np.ndarray, ys: np.ndarray, terms: tuple[int, ...]) -> np.ndarray:
    """Least squares on the chosen powers of L (0: a, 1: b·L, 2: c·L²); the others are 0."""
    design = np.stack([xs ** k for k in terms], axis=1)  # [n, len(terms)]
    coef, *_ = np.linalg.lstsq(design, ys, rcond=None)
    full = np.zeros(3)
    full[list(terms)] = coef
    return full


def _residual(xs: np.ndarray, ys: np.ndarray, coef: np.ndarray) -> np.ndarray:
    return ys - (coef[0] + coef[1] * xs + coef[2] * xs ** 2)


def fit_quadratic(tokens: Sequence[float], seconds: Sequence[float]) -> QuadraticFit:
    """Least-squares a + b·L + c·L² through the points (see the module docstring), with b and
    c kept at zero or above: of the term sets the points can pin down, the best fit whose
    per-token and per-token² costs are not negative."""
    if len(tokens) != len(seconds) or not tokens:
        raise ValueError("fit_quadratic needs as many times as lengths, at least one.")
    xs, ys = np.asarray(tokens, dtype=float), np.asarray(seconds, dtype=float)
    distinct = len(set(tokens))
    candidates = [t for t in ((0, 1, 2), (0, 1), (0, 2), (0,)) if len(t) <= distinct]
    best, best_sq = np.array([float(ys.mean()), 0.0, 0.0]), float("inf")
    for terms in candidates:
        coef = _solve(xs, ys, terms)
        square = float(np.sum(_residual(xs, ys, coef) ** 2))
        if coef[1] >= 0 and coef[2] >= 0 and square < best_sq:
            best, best_sq = coef, square
    rms = math.sqrt(float(np.mean(_residual(xs, ys, best) ** 2)))
    return QuadraticFit(float(best[0]), float(best[1]), float(best[2]), rms, len(tokens))


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
