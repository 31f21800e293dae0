"""Results that every visitor can share: long sweeps run once per process and machine.

A classroom of thirty should not run the same 30-second batch sweep thirty times. A
`SharedResults` object remembers finished results by key; while one visitor computes a key,
others asking for it wait for that result instead of starting their own run.
Only *finished* runs are stored: a stopped run leaves nothing behind.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")


class SharedResults:
    def __init__(self) -> None:
        self._results: dict[Hashable, object] = {}
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, key: Hashable):
        """The stored result for `key`, or None."""
        return self._results.get(key)

    def put(self, key: Hashable, value: object) -> None:
        self._results[key] = value

    def get_or_compute(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Return the stored result, computing it once (other callers wait, then share it)."""
        if key in self._results:
            return self._results[key]  # type: ignore[return-value]
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._results:
                self._results[key] = compute()
        return self._results[key]  # type: ignore[return-value]

    def clear(self) -> None:
        self._results.clear()


def once(shared: SharedResults | None, key: Hashable, compute: Callable[[], T]) -> T:
    """`shared.get_or_compute(key, compute)`; without a store (a script, a test), a fresh
    `compute()`."""
    return compute() if shared is None else shared.get_or_compute(key, compute)
