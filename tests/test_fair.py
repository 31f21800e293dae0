"""Fairness by client address, identical measurements joined, a work budget and a time limit
per measurement, on the real app launched in this process (so the test can count
the model runs it caused and read Gradio's queue), driven through Gradio's raw queue protocol
with the forwarded address a Space's proxy sets. Named "fair" and "budget" for `-k`."""
from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import replace

import httpx
import pytest

from classroom.shared_runs import FOLLOWING, SHARED_NOW, SharedRuns
from lessons.common.measurement import TIME_UP, Outcome
from lessons.common.measurement_wiring import first_markdown, measured, measurement_of

RACE_PROMPT = "Name a colour."
POLL_S = 0.05


def test_fair_busy_or_cut_runs_are_followed_but_not_reused():
    from inference.experiments.noise import Noise

    runs = SharedRuns(reuse_s=60)
    busy = Noise(spread=0.9, calibration_ratio=1.0, others_cpu=0.0, busy=True)
    key = ("race", "[]")
    first = list(runs.share(key, lambda: iter([{"n": 1}]), lambda f, s: f,
                            outcome=Outcome(readings=[busy])))
    again = list(runs.share(key, lambda: iter([{"n": "second"}]), lambda f, s: f))
    assert first == [{"n": 1}] and again == [{"n": "second"}] and runs.leads == 2
    quiet = list(runs.share(("x", "1"), lambda: iter([{"t": "stopped"}]), lambda f, s: f,
                            outcome=Outcome(cut=True)))
    assert quiet and not runs.live(("x", "1"))  # cut short: not shown to anyone else


def test_fair_a_visitor_who_asked_while_a_busy_run_measured_gets_its_result():
    """A visitor who asked before a busy run ended, but whose handler began only after it (the
    worker slots were taken, or followers already held their share of them), gets its result
    (busy notice and all); a visitor asking after it ended measures afresh; a time-cut run is
    replayed to no one."""
    import time

    from inference.experiments.noise import Noise

    runs = SharedRuns(reuse_s=60)
    busy = Noise(spread=0.9, calibration_ratio=1.0, others_cpu=0.0, busy=True)
    key = ("race", "[]")
    asked = time.monotonic()  # queued behind another measurement, before the run started
    first = list(runs.share(key, lambda: iter([{"n": "busy"}]), lambda f, s: {**f, "s": s},
                            asked_at=asked, outcome=Outcome(readings=[busy])))
    waited = list(runs.share(key, lambda: iter([{"n": "again"}]), lambda f, s: {**f, "s": s},
                             asked_at=asked))
    assert first == [{"n": "busy"}] and runs.leads == 1
    assert waited[-1]["n"] == "busy" and "another visitor" in waited[-1]["s"]
    later = list(runs.share(key, lambda: iter([{"n": "later"}]), lambda f, s: f,
                            asked_at=time.monotonic()))
    assert later == [{"n": "later"}] and runs.leads == 2
    cut_key = ("cut", "[]")
    list(runs.share(cut_key, lambda: iter([{"t": "stopped"}]), lambda f, s: f,
                    asked_at=asked, outcome=Outcome(cut=True)))
    again = list(runs.share(cut_key, lambda: iter([{"t": "fresh"}]), lambda f, s: f,
                            asked_at=asked))
    assert again == [{"t": "fresh"}] and runs.leads == 4  # the cut run is not replayed


def test_fair_run_key_counts_a_sessions_state_not_only_what_it_sent():
    """Two visitors sending the same values share a key unless a gr.State input (server-side,
    sent as null) differs between their sessions: the key is of the values the handler gets."""

    import gradio as gr
    from gradio.state_holder import StateHolder

    from classroom.classroom_guard import handler_values
    from classroom.shared_runs import run_key

    with gr.Blocks() as demo:
        kept, box = gr.State(None), gr.Textbox()
        box.submit(lambda s, t: t, [kept, box], box)
    holder = StateHolder()
    holder.set_blocks(demo)
    fn = next(iter(demo.fns.values()))
    sent = [None, "same"]

    def settings_key(session):
        return run_key("echo", handler_values(demo, fn, sent, session, 1000))
    assert settings_key("a") == settings_key("b")
    holder["b"][kept._id] = {"schedules": [1, 2]}
    assert settings_key("a") != settings_key("b")
    holder["a"][kept._id] = {"schedules": [1, 2]}
    assert settings_key("a") == settings_key("b")


# The running app ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def app_url(app_module):
    from bench.app_server import free_port

    port = free_port()
    options = {**app_module.launch_options(), "server_port": port, "prevent_thread_lock": True}
    app_module.demo.launch(**options)
    yield f"http://127.0.0.1:{port}/"
    app_module.demo.close()


