"""How the KV cache's advantage grows with the sequence: one decode step at context length L,
with the cache (one new token through the model, L positions read from the cache) and
without it (all L + 1 tokens through the model again), measured at a few lengths.

Why the race's first tokens undersell the cache: without one, every step is itself a parallel
prefill. While the L tokens still fit in one memory-bound pass, running them all costs little
more than running one (the weights are read once either way; lesson 2). Once the pass is long
enough to be compute-bound, its time grows with L, and attention's scores with L²: generating
n tokens then redoes about n²/2 tokens of work instead of n.

The cached step is not free of L either: it reads every weight once, a fixed cost, AND the
keys and values of all L cached positions, L × KV bytes per token, and its attention does work
in proportion to L. At short L the weights dominate, so it looks flat; at 4,096 tokens in
float32 the cache is 189 MB, 35% of this model's weights.

Beyond the measured lengths the lesson draws the theory from the measured points: the cached
step as (weights + L × KV bytes) ÷ the bandwidth its longest measured step reached
(`LengthPoint.cached_theory_seconds`), the recompute step as a + b·L + c·L² through the measured
ones (`fit`), both labelled theoretical.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from ..engine import decode_step, forward, recompute_logits
from ..errors import EmptyPromptError
from ..kv_cache import bytes_per_token
from ..timing import stopwatch
from ..weights import bytes_read_per_token
from .context_fit import QuadraticFit, fit_quadratic

LENGTHS = (32, 128, 512)  # measured; each recompute step at 512 takes ~1 s on 2 CPU cores
REPEATS = 3  # steps timed per length and lane (median)
WARM_UP_TOKENS = 8  # the untimed warm-up pass


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
        """Bytes a cached step at context length `tokens` reads: weights + L × KV bytes."""
        return self.weight_bytes + tokens * self.kv_bytes_per_token

    @property
    def cache_share(self) -> float:
        """The cache's share of the bytes this point's cached step read (0 to 1)."""
        return self.tokens * self.kv_bytes_per_token / self.bytes_read(self.tokens)

    def cached_theory_seconds(self, tokens: int) -> float:
        """Theoretical cached step at `tokens`: (weights + L × KV bytes) ÷ the bandwidth this
        point's measured step reached (its bytes ÷ its seconds)."""
        return self.cached_seconds * self.bytes_read(tokens) / self.bytes_read(self.tokens)


@torch.inference_mode()
def step_costs(lm, text_ids: list[int], lengths=LENGTHS, repeats: int = REPEATS
               ) -> Iterator[LengthPoint]:
    """Yield one measured `LengthPoint` per length (`text_ids` repeated to fill the longest)."""
    if not text_ids:
        raise EmptyPromptError("The race needs some text to repeat.")
    model, device, info = lm.model, lm.device, lm.info
    weights = bytes_read_per_token(model)
    kv = bytes_per_token(info.layers, info.kv_heads, info.head_dim, lm.bytes_per_value)
    filler = (text_ids * (max(lengths) // len(text_ids) + 2))[:max(lengths) + repeats + 1]
    forward(model, torch.tensor([filler[:WARM_UP_TOKENS]], device=device),
            DynamicCache())  # warm-up
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
    """The recompute step's cost as a + b·L + c·L²: least squares through the measured points
    (the L² term is attention's scores, each of L + 1 queries against up to L + 1 keys)."""
    return fit_quadratic([p.tokens for p in points], [p.recompute_seconds for p in points])


def generation_seconds(points: list[LengthPoint], prompt: int, new_tokens: int
                       ) -> tuple[float, float]:
    """Theoretical time to generate `new_tokens` after a `prompt`-token prompt, (with the cache,
    without it): with it, step i reads the weights and prompt + i cached positions
    (`cached_theory_seconds` of the longest measured point); without it, step i costs
    a + b·(prompt + i) + c·(prompt + i)², so the total grows at least with the square of n."""
    longest = max(points, key=lambda p: p.tokens)
    cached = sum(longest.cached_theory_seconds(prompt + i) for i in range(new_tokens))
    curve = fit(points)
    plain = sum(curve.at(prompt + i) for i in range(new_tokens))
    return cached, plain


def race_lengths_tokens(lengths: Sequence[int] = LENGTHS, repeats: int = REPEATS) -> int:
    """Tokens `step_costs` feeds: its warm-up, then at each length L an untimed prefill of L,
    `repeats` cached steps and `repeats` recomputes of L + 1 tokens.

    >>> race_lengths_tokens()
    2714
    """
    return WARM_UP_TOKENS + sum(n + repeats + repeats * (n + 1) for n in lengths)
