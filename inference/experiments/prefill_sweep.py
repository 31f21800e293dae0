"""Lesson 2: parallel prefill against feeding the same tokens one at a time.

Prefill pushes N prompt tokens through the model in ONE forward pass: the weights are read
once and reused for all N positions, so the matrix units stay busy. Feeding the same N tokens
one per forward pass (what decode is forced to do) reads all the weights N times.
`prefill_sweep()` measures both on the real model for a list of prompt lengths; the
sequential side is measured up to `max_sequential` tokens and, past that, extrapolated from
the measured per-token time (and labelled so).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from ..engine import forward, prefill
from ..timing import stopwatch

WARM_UP_TOKENS = 8  # the untimed warm-up pass
PARALLEL_REPEATS = 2  # timed prefills per length (the best counts)
PER_TOKEN_FROM = 16  # tokens fed one at a time to extrapolate from, when none was fed


@dataclass(frozen=True)
class PrefillPoint:
    tokens: int
    parallel_seconds: float  # one forward pass over all tokens (measured)
    sequential_seconds: float  # one forward pass per token with a cache
    sequential_measured: bool  # False: extrapolated from the measured per-token time


@dataclass(frozen=True)
class SweepProgress:
    done: int
    total: int
    points: tuple[PrefillPoint, ...]
    feeding: int = 0  # tokens of the next length fed one at a time so far (0: none yet)
    one_pass_seconds: float = 0.0  # while feeding: that length's one forward pass (measured)
    fed_seconds: float = 0.0  # while feeding: the `feeding` tokens' one-at-a-time time so far


def sweep_tokens(tokenizer, n: int) -> list[int]:
    """n real token ids of ordinary English text (repeated as needed), for timing."""
    base = tokenizer(
        "The quick brown fox jumps over the lazy dog while the teacher explains how a "
        "language model reads a prompt and writes an answer one piece at a time. ",
        add_special_tokens=False)["input_ids"]
    return (base * (n // len(base) + 1))[:n]


def time_parallel(model, ids: list[int], device, repeats: int = PARALLEL_REPEATS) -> float:
    """Best of `repeats` synced prefill times (seconds) for these tokens."""
    x = torch.tensor([ids], device=device)
    return min(prefill(model, x).seconds for _ in range(repeats))


SEQUENTIAL_STRETCH = 16  # tokens fed one at a time per timed stretch (~1 s on 2 CPU cores)


def sequential_steps(model, ids: list[int], device,
                     stretch: int = SEQUENTIAL_STRETCH) -> Iterator[tuple[int, float]]:
    """Feed the tokens one forward pass at a time, with a KV cache; after each stretch of
    `stretch` tokens, yield (tokens fed, seconds so far). Each stretch is timed on its own and
    the times add up, so whatever runs between two stretches (a lesson yields there, and the
    server takes a step) is never counted."""
    cache, seconds = DynamicCache(), 0.0
    for start in range(0, len(ids), stretch):
        with stopwatch(device) as t:
            for i in ids[start:start + stretch]:
                forward(model, torch.tensor([[i]], device=device), cache)
        seconds += t[0]
        yield min(start + stretch, len(ids)), seconds


def time_sequential(model, ids: list[int], device) -> float:
    """Seconds to feed the tokens one forward pass at a time, with a KV cache."""
    *_, (_, seconds) = sequential_steps(model, ids, device, stretch=max(len(ids), 1))
    return seconds


def prefill_sweep(lm, lengths: list[int], max_sequential: int = 128
                  ) -> Iterator[SweepProgress]:
    """Measure each length; yield progress after each measurement, and while a length is fed
    one token at a time, after each timed stretch (`feeding` > 0, no new point yet)."""
    device, model = lm.device, lm.model
    warm = torch.tensor([sweep_tokens(lm.tokenizer, WARM_UP_TOKENS)], device=device)
    forward(model, warm, DynamicCache())  # warm-up, untimed
    points: list[PrefillPoint] = []
    per_token = None
    lengths = sorted(set(lengths))
    for done, n in enumerate(lengths, start=1):
        ids = sweep_tokens(lm.tokenizer, n)
        par = time_parallel(model, ids, device)
        if n <= max_sequential:
            for fed, seq_so_far in sequential_steps(model, ids, device):
                seq = seq_so_far
                if fed < n:  # a job ends here: the server may take a step
                    yield SweepProgress(done - 1, len(lengths), tuple(points), fed, par,
                                        seq_so_far)
            measured, per_token = True, seq / n
        else:
            if per_token is None:
                per_token = time_sequential(model, ids[:PER_TOKEN_FROM], device) / PER_TOKEN_FROM
            seq, measured = per_token * n, False
        points.append(PrefillPoint(n, par, seq, measured))
        yield SweepProgress(done, len(lengths), tuple(points))


def prefill_sweep_tokens(lengths: Sequence[int], max_sequential: int) -> int:
    """Tokens `prefill_sweep` feeds: its warm-up, `PARALLEL_REPEATS` prefills per length, each
    length up to `max_sequential` fed one token at a time (`PER_TOKEN_FROM` when none is).

    >>> prefill_sweep_tokens([1, 8, 32, 128, 512], max_sequential=32)
    1411
    """
    lengths = sorted(set(lengths))
    fed = [n for n in lengths if n <= max_sequential]
    return (WARM_UP_TOKENS + PARALLEL_REPEATS * sum(lengths) + sum(fed)
            + (PER_TOKEN_FROM if lengths and not fed else 0))
