"""Lesson 3b panel: the race, the k sweep, the formula, the sampled rule, and batching."""
from __future__ import annotations

import gradio as gr

from inference.config import Settings
from inference.experiments.spec_expectation import spec_batch_tokens
from inference.experiments.speculative_race import spec_race_tokens
from visualizations import speculative_charts as charts
from visualizations.speculative_charts import EMPTY_PASSES, EMPTY_RACE
from visualizations.style import info_caption

from . import speculative_handlers as run
from .common.context import AppContext
from .common.controls import guess_box, prompt_box, slider
from .common.feedback import guarded
from .common.measurement import Measurement, prompt_tokens
from .common.measurement_wiring import run_and_stop, wire_stoppable
from .common.named_outputs import showing


def _race_section(lm, settings: Settings, shared, ctx: AppContext) -> tuple:
    with gr.Row():
        prompt = prompt_box(settings, run.PROMPT, "spec-prompt", lines=4, scale=3)
        with gr.Column(scale=1):
            draft = gr.Radio(run.DRAFTS, value=run.DRAFTS[0][1], label="Draft",
                             elem_id="spec-draft")
            k = slider(settings, "spec_k", "k: guesses per pass", elem_id="spec-k")
            new_tokens = slider(settings, "spec_new_tokens", "New tokens",
                                elem_id="spec-new-tokens")
    guess = guess_box(settings, run.GUESS_KEY, "how many tokens will each pass gain on average",
                      "spec-guess")
    race_btn, stop_btn = run_and_stop("Race", "spec-race", "spec-stop")
    progress = gr.Markdown(elem_id="spec-progress")
    cards = gr.Markdown(EMPTY_RACE, elem_id="spec-cards")
    passes = gr.HTML(EMPTY_PASSES, elem_id="spec-passes-box")
    last = gr.State(None)  # the learner's last race summary (the batch section derives from it)
    shown = {"passes_html": passes, "progress": progress, "cards_md": cards, "summary": last}
    on_race = showing(shown, lambda p, d, kk, n, g: run.run_spec_race(
        lm, settings, shared, p, d, kk, n, g))
    wire_stoppable(race_btn, stop_btn, [prompt, draft, k, new_tokens, guess], list(shown.values()),
                   Measurement("speculative_race", on_race, work=lambda p, d, kk, n, g:
                               spec_race_tokens(prompt_tokens(lm, settings, p), int(n), int(kk),
                                                d != "prompt_lookup")), ctx, lock=True)
    return prompt, draft, k, new_tokens, last


def _sweep_section(lm, settings: Settings, shared, ctx: AppContext, prompt, new_tokens) -> None:
    gr.Markdown(f"### Sweep k from {settings.spec_k.low} to {settings.spec_k.high}, both drafts")
    btn, stop = run_and_stop("Sweep k", "spec-sweep", "spec-sweep-stop")
    progress = gr.Markdown(elem_id="spec-sweep-progress")
    chart = gr.Plot(charts.k_sweep_figure((), info_caption(lm.info)), label="k sweep",
                    elem_id="spec-sweep-chart")
    note = gr.Markdown()
    shown = {"chart": chart, "text": note, "progress": progress}

    def work(p: str, n: float) -> int:  # both drafts at every k
        tokens = prompt_tokens(lm, settings, p)
        return sum(spec_race_tokens(tokens, int(n), k, model) for k in run.k_range(settings)
                   for model in (False, True))
    # Its own budget, 16 races: the edit prompt at 256 new tokens counts 44,788 at most (every
    # guess rejected); 49,152 lets a prompt ~100 tokens longer sweep to 256 too.
    on_sweep = showing(shown, lambda p, n: run.run_k_sweep(lm, settings, shared, p, n))
    wire_stoppable(btn, stop, [prompt, new_tokens], list(shown.values()),
                   Measurement("speculative_sweep", on_sweep, work, budget=49_152), ctx, lock=True)
    return note


def _batch_section(lm, settings: Settings, shared, ctx: AppContext, prompt, k, last) -> None:
    sizes = " and ".join(str(b) for b in settings.spec_batches)
    gr.Markdown(f"### With batching: a verification pass against a plain step at batch {sizes}")
    btn, stop = run_and_stop(f"Measure at batch {sizes}", "spec-batch", "spec-batch-stop")
    progress = gr.Markdown(elem_id="spec-batch-progress")
    chart = gr.Plot(charts.batch_figure((), info_caption(lm.info)), label="Verification cost",
                    elem_id="spec-batch-chart")
    table = gr.Markdown(elem_id="spec-batch-table")
    on_batch = showing({"chart": chart, "text": table, "progress": progress},
                       lambda p, kk, summary: run.run_batch(
                           lm, settings, shared, p, kk,
                           summary.tokens_per_pass if summary is not None else None))
    wire_stoppable(btn, stop, [prompt, k, last], [chart, table, progress], Measurement(
        "speculative_batch", on_batch, work=lambda p, kk, summary: spec_batch_tokens(
            prompt_tokens(lm, settings, p), int(kk), settings.spec_batches)), ctx, lock=True)


def _expectation_section(lm, settings: Settings, shared, ctx: AppContext, prompt, draft, k,
                         new_tokens, last, sweep_note) -> None:
    """The formula beside the last race, then the sampled acceptance rule counted."""
    gr.Markdown("### What to expect: the formula beside your race")
    shown = {"chart": gr.Plot(charts.expectation_figure(None), label="Expected value",
                              elem_id="spec-expect-chart"),
             "text": gr.Markdown(charts.expectation_md(None), elem_id="spec-expect-text")}
    draw = guarded(showing(shown, lambda p, n, s: run.expectation_view(lm, settings, shared, p,
                                                                       n, s)), compute=False)
    for changed in (last, sweep_note):
        changed.change(draw, [prompt, new_tokens, last], list(shown.values()),
                       api_visibility="undocumented")
    gr.Markdown("#### The sampled rule, counted live")
    temperature = slider(settings, "temperature", "Temperature (0: the greedy rule)", value=1.0,
                         elem_id="spec-temperature")
    btn, stop = run_and_stop("Count at this temperature", "spec-sampled", "spec-sampled-stop")
    progress = gr.Markdown(elem_id="spec-sampled-progress")
    text = gr.Markdown(charts.EMPTY_SAMPLED, elem_id="spec-sampled-text")
    passes = gr.HTML(elem_id="spec-sampled-passes")
    on_sampled = showing({"passes_html": passes, "text": text, "progress": progress},
                         lambda p, d, kk, n, t, summary: run.run_sampled(
                             lm, settings, shared, p, d, kk, n, t, summary))
    wire_stoppable(btn, stop, [prompt, draft, k, new_tokens, temperature, last],
                   [passes, text, progress], Measurement(
                       "speculative_sampled", on_sampled,  # at most a race's work: no plain lane
                       work=lambda p, d, kk, n, t, summary: spec_race_tokens(
                           prompt_tokens(lm, settings, p), int(n), int(kk), d != "prompt_lookup")),
                   ctx, lock=True)


def build(ctx: AppContext) -> None:
    lm, settings, shared = ctx.lm, ctx.settings, ctx.shared
    prompt, draft, k, new_tokens, last = _race_section(lm, settings, shared, ctx)
    sweep_note = _sweep_section(lm, settings, shared, ctx, prompt, new_tokens)
    _expectation_section(lm, settings, shared, ctx, prompt, draft, k, new_tokens, last,
                         sweep_note)
    _batch_section(lm, settings, shared, ctx, prompt, k, last)
