"""The serving workloads' driver (`bench.serving_workloads.drive`): per-request timing (TTFT,
TPOT, latency) and the nearest-rank percentiles, on a fake stream in virtual time; the Poisson
schedule, the same for the same seed; errors counted, never fatal; and the two light clients
(`chat_tokens` for an OpenAI-compatible server, `app_tokens` for Gradio's queue) against fakes
on loopback, one chunked and one sized, driven through the same driver."""
from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench.clients import app_tokens, chat_tokens
from bench.serving_workloads import (
    WORKLOADS,
    Workload,
    arrival_offsets,
    drive,
    ratios,
    workload_figures,
)


class VirtualClock:
    """Time that moves only when every task waits: `sleep` queues a wake-up, `run` wakes the
    earliest sleeper once the others have reached their own sleeps (nothing else awaits)."""

    def __init__(self) -> None:
        self.now, self._sleepers, self._seq = 0.0, [], itertools.count()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._seq), fut))
        await fut

    def run(self, coro):
        async def main():
            task = asyncio.ensure_future(coro)
            while not task.done():
                for _ in range(20):  # every ready task runs on to its next sleep
                    await asyncio.sleep(0)
                if self._sleepers:
                    self.now, _, fut = heapq.heappop(self._sleepers)
                    fut.set_result(None)
            return task.result()
        return asyncio.run(main())


def student(prompt: str) -> int:
    return int(re.search(r"\(#(\d+)\)", prompt).group(1))


def scripted(clock: VirtualClock, starts: list | None = None, fail: int | None = None,
             final: int | None = None):
    """Student i's first token after 1 + i s, then one every 0.5 s; `fail` raises after its
    first token; `final` ends every stream with that count, as the app's last update does."""
    async def stream_one(prompt: str, new_tokens: int):
        i = student(prompt)
        if starts is not None:
            starts.append(clock())
        await clock.sleep(1.0 + i)
        yield 1
        if i == fail:
            raise RuntimeError("the server went away")
        for n in range(2, new_tokens + 1):
            await clock.sleep(0.5)
            yield n
        if final is not None:
            yield final
    return stream_one


def test_timing_arithmetic_and_nearest_rank_percentiles_in_virtual_time():
    clock = VirtualClock()
    got = clock.run(drive(Workload("w", 4, 5), scripted(clock), clock=clock, sleep=clock.sleep))
    # latencies 3, 4, 5, 6 s; first tokens 1, 2, 3, 4 s; 4 gaps of 0.5 s after the first
    assert (got["p50_latency_s"], got["p95_latency_s"]) == (4.0, 6.0)
    assert (got["p50_ttft_s"], got["p95_ttft_s"], got["p95_tpot_s"]) == (2.0, 4.0, 0.5)
    assert got["wall_s"] == 6.0 and got["tokens_per_s"] == pytest.approx(20 / 6)
    assert (got["requests"], got["errors"], got["error_messages"]) == (4, 0, [])


def test_the_last_count_is_the_answers_and_tpot_spreads_over_it():
    clock = VirtualClock()  # the app's updates may carry several tokens: its count comes last
    got = clock.run(drive(Workload("w", 1, 3), scripted(clock, final=9), clock=clock,
                          sleep=clock.sleep))
    assert got["tokens_per_s"] == pytest.approx(9 / 2.0) and got["p95_tpot_s"] == 1.0 / 8


def test_a_failed_request_is_counted_with_its_message_and_left_out_of_the_figures():
    clock = VirtualClock()
    got = clock.run(drive(Workload("w", 4, 5), scripted(clock, fail=3), clock=clock,
                          sleep=clock.sleep))
    assert got["errors"] == 1 and got["error_messages"] == ["RuntimeError: the server went away"]
    assert got["p95_latency_s"] == 5.0 and got["tokens_per_s"] == pytest.approx(15 / 5)


def test_a_stream_that_never_answers_times_out_as_an_error():
    async def silent(prompt: str, new_tokens: int):
        await asyncio.sleep(30)
        yield 1

    got = asyncio.run(drive(Workload("w", 2, 4), silent, timeout_s=0.05))
    assert got["errors"] == 2 and got["p95_latency_s"] is None and got["tokens_per_s"] == 0.0


def test_arrivals_start_on_their_seeded_schedule():
    clock, starts = VirtualClock(), []
    w = Workload("a", 0, 2, per_s=2.0, seconds=5.0, seed=3)
    got = clock.run(drive(w, scripted(clock, starts), clock=clock, sleep=clock.sleep))
    assert sorted(starts) == pytest.approx(arrival_offsets(2.0, 5.0, 3))
    assert got["requests"] == len(arrival_offsets(2.0, 5.0, 3)) > 0 and got["errors"] == 0


def test_the_poisson_schedule_is_fixed_by_its_seed():
    a, b = arrival_offsets(2.0, 60.0, 8), arrival_offsets(2.0, 60.0, 8)
    assert a == b != arrival_offsets(2.0, 60.0, 9)
    assert a == sorted(a) and 0 < a[0] and a[-1] < 60.0
    gaps = [y - x for x, y in zip([0.0, *a], a, strict=False)]
    assert 0.35 < sum(gaps) / len(gaps) < 0.65  # mean gap near 1 / (2 a second)
    arrivals = next(w for w in WORKLOADS if w.per_s)
    assert arrivals.offsets() == arrival_offsets(arrivals.per_s, arrivals.seconds, arrivals.seed)


def test_figures_of_no_successful_request_and_ratios_without_a_peer():
    got = workload_figures([{"ok": False, "start": 1.0, "end": 2.0, "error": "x"}])
    assert got["errors"] == 1 and got["p95_ttft_s"] is None and got["tokens_per_s"] == 0.0
    assert set(ratios(got, None).values()) == {None}


