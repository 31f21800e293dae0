"""Speculative decoding raced against plain greedy decoding on the same prompt, same tokens
(what the race predicts for every k and batch: `spec_expectation.py`).

**speculative**: the draft guesses k tokens and ONE model pass checks them all (1 to k + 1
tokens a pass); **plain**: one pass per token, catching up after every speculative pass (turns:
both lanes see the same machine noise). Prompts: **edit** copies most of the prompt back (prompt
lookup guesses well); an **open question**'s answer is new text. With each guess kept with
probability α, independently, and a pass stopping at the first rejection, a pass of k guesses
gains on average

    E[tokens per pass] = (1 − α^(k+1)) ÷ (1 − α)          (k + 1 when α = 1; 1 when α = 0)
    speed-up           = E × T_step ÷ (k · T_draft + T_verify)

One race measures α and the times; `spec_expectation.predict` extends them to every k. At batch
B a verification pass runs B × (k + 1) tokens where a plain step runs B × 1: nearly free at
batch 1, but once arithmetic sets the pace the guesses cost (`spec_expectation.verify_cost`).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from ..config import LIMITS
from ..errors import SettingOutOfRangeError
from ..generation import forward
from ..kv_cache import kv_cache_bytes
from ..loading import bytes_read_per_token
from ..speculative import Draft, SpecPass, check_request, speculate
from ..timing import stopwatch
from . import WARM_UP_TOKENS
from .roofline import ceiling_tokens_per_s, machine_bandwidth

EDIT_PARAGRAPH = (
    "The quick broun fox jumpd over the lazy dog. It was a sunny day and the birds were singin "
    "in the trees. Evry child in the vilage came out to play in the feilds, and their parents "
    "watched from the porches while the bread was baking in the ovens.")
SPEC_PROMPTS: dict[str, str] = {
    "edit": f"Fix the spelling in this paragraph and write it out again:\n\n{EDIT_PARAGRAPH}",
    "open question": "Why do cats purr? Answer in a short paragraph.",
}
DEFAULT_SPEC_PROMPT = "edit"

FASTER, SLOWER, NOISE = "faster", "slower", "within noise"


def spec_prompt(name: str = DEFAULT_SPEC_PROMPT) -> str:
    if name not in SPEC_PROMPTS:
        raise SettingOutOfRangeError(
            f"Unknown workload {name!r}; choose one of: {', '.join(SPEC_PROMPTS)}.")
    return SPEC_PROMPTS[name]


@dataclass(frozen=True)
class PlainStep:
    index: int  # output token number (0: after the prefill)
    token_id: int
    seconds: float  # synced forward + argmax (index 0 includes the prefill)


class PassCounts:
    """α and tokens per pass, for a run with `accepted`, `judged`, `decoded` and `passes`."""

    @property
    def alpha(self) -> float:
        """Guesses kept ÷ guesses judged: the expectation formula's α."""
        return self.accepted / self.judged if self.judged else 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Tokens gained per read of the weights (plain decoding: exactly 1)."""
        return self.decoded / self.passes if self.passes else 0.0


@dataclass(frozen=True)
class SpecRaceSummary(PassCounts):
    draft: str  # the draft's key
    k: int  # guesses per pass asked for
    prompt_tokens: int
    new_tokens: int  # output tokens of each lane (the same count)
    identical: bool  # both lanes made the same tokens
    passes: int  # verification passes (the prefill not counted)
    proposed: int  # guesses made over all passes
    accepted: int  # guesses kept
    spec_seconds: float  # the passes after the prefill, summed (synced)
    draft_seconds: float  # of which proposing
    plain_seconds: float  # plain decode steps after the first token, summed (synced)
    plain_step_seconds: tuple[float, ...]  # each plain step: the run's own noise
    bandwidth_gbs: float  # this machine's measured read bandwidth (shared figure)
    bytes_per_token: int  # weights + KV cache one batch-1 decode step reads (at the end)
    noise: float  # relative: the ratio this run cannot tell from 1 (`run_noise`)
    judged: int = 0  # guesses the model judged: the kept ones and each pass's first rejection
    reading: object = None  # the noise rule's `Noise` for the finished race (set by the lesson)
    draft_bytes_per_step: int = 0  # weights one draft step reads (a lookup draft: none)

    @property
    def decoded(self) -> int:
        """Tokens the passes made (all but the first)."""
        return max(self.new_tokens - 1, 0)

    @property
    def acceptance(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def step_s(self) -> float:
        """A plain decode step (mean)."""
        steps = self.plain_step_seconds
        return sum(steps) / len(steps) if steps else 0.0

    @property
    def draft_s(self) -> float:
        """The draft's time per guess (mean)."""
        return self.draft_seconds / self.proposed if self.proposed else 0.0

    @property
    def verify_s(self) -> float:
        """A pass minus its draft time: checking, accepting, cutting the cache (mean)."""
        return (self.spec_seconds - self.draft_seconds) / self.passes if self.passes else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.decoded / self.spec_seconds if self.spec_seconds else 0.0

    @property
    def plain_tokens_per_s(self) -> float:
        return self.decoded / self.plain_seconds if self.plain_seconds else 0.0

    @property
    def speedup(self) -> float:
        return self.tokens_per_s / self.plain_tokens_per_s if self.plain_tokens_per_s else 0.0

    @property
    def ceiling_tokens_per_s(self) -> float:
        """Theoretical: one token per read of the weights, bandwidth ÷ bytes per token."""
        return ceiling_tokens_per_s(self.bandwidth_gbs, self.bytes_per_token)

    @property
    def pass_ceiling_tokens_per_s(self) -> float:
        """Theoretical, at this run's tokens per pass: bandwidth × tokens per pass ÷ the bytes
        one pass reads (the model's weights and KV once, the draft's weights once per guess)."""
        guesses = self.proposed / self.passes if self.passes else self.k
        read = self.bytes_per_token + guesses * self.draft_bytes_per_step
        return ceiling_tokens_per_s(self.bandwidth_gbs, read) * self.tokens_per_pass

    @property
    def verdict(self) -> str:
        return speed_verdict([self.speedup], self.noise)


