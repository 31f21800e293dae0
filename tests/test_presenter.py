"""Issue 16, pure parts: links to a prepared state, the presenter's screens, predict-then-
measure sentences, and the exports (CSV equal to the chart's numbers, the machine summary).
No model is loaded here except in the last test (the cheap measurements, on the real model)."""
from __future__ import annotations

import csv
import io
import re
from types import SimpleNamespace

import gradio as gr
import pytest

from inference.config import Settings
from lessons.common.links import LESSONS, PROMPT_BOXES, read_link
from lessons.common.page_screens import PageScreens
from lessons.common.predictions import comparison_md, guess_error, verdict
from lessons.common.presenter_screens import load_screens, parse_screens
from lessons.common.progress import STEPS, path_md, visit, visited
from lessons.presenter_handlers import MEASURES, RECAP, clean, compare_text, fresh, measure_screen
from visualizations.exports import (
    batch_sweep_csv,
    machine_figures_md,
    prefill_sweep_csv,
    write_csv,
)
from visualizations.presenter_view import recap_md, result_html, screen_md

LIMIT = 100


# --- links ---------------------------------------------------------------------------------
def test_link_opens_lesson_and_fills_its_prompts():
    state = read_link({"lesson": "kv", "prompt": "Why is the sky blue?"}, LIMIT)
    assert state.tab == "kv" and state.prompt == "Why is the sky blue?"
    assert state.boxes == PROMPT_BOXES["kv"] and not state.notices


@pytest.mark.parametrize("tab", LESSONS)
def test_every_tab_id_opens(tab):
    state = read_link({"lesson": tab.upper()}, LIMIT)
    assert state.tab == tab and not state.notices


def test_unknown_lesson_is_ignored_with_a_notice():
    state = read_link({"lesson": "<script>x</script>" * 10, "prompt": "hi"}, LIMIT)
    assert state.tab is None and state.prompt is None and state.boxes == ()
    assert "does not exist" in state.notice_md and "<script>" not in state.notice_md


def test_oversized_prompt_is_ignored_but_the_lesson_opens():
    state = read_link({"lesson": "prefill", "prompt": "x" * (LIMIT + 1)}, LIMIT)
    assert state.tab == "prefill" and state.prompt is None and state.boxes == ()
    assert "101 characters" in state.notice_md and "limit of 100" in state.notice_md
    assert read_link({"lesson": "prefill", "prompt": "x" * LIMIT}, LIMIT).prompt == "x" * LIMIT


def test_prompt_for_a_lesson_without_a_prompt_box():
    state = read_link({"lesson": "machine", "prompt": "hi"}, LIMIT)
    assert state.tab == "machine" and state.prompt is None and "no prompt box" in state.notice_md
    assert read_link({"prompt": "hi"}, LIMIT).notices  # a prompt and no lesson


def test_present_opens_the_presenter_and_no_params_change_nothing():
    assert read_link({"present": "1"}, LIMIT).tab == "present"
    assert read_link({"present": "0"}, LIMIT).tab is None
    assert read_link({}, LIMIT) == read_link({"lesson": ""}, LIMIT)
    assert read_link({}, LIMIT).notice_md == ""


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
    assert "**Your guess:** 2" in compare_text(race, p, screens)
    assert compare_text(screens[0], p, screens) == ""  # no prediction on that screen
    p["results"]["kv_race"]["noisy"] = True  # measured on a busy machine: no verdict
    noisy = compare_text(race, p, screens)
    assert "**Your guess:** 2 · **measured:** 3.5× on a busy machine: run again" in noisy
    assert "too" not in noisy and "Why" not in noisy
    assert "3.5×" in recap_md(screens, p["results"])
    assert "Nothing measured" in recap_md(screens, {})


# --- exports ----------------------------------------------------------------------------------
def _prefill_points():
    from inference.experiments.prefill_sweep import PrefillPoint
    return [PrefillPoint(8, 0.0213, 0.5901, True), PrefillPoint(512, 0.9, 36.5, False)]


def _batch_points():
    from inference.experiments.batch_sweep import BatchPoint
    return [BatchPoint(b, 20, 0.05 * b, 0.07 + 0.002 * b, (0.07,), 1000 * b, 538_000_000)
            for b in (1, 2, 4)]