# --- the light clients against fakes on loopback, through the same driver ---
PIECES = ["Owls", " see", " at", " night"]


class FakeOpenAI(BaseHTTPRequestHandler):
    """Chunked SSE, as uvicorn sends it: a role chunk, four pieces, a usage chunk, [DONE]; a
    prompt with "#1)" in it gets HTTP 500."""

    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "#1)" in body["messages"][0]["content"]:
            self.send_response(500)
            self.send_header("Content-Length", "4")
            self.end_headers()
            self.wfile.write(b"boom")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunks = [{"choices": [{"delta": {"role": "assistant"}}]}]
        chunks += [{"choices": [{"delta": {"content": p}}]} for p in PIECES]
        chunks += [{"choices": [], "usage": {"completion_tokens": 4}}]
        for data in [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [
                b"data: [DONE]\n\n"]:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *args):
        pass


class FakeQueue(BaseHTTPRequestHandler):
    """Gradio's queue: join -> an event id; the data stream (sized) -> a waiting update with no
    answer text, two updates with text, then the final outputs saying 3 tokens."""

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self._send(json.dumps({"event_id": "e1"}).encode())

    def do_GET(self):  # noqa: N802
        chat = [{"role": "user", "content": [{"text": "Q", "type": "text"}]},
                {"role": "assistant", "content": [{"text": "", "type": "text"}]}]
        lines = [{"msg": "process_generating", "event_id": "e1", "output": {"data": [chat]}},
                 {"msg": "process_generating", "event_id": "other", "output": {"data": ["x"]}},
                 {"msg": "process_generating", "event_id": "e1",
                  "output": {"data": [[["append", [1, "content", 0, "text"], "Hi"]]]}},
                 {"msg": "process_generating", "event_id": "e1",
                  "output": {"data": [[["append", [1, "content", 0, "text"], " there"]]]}},
                 {"msg": "process_completed", "event_id": "e1", "success": True,
                  "output": {"data": ["Hi there", "3 tokens generated"]}}]
        self._send(b"".join(b"data: " + json.dumps(m).encode() + b"\n\n" for m in lines))

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def serve():
    servers = []

    def start(handler) -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"
    yield start
    for httpd in servers:
        httpd.shutdown()


async def collect(stream) -> list[int]:
    return [n async for n in stream]


def test_openai_stream_counts_pieces_then_usage_and_errors_count(serve):
    url = serve(FakeOpenAI)
    assert asyncio.run(collect(chat_tokens(url, "m", "Write about owls", 8))) == [1, 2, 3, 4, 4]
    got = asyncio.run(drive(Workload("w", 3, 8), lambda p, n: chat_tokens(url, "m", p, n)))
    assert (got["requests"], got["errors"]) == (3, 1) and "HTTP 500" in got["error_messages"][0]
    assert 0 < got["p50_ttft_s"] <= got["p95_latency_s"] and got["tokens_per_s"] > 0


def test_app_stream_counts_updates_with_text_then_the_apps_count(serve):
    url = serve(FakeQueue)
    assert asyncio.run(collect(app_tokens(url, 7, "Hi?", 3))) == [1, 2, 3]
    got = asyncio.run(drive(Workload("w", 2, 3), lambda p, n: app_tokens(url, 7, p, n)))
    assert got["errors"] == 0 and got["tokens_per_s"] > 0 and got["p95_tpot_s"] is not None


def test_the_real_app_serves_a_tiny_workload_through_the_light_client(server):
    from bench.clients import chat_fn_index

    fn = chat_fn_index(server.url)
    got = asyncio.run(drive(Workload("smoke", 3, 4),
                            lambda p, n: app_tokens(server.url, fn, p, n)))
    assert (got["requests"], got["errors"]) == (3, 0), got["error_messages"]
    assert got["tokens_per_s"] == pytest.approx(12 / got["wall_s"])  # 4 tokens each, counted
    assert 0 < got["p50_ttft_s"] <= got["p95_latency_s"] and got["p95_tpot_s"] > 0


def test_without_vllm_its_side_reads_none_with_why_and_the_app_still_runs(monkeypatch):
    from bench import app_server, serving_workloads
    from bench.targets import check

    async def instant(prompt: str, new_tokens: int):
        for n in range(1, new_tokens + 1):
            await asyncio.sleep(0)
            yield n

    small = (Workload("a", 3, 2), Workload("b", 0, 2, per_s=50.0, seconds=0.1, seed=1))
    monkeypatch.setattr(serving_workloads, "app_side",
                        lambda workloads, log: asyncio.run(serving_workloads.serve_all(
                            instant, workloads, log)))
    monkeypatch.setattr(app_server, "start_peer", lambda log: (None, "no .venv-vllm here"))
    got = serving_workloads.measure_workloads(small, log=lambda *a, **k: None)
    assert set(got) == {"a", "b"} and got["a"]["app"]["requests"] == 3
    assert got["b"]["app"]["requests"] == len(arrival_offsets(50.0, 0.1, 1))
    assert got["a"]["vllm"] is None and got["a"]["vllm_reason"] == "no .venv-vllm here"
    assert got["a"]["app_vs_vllm_throughput"] is None and got["a"]["app"]["errors"] == 0
    met = check({"serving": {"workloads": got}}, serving_workloads.targets(small))
    assert met["serving.workloads.a.app.errors"]["met"]
    assert not met["serving.workloads.a.app_vs_vllm_throughput"]["met"]  # no peer: not claimed
