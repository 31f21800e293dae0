"""What a visitor experienced while a served answer streamed in: time to first token from the
press (queue and prefill), then the wall time between tokens; and when it shows its next frame
(`FramePace`)."""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

Timed = tuple[object, float, float, int]  # (event, ttft s, s between tokens, tokens after 1st)


class _ClientClock:
    def __init__(self, req) -> None:
        self.req = req
        self.ttft, self.last, self.between, self.n = 0.0, 0.0, 0.0, 0

    def saw(self, ev) -> Timed:
        now = time.perf_counter()
        if ev.index == 0:
            self.ttft = now - self.req.submitted
        else:
            self.between, self.n = self.between + (now - self.last), self.n + 1
        self.last = now
        return ev, self.ttft, self.between, self.n


class FramePace:
    """When a streamed answer shows its next frame, all sharing `Settings.chat_frames_per_s`:
    B / frames_per_s seconds after the last (B: rows in the step that made the event; a frame
    holds the Python lock the step needs). The first token and the last are always due."""

    def __init__(self, frames_per_s: float) -> None:
        self.frames_per_s, self.due_at = frames_per_s, 0.0

    def due(self, ev) -> bool:
        now = time.perf_counter()
        if ev.index == 0 or ev.finished or now >= self.due_at:
            self.due_at = now + max(ev.batch_rows, 1) / self.frames_per_s
            return True
        return False


def timed_events(req, idle_s: float | None = None) -> Iterator[Timed | None]:
    """Each of `req`'s events as `Timed`. With `idle_s`, a `None` whenever that long passes
    with no event: the caller yields its last frame again, where a Stop or a closed tab can end
    the stream (`ServedRequest.events`)."""
    clock = _ClientClock(req)
    for ev in req.events(idle_s=idle_s):
        yield None if ev is None else clock.saw(ev)


async def atimed_events(req, idle_s: float | None = None) -> AsyncIterator[Timed | None]:
    """`timed_events` on an event loop: `req.aevents` where the request has it (the local
    server's), else its blocking `events()` read off the loop (a remote engine's stream)."""
    clock = _ClientClock(req)
    if hasattr(req, "aevents"):
        async for ev in req.aevents(idle_s=idle_s):
            yield None if ev is None else clock.saw(ev)
        return
    events = req.events(idle_s=idle_s)
    try:
        while (ev := await asyncio.to_thread(next, events, _END)) is not _END:
            yield None if ev is None else clock.saw(ev)
    finally:
        req.cancel()  # the thread reading it may be mid-read: it ends at its next chunk


_END = object()
