"""The headline figures on a busy machine, on hand-made records: the KV race's speed-up and the
batch sweep's gain come from the robust estimators (a few steps slowed 10× do not move them),
an impossible figure is measured once more, and if it still is, the views show the reason in
its place, never the figure."""
import re
from types import SimpleNamespace

import pytest

from inference.experiments import kv_race
from inference.experiments.batch_sweep import BatchPoint, impossible_point
from inference.experiments.kv_race import CACHED, RECOMPUTE, RaceStep, summarize
from inference.experiments.noise import judge
from visualizations import batching_charts, batching_text, kv_text

QUIET = judge(spread=0.03, others_cpu=0.02)


def race_steps(n=24, prompt=20, slow_cached=(), slow_plain=(), cached_s=0.05, attempt=0):
    """A race: the first step one pass over the prompt in both lanes (0.1 s), then cached
    steps of `cached_s` and recomputed steps growing with the sequence; some steps slowed 10×."""
    steps = []
    for i in range(n):
        c = 0.1 if i == 0 else cached_s
        p = 0.1 if i == 0 else 0.02 + 0.004 * (prompt + i)
        c *= 10 if i in slow_cached else 1
        p *= 10 if i in slow_plain else 1
        steps += [RaceStep(i, CACHED, 5, prompt if i == 0 else 1, prompt + i, c, attempt=attempt),
                  RaceStep(i, RECOMPUTE, 5, prompt + i, prompt + i, p, 0.0, attempt=attempt)]
    return steps


def test_race_speedup_ignores_a_few_slowed_steps():
    quiet = summarize(race_steps(), 20)
    busy = summarize(race_steps(slow_cached={4, 15}, slow_plain={9}), 20)
    assert busy.speedup == pytest.approx(quiet.speedup, rel=0.02)
    assert busy.totals_ratio < 0.8 * quiet.totals_ratio  # the plain ratio of totals is moved
    assert quiet.robust.rounds == 5 and quiet.robust.low <= quiet.speedup <= quiet.robust.high
    assert quiet.impossible is None
    text = kv_text.race_summary_markdown(quiet, QUIET)
    assert quiet.robust.label() in text and "faster" in text


def test_an_impossible_race_shows_the_reason_not_the_figure():
    steps = race_steps(cached_s=0.5)  # every cached step slower than recomputing: impossible
    first = summarize(steps, 20)
    assert "cannot be slower" in first.impossible and first.attempt == 0
    text = kv_text.race_summary_markdown(first, QUIET)
    assert "not a possible result" in text and "measuring once more" in text
    assert "faster" not in text and f"{first.speedup:.1f}×" not in text
    again = summarize(steps + race_steps(cached_s=0.5, attempt=1), 20)  # the newest attempt
    assert again.attempt == 1 and again.new_tokens == 24 and again.impossible
    assert "still impossible" in kv_text.race_summary_markdown(again, QUIET)
    assert kv_text.race_summary_markdown(first) .count("—") == 0  # running: no judgement yet


def test_checked_race_runs_again_only_after_an_impossible_figure(monkeypatch):
    runs, cached_s = [], [0.5, 0.05, 0.05]  # impossible, then possible, possible

    def fake_race(lm, ids, n):
        runs.append(n)
        yield from race_steps(n, cached_s=cached_s.pop(0))

    monkeypatch.setattr(kv_race, "race", fake_race)
    steps = list(kv_race.checked_race(None, [1] * 20, 8))
    assert runs == [8, 8] and [s.attempt for s in steps] == [0] * 16 + [1] * 16
    assert summarize(steps, 20).impossible is None and summarize(steps, 20).attempt == 1
    runs.clear()
    assert {s.attempt for s in kv_race.checked_race(None, [1] * 20, 8)} == {0} and runs == [8]


def point(batch, step, times=None, impossible=None):
    times = times or (step,) * 6
    return BatchPoint(batch, 10, 0.1, step, times, 0, 500_000_000, impossible)


def test_batch_points_past_physics_are_impossible():
    one = point(1, 0.060)
    assert impossible_point(one, point(16, 0.240)) is None  # 4× gain: possible
    assert "at most 16×" in impossible_point(one, point(16, 0.012))  # 80×, "0.2× as long"
    assert "at most 2×" in impossible_point(one, point(2, 0.020))  # shorter step: same bound


def test_an_impossible_sweep_withholds_its_gain_and_says_why():
    reason = impossible_point(point(1, 0.060), point(16, 0.012))
    points = (point(1, 0.060), point(16, 0.012, impossible=reason))
    sweep = SimpleNamespace(points=points, finished=True)
    cards = batching_text.sweep_cards(sweep, QUIET)
    values = re.findall(r"<span class='lab-big-value'>([^<]*)</span>", cards)
    assert values == ["16.7", "—", "—"] and reason in cards and "1333" not in cards
    note = batching_text.closing_note(SimpleNamespace(device="cpu", dtype="float32", threads=2),
                                      sweep, None, QUIET)
    assert reason in note and "Throughput gain" not in note
    assert "impossible" in batching_charts.throughput_title(points, QUIET)


