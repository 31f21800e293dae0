"""Identical measurements joined while the first is still WAITING in the measurement line:
the first press reserves its run, later identical presses follow the reservation,
its leader starts it when its turn comes, a reservation whose leader left the queue before its
handler began ends for its followers with a sentence, and a leader who leaves the measurement
line hands its place to a follower. On `SharedRuns` with hand-made iterators, then through the real
queue wrapper (`classroom_guard.limit_per_session`) on a small gr.Blocks. Named "fair" for `-k`."""
from __future__ import annotations

import queue
import threading

import httpx
import pytest

from classroom.shared_runs import FOLLOWING, LEFT, SHARED_NOW, WAITING, SharedRuns
from lessons.common.measurement import Outcome
from polling import wait_for

KEY = ("race", '["Why?", 48]')


def _annotate(frame, sentence):
    return {**frame, "s": sentence}


class Gate:
    """A measurement's frames, handed out by the test one at a time (None ends it)."""

    def __init__(self) -> None:
        self.frames: queue.Queue = queue.Queue()
        self.started = threading.Event()

    def __call__(self):
        self.started.set()
        return iter(self.frames.get, None)


class Reader:
    """A handler's frames, read on a thread (a follower blocks until frames come)."""

    def __init__(self, frames) -> None:
        self.seen: list = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._read, args=(frames,), daemon=True)
        self.thread.start()

    def _read(self, frames) -> None:
        try:
            for frame in frames:
                self.seen.append(frame)
        except BaseException as exc:  # noqa: BLE001 - the test asserts on it
            self.error = exc

    def done(self) -> bool:
        return not self.thread.is_alive()

    def said(self, sentence: str) -> bool:
        return any(f.get("s") == sentence for f in self.seen)


def _never():
    raise AssertionError("a follower started a measurement")


def test_fair_a_press_while_the_first_waits_in_line_follows_its_reservation():
    runs, gate = SharedRuns(reuse_s=60), Gate()
    runs.reserve("lead", KEY)  # admitted to the heavy lane, behind other lessons' runs
    assert runs.live(KEY) and runs.leads == 0
    runs.reserve("second", KEY)  # a reservation stands: a second one does not replace it
    runs.join("follow", KEY)
    follower = Reader(runs.share(KEY, _never, _annotate, event_id="follow"))
    other = Reader(runs.share(KEY, _never, _annotate, event_id="second"))  # follows too
    assert wait_for(lambda: follower.said(WAITING) and other.said(WAITING), timeout=10)
    assert not gate.started.is_set() and runs.leads == 0
    leader = Reader(runs.share(KEY, gate, _annotate, event_id="lead"))  # its turn came
    assert gate.started.wait(10) and runs.leads == 1
    gate.frames.put({"n": 1})
    assert wait_for(lambda: {"n": 1, "s": FOLLOWING} in follower.seen, timeout=10)
    gate.frames.put({"t": "done"})
    gate.frames.put(None)
    assert wait_for(lambda: leader.done() and follower.done() and other.done(), timeout=10)
    assert leader.seen == [{"n": 1}, {"t": "done"}] and leader.error is None
    assert follower.seen[0] == {"s": WAITING}
    assert follower.seen[-1] == {"n": 1, "t": "done", "s": SHARED_NOW}
    assert other.seen[-1] == follower.seen[-1] and runs.leads == 1


def test_fair_a_reservation_whose_leader_left_the_line_ends_with_left_and_is_replaced():
    runs, queued = SharedRuns(reuse_s=60), {"lead"}
    runs.in_queue = queued.__contains__
    runs.reserve("lead", KEY)
    runs.join("follow", KEY)
    follower = Reader(runs.share(KEY, _never, _annotate, event_id="follow"))
    assert wait_for(lambda: follower.said(WAITING), timeout=10)
    queued.discard("lead")  # the leader's tab closed while it waited
    assert wait_for(follower.done, timeout=10)  # checked at its next 1 s wake-up
    assert follower.error is None and follower.seen[-1] == {"s": LEFT}
    assert not runs.live(KEY)  # stale: the next press leads afresh
    queued.add("next")
    runs.reserve("next", KEY)
    assert runs.live(KEY)
    runs.join("late", KEY)
    gate = Gate()
    gate.frames.put({"n": 2})
    gate.frames.put(None)
    assert list(runs.share(KEY, gate, _annotate, event_id="next")) == [{"n": 2}]
    assert list(runs.share(KEY, _never, _annotate, event_id="late"))[-1]["n"] == 2
    assert runs.leads == 1  # the leader who left never ran


def test_fair_a_leader_that_starts_after_being_given_up_measures_afresh():
    """Its followers were told to press again; if its handler starts after all, it runs a
    measurement of its own (a fresh run), and no one follows the one it gave up."""
    runs, queued = SharedRuns(reuse_s=60), set()
    runs.in_queue = queued.__contains__
    runs.reserve("lead", KEY)
    assert not runs.live(KEY)  # its event is not in the queue: given up at once
    assert list(runs.share(KEY, lambda: iter([{"n": 3}]), _annotate,
                           event_id="lead")) == [{"n": 3}]
    assert runs.leads == 1


