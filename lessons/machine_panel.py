"""'This machine': the roofline. Measure the memory bandwidth here, decode a few tokens, and
see how close decode comes to the ceiling that bandwidth sets (bandwidth ÷ bytes per token),
then what one decode step spends its time on (the profiler's split; on a GPU, the captured
step raced against the eager loop).

`measure_roofline` is a plain function (tested on the real model); the explanation is
`visualizations.quant_text.roofline_md`, the chart `quant_charts.roofline_figure`."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import gradio as gr

from inference.config import Settings
from inference.experiments import step_bound
from inference.experiments.compute_roof import (
    ComputeRoof,
    WorkPoint,
    batch_work_points,
    forward_flops,
    machine_gflops,
)
from inference.experiments.memory_guard import memory_budget_bytes
from inference.experiments.model_sizes import size_rows
from inference.experiments.roofline import Roofline, machine_bandwidth
from inference.experiments.step_bound import StepBound
from inference.generation import stream
from inference.tokens import prompt_ids
from visualizations.machine_text import model_sizes_md
from visualizations.quant_charts import roofline_figure
from visualizations.quant_text import roofline_md
from visualizations.roofline_charts import compute_roof_md, two_roof_figure
from visualizations.server_view import batch_history_figure, server_stats_md
from visualizations.step_charts import step_bound_md, step_split_figure
from visualizations.style import empty_figure, info_caption

from .common.feedback import guarded
from .common.lesson_text import lesson_text
from .common.exports import figures_box, figures_md, latest_batch_points

ROOFLINE_PROMPT = "Write a short story about a lighthouse keeper and a storm."
ROOFLINE_NEW_TOKENS = 24  # enough decode steps for a steady median
PREFILL_TOKENS = 256  # a long prompt: intensity ~256× decode's, right of most machines' ridge


@dataclass(frozen=True)
class RooflinePoint:
    """One measured point for `roofline_figure` (the same fields a quantization report has)."""

    key: str
    label: str
    kernel: str
    bytes_per_token: int
    decode_tokens_per_s: float


def measure_roofline(lm, new_tokens: int = ROOFLINE_NEW_TOKENS, shared=None) -> Roofline:
    """Measured read bandwidth (the machine's one figure, kept in `shared`) and batch-1 decode
    speed, with the bytes one step reads."""
    bandwidth = machine_bandwidth(shared, lm.device)
    ids = prompt_ids(lm.tokenizer, ROOFLINE_PROMPT)
    events = list(stream(lm, ids, max_new_tokens=new_tokens))[1:]  # decode steps only
    rate = 1 / statistics.median(e.seconds for e in events)
    cache = statistics.mean(e.cache_bytes for e in events)
    return Roofline(bandwidth_gbs=bandwidth, bytes_per_token=int(lm.info.weight_bytes + cache),
                    measured_tokens_per_s=rate)


def measure_compute_roof(lm, r: Roofline, shared=None,
                         new_tokens: int = ROOFLINE_NEW_TOKENS) -> ComputeRoof:
    """The second roof and the passes under it: the machine's matmul GFLOP/s (shared like the
    bandwidth), `r`'s decode step, a prefill of `PREFILL_TOKENS` (median of 3), and the batch
    sweep's steps when a sweep has run on this machine."""
    info = lm.info
    peak = machine_gflops(shared, lm.device, lm.model.dtype)
    prompt = prompt_ids(lm.tokenizer, ROOFLINE_PROMPT)
    decode = WorkPoint("decode, batch 1", forward_flops(info, 1, len(prompt) + new_tokens / 2),
                       r.bytes_per_token, 1 / r.measured_tokens_per_s)
    ids = (prompt * (PREFILL_TOKENS // len(prompt) + 1))[:PREFILL_TOKENS]
    firsts = [next(iter(stream(lm, ids, max_new_tokens=1))) for _ in range(3)]
    first = sorted(firsts, key=lambda e: e.forward_seconds)[1]  # the median run
    prefill = WorkPoint(f"prefill, {len(ids)} tokens", forward_flops(info, len(ids), len(ids) / 2),
                        info.weight_bytes + first.cache_bytes, first.forward_seconds)
    batch = [p for p in batch_work_points(info, latest_batch_points(lm, shared))
             if not p.label.endswith("batch 1")]
    return ComputeRoof(peak, r.bandwidth_gbs, (decode, *batch, prefill))


def measure_step_bound(lm) -> StepBound:
    """What bounds a decode step of the roofline's prompt (the race only on a GPU)."""
    return step_bound.measure_step_bound(lm, prompt_ids(lm.tokenizer, ROOFLINE_PROMPT))


def step_bound_outputs(lm, r: Roofline, bound: StepBound, caption: str) -> tuple[str, object]:
    """The step's split in words and as a chart, against `r`'s bandwidth floor."""
    floor = 1 / r.ceiling_tokens_per_s
    text = step_bound_md(bound, floor, r.bytes_per_token, r.bandwidth_gbs, lm.info.weight_bytes,
                         lm.info.layers)
    return text, step_split_figure(bound.profile, floor, caption)


def sizes_md(lm, r: Roofline) -> str:
    """This model and its siblings on this machine (theoretical, from the measured bandwidth);
    the measured speed is carried over only when the loaded model is the first row's shape."""
    free = memory_budget_bytes(lm.device, 1.0)
    rows = size_rows(r.bandwidth_gbs, lm.bytes_per_value, free)
    mine = lm.info.parameters == rows[0].shape.parameters
    return model_sizes_md(rows, r.bandwidth_gbs, lm.info.dtype, free,
                          r.measured_tokens_per_s if mine else None)


def gpu_note_md(lm) -> str:
    """On a CPU: what the H200 check measured (labelled, from that machine). On a GPU: that
    every figure here is this GPU's own."""
    if lm.device.type == "cuda":
        return (f"### On a GPU\nThis machine is a GPU ({lm.info.device}): every figure on this "
                "page was measured on it, now.")
    return lesson_text("gpu_h200.md")


def roofline_point(lm, r: Roofline) -> RooflinePoint:
    """The loaded model's measured decode speed as one point on the roofline chart."""
    info = lm.info
    return RooflinePoint(info.dtype, f"{info.name} ({info.dtype})", "PyTorch", r.bytes_per_token,
                         r.measured_tokens_per_s)


def server_section(lm, settings: Settings, server) -> None:
    """The live view of the real scheduler serving this room (polled while switched on)."""
    gr.Markdown("## The server, live\nEvery answer in *Try it* (yours and everyone else's) is "
                "served by one continuous batcher: requests join and leave between steps, and all "
                "active ones get their next token from one shared forward pass. This is lesson "
                "5's continuous batching, serving this room right now. Its steps and every "
                "lesson's measurements take turns on one compute thread: on a CPU, a second "
                "thread running the model drags every decode down to one core's speed (measured "
                "on a 2-core Xeon on 2026-11-30: 33 tokens/s with one thread, 19 with two).")
    with gr.Row():
        watch = gr.Checkbox(False, label="Watch live (updates every 2 s)", elem_id="server-watch")
        refresh = gr.Button("Refresh now", elem_id="server-refresh")
    text = gr.Markdown(server_stats_md(None, settings.server_rows, settings.server_window_s),
                       elem_id="server-stats")
    chart = gr.Plot(batch_history_figure(None), label="Batch size over time",
                    elem_id="server-chart")
    timer = gr.Timer(2.0, active=False)

    def show() -> dict:
        st = server.stats()
        cap = info_caption(lm.info, alone=False, note="live scheduler")
        return {text: server_stats_md(st, settings.server_rows, settings.server_window_s),
                chart: batch_history_figure(st, cap)}

    checked = guarded(show, compute=False)  # no model: answers even while a measurement runs
    refresh.click(checked, None, [text, chart], api_name="server_stats")
    timer.tick(checked, None, [text, chart], show_progress="hidden",
               api_visibility="undocumented")
    watch.change(guarded(lambda on: gr.Timer(active=bool(on)), compute=False), watch, timer,
                 api_visibility="undocumented")


def build(lm, settings: Settings, shared=None, server=None) -> None:
    if server is not None:
        server_section(lm, settings, server)
    gr.Markdown("## This machine's roofline\nHow fast *can* decode be here? Measure the memory "
                "bandwidth, then see where this model's measured decode speed sits under it.")
    run = gr.Button("Measure this machine", variant="primary", elem_id="perf-run")
    text = gr.Markdown("*Press the button: it takes a few seconds.*", elem_id="perf-result")
    chart = gr.Plot(empty_figure("The roofline appears here after measuring."), label="Roofline",
                    elem_id="perf-chart")
    gr.Markdown("### Two roofs: memory and arithmetic\nThe same button also measures how fast "
                "this machine multiplies, and places a decode step, a 256-token prefill and (once "
                "lesson 5's batch sweep has run) each batch size under both roofs.")
    compute_text = gr.Markdown(elem_id="perf-compute")
    compute_chart = gr.Plot(two_roof_figure(None), label="Roofline with both roofs",
                            elem_id="perf-compute-chart")
    gr.Markdown("### What bounds a decode step\nThe same button profiles a few decode steps: "
                "how much of a step is the matrix products that read the weights, and how much "
                "is everything around them.")
    step_text = gr.Markdown(step_bound_md(None, 0, 0, 0), elem_id="perf-step")
    step_chart = gr.Plot(step_split_figure(None, 0), label="One decode step, split",
                         elem_id="perf-step-chart")
    sizes = gr.Markdown("### Choosing a model size\n*Press **Measure this machine**: the table "
                        "uses this machine's bandwidth.*", elem_id="perf-sizes")
    gr.Markdown(gpu_note_md(lm), elem_id="perf-gpu")
    figures = figures_box(lm, shared)

    def on_run() -> dict:
        r = measure_roofline(lm, shared=shared)
        roof = measure_compute_roof(lm, r, shared)
        caption = info_caption(lm.info)
        step_md, step_fig = step_bound_outputs(lm, r, measure_step_bound(lm), caption)
        fig = roofline_figure([roofline_point(lm, r)], r.bandwidth_gbs,
                              ", read bandwidth measured", caption,
                              x_title="Bytes read per decode token (MB: weights + KV cache)")
        return {text: roofline_md(r, lm.info.weight_bytes), chart: fig,
                compute_text: compute_roof_md(roof, lm.info.dtype),
                compute_chart: two_roof_figure(roof, caption), step_text: step_md,
                step_chart: step_fig, sizes: sizes_md(lm, r),
                figures: figures_md(lm, shared, r)}

    run.click(guarded(on_run, alone=server), None,
              [text, chart, compute_text, compute_chart, step_text, step_chart, sizes, figures],
              concurrency_id="heavy",
              concurrency_limit=1, time_limit=120, api_name="roofline")
