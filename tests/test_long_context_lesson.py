"""Lesson 4c "Long contexts" on the real model, at SHORT lengths so it stays fast: each sweep
streams "step k of N" progress and ends with a chart whose plotted numbers are the sweep's own
points (shared with the next visitor), the guess is set beside the measured ratio, a length
beyond the window is refused with its message, and the presenter's screen measures the same
way. The panel's place in the app is checked in tests/test_app.py."""
from __future__ import annotations

import dataclasses
import re

import pytest

from inference.config import Settings
from inference.errors import PromptTooLongError
from inference.experiments.context_sweep import compare_lengths
from inference.experiments.shared_results import SharedResults
from lessons import context_handlers as run
from lessons import presenter_handlers
from visualizations.noise_view import BUSY

SHORT = dataclasses.replace(Settings(), context_prefill_lengths=(64, 128, 256),
                            context_decode_lengths=(0, 16, 64), context_decode_batches=(1, 8),
                            context_decode_repeats=2, context_guess_lengths=(16, 128))


def _bandwidth(lm) -> SharedResults:
    shared = SharedResults()
    shared.put(("read-bandwidth", str(lm.device)), 12.5)  # this machine's one figure, preset
    return shared


def measured_in(text: str) -> float:
    return float(re.search(r"\*\*measured:\*\* ([\d.,]+)", text).group(1).replace(",", ""))


def test_long_context_lengths_follow_the_choice_and_the_window(lm):
    window = lm.info.context_window
    choices = run.length_choices(lm, Settings())
    assert choices[-1] == window and run.default_length(lm, Settings()) in choices
    assert run.default_length(lm, Settings()) <= Settings().context_default_max_tokens
    assert run.sweep_prefill_lengths(lm, SHORT, 256) == (64, 128, 256)
    assert run.sweep_prefill_lengths(lm, SHORT, 100) == (64, 100)  # the longest always timed
    assert run.sweep_decode_lengths(lm, SHORT, 128) == (0, 16, 64, 128)
    assert run.sweep_decode_lengths(lm, Settings(), window)[-1] == window - 1  # room for a step


def test_long_context_prefill_streams_progress_and_plots_the_sweep(lm):
    shared = SharedResults()
    frames = list(run.prefill_frames(lm, SHORT, shared, 256))
    assert frames[0].progress.startswith("⏳ Step 1 of 3: one prefill of 64 tokens")
    steps = [f.progress for f in frames[1:-1]]
    assert [s[:13] for s in steps] == ["⏳ Step 1 of 3", "⏳ Step 2 of 3", "⏳ Step 3 of 3"]
    assert "Now step 2 of 3: 128 tokens" in steps[0] and "Now step" not in steps[-1]
    points = shared.get(("context-prefill", lm.info.device, lm.info.dtype, (64, 128, 256), 1))
    assert [p.tokens for p in points] == [64, 128, 256]
    assert f"256 tokens prefilled in {points[-1].seconds:,.2f} s" in steps[-1]
    last = frames[-1]
    measured = last.chart.data[0]
    assert list(measured.x) == [64, 128, 256]
    assert list(measured.y) == pytest.approx([p.seconds_per_token * 1000 for p in points])
    assert len(last.chart.data) == 3  # the fit and the fit without its L² term beside them
    assert "| 256 | " in last.text and last.progress == run.FRESH_NOTE
    again = list(run.prefill_frames(lm, SHORT, shared, 256))  # the next visitor: no new run
    if BUSY.capitalize() in last.text:  # judged busy (noise.py): measured again, not shared
        assert len(again) > 1 and again[-1].progress == run.FRESH_NOTE
        return
    assert len(again) == 1 and again[0].progress == run.SHARED_NOTE
    assert list(again[0].chart.data[0].y) == list(measured.y)


