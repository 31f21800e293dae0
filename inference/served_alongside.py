"""What the server did while a lesson measured: the chats it kept answering between the passes.

A lesson measurement no longer stops the class's chat. It runs as a series of jobs on the one
compute thread (`compute_thread`), and the server (`server.Server.turn`) gets a step between
any two of them. Each timed pass lies inside one job, so no chat step ever lands inside a
stopwatch; but the caption under a measurement should still say what else the machine did
while it ran. This file keeps that record:

- `Alongside`: opened by the server for one measurement (`Server.alongside()`); every request
  the server gives a token while it is open is counted (`chats`);
- `within(seen, fn)`: `fn` run with `seen` as the current measurement's record, so a handler's
  code (on the compute thread, inside its own job) can read `chats_so_far()` for its caption,
  without the server being passed through every handler. Outside a measurement it is None.

Not covered: other programs on the same machine (`experiments/noise.py` judges those).
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
        """Called by the server after a forward pass gave these requests a token each."""
        with self._lock:
            self._rids.update(rids)
            self.passes += 1

    @property
    def chats(self) -> int:
        """Distinct requests (chats) the server answered while the measurement ran."""
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
