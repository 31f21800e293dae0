"""Figures that survive a busy machine: robust estimates from repeated, interleaved timings,
and the bounds physics sets on them.

Another program can only *add* time to a step, so a figure leans on the low timings, and two
kinds of work are timed turn by turn so both share whatever the machine was doing. Not
covered: a machine busy for the whole run slows both lanes alike (a ratio cancels that).
Some wrong figures are not noisy but impossible: each bound returns None when a figure is
possible, else one sentence saying what is wrong, allowing `Settings.sanity_noise` past it. A
figure that fails is measured again once; still failing, the screen shows the sentence.
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import LIMITS
from ..stats import percentile

LOW_QUANTILE = 0.25  # interference only adds time: lean on the faster repeats, not the fastest
ROUNDS = 5  # interleaved rounds a run's pairs are split into, for the range
NEIGHBOURS = 2  # each side: a step's robust time is the median of 2 × 2 + 1 steps
NOISE = LIMITS.sanity_noise  # a bound allows this share past it


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


def batch_gain(batch: int, gain: float) -> str | None:
    """A batch of `batch` rows measured `gain`× the throughput of one row.

    >>> batch_gain(16, 67.0)
    '16 rows measured 67.0× the throughput of one row: 16 rows can give at most 16×.'
    """
    if gain > batch * (1 + NOISE):
        return (f"{batch} rows measured {gain:.1f}× the throughput of one row: {batch} rows "
                f"can give at most {batch}×.")
    return None


def batch_step(batch: int, step_seconds: float, one_row_seconds: float) -> str | None:
    """A `batch`-row decode step took `step_seconds`; a 1-row step took `one_row_seconds`."""
    if batch > 1 and step_seconds * (1 + NOISE) < one_row_seconds:
        return (f"a {batch}-row step measured {step_seconds / one_row_seconds:.2f}× as long as "
                f"a 1-row step: it does all of that work and more, so it cannot be shorter.")
    return None


def cached_step(cached_seconds: float, recompute_seconds: float) -> str | None:
    """The cached lane against recomputing the same positions (one step or a whole race)."""
    if cached_seconds > recompute_seconds * (1 + NOISE):
        return (f"the cached lane measured {cached_seconds / recompute_seconds:.2f}× as long as "
                "recomputing the same positions: it runs one token where recomputing runs them "
                "all, so it cannot be slower.")
    return None


def bandwidth(tokens_per_s: float, ceiling_tokens_per_s: float) -> str | None:
    if ceiling_tokens_per_s > 0 and tokens_per_s > ceiling_tokens_per_s * (1 + NOISE):
        return (f"{tokens_per_s:.1f} tokens/s is past this machine's measured ceiling of "
                f"{ceiling_tokens_per_s:.1f} tokens/s: each token must read its bytes from "
                "memory.")
    return None


def one_pass(tokens: int, speedup: float) -> str | None:
    """Feeding `tokens` tokens one pass each took `speedup`× as long as one pass over them.

    >>> print(one_pass(16, 40.0))  # doctest: +ELLIPSIS
    one pass over 16 tokens measured 40.0× faster than 16 one-token passes: ...at most 16×...
    """
    if speedup > tokens * (1 + NOISE):
        return (f"one pass over {tokens} tokens measured {speedup:.1f}× faster than {tokens} "
                f"one-token passes: it does all of a one-token pass's work, so it can be at "
                f"most {tokens}× faster.")
    return None


def same_throughput(batch: int, used_tokens_per_s: float, sweep_tokens_per_s: float) -> str | None:
    """A cost's tokens/s at `batch` rows against the same visitor's batch sweep there.

    >>> same_throughput(16, 126.0, 8.6)  # doctest: +ELLIPSIS
    'this cost uses 126.0 tokens/s at batch 16, but your batch sweep measured 8.6 ...'
    """
    hi, lo = max(used_tokens_per_s, sweep_tokens_per_s), min(used_tokens_per_s, sweep_tokens_per_s)
    if lo <= 0 or hi > lo * (1 + NOISE):
        return (f"this cost uses {used_tokens_per_s:.1f} tokens/s at batch {batch}, but your "
                f"batch sweep measured {sweep_tokens_per_s:.1f} tokens/s there: one of them "
                "was disturbed, so no cost is drawn from it.")
    return None
