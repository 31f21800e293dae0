"""Taking turns on the one compute thread: the serving engine's steps and a lesson's
measurement jobs (a sweep, a race) run on the same thread, one after the other, so a student's
measurement never freezes the class and no server step lands inside a measurement's stopwatch.

`turn(fn)` queues one measurement job only after a server step was queued since the previous
measurement job (of any measurement), and once the steps since have repaid the compute time
the jobs before took: while anyone chats, at most one measurement job runs between two server
steps, and chats keep at least about half the thread. Each timed pass lies inside one job, so
it still has the cores to itself. `alongside()` counts the chats served meanwhile (for the
measurement's caption); `exclusive()` holds the loop between steps (tests and benchmarks
filling the queue before a step). `Server` (`server.py`) inherits this and queues its steps
through `_timed(..., -1)`."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from . import compute_thread
from .served_alongside import Alongside

T = TypeVar("T")


class TakingTurns:
    """The turn-taking half of `Server`: it provides `_cond`, `_closed` and `_serving()`."""

    _cond: threading.Condition
    _closed: bool

    def _init_turns(self) -> None:
        self._pauses = 0  # exclusive() holders
        self._in_step = False  # a server step is queued or running
        self._steps_queued = 0  # steps handed to the compute thread since start
        self._turn_mark = -1  # _steps_queued when the newest measurement job was queued
        self._owed_s = 0.0  # compute seconds measurement jobs took that steps have not repaid
        self.measurement_jobs = 0  # measurement jobs queued through turn() (read by tests)
        self._alongside: list[Alongside] = []  # measurements running now, told who was served

    def _serving(self) -> bool:
        """The loop will queue another step (call with `_cond` held)."""
        raise NotImplementedError

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Run a measurement alone: the loop finishes its step, then waits until this ends.
        Safe to enter and leave from different threads (no lock is held across yields)."""
        with self._cond:
            self._pauses += 1
            self._cond.notify_all()
            while self._in_step:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._pauses -= 1
                self._cond.notify_all()

    def turn(self, fn: Callable[..., T], *args) -> T:
        """`fn(*args)`: one job of a lesson measurement on the compute thread, taking turns
        with the server. While the server has work, the job is queued only once a server step
        has been queued after the previous measurement job (so a chat waits for at most one
        job per step, however many measurements run) and the steps since have taken as much
        compute time as the measurement jobs before (so chats keep at least about half the
        thread: a job longer than a step is repaid with several steps). Paused, idle or
        closed, the server takes no turn and the job is queued at once."""
        if compute_thread.on_compute_thread():
            return fn(*args)
        with self._cond:
            while self._serving() and (self._turn_mark >= self._steps_queued
                                       or self._owed_s > 0):
                self._cond.wait()
            if not self._serving():
                self._owed_s = 0.0  # nobody is waiting to be repaid
            self._turn_mark = self._steps_queued
            self.measurement_jobs += 1
            job = compute_thread.submit(self._timed, fn, args, +1)  # queued in this order
        return job.result()

    def _timed(self, fn: Callable[..., T], args: tuple, sign: int) -> T:
        """`fn(*args)` on the compute thread, its seconds added to (a measurement job, +1) or
        taken from (a server step, -1) what the server is owed, never below 0."""
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            with self._cond:
                self._owed_s = max(self._owed_s + sign * (time.perf_counter() - start), 0.0)
                self._cond.notify_all()

    @contextmanager
    def alongside(self) -> Iterator[Alongside]:
        """Count the requests this server answers while a measurement runs."""
        seen = Alongside()
        with self._cond:
            self._alongside.append(seen)
        try:
            yield seen
        finally:
            with self._cond:
                self._alongside.remove(seen)

