"""The prefill sweep, lesson 6's int4-against-float32 race and the stats of Decode and Try it,
measured so that a busy machine does not reach the figure: hand-made timings with a few steps
slowed 10× give the estimate of the same timings without; a planted impossible prefill
speed-up is measured again, then withheld with its reason; on the real model both figures come
with their estimate and range; a noisy run of Decode or Try it carries the busy notice."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from inference.config import Settings
from inference.experiments import prefill_sweep as sweep_module
from inference.experiments.noise import ROUNDS
from inference.experiments.prefill_sweep import prefill_sweep, robust_point
from inference.experiments.quality import SpeedRace, checked_speed_race, judged
from inference.experiments.shared_results import SharedResults
from inference.quantize import build_mode
from inference.sampling import SamplingSettings
from inference.tokens import prompt_ids
from lessons import chat_handlers, decode_handlers, prefill_handlers
from visualizations.noise_view import BUSY

SETTINGS = Settings()
NOTICE = BUSY.capitalize()


def slowed(times: list[float], at: tuple[int, ...]) -> list[float]:
    """The same timings with the steps at `at` slowed 10× (another program took the core)."""
    return [t * 10 if i in at else t for i, t in enumerate(times)]


def test_prefill_point_is_unmoved_by_a_few_slowed_steps():
    fed = [0.010 + 0.0001 * i for i in range(40)]  # one token at a time, slowly growing
    rounds = [i * ROUNDS // 40 for i in range(40)]
    passes = [0.050, 0.051, 0.050, 0.052, 0.050]
    calm = robust_point(40, passes, fed, rounds, True)
    busy = robust_point(40, slowed(passes, (1,)), slowed(fed, (5, 17, 30)), rounds, True)
    assert busy.speedup == pytest.approx(calm.speedup, rel=0.02)
    assert calm.robust.low <= calm.speedup <= calm.robust.high and calm.robust.rounds == ROUNDS
    assert calm.impossible is None
    extrapolated = robust_point(1024, passes, fed[:16], rounds[:16], False)
    per_token = extrapolated.sequential_seconds / 1024  # 16 tokens fed, scaled to 1,024
    assert min(fed[:16]) <= per_token <= max(fed[:16]) and not extrapolated.sequential_measured


def test_int4_race_is_unmoved_by_a_few_slowed_steps():
    base = [0.040 + 0.0002 * i for i in range(24)]
    mode = [0.020 + 0.0001 * i for i in range(24)]
    calm = judged("int4-g32", base, mode, (0.0, 0.0))
    busy = judged("int4-g32", slowed(base, (3, 15)), slowed(mode, (8, 20)), (0.0, 0.0))
    assert busy.speedup == pytest.approx(calm.speedup, rel=0.02)
    assert calm.speedup == pytest.approx(2.0, rel=0.02) and calm.impossible is None
    assert "range" in calm.robust.label() and calm.robust.rounds == ROUNDS


def test_int4_race_past_the_bandwidth_ceiling_is_impossible():
    race = judged("int4-g32", [0.04] * 10, [0.01] * 10, (30.0, 50.0))  # 100 tokens/s vs 50
    assert race.impossible and "ceiling of 50.0 tokens/s" in race.impossible


def test_planted_impossible_prefill_is_measured_again_then_withheld(lm, monkeypatch):
    """One pass timed at ~0 s: its speed-up is past N×, so the length is measured again (as
    many passes again), then the chart leaves it out and the verdict says why."""
    passes = []

    def instant(model, ids, device, repeats):
        passes.append(len(ids))
        return 1e-9
    monkeypatch.setattr(sweep_module, "time_parallel", instant)
    frames = list(prefill_handlers.run_prefill_sweep(lm, SETTINGS, SharedResults(), [8], 8))
    assert passes == [8] * (2 * ROUNDS)  # the first attempt, then once more
    last = frames[-1].progress
    assert "not a possible result" in last and "can be at most 8× faster" in last
    assert "measured again: still impossible" in last and "faster by" not in last
    assert all(len(t.x or ()) == 0 for t in frames[-1].chart.data)  # nothing drawn


def test_real_model_prefill_and_int4_come_with_estimate_and_range(lm):
    *_, done = prefill_sweep(lm, [16, 64], max_sequential=16)
    measured, extrapolated = done.points
    assert measured.sequential_measured and not extrapolated.sequential_measured
    for p in done.points:
        r = p.robust
        assert r.rounds >= 2 and r.low <= r.estimate <= r.high and p.speedup == r.estimate
        assert p.speedup == pytest.approx(p.sequential_seconds / p.parallel_seconds)
        assert p.impossible is None and p.threads >= 1
    shared = SharedResults()
    base, int4 = build_mode(lm, "fp32", shared), build_mode(lm, "int4-g32", shared)
    ids = prompt_ids(lm.tokenizer, "Name a colour.")
    items = list(checked_speed_race("int4-g32", base.model, int4.model, ids, 8, lm.device))
    race = items[-1]
    assert isinstance(race, SpeedRace) and items[:8] == list(range(1, 9))
    assert len(race.base_seconds) == len(race.mode_seconds) == 8
    assert race.robust.low <= race.speedup <= race.robust.high and race.speedup > 0
    assert race.robust.rounds == ROUNDS and race.threads >= 1
    fp32_speed, int4_speed = race.tokens_per_s
    assert int4_speed / fp32_speed == pytest.approx(race.speedup)  # one figure, two views


def test_decode_stats_carry_the_busy_notice_on_noisy_steps(lm):
    gen = None
    for _ in range(6):
        gen = decode_handlers.step(lm, SETTINGS, gen, "Name a colour.", 16, SamplingSettings())
    steady = [replace(e, seconds=0.02) for e in gen.events]
    gen.events[:] = steady
    quiet = decode_handlers.views(lm, gen, SamplingSettings())
    assert quiet.noise is not None and not quiet.noise.busy and NOTICE not in quiet.stats_md
    gen.events[:] = [replace(e, seconds=0.02 * (1 + 3 * (i % 2))) for i, e in enumerate(steady)]
    busy = decode_handlers.views(lm, gen, SamplingSettings())
    assert busy.noise.busy and NOTICE in busy.stats_md
    assert "Time per output token" in busy.stats_md  # the numbers stay, under the notice


def test_try_it_stats_carry_the_busy_notice_once_the_answer_ends(lm):
    req = SimpleNamespace(mean_batch_rows=1.0, queued_seconds=0.0, max_new_tokens=8)
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]
    first = SimpleNamespace(forward_tokens=5, prefix_cached_tokens=0, prefill_passes=1)

    def frame(finished, marks):
        ev = SimpleNamespace(text="a b c", finished=finished)
        timed = (ev, 0.1, marks[-1], len(marks) - 1)
        return chat_handlers._chat_frame(lm, req, [1] * 5, history, "", timed, first,
                                         chat_handlers._judged(timed, marks, SETTINGS))
    def marks(gaps):  # decode seconds so far at each token
        return [sum(gaps[:i]) for i in range(len(gaps) + 1)]
    steady = marks([0.02] * 9)
    jumpy = marks([0.02, 0.08] * 4 + [0.02])  # every other token waited 4× as long
    assert NOTICE not in frame("end of turn", steady).stats
    assert NOTICE not in frame(None, jumpy).stats  # judged when the answer has ended
    assert NOTICE in frame("end of turn", jumpy).stats


def test_int4_cards_show_the_race_range_withhold_an_impossible_one_and_the_quiet_reference():
    from inference.experiments.noise import judge
    from inference.experiments.quiet_reference import QuietFigure
    from visualizations.quant_charts import mode_cards_html

    def report(key, tps, size):
        return SimpleNamespace(key=key, decode_tokens_per_s=tps, weight_bytes=size,
                               ratio_to_fp32=size / 400)
    reports = [report("fp32", 10.0, 400), report("int4-g32", 20.0, 80)]
    race = judged("int4-g32", [0.1] * 12, [0.05] * 12, (0.0, 0.0))
    quiet = mode_cards_html(reports, judge(), race)
    assert ">2.0×<" in quiet and "raced in pairs, range 2.0–2.0× over 5 rounds" in quiet
    bad = judged("int4-g32", [0.1] * 12, [0.05] * 12, (5.0, 5.0))  # past the ceiling
    withheld = mode_cards_html(reports, judge(), bad)
    assert "impossible: not shown" in withheld and ">2.0×<" not in withheld
    assert "ceiling of 5.0 tokens/s" in withheld and "measured again" in withheld
    ref = QuietFigure("k", 2.5, "2.5×, range 2.4–2.6 over 5 rounds", "2026-01-02T09:12:00", "m")
    busy = mode_cards_html(reports, judge(spread=0.9), race, ref)
    assert ">2.5×<" in busy and "quiet" in busy and "noisy, busy machine" in busy
    assert ">2.5×<" not in mode_cards_html(reports, judge(), race, ref)  # quiet: no reference


def test_busy_sweep_shows_the_quiet_reference_big_and_its_own_figure_beside(tmp_path):
    from inference.experiments import quiet_reference
    from inference.experiments.noise import judge
    from visualizations.timing_text import sweep_verdict_md

    point = robust_point(16, [0.02] * 5, [0.01] * 16, [i * 5 // 16 for i in range(16)], True)
    path = str(tmp_path / "ref.json")
    busy, quiet = judge(spread=0.9), judge()
    assert quiet_reference.keep_if_quiet("k", point.speedup, point.robust.label(), busy,
                                         path) is None  # a busy run writes nothing
    ref = quiet_reference.keep_if_quiet("k", 6.5, "6.5×, range 6.4–6.6 over 5 rounds", quiet,
                                        path)
    md = sweep_verdict_md([point], busy, ref)
    assert ">6.5×<" in md and "measured on this machine at" in md
    assert "This run, busy: 8.0×" in md and "faster by" not in md
    assert "measured on this machine at" not in sweep_verdict_md([point], quiet, ref)
    assert "range 8.0–8.0 over 5 rounds" in sweep_verdict_md([point], quiet)


def test_int4_race_past_a_ceiling_measured_while_busy_measures_both_again(lm, monkeypatch):
    """A bandwidth read at a busy moment (planted: 0.01 GB/s) makes the first race impossible;
    the race runs again with the bandwidth measured again, and the higher figure counts."""
    from inference.experiments import quality

    again = []
    monkeypatch.setattr(quality, "measure_read_bandwidth",
                        lambda device: again.append(device) or 1000.0)
    shared = SharedResults()
    base, int4 = build_mode(lm, "fp32", shared), build_mode(lm, "int4-g32", shared)
    ids = prompt_ids(lm.tokenizer, "Name a colour.")
    races = [r for r in checked_speed_race("int4-g32", base.model, int4.model, ids, 4,
                                           lm.device, (base.bytes_per_token,
                                                       int4.bytes_per_token), 0.01)
             if isinstance(r, SpeedRace)]
    first, second = races
    assert first.impossible and "ceiling" in first.impossible and first.attempt == 0
    assert len(again) == 1 and second.attempt == 1 and second.impossible is None
    assert second.ceilings[0] == pytest.approx(1000e9 / base.bytes_per_token)
