"""Lesson 3b: the sampled acceptance rule, run live: how often the model keeps a draft's guesses
when tokens are drawn at a temperature instead of picked greedily.

With sampling, a guess d is kept with probability min(1, p(d) ÷ q(d)) (`acceptance.py`), so
the rate α now depends on how the model's and the draft's distributions overlap, not only on
whether their top picks agree. One seeded speculative run at temperature T (T = 0: the greedy
rule) counts guesses kept ÷ guesses judged; the lesson sets E[tokens per pass] from that α
beside the run's measured tokens per pass. No plain lane and no timing: a sampled run's text
differs from a greedy one, so there is nothing to race, only a rate to count.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..drafts import Draft
from ..sampling import SamplingSettings
from ..speculative import SpecPass, speculate
from .spec_expectation import expected_tokens_per_pass, judged_guesses


@dataclass(frozen=True)
class SampledRun:
    """One seeded speculative run at a temperature, counted (nothing timed)."""

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
        """Guesses kept ÷ guesses judged (0 when no guess was made)."""
        return self.accepted / self.judged if self.judged else 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Measured."""
        return self.decoded / self.passes if self.passes else 0.0

    @property
    def expected_tokens_per_pass(self) -> float:
        """Theoretical: E from this run's α at its k."""
        return expected_tokens_per_pass(self.alpha, self.k)


def sampled_run(lm, prompt_ids: list[int], draft: Draft, k: int, temperature: float,
                new_tokens: int, seed: int = 0) -> Iterator[SpecPass | SampledRun]:
    """Yield each pass of one seeded speculative run at `temperature`, then its count."""
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
