"""Long contexts, pure parts: the a + b·L + c·L² fit recovers known coefficients,
the theory and the cost cuts count the right bytes, and the charts and text show the numbers
they are given, with empty states and verdicts withheld inside a run's noise."""
from __future__ import annotations

import pytest

from inference.experiments.context_sweep import (
    HWM_METHOD,
    DecodeLengthPoint,
    PeakMemory,
    PrefillLengthPoint,
    compare_lengths,
)
from inference.experiments.context_theory import (
    MEASURED,
    THEORETICAL,
    DecodeTheory,
    attention_flops_share,
    cost_cuts,
    fit_quadratic,
    length_shares,
    matmul_parameters,
    measured_bytes_per_token,
)
from inference.experiments.noise import judge
from visualizations import kv_charts, kv_text

A, B, C = 0.05, 2e-3, 3e-7  # seconds, s per token, s per token²
LENGTHS = (256, 512, 1024, 2048, 4096, 8192)
W, KV = 538_060_032, 46_080
THEORY = DecodeTheory(W, KV, 20.0, "float32")
QUIET = judge(others_cpu=0.02)  # a run the noise rule judged quiet: its verdicts are drawn


def quad(n: float) -> float:
    return A + B * n + C * n * n


def test_long_context_fit_recovers_known_coefficients():
    fit = fit_quadratic(LENGTHS, [quad(n) for n in LENGTHS])
    assert (fit.a, fit.b, fit.c) == pytest.approx((A, B, C), rel=1e-6)
    assert fit.rms_seconds == pytest.approx(0, abs=1e-9) and fit.points == 6
    assert fit.quadratic_share(8192) == pytest.approx(C * 8192**2 / quad(8192))
    assert fit.quadratic_is_measurable(8192)
    # alternating noise of ±1 ms: still close, and the L² term stands clear of it
    noisy = fit_quadratic(LENGTHS, [quad(n) + (1e-3 if i % 2 else -1e-3)
                                    for i, n in enumerate(LENGTHS)])
    assert noisy.c == pytest.approx(C, rel=0.02) and noisy.quadratic_is_measurable(8192)


def test_long_context_fit_drops_terms_it_cannot_pin_down():
    straight = fit_quadratic([100, 200, 400], [1.0, 2.02, 3.98])  # bends down a little
    assert straight.c == 0 and straight.b == pytest.approx(0.01, rel=0.02)
    assert not straight.quadratic_is_measurable(400)
    # a loaded machine: the unconstrained fit's b came out negative and the "share" over 1
    busy = fit_quadratic([16, 32, 64, 128], [5.0, 4.26, 2.03, 3.08])
    assert busy.b >= 0 and busy.c >= 0 and 0 <= busy.quadratic_share(128) <= 1
    two = fit_quadratic([10, 20], [1.0, 2.0])
    assert (two.a, two.b, two.c) == pytest.approx((0.0, 0.1, 0.0), abs=1e-9)
    assert fit_quadratic([10], [3.0]).at(99) == pytest.approx(3.0)
    with pytest.raises(ValueError):
        fit_quadratic([], [])


def test_long_context_attention_share_is_the_flop_count():
    # SmolLM2: 30 layers, 9 heads, head dim 64; matmul params = all but the embedding table
    mm = matmul_parameters(134_515_008, 49_152, 576)
    assert mm == 134_515_008 - 49_152 * 576
    share = attention_flops_share(8192, mm, 30, 9, 64)
    attention = 2 * 30 * 9 * 64 * 8192**2
    assert share == pytest.approx(attention / (attention + 2 * mm * 8192))
    assert 0 < attention_flops_share(256, mm, 30, 9, 64) < share < 1
    fit = fit_quadratic(LENGTHS, [quad(n) for n in LENGTHS])
    shares = length_shares(fit, LENGTHS, mm, 30, 9, 64)
    assert [s.tokens for s in shares] == list(LENGTHS)
    assert shares[-1].attention_flops_share == pytest.approx(share)
    assert shares[0].quadratic_share < shares[-1].quadratic_share


