"""Results that every visitor can share: long sweeps run once per process and machine.

A class of thirty should not run the same sweep thirty times: finished results are kept by
key, and while one visitor computes a key, others wait for that result. Big results that are
cheap to rebuild are kept only `until_idle`.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")
_MISSING = object()  # a stored result may itself be None


class SharedResults:
    def __init__(self) -> None:
        self._results: dict[Hashable, object] = {}
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()
        self._until_idle: set[Hashable] = set()  # keys `release_idle` drops

    def get(self, key: Hashable):
        return self._results.get(key)

    def put(self, key: Hashable, value: object) -> None:
        self._results[key] = value

    def get_or_compute(self, key: Hashable, compute: Callable[[], T],
                       until_idle: bool = False) -> T:
        """The stored result, computed once (other callers wait, then share it); `until_idle`:
        kept only until `release_idle`."""
        if (held := self._results.get(key, _MISSING)) is not _MISSING:
            return held  # type: ignore[return-value]
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if (held := self._results.get(key, _MISSING)) is _MISSING:
                held = self._results[key] = compute()
                if until_idle:
                    with self._guard:
                        self._until_idle.add(key)
        return held  # type: ignore[return-value]

    def release_idle(self) -> int:
        """Drop the results kept `until_idle` (the next ask computes them again); how many."""
        with self._guard:
            keys, self._until_idle = self._until_idle, set()
        for key in keys:
            self._results.pop(key, None)
        return len(keys)


def once(shared: SharedResults | None, key: Hashable, compute: Callable[[], T]) -> T:
    """`shared.get_or_compute(key, compute)`; without a store, a fresh `compute()`."""
    return compute() if shared is None else shared.get_or_compute(key, compute)
