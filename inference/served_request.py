"""One visitor's request to the serving engine (`server.py`): its prompt, settings, seeded
generator, tokens so far, and the queue its events arrive on. Leaving `events()` early cancels
it; a stream nobody reads (`unread_s`) is stopped by the server."""
from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator

from .errors import ServerStoppedError
from .events import StepEvent
from .sampling import SamplingSettings


class ServedRequest:
    """One visitor's request: iterate it to receive its `StepEvent`s as they are made."""

    def __init__(self, rid: int, prompt_ids: list[int], sampling: SamplingSettings,
                 max_new_tokens: int, top_k_shown: int, generator, visitor: str = "",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rid, self.prompt_ids, self.sampling = rid, list(prompt_ids), sampling
        self.visitor = visitor  # who asked ("" = a visitor of its own): the line is fair by it
        self.turn = 0  # its turn in the server's waiting line (`server_plan.WaitingLine`)
        self.max_new_tokens, self.top_k_shown = max_new_tokens, top_k_shown
        self.generator = generator
        self.ahead = 0  # requests in the queue before this one when it arrived
        self.submitted = time.perf_counter()
        self.admitted: float | None = None
        self.generated: list[int] = []
        self.text = ""
        self.rows_per_step: list[int] = []  # batch rows of every forward pass it took part in
        self.finished: str | None = None
        self.preemptions = 0  # times it was preempted for room and sent back to the queue
        self.prefill_passes = 0  # chunked prefill: forward passes its prompt took so far
        self._events: queue.Queue = queue.Queue()
        self._wake: Callable[[], None] | None = None  # set while `aevents` awaits on a loop
        self._cancelled = threading.Event()
        self.ended_by: Exception | None = None  # why the server stopped it (None: Stop or done)
        self._clock = clock
        self._unread: deque[float] = deque()  # when each event not yet taken was put

    def unread_s(self, now: float) -> float:
        """Seconds the oldest event its reader has not taken yet has waited (0 when none)."""
        try:
            return now - self._unread[0]
        except IndexError:  # the reader took it meanwhile
            return 0.0

    @property
    def queued_seconds(self) -> float:
        return (self.admitted or time.perf_counter()) - self.submitted

    @property
    def mean_batch_rows(self) -> float:
        """Average rows that shared this request's forward passes (1.0 = it ran alone)."""
        return sum(self.rows_per_step) / len(self.rows_per_step) if self.rows_per_step else 0.0

    def cancel(self) -> None:
        """Stop: the row is freed at the next step (a closed tab or Stop calls this)."""
        self._cancelled.set()

    def stop(self, reason: Exception) -> None:
        """The server ends it: its reader, if it comes back, is told `reason` after its events."""
        self.ended_by = reason
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def events(self, timeout_s: float = 600.0, idle_s: float | None = None
               ) -> Iterator[StepEvent | None]:
        """Yield this request's events until it finishes (leaving early cancels it); a `None`
        after each `idle_s` with no event, so a Stop lands; `timeout_s` with none ends it."""
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    event = self._take(_wait_s(deadline, idle_s))
                except queue.Empty:
                    _check_deadline(deadline)
                    yield None
                    continue
                if event is None:  # it ended
                    return
                yield event
                if event.finished:
                    return
                deadline = time.monotonic() + timeout_s
        finally:
            self.cancel()

    async def aevents(self, timeout_s: float = 600.0, idle_s: float | None = None
                      ) -> AsyncIterator[StepEvent | None]:
        """`events()` awaited on the web server's event loop (no thread per waiting chat)."""
        loop, arrived = asyncio.get_running_loop(), asyncio.Event()

        def wake() -> None:  # on the server's thread
            try:
                loop.call_soon_threadsafe(arrived.set)
            except RuntimeError:  # the loop has closed: nobody is waiting any more
                pass

        self._wake = wake
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                arrived.clear()  # before looking: an event put after the look sets it again
                try:
                    event = self._take()
                except queue.Empty:
                    try:
                        await asyncio.wait_for(arrived.wait(), _wait_s(deadline, idle_s))
                    except TimeoutError:
                        _check_deadline(deadline)
                        yield None
                    continue
                if event is None:  # it ended
                    return
                yield event
                if event.finished:
                    return
                deadline = time.monotonic() + timeout_s
        finally:
            self._wake = None
            self.cancel()

    def _take(self, timeout: float | None = None) -> StepEvent | None:
        """The next event (None: it ended) within `timeout`; raises queue.Empty or its failure."""
        item = self._events.get(timeout is not None, timeout)
        if self._unread:
            self._unread.popleft()
        if isinstance(item, Exception):
            raise item
        return item

    def _put(self, item) -> None:
        self._unread.append(self._clock())  # before the put: a take never finds it missing
        self._events.put(item)
        wake = self._wake
        if wake is not None:
            wake()


def _wait_s(deadline: float, idle_s: float | None) -> float:
    """How long to wait for the next event: until the deadline, or `idle_s` if sooner."""
    left = deadline - time.monotonic()
    return max(0.0, left if idle_s is None else min(idle_s, left))


def _check_deadline(deadline: float) -> None:
    if time.monotonic() >= deadline:
        raise ServerStoppedError("The server did not answer in time; try again.")

