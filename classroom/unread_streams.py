"""Answers nobody reads are stopped: an event whose visitor has not taken its messages for
`Settings.unread_stream_s` is cancelled as a Stop would cancel it, so its handler's generator
is closed (a chat's server request stops and frees its row) and queued work leaves the line.

Gradio (6.31) runs a joined event whether or not anyone opened its stream: the page joins with
`POST /queue/join`, then reads every message of its session from `GET /queue/data` (SSE).
Gradio notices a reader only when an open stream disconnects; a client that joins and never
opens the stream (or opens it and stops reading) leaves the event running to its end, its
messages piling up in `queue.pending_messages_per_session[session_hash]` (an `asyncio.Queue`).
Twenty such clients kept both cores busy for ~45 s generating answers nobody saw.

The signal is that pile: a reader takes each message as it comes, so the oldest message of a
session with a reader is never the same one for long. A session whose oldest pending message
has stayed at the head of its queue for `unread_s` has nobody reading it (no stream, or a stream
that does not read). One asyncio task polls every `poll_s` seconds, only the sessions with
events waiting or running, and costs nothing per token.

What Gradio lacks, and so what is private here: a public "is anyone reading this session"
(the queue's `pending_messages_per_session`, `active_jobs`, `event_queue_per_concurrency_id`,
the `asyncio.Queue`'s own deque to see its head) and a startup hook for background tasks
(`Blocks.extra_startup_events`). Installed only on the pinned Gradio (`classroom.install`).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from .cancels import cancel_event

log = logging.getLogger(__name__)


def live_sessions(queue) -> set[str]:
    """Sessions with an event running or waiting in Gradio's `queue`."""
    running = {e.session_hash for job in queue.active_jobs if job for e in job}
    waiting = {e.session_hash for lane in queue.event_queue_per_concurrency_id.values()
               for e in lane.queue}
    return running | waiting


def oldest_message(queue, session: str):
    """The message at the head of `session`'s pending messages (None when none is pending)."""
    messages = queue.pending_messages_per_session.get(session)
    pending = getattr(messages, "_queue", None)  # asyncio.Queue's deque: no public peek
    return pending[0] if pending else None


class UnreadStreams:
    """Which sessions nobody reads, told from the head of each one's pending messages.

    >>> unread = UnreadStreams(unread_s=30)   # then, every poll: unread.sessions(queue, now)
    """

    def __init__(self, unread_s: float) -> None:
        self.unread_s = unread_s
        self._heads: dict[str, tuple[object, float]] = {}  # session -> (oldest message, seen at)

    def sessions(self, queue, now: float) -> list[str]:
        """Live sessions whose oldest pending message has waited `unread_s` seconds unread."""
        live, heads, out = live_sessions(queue), {}, []
        for session in live:
            head = oldest_message(queue, session)
            if head is None:
                continue
            seen = self._heads.get(session)
            if seen is None or seen[0] is not head:  # read since (or new): its clock restarts
                seen = (head, now)
            heads[session] = seen
            if now - seen[1] >= self.unread_s:
                out.append(session)
        self._heads = heads  # ended sessions are forgotten
        return out


async def stop_session(app, session: str) -> int:
    """Cancel every event of `session` as a Stop does: waiting ones leave the line, running
    ones are cancelled and their generators closed; the unread pile is dropped. Return how
    many were running."""
    queue = app.get_blocks()._queue
    running = [e for job in queue.active_jobs if job for e in job if e.session_hash == session]
    await queue.clean_events(session_hash=session)  # what Gradio does when a stream drops
    messages = queue.pending_messages_per_session.get(session)
    while messages is not None and not messages.empty():
        messages.get_nowait()  # outputs nobody will read
    for event in running:
        await cancel_event(app, session, event.fn._id, event._id)
    return len(running)


async def watch_unread(demo, unread_s: float, poll_s: float,
                       clock: Callable[[], float] = time.monotonic) -> None:
    """Every `poll_s` seconds, stop the sessions nobody has read for `unread_s` (runs as long
    as the app; each stop is a task of its own, so a slow one delays no other)."""
    unread, stopping, tasks = UnreadStreams(unread_s), set(), set()

    async def stop(app, session: str) -> None:
        try:
            n = await stop_session(app, session)
            log.info("stopped %d event(s) of a session nobody read for %.0f s", n, unread_s)
        except Exception:  # a failed stop is tried again at the next poll
            log.exception("stopping an unread session failed")
        finally:
            stopping.discard(session)

    while not demo._queue.stopped:  # closed: the next launch starts a watcher of its own
        await asyncio.sleep(poll_s)
        app = demo._queue.server_app
        if app is None:
            continue
        for session in unread.sessions(demo._queue, clock()):
            if session not in stopping:
                stopping.add(session)
                task = asyncio.get_running_loop().create_task(stop(app, session))
                tasks.add(task)
                task.add_done_callback(tasks.discard)


def stop_unread_streams(demo, unread_s: float, poll_s: float) -> None:
    """Start `watch_unread` when `demo`'s server starts (call before launch; 0 = never)."""
    if unread_s <= 0:
        return
    running: list[asyncio.Task] = []  # held, so the task is not collected

    async def start() -> None:
        running.append(asyncio.get_running_loop().create_task(
            watch_unread(demo, unread_s, poll_s)))

    demo.extra_startup_events.append(start)
