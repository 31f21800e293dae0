"""Every chart the lessons draw, built from hand-made records shaped like a real run's, so the
chart style rule (visualizations/style.py) can be checked on each one: in Python on the layout
(tests/test_chart_style.py) and in Chromium on the drawn plot (tests/test_browser_charts.py).

The records reuse the chart tests' own stand-ins where they exist. Where a chart's title
depends on its data, the sample takes the longest wording (a verdict, a busy machine).
"""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from inference.experiments.attention_view import AttentionView
from inference.experiments.batch_sweep import BatchPoint
from inference.experiments.kv_projection import ModelSpec, project_batch, project_context
from inference.experiments.kv_race import PrefixRun
from inference.experiments.noise import judge
from inference.experiments.prefill_sweep import PrefillPoint
from inference.experiments.roofline import ComputeRoof, WorkPoint
from inference.experiments.serving_cost import serving_costs
from inference.experiments.spec_expectation import VerifyCost
from test_batching_charts import _result
from test_chunked_charts import rec
from test_kv_charts import _race_steps, _snap
from test_long_context_charts import DECODE, FIT, PREFILL, SHARES, THEORY, _peak
from test_quant_charts import report
from test_server_view import Stats
from test_speculative_view import _summary
from test_step_bound import CPU, GPU
from visualizations import (
    batching_charts,
    kv_charts,
    quant_charts,
    roofline_charts,
    server_view,
    speculative_charts,
    step_charts,
    timing_charts,
)

QUIET = judge(spread=0.03, others_cpu=0.02)
W = 538_060_032  # weight bytes of the real model in float32

# Batch 16's aggregate above B × batch-1 (a slow first point): the line that ran off the top.
BATCH = [BatchPoint(b, 10, 0.1 * b, s, (s,), b * 20_000_000, W)
         for b, s in ((1, 0.110), (2, 0.115), (4, 0.125), (8, 0.150), (16, 0.100))]
# A CPU's precision modes: the ceiling at int4's bytes is ~8× the fastest measured point.
MODES = [report("fp32", 541e6, 13.6), report("fp16", 271e6, 22.9), report("bf16", 271e6, 24.3),
         report("int8", 150e6, 24.4), report("int4-g32", 80e6, 30.3)]
ROOF = ComputeRoof(peak_gflops=200.0, bandwidth_gbs=20.0, points=(
    WorkPoint("decode, batch 1", flops=2.7e8, bytes_read=5.4e8, seconds=0.07),
    WorkPoint("decode, batch 16", flops=4.3e9, bytes_read=5.6e8, seconds=0.12),
    WorkPoint("prefill, 256 tokens", flops=5.7e10, bytes_read=5.4e8, seconds=0.5)))
SPEC = [replace(_summary(), draft=d, k=k, accepted=a)
        for d in ("prompt_lookup", "smaller model") for k, a in ((1, 8), (2, 14), (4, 22))]
COSTS = [VerifyCost(1, 4, 0.05, 0.06, "memory", "memory"),
         VerifyCost(16, 4, 0.10, 0.40, "memory", "compute")]
CAPTION = "Measured live on cpu · float32 · 2 threads · each timed pass had the model to itself; " \
          "no chat was served"


def _prefill_points() -> list[PrefillPoint]:
    return [PrefillPoint(n, 0.002 * n ** 0.5, 0.07 * n, n <= 64) for n in (8, 32, 128, 512)]


def _projection(by_batch: bool):
    a = ModelSpec("SmolLM2-135M", 30, 9, 3, 64, 135_000_000, "test", 8192)
    b = ModelSpec("Llama-3-8B", 32, 32, 8, 128, 8_000_000_000, "test", 8192)
    if by_batch:
        return project_batch([a, b], [1, 8, 64], tokens=4096, bytes_per_value=2)
    return project_context([a, b], [1024, 8192, 131072], batch=1, bytes_per_value=2)


def decode_steps(n: int = 3) -> list[float]:
    """Decode's per-token times: the first with prefill, then ordinary steps."""
    return [0.180] + [0.070] * (n - 1)