def test_two_visitors_never_share_a_progress_record():
    """Issue 22: the fresh record was one dict shared by every visitor (a shallow copy kept the
    same inner `guesses` and `results`), so one room's guesses could show in another's."""
    first, second = clean(None), clean("junk")
    first["guesses"]["kv_race"] = 2.0
    first["results"]["tokens"] = {"value": 12}
    assert second == fresh() and clean(None) == fresh()
    assert fresh()["guesses"] is not fresh()["guesses"]
    screens = load_screens()
    recap = next(i for i, s in enumerate(screens) if s.measure == RECAP)
    a, b = {**fresh(), "screen": recap}, {**fresh(), "screen": recap}
    measure_screen(a, screens, None, None, Settings(), None)  # the recap runs no model
    assert RECAP in a["results"] and b["results"] == {} and fresh()["results"] == {}


def test_prefill_csv_matches_the_chart():
    from visualizations.style import info_caption
    from visualizations.timing_charts import prefill_sweep_figure

    points = _prefill_points()
    rows = list(csv.DictReader(io.StringIO(prefill_sweep_csv(points))))
    fig = prefill_sweep_figure(points, info_caption(SimpleNamespace(
        device="cpu", dtype="float32", threads=2)))
    plotted = {(int(x), round(float(y), 4)) for t in fig.data for x, y in zip(t.x, t.y)}
    for row, p in zip(rows, points, strict=True):
        assert int(row["prompt_tokens"]) == p.tokens
        assert float(row["one_pass_ms"]) == pytest.approx(p.parallel_seconds * 1000)
        assert float(row["one_at_a_time_ms"]) == pytest.approx(p.sequential_seconds * 1000)
        for col in ("one_pass_ms", "one_at_a_time_ms"):  # every CSV value is a drawn point
            assert (p.tokens, round(float(row[col]), 4)) in plotted, (row, plotted)
    assert rows[1]["one_at_a_time_measured"] == "extrapolated"


def test_batch_csv_matches_the_chart():
    from visualizations.batching_charts import throughput_chart

    points = _batch_points()
    rows = list(csv.DictReader(io.StringIO(batch_sweep_csv(points))))
    assert [int(r["batch"]) for r in rows] == [1, 2, 4]
    fig = throughput_chart(points)
    plotted = [float(y) for trace in fig.data for y in (trace.y or ())]
    for row, p in zip(rows, points, strict=True):
        assert float(row["tokens_per_s"]) == pytest.approx(p.tokens_per_s, rel=1e-4)
        assert any(float(row["tokens_per_s"]) == pytest.approx(y, rel=1e-3) for y in plotted)


def test_csv_file_and_machine_summary(tmp_path):
    from inference.experiments.roofline import Roofline

    path = write_csv("a,b\n1,2\n", "prefill sweep/../x")
    assert re.search(r"prefill-sweep-x-[0-9a-f]{8}\.csv$", path)
    assert open(path).read() == "a,b\n1,2\n"
    info = SimpleNamespace(name="SmolLM2-135M-Instruct", parameters=134_515_008,
                           weight_bytes=538_000_000, dtype="float32", device="cpu", threads=2)
    empty = machine_figures_md(info)
    assert "cpu, 2 threads" in empty and "Nothing measured yet" in empty
    md = machine_figures_md(info, Roofline(22.5, 541_000_000, 13.6), _prefill_points(),
                            _batch_points(), when="today")
    assert "22.5 GB/s" in md and "41.6 tokens/s" in md and "13.6 tokens/s" in md
    assert "Prefill of 512 tokens" in md and "(extrapolated)" in md
    assert "Decode at batch 4" in md and "Nothing measured" not in md


