"""What bounds a decode step ('This machine'): the split chart and its text from
hand-made profiles (a CPU's and a GPU's, with a captured race), and the panel's measurement on
the real model (its parts add up to the step, against the roofline's own floor)."""
from __future__ import annotations

import pytest

from chart_reading import caption_text
from inference.experiments import roofline
from inference.experiments.roofline import PROFILED_STEPS, CapturedRace, StepBound
from inference.profile_step import StepProfile
from lessons import machine_handlers
from visualizations.step_charts import (
    FLOOR_ROW,
    MEASURED_ROW,
    segments,
    step_bound_md,
    step_split_figure,
    step_title,
)

CPU = StepProfile(device="cpu", steps=4, step_seconds=0.032, ops_per_step=5870.0,
                  matmul_seconds=0.020, overhead_share=0.375, matmul_ops_per_step=211.0,
                  other_ops_seconds=0.007)
GPU = StepProfile(device="cuda:0", steps=4, step_seconds=0.0188, ops_per_step=5870.0,
                  matmul_seconds=0.0025, overhead_share=0.867, matmul_ops_per_step=211.0,
                  other_ops_seconds=0.0018, kernels_per_step=2447.0, device_busy_share=0.229)
CPU_1US = StepBound(CPU, 1e-6, None)  # one do-nothing operation: 1 µs
RACE = CapturedRace(new_tokens=128, captured=True, eager_tokens_per_s=54.0,
                    static_tokens_per_s=46.0, captured_tokens_per_s=323.0, capture_seconds=0.21,
                    same_tokens=True, first_difference_at=None)


def _bars(fig) -> dict[str, tuple[str, float]]:
    return {t.name: (t.y[0], t.x[0]) for t in fig.data}


def test_cpu_step_splits_into_three_parts_beside_the_floor():
    parts = segments(CPU)
    assert [round(s * 1000, 1) for _, s, _ in parts] == [20.0, 7.0, 5.0]
    assert sum(s for _, s, _ in parts) == pytest.approx(CPU.step_seconds)
    assert "Python" in parts[2][0]
    fig = step_split_figure(CPU, 0.018, "caption")
    bars = _bars(fig)
    assert [row for row, _ in bars.values()] == [MEASURED_ROW] * 3 + [FLOOR_ROW]
    assert list(bars.values())[-1][1] == pytest.approx(18.0)
    assert fig.layout.barmode == "stack"
    assert caption_text(fig).startswith(step_title(CPU))
    assert step_title(CPU) == "A decode step here: 62% matrix products, 38% everything else"


def test_cpu_text_gives_every_figure_its_label_and_the_dispatch_bill():
    md = step_bound_md(StepBound(CPU, 0.8e-6, None), 0.018, 540_000_000, 30.0, 538_000_000, 30)
    assert "32.0 ms (31.2 tokens/s)" in md
    assert "**18.0 ms**" in md and "1.8× that" in md
    assert "211 products a step (7 per layer, and the output head)" in md
    assert "26.9 GB/s, 90% of the measured bandwidth" in md  # 538 MB in 20 ms against 30 GB/s
    assert "5,659 small operations" in md and "5.0 ms of Python" in md
    assert "5,870 operations a step × 0.80 µs" in md and "**4.7 ms**" in md
    assert "(theoretical" in md and "(measured" in md
    assert "CUDA graph" in md and "Captured step" not in md  # nothing captured on a CPU


def test_gpu_step_shows_the_idle_gpu_and_the_captured_race():
    assert "GPU idle" in segments(GPU)[2][0]
    assert step_title(GPU) == "The GPU was busy 23% of a decode step: launching sets the pace"
    md = step_bound_md(StepBound(GPU, 5e-6, RACE), 0.00007, 270_000_000, 3700.0, 269_000_000, 30)
    assert "2,447 kernels a step" in md and "**23%**" in md
    assert "**323 tokens/s** against 54" in md and "**6.0×**" in md and "the same tokens" in md
    parted = CapturedRace(**{**vars(RACE), "same_tokens": False, "first_difference_at": 17})
    parted_md = step_bound_md(StepBound(GPU, 1e-6, parted), 7e-5, 1, 1.0)
    assert "different tokens from token 17" in parted_md


def test_odd_counts_and_the_empty_state():
    md = step_bound_md(CPU_1US, 0.018, 1, 30.0, 0, 7)  # (211 - 1) / 7 = 30 a layer
    assert "211 products a step (30 per layer" in md
    assert "per layer" not in step_bound_md(CPU_1US, 0.018, 1, 30.0, 0, 4)
    assert "Press" in step_bound_md(None, 0, 0, 0)
    assert not step_split_figure(None, 0).data


def test_the_panel_measures_a_real_step_against_the_roofline_floor(lm):
    r = roofline.watched_roofline(lm, new_tokens=4).roofline
    bound = roofline.measure_step_bound(lm)
    p = bound.profile
    assert p.steps == PROFILED_STEPS and p.device == str(lm.device)
    assert p.matmul_seconds + p.other_ops_seconds + p.between_ops_seconds == pytest.approx(
        p.step_seconds)
    assert 0 < bound.tiny_op_seconds < p.step_seconds / 100  # thousands of them fit in a step
    assert (bound.race is None) == (lm.device.type != "cuda")
    md, fig = machine_handlers.step_bound_outputs(lm, r, bound, "caption")
    floor_ms = 1000 / r.ceiling_tokens_per_s
    assert f"**{floor_ms:.1f} ms**" in md
    assert list(_bars(fig).values())[-1][1] == pytest.approx(floor_ms)
    assert f"{p.ops_per_step:,.0f} operations a step" in md


def test_matrix_products_faster_than_the_measured_bandwidth_are_explained():
    md = step_bound_md(StepBound(CPU, 0.8e-6, None), 0.018, 540_000_000, 20.0, 538_000_000, 30)
    assert "26.9 GB/s, 134% of the measured bandwidth" in md and "Above 100%" in md
    assert "Above 100%" not in step_bound_md(CPU_1US, 0.018, 1, 30.0, 538_000_000, 30)


def test_the_gap_blames_slow_matrix_products_only_when_they_were_slow():
    slow = step_bound_md(CPU_1US, 0.018, 540_000_000, 40.0, 538_000_000, 30)  # 67%
    fast = step_bound_md(CPU_1US, 0.018, 540_000_000, 27.0, 538_000_000, 30)  # 100%
    assert "matrix products that fall short" in slow
    assert "matrix products that fall short" not in fast and "is the gap" in fast
