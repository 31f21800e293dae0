"""Figures that survive a busy machine: robust estimates from repeated, interleaved timings.

Another program can only *add* time to a step, so a figure leans on the low timings, and two
kinds of work are timed turn by turn so both share whatever the machine was doing. Not
covered: a machine busy for the whole run slows both lanes alike (a ratio cancels that).
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..stats import percentile

LOW_QUANTILE = 0.25  # interference only adds time: lean on the faster repeats, not the fastest
ROUNDS = 5  # interleaved rounds a run's pairs are split into, for the range
NEIGHBOURS = 2  # each side: a step's robust time is the median of 2 × 2 + 1 steps


@dataclass(frozen=True)
class Robust:
    """A figure from repeated timings: its robust estimate and its spread over rounds.

    >>> Robust(2.83, 2.6, 3.04, 5).label()
    '2.8×, range 2.6–3.0 over 5 rounds'
    """

    estimate: float  # the figure (unit below)
    low: float  # lowest round's figure
    high: float  # highest round's figure
    rounds: int  # rounds the range was taken over
    unit: str = "×"

    def label(self) -> str:
        if self.rounds < 2:
            return f"{self.estimate:.1f}{self.unit}, one round"
        return (f"{self.estimate:.1f}{self.unit}, range {self.low:.1f}–{self.high:.1f} "
                f"over {self.rounds} rounds")

    @property
    def spread(self) -> float:
        """(high − low) ÷ estimate: how far the rounds disagreed (unitless)."""
        return (self.high - self.low) / self.estimate if self.estimate else 0.0


def low_quantile(seconds: Sequence[float], q: float = LOW_QUANTILE) -> float:
    """The q-quantile of repeated timings (the project's nearest-rank percentile rule).

    >>> low_quantile([1.0, 1.1, 1.0, 10.0, 1.05])  # one step slowed 10×: not seen
    1.0
    """
    if len(seconds) == 0:
        raise ValueError("no timings")
    return float(percentile(seconds, q * 100))


def running_median(seconds: Sequence[float], neighbours: int = NEIGHBOURS) -> list[float]:
    """Each step's time as the median of it and `neighbours` steps each side (the window
    slides inwards at the ends). A lone slowed step is dropped; a steady trend is kept.

    >>> running_median([1.0, 1.1, 1.2, 9.0, 1.4, 1.5, 1.6])  # step 3 slowed: gone
    [1.2, 1.2, 1.2, 1.4, 1.5, 1.5, 1.5]
    """
    xs = [float(s) for s in seconds]
    width = min(2 * neighbours + 1, len(xs))
    out = []
    for i in range(len(xs)):
        start = min(max(i - neighbours, 0), len(xs) - width)
        out.append(statistics.median(xs[start:start + width]))
    return out


def low_ratio(numerator: Sequence[float], denominator: Sequence[float],
              scale: float = 1.0, unit: str = "×") -> Robust:
    """scale × low quantile(numerator) ÷ low quantile(denominator), for repeats of two kinds of
    work; the range is the same ratio round by round (the k-th repeat of each).

    >>> low_ratio([0.1] * 6, [0.4] * 6, scale=16).label()  # 16 rows at 4× the step time
    '4.0×, range 4.0–4.0 over 6 rounds'
    """
    estimate = scale * low_quantile(numerator) / low_quantile(denominator)
    per_round = [scale * n / d for n, d in zip(numerator, denominator, strict=False) if d > 0]
    if not per_round:
        return Robust(estimate, estimate, estimate, 1, unit)
    return Robust(estimate, min(per_round), max(per_round), len(per_round), unit)


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float],
                 common: float = 0.0, rounds: int = ROUNDS, unit: str = "×") -> Robust:
    """Two lanes timed in pairs: the ratio of their totals after `running_median`, plus
    `common` seconds of identical work in both. The range: the same ratio over `rounds`
    interleaved rounds (round j holds pairs j, j + rounds, ...), each spanning the whole run.

    >>> paired_ratio([3.0] * 10, [1.0] * 10).label()
    '3.0×, range 3.0–3.0 over 5 rounds'
    """
    n = min(len(numerator), len(denominator))
    if n == 0:
        raise ValueError("no pairs")
    num, den = running_median(numerator[:n]), running_median(denominator[:n])
    rounds = max(1, min(rounds, n))

    def ratio(idx: Sequence[int]) -> float:
        share = len(idx) / n  # the common work, shared out in proportion to the round's size
        return ((common * share + sum(num[i] for i in idx))
                / max(common * share + sum(den[i] for i in idx), 1e-12))

    per_round = [ratio(range(j, n, rounds)) for j in range(rounds)]
    return Robust(ratio(range(n)), min(per_round), max(per_round), rounds, unit)