def test_long_context_theory_and_crossover():
    assert THEORY.bytes_read(1000, 8) == W + 8 * 1000 * KV
    assert THEORY.seconds(0) == pytest.approx(W / 20e9)
    assert THEORY.crossover_tokens(1) == 11_677 and THEORY.crossover_tokens(8) == 1_460
    assert THEORY.kv_share(THEORY.crossover_tokens(8), 8) == pytest.approx(0.5, abs=1e-3)


def test_long_context_cost_cuts_count_bytes_and_say_how():
    cuts = cost_cuts(30, 9, 3, 64, 4, tokens=8192, sliding_window=1024, requests=8)
    gqa, int8, window, prefix = cuts
    ours = 8192 * KV
    assert (gqa.bytes_before, gqa.bytes_after, gqa.label) == (3 * ours, ours, THEORETICAL)
    assert int8.bytes_after * 4 == ours and int8.label == THEORETICAL
    assert window.bytes_after == 1024 * KV and window.factor == pytest.approx(8)
    assert prefix.bytes_before == 8 * ours and prefix.factor == pytest.approx(8)
    assert measured_bytes_per_token(DECODE) == KV and measured_bytes_per_token(()) is None
    measured = cost_cuts(30, 9, 3, 64, 4, 8192, 1024,
                         measured_bytes_per_token=measured_bytes_per_token(DECODE))[0]
    assert measured.label == MEASURED and measured.bytes_after == ours
    md = kv_text.cuts_markdown(cuts)
    assert "8,192-token context" in md and "| grouped-query attention (GQA) | theoretical |" in md
    assert "| 1.1 GB | 377.5 MB | 3.0× |" in md and "| 47.2 MB | 8.0× |" in md
    assert kv_text.cuts_markdown(()) == ""


PREFILL = tuple(PrefillLengthPoint(n, quad(n), n) for n in LENGTHS)
FIT = fit_quadratic(LENGTHS, [quad(n) for n in LENGTHS])
SHARES = length_shares(FIT, LENGTHS, 106_000_000, 30, 9, 64)


def test_long_context_prefill_chart_and_text():
    fig = kv_charts.prefill_lengths_figure(PREFILL, FIT, SHARES, "cap")
    measured, fitted, linear = fig.data
    assert list(measured.x) == list(LENGTHS) and "measured" in measured.name
    assert list(measured.y) == pytest.approx([quad(n) / n * 1000 for n in LENGTHS])
    assert measured.text[-1] == f"L²: {C * 8192**2 / quad(8192):.0%}"
    assert fitted.y[-1] == pytest.approx(quad(8192) / 8192 * 1000)
    assert linear.y[-1] == pytest.approx((A + B * 8192) / 8192 * 1000)
    empty = kv_charts.prefill_lengths_figure(())
    assert kv_charts.PREFILL_BUTTON in empty.layout.annotations[0].text
    md = kv_text.prefill_markdown(PREFILL, FIT, SHARES, QUIET)
    rise = quad(8192) / 8192 / (quad(256) / 256)
    assert f"rose **{rise:.1f}×** from 256 to 8,192 tokens" in md
    assert f"the L² term is **{C * 8192**2 / quad(8192):.0%}**" in md
    assert "| 8,192 | " in md and "L²/2 pairs per head per layer" in md
    flat = tuple(PrefillLengthPoint(n, 0.001 * n, n) for n in LENGTHS)  # no L² at all
    flat_fit = fit_quadratic(LENGTHS, [p.seconds for p in flat])
    md = kv_text.prefill_markdown(flat, flat_fit,
                                       length_shares(flat_fit, LENGTHS, 106_000_000, 30, 9, 64),
                                       QUIET)
    assert "stayed within 10%" in md and "cannot separate an L² term" in md
    falling = tuple(PrefillLengthPoint(n, 2.0 + 0.001 * n, n) for n in LENGTHS)
    assert "fell to **" in kv_text.prefill_markdown(falling, noise=QUIET)
    assert "Press" in kv_text.prefill_markdown(())


def _point(batch: int, n: int, ms: float, spread: float = 0.5) -> DecodeLengthPoint:
    return DecodeLengthPoint(batch, n, batch * n * KV, ms / 1000, (ms - spread) / 1000,
                             (ms + spread) / 1000)


