"""What the live "Server" view reads: `ServerStats`, one snapshot taken between steps, and
`ServerRecord`, the server's running account it is made from (forward passes over the last
window, the newest steps' records, the block pool after the newest step, requests served).

Bookkeeping only: the server calls it under its own lock; nothing here runs the model.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from .paged_batch import PoolStats
from .server_plan import StepPlan
from .step_record import StepRecord
from .thread_choice import ThreadFigure


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