def test_fair_a_follower_never_measures_even_when_its_leader_stopped():
    """A joined event runs outside the measurement line: it follows the run it joined and,
    if that run's leader stops mid-run, says so instead of starting a measurement itself."""
    runs, gate = SharedRuns(reuse_s=60), Gate()
    runs.reserve("lead", KEY)
    leader_frames = runs.share(KEY, gate, _annotate, event_id="lead")
    gate.frames.put({"n": 1})
    assert next(leader_frames) == {"n": 1}
    runs.join("follow", KEY)
    leader_frames.close()  # Stop: the leader's generator is closed mid-run
    seen = list(runs.share(KEY, _never, _annotate, event_id="follow"))
    assert seen == [{"n": 1, "s": LEFT}] and runs.leads == 1


def test_fair_a_busy_reserved_run_reaches_its_followers_but_no_later_visitor():
    from inference.experiments.noise import Noise

    busy = Noise(spread=0.9, calibration_ratio=1.0, others_cpu=0.0, busy=True)
    runs = SharedRuns(reuse_s=60)
    runs.reserve("lead", KEY)
    runs.join("follow", KEY)
    assert list(runs.share(KEY, lambda: iter([{"n": "busy"}]), _annotate, event_id="lead",
                           outcome=Outcome(readings=[busy]))) == [{"n": "busy"}]
    seen = list(runs.share(KEY, _never, _annotate, event_id="follow"))
    assert seen[-1]["n"] == "busy" and seen[-1]["s"] == SHARED_NOW
    assert not runs.live(KEY)  # busy: not reused for a visitor who asks now
    runs.reserve("later", KEY)
    assert list(runs.share(KEY, lambda: iter([{"n": "quiet"}]), _annotate,
                           event_id="later")) == [{"n": "quiet"}]
    assert runs.leads == 2


# Through the real queue wrapper ----------------------------------------------------------------


