"""Lesson 4 panel: one sub-tab per function below (the measurements: `kv_cache_handlers`)."""
from __future__ import annotations

import gradio as gr

from inference.config import Settings
from inference.experiments.kv_race import prefix_reuse_tokens, race_lengths_tokens, race_tokens
from visualizations import kv_charts
from visualizations.kv_text import LAG_NOTE
from visualizations.mechanism import race_diagram

from . import kv_cache_handlers as run
from .common.context import AppContext
from .common.controls import guess_box, prompt_box, slider
from .common.feedback import guarded
from .common.lesson_text import lesson_text
from .common.measurement import Measurement, prompt_tokens, shrunk
from .common.measurement_wiring import run_and_stop, wire_measurement, wire_stoppable
from .common.named_outputs import showing
from .common.prompt_input import prompt_lines

DEFAULT_SYSTEM = lesson_text("kv_prefix_system.txt").strip()  # a museum's visitor assistant
DEFAULT_QUESTIONS = "When does the museum close?\nHow much is a child ticket?\nWhere is the cafe?"


def growth_tab(ctx: AppContext) -> None:
    """1 · Watch it grow: one column per cached token, bytes against the formula."""
    lm, settings = ctx.lm, ctx.settings
    with gr.Row():
        prompt = prompt_box(settings, settings.default_prompt, "kv-growth-prompt", scale=3)
        new_tokens = slider(settings, "growth_new_tokens", "New tokens", scale=1)
    start, stop = run_and_stop("Generate and watch the cache", "kv-growth-btn",
                                "kv-growth-stop")
    # the lag note and the formula under the grid: above it they pushed it off a phone's screen
    text = gr.Markdown(elem_id="kv-growth-text")
    grid = gr.Plot(kv_charts.cache_grid_figure(None, 0), label="Cache tensors",
                   elem_id="kv-growth-grid")
    gr.Markdown(LAG_NOTE, elem_id="kv-growth-lag")
    shown = {"text": text, "formula": gr.Markdown(elem_id="kv-formula"), "grid": grid,
             "size": gr.Plot(kv_charts.cache_bytes_figure([]), label="Cache bytes",
                             elem_id="kv-growth-bytes")}
    wire_stoppable(start, stop, [prompt, new_tokens], list(shown.values()), Measurement(
        "kv_growth", showing(shown, lambda p, n: run.growth_frames(lm, settings, p, n)),
        work=None, lane="model"), ctx)


def race_tab(ctx: AppContext) -> None:
    """2 · Race: the same greedy tokens with the cache and by recomputing, then by length."""
    lm, settings = ctx.lm, ctx.settings
    gr.Markdown("Same prompt, same greedy tokens. With the cache each step feeds **one** token "
                "but still reads every cached key and value, one more each step (lesson 4c "
                "measures it to the window). Without it each step feeds the **whole sequence** "
                "again (O(sequence) tokens), its work growing with the text in every layer.")
    with gr.Row():
        prompt = prompt_box(settings, settings.default_prompt, "kv-race-prompt", scale=3)
        new_tokens = slider(settings, "race_new_tokens", "New tokens", scale=1)
    guess = guess_box(settings, run.GUESS_KEY, "generating with the cache against "
                      "recomputing, how many times faster", "kv-race-guess")
    start, stop = run_and_stop("Race", "kv-race-btn", "kv-race-stop")
    shown = {"progress": gr.Markdown(elem_id="kv-race-progress"),
             "summary": gr.Markdown(elem_id="kv-race-summary"),
             "plot": gr.Plot(kv_charts.race_figure([]), label="Per-step latency",
                             elem_id="kv-race-plot"),
             "diagram": gr.HTML(race_diagram([], [], lm.info.layers),
                                elem_id="kv-race-diagram")}
    def smaller(p, n, g):  # the class-sized race, when the measurement line is long
        fewer = shrunk(n, settings.race_new_tokens.low, settings.class_share)
        return (p, fewer, g), f"{fewer} steps, not {int(n)}"
    wire_stoppable(start, stop, [prompt, new_tokens, guess], list(shown.values()), Measurement(
        "kv_race", showing(shown, lambda p, n, g: run.race_frames(lm, settings, p, n, g)),
        work=lambda p, n, g: race_tokens(prompt_tokens(lm, settings, p), int(n)),
        smaller=smaller, label="KV race"), ctx)

    gr.Markdown("### Race at several lengths\nA short race shows only a few times faster: time "
                "one step both ways at 32, 128 and 512 tokens and see the gap grow.")
    start = gr.Button("Race at several lengths", elem_id="kv-lengths-btn")
    shown = {"progress": gr.Markdown(elem_id="kv-lengths-progress"),
             "plot": gr.Plot(kv_charts.race_lengths_figure([]), elem_id="kv-lengths-plot",
                             label="One step at each length"),
             "text": gr.Markdown(elem_id="kv-lengths-table")}
    wire_measurement(start, None, list(shown.values()), Measurement(
        "kv_race_lengths", showing(shown, lambda: run.race_lengths_frames(lm, ctx.shared)),
        work=race_lengths_tokens), ctx)


