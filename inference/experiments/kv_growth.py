"""Lesson 4: watch the real KV cache grow, one generated token at a time.

After every step the cache's real tensors are read (`kv_cache.snapshot`): the prefill fills it
with the whole prompt; each later step adds one position to every layer.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..generation import next_token, start
from ..kv_cache import CacheSnapshot, snapshot


@dataclass(frozen=True)
class GrowthStep:
    """One output token and the cache right after the step that chose it."""

    index: int
    piece: str
    text: str
    prompt_tokens: int
    seconds: float
    cache: CacheSnapshot
    finished: str | None


def watch_growth(lm, prompt_ids: list[int], max_new_tokens: int = 24,
                 max_new_limit: int = 512) -> Iterator[GrowthStep]:
    """Generate greedily and yield the real cache after every step (step 0: the prefill). The
    cache lags the text by one token: the next pass writes the newest token's keys/values."""
    gen = start(lm, prompt_ids, max_new_tokens=max_new_tokens, max_new_limit=max_new_limit)
    while not gen.finished:
        ev = next_token(lm, gen)
        yield GrowthStep(index=ev.index, piece=ev.piece, text=ev.text,
                         prompt_tokens=len(prompt_ids), seconds=ev.seconds,
                         cache=snapshot(gen.cache), finished=ev.finished)
