"""The presenter's long screens while they run: a "step k of N" line with the number measured
so far after each part (`lessons.presenter_handlers`), shown on its own screen only, and the
headline labels decided from the measured ratio."""
from __future__ import annotations

import re
from types import SimpleNamespace

import gradio as gr
import pytest

from inference.config import Settings
from lessons.common.predictions import load_screens
from lessons.presenter_record import fresh


def test_step_line_says_k_of_n_and_the_running_number():
    from lessons.presenter_lines import Step, spec_running
    from visualizations.cards import step_html

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
    page = gr.Request(session_hash="page-steps")
    screens = load_screens(app_module.LM.info)  # the panel's own screens
    at = next(i for i, s in enumerate(screens) if s.measure == "roofline")
    run = measure({**fresh(), "screen": at}, None, page)  # the request by position, as Gradio
    started = next(run)[result]  # at once, before the measurement's first part
    assert "⏳ Measure the memory speed: started" in started and " of " not in started
    first = next(run)
    assert "⏳ decode step 1 of 3" in first[result] and "10.0 tokens/s so far" in first[result]
    move({**fresh(), "screen": at, "page": "page-steps"}, request=page)  # the presenter turns
    assert next(run)[result] == gr.skip()  # not drawn over the screen now shown
    (done,) = next(run).values()  # the finished progress, drawn by the event after the stream
    assert done["results"]["roofline"]["shown"] == "20.0 GB/s"
    show_finished = next(f for f in fns if getattr(f, "__name__", "") == "show_finished")
    shown = show_finished(done, request=page)
    (kept,) = [v for v in shown.values() if isinstance(v, dict) and "results" in v]
    assert kept["results"]["roofline"]["shown"] == "20.0 GB/s"  # the figure kept
    assert kept["screen"] != at  # the page not turned back


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
    """The prefill race, batching, int8 and long-context screens show "step k of N"
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
    from lessons.presenter_lines import build_step

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


def test_every_screen_shows_its_own_line_before_any_model_work(monkeypatch):
    """Pressed, a screen's first frame is its own "started" line, sent before its measurement
    runs at all (a screen that showed nothing for half a minute showed Gradio's grey veil)."""
    from lessons import presenter_handlers as ph

    screens = load_screens()
    called = []
    for key in ph.MEASURES:
        monkeypatch.setitem(ph.MEASURES, key, lambda *a, key=key: called.append(key) or iter(()))
    for i, s in enumerate(screens):
        if s.measure == "recap":
            continue
        first = next(ph.measure_screen_steps({**fresh(), "screen": i}, screens, None, None,
                                             Settings(), None))
        assert isinstance(first, ph.Step) and first.counted == f"{s.button}: started", s.title
    assert called == [], "a measurement ran before the screen's first frame"


@pytest.mark.parametrize("key, counted, running", [
    ("answer", "token", r"first token \d+ ms · next tokens \d+ ms each so far \(measured\)"),
    ("decode", "decode step", r"next tokens \d+ ms each so far \(measured\) · “"),
    ("kv_bytes", "token", r"cache [\d.]+ [kMG]?B after \d+ tokens \(measured\)"),
    ("prefill", "one pass", r"reading \d+ prompt tokens"),
    ("step_split", "decode step profiled", "every operation of one real decode step")])
def test_the_short_screens_stream_their_figure_so_far(lm, monkeypatch, key, counted, running):
    """The screens that ran as one piece show a step line too: each token's figure so far
    (the answer, decoding, the cache), or what is being measured (one pass, the profile)."""
    from lessons import presenter_handlers as ph

    monkeypatch.setattr(ph, "DECODE_TOKENS", 4)
    *steps, last = ph.measure_steps(key, lm, Settings(), None)
    assert steps and all(isinstance(x, ph.Step) and x.counted == counted for x in steps)
    assert any(re.search(running, x.running) for x in steps), [x.running for x in steps]
    assert isinstance(last, ph.Measured) and last.key == key
    if key in ("answer", "decode", "kv_bytes"):  # one line per token, counted to the end
        assert [x.done for x in steps] == list(range(1, len(steps) + 1)) and len(steps) > 1
    if key in ("answer", "decode", "prefill"):  # the recap's first and next token
        assert last.figures["first_ms"] > 0 and last.figures["next_ms"] > 0
