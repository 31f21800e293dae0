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
