"""Where one server step's time and token budget go, recorded by the server's loop.

A step of the serving engine is: cache work (blocks taken and given back, block tables built,
fresh blocks zeroed), the forward pass (the model, with the paged cache's writes and gathers
inside it), choosing each row's token and turning it into text (sampling + detokenizing), and
handing each request its event (the queue its handler reads). `StepRecord` holds those four
parts, device-synced, and the step's token budget split: how many tokens went to running rows
(one each) and how many to newcomers' prompt chunks (chunked prefill, `server.py`).

`StepClock` is the small accumulator the loop fills while it runs one step.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .timing import sync


@dataclass(frozen=True)
class StepRecord:
    """One server step: its budget split and its parts' times (seconds, device-synced)."""

    index: int  # step number since the server started
    ended: float  # perf_counter() seconds when the step ended
    budget_tokens: int  # the per-step token budget (0 = unchunked: whole prompts at once)
    decode_tokens: int  # tokens fed for running rows (one per row)
    prefill_tokens: int  # prompt tokens computed for newcomers (chunks, or whole prompts)
    rows: int  # requests in the batch during the step (decoding + prefilling)
    prefill_rows: int  # requests whose prompt (or a chunk of it) ran this step
    first_tokens: int  # requests whose prefill finished this step (their first token)
    decoded_rids: tuple[int, ...]  # request ids that got a decode token this step
    chunk_rids: tuple[int, ...]  # request ids whose prompt chunk ran this step
    forward_s: float  # seconds in the model's forward passes (paged cache reads/writes inside)
    cache_s: float  # seconds of block bookkeeping outside the model (make room, tables, drop)
    sample_s: float  # seconds choosing tokens, detokenizing them, building their events
    handoff_s: float  # seconds handing events to the requests' handlers
    total_s: float  # seconds of the whole step (the parts plus the loop's own Python)
    threads: int = 0  # CPU threads of the step's newest pass (thread_choice.py; 0: not chosen)

    @property
    def step_tokens(self) -> int:
        """Tokens the step's forward passes computed (what the budget limits)."""
        return self.decode_tokens + self.prefill_tokens

    @property
    def other_s(self) -> float:
        """Seconds of the step outside the four named parts."""
        return max(self.total_s - self.forward_s - self.cache_s - self.sample_s
                   - self.handoff_s, 0.0)


class StepClock:
    """Seconds per part for one step, added up as the loop runs (synced at each edge)."""

    PARTS = ("forward_s", "cache_s", "sample_s", "handoff_s")

    def __init__(self, device) -> None:
        self.device = device
        self.seconds = dict.fromkeys(self.PARTS, 0.0)
        self.threads = 0  # set by the server's passes on a CPU (thread_choice.py)
        self.started = time.perf_counter()

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """`with clock.part("cache_s"): ...` adds the synced seconds to that part."""
        sync(self.device)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            sync(self.device)
            self.seconds[name] += time.perf_counter() - t0

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] += seconds

    def move(self, src: str, dst: str, seconds: float) -> None:
        """Re-label seconds already counted (the forward pass timed inside a cache call)."""
        seconds = min(seconds, self.seconds[src])
        self.seconds[src] -= seconds
        self.seconds[dst] += seconds

    def record(self, **split) -> StepRecord:
        sync(self.device)
        now = time.perf_counter()
        return StepRecord(ended=now, total_s=now - self.started, threads=self.threads,
                          **self.seconds, **split)


def mean_parts(records: list[StepRecord] | tuple[StepRecord, ...]) -> dict[str, float]:
    """Mean seconds per part over these steps (with `other_s` and `total_s`)."""
    names = StepClock.PARTS + ("other_s", "total_s")
    if not records:
        return dict.fromkeys(names, 0.0)
    return {n: sum(getattr(r, n) for r in records) / len(records) for n in names}
