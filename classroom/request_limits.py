"""Limits on a request itself, before Gradio reads it: what keeps one client posting huge
bodies from slowing every other visitor (reading and parsing 47 MB of JSON holds a core and
hundreds of MB for seconds), and what turns a malformed request's raw validation dump into a
sentence.

`LimitRequestSize`: a body over `max_bytes` is refused with HTTP 413 and a sentence: at once
when its Content-Length says so, and as soon as the bytes streamed in pass the limit when it
does not (a chunked upload). No lesson sends more than a prompt box's 20,000 characters (at
most ~80 KB as JSON), so the limit (`Settings.max_request_bytes`) is far above any real use.

`WordValidationErrors`: FastAPI answers a body of the wrong shape (no `data` list, a word for
`fn_index`) with a 422 whose body lists Python types; here it becomes one sentence.
"""
from __future__ import annotations

import json

TOO_BIG = ("This request is {size} bytes; this app takes at most {limit:,} bytes per request "
           "(a prompt box holds far less). Nothing was run.")
MALFORMED = ("This request is not one the app understands: send a JSON object with a `data` "
             "list (one value per input) and the endpoint's name or index.")


async def send_json(send, status: int, payload: dict, close: bool = False) -> None:
    """Answer an ASGI request with `payload` as JSON (`close`: and drop the connection, for a
    body left unread)."""
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status,
                "headers": headers + ([(b"connection", b"close")] if close else [])})
    await send({"type": "http.response.body", "body": body})


async def _answer(send, status: int, message: str) -> None:
    await send_json(send, status, {"detail": message}, close=True)


def _declared_length(scope) -> int | None:
    for name, value in scope.get("headers") or ():
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class _TooBig(Exception):
    """Raised inside the app's read of a body that streamed past the limit."""


class LimitRequestSize:
    """ASGI middleware: refuse any HTTP request whose body is over `max_bytes` (413)."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _answer(send, 413, TOO_BIG.format(size=f"{declared:,}", limit=self.max_bytes))
            return
        seen = 0
        refused = False
        started = False

        async def counted_receive():
            nonlocal seen, refused
            message = await receive()
            if message.get("type") == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    if not refused and not started:
                        await _answer(send, 413, TOO_BIG.format(
                            size=f"over {self.max_bytes:,}", limit=self.max_bytes))
                    refused = True
                    raise _TooBig  # the app stops reading here; caught below
            return message

        async def guarded_send(message):
            nonlocal started
            if refused:
                return  # the 413 already went out: whatever the app says now is dropped
            if message.get("type") == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except _TooBig:
            pass  # the 413 went out when the limit was passed


class WordValidationErrors:
    """ASGI middleware: a 422 validation body from the API routes becomes one sentence."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        swallowing = False

        async def worded_send(message):
            nonlocal swallowing
            if message.get("type") == "http.response.start" and message.get("status") == 422:
                swallowing = True
                return
            if swallowing:
                if message.get("type") == "http.response.body" and not message.get("more_body"):
                    await _answer(send, 422, MALFORMED)
                return
            await send(message)

        await self.app(scope, receive, worded_send)