DECODE = tuple([_point(1, n, 40 + n * 0.003) for n in (0, 100, 4096, 8000)]
               + [_point(8, n, 60 + n * 0.02) for n in (0, 100, 4096, 8000)])


def test_long_context_decode_chart_and_text():
    fig = kv_charts.decode_lengths_figure(DECODE, THEORY, 8192, "cap")
    b1, floor1, b8, floor8 = fig.data
    assert list(b1.x) == [0, 100, 4096, 8000]
    assert list(b8.y) == pytest.approx([60 + n * 0.02 for n in (0, 100, 4096, 8000)])
    assert floor8.y[-1] == pytest.approx(THEORY.seconds(floor8.x[-1], 8) * 1000)
    assert "theoretical" in floor1.name and "20.0 GB/s" in floor1.name
    marks = [a.text for a in fig.layout.annotations]
    assert "L* = 1,460 (batch 8)" in marks and "L* = 11,677 (batch 1)" in marks
    assert "context window 8,192" in marks
    assert max(floor1.x) >= 11_677  # batch 1's L* lies past the window: the line reaches it
    empty = kv_charts.decode_lengths_figure(())
    assert kv_charts.DECODE_BUTTON in empty.layout.annotations[0].text
    md = kv_text.decode_markdown(DECODE, THEORY, 8192, QUIET)
    assert f"took **{(40 + 24) / 40:.1f}×** one with 0" in md
    assert "**L* = 11,677 tokens** (beyond the 8,192-token window)" in md
    assert "**L* = 1,460 tokens** (within the window)" in md and "20.0 GB/s" in md
    floor_ratios = [p.seconds / THEORY.seconds(p.cache_tokens, p.batch) for p in DECODE]
    assert f"took {min(floor_ratios):.1f}× to {max(floor_ratios):.1f}× their floor" in md
    noisy = (_point(1, 0, 40, 5), _point(1, 8000, 42, 5))
    assert "could not be told apart" in kv_text.decode_markdown(noisy, noise=QUIET)
    assert "Press" in kv_text.decode_markdown(())


def test_long_context_guess_verdict():
    cmp = compare_lengths(DECODE, 100, 8000, batch=1)
    assert (cmp.short.cache_tokens, cmp.long.cache_tokens) == (100, 8000) and cmp.beyond_noise
    assert cmp.ratio == pytest.approx(64 / 40.3)
    md = kv_text.guess_verdict_markdown(cmp, THEORY, QUIET)
    assert f"**{64 / 40.3:.2f}×** as long" in md
    floor = THEORY.seconds(8000) / THEORY.seconds(100)
    assert f"floor predicts **{floor:.2f}×**" in md
    same = compare_lengths((_point(1, 100, 40, 5), _point(1, 8000, 41, 5)), 100, 8000)
    assert not same.beyond_noise
    assert "cannot tell them apart" in kv_text.guess_verdict_markdown(same, noise=QUIET)
    assert compare_lengths((_point(1, 100, 40),), 100, 8000) is None
    assert "Press" in kv_text.guess_verdict_markdown(None)


def _peak(name: str, mb: float) -> PeakMemory:
    return PeakMemory(name, 4096, int(mb * 1e6), HWM_METHOD, 9 * 4096**2 * 4, 10.0)


def test_long_context_memory_bars_and_text():
    peaks = (_peak("sdpa", 400), _peak("eager", 1900))
    fig = kv_charts.attention_memory_figure(peaks, "cap")
    bars, scores = fig.data
    assert list(bars.y) == pytest.approx([400, 1900]) and "measured" in bars.name
    assert list(scores.y) == pytest.approx([9 * 4096**2 * 4 / 1e6] * 2)
    assert "theoretical" in scores.name
    empty = kv_charts.attention_memory_figure(())
    assert kv_charts.MEMORY_BUTTON in empty.layout.annotations[0].text
    md = kv_text.memory_markdown(peaks)
    assert "**1.5 GB more** at its peak (4.8×)" in md and "FlashAttention" in md
    assert "| eager | 4,096 | 1.9 GB | 604.0 MB |" in md and "VmHWM" in md
    close = kv_text.memory_markdown((_peak("sdpa", 400), _peak("eager", 420)))
    assert "within 10% of each other" in close
    assert "FlashAttention" in kv_text.memory_markdown(())
