"""bench/classroom.py's figures: their arithmetic from hand-made stamps and outputs, the scenario
drivers against a small app with the classroom layer (a cheap measurement and a cheap chat
behind one trusted proxy, as on a Space), and the forger's and the flood's scenarios once on the
real app at a small size."""
from __future__ import annotations

import ast
import doctest
import os
import threading
import time

import pytest

from bench import classroom, clients, targets
from bench.app_server import ROOT
from bench.classroom import (
    ELSEWHERE,
    SCHOOL,
    Stamps,
    Student,
    line_figures,
    no_result,
    overlap_share,
    own_inputs,
    peak_in_line,
    result_figures,
    shared,
    update_gaps,
)
from inference.config import Settings


def test_gaps_are_consecutive_stamps_of_each_answer():
    answers = [[0.0, 0.1, 0.6, 1.6], [2.0, 5.0, 5.5]]  # [submit, update, ...] per answer
    assert update_gaps(answers, 0.0, 10.0) == pytest.approx([0.1, 0.5, 1.0, 3.0, 0.5])


def test_gaps_outside_the_window_are_left_out_and_a_gap_across_its_edge_counts():
    answers = [[0.0, 1.0, 2.0, 3.0, 9.0, 9.5]]
    # window [2.5, 8]: 2->3 ends in it, 3->9 starts in it (a freeze the chat sat through)
    assert update_gaps(answers, 2.5, 8.0) == pytest.approx([1.0, 6.0])


def _press(lesson, seconds, ok=True, was_shared=False, error=None, refused=False, first=None,
           waited=False, start=0.0):
    p = {"lesson": lesson, "ok": ok, "start": start, "end": start + seconds,
         "result_s": seconds, "shared": was_shared, "refused": refused,
         "began": start + 0.01, "first": first, "waited": waited}
    return p | ({"error": error} if error else {})


def test_result_figures_p95_per_lesson_worst_refused_and_errors():
    presses = ([_press("kv_race", s) for s in range(1, 21)]  # p95 of 1..20 is 19
               + [_press("batch_sweep", 4.0, was_shared=True), _press("batch_sweep", 2.0)]
               + [_press("quant_compare", 0.0, ok=False, error="HTTP 503", refused=True),
                  _press("quant_compare", 0.0, ok=False, error="stopped at its time limit")])
    r = result_figures(presses)
    assert r["p95_result_s"] == {"batch_sweep": 4.0, "kv_race": 19, "quant_compare": None}
    assert r["worst_p95_result_s"] == 19
    assert r["refused"] == 1 and r["errors"] == 1
    assert r["error_messages"] == ["HTTP 503", "stopped at its time limit"]
    assert r["shared_results"] == {"batch_sweep": 1, "kv_race": 0, "quant_compare": 0}


def test_line_figures_first_update_place_and_queue_order():
    in_order = [_press("kv_race", 10.0 * (k + 1), first=k + 0.5, waited=k > 0, start=k)
                for k in range(4)]  # first updates 0.5 s after each press, ends 10 s apart
    r = line_figures(in_order)
    assert r["p95_first_update_s"] == pytest.approx(0.5)
    assert r["told_place"] == 3 and r["in_queue_order"] and r["out_of_order"] == 0
    swapped = in_order[:2] + [in_order[3], in_order[2]]
    swapped[3] = swapped[3] | {"end": 100.0}  # the third in line ended after the fourth
    got = line_figures(swapped)
    assert not got["in_queue_order"] and got["out_of_order"] == 1
    assert got["out_of_order_examples"] == [
        "kv_race pressed at 3.00 s, answered at 43.00 s, before kv_race pressed at 2.00 s "
        "(answered at 100.00 s)"]
    tie = in_order[:3] + [in_order[3] | {"start": 2.05, "end": 29.0}]  # sent 50 ms after
    assert line_figures(tie)["in_queue_order"]  # the third: the network orders the two
    assert not line_figures(tie, jitter_s=0.01)["in_queue_order"]
    close = in_order[:3] + [in_order[3] | {"end": 31.95}]  # a result 50 ms before the third's
    assert line_figures(close)["in_queue_order"]  # (an instant rerun behind a finished one)
    assert line_figures([_press("kv_race", 1.0, ok=False)])["no_first_update"] == 1


