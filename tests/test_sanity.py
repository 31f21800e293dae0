"""The physical bounds: each rejects a planted impossible figure with a sentence, and lets a
possible one (even a noisy one, within `Settings.sanity_noise`) through."""

from inference.config import LIMITS
from inference.experiments import noise as sanity


def test_batch_gain_at_most_the_batch():
    assert "at most 16×" in sanity.batch_gain(16, 67.0)  # seen on a busy machine
    assert sanity.batch_gain(16, 15.0) is None
    assert sanity.batch_gain(16, 16 * (1 + LIMITS.sanity_noise) * 0.99) is None  # within noise


def test_batch_step_not_shorter_than_one_row():
    assert "cannot be shorter" in sanity.batch_step(16, 0.2 * 0.060, 0.060)  # "0.2× as long"
    assert sanity.batch_step(16, 0.058, 0.060) is None  # within noise
    assert sanity.batch_step(16, 0.300, 0.060) is None
    assert sanity.batch_step(1, 0.010, 0.060) is None  # one row is the reference itself


def test_cached_step_not_slower_than_recomputing():
    assert "cannot be slower" in sanity.cached_step(2.0, 1.0)
    assert sanity.cached_step(1.1, 1.0) is None  # within noise
    assert sanity.cached_step(0.3, 1.0) is None


def test_tokens_per_s_under_the_bandwidth_ceiling():
    assert "ceiling of 41.5" in sanity.bandwidth(126.0, 41.5)
    assert sanity.bandwidth(13.6, 41.5) is None
    assert sanity.bandwidth(13.6, 0.0) is None  # no ceiling measured: nothing to check


def test_a_cost_agrees_with_the_same_visitors_sweep():
    assert "8.6 tokens/s" in sanity.same_throughput(16, 126.0, 8.6)
    assert "8.6 tokens/s" in sanity.same_throughput(16, 8.6 / 3, 8.6)  # either way round
    assert sanity.same_throughput(16, 120.0, 126.0) is None
    assert sanity.same_throughput(16, 0.0, 126.0) is not None


def test_the_roofline_withholds_a_speed_past_its_ceiling():
    from inference.experiments.roofline import Roofline
    from visualizations.step_charts import roofline_md

    fine = Roofline(bandwidth_gbs=20.0, bytes_per_token=500_000_000, measured_tokens_per_s=10.0)
    assert fine.impossible is None and "**25%** of the ceiling" in roofline_md(fine, 480_000_000)
    past = Roofline(bandwidth_gbs=2.0, bytes_per_token=500_000_000, measured_tokens_per_s=10.0)
    md = roofline_md(past, 480_000_000)
    assert "not a possible result" in md and "ceiling of 4.0 tokens/s" in md
    assert "250%" not in md and "**10.0 tokens/s**" not in md
