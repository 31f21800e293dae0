"""What keeps one visitor from spoiling the shared app for the room: fair queueing, no
uploads (no lesson takes a file, so the upload route answers 403), and a sentence instead of a
bare "Error" when an API client sends a word where a number belongs (Gradio checks slider and
number values before any handler runs; `explain_bad_numbers` words its refusals).

Fair queueing: one visitor cannot fill the queue for everyone.

Gradio keeps one queue per concurrency lane ("model", "heavy", "chat", ...) and refuses new
events only when all of them together are full, so one script (or one very impatient
student) joining 66 events locks every other visitor out. `limit_per_session` puts two
checks in front of Gradio's own, at the moment an event asks to join:

- a session may have at most `per_session` events waiting or running at once;
- a lane may have at most `per_lane` events waiting.

A refused event gets HTTP 503 with a sentence saying why; everyone else is served.
"""
from __future__ import annotations

import asyncio
import json

import gradio as gr

SESSION_FULL = ("You already have {n} requests waiting or running in this tab. Wait for them "
                "to finish (or press Stop), then try again.")
LANE_FULL = ("{n} requests are already waiting for this part of the app. Please try again in "
             "a few seconds.")


def limit_per_session(demo: gr.Blocks, per_session: int, per_lane: int) -> None:
    """Wrap `demo`'s queue so each join is checked first (call after `demo.queue()`)."""
    queue = demo._queue
    admit = queue.push
    lock = asyncio.Lock()

    async def push(body, request, username):
        async with lock:  # the check and Gradio's append happen together
            fn = demo.fns.get(body.fn_index) if body.fn_index is not None else None
            waiting = [e for lane in queue.event_queue_per_concurrency_id.values()
                       for e in lane.queue]
            running = [e for job in queue.active_jobs if job for e in job]
            mine = sum(e.session_hash == body.session_hash for e in waiting + running)
            if body.session_hash and mine >= per_session:
                return False, SESSION_FULL.format(n=mine), "queue_full"
            lane = queue.event_queue_per_concurrency_id.get(getattr(fn, "concurrency_id", None))
            if lane is not None and len(lane.queue) >= per_lane:
                return False, LANE_FULL.format(n=len(lane.queue)), "queue_full"
            return await admit(body, request, username)

    queue.push = push


UPLOADS_OFF = "This app takes no files: uploads are switched off."


class RefuseUploads:
    """ASGI middleware: every POST to an `.../upload` route gets 403 and a sentence."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if (scope.get("type") == "http" and scope.get("method") == "POST"
                and scope.get("path", "").rstrip("/").endswith("/upload")):
            body = json.dumps({"detail": UPLOADS_OFF}).encode()
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def explain_bad_numbers(demo: gr.Blocks) -> None:
    """Every slider and number box refuses a non-number (or NaN) with its own label."""
    for block in demo.blocks.values():
        if isinstance(block, (gr.Slider, gr.Number)):
            block.preprocess = _worded(block.preprocess, block.label or "This setting")


def _worded(preprocess, label: str):
    def run(value):
        if isinstance(value, float) and value != value:
            raise gr.Error(f"{label} must be a number (got NaN).", print_exception=False)
        try:
            return preprocess(value)
        except gr.Error:
            raise  # Gradio's own range messages already say what is allowed
        except (TypeError, ValueError) as exc:
            raise gr.Error(f"{label} must be a number (got {str(value)[:40]!r}).",
                           print_exception=False) from exc
    return run
