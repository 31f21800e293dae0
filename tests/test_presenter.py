"""The presenter: its screens in order, predict-then-measure sentences, the visitor's progress
record and recap, and its measurements (the cheap ones and the cost screen on the real model).
Links are in test_links.py, the CSV and machine-summary exports in test_exports.py."""
from __future__ import annotations

import json
from dataclasses import asdict
from types import SimpleNamespace

import gradio as gr
import pytest

from inference.config import Settings
from lessons.common.predictions import (
    comparison_md,
    guess_error,
    load_screens,
    parse_screens,
    verdict,
)
from lessons.common.progress import STEPS, path_md, visit, visited
from lessons.presenter_handlers import MEASURES, RECAP, measure_screen_steps, measure_steps
from lessons.presenter_record import PageScreens, clean, compare_text, fresh
from visualizations.cards import recap_html, result_html, screen_md


# --- screens ----------------------------------------------------------------------------------
def test_screens_tell_the_story_in_order():
    screens = load_screens()
    assert 12 <= len(screens) <= 16
    keys = [s.measure for s in screens]
    assert set(keys) - {RECAP} <= set(MEASURES) and keys[-1] == RECAP
    story = ["tokens", "prefill", "decode", "kv_race", "batch", "int8", "cost"]
    assert [keys.index(k) for k in story] == sorted(keys.index(k) for k in story)
    predicted = {s.measure for s in screens if s.predict}
    assert {"prefill_race", "kv_race", "batch", "int8", "cost"} <= predicted
    cost = next(s for s in screens if s.measure == "cost")  # its question names the price used
    assert f"${Settings().price_per_hour.default:.2f} an hour" in cost.predict
    for s in screens:
        assert s.title and s.body and s.button
        assert not s.predict or (s.unit and s.why)


def test_screen_placeholders_are_filled_from_the_model():
    info = SimpleNamespace(layers=30, parameters=134_515_008, vocab_size=49152, hidden_size=576,
                           weight_bytes=538_000_000, dtype="float32")
    first = load_screens(info)[0]
    assert "135 M parameters" in first.body and "30 layers" in first.body
    assert "$" not in "".join(s.body for s in load_screens(info))


def test_bad_screen_file_is_refused():
    with pytest.raises(ValueError, match="measure"):
        parse_screens("## Only a title\nbutton: Go\n\nText")
    with pytest.raises(ValueError, match="unknown setting"):
        parse_screens("## T\nmeasure: tokens\nbutton: Go\ncolour: red\n\nText")


def test_screen_views():
    s = load_screens()[4]
    assert screen_md(s, 4, 13).startswith("<small>Screen 5 of 13</small>")
    assert "Press the button" in result_html(None)
    shown = result_html({"shown": "12.5×", "label": "faster", "detail": "<b>x</b>"})
    assert "12.5×" in shown and "&lt;b&gt;" in shown


# --- predict, then measure --------------------------------------------------------------------
def test_guess_against_measurement():
    assert guess_error(5, 10) == guess_error(20, 10) == 2.0
    assert verdict(11, 10).startswith("close")
    assert verdict(2, 10) == "too low: the measurement is 5.0× your guess"
    assert verdict(40, 10) == "too high: your guess is 4.0× the measurement"
    md = comparison_md(3, 12.34, "× faster", "Because of the cache.")
    assert "**Your guess:** 3 × faster" in md and "12 × faster" in md
    assert md.endswith("**Why:** Because of the cache.")
    assert "No guess typed" in comparison_md(None, 2.0, "×", "")
    assert "above 0" in comparison_md(-1, 2.0, "×", "")


