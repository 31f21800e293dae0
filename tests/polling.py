"""One way for tests to wait on a condition: poll it (never a fixed sleep)."""
from __future__ import annotations

import threading
from collections.abc import Callable


def wait_for(cond: Callable[[], object], timeout: float = 120.0, every: float = 0.05) -> bool:
    """Poll `cond` every `every` seconds until true; False after `timeout` seconds."""
    tick = threading.Event()
    for _ in range(int(timeout / every)):
        if cond():
            return True
        tick.wait(every)
    return False


def without_ticks(frames: list) -> list:
    """A handler's frames less its idle ticks: a streaming handler yields its last frame again
    (the same object) while the server has nothing new (`ServedRequest.events(idle_s=...)`), so
    on a slow machine a first prefill can show up more than once."""
    return [f for i, f in enumerate(frames) if i == 0 or f is not frames[i - 1]]
