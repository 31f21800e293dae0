"""Numbers that hold up in a busy room, the rule's side: each verdict function the
lessons and the presenter use, on hand-made noise readings: a quiet reading draws its verdict,
a busy one the notice (where it carries one) and never the verdict; and a busy result is kept
but neither reused nor replayed. Pure and fast; `test_busy_room.py` runs the real handlers
beside spinning processes.
"""
from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import replace
from types import SimpleNamespace

from inference.experiments.noise import judge
from inference.experiments.shared_results import SharedResults
from lessons import (
    presenter_lines,
)
from lessons.common import latest
from lessons.common.measurement import Outcome
from visualizations import (
    batching_text,
    kv_text,
    roofline_charts,
    speculative_charts,
    timing_text,
)
from visualizations.noise_view import BUSY, busy_notice_html

QUIET, BUSY_READING = judge(others_cpu=0.02), judge(others_cpu=0.6)


# ---- each new verdict function, quiet and busy, on hand-made readings (pure, fast) ----

def _both(draw: Callable[[object], str], verdict: str) -> None:
    """`draw(noise)` says `verdict` on a quiet reading, and on a busy one the notice instead
    wherever `draw` carries it, never the verdict."""
    assert verdict in draw(QUIET), draw(QUIET)
    busy = draw(BUSY_READING)
    assert verdict not in busy, busy


def test_prefill_verdicts_quiet_and_busy():
    m = SimpleNamespace(prompt_tokens=100, prefill_seconds=0.2, ttft_seconds=0.25,
                        decode_step_seconds=0.05, decode_steps=4)
    for verdict in ("cheaper by", "**25×** less than a decode step", "Why the first token"):
        _both(lambda n: timing_text.prefill_report_md(replace_ns(m, noise=n)), verdict)
    busy = timing_text.prefill_report_md(replace_ns(m, noise=BUSY_READING))
    assert BUSY.capitalize() in busy and "25×" in busy and "noisy: run again" in busy
    from inference.experiments.prefill_sweep import PrefillPoint
    pts = [PrefillPoint(8, 0.01, 0.08, True), PrefillPoint(64, 0.02, 0.64, True)]
    _both(lambda n: timing_text.sweep_verdict_md(pts, n), "**32×** faster")
    assert "One token at a time ÷ one pass" in timing_text.sweep_verdict_md(pts, BUSY_READING)


def replace_ns(ns: SimpleNamespace, **kw) -> SimpleNamespace:
    return SimpleNamespace(**{**vars(ns), **kw})


def test_context_verdicts_quiet_and_busy():
    from inference.experiments.context_sweep import (
        SAMPLED_METHOD,
        DecodeLengthPoint,
        PeakMemory,
        PrefillLengthPoint,
        compare_lengths,
    )
    from inference.experiments.context_theory import fit_quadratic, length_shares

    lengths = (256, 1024, 4096)
    pts = tuple(PrefillLengthPoint(n, 0.05 + 2e-3 * n + 3e-7 * n * n, n) for n in lengths)
    curve = fit_quadratic(lengths, [p.seconds for p in pts])
    shares = length_shares(curve, lengths, 106_000_000, 30, 9, 64)
    _both(lambda n: kv_text.prefill_markdown(pts, curve, shares, n), "rose **")
    _both(lambda n: kv_text.prefill_markdown(pts, curve, shares, n), "the L² term is **")
    decode = (DecodeLengthPoint(1, 0, 0, 0.040, 0.039, 0.041),
              DecodeLengthPoint(1, 4096, 10**6, 0.060, 0.059, 0.061))
    _both(lambda n: kv_text.decode_markdown(decode, noise=n), "×** one with 0")
    cmp = compare_lengths(decode, 0, 4096)
    _both(lambda n: kv_text.guess_verdict_markdown(cmp, None, n), "**1.50×** as long")
    assert "no verdict from a busy machine" in kv_text.guess_verdict_markdown(
        cmp, None, BUSY_READING)

    class FastFloor:  # a floor the steps beat: the "why below 1" sentence
        weight_bytes, kv_bytes_per_token, bandwidth_gbs, dtype = 10**9, 10**4, 10.0, "float32"

        def seconds(self, n, b=1):
            return 0.1

        def crossover_tokens(self, b=1):
            return 10**5

        def kv_share(self, n, b=1):
            return 0.01
    _both(lambda n: kv_text.decode_markdown(decode, FastFloor(), 8192, n),
          "read faster than the bandwidth measurement")

    def peaks(method):
        return (PeakMemory("sdpa", 4096, 400_000_000, method, 604_000_000, 1.0),
                PeakMemory("eager", 4096, 1_900_000_000, method, 604_000_000, 2.0))
    hwm = kv_text.memory_markdown(peaks("VmHWM"), BUSY_READING)
    assert BUSY.capitalize() in hwm and "more** at its peak" in hwm  # memory stands when busy
    _both(lambda n: kv_text.memory_markdown(peaks(SAMPLED_METHOD), n), "more** at its peak")


