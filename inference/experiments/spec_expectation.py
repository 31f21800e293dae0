"""What the speculative race's figures predict: tokens per pass and speed-up for every k
(α^(k+1) formulas, labelled theory), the sampled rule's run, and what verifying k guesses costs a
batch of B rows (measured at each B against this machine's roofs).
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from ..config import LIMITS
from ..errors import EmptyPromptError, check_range
from ..generation import decode_step, prefill
from ..kv_cache import cache_length, cache_tensor_bytes
from ..loading import bytes_read_per_token
from ..sampling import SamplingSettings
from ..speculative import Draft, SpecPass, crop_to, speculate
from ..timing import stopwatch
from . import roofline
from .roofline import ComputeRoof, WorkPoint, machine_bandwidth
from .speculative_race import PassCounts, SpecRaceSummary, SpecSweepUpdate, speed_verdict

REPEATS = 5  # `verify_cost`: timed rounds per batch size (median), after one warm-up round


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
class KPrediction:
    k: int
    tokens_per_pass: float  # E, theoretical
    verify_s: float  # assumed (straight line through the measured pass)
    speedup: float  # theoretical


def fit_race(s: SpecRaceSummary) -> SpecRaceSummary | None:
    """The race as the formula's inputs (α, step, draft and verify times), None: no pass made."""
    return s if s.passes and s.plain_step_seconds else None


def predict(fit: SpecRaceSummary, ks: Sequence[int]) -> list[KPrediction]:
    rows = []
    for k in ks:
        verify = verify_seconds_at(k, fit.step_s, fit.k, fit.verify_s)
        rows.append(KPrediction(k, expected_tokens_per_pass(fit.alpha, k), verify,
                                expected_speedup(fit.alpha, k, fit.step_s, fit.draft_s, verify)))
    return rows


@dataclass(frozen=True)
class Expectation:
    """The formula at every k beside one race: what the lesson draws."""

    fit: SpecRaceSummary  # the race: α, step, draft and verify times (batch 1)
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
class SampledRun(PassCounts):
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


@dataclass(frozen=True)
class VerifyCost:
    batch: int  # rows decoded together
    k: int  # guesses per row in the verification pass
    plain_seconds: float  # median plain step: B × 1 tokens (synced)
    verify_seconds: float  # median verification pass: B × (k + 1) tokens (synced)
    plain_bound: str  # "memory", "compute" or "neither" (ComputeRoof.verdict's kind)
    verify_bound: str

    @property
    def cost_ratio(self) -> float:
        """How many plain steps one verification pass costs."""
        return self.verify_seconds / self.plain_seconds

    def derived_speedup(self, tokens_per_pass: float) -> float:
        """Derived, not raced: tokens per pass × plain step ÷ pass (every row assumed to keep
        as many guesses, the draft free)."""
        return tokens_per_pass * self.plain_seconds / self.verify_seconds


@torch.inference_mode()
def verify_cost(lm, prompt_ids: list[int], batch: int, k: int, roof: ComputeRoof,
                repeats: int = REPEATS) -> VerifyCost:
    """Prefill `batch` copies of the prompt, then time a plain step and a verification pass in
    turns (the cache cropped back after each; median of `repeats`)."""
    model, device = lm.model, lm.device
    ids = torch.tensor([prompt_ids] * batch, device=device)  # [B, S]
    first = prefill(model, ids)
    cache, held = first.cache, cache_length(first.cache)
    last = first.logits.argmax(-1)  # [B]
    guesses = torch.randint(0, lm.info.vocab_size, (batch, k), device=device,
                            generator=torch.Generator(device=device).manual_seed(0))
    block = torch.cat([last[:, None], guesses], dim=1)  # [B, k + 1]
    plain, verify = [], []
    for i in range(repeats + 1):  # the first round is warm-up
        with stopwatch(device) as tp:
            decode_step(model, last, cache)
        crop_to(cache, held)
        with stopwatch(device) as tv:
            model(input_ids=block, cache=cache, use_cache=True, logits_to_keep=k + 1)
        crop_to(cache, held)
        if i:
            plain.append(tp[0])
            verify.append(tv[0])
    p, v = statistics.median(plain), statistics.median(verify)
    read = bytes_read_per_token(model) + cache_tensor_bytes(cache)
    pp = WorkPoint(f"plain step, batch {batch}", roofline.forward_flops(lm.info, batch, held),
                   read, p)
    vp = WorkPoint(f"verification, batch {batch}",
                   roofline.forward_flops(lm.info, batch * (k + 1), held), read, v)
    return VerifyCost(batch, k, p, v, roof.verdict(pp).kind, roof.verdict(vp).kind)


def batch_interplay(lm, prompt_ids: list[int], k: int = LIMITS.spec_k.default,
                    batches: Sequence[int] = LIMITS.spec_batches, repeats: int = REPEATS,
                    shared=None) -> Iterator[SpecSweepUpdate]:
    if not prompt_ids:
        raise EmptyPromptError("The measurement needs a non-empty prompt.")
    LIMITS.spec_k.check("Draft length k", k)
    for b in batches:
        LIMITS.batch.check("Batch size", b)
    roof = ComputeRoof(roofline.machine_gflops(shared, lm.device, lm.dtype),
                       machine_bandwidth(shared, lm.device), ())
    costs: list[VerifyCost] = []
    for b in batches:
        yield SpecSweepUpdate(tuple(costs), f"Batch {b}: plain step vs a pass of {b} × {k + 1} "
                          "tokens…")
        costs.append(verify_cost(lm, prompt_ids, b, k, roof, repeats))
    yield SpecSweepUpdate(tuple(costs), f"Done: {len(costs)} batch sizes.", finished=True)


def spec_batch_tokens(prompt: int, k: int, batches: Sequence[int],
                      repeats: int = REPEATS) -> int:
    """Tokens `batch_interplay` feeds: per batch b, the prompt b times, then `repeats` + 1
    rounds of a plain step and a pass of k + 1 tokens, b times."""
    return sum(b * (prompt + (repeats + 1) * (k + 2)) for b in batches)
