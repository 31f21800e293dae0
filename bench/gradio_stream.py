"""The bench's light client of the running app, through Gradio's own queue protocol.

Standard library only, as the vLLM client is: the bench's 30 clients share the machine with
the server they measure, and `gradio_client` spent ~0.65 of a core on a class's streams (its
threads and diffs, measured with `psutil`), which the app then lacked while vLLM's clients cost
almost nothing. The wire is what a browser speaks:

1. `POST /gradio_api/queue/join` `{"data": [prompt, new_tokens], "fn_index": …,
   "session_hash": …}` -> `{"event_id": …}`;
2. `GET /gradio_api/queue/data?session_hash=…`: server-sent events, one `data: {json}` line
   each; `process_generating` carries the outputs (the first in full, then diffs such as
   `["append", [1, "content", 0, "text"], " there"]`), `process_completed` the final outputs
   in full (the chat, then the stats line with "N tokens generated").

`app_tokens()` speaks it on one asyncio loop for every student of the serving workloads;
`call()`, for any endpoint and read to its end, for the classroom's and the memory bench's
visitors, who may carry a browser's cookies (`page_cookies()`, `cookie_header()`).

    >>> answer_text([["append", [1, "content", 0, "text"], "Hi"]])
    'Hi'
    >>> answer_text([{"role": "user", "content": [{"text": "Q", "type": "text"}]},
    ...              {"role": "assistant", "content": [{"text": "", "type": "text"}]}])
    ''
"""
from __future__ import annotations

import http.client
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from urllib.parse import urlsplit

CHAT_TOKENS = re.compile(r"(\d+) tokens generated")
Headers = dict | Callable[[], dict] | None  # fixed headers, or a function asked per request


def _headers(headers: Headers) -> dict:
    return (headers() if callable(headers) else headers) or {}


def _fetch(base_url: str, method: str, path: str, body: dict | None = None,
           headers: Headers = None) -> tuple[http.client.HTTPResponse, bytes]:
    """One request on its own connection, read to its end: (response, body); RuntimeError
    with the start of the body unless the status is 200."""
    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=60)
    sent = {"Content-Type": "application/json"} if body is not None else {}
    try:
        conn.request(method, url.path.rstrip("/") + path,
                     body=json.dumps(body) if body is not None else None,
                     headers={**sent, **_headers(headers)})
        resp = conn.getresponse()
        text = resp.read()
    finally:
        conn.close()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {text[:300].decode('utf-8', 'replace')}")
    return resp, text


def page_cookies(base_url: str, headers: Headers = None) -> dict[str, str]:
    """Load the app's page as a browser does first; the cookies its answer sets, by name."""
    resp, _ = _fetch(base_url, "GET", "/", headers=headers)
    pairs = (c.split(";", 1)[0].partition("=") for c in resp.headers.get_all("set-cookie") or [])
    return {name.strip(): value.strip() for name, _, value in pairs if name.strip()}


