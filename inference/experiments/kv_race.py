"""Lesson 4: what the cache saves. Cache on vs off, raced on the same prompt step by step, then
at longer lengths; and a shared prefix prefilled once.

**cached** prefills the prompt, then runs ONE token a step and reads the stored keys/values;
**recompute** runs the WHOLE sequence again every step. The lanes take turns, so both see the
same machine noise, and make the same greedy tokens. Short races undersell the cache
(`step_costs`): beyond the measured lengths, theory extends them (labelled so).

**Prefix reuse**: a shared system prompt has the same keys and values every time (a position
attends only to those before it), so it is prefilled once and per question its cache is copied:
time to first token pays for the question alone, and the outputs match. Left out: eviction,
sharing across processes, paged caches.
"""
from __future__ import annotations

import copy
import os
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import torch
from transformers import DynamicCache

from ..config import LIMITS
from ..errors import EmptyPromptError, PromptTooLongError
from ..generation import decode_step, forward, prefill, recompute_logits
from ..kv_cache import bytes_per_token, crop_to
from ..loading import bytes_read_per_token
from ..thread_choice import fastest_threads, num_threads
from ..timing import stopwatch
from ..tokens import clean_text, prompt_ids
from . import WARM_UP_PASSES, WARM_UP_TOKENS
from .context_theory import QuadraticFit, fit_quadratic
from .noise import Robust, cached_step, paired_ratio

CACHED = "cached"
RECOMPUTE = "recompute"
LENGTHS = (32, 128, 512)  # `step_costs`; each recompute step at 512 takes ~1 s on 2 CPU cores
REPEATS = 3  # steps timed per length and lane (median)


@dataclass(frozen=True)
class RaceStep:
    index: int  # output token number, 0 = first token (after the prefill)
    lane: str  # CACHED or RECOMPUTE
    token_id: int
    forward_tokens: int  # tokens this step's forward pass processed
    sequence: int  # tokens the model has seen for this step (prompt + generated so far)
    seconds: float  # synced forward + argmax
    logit_gap: float | None = None  # recompute lane: max |logits - cached logits|
    attempt: int = 0  # 1: the race run again because the first gave an impossible figure


@dataclass(frozen=True)
class RaceSummary:
    prompt_tokens: int
    new_tokens: int
    cached_seconds: float
    recompute_seconds: float
    cached_forward_tokens: int
    recompute_forward_tokens: int
    same_tokens: bool
    max_logit_gap: float
    robust: Robust | None = None  # the paired-lanes ratio with its range (None: one step)
    impossible: str | None = None  # why the speed-up cannot be right (None: it can)
    attempt: int = 0  # 1: these steps are the race run again

    @property
    def speedup(self) -> float:
        """The headline: the robust paired ratio (the ratio of totals for a single step)."""
        return self.robust.estimate if self.robust is not None else self.totals_ratio

    @property
    def totals_ratio(self) -> float:
        """Recompute lane's total time ÷ cached lane's (every step as measured)."""
        return self.recompute_seconds / self.cached_seconds if self.cached_seconds else 0.0

    @property
    def work_ratio(self) -> float:
        return self.recompute_forward_tokens / max(self.cached_forward_tokens, 1)