@pytest.fixture(scope="module")
def line():
    """A small app with the real queue wrapper and two measurements wired as the lessons wire
    theirs: `hold` occupies the one-at-a-time heavy lane until the test releases it; `measure`
    streams two frames."""
    from types import SimpleNamespace

    import gradio as gr

    from bench.app_server import free_port
    from classroom.classroom_guard import Fairness, limit_per_session
    from inference.config import Settings
    from lessons.common.context import AppContext
    from lessons.common.measurement import Measurement
    from lessons.common.measurement_wiring import wire_measurement

    release, calls = threading.Event(), []

    def hold(_):
        yield "holding the lane"
        release.wait(120)
        yield "released"

    def measure(n):
        calls.append(n)
        yield f"measuring {n}"
        yield f"measured {n}"

    settings, runs = Settings(), SharedRuns(reuse_s=60)
    ctx = AppContext(SimpleNamespace(device="cpu"), settings, runs=runs)
    with gr.Blocks() as demo:
        number, text = gr.Number(1, precision=0), gr.Markdown()
        for name, fn in (("hold", hold), ("measure", measure)):
            wire_measurement(gr.Button(name), [number], [text],
                             Measurement(name, fn, work=lambda n: n), ctx)
    demo.queue(default_concurrency_limit=2)
    limit_per_session(demo, 6, 64, fair=Fairness(settings, runs))
    port = free_port()
    demo.launch(server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield demo, f"http://127.0.0.1:{port}/", release, calls, runs
    finally:
        release.set()
        demo.close()


def _fn(demo, api_name: str) -> int:
    return next(i for i, f in demo.fns.items() if f.api_name == api_name)


def _in_line(runs) -> int:
    """Presses waiting in the measurement line (their handlers started, their runs not)."""
    return runs.line.waiting()


def _generating(visitor, event_id: str) -> str:
    from test_fair import _texts

    return "\n".join(_texts(m) for m in list(visitor.messages)
                     if m.get("event_id") == event_id and m.get("msg") == "process_generating")


def _hold_the_line(demo, visitor, value: int) -> int:
    """`visitor` starts the slow "hold" measurement (`value`: a setting no other test used, so
    it is not a reused result) and it is running: the heavy lane is busy. The "measure"
    endpoint's index, for the presses that will wait behind it."""
    held = visitor.join(_fn(demo, "hold"), [value]).json()["event_id"]
    assert wait_for(lambda: any(ev._id == held for job in demo._queue.active_jobs if job
                                for ev in job), timeout=30)
    return _fn(demo, "measure")


def test_fair_identical_presses_while_the_first_waits_in_line_join_it(line):
    """Visitor B's measurement waits behind A's in the heavy lane; C and D press the same
    before it starts and follow it (joined lane, the waiting line shown); E's differs and waits
    in line. Then B's turn comes: one run, its result reaches C and D labelled as shared."""
    from test_fair import Visitor, _texts

    demo, url, release, calls, runs = line
    release.clear()
    calls.clear()
    a, b, c, d, e = (Visitor(url, f"198.51.100.{40 + i}") for i in range(5))
    try:
        measure = _hold_the_line(demo, a, 1)
        first = b.join(measure, [7]).json()["event_id"]
        assert wait_for(lambda: _in_line(runs) == 1, timeout=30)
        joined = [v.join(measure, [7]) for v in (c, d)]
        assert [r.status_code for r in joined] == [200, 200]
        c_id, d_id = (r.json()["event_id"] for r in joined)
        other = e.join(measure, [8]).json()["event_id"]  # different settings: waits in line
        assert wait_for(lambda: _in_line(runs) == 2, timeout=30)
        assert wait_for(lambda: "2nd in line" in _generating(e, other), timeout=30)
        assert wait_for(lambda: "waiting for its turn" in _generating(c, c_id), timeout=30)
        assert not calls  # nothing measured yet: B still waits behind A
        release.set()
        done_b, done_c, done_d = b.completed(first), c.completed(c_id), d.completed(d_id)
        assert done_b["success"] and done_c["success"] and done_d["success"]
        assert "measured 7" in _texts(done_c) and SHARED_NOW in _texts(done_c)
        assert SHARED_NOW in _texts(done_d) and "measured 7" in _texts(done_b)
        assert e.completed(other)["success"]
        assert sorted(calls) == [7, 8]  # one run for B, C and D; one for E
    finally:
        release.set()
        for v in (a, b, c, d, e):
            v.close()


def test_fair_a_measurement_whose_leader_left_the_line_still_serves_its_followers(line):
    """B's measurement waits behind A's; C follows it; B presses Stop while still waiting.
    B's place in line passes to C (no lost work): C is told its own place from then on, gets
    the result when the turn comes, and F, pressing the same afterwards, is shown that run."""
    from test_fair import Visitor, _texts

    demo, url, release, calls, runs = line
    release.clear()
    calls.clear()
    a, b, c, f = (Visitor(url, f"198.51.100.{50 + i}") for i in range(4))
    try:
        measure = _hold_the_line(demo, a, 2)  # not test 1's (reused)
        first = b.join(measure, [9]).json()["event_id"]
        assert wait_for(lambda: _in_line(runs) == 1, timeout=30)
        c_id = c.join(measure, [9]).json()["event_id"]
        assert wait_for(lambda: "waiting for its turn" in _generating(c, c_id), timeout=30)
        stop = httpx.post(url + "gradio_api/cancel", timeout=30, json={
            "session_hash": b.session, "fn_index": measure, "event_id": first})
        assert stop.status_code == 200, stop.text
        assert wait_for(lambda: "Your measurement is next in line" in _generating(c, c_id),
                        timeout=30)  # C carries B's place on
        assert _in_line(runs) == 1 and not calls
        release.set()
        done_c = c.completed(c_id)
        assert done_c["success"] and "measured 9" in _texts(done_c)
        assert LEFT not in _texts(done_c)
        done_f = f.completed(f.join(measure, [9]).json()["event_id"])
        assert done_f["success"] and "measured 9" in _texts(done_f)
        assert "for another visitor" in _texts(done_f) and calls == [9]
    finally:
        release.set()
        for v in (a, b, c, f):
            v.close()


def test_fair_followers_hold_at_most_their_share_of_the_worker_slots(line, monkeypatch):
    """Each follower holds a worker slot while it waits, so past their share an identical
    press takes the heavy lane like any other; it still gets the run it asked during, and
    nothing is measured twice."""
    from classroom import classroom_guard
    from test_fair import Visitor, _texts

    demo, url, release, calls, runs = line
    monkeypatch.setattr(classroom_guard, "JOINED_SHARE", 1 / demo._queue.max_thread_count)
    release.clear()
    calls.clear()
    a, b, c, d = (Visitor(url, f"198.51.100.{60 + i}") for i in range(4))
    try:
        measure = _hold_the_line(demo, a, 3)
        first = b.join(measure, [11]).json()["event_id"]
        c_id = c.join(measure, [11]).json()["event_id"]  # the one follower allowed
        d_id = d.join(measure, [11]).json()["event_id"]
        # D takes the heavy lane, and its handler, started, follows B's run: one in line
        assert wait_for(lambda: _in_line(runs) == 1, timeout=30)
        release.set()
        done_c, done_d = c.completed(c_id), d.completed(d_id)
        assert SHARED_NOW in _texts(done_c) and "measured 11" in _texts(done_d)
        assert "for another visitor" in _texts(done_d) and calls == [11]
        assert b.completed(first)["success"]
    finally:
        release.set()
        for v in (a, b, c, d):
            v.close()
