"""The robust estimators: a few steps slowed 10× by another program leave the figure where a
quiet run put it, and the range says how far the rounds disagreed."""
import doctest

import pytest

from inference.experiments import noise
from inference.experiments.noise import Robust, low_quantile, low_ratio, paired_ratio


def slowed(seconds, steps, factor=10.0):
    """The same timings with `steps` slowed `factor`× (interference only adds time)."""
    return [s * factor if i in steps else s for i, s in enumerate(seconds)]


def race_lanes(n=24, prompt=20):
    """Hand-made race timings: a cached step of 50 ms (a little jitter), a recomputed step that
    grows with the sequence (20 ms + 2 ms per token)."""
    cached = [0.050 * (1 + 0.02 * ((i * 7) % 5 - 2)) for i in range(n)]
    plain = [0.020 + 0.002 * (prompt + i) for i in range(n)]
    return plain, cached


def test_paired_ratio_ignores_a_few_steps_slowed_10x_in_either_lane():
    plain, cached = race_lanes()
    quiet = paired_ratio(plain, cached, common=0.08)
    for hit_plain, hit_cached in [({3}, {11}), ((), {0, 9, 17}), ({5, 13, 23}, ())]:
        busy = paired_ratio(slowed(plain, hit_plain), slowed(cached, hit_cached), common=0.08)
        assert busy.estimate == pytest.approx(quiet.estimate, rel=0.02)
    raw_busy = sum(plain) / sum(slowed(cached, {0, 9, 17}))  # the plain ratio of totals moves
    assert abs(raw_busy / quiet.estimate - 1) > 0.3


def test_paired_ratio_keeps_a_whole_run_slowed_alike_in_both_lanes():
    plain, cached = race_lanes()
    quiet = paired_ratio(plain, cached)
    both = paired_ratio([2.5 * s for s in plain], [2.5 * s for s in cached])
    assert both.estimate == pytest.approx(quiet.estimate)


def test_paired_ratio_range_spans_its_rounds_and_holds_the_estimate():
    plain, cached = race_lanes()
    r = paired_ratio(plain, cached, common=0.08)
    assert r.rounds == 5 and r.low <= r.estimate <= r.high
    assert r.high - r.low < 0.1 * r.estimate  # hand-made timings: the rounds nearly agree
    assert paired_ratio(plain[:3], cached[:3]).rounds == 3  # never more rounds than pairs


def test_low_ratio_ignores_slowed_repeats_and_shows_them_in_its_range():
    one, sixteen = [0.060, 0.061, 0.059, 0.062, 0.060, 0.061], [0.24, 0.25, 0.24, 0.26, 0.25, 0.24]
    quiet = low_ratio(one, sixteen, scale=16)
    busy = low_ratio(slowed(one, {2}), slowed(sixteen, {4}), scale=16)
    assert busy.estimate == pytest.approx(quiet.estimate, rel=0.02)
    assert quiet.estimate == pytest.approx(16 * 0.0600 / 0.2400, rel=0.02)
    assert busy.high > 10 * quiet.high / 2  # the slowed round is in the range, not the figure


def test_low_quantile_and_errors():
    assert low_quantile([5.0]) == 5.0
    assert low_quantile([1.0, 2.0, 3.0, 4.0, 5.0]) == 2.0
    with pytest.raises(ValueError):
        low_quantile([])
    with pytest.raises(ValueError):
        paired_ratio([], [1.0])


def test_label_and_doc_examples():
    assert Robust(2.83, 2.6, 3.04, 5).label() == "2.8×, range 2.6–3.0 over 5 rounds"
    assert Robust(2.0, 2.0, 2.0, 1).label() == "2.0×, one round"
    assert doctest.testmod(noise).failed == 0