def test_progress_from_the_browser_is_cleaned_and_compared():
    assert clean(None) == fresh() and clean("junk") == fresh()
    assert clean({"screen": "3"})["screen"] == 0
    assert clean({"page": "abc"})["page"] == "abc" and clean({"page": 7})["page"] is None
    screens = load_screens()
    race = next(s for s in screens if s.measure == "kv_race")
    p = clean({"screen": 8, "guesses": {"kv_race": 2.0},
               "results": {"kv_race": {"value": 3.5, "shown": "3.5×", "label": "faster"}}})
    assert "**Your guess:** 2" in compare_text(race, p)
    assert compare_text(screens[0], p) == ""  # no prediction on that screen
    p["results"]["kv_race"]["noisy"] = True  # measured on a busy machine: no verdict
    noisy = compare_text(race, p)
    assert (f"**Your guess:** 2 {race.unit} · **measured:** 3.5× on a busy machine: run again"
            in noisy)
    assert "too" not in noisy and "Why" not in noisy and "faster ·" not in noisy.split("·")[-1]
    p["results"]["kv_race"]["reference"] = {"key": "kv_race 8 tokens", "value": 2.2,
                                            "label": "2.2×", "measured_at": "2025-11-02T09:12:00",
                                            "machine": "a test machine"}  # as the record keeps it
    judged = compare_text(race, p)
    assert ("**this machine, quiet** (measured 2 Nov 09:12): 2.2 × faster, close: well "
            "predicted. This run: 3.5× on a busy machine." in judged and "**Why:**" in judged)
    p["results"]["kv_race"]["reference"] = {"value": "2.2"}  # one that does not read back
    assert compare_text(race, p) == noisy


def test_the_recap_shows_the_five_big_numbers_each_with_its_source():
    """The recap slide: first token vs next, the cache's ratio, batching's gain, bytes per
    weight and dollars per million, from this visitor's own screens, each labelled; a screen
    not run says "not measured yet" and shows no number."""
    from lessons.presenter_record import NOT_YET, recap_figures

    screens = load_screens()
    nothing = recap_figures(screens, {}, 4)
    assert [f.name for f in nothing] == ["First vs next token", "KV cache", "Batching",
                                         "Bytes per weight", "Dollars per million"]
    for f in nothing[:3] + nothing[4:]:
        assert f.shown is None and f.source.startswith(NOT_YET), f
    assert nothing[3].shown == "4 → 1" and nothing[3].source.startswith("theoretical")
    results = {
        "prefill": {"shown": "410 ms", "value": 410, "label": "to the first token",
                    "figures": {"first_ms": 410.2, "next_ms": 41.4}},
        "kv_race": {"shown": "2.8×", "value": 2.8, "label": "faster with the cache",
                    "noisy": True},
        "int8": {"shown": "1.40×", "value": 1.4, "label": "x", "noisy": True,
                 "figures": {"fp32_bytes_per_weight": 4.0, "int8_bytes_per_weight": 1.27}},
    }
    first, cache, batch, per_weight, dollars = recap_figures(screens, results, 4)
    assert first.shown == "410 vs 41" and first.source == "measured here · screen 4"
    assert cache.shown == "2.8×" and cache.source == "measured here · screen 11 · busy machine"
    assert batch.shown is None and dollars.shown is None
    # a count of bytes: its screen's noisy speeds do not mark it
    assert per_weight.shown == "4.0 → 1.27" and per_weight.source == "measured here · screen 14"
    page = recap_html([first, cache, batch, per_weight, dollars])
    assert page.count('class="present-card"') == 5 and "410 vs 41" in page
    assert page.count("present-none") == 2 and NOT_YET in page