def run_noise(step_seconds: Sequence[float], floor: float = LIMITS.spec_noise) -> float:
    """How far from 1 the lanes' ratio can drift by chance: twice the relative standard error
    of the plain lane's total, at least `floor`."""
    if len(step_seconds) < 2:
        return max(floor, 1.0)
    cv = statistics.stdev(step_seconds) / statistics.mean(step_seconds)
    return max(floor, 2 * cv / math.sqrt(len(step_seconds)))


def speed_verdict(speedups: Sequence[float], noise: float) -> str:
    """FASTER if every speed-up is above 1 + noise, SLOWER if every one is below 1 - noise."""
    if not speedups:
        return NOISE
    if min(speedups) > 1 + noise:
        return FASTER
    if max(speedups) < 1 - noise:
        return SLOWER
    return NOISE


@torch.inference_mode()
def spec_race(lm, prompt_ids: list[int], draft: Draft, k: int = LIMITS.spec_k.default,
              new_tokens: int = LIMITS.spec_new_tokens.default) -> Iterator[SpecPass | PlainStep]:
    """Each speculative pass, then the plain steps that catch up to its token count (greedy;
    both lanes stop at end of turn or after `new_tokens`)."""
    check_request(lm, prompt_ids, k, new_tokens)
    model, device = lm.model, lm.device
    list(speculate(lm, prompt_ids, draft, k, max_new_tokens=3))  # warm-up of both lanes
    forward(model, torch.tensor([prompt_ids[:WARM_UP_TOKENS]], device=device), DynamicCache())
    cache, plain = DynamicCache(), []
    for spec in speculate(lm, prompt_ids, draft, k, max_new_tokens=new_tokens):
        yield spec
        while len(plain) < spec.tokens_so_far:
            fed = plain[-1:] or prompt_ids  # the prompt, then one token a step
            with stopwatch(device) as t:
                logits = forward(model, torch.tensor([fed], device=device), cache)
                token = int(logits[0].argmax())
            plain.append(token)
            yield PlainStep(len(plain) - 1, token, t[0])
            if token in lm.stop_ids:
                break


