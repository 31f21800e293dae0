"""What a visitor experienced while a served answer streamed in: time to first token from
pressing the button (queue and prefill), then the wall time between tokens. One place for the
chat's and the first screen's figures."""
from __future__ import annotations

import time
from collections.abc import Iterator


def timed_events(req) -> Iterator[tuple[object, float, float, int]]:
    """Each of `req`'s events with (ttft seconds, seconds between tokens so far, tokens after
    the first so far), all measured on this process's clock."""
    ttft, last, between, n = 0.0, 0.0, 0.0, 0
    for ev in req.events():
        now = time.perf_counter()
        if ev.index == 0:
            ttft = now - req.submitted
        else:
            between, n = between + (now - last), n + 1
        last = now
        yield ev, ttft, between, n
