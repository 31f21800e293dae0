"""Lesson 2: parallel prefill against feeding the same tokens one at a time.

Prefill pushes N prompt tokens through the model in ONE pass, reading the weights once; one
token per pass (what decode must do) reads them N times. The two lanes run in interleaved
rounds, so both share the machine's noise. Past `max_sequential` tokens the one-at-a-time side
is extrapolated from `PER_TOKEN_FROM` tokens (and labelled so).
"""
from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from ..generation import forward, prefill, stream
from ..thread_choice import fastest_threads, num_threads
from ..timing import stopwatch
from . import WARM_UP_PASSES, WARM_UP_TOKENS
from .noise import ROUNDS, Noise, Robust, low_quantile, one_pass, running_median

PARALLEL_REPEATS = 2  # `time_parallel`'s default: timed prefills, the best counts
PER_TOKEN_FROM = 16  # tokens fed one at a time for a length that is extrapolated
DECODE_STEPS = 4  # `measure_prompt`: decode steps timed after the prefill, for comparison


@dataclass(frozen=True)
class PrefillPoint:
    tokens: int
    parallel_seconds: float  # one forward pass over all tokens (low quantile of the rounds)
    sequential_seconds: float  # one forward pass per token with a cache (robust total)
    sequential_measured: bool  # False: extrapolated from the measured per-token time
    robust: Robust | None = None  # the speed-up (sequential ÷ parallel) with its range
    impossible: str | None = None  # why the speed-up cannot be right (None: it can)
    attempt: int = 0  # 1: this length measured again after an impossible first figure
    threads: int = 0  # CPU threads both lanes ran at (0: not recorded)

    @property
    def speedup(self) -> float:
        """One token at a time ÷ one pass (the robust estimate when there is one)."""
        if self.robust is not None:
            return self.robust.estimate
        return self.sequential_seconds / self.parallel_seconds if self.parallel_seconds else 0.0


@dataclass(frozen=True)
class SweepProgress:
    done: int
    total: int
    points: tuple[PrefillPoint, ...]
    feeding: int = 0  # tokens of the next length fed one at a time so far (0: none yet)
    one_pass_seconds: float = 0.0  # while feeding: that length's one forward pass (measured)
    fed_seconds: float = 0.0  # while feeding: the `feeding` tokens' one-at-a-time time so far


