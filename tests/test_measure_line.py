"""The measurement line: a press that cannot run now is told its place and an estimated wait,
runs in arrival order, runs its class-sized variant when the line is long, leaves the line (and
runs nothing) when its visitor leaves, and a shared run whose leader leaves still serves its
followers. On `MeasureLine` with a fake clock, through the wired handler (`measured`) with
hand-made measurements, and one real-model race through the real app's queue."""
from __future__ import annotations

import functools
import threading
from types import SimpleNamespace

import gradio as gr
import pytest

from classroom.shared_runs import FOLLOWING, SHARED_NOW, SharedRuns
from inference.config import Settings
from lessons.common.context import AppContext
from lessons.common.measurement import SMALLER, LineFull, MeasureLine, Measurement
from lessons.common.measurement_wiring import YOUR_TURN, measured
from polling import wait_for
from test_fair_waiting import Gate, Reader, _annotate, _never

KEY = ("race", '["Why?", 48]')


def test_places_and_estimates_follow_the_line_on_a_fake_clock():
    t = [0.0]
    line = MeasureLine(slots=1, bound=8, class_line=4, clock=lambda: t[0])
    race, sweep, race2 = (line.join(title, work) for title, work in (
        ("KV race", 100), ("batch sweep", 50), ("KV race", 100)))
    assert line.admit(race) and not line.admit(race2) and not line.admit(sweep)
    # nothing timed on this machine yet: a place, and no figure
    assert line.place(sweep).sentence() == (
        "next in line, no time estimate yet (the KV race has not run on this machine yet): "
        "it starts when the KV race measuring now ends")
    assert line.place(race2).position == 2 and line.place(race2).wait_s is None
    assert "after the batch sweep pressed before it" in line.place(race2).sentence()
    t[0] = 20.0
    line.done(race, whole=True)  # 100 tokens in 20 s: 0.2 s a token for the KV race
    assert not line.admit(race2) and line.admit(sweep)  # arrival order
    assert line.place(race2).sentence().startswith(
        "next in line, no time estimate yet (the batch sweep has not run")
    t[0] = 30.0
    line.done(sweep, whole=True)  # 50 tokens in 10 s
    late, later = line.join("KV race", 100), line.join("batch sweep", 50)
    assert line.admit(race2) and not line.admit(later)
    assert line.place(late).sentence() == (
        "next in line, about 20 s: it starts when the KV race measuring now ends")
    assert line.place(later).sentence() == (
        "2nd in line, about 40 s: it starts after the KV race pressed before it")
    t[0] = 40.0  # recomputed on each frame: the run going has 10 s left
    assert line.place(later).wait_s == pytest.approx(30.0)
    line.done(late)  # its visitor left before its turn: everyone behind moves up
    assert line.place(later).position == 1 and line.place(later).wait_s == pytest.approx(10.0)
    t[0] = 45.0
    line.done(race2, whole=False)  # cut or stopped: the KV race's rate stays 0.2 s a token
    assert line.rates["KV race"] == pytest.approx(0.2)


def test_a_full_line_refuses_and_says_when_to_try_again():
    t = [0.0]
    line = MeasureLine(slots=1, bound=2, clock=lambda: t[0], rates={"KV race": 0.5})
    running = line.join("KV race", 100)
    assert line.admit(running)
    line.join("KV race", 10)
    line.join("KV race", 10)
    t[0] = 20.0
    with pytest.raises(LineFull) as full:
        line.join("KV race", 10)
    assert full.value.waiting == 2 and full.value.retry_s == pytest.approx(30.0)
    assert line.waiting() == 2  # the refused press holds no place


def test_a_long_line_gives_a_newcomer_the_class_sized_work():
    line = MeasureLine(slots=1, bound=8, class_line=2)
    tickets = [line.join("KV race", 100, small_work=25) for _ in range(4)]
    assert [t.small for t in tickets] == [False, False, True, True]
    assert [t.work for t in tickets] == [100, 100, 25, 25]


# Through the wired handler ----------------------------------------------------------------------


