"""One streaming chat against an OpenAI-compatible server (vLLM's, or any other), for the
serving workloads (`bench.serving_workloads.drive`): one asyncio loop drives every student over
raw HTTP/1.1 (`http_lines`, also the app's client's), so sixty streams cost the client one
thread, not sixty.

Standard library only, so the bench needs nothing the app does not have, and the vLLM peer's
venv is never imported here. The wire format is the server-sent events of
`POST /v1/chat/completions` with `"stream": true`: one `data: {json}` line per chunk, each
chunk's `choices[0].delta.content` a piece of text, a last chunk with `usage` when
`stream_options.include_usage` is asked for, then `data: [DONE]`, read by the engine's own parser
(`inference.remote_engine.sse_payloads`).
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from inference.remote_engine import sse_payloads


def chat_body(model: str, prompt: str, new_tokens: int) -> dict:
    """The request the app's chat makes, in OpenAI terms: one user message (the server applies
    the model's chat template, as the app does), greedy, at most `new_tokens` tokens."""
    return {"model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": new_tokens, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}}


async def http_lines(base_url: str, method: str, path: str, body: dict | None = None
                     ) -> AsyncIterator[bytes]:
    """One HTTP/1.1 request on its own connection (`Connection: close`); yields the response
    body's lines as they arrive (chunked, sized or read to the end), or raises RuntimeError
    with the start of the body when the status is not 200."""
    url = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port or 80)
    try:
        data = json.dumps(body).encode() if body is not None else b""
        head = [f"{method} {url.path.rstrip('/')}{path} HTTP/1.1",
                f"Host: {url.hostname}:{url.port or 80}", "Connection: close"]
        if body is not None:
            head += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        await writer.drain()
        status_line = (await reader.readline()).split()
        if len(status_line) < 2 or not status_line[1].isdigit():
            raise RuntimeError(f"no HTTP status line from {url.netloc}: {status_line!r}"[:300])
        status = int(status_line[1])
        fields = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            key, _, value = line.decode("latin-1").partition(":")
            fields[key.strip().lower()] = value.strip()
        chunks = (_chunked(reader) if "chunked" in fields.get("transfer-encoding", "")
                  else _sized(reader, int(fields.get("content-length", -1))))
        if status != 200:
            text = b"".join([c async for c in chunks])
            raise RuntimeError(f"HTTP {status}: {text[:300].decode('utf-8', 'replace')}")
        rest = b""
        async for chunk in chunks:
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                yield line + b"\n"
        if rest:
            yield rest
    finally:
        writer.close()


async def _chunked(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """A chunked body's pieces (`<hex size>\\r\\n<bytes>\\r\\n`, ended by size 0)."""
    while size := int((await reader.readline()).split(b";")[0].strip() or b"0", 16):
        yield await reader.readexactly(size)
        await reader.readline()


async def _sized(reader: asyncio.StreamReader, length: int) -> AsyncIterator[bytes]:
    """A body of `length` bytes, or (-1) everything up to the server closing."""
    while length != 0 and (piece := await reader.read(65536 if length < 0 else length)):
        length -= len(piece) if length > 0 else 0
        yield piece


async def chat_tokens(base_url: str, model: str, prompt: str,
                      new_tokens: int) -> AsyncIterator[int]:
    """One streaming chat, for `bench.serving_workloads.drive`: yields the tokens received so
    far at every piece of text, and last the server's own count (`usage`) when it sends one."""
    pieces = 0
    async for line in http_lines(base_url, "POST", "/v1/chat/completions",
                                 chat_body(model, prompt, new_tokens)):
        for chunk in sse_payloads([line]):
            if any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
                pieces += 1
                yield pieces
            if (chunk.get("usage") or {}).get("completion_tokens") is not None:
                yield chunk["usage"]["completion_tokens"]