def sweep_tokens(tokenizer, n: int) -> list[int]:
    """n token ids of ordinary English text (repeated as needed), for timing."""
    base = tokenizer(
        "The quick brown fox jumps over the lazy dog while the teacher explains how a "
        "language model reads a prompt and writes an answer one piece at a time. ",
        add_special_tokens=False)["input_ids"]
    return (base * (n // len(base) + 1))[:n]


def time_parallel(model, ids: list[int], device, repeats: int = PARALLEL_REPEATS) -> float:
    """Best of `repeats` synced prefill times (seconds) for these tokens."""
    x = torch.tensor([ids], device=device)
    return min(prefill(model, x).seconds for _ in range(repeats))


SEQUENTIAL_STRETCH = 16  # tokens fed one at a time between two yields (~1 s on 2 CPU cores)


def robust_point(tokens: int, parallel: Sequence[float], steps: Sequence[float],
                 rounds: Sequence[int], measured: bool, attempt: int = 0,
                 threads: int = 0) -> PrefillPoint:
    """A length's point: `parallel[k]` is round k's one pass, `steps[i]` a token fed one at a
    time in round `rounds[i]`. The one pass counts at its low quantile, the fed steps at their
    running medians (scaled to `tokens`); the range is each round's own ratio."""
    smooth = running_median(steps)
    per_token = statistics.fmean(smooth)
    sequential, one = per_token * tokens, low_quantile(parallel)
    estimate = sequential / one
    per_round = [statistics.fmean([s for s, r in zip(smooth, rounds) if r == k]) * tokens / p
                 for k, p in enumerate(parallel) if k in set(rounds) and p > 0]
    robust = Robust(estimate, min(per_round + [estimate]), max(per_round + [estimate]),
                    max(len(per_round), 1))
    return PrefillPoint(tokens, one, sequential, measured, robust,
                        one_pass(tokens, estimate), attempt, threads)


def measure_length(lm, n: int, max_sequential: int, threads: int, attempt: int = 0,
                   rounds: int = ROUNDS) -> Iterator[tuple[int, float, float] | PrefillPoint]:
    """One length's rounds (a pass over the n tokens, then its share fed one at a time): yields
    (fed, that round's pass, fed seconds) every `SEQUENTIAL_STRETCH` tokens, then the point."""
    model, device = lm.model, lm.device
    ids = sweep_tokens(lm.tokenizer, n)
    measured = n <= max_sequential
    fed = ids if measured else ids[:PER_TOKEN_FROM]
    cache, passes, steps, owner = DynamicCache(), [], [], []
    bounds = [len(fed) * k // rounds for k in range(rounds + 1)]
    for k in range(rounds):
        with num_threads(threads):
            passes.append(time_parallel(model, ids, device, repeats=1))
        for i in range(bounds[k], bounds[k + 1]):
            with num_threads(threads), stopwatch(device) as t:
                forward(model, torch.tensor([[fed[i]]], device=device), cache)
            steps.append(t[0])
            owner.append(k)
            if (i + 1) % SEQUENTIAL_STRETCH == 0 and i + 1 < len(fed):
                yield i + 1, passes[-1], sum(steps)  # a job ends here: the server may step
    yield robust_point(n, passes, steps, owner, measured, attempt, threads)


def prefill_sweep(lm, lengths: list[int], max_sequential: int = 128
                  ) -> Iterator[SweepProgress]:
    """Measure each length; yield progress after each, and after each stretch fed one token at
    a time (`feeding` > 0). An impossible speed-up is measured once more (`attempt` 1)."""
    warm = torch.tensor([sweep_tokens(lm.tokenizer, WARM_UP_TOKENS)], device=lm.device)
    # warm-ups, timed to choose the thread count both lanes run at: the default or 1
    threads = fastest_threads(lambda: forward(lm.model, warm, DynamicCache()), lm.device,
                              runs=WARM_UP_PASSES)
    points: list[PrefillPoint] = []
    lengths = sorted(set(lengths))
    for done, n in enumerate(lengths, start=1):
        for attempt in (0, 1):
            for item in measure_length(lm, n, max_sequential, threads, attempt):
                if isinstance(item, PrefillPoint):
                    point = item
                else:  # a stretch fed: progress (the server may step here)
                    yield SweepProgress(done - 1, len(lengths), tuple(points), *item)
            if point.impossible is None:
                break
        points.append(point)
        yield SweepProgress(done, len(lengths), tuple(points))


def prefill_sweep_tokens(lengths: Sequence[int], max_sequential: int) -> int:
    """Tokens `prefill_sweep` feeds (no length measured again): warm-ups, `ROUNDS` passes over
    each length, and each fed one token at a time (`PER_TOKEN_FROM` past `max_sequential`)."""
    lengths = sorted(set(lengths))
    fed = sum(n if n <= max_sequential else min(n, PER_TOKEN_FROM) for n in lengths)
    return WARM_UP_PASSES * WARM_UP_TOKENS + ROUNDS * sum(lengths) + fed


@dataclass(frozen=True)
class PrefillMeasurement:
    """Lesson 2's measurement of a learner's own prompt (seconds, synced)."""

    prompt_tokens: int
    prefill_seconds: float  # the forward pass over the whole prompt
    ttft_seconds: float  # prefill + choosing the first token
    decode_step_seconds: float | None  # median decode step (None: the answer ended at once)
    decode_steps: int
    events: tuple = ()  # the measured StepEvents, the prefill first (for the diagram)
    prompt_ids: tuple[int, ...] = ()
    noise: Noise | None = None  # the noise rule's reading around it, where the caller took one


def measure_prompt(lm, ids: list[int], decode_steps: int = DECODE_STEPS) -> PrefillMeasurement:
    """Prefill the prompt's ids (checked by the caller), then `decode_steps` to compare."""
    first, *rest = stream(lm, ids, max_new_tokens=decode_steps + 1)
    return PrefillMeasurement(
        prompt_tokens=len(ids), prefill_seconds=first.forward_seconds, ttft_seconds=first.seconds,
        decode_step_seconds=statistics.median(e.seconds for e in rest) if rest else None,
        decode_steps=len(rest), events=(first, *rest), prompt_ids=tuple(ids))
