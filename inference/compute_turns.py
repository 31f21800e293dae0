"""Who runs next on the one compute thread: the server's steps or a lesson measurement's jobs.

A measurement does not stop the server: each of its jobs goes through `turn()`, which queues it
once the server's steps have repaid the compute time the measurement's jobs took. A step's
surplus is kept as credit, at most that step's own time, so short jobs (one decode step each)
run a step's worth between two steps instead of one each. So while anyone chats, chats and the
measurement each keep about half the thread, whatever the size of the jobs, and each timed pass
(inside one job) still has the cores to itself. `alongside()` counts the chats served meanwhile;
`exclusive()` holds the server's loop between steps (tests and benchmarks fill the queue).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TypeVar

from . import compute_thread
from .served_alongside import Alongside

T = TypeVar("T")


class ComputeTurns:
    """The server's steps and measurement jobs taking turns on the compute thread."""

    def __init__(self, cond: threading.Condition, has_work: Callable[[], bool]) -> None:
        """`has_work()`, called with `cond` held: the server is open and has requests."""
        self._cond, self._has_work = cond, has_work
        self.pauses = 0  # exclusive() holders
        self.in_step = False  # a server step is queued or running
        self._steps_queued = 0  # steps handed to the compute thread since start
        self._turn_mark = -1  # _steps_queued when the newest measurement job was queued
        # compute seconds measurement jobs took that steps have not repaid; below 0, the credit
        # the last step left (never more than that step's own seconds)
        self._owed_s = 0.0
        self.jobs = 0  # measurement jobs queued through turn() (read by tests)
        self._alongside: list[Alongside] = []  # measurements running now, told who was served

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Run a measurement alone: the loop finishes its step, then waits until this ends.
        Safe to enter and leave from different threads (no lock is held across yields)."""
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
        """`fn(*args)`: one job of a lesson measurement on the compute thread. While the server
        has work, the job waits until the steps have repaid the jobs' compute time (with no
        credit left, for a step queued after the previous job); otherwise it is queued at once."""
        if compute_thread.on_compute_thread():
            return fn(*args)
        with self._cond:
            while self.serving() and not self._may_run():
                self._cond.wait()
            if not self.serving():
                self._owed_s = 0.0  # nobody is waiting to be repaid
            self._turn_mark = self._steps_queued
            self.jobs += 1
            job = compute_thread.submit(self._timed, fn, args, +1)  # queued in this order
        return job.result()

    @contextmanager
    def alongside(self) -> Iterator[Alongside]:
        """Count the requests the server answers while a measurement runs."""
        seen = Alongside()
        with self._cond:
            self._alongside.append(seen)
        try:
            yield seen
        finally:
            with self._cond:
                self._alongside.remove(seen)

    def _may_run(self) -> bool:
        """A measurement job may start: credit is left, or the debt is repaid by a step queued
        since the previous job (call with `cond` held)."""
        return self._owed_s < 0 or (self._owed_s == 0 and self._turn_mark < self._steps_queued)

    def serving(self) -> bool:
        """The loop will queue another step (call with `cond` held)."""
        return not self.pauses and self._has_work()

    def queue_step(self, step: Callable[[], None]) -> Future:
        """Hand the server's next step to the compute thread (call with `cond` held: turn()
        sees it counted only once it is queued). `step_done()` when it has run."""
        self.in_step = True
        job = compute_thread.submit(self._timed, step, (), -1)
        self._steps_queued += 1
        self._cond.notify_all()
        return job

    def step_done(self) -> None:
        with self._cond:
            self.in_step = False
            self._cond.notify_all()

    def served(self, rids: list[int]) -> None:
        """Tell every measurement running now who got a token (call with `cond` held)."""
        for seen in self._alongside:
            seen.saw(rids)

    def _timed(self, fn: Callable[..., T], args: tuple, sign: int) -> T:
        """`fn(*args)` on the compute thread, its seconds added to (a measurement job, +1) or
        taken from (a server step, -1) what the server is owed; a step leaves at most its own
        seconds as credit."""
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            with self._cond:
                took = time.perf_counter() - start
                self._owed_s = (self._owed_s + took if sign > 0
                                else max(self._owed_s - took, -took))
                self._cond.notify_all()
