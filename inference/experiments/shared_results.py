"""Results that every visitor can share: long sweeps run once per process and machine.

A classroom of thirty should not run the same 30-second batch sweep thirty times. A
`SharedResults` object remembers finished results by key; while one visitor computes a key,
others asking for it wait for that result instead of starting their own run.
Only *finished* runs are stored: a stopped run leaves nothing behind. What is cheap to rebuild
and big to hold (a quantized copy of the model) is kept only while the app is busy
(`until_idle`): `release_idle` drops it when the work stops (`compute_thread.idle`).
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
        """The stored result for `key`, or None."""
        return self._results.get(key)

    def put(self, key: Hashable, value: object) -> None:
        self._results[key] = value

    def get_or_compute(self, key: Hashable, compute: Callable[[], T],
                       until_idle: bool = False) -> T:
        """Return the stored result, computing it once (other callers wait, then share it).
        `until_idle`: kept only until `release_idle` (big, and cheap to compute again)."""
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
    """`shared.get_or_compute(key, compute)`; without a store (a script, a test), a fresh
    `compute()`."""
    return compute() if shared is None else shared.get_or_compute(key, compute)
