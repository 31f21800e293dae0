"""All of the model's arithmetic on one thread, and who runs next on it.

PyTorch runs each CPU operation on an OpenMP team of helper threads, one team per calling
thread: with more threads than cores, every matrix product must wake sleeping helpers, and many
request threads decode at about one core's speed. So every computation runs on one long-lived
thread (`run`, or `iterate` for a generator's steps), which also makes a job a unit of honest
timing; called from it, both run inline, so nothing that waits for other work may run there.
When the work stops for `Settings.idle_trim_s`, `idle` gives back the memory it freed.

`ComputeTurns`: the server's steps and lesson measurements' jobs take turns there. A
measurement does not stop the server: its jobs may take the steps' compute times its `weight`
(visitors measuring per visitor chatting, within 1 / `most_weight` .. `most_weight`).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from .config import Settings

T = TypeVar("T")
log = logging.getLogger(__name__)


class IdleHook:
    """Call `hook()` once each time the counted jobs (`started`, `finished`) have all been
    done for `after_s` seconds, on a watcher thread of its own (`after_s` <= 0: never)."""

    def __init__(self, after_s: float, hook: Callable[[], object]) -> None:
        self.after_s, self._hook = after_s, hook
        self._cond = threading.Condition()
        self._busy = 0  # jobs started and not finished
        self._idle_since: float | None = None  # when the work last stopped, until the hook ran
        self._watcher: threading.Thread | None = None
        self.calls = 0  # times the hook ran (read by tests)
        self._also: list[weakref.WeakMethod] = []  # more to give back (`also`), held weakly

    def also(self, method: Callable[[], object]) -> None:
        """Give back more when idle: `method` (held weakly) runs before the trim."""
        with self._cond:
            self._also = [m for m in self._also if m() is not None]
            self._also.append(weakref.WeakMethod(method))

    def extras(self) -> list[Callable[[], object]]:
        """The live methods registered with `also`, oldest first."""
        with self._cond:
            return [m for m in (w() for w in self._also) if m is not None]

    def started(self) -> None:
        with self._cond:
            self._busy += 1
            self._idle_since = None

    def finished(self) -> None:
        with self._cond:
            self._busy -= 1
            if self._busy or self.after_s <= 0:
                return
            self._idle_since = time.monotonic()
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="idle-hook",
                                                 daemon=True)
                self._watcher.start()
            self._cond.notify_all()

    def _watch(self) -> None:
        while True:
            with self._cond:
                while self._busy or self._idle_since is None:
                    self._cond.wait()
                left = self._idle_since + self.after_s - time.monotonic()
                if left > 0:
                    self._cond.wait(left)  # new work, or the idle spell is long enough
                    continue
                self._idle_since = None  # once per idle spell
            try:
                self._hook()
                self.calls += 1
            except Exception:  # a failed hook is not the work's failure
                log.exception("the idle hook failed")


_ident: list[int] = []  # the compute thread's id, once it has started
_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm-lab-compute",
                               initializer=lambda: _ident.append(threading.get_ident()))


def trim_heap() -> None:
    """Hand freed memory back to the operating system (glibc keeps it for reuse otherwise)."""
    try:
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass  # not glibc: nothing to do


def _give_back() -> None:
    """Hand freed memory back to the system (only when idle, on the compute thread)."""
    for release in idle.extras():  # the KV pool's free blocks
        try:
            release()
        except Exception:  # memory kept is not the work's failure
            log.exception("giving memory back failed")
    trim_heap()


# queued uncounted, so giving back starts no other idle spell
idle = IdleHook(Settings().idle_trim_s, lambda: _executor.submit(_give_back))


def submit(fn: Callable[..., T], *args, **kwargs) -> Future:
    """Queue `fn(*args, **kwargs)`, counted as work -> its Future (never from this thread)."""
    idle.started()
    future = _executor.submit(fn, *args, **kwargs)
    future.add_done_callback(lambda _: idle.finished())
    return future


def on_compute_thread() -> bool:
    return bool(_ident) and threading.get_ident() == _ident[0]


def run(fn: Callable[..., T], *args, **kwargs) -> T:
    """`fn(*args, **kwargs)` on the compute thread; its result, or its exception raised here."""
    if on_compute_thread():
        return fn(*args, **kwargs)
    return submit(fn, *args, **kwargs).result()


_DONE = object()


def iterate(gen: Iterator[T], call: Callable[..., object] = run) -> Iterator[T]:
    """Each step of `gen` on the compute thread, its items yielded here; `call(fn, *args)` runs
    one step there (a measurement passes the server's `turn`). Closing this iterator queues
    closing `gen` there without waiting: Gradio closes a stopped handler on its event loop."""
    if on_compute_thread():
        yield from gen
        return
    try:
        while (item := call(next, gen, _DONE)) is not _DONE:
            yield item
    finally:
        if hasattr(gen, "close"):  # a generator (a plain iterator has nothing to clean up)
            submit(gen.close)


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
        if on_compute_thread():
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
            job = submit(self._timed, fn, args, 1 / weight)  # queued in order
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
        job = submit(self._timed, step, (), -1.0)
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
