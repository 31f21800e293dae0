"""The KV race at several lengths: why a short race undersells the cache. Pure
arithmetic and figures on hand-made points, then the measurement on the real model."""
from __future__ import annotations

import pytest

from inference.experiments.kv_race import (
    LengthPoint,
    fit,
    generation_seconds,
    step_costs,
)
from inference.experiments.noise import judge
from inference.experiments.shared_results import SharedResults
from lessons import kv_cache_handlers
from visualizations import kv_charts, kv_text
from visualizations.noise_view import BUSY

W, KV = 538_060_032, 46_080  # this model's weight bytes and cache bytes per token, float32


def quad(n: int) -> float:
    return 0.04 + 0.001 * n + 1e-6 * n * n  # recompute seconds: a + b·L + c·L²


POINTS = [LengthPoint(n, 0.05, quad(n), W, KV) for n in (32, 128, 512)]
QUIET = judge(others_cpu=0.02)  # a run the noise rule judged quiet: its verdict is drawn


def test_fit_keeps_the_quadratic_term_and_the_total():
    curve = fit(POINTS)
    assert (curve.a, curve.b, curve.c) == pytest.approx((0.04, 0.001, 1e-6))
    cached, plain = generation_seconds(POINTS, prompt=32, new_tokens=1000)
    longest = POINTS[-1]  # the cached step grows with the bytes it reads
    assert cached == pytest.approx(sum(0.05 * (W + (32 + i) * KV) / (W + 512 * KV)
                                       for i in range(1000)))
    assert plain == pytest.approx(sum(quad(32 + i) for i in range(1000)))
    assert longest.cached_theory_seconds(4096) > longest.cached_theory_seconds(512)
    # doubling the tokens: the cache's time about doubles, recomputing's grows over fourfold
    cached2, plain2 = generation_seconds(POINTS, 32, 2000)
    assert 2 < cached2 / cached < 2.2 and plain2 / plain > 4


def test_figure_and_text():
    fig = kv_charts.race_lengths_figure(POINTS, fit(POINTS), "caption")
    names = [t.name for t in fig.data]
    assert "measured" in names[0] and "theoretical" in names[2] and "theoretical" in names[3]
    assert list(fig.data[1].x) == [32, 128, 512]
    cached, plain = fig.data[2], fig.data[3]
    assert max(plain.x) == kv_charts.THEORY_UP_TO and list(cached.x) == [512, 1024, 2048, 4096]
    # the cached line is not flat: (weights + L × kv) ÷ the bandwidth of the 512-token step
    assert cached.y[-1] == pytest.approx(50 * (W + 4096 * KV) / (W + 512 * KV))
    assert cached.y[-1] > cached.y[0] * 1.2
    assert plain.y[-1] == pytest.approx(quad(4096) * 1000)  # the L² term kept
    assert kv_charts.race_lengths_figure([]).layout.annotations
    md = kv_text.race_lengths_markdown(POINTS, (32, 1000, 50.0, 700.0), QUIET)
    assert "| 32 | 50 | 73 | 1.5× |" in md and "**1.5×** one cached step" in md
    assert "grows to **16.3×**" in md
    assert "**50 s** with the cache and **700 s** without it (14×)" in md
    assert "O(1)" not in md and "What grows with L" in md
    # 512 × 46,080 B = 23.6 MB, 4% of the bytes read; weights = cache at 538,060,032 / 46,080
    assert "23.6 MB at 512 tokens, 4% of the bytes read" in md
    assert "about 11,677 tokens" in md


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
    assert "Theoretical, from these points" in frames[-1].text
    again = list(kv_cache_handlers.race_lengths_frames(lm, shared))
    if BUSY.capitalize() in frames[-1].text:  # judged busy (noise.py): measured again
        assert len(again) > 1 and again[-1].progress.startswith("✅ Measured on this machine")
        return
    assert len(again) == 1 and "shared with every visitor" in again[0].progress
    assert again[0].text == frames[-1].text
