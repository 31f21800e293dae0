"""What one server step spent, part by part: the model's forward passes, the block
bookkeeping, choosing tokens, handing them to the requests, and the loop's own Python (the rest).
The server records each step (`StepClock.record`); lesson "This machine" and the bench average
them (`mean_parts`). Every edge is device-synced, so a GPU's queued kernels land in their part.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .server_plan import StepPlan
from .timing import stopwatch, sync


@dataclass(frozen=True)
class StepRecord:
    """One server step: its budget split and its parts' times (seconds, device-synced)."""

    plan: StepPlan  # its schedule: the budget split, which rows decoded, whose chunks ran
    first_tokens: int  # requests whose prefill finished this step (their first token)
    forward_s: float  # seconds in the model's forward passes (paged cache reads/writes inside)
    cache_s: float  # seconds of block bookkeeping outside the model (make room, tables, drop)
    sample_s: float  # seconds choosing tokens, detokenizing them, building their events
    handoff_s: float  # seconds handing events to the requests' handlers
    total_s: float  # seconds of the whole step (the parts plus the loop's own Python)
    threads: int = 0  # CPU threads of the step's newest pass (thread_choice.py; 0: not chosen)

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
        """`with clock.part("cache_s"):` adds the block's synced seconds to that part."""
        with stopwatch(self.device) as t:
            yield
        self.seconds[name] += t[0]

    def record(self, **split) -> StepRecord:
        sync(self.device)
        return StepRecord(total_s=time.perf_counter() - self.started, threads=self.threads,
                          **self.seconds, **split)


def mean_parts(records: list[StepRecord] | tuple[StepRecord, ...]) -> dict[str, float]:
    """Mean seconds per part over these steps (with `other_s` and `total_s`; 0 for none)."""
    return {n: sum(getattr(r, n) for r in records) / max(len(records), 1)
            for n in StepClock.PARTS + ("other_s", "total_s")}
