"""A request over the size limit is refused at once, whatever it claims, and a
malformed body gets a sentence instead of a raw 422 dump. First on a small ASGI app (every
path of the middleware, in milliseconds), then on the running app with a 47 MB body."""
from __future__ import annotations

import time

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from classroom.request_limits import LimitRequestSize, WordValidationErrors
from inference.config import LIMITS

LIMIT = 1_000


async def echo(request):
    body = await request.body()
    return JSONResponse({"got": len(body)})


async def invalid(request):
    return JSONResponse({"detail": [{"type": "list_type", "msg": "<class 'str'>"}]},
                        status_code=422)


def small_app() -> TestClient:
    app = Starlette(routes=[Route("/echo", echo, methods=["POST"]),
                            Route("/invalid", invalid, methods=["POST"])],
                    middleware=[Middleware(LimitRequestSize, max_bytes=LIMIT),
                                Middleware(WordValidationErrors)])
    return TestClient(app)


def test_request_size_limit_by_content_length_and_by_stream():
    client = small_app()
    assert client.post("/echo", content=b"x" * LIMIT).json() == {"got": LIMIT}  # at the limit
    declared = client.post("/echo", content=b"x" * (LIMIT + 1))
    assert declared.status_code == 413 and "at most 1,000 bytes" in declared.json()["detail"]

    def chunks():  # no Content-Length: counted as the bytes arrive
        for _ in range(50):
            yield b"y" * 100

    streamed = client.post("/echo", content=chunks())
    assert streamed.status_code == 413 and "Nothing was run" in streamed.json()["detail"]


def test_request_malformed_body_gets_a_sentence_not_a_type_dump():
    reply = small_app().post("/invalid", content=b"{}")
    assert reply.status_code == 422
    assert "<class" not in reply.text and "data" in reply.json()["detail"]


def test_request_of_47_mb_is_refused_at_once_by_the_app(server):
    body = b"{" + b" " * 47_000_000 + b"}"
    start = time.perf_counter()
    try:
        reply = httpx.post(server.url + "gradio_api/queue/join", content=body, timeout=60,
                           headers={"content-type": "application/json"})
        status, detail = reply.status_code, reply.json()["detail"]
    except httpx.HTTPError as exc:  # the server may close before the upload ends
        status, detail = 413, str(exc)
    elapsed = time.perf_counter() - start
    assert status == 413, (status, detail)
    assert elapsed < 10, elapsed
    assert LIMITS.max_request_bytes <= 2_000_000
    # A malformed join on the real app: a sentence, no pydantic dump.
    reply = httpx.post(server.url + "gradio_api/queue/join", json={"data": "x", "fn_index": "a"},
                       timeout=30)
    assert reply.status_code == 422 and "<class" not in reply.text, reply.text
    assert "data" in reply.json()["detail"]