@pytest.fixture
def wired():
    """Two hand-made measurements wired as the lessons wire theirs, with the app's shared runs
    and their line: `hold` keeps the line's one slot until released; `measure(n)` records its
    `n`, and has a class-sized variant of a quarter of the steps."""
    release, calls = threading.Event(), []

    def hold(n):
        yield "holding the line"
        release.wait(60)
        yield "released"

    def measure(n):
        calls.append(n)
        yield f"measured {n}"

    settings = Settings(class_line=1, line_update_s=0.05)
    runs = SharedRuns(reuse_s=60)
    ctx = AppContext(SimpleNamespace(device="cpu"), settings, runs=runs)
    text = gr.Markdown()
    quarter = Measurement("measure", measure, work=lambda n: 10 * n,
                          smaller=lambda n: ((n // 4,), f"{n // 4} steps, not {n}"))
    yield SimpleNamespace(
        hold=measured(Measurement("hold", hold, work=lambda n: n), ctx, [text]),
        measure=measured(quarter, ctx, [text]), line=runs.line_for(settings), text=text,
        release=release, calls=calls)
    release.set()


def _said(frame, text) -> str:
    return frame[text] if isinstance(frame, dict) else str(frame)


def test_presses_are_told_their_place_and_run_in_arrival_order_the_late_one_smaller(wired):
    holder = Reader(wired.hold(1))
    assert wait_for(lambda: len(wired.line) == 1 and wired.line.waiting() == 0, timeout=30)
    first = Reader(wired.measure(24))
    assert wait_for(lambda: wired.line.waiting() == 1, timeout=30)
    second = Reader(wired.measure(32))  # one already waits (class_line=1): the line is long
    assert wait_for(lambda: wired.line.waiting() == 2, timeout=30)
    assert wait_for(lambda: second.seen, timeout=30) and wait_for(lambda: first.seen, 30)
    assert "Your measurement is next in line" in _said(first.seen[0], wired.text)
    assert "Your measurement is 2nd in line" in _said(second.seen[0], wired.text)
    assert not wired.calls  # nothing measured while the line is held
    wired.release.set()
    assert wait_for(lambda: holder.done() and first.done() and second.done(), timeout=60)
    assert wired.calls == [24, 8]  # arrival order; the late press ran a quarter of its steps
    assert first.error is None and second.error is None
    said = [_said(f, wired.text) for f in second.seen]
    assert any("next in line" in s for s in said)  # moved up when the first started
    assert any(s.startswith(YOUR_TURN) for s in said)
    assert said[-1] == f"{SMALLER.format(what='8 steps, not 32')}\n\nmeasured 8"
    assert SMALLER.split("**")[1] not in "".join(_said(f, wired.text) for f in first.seen)
    assert len(wired.line) == 0 and wired.line.rates  # timed: the next estimate has a figure


def test_a_queued_press_whose_visitor_leaves_leaves_the_line_and_runs_nothing(wired):
    holder = Reader(wired.hold(2))
    assert wait_for(lambda: len(wired.line) == 1, timeout=30)
    press = wired.measure(5)
    assert "next in line" in _said(next(press), wired.text)
    assert wired.line.waiting() == 1
    press.close()  # Stop, or the tab closed: Gradio closes the handler's generator
    assert wired.line.waiting() == 0
    wired.release.set()
    assert wait_for(holder.done, timeout=60)
    assert wired.calls == [] and len(wired.line) == 0


def test_a_press_past_the_lines_bound_is_refused_with_when_to_try_again():
    release = threading.Event()

    def hold(n):
        yield "holding the line"
        release.wait(60)
        yield "released"

    settings = Settings(measure_line=1, line_update_s=0.05)
    ctx = AppContext(SimpleNamespace(device="cpu"), settings, runs=SharedRuns(reuse_s=60))
    press = measured(Measurement("hold", hold, work=lambda n: n), ctx, [gr.Markdown()])
    holder = Reader(press(1))
    line = ctx.runs.line_for(settings)
    try:
        assert wait_for(lambda: len(line) == 1, timeout=30)
        waiting = press(2)
        assert "next in line" in str(next(waiting))
        with pytest.raises(gr.Error, match=r"line is full \(1 waiting") as full:
            next(press(3))
        assert "Try again when the measurement running now has finished" in full.value.message
        assert line.waiting() == 1
        waiting.close()
    finally:
        release.set()
    assert wait_for(holder.done, timeout=60) and len(line) == 0


def test_a_shared_run_whose_leader_leaves_still_serves_its_follower():
    """The leader's run is measuring when its visitor leaves (its generator closed); a follower
    watching it carries it on to the end: one run, its result shown to the follower."""
    runs, gate = SharedRuns(reuse_s=60), Gate()
    runs.reserve("lead", KEY)
    leader = runs.share(KEY, gate, _annotate, event_id="lead")
    gate.frames.put({"n": 1})
    assert next(leader) == {"n": 1}
    runs.join("follow", KEY)
    follower = Reader(runs.share(KEY, _never, _annotate, event_id="follow"))
    assert wait_for(lambda: {"n": 1, "s": FOLLOWING} in follower.seen, timeout=10)
    leader.close()  # Stop: the leader's generator is closed mid-run
    gate.frames.put({"n": 2})
    gate.frames.put(None)
    assert wait_for(follower.done, timeout=10)
    assert follower.error is None and follower.seen[-1] == {"n": 2, "s": SHARED_NOW}
    assert runs.leads == 1 and runs.live(KEY)  # whole and quiet: shown to the next asker too


def test_the_lessons_class_sized_variants_measure_less_and_say_what(app_module):
    """The lessons' measurements with a class-sized variant: on their page's defaults it feeds
    fewer tokens (their own work formula) and says what it measures instead."""
    from test_measure_budget import args, default, heavy, measurement

    app, sized = app_module, {}
    for fn in heavy(app.demo):
        m = measurement(app, fn)
        if m.smaller is not None:
            given = args(app, fn, [default(b) for b in fn.inputs])
            fewer, what = m.smaller(*given)
            sized[m.name] = (m.work(*fewer), m.work(*given), what)
    assert {"kv_race", "batch_sweep", "prefill_sweep", "quant_compare"} <= set(sized)
    for name, (small, full, what) in sized.items():
        assert 0 < small < full, (name, small, full)
        assert ", not " in what, (name, what)
    assert sized["kv_race"][2] == "8 steps, not 24"


# One real-model race through the real app ------------------------------------------------------


@pytest.fixture(scope="module")
def app_url(app_module):
    from bench.app_server import free_port

    port = free_port()
    app_module.demo.launch(**{**app_module.launch_options(), "server_port": port,
                              "prevent_thread_lock": True})
    yield f"http://127.0.0.1:{port}/"
    app_module.demo.close()


def test_a_second_press_while_one_runs_is_told_its_place_then_gets_its_result(app_module,
                                                                             app_url):
    """A's KV race holds the line (the compute thread is held, so it cannot end first); B's
    different race, pressed meanwhile, streams its place in line at once, then its result."""
    from inference import compute_thread
    from test_fair import RACE_PROMPT, Visitor, _fn, _texts

    race, line = _fn(app_module, "kv_race"), app_module.RUNS.line
    a, b = Visitor(app_url, "198.51.100.81"), Visitor(app_url, "198.51.100.82")
    held = threading.Event()
    threading.Thread(target=compute_thread.run, args=(functools.partial(held.wait, 120),),
                     daemon=True).start()
    try:
        first = a.join(race, [RACE_PROMPT, 12, None]).json()["event_id"]
        assert wait_for(lambda: len(line) == 1 and line.waiting() == 0, timeout=30)
        second = b.join(race, [RACE_PROMPT, 5, None]).json()["event_id"]
        assert wait_for(lambda: any(
            m.get("event_id") == second and m.get("msg") == "process_generating"
            for m in b.messages), timeout=10)
        frames = [m for m in list(b.messages) if m.get("event_id") == second
                  and m.get("msg") in ("process_generating", "process_completed")]
        assert "Your measurement is next in line" in _texts(frames[0])
        held.set()
        done_b, done_a = b.completed(second), a.completed(first)
        assert done_a["success"] and done_b["success"], (done_a, done_b)
        assert any(w in _texts(done_b) for w in ("faster", "slower", "busy")), _texts(done_b)
        assert "in line" not in _texts(done_b)
    finally:
        held.set()
        a.close()
        b.close()
