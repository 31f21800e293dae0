"""Lesson 6 panel: precision modes against float32: roofline, bars, table and texts."""
from __future__ import annotations

from collections.abc import Iterator

import gradio as gr

from inference.experiments.quality import load_perplexity_text, quant_tokens
from inference.experiments.quiet_reference import device_bf16
from inference.quantize import HEAD_TREATMENT, MODES
from visualizations import quant_charts as charts
from visualizations.mechanism import quant_diagram
from visualizations.roofline_charts import WEIGHT_BYTES_AXIS, roofline_figure
from visualizations.style import info_caption

from . import quantization_handlers as handlers
from .common.context import AppContext
from .common.controls import guess_box, prompt_box, slider
from .common.lesson_text import lesson_page
from .common.measurement import Measurement, prompt_tokens, shrunk
from .common.measurement_wiring import run_and_stop, wire_stoppable
from .common.progress import lesson_markdown

BANDWIDTH_NOTE = ", read-only sum, measured"
# px: the roofline no taller than its plot area and captions need, so it shares one 1280×720 or
# 390×844 screen with Compare modes and the cards (test_quant_charts bounds it)
ROOFLINE_HEIGHT = 0


def build(ctx: AppContext) -> None:
    lm, settings, shared = ctx.lm, ctx.settings, ctx.shared
    origin = charts.weights_origin_md(lm.info.source, lm.info.dtype)
    lesson_markdown(lesson_page("lesson6_quantization.md", lm.info,
                                {"weights_origin": origin}))
    bf16 = device_bf16(lm.device)  # checked once: said only where it was checked
    with gr.Row():
        with gr.Column(scale=3):
            prompt = prompt_box(settings, settings.default_prompt, "quant-prompt")
            modes = gr.CheckboxGroup(
                choices=[(m.label, m.key) for m in MODES.values()],
                value=handlers.default_modes(bf16),
                label="Precision modes (float32 always runs: it is the baseline)",
                elem_id="quant-modes")
        with gr.Column(scale=1):
            new_tokens = slider(settings, "quant_new_tokens", "Greedy tokens to compare",
                                elem_id="quant-new-tokens")
            guess = guess_box(settings, handlers.GUESS_KEY, "int8 decode speed, in times float32's",
                              "quant-guess")
    # across the page under the controls: the button, its progress and the roofline share a screen
    run_btn, stop_btn = run_and_stop("Compare modes", "quant-run", "quant-stop")
    progress = gr.Markdown("*Building a mode copies the model and converts it (seconds); it is "
                           "then kept for everyone using this app.*", elem_id="quant-progress")
    cards = gr.Markdown(charts.NO_MODES_CARDS, elem_id="quant-cards")
    roofline = gr.Plot(roofline_figure([], 0.0), label="Bytes per token vs decode speed",
                       elem_id="quant-roofline")
    diagram = gr.HTML(quant_diagram([], lm.info.layers, lm.info.parameters),
                      elem_id="quant-diagram")
    bars = gr.Plot(charts.mode_bars_figure([]), label="Per mode", elem_id="quant-bars")
    table = gr.Markdown(elem_id="quant-table")
    texts = gr.HTML(charts.side_by_side_html([]), elem_id="quant-texts")
    closing = gr.Markdown(charts.closing_note_md(lm.info, [], None, bf16),
                          elem_id="quant-closing")
    gr.Markdown(charts.head_treatment_md(HEAD_TREATMENT))
    caption = info_caption(lm.info, dtype="dtype per mode")

    def run(p: str, m: list[str], n: int, guessed: float | None) -> Iterator[dict]:
        for frame in handlers.compare_frames(lm, settings, shared, p, m, n):
            if frame.reports is None:
                yield {progress: frame.message}
                continue
            r, bw, judged = frame.reports, frame.bandwidth_gbs, frame.noise
            yield {progress: frame.message,
                   cards: charts.mode_cards_html(r, judged, frame.race, frame.reference),
                   roofline: roofline_figure(r, bw, BANDWIDTH_NOTE, caption,
                                             WEIGHT_BYTES_AXIS, ROOFLINE_HEIGHT, judged),
                   diagram: quant_diagram(r, lm.info.layers, lm.info.parameters,
                                          bandwidth_gbs=bw, noise=judged),
                   bars: charts.mode_bars_figure(r, caption),
                   table: charts.results_table_md(r), texts: charts.side_by_side_html(r),
                   closing: charts.closing_note_md(lm.info, r, bw, bf16, judged)
                   + handlers.compared(r, guessed, judged, frame.race, frame.reference)}

    text = len(lm.tokenizer(load_perplexity_text(), add_special_tokens=False)["input_ids"])
    def smaller(p, m, n, g):  # the class-sized comparison, when the measurement line is long
        fewer = shrunk(n, settings.quant_new_tokens.low, settings.class_share)
        return (p, m, fewer, g), f"{fewer} greedy tokens per mode, not {int(n)}"
    wire_stoppable(run_btn, stop_btn, [prompt, modes, new_tokens, guess],
                   [progress, cards, roofline, diagram, bars, table, texts, closing],
                   Measurement("quant_compare", run, work=lambda p, m, n, g: quant_tokens(
                       prompt_tokens(lm, settings, p, handlers.MAX_PROMPT_TOKENS), int(n),
                       len(handlers.chosen_modes(m)), text), limit="long", smaller=smaller,
                       label="quantization comparison"), ctx)
