"""'This machine' handlers: the roofline measured here (decode speed under the bandwidth
ceiling, both roofs, what bounds a step, which sizes fit), beside a quiet reference if busy."""
from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import plotly.graph_objects as go

from inference.experiments import noise, quiet_reference, roofline
from inference.experiments.batch_sweep import memory_budget_bytes
from inference.experiments.kv_projection import size_rows
from inference.experiments.noise import Noise
from inference.experiments.roofline import Roofline, StepBound
from visualizations import step_charts
from visualizations.noise_view import supports_verdict
from visualizations.roofline_charts import compute_roof_md, roofline_figure, two_roof_figure
from visualizations.step_charts import model_sizes_md, roofline_md
from visualizations.style import info_caption

from .common.latest import BATCH_POINTS, figures_md, latest
from .common.lesson_text import lesson_text

BYTES_AXIS = "Bytes read per decode token (MB: weights + KV cache)"


class RooflinePoint(NamedTuple):
    """One measured point for `roofline_figure` (the fields a quantization report has)."""

    key: str
    label: str
    kernel: str
    bytes_per_token: int
    decode_tokens_per_s: float


def step_bound_outputs(lm, r: Roofline, bound: StepBound, caption: str,
                       judged: Noise | None = None) -> tuple[str, object]:
    """The step's split in words and as a chart, against `r`'s bandwidth floor; a split that
    does not hold up under `judged` (the reading around the profiling) is not drawn."""
    floor, p = 1 / r.ceiling_tokens_per_s, bound.profile
    if judged is not None and not noise.split_holds(
            judged, [p.matmul_seconds, p.other_ops_seconds], p.step_seconds):
        return (step_charts.split_unreliable_md(p, judged),
                step_charts.split_unreliable_figure(
                    p, "the split was not reliable on this run: run again"))
    text = step_charts.step_bound_md(bound, floor, r.bytes_per_token, r.bandwidth_gbs,
                                     lm.info.weight_bytes, lm.info.layers)
    return text, step_charts.step_split_figure(p, floor, caption)


def sizes_md(lm, r: Roofline, judged: Noise | None = None, reference=None) -> str:
    """This model and its siblings here (theoretical), with the measured speed when the model is
    the first row's shape and the figure possible (from a busy run, the quiet `reference`)."""
    free = memory_budget_bytes(lm.device, 1.0)
    rows = size_rows(r.bandwidth_gbs, lm.bytes_per_value, free)
    mine = lm.info.parameters == rows[0].shape.parameters and not r.impossible
    speed, source, share = r.measured_tokens_per_s, "", True
    if judged is not None and judged.busy:
        if reference is not None:
            speed, source = reference.value, (f"this machine's quiet reference, measured at "
                                              f"{reference.when()}: this run was busy")
        else:
            source, share = "this run, on a busy machine", False
    return model_sizes_md(rows, r.bandwidth_gbs, lm.info.dtype, free, speed if mine else None,
                          source, share)


def gpu_note_md(lm) -> str:
    """On a CPU what the H200 check measured (labelled); on a GPU, that every figure is its own."""
    if lm.device.type == "cuda":
        return (f"### On a GPU\nThis machine is a GPU ({lm.info.device}): every figure on this "
                "page was measured on it, now.")
    return lesson_text("gpu_h200.md")


def roofline_point(lm, r: Roofline) -> RooflinePoint:
    info = lm.info
    return RooflinePoint(info.dtype, f"{info.name} ({info.dtype})", "PyTorch", r.bytes_per_token,
                         r.measured_tokens_per_s)


class MachineView(NamedTuple):
    """Everything one press of "Measure this machine" shows."""

    roofline: Roofline  # the measured bandwidth, bytes per token and decode speed
    roofline_md: str
    roofline_chart: go.Figure
    compute_md: str  # both roofs
    compute_chart: go.Figure
    step_md: str  # what bounds a decode step
    step_chart: go.Figure
    sizes_md: str  # model sizes on this machine
    figures_md: str  # this machine's figures, to copy
    noise: Noise | None = None  # the reading of the decode steps behind the roofline


def measure_machine_steps(lm, shared=None) -> Iterator[str | MachineView]:
    """The roofline, both roofs and a decode step's split, a progress line before each part."""
    yield "⏳ Part 1 of 3: reading memory bandwidth and timing decode…"
    watched = roofline.watched_roofline(lm, shared=shared)
    r, caption = watched.roofline, info_caption(lm.info)
    yield ("⏳ Part 1 of 3 done: read bandwidth and decode speed measured. Part 2 of 3: the "
           "arithmetic roof…")
    roof = roofline.measure_compute_roof(lm, r, shared,
                                                 batch_points=latest(lm, shared, *BATCH_POINTS))
    roofs_noise = noise.reading()
    if watched.noise.busy:  # the roofs' decode point is the roofline's busy decode speed
        roofs_noise = watched.noise
    yield "⏳ Part 2 of 3 done: both roofs measured. Part 3 of 3: profiling one decode step…"
    # this machine's quiet decode speed: on file, else this run's when it was quiet
    ref = quiet_reference.for_decode(r, lm.info.name, roofline.ROOFLINE_NEW_TOKENS,
                                     watched.noise)
    bound = roofline.measure_step_bound(lm)
    step_md, step_fig = step_bound_outputs(lm, r, bound, caption, noise.reading())
    fig = roofline_figure([roofline_point(lm, r)], r.bandwidth_gbs, ", read bandwidth measured",
                          caption, x_title=BYTES_AXIS)
    yield MachineView(r, roofline_md(r, lm.info.weight_bytes, watched.noise, watched.attempt,
                                     ref), fig,
                      compute_roof_md(roof, lm.info.dtype, roofs_noise),
                      two_roof_figure(roof, caption),
                      step_md, step_fig, sizes_md(lm, r, watched.noise, ref),
                      figures_md(lm, shared, r, busy=not supports_verdict(watched.noise)),
                      watched.noise)