def test_batch_gain_from_low_quantiles_with_its_range():
    one = point(1, 0.060, (0.060, 0.061, 0.600, 0.060, 0.062, 0.061))  # one step slowed 10×
    big = point(16, 0.240, (0.24, 0.25, 0.24, 0.24, 2.4, 0.25))
    gain = big.gain_over(one)
    assert gain.estimate == pytest.approx(16 * 0.06 / 0.24, rel=0.03) and gain.rounds == 6
    assert gain.low < 1 and gain.high > 30  # the slowed rounds show in the range only


def test_the_closing_note_says_which_sizes_ran_at_one_thread():
    from dataclasses import replace

    points = (replace(point(1, 0.06), threads=1), replace(point(16, 0.24), threads=2))
    info = SimpleNamespace(device="cpu", dtype="float32", threads=2)
    note = batching_text.closing_note(info, SimpleNamespace(points=points), None, QUIET)
    assert "Batch 1 timed at 1 CPU thread" in note and "faster than 2 threads" in note
    quiet = tuple(replace(p, threads=2) for p in points)
    assert "1 CPU thread" not in batching_text.closing_note(
        info, SimpleNamespace(points=quiet), None, QUIET)


def test_the_first_screen_shows_the_reason_for_an_impossible_race():
    from visualizations.first_screen import race_ratio_html

    bad = summarize(race_steps(cached_s=0.5), 20)
    html = race_ratio_html(bad, QUIET)
    assert "Not a possible result" in html and "cannot be slower" in html
    assert f"{bad.speedup:.2f}×" not in html and "saved" not in html
    assert "saved" in race_ratio_html(summarize(race_steps(), 20), QUIET)


def fake_sweep(monkeypatch, step_times):
    """`run_sweep` over batches 1 and 2, 2 timed steps each, with no model: every pass is a
    stub and the stopwatch reads `step_times` in order (a prefill or a warm-up is not timed)."""
    from contextlib import contextmanager

    import torch

    from inference.experiments import batch_sweep

    planned = iter(step_times)

    @contextmanager
    def stopwatch(device):
        t = [0.0]
        yield t
        t[0] = next(planned)

    plan = SimpleNamespace(fits=True, batch=0)
    for name, stub in {
        "stopwatch": stopwatch,
        "plan_batch": lambda *a: plan, "largest_fitting_batch": lambda *a: 2,
        "cache_tensor_bytes": lambda cache: 0, "fastest_threads": lambda run, device, **k: 1,
        "prefill": lambda model, ids: SimpleNamespace(seconds=0.1, logits=torch.zeros(len(ids), 5),
                                                      cache=None),
        "decode_step": lambda model, token, cache: torch.zeros(len(token), 5),
    }.items():
        monkeypatch.setattr(batch_sweep, name, stub)
    lm = SimpleNamespace(device="cpu", model=None, info=SimpleNamespace(weight_bytes=5 * 10**8))
    return list(batch_sweep.run_sweep(lm, [1, 2, 3], max_batch=2, decode_steps=2,
                                      bandwidth_gbs=10.0))


def test_the_gain_pairs_each_step_with_a_one_row_step_beside_it(monkeypatch):
    # batch 1 slowed 10× while it ran alone (0.6 s); batch 2's steps (0.07 s), each after a
    # 1-row step (0.06 s) on batch 1's cache: the gain compares the pairs, 2 × 0.06 / 0.07
    updates = fake_sweep(monkeypatch, [0.6, 0.6, 0.06, 0.07, 0.06, 0.07])
    one, two = updates[-1].points
    assert two.one_row_times == (0.06, 0.06) and one.one_row_times == ()
    assert two.gain_over(one).estimate == pytest.approx(2 * 0.06 / 0.07)
    assert two.impossible is None and not any("once more" in u.message for u in updates)


def test_an_impossible_batch_size_is_measured_again_with_batch_one(monkeypatch):
    # the 1-row steps beside batch 2 slowed 10×: 17× from 2 rows; measured again: possible
    updates = fake_sweep(monkeypatch, [0.06, 0.06, 0.6, 0.07, 0.6, 0.07,
                                       0.06, 0.06, 0.06, 0.08, 0.06, 0.08])
    assert any("measuring batch 1 and 2 once more" in u.message for u in updates)
    one, two = updates[-1].points
    assert two.step_seconds == 0.08 and two.impossible is None


def test_a_batch_size_still_impossible_after_measuring_again_says_why(monkeypatch):
    updates = fake_sweep(monkeypatch, [0.06, 0.06, 0.6, 0.07, 0.6, 0.07,
                                       0.06, 0.06, 0.6, 0.07, 0.6, 0.07])
    one, two = updates[-1].points
    assert "2 rows can give at most 2×" in two.impossible
    assert "at most 2×" in batching_text.sweep_cards(updates[-1], QUIET)


def test_a_greedy_runs_decode_speed_ignores_a_few_slowed_steps():
    from inference.experiments.roofline import GreedyRun

    steps = (0.2,) + (0.05, 0.051, 0.049, 0.05, 0.052, 0.05, 0.05, 0.048)  # the first: warm-up
    quiet = GreedyRun((1,) * 10, 0.1, steps)
    busy = GreedyRun((1,) * 10, 0.1, tuple(s * 10 if i in (3, 6) else s
                                           for i, s in enumerate(steps)))
    assert quiet.decode_tokens_per_s == pytest.approx(20, rel=0.03)
    assert busy.decode_tokens_per_s == pytest.approx(quiet.decode_tokens_per_s, rel=0.02)
    assert GreedyRun((1,), 0.1, ()).decode_tokens_per_s == 0.0