def test_speculative_verdicts_quiet_and_busy():
    from inference.experiments.spec_expectation import VerifyCost
    from inference.experiments.speculative_race import SpecRaceSummary

    s = SpecRaceSummary(draft="prompt_lookup", k=4, prompt_tokens=60, new_tokens=33,
                        identical=True, passes=10, proposed=40, accepted=22, spec_seconds=1.0,
                        draft_seconds=0.01, plain_seconds=2.0,
                        plain_step_seconds=(0.0625,) * 32, bandwidth_gbs=20.0,
                        bytes_per_token=500_000_000, noise=0.05)
    _both(lambda n: speculative_charts.race_md(s, n), "was **faster**")
    _both(lambda n: speculative_charts.race_md(s, n), "below the one-token ceiling")
    busy = speculative_charts.race_md(s, BUSY_READING)
    assert BUSY.capitalize() in busy and "2.0×" in busy and "noisy: run again" in busy
    _both(lambda n: speculative_charts.sweep_title([s], n), "Best here")
    assert "machine busy" in speculative_charts.sweep_title([s], BUSY_READING)
    hover = speculative_charts.k_sweep_figure([s], "", BUSY_READING).data[1].customdata
    assert "faster" not in hover
    costs = [VerifyCost(16, 4, 0.10, 0.40, "memory", "compute")]
    _both(lambda n: speculative_charts.batch_md(costs, 3.0, n), "by the roofline")
    _both(lambda n: speculative_charts.batch_md(costs, 3.0, n), "memory, compute")


def test_kv_and_batching_verdicts_quiet_and_busy():
    from inference.experiments.batch_sweep import BatchPoint, SweepUpdate
    from inference.experiments.kv_race import LengthPoint

    pts = [LengthPoint(n, 0.05, 0.04 + 0.001 * n + 1e-6 * n * n, 538_060_032, 46_080)
           for n in (32, 512)]
    _both(lambda n: kv_text.race_lengths_markdown(pts, None, n), "grows to **")
    _both(lambda n: kv_text.race_lengths_markdown(pts, None, n), "undersells")
    assert "What grows with L" in kv_text.race_lengths_markdown(pts, None, BUSY_READING)
    points = (BatchPoint(1, 20, 0.2, 0.08, (0.08,), 10**6, 5 * 10**8),
              BatchPoint(16, 20, 1.5, 0.20, (0.20,), 16 * 10**6, 5 * 10**8))
    upd = SweepUpdate(points, (), 0, 4, 4, 10.0, "done", finished=True)
    _both(lambda n: batching_text.sweep_table(upd, n), "**Why.**")
    assert "2.5× the time for 16× the tokens" in batching_text.sweep_table(upd, BUSY_READING)
    # a view drawn later from the kept sweep (the schedulers' closing note) judges it the same
    info = SimpleNamespace(device="cpu", dtype="float32", threads=2)
    later = {n: batching_text.closing_note(info, replace(upd, noise=n), None)
             for n in (QUIET, BUSY_READING)}
    assert "No verdict on where batching stops paying" in later[BUSY_READING]
    assert "No verdict" not in later[QUIET] and BUSY.capitalize() not in later[QUIET]


def test_machine_and_presenter_verdicts_quiet_and_busy():
    from inference.experiments.roofline import ComputeRoof, WorkPoint

    decode = WorkPoint("decode, batch 1", flops=2e8, bytes_read=4e8, seconds=0.04)
    prefill = WorkPoint("prefill, 256 tokens", flops=5e10, bytes_read=4e8, seconds=0.5)
    roof = ComputeRoof(peak_gflops=200.0, bandwidth_gbs=20.0, points=(decode, prefill))
    _both(lambda n: roofline_charts.compute_roof_md(roof, "float32", n), "| memory |")
    _both(lambda n: roofline_charts.compute_roof_md(roof, "float32", n), "contrast, measured")
    assert "**10.0 FLOPs per byte**" in roofline_charts.compute_roof_md(roof, "float32",
                                                                       BUSY_READING)
    label = presenter_lines.ratio_label
    assert label(8.0, "faster in one pass", "one ÷ one", "8 tokens", QUIET).startswith("faster")
    busy = label(8.0, "faster in one pass", "one ÷ one", "8 tokens", BUSY_READING)
    assert "faster" not in busy and BUSY in busy
    assert presenter_lines.busy_label("x", QUIET) == "x"
    assert presenter_lines.busy_label("x", BUSY_READING) == f"x · {BUSY}"


def test_busy_results_are_neither_reused_nor_replayed():
    """A busy run's value is kept (the visitor's CSV export reads it) but not reused; the
    shared-run rule reads the run's readings (any busy one), never the notice's text."""
    shared = SharedResults()
    latest.keep(shared, "k", (1,), QUIET)
    assert latest.reuse(shared, "k") == ((1,), QUIET)
    latest.keep(shared, "k", (2,), BUSY_READING)
    assert latest.reuse(shared, "k") is None and shared.get("k") == (2,)
    assert latest.reuse(None, "k") is None
    assert Outcome(readings=[QUIET, BUSY_READING]).busy and not Outcome(readings=[QUIET]).busy
    assert not Outcome().busy and Outcome(cut=True).cut
    assert BUSY.capitalize() in busy_notice_html(BUSY_READING)  # what the visitor reads
    assert BUSY.capitalize() not in busy_notice_html(QUIET)
    assert html.escape(BUSY.capitalize()) == BUSY.capitalize()  # the notice's text as written
