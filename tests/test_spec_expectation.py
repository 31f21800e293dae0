"""Speculative decoding's expected value on hand-made numbers: E[tokens per pass], the
predicted speed-up, the best k, α from judged guesses; and the view of a hand-made race."""
from types import SimpleNamespace

import pytest

from inference.errors import SettingOutOfRangeError
from inference.experiments.spec_expectation import (
    best_k,
    expected_speedup,
    expected_tokens_per_pass,
    fit_race,
    judged_guesses,
    predict,
    verify_seconds_at,
)
from inference.experiments.speculative_race import SpecRaceSummary


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


def test_judged_guesses_count_the_first_rejection_not_the_unused():
    passes = [SimpleNamespace(index=0, proposed=(), accepted=0),  # the prefill
              SimpleNamespace(index=1, proposed=(1, 2, 3, 4), accepted=1),  # 1 kept, 1 rejected
              SimpleNamespace(index=2, proposed=(), accepted=0),  # no guess: a plain step
              SimpleNamespace(index=3, proposed=(5, 6), accepted=2)]  # all kept
    assert judged_guesses(passes) == (3, 4)


def race_summary(**kw) -> SpecRaceSummary:
    base = dict(draft="int4", k=4, prompt_tokens=40, new_tokens=41, identical=True, passes=8,
                proposed=32, accepted=32, judged=32, spec_seconds=8 * 0.25,
                draft_seconds=8 * 4 * 0.043, plain_seconds=40 * 0.043,
                plain_step_seconds=(0.043,) * 40, bandwidth_gbs=20.0, bytes_per_token=5 * 10**8,
                noise=0.05)
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
    fit = fit_race(race_summary(draft="prompt_lookup", accepted=24, judged=30,
                                draft_seconds=0.001, spec_seconds=8 * 0.080))
    assert fit.alpha == pytest.approx(0.8)
    rows = predict(fit, range(1, 9))
    best = best_k(rows)
    assert best.speedup == max(r.speedup for r in rows) > 1
    assert 1 < best.k < 8  # gains flatten (0.8^k) while the check keeps growing
    assert best_k([]) is None


def test_a_race_without_passes_has_no_fit():
    assert fit_race(race_summary(passes=0)) is None
