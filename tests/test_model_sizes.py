"""'This machine' beyond the roofline: choosing a model size (theoretical rows from
published shapes) and what changes on a GPU (labelled as measured on an H200, elsewhere)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from inference.experiments.kv_projection import SMOLLM2, size_rows
from inference.experiments.roofline import watched_roofline
from lessons import machine_handlers
from visualizations.step_charts import model_sizes_md


def test_parameter_formula_matches_the_loaded_model_and_the_published_names(lm):
    small, mid, big = SMOLLM2
    assert small.parameters == lm.info.parameters  # counted from the real tensors
    assert small.head_dim == lm.info.head_dim and small.kv_heads == lm.info.kv_heads
    assert mid.parameters == pytest.approx(360e6, rel=0.02)
    assert big.parameters == pytest.approx(1.7e9, rel=0.02)


def test_size_rows_are_bandwidth_over_bytes():
    rows = size_rows(bandwidth_gbs=20.0, bytes_per_value=2, free_bytes=10**9)
    assert [r.shape.name for r in rows] == ["SmolLM2-135M", "SmolLM2-360M", "SmolLM2-1.7B"]
    for r in rows:
        assert r.weight_bytes == 2 * r.shape.parameters and r.int8_bytes == r.shape.parameters
        assert r.ceiling_tokens_per_s == pytest.approx(20e9 / r.weight_bytes)
    assert [r.fits for r in rows] == [True, True, False]  # 3.4 GB of float16 > 1 GB free
    assert rows[0].kv_bytes_per_token == 2 * 30 * 3 * 64 * 2


def test_size_table_says_theoretical_and_carries_the_measured_share():
    rows = size_rows(20.0, 4, 10**10)
    md = model_sizes_md(rows, 20.0, "float32", 10**10, measured_tokens_per_s=18.6)
    assert "**Theoretical:**" in md and "measured 20.0 GB/s" in md
    assert "| SmolLM2-1.7B | 1,711 M | 6.8 GB | 1.7 GB |" in md
    share = 18.6 / rows[0].ceiling_tokens_per_s
    assert f"{share:.0%} of its ceiling" in md
    # a bigger model's share of its ceiling is not this one's (a fixed per-operation cost is a
    # smaller part of its step): its ceiling is named, not an extrapolated speed
    assert f"could not beat **{rows[2].ceiling_tokens_per_s:.1f} tokens/s** here" in md
    assert f"{share * rows[2].ceiling_tokens_per_s:.1f} tokens/s" not in md
    assert "This model measured" not in model_sizes_md(rows, 20.0, "float32", 10**10)


def test_gpu_note_is_labelled_with_its_machine_and_date(lm):
    note = machine_handlers.gpu_note_md(lm) if lm.device.type == "cpu" else ""
    if note:  # on a CPU: the H200's figures, said to come from there
        assert "NVIDIA H200" in note and "2026-11-30" in note and "not from this one" in note
        assert "48 tokens/s" in note and "3.7 TB/s" in note
    on_gpu = SimpleNamespace(device=SimpleNamespace(type="cuda"),
                             info=SimpleNamespace(device="cuda:0 (NVIDIA H200)"))
    mine = machine_handlers.gpu_note_md(on_gpu)
    assert "This machine is a GPU (cuda:0 (NVIDIA H200))" in mine and "2026" not in mine


def test_sizes_on_the_real_model(lm):
    r = watched_roofline(lm, new_tokens=4).roofline
    md = machine_handlers.sizes_md(lm, r)
    assert f"{r.bandwidth_gbs:.1f} GB/s" in md and "This model measured" in md