@torch.inference_mode()
def race(lm, prompt_ids: list[int], new_tokens: int = LIMITS.race_new_tokens.default
         ) -> Iterator[RaceStep]:
    """A cached step, then its recompute step, for `new_tokens` greedy tokens (no stopping)."""
    if not prompt_ids:
        raise EmptyPromptError("The prompt is empty: type some text first.")
    LIMITS.race_new_tokens.check("New tokens", new_tokens)
    model, device = lm.model, lm.device
    warm = torch.tensor([prompt_ids[:WARM_UP_TOKENS]], device=device)
    # warm-up, then the thread count both lanes run at: the faster of the default and 1
    threads = fastest_threads(lambda: forward(model, warm, DynamicCache()), device)

    cache = DynamicCache()
    cached_seq, plain_seq = list(prompt_ids), list(prompt_ids)
    for i in range(new_tokens):
        fed = cached_seq if i == 0 else cached_seq[-1:]  # the prompt, then one token a step
        with num_threads(threads), stopwatch(device) as t:
            logits = forward(model, torch.tensor([fed], device=device), cache)[0]  # [V]
            token = int(logits.argmax())
        yield RaceStep(index=i, lane=CACHED, token_id=token, forward_tokens=len(fed),
                       sequence=len(cached_seq), seconds=t[0])

        with num_threads(threads), stopwatch(device) as t:
            full = recompute_logits(model, plain_seq, device)  # [V], the whole sequence again
            plain_token = int(full.argmax())
        gap = float((full.float() - logits.float()).abs().max())
        yield RaceStep(index=i, lane=RECOMPUTE, token_id=plain_token,
                       forward_tokens=len(plain_seq), sequence=len(plain_seq), seconds=t[0],
                       logit_gap=gap)
        cached_seq.append(token)
        plain_seq.append(plain_token)


def checked_race(lm, prompt_ids: list[int], new_tokens: int = LIMITS.race_new_tokens.default
                 ) -> Iterator[RaceStep]:
    """`race`, run once more (steps marked `attempt=1`) when the first speed-up is impossible."""
    steps = []
    for step in race(lm, prompt_ids, new_tokens):
        steps.append(step)
        yield step
    if summarize(steps, len(prompt_ids)).impossible:
        for step in race(lm, prompt_ids, new_tokens):
            yield replace(step, attempt=1)


def summarize(steps: list[RaceStep], prompt_tokens: int) -> RaceSummary:
    """Totals over the steps both lanes finished, of the newest attempt only."""
    attempt = max((s.attempt for s in steps), default=0)
    steps = [s for s in steps if s.attempt == attempt]
    cached = [s for s in steps if s.lane == CACHED]
    plain = [s for s in steps if s.lane == RECOMPUTE]
    n = min(len(cached), len(plain))
    cached, plain = cached[:n], plain[:n]
    # decode steps paired; step 0 (the same pass over the prompt in both) once, at its faster time
    robust = (paired_ratio([s.seconds for s in plain[1:]], [s.seconds for s in cached[1:]],
                           common=min(cached[0].seconds, plain[0].seconds)) if n > 1 else None)
    return RaceSummary(
        prompt_tokens=prompt_tokens, new_tokens=n,
        cached_seconds=sum(s.seconds for s in cached),
        recompute_seconds=sum(s.seconds for s in plain),
        cached_forward_tokens=sum(s.forward_tokens for s in cached),
        recompute_forward_tokens=sum(s.forward_tokens for s in plain),
        same_tokens=[s.token_id for s in cached] == [s.token_id for s in plain],
        max_logit_gap=max((s.logit_gap or 0.0 for s in plain), default=0.0), robust=robust,
        impossible=cached_step(1.0, robust.estimate) if robust else None, attempt=attempt)