# --- the cheap measurements, on the real model ---------------------------------------------------
def test_cheap_measurements_on_the_real_model(lm):
    from inference.config import Settings

    settings = Settings()
    for key in ("tokens", "token_mix", "kv_bytes"):
        m = MEASURES[key](lm, settings, None)
        assert m.key == key and m.value > 0 and m.shown and m.detail
    split = MEASURES["step_split"](lm, settings, None)  # issue 13: what a step is made of
    if split.noisy:  # a busy machine or a part at ~0 ms: the split is not shown (noise.py)
        assert split.shown == "—" and "not reliable" in split.label and "ms" in split.detail
    else:
        assert 0 < split.value < 100 and split.shown == f"{split.value:.0f}%"
        assert "matrix products" in split.detail and "dispatch alone" in split.detail
    per_token = MEASURES["kv_bytes"](lm, settings, None).value
    i = lm.info
    assert per_token == 2 * i.layers * i.kv_heads * i.head_dim * lm.bytes_per_value


def test_lesson_path_is_ticked_in_order_and_cleaned():
    """Issue 16: a learner's path through the lessons, from the record their browser keeps."""
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


def test_presenter_cost_is_lesson_5s_figure_for_the_same_batch(lm):
    """Issue 28, item 1: the presenter's cost screen and lesson 5's cost table carry the same
    measured points to the same conversation the same way: one batch, one dollar figure."""
    from inference.experiments.batch_sweep import BatchPoint, SweepUpdate
    from inference.experiments.roofline import machine_bandwidth
    from inference.experiments.shared_results import SharedResults
    from lessons import batching_handlers, presenter_handlers
    from lessons.common.latest import PRESENTER_BATCH, shared_key

    settings, shared = Settings(), SharedResults()
    points = (BatchPoint(1, 20, 0.2, 0.08, (0.08,), 10**6, lm.info.weight_bytes),
              BatchPoint(16, 20, 1.5, 0.20, (0.20,), 16 * 10**6, lm.info.weight_bytes))
    shared.put(shared_key(lm, PRESENTER_BATCH), points)
    screen = presenter_handlers.cost(lm, settings, shared)
    sweep = SweepUpdate(points, (), 0, 0, 0, machine_bandwidth(shared, lm.device), "",
                        finished=True)
    view = batching_handlers.cost_view(
        lm, settings, sweep, price_per_hour=settings.price_per_hour.default,
        prompt_tokens=settings.conversation_prompt_tokens.default,
        output_tokens=settings.conversation_output_tokens.default)
    assert screen.shown in view.table  # e.g. "$0.52": the same figure in lesson 5's table
    assert "batch 16" in screen.label and "estimate" in screen.detail


def test_link_markdown_and_html_show_as_plain_text():
    """A link's own text never becomes markup inside the app's notice (issue 30)."""
    from markdown_it import MarkdownIt

    render = MarkdownIt("commonmark", {"html": True}).render
    for lesson in ["[Log in](https://evil.example/login)", "![x](https://evil.example/i.png)",
                   "<img src=https://evil.example/i.png>", "https://evil.example",
                   "`[x](y)` **bold**", "<a href='https://e.example'>hi</a>"]:
        html = render(read_link({"lesson": lesson}, LIMIT).notice_md)
        assert "does not exist" in html
        assert "<a " not in html and "<img" not in html and "<strong" not in html, html
        assert "evil.example" in html or "e.example" in html or "bold" in html  # shown, as text


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


# --- "step k of N" while a long screen measures (issue 23) ----------------------------------------
def test_step_line_says_k_of_n_and_the_running_number():
    from lessons.presenter_handlers import Step, spec_running
    from visualizations.presenter_view import step_html

    page = step_html(Step("decode step", 5, 23, "13.4 tokens/s so far <b>"))
    assert "⏳ decode step 5 of 23" in page and "13.4 tokens/s so far &lt;b&gt;" in page
    assert 'role="status"' in page
    passes = [SimpleNamespace(tokens_so_far=n) for n in (1, 4, 5, 9)]  # prefill, then 3 passes
    assert spec_running(passes) == "2.67 tokens per pass so far (8 tokens in 3 passes)"
    assert spec_running(passes[:1]) == "the prefill made the first token"


@pytest.mark.parametrize("key, counted, running", [
    ("roofline", "decode step", "tokens/s so far (median step)"),
    ("speculative", "token", "tokens per pass so far"),
    ("kv_race", "race step", "recomputing everything")])