def summarize_spec_race(lm, records: Sequence[SpecPass | PlainStep], prompt_tokens: int,
                        draft: str, k: int, bandwidth_gbs: float,
                        draft_bytes_per_step: int = 0) -> SpecRaceSummary:
    """Totals over the tokens both lanes have made."""
    passes = [r for r in records if isinstance(r, SpecPass)]
    plain = [r for r in records if isinstance(r, PlainStep)]
    spec_ids = [t for p in passes for t in p.new_ids]
    n = min(len(spec_ids), len(plain))
    counted = [p for p in passes[1:] if p.tokens_so_far <= n]
    info = lm.info
    kv = kv_cache_bytes(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value,
                        prompt_tokens + n)
    steps = tuple(s.seconds for s in plain[1:n])
    return SpecRaceSummary(
        draft=draft, k=k, prompt_tokens=prompt_tokens, new_tokens=n,
        identical=n > 0 and spec_ids[:n] == [s.token_id for s in plain[:n]],
        passes=len(counted), proposed=sum(len(p.proposed) for p in counted),
        accepted=sum(p.accepted for p in counted),
        spec_seconds=sum(p.seconds for p in counted),
        draft_seconds=sum(p.draft_seconds for p in counted),
        plain_seconds=sum(steps), plain_step_seconds=steps, bandwidth_gbs=bandwidth_gbs,
        bytes_per_token=bytes_read_per_token(lm.model) + kv, noise=run_noise(steps),
        judged=sum(p.judged for p in counted), draft_bytes_per_step=draft_bytes_per_step)


@dataclass(frozen=True)
class SpecSweepUpdate:
    points: tuple  # what the sweep measured so far: `SpecRaceSummary`s, or `VerifyCost`s
    message: str
    finished: bool = False


def sweep_k(lm, prompt_ids: list[int], drafts: Sequence[Draft],
            ks: Sequence[int] = tuple(range(1, 9)),
            new_tokens: int = LIMITS.spec_new_tokens.default, shared=None
            ) -> Iterator[SpecSweepUpdate]:
    for k in ks:
        LIMITS.spec_k.check("Draft length k", k)
    bandwidth = machine_bandwidth(shared, lm.device)
    points: list[SpecRaceSummary] = []
    total = len(drafts) * len(ks)
    for draft in drafts:
        for k in ks:
            yield SpecSweepUpdate(tuple(points), f"{draft.key}, k = {k}: racing "
                                  f"({len(points) + 1}/{total})…")
            points.append(run_race(lm, prompt_ids, draft, k, new_tokens, bandwidth_gbs=bandwidth))
    yield SpecSweepUpdate(tuple(points), f"Done: {total} races.", finished=True)


@dataclass(frozen=True)
class RaceUpdate:
    passes: tuple[SpecPass, ...]
    plain_tokens: int
    message: str
    summary: SpecRaceSummary | None = None


def race_updates(lm, prompt_ids: list[int], draft: Draft, k: int = LIMITS.spec_k.default,
                 new_tokens: int = LIMITS.spec_new_tokens.default, shared=None,
                 bandwidth_gbs: float | None = None) -> Iterator[RaceUpdate]:
    """`spec_race` as an update after each pass and its catch-up, then the summary."""
    bandwidth = bandwidth_gbs or machine_bandwidth(shared, lm.device)
    records: list[SpecPass | PlainStep] = []
    passes: list[SpecPass] = []
    plain = 0
    for r in spec_race(lm, prompt_ids, draft, k, new_tokens):
        records.append(r)
        if isinstance(r, SpecPass):
            if passes:  # the previous pass and its catch-up are complete
                yield RaceUpdate(tuple(passes), plain, f"Pass {passes[-1].index}: "
                                 f"{passes[-1].tokens_so_far} tokens")
            passes.append(r)
        else:
            plain += 1
    model = getattr(draft, "model", None)  # a lookup in the text reads no weights per guess
    summary = summarize_spec_race(lm, records, len(prompt_ids), draft.key, k, bandwidth,
                                  bytes_read_per_token(model) if model is not None else 0)
    yield RaceUpdate(tuple(passes), plain, f"Done: {summary.new_tokens} tokens in "
                     f"{summary.passes} passes.", summary)


def run_race(lm, prompt_ids: list[int], draft: Draft, k: int = LIMITS.spec_k.default,
             new_tokens: int = LIMITS.spec_new_tokens.default, shared=None,
             bandwidth_gbs: float | None = None) -> SpecRaceSummary:
    *_, last = race_updates(lm, prompt_ids, draft, k, new_tokens, shared, bandwidth_gbs)
    return last.summary


def spec_race_tokens(prompt: int, new: int, k: int, model_draft: bool) -> int:
    """Tokens `spec_race` feeds at most (every guess rejected, warm-ups included): the prefill
    and n − 1 passes of k + 1 tokens, the plain lane's run; a draft model feeds its own too."""
    lanes = 3 * prompt + (new - 1) * (k + 2) + 3 + WARM_UP_TOKENS
    return lanes + (2 * prompt + (new - 1) * (k + 1) + 3 if model_draft else 0)
