"""Speculative decoding's expected value on hand-made numbers: E[tokens per pass], the
predicted speed-up, the best k, α from judged guesses; and the view of a hand-made race."""

import pytest

from inference.errors import SettingOutOfRangeError
from inference.experiments.noise import judge
from inference.experiments.spec_expectation import (
    SampledRun,
    expectation,
    expected_speedup,
    expected_tokens_per_pass,
    fit_race,
    judged_guesses,
    predict,
    verify_seconds_at,
)
from inference.experiments.speculative_race import SpecRaceSummary
from inference.speculative import SpecPass
from visualizations.speculative_charts import expectation_figure, expectation_md, sampled_md


def test_expected_tokens_follow_the_geometric_sum_with_both_edges():
    assert expected_tokens_per_pass(0.5, 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert expected_tokens_per_pass(0.8, 1) == pytest.approx(1.8)
    assert expected_tokens_per_pass(1.0, 4) == 5.0  # every guess kept: k + 1
    assert expected_tokens_per_pass(0.0, 4) == 1.0  # none kept: the model's own token only
    assert expected_tokens_per_pass(0.999999, 4) == pytest.approx(5.0, rel=1e-5)  # continuous
    with pytest.raises(SettingOutOfRangeError):
        expected_tokens_per_pass(1.2, 4)


def test_speedup_divides_the_gain_by_the_pass_cost():
    # α = 1, k = 4: 5 tokens for 4 × 10 ms of draft + 50 ms of checking, against 40 ms steps
    assert expected_speedup(1.0, 4, 0.040, 0.010, 0.050) == pytest.approx(5 * 40 / 90)
    # α = 0: one token per pass, and the pass costs more than a step: slower than plain
    assert expected_speedup(0.0, 4, 0.040, 0.0, 0.050) == pytest.approx(0.8)
    # a slow draft that is always right still loses (the int4 draft on a CPU)
    assert expected_speedup(1.0, 4, 0.043, 0.043, 0.060) < 1


def test_verify_time_is_a_straight_line_from_a_plain_step():
    assert verify_seconds_at(0, 0.04, 4, 0.06) == pytest.approx(0.04)
    assert verify_seconds_at(4, 0.04, 4, 0.06) == pytest.approx(0.06)
    assert verify_seconds_at(2, 0.04, 4, 0.06) == pytest.approx(0.05)


def spec_pass(index: int, proposed: tuple, accepted: int) -> SpecPass:
    return SpecPass(index, proposed, ("x",) * len(proposed), accepted, 1, "x", (1,), 1, 0.0,
                    0.0, 0.0, 1, 1, "x")


def test_judged_guesses_count_the_first_rejection_not_the_unused():
    passes = [spec_pass(0, (), 0),  # the prefill
              spec_pass(1, (1, 2, 3, 4), 1),  # 1 kept, 1 rejected, 2 never judged
              spec_pass(2, (), 0),  # no guess: a plain step
              spec_pass(3, (5, 6), 2)]  # all kept
    assert [p.judged for p in passes] == [0, 2, 0, 2]
    assert judged_guesses(passes) == (3, 4)


def race_summary(**kw) -> SpecRaceSummary:
    base = dict(draft="int4", k=4, prompt_tokens=40, new_tokens=41, identical=True, passes=8,
                proposed=32, accepted=32, judged=32, spec_seconds=8 * 0.25,
                draft_seconds=8 * 4 * 0.043, plain_seconds=40 * 0.043,
                plain_step_seconds=(0.043,) * 40, bandwidth_gbs=20.0, bytes_per_token=5 * 10**8,
                noise=0.05, reading=judge(others_cpu=0.02))  # judged quiet
    return SpecRaceSummary(**(base | kw))


def test_a_slow_draft_keeping_every_guess_is_predicted_slower_at_every_k():
    fit = fit_race(race_summary())
    assert fit.alpha == 1.0 and fit.draft_s == pytest.approx(0.043)
    assert fit.verify_s == pytest.approx(0.25 - 4 * 0.043)
    rows = predict(fit, range(1, 9))
    assert [r.tokens_per_pass for r in rows] == [k + 1 for k in range(1, 9)]
    assert all(r.speedup < 1 for r in rows)
    # at the raced k the formula with α = 1 gives back the measured speed-up
    assert rows[3].speedup == pytest.approx(fit.speedup)


def test_a_free_draft_makes_a_larger_k_better_until_misses_cost_more():
    summary = race_summary(draft="prompt_lookup", accepted=24, judged=30, draft_seconds=0.001,
                           spec_seconds=8 * 0.080)
    assert fit_race(summary).alpha == pytest.approx(0.8)
    e = expectation(summary, range(1, 9))
    assert e.best.speedup == max(r.speedup for r in e.rows) > 1
    assert 1 < e.best.k < 8  # gains flatten (0.8^k) while the check keeps growing


def test_a_race_without_passes_has_no_fit():
    assert fit_race(race_summary(passes=0)) is None


def test_expectation_names_the_best_k_and_whether_it_pays():
    slow = expectation(race_summary(), range(1, 9))
    assert slow.raced.k == 4 and slow.verdict == "slower" and slow.best.k == 1
    free = expectation(race_summary(draft="prompt_lookup", accepted=24, judged=30,
                                    draft_seconds=0.001, spec_seconds=8 * 0.080), range(1, 9))
    assert free.verdict == "faster" and free.best.k == 4
    assert expectation(None, range(1, 9)) is None


def test_the_view_draws_the_formula_beside_the_measured_race_and_sweep():
    e = expectation(race_summary(), range(1, 9))
    sweep = [race_summary(k=k, passes=40 // (k + 1)) for k in (2, 6)] + [
        race_summary(draft="prompt_lookup", k=3)]  # another draft's point: not drawn
    fig = expectation_figure(e, sweep, "cpu · float32")
    formula = [t for t in fig.data if t.name == "formula (theoretical)"]
    assert list(formula[0].y) == pytest.approx([r.tokens_per_pass for r in e.rows])
    assert list(formula[1].y) == pytest.approx([r.speedup for r in e.rows])
    race = [t for t in fig.data if t.name == "your race (measured)"]
    assert [(t.x[0], t.y[0]) for t in race] == [(4, e.fit.tokens_per_pass), (4, e.fit.speedup)]
    swept = [t for t in fig.data if t.name == "k sweep (measured)"]
    assert list(swept[0].x) == [2, 6]
    assert "no k pays" in fig.layout.title.text
    assert "Race first" in expectation_figure(None).layout.annotations[0].text


def test_the_text_of_a_slow_draft_keeping_every_guess_says_no_k_pays():
    e = expectation(race_summary(), range(1, 9))
    md = expectation_md(e)
    assert "α = **1.00**" in md and "kept 32 of the 32" in md
    assert f"E = **{e.raced.tokens_per_pass:.2f}**" in md and "**4.98** measured" not in md
    assert "no k from 1 to 8 pays here" in md and "faster" not in md
    free = expectation(race_summary(draft="prompt_lookup", accepted=24, judged=30,
                                    draft_seconds=0.001, spec_seconds=8 * 0.080), range(1, 9))
    assert f"the best k here is **{free.best.k}**" in expectation_md(free)
    assert "Race first" in expectation_md(None)


def test_the_sampled_count_sets_e_beside_the_measured_tokens_per_pass():
    run = SampledRun(draft="int4", k=4, temperature=1.0, seed=0, passes=10, accepted=20,
                     judged=28, decoded=30, text="")
    md = sampled_md(run, greedy_alpha=0.95)
    assert "20 of 28" in md and "α = 0.71" in md
    assert f"**{expected_tokens_per_pass(20 / 28, 4):.2f}** tokens per pass" in md
    assert "made **3.00**" in md and "greedy race with this draft: α = 0.95" in md
    assert "min(1, p ÷ q)" in md
    none = SampledRun("prompt_lookup", 4, 0.0, 0, 5, 0, 0, 5, "")
    assert "no guess" in sampled_md(none) and "Greedy rule" in sampled_md(none)


def test_a_busy_race_gets_the_formula_numbers_but_no_verdict():
    e = expectation(race_summary(reading=judge(others_cpu=0.6)), range(1, 9))
    md = expectation_md(e)
    assert "no verdict from a busy machine" in md and "lab-busy" in md
    assert "pays" not in md and f"E = **{e.raced.tokens_per_pass:.2f}**" in md
    assert expectation_figure(e).layout.title.text == "Formula beside your race"
    unjudged = expectation(race_summary(reading=None), range(1, 9))
    assert "pays" not in expectation_md(unjudged)