def race_tokens(prompt: int, new: int) -> int:
    """Tokens `race` feeds at most, warm-ups included: the cached lane P + n − 1, the
    recomputing lane the whole sequence every step, Σ_{i<n} P + i."""
    return (WARM_UP_PASSES * WARM_UP_TOKENS + prompt + new - 1 + new * prompt
            + new * (new - 1) // 2)


@dataclass(frozen=True)
class LengthPoint:
    tokens: int  # context length L: positions before the new token
    cached_seconds: float  # one decode step with L positions cached (median, measured)
    recompute_seconds: float  # one forward pass over L + 1 tokens, no cache (median, measured)
    weight_bytes: int  # bytes of weights one cached step reads (the loaded model's)
    kv_bytes_per_token: int  # cache bytes one position holds (K and V, all layers)

    @property
    def ratio(self) -> float:
        return self.recompute_seconds / self.cached_seconds

    def bytes_read(self, tokens: int) -> int:
        return self.weight_bytes + tokens * self.kv_bytes_per_token

    def cached_theory_seconds(self, tokens: int) -> float:
        """Theoretical: (weights + L × KV bytes) ÷ the bandwidth this point's step reached."""
        return self.cached_seconds * self.bytes_read(tokens) / self.bytes_read(self.tokens)


@torch.inference_mode()
def step_costs(lm, text_ids: list[int], lengths=LENGTHS, repeats: int = REPEATS
               ) -> Iterator[LengthPoint]:
    """One measured `LengthPoint` per length (`text_ids` repeated to fill the longest)."""
    if not text_ids:
        raise EmptyPromptError("The race needs some text to repeat.")
    model, device, info = lm.model, lm.device, lm.info
    weights = bytes_read_per_token(model)
    kv = bytes_per_token(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value)
    filler = (text_ids * (max(lengths) // len(text_ids) + 2))[:max(lengths) + repeats + 1]
    forward(model, torch.tensor([filler[:WARM_UP_TOKENS]], device=device), DynamicCache())
    for n in lengths:
        cache = DynamicCache()
        forward(model, torch.tensor([filler[:n]], device=device), cache)  # untimed prefill
        cached = []
        for i in range(repeats):
            with stopwatch(device) as t:
                decode_step(model, torch.tensor([filler[n + i]], device=device), cache)
            cached.append(t[0])
        plain = []
        for _ in range(repeats):
            with stopwatch(device) as t:
                recompute_logits(model, filler[:n + 1], device)
            plain.append(t[0])
        yield LengthPoint(n, statistics.median(cached), statistics.median(plain), weights, kv)


def fit(points: list[LengthPoint]) -> QuadraticFit:
    """The recompute step's a + b·L + c·L² through the measured points."""
    return fit_quadratic([p.tokens for p in points], [p.recompute_seconds for p in points])


def generation_seconds(points: list[LengthPoint], prompt: int, new_tokens: int
                       ) -> tuple[float, float]:
    """Theoretical seconds (cached, recomputing) for `new_tokens` after `prompt` tokens."""
    longest, curve = max(points, key=lambda p: p.tokens), fit(points)
    lengths = range(prompt, prompt + new_tokens)
    return (sum(longest.cached_theory_seconds(n) for n in lengths),
            sum(curve.at(n) for n in lengths))


def race_lengths_tokens(lengths: Sequence[int] = LENGTHS, repeats: int = REPEATS) -> int:
    """Tokens `step_costs` feeds: its warm-up, then at each length L an untimed prefill of L,
    `repeats` cached steps and `repeats` recomputes of L + 1 tokens."""
    return WARM_UP_TOKENS + sum(n + repeats + repeats * (n + 1) for n in lengths)


@dataclass(frozen=True)
class PrefixCache:
    ids: tuple[int, ...]
    cache: DynamicCache
    seconds: float  # the one-time prefill, paid before any question arrives


@dataclass(frozen=True)
class PrefixRun:
    question: str
    prompt_tokens: int  # the whole prompt: prefix + question
    reused_tokens: int  # positions taken from the stored cache
    ttft_full: float  # full prefill + first token choice
    ttft_reuse: float  # copy of the prefix cache + prefill of the rest + first token choice
    tokens_full: tuple[int, ...]
    tokens_reuse: tuple[int, ...]
    text: str  # the answer (from the reuse path)

    @property
    def same(self) -> bool:
        return self.tokens_full == self.tokens_reuse

    @property
    def speedup(self) -> float:
        return self.ttft_full / self.ttft_reuse if self.ttft_reuse else 0.0


def shared_prefix_ids(tokenizer, system: str) -> list[int]:
    """Chat-template tokens up to the end of the system turn (what every request shares)."""
    if not system or not clean_text(system).strip():
        raise EmptyPromptError("The system prompt is empty: the demo needs a shared prefix.")
    full = full_prompt_ids(tokenizer, system, "x")
    start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    turns = [i for i, t in enumerate(full) if t == start]  # typed markers are never this id
    return full[: turns[-2]]  # up to the user's turn (the last one opens the answer)


def full_prompt_ids(tokenizer, system: str, question: str) -> list[int]:
    if not question or not clean_text(question).strip():
        raise EmptyPromptError("A question is empty: type at least one question.")
    return prompt_ids(tokenizer, question, system=system)  # the app's limits apply


def prefix_request_tokens(tokenizer, system: str, questions: list[str], new_tokens: int,
                          budget_tokens: int) -> int:
    """Tokens one prefix-reuse request feeds, counted before it runs: every question's whole
    prompt prefilled twice (bounding the reuse path's) and answered twice. Raises
    PromptTooLongError over `budget_tokens` (all questions together)."""
    work = sum(2 * (len(full_prompt_ids(tokenizer, system, q)) + new_tokens) for q in questions)
    if work > budget_tokens:
        raise PromptTooLongError(
            f"These {len(questions)} questions need about {work:,} tokens through the model "
            f"(each prompt prefilled twice and answered twice), over this lesson's budget of "
            f"{budget_tokens:,} tokens per request. Use fewer or shorter questions, or a "
            "shorter system prompt.")
    return work


def prefill_prefix(lm, ids: list[int]) -> PrefixCache:
    result = prefill(lm.model, torch.tensor([ids], device=lm.device))
    return PrefixCache(ids=tuple(ids), cache=result.cache, seconds=result.seconds)


@torch.inference_mode()
def greedy_continue(lm, logits: torch.Tensor, cache: DynamicCache, new_tokens: int) -> list[int]:
    out = [int(logits.argmax())]
    stop = lm.stop_ids
    while len(out) < new_tokens and out[-1] not in stop:
        logits = decode_step(lm.model, torch.tensor([out[-1]], device=lm.device), cache)[0]
        out.append(int(logits.argmax()))
    return out


@torch.inference_mode()
def prefix_runs(lm, prefix: PrefixCache, system: str, questions: list[str],
                new_tokens: int = LIMITS.prefix_new_tokens.default) -> Iterator[PrefixRun]:
    """Per question: TTFT with a full prefill and with the stored prefix, and both outputs."""
    LIMITS.prefix_new_tokens.check("New tokens", new_tokens)
    if not questions:
        raise EmptyPromptError("Type at least one question.")
    for q in questions:
        ids = full_prompt_ids(lm.tokenizer, system, q)
        with stopwatch(lm.device) as full:  # the whole prompt prefilled into a fresh cache
            whole = prefill(lm.model, torch.tensor([ids], device=lm.device))
            whole.logits.argmax()
        # copy the prefix cache, prefill the rest (at least one token: its pass gives the scores)
        reused = min(len(os.path.commonprefix([prefix.ids, tuple(ids)])), len(ids) - 1)
        with stopwatch(lm.device) as reuse:
            cache = copy.deepcopy(prefix.cache)
            crop_to(cache, reused)
            logits = forward(lm.model, torch.tensor([ids[reused:]], device=lm.device), cache)[0]
            logits.argmax()
        tokens_f = greedy_continue(lm, whole.logits[0], whole.cache, new_tokens)
        tokens_r = greedy_continue(lm, logits, cache, new_tokens)
        yield PrefixRun(question=q, prompt_tokens=len(ids), reused_tokens=reused,
                        ttft_full=full[0], ttft_reuse=reuse[0], tokens_full=tuple(tokens_f),
                        tokens_reuse=tuple(tokens_r),
                        text=lm.tokenizer.decode(tokens_r, skip_special_tokens=True))


def prefix_reuse_tokens(tokenizer, system: str, questions: list[str], new_tokens: int) -> int:
    """Tokens the demo feeds: the shared prefix once, then `prefix_request_tokens`."""
    return len(shared_prefix_ids(tokenizer, system)) + prefix_request_tokens(
        tokenizer, system, questions, new_tokens, budget_tokens=2**62)
