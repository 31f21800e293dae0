"""Lesson 2 panel: one parallel pass over the prompt, measured; and a sweep of prefill
against one-token-at-a-time over prompt lengths.

`measure_prompt` returns a `PrefillMeasurement` and `run_sweep` yields `SweepFrame`s: plain
functions tested on the real model. The sentences come from `visualizations.timing_text`."""
from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import gradio as gr
import plotly.graph_objects as go

from inference.config import Settings
from inference.experiments.prefill_sweep import PrefillPoint, prefill_sweep
from inference.generation import stream
from visualizations.mechanism import prefill_diagram
from visualizations.style import info_caption
from visualizations.timing_charts import prefill_sweep_figure
from visualizations.timing_text import (
    prefill_report_md,
    sweep_progress_md,
    sweep_verdict_md,
    verdict_point,
)

from .common.controls import slider
from .common.feedback import guarded
from .common.guess import guess_box, guess_md
from .common.lesson_text import lesson_text
from .common.exports import wire_prefill_csv
from .common.prompt_input import encode_prompt

LENGTH_CHOICES = [1, 8, 32, 128, 512, 1024]
DEFAULT_LENGTHS = [1, 8, 32, 128, 512]
DECODE_STEPS = 4  # decode steps timed after the prefill, for comparison
GUESS_KEY = "prefill_race"  # the presenter screen whose question the sweep answers
SHARED_NOTE = "*Measured earlier on this machine (shared result): the same verdict as its run.*"


@dataclass(frozen=True)
class PrefillMeasurement:
    """One prefill of the learner's prompt and the decode steps after it (seconds, synced)."""

    prompt_tokens: int
    prefill_seconds: float  # the forward pass over the whole prompt
    ttft_seconds: float  # prefill + choosing the first token
    decode_step_seconds: float | None  # median decode step (None: the answer ended at once)
    decode_steps: int
    events: tuple = ()  # the measured StepEvents, the prefill first (for the diagram)
    prompt_ids: tuple[int, ...] = ()


class SweepFrame(NamedTuple):
    """One update of the sweep: the chart so far and a progress line."""

    chart: go.Figure
    progress: str


def measure_prompt(lm, settings: Settings, prompt: str) -> PrefillMeasurement:
    """Prefill the chat-templated prompt, then take a few decode steps to compare with."""
    ids = encode_prompt(lm, settings, prompt)
    first, *rest = stream(lm, ids, max_new_tokens=DECODE_STEPS + 1)
    return PrefillMeasurement(
        prompt_tokens=len(ids), prefill_seconds=first.forward_seconds, ttft_seconds=first.seconds,
        decode_step_seconds=statistics.median(e.seconds for e in rest) if rest else None,
        decode_steps=len(rest), events=(first, *rest), prompt_ids=tuple(ids))


def run_sweep(lm, settings: Settings, shared, lengths: list[int], max_sequential: int,
              guess: float | None = None) -> Iterator[SweepFrame]:
    """Yield a frame as each length is measured; share a finished sweep with every visitor.
    The last frame sets the learner's `guess` (× faster) beside the measured speed-up."""
    settings.prefill_sweep_tokens.check("Measure one-at-a-time up to", max_sequential)
    caption = info_caption(lm.info)
    lengths = sorted({int(n) for n in lengths}) or [8, 32, 128]
    key = ("prefill_sweep", tuple(lengths), int(max_sequential))
    done = shared.get(key) if shared is not None else None
    if done is not None:
        yield SweepFrame(prefill_sweep_figure(done, caption),
                         sweep_verdict_md(done) + _compared(done, guess) + "\n\n" + SHARED_NOTE)
        return
    yield SweepFrame(prefill_sweep_figure([], caption), "Warming up…")
    points: tuple[PrefillPoint, ...] = ()
    for progress in prefill_sweep(lm, lengths, int(max_sequential)):
        points = progress.points
        yield SweepFrame(prefill_sweep_figure(points, caption),
                         sweep_progress_md(progress.done, progress.total, points[-1]))
    if shared is not None:
        shared.put(key, points)
    yield SweepFrame(prefill_sweep_figure(points, caption),
                     sweep_verdict_md(points) + _compared(points, guess))


def _compared(points, guess: float | None) -> str:
    return guess_md(GUESS_KEY, guess, verdict_point(points)[1]) if points else ""


def _measure_section(lm, settings: Settings, server) -> None:
    with gr.Row():
        prompt = gr.Textbox(label="Prompt", lines=2, scale=4, max_length=settings.max_prompt_chars,
                            value="Summarise the plot of Romeo and Juliet in three sentences.",
                            elem_id="prefill-prompt")
        run = gr.Button("Prefill it", variant="primary", scale=1, elem_id="prefill-run")
    result = gr.Markdown("*Press **Prefill it** to time one parallel pass over your prompt.*",
                         elem_id="prefill-result")
    diagram = gr.HTML(prefill_diagram([], [], lm.info.layers), elem_id="prefill-diagram")

    def on_run(p: str) -> tuple[str, str]:
        m = measure_prompt(lm, settings, p)
        return prefill_report_md(m), prefill_diagram(
            [lm.tokenizer.decode([i]) for i in m.prompt_ids], m.events, lm.info.layers)

    run.click(guarded(on_run, alone=server), prompt, [result, diagram], concurrency_id="model",
              time_limit=60,
              api_name="prefill_measure")


def _sweep_section(lm, settings: Settings, shared, server) -> None:
    gr.Markdown("### Sweep: one pass for the whole prompt vs one pass per token")
    with gr.Row():
        lengths = gr.CheckboxGroup(LENGTH_CHOICES, value=DEFAULT_LENGTHS,
                                   label="Prompt lengths (tokens)")
        max_seq = slider(settings, "prefill_sweep_tokens",
                         "Measure one-at-a-time up to (tokens); longer is extrapolated",
                         elem_id="prefill-maxseq")
    with gr.Row():
        sweep_btn = gr.Button("Run the sweep", variant="primary", elem_id="prefill-sweep")
        stop_btn = gr.Button("Stop", variant="stop")
    guess = guess_box(settings, GUESS_KEY, "one pass against one token at a time, at the "
                      "longest length measured both ways", "prefill-guess")
    progress = gr.Markdown(elem_id="prefill-progress")
    chart = gr.Plot(prefill_sweep_figure([], info_caption(lm.info)), label="Prefill sweep",
                    elem_id="prefill-chart")

    def on_sweep(chosen: list[int], most: int, guessed: float | None) -> Iterator[dict]:
        for frame in run_sweep(lm, settings, shared, chosen, most, guessed):
            yield {chart: frame.chart, progress: frame.progress}

    def sweep_button(interactive: bool):
        return guarded(lambda: gr.update(interactive=interactive), compute=False)

    ev = sweep_btn.click(sweep_button(False), None, sweep_btn).then(
        guarded(on_sweep, alone=server), [lengths, max_seq, guess], [chart, progress],
        concurrency_id="heavy", concurrency_limit=1, time_limit=300, api_name="prefill_sweep")
    ev.then(sweep_button(True), None, sweep_btn)
    wire_prefill_csv(lm, shared, ev, lengths, max_seq)  # the chart's data as CSV, once finished
    stop_btn.click(sweep_button(True), None, sweep_btn, cancels=[ev])


def build(lm, settings: Settings, shared=None, server=None) -> None:
    """Lesson 2 in the caller's tab; `server`: measurements pause it and run alone."""
    gr.Markdown(lesson_text("lesson2_prefill.md", lm.info))
    _measure_section(lm, settings, server)
    _sweep_section(lm, settings, shared, server)