def figures() -> dict[str, object]:
    """name -> plotly Figure, one per chart builder, from the records above."""
    bars = quant_charts.mode_bars_figure(MODES, CAPTION)
    return {
        "prefill sweep": timing_charts.prefill_sweep_figure(_prefill_points(), CAPTION),
        "decode timing": timing_charts.decode_latency_figure(decode_steps(), CAPTION),
        "decode candidates": timing_charts.candidates_figure(
            [SimpleNamespace(token_id=i, piece=p, raw_probability=q)
             for i, (p, q) in enumerate(((" Paris", 0.6), (" the", 0.2), (" a", 0.1)))],
            0, [0.8, 0.15, 0.05], CAPTION, step=12),
        "kv grid": kv_charts.cache_grid_figure(_snap(tokens=12, layers=30), 5, CAPTION),
        "kv bytes": kv_charts.cache_bytes_figure([(t, t * 92_160, t * 92_160)
                                                 for t in range(1, 13)], CAPTION),
        "kv race": kv_charts.race_figure(_race_steps(), CAPTION),
        "kv projection context": kv_charts.projection_figure(_projection(False), CAPTION),
        "kv projection batch": kv_charts.projection_figure(_projection(True), CAPTION),
        "kv gqa": kv_charts.gqa_figure([("GQA", 23_040), ("MHA", 69_120)], CAPTION),
        "kv prefix": kv_charts.prefix_figure(
            [PrefixRun("What is the capital of France?", 100, 90, 0.5, 0.1, (1,), (1,), "ok")],
            CAPTION),
        "kv attention": kv_charts.attention_figure(
            AttentionView(pieces=("The", " sky", " is"), kv_heads=3, query_heads=9,
                          weights=(tuple((0.2, 0.3, 0.5) for _ in range(9)),)), 0, 4, CAPTION),
        "context prefill": kv_charts.prefill_lengths_figure(PREFILL, FIT, SHARES, CAPTION),
        "context decode": kv_charts.decode_lengths_figure(DECODE, THEORY, 8192, CAPTION),
        "context memory": kv_charts.attention_memory_figure(
            (_peak("sdpa", 400), _peak("eager", 1900)), CAPTION),
        "batch throughput": batching_charts.throughput_chart(BATCH, CAPTION, QUIET),
        "batch step time": batching_charts.step_time_chart(BATCH, 20.0, CAPTION),
        "batch tradeoff": batching_charts.tradeoff_chart(BATCH, CAPTION),
        "batch padding": batching_charts.padding_chart([31, 12, 5]),
        "batch gantt": batching_charts.gantt_chart(_result("continuous"),
                                                  "Continuous batching (max batch 16)", CAPTION),
        "batch summary": batching_charts.scheduler_summary_chart(
            [_result("static").summary, _result("continuous").summary], CAPTION),
        "batch cost": batching_charts.cost_chart(
            serving_costs(BATCH, 3.6, prompt_tokens=10, output_tokens=10), 3.6, CAPTION),
        "quant roofline": roofline_charts.roofline_figure(MODES, 22.5, caption=CAPTION,
                                                         noise=QUIET, height=300),
        "quant bars": bars,
        "machine roofline": roofline_charts.roofline_figure(MODES[:1], 22.5, caption=CAPTION),
        "machine two roofs": roofline_charts.two_roof_figure(ROOF, CAPTION),
        "machine step split": step_charts.step_split_figure(CPU, 0.024, CAPTION),
        "machine step split gpu": step_charts.step_split_figure(GPU, 0.0006, CAPTION),
        "spec sweep": speculative_charts.k_sweep_figure(SPEC, CAPTION, QUIET),
        "spec batch": speculative_charts.batch_figure(COSTS, CAPTION),
        "server budget": server_view.budget_split_figure([rec(i, 3, 100) for i in range(8)],
                                                           128, CAPTION),
        "server parts": server_view.step_parts_figure([rec(i, 3, 0) for i in range(8)],
                                                        CAPTION),
        "server history": server_view.batch_history_figure(Stats(), CAPTION),
    }
