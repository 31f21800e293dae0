"""The KV race at several lengths (issue 14): why a short race undersells the cache. Pure
arithmetic and figures on hand-made points, then the measurement on the real model."""
from __future__ import annotations

import pytest

from inference.experiments.race_lengths import (
    LengthPoint,
    fit,
    generation_seconds,
    step_costs,
)
from inference.experiments.shared_results import SharedResults
from lessons import kv_cache_handlers
from visualizations import kv_charts, kv_text

POINTS = [LengthPoint(32, 0.05, 0.08), LengthPoint(128, 0.05, 0.20),
          LengthPoint(512, 0.05, 0.68)]


def test_fit_and_the_quadratic_total():
    a, b = fit(POINTS)  # exactly 0.04 + 0.00125 × L
    assert a == pytest.approx(0.04) and b == pytest.approx(0.00125)
    cached, plain = generation_seconds(POINTS, prompt=32, new_tokens=1000)
    assert cached == pytest.approx(50.0)
    assert plain == pytest.approx(sum(0.04 + 0.00125 * (32 + i) for i in range(1000)))
    # doubling the tokens: the cache's time doubles, recomputing's grows about fourfold
    plain2 = generation_seconds(POINTS, 32, 2000)[1]
    assert 3 < plain2 / plain < 4


def test_figure_and_text():
    fig = kv_charts.race_lengths_figure(POINTS, fit(POINTS), "caption")
    names = [t.name for t in fig.data]
    assert "measured" in names[0] and "theoretical" in names[2] and "theoretical" in names[3]
    assert list(fig.data[1].x) == [32, 128, 512]
    assert max(fig.data[3].x) == kv_charts.THEORY_UP_TO
    beyond = fig.data[3]
    assert beyond.y[-1] == pytest.approx((0.04 + 0.00125 * 4096) * 1000)
    assert kv_charts.race_lengths_figure([]).layout.annotations
    md = kv_text.race_lengths_markdown(POINTS, (32, 1000, 50.0, 700.0))
    assert "| 32 | 50 | 80 | 1.6× |" in md and "**1.6×** one cached step" in md
    assert "**13.6×**" in md and "**50 s** with the cache and **700 s** without it (14×)" in md


def test_measured_on_the_real_model(lm, tok):
    ids = tok("The river ran past the old mill and on towards the sea.",
              add_special_tokens=False)["input_ids"]
    points = list(step_costs(lm, ids, lengths=(8, 256), repeats=2))
    assert [p.tokens for p in points] == [8, 256]
    assert all(p.cached_seconds > 0 and p.recompute_seconds > 0 for p in points)
    assert points[1].ratio > points[0].ratio  # the gap grows with the text


def test_lesson_frames_share_the_result(lm, monkeypatch):
    monkeypatch.setattr(kv_cache_handlers, "LENGTHS", (8, 64))
    real = kv_cache_handlers.step_costs
    monkeypatch.setattr(kv_cache_handlers, "step_costs",
                        lambda lm_, ids: real(lm_, ids, lengths=(8, 64), repeats=1))
    shared = SharedResults()
    frames = list(kv_cache_handlers.race_lengths_frames(lm, shared))
    assert frames[0].progress.startswith("⏳") and frames[-1].progress.startswith("✅")
    assert "Theoretical, from these points" in frames[-1].table
    again = list(kv_cache_handlers.race_lengths_frames(lm, shared))
    assert len(again) == 1 and "shared with every visitor" in again[0].progress
    assert again[0].table == frames[-1].table