def test_long_screens_stream_step_k_of_n(lm, monkeypatch, key, counted, running):
    from inference.experiments.shared_results import SharedResults
    from lessons import presenter_handlers as ph

    monkeypatch.setattr(ph, "DECODE_TOKENS", 5)
    monkeypatch.setattr(ph, "SPEC_TOKENS", 8)
    monkeypatch.setattr(ph, "RACE_TOKENS", 4)
    *steps, last = ph.measure_steps(key, lm, Settings(), SharedResults())
    assert steps and all(isinstance(s, ph.Step) and s.counted == counted for s in steps)
    done = [s.done for s in steps]
    assert done == sorted(done) and done[-1] <= steps[0].total
    assert steps[0].total == 8 if key != "roofline" else steps[0].total == 4
    assert any(running in s.running for s in steps)
    assert isinstance(last, ph.Measured) and last.key == key and last.value > 0
    if key == "kv_race":  # both lanes' steps, counted to the end
        assert done == list(range(1, 9))
    if key == "roofline":  # one line per timed decode step, the speed so far measured
        assert done == [0, 1, 2, 3, 4] and "GB/s (measured)" in steps[0].running
        assert f"{last.value:.1f} GB/s" == last.shown
    if key != "roofline":
        return
    # the screen's own run passes the lines on, then the visitor's progress with the result
    screens = load_screens(lm.info)
    p = {**fresh(), "screen": next(i for i, s in enumerate(screens) if s.measure == key)}
    *lines, progress = ph.measure_screen_steps(p, screens, None, lm, Settings(), SharedResults())
    assert any(isinstance(x, ph.Step) for x in lines) and progress["results"][key]["shown"]


def test_the_step_line_shows_on_its_own_screen_only(app_module, monkeypatch):
    """While a long screen measures, its result area shows "step k of N"; once the presenter
    has turned the page, the lines stop (they would paint over the next screen's number)."""
    from lessons import presenter_handlers as ph

    def fake(lm, settings, shared):
        yield ph.Step("decode step", 1, 3, "10.0 tokens/s so far")
        yield ph.Step("decode step", 2, 3, "11.0 tokens/s so far")
        yield ph.Measured("roofline", 20.0, "20.0 GB/s", "memory read speed", "measured")

    monkeypatch.setitem(ph.MEASURES, "roofline", fake)
    demo = app_module.demo
    fns = [f.fn for f in demo.fns.values()]
    measure = next(f for f in fns if getattr(f, "__name__", "") == "measure")
    move = next(f for f in fns if getattr(f, "__name__", "") == "go")
    result = next(b for b in demo.blocks.values() if getattr(b, "elem_id", "") == "present-result")
    page = SimpleNamespace(session_hash="page-steps")
    screens = load_screens(app_module.LM.info)  # the panel's own screens
    at = next(i for i, s in enumerate(screens) if s.measure == "roofline")
    run = measure({**fresh(), "screen": at}, None, request=page)
    first = next(run)
    assert "⏳ decode step 1 of 3" in first[result] and "10.0 tokens/s so far" in first[result]
    move({**fresh(), "screen": at, "page": "page-steps"}, request=page)  # the presenter turns
    assert next(run)[result] == gr.skip()  # not drawn over the screen now shown
    (done,) = next(run).values()  # the figure kept, the page not turned back
    assert done["results"]["roofline"]["shown"] == "20.0 GB/s" and done["screen"] != at


def _step_groups(steps) -> dict[str, list]:
    """A screen's step lines by what they count (int8 counts four things in turn)."""
    groups: dict[str, list] = {}
    for s in steps:
        groups.setdefault(s.counted, []).append(s)
    return groups


@pytest.mark.parametrize("key, counted", [
    ("prefill_race", ["token"]),
    ("batch", ["batch size"]),
    ("int8", ["building float32: layers converted", "float32 decode: token",
              "building int8: layers converted", "int8 decode: token"]),
    ("long_context", ["cache length"])], ids=["prefill_race", "batch", "int8", "long_context"])
