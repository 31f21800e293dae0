"""All of the model's arithmetic on one thread, and why that makes a CPU app faster.

PyTorch runs each CPU operation on an OpenMP team of helper threads, one team per calling
thread: with more threads than cores, every matrix product must wake sleeping helpers, and many
request threads decode at about one core's speed. So every computation runs on one long-lived
thread (`run`, or `iterate` for a generator's steps), which also makes a job a unit of honest
timing; called from it, both run inline, so nothing that waits for other work may run there.
When the work stops for `Settings.idle_trim_s`, `idle` gives back the memory it freed.
"""
from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from .config import Settings

T = TypeVar("T")
log = logging.getLogger(__name__)
NAME = "llm-lab-compute"


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
_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=NAME,
                               initializer=lambda: _ident.append(threading.get_ident()))


def _give_back() -> None:
    """Hand freed memory back to the system (only when idle, on the compute thread)."""
    from .cache_budget import trim_heap  # imports the model's modules, so not at start-up

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
