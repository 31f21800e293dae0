"""Who runs next on the one compute thread: the server's steps or a lesson measurement's jobs.

A measurement does not stop the server: each job goes through `turn()`, queued once the steps
have repaid the compute its jobs took divided by its `weight` (visitors measuring per visitor
chatting, within 1 / `most_weight` .. `most_weight`); a step's surplus is credit the server
waits for a running measurement to spend (`make_way`). `alongside()` counts the chats served
meanwhile; `exclusive()` holds the loop between steps (tests and benchmarks fill the queue).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from . import compute_thread

T = TypeVar("T")
# a measurement's handler asks for its next job this soon after its last (its frame shown in
# between), or the server takes its step
COMEBACK_S = 0.05


# the requests the server gave tokens while the running measurement ran (`alongside()`)
_current: ContextVar[set[int] | None] = ContextVar("alongside", default=None)


def within(seen: set[int] | None, fn: Callable[..., T]) -> Callable[..., T]:
    """`fn`, run with `seen` as the current measurement's record (see `chats_so_far`)."""
    def run(*args, **kwargs) -> T:
        token = _current.set(seen)
        try:
            return fn(*args, **kwargs)
        finally:
            _current.reset(token)
    return run


def chats_so_far() -> int | None:
    """Chats the server has answered since the running measurement began; None outside one."""
    seen = _current.get()
    return None if seen is None else len(seen)


class ComputeTurns:
    """The server's steps and measurement jobs taking turns on the compute thread."""

    def __init__(self, cond: threading.Condition, has_work: Callable[[], bool],
                 chatting: Callable[[], int] = lambda: 1, most_weight: float = 1.0) -> None:
        """`has_work()`: the server is open and has requests; `chatting()`: visitors with
        requests (both called with `cond` held)."""
        self._cond, self._has_work, self._chatting = cond, has_work, chatting
        self.most_weight = most_weight
        # visitors waiting on lesson measurements now (the app sets its line's count)
        self.measuring: Callable[[], int] = lambda: 1
        self.pauses = 0  # exclusive() holders
        self.in_step = False  # a server step is queued or running
        self._steps_queued = 0  # steps handed to the compute thread since start
        self._turn_mark = -1  # _steps_queued when the newest measurement job was queued
        # compute seconds measurement jobs took that steps have not repaid; below 0, the credit
        # the last step left (never more than that step's own seconds)
        self._owed_s = 0.0
        self._job_running = False  # a measurement job is queued or running
        self._job_ended = 0.0  # time.monotonic() when the newest measurement job ended
        self.jobs = 0  # measurement jobs queued through turn() (read by tests)
        self._alongside: list[set[int]] = []  # measurements running now: who was served

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Run a measurement alone: the loop finishes its step, then waits until this ends."""
        with self._cond:
            self.pauses += 1
            self._cond.notify_all()
            while self.in_step:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self.pauses -= 1
                self._cond.notify_all()

    def turn(self, fn: Callable[..., T], *args) -> T:
        """`fn(*args)`: one measurement job on the compute thread, queued once the steps have
        repaid the jobs' compute time (at once when the server has no work)."""
        if compute_thread.on_compute_thread():
            return fn(*args)
        weight = self.weight()
        with self._cond:
            while self.serving() and not self._may_run():
                self._cond.wait()
            if not self.serving():
                self._owed_s = 0.0  # nobody is waiting to be repaid
            self._turn_mark = self._steps_queued
            self._job_running = True
            self.jobs += 1
            job = compute_thread.submit(self._timed, fn, args, 1 / weight)  # queued in order
        return job.result()

    def weight(self) -> float:
        """The measurement jobs' share against the steps: visitors measuring per visitor
        chatting, between 1 / `most_weight` and `most_weight`."""
        measuring = max(1, self.measuring())  # its own locks, never under the server's
        with self._cond:
            chatting = max(1, self._chatting())
        return min(self.most_weight, max(1 / self.most_weight, measuring / chatting))

    @contextmanager
    def alongside(self) -> Iterator[set[int]]:
        """The ids of the requests served while this measurement runs (filled under `cond`)."""
        seen: set[int] = set()
        with self._cond:
            self._alongside.append(seen)
        try:
            yield seen
        finally:
            with self._cond:
                self._alongside.remove(seen)

    def _may_run(self) -> bool:
        """Credit is left, or the debt is repaid by a step queued since the previous job."""
        return self._owed_s < 0 or (self._owed_s == 0 and self._turn_mark < self._steps_queued)

    def make_way(self) -> bool:
        """Before a step (with `cond` held): wait while a running measurement spends its credit,
        forfeited when it asks for no job within `COMEBACK_S`. -> still `serving()`."""
        while self._alongside and self._owed_s < 0 and self.serving():
            if self._job_running:
                self._cond.wait()
                continue
            left = self._job_ended + COMEBACK_S - time.monotonic()
            if left <= 0:
                self._owed_s = 0.0
                break
            self._cond.wait(left)
        return self.serving()

    def serving(self) -> bool:
        """The loop will queue another step (call with `cond` held)."""
        return not self.pauses and self._has_work()

    def queue_step(self, step: Callable[[], None]) -> Future:
        """Hand the server's next step to the compute thread (with `cond` held)."""
        self.in_step = True
        job = compute_thread.submit(self._timed, step, (), -1.0)
        self._steps_queued += 1
        self._cond.notify_all()
        return job

    def step_done(self) -> None:
        with self._cond:
            self.in_step = False
            self._cond.notify_all()

    def served(self, rids: list[int]) -> None:
        """Tell every measurement running now who got a token (with `cond` held)."""
        for seen in self._alongside:
            seen.update(rids)

    def _timed(self, fn: Callable[..., T], args: tuple, sign: float) -> T:
        """`fn(*args)`, its seconds times `sign` (a job: 1 / its weight; a step: -1) added to
        what the server is owed; a step leaves at most its own seconds as credit."""
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            with self._cond:
                took = time.perf_counter() - start
                if sign > 0:
                    self._owed_s += sign * took
                    self._job_running, self._job_ended = False, time.monotonic()
                else:
                    self._owed_s = max(self._owed_s - took, -took)
                self._cond.notify_all()
