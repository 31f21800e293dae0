"""Who runs next on the one compute thread: the server's steps or a lesson measurement's jobs.

A measurement does not stop the server: each of its jobs goes through `turn()`, which queues it
once the server's steps have repaid the compute time the measurement's jobs took, divided by
its `weight`. A step's surplus is credit, at most that step's own time, and the server waits
for a running measurement to spend it (`make_way`), so short jobs (one decode step each) run a
step's worth between two steps instead of one each. The weight is fair by visitor: visitors
waiting on measurements (`measuring`: a class that pressed Run) per visitor chatting, between
1 / `most_weight` (one visitor's measurement beside many chats) and `most_weight` (a room
waiting on a sweep beside a few chats, which still stream); at 1 each keeps about half the
thread. Each timed pass (inside one job) still has the cores to itself. `alongside()` counts
the chats served meanwhile; `exclusive()` holds the server's loop between steps (tests and
benchmarks fill the queue).
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
# a measurement's handler asks for its next job this soon after its last (its frame shown in
# between), or the server takes its step
COMEBACK_S = 0.05


class ComputeTurns:
    """The server's steps and measurement jobs taking turns on the compute thread."""

    def __init__(self, cond: threading.Condition, has_work: Callable[[], bool],
                 chatting: Callable[[], int] = lambda: 1, most_weight: float = 1.0) -> None:
        """`has_work()` and `chatting()` (visitors with requests), called with `cond` held: the
        server is open and has requests."""
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
        """How many times the steps' compute the measurement jobs may take: the visitors
        waiting on measurements per visitor chatting, between 1 / `most_weight` and it."""
        measuring = max(1, self.measuring())  # its own locks, never under the server's
        with self._cond:
            chatting = max(1, self._chatting())
        return min(self.most_weight, max(1 / self.most_weight, measuring / chatting))

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

    def make_way(self) -> bool:
        """Before the server queues a step (call with `cond` held): while a running
        measurement has credit left, wait for its jobs; one that does not ask for its next job
        within `COMEBACK_S` of its last forfeits the credit. -> still `serving()`."""
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
        """Hand the server's next step to the compute thread (call with `cond` held: turn()
        sees it counted only once it is queued). `step_done()` when it has run."""
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
        """Tell every measurement running now who got a token (call with `cond` held)."""
        for seen in self._alongside:
            seen.saw(rids)

    def _timed(self, fn: Callable[..., T], args: tuple, sign: float) -> T:
        """`fn(*args)` on the compute thread, its seconds added to (a measurement job, times
        `sign` = 1 / its weight) or taken from (a server step, -1) what the server is owed; a
        step leaves at most its own seconds as credit."""
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
