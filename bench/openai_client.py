"""One streaming chat against an OpenAI-compatible server (vLLM's, or any other), timed the way
the app's own serving bench times a chat: submit to the last token (latency), submit to the
first token (TTFT), and the tokens received.

Standard library only (`http.client`), so the bench needs nothing the app does not have, and
the vLLM peer's venv is never imported here. The wire format is the server-sent events of
`POST /v1/chat/completions` with `"stream": true`: one `data: {json}` line per chunk, each
chunk's `choices[0].delta.content` a piece of text, a last chunk with `usage` when
`stream_options.include_usage` is asked for, then `data: [DONE]`, read by the engine's own parser
(`inference.remote_engine.sse_payloads`).
"""
from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

from inference.remote_engine import sse_payloads


def chat_body(model: str, prompt: str, new_tokens: int) -> dict:
    """The request the app's chat makes, in OpenAI terms: one user message (the server applies
    the model's chat template, as the app does), greedy, at most `new_tokens` tokens."""
    return {"model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": new_tokens, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}}


def stream_chat(base_url: str, body: dict, timeout_s: float = 300.0) -> Iterator[dict]:
    """POST `body` to `{base_url}/v1/chat/completions` and yield each streamed chunk."""
    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=timeout_s)
    try:
        path = url.path.rstrip("/") + "/v1/chat/completions"
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read(300).decode('utf-8', 'replace')}")
        yield from sse_payloads(iter(resp.readline, b""))
    finally:
        conn.close()


def timed_chat(base_url: str, model: str, prompt: str, new_tokens: int) -> dict:
    """One chat, as the serving bench records it: ok, latency_s, ttft_s, tokens, start, end
    (perf_counter), or ok=False with the error."""
    t0 = time.perf_counter()
    first, tokens, pieces = None, None, 0
    try:
        for chunk in stream_chat(base_url, chat_body(model, prompt, new_tokens)):
            if chunk.get("usage"):
                tokens = chunk["usage"].get("completion_tokens")
            for choice in chunk.get("choices") or []:
                if (choice.get("delta") or {}).get("content"):
                    pieces += 1
                    if first is None:
                        first = time.perf_counter()
        end = time.perf_counter()
        return {"ok": first is not None, "latency_s": end - t0, "start": t0, "end": end,
                "ttft_s": first - t0 if first is not None else None,
                "tokens": tokens if tokens is not None else pieces}
    except Exception as exc:  # counted as an error in the report, like the app's clients
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