def test_peak_in_line_counts_overlaps_and_lets_a_follower_begin_at_an_end():
    one = [{"began": 0.0, "end": 10.0}, {"began": 10.05, "end": 20.0}]  # accepted as it ended
    assert peak_in_line(one) == 1
    two = [{"began": 0.0, "end": 10.0}, {"began": 5.0, "end": 20.0}, {"began": 25.0, "end": 26}]
    assert peak_in_line(two) == 2
    assert peak_in_line([{"began": None, "end": 1.0}]) == 0


def test_stamps_tell_waiting_from_the_turn():
    seen = Stamps()
    for msg in ({"msg": "estimation"},
                {"msg": "process_generating", "output": {"data": ["⏳ **Your measurement is "
                                                                  "next in line**"]}},
                {"msg": "process_generating", "output": {"data": [[]]}},  # nothing new
                {"msg": "process_generating", "output": {"data": ["▶ **Your turn: ...**"]}}):
        seen(msg)
        if msg["msg"] == "estimation":
            assert seen.began is not None and seen.first is None
    assert seen.waited and seen.first < seen.turn
    at_once = Stamps()
    at_once({"msg": "process_generating", "output": {"data": ["Measuring 8 tokens"]}})
    assert not at_once.waited and at_once.turn == at_once.first


def test_a_final_output_cut_short_is_no_result_and_a_shared_one_is_marked():
    assert no_result(("⏱ **Stopped at this measurement's time limit (240 s)**", None)) \
        == "stopped at its time limit"
    assert no_result(["The run you were following ended before its result ..."]) is not None
    assert no_result(("Done: 3.5× faster.", {"plot": "..."})) is None
    assert shared(("*Measured just now for another visitor with the same settings*",))
    assert not shared(("Done.", 3))


