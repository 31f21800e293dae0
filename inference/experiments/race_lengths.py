"""How the KV cache's advantage grows with the sequence: one decode step at context length L,
with the cache (one new token through the model, L positions read from the cache) and
without it (all L + 1 tokens through the model again), measured at a few lengths.

Why the race's first tokens undersell the cache: without one, every step is itself a parallel
prefill. While the L tokens still fit in one memory-bound pass, running them all costs little
more than running one (the weights are read once either way; lesson 2). Once the pass is long
enough to be compute-bound, its time grows with L: a step costs O(L) instead of O(1), and
generating n tokens costs O(n²) instead of O(n).

Beyond the measured lengths the lesson draws the theory from the measured points: the cached
step stays at its measured cost, and the recompute step follows the straight line through
the measured ones (`fit`), labelled theoretical.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from ..engine import decode_step, forward, recompute_logits
from ..errors import EmptyPromptError
from ..timing import stopwatch

LENGTHS = (32, 128, 512)  # measured; each recompute step at 512 takes ~1 s on 2 CPU cores
REPEATS = 3  # steps timed per length and lane (median)


@dataclass(frozen=True)
class LengthPoint:
    tokens: int  # context length L: positions before the new token
    cached_seconds: float  # one decode step with L positions cached (median, measured)
    recompute_seconds: float  # one forward pass over L + 1 tokens, no cache (median, measured)

    @property
    def ratio(self) -> float:
        return self.recompute_seconds / self.cached_seconds


@torch.inference_mode()
def step_costs(lm, text_ids: list[int], lengths=LENGTHS, repeats: int = REPEATS
               ) -> Iterator[LengthPoint]:
    """Yield one measured `LengthPoint` per length (`text_ids` repeated to fill the longest)."""
    if not text_ids:
        raise EmptyPromptError("The race needs some text to repeat.")
    model, device = lm.model, lm.device
    filler = (text_ids * (max(lengths) // len(text_ids) + 2))[:max(lengths) + repeats + 1]
    forward(model, torch.tensor([filler[:8]], device=device), DynamicCache())  # warm-up
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
        yield LengthPoint(n, statistics.median(cached), statistics.median(plain))


def fit(points: list[LengthPoint]) -> tuple[float, float]:
    """The recompute step's cost as a + b × L: least squares through the measured points."""
    xs, ys = [p.tokens for p in points], [p.recompute_seconds for p in points]
    if len(points) < 2:
        return ys[0], 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, max(b, 0.0)


def generation_seconds(points: list[LengthPoint], prompt: int, new_tokens: int
                       ) -> tuple[float, float]:
    """Theoretical time to generate `new_tokens` after a `prompt`-token prompt, (with the cache,
    without it): the cache pays the measured step each time; without it step i costs
    a + b × (prompt + i), so the total grows with the square of the length."""
    cached = statistics.fmean(p.cached_seconds for p in points)
    a, b = fit(points)
    plain = sum(a + b * (prompt + i) for i in range(new_tokens))
    return cached * new_tokens, plain
