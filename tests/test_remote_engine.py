"""LLM_LAB_SERVE_URL: Try it's chats sent to an OpenAI-compatible engine, against a
fake one on loopback: the chat's own token ids go out, the streamed text comes back as events,
the finish reason is kept, the server view reads the engine's metrics, and an engine that
cannot be reached gets a sentence."""
from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from inference.config import Settings
from inference.remote_engine import (
    RemoteEngine,
    RemoteEngineError,
    parse_metrics,
    stats_from_metrics,
)
from inference.sampling import SamplingSettings
from visualizations.server_view import remote_stats_md

PIECES = ["Blue", " light", " scatters", " most."]
METRICS = """# HELP vllm:num_requests_running Number of requests running.
vllm:num_requests_running{model_name="smol"} 3.0
vllm:num_requests_waiting{model_name="smol"} 1.0
vllm:kv_cache_usage_perc{model_name="smol"} 0.25
"""


class FakeEngine(BaseHTTPRequestHandler):
    bodies: list[dict] = []

    def do_GET(self):  # noqa: N802
        if self.path == "/v1/models":
            self._send(200, json.dumps({"data": [{"id": "smol"}]}).encode())
        elif self.path == "/metrics":
            self._send(200, METRICS.encode())
        else:
            self._send(404, b"no")

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeEngine.bodies.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        n = min(body["max_tokens"], len(PIECES))
        for i, p in enumerate(PIECES[:n]):
            reason = None if i < n - 1 else ("length" if n < len(PIECES) else "stop")
            chunk = {"choices": [{"text": p, "finish_reason": reason}]}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def _send(self, code, data):
        self.send_response(code)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def engine_url():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeEngine)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join()


def test_remote_engine_streams_the_answer_as_events(engine_url):
    engine = RemoteEngine(engine_url)
    assert engine.model == "smol"  # read from /v1/models
    events = list(engine.submit([1, 2, 3], SamplingSettings(), 48).events())
    assert [e.piece for e in events] == PIECES and events[-1].text == "".join(PIECES)
    assert events[-1].finished == "end of turn" and all(e.finished is None for e in events[:-1])
    assert [e.index for e in events] == [0, 1, 2, 3] and events[0].forward_tokens == 3
    body = FakeEngine.bodies[-1]
    assert body["prompt"] == [1, 2, 3] and body["temperature"] == 0.0 and body["stream"]


def test_remote_engine_keeps_the_token_limit_reason(engine_url):
    events = list(RemoteEngine(engine_url).submit([5], None, 2).events())
    assert len(events) == 2 and events[-1].finished == "max tokens"


def test_remote_metrics_read_as_the_server_view_shows_them(engine_url):
    stats = RemoteEngine(engine_url).stats()
    assert (stats.engine, stats.running, stats.waiting, stats.kv_cache_usage) == (
        "vLLM", 3.0, 1.0, 0.25)
    md = remote_stats_md(stats)
    assert "vLLM" in md and "**3** requests running" in md and "**25%** in use" in md
    older = stats_from_metrics("u", parse_metrics("vllm:gpu_cache_usage_perc 0.5"))
    assert older.kv_cache_usage == 0.5 and older.running is None
    assert "not reported" in remote_stats_md(older)


def test_an_unreachable_remote_engine_gets_a_sentence():
    engine = RemoteEngine("http://127.0.0.1:9", model="m")  # nothing listens on port 9
    with pytest.raises(RemoteEngineError, match="cannot be reached"):
        list(engine.submit([1], None, 4).events())
    assert "could not be read" in remote_stats_md(engine.stats())


def test_serve_url_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("LLM_LAB_SERVE_URL", "http://gpu-box:8000")
    assert Settings.from_env().serve_url == "http://gpu-box:8000"
    monkeypatch.delenv("LLM_LAB_SERVE_URL")
    assert Settings.from_env().serve_url is None


def test_try_it_chat_through_a_remote_engine(lm, engine_url):
    from lessons.chat_handlers import generate_chat

    async def collect() -> list:  # as Gradio runs the chat: an async generator on its loop
        return [f async for f in generate_chat(lm, Settings(), RemoteEngine(engine_url),
                                               "Why blue?", 48)]
    frames = asyncio.run(collect())
    assert frames[-1].history[1]["content"] == "".join(PIECES)
    assert "Served by vLLM at " + engine_url in frames[-1].stats
    assert "computed" not in frames[-1].stats  # its cache and chunks are the engine's own
    from lessons.common.prompt_input import encode_prompt
    # the chat's own ids went out: chat template applied here, typed markers kept as text
    assert FakeEngine.bodies[-1]["prompt"] == encode_prompt(lm, Settings(), "Why blue?")
