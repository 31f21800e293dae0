"""Answers nobody reads are stopped by the web layer (`classroom/unread_streams.py`): an event
whose client joined the queue and never opened its stream has its generator closed within
`unread_stream_s` and a poll; a client reading its stream is left alone. First the signal on
a hand-made queue and clock, then through Gradio's real queue on a small Blocks launched with
`classroom.install`, joined with the raw queue API as a script would."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from types import SimpleNamespace

import gradio as gr
import httpx
import pytest

import classroom
from classroom.unread_streams import UnreadStreams
from inference.config import Settings
from polling import wait_for

UNREAD_S, POLL_S = 1.0, 0.2
STEPS = 400  # a stream of ~8 s at 20 ms a step: far longer than UNREAD_S


def fake_queue(sessions: list[str]) -> SimpleNamespace:
    """Gradio's queue as the signal reads it: one running event per session, no waiting."""
    return SimpleNamespace(
        active_jobs=[[SimpleNamespace(session_hash=s) for s in sessions], None],
        event_queue_per_concurrency_id={},
        pending_messages_per_session={s: asyncio.Queue() for s in sessions})


def test_a_session_whose_oldest_message_stays_unread_is_named_after_unread_s():
    queue, unread = fake_queue(["reads", "never"]), UnreadStreams(unread_s=30)
    for t in range(0, 61, 5):  # a message every 5 s for each; only "reads" takes them
        for s in ("reads", "never"):
            queue.pending_messages_per_session[s].put_nowait(f"token {t}")
        queue.pending_messages_per_session["reads"].get_nowait()
        found = unread.sessions(queue, now=float(t))
        assert found == ([] if t < 30 else ["never"]), (t, found)
    queue.active_jobs = [None, None]  # its event ended: nothing to stop, nothing remembered
    assert unread.sessions(queue, now=61.0) == [] and not unread._heads


def test_an_empty_queue_is_never_unread():
    queue, unread = fake_queue(["quiet"]), UnreadStreams(unread_s=1)
    assert all(unread.sessions(queue, now=float(t)) == [] for t in range(10))


@pytest.fixture
def small_app():
    """A streaming generator that records how it ended, per session, on a small Blocks with
    the class's layer installed (unread_stream_s = 1 s, a poll every 0.2 s)."""
    from bench.app_server import free_port

    ended: dict[str, tuple[str, int, float]] = {}  # session -> (how, steps yielded, when)
    tick = threading.Event()

    def stream(n, request: gr.Request):
        done, how = 0, "closed"
        try:
            for done in range(1, int(n) + 1):
                tick.wait(0.02)  # a token's time
                yield f"token {done}"
            how = "ran to its end"
        finally:
            ended[request.session_hash] = (how, done, time.monotonic())

    settings = Settings(unread_stream_s=UNREAD_S, unread_poll_s=POLL_S)
    with gr.Blocks() as demo:
        number, text = gr.Number(STEPS, precision=0), gr.Textbox()
        gr.Button("stream").click(stream, number, text, api_name="stream")
    demo.queue(default_concurrency_limit=4)
    fair = classroom.Fairness(settings, classroom.SharedRuns(settings.shared_run_reuse_s))
    assert classroom.install(demo, settings, fair)
    port = free_port()
    demo.launch(server_port=port, prevent_thread_lock=True, quiet=True)
    fn = next(i for i, f in demo.fns.items() if f.api_name == "stream")
    try:
        yield f"http://127.0.0.1:{port}/", fn, ended
    finally:
        demo.close()


def join(url: str, fn: int, session: str, steps: int) -> float:
    body = {"data": [steps], "fn_index": fn, "session_hash": session, "event_data": None,
            "trigger_id": None}
    reply = httpx.post(url + "gradio_api/queue/join", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    return time.monotonic()


def test_a_stream_nobody_opened_is_closed_within_unread_s_and_a_poll(small_app):
    url, fn, ended = small_app
    joined = join(url, fn, "never-opened", STEPS)
    assert wait_for(lambda: "never-opened" in ended, timeout=60)
    how, steps, at = ended["never-opened"]
    assert how == "closed" and 0 < steps < STEPS, ended
    # the machine is shared: a few seconds' slack for a busy event loop, far below the ~8 s
    # the stream would have run unread
    assert at - joined < UNREAD_S + POLL_S + 4, at - joined


def test_a_client_reading_its_stream_is_not_cancelled(small_app):
    url, fn, ended = small_app
    steps = 150  # ~3 s: three times UNREAD_S
    join(url, fn, "reading", steps)
    last = None
    with httpx.stream("GET", url + "gradio_api/queue/data", timeout=60,
                      params={"session_hash": "reading"}) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                msg = json.loads(line[5:])
                if msg.get("msg") == "process_completed":
                    last = msg
                    break
    assert last is not None and last["success"], last
    assert last["output"]["data"] == [f"token {steps}"], last
    assert wait_for(lambda: "reading" in ended, timeout=30)
    assert ended["reading"][:2] == ("ran to its end", steps)