def test_the_cost_screen_prices_the_visitors_own_batch_sweep(lm):
    """One figure per idea per visitor: the cost screen prices the sweep its visitor's batching
    screen measured (no sweep run, none read from the machine's store), says which screen's
    figure it uses, and a later batching run that contradicts it withdraws the cost."""
    from inference.experiments.batch_sweep import BatchPoint
    from inference.experiments.noise import judge
    from inference.experiments.shared_results import SharedResults
    from lessons import presenter_handlers as ph
    from lessons.common.latest import PRESENTER_BATCH, keep, shared_key
    from lessons.presenter_record import shown_result, sweep_figures

    points = (BatchPoint(1, 20, 0.2, 0.08, (0.08,), 10**6, lm.info.weight_bytes),
              BatchPoint(16, 20, 1.5, 0.20, (0.20,), 16 * 10**6, lm.info.weight_bytes))
    batch = {"key": "batch", "value": 6.4, "shown": "6.4×", "label": "x", "detail": "",
             "noisy": False, "figures": sweep_figures(points)}
    batch = json.loads(json.dumps(batch))  # as the visitor's browser keeps it
    shared = SharedResults()  # another visitor's quiet sweep on this machine: not this one's
    keep(shared, shared_key(lm, PRESENTER_BATCH), points[:1] + (BatchPoint(
        16, 20, 1.5, 0.5, (0.5,), 16 * 10**6, lm.info.weight_bytes),), judge(others_cpu=0.02))
    *steps, m = ph.measure_steps("cost", lm, Settings(), shared, {"batch": batch})
    assert not any(isinstance(x, ph.Step) for x in steps), "a sweep was run again"
    assert f"your batch sweep on “{ph.BATCH_SCREEN}”" in m.detail
    assert "12.5 and 80.0 tokens/s" in m.detail and m.figures["tokens_per_s"] == 80.0
    results = {"batch": batch, "cost": asdict(m)}
    assert shown_result("cost", results)["shown"] == m.shown  # the same sweep: it stands
    slower = (points[0], BatchPoint(16, 20, 1.5, 1.6, (1.6,), 16 * 10**6, lm.info.weight_bytes))
    results["batch"] = {**batch, "figures": sweep_figures(slower)}  # batching run again
    withdrawn = shown_result("cost", results)
    assert withdrawn["shown"] == "—" and "your batch sweep measured 10.0" in withdrawn["detail"]
    assert withdrawn["noisy"]  # no guess is judged against it


# --- exports ----------------------------------------------------------------------------------
def test_two_visitors_never_share_a_progress_record():
    """The fresh record was once one dict shared by every visitor (a shallow copy kept the
    same inner `guesses` and `results`), so one room's guesses could show in another's."""
    first, second = clean(None), clean("junk")
    first["guesses"]["kv_race"] = 2.0
    first["results"]["tokens"] = {"value": 12}
    assert second == fresh() and clean(None) == fresh()
    assert fresh()["guesses"] is not fresh()["guesses"]
    screens = load_screens()
    recap = next(i for i, s in enumerate(screens) if s.measure == RECAP)
    a, b = {**fresh(), "screen": recap}, {**fresh(), "screen": recap}
    list(measure_screen_steps(a, screens, None, None, Settings(), None))  # recap: no model
    assert RECAP in a["results"] and b["results"] == {} and fresh()["results"] == {}


# --- the cheap measurements, on the real model ---------------------------------------------------
def test_cheap_measurements_on_the_real_model(lm):
    from inference.config import Settings

    settings = Settings()
    for key in ("tokens", "token_mix", "kv_bytes"):
        *_, m = measure_steps(key, lm, settings, None)
        assert m.key == key and m.value > 0 and m.shown and m.detail
    *_, split = measure_steps("step_split", lm, settings, None)  # what a step is made of
    if split.noisy:  # a busy machine or a part at ~0 ms: the split is not shown (noise.py)
        assert split.shown == "—" and "not reliable" in split.label and "ms" in split.detail
    else:
        assert 0 < split.value < 100 and split.shown == f"{split.value:.0f}%"
        assert "matrix products" in split.detail and "dispatch alone" in split.detail
    per_token = list(measure_steps("kv_bytes", lm, settings, None))[-1].value
    i = lm.info
    assert per_token == 2 * i.layers * i.kv_heads * i.head_dim * lm.bytes_per_value


