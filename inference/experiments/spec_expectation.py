"""Lesson 3b: what speculative decoding should gain, from two numbers and three times.

With each guess kept with probability α, independently, and a pass stopping at the first
rejection, a pass of k guesses gains on average

    E[tokens per pass] = (1 − α^(k+1)) ÷ (1 − α)          (k + 1 when α = 1; 1 when α = 0)
    speed-up           = E × T_step ÷ (k · T_draft + T_verify)

One race measures α and the times; `predict` extends them to every k.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..errors import check_range
from ..sampling import SamplingSettings
from ..speculative import Draft, SpecPass, speculate
from .speculative_race import speed_verdict


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """Mean tokens one pass gains with k guesses each kept with probability `alpha`.

    >>> expected_tokens_per_pass(0.5, 2)  # 1 + 0.5 + 0.25
    1.75
    >>> expected_tokens_per_pass(1.0, 4), expected_tokens_per_pass(0.0, 4)
    (5.0, 1.0)
    """
    check_range("Acceptance rate α", alpha, 0.0, 1.0)
    check_range("Guesses per pass k", k, 0, 10**6)
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def expected_speedup(alpha: float, k: int, step_s: float, draft_s: float,
                     verify_s: float) -> float:
    """E × T_step ÷ (k · T_draft + T_verify)."""
    cost = k * draft_s + verify_s
    return expected_tokens_per_pass(alpha, k) * step_s / cost if cost > 0 else 0.0


def verify_seconds_at(k: int, step_s: float, measured_k: int, measured_verify_s: float) -> float:
    """Assumed: the pass at k guesses, on the line from a plain step through the measured one."""
    if measured_k <= 0:
        return measured_verify_s
    return max(step_s + (measured_verify_s - step_s) * k / measured_k, 0.0)


def judged_guesses(passes: Iterable) -> tuple[int, int]:
    """(guesses kept, guesses the model judged) over `SpecPass` records, the prefill left out."""
    counted = [p for p in passes if p.index > 0]
    return sum(p.accepted for p in counted), sum(p.judged for p in counted)


@dataclass(frozen=True)
class RaceFit:
    """What one race measured, in the formula's terms (batch 1)."""

    draft: str
    k: int  # guesses per pass asked for
    alpha: float  # guesses kept ÷ guesses judged
    kept: int  # guesses kept
    judged: int  # guesses the model judged (0: no guess was made)
    step_s: float  # a plain decode step (mean)
    draft_s: float  # the draft's time per guess (mean)
    verify_s: float  # a pass minus its draft time: checking, accepting, cutting the cache
    tokens_per_pass: float  # measured
    speedup: float  # measured
    noise: float  # the race's own noise (relative)


@dataclass(frozen=True)
class KPrediction:
    k: int
    tokens_per_pass: float  # E, theoretical
    verify_s: float  # assumed (straight line through the measured pass)
    speedup: float  # theoretical


def fit_race(s) -> RaceFit | None:
    """The formula's inputs from a `SpecRaceSummary` (None when it made no pass)."""
    if not s.passes or not s.plain_step_seconds:
        return None
    alpha = s.accepted / s.judged if s.judged else 0.0
    return RaceFit(
        draft=s.draft, k=s.k, alpha=alpha, kept=s.accepted, judged=s.judged,
        step_s=sum(s.plain_step_seconds) / len(s.plain_step_seconds),
        draft_s=s.draft_seconds / s.proposed if s.proposed else 0.0,
        verify_s=(s.spec_seconds - s.draft_seconds) / s.passes,
        tokens_per_pass=s.tokens_per_pass, speedup=s.speedup, noise=s.noise)


def predict(fit: RaceFit, ks: Sequence[int]) -> list[KPrediction]:
    rows = []
    for k in ks:
        verify = verify_seconds_at(k, fit.step_s, fit.k, fit.verify_s)
        rows.append(KPrediction(k, expected_tokens_per_pass(fit.alpha, k), verify,
                                expected_speedup(fit.alpha, k, fit.step_s, fit.draft_s, verify)))
    return rows


@dataclass(frozen=True)
class Expectation:
    """The formula at every k beside one race: what the lesson draws."""

    fit: RaceFit
    rows: tuple[KPrediction, ...]
    raced: KPrediction  # the row at the race's own k
    best: KPrediction
    verdict: str  # `speed_verdict` on the best predicted speed-up, at the race's noise
    reading: object = None  # the race's noise reading (`Noise`; busy: no verdict is drawn)


def expectation(summary, ks: Sequence[int]) -> Expectation | None:
    """`predict` over `ks` and the race's own k, from a `SpecRaceSummary` (None: no race)."""
    fit = fit_race(summary) if summary is not None else None
    if fit is None:
        return None
    rows = tuple(predict(fit, sorted(set(ks) | {fit.k})))
    best = max(rows, key=lambda r: (r.speedup, -r.k))  # the smallest such k on a tie
    return Expectation(fit, rows, next(r for r in rows if r.k == fit.k), best,
                       speed_verdict([best.speedup], fit.noise), summary.reading)


@dataclass(frozen=True)
class SampledRun:
    draft: str  # the draft's key
    k: int  # guesses per pass asked for
    temperature: float  # 0: greedy acceptance
    seed: int
    passes: int  # verification passes (the prefill not counted)
    accepted: int  # guesses kept
    judged: int  # guesses the model judged (kept ones and each pass's first rejection)
    decoded: int  # output tokens after the first (the passes made them)
    text: str  # the output

    @property
    def alpha(self) -> float:
        return self.accepted / self.judged if self.judged else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return self.decoded / self.passes if self.passes else 0.0

    @property
    def expected_tokens_per_pass(self) -> float:
        """Theoretical: E from this run's α at its k."""
        return expected_tokens_per_pass(self.alpha, self.k)


def sampled_run(lm, prompt_ids: list[int], draft: Draft, k: int, temperature: float,
                new_tokens: int, seed: int = 0) -> Iterator[SpecPass | SampledRun]:
    """One seeded run at `temperature`, where a guess d is kept with probability
    min(1, p(d) ÷ q(d)): its passes, then their count (nothing timed)."""
    sampling = SamplingSettings(temperature=temperature, seed=seed)
    passes: list[SpecPass] = []
    for p in speculate(lm, prompt_ids, draft, k, sampling, new_tokens):
        passes.append(p)
        yield p
    kept, judged = judged_guesses(passes)
    last = passes[-1]
    yield SampledRun(draft=draft.key, k=k, temperature=temperature, seed=seed,
                     passes=len(passes) - 1, accepted=kept, judged=judged,
                     decoded=last.tokens_so_far - 1, text=last.text)
