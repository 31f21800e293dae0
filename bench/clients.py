"""The bench's light clients, standard library only: the app through Gradio's queue as a browser
speaks it, and vLLM through OpenAI's streaming chat, read on an asyncio loop over raw HTTP/1.1
(`http_lines`): a class of them costs the machine it shares with the server almost nothing.
"""
from __future__ import annotations

import asyncio
import http.client
import json
import re
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

from inference.remote_engine import sse_payloads

CHAT_TOKENS = re.compile(r"(\d+) tokens generated")
Headers = dict | Callable[[], dict] | None  # fixed headers, or a function asked per request


def _headers(headers: Headers) -> dict:
    return (headers() if callable(headers) else headers) or {}


def _get(base_url: str, path: str, headers: Headers = None
         ) -> tuple[http.client.HTTPMessage, bytes]:
    request = urllib.request.Request(base_url.rstrip("/") + path, headers=_headers(headers))
    with urllib.request.urlopen(request, timeout=60) as reply:
        return reply.headers, reply.read()


def page_cookies(base_url: str, headers: Headers = None) -> dict[str, str]:
    fields, _ = _get(base_url, "/", headers)
    pairs = (c.split(";", 1)[0].partition("=") for c in fields.get_all("set-cookie") or [])
    return {name.strip(): value.strip() for name, _, value in pairs if name.strip()}


def cookie_header(cookies: dict[str, str]) -> dict:
    """The Cookie header a browser sends back (none: no header).

    >>> cookie_header({"a": "1", "b": "2"}), cookie_header({})
    ({'Cookie': 'a=1; b=2'}, {})
    """
    return {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else {}


def app_config(base_url: str) -> dict:
    return json.loads(_get(base_url, "/config")[1])


def chat_fn_index(base_url: str, api_name: str = "chat") -> int:
    return endpoint_data(app_config(base_url), api_name, {})[0]


def endpoint_data(config: dict, api_name: str, values: dict[str, object]) -> tuple[int, list]:
    """The queue's number for `api_name` and its inputs in order: each input's value from
    `values` by its elem_id, else the value the page starts with.

    >>> config = {"components": [{"id": 1, "props": {"elem_id": "text", "value": ""}},
    ...                          {"id": 2, "props": {"value": 8}}],
    ...           "dependencies": [{"id": 7, "api_name": "run", "inputs": [1, 2]}]}
    >>> endpoint_data(config, "run", {"text": "hi"})
    (7, ['hi', 8])
    """
    props = {c["id"]: c.get("props", {}) for c in config["components"]}
    dep = next(d for d in config["dependencies"] if d.get("api_name") == api_name)
    data = [values.get(props[i].get("elem_id"), props[i].get("value")) for i in dep["inputs"]]
    return dep["id"], data


def answer_text(chat_output) -> str:
    """The answer text in an update of the chat output: the assistant message's (a full
    value) or what its diffs append or replace.

    >>> answer_text([["append", [1, "content", 0, "text"], "Hi"]])
    'Hi'
    >>> answer_text([{"role": "user", "content": [{"text": "Q", "type": "text"}]},
    ...              {"role": "assistant", "content": [{"text": "", "type": "text"}]}])
    ''
    """
    if not chat_output:
        return ""
    if isinstance(chat_output[0], dict):  # full value: [user message, assistant message]
        last = chat_output[-1]
        return "".join(c.get("text", "") for c in last.get("content") or []
                       if isinstance(c, dict)) if last.get("role") == "assistant" else ""
    return "".join(v for op, _path, v in chat_output  # diffs: [op, path, value]
                   if op in ("append", "replace") and isinstance(v, str))


async def http_lines(base_url: str, method: str, path: str, body: dict | None = None,
                     headers: Headers = None) -> AsyncIterator[bytes]:
    """One HTTP/1.1 request on its own connection: its body's lines as they arrive."""
    url = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port or 80)
    try:
        data = json.dumps(body).encode() if body is not None else b""
        head = [f"{method} {url.path.rstrip('/')}{path} HTTP/1.1",
                f"Host: {url.hostname}:{url.port or 80}", "Connection: close",
                *(f"{k}: {v}" for k, v in _headers(headers).items())]
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


async def event_messages(base_url: str, fn_index: int, data: list, session: str,
                         headers: Headers = None) -> AsyncIterator[dict]:
    """Queue one event for `session` and yield its messages up to `process_completed`."""
    joined = [line async for line in http_lines(base_url, "POST", "/gradio_api/queue/join", {
        "data": data, "fn_index": fn_index, "session_hash": session,
        "event_data": None, "trigger_id": None}, headers)]
    event = json.loads(b"".join(joined))["event_id"]
    async for line in http_lines(base_url, "GET", f"/gradio_api/queue/data?session_hash={session}",
                                 headers=headers):
        msg = json.loads(line[5:]) if line.startswith(b"data:") else {}
        if msg.get("event_id") == event:
            yield msg
            if msg.get("msg") == "process_completed":
                return
    raise RuntimeError("the event stream ended before the event completed")


def call(base_url: str, fn_index: int, data: list, session: str | None = None,
         timeout_s: float = 300.0, headers: Headers = None, stamps: list[float] | None = None,
         on_message: Callable[[dict], None] | None = None) -> list:
    """One event of any endpoint, to its final outputs (RuntimeError with the app's message).
    `stamps` gets the perf_counter of every update; `on_message` sees every message."""
    async def last_message() -> dict:
        final = {}
        async with asyncio.timeout(timeout_s):
            async for msg in event_messages(base_url, fn_index, data,
                                            session or uuid.uuid4().hex[:12], headers):
                if stamps is not None and msg.get("msg") == "process_generating":
                    stamps.append(time.perf_counter())
                if on_message is not None:
                    on_message(msg)
                final = msg
        return final

    final = asyncio.run(last_message())
    output = final.get("output") or {}
    if not final.get("success"):
        raise RuntimeError(f"the event ended without a result: {output.get('error') or output}"
                           [:300])
    return output.get("data") or []


async def app_tokens(base_url: str, fn_index: int, prompt: str,
                     new_tokens: int) -> AsyncIterator[int]:
    """One chat with the app: the tokens so far at each update with text, then the app's count."""
    updates = 0
    async for msg in event_messages(base_url, fn_index, [prompt, new_tokens],
                                    uuid.uuid4().hex[:12]):
        output = msg.get("output") or {}
        data = output.get("data") or [None, None]
        if msg.get("msg") == "process_generating" and answer_text(data[0]):
            updates += 1
            yield updates
        elif msg.get("msg") == "process_completed":
            m = CHAT_TOKENS.search(str(data[1:2]))
            if not msg.get("success") or m is None:
                raise RuntimeError(f"the chat ended without an answer: {str(output)[:200]}")
            yield int(m.group(1))


def chat_body(model: str, prompt: str, new_tokens: int) -> dict:
    """The app's chat in OpenAI terms: one user message, greedy, at most `new_tokens`."""
    return {"model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": new_tokens, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}}


async def chat_tokens(base_url: str, model: str, prompt: str,
                      new_tokens: int) -> AsyncIterator[int]:
    """One chat with an OpenAI server: tokens so far at each piece, then its `usage` count."""
    pieces = 0
    async for line in http_lines(base_url, "POST", "/v1/chat/completions",
                                 chat_body(model, prompt, new_tokens)):
        for chunk in sse_payloads([line]):
            if any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
                pieces += 1
                yield pieces
            if (chunk.get("usage") or {}).get("completion_tokens") is not None:
                yield chunk["usage"]["completion_tokens"]