@pytest.fixture
def race_count(monkeypatch):
    """How many KV races the app's handler started (each one runs the model)."""
    import lessons.kv_cache_handlers as handlers

    real, count = handlers.race_frames, [0]

    def counted_race(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(handlers, "race_frames", counted_race)
    return count


def _fn(app, api_name: str) -> int:
    return next(i for i, f in app.demo.fns.items() if f.api_name == api_name)


class Visitor:
    """One session hash from one address; its queue/data stream read on a thread while it has
    events pending (opened after a join: Gradio answers 404 for a session with none)."""

    def __init__(self, url: str, address: str) -> None:
        self.url, self.address = url, address
        self.session = f"fair-{uuid.uuid4().hex[:10]}"
        self.messages: list[dict] = []
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None

    def join(self, fn_index: int, data: list) -> httpx.Response:
        body = {"data": data, "fn_index": fn_index, "session_hash": self.session,
                "event_data": None, "trigger_id": None}
        reply = httpx.post(self.url + "gradio_api/queue/join", json=body, timeout=30,
                           headers={"x-forwarded-for": self.address})
        if reply.status_code == 200:
            with self._lock:
                self._pending.add(reply.json()["event_id"])
                if self._reader is None or not self._reader.is_alive():
                    self._reader = threading.Thread(target=self._listen, daemon=True)
                    self._reader.start()
        return reply

    def _listen(self) -> None:
        url = f"{self.url}gradio_api/queue/data?session_hash={self.session}"
        while True:
            with self._lock:
                if not self._pending:
                    return
            try:
                with httpx.stream("GET", url, timeout=None,
                                  headers={"x-forwarded-for": self.address}) as s:
                    for line in s.iter_lines():
                        if line.startswith("data:"):
                            self._seen(json.loads(line[5:]))
            except httpx.HTTPError:
                pass
            time.sleep(0.5)  # the stream ended with events still pending: read on

    def _seen(self, message: dict) -> None:
        self.messages.append(message)
        if message.get("msg") == "process_completed":
            with self._lock:
                self._pending.discard(message.get("event_id"))

    def completed(self, event_id: str, timeout_s: float = 300) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for m in list(self.messages):
                if m.get("event_id") == event_id and m.get("msg") == "process_completed":
                    return m
            time.sleep(POLL_S)
        seen = [(m.get("msg"), m.get("event_id")) for m in self.messages][-12:]
        raise AssertionError(f"{event_id} did not complete in {timeout_s} s; last seen: {seen}")

    def close(self) -> None:
        with self._lock:
            self._pending.clear()


def _texts(message: dict) -> str:
    """Every string in a completed event's outputs, joined (the Markdown the visitor reads)."""
    out = message.get("output", {}).get("data", [])
    found: list[str] = []

    def walk(v):
        if isinstance(v, str):
            found.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(out)
    return "\n".join(found)


def _wait_running(app, event_id: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(e._id == event_id for job in app.demo._queue.active_jobs if job for e in job):
            return
        time.sleep(POLL_S)
    raise AssertionError(f"{event_id} never started")


def _heavy_ahead(app, visitor, event_id: str) -> int:
    """Measurements running or waiting in the measurement line in front of `event_id`'s, the
    last press to join it (its first frame says it has joined)."""
    deadline = time.monotonic() + 120
    while not any(m.get("event_id") == event_id and m.get("msg") == "process_generating"
                  for m in list(visitor.messages)):
        assert time.monotonic() < deadline, f"{event_id} never started"
        time.sleep(POLL_S)
    return len(app.RUNS.line) - 1


def test_fair_twelve_sessions_without_a_token_hold_one_heavy_place(app_module, app_url,
                                                                   race_count):
    race, chat = _fn(app_module, "kv_race"), _fn(app_module, "chat")
    flood = [Visitor(app_url, "198.51.100.1") for _ in range(12)]
    other = Visitor(app_url, "198.51.100.2")
    try:
        replies = [v.join(race, [RACE_PROMPT, 16 + i, None]) for i, v in enumerate(flood)]
        admitted = [r for r in replies if r.status_code == 200]
        refused = [r for r in replies if r.status_code == 503]
        assert len(admitted) == 1 and len(refused) == 11, [r.status_code for r in replies]
        assert "measurement(s) running or waiting" in refused[0].json()["detail"]
        first = admitted[0].json()["event_id"]
        holder = flood[[r.status_code for r in replies].index(200)]
        again = flood[0].join(race, [RACE_PROMPT, 40, None])  # while theirs still counts
        assert again.status_code == 503
        # (Its chats: the server's own per-visitor cap, tests/test_server_fair.py; the queue's
        # per-visitor and per-address event caps: tests/test_fair_class.py.)
        mine = other.join(race, [RACE_PROMPT, 5, None])
        assert mine.status_code == 200, mine.text
        mine_id = mine.json()["event_id"]
        assert _heavy_ahead(app_module, other, mine_id) <= 1  # at most the flood's one measurement
        talk = other.join(chat, ["Say hi.", 4])
        assert talk.status_code == 200, talk.text
        done = other.completed(talk.json()["event_id"])
        assert done["success"], done
        mine_done = other.completed(mine_id)
        assert mine_done["success"], mine_done
        assert "faster" in _texts(mine_done) or "slower" in _texts(mine_done) \
            or "busy" in _texts(mine_done)
        assert holder.completed(first)["success"]
        assert race_count[0] == 2  # the flood's one race and the other visitor's
    finally:
        for v in flood + [other]:
            v.close()


def test_fair_identical_measurements_share_one_run(app_module, app_url, race_count):
    race = _fn(app_module, "kv_race")
    first, second = Visitor(app_url, "198.51.100.11"), Visitor(app_url, "198.51.100.12")
    try:
        leads = app_module.RUNS.leads
        same = [RACE_PROMPT, 6, None]
        a = first.join(race, same).json()["event_id"]
        _wait_running(app_module, a)
        b = second.join(race, same).json()["event_id"]  # follows the run in progress
        assert b not in [e._id for e in
                         app_module.demo._queue.event_queue_per_concurrency_id["heavy"].queue]
        done_a, done_b = first.completed(a), second.completed(b)
        assert done_a["success"] and done_b["success"]
        assert race_count[0] == 1 and app_module.RUNS.leads == leads + 1  # one model run
        following = [m for m in second.messages if m.get("event_id") == b
                     and m.get("msg") == "process_generating"]
        assert any(FOLLOWING.split(":")[0][4:] in _texts(m) for m in following)
        assert SHARED_NOW in _texts(done_b) or "ago on this machine" in _texts(done_b)
        # Different settings: a run of its own.
        c = second.join(race, [RACE_PROMPT, 7, None]).json()["event_id"]
        assert second.completed(c)["success"]
        assert race_count[0] == 2 and app_module.RUNS.leads == leads + 2
    finally:
        first.close()
        second.close()


def test_budget_over_budget_race_refused_at_once_before_any_pass(app_module, app_url,
                                                                  race_count):
    race = _fn(app_module, "kv_race")
    visitor = Visitor(app_url, "198.51.100.21")
    long_prompt = " ".join(["colour"] * 220)  # under the race's 256-token prompt limit
    leads = app_module.RUNS.leads
    try:
        reply = visitor.join(race, [long_prompt, 128, None])
        assert reply.status_code == 503, reply.text
        detail = reply.json()["detail"]
        budget = app_module.SETTINGS.measure_work_tokens
        assert f"at most {budget:,}" in detail and "tokens × passes" in detail
        assert race_count[0] == 0 and app_module.RUNS.leads == leads  # no pass ran
        ok = visitor.join(race, [RACE_PROMPT, 4, None])  # within budget: it runs
        assert visitor.completed(ok.json()["event_id"])["success"]
        assert race_count[0] == 1
    finally:
        visitor.close()


def test_budget_time_limit_stops_the_race_with_a_sentence_and_what_it_measured(app_module,
                                                                              monkeypatch):
    """The app's own KV race handler under a time limit of 1.5 s on a clock that moves 1 s per
    reading: it stops after its second frame (a progress line, then the first timed chunk's
    chart), says so above that frame's progress, and keeps the chart."""
    from lessons.common import measurement
    from lessons.common.context import AppContext
    ticks = iter(range(10**6))
    monkeypatch.setattr(measurement, "clock", lambda: float(next(ticks)))
    block_fn = app_module.demo.fns[_fn(app_module, "kv_race")]
    tight = AppContext(app_module.LM, replace(app_module.SETTINGS, measure_limit_s=1.5),
                       server=app_module.SERVER, runs=SharedRuns(60))
    frames = list(measured(measurement_of(block_fn), tight, block_fn.outputs)(
        RACE_PROMPT, 32, None))
    assert len(frames) == 3  # a progress line, one chunk measured, then the stop
    _, progress = first_markdown(block_fn.outputs)
    stopped = frames[-1][progress]
    assert stopped.startswith(TIME_UP.format(s=1.5)[:40])
    assert set(frames[0]) | set(frames[1]) <= set(frames[-1])  # what it measured so far
    assert any(v is not None and k is not progress for k, v in frames[-1].items())
