"""Lesson 6 panel: pick precision modes and compare them with float32 on one prompt, with the
bytes-per-token roofline, bars per mode, the table and the generated texts side by side (the
comparison is `quantization_handlers.compare_frames`)."""
from __future__ import annotations

from collections.abc import Iterator

import gradio as gr

from inference.config import Settings
from inference.experiments.cpu_flags import device_bf16
from inference.experiments.quality import load_perplexity_text, quant_tokens
from inference.quant_modes import HEAD_TREATMENT, MODES
from visualizations import quant_charts as charts
from visualizations import quant_text
from visualizations.mechanism_weights import quant_diagram
from visualizations.roofline_charts import WEIGHT_BYTES_AXIS, roofline_figure
from visualizations.style import info_caption

from . import quantization_handlers as handlers
from .common.context import AppContext
from .common.controls import guess_box, prompt_box, slider
from .common.lesson_text import lesson_page
from .common.measurement import Measurement, prompt_tokens, shrunk
from .common.read_more import lesson_markdown
from .common.run_buttons import run_and_stop, wire_stoppable

BANDWIDTH_NOTE = ", read-only sum, measured"
# px: the roofline no taller than its plot area's minimum and its captions need, so Compare
# modes, its progress line, its headline cards and the roofline share one 1280×720 or 390×844
# screen (test_quant_charts bounds that height for any verdict, caption and speed)
ROOFLINE_HEIGHT = 0


def _controls(settings: Settings, ticked: list[str]
              ) -> tuple[gr.Textbox, gr.CheckboxGroup, gr.Slider, gr.Button, gr.Button]:
    with gr.Row():
        with gr.Column(scale=3):
            prompt = prompt_box(settings, settings.default_prompt, "quant-prompt")
            modes = gr.CheckboxGroup(
                choices=[(m.label, m.key) for m in MODES.values()], value=ticked,
                label="Precision modes (float32 always runs: it is the baseline)",
                elem_id="quant-modes")
        with gr.Column(scale=1):
            new_tokens = slider(settings, "quant_new_tokens", "Greedy tokens to compare",
                                elem_id="quant-new-tokens")
            guess = guess_box(settings, handlers.GUESS_KEY, "int8 decode speed, in times float32's",
                              "quant-guess")
    # Under the controls, across the page, one line: the button, its progress line and the
    # roofline then share one screen (under the guess, Stop added a line).
    run_btn, stop_btn = run_and_stop("Compare modes", "quant-run", "quant-stop")
    return prompt, modes, new_tokens, guess, run_btn, stop_btn


def build(ctx: AppContext) -> None:
    lm, settings, shared = ctx.lm, ctx.settings, ctx.shared
    origin = quant_text.weights_origin_md(lm.info.source, lm.info.dtype)
    lesson_markdown(lesson_page("lesson6_quantization.md", lm.info,
                                {"weights_origin": origin}))
    bf16 = device_bf16(lm.device)  # checked once: said only where it was checked
    prompt, modes, new_tokens, guess, run_btn, stop_btn = _controls(
        settings, handlers.default_modes(bf16))
    progress = gr.Markdown("*Building a mode copies the model and converts it (seconds); it is "
                           "then kept for everyone using this app.*", elem_id="quant-progress")
    # the headline, by the button
    cards = gr.Markdown(quant_text.NO_MODES_CARDS, elem_id="quant-cards")
    roofline = gr.Plot(roofline_figure([], 0.0), label="Bytes per token vs decode speed",
                       elem_id="quant-roofline")
    diagram = gr.HTML(quant_diagram([], lm.info.layers, lm.info.parameters),
                      elem_id="quant-diagram")
    bars = gr.Plot(charts.mode_bars_figure([]), label="Per mode", elem_id="quant-bars")
    table = gr.Markdown(elem_id="quant-table")
    texts = gr.HTML(charts.side_by_side_html([]), elem_id="quant-texts")
    closing = gr.Markdown(quant_text.closing_note_md(lm.info, [], None, bf16),
                          elem_id="quant-closing")
    gr.Markdown(quant_text.head_treatment_md(HEAD_TREATMENT))
    caption = info_caption(lm.info, dtype="dtype per mode")

    def shown(frame: handlers.QuantFrame, guessed: float | None) -> dict:
        if frame.reports is None:
            return {progress: frame.message}
        r, bw = frame.reports, frame.bandwidth_gbs
        return {progress: frame.message,
                cards: quant_text.mode_cards_html(r, frame.noise, frame.race, frame.reference),
                roofline: roofline_figure(r, bw, BANDWIDTH_NOTE, caption,
                                          WEIGHT_BYTES_AXIS, ROOFLINE_HEIGHT, frame.noise),
                diagram: frame.diagram,
                bars: charts.mode_bars_figure(r, caption), table: quant_text.results_table_md(r),
                texts: charts.side_by_side_html(r),
                closing: quant_text.closing_note_md(lm.info, r, bw, bf16, frame.noise)
                + handlers.compared(r, guessed, frame.noise, frame.race, frame.reference)}

    def run(p: str, m: list[str], n: int, guessed: float | None) -> Iterator[dict]:
        for frame in handlers.compare_frames(lm, settings, shared, p, m, n):
            yield shown(frame, guessed)

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
