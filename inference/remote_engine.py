"""When a class outgrows one machine: "Try it" chats served by another engine.

With `LLM_LAB_SERVE_URL` set to an OpenAI-compatible server (e.g. vLLM on a GPU box) the chat
tab streams from `POST /v1/completions` there instead of this process's batcher, one
`StepEvent` per chunk; the lessons keep measuring this machine. The server view reads its
Prometheus metrics (`GET /metrics`). Standard library only.
"""
from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import RemoteEngineError
from .events import StepEvent
from .sampling import SamplingSettings


@dataclass(frozen=True)
class RemoteStats:
    """The remote engine's own figures, from its metrics endpoint (None where it has none)."""

    url: str
    engine: str  # e.g. "vLLM" (from the metric names), or "an OpenAI-compatible server"
    running: float | None  # requests being decoded now
    waiting: float | None  # requests queued
    kv_cache_usage: float | None  # 0..1 share of its KV cache blocks in use
    error: str = ""  # why the metrics could not be read, if they could not


def sse_payloads(lines: Iterable[bytes]) -> Iterator[dict]:
    """The JSON payloads of server-sent event lines (`data: {...}`), up to `data: [DONE]`;
    comments and blank lines skipped.

    >>> list(sse_payloads([b'data: {"a": 1}', b'', b': keep-alive', b'data: [DONE]']))
    [{'a': 1}]
    """
    for raw in lines:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        yield json.loads(data)


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text exposition -> {metric name: value}, labels dropped, same names summed.

    >>> parse_metrics('# HELP x\\nvllm:num_requests_running{model="m"} 3.0\\nup 1')
    {'vllm:num_requests_running': 3.0, 'up': 1.0}
    """
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name_part, _, value = line.rpartition(" ")
        name = name_part.split("{", 1)[0].strip()
        try:
            out[name] = out.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return out


def stats_from_metrics(url: str, metrics: dict[str, float]) -> RemoteStats:
    """The figures the server view shows, from vLLM's metric names (older and newer ones)."""
    def first(*names: str) -> float | None:
        return next((metrics[n] for n in names if n in metrics), None)

    engine = "vLLM" if any(k.startswith("vllm:") for k in metrics) else \
        "an OpenAI-compatible server"
    return RemoteStats(url, engine, first("vllm:num_requests_running"),
                       first("vllm:num_requests_waiting"),
                       first("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"))


class RemoteRequest:
    """One chat sent to the remote engine, read like a local `ServedRequest`."""

    def __init__(self, engine: RemoteEngine, prompt_ids: list[int], sampling: SamplingSettings,
                 max_new_tokens: int) -> None:
        self.engine, self.prompt_ids, self.sampling = engine, list(prompt_ids), sampling
        self.max_new_tokens = max_new_tokens
        self.ahead = 0  # the remote queue is not visible before the request is sent
        self.submitted = time.perf_counter()
        self.queued_seconds = 0.0
        self.mean_batch_rows = 0.0  # not visible from here (the server view reads its metrics)
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    def events(self, timeout_s: float = 120.0, idle_s: float | None = None
               ) -> Iterator[StepEvent]:
        """One event per chunk of text, the last one marked finished (`idle_s`: unused, the
        HTTP stream has no idle ticks; a Stop lands at the next chunk)."""
        s, text, last, index = self.sampling, "", self.submitted, 0
        body = {"model": self.engine.model, "prompt": self.prompt_ids,
                "max_tokens": self.max_new_tokens, "temperature": s.temperature,
                "top_p": s.top_p, "stream": True}
        if s.top_k:
            body["top_k"] = s.top_k
        if s.seed is not None and not s.greedy:
            body["seed"] = s.seed
        try:
            for chunk in self.engine.stream("/v1/completions", body, timeout_s):
                if self._cancelled.is_set():
                    return
                choice = (chunk.get("choices") or [{}])[0]
                piece, reason = choice.get("text") or "", choice.get("finish_reason")
                if not piece and not reason:
                    continue
                now = time.perf_counter()
                text += piece
                finished = None if not reason else ("max tokens" if reason == "length"
                                                    else "end of turn")
                yield StepEvent(index=index, token_id=-1, piece=piece, text=text, special=False,
                                candidates=(), chosen_by=self.sampling.describe(),
                                forward_tokens=len(self.prompt_ids) if index == 0 else 1,
                                forward_seconds=now - last, seconds=now - last,
                                cache_tokens=len(self.prompt_ids) + index, cache_bytes=0,
                                finished=finished, batch_rows=0,
                                prefill_passes=0)  # unknown: its cache and chunks are its own
                index, last = index + 1, now
                if finished:
                    return
        finally:
            self.cancel()


class RemoteEngine:
    """An OpenAI-compatible engine at `url` serving `model` (its name there)."""

    def __init__(self, url: str, model: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.model = model or self._first_model()

    def submit(self, prompt_ids: list[int], sampling: SamplingSettings | None = None,
               max_new_tokens: int = 48, candidates: int = 0, visitor: str = ""
               ) -> RemoteRequest:
        """Like `Server.submit`; sent once its events are read (`visitor` is not sent)."""
        return RemoteRequest(self, prompt_ids, sampling or SamplingSettings(), max_new_tokens)

    def stats(self) -> RemoteStats:
        try:
            text = self._get("/metrics").decode("utf-8", "replace")
        except RemoteEngineError as exc:
            return RemoteStats(self.url, "an OpenAI-compatible server", None, None, None, str(exc))
        return stats_from_metrics(self.url, parse_metrics(text))

    def describe(self) -> str:
        return f"{self.stats().engine} at {self.url} (model {self.model})"

    # ---- HTTP -----------------------------------------------------------------------------
    @contextmanager
    def _response(self, path: str, timeout_s: float, body: dict | None = None
                  ) -> Iterator[http.client.HTTPResponse]:
        """GET `path` (or POST `body` to it) -> the engine's answer, which must be HTTP 200;
        RemoteEngineError, with a sentence, otherwise or when it cannot be reached."""
        u = urlsplit(self.url)
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        conn = cls(u.hostname, u.port, timeout=timeout_s)
        try:
            conn.request("GET" if body is None else "POST", u.path.rstrip("/") + path,
                         body=None if body is None else json.dumps(body),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                why = (f"answered HTTP {resp.status} for {path}" if body is None else
                       f"refused the request (HTTP {resp.status}: "
                       f"{resp.read(200).decode('utf-8', 'replace')})")
                raise RemoteEngineError(f"The serving engine at {self.url} {why}.")
            yield resp
        except OSError as exc:
            raise RemoteEngineError(f"The serving engine at {self.url} cannot be reached "
                                    f"({type(exc).__name__}).") from None
        finally:
            conn.close()

    def _get(self, path: str) -> bytes:
        with self._response(path, 5.0) as resp:
            return resp.read()

    def _first_model(self) -> str:
        try:
            data = json.loads(self._get("/v1/models")).get("data") or []
        except (RemoteEngineError, ValueError):
            return "default"
        return data[0]["id"] if data else "default"

    def stream(self, path: str, body: dict, timeout_s: float) -> Iterator[dict]:
        """POST `body` and yield each server-sent event's JSON payload until `[DONE]`."""
        with self._response(path, timeout_s, body) as resp:
            yield from sse_payloads(iter(resp.readline, b""))
