"""What the server did while a lesson measured: the chats it kept answering between the passes.

A measurement runs as jobs on the compute thread, and the server gets a step between any two
of them (`compute_turns.py`), so no chat step lands inside a stopwatch; but the caption should
still say what else the machine did. `Alongside` counts the requests the server gave a token
while one measurement ran; `within(seen, fn)` makes it the current record, so a handler's code
can read `chats_so_far()` without the server being passed through every handler.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")


class Alongside:
    """The requests the server gave tokens while one measurement ran (live, thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rids: set[int] = set()
        self.passes = 0  # server forward passes that gave tokens while it was open

    def saw(self, rids: list[int]) -> None:
        with self._lock:
            self._rids.update(rids)
            self.passes += 1

    @property
    def chats(self) -> int:
        with self._lock:
            return len(self._rids)


_current: ContextVar[Alongside | None] = ContextVar("served_alongside", default=None)


def within(seen: Alongside | None, fn: Callable[..., T]) -> Callable[..., T]:
    """`fn`, run with `seen` as the current measurement's record (see `chats_so_far`)."""
    def run(*args, **kwargs) -> T:
        token = _current.set(seen)
        try:
            return fn(*args, **kwargs)
        finally:
            _current.reset(token)
    return run


def chats_so_far() -> int | None:
    """Chats the server has answered since the running measurement began; None outside one
    (a handler called directly, with no server beside it)."""
    seen = _current.get()
    return None if seen is None else seen.chats