def test_lesson_path_is_ticked_in_order_and_cleaned():
    """A learner's path through the lessons, from the record their browser keeps."""
    assert list(STEPS) == ["chat", "tokens", "prefill", "decode", "speculative", "kv", "pages",
                           "context", "batching", "quantization", "machine"]
    assert "in this browser only" in path_md(None) and "✓" not in path_md(None)
    record = visit(visit(None, "kv"), "tokens")
    assert record == {"visited": ["tokens", "kv"]}  # lesson order, not click order
    assert visit(record, "present") == record and visit(record, "kv") == record
    line = path_md(record)
    assert f"(2 of {len(STEPS)}," in line and "✓ 1 · Tokens" in line and "○ Try it" in line
    assert line.endswith("Next: **Try it**.")
    # a record from the browser may hold anything: junk is dropped, never an error
    for junk in ("x", [1], {"visited": "kv"}, {"visited": [None, 3, "nope", "kv"]}):
        assert visited(junk) in ([], ["kv"])
    everything = {"visited": list(STEPS)}
    assert path_md(everything).endswith("**Every lesson opened.**")


def test_a_stored_screen_is_redrawn_for_a_new_page_only(app_module):
    """The presenter's stored progress is shown again after a reload (a new page), but a change
    the page wrote itself is not redrawn: a late redraw could put the previous screen back
    after the next arrow key (a flake seen in CI: stuck on screen 13 after ArrowLeft)."""
    restore = next(f.fn for f in app_module.demo.fns.values()
                   if getattr(f.fn, "__name__", "") == "restore")
    stored = {**fresh(), "screen": 4, "page": "page-A"}
    kept = restore(stored, request=SimpleNamespace(session_hash="page-A"))
    assert kept and all(v == gr.skip() for v in kept.values())  # nothing redrawn
    redrawn = restore(stored, request=SimpleNamespace(session_hash="page-B"))
    assert any("Screen 5 of" in str(v) for v in redrawn.values())


def test_a_finished_measurement_is_drawn_after_its_stream_ends(app_module):
    """The streamed measurement never draws the page: when a streamed event ends Gradio sends
    its outputs' last values again, which put screen 2 back over a move to screen 1 (a CI flake:
    screens shown 1, 2, 1, 2). Its result reaches the page in the event after it, on the
    screen this page's own moves reached, once."""
    demo = app_module.demo

    def on(elem_id: str):  # the handler of a click on the button with this elem_id
        return next(f.fn for f in demo.fns.values() if f.fn is not None and any(
            getattr(demo.blocks.get(b), "elem_id", None) == elem_id for b, _ in f.targets))

    event = next(f for f in demo.fns.values() if f.api_name == "presenter_measure")
    screen = next(c for c in event.outputs if getattr(c, "elem_id", None) == "present-screen")
    show_finished = next(f.fn for f in demo.fns.values()
                         if getattr(f.fn, "__name__", "") == "show_finished")
    page = SimpleNamespace(session_hash="page-finished")
    at_two = on("present-next")({**fresh(), "screen": 0}, request=page)  # screen 2: tokens
    p = next(v for v in at_two.values() if isinstance(v, dict) and "screen" in v)
    assert p["screen"] == 1
    frames = list(event.fn(p, None, request=page))
    assert frames and all(screen not in f for f in frames if isinstance(f, dict)), frames
    done = next(v for f in frames for v in f.values()
                if isinstance(v, dict) and "tokens" in v.get("results", {}))
    on("present-back")(p, request=page)  # the presenter turned back to screen 1 meanwhile
    shown = show_finished(done, request=page)
    assert "Screen 1 of" in str(shown[screen]), shown[screen]
    stored = next(v for v in shown.values() if isinstance(v, dict) and "results" in v)
    assert stored["screen"] == 0 and "tokens" in stored["results"]  # kept, on the page now
    cleared = [v for v in shown.values() if v is None]
    assert cleared, "the finished progress is used once"
    again = show_finished(None, request=page)
    assert all(v is None or v == gr.skip() for v in again.values()), again


