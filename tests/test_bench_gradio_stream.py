"""The bench's light client of Gradio's queue protocol (`bench.clients`), against a fake
queue on loopback: it joins the queue and reads the event stream as a browser does, sends the
visitor's own headers (the classroom's X-Forwarded-For) on both requests, stamps each streamed
update, and returns the final outputs; a failed event raises with the app's message."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench.clients import call


class FakeQueue(BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]] = []  # (path, X-Forwarded-For) of every request
    fail = False

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        FakeQueue.seen.append((self.path, self.headers.get("X-Forwarded-For")))
        self.rfile.read(int(self.headers["Content-Length"]))
        self._send("application/json", json.dumps({"event_id": "e1"}).encode())

    def do_GET(self) -> None:  # noqa: N802
        FakeQueue.seen.append((self.path, self.headers.get("X-Forwarded-For")))
        done = ({"msg": "process_completed", "event_id": "e1", "success": False,
                 "output": {"error": "Queue is full"}} if FakeQueue.fail else
                {"msg": "process_completed", "event_id": "e1", "success": True,
                 "output": {"data": ["the end", "2 tokens generated"]}})
        lines = [{"msg": "process_generating", "event_id": "other", "output": {}},
                 {"msg": "process_generating", "event_id": "e1", "output": {"data": ["a"]}},
                 {"msg": "process_generating", "event_id": "e1", "output": {"data": ["ab"]}},
                 done]
        self._send("text/event-stream",
                   b"".join(b"data: " + json.dumps(m).encode() + b"\n\n" for m in lines))

    def _send(self, kind: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def queue_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeQueue)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    FakeQueue.seen, FakeQueue.fail = [], False
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_visitor_call_sends_its_address_and_stamps_its_updates(queue_url):
    stamps: list[float] = []
    out = call(queue_url, 7, ["hi", 2], headers={"X-Forwarded-For": "198.18.0.5"},
               stamps=stamps)
    assert out == ["the end", "2 tokens generated"]
    assert len(stamps) == 2 and stamps == sorted(stamps)  # its own two updates, not "other"'s
    assert [p.split("?")[0] for p, _ in FakeQueue.seen] == ["/gradio_api/queue/join",
                                                           "/gradio_api/queue/data"]
    assert {addr for _, addr in FakeQueue.seen} == {"198.18.0.5"}


def test_a_failed_event_raises_with_the_apps_message(queue_url):
    FakeQueue.fail = True
    with pytest.raises(RuntimeError, match="Queue is full"):
        call(queue_url, 7, ["hi", 2])
    assert {addr for _, addr in FakeQueue.seen} == {None}  # no header unless given
