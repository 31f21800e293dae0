"""Memory that comes back when the work stops: once the compute thread has had nothing to do
for `Settings.idle_trim_s`, the heap its work freed is handed back to the system, once per
idle spell.

glibc's malloc keeps freed memory for reuse, in an arena per thread that ran work: after a
class's load the app measured ~4.5 GB resident, idle, against ~1.2 GB before. `malloc_trim(0)`
(`cache_budget.trim_heap`) returns the free pages, at the cost of a pass over the heap, so it
runs only when the work has stopped, on the compute thread. The server's KV pool gives its free
blocks' pages back first (`also`; `PagedKV.release_free`).
"""
from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable

log = logging.getLogger(__name__)


class IdleHook:
    """Call `hook()` once each time the counted jobs have all been done for `after_s` seconds
    (on a watcher thread of its own, started with the first job; `after_s` <= 0: never).

    >>> idle = IdleHook(3.0, print)   # idle.started() before a job, idle.finished() after
    """

    def __init__(self, after_s: float, hook: Callable[[], object]) -> None:
        self.after_s, self._hook = after_s, hook
        self._cond = threading.Condition()
        self._busy = 0  # jobs started and not finished
        self._idle_since: float | None = None  # when the work last stopped, until the hook ran
        self._watcher: threading.Thread | None = None
        self.calls = 0  # times the hook ran (read by tests)
        self._also: list[weakref.WeakMethod] = []  # more to give back (`also`), held weakly

    def also(self, method: Callable[[], object]) -> None:
        """Give back more when idle: `method` (a bound method, held weakly so its object can
        go) runs with the hook's work (`compute_thread` runs them before the trim)."""
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

