"""Lesson 5: a serving workload, requests arriving over time with different prompt and
output lengths. The same list of requests is served by each scheduler, so their timelines
can be compared side by side.

Arrival times are seconds on the scheduler's *virtual clock* (see `schedulers.py`): the clock
advances by the measured duration of each forward pass, so a trace replays the same way on
every run, however noisy the machine.

Presets show typical shapes; `random_trace` draws one from a seed (same seed, same trace).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from ..config import LIMITS
from ..errors import SettingOutOfRangeError, check_range
from ..tokens import prompt_ids

# Questions of different lengths: short prompts and long ones share the batch.
PROMPTS = (
    "Hi!",
    "Name a colour.",
    "What is the capital of France?",
    LIMITS.default_prompt,
    "Give me three tips for learning to play the guitar as an adult beginner.",
    "Write a haiku about autumn leaves falling slowly to the ground.",
    "I am planning a weekend trip to the mountains with two friends. "
    "What should we pack, and how do we stay safe if the weather changes?",
    "Summarise in one paragraph what a large language model does when it answers a question.",
)


@dataclass(frozen=True)
class Request:
    """One request: when it arrives, what it asks, and how many tokens it may generate."""

    rid: int
    arrival: float  # seconds on the virtual clock
    text: str
    prompt_ids: tuple[int, ...]
    max_new_tokens: int


# name -> (arrival seconds, prompt index, max new tokens) per request
PRESETS: dict[str, tuple[tuple[float, int, int], ...]] = {
    "Steady mix": tuple((0.5 * i, i % len(PROMPTS), (6, 24, 10, 32, 8, 16)[i % 6])
                        for i in range(10)),
    "Burst then trickle": tuple([(0.0, i, n) for i, n in enumerate((8, 24, 12, 32, 6, 16))]
                                + [(1.5 + 1.0 * j, (j + 2) % len(PROMPTS), 10) for j in range(4)]),
    "One long, many short": tuple([(0.0, 7, 48)]
                                  + [(0.3 + 0.4 * j, j % 6, 6) for j in range(8)]),
}
DEFAULT_PRESET = "Steady mix"


def preset_trace(tokenizer, name: str = DEFAULT_PRESET) -> list[Request]:
    """The named preset as requests (raises a clear error for an unknown name)."""
    if name not in PRESETS:
        raise SettingOutOfRangeError(
            f"Unknown workload {name!r}; choose one of: {', '.join(PRESETS)}.")
    return [_request(tokenizer, rid, arrival, PROMPTS[p], n)
            for rid, (arrival, p, n) in enumerate(PRESETS[name])]


def random_trace(tokenizer, requests: int = 10, rate_per_s: float = 2.0, min_new: int = 4,
                 max_new: int = 32, seed: int = 0) -> list[Request]:
    """A seeded random trace: Poisson arrivals at `rate_per_s`, random prompts and lengths."""
    LIMITS.trace_requests.check("Requests", requests)
    LIMITS.trace_rate_per_s.check("Arrival rate (requests/s)", rate_per_s)
    LIMITS.trace_new_tokens.check("Shortest output (tokens)", min_new)
    check_range("Longest output (tokens)", max_new, min_new, LIMITS.trace_new_tokens.high)
    rng = random.Random(seed)
    clock, out = 0.0, []
    for rid in range(requests):
        text = rng.choice(PROMPTS)
        out.append(_request(tokenizer, rid, round(clock, 3), text, rng.randint(min_new, max_new)))
        clock += rng.expovariate(rate_per_s)
    return out


def _request(tokenizer, rid: int, arrival: float, text: str, max_new: int) -> Request:
    return Request(rid=rid, arrival=float(arrival), text=text,
                   prompt_ids=tuple(prompt_ids(tokenizer, text)), max_new_tokens=int(max_new))