def test_presenter_cost_is_lesson_5s_figure_for_the_same_batch(lm):
    """The presenter's cost screen and lesson 5's cost table carry the same
    measured points to the same conversation the same way: one batch, one dollar figure."""
    from inference.experiments.batch_sweep import BatchPoint, SweepUpdate
    from inference.experiments.noise import judge
    from inference.experiments.roofline import machine_bandwidth
    from inference.experiments.shared_results import SharedResults
    from lessons import batching_handlers, presenter_handlers
    from lessons.common.latest import PRESENTER_BATCH, keep, shared_key

    settings, shared = Settings(), SharedResults()
    points = (BatchPoint(1, 20, 0.2, 0.08, (0.08,), 10**6, lm.info.weight_bytes),
              BatchPoint(16, 20, 1.5, 0.20, (0.20,), 16 * 10**6, lm.info.weight_bytes))
    keep(shared, shared_key(lm, PRESENTER_BATCH), points, judge(others_cpu=0.02))  # quiet
    *_, screen = presenter_handlers.measure_steps("cost", lm, settings, shared)  # no own sweep
    assert "a quiet batch sweep kept on this machine" in screen.detail
    sweep = SweepUpdate(points, (), 0, 0, 0, machine_bandwidth(shared, lm.device), "",
                        finished=True)
    view = batching_handlers.cost_view(
        lm, settings, sweep, price_per_hour=settings.price_per_hour.default,
        prompt_tokens=settings.conversation_prompt_tokens.default,
        output_tokens=settings.conversation_output_tokens.default)
    assert screen.shown in view.table  # e.g. "$0.52": the same figure in lesson 5's table
    assert "batch 16" in screen.label and "estimate" in screen.detail


def test_a_measurement_that_ends_late_does_not_turn_the_page_back():
    """The presenter moved on while a measurement ran: its final frame shows the screen the
    page shows now (its own moves say which), not the one it was started on."""
    pages = PageScreens(limit=2)
    assert pages.now("a", 3) == 3 and pages.now(None, 5) == 5  # never moved: as measured
    pages.moved("a", 7)
    pages.moved(None, 9)  # a page without an id is not remembered
    assert pages.now("a", 3) == 7 and pages.now(None, 3) == 3
    pages.moved("b", 1)
    pages.moved("c", 2)  # past the limit: the oldest-moved page is forgotten
    assert pages.now("a", 3) == 3 and pages.now("b", 0) == 1 and pages.now("c", 0) == 2


# --- "step k of N" while a long screen measures --------------------------------------------------


def test_an_impossible_figure_is_withheld_on_its_screen_and_in_the_recap(monkeypatch):
    """A speed-up physics rules out, still so after the experiment measured it again: the
    screen shows no number and no guess verdict, and the recap says it is not measured."""
    from inference.experiments.prefill_sweep import SweepProgress, robust_point
    from lessons import presenter_handlers
    from lessons.presenter_record import recap_figures

    n = presenter_handlers.PREFILL_TOKENS  # one pass 1 ms, each fed token 1 s: 1,000x
    point = robust_point(n, [0.001] * 3, [1.0] * 6, [0, 0, 1, 1, 2, 2], True, attempt=1)
    assert point.impossible
    monkeypatch.setattr(presenter_handlers, "prefill_sweep",
                        lambda lm, lengths, most: iter([SweepProgress(1, 1, (point,))]))
    *_, m = measure_steps("prefill_race", None, Settings(), None)
    assert (m.shown, m.noisy) == ("—", True) and "at most" in m.detail
    screens = load_screens()
    at_race = next(i for i, s in enumerate(screens) if s.measure == "prefill_race")
    progress = {**fresh(), "screen": at_race, "results": {"prefill_race": asdict(m)},
                "guesses": {"prefill_race": 20.0}}
    assert "why" not in compare_text(screens[at_race], progress).lower()
    shown = {f.name: f.shown for f in recap_figures(screens, progress["results"], 4)}
    assert "1000" not in str(shown) and "1,000" not in str(shown)