def _constants(path: str) -> dict:
    """A module's top-level string constants, read from its source (importing it would load
    Gradio and torch: seconds this test does not need)."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for t in node.targets if isinstance(t, ast.Name)}


def test_the_marks_are_the_apps_own_sentences():
    limits, runs = (_constants("lessons/common/measurement.py"),
                    _constants("classroom/shared_runs.py"))
    wiring = _constants("lessons/common/measurement_wiring.py")
    assert limits["TIME_UP"].startswith(classroom.TIME_UP_MARK)
    assert runs["LEFT"].startswith(classroom.LEFT_MARK)
    for sentence in (runs["SHARED_NOW"], runs["SHARED_EARLIER"]):
        assert classroom.SHARED_MARK in sentence
    assert classroom.IN_LINE_MARK in wiring["IN_LINE"]
    assert classroom.TURN_MARK in wiring["YOUR_TURN"]
    assert classroom.FULL_MARKS[1] in wiring["LINE_FULL"]
    assert _constants("classroom/visitor_token.py")["COOKIE"] == classroom.COOKIE


def test_overlap_share_of_the_chats_wall_time():
    assert overlap_share((10.0, 20.0), [(0.0, 12.0), (15.0, 30.0)]) == pytest.approx(0.7)
    assert overlap_share((10.0, 20.0), []) == 0.0
    assert overlap_share((5.0, 5.0), [(0.0, 9.0)]) == 0.0


def test_a_student_sends_the_schools_hop_and_its_own_cookie_a_forger_a_new_hop_each_time():
    student = Student("http://127.0.0.1:1/", cookies={"llm_lab_visitor": "abc.def"})
    assert student.headers() == {"X-Forwarded-For": SCHOOL, "Cookie": "llm_lab_visitor=abc.def"}
    script = Student("http://127.0.0.1:1/", ELSEWHERE, forges=True)
    hops = [script.headers()["X-Forwarded-For"] for _ in range(300)]
    assert len(set(hops)) == 300  # what it writes changes on every request ...
    assert all(h.endswith(f", {ELSEWHERE}") for h in hops)  # ... left of what the proxy saw
    assert "Cookie" not in script.headers()


CONFIG = {"components": [{"id": 1, "type": "slider", "props": {"value": 24, "minimum": 4,
                                                                "step": 2}},
                         {"id": 2, "type": "number", "props": {"value": 0}},
                         {"id": 3, "type": "textbox", "props": {"value": "Q"}}],
          "dependencies": [{"id": 7, "api_name": "kv_race", "inputs": [3, 1, 2]}]}


def test_own_inputs_differ_for_every_student_and_stay_in_range_below_the_default():
    presses = [own_inputs(CONFIG, "/kv_race", rank) for rank in range(30)]
    assert {index for index, _ in presses} == {7}
    assert len({tuple(data) for _, data in presses}) == 30
    assert {data[1] for _, data in presses} == set(range(4, 25, 2))  # 24, 22, ... 4, then 24
    assert presses[0][1] == ["Q", 24, 1] and presses[11][1] == ["Q", 24, 12]


def test_targets_check_and_its_doctests():
    assert doctest.testmod(targets).failed == 0
    assert doctest.testmod(clients).failed == 0
    got = targets.check({"serving": {"classroom": {"at_once": {"errors": 2}}}},
                        classroom.TARGETS)
    assert not got["serving.classroom.at_once.errors"]["met"]
    assert got["serving.soak.rss_after_vs_idle"]["value"] is None
    met = targets.check({"serving": {"classroom": {"own_settings": {"in_queue_order": True}}}},
                        classroom.TARGETS)
    assert met["serving.classroom.own_settings.in_queue_order"]["met"]


@pytest.fixture(scope="module")
def small_app():
    """A small app with the classroom layer installed as app.py installs it, behind one
    trusted proxy: two measurements taking a moment each, a streaming chat, and a record of
    every request: its path, headers and the visitor the classroom layer counted it as."""
    from types import SimpleNamespace

    import gradio as gr
    from starlette.middleware import Middleware

    import classroom
    from bench.app_server import free_port
    from classroom.visitor_token import VISITOR
    from lessons.common.context import AppContext
    from lessons.common.measurement import Measurement
    from lessons.common.measurement_wiring import wire_measurement

    seen, pause = [], threading.Event()

    class Record:  # innermost: every request, as the visitor middleware marked it
        def __init__(self, app):
            self.app = app

        async def __call__(self, scope, receive, send):
            if scope["type"] == "http":
                seen.append((scope["path"], {k.decode(): v.decode()
                                             for k, v in scope["headers"]}, scope.get(VISITOR)))
            await self.app(scope, receive, send)

    def measure(n, guess):
        for step in range(3):
            pause.wait(0.1)  # a moment of work per frame
            yield f"measured {step + 1} of 3 at {n}"

    def chat(prompt, n):
        for k in range(int(n)):
            pause.wait(0.01)
            yield f"{prompt} {k}", ""
        yield f"{prompt} done", f"{int(n)} tokens generated"

    settings = Settings(trusted_proxies=1)
    runs = classroom.SharedRuns(settings.shared_run_reuse_s)
    ctx = AppContext(SimpleNamespace(device="cpu"), settings, runs=runs)
    with gr.Blocks() as demo:
        text, shown = gr.Markdown(), gr.Markdown()
        for name in ("kv_race", "batch_sweep"):
            inputs = [gr.Slider(4, 64, 24, step=1), gr.Number(0)]
            wire_measurement(gr.Button(name), inputs, [text],
                             Measurement(name, measure, work=lambda n, g: int(n)), ctx)
        gr.Button("chat").click(chat, [gr.Textbox("Q"), gr.Slider(1, 512, 8, step=1)],
                                [text, shown], api_name="chat")
    demo.queue(default_concurrency_limit=2)
    assert classroom.install(demo, settings, classroom.Fairness(settings, runs))
    port = free_port()
    demo.launch(server_port=port, prevent_thread_lock=True, quiet=True,
                app_kwargs={"middleware": [*classroom.middleware(settings), Middleware(Record)]})
    try:
        yield SimpleNamespace(url=f"http://127.0.0.1:{port}/", seen=seen)
    finally:
        demo.close()


LESSONS = ("/kv_race", "/batch_sweep")


def test_students_keep_their_own_cookie_and_send_it_with_every_request(small_app):
    room = classroom.class_of(small_app.url, 6)
    assert all(s.cookies for s in room) and len({s.cookies[classroom.COOKIE]
                                                 for s in room}) == 6
    del small_app.seen[:]
    r = classroom.class_presses(small_app.url, room[:4], chats=room[4:], chat_tokens=4,
                                spread_s=0.3, lessons=LESSONS)
    assert r["students"] == 4 and r["refused"] == 0 and r["errors"] == 0
    assert r["worst_p95_result_s"] == max(v for v in r["p95_result_s"].values())
    queue = [(h, v) for path, h, v in small_app.seen if "/queue/" in path]
    assert queue and all(h["x-forwarded-for"] == SCHOOL for h, _ in queue)
    tokens = {s.cookies[classroom.COOKIE] for s in room}
    assert {h["cookie"].split("=", 1)[1] for h, _ in queue} == tokens  # each its own
    joins = {v for path, _, v in small_app.seen if path.endswith("/queue/join")}
    assert len(joins) == 6 and all(v.startswith("v:") for v in joins)  # 4 press, 2 chat


def test_own_settings_wait_in_line_told_their_place_and_end_in_order(small_app):
    room = classroom.class_of(small_app.url, 6)
    r = classroom.class_presses(small_app.url, room, own=True, spread_s=0.3, lessons=LESSONS)
    assert r["refused"] == 0 and r["errors"] == 0 and r["no_first_update"] == 0
    assert r["told_place"] >= 1  # runs one at a time: those behind the first are in line
    assert r["in_queue_order"] and r["out_of_order"] == 0
    assert r["all_p95_result_s"] >= r["p95_first_update_s"]


def test_a_forger_gets_one_visitors_share_and_its_header_changes_every_request(small_app):
    del small_app.seen[:]
    r = classroom.forged(small_app.url, presses=12, spread_s=0.6, lessons=LESSONS)
    assert r["accepted"] + r["refused"] == 12 and r["refused"] >= 1
    assert r["peak_in_line"] == 1 and not r["other_refused"] and r["other_ok"]
    script = [(h, v) for _, h, v in small_app.seen
              if h.get("x-forwarded-for", "").endswith(ELSEWHERE)]
    hops = [h["x-forwarded-for"] for h, _ in script]
    assert len(hops) >= 12 + r["accepted"]  # a join each, a stream each accepted one
    assert len(set(hops)) == len(hops)  # a new first hop on every request
    assert {v for _, v in script} == {"a:" + ELSEWHERE}  # no cookie: one visitor by address


def test_a_chat_flood_is_counted_and_another_visitors_chat_is_timed(small_app):
    r = classroom.chat_flood(small_app.url, floods=10, flood_tokens=8, new_tokens=4,
                             spread_s=0.2)
    assert r["flood_answered"] + r["flood_refused"] == 10
    assert r["other_ok"] and r["other_tokens"] == 4 and r["other_chat_s"] > 0


def test_soak_figures_on_a_short_soak(small_app):
    r = classroom.soak_on(small_app.url, os.getpid(), duration_s=1.0, idle_s=0.1,
                          every_s=0.4, chats=1, chat_tokens=4, lessons=LESSONS)
    assert r["measurements"] == 3 and r["answers"] >= 1 and r["errors"] == 0
    assert r["rss_after_vs_idle"] == pytest.approx(r["after_rss_mb"] / r["idle_rss_mb"])
    assert r["peak_rss_mb"] >= r["idle_rss_mb"]


def test_forged_and_flood_on_the_real_app_at_a_small_size():
    from bench.app_server import start_app

    app = start_app(classroom.BEHIND_PROXY)
    try:
        t0 = time.perf_counter()
        forged = classroom.forged(app.url, presses=6, spread_s=1.0, lessons=("/kv_race",))
        flood = classroom.chat_flood(app.url, floods=12, flood_tokens=64, new_tokens=16)
        print(f"real app, small: forged {forged}, flood {flood}, "
              f"{time.perf_counter() - t0:.0f} s")
    finally:
        app.stop()
    assert forged["peak_in_line"] == 1 and forged["refused"] >= 1
    assert not forged["other_refused"] and forged["other_ok"]
    assert flood["other_ok"] and flood["other_tokens"] == 16
    assert flood["flood_answered"] >= 1 and flood["flood_refused"] >= 1  # 4 at once a visitor
