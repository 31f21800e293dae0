"""Lesson 6's speed figure: a precision mode's decode speed against float32's, raced in pairs.

Run one after another, another program can slow one mode and not the next, so the two decode
the same prompt taking turns step by step. The mode's tokens/s is held to bandwidth ÷ its bytes
per token (float32 runs too close to that ceiling to be held to it).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch
from transformers import DynamicCache

from ..engine import decode_step, forward, prefill
from ..thread_choice import fastest_threads, num_threads
from ..timing import stopwatch
from . import sanity
from .robust import Robust, paired_ratio, running_median
from .roofline import ceiling_tokens_per_s, measure_read_bandwidth

WARM_UP_TOKENS = 8  # the untimed warm-up pass of each model: at most the prompt's first 8
BASE_WARM_UPS = 4  # float32's: `fastest_threads` times 2 thread counts twice (or untimed)


@dataclass(frozen=True)
class SpeedRace:
    key: str  # the mode raced against float32 ("int4")
    base_seconds: tuple[float, ...]  # float32's decode steps, in order (the first is warm-up)
    mode_seconds: tuple[float, ...]  # the mode's, each timed right after float32's
    robust: Robust | None  # the mode's tokens/s ÷ float32's, paired (None: under 2 steps)
    ceilings: tuple[float, float] = (0.0, 0.0)  # tokens/s bandwidth allows: fp32, mode (0: none)
    impossible: str | None = None  # why the figure cannot be right (None: it can)
    attempt: int = 0  # 1: the race run again after an impossible first one
    threads: int = 0  # CPU threads both lanes ran at

    @property
    def speedup(self) -> float:
        """The mode's decode speed in times float32's (the robust paired estimate)."""
        return self.robust.estimate if self.robust is not None else 0.0

    @property
    def tokens_per_s(self) -> tuple[float, float]:
        """(float32's, the mode's) tokens/s, smoothed as `paired_ratio` does (they divide to it)."""
        return tuple(len(s) / sum(running_median(s)) if s else 0.0
                     for s in (self.base_seconds[1:], self.mode_seconds[1:]))


def judged(key: str, base: list[float], mode: list[float], ceilings: tuple[float, float],
           attempt: int = 0, threads: int = 0) -> SpeedRace:
    """The race's record from its step times, the mode's speed held to `ceilings[1]`."""
    robust = paired_ratio(base[1:], mode[1:]) if min(len(base), len(mode)) > 1 else None
    race = SpeedRace(key, tuple(base), tuple(mode), robust, ceilings, None, attempt, threads)
    return replace(race, impossible=sanity.bandwidth(race.tokens_per_s[1], ceilings[1])
                   if robust else None)


@torch.inference_mode()
def speed_race(key: str, base_model, mode_model, prompt_ids: list[int], n: int, device,
               ceilings: tuple[float, float] = (0.0, 0.0), attempt: int = 0
               ) -> Iterator[int | SpeedRace]:
    """`n` timed decode steps each, float32's then the mode's; the steps done after each pair
    (the server may step there), then the race."""
    warm = torch.tensor([list(prompt_ids[:WARM_UP_TOKENS])], device=device)
    forward(mode_model, warm, DynamicCache())  # the mode's warm-up, untimed
    warmed = []

    def warm_up() -> None:
        warmed.append(forward(base_model, warm, DynamicCache()) is not None)

    threads = fastest_threads(warm_up, device)  # float32's warm-ups pick the thread count
    for _ in range(BASE_WARM_UPS - len(warmed)):  # always as many, untimed
        warm_up()
    x = torch.tensor([list(prompt_ids)], device=device)  # [1, P]
    lanes = []
    for model in (base_model, mode_model):
        with num_threads(threads):
            pre = prefill(model, x)
        lanes.append([model, pre.cache, pre.logits.argmax(-1), []])  # token: [1]
    for i in range(n):
        for lane in lanes:
            model, cache, token, times = lane
            with num_threads(threads), stopwatch(device) as t:
                lane[2] = decode_step(model, token, cache).argmax(-1)  # [1]
            times.append(t[0])
        yield i + 1
    yield judged(key, lanes[0][3], lanes[1][3], ceilings, attempt, threads)


def checked_speed_race(key: str, base_model, mode_model, prompt_ids: list[int], n: int, device,
                       bytes_per_token: tuple[int, int] = (0, 0), bandwidth_gbs: float = 0.0
                       ) -> Iterator[int | SpeedRace]:
    """`speed_race` with each lane's ceiling (`bandwidth_gbs` ÷ its `bytes_per_token`), run once
    more when impossible, the bandwidth measured again first (the higher counts)."""
    for attempt in (0, 1):
        if attempt and bandwidth_gbs:
            bandwidth_gbs = max(bandwidth_gbs, measure_read_bandwidth(device))
        ceilings = tuple(ceiling_tokens_per_s(bandwidth_gbs, b) for b in bytes_per_token)
        for item in speed_race(key, base_model, mode_model, prompt_ids, n, device, ceilings,
                               attempt):
            yield item
        if item.impossible is None:
            return


def speed_race_tokens(prompt: int, new: int) -> int:
    """Tokens `speed_race` feeds: warm-ups of at most 8 (float32's `BASE_WARM_UPS`, the mode's
    one), then per model the prompt's prefill and `new` decode steps."""
    return (BASE_WARM_UPS + 1) * min(prompt, WARM_UP_TOKENS) + 2 * (prompt + new)
