"""Stop, answered cleanly: what the server says when a visitor presses Stop (or a click
supersedes a running event), so the page never shows an error for a Stop.

Gradio's page sends every Stop as `POST /cancel` then `POST /reset`. Its own `/cancel`
(Gradio 6.31) has three faults a busy classroom hits:
- a Stop sent before the server gave the event an id posts `{"event_id": null}`: a 422, a
  console error on the visitor's page;
- it ends the cancelled event with a completion message that has no `data`: the page's
  handler throws on it and marks the event's outputs "Error". The page also marks them done
  when `/reset` returns, so whichever lands last wins: on a loaded machine the message lands
  last and the answer under a Stop shows a red "Error" for good;
- two cancels of one event (Stop pressed twice, a closing tab) race on one dict: a 500.

`CleanCancels` answers the first with a plain 200 ("nothing to cancel"), and runs `/cancel`
itself as Gradio's route does, with a completion message whose `data` is empty (the page
reads "no output changed") and the race made harmless. `/reset` (a no-op in Gradio 6)
and any app that is not Gradio's pass through.
"""
from __future__ import annotations

import json

from .request_limits import send_json

NOTHING_TO_CANCEL = {"success": False, "detail": "That request had not started: nothing to cancel."}
_ROUTES = ("/cancel", "/reset")


def _is_gradio(app) -> bool:
    return all(hasattr(app, name) for name in ("get_blocks", "iterators", "iterators_to_reset",
                                                "lock"))


async def cancel_event(app, session_hash: str, fn_index: int, event_id: str) -> None:
    """Gradio's `/cancel`, step for step: stop the event's task (it ends at the handler's next
    yield), drop it from the queue, tell the page it completed (with `data: []`: no output
    changed), close its iterator once (a second cancel finds nothing to close)."""
    from gradio.server_messages import ProcessCompletedMessage
    from gradio.utils import cancel_tasks, safe_aclose_iterator

    await cancel_tasks({f"{session_hash}_{fn_index}"})
    queue = app.get_blocks()._queue
    session_open = session_hash in queue.pending_messages_per_session
    running = event_id in queue.pending_event_ids_session.get(session_hash, {})
    await queue.remove_from_queue(event_id)
    if session_open and running:
        queue.pending_messages_per_session[session_hash].put_nowait(
            ProcessCompletedMessage(output={"data": []}, success=True, event_id=event_id))
    if event_id in app.iterators:
        async with app.lock:
            iterator = app.iterators.pop(event_id, None)
            if iterator is not None:
                try:
                    await safe_aclose_iterator(iterator)
                except Exception:  # noqa: BLE001 - as Gradio: a generator failing to close
                    pass
                app.iterators_to_reset.add(event_id)


class CleanCancels:
    """ASGI middleware: `/cancel` and `/reset` as the module docstring says."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path", "").rstrip("/")
        if (scope.get("type") != "http" or scope.get("method") != "POST"
                or not path.endswith(_ROUTES)):
            await self.app(scope, receive, send)
            return
        messages, body = [], b""
        while True:  # a cancel body is a few dozen bytes (and LimitRequestSize caps it)
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if message.get("type") != "http.request" or not message.get("more_body"):
                break
        try:
            fields = json.loads(body or b"{}")
            event_id = fields.get("event_id", ...)
        except (ValueError, AttributeError):
            fields, event_id = {}, ...
        if event_id is None:
            await send_json(send, 200, NOTHING_TO_CANCEL)
            return
        session_hash, fn_index = fields.get("session_hash"), fields.get("fn_index")
        if (path.endswith("/cancel") and _is_gradio(scope.get("app"))
                and isinstance(event_id, str) and isinstance(session_hash, str)
                and isinstance(fn_index, int) and not isinstance(fn_index, bool)):
            await cancel_event(scope["app"], session_hash, fn_index, event_id)
            await send_json(send, 200, {"success": True})
            return

        async def replay():
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)
