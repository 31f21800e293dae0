"""bench/classroom.py's figures from hand-made timestamps and outputs (no model, no app)."""
from __future__ import annotations

import ast
import doctest

import pytest

from bench import classroom, targets
from bench.app_server import ROOT
from bench.classroom import (
    no_result,
    overlap_share,
    result_figures,
    shared,
    update_gaps,
    visitor_address,
)


def test_gaps_are_consecutive_stamps_of_each_answer():
    answers = [[0.0, 0.1, 0.6, 1.6], [2.0, 5.0, 5.5]]  # [submit, update, ...] per answer
    assert update_gaps(answers, 0.0, 10.0) == pytest.approx([0.1, 0.5, 1.0, 3.0, 0.5])


def test_gaps_outside_the_window_are_left_out_and_a_gap_across_its_edge_counts():
    answers = [[0.0, 1.0, 2.0, 3.0, 9.0, 9.5]]
    # window [2.5, 8]: 2->3 ends in it, 3->9 starts in it (a freeze the chat sat through)
    assert update_gaps(answers, 2.5, 8.0) == pytest.approx([1.0, 6.0])


def test_no_gap_between_one_answer_and_the_next_submit():
    assert update_gaps([[0.0, 1.0], [50.0, 51.0]], 0.0, 100.0) == pytest.approx([1.0, 1.0])


def _press(lesson, seconds, ok=True, was_shared=False, error=None):
    p = {"lesson": lesson, "ok": ok, "start": 0.0, "end": seconds, "result_s": seconds,
         "shared": was_shared}
    return p | ({"error": error} if error else {})


def test_result_figures_p95_per_lesson_worst_and_errors():
    presses = ([_press("kv_race", s) for s in range(1, 21)]  # p95 of 1..20 is 19
               + [_press("batch_sweep", 4.0, was_shared=True), _press("batch_sweep", 2.0)]
               + [_press("quant_compare", 0.0, ok=False, error="QueueError: full")])
    r = result_figures(presses)
    assert r["p95_result_s"] == {"batch_sweep": 4.0, "kv_race": 19, "quant_compare": None}
    assert r["worst_p95_result_s"] == 19
    assert r["errors"] == 1 and r["error_messages"] == ["QueueError: full"]
    assert r["shared_results"] == {"batch_sweep": 1, "kv_race": 0, "quant_compare": 0}


def test_result_figures_with_no_result_at_all():
    r = result_figures([_press("kv_race", 1.0, ok=False, error="x")])
    assert r["worst_p95_result_s"] is None and r["errors"] == 1


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
    assert limits["TIME_UP"].startswith(classroom.TIME_UP_MARK)
    assert runs["LEFT"].startswith(classroom.LEFT_MARK)
    for sentence in (runs["SHARED_NOW"], runs["SHARED_EARLIER"]):
        assert classroom.SHARED_MARK in sentence


def test_overlap_share_of_the_chats_wall_time():
    assert overlap_share((10.0, 20.0), [(0.0, 12.0), (15.0, 30.0)]) == pytest.approx(0.7)
    assert overlap_share((10.0, 20.0), []) == 0.0
    assert overlap_share((5.0, 5.0), [(0.0, 9.0)]) == 0.0


def test_visitor_addresses_are_distinct_benchmark_addresses():
    addresses = [visitor_address(i) for i in range(600)]
    assert len(set(addresses)) == 600
    assert addresses[0] == "198.18.0.1" and all(a.startswith("198.18.") for a in addresses)


def test_targets_check_and_its_doctest():
    assert doctest.testmod(targets).failed == 0
    got = targets.check({"serving": {"lessons_at_once": {"errors": 2}}}, classroom.TARGETS)
    assert not got["serving.lessons_at_once.errors"]["met"]
    assert got["serving.chats_while_measuring.ratio_measuring_vs_alone"]["value"] is None
