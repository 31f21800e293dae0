"""Lesson 4c panel: a longest length picked once, a sub-tab per measurement, what cuts it."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import gradio as gr

from inference.experiments import context_sweep
from visualizations import kv_charts as context_charts
from visualizations.kv_text import FLASH_ATTENTION
from visualizations.style import info_caption

from . import context_handlers as run
from .common.context import AppContext
from .common.controls import guess_box
from .common.measurement import Measurement
from .common.measurement_wiring import run_and_stop, wire_stoppable
from .common.named_outputs import showing


def _sweep(name: str, label: str, figure, chart_label: str, frames: Callable[..., Iterator],
           work: Callable[..., int], inputs: list, ctx: AppContext, text_value: str = "",
           cuts: gr.Markdown | None = None) -> None:
    """Run, Stop, progress, chart and text wired to `frames`; `cuts` set by frames with one."""
    start, stop = run_and_stop(label, f"ctx-{name}-btn", f"ctx-{name}-stop")
    progress = gr.Markdown(elem_id=f"ctx-{name}-progress")
    shown = {"chart": gr.Plot(figure, label=chart_label, elem_id=f"ctx-{name}-chart"),
             "text": gr.Markdown(text_value, elem_id=f"ctx-{name}-text"), "progress": progress}
    if cuts is not None:
        shown["cuts"] = cuts
    wire_stoppable(start, stop, inputs, list(shown.values()), Measurement(
        f"context_{name}", showing(shown, frames), work, limit="long"), ctx, lock=True)


def build(ctx: AppContext) -> None:
    lm, settings, shared = ctx.lm, ctx.settings, ctx.shared
    caption, window = info_caption(lm.info), lm.info.context_window
    longest = gr.Dropdown(
        [(f"{n:,} tokens" + (" (the whole window)" if n == window else ""), n)
         for n in run.length_choices(lm, settings)],
        value=run.default_length(lm, settings), label="Longest length to measure",
        info="Each doubling of the length at least doubles a prefill's work (attention's part "
             f"quadruples), so the full {window:,} takes several times as long as the preset: "
             "minutes on a small CPU.", elem_id="ctx-longest")
    cuts = gr.Markdown(run.cuts_text(lm, settings), render=False, elem_id="ctx-cuts")
    with gr.Tabs(overflow_behavior="wrap"):
        with gr.Tab("1 · Prefill vs prompt length"):
            _sweep("prefill", context_charts.PREFILL_BUTTON,
                   context_charts.prefill_lengths_figure([], caption=caption),
                   "Prefill per prompt token",
                   lambda n: run.prefill_frames(lm, settings, shared, n),
                   lambda n: context_sweep.prefill_lengths_tokens(
                       run.sweep_prefill_lengths(lm, settings, n),
                       settings.context_prefill_repeats),
                   [longest], ctx)
        with gr.Tab("2 · Decode vs cache length"):
            short, long = settings.context_guess_lengths
            guess = guess_box(settings, run.GUESS_KEY, f"one decode step with {long:,} cached "
                              f"tokens against {short:,}, how many times as long",
                              "ctx-decode-guess")
            _sweep("decode", context_charts.DECODE_BUTTON,
                   context_charts.decode_lengths_figure([], caption=caption),
                   "One decode step per cache length",
                   lambda n, g: run.decode_frames(lm, settings, shared, n, g),
                   lambda n, g: context_sweep.decode_lengths_tokens(
                       run.sweep_decode_lengths(lm, settings, n), settings.context_decode_batches,
                       settings.context_decode_repeats),
                   [longest, guess], ctx, cuts=cuts)
        with gr.Tab("3 · Attention's memory"):
            gr.Markdown(f"The same prefill twice, at the longest length above (at most "
                        f"{settings.context_eager_max_tokens:,} tokens: eager attention's score "
                        "tables grow with L²).")
            _sweep("memory", context_charts.MEMORY_BUTTON,
                   context_charts.attention_memory_figure([], caption),
                   "Peak memory of one prefill",
                   lambda n: run.memory_frames(lm, settings, shared, n),
                   lambda n: context_sweep.attention_memory_tokens(
                       run.sweep_prefill_lengths(lm, settings, n)[-1],
                       settings.context_eager_max_tokens),
                   [longest], ctx, text_value=FLASH_ATTENTION)
        with gr.Tab("4 · What cuts the cost"):
            gr.Markdown("Each row counts the KV cache of one window-long context, in theory; "
                        "after the decode sweep the GQA row uses its cache's real bytes per token.")
            cuts.render()
