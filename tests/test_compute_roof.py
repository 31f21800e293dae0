"""The compute roof ('This machine'): the FLOP count and roofline arithmetic on
hand-made numbers, the chart and text from a hand-made roof, and the measurement on the real
model (decode lands left of the ridge, a 256-token prefill far right of decode)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from inference.experiments import roofline
from inference.experiments.batch_sweep import BatchPoint
from inference.experiments.noise import judge
from inference.experiments.roofline import (
    ComputeRoof,
    WorkPoint,
    batch_work_points,
    forward_flops,
    measure_matmul_gflops,
    prefill_flops,
)
from inference.experiments.shared_results import SharedResults
from visualizations.roofline_charts import compute_roof_md, two_roof_figure

INFO = SimpleNamespace(parameters=100, vocab_size=5, hidden_size=4, layers=2, heads=3, head_dim=4)


def test_forward_flops_two_per_weight_per_token_plus_attention():
    assert forward_flops(INFO, tokens=1, context=0) == 200
    assert forward_flops(INFO, tokens=5, context=0) == 1000
    # attention: 4 × layers × heads × head_dim per token per attended position
    assert forward_flops(INFO, tokens=2, context=10) == 400 + 4 * 2 * 3 * 4 * 2 * 10


def test_prefill_flops_count_the_output_head_for_its_last_position_only():
    # 80 weights outside the head for all 3 positions, the 20 head weights (5 × 4) for one
    assert forward_flops(INFO, tokens=3, context=0, logits_tokens=1) == 2 * 80 * 3 + 2 * 20
    assert prefill_flops(INFO, 3) == forward_flops(INFO, 3, 1.5, logits_tokens=1)


def test_prefill_flops_of_the_real_model_match_the_issue_figure(lm):
    # 256 tokens: ~56.7 GFLOP, not the 71.1 of a head run for every position (only the last
    # position's logits are needed)
    assert prefill_flops(lm.info, 256) / 1e9 == pytest.approx(56.7, abs=0.3)


def test_roofs_ridge_and_bound():
    decode = WorkPoint("decode, batch 1", flops=2e8, bytes_read=4e8, seconds=0.04)
    prefill = WorkPoint("prefill, 256 tokens", flops=5e10, bytes_read=4e8, seconds=0.5)
    roof = ComputeRoof(peak_gflops=200.0, bandwidth_gbs=20.0, points=(decode, prefill))
    assert roof.ridge == 10.0
    assert decode.intensity == 0.5 and decode.gflops == pytest.approx(5.0)
    assert roof.attainable_gflops(0.5) == 10.0 and roof.attainable_gflops(100) == 200.0
    assert roof.verdict(decode).kind == "memory" and roof.verdict(prefill).kind == "compute"
    md = compute_roof_md(roof, "float32", judge(others_cpu=0.02))  # judged quiet
    assert "200 GFLOP/s ÷ 20.0 GB/s = **10.0 FLOPs per byte**" in md
    assert "| decode, batch 1 | 0.2 | 400.0 MB | 0.50 | 40 | 5.0 | 50% | memory |" in md
    assert "| 100.0 | 50% | arithmetic |" in md
    assert "near **B ≈ 20**" in md and "contrast, measured here" in md
    fig = two_roof_figure(roof, "caption")
    names = [t.name for t in fig.data]
    assert names[0].startswith("roofs (theoretical)") and "prefill (measured)" in names
    roof_line = fig.data[0]
    assert max(roof_line.y) == 200.0  # flat at the compute roof
    assert roof_line.y[0] == pytest.approx(20.0 * roof_line.x[0])  # the bandwidth slope
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert two_roof_figure(None).layout.annotations  # the empty state says what to press


def test_batch_sweep_steps_as_points():
    point = BatchPoint(batch=8, prompt_tokens=10, prefill_seconds=0.5, step_seconds=0.1,
                       step_times=(0.1, 0.1, 0.1, 0.1), cache_bytes=100, weight_bytes=400)
    (p,) = batch_work_points(INFO, [point])
    assert p.label == "decode, batch 8" and p.bytes_read == 500 and p.seconds == 0.1
    assert p.flops == forward_flops(INFO, 8, 12)


def test_matmul_measures_a_positive_rate(lm):
    assert measure_matmul_gflops(lm.device, lm.model.dtype, size=256, repeats=3) > 0


def test_this_machine_places_decode_and_prefill_under_the_roofs(lm):
    shared = SharedResults()
    r = roofline.watched_roofline(lm, new_tokens=4, shared=shared).roofline
    roof = roofline.measure_compute_roof(lm, r, shared, new_tokens=4)
    decode, prefill = roof.points[0], roof.points[-1]
    assert decode.label == "decode, batch 1" and prefill.label == "prefill, 256 tokens"
    assert prefill.intensity > 100 * decode.intensity  # one weight read for 256 tokens
    assert roof.verdict(decode).kind in ("memory", "neither")  # left of the ridge: never compute
    for p in roof.points:  # a FLOP count or a byte count off by a factor would break the roof
        assert 0 < p.gflops <= 1.5 * roof.attainable_gflops(p.intensity), p
    again = roofline.measure_compute_roof(lm, r, shared, new_tokens=4)
    assert again.peak_gflops == roof.peak_gflops  # one compute figure per machine, shared