def test_the_other_long_screens_stream_step_k_of_n(lm, monkeypatch, key, counted):
    """Issue 23: the prefill race, batching, int8 and long-context screens show "step k of N"
    and a figure measured so far after every part (they showed nothing while they ran); each
    count climbs to its total, and the last line's figures are the headline's own."""
    from inference.experiments.shared_results import SharedResults
    from lessons import presenter_handlers as ph

    for name, value in (("PREFILL_TOKENS", 24), ("BATCH", 4), ("BATCH_STEPS", 2),
                        ("INT8_TOKENS", 4), ("LONG_CONTEXT", (20, 200))):
        monkeypatch.setattr(ph, name, value)
    *steps, last = ph.measure_steps(key, lm, Settings(), SharedResults())
    assert steps and all(isinstance(s, ph.Step) for s in steps)
    assert isinstance(last, ph.Measured) and last.key == key and last.value > 0
    groups = _step_groups(steps)
    assert list(groups) == counted  # in this order, each phase once
    for group in groups.values():
        done = [s.done for s in group]
        assert done == sorted(done) and done[-1] == group[0].total, (group[0].counted, done)
        assert {s.total for s in group} == {group[0].total}  # one honest N per count
    measured = [s.running for s in steps if "(measured" in s.running]
    assert measured, "no running figure measured so far"
    if key == "prefill_race":  # a line per stretch fed one at a time, then the point's own
        assert [s.done for s in steps] == [16, 24] and steps[0].total == 24
        assert "so far (measured)" in steps[0].running
        assert steps[-1].running == f"{last.detail} (measured)"
    if key == "batch":  # sizes 1, 2 and 4, counted as each finishes
        assert steps[0].total == 3 and steps[0].running.startswith("Batch 1: prefilling")
        newest = re.search(r"batch 4: [\d.]+ tokens/s", steps[-1].running)
        assert newest and newest.group(0) in last.detail
    if key == "int8":  # every layer converted; int8's speed so far beside float32's
        assert groups["building int8: layers converted"][0].done == 0  # copying first
        assert groups["building int8: layers converted"][-1].total == lm.info.layers
        first, end = groups["int8 decode: token"][0], groups["int8 decode: token"][-1]
        assert "prefill" in first.running and "the first token (measured)" in first.running
        speed = re.match(r"([\d.]+) tokens/s so far \(measured\) · float32 ([\d.]+)", end.running)
        assert speed and f"int8 {speed.group(1)} tokens/s" in last.detail
        assert f"float32 {speed.group(2)} tokens/s" in last.detail
    if key == "long_context":  # what runs first (no number yet), then each length's step
        assert steps[0].done == 0 and "(measured" not in steps[0].running
        assert "one prefill fills a cache of 200 tokens" in steps[0].running
        assert steps[1].running.startswith("200 cached tokens: ")  # longest first, alone
        assert " · " not in steps[1].running and "· 20 cached tokens: " in steps[-1].running
        for ms in re.findall(r"([\d.]+) ms a step", steps[-1].running):
            assert f"{ms} ms" in last.detail


def test_a_builds_step_line_counts_decoder_layers():
    from lessons.presenter_handlers import build_step

    def line(done, message):
        return build_step("int8", SimpleNamespace(done=done, total=211, message=message), 30)

    copying = line(0, "int8: copying the float32 model (538 MB)")
    assert (copying.counted, copying.done, copying.total) == ("building int8: layers converted",
                                                              0, 30)
    assert line(85, "int8: model.layers.12.mlp.up_proj").done == 12  # 12 done, the 13th now
    assert line(211, "int8: lm_head").done == 30 and line(1, "int8: built in 1.1 s").done == 30
    assert line(85, "int8: model.layers.12.mlp.up_proj").running.endswith("layers.12.mlp.up_proj")


def test_a_headline_says_faster_only_when_its_measured_ratio_is_above_one():
    import doctest

    from lessons import presenter_handlers as ph
    assert ph.ratio_label(3.0, "faster with the cache", "recomputing ÷ cached time",
                          "24 tokens") == "faster with the cache (24 tokens)"
    slow = ph.ratio_label(0.8, "faster with the cache", "recomputing ÷ cached time", "24 tokens")
    assert "faster with" not in slow and slow.endswith("not faster on this run")
    finder = doctest.DocTestFinder()
    results = [doctest.DocTestRunner().run(t) for t in finder.find(ph.ratio_label)]
    assert results and all(r.failed == 0 and r.attempted > 0 for r in results)
