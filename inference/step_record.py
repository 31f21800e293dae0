"""What the server's loop records, and what its live "Server" view reads: one step's parts
and budget split (`StepRecord`, filled by a `StepClock` during the step), the server's running
account (`ServerRecord`) and the snapshot of it the view reads between steps (`ServerStats`).
Bookkeeping only, called under the server's lock.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .paged_batch import PoolStats
from .server_plan import StepPlan
from .thread_choice import ThreadFigure
from .timing import stopwatch, sync


@dataclass(frozen=True)
class StepRecord:
    """One server step: its budget split and its parts' times (seconds, device-synced)."""

    index: int  # step number since the server started
    ended: float  # perf_counter() seconds when the step ended
    budget_tokens: int  # the per-step token budget (0 = unchunked: whole prompts at once)
    decode_tokens: int  # tokens fed for running rows (one per row)
    prefill_tokens: int  # prompt tokens computed for newcomers (chunks, or whole prompts)
    rows: int  # requests in the batch during the step (decoding + prefilling)
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
        """`with clock.part("cache_s"):` adds the block's synced seconds to that part."""
        with stopwatch(self.device) as t:
            yield
        self.seconds[name] += t[0]

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


@dataclass(frozen=True)
class ServerStats:
    """What the live "Server" view shows, read between steps."""

    active: int  # rows in the current batch
    queued: int  # requests waiting for a row
    paused: bool  # the loop is held by `exclusive()` (a test or benchmark filling the queue)
    steps: int  # forward passes since start
    served: int  # requests finished since start
    unread: int  # requests stopped since start because nobody read their stream
    last_step_s: float  # duration of the newest forward pass (synced)
    tokens_per_s: float  # tokens given to requests over the last window (or since start)
    cache_bytes: int  # bytes of the blocks the batch holds now
    held_bytes: int  # caches visitors keep between clicks (lesson 3), under `budget`
    history: tuple[tuple[float, int, float], ...]  # (seconds ago, rows, step seconds), oldest first
    pool: PoolStats | None = None  # the block pool after the newest step
    steps_detail: tuple[StepRecord, ...] = ()  # the newest steps' budget split and parts
    step_token_budget: int = 0  # tokens per step the server spends (0 = whole prompts)
    threads: tuple[ThreadFigure, ...] = ()  # CPU threads per pass: the timed figures (CPU)
    plan: StepPlan | None = None  # the newest step's plan


class ServerRecord:
    """The server's account of its work since start (call under the server's lock)."""

    def __init__(self, window_s: float, steps_kept: int, pool: PoolStats) -> None:
        self.window_s = window_s  # the "last minute" of tokens/s and history
        self.steps_detail: deque[StepRecord] = deque(maxlen=steps_kept)
        self.threads: tuple[ThreadFigure, ...] = ()  # CPU threads per pass (CPU only)
        self.steps = self.served = self.unread = 0
        self.last_step_s = 0.0
        self.pool, self.cache_bytes = pool, 0  # after the newest step
        self._started = time.perf_counter()
        self._passes: deque[tuple[float, int, float, int]] = deque()  # (time, rows, s, tokens)

    def note_pass(self, rows: int, seconds: float, tokens: int, pool: PoolStats,
                  cache_bytes: int) -> None:
        """A forward pass of `rows` rows took `seconds` and gave `tokens` requests a token."""
        self.steps += 1
        self.last_step_s = seconds
        self.pool, self.cache_bytes = pool, cache_bytes
        self._passes.append((time.perf_counter(), rows, seconds, tokens))

    def stats(self, *, active: int, queued: int, paused: bool, held_bytes: int,
              step_token_budget: int, plan: StepPlan | None) -> ServerStats:
        """The snapshot, with what only the server knows now (its rows, line and plan)."""
        now = time.perf_counter()
        while self._passes and now - self._passes[0][0] > self.window_s:
            self._passes.popleft()
        span = max(min(self.window_s, now - self._started), 1e-9)
        tokens = sum(t for _, _, _, t in self._passes)
        return ServerStats(
            active=active, queued=queued, paused=paused, steps=self.steps, served=self.served,
            unread=self.unread, last_step_s=self.last_step_s,
            tokens_per_s=tokens / span if self._passes else 0.0,
            cache_bytes=self.cache_bytes, held_bytes=held_bytes,
            history=tuple((round(now - t, 2), r, s) for t, r, s, _ in self._passes),
            pool=self.pool, steps_detail=tuple(self.steps_detail),
            step_token_budget=step_token_budget, threads=self.threads, plan=plan)