def projection_tab(lm, settings: Settings) -> None:
    """3 · Memory projection: the formula for this model and larger published ones."""
    with gr.Row():
        batch = slider(settings, "projection_batch", "Batch size (context chart)")
        context = slider(settings, "projection_context", "Context length (batch chart)")
        bpv = gr.Radio(list(run.BYTES_PER_VALUE), value=2, label="Bytes per value")
    first = run.projection_view(lm, settings, batch.value, context.value, bpv.value)  # cheap
    shown = {"table": gr.Markdown(first.table, elem_id="kv-projection-table"),
             "by_context": gr.Plot(first.by_context, elem_id="kv-projection-context",
                                   label="KV memory vs context length"),
             "by_batch": gr.Plot(first.by_batch, elem_id="kv-projection-batch",
                                 label="KV memory vs batch size"),
             "gqa": gr.Plot(first.gqa, elem_id="kv-projection-gqa",
                            label="Grouped-query vs multi-head attention")}
    project = guarded(showing(shown, lambda b, c, v: run.projection_view(lm, settings, b, c, v)),
                      compute=False)  # arithmetic only
    for control in (batch, context, bpv):
        control.change(project, [batch, context, bpv], list(shown.values()))


def prefix_tab(ctx: AppContext) -> None:
    """4 · Prefix reuse: a shared system prompt prefilled once, answered both ways."""
    lm, settings = ctx.lm, ctx.settings
    system = prompt_box(settings, DEFAULT_SYSTEM, "kv-prefix-system", "Shared system prompt", 5)
    with gr.Row():
        questions = prompt_box(settings, DEFAULT_QUESTIONS, "kv-prefix-questions",
                               f"Questions (one per line, up to {settings.max_lines})", 3, scale=3)
        new_tokens = slider(settings, "prefix_new_tokens", "Answer tokens", scale=1)
    start, stop = run_and_stop("Run both ways", "kv-prefix-btn", "kv-prefix-stop")
    shown = {"text": gr.Markdown(elem_id="kv-prefix-text"),
             "plot": gr.Plot(kv_charts.prefix_figure([]), elem_id="kv-prefix-plot",
                             label="Prefix reuse: time to first token")}
    handler = showing(shown, lambda s, q, n: run.prefix_frames(lm, settings, s, q, n))
    wire_stoppable(start, stop, [system, questions, new_tokens], list(shown.values()),
                   Measurement("kv_prefix", handler, work=lambda s, q, n: prefix_reuse_tokens(
                       lm.tokenizer, s, prompt_lines(settings, q), int(n))), ctx)


def attention_tab(lm, settings: Settings, server=None) -> None:
    """5 · What the cache is read for: the newest token's attention over every position."""
    with gr.Row():
        prompt = prompt_box(settings, settings.default_prompt, "kv-attn-prompt", scale=3)
        new_tokens = slider(settings, "attention_new_tokens", "New tokens first", scale=1)
    start = gr.Button("Show attention of the newest token", variant="primary",
                      elem_id="kv-attn-btn")
    with gr.Row():  # bounded by the model, not by Settings
        layer = gr.Slider(0, lm.info.layers - 1, value=0, step=1, label="Layer",
                          elem_id="kv-attn-layer")
        head = gr.Slider(0, lm.info.heads - 1, value=0, step=1, label="Query head",
                         elem_id="kv-attn-head")
    shown = {"plot": gr.Plot(run.attention_redraw(lm, None, 0, 0), elem_id="kv-attn-plot",
                             label="Attention over the cache"),
             "view": gr.State(None)}
    inputs = {prompt, new_tokens, layer, head}
    handler = showing(shown, lambda data: run.show_attention(
        lm, settings, data[prompt], data[new_tokens], data[layer], data[head],
        server.budget if server is not None else None))
    start.click(guarded(handler, alone=server), inputs, list(shown.values()),
                concurrency_id="model",
                time_limit=settings.measure_time_limit_s, api_name="kv_attention")
    redraw = guarded(lambda view, at_layer, at_head: run.attention_redraw(lm, view, at_layer,
                                                                          at_head))
    for control in (layer, head):
        control.change(redraw, [shown["view"], layer, head], shown["plot"])


def build(ctx: AppContext) -> None:
    lm, settings, server = ctx.lm, ctx.settings, ctx.server
    with gr.Tabs(overflow_behavior="wrap"):  # every sub-tab one tap away on a phone
        with gr.Tab("1 · Watch it grow"):
            growth_tab(ctx)
        with gr.Tab("2 · Race: cache on vs off"):
            race_tab(ctx)
        with gr.Tab("3 · Memory projection"):
            projection_tab(lm, settings)
        with gr.Tab("4 · Prefix reuse"):
            prefix_tab(ctx)
        with gr.Tab("5 · What the cache is read for"):
            attention_tab(lm, settings, server)
