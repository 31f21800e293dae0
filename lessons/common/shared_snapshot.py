"""One shared snapshot per interval: a view many tabs watch at once (the server view on This
machine, refreshed every 2 s by each watching tab) is computed at most once per `interval_s`
and read by every tab (the first caller after that recomputes it while the others wait), so
thirty watchers cost the class what one does."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedSnapshot(Generic[T]):
    """A value recomputed at most once per `interval_s`, shared by every reader."""

    def __init__(self, compute: Callable[[], T], interval_s: float) -> None:
        self.compute, self.interval_s = compute, interval_s
        self._lock = threading.Lock()
        self._value: T | None = None
        self._at = -float("inf")  # time.monotonic() of the last computation, s
        self.computations = 0  # how many times `compute` ran (the test counts them)

    def get(self) -> T:
        with self._lock:  # one computes; the rest wait for it and read the same value
            now = time.monotonic()
            if now - self._at >= self.interval_s or self.computations == 0:
                self._value = self.compute()
                self._at = time.monotonic()
                self.computations += 1
            return self._value