def test_long_context_decode_answers_the_guess_with_the_measured_ratio(lm):
    shared = _bandwidth(lm)
    frames = list(run.decode_frames(lm, SHORT, shared, 128, guess=2))
    assert frames[0].progress.startswith("⏳ Filling a cache of 128 tokens")
    steps = [f.progress for f in frames[1:-1]]
    assert len(steps) == 8 and steps[-1].startswith("⏳ Step 8 of 8: batch 8, 0 cached tokens")
    key = ("context-decode", lm.info.device, lm.info.dtype, (0, 16, 64, 128), (1, 8), 2)
    points = shared.get(key)
    last = frames[-1]
    for trace in (t for t in last.chart.data if "measured" in t.name):
        batch = int(re.match(r"batch (\d+)", trace.name).group(1))
        mine = sorted((p for p in points if p.batch == batch), key=lambda p: p.cache_tokens)
        assert list(trace.x) == [p.cache_tokens for p in mine]
        assert list(trace.y) == pytest.approx([p.seconds * 1000 for p in mine])
    ratio = compare_lengths(points, 16, 128).ratio
    assert "**Your guess:** 2 ×" in last.text
    assert measured_in(last.text) == pytest.approx(ratio, abs=0.06 if ratio < 10 else 0.6)
    assert "L* = " in last.text and "12.5 GB/s" in last.text
    assert "| grouped-query attention (GQA) | measured |" in last.cuts
    assert "| grouped-query attention (GQA) | theoretical |" in run.cuts_text(lm, SHORT)
    assert all(f.cuts is None for f in frames[:-1])


def test_long_context_guess_waits_for_a_run_that_reaches_its_length(lm):
    one_row = dataclasses.replace(SHORT, context_decode_batches=(1,))
    frames = list(run.decode_frames(lm, one_row, _bandwidth(lm), 64, guess=2))
    assert "this run stopped at 64" in frames[-1].text
    assert "**Your guess:**" not in frames[-1].text  # never compared at another length


def test_long_context_attention_memory_streams_both_implementations(lm):
    before = lm.model.config._attn_implementation
    frames = list(run.memory_frames(lm, SHORT, SharedResults(), 128))
    assert frames[0].progress.startswith("⏳ Step 1 of 2: one prefill of 128 tokens with sdpa")
    assert frames[1].progress.startswith("⏳ Step 1 of 2: sdpa, peak")
    assert frames[2].progress.startswith("⏳ Step 2 of 2: eager, peak")
    bars = frames[-1].chart.data[0]
    assert list(bars.x) == ["sdpa (128 tokens)", "eager (128 tokens)"]
    assert "| eager | 128 |" in frames[-1].text and "FlashAttention" in frames[-1].text
    assert lm.model.config._attn_implementation == before  # the model's own is back


@pytest.mark.parametrize("frames", [run.prefill_frames, run.decode_frames, run.memory_frames])
def test_long_context_length_beyond_the_window_gets_its_message(lm, frames):
    window = lm.info.context_window
    with pytest.raises(PromptTooLongError, match=f"context window of {window:,} tokens"):
        next(frames(lm, SHORT, SharedResults(), window + 1))


def test_long_context_presenter_screen_measures_two_cache_lengths(lm, monkeypatch):
    monkeypatch.setattr(presenter_handlers, "LONG_CONTEXT", (16, 64))
    *_, m = presenter_handlers.measure_steps("long_context", lm, SHORT, _bandwidth(lm))
    assert m.key == "long_context" and m.value > 0 and m.shown == f"{m.value:.2f}×"
    assert "with 64 cached tokens as with 16" in m.label
    assert "floor predicts" in m.detail and "12.5 GB/s measured" in m.detail


def _wired(app_module, api_name: str):
    return next(f for f in app_module.demo.fns.values() if f.api_name == api_name)


def test_long_context_panel_streams_its_sweeps_in_the_app(app_module):
    """The tab's events, as the app wired them: the heavy lane, the long time limit, and the
    handler's frames reaching the chart, the text and the progress line (and, after the decode
    sweep, the cuts table)."""
    for name in ("context_prefill", "context_decode", "context_memory"):
        f = _wired(app_module, name)
        assert f.concurrency_id == "heavy" and f.time_limit == Settings().long_time_limit_s
    shown = list(_wired(app_module, "context_prefill").fn(64))
    values = [str(v) for v in shown[-1].values()]
    assert len(shown) == 3 and any(v in (run.FRESH_NOTE, run.SHARED_NOTE) for v in values)
    assert any("| 64 | " in v for v in values)  # the table of the one length asked for
    decoded = list(_wired(app_module, "context_decode").fn(16, 3))
    last = {getattr(k, "elem_id", None): v for k, v in decoded[-1].items()}
    assert "measured" in last["ctx-cuts"] and "**Your guess:**" not in last["ctx-decode-text"]
    assert "this run stopped at 16" in last["ctx-decode-text"]