def cookie_header(cookies: dict[str, str]) -> dict:
    """The Cookie header sending `cookies` back, as a browser does (none: no header).

    >>> cookie_header({"a": "1", "b": "2"}), cookie_header({})
    ({'Cookie': 'a=1; b=2'}, {})
    """
    return {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else {}


def app_config(base_url: str) -> dict:
    """The app's config (its components and their events), as a page reads it first."""
    return json.loads(_fetch(base_url, "GET", "/config")[1])


def chat_fn_index(base_url: str, api_name: str = "chat") -> int:
    """The queue's number for the app's `api_name` endpoint, from the app's config."""
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
    """The answer text an update of the chat output carries: the assistant message's text
    (a full value: a list of messages) or the text its diffs append or replace."""
    if not chat_output:
        return ""
    if isinstance(chat_output[0], dict):  # full value: [user message, assistant message]
        last = chat_output[-1]
        return "".join(c.get("text", "") for c in last.get("content") or []
                       if isinstance(c, dict)) if last.get("role") == "assistant" else ""
    return "".join(v for op, _path, v in chat_output  # diffs: [op, path, value]
                   if op in ("append", "replace") and isinstance(v, str))


def join_queue(base_url: str, fn_index: int, data: list, session: str,
               headers: Headers = None) -> str:
    """Put one event in the app's queue for `session`; return its event id. `headers`: e.g.
    the visitor's X-Forwarded-For, as a Space's proxy sends it."""
    return json.loads(_fetch(base_url, "POST", "/gradio_api/queue/join", {
        "data": data, "fn_index": fn_index, "session_hash": session,
        "event_data": None, "trigger_id": None}, headers)[1])["event_id"]


def event_messages(url, session: str, event: str, timeout_s: float,
                   headers: Headers = None) -> Iterator[dict]:
    """The session's stream messages for `event`, up to and including `process_completed`."""
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=timeout_s)
    try:
        conn.request("GET", f"{url.path.rstrip('/')}/gradio_api/queue/data?session_hash={session}",
                     headers=_headers(headers))
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status} on the event stream")
        for line in iter(resp.readline, b""):
            msg = json.loads(line[5:]) if line.startswith(b"data:") else {}
            if msg.get("event_id") == event:
                yield msg
                if msg.get("msg") == "process_completed":
                    return
    finally:
        conn.close()


def call(base_url: str, fn_index: int, data: list, session: str | None = None,
         timeout_s: float = 300.0, headers: Headers = None, stamps: list[float] | None = None,
         on_message: Callable[[dict], None] | None = None) -> list:
    """One event of any endpoint, start to end, as a visitor with `session` (a new one when
    None): its final outputs, or RuntimeError with the app's own message when it failed.
    `stamps`: a list to append the perf_counter of every streamed update to; `on_message`:
    called with every message of the event as it arrives."""
    session = session or uuid.uuid4().hex[:12]
    event = join_queue(base_url, fn_index, data, session, headers)
    final = {}
    for msg in event_messages(urlsplit(base_url), session, event, timeout_s, headers):
        if stamps is not None and msg.get("msg") == "process_generating":
            stamps.append(time.perf_counter())
        if on_message is not None:
            on_message(msg)
        final = msg
    output = final.get("output") or {}
    if not final.get("success"):
        raise RuntimeError(f"the event ended without a result: {output.get('error') or output}"
                           [:300])
    return output.get("data") or []


async def app_tokens(base_url: str, fn_index: int, prompt: str,
                     new_tokens: int) -> AsyncIterator[int]:
    """One chat with the app, for `bench.serving_workloads.drive`: yields the tokens received
    so far at every update carrying answer text (one each: an update holds at least one new
    token), and last the app's own count ("N tokens generated"); raises when the chat ends
    without one."""
    from bench.openai_client import http_lines

    session = uuid.uuid4().hex[:12]
    joined = [line async for line in http_lines(base_url, "POST", "/gradio_api/queue/join", {
        "data": [prompt, new_tokens], "fn_index": fn_index, "session_hash": session,
        "event_data": None, "trigger_id": None})]
    event, updates = json.loads(b"".join(joined))["event_id"], 0
    async for line in http_lines(base_url, "GET", f"/gradio_api/queue/data?session_hash={session}"):
        msg = json.loads(line[5:]) if line.startswith(b"data:") else {}
        if msg.get("event_id") != event:
            continue
        output = msg.get("output") or {}
        if msg.get("msg") == "process_generating" and answer_text((output.get("data")
                                                                   or [None])[0]):
            updates += 1
            yield updates
        elif msg.get("msg") == "process_completed":
            m = CHAT_TOKENS.search(str((output.get("data") or [None, None])[1:2]))
            if not msg.get("success") or m is None:
                raise RuntimeError(f"the chat ended without an answer: {str(output)[:200]}")
            yield int(m.group(1))
            return
    raise RuntimeError("the event stream ended before the chat completed")
