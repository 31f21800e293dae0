"""Lesson 2 panel: one parallel pass timed, then prefill swept against one token at a time."""
from __future__ import annotations

from collections.abc import Iterator

import gradio as gr

from inference.experiments.prefill_sweep import prefill_sweep_tokens
from visualizations.mechanism import prefill_diagram
from visualizations.style import info_caption
from visualizations.timing_charts import prefill_sweep_figure
from visualizations.timing_text import prefill_report_md

from . import prefill_handlers as handlers
from .common.context import AppContext
from .common.controls import guess_box, prompt_box, slider
from .common.exports import wire_prefill_csv
from .common.measurement import Measurement, shrunk
from .common.measurement_wiring import run_and_stop, wire_measurement, wire_stoppable
from .common.named_outputs import showing


def build(ctx: AppContext) -> None:
    lm, settings, shared = ctx.lm, ctx.settings, ctx.shared
    with gr.Row():
        prompt = prompt_box(settings, handlers.PROMPT, "prefill-prompt", scale=4)
        run = gr.Button("Prefill it", variant="primary", scale=1, elem_id="prefill-run")
    result = gr.Markdown("*Press **Prefill it** to time one parallel pass over your prompt.*",
                         elem_id="prefill-result")
    diagram = gr.HTML(prefill_diagram([], [], lm.info.layers), elem_id="prefill-diagram")

    def on_run(p: str) -> Iterator[tuple[str, str]]:
        m = handlers.measure_text(lm, settings, p)
        yield prefill_report_md(m), prefill_diagram(
            [lm.tokenizer.decode([i]) for i in m.prompt_ids], m.events, lm.info.layers)

    wire_measurement(run, [prompt], [result, diagram], Measurement(
        "prefill_measure", on_run, work=None, limit="step", lane="model"), ctx)
    gr.Markdown("### Sweep: one pass for the whole prompt vs one pass per token")
    with gr.Row():
        lengths = gr.CheckboxGroup(handlers.LENGTH_CHOICES, value=handlers.DEFAULT_LENGTHS,
                                   label="Prompt lengths (tokens)")
        max_seq = slider(settings, "prefill_sweep_tokens",
                         "Measure one-at-a-time up to (tokens); longer is extrapolated",
                         elem_id="prefill-maxseq")
    guess = guess_box(settings, handlers.GUESS_KEY, "one pass against one token at a time, at the "
                      "longest length measured both ways", "prefill-guess")
    sweep_btn, stop_btn = run_and_stop("Run the sweep", "prefill-sweep")
    progress = gr.Markdown(elem_id="prefill-progress")
    chart = gr.Plot(prefill_sweep_figure([], info_caption(lm.info)), label="Prefill sweep",
                    elem_id="prefill-chart")
    on_sweep = showing({"chart": chart, "progress": progress}, lambda chosen, most, guessed:
                       handlers.run_prefill_sweep(lm, settings, shared, chosen, most, guessed))

    def smaller(chosen, most, g):  # the class-sized sweep, when the measurement line is long
        fewer = shrunk(most, settings.prefill_sweep_tokens.low, settings.class_share)
        return (chosen, fewer, g), f"one token at a time up to {fewer} tokens, not {int(most)}"
    sweep = Measurement("prefill_sweep", on_sweep, smaller=smaller, work=lambda c, most, g:
                        prefill_sweep_tokens([int(n) for n in c or []] or [8, 32, 128], int(most)))
    ev = wire_stoppable(sweep_btn, stop_btn, [lengths, max_seq, guess], [chart, progress], sweep,
                        ctx, lock=True)
    wire_prefill_csv(lm, shared, ev, lengths, max_seq)  # the chart's data as CSV, once finished
