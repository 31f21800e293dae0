"""What a visitor experienced while a served answer streamed in: time to first token from
pressing the button (queue and prefill), then the wall time between tokens. One place for the
chat's and the first screen's figures."""
from __future__ import annotations

import time
from collections.abc import Iterator


def timed_events(req, idle_s: float | None = None
                 ) -> Iterator[tuple[object, float, float, int] | None]:
    """Each of `req`'s events with (ttft seconds, seconds between tokens so far, tokens after
    the first so far), all measured on this process's clock. With `idle_s`, a `None` whenever
    that long passes with no event: the caller yields its last frame again, which is where a
    Stop or a closed tab can end the stream (`ServedRequest.events`)."""
    ttft, last, between, n = 0.0, 0.0, 0.0, 0
    for ev in req.events(idle_s=idle_s):
        if ev is None:
            yield None
            continue
        now = time.perf_counter()
        if ev.index == 0:
            ttft = now - req.submitted
        else:
            between, n = between + (now - last), n + 1
        last = now
        yield ev, ttft, between, n
